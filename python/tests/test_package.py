"""Tests of the package around the compiled module (issue #16 items 1, 2, 4): pickling of fitted estimators and draws
for every family, kestrel.restore, set_threads, versions, the scikit-learn transformer (estimator checks, unbiased
kernel, Pipeline, pickling) and the pandas readers (kestrel.results)."""
import os
import pickle

import numpy as np
import pytest

import kestrel

import kestrel.custom  # noqa: E402

# The built-in families with a variance (other test modules may have registered Python ones: tested in test_custom).
FAMILIES = [n for n in kestrel.estimators() if not n.startswith("luna") and n not in kestrel.custom.registered()]


def pair(d=5, L=12, sigma=0.4, seed=2):
    return kestrel.draw_regime("normal", d, L, sigma, seed=seed)


@pytest.mark.skipif(not os.environ.get("KESTREL_INSTALLED"), reason="run by scripts/test-python-package.sh")
def test_the_installed_package_is_the_one_imported():
    # scripts/test-python-package.sh runs these tests against `pip install .` in a fresh venv, not the build tree.
    assert "site-packages" in kestrel.__file__ and "/build/" not in kestrel._kestrel.__file__, kestrel.__file__


# ---- pickling, restore, threads, versions -------------------------------------------------------------------------


@pytest.mark.parametrize("name", FAMILIES)
def test_every_family_pickles_bit_for_bit(name):
    X, Y = pair()
    e = kestrel.fit(name, X, Y)
    r = pickle.loads(pickle.dumps(e))
    assert r.name == name and r.dim == e.dim and r.params() == e.params()
    assert np.array_equal(r.log_var_over_k2(X, Y), e.log_var_over_k2(X, Y))
    w = e.draw(kestrel.draws_for_budget(name, 16), 5, "iid")
    v = pickle.loads(pickle.dumps(w))
    for side in ("query", "key"):
        assert np.array_equal(r.features(v, X, side), e.features(w, X, side))
    assert kestrel.restore(e.state()).state() == e.state()


def test_a_damaged_state_is_a_value_error():
    e = kestrel.fit("sderf", *pair())
    with pytest.raises(ValueError, match="JSON"):
        kestrel.restore("{not json")
    with pytest.raises(ValueError, match="'family'"):
        kestrel.restore("{}")
    with pytest.raises(ValueError, match="no field 'B1'"):
        kestrel.restore(e.state().replace('"B1"', '"B9"'))
    with pytest.raises(ValueError, match="unknown estimator|did you mean"):
        kestrel.restore(e.state().replace('"family":"sderf"', '"family":"sdref"'))


def test_results_do_not_depend_on_the_thread_count():
    X, Y = kestrel.draw_regime("normal", 16, 300, 0.5, seed=4)
    e = kestrel.fit("oprf", X, Y)
    out = []
    for n in (1, 2):
        kestrel.set_threads(n)
        assert kestrel.threads() == n
        out.append((e.log_var_over_k2(X, Y), kestrel.simulate(e, X[:, :8], Y[:, :8], reps=64, features=3, seed=1)["kernel"]))
    kestrel.set_threads(0)
    assert np.array_equal(out[0][0], out[1][0])
    assert all(np.array_equal(out[0][1][k], out[1][1][k]) for k in ("mean", "variance"))
    with pytest.raises(ValueError, match="-1"):
        kestrel.set_threads(-1)


def test_versions():
    v = kestrel.versions()
    assert v["kestrel"] == kestrel.__version__
    assert len(v["git_revision"]) >= 7
    assert {"armadillo", "hdf5"} <= {k.lower() for k in v["libraries"]}


# ---- scikit-learn ---------------------------------------------------------------------------------------------------

sklearn = pytest.importorskip("sklearn")
from sklearn.utils.estimator_checks import check_estimator  # noqa: E402

from kestrel.sklearn import RandomFeatures  # noqa: E402


@pytest.mark.parametrize("estimator", ["oprf", "sderf"])
def test_passes_the_scikit_learn_estimator_checks(estimator):
    check_estimator(RandomFeatures(estimator=estimator, n_features=32, random_state=0))


