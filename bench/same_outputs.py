#!/usr/bin/python3
"""Are two kestrel builds' outputs the same, bit for bit? (A refactor proves itself here: issue 45 item 5.)

usage: /usr/bin/python3 bench/same_outputs.py BEFORE_KESTREL AFTER_KESTREL WORKDIR [--skip-reproduce] [--compare-only]
       [--except-records] [--except-schema] [--rounding TOL]

Runs the same commands with both executables into WORKDIR/before and WORKDIR/after: every reproduction with --quick
(`reproduce all --quick`), advise's --json and --out on four inputs (isotropic, anisotropic token-like with heavy
tails, kernel entries, and causal grouped-query heads stacked [layers, heads, L, d]), a sweep and a variance study. Compares every HDF5 file object by object (datasets bitwise,
attributes equal; the provenance, which records the command line, revision and time, is left out; so are measured wall
times: the group timing/ and claims on a wall time, as attribute or dataset) and every JSON report (its provenance
left out), and the printed tables. Prints one line per output and exits 1 if any differs.

--except-records also leaves out the records of the options (the attributes options and inputs, a report's options
block, a sweep's resume options): for a change of how options are recorded, which must change nothing else.

--except-schema leaves out what an output says it is (the root attributes schema and schema_version, the same keys of a
JSON report): for the change that added them, which must change nothing else.

--rounding TOL is for a change that regroups floating-point operations (it cannot be bit for bit, and is not called
so): every floating-point number may differ by TOL relative to the largest magnitude of its dataset or JSON list (a
JSON scalar: to itself); everything else (integers, text, the named M, decisions, claims' verdicts, the same infinities
and NaNs) must be identical. Each output says its largest relative difference."""
import json
import os
import subprocess
import sys
from pathlib import Path

import h5py
import numpy as np

# Root attributes that say how and when a run was made, not what it computed.
RUN_ATTRS = {"provenance", "created_utc", "mpi_ranks", "command", "git_revision"}
RECORDS = "--except-records" in sys.argv
ROUNDING = float(sys.argv[sys.argv.index("--rounding") + 1]) if "--rounding" in sys.argv else None
if RECORDS:
    RUN_ATTRS |= {"options", "inputs"}
SCHEMA = {"schema", "schema_version"} if "--except-schema" in sys.argv else set()
RUN_ATTRS |= SCHEMA


def without_records(j):
    """A report or resume record (JSON) without its options block, with --except-records."""
    if RECORDS and isinstance(j, dict):
        j.pop("options", None)
        for v in j.values():
            without_records(v)
    return j


def difference(x, y):
    """0 when x and y are identical; with --rounding, the largest relative difference of their floating-point numbers
    (scaled by the largest magnitude of their array or list); inf when anything else differs."""
    numbers = (int, float)
    if (isinstance(x, list) and isinstance(y, list) and len(x) == len(y) and any(isinstance(v, float) for v in x + y)
            and all(isinstance(v, numbers) and not isinstance(v, bool) for v in x + y)):
        x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)  # a list of reals: scaled as an array
    if isinstance(x, np.ndarray) and isinstance(y, np.ndarray):
        if x.dtype != y.dtype or x.shape != y.shape:
            return np.inf
        if x.dtype.kind != "f":
            return 0.0 if np.array_equal(x, y) else np.inf
        fx, fy = np.isfinite(x), np.isfinite(y)
        if not np.array_equal(fx, fy) or not np.array_equal(x[~fx], y[~fy], equal_nan=True):
            return np.inf
        return float(np.abs(x[fx] - y[fx]).max() / max(np.abs(x[fx]).max(), 1e-300)) if fx.any() else 0.0
    if isinstance(x, float) and isinstance(y, numbers) and not isinstance(y, bool):
        return 0.0 if x == y else abs(x - y) / max(abs(x), abs(y))
    if isinstance(x, dict) and isinstance(y, dict):
        return max((difference(x[k], y[k]) for k in x), default=0.0) if x.keys() == y.keys() else np.inf
    if isinstance(x, (list, tuple)) and isinstance(y, (list, tuple)):
        return max((difference(a, b) for a, b in zip(x, y)), default=0.0) if len(x) == len(y) else np.inf
    return 0.0 if x == y else np.inf


