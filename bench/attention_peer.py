#!/usr/bin/python3
"""Independent NumPy simulation of softmax attention approximated with positive random features (PosRF), to check
`kestrel advise`; written from the mathematical definitions alone and sharing no code with kestrel.

Definitions (one token per row):
  q' = q / d^(1/4), k' = k / d^(1/4); exact attention A_ij = exp(q'_i.k'_j), Y_i = sum_j A_ij V_j / sum_j A_ij.
  PosRF: phi(x)_m = exp(w_m.x - |x|^2/2) / sqrt(M), so E[phi(q')^T phi(k')] = exp(q'.k');
  Y-hat_i = sum_j (phi(q'_i).phi(k'_j)) V_j / sum_j phi(q'_i).phi(k'_j).
  Projections W (d x M, columns w_m) from one of three samplers:
    iid         columns N(0, I_d);
    orthogonal  blocks of d columns Q diag(r), Q Haar on O(d) (QR of a Gaussian matrix with the signs of diag(R)
                moved into Q), r_m ~ chi(d) independent; the last partial block keeps its first M mod d columns;
    simplex     blocks of d columns r_k Q s_k, Q Haar as above, s_k the unit vertices of a regular simplex centred at 0
                (normalised columns of I - 11^T/d), r_k ~ chi(d) independent; last partial block as above.
Causal mode (causal=True, --causal; needs Lq = Lk): query row i attends to keys j <= i only. Written from the
definition with the mask, not with prefix sums: A-hat = phi(Q') phi(K')^T (rows x keys) with the entries j > i set to 0,
Y-hat_i = (A-hat V)_i / (A-hat 1)_i; the exact rows are the masked softmax. Both cost rows x Lk x M per draw.
Error metric: for query row i over R independent draws of W, err_i = sqrt(mean_r |Y-hat_i - Y_i|^2) / RMS with
RMS = sqrt(mean_i |Y_i|^2) over the rows considered; summaries are the median and 95th percentile over rows
(numpy.quantile, linear interpolation). Standard errors: nonparametric bootstrap over the R draws (resample the draws
with replacement, recompute err_i and the quantile, take the standard deviation over the bootstrap replicates); the
rows are held fixed, so the SE is that of the quantile over the rows considered (with --rows it does not include the
variability of choosing the row sample).

Numerics: float64; the 1/sqrt(M) factors cancel in the ratio and are left out; log-features are stabilised by a
per-query-row max and one global max over the key log-features (both cancel in the ratio). Keys (and queries) are
processed in blocks so that no temporary holds more than about `block` float64 values; the squared errors are kept per
(draw, row) for the bootstrap, i.e. draws x rows values.

CLI: python3 bench/attention_peer.py --queries Q.npy --keys K.npy --values V.npy --m 64 --sampler orthogonal
     --draws 100 --seed 0 [--rows N] [--boot 200]
prints JSON. With --rows N the error is measured on a seeded random sample (without replacement, generator
numpy.random.default_rng([seed, 2])) of N query rows, listed sorted in the output under "rows"; RMS is over those rows.
"""
import argparse
import json
import sys

import numpy as np

SAMPLERS = ("iid", "orthogonal", "simplex")
BLOCK = 1 << 22  # max float64 values in one temporary (32 MiB)


# ----------------------------------------------------------------------------------------------------- samplers
def haar_orthogonal(d, rng, n=1):
    """n independent Haar-distributed d x d orthogonal matrices, shape (n, d, d).
    G = QR with G Gaussian; Q <- Q diag(sign(diag R)) makes Q Haar (a plain QR is not)."""
    G = rng.standard_normal((n, d, d))
    Qm, R = np.linalg.qr(G)
    s = np.sign(np.diagonal(R, axis1=1, axis2=2))
    s[s == 0] = 1.0
    return Qm * s[:, None, :]


def chi(d, rng, size):
    """chi(d) variates: norms of independent N(0, I_d) vectors."""
    return np.linalg.norm(rng.standard_normal((*np.atleast_1d(size), d)), axis=-1)


def simplex_vertices(d):
    """d x d matrix whose columns are the unit vertices of a regular simplex centred at 0 (in the plane 1^T x = 0)."""
    S = np.eye(d) - np.full((d, d), 1.0 / d)
    return S / np.linalg.norm(S, axis=0, keepdims=True)


