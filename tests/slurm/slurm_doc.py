"""What the Slurm tests share: the preflight (root, Debian's slurm-wlm and munge; exit 77, skipped, when not root)
and docs/slurm.md's two blocks marked as run by a test (its batch script and its commands, shrunk as readme_test.py
shrinks them)."""
import os
import shutil
import sys

from readme_test import blocks, sh_commands, shrink


def fail(msg):
    sys.exit(f"FAIL: {msg}")


def preflight():
    if os.geteuid() != 0:
        print("skipped: the test cluster runs its daemons and jobs as root")
        sys.exit(77)
    for tool in ("slurmctld", "slurmd", "munged", "sbatch"):
        if not shutil.which(tool, path=os.environ.get("PATH", "") + ":/usr/sbin"):
            fail(f"{tool} not found: install Debian's slurm-wlm and munge (scripts/setup.sh does)")


def doc_blocks(source, kestrel, runner):
    """The batch script and the command lines of docs/slurm.md's blocks run by `runner`."""
    doc = [(lang, text) for who, lang, text in blocks(os.path.join(source, "docs", "slurm.md")) if who == runner]
    if len(doc) != 2 or not doc[0][1].startswith("#!/bin/bash"):
        fail(f"docs/slurm.md should have two blocks run by {runner}: the batch script, then the commands")
    return shrink(doc[0][1], kestrel), [shrink(c, kestrel) for c in sh_commands(doc[1][1])]
