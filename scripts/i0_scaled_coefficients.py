#!/usr/bin/env python3
# Generates the polynomial coefficients of GeomRF's pairwise sums (lib/estimators/discrete/discrete.cpp) and checks
# them in double precision against mpmath:
# - kI0Scaled: g(z) = sqrt(z) e^{-z} I0(z) for z >= 10, a smooth function of v = 20/z - 1 in [-1, 1] (g -> 1/sqrt(2 pi)
#   as z -> inf, v -> -1): its Chebyshev series truncated at degree N, expanded in powers of v.
# - kI0Series: q(y) = (I0(2 sqrt(y)) - 1) / y for 0 <= y < 25 (z = 2 sqrt(y) < 10): the Chebyshev series on [0, 25]
#   truncated at degree NQ (an economised Taylor series), expanded in powers of y. Its coefficients stay close to the
#   positive Taylor coefficients 1/((k+1)!)^2, so Horner's rule in y has no cancellation and u = y q(y) keeps its
#   relative precision for tiny y.
# Usage: python3 scripts/i0_scaled_coefficients.py [N [NQ]]  (needs mpmath; N = 20, NQ = 16 by default)
import random
import sys

import mpmath as mp

mp.mp.dps = 40
N = int(sys.argv[1]) if len(sys.argv) > 1 else 20  # degrees (the largest dropped coefficient is printed)
NQ = int(sys.argv[2]) if len(sys.argv) > 2 else 16


def g(z):
    return mp.sqrt(z) * mp.exp(-z) * mp.besseli(0, z)


def g_of_v(v):
    return g(20 / (v + 1)) if v > -1 else 1 / mp.sqrt(2 * mp.pi)


def chebyshev(f, n_nodes=70):
    nodes = [mp.cos(mp.pi * (k + mp.mpf(1) / 2) / n_nodes) for k in range(n_nodes)]
    fv = [f(v) for v in nodes]
    c = [2 * mp.fsum(fv[k] * mp.cos(mp.pi * j * (k + mp.mpf(1) / 2) / n_nodes) for k in range(n_nodes)) / n_nodes
         for j in range(n_nodes)]
    c[0] /= 2
    return c


def monomial_coeffs(c):
    # sum_j c_j T_j(v) as sum_k a_k v^k, with T_{j+1} = 2 v T_j - T_{j-1}.
    T = [[mp.mpf(1)], [mp.mpf(0), mp.mpf(1)]]
    while len(T) < len(c):
        nxt = [mp.mpf(0)] + [2 * v for v in T[-1]]
        for i, v in enumerate(T[-2]):
            nxt[i] -= v
        T.append(nxt)
    out = [mp.mpf(0)] * len(c)
    for j, cj in enumerate(c):
        for i, v in enumerate(T[j]):
            out[i] += cj * v
    return out


c = chebyshev(g_of_v)
print(f"// largest dropped Chebyshev coefficient {mp.nstr(max(abs(x) for x in c[N + 1:]), 3)}")
a = [float(x) for x in monomial_coeffs(c[:N + 1])]
print(f"constexpr double kI0Scaled[{N + 1}] = {{")
print(",\n".join(f"    {x!r}" for x in a) + "};")
# Horner in double (Python floats: no fused multiply-add) against mpmath at random z >= 10, log-uniform to 1e7.
random.seed(1)
worst = 0.0
for _ in range(3000):
    z = 10 * 10 ** (6 * random.random())
    v = 20 / z - 1
    s = a[N]
    for k in range(N - 1, -1, -1):
        s = a[k] + v * s
    ref = g(mp.mpf(z))
    worst = max(worst, float(abs(s - ref) / ref))
print(f"// max relative error of Horner in double: {worst:.2e}")


def q(y):
    return (mp.besseli(0, 2 * mp.sqrt(y)) - 1) / y if y != 0 else mp.mpf(1)


cq = chebyshev(lambda v: q(mp.mpf(25) / 2 * (v + 1)), 50)
print(f"// largest dropped Chebyshev coefficient of q {mp.nstr(max(abs(x) for x in cq[NQ + 1:]), 3)}")
av = monomial_coeffs(cq[:NQ + 1])  # in v = 2y/25 - 1: expand sum_k av_k (2y/25 - 1)^k in powers of y
ay = [mp.mpf(0)] * (NQ + 1)
for k, a_k in enumerate(av):
    for i in range(k + 1):
        ay[i] += a_k * mp.binomial(k, i) * (mp.mpf(2) / 25) ** i * (-1) ** (k - i)
aq = [float(x) for x in ay]
print(f"constexpr double kI0Series[{NQ + 1}] = {{")
print(",\n".join(f"    {x!r}" for x in aq) + "};")
worst = 0.0
for r in range(3000):
    y = 25 * random.random() if r % 2 else 25 * 10 ** (-20 * random.random())
    s = aq[NQ]
    for k in range(NQ - 1, -1, -1):
        s = aq[k] + y * s
    u, ref = y * s, y * q(mp.mpf(y))
    worst = max(worst, float(abs(u - ref) / ref))
print(f"// max relative error of u = y q(y) by Horner in double: {worst:.2e}")
