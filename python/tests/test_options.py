"""The Python side of the options front-end (issue #15 items 1-3): kestrel.variance_study and kestrel.sweep take
the options of `kestrel variance` / `kestrel sweep` from the same table (same names with '_', same defaults, same
strict validation), sweeps run over one's own data (CSV, .npy, HDF5) and extend, and malformed inputs raise
TypeError (unknown keyword) or ValueError/OSError naming the value without creating a file."""
import json
import os
import subprocess

import h5py
import numpy as np
import pytest

import kestrel

CLI = os.environ.get("KESTREL_CLI", "")
needs_cli = pytest.mark.skipif(not CLI, reason="KESTREL_CLI (the kestrel command line) not given")

SMALL = dict(dim=4, points=8, pairs=1)


def cli_json(*args):
    out = subprocess.run([CLI, *args, "--json", "--quiet"], check=True, capture_output=True, text=True).stdout
    return json.loads(out)["results"]


@needs_cli
def test_same_options_as_the_cli():
    py = kestrel.variance_study(regime="clustered", sigma=[0.5, 1.0], dim=4, points=12, pairs=1, seed=5,
                                estimators=["pos", "oprf"], halve_real=True, clusters=3, cluster_radius=0.5,
                                mc=8, mc_points=4, sampler="orthogonal", kernel="gaussian")
    cli = cli_json("variance", "--regime", "clustered", "--sigma", "0.5,1", "--dim", "4", "--points", "12",
                   "--pairs", "1", "--seed", "5", "--estimators", "pos,oprf", "--halve-real", "--clusters", "3",
                   "--cluster-radius", "0.5", "--mc", "8", "--mc-points", "4", "--sampler", "orthogonal",
                   "--kernel", "gaussian")
    assert py == cli


def test_unknown_keyword_names_the_nearest():
    with pytest.raises(TypeError, match="did you mean 'sigma'"):
        kestrel.variance_study(sigmas=[0.5], **SMALL)
    with pytest.raises(TypeError, match="did you mean 'halve_real'"):
        kestrel.variance_study(halve_reel=True, **SMALL)
    with pytest.raises(TypeError, match="did you mean 'mc_points'"):
        kestrel.sweep("/nonexistent/x.h5", mc_point=4)


@pytest.mark.parametrize("kwargs, word", [
    (dict(seed=-1), "'-1'"),
    (dict(seed=10**20), "100000000000000000000"),
    (dict(dim=-4), "'-4'"),
    (dict(dim=4.5), "4.5"),
    (dict(dim="4"), "string"),
    (dict(points=10**9), "bytes"),
    (dict(sigma=1e300), "sigma = 1e\\+300"),
    (dict(sigma=[0.5, float("nan")]), "nan"),
    (dict(sigma=-1.0), "'-1.0'"),
    (dict(estimators=["oprf", "oprf"]), "listed twice"),
    (dict(estimators="opfr"), "did you mean 'oprf'"),
    (dict(regime="moon"), "moon"),
    (dict(features=[1, 4]), "takes one value"),
    (dict(mc=10, mc_points=100, points=16), "mc_points"),
    (dict(halve_real=1), "True or False"),
    (dict(regime="file"), "needs x_file"),
    (dict(regime="file", x_file="/nonexistent/x.csv"), "x.csv"),
    (dict(x_file="/nonexistent/x.csv"), "regime file"),
])
def test_bad_values_raise_value_error_naming_them(kwargs, word):
    args = dict(SMALL)
    args.update(kwargs)
    if args.get("regime") == "file":
        args.pop("dim"), args.pop("points")
    with pytest.raises((ValueError, OSError), match=word):
        kestrel.variance_study(**args)


def test_sweep_bad_inputs_create_no_file(tmp_path):
    out = tmp_path / "s.h5"
    for kwargs in [dict(dim=[4, -8]), dict(points=[16, 16]), dict(seed=-1), dict(sigma=1e300, dim=4, points=8)]:
        with pytest.raises(ValueError):
            kestrel.sweep(str(out), pairs=1, **kwargs)
    assert list(tmp_path.iterdir()) == []


def test_sweep_progress_goes_to_stderr(tmp_path, capsys):
    grid = dict(sigma=[0.5, 1.0], dim=4, points=16, pairs=1, estimators=["oprf"])
    quiet = kestrel.sweep(str(tmp_path / "q.h5"), **grid)
    assert capsys.readouterr().err == ""
    loud = kestrel.sweep(str(tmp_path / "p.h5"), progress=True, **grid)
    err = capsys.readouterr().err
    assert "grid point 1/2" in err and "grid point 2/2" in err and "ETA" in err
    assert loud == quiet
    with pytest.raises(ValueError, match="progress must be True or False, got 'yes'"):
        kestrel.sweep(str(tmp_path / "x.h5"), progress="yes", **grid)
    assert not (tmp_path / "x.h5").exists()


def write_points(tmp_path, X, Y):
    np.savetxt(tmp_path / "x.csv", X.T, delimiter=",")
    np.save(tmp_path / "y.npy", Y.T)
    with h5py.File(tmp_path / "xy.h5", "w") as f:
        f["X"] = X.T
        f["group/Y"] = Y.T


