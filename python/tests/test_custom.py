"""Tests of estimators written in Python (kestrel.custom, python/bind_custom.cpp): certification accepts correct
estimators and rejects biased ones, registered estimators run in variance_study/sweep next to built-in ones with the
same numbers, independent of the thread count, and bad callbacks give a ValueError naming the estimator and method.

False-failure rate: the Monte Carlo tests that a correct estimator must pass here, each at 4.5 SE (P = 6.8e-6 per
test): PyPos 16 entries x 3 M x 2 (mean, variance) = 96, simplex 48 + 32 (d = 6), the unbiasedness of WrongVarPos and
of 'none-variance' 48 + 48: 272 tests, <= 1.9e-3 in all (union bound), plus the two loose empirical-variance checks
(0.25 in a mean log against a standard error near 0.05). Seeds are fixed, so a run is deterministic. The rejections
are by z-scores in the tens, far from the threshold.
"""
import importlib.util
import os
import pickle

import numpy as np
import pytest

import kestrel
import kestrel.custom

HERE = os.path.dirname(os.path.abspath(__file__))


def small_pair(d=3, L=4, scale=0.3):
    rng = np.random.default_rng(11)
    return scale * rng.standard_normal((d, L)), scale * rng.standard_normal((d, L))


class PyPos(kestrel.custom.Estimator):
    """PosRF in NumPy with its exact variance: Var/K^2 = exp(|x+y|^2) - 1 for one feature."""

    name, label, positive = "py-pos", "PosRF (Python)", True

    def draw(self, M, rng):
        return rng.standard_normal((self.d, M))

    def features(self, omega, X, side):
        return np.exp(omega.T @ X - 0.5 * np.sum(X * X, axis=0)).T

    def log_var_over_k2(self, X, Y):
        s = X[:, :, None] + Y[:, None, :]
        return np.log(np.expm1(np.sum(s * s, axis=0)))


class NoNormPos(PyPos):
    """Biased: the exp(-|x|^2/2) factor is missing."""

    name = "py-pos-nonorm"

    def features(self, omega, X, side):
        return np.exp(omega.T @ X).T


class WrongVarPos(PyPos):
    """Unbiased, but its 'exact' variance forgets the -1."""

    name = "py-pos-wrongvar"

    def log_var_over_k2(self, X, Y):
        s = X[:, :, None] + Y[:, None, :]
        return np.sum(s * s, axis=0)


