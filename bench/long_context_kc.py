#!/usr/bin/python3
"""Long-context benchmark of the exact Var(K-hat C) on sampled query rows (issue 35, item 2): the time and peak RSS of
`Estimator.kc_variance(X, Y, C, rows=512)` for OPRF, beside the obvious NumPy computation of the same rows written
from the definition, at L = 4096 ... 131072; and of `Estimator.predict_attention(X, Y, V, rows=512)` (side
"attention": its work per row is O(L^2) whatever dv is, against O(L^2 n) for kc_variance's n columns). Writes
bench/results/long_context_kc.json; no plot.

Inputs per L: Q, K (L x d) with iid N(0, 0.25) entries, d = 128, scaled as attention logits are (x = q / d^(1/4), so
x.y = q.k / sqrt(d)); V (L x dv) iid N(0, 1), dv = 128; C = [V, 1] (n = 129 columns); 512 rows sampled with seed 1;
M = 1. Every (L, side) runs in a fresh subprocess (peak RSS = that process's ru_maxrss), timed 3 times (median); an L
whose predicted time (from the previous L, times 4: the work is O(rows L^2 n)) exceeds --budget seconds per run is
skipped and listed as such. The NumPy peer (OPRF, CRT 3.3): f(w, x) = D exp(A|w|^2 + B w.x - |x|^2/2), B^2 = 1-4A,
D = (1-4A)^(d/4), w ~ N(0, I); E[f(x)^2 f(y_j) f(y_k)] = D^4 (1-8A)^(-d/2) exp(-|x|^2 - (|y_j|^2 + |y_k|^2)/2
+ g |2x + y_j + y_k|^2), g = (1-4A) / (2(1-8A)); Var (K-hat C)_ia = sum_jk C_ja C_ka E[...] - (KC)_ia^2. Per row it
forms the L x L matrix of exponents from the shared Gram matrix Y^T Y (2 L^2 doubles in all), exponentiates it
shifted by its max, and takes the quadratic forms with one L x L x n product; it runs only where 2 L^2 doubles fit in
--peer-memory GB. Its values are compared with kestrel's (max relative difference of the variances).

usage: flock /tmp/kestrel-build.lock nice /usr/bin/python3 bench/long_context_kc.py [--budget 240] [--lengths ...]
       (PYTHONPATH=build/python; run it on a quiet machine: take the build lock while timing)
"""
import argparse
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
D, DV, ROWS, SEED = 128, 128, 512, 1
LENGTHS = (4096, 8192, 16384, 32768, 65536, 131072)


def inputs(L):
    rng = np.random.default_rng(L)
    Q, K = rng.normal(0, 0.5, size=(L, D)), rng.normal(0, 0.5, size=(L, D))
    V = rng.normal(size=(L, DV))
    s = D ** -0.25
    return np.asfortranarray(s * Q.T), np.asfortranarray(s * K.T), np.hstack([V, np.ones((L, 1))])


def numpy_rows(X, Y, C, A, rows):
    """log Var (K-hat C)_ia of OPRF (M = 1) for the given rows, from the definition above."""
    d = X.shape[0]
    g = (1 - 4 * A) / (2 * (1 - 8 * A))
    y2 = (Y * Y).sum(0)
    gram = Y.T @ Y
    gram *= 2 * g
    E = np.empty_like(gram)
    out = np.empty((len(rows), C.shape[1]))
    for r, i in enumerate(rows):
        x = X[:, i]
        xy = x @ Y
        a = -0.5 * y2 + g * (y2 + 4 * xy)
        const = d * np.log(1 - 4 * A) - 0.5 * d * np.log(1 - 8 * A) - x @ x + 4 * g * (x @ x)
        np.add(gram, a[:, None], out=E)
        E += a[None, :]
        m = E.max()
        E -= m
        np.exp(E, out=E)
        second = np.einsum("ja,ja->a", C, E @ C)  # sum_jk C_ja E_jk C_ka at scale e^(m + const)
        km = xy.max()
        kc = np.exp(xy - km) @ C  # (K C)_ia at scale e^km
        out[r] = m + const + np.log(second - kc ** 2 * np.exp(2 * km - m - const))
    return out


