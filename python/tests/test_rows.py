"""Row samples of Estimator.kc_variance and predict_attention (rows=, seed=): sampled rows equal the same rows of the
full computation (to 1e-12 relative; the two differ only in BLAS shapes), for positive and trigonometric families; a
sampled OPRF row equals the second moment written from the definition in NumPy; invalid rows are ValueErrors naming
the value. Deterministic: no Monte Carlo here (test_operator.py checks the exact values against simulation)."""
import numpy as np
import pytest

import kestrel

L = 300


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(5)
    X, Y = 0.5 * rng.normal(size=(6, L)), 0.5 * rng.normal(size=(6, L))
    V = rng.normal(size=(L, 3))
    return X, Y, V


def close_logs(a, b, tol=1e-12):
    a, b = np.asarray(a), np.asarray(b)
    assert a.shape == b.shape and not np.isnan(a).any()
    finite = np.isfinite(a) & np.isfinite(b)
    assert np.array_equal(np.isfinite(a), np.isfinite(b))
    assert np.abs(a[finite] - b[finite]).max(initial=0) <= tol


@pytest.mark.parametrize("name", ["pos", "oprf", "sderf", "trig", "gerf"])
def test_sampled_rows_equal_full_rows(data, name):
    X, Y, V = data
    est = kestrel.fit(name, X, Y, layout="columns")
    C = np.hstack([V, np.ones((L, 1))])
    full = est.kc_variance(X, Y, C, features=3)
    some = est.kc_variance(X, Y, C, features=3, rows=40, seed=7)
    rows = some["rows"]
    assert len(rows) == 40 and np.array_equal(rows, np.unique(rows)) and some["seed"] == 7
    assert np.array_equal(full["rows"], np.arange(L)) and full["seed"] is None
    for key in ("log_var", "log_abs_kc"):
        close_logs(some[key], full[key][rows])
    pf = est.predict_attention(X, Y, V, features=3)
    ps = est.predict_attention(X, Y, V, features=3, rows=rows[::-1].copy())  # an explicit array, in its own order
    assert np.array_equal(ps["rows"], rows[::-1]) and ps["seed"] is None
    for key in ("log_mse", "log_rel_var", "log_norm_y"):
        close_logs(ps[key], pf[key][rows[::-1]])
    assert np.abs(ps["Y"] - pf["Y"][rows[::-1]]).max() <= 1e-12 * (1 + np.abs(pf["Y"]).max())
    # The same seed gives the same rows; 'all' and None are every row.
    assert np.array_equal(est.kc_variance(X, Y, C, rows=40, seed=7)["rows"], rows)
    assert np.array_equal(est.predict_attention(X, Y, V, rows="all")["rows"], np.arange(L))


def test_sampled_oprf_rows_match_the_definition(data):
    """OPRF (CRT 3.3): f(w, x) = D exp(A|w|^2 + B w.x - |x|^2/2), B = sqrt(1-4A), D = (1-4A)^(d/4), w ~ N(0, I). Then
    E[f(x)^2 f(y_j) f(y_k)] = D^4 (1-8A)^(-d/2) exp(-|x|^2 - (|y_j|^2+|y_k|^2)/2 + (1-4A)|2x+y_j+y_k|^2 / (2(1-8A))),
    Var (K-hat C)_ia = (sum_jk C_ja C_ka E[...] - (KC)_ia^2) / M."""
    X, Y, V = data
    est = kestrel.fit("oprf", X, Y, layout="columns")
    A, d, M = est.params()["A_re"], X.shape[0], 5
    some = est.kc_variance(X, Y, V, features=M, rows=6, seed=2)
    y2 = (Y * Y).sum(0)
    for r, i in enumerate(some["rows"]):
        x = X[:, i]
        S = 4 * x @ x + y2[:, None] + y2[None, :] + 4 * (x @ Y)[:, None] + 4 * (x @ Y)[None, :] + 2 * Y.T @ Y
        logT = d * np.log(1 - 4 * A) - d / 2 * np.log(1 - 8 * A) - x @ x - (y2[:, None] + y2[None, :]) / 2 \
            + (1 - 4 * A) * S / (2 * (1 - 8 * A))
        second = np.einsum("ja,jk,ka->a", V, np.exp(logT), V)
        kc = np.exp(x @ Y) @ V
        np.testing.assert_allclose(some["log_var"][r], np.log((second - kc ** 2) / M), rtol=0, atol=1e-9)


@pytest.mark.parametrize("rows, word", [(0, "got 0"), (-3, "got -3"), (L + 1, f"got {L + 1}"), (2.5, "2.5"),
                                        ("some", "'some'"), (True, "True"), ([1, 5, 1], "1 is repeated"),
                                        (np.array([0, L]), f"{L} is out of range"), ([-1], "-1 is negative"),
                                        (np.array([1.0, 2.0]), "integers"), ([], "empty")])
def test_invalid_rows_name_the_value(data, rows, word):
    X, Y, V = data
    est = kestrel.fit("pos", X, Y, layout="columns")
    with pytest.raises(ValueError, match=word.replace("[", r"\[")):
        est.kc_variance(X, Y, V, rows=rows)
    with pytest.raises(ValueError, match=word.replace("[", r"\[")):
        est.predict_attention(X, Y, V, rows=rows)
