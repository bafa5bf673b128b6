"""Tests of the Python module `kestrel` (python/kestrel_py.cpp): results identical to the library and the
`kestrel` command line, zero-copy conversions, error mapping, and Monte Carlo agreement with the exact variance.
Run by ctest (`python`) with PYTHONPATH=build/python and KESTREL_CLI=build/bin/kestrel."""
import json
import os
import subprocess
import threading
import time

import numpy as np
import pytest

import kestrel

CLI = os.environ.get("KESTREL_CLI", "")
needs_cli = pytest.mark.skipif(not CLI, reason="KESTREL_CLI (the kestrel command line) not given")


def normal_pair(d=4, L=6, sigma=0.5, seed=1):
    return kestrel.draw_regime("normal", d, L, sigma, seed=seed)


# ---- registry and identity with the command line ---------------------------------------------------------------


def test_lists():
    assert {"oprf", "sderf", "trig", "pos"} <= set(kestrel.estimators())
    assert {"normal", "mnist", "file"} <= set(kestrel.regimes())
    assert "crt-fig1" in kestrel.experiments()


@needs_cli
def test_estimator_names_match_cli():
    out = subprocess.run([CLI, "estimators"], check=True, capture_output=True, text=True).stdout
    import kestrel.custom  # estimators registered from Python (test_custom.py) are not the command line's
    mine = [n for n in kestrel.estimators() if n not in kestrel.custom.registered()]
    assert [line.split()[0] for line in out.splitlines()] == mine


VARIANCE = dict(regime="normal", sigma=[0.5, 1.0], dim=8, points=48, pairs=2, seed=3,
                estimators=["trig", "oprf", "sderf"], kernel="gaussian")


def cli_variance(opts):
    cmd = [CLI, "variance", "--regime", opts["regime"], "--sigma", ",".join(map(str, opts["sigma"])),
           "--dim", str(opts["dim"]), "--points", str(opts["points"]), "--pairs", str(opts["pairs"]),
           "--seed", str(opts["seed"]), "--estimators", ",".join(opts["estimators"]), "--kernel", opts["kernel"],
           "--json", "--quiet"]
    return json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)["results"]


@needs_cli
def test_variance_study_identical_to_cli():
    # nlohmann::json prints doubles with round-trip precision, so equality is exact.
    assert kestrel.variance_study(**VARIANCE) == cli_variance(VARIANCE)


@needs_cli
def test_building_blocks_reproduce_cli():
    # The same numbers from the pieces: draw the set pair, fit, exact log-variance over all pairs.
    opts = dict(VARIANCE, pairs=1)
    cli = cli_variance(opts)
    for r in cli:
        X, Y = kestrel.draw_regime(opts["regime"], opts["dim"], opts["points"], r["sigma"], seed=opts["seed"])
        e = kestrel.fit(r["estimator"], X, Y)
        assert e.params() == r["params"][0]
        lv = e.log_variance(X, Y, kernel=opts["kernel"])
        lk = kestrel.log_kernel(X, Y, kernel=opts["kernel"])
        assert lv.shape == (opts["points"], opts["points"]) and np.isfinite(lv).all()
        # The library streams the mean in blocks, NumPy sums in another order: rounding only.
        assert np.mean(lv) == pytest.approx(r["mean_log_var"], rel=1e-12, abs=1e-12)
        assert np.mean(lv - lk) == pytest.approx(r["mean_log_rel_var"], rel=1e-12, abs=1e-12)
        s = e.summarize_variance(X, Y, kernel=opts["kernel"])
        assert s["mean_log_var"] == r["mean_log_var"] and s["std_log_var"] == r["std_log_var"]


# ---- estimator methods agree with each other -----------------------------------------------------------------


@pytest.mark.parametrize("name", ["trig", "trig-real", "oprf", "sderf", "hrf-angular"])
def test_feature_maps_and_kernels(name):
    X, Y = normal_pair(d=5, L=7, sigma=0.6)
    e = kestrel.fit(name, X, Y)
    w = e.draw(16, seed=5)
    assert np.array_equal(w.omega, e.draw(16, seed=5).omega)
    assert not np.array_equal(w.omega, e.draw(16, seed=6).omega)
    P, S = e.features(w, X, "query"), e.features(w, Y, "key")
    K = e.approximate_kernel(w, X, Y)
    np.testing.assert_allclose(K, P @ S.T, rtol=1e-12, atol=0)
    g = "gaussian"
    Pg = e.feature_map(w, X, "query", g)
    np.testing.assert_allclose(Pg, P * np.exp(-0.5 * np.sum(X**2, axis=0))[:, None], rtol=1e-12, atol=0)
    C = np.asfortranarray(np.arange(14.0).reshape(7, 2))
    np.testing.assert_allclose(e.approximate_kernel_times(w, X, Y, C, g), e.approximate_kernel(w, X, Y, g) @ C,
                               rtol=1e-10, atol=1e-14)
    # log Var = log(Var/K^2) + 2 log K, per kernel.
    np.testing.assert_allclose(e.log_variance(X, Y, g, features=4),
                               e.log_var_over_k2(X, Y, features=4) + 2 * kestrel.log_kernel(X, Y, g), rtol=1e-12)
    assert isinstance(e.params(), (dict, list))