@pytest.mark.parametrize("estimator,kernel", [("oprf", "gaussian"), ("sderf", "softmax"), ("trig-real", "gaussian")])
def test_inner_products_estimate_the_kernel_without_bias(estimator, kernel):
    # Mean over R draws of Phi(x) . Phi(y) against the exact kernel at 6 x 6 pairs, |z| < 4.5 per entry:
    # false-failure rate <= 36 * 6.8e-6 = 2.4e-4 per case (union bound; seeds fixed, so a run is reproducible).
    rng = np.random.default_rng(3)
    X, Y = rng.normal(size=(6, 4)) * 0.4, rng.normal(size=(6, 4)) * 0.4
    gamma, R = 0.3, 400
    est = []
    for s in range(R):
        rf = RandomFeatures(estimator=estimator, n_features=8, kernel=kernel, gamma=gamma, random_state=s)
        rf.fit(np.vstack([X, Y]))
        est.append(rf.transform(X) @ rf.transform(Y).T)
    est = np.array(est)
    if kernel == "gaussian":
        exact = np.exp(-gamma * ((X[:, None, :] - Y[None, :, :]) ** 2).sum(-1))
    else:
        exact = np.exp(2 * gamma * X @ Y.T)
    z = (est.mean(0) - exact) / (est.std(0, ddof=1) / np.sqrt(R))
    assert np.abs(z).max() < 4.5, z


def test_refuses_maps_that_differ_by_side_and_bad_parameters():
    X = np.random.default_rng(0).normal(size=(40, 5))
    with pytest.raises(ValueError, match="different query and key"):
        RandomFeatures(estimator="hrf-angular", random_state=0).fit(X)
    for bad, match in [(dict(estimator="oprff"), "estimator must be None or one of"), (dict(n_features=0), "n_features"),
                       (dict(kernel="rbf"), "kernel"), (dict(gamma=-1.0), "gamma"), (dict(sampler="qmc"), "sampler")]:
        with pytest.raises(ValueError, match=match):
            RandomFeatures(**bad).fit(X)
    rf = RandomFeatures(random_state=0).fit(X)
    with pytest.raises(ValueError, match="5 features"):
        rf.transform(X[:, :3])  # scikit-learn's message: X has 3 features, but ... is expecting 5 features


def test_pipeline_with_ridge_classifier_pickles_and_predicts_the_same():
    from sklearn.linear_model import RidgeClassifier
    from sklearn.model_selection import train_test_split
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    data = kestrel.load_uci("wifi")
    Xtr, Xte, ytr, yte = train_test_split(data["data"], data["target"], test_size=0.25, random_state=0)
    model = make_pipeline(StandardScaler(), RandomFeatures("sderf", n_features=64, gamma=0.1, random_state=1),
                          RidgeClassifier(alpha=1e-3)).fit(Xtr, ytr)
    again = pickle.loads(pickle.dumps(model))
    assert np.array_equal(again.predict(Xte), model.predict(Xte))
    assert model.score(Xte, yte) > 0.5  # 4 rooms: far above chance (0.25); the example script has the full table
    model.set_params(randomfeatures__n_features=16)
    assert model.fit(Xtr, ytr)[1].n_features_out_ == 16


# ---- pandas readers -------------------------------------------------------------------------------------------------

pd = pytest.importorskip("pandas")


def test_results_become_data_frames(tmp_path):
    from kestrel import results

    opts = dict(regime="normal", sigma=[0.5, 1.0], dim=[4, 8], points=16, pairs=1, estimators=["oprf", "pos"],
                mc=8, mc_points=4)
    rows = kestrel.sweep(str(tmp_path / "s.h5"), **opts)
    df = results.frame(rows)
    assert len(df) == 8 and {"estimator", "sigma", "mean_log_var", "mc_trusted"} <= set(df.columns)
    table = results.read_table(str(tmp_path / "s.h5"), "/sweep")
    assert len(table) == 8 and set(table["status"]) == {"ok"}
    for est in ("oprf", "pos"):
        a = df[df.estimator == est].sort_values(["dim", "sigma"])
        b = table[table.estimator == est].sort_values(["dim", "sigma"])
        assert np.array_equal(a["mean_log_var"].to_numpy(), b["mean_log_var"].to_numpy())
    assert results.provenance(str(tmp_path / "s.h5"))["options"]["sigma"] == [0.5, 1.0]
    assert "/sweep" in results.read(str(tmp_path / "s.h5"))
    with pytest.raises(KeyError, match="/variance"):
        results.read_table(str(tmp_path / "s.h5"), "/variance")