def test_sweep_over_own_data_in_every_format_and_extension(tmp_path):
    rng = np.random.default_rng(3)
    X, Y = rng.normal(size=(3, 20)) * 0.3, rng.normal(size=(3, 25)) * 0.3  # points are columns
    write_points(tmp_path, X, Y)
    grid = dict(regime="file", sigma=[0.5, 1.0], features=[1, 4], pairs=2, estimators=["oprf", "trig"])
    a = kestrel.sweep(str(tmp_path / "a.h5"), x_file=str(tmp_path / "x.csv"), y_file=str(tmp_path / "y.npy"), **grid)
    b = kestrel.sweep(str(tmp_path / "b.h5"), x_file=f"{tmp_path}/xy.h5:/X", y_file=f"{tmp_path}/xy.h5:/group/Y",
                      **grid)
    assert len(a) == 8 and a[0]["d"] == 3 and a[0]["L"] == 20  # d and L from the files
    for r, s in zip(a, b):  # text round-trips doubles exactly (np.savetxt writes 18 significant digits)
        assert r["mean_log_var"] == pytest.approx(s["mean_log_var"], rel=1e-12)
    # Extending by a sigma computes only the new points and equals a fresh run.
    grid3 = dict(grid, sigma=[0.5, 1.0, 2.0])
    ext = kestrel.sweep(str(tmp_path / "a.h5"), x_file=str(tmp_path / "x.csv"), y_file=str(tmp_path / "y.npy"),
                        **grid3)
    fresh = kestrel.sweep(str(tmp_path / "c.h5"), x_file=str(tmp_path / "x.csv"), y_file=str(tmp_path / "y.npy"),
                          **grid3)
    assert ext == fresh and len(ext) == 12
    with h5py.File(tmp_path / "a.h5") as f:
        assert sorted(set(f["sweep/oprf/sigma"][:])) == [0.5, 1.0, 2.0]
        assert len(json.loads(f["sweep/resume"][()])["points"]) == 6


def test_summary_over_all_exact_pairs_is_minus_inf():
    X = kestrel.draw_regime("normal", 4, 6, 0.5, seed=1)[0]
    s = kestrel.fit("pos", X, -X).summarize_variance(X, -X)
    # PosRF is exact at x = -y only; the pairs (x_i, -x_j), i != j, are not exact, so compare the diagonal.
    d = kestrel.fit("pos", X[:, :1], -X[:, :1], layout="columns").summarize_variance(X[:, :1], -X[:, :1])
    assert d["n_exact"] == 1 and d["mean_log_var"] == -np.inf
    assert s["n_exact"] == 6 and np.isfinite(s["mean_log_var"])


def test_fit_refuses_rows_as_samples():
    X, Y = kestrel.draw_regime("normal", 4, 6, 0.5, seed=1)
    with pytest.raises(ValueError, match="X.T and Y.T"):
        kestrel.fit("oprf", X.T, Y[:, :5].T)
    # Same L on both sides: the shapes agree, but 6 rows against 4 columns is what rows-as-samples looks like.
    with pytest.raises(ValueError, match=r"X is 6 x 4 and Y is 6 x 4: more rows \(d\) than columns"):
        kestrel.fit("oprf", X.T, Y.T)
    rows = kestrel.fit("oprf", X.T, Y.T, layout="rows")
    assert rows.params() == kestrel.fit("oprf", X, Y).params() and rows.dim == 4
    wide = kestrel.fit("oprf", X[:, :3], Y[:, :3], layout="columns")  # d = 4 > L = 3 on purpose
    assert wide.dim == 4
    with pytest.raises(ValueError, match="layout must be 'columns' or 'rows', got 'cols'"):
        kestrel.fit("oprf", X, Y, layout="cols")


def test_low_level_keywords_default_to_the_option_tables():
    """The kernel, features, sampler and seed keywords of the functions that are not generated from a table (log_kernel,
    simulate, Estimator.features, ...) and rounded_sums' chunk take their defaults from the study and advise option
    tables (issue 45 item 2): each default in a signature equals the table's. A changed default in the options struct
    changes both, so this fails only if a keyword is written by hand again."""
    import re
    tables = kestrel._options()
    want = {o["name"]: kestrel._python_default(o) for o in tables["variance"]
            if o["name"] in ("kernel", "features", "sampler", "seed")}
    want["chunk"] = next(kestrel._python_default(o) for o in tables["advise"] if o["name"] == "chunk")
    assert len(want) == 5
    seen = 0
    docs = [getattr(kestrel, n).__doc__ for n in dir(kestrel) if callable(getattr(kestrel, n))]
    docs += [getattr(kestrel.Estimator, n).__doc__ for n in dir(kestrel.Estimator) if not n.startswith("__")]
    for doc in filter(None, docs):
        for name, default in re.findall(r"\b(kernel|features|sampler|seed|chunk): \w+ = ([^,)]+)", doc.split("\n")[0]):
            assert default == repr(want[name]), f"{name} = {default} in {doc.splitlines()[0]}"
            seen += 1
    assert seen >= 20  # the keywords of log_kernel, simulate, the Estimator methods, rounded_sums
