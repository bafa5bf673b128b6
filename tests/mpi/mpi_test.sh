#!/usr/bin/env bash
# MPI sweeps (issue #10): `mpirun -np 1/2/3 kestrel sweep` write the same HDF5 file as one process
# without mpirun; a failed rank makes the run exit non-zero naming the lost grid points, keeps the
# finished parts intact, and a rerun (with another number of ranks) resumes to the same file.
# Usage: mpi_test.sh KESTREL [MPIEXEC]
set -euo pipefail
KESTREL=$(realpath "$1")
MPIEXEC=${2:-mpirun}
PY=/usr/bin/python3
HERE=$(cd "$(dirname "$0")" && pwd)
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT

# Open MPI in a container sandbox: allowed as root (CI), more ranks than cores, shared memory without
# cross-memory attach, local launch only, no binding (each rank's TBB may use every core).
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1 OMPI_MCA_hwloc_base_binding_policy=none
export OMPI_MCA_btl=self,vader OMPI_MCA_btl_vader_single_copy_mechanism=none OMPI_MCA_plm=isolated
mpi() { local np=$1; shift; timeout 300 "$MPIEXEC" --oversubscribe -np "$np" "$KESTREL" "$@"; }
fail() { echo "FAIL: $*" >&2; exit 1; }
ranks_attr() { "$PY" -c 'import h5py,sys; print(int(h5py.File(sys.argv[1])["/"].attrs["mpi_ranks"]))' "$1"; }

# 8 grid points (d, L, M, sigma) x 2 estimators; a few seconds per run.
GRID=(sweep --regime normal --sigma 0.5,1 --dim 4,8 --points 32 --features 1,4 --pairs 2
      --estimators oprf,trig)
# Every seed-7 run that writes a file has the same arguments, so the recorded command is the same too:
# each runs in its own directory $W/<case>/ and writes sweep.h5 there.
GRID7=("${GRID[@]}" --seed 7 --json --out sweep.h5)

mkdir "$W/single" "$W/np1" "$W/np2" "$W/np3" "$W/seed8" "$W/f" "$W/k"
(cd "$W/single" && "$KESTREL" "${GRID7[@]}" >/dev/null 2>&1)
[ "$(ranks_attr "$W/single/sweep.h5")" = 1 ] || fail "one process without mpirun should record mpi_ranks 1"
for np in 1 2 3; do
  start=$(date +%s%N)
  (cd "$W/np$np" && mpi "$np" "${GRID7[@]}" >out.json 2>err.txt)
  echo "mpirun -np $np: $((($(date +%s%N) - start) / 1000000)) ms"
  [ "$(ranks_attr "$W/np$np/sweep.h5")" = "$np" ] || fail "-np $np: mpi_ranks attribute is not $np"
  "$PY" "$HERE/h5_same.py" "$W/single/sweep.h5" "$W/np$np/sweep.h5"
  # Rank 0 alone prints the summary: one JSON document with every grid point.
  "$PY" -c 'import json,sys; r=json.load(open(sys.argv[1]))["results"]; assert len(r)==16, len(r)' "$W/np$np/out.json" \
    || fail "-np $np: stdout is not one JSON summary of 16 results"
  [ ! -e "$W/np$np/sweep.h5.parts" ] || fail "-np $np: parts directory left behind"
done

# The comparison can fail: another seed gives another file.
mpi 2 "${GRID[@]}" --seed 8 --quiet --out "$W/seed8/sweep.h5" >/dev/null
if "$PY" "$HERE/h5_same.py" "$W/single/sweep.h5" "$W/seed8/sweep.h5" 2>/dev/null; then fail "seeds 7 and 8 compare the same"; fi

# Rank 1 of 3 fails after its first grid point (its share is points 1, 4, 7 in row order): the run
# exits non-zero, names the two points lost, writes no file and keeps the six finished parts.
if (cd "$W/f" && KESTREL_TEST_SWEEP_STOP=after=1,rank=1 mpi 3 "${GRID7[@]}" >/dev/null 2>"$W/f.err"); then
  fail "a failed rank gave exit 0"
fi
cat "$W/f.err"
grep -q "2 of 8 grid points lost: d=8 L=32 M=1 sigma=0.5; d=8 L=32 M=4 sigma=1\." "$W/f.err" \
  || fail "the error does not name the lost grid points"
grep -q "rank 1: sweep stopped after 1 points" "$W/f.err" || fail "the error does not name the failed rank"
[ ! -e "$W/f/sweep.h5" ] || fail "a failed sweep left an output file"
[ "$(ls "$W/f/sweep.h5.parts" | grep -c '^d.*\.json$')" = 6 ] || fail "expected 6 finished parts"
"$PY" -c 'import json,sys; [json.load(open(p)) for p in sys.argv[1:]]' "$W"/f/sweep.h5.parts/*.json \
  || fail "a finished part is corrupt"

# Parts of another sweep are refused on every rank, without a hang.
if mpi 2 "${GRID[@]}" --seed 9 --quiet --out "$W/f/sweep.h5" 2>"$W/mixed.err"; then fail "mixed parts accepted"; fi
grep -q "other options" "$W/mixed.err" || fail "no 'other options' error: $(cat "$W/mixed.err")"

# The rerun on 2 ranks computes only the 2 lost points and gives the same file as one process.
(cd "$W/f" && mpi 2 "${GRID7[@]}" >/dev/null 2>"$W/resume.err")
grep -q "2 grid points computed, 6 resumed, 2 MPI ranks" "$W/resume.err" || fail "resume: $(cat "$W/resume.err")"
"$PY" "$HERE/h5_same.py" "$W/single/sweep.h5" "$W/f/sweep.h5"
[ ! -e "$W/f/sweep.h5.parts" ] || fail "parts directory left behind after the resume"

# A rank killed by a signal (SIGKILL, as from the OOM killer) makes mpirun stop the whole job with a
# non-zero exit; every part already written is whole (rank 1 wrote one before dying), and the rerun
# resumes to the same file.
if (cd "$W/k" && KESTREL_TEST_SWEEP_STOP=after=1,rank=1,killed mpi 3 "${GRID7[@]}" >/dev/null 2>"$W/k.err"); then
  fail "a killed rank gave exit 0"
fi
[ ! -e "$W/k/sweep.h5" ] || fail "a killed sweep left an output file"
"$PY" -c 'import glob,json,sys; p=glob.glob(sys.argv[1]+"/d*.json"); assert p; [json.load(open(f)) for f in p]' \
  "$W/k/sweep.h5.parts" || fail "no finished part, or a corrupt one, after the kill"
(cd "$W/k" && mpi 3 "${GRID7[@]}" >/dev/null 2>"$W/k2.err") || fail "resume after the kill: $(cat "$W/k2.err")"
"$PY" "$HERE/h5_same.py" "$W/single/sweep.h5" "$W/k/sweep.h5"

# srun -n 2 without an MPI plugin: the copy sees no MPI launcher and refuses rather than run twice.
if (cd "$W/k" && SLURM_STEP_NUM_TASKS=2 "$KESTREL" "${GRID[@]}" --seed 7 --quiet --out s.h5 2>"$W/srun.err"); then
  fail "srun without MPI accepted"
fi
grep -q "srun started 2 tasks" "$W/srun.err" || fail "srun without MPI: $(cat "$W/srun.err")"
echo "mpi_test: all checks passed"
