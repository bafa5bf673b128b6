"""Runs every command shown in README.md, experiments/README.md and the pages of the documentation site in docs/ (issues #15 item 8, #16
item 5): each fenced sh line and each python block, with small sizes substituted where a paper-sized run would take
minutes, in a fresh working directory; each must exit 0. Lines that cannot run here are listed in
SKIP with the reason. A cpp block preceded by `<!-- file: PATH -->` must be a verbatim excerpt of PATH. A block preceded
by `<!-- run by TEST -->` is run by that test, which has what it needs (a Slurm cluster: tests/slurm/slurm_test.py).
Usage: readme_test.py SOURCE_DIR KESTREL_BINARY PYTHON_MODULE_DIR"""
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

# Lines not run, with why (matched as prefixes of the joined command line).
SKIP = {
    "bash scripts/main.sh": "the main job itself (paper settings, ~20 min); its commands run here at quick sizes",
    "bash scripts/test.sh": "the test suite itself (this test runs inside it)",
    "#": "a comment or a batch-script directive",
    "srun": "needs a Slurm cluster",
    "/usr/bin/python3 -m venv": "run by the test command itself: scripts/test-python-package.sh installs the package "
                                "this way into a fresh venv and runs the Python tests against it",
}
# Option values scaled down (option -> function of the value text).
def capped(v, cap):
    """A list capped at `cap`, without the duplicates capping makes (kestrel refuses repeated values)."""
    return ",".join(dict.fromkeys(str(min(int(x), cap)) for x in v.split(",")))


SMALL = {
    "--points": lambda v: capped(v, 32),
    "--pairs": lambda v: str(min(int(v), 1)),
    "--dim": lambda v: capped(v, 8),
    "--features": lambda v: capped(v, 4),
    "--mc": lambda v: str(min(int(v), 16)),
    "--mc-points": lambda v: str(min(int(v), 8)),
}


def blocks(path):
    """Fenced code blocks of a Markdown file as (runner, language, text): runner is the TEST of a `<!-- run by TEST -->`
    line just above the block, else ""."""
    text = open(path).read()
    # The language is any info string, so a MyST directive (```{toctree}) is a block of its own and never run.
    return re.findall(r"^(?:<!-- run by (\S+) -->\n)?```([^`\n]*)\n(.*?)^```", text, flags=re.S | re.M)


def excerpts(path):
    """(file, code) of every cpp block marked <!-- file: PATH --> in a Markdown file."""
    text = open(path).read()
    return re.findall(r"^<!-- file: (\S+) -->\n```cpp\n(.*?)^```", text, flags=re.S | re.M)


def sh_commands(text):
    joined = re.sub(r"\\\n\s*", " ", text)
    for line in joined.splitlines():
        line = re.sub(r"\s{2,}#.*$", "", line).strip()  # trailing comment
        if line:
            yield line


def shrink(cmd, kestrel):
    cmd = re.sub(r"\[([^\]]*)\]", r"\1", cmd)  # optional parts are run too
    cmd = cmd.replace("build/bin/kestrel", kestrel)
    for opt, f in SMALL.items():
        cmd = re.sub(rf"(?<=\s){re.escape(opt)} (\S+)", lambda m: f"{opt} {f(m.group(1))}", cmd)
    if " reproduce " in cmd and "--quick" not in cmd:
        cmd += " --quick"
    if cmd.startswith("mpirun"):  # as README says for a container: root, more ranks than cores
        cmd = cmd.replace("mpirun", "mpirun --oversubscribe --mca btl self,vader "
                          "--mca btl_vader_single_copy_mechanism none", 1)
    return cmd


def main(source, kestrel, pydir):
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               PYTHONPATH=pydir)
    ran, skipped, failed = 0, [], []
    docs = ["README.md", "experiments/README.md"] + sorted(
        os.path.join("docs", f) for f in os.listdir(os.path.join(source, "docs")) if f.endswith(".md"))
    # The compiled module, not the package folder: every build copies python/kestrel/ (the command line runs its
    # advice.py), but the sanitize preset builds no kestrel._kestrel for python3 to import.
    module = glob.glob(os.path.join(pydir, "kestrel", "_kestrel*.so"))
    for doc in docs:
        for path, code in excerpts(os.path.join(source, doc)):
            if code not in open(os.path.join(source, path)).read():
                failed.append(f"{doc}: the cpp block marked {path} is not an excerpt of that file (update the guide)")
            ran += 1
        for runner, lang, text in blocks(os.path.join(source, doc)):
            runs = []
            if runner:
                if not os.path.isfile(os.path.join(source, runner)):
                    failed.append(f"{doc}: a block is to be run by {runner}, which does not exist")
                skipped.append(f"{doc}: block {text.splitlines()[0][:50]} (run by {runner})")
            elif lang in ("sh", "bash", ""):
                for line in sh_commands(text):
                    why = next((r for p, r in SKIP.items() if line.startswith(p)), None)
                    if why:
                        skipped.append(f"{doc}: {line[:60]} ({why})")
                    elif "PYTHONPATH=build/python" in line and not module:
                        skipped.append(f"{doc}: {line[:60]} (no Python module in {pydir}: the sanitize preset does not "
                                       "build it)")
                    elif line.startswith("mpirun") and not shutil.which("mpirun"):
                        skipped.append(f"{doc}: {line[:60]} (no mpirun)")
                    else:
                        line = line.replace("PYTHONPATH=build/python", f"PYTHONPATH={pydir}")
                        runs.append(["bash", "-c", shrink(line, kestrel)])
            elif lang == "python" and not module:
                skipped.append(f"{doc}: python block {text.splitlines()[0][:40]} (no Python module in {pydir}: "
                               "the sanitize preset does not build it)")
            elif lang == "python":
                runs.append(["/usr/bin/python3", "-c", text])
            for argv in runs:
                t0 = time.monotonic()
                with tempfile.TemporaryDirectory() as cwd:
                    p = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=900)
                seconds = time.monotonic() - t0
                ran += 1
                shown = argv[-1] if argv[0] == "bash" else "python block: " + text.splitlines()[0]
                if p.returncode != 0:
                    failed.append(f"{doc}: {shown}\n  exit {p.returncode}: {p.stderr.strip()[-600:]}")
                print(f"[{'ok' if p.returncode == 0 else 'FAILED'} {seconds:.1f} s] {shown[:140]}")
    for s in skipped:
        print(f"[skipped] {s}")
    if failed:
        sys.exit(f"{len(failed)} of {ran} README commands failed:\n" + "\n".join(failed))
    print(f"{ran} README commands ran, {len(skipped)} skipped")


if __name__ == "__main__":
    main(*sys.argv[1:4])
