#!/usr/bin/env python3
# Generates the polynomial coefficients of g(z) = sqrt(z) e^{-z} I0(z) for z >= 6 used by GeomRF's pairwise sums
# (lib/estimators/discrete/discrete.cpp, kI0ScaledLow / kI0ScaledHigh), and checks them in double precision.
# Two pieces in v: 6 <= z < 12 with v = 24/z - 3, z >= 12 with v = 24/z - 1 (v in [-1, 1]). The Chebyshev series of
# g(v) is computed with mpmath (40 digits) and truncated at degree N, then expanded in powers of v for Horner's rule.
# Usage: python3 scripts/i0_scaled_coefficients.py  (needs mpmath)
import random
import sys

import mpmath as mp

mp.mp.dps = 40
N = int(sys.argv[1]) if len(sys.argv) > 1 else 17  # degree (the largest dropped coefficient is printed)


def g(z):
    return mp.sqrt(z) * mp.exp(-z) * mp.besseli(0, z)


def chebyshev(f, n_nodes=60):
    nodes = [mp.cos(mp.pi * (k + mp.mpf(1) / 2) / n_nodes) for k in range(n_nodes)]
    fv = [f(v) for v in nodes]
    c = [2 * mp.fsum(fv[k] * mp.cos(mp.pi * j * (k + mp.mpf(1) / 2) / n_nodes) for k in range(n_nodes)) / n_nodes
         for j in range(n_nodes)]
    c[0] /= 2
    return c


def monomial_coeffs(c):
    T = [[mp.mpf(1)], [mp.mpf(0), mp.mpf(1)]]
    while len(T) < len(c):
        a, b = T[-1], T[-2]
        nxt = [mp.mpf(0)] + [2 * v for v in a]
        for i, v in enumerate(b):
            nxt[i] -= v
        T.append(nxt)
    out = [mp.mpf(0)] * len(c)
    for j, cj in enumerate(c):
        for i, v in enumerate(T[j]):
            out[i] += cj * v
    return out


pieces = {"kI0ScaledLow": (lambda v: g(24 / (v + 3)), 6, 12, lambda z: 24 / z - 3),
          "kI0ScaledHigh": (lambda v: g(24 / (v + 1)) if v > -1 else 1 / mp.sqrt(2 * mp.pi), 12, None,
                            lambda z: 24 / z - 1)}
random.seed(1)
for name, (f, zlo, zhi, vz) in pieces.items():
    c = chebyshev(f)
    print(f"// {name}: largest dropped Chebyshev coefficient {mp.nstr(max(abs(x) for x in c[N + 1:]), 3)}")
    a = [float(x) for x in monomial_coeffs(c[:N + 1])]
    print(f"constexpr double {name}[{N + 1}] = {{")
    print(",\n".join(f"    {x!r}" for x in a) + "};")
    # Horner in double (Python floats: no fused multiply-add) against mpmath at random z of the piece.
    worst = 0.0
    for _ in range(2000):
        z = zlo + (zhi - zlo) * random.random() if zhi else zlo * 10 ** (6 * random.random())
        v = vz(z)
        s = a[N]
        for k in range(N - 1, -1, -1):
            s = a[k] + v * s
        worst = max(worst, float(abs(s - g(mp.mpf(z))) / g(mp.mpf(z))))
    print(f"// max relative error of Horner in double: {worst:.2e}")