def inputs(work):
    """Seeded inputs of three kinds, as .npy (tokens as rows)."""
    rng = np.random.default_rng(45)
    d = work / "inputs"
    d.mkdir(parents=True, exist_ok=True)
    L, dim = 96, 16
    np.save(d / "iso_q.npy", 0.6 * rng.standard_normal((L, dim)))
    np.save(d / "iso_k.npy", 0.6 * rng.standard_normal((L, dim)))
    np.save(d / "iso_v.npy", rng.standard_normal((L, 8)))
    scale = np.linspace(0.2, 1.2, dim)
    q = rng.standard_t(3, (L, dim)) * scale + 0.3
    k = rng.standard_t(3, (L, dim)) * scale
    k[:3] *= 4  # a few large-norm tokens
    np.save(d / "tok_q.npy", q)
    np.save(d / "tok_k.npy", k)
    np.save(d / "tok_v.npy", 1.0 + rng.standard_normal((L, 8)))
    # One layer of 4 query heads over 2 key/value heads (grouped-query), token-like: [layers, heads, L, d].
    np.save(d / "heads_q.npy", 0.5 * rng.standard_normal((1, 4, 64, 16)))
    np.save(d / "heads_k.npy", 0.5 * rng.standard_normal((1, 2, 64, 16)))
    np.save(d / "heads_v.npy", 1.0 + rng.standard_normal((1, 2, 64, 4)))
    return d


def commands(d, out):
    adv = "advise --quiet --no-timing --budget 512 --rows 32 --seed 0"  # 0: the default before it was one everywhere
    iso = f"--draws 16 --queries {d}/iso_q.npy --keys {d}/iso_k.npy --values {d}/iso_v.npy"
    tok = f"--draws 16 --queries {d}/tok_q.npy --keys {d}/tok_k.npy --values {d}/tok_v.npy"
    ker = f"--queries {d}/iso_q.npy --keys {d}/iso_k.npy --quantity kernel --samplers iid,orthogonal"
    heads = (f"--draws 16 --queries {d}/heads_q.npy --keys {d}/heads_k.npy --values {d}/heads_v.npy --causal "
             "--estimators pos,oprf,sderf")
    return {
        "advise-iso.json": f"{adv} {iso} --json",
        "advise-iso.txt": f"{adv} {iso}",
        "advise-tok.json": f"{adv} {tok} --samplers iid,orthogonal,simplex --validate 8 --json",
        "advise-tok.txt": f"{adv} {tok} --samplers iid,orthogonal,simplex --validate 8",
        "advise-kernel.json": f"{adv} {ker} --json",
        "advise-tok.h5": f"{adv} {tok} --out {out}/advise-tok.h5",
        "advise-heads.json": f"{adv} {heads} --json",
        "advise-heads.txt": f"{adv} {heads}",
        "advise-heads.h5": f"{adv} {heads} --out {out}/advise-heads.h5",
        "sweep.h5": f"sweep --quiet --sigma 0.5,1 --dim 8 --points 64 --pairs 2 --estimators pos,oprf,gerf "
                    f"--out {out}/sweep.h5",
        "variance.json": "variance --quiet --sigma 0.7 --dim 8 --points 64 --pairs 2 --estimators pos,trig,sderf --json",
    }


def run(exe, args, capture):
    r = subprocess.run([exe] + args.split(), capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"{exe} {args}: exit {r.returncode}: {r.stderr.strip()[-400:]}")
    return r.stdout if capture else None


