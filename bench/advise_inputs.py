#!/usr/bin/python3
"""Inputs and NumPy peer of bench/advise.sh. `advise_inputs.py OUT L` writes seeded q.npy, k.npy (L x 64, entries
N(0, 0.25): logits q.k/8 of standard deviation 1/4 per coordinate pair) and v.npy (L x 64, N(1, 1)).
`advise_inputs.py --peer OUT`: the NumPy way to learn one estimator's error at one M: 20 draws of PosRF random-
feature attention (M = 256, stabilised as in FAVOR+) against exact attention; prints the relative error."""
import sys

import numpy as np

if sys.argv[1] == "--peer":
    out = sys.argv[2]
    Q, K, V = (np.load(f"{out}/{n}.npy") for n in ("q", "k", "v"))
    d = Q.shape[1]
    Qs, Ks = Q / d**0.25, K / d**0.25
    logits = Qs @ Ks.T
    A = np.exp(logits - logits.max(axis=1, keepdims=True))
    Y = (A @ V) / A.sum(axis=1, keepdims=True)
    rng = np.random.default_rng(0)
    errs = []
    for _ in range(20):
        W = rng.standard_normal((d, 256))
        P = Qs @ W - 0.5 * (Qs**2).sum(1, keepdims=True)
        S = Ks @ W - 0.5 * (Ks**2).sum(1, keepdims=True)
        P = np.exp(P - P.max(axis=1, keepdims=True))
        S = np.exp(S - S.max())
        Yh = (P @ (S.T @ V)) / (P @ S.sum(0))[:, None]
        errs.append(np.linalg.norm(Yh - Y) / np.linalg.norm(Y))
    print(f"PosRF M=256 relative error {np.mean(errs):.4f} +- {np.std(errs) / np.sqrt(len(errs)):.4f}")
else:
    out, L = sys.argv[1], int(sys.argv[2])
    rng = np.random.default_rng(2026)
    np.save(f"{out}/q.npy", 0.5 * rng.standard_normal((L, 64)))
    np.save(f"{out}/k.npy", 0.5 * rng.standard_normal((L, 64)))
    np.save(f"{out}/v.npy", 1.0 + rng.standard_normal((L, 64)))
