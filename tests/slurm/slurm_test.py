"""Sweeps as Slurm job arrays on a real Slurm (issue 51): starts a one-node cluster (cluster.sh), submits the batch
script of docs/slurm.md (small sizes, as readme_test.py shrinks them) with task 2 cancelled by scancel after its first
grid point, merges (exit 3 naming the missing point), resubmits with another number of tasks as the doc says, merges,
and compares the file with a one-process run of the script's command (h5_same.py), which must differ for another
seed. Every line of the doc's blocks marked `<!-- run by tests/slurm/slurm_test.py -->` runs here.
Usage: slurm_test.py SOURCE_DIR KESTREL_BINARY (as root: slurmd runs jobs as their user; exit 77, skipped, otherwise)"""
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

source, kestrel = sys.argv[1], os.path.realpath(sys.argv[2])
sys.path.insert(0, os.path.join(source, "tests"))
sys.path.insert(0, os.path.join(source, "tests", "slurm"))
from readme_test import sh_commands  # noqa: E402
from slurm_doc import doc_blocks, fail, preflight  # noqa: E402

HERE = os.path.join(source, "tests", "slurm")
ME = "tests/slurm/slurm_test.py"

preflight()

script, lines = doc_blocks(source, kestrel, ME)
shapes = [r"sbatch --wait sweep\.sbatch$", r"\S+ sweep merge sweep\.h5$", r"sbatch --wait --array=0-1 sweep\.sbatch$",
          r"\S+ sweep merge sweep\.h5$"]
if len(lines) != len(shapes) or not all(re.match(s, c) for s, c in zip(shapes, lines)):
    fail(f"the commands of docs/slurm.md changed; update this test: {lines}")
command = [c for c in sh_commands(script) if c.startswith(kestrel)]
if len(command) != 1 or script.count("--out sweep.h5") != 1:
    fail("the batch script should run one kestrel sweep with --out sweep.h5")
# Task 2 (shard 2/4: grid points 2 and 6) computes one point and waits for a signal: scancel then preempts it.
# (The sweep's testing hook is an environment switch, KESTREL_TEST_SWEEP_STOP, empty in the other tasks.)
if script.count(f"\n{kestrel} sweep ") != 1:
    fail("the batch script's kestrel sweep line should start with the command line's path")
victim = script.replace(f"\n{kestrel} sweep ", '\nKESTREL_TEST_SWEEP_STOP=$([ "$SLURM_ARRAY_TASK_ID" = 2 ] && echo '
                        f"after=1,paused) {kestrel} sweep ")

env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}  # not a task of an outer Slurm job
env["PATH"] = env.get("PATH", "") + ":/usr/sbin"
cluster = tempfile.mkdtemp(prefix="kestrel-slurm-")
work = tempfile.mkdtemp(prefix="kestrel-slurm-work-")


def run(cmd, cwd=work, **kw):
    t0 = time.time()
    p = subprocess.run(["bash", "-c", cmd], cwd=cwd, env=env, capture_output=True, text=True, timeout=300, **kw)
    print(f"[exit {p.returncode}, {time.time() - t0:.1f} s] {cmd[:120]}")
    return p


def parts():
    return sorted(os.listdir(os.path.join(work, "sweep.h5.parts")))


try:
    p = subprocess.run(["bash", os.path.join(HERE, "cluster.sh"), "start", cluster], env=env, capture_output=True,
                       text=True, timeout=120)
    if p.returncode:
        fail(f"the Slurm cluster did not start: {p.stderr}")
    env["SLURM_CONF"] = p.stdout.strip()
    open(os.path.join(work, "sweep.sbatch"), "w").write(victim)

    # 1. The array; task 2 is cancelled once it has finished one grid point.
    t0 = time.time()
    first = subprocess.Popen(["bash", "-c", lines[0]], cwd=work, env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    log2 = None
    while time.time() - t0 < 240 and not log2:
        time.sleep(0.2)
        for f in glob.glob(os.path.join(work, "sweep-*_2.log")):
            if "paused (testing hook)" in open(f).read():
                log2 = f
    if not log2:
        first.kill()
        fail("task 2 never reached its pause: " + " ".join(open(f).read() for f in glob.glob(work + "/sweep-*.log")))
    job = re.search(r"sweep-(\d+)_2\.log$", log2).group(1)
    run(f"scancel {job}_2")
    out, err = first.communicate(timeout=300)
    print(f"[exit {first.returncode}, {time.time() - t0:.1f} s] {lines[0]} (task 2 cancelled)")
    if first.returncode == 0:
        fail("sbatch --wait exited 0 although task 2 was cancelled")
    note = open(log2).read()
    if "sweep shard 2/4 interrupted: its finished grid points are kept" not in note:
        fail(f"the cancelled task did not say where its finished points are: {note}")
    have = parts()
    points = [f for f in have if f.startswith("d")]
    if len(points) != 7 or any(".tmp" in f or f.endswith(".lock") for f in have):
        fail(f"after the cancel: expected 7 finished grid points, no temporary files and no locks, got {have}")

    # 2. The merge names the missing grid point with its shard and writes nothing.
    p = run(lines[1])
    if p.returncode != 3 or "1 of 8 grid points are missing: #6 d=8 L=32 M=4 sigma=1.5 (shard 2/4)" not in p.stderr:
        fail(f"merge with a point missing: exit {p.returncode}: {p.stderr}")
    if os.path.exists(os.path.join(work, "sweep.h5")):
        fail("an incomplete merge wrote sweep.h5")

    # 3. The resubmission as 2 tasks computes the missing point only (shard 0/2 owns point 6), 4. the merge.
    p = run(lines[2])
    logs = " ".join(open(f).read() for f in glob.glob(os.path.join(work, "sweep-*.log")))
    if p.returncode or "shard 0/2: 1 grid points computed, 3 resumed" not in logs:
        fail(f"resubmission: exit {p.returncode}: {p.stderr} {logs}")
    p = run(lines[3])
    if p.returncode or not os.path.exists(os.path.join(work, "sweep.h5")):
        fail(f"merge: exit {p.returncode}: {p.stderr}")
    if os.path.exists(os.path.join(work, "sweep.h5.parts")):
        fail("the merge left the parts behind")
    print(p.stderr.strip())

    # The one-process run of the script's command gives the same file; another seed does not.
    for name, extra in (("one", ""), ("seed8", " --seed 8")):
        os.mkdir(os.path.join(work, name))
        p = run(command[0].replace('"$SLURM_CPUS_PER_TASK"', "2") + extra, cwd=os.path.join(work, name))
        if p.returncode:
            fail(f"one process: {p.stderr}")
    same = [sys.executable, os.path.join(source, "tests", "mpi", "h5_same.py"), os.path.join(work, "one", "sweep.h5")]
    p = subprocess.run(same + [os.path.join(work, "sweep.h5")], capture_output=True, text=True)
    if p.returncode:
        fail(f"the merged file differs from the one-process file: {p.stdout} {p.stderr}")
    print(p.stdout.strip())
    if subprocess.run(same + [os.path.join(work, "seed8", "sweep.h5")], capture_output=True).returncode == 0:
        fail("h5_same.py finds seeds 7 and 8 the same: the comparison cannot fail")
    if subprocess.run(["squeue", "-h"], env=env, capture_output=True, text=True).stdout.strip():
        fail("jobs left in the queue")
finally:
    subprocess.run(["bash", os.path.join(HERE, "cluster.sh"), "stop", cluster], env=env, timeout=120)
    shutil.rmtree(work, ignore_errors=True)
print("slurm_test: all checks passed")