def load_example():
    path = os.path.join(HERE, "..", "examples", "simplex_prf.py")
    spec = importlib.util.spec_from_file_location("simplex_prf", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


SimplexPosRF = load_example().SimplexPosRF
kestrel.custom.register(PyPos)
kestrel.custom.register(SimplexPosRF)


# ---- certification ------------------------------------------------------------------------------------------------


def test_certify_accepts_pos_with_its_exact_variance():
    X, Y = small_pair()
    report = kestrel.custom.certify(PyPos, X, Y, reps=5000)
    assert report.passed, str(report)
    assert [c.name for c in report.checks] == ["shapes", "determinism", "unbiased", "exact variance"]
    assert report.n_tests == 96 and report.false_failure_rate == pytest.approx(96 * 6.8e-6)
    assert "false-failure rate" in str(report)


def test_exact_variance_equals_builtin_pos():
    X, Y = small_pair(d=5, L=7, scale=0.8)
    mine = kestrel.custom.wrap(PyPos(5)).log_var_over_k2(X, Y, features=3)
    builtin = kestrel.fit("pos", X, Y).log_var_over_k2(X, Y, features=3)
    np.testing.assert_allclose(mine, builtin, rtol=1e-12)


def test_certify_rejects_missing_norm_factor():
    X, Y = small_pair()
    report = kestrel.custom.certify(NoNormPos, X, Y, reps=5000)
    assert not report.passed
    bad = report["unbiased"]
    assert not bad.passed and "biased at M = 1" in bad.message and "z = " in bad.message
    assert len(bad.details["entries"]) == 16  # every entry, far outside 4.5 SE
    assert "FAIL unbiased" in str(report)


def test_certify_rejects_wrong_exact_variance():
    X, Y = small_pair()
    report = kestrel.custom.certify(WrongVarPos, X, Y, reps=5000)
    assert report["unbiased"].passed and not report["exact variance"].passed
    assert "MC variance" in report["exact variance"].message


def test_simplex_example_certifies_unbiased():
    X, Y = small_pair()  # d = 3: M = 3 is one full simplex block, M = 1, 2 partial ones
    report = kestrel.custom.certify(SimplexPosRF, X, Y, reps=5000)
    assert report.passed, str(report)
    assert "not given" in report["exact variance"].message
    X, Y = small_pair(d=6)  # one and two full blocks at d = 6
    report = kestrel.custom.certify(SimplexPosRF, X, Y, reps=5000, features=(6, 12))
    assert report.passed, str(report)


def test_simplex_draw_is_a_rotated_scaled_simplex():
    w = SimplexPosRF(6).draw(12, np.random.default_rng(0))
    u = w / np.linalg.norm(w, axis=0)
    for block in (u[:, :6], u[:, 6:]):
        np.testing.assert_allclose(block.T @ block, np.where(np.eye(6) > 0, 1.0, -1 / 5), atol=1e-12)


def test_certify_refuses_bad_input():
    X, Y = small_pair()
    with pytest.raises(ValueError, match="same d"):
        kestrel.custom.certify(PyPos, X, Y[:2])
    with pytest.raises(ValueError, match="subclass"):
        kestrel.custom.certify(object, X, Y)


# ---- registry, studies, threads -----------------------------------------------------------------------------------

STUDY = dict(regime="normal", sigma=[0.3, 0.6], dim=4, points=40, pairs=2, seed=3)


def test_registered_estimator_runs_next_to_pos_with_the_same_exact_numbers():
    assert "py-pos" in kestrel.estimators() and "py-pos" in kestrel.custom.registered()
    rows = kestrel.variance_study(estimators=["pos", "py-pos"], **STUDY)
    for a, b in zip(rows[0::2], rows[1::2]):
        assert (a["estimator"], b["estimator"], b["status"]) == ("pos", "py-pos", "ok")
        assert "variance" not in b  # exact
        for key in ("mean_log_var", "std_log_var", "mean_log_rel_var", "mean_log_kernel"):
            assert b[key] == pytest.approx(a[key], rel=1e-12, abs=1e-12), key


def test_estimator_without_variance_gets_an_empirical_one():
    rows = kestrel.variance_study(estimators=["pos", "simplex-pos"], features=4, mc_points=16, **STUDY)
    simplex = [r for r in rows if r["estimator"] == "simplex-pos"]
    assert all(r["status"] == "ok" and r["variance"] == "empirical" for r in simplex)
    assert simplex[0]["empirical_reps"] == 1000 and simplex[0]["empirical_points"] == 16
    assert simplex[0]["n_pairs"] == 2 * 16 * 16



class PosNoVariance(PyPos):
    name, log_var_over_k2 = "py-pos-novar", None


def test_empirical_variance_agrees_with_the_exact_one():
    # The same 16 x 16 pairs: PosRF's empirical variance (1000 draws) next to its exact one. Tolerance 0.25 in the mean
    # log: with these light tails a log sample variance has a standard error of about sqrt(2 / 1000) = 0.045.
    kestrel.custom.register(PosNoVariance)
    opts = dict(STUDY, points=16, mc_points=16, features=2)
    exact, empirical = kestrel.variance_study(estimators=["pos", "py-pos-novar"], **opts)[:2]
    assert "variance" not in exact and empirical["variance"] == "empirical"
    assert exact["n_pairs"] == empirical["n_pairs"] == 2 * 16 * 16
    assert abs(empirical["mean_log_var"] - exact["mean_log_var"]) < 0.25


def test_results_identical_for_any_thread_count():
    opts = dict(STUDY, estimators=["py-pos", "simplex-pos"], features=3, points=300, mc_points=20)
    before = kestrel.threads()
    try:
        kestrel.set_threads(1)
        one = kestrel.variance_study(**opts)
        kestrel.set_threads(2)
        two = kestrel.variance_study(**opts)
    finally:
        kestrel.set_threads(0)
    assert one == two and before >= 1


def test_sweep_takes_a_python_estimator(tmp_path):
    rows = kestrel.sweep(str(tmp_path / "s.h5"), estimators=["py-pos", "simplex-pos"], sigma=[0.5], dim=[3],
                         points=[16], features=[1, 3], pairs=1)
    assert len(rows) == 4 and all(r["status"] == "ok" for r in rows)
    assert (tmp_path / "s.h5").exists()


def test_fit_pickle_and_restore():
    X, Y = small_pair()
    e = kestrel.fit("py-pos", X, Y)
    assert e.name == "py-pos" and e.positive and e.dim == 3
    back = pickle.loads(pickle.dumps(e))
    w = e.draw(5, seed=2)
    np.testing.assert_array_equal(back.features(w, X), e.features(w, X))
    assert e.params() == {}


def test_registration_refuses_builtin_and_duplicate_names():
    class Clash(PyPos):
        name = "pos"

    with pytest.raises(ValueError, match="built-in"):
        kestrel.custom.register(Clash)
    with pytest.raises(ValueError, match="already registered"):
        kestrel.custom.register(PyPos)
    kestrel.custom.register(PyPos, replace=True)  # a re-run notebook cell
    with pytest.raises(ValueError, match="must define draw"):
        kestrel.custom.register(type("NoDraw", (kestrel.custom.Estimator,), {"name": "nodraw"}))


# ---- bad callbacks: a ValueError naming the estimator and the method, never a crash or a hang ----------------------


def broken(name, **methods):
    cls = type(name, (PyPos,), dict(name=name, **methods))
    kestrel.custom.register(cls)
    return cls


def _raise(*args):
    raise RuntimeError("boom")


BROKEN = [
    ("bad-draw-shape", dict(draw=lambda self, M, rng: rng.standard_normal((M, self.d + 1))), r"draw\(\) must return"),
    ("bad-feature-shape", dict(features=lambda self, omega, X, side: np.ones((X.shape[1], 2 * omega.shape[1]))),
     r"features\(\) must return a \d+ x \d+"),
    ("nan-features", dict(features=lambda self, omega, X, side: np.full((X.shape[1], omega.shape[1]), np.nan)),
     r"features\(\) returned NaN"),
    ("raising-features", dict(features=_raise), r"features\(\) raised RuntimeError: boom"),
    ("raising-draw", dict(draw=_raise), r"draw\(\) raised RuntimeError: boom"),
    ("none-variance", dict(log_var_over_k2=lambda self, X, Y: None), r"log_var_over_k2\(\) must return .* got a NoneType"),
    ("negative-features", dict(features=lambda self, omega, X, side: -np.ones((X.shape[1], omega.shape[1]))),
     r"features\(\) returned -1 but .*positive = True"),
    ("raising-fit", dict(fit=classmethod(_raise)), r"fit\(\) raised RuntimeError: boom"),
]


@pytest.mark.parametrize("name,methods,message", BROKEN, ids=[b[0] for b in BROKEN])
def test_bad_callbacks_are_value_errors(name, methods, message):
    broken(name, **methods)
    # Through the studies (TBB threads, L > 256 so features are computed in parallel blocks) ...
    with pytest.raises(ValueError, match=f"estimator '{name}': {message}"):
        kestrel.variance_study(estimators=[name], regime="normal", sigma=[0.5], dim=3, points=300, pairs=1, mc=8,
                               mc_points=300)
    # ... and through certification, which reports the failing check.
    if name != "raising-fit":
        report = kestrel.custom.certify(kestrel.custom.registered()[name](3), *small_pair(), reps=100)
        assert not report.passed and f"estimator '{name}'" in str(report)


def test_wrapped_estimator_without_variance_says_so():
    e = kestrel.custom.wrap(SimplexPosRF(3))
    with pytest.raises(ValueError, match="'simplex-pos' has no exact variance"):
        e.log_var_over_k2(*small_pair())