# ---- copies ------------------------------------------------------------------------------------------------------


def test_fortran_float64_input_is_not_copied():
    X = np.asfortranarray(np.random.default_rng(0).normal(size=(4, 6)))
    assert kestrel._input_address(X) == X.ctypes.data
    X.setflags(write=False)
    assert kestrel._input_address(X) == X.ctypes.data
    # C order, float32 and a strided view are copied once into Fortran order (and still work).
    for other in (np.ascontiguousarray(X), X.astype(np.float32), np.asfortranarray(np.zeros((4, 12)))[:, ::2]):
        assert kestrel._input_address(other) != other.ctypes.data
    e = kestrel.fit("oprf", X, X[:, ::-1])
    np.testing.assert_array_equal(e.log_variance(X, X), e.log_variance(np.ascontiguousarray(X), X.tolist()))


def test_results_are_not_copied():
    X, Y = normal_pair()
    e = kestrel.fit("oprf", X, Y)
    for r in (e.log_variance(X, Y), X, Y, kestrel.simulate(e, X, Y, reps=8)["kernel"]["variance"]):
        # The array views the moved Armadillo matrix owned by a capsule; Fortran order, so passing it back
        # into kestrel costs no copy either.
        assert type(r.base).__name__ == "PyCapsule" and not r.flags.owndata
        assert r.flags.f_contiguous and kestrel._input_address(r) == r.ctypes.data
    w = e.draw(8, seed=1)
    a, b = w.omega, w.omega
    assert a.base is w and np.shares_memory(a, b)  # a view into the Draw object
    w2 = kestrel.Draw(a)
    assert not np.shares_memory(w2.omega, a) and np.array_equal(w2.omega, a)


def test_a_draw_has_one_meaning_per_field():
    # Projections in omega, the discrete families' counts in counts, a hybrid's parts in omega, omega_trig and tau;
    # each rebuilt from its fields (and pickled) gives the same features.
    import pickle
    X, Y = normal_pair(d=4, L=6)
    pois, hyb = kestrel.fit("pois", X, Y), kestrel.fit("hrf-gauss", X, Y)
    w = pois.draw(5, seed=1)
    assert w.omega.size == 0 and w.counts.shape == (4, 5) and w.count == 5
    assert np.all(w.counts == np.floor(w.counts)) and w.counts.min() >= 0
    for again in (kestrel.Draw(counts=w.counts), pickle.loads(pickle.dumps(w))):
        assert np.array_equal(pois.features(again, X), pois.features(w, X))
    h = hyb.draw(3, seed=2)
    assert h.omega.shape == (4, 3) and h.count == 3 and h.tau.shape[0] == 4 and h.counts.size == 0
    again = kestrel.Draw(h.omega, omega_trig=h.omega_trig if h.omega_trig.size else None, tau=h.tau)
    assert np.array_equal(hyb.features(again, X), hyb.features(h, X))
    assert np.array_equal(hyb.features(pickle.loads(pickle.dumps(h)), X), hyb.features(h, X))
    with pytest.raises(ValueError, match="does not match hybrid"):
        hyb.features(kestrel.Draw(h.omega), X)


# ---- bad input -------------------------------------------------------------------------------------------------


def test_errors_are_mapped_with_message():
    with pytest.raises(ValueError, match="boom"):
        kestrel._raise("invalid", "boom")
    with pytest.raises(ArithmeticError, match="overflow here"):
        kestrel._raise("numerical", "overflow here")
    with pytest.raises(OSError, match="no disk"):
        kestrel._raise("io", "no disk")


def test_bad_input():
    X, Y = normal_pair()
    e = kestrel.fit("oprf", X, Y)
    with pytest.raises(ValueError, match="unknown estimator 'nope'"):
        kestrel.fit("nope", X, Y)
    bad = X.copy(order="F")
    bad[0, 0] = np.nan
    with pytest.raises(ValueError, match="X"):
        kestrel.fit("oprf", bad, Y)
    with pytest.raises(ValueError, match="X"):
        e.log_variance(bad, Y)
    with pytest.raises(ValueError):
        kestrel.fit("oprf", X, Y[:3])  # mismatched dimensions
    with pytest.raises(ValueError, match="2-D"):
        e.log_variance(X[:, 0], Y)
    with pytest.raises(ValueError):
        kestrel.fit("oprf", np.zeros((4, 0)), Y)  # empty set
    with pytest.raises(ValueError, match="sigma must be > 0, got -1"):
        kestrel.draw_regime("normal", 4, 6, -1.0)
    with pytest.raises(ValueError, match="unknown regime"):
        kestrel.draw_regime("nope", 4, 6, 1.0)
    with pytest.raises(ValueError, match="kernel"):
        e.log_variance(X, Y, kernel="nope")
    with pytest.raises(ValueError, match="side"):
        e.features(e.draw(4, seed=1), X, "nope")
    with pytest.raises(ValueError, match="draw"):
        e.features(kestrel.Draw(np.ones((3, 4))), X)  # draw of the wrong dimension
    with pytest.raises(ValueError, match="phases"):
        kestrel.fit("trig-real", X, Y).features(e.draw(4, seed=1), X)  # cos form needs phases
    with pytest.raises(ValueError, match="features must be an integer >= 1, got 0"):
        e.draw(0, seed=1)
    with pytest.raises(ValueError, match="at least 4 repetitions"):
        kestrel.simulate(e, X, Y, reps=2)
    with pytest.raises(ValueError, match="C must"):
        kestrel.simulate(e, X, Y, reps=8, C=np.ones((5, 2)))
    with pytest.raises(OSError, match="cannot open"):
        kestrel.load_points_file("/nonexistent/points.txt")
    with pytest.raises(ValueError, match="unknown"):
        kestrel.reproduce("nope", "/tmp")
    with pytest.raises(ValueError):
        kestrel.variance_study(sigma=[0.5], dim=4, points=8, pairs=0)