def sample_projections(d, M, sampler, rng):
    """W, d x M, columns w_m, each marginally N(0, I_d)."""
    if sampler == "iid":
        return rng.standard_normal((d, M))
    nb = -(-M // d)
    Qs = haar_orthogonal(d, rng, nb)                       # (nb, d, d)
    r = chi(d, rng, (nb, d))                               # (nb, d)
    if sampler == "orthogonal":
        blocks = Qs * r[:, None, :]                        # Q diag(r)
    elif sampler == "simplex":
        blocks = (Qs @ simplex_vertices(d)) * r[:, None, :]  # columns r_k Q s_k
    else:
        raise ValueError(f"unknown sampler {sampler!r}; use one of {SAMPLERS}")
    return np.concatenate(list(blocks), axis=1)[:, :M]


# ----------------------------------------------------------------------------------------------------- features
def posrf_features(X, W):
    """phi(x)_m = exp(w_m.x - |x|^2/2) / sqrt(M) for the rows x of X (unstabilised; for checks on small inputs)."""
    M = W.shape[1]
    return np.exp(X @ W - 0.5 * (X * X).sum(1, keepdims=True)) / np.sqrt(M)


def _row_blocks(n, width, block):
    step = max(1, block // max(1, width))
    return [slice(a, min(n, a + step)) for a in range(0, n, step)]


def exact_attention(Qs, Ks, V, block=BLOCK):
    """Softmax attention on already-scaled queries/keys: Y_i = sum_j exp(q_i.k_j) V_j / sum_j exp(q_i.k_j).
    Keys are streamed in blocks with a running row max (online softmax)."""
    Y = np.empty((Qs.shape[0], V.shape[1]))
    qb = _row_blocks(Qs.shape[0], min(Ks.shape[0], 4096), block)
    kb = _row_blocks(Ks.shape[0], min(Qs.shape[0], 4096), block)
    for qs in qb:
        q = Qs[qs]
        mx = np.full(q.shape[0], -np.inf)
        den = np.zeros(q.shape[0])
        num = np.zeros((q.shape[0], V.shape[1]))
        for ks in kb:
            L = q @ Ks[ks].T
            new = np.maximum(mx, L.max(1))
            f = np.exp(mx - new)
            E = np.exp(L - new[:, None])
            num = num * f[:, None] + E @ V[ks]
            den = den * f + E.sum(1)
            mx = new
        Y[qs] = num / den[:, None]
    return Y


def posrf_attention(Qs, Ks, V, W, block=BLOCK):
    """Y-hat for projections W on already-scaled queries/keys, in the log domain:
    key log-features minus one global max (kept as a running max over key blocks, with the accumulators rescaled),
    query log-features minus their row max; both constants cancel in the ratio."""
    M = W.shape[1]
    S = np.zeros((M, V.shape[1]))   # sum_j phi(k_j) V_j^T (up to the global constant)
    z = np.zeros(M)                 # sum_j phi(k_j)
    c = -np.inf
    kn = 0.5 * (Ks * Ks).sum(1)
    for ks in _row_blocks(Ks.shape[0], M, block):
        Lk = Ks[ks] @ W - kn[ks, None]
        new = max(c, Lk.max())
        f = np.exp(c - new)
        E = np.exp(Lk - new)
        S = S * f + E.T @ V[ks]
        z = z * f + E.sum(0)
        c = new
    Yh = np.empty((Qs.shape[0], V.shape[1]))
    qn = 0.5 * (Qs * Qs).sum(1)
    for qs in _row_blocks(Qs.shape[0], M, block):
        Lq = Qs[qs] @ W - qn[qs, None]
        P = np.exp(Lq - Lq.max(1, keepdims=True))
        Yh[qs] = (P @ S) / (P @ z)[:, None]
    return Yh


def causal_exact_attention(Qs, Ks, V, rows):
    """Masked softmax: Y_r = sum_{j <= rows[r]} exp(q_r.k_j) V_j / sum_{j <= rows[r]} exp(q_r.k_j)."""
    L = Qs @ Ks.T
    L[np.arange(Ks.shape[0])[None, :] > np.asarray(rows)[:, None]] = -np.inf
    E = np.exp(L - L.max(1, keepdims=True))
    return (E @ V) / E.sum(1, keepdims=True)


def causal_posrf_attention(Qs, Ks, V, W, rows):
    """Y-hat of the masked random-feature attention matrix: A-hat_rj = phi(q_r).phi(k_j) for j <= rows[r], else 0.
    Log-features minus their row max (queries) and the global max (keys); both cancel in each row's ratio."""
    Lq = Qs @ W - 0.5 * (Qs * Qs).sum(1, keepdims=True)
    Lk = Ks @ W - 0.5 * (Ks * Ks).sum(1, keepdims=True)
    A = np.exp(Lq - Lq.max(1, keepdims=True)) @ np.exp(Lk - Lk.max()).T
    A[np.arange(Ks.shape[0])[None, :] > np.asarray(rows)[:, None]] = 0.0
    return (A @ V) / A.sum(1, keepdims=True)


# ----------------------------------------------------------------------------------------------------- error
def _quantiles(err):
    return float(np.quantile(err, 0.5)), float(np.quantile(err, 0.95))


def posrf_attention_error(Q, K, V, M, sampler, draws, seed, rows=None, boot=200, block=BLOCK, causal=False):
    """Relative attention error of PosRF with M features over `draws` independent draws of W.
    rows: None for all query rows, an int N for a seeded sample of N rows (default_rng([seed, 2]), without
    replacement, sorted), or an explicit index array. Returns dict(median, p95, median_se, p95_se, per_row, rows, rms,
    m, sampler, draws, boot); SEs by bootstrap over the draws (`boot` replicates, generator default_rng([seed, 1]))."""
    Q, K, V = (np.asarray(a, dtype=float) for a in (Q, K, V))
    if V.ndim == 1:
        V = V[:, None]
    if Q.ndim != 2 or K.ndim != 2 or Q.shape[1] != K.shape[1] or K.shape[0] != V.shape[0]:
        raise ValueError(f"shapes Q {Q.shape}, K {K.shape}, V {V.shape}: need Lq x d, Lk x d, Lk x dv")
    if sampler not in SAMPLERS:
        raise ValueError(f"unknown sampler {sampler!r}; use one of {SAMPLERS}")
    if causal and Q.shape[0] != K.shape[0]:
        raise ValueError(f"causal attention needs one query per key, got {Q.shape[0]} and {K.shape[0]}")
    M, draws = int(M), int(draws)
    if M < 1 or draws < 2:
        raise ValueError("need M >= 1 and draws >= 2")
    d = Q.shape[1]
    if rows is None:
        idx = np.arange(Q.shape[0])
    elif np.isscalar(rows):
        n = min(int(rows), Q.shape[0])
        idx = np.sort(np.random.default_rng([seed, 2]).choice(Q.shape[0], size=n, replace=False))
    else:
        idx = np.asarray(rows, dtype=int)
    s = d ** -0.25
    Qs, Ks = Q[idx] * s, K * s
    Y = causal_exact_attention(Qs, Ks, V, idx) if causal else exact_attention(Qs, Ks, V, block)
    rms = float(np.sqrt((Y * Y).sum(1).mean()))

    rng = np.random.default_rng(seed)
    e2 = np.empty((draws, len(idx)))               # |Y-hat_i - Y_i|^2 per draw and row
    for r in range(draws):
        W = sample_projections(d, M, sampler, rng)
        D = (causal_posrf_attention(Qs, Ks, V, W, idx) if causal else posrf_attention(Qs, Ks, V, W, block)) - Y
        e2[r] = (D * D).sum(1)
    err = np.sqrt(e2.mean(0)) / rms
    med, p95 = _quantiles(err)

    # Bootstrap over draws: counts[b, r] = multiplicity of draw r in replicate b.
    brng = np.random.default_rng([seed, 1])
    bq = np.empty((boot, 2))
    for b in range(boot):
        counts = np.bincount(brng.integers(0, draws, draws), minlength=draws)
        bq[b] = _quantiles(np.sqrt(counts @ e2 / draws) / rms)
    se = bq.std(0, ddof=1) if boot > 1 else np.full(2, np.nan)
    return dict(median=med, p95=p95, median_se=float(se[0]), p95_se=float(se[1]), per_row=err,
                rows=idx, rms=rms, m=M, sampler=sampler, draws=draws, boot=boot)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--queries", required=True, help="Q.npy, Lq x d")
    ap.add_argument("--keys", required=True, help="K.npy, Lk x d")
    ap.add_argument("--values", required=True, help="V.npy, Lk x dv")
    ap.add_argument("--m", type=int, required=True, help="number of random features M")
    ap.add_argument("--sampler", choices=SAMPLERS, default="iid")
    ap.add_argument("--draws", type=int, default=100, help="independent draws of W (R)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--rows", type=int, default=None,
                    help="measure on a seeded random sample of N query rows (default: all rows)")
    ap.add_argument("--boot", type=int, default=200, help="bootstrap replicates over draws for the SEs")
    ap.add_argument("--per-row", action="store_true", help="include the per-row errors in the JSON")
    ap.add_argument("--causal", action="store_true", help="causal attention: row i attends to keys j <= i")
    a = ap.parse_args(argv)
    res = posrf_attention_error(np.load(a.queries), np.load(a.keys), np.load(a.values), a.m, a.sampler, a.draws,
                                a.seed, rows=a.rows, boot=a.boot, causal=a.causal)
    out = {k: v for k, v in res.items() if k not in ("per_row", "rows")}
    out["rows"] = "all" if a.rows is None else res["rows"].tolist()
    if a.per_row:
        out["per_row"] = res["per_row"].tolist()
    out["se_method"] = f"bootstrap over the {a.draws} draws, {a.boot} replicates, rows fixed"
    json.dump(out, sys.stdout, indent=1)
    print()


if __name__ == "__main__":
    main()
