"""The exact variance of K-hat C, the predicted error of attention rows and the coupled-projection variance from Python
(Estimator.kc_variance, predict_attention, log_variance with sampler=, and quantity= in variance_study and sweep),
checked against a NumPy Monte Carlo built from the estimator's own draws and features, not kestrel's simulator.

Rule: an empirical variance (or MSE) over R draws lies within 4.5 of its standard errors (from the fourth moment) of
the exact value with two-sided normal probability 1 - 6.8e-6 per entry; over the 72 + 36 + 18 entries below the false-
failure rate is at most 8.6e-4 (union bound)."""
import numpy as np
import pytest

import kestrel

R = 3000


def sample_var_and_se(samples):
    """Per entry (axis 0 is the draw): sample variance and its standard error from the fourth central moment."""
    c = samples - samples.mean(axis=0)
    s2 = (c ** 2).mean(axis=0)
    m4 = (c ** 4).mean(axis=0)
    return s2 * len(samples) / (len(samples) - 1), np.sqrt(np.maximum(m4 - s2 ** 2, 0) / len(samples))


def khat(est, X, Y, M, r):
    """One draw's estimate of K(X, Y) from real features: f(w, x)/sqrt(M) per column, so K-hat = Fx Fy^T."""
    w = est.draw(M, seed=11, index=r)
    return est.features(w, X, "query") @ est.features(w, Y, "key").T


@pytest.fixture(scope="module")
def data():
    X, Y = kestrel.draw_regime("normal", 4, 12, 0.3, seed=2)
    V = np.random.default_rng(4).normal(size=(12, 2))
    return X, Y, V


@pytest.mark.parametrize("name", ["pos", "oprf", "sderf"])
def test_kc_variance_matches_numpy_monte_carlo(data, name):
    X, Y, C = data
    est, M = kestrel.fit(name, X, Y, layout="columns"), 4
    exact = est.kc_variance(X, Y, C, features=M)
    assert exact["log_var"].shape == (12, 2)
    np.testing.assert_allclose(exact["sign_kc"] * np.exp(exact["log_abs_kc"]), np.exp(X.T @ Y) @ C, rtol=1e-12)
    var, se = sample_var_and_se(np.stack([khat(est, X, Y, M, r) @ C for r in range(R)]))
    z = np.abs(var - np.exp(exact["log_var"])) / se
    assert z.max() < 4.5, f"{name}: worst z = {z.max():.2f}"


@pytest.mark.parametrize("name", ["pos", "oprf", "sderf"])
def test_predicted_attention_error_matches_numpy_monte_carlo(data, name):
    X, Y, V = data
    est, M = kestrel.fit(name, X, Y, layout="columns"), 512  # normaliser relative variance < 0.003
    p = est.predict_attention(X, Y, V, features=M)
    K = np.exp(X.T @ Y)
    np.testing.assert_allclose(p["Y"], K @ V / K.sum(axis=1, keepdims=True), rtol=1e-12)
    assert not p["outside"].any() and np.exp(p["log_rel_var"]).max() < 0.01
    err = []
    for r in range(R):
        Kh = khat(est, X, Y, M, r)
        err.append(np.sum((Kh @ V / Kh.sum(axis=1, keepdims=True) - p["Y"]) ** 2, axis=1))
    err = np.array(err)
    mse, se = err.mean(axis=0), err.std(axis=0, ddof=1) / np.sqrt(R)
    # The delta method's remainder is O(r) relative (r = the normaliser's relative variance < 0.01 here): allowed
    # on top of the Monte Carlo error as 2 r MSE.
    pred = np.exp(p["log_mse"])
    z = (np.abs(mse - pred) - 2 * np.exp(p["log_rel_var"]) * pred) / se
    assert z.max() < 4.5, f"{name}: worst z = {z.max():.2f}"


def test_families_without_a_closed_form_say_so(data):
    X, Y, C = data
    with pytest.raises(ValueError, match="'geom' has no closed-form"):
        kestrel.fit("geom", X, Y, layout="columns").kc_variance(X, Y, C)


def test_quantity_in_variance_study_and_sweep(tmp_path):
    opts = dict(dim=4, points=16, pairs=1, sigma=0.3, estimators=["oprf"], value_dim=2, features=512)
    kc = kestrel.variance_study(quantity="kc", **opts)
    att = kestrel.variance_study(quantity="attention", **opts)
    assert kc[0]["quantity"] == "kc" and kc[0]["n_pairs"] == 32
    assert att[0]["quantity"] == "attention" and att[0]["n_pairs"] == 16 and att[0]["n_flagged"] == 0
    swept = kestrel.sweep(str(tmp_path / "s.h5"), quantity="attention", **dict(opts, sigma=[0.3]))
    assert swept[0]["mean_log_var"] == att[0]["mean_log_var"]
    with pytest.raises(ValueError, match="did you mean 'attention'"):
        kestrel.variance_study(quantity="atention", **opts)
    with pytest.raises(ValueError, match="only used with quantity"):
        kestrel.variance_study(dim=4, points=16, pairs=1, value_dim=2)


@pytest.mark.parametrize("sampler", ["orthogonal", "simplex"])
def test_coupled_log_variance_matches_numpy_monte_carlo(sampler):
    """Exact variance with coupled projections (d = M = 4, one block) against the estimate from the estimator's own
    draws and features; the iid formula is rejected by the same draws (negative control)."""
    X, Y = kestrel.draw_regime("normal", 4, 3, 0.25, seed=7)  # light tails: the sample variance is trustworthy
    est, M, reps = kestrel.fit("pos", X, Y, layout="columns"), 4, 20000
    exact = est.log_variance(X, Y, features=M, sampler=sampler)
    samples = []
    for r in range(reps):
        w = est.draw(M, seed=13, sampler=sampler, index=r)
        samples.append(est.features(w, X, "query") @ est.features(w, Y, "key").T)
    var, se = sample_var_and_se(np.array(samples))
    assert (np.abs(var - np.exp(exact)) / se).max() < 4.5
    assert (np.abs(var - np.exp(est.log_variance(X, Y, features=M))) / se).max() > 4.5
    with pytest.raises(ValueError, match="sobol"):
        est.log_variance(X, Y, sampler="sobol")