def child(L, side, runs, tmp):
    """One (L, side) in this process: prints the times, the peak RSS and whether every value is finite."""
    import kestrel  # noqa: PLC0415 (imported here: the child's RSS is what is measured)
    X, Y, C = inputs(L)
    est = kestrel.fit("oprf", X, Y, layout="columns")
    times, res = [], None
    for _ in range(runs):
        t0 = time.perf_counter()
        if side == "kestrel":
            out = est.kc_variance(X, Y, C, rows=ROWS, seed=SEED)
            res, rows = out["log_var"], out["rows"]
        elif side == "attention":
            out = est.predict_attention(X, Y, C[:, :-1], rows=ROWS, seed=SEED)
            res, rows = out["log_mse"], out["rows"]
        else:
            rows = np.load(tmp / f"rows_{L}.npy")
            res = numpy_rows(X, Y, C, est.params()["A_re"], rows)
        times.append(time.perf_counter() - t0)
    np.save(tmp / f"{side}_{L}.npy", res)
    np.save(tmp / f"rows_{L}.npy", rows)
    print(json.dumps({"times_s": times, "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                      "finite": bool(np.isfinite(res).all())}))


def run_child(L, side, runs, tmp, env):
    r = subprocess.run([sys.executable, __file__, "--child", str(L), side, str(runs), str(tmp)], env=env,
                       capture_output=True, text=True, check=False)
    if r.returncode != 0:
        raise RuntimeError(f"{side} at L = {L} failed: {r.stderr[-2000:]}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def blas_env():
    """OpenBLAS's kernels as scripts/blas-core.sh picks them (the same for kestrel and NumPy), one process each."""
    env = dict(os.environ)
    core = subprocess.run(["bash", "-c", f". {ROOT}/scripts/blas-core.sh {ROOT}/build/bin/kestrel; "
                           "echo ${OPENBLAS_CORETYPE:-}"], capture_output=True, text=True, check=False).stdout.strip()
    if core:
        env["OPENBLAS_CORETYPE"] = core
    env.setdefault("PYTHONPATH", str(ROOT / "build" / "python"))
    return env, core


def measure(side, L, prev, args, tmp, env):
    """One side at one L, or the reason it was skipped."""
    if side == "numpy" and 2 * L * L * 8 > args.peer_memory * 2 ** 30:
        return {"skipped": f"2 L^2 doubles = {2 * L * L * 8 / 2 ** 30:.1f} GB exceed --peer-memory {args.peer_memory}"}
    if prev and "median_s" in prev and prev["median_s"] * (L / prev["L"]) ** 2 > args.budget:
        return {"skipped": f"predicted {prev['median_s'] * (L / prev['L']) ** 2:.0f} s per run (O(L^2) from "
                           f"L = {prev['L']}) exceeds --budget {args.budget:.0f} s"}
    r = run_child(L, side, args.runs, tmp, env)
    r.update(L=L, median_s=statistics.median(r["times_s"]))
    print(f"[long_context_kc] {side} L = {L}: median {r['median_s']:.2f} s, peak RSS {r['peak_rss_mb']:.0f} MB",
          flush=True)
    return r


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--child", nargs=4, help=argparse.SUPPRESS)
    ap.add_argument("--lengths", default=",".join(map(str, LENGTHS)))
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--budget", type=float, default=240, help="skip an L predicted to take longer per run (s)")
    ap.add_argument("--peer-memory", type=float, default=8, help="GB the NumPy peer's 2 L^2 doubles may take")
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "long_context_kc.json"))
    args = ap.parse_args()
    if args.child:
        child(int(args.child[0]), args.child[1], int(args.child[2]), Path(args.child[3]))
        return
    env, core = blas_env()
    tmp = Path(args.out).parent / "tmp"
    tmp.mkdir(parents=True, exist_ok=True)
    load = os.getloadavg()
    rows, prev = [], {"kestrel": None, "numpy": None, "attention": None}
    for L in map(int, args.lengths.split(",")):
        row = {"L": L}
        for side in ("kestrel", "numpy", "attention"):
            if side == "numpy" and "median_s" not in row["kestrel"]:
                row[side] = {"skipped": "kestrel skipped at this L (its rows are the ones compared)"}
                continue
            row[side] = measure(side, L, prev[side], args, tmp, env)
            if "median_s" in row[side]:
                prev[side] = row[side]
        if "median_s" in row["numpy"]:
            k, p = np.load(tmp / f"kestrel_{L}.npy"), np.load(tmp / f"numpy_{L}.npy")
            row["numpy_over_kestrel_time"] = row["numpy"]["median_s"] / row["kestrel"]["median_s"]
            row["max_rel_diff_var"] = float(np.abs(np.expm1(p - k)).max())
        rows.append(row)
    result = {"benchmark": "Estimator.kc_variance(X, Y, C, rows=512) for OPRF against NumPy from the definition; "
                           "'attention': Estimator.predict_attention(X, Y, V, rows=512), O(L^2) per row whatever dv "
                           "is (no NumPy peer)",
              "d": D, "dv": DV, "n": DV + 1, "rows": ROWS, "seed": SEED, "features": 1, "runs": args.runs,
              "budget_s": args.budget, "inputs": "Q, K ~ N(0, 0.25) entries scaled by d^-1/4; V ~ N(0, 1); C = [V, 1]",
              "openblas_coretype": core or "as detected", "cores": os.cpu_count(), "cpu": platform.processor(),
              "load_average_before": load, "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "lengths": rows}
    Path(args.out).write_text(json.dumps(result, indent=1) + "\n")
    print(f"[long_context_kc] wrote {args.out}")


if __name__ == "__main__":
    main()