def h5_contents(path, places):
    """Every object: datasets bitwise, attributes; text with the run's own places (output folder, checkout) named
    alike."""
    def plain(v):
        v = v.tolist() if isinstance(v, np.ndarray) else v
        v = v.decode() if isinstance(v, bytes) else v
        if isinstance(v, str):
            for place, name in places:
                v = v.replace(place, name)
        return v

    def attr(k, v):
        v = plain(v)
        if k == "claims":  # a claim on a measured wall time is not the computation's
            v = [c for c in json.loads(v) if "wall time" not in c.get("quantity", "")]
        return v

    objs = {}
    with h5py.File(path, "r") as f:
        def visit(name, obj):
            if name == "timing" or name.startswith("timing/"):  # measured wall times
                return
            data = obj[()] if isinstance(obj, h5py.Dataset) else None
            if name == "claims":  # the claims as a dataset (JSON text): as the attribute
                data = attr("claims", data)
            elif (RECORDS or ROUNDING) and name.rsplit("/", 1)[-1] in ("report.json", "resume"):
                data = without_records(json.loads(plain(data)))
            elif isinstance(data, np.ndarray) and ROUNDING is not None and data.dtype.names is None:
                pass  # compared by difference()
            elif isinstance(data, np.ndarray):
                data = (data.dtype.str, data.shape, data.tobytes())
            else:
                data = plain(data)
            attrs = {k: attr(k, v) for k, v in obj.attrs.items() if k not in RUN_ATTRS}
            objs[name] = (type(obj).__name__, data, attrs)
        objs["/"] = ("Group", None, {k: attr(k, v) for k, v in f.attrs.items() if k not in RUN_ATTRS})
        f.visititems(visit)
    return objs


def rounding(rel):
    """With --rounding: None when bit for bit, else how far within the tolerance."""
    return None if rel == 0 else f"within rounding: largest relative difference {rel:.1e}"


def same(a, b, places):
    """None when the two outputs are the same, else what differs."""
    if a.suffix == ".h5":
        ca, cb = h5_contents(a, places["before"]), h5_contents(b, places["after"])
        if ca.keys() != cb.keys():
            return f"objects differ: {sorted(ca.keys() ^ cb.keys())[:5]}"
        if ROUNDING is not None:
            rel = {k: difference(ca[k], cb[k]) for k in ca}
            bad = [k for k in ca if rel[k] > ROUNDING]
            return f"differ in {bad[:5]}" if bad else rounding(max(rel.values(), default=0.0))
        bad = [k for k in ca if ca[k] != cb[k]]
        return f"differ in {bad[:5]}" if bad else None
    if a.suffix == ".json":
        ja, jb = (json.loads(p.read_text()) for p in (a, b))
        for j in (ja, jb):
            for key in {"provenance"} | SCHEMA:
                j.pop(key, None)
            without_records(j)
        if ROUNDING is not None:
            rel = difference(ja, jb)
            return "JSON differs" if rel > ROUNDING else rounding(rel)
        return None if ja == jb else "JSON differs"
    return None if a.read_bytes() == b.read_bytes() else "text differs"


def main():
    args = [a for i, a in enumerate(sys.argv[1:], 1) if not a.startswith("--") and sys.argv[i - 1] != "--rounding"]
    if len(args) != 3:
        sys.exit(__doc__.strip().splitlines()[2])
    exes = {"before": str(Path(args[0]).resolve()), "after": str(Path(args[1]).resolve())}
    work = Path(args[2]).resolve()
    d = inputs(work)
    for tag, exe in ({} if "--compare-only" in sys.argv else exes).items():  # --compare-only: the outputs are there
        out = work / tag
        out.mkdir(parents=True, exist_ok=True)
        for name, cmd in commands(d, out).items():
            text = run(exe, cmd, capture=not name.endswith(".h5"))
            if text is not None:
                (out / name).write_text(text)
        if "--skip-reproduce" not in sys.argv:
            run(exe, f"reproduce all --quick --quiet --force --out {out}/reproduce", capture=False)
    before = sorted(p.relative_to(work / "before") for p in (work / "before").rglob("*")
                    if p.suffix in (".h5", ".json", ".txt") and "claims" not in p.name)
    places = {tag: [(str(work / tag), "OUT"), (str(Path(exe).parents[2]), "CHECKOUT")] for tag, exe in exes.items()}
    bad = 0
    for rel in before:
        a, b = work / "before" / rel, work / "after" / rel
        why = "missing after" if not b.exists() else same(a, b, places)
        close = why is not None and why.startswith("within rounding")
        print(f"{'same   ' if why is None else 'close  ' if close else 'DIFFERS'} {rel}{'' if why is None else ': ' + why}")
        bad += why is not None and not close
    print(f"{len(before) - bad} of {len(before)} outputs identical" + (f" (within {ROUNDING:g} relative)" if ROUNDING else ""))
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
