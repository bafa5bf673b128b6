#!/usr/bin/python3
"""Exact variance of GERF-family kernel estimators (TrigRF, PosRF, OPRF, complex GERF) whose Gaussian projections are
coupled in blocks of d (block-orthogonal, simplex): an mpmath reference, Monte Carlo checks in NumPy, and the table of
log(Var_coupled / Var_iid). The derivation is in lib/analysis/coupled_variance.hpp; in short, with S = |x + s y|^2,
kappa2 = s (every GERF member), y0 = s S / 2, M(a, b, y) = 1F1(a; b; y), and v = sin(phi), phi with density
sin^(d-1)(phi) / W_d on [0, pi/2] (W_d = sqrt(pi) Gamma(d/2) / (2 Gamma((d+1)/2))), two features whose directions have
cosine c (norms iid chi(d)) have
    s = +1:  Cov_c / K^2 = E_phi[ e^(-S) M(d, d/2, y0 (1 + c v)) ] - 1,
    s = -1:  Cov_c / K^2 = E_phi[ e^(S) (M(d, d/2, y0 (1 + c v)) + M(d, d/2, y0 (1 - c v))) / 2 ] - 1,
whatever A is; at c = 0 (orthogonal) the integrand does not depend on phi. With V1 = Var/K^2 of one feature (CRT eq.
6, the gerf closed form) and blocks of n_b features (each pair in a block has cosine c),
    Var(K-hat_M) / K^2 = (M V1 + sum_b n_b (n_b - 1) Cov_c) / M^2.

Run: /usr/bin/python3 scripts/coupled_reference.py [--quick] [--cpp | --prototype]
  --quick      smaller Monte Carlo runs; the whole script takes ~10-15 min on one core (mostly the mpmath grid).
  --cpp        print only the reference values that tests/coupled_variance_test.cpp embeds.
  --prototype  only the check of python/examples/simplex_prf.py (tests/coupled_variance_test.cpp runs it).
Monte Carlo threshold: |empirical - exact| < 4.5 standard errors (P(|Z| > 4.5) = 6.8e-6 per check for a normal
statistic); the number of checks is printed with the resulting union-bound false-failure rate. Fixed seeds.
"""
import importlib.util
import math
import os
import sys
import types

import mpmath as mp
import numpy as np

K_SIGMAS = 4.5
P_FAIL = 6.8e-6  # two-sided normal tail beyond 4.5
HERE = os.path.dirname(os.path.abspath(__file__))


# ---------------------------------------------------------------- exact formulas (mpmath)

def oprf_a(S, d):
    """OPRF's A = (1 - 1/rho*)/8 with rho* = 2d / (2S + d + sqrt((2S + d)^2 + 8 d S)) (CRT eq. 7, gerf/fit.cpp)."""
    rho = 2 * d / (2 * S + d + math.sqrt((2 * S + d) ** 2 + 8 * d * S))
    return (1 - 1 / rho) / 8


def var1(A, s, d, S):
    """Var/K^2 of one GERF feature, CRT eq. (6) relative to K^2 as printed in gerf.hpp: Re(e^rho1)/2 + e^rho3/2 - 1."""
    A, S = mp.mpc(A), mp.mpf(S)
    rho1 = d * mp.log(1 - 4 * A) - mp.mpf(d) / 2 * mp.log(1 - 8 * A) + s * S / (1 - 8 * A)
    q = 1 - 8 * mp.re(A)
    rho3 = (d * mp.log(abs(1 - 4 * A)) - mp.mpf(d) / 2 * mp.log(q) + (abs(1 - 4 * A) + s * mp.re(1 - 4 * A)) * S / q
            - s * S)
    return mp.re(mp.exp(rho1)) / 2 + mp.exp(rho3) / 2 - 1