# ---- Monte Carlo against the exact variance --------------------------------------------------------------------

K_SE = 4.5  # two-sided normal tail P(|z| > 4.5) = 6.8e-6 per check


@pytest.mark.parametrize("name", ["oprf", "sderf"])
def test_monte_carlo_agrees_with_exact_variance(name):
    # 6 x 6 entries, mean and variance each: 72 checks per estimator, 144 in all, so the false-failure rate is
    # below 144 * 6.8e-6 = 1e-3 (union bound, normal approximation of the sample mean and variance at R = 4000).
    X, Y = normal_pair(d=4, L=6, sigma=0.5, seed=11)
    e = kestrel.fit(name, X, Y)
    r = kestrel.simulate(e, X, Y, kernel="gaussian", reps=4000, features=2, seed=7)
    k = r["kernel"]
    exact_var = np.exp(e.log_variance(X, Y, "gaussian", features=2))
    np.testing.assert_allclose(k["exact"], np.exp(kestrel.log_kernel(X, Y, "gaussian")), rtol=1e-12)
    z_mean = np.abs(k["mean"] - k["exact"]) / k["se_mean"]
    z_var = np.abs(k["variance"] - exact_var) / k["se_variance"]
    assert z_mean.max() < K_SE, f"seed 7: max |z| of the mean {z_mean.max()}"
    assert z_var.max() < K_SE, f"seed 7: max |z| of the variance {z_var.max()}"
    # Negative control: a variance formula 25% off is rejected by the same threshold.
    assert (np.abs(k["variance"] - 1.25 * exact_var) / k["se_variance"]).max() > K_SE
    # Determined by the seed.
    again = kestrel.simulate(e, X, Y, kernel="gaussian", reps=4000, features=2, seed=7)
    assert np.array_equal(again["kernel"]["variance"], k["variance"])
    assert r["reps"] == 4000 and r["features"] == 2 and r["kernel_times"] is None


def test_monte_carlo_kernel_times():
    X, Y = normal_pair(seed=2)
    e = kestrel.fit("pos", X, Y)
    C = np.asfortranarray(np.random.default_rng(1).normal(size=(6, 3)))
    r = kestrel.simulate(e, X, Y, reps=16, seed=3, C=C)
    kt = r["kernel_times"]
    np.testing.assert_allclose(kt["exact"], np.exp(kestrel.log_kernel(X, Y)) @ C, rtol=1e-10)
    assert kt["mean"].shape == (6, 3) and np.isfinite(kt["variance"]).all()


def test_long_computations_release_the_gil():
    # While the worker thread is inside simulate (about a second), the main thread keeps running 1 ms sleeps.
    # Were the GIL held, it could not resume until simulate returned: at most a couple of ticks.
    X, Y = kestrel.draw_regime("normal", 16, 64, 0.5, seed=1)
    e = kestrel.fit("oprf", X, Y)
    inside = threading.Event()

    def work():
        inside.set()
        kestrel.simulate(e, X, Y, reps=12000, features=4, seed=1)

    t = threading.Thread(target=work)
    t.start()
    inside.wait()
    ticks, t0 = 0, time.monotonic()
    while t.is_alive():
        time.sleep(0.001)
        ticks += 1
    t.join()
    assert ticks >= 20, f"{ticks} main-thread ticks during {time.monotonic() - t0:.2f} s of simulate"


# ---- reproductions ---------------------------------------------------------------------------------------------


def test_reproduce_writes_files(tmp_path):
    claims = kestrel.reproduce("crt-fig1", str(tmp_path), quick=True, seed=1)
    assert claims and all(np.isfinite(c["measured"]) for c in claims)
    with open(tmp_path / "crt-fig1.claims.json") as f:
        assert json.load(f)["claims"] == claims
    assert (tmp_path / "crt-fig1.h5").stat().st_size > 0 and (tmp_path / "crt-fig1.png").exists()