def test_every_output_says_its_schema_and_a_newer_major_version_is_refused(tmp_path):
    """kestrel.schemas() is the table the files carry; results.read refuses a file whose major version is newer than
    this kestrel's (naming the file and both versions), reads a newer minor one."""
    import h5py
    from kestrel import results

    table = {s["name"]: s["version"] for s in kestrel.schemas()}
    assert {"kestrel.variance", "kestrel.sweep", "kestrel.advise", "kestrel.reproduce"} <= set(table)
    path = str(tmp_path / "s.h5")
    kestrel.sweep(path, sigma=0.5, dim=4, points=16, pairs=1, estimators=["oprf"])
    with h5py.File(path, "r") as f:
        written = tuple(f.attrs[k].decode() for k in ("schema", "schema_version"))  # fixed-length: bytes in h5py
    assert written == ("kestrel.sweep", table["kestrel.sweep"])
    major = int(table["kestrel.sweep"].split(".")[0])
    with h5py.File(path, "a") as f:
        f.attrs["schema_version"] = f"{major}.{99}"
    assert len(results.read_table(path)) == 1
    with h5py.File(path, "a") as f:
        f.attrs["schema_version"] = f"{major + 1}.0"
    for read in (results.read, results.read_table, results.provenance):
        with pytest.raises(kestrel.InputFileError, match=rf"s.h5: schema kestrel.sweep version {major + 1}.0 is newer "
                                                         rf"than this kestrel reads \({major}.x\)"):
            read(path)


def test_a_fitted_estimator_recognises_points_passed_as_rows():
    X, Y = kestrel.draw_regime("normal", 6, 20, 0.5, seed=1)
    e = kestrel.fit("oprf", X, Y)
    w = e.draw(8, 1)
    calls = [lambda: e.log_var_over_k2(X.T, Y), lambda: e.log_variance(X, Y.T), lambda: e.features(w, X.T),
             lambda: e.approximate_kernel(w, X, Y.T), lambda: kestrel.simulate(e, X.T, Y, reps=8),
             lambda: e.summarize_variance(X.T, Y)]
    for call in calls:
        with pytest.raises(ValueError, match=r"is 20 x 6: .* fitted for d = 6 .* look like rows, pass [XY]\.T"):
            call()
    with pytest.raises(ValueError, match=r"is 5 x 20: .* fitted for d = 6 \(points are columns"):
        e.log_var_over_k2(X[:5], Y)


# ---- tasks for any registered estimator (built-in or written in Python) -------------------------------------------


class _PythonPos(kestrel.custom.Estimator):
    """PosRF in NumPy: the same distribution of estimates as the built-in pos (other draws)."""
    name, label, positive = "test-tasks-pos", "PosRF (Python)", True

    def draw(self, M, rng):
        return rng.standard_normal((self.d, M))

    def features(self, omega, X, side):
        return np.exp(omega.T @ X - 0.5 * np.sum(X * X, axis=0)).T