def _M(d, y):
    """1F1(d; d/2; y). For y = -z < 0 Kummer's transformation e^-z 1F1(-d/2; d/2; z); for even d that is a polynomial
    (an exact zero at d = 2, z = 1; at z = 350 some 2^-1500 of its terms), summed with z/2 + 20 extra digits."""
    h = mp.mpf(d) / 2
    if y >= 0:
        return mp.hyp1f1(d, h, y)
    z = -y
    if d % 2:
        return mp.exp(-z) * mp.hyp1f1(-h, h, z)
    with mp.workdps(mp.mp.dps + int(z / 2) + 20):
        poly = mp.fsum(mp.rf(-h, k) / mp.rf(h, k) / mp.factorial(k) * z ** k for k in range(d // 2 + 1))
    return mp.exp(-z) * poly


def _J(d, c, y0):
    """E_phi[M(d, d/2, y0 (1 + c sin phi))] and its error estimate, by tanh-sinh quadrature on 8 pieces of
    [0, pi/2 - w] and 16 of the end [pi/2 - w, pi/2], w = min(pi/2, 10/sqrt(d)), where sin^(d-1) concentrates and the
    integrand may rise as e^(|y0 c| sin phi)."""
    h = mp.mpf(d) / 2
    if c == 0:
        return _M(d, y0), mp.mpf(0)
    W = mp.sqrt(mp.pi) * mp.gamma(h) / (2 * mp.gamma(h + mp.mpf(1) / 2))
    w = min(mp.pi / 2, 10 / mp.sqrt(d))
    pts = (mp.linspace(0, mp.pi / 2 - w, 9) if w < mp.pi / 2 else [mp.mpf(0)]) + mp.linspace(mp.pi / 2 - w, mp.pi / 2,
                                                                                          17)[1:]
    val, err = mp.quad(lambda p: mp.sin(p) ** (d - 1) * _M(d, y0 * (1 + c * mp.sin(p))), pts, error=True)
    return val / W, err / W


def cov(d, c, s, S, dps=None):
    """Cov(Re g1, Re g2)/K^2 for directions with cosine c (mpmath; working precision grows as S -> 0, where the
    result is O(S) or O(S^2) against terms of size 1). Refuses a result whose quadrature error estimate exceeds
    1e-4 of it: mpmath's estimate is pessimistic here (1e-5 where 16, 32 and 64 pieces agree to 15 digits), but a
    single piece had given 1e-4 wrong answers at large S with its estimate 5e-2."""
    if dps is None:
        dps = 30 + int(2 * max(0.0, -math.log10(max(S, 1e-300))))
    with mp.workdps(dps):
        S, c = mp.mpf(S), mp.mpf(c)
        y0 = s * S / 2
        if s > 0:
            j, e = _J(d, c, y0)
            r, err = mp.exp(-S) * j - 1, mp.exp(-S) * e
        else:
            (j1, e1), (j2, e2) = _J(d, c, y0), _J(d, -c, y0)
            r, err = mp.exp(S) * (j1 + j2) / 2 - 1, mp.exp(S) * (e1 + e2) / 2
        if err > abs(r) * mp.mpf("1e-4"):
            raise ArithmeticError(f"mpmath quadrature did not converge: d={d} c={c} s={s} S={S}: {r} +- {err}")
        return +r


def cosine(sampler, d):
    """Pairwise cosine of two directions in one block."""
    return {"orthogonal": 0.0, "simplex": -1.0 / (d - 1)}[sampler]


def pair_count(M, d):
    """sum over blocks of n_b (n_b - 1): blocks of d columns, the last one partial."""
    full, rest = divmod(M, d)
    return full * d * (d - 1) + rest * (rest - 1)


def var_m(A, s, d, S, M, sampler, dps=40):
    """Var(K-hat_M)/K^2 for iid, orthogonal or simplex projections (mpmath)."""
    with mp.workdps(dps + int(2 * max(0.0, -math.log10(max(S, 1e-300))))):
        v1 = var1(A, s, d, S)
        if sampler == "iid" or d == 1:
            return v1 / M
        return (M * v1 + pair_count(M, d) * cov(d, cosine(sampler, d), s, S)) / M ** 2


FAMILIES = {  # name -> (A as a function of (S, d), s)
    "PosRF": (lambda S, d: 0.0, 1),
    "OPRF": (lambda S, d: oprf_a(S, d), 1),
    "TrigRF": (lambda S, d: 0.0, -1),
}


# ---------------------------------------------------------------- Monte Carlo (NumPy)

def haar(n, d, rng):
    """n Haar orthogonal d x d matrices: QR of Gaussians with the signs of R's diagonal moved into Q (GUIDE trap)."""
    q, r = np.linalg.qr(rng.standard_normal((n, d, d)))
    return q * np.sign(np.diagonal(r, axis1=1, axis2=2))[:, None, :]


def simplex_basis(d):
    """Columns e_i - 1/d normalised: d unit vectors with pairwise cosine -1/(d-1) (python/examples/simplex_prf.py)."""
    s = np.eye(d) - 1.0 / d
    return s / np.linalg.norm(s, axis=0)


def draw_omegas(n, d, M, sampler, rng):
    """n independent draws of d x M projections (n x d x M)."""
    if sampler == "iid":
        return rng.standard_normal((n, d, M))
    blocks = []
    for _ in range(-(-M // d)):
        q = haar(n, d, rng)
        if sampler == "simplex":
            q = q @ simplex_basis(d)
        blocks.append(q * np.sqrt(rng.chisquare(d, size=(n, 1, d))))
    return np.concatenate(blocks, axis=2)[:, :, :M]


def estimates(A, s, x, y, omegas):
    """K-hat / K for each draw: mean over columns of Re(f1 f2)/K, f1 f2 / K = D^2 exp(-s S/2 + 2A|w|^2 + B w^T z)."""
    d = x.size
    z = x + s * y
    S = z @ z
    B = np.sqrt(complex(s * (1 - 4 * A)))
    log_d2 = d / 2 * np.log(complex(1 - 4 * A))
    w2 = np.sum(omegas ** 2, axis=1)
    proj = np.einsum("i,nim->nm", z, omegas)
    return np.exp(log_d2 - s * S / 2 + 2 * A * w2 + B * proj).real.mean(axis=1)


def moments(samples):
    """Mean, its SE, unbiased variance, and the variance's SE from the fourth central moment."""
    R = samples.size
    m = samples.mean()
    c = samples - m
    v = c @ c / (R - 1)
    m4 = np.mean(c ** 4)
    return m, math.sqrt(v / R), v, math.sqrt(max(m4 - v * v * (R - 3) / (R - 1), 0) / R)


def simulate(A, s, x, y, M, sampler, reps, seed, draw=draw_omegas):
    rng = np.random.default_rng(seed)
    chunk = max(1, min(reps, 2_000_000 // (x.size * M)))
    out = [estimates(A, s, x, y, draw(min(chunk, reps - i), x.size, M, sampler, rng)) for i in range(0, reps, chunk)]
    return moments(np.concatenate(out))


class Checks:
    def __init__(self):
        self.n = 0
        self.failed = []

    def near(self, what, got, want, se):
        self.n += 1
        z = (got - want) / se if se > 0 else (0.0 if got == want else math.inf)
        ok = abs(z) < K_SIGMAS
        if not ok:
            self.failed.append(what)
        print(f"  {'ok ' if ok else 'FAIL'} {what}: {got:.6g} vs exact {want:.6g} ({z:+.2f} se)")

    def true(self, what, cond):
        if not cond:
            self.failed.append(what)
        print(f"  {'ok ' if cond else 'FAIL'} {what}")


def pair_with(S, d, s, seed):
    """x, y ~ N(0, I) rescaled so that |x + s y|^2 = S (a generic direction, not axis-aligned)."""
    rng = np.random.default_rng(seed)
    x, y = rng.standard_normal(d), rng.standard_normal(d)
    k = math.sqrt(S) / np.linalg.norm(x + s * y)
    return k * x, k * y


def monte_carlo(quick, checks):
    print("\n== Monte Carlo: exact Var(K-hat_M)/K^2 and E K-hat/K = 1 against NumPy draws "
          f"({K_SIGMAS} se per check)")
    R = {2: 200_000, 8: 100_000, 64: 20_000}
    if quick:
        R = {k: v // 5 for k, v in R.items()}
    cases = []  # (d, S, M)
    for d in (2, 8, 64):
        cases.append((d, 0.7 if d > 2 else 1.0, d))
    cases.append((8, 0.7, 12))  # a full block and a partial one
    seed = 1000
    for d, S, M in cases:
        for name, (a_of, s) in list(FAMILIES.items()) + [("GERF(A=0.02+0.03i,s=-1)", (lambda S, d: 0.02 + 0.03j, -1))]:
            A = a_of(S, d)
            x, y = pair_with(S, d, s, seed)
            for sampler in ("orthogonal", "simplex"):
                seed += 1
                m, se_m, v, se_v = simulate(A, s, x, y, M, sampler, R[d], seed)
                exact = float(var_m(A, s, d, S, M, sampler))
                tag = f"d={d} M={M} S={S} {name} {sampler} R={R[d]} seed={seed}"
                checks.near(tag + " mean", m, 1.0, se_m)
                checks.near(tag + " var ", v, exact, se_v)
    # Negative control: the iid formula V1/M must be rejected against orthogonal draws where they differ (TrigRF at
    # d = 8, |z| = 1: Var_ort / Var_iid = e^-1.41; bounded features, so the SE is reliable).
    d, S, M = 8, 1.0, 8
    x, y = pair_with(S, d, -1, 77)
    m, se_m, v, se_v = simulate(0.0, -1, x, y, M, "orthogonal", R[8], 78)
    wrong = float(var1(0, -1, d, S)) / M
    print(f"  negative control (TrigRF d=8 S=1 M=8 orthogonal draws vs the iid formula): MC {v:.5g}, iid {wrong:.5g}, "
          f"exact orthogonal {float(var_m(0, -1, d, S, M, 'orthogonal')):.5g}, z = {(v - wrong) / se_v:+.1f}")
    checks.true("negative control rejects the iid formula (|z| > 4.5)", abs(v - wrong) > K_SIGMAS * se_v)


# ---------------------------------------------------------------- the prototype in python/examples/simplex_prf.py

def load_prototype():
    """SimplexPosRF from python/examples/simplex_prf.py, imported with a stub `kestrel` module (its import of the
    compiled module only serves the example's main)."""
    stub = types.ModuleType("kestrel")
    stub.custom = types.ModuleType("kestrel.custom")
    stub.custom.Estimator = object
    sys.modules.setdefault("kestrel", stub)
    sys.modules.setdefault("kestrel.custom", stub.custom)
    path = os.path.join(HERE, "..", "python", "examples", "simplex_prf.py")
    spec = importlib.util.spec_from_file_location("simplex_prf", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.SimplexPosRF


def prototype(quick, checks):
    print("\n== python/examples/simplex_prf.py: its draws have the simplex Gram and the exact simplex variance")
    proto = load_prototype()()
    d, M, S = 8, 12, 0.7
    proto.d = d
    W = proto.draw(M, np.random.default_rng(5))
    for b in range(0, M, d):
        U = W[:, b:b + d] / np.linalg.norm(W[:, b:b + d], axis=0)
        G = U.T @ U
        want = np.full(G.shape, -1.0 / (d - 1))
        np.fill_diagonal(want, 1.0)
        checks.true(f"prototype block at column {b}: cosines -1/(d-1) (max error {np.abs(G - want).max():.1e})",
                    np.abs(G - want).max() < 1e-12)

    def draw(n, d_, M_, sampler, rng):
        return np.stack([proto.draw(M_, rng) for _ in range(n)])

    x, y = pair_with(S, d, 1, 91)
    reps = 20_000 if quick else 100_000
    m, se_m, v, se_v = simulate(0.0, 1, x, y, M, "simplex", reps, 92, draw=draw)
    checks.near(f"prototype PosRF d={d} M={M} S={S} R={reps} mean", m, 1.0, se_m)
    exact = var_m(0, 1, d, S, M, "simplex")
    checks.near(f"prototype PosRF d={d} M={M} S={S} R={reps} var ", v, float(exact), se_v)
    print(f"  exact log(Var/K^2) PosRF simplex d={d} M={M} S={S}: {mp.nstr(mp.log(exact), 17)}")


# ---------------------------------------------------------------- analytic checks

def iid_checks(checks):
    print("\n== (a) no coupling: E_c[Cov_c] over the cosine law of two independent directions is 0, and V1 from a "
          "direct (r, t) quadrature equals gerf's closed form")
    for d in (2, 3, 8):
        for s in (1, -1):
            S = 1.3
            with mp.workdps(20):
                dens = lambda c: (1 - c * c) ** (mp.mpf(d - 3) / 2)
                norm = mp.quad(dens, [-1, 0, 1])
                mean_cov = mp.quad(lambda c: dens(c) * cov(d, c, s, S, dps=20), [-1, 0, 1]) / norm
            checks.true(f"d={d} s={s:+d} S={S}: E_c[Cov_c] = {mp.nstr(mean_cov, 3)} (|.| < 1e-12)",
                        abs(mean_cov) < 1e-12)
    for name, A, s in (("PosRF", 0.0, 1), ("OPRF", oprf_a(1.3, 3), 1), ("TrigRF", 0.0, -1),
                       ("GERF", 0.02 + 0.03j, -1), ("GERF", -0.05 + 0.02j, 1)):
        d, S = 3, 1.3
        with mp.workdps(25):
            A_, B = mp.mpc(A), mp.sqrt(mp.mpc(s * (1 - 4 * A)))
            D2 = (1 - 4 * A_) ** (mp.mpf(d) / 2)
            chi = lambda r: r ** (d - 1) * mp.exp(-r * r / 2) / (2 ** (mp.mpf(d) / 2 - 1) * mp.gamma(mp.mpf(d) / 2))
            tden = lambda t: (1 - t * t) ** (mp.mpf(d - 3) / 2) / mp.beta(mp.mpf(1) / 2, mp.mpf(d - 1) / 2)
            g = lambda r, t: mp.re(D2 * mp.exp(-s * S / 2 + 2 * A_ * r * r + B * mp.sqrt(S) * r * t))
            second = mp.quad(lambda r, t: chi(r) * tden(t) * g(r, t) ** 2, [0, 4, 12], [-1, 0, 1])
            direct, closed = second - 1, var1(A, s, d, S)
        checks.true(f"{name} A={A:.4g} s={s:+d} d={d} S={S}: direct {mp.nstr(direct, 12)} vs closed form "
                    f"{mp.nstr(closed, 12)}", abs(direct / closed - 1) < 1e-10)


def theorem_checks(checks):
    print("\n== (b) CRT Thm 4.1: Cov_0 <= 0 for s = +1 (orthogonal <= iid for PosRF, OPRF, any M); "
          "(c) simplex vs orthogonal")
    ds = (2, 3, 4, 5, 8, 16, 64, 128)
    Ss = (1e-8, 1e-3, 0.1, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 100.0, 300.0)
    worst_b, worst_c = -math.inf, -math.inf
    for d in ds:
        for S in Ss:
            c0 = cov(d, 0.0, 1, S, dps=30)
            cs = cov(d, cosine("simplex", d), 1, S, dps=30)
            worst_b = max(worst_b, float(c0))
            worst_c = max(worst_c, float(cs - c0))
    checks.true(f"s=+1: max over d in {ds}, S in {Ss} of Cov_0 = {worst_b:.3g} (<= 0)", worst_b <= 0)
    checks.true(f"s=+1: max of Cov_simplex - Cov_0 = {worst_c:.3g} (<= 0: simplex <= orthogonal)", worst_c <= 0)
    print("  TrigRF (s = -1): sign of Cov_0 and Cov_simplex - Cov_0 (+ means worse), per d over "
          f"S in {Ss}:")
    for d in ds:
        row0 = "".join("+" if cov(d, 0.0, -1, S, dps=30) > 0 else "-" for S in Ss)
        rows = "".join("+" if cov(d, cosine("simplex", d), -1, S, dps=30) > cov(d, 0.0, -1, S, dps=30) else "-"
                       for S in Ss)
        print(f"    d={d:3d}  Cov_0: {row0}   simplex - orthogonal: {rows}")


def table():
    print("\n== log(Var_coupled / Var_iid), M = d (one block), |z| = |x + s y|")
    zs = (0.1, 0.5, 1.0, 2.0, 4.0, 10.0)
    print(f"{'family':8} {'d':>3} {'sampler':10} " + " ".join(f"{'|z|=' + str(z):>10}" for z in zs))
    for name, (a_of, s) in FAMILIES.items():
        for d in (2, 8, 64):
            for sampler in ("orthogonal", "simplex"):
                vals = []
                for z in zs:
                    S = z * z
                    A = a_of(S, d)
                    vals.append(float(mp.log(var_m(A, s, d, S, d, sampler) / var_m(A, s, d, S, d, "iid"))))
                print(f"{name:8} {d:3d} {sampler:10} " + " ".join(f"{v:10.4f}" for v in vals))


def cpp_reference():
    """Reference values embedded in tests/coupled_variance_test.cpp: log|Cov_c/K^2| with its sign, and log(Var/K^2)
    of M-feature estimators, 20 significant digits."""
    print("// {d, c, s, S, sign, log|Cov/K^2|}")
    for d, c, s, S in [(2, 0.0, 1, 1.0), (2, -1.0, 1, 1.0), (2, -1.0, -1, 1.0), (3, 0.0, -1, 2.5), (8, -1 / 7, 1, 1e-12),
                       (8, -1 / 7, -1, 1e-6), (8, 0.0, 1, 1e-12), (8, 0.0, -1, 1e-6), (8, -1 / 7, 1, 30.0),
                       (8, -1 / 7, -1, 30.0), (64, 0.0, 1, 0.7), (64, -1 / 63, 1, 0.7), (64, -1 / 63, -1, 0.7),
                       (64, -1 / 63, 1, 200.0), (5, -0.25, -1, 300.0), (3, 0.0, -1, 300.0), (256, -1 / 255, 1, 3.0),
                       (64, 0.0, -1, 100.0), (8, -1 / 7, -1, 300.0)]:
        v = cov(d, c, s, S)
        sign = int(mp.sign(v))
        print(f"{{{d}, {c!r}, {s}, {S!r}, {sign}, {mp.nstr(mp.log(abs(v)), 20) if sign else '-kInf'}}},")
    print("// {family, d, M, sampler, S, log(Var/K^2)}")
    for name, d, M, sampler, S in [("oprf", 64, 64, "simplex", 1e-10), ("pos", 8, 20, "simplex", 0.5),
                                   ("trig", 8, 20, "orthogonal", 0.5), ("trig", 2, 2, "simplex", 1e-5),
                                   ("pos", 64, 64, "orthogonal", 144.0), ("trig", 5, 5, "simplex", 289.0),
                                   ("oprf", 8, 8, "orthogonal", 1e-12), ("trig", 64, 100, "simplex", 1e-4)]:
        a_of, s = FAMILIES[{"oprf": "OPRF", "pos": "PosRF", "trig": "TrigRF"}[name]]
        print(f"{{\"{name}\", {d}, {M}, \"{sampler}\", {S!r}, "
              f"{mp.nstr(mp.log(var_m(a_of(S, d), s, d, S, M, sampler)), 20)}}},")


def main():
    quick = "--quick" in sys.argv
    if "--cpp" in sys.argv:
        cpp_reference()
        return
    checks = Checks()
    if "--prototype" not in sys.argv:
        iid_checks(checks)
        theorem_checks(checks)
        table()
        monte_carlo(quick, checks)
    prototype(quick, checks)
    print(f"\n{checks.n} Monte Carlo checks at {K_SIGMAS} se: false-failure rate <= {checks.n * P_FAIL:.1e} "
          "(union bound, normal approximation); the exact checks cannot fail by chance.")
    if checks.failed:
        print("FAILED:\n  " + "\n  ".join(checks.failed))
        sys.exit(1)
    print("all checks passed")


if __name__ == "__main__":
    main()
