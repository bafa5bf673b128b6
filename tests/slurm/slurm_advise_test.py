"""A model's heads as a Slurm job array (issue 66 item 4) on a real Slurm: starts a one-node cluster (cluster.sh),
submits the batch script of docs/slurm.md's advise section on a small stack of 6 layers (with --no-timing: measured
seconds differ between runs), merges, and compares the file with a one-process run of the script's command
(h5_same.py: every dataset bit for bit), which must differ for another seed. Before the last part is there the merge
exits 3 naming the missing layers and writes nothing; the resubmitted array finds the other parts finished. Every line
of the doc's blocks marked `<!-- run by tests/slurm/slurm_advise_test.py -->` runs here.
Usage: slurm_advise_test.py SOURCE_DIR KESTREL_BINARY (as root; exit 77, skipped, otherwise)"""
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np

source, kestrel = sys.argv[1], os.path.realpath(sys.argv[2])
sys.path.insert(0, os.path.join(source, "tests"))
sys.path.insert(0, os.path.join(source, "tests", "slurm"))
from readme_test import sh_commands  # noqa: E402
from slurm_doc import doc_blocks, fail, preflight  # noqa: E402

HERE = os.path.join(source, "tests", "slurm")
ME = "tests/slurm/slurm_advise_test.py"
SMALL = " --no-timing --rows 12 --draws 8 --estimators pos,sderf --samplers iid"

preflight()

script, lines = doc_blocks(source, kestrel, ME)
shapes = [r"sbatch --wait advise\.sbatch$", rf"{re.escape(kestrel)} advise merge advise\.h5$"]
if len(lines) != len(shapes) or not all(re.match(s, c) for s, c in zip(shapes, lines)):
    fail(f"the commands of docs/slurm.md's advise section changed; update this test: {lines}")
command = [c for c in sh_commands(script) if c.startswith(kestrel)]
if len(command) != 1 or not command[0].endswith("--out advise.h5") or "--array=0-3" not in script:
    fail("the batch script should be an array of 4 tasks running one kestrel advise ending in --out advise.h5")
script = script.replace("--out advise.h5", SMALL + " --out advise.h5")

env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}  # not a task of an outer Slurm job
env["PATH"] = env.get("PATH", "") + ":/usr/sbin"
cluster = tempfile.mkdtemp(prefix="kestrel-slurm-")
work = tempfile.mkdtemp(prefix="kestrel-slurm-work-")


def run(cmd, cwd=work):
    t0 = time.time()
    p = subprocess.run(["bash", "-c", cmd], cwd=cwd, env=env, capture_output=True, text=True, timeout=300)
    print(f"[exit {p.returncode}, {time.time() - t0:.1f} s] {cmd[:120]}")
    return p


try:
    r = np.random.default_rng(4)  # 6 layers x 2 heads, L = 48, d = 8: task K has layers K and K + 4 (K < 2)
    inputs = {"Q": 0.5 * r.normal(size=(6, 2, 48, 8)), "K": 0.5 * r.normal(size=(6, 2, 48, 8)),
              "V": r.normal(size=(6, 2, 48, 4))}
    for d in (work, os.path.join(work, "one"), os.path.join(work, "seed8")):
        os.makedirs(d, exist_ok=True)
        for name, a in inputs.items():
            np.save(os.path.join(d, f"{name}.npy"), a)
    p = subprocess.run(["bash", os.path.join(HERE, "cluster.sh"), "start", cluster], env=env, capture_output=True,
                       text=True, timeout=120)
    if p.returncode:
        fail(f"the Slurm cluster did not start: {p.stderr}")
    env["SLURM_CONF"] = p.stdout.strip()
    open(os.path.join(work, "advise.sbatch"), "w").write(script)

    # 1. The array, then the merge; before that, with part 3 removed, the merge names layer 3 and writes nothing.
    p = run(lines[0])
    parts = sorted(os.listdir(os.path.join(work, "advise.h5.parts")))
    if p.returncode or parts != [f"layers-{k}-of-4.h5" for k in range(4)]:
        logs = " ".join(open(f).read() for f in glob.glob(os.path.join(work, "advise-*.log")))
        fail(f"the array: exit {p.returncode}: {p.stderr} parts {parts} {logs}")
    shutil.move(os.path.join(work, "advise.h5.parts", "layers-3-of-4.h5"), os.path.join(work, "part3.h5"))
    p = run(lines[1])
    if p.returncode != 3 or "layers 3 of the 6 are in no part" not in p.stderr or os.path.exists(
            os.path.join(work, "advise.h5")):
        fail(f"merge with layer 3 missing: exit {p.returncode}: {p.stderr}")
    # 2. The array resubmitted: task 3 computes its part again, the others find theirs finished.
    p = run(lines[0])
    logs = " ".join(open(f).read() for f in glob.glob(os.path.join(work, "advise-*.log")))
    if p.returncode or logs.count("is finished (the same options and inputs)") != 3:
        fail(f"resubmission: exit {p.returncode}: {p.stderr} {logs}")
    p = run(lines[1])
    if p.returncode or not os.path.exists(os.path.join(work, "advise.png")):
        fail(f"merge: exit {p.returncode}: {p.stderr}")
    print(p.stderr.strip())

    # The one-process run of the script's command gives the same file; another seed does not.
    for name, extra in (("one", ""), ("seed8", " --seed 8")):
        p = run(command[0].replace("--out advise.h5", SMALL + extra + " --out advise.h5"),
                cwd=os.path.join(work, name))
        if p.returncode:
            fail(f"one process: {p.stderr}")
    same = [sys.executable, os.path.join(source, "tests", "mpi", "h5_same.py"), os.path.join(work, "one", "advise.h5")]
    p = subprocess.run(same + [os.path.join(work, "advise.h5")], capture_output=True, text=True)
    if p.returncode:
        fail(f"the merged file differs from the one-process file: {p.stdout} {p.stderr}")
    print(p.stdout.strip())
    if subprocess.run(same + [os.path.join(work, "seed8", "advise.h5")], capture_output=True).returncode == 0:
        fail("h5_same.py finds the default seed and seed 8 the same: the comparison cannot fail")
    if subprocess.run(["squeue", "-h"], env=env, capture_output=True, text=True).stdout.strip():
        fail("jobs left in the queue")
finally:
    subprocess.run(["bash", os.path.join(HERE, "cluster.sh"), "stop", cluster], env=env, timeout=120)
    shutil.rmtree(work, ignore_errors=True)
print("slurm_advise_test: all checks passed")