def test_classification_and_attention_take_an_estimator_written_in_python():
    kestrel.custom.register(_PythonPos, replace=True)
    exact = kestrel.classify("wine", None, seeds=2, features=32)
    assert exact["method"] == "exact" and exact["validation_accuracy"].shape == (1, len(exact["sigmas"]))  # no draws
    for name in ("pos", "test-tasks-pos"):
        r = kestrel.classify("wine", name, seeds=2, features=32)
        assert r["method"] == name and r["test_accuracy"].shape == (2,) and 0 <= r["test_mean"] <= 1
    again = kestrel.classify("wine", "test-tasks-pos", seeds=2, features=32)
    assert np.array_equal(again["test_accuracy"], r["test_accuracy"])  # seeded: the same draws
    # Attention: the Python PosRF and the built-in one have the same error distribution. Mean relative error over 60
    # draws each, |difference| < 4.5 SE of the difference: false-failure rate 6.8e-6.
    rng = np.random.default_rng(0)
    Q, K, V = rng.normal(size=(8, 48)), rng.normal(size=(8, 48)), rng.normal(size=(48, 3))
    a = kestrel.attention_error(Q, K, V, "pos", features=32, reps=60)["relative_error"]
    b = kestrel.attention_error(Q, K, V, "test-tasks-pos", features=32, reps=60)["relative_error"]
    se = np.sqrt(a.var(ddof=1) / len(a) + b.var(ddof=1) / len(b))
    assert abs(a.mean() - b.mean()) < 4.5 * se, (a.mean(), b.mean(), se)
    with pytest.raises(ValueError, match="one row per key"):
        kestrel.attention_error(Q, K, V[:10], "pos")
    with pytest.raises(ValueError, match="unknown estimator"):
        kestrel.classify("wine", "no-such-estimator")


def _every_dataset(path):
    import h5py

    names = []
    with h5py.File(path, "r") as f:
        f.visititems(lambda n, o: names.append("/" + n) if isinstance(o, h5py.Dataset) else None)
    return names


def _covered(out, name):
    """A dataset is in read()'s answer under its own path, or as a column of the table of its group (or of the
    results table above it)."""
    if name in out:
        return True
    group, col = name.rsplit("/", 1)
    for key in (group, group.rsplit("/", 1)[0]):
        if isinstance(out.get(key), pd.DataFrame) and col in out[key].columns:
            return True
    return False


def test_read_returns_every_dataset_and_read_table_finds_its_table(tmp_path):
    from kestrel import results

    kestrel.reproduce("crt-fig1", str(tmp_path), quick=True)  # 2-D datasets only: read() gave {} before issue 37
    sweep = str(tmp_path / "s.h5")
    kestrel.sweep(sweep, sigma=[0.5, 1.0], dim=4, points=16, pairs=1, estimators=["oprf", "pos"], mc=8, mc_points=4)
    for path in (str(tmp_path / "crt-fig1.h5"), sweep):
        out = results.read(path)
        missing = [n for n in _every_dataset(path) if not _covered(out, n)]
        assert not missing, f"{path}: read() left out {missing}"
    fig1 = results.read(str(tmp_path / "crt-fig1.h5"))
    assert fig1["/utility"].ndim == 2 and fig1["/utility"].shape[0] == 6  # dims x sum_sq
    table = results.read_table(sweep)  # the file's results table, found without naming it
    assert len(table) == 4 and table.columns[0] == "estimator" and set(table.estimator) == {"oprf", "pos"}
    one = results.read_table(sweep, "/sweep/oprf")
    assert set(one.estimator) == {"oprf"} and len(one) == 2
    with pytest.raises(KeyError, match="/variance"):
        results.read_table(sweep, "/variance")


def test_random_features_know_their_expected_error_and_warn(recwarn):
    import warnings

    X = np.random.default_rng(0).normal(size=(200, 8))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # unit-scale inputs: no warning
        rf = RandomFeatures(n_features=128, random_state=0).fit(0.3 * X)
    err = rf.expected_relative_error_
    assert 0 < err["median"] <= err["p95"] < rf.max_relative_error and err["pairs"] == 64 * 64
    assert rf.degenerate_features_ == 0
    with pytest.warns(UserWarning, match=r"exactly 0 or not finite.*scale the inputs"):
        big = RandomFeatures(n_features=128, random_state=0).fit(30 * X)  # the case: features underflow
    assert big.degenerate_features_ > 0.5
    with pytest.warns(UserWarning, match=r"expected relative error.*95th percentile.*more features"):
        RandomFeatures(estimator="pos", n_features=128, random_state=0).fit(X)
