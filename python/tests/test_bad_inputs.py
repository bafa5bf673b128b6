"""Bad inputs, round two (issue 37), through the Python functions: the inputs that tests/bad_inputs_test.cpp gives the
command line (points files with a byte-order mark, decimal commas or binary content, sweeps whose options differ,
out-of-context options) and the Python-only ones (item 8: every invalid scalar argument is a ValueError naming the
value, never a pybind TypeError listing the signatures; complex arrays, empty d x 0 arrays, a bad points file given to
sweep), item 13 (float32 preserved by RandomFeatures, progress printed only with progress=True)."""
import json
import os

import numpy as np
import pytest

import kestrel

X, Y = kestrel.draw_regime("normal", 4, 6, 0.5, seed=1)
E = kestrel.fit("oprf", X, Y)
W = E.draw(4, seed=1)
V = np.ones((6, 2))


def bad_scalar_calls():
    """(call, argument name, value shown): one invalid value of each scalar argument of every Python function."""
    e, w = E, W
    return [
        (lambda: e.log_var_over_k2(X, Y, features=-1), "features", "-1"),
        (lambda: e.log_var_over_k2(X, Y, features=1.5), "features", "1.5"),
        (lambda: e.log_variance(X, Y, features=True), "features", "True"),
        (lambda: e.log_variance(X, Y, sampler=3), "sampler", "3"),
        (lambda: e.summarize_variance(X, Y, features="2"), "features", "'2'"),
        (lambda: e.draw(-1), "features", "-1"),
        (lambda: e.draw(1.5), "features", "1.5"),
        (lambda: e.draw(4, seed=-1), "seed", "-1"),
        (lambda: e.draw(4, seed=2 ** 70), "seed", str(2 ** 70)),
        (lambda: e.draw(4, index=-2), "index", "-2"),
        (lambda: e.draw(4, sampler=None), "sampler", "None"),
        (lambda: e.features(w, X, side=0), "side", "0"),
        (lambda: e.features("w", X), "draw", "'w'"),
        (lambda: e.approximate_kernel(None, X, Y), "draw", "None"),
        (lambda: kestrel.simulate("oprf", X, Y), "estimator", "'oprf'"),
        (lambda: e.feature_map(w, X, side=b"query"), "side", "b'query'"),
        (lambda: e.kc_variance(X, Y, V, features=-3), "features", "-3"),
        (lambda: e.kc_variance(X, Y, V, seed=-1), "seed", "-1"),
        (lambda: e.predict_attention(X, Y, V, features=0.5), "features", "0.5"),
        (lambda: e.predict_attention(X, Y, V, rows=4, seed=1.0), "seed", "1.0"),
        (lambda: kestrel.simulate(e, X, Y, reps=-8), "reps", "-8"),
        (lambda: kestrel.simulate(e, X, Y, reps=8, features=-1), "features", "-1"),
        (lambda: kestrel.simulate(e, X, Y, reps=8, seed=-1), "seed", "-1"),
        (lambda: kestrel.draw_regime("normal", -4, 6, 0.5), "d", "-4"),
        (lambda: kestrel.draw_regime("normal", 4, 6.5, 0.5), "L", "6.5"),
        (lambda: kestrel.draw_regime("normal", 4, 6, "big"), "sigma", "'big'"),
        (lambda: kestrel.draw_regime("normal", 4, 6, 0.5, seed=-1), "seed", "-1"),
        (lambda: kestrel.draw_regime("clustered", 4, 6, 0.5, clusters=1.5), "clusters", "1.5"),
        (lambda: kestrel.draw_regime(7, 4, 6, 0.5), "name", "7"),
        (lambda: kestrel.draws_for_budget("oprf", -1), "features", "-1"),
        (lambda: kestrel.fit("oprf", X, Y, layout=1), "layout", "1"),
        (lambda: kestrel.load_points_file(3), "path", "3"),
        (lambda: kestrel.load_uci("wine", encoding=0), "encoding", "0"),
        (lambda: kestrel.classify("wine", "oprf", seeds=-1), "seeds", "-1"),
        (lambda: kestrel.classify("wine", "oprf", features=2.5), "features", "2.5"),
        (lambda: kestrel.classify("wine", "oprf", sigmas=["a"]), "sigmas", "'a'"),
        (lambda: kestrel.classify("wine", 3), "estimator", "3"),
        (lambda: kestrel.attention_error(X, Y, V, "oprf", features=-16), "features", "-16"),
        (lambda: kestrel.attention_error(X, Y, V, "oprf", reps=0), "reps", "0"),
        (lambda: kestrel.attention_error(X, Y, V, "oprf", stabilise="yes"), "stabilise", "'yes'"),
        (lambda: kestrel.reproduce("crt-fig1", "/nonexistent", quick="yes"), "quick", "'yes'"),
        (lambda: kestrel.reproduce("crt-fig1", "/nonexistent", seed=-1), "seed", "-1"),
        (lambda: kestrel.reproduce("crt-fig1", "/nonexistent", progress=1), "progress", "1"),
        (lambda: kestrel.set_threads(-1), "n", "-1"),
        (lambda: kestrel.set_threads(1.5), "n", "1.5"),
        (lambda: kestrel.variance_study(features=-1, dim=4, points=8), "features", "'-1'"),
        (lambda: kestrel.variance_study(features=1.5, dim=4, points=8), "features", "1.5"),
        (lambda: kestrel.sweep("/nonexistent/s.h5", features=[1, -1]), "features", "'-1'"),
        (lambda: kestrel.sweep("/nonexistent/s.h5", progress="yes"), "progress", "'yes'"),
        (lambda: kestrel.sweep("/nonexistent/s.h5", shard="2/2"), "shard", "'2/2'"),
        (lambda: kestrel.advise(X.T, Y.T, budget=-1), "budget", "'-1'"),
        (lambda: kestrel.advise(X.T, Y.T, progress=2), "progress", "2"),
    ]


@pytest.mark.parametrize("case", range(len(bad_scalar_calls())))
def test_every_invalid_scalar_is_a_value_error_naming_it(case):
    call, name, shown = bad_scalar_calls()[case]
    with pytest.raises(ValueError) as info:
        call()
    message = str(info.value)
    assert name in message and shown in message, message
    assert "incompatible function arguments" not in message and "\n" not in message, message


def test_complex_and_empty_arrays_are_refused_as_the_command_line_refuses_them():
    Z = X.astype(complex)
    for call in (lambda: kestrel.fit("oprf", Z, Y), lambda: E.log_variance(X, Z), lambda: E.features(W, Z),
                 lambda: kestrel.simulate(E, Z, Y, reps=8), lambda: kestrel.attention_error(Z, Y, V, "oprf"),
                 lambda: kestrel.advise(Z.T, Y.T), lambda: kestrel.Draw(W.omega.astype(complex))):
        with pytest.raises(ValueError, match="complex numbers"):
            call()
    with pytest.raises(ValueError, match="must be an array of numbers, got dtype <U"):
        kestrel.fit("oprf", np.array([["a", "b"]] * 4), Y)
    with pytest.raises(ValueError, match=r"X is 4 x 0: no points"):
        kestrel.fit("oprf", np.zeros((4, 0)), Y)
    with pytest.raises(ValueError, match=r"Y is 4 x 0: no points"):
        kestrel.fit("oprf", X, np.zeros((4, 0)), layout="columns")
    with pytest.raises(ValueError, match=r"X is 4 x 0: no points"):
        E.log_variance(np.zeros((4, 0)), Y)
    with pytest.raises(ValueError, match=r"X is 4 x 0: no points"):
        kestrel.fit("oprf", np.zeros((0, 4)), Y.T, layout="rows")


def write_points(path, sep=",", dec=".", bom=False):
    rows = [[0.3 * np.sin(1.0 + 7 * i + j) for j in range(3)] for i in range(40)]
    text = "x1,x2,x3\n" if sep == "," else ""
    text += "".join(sep.join(f"{v:.6f}".replace(".", dec) for v in r) + "\n" for r in rows)
    with open(path, "wb") as f:
        f.write((b"\xef\xbb\xbf" if bom else b"") + text.encode())


def test_points_files_say_what_they_look_like(tmp_path):
    write_points(tmp_path / "plain.csv")
    write_points(tmp_path / "bom.csv", bom=True)
    assert np.array_equal(kestrel.load_points_file(str(tmp_path / "bom.csv")),
                          kestrel.load_points_file(str(tmp_path / "plain.csv")))
    study = dict(regime="file", sigma=[0.5], estimators=["oprf"])
    assert kestrel.variance_study(x_file=str(tmp_path / "bom.csv"), **study) == \
        kestrel.variance_study(x_file=str(tmp_path / "plain.csv"), **study)
    write_points(tmp_path / "comma.csv", sep=";", dec=",")
    (tmp_path / "binary.csv").write_bytes(bytes(range(256)) * 4)
    for name, words in [("comma.csv", "decimal commas"), ("binary.csv", "a binary file"),
                        ("missing.csv", "no such file")]:
        path = str(tmp_path / name)
        for call in (lambda: kestrel.sweep(str(tmp_path / "s.h5"), x_file=path, **study),
                     lambda: kestrel.variance_study(x_file=path, **study),
                     lambda: kestrel.load_points_file(path)):
            with pytest.raises(ValueError, match=words) as info:  # a ValueError as the README promises ...
                call()
            assert isinstance(info.value, OSError) and isinstance(info.value, kestrel.InputFileError)  # ... and I/O
            assert "fields, expected" not in str(info.value)
    assert not (tmp_path / "s.h5").exists() and not (tmp_path / "s.h5.parts").exists()


def test_sweeps_name_the_options_that_differ(tmp_path):
    out = str(tmp_path / "s.h5")
    grid = dict(sigma=[0.5, 1.0], dim=4, points=16, pairs=1, estimators=["oprf"])
    kestrel.sweep(out, **grid)
    with pytest.raises(ValueError, match=r"seed 2 here, 1 there.*force=True to replace it \(discarding its 2"):
        kestrel.sweep(out, seed=2, **grid)
    assert len(kestrel.sweep(out, **dict(grid, sigma=[0.5, 1.0, 2.0]))) == 3  # more grid values still extend it
    with pytest.raises(ValueError, match="force must be True or False, got 'yes'"):
        kestrel.sweep(out, seed=2, force="yes", **grid)
    assert len(kestrel.sweep(out, seed=2, force=True, **grid)) == 2  # as --force: replaced
    assert len(kestrel.sweep(out, seed=2, **grid)) == 2  # the file is now the seed-2 sweep, which this extends


def test_sweep_shards_write_parts_for_the_merge(tmp_path):
    # shard= (issue 51): shard K/N computes grid points i with i mod N = K, returns their rows and writes only the
    # parts; shard= is a run option, so it is not in the recorded call (the merged file records the sweep's).
    out = str(tmp_path / "s.h5")
    grid = dict(sigma=[0.5, 1.0, 2.0], dim=4, points=16, pairs=1, estimators=["oprf"])
    whole = kestrel.sweep(str(tmp_path / "one.h5"), **grid)
    assert kestrel.sweep(out, shard="1/2", **grid) == [whole[1]]
    assert not (tmp_path / "s.h5").exists()
    record = json.load(open(tmp_path / "s.h5.parts" / "shard-1-of-2.json"))
    assert record["command"].startswith("python: kestrel.sweep(") and "shard=" not in record["command"]
    assert kestrel.sweep(out, shard="0/2", **grid) == [whole[0], whole[2]]
    # The message in Python's spelling, with the merge command (a shell command) as the command line spells it.
    with pytest.raises(ValueError, match=r"^force=True cannot be combined with shard 0/2: .*run `kestrel sweep merge "
                                         r"--force \S+s\.h5` to replace"):
        kestrel.sweep(out, shard="0/2", force=True, **grid)


@pytest.mark.parametrize("kwargs, words", [
    (dict(pixel_scale=255), "pixel_scale: only used with an image regime"),
    (dict(preprocess="center"), "preprocess.*the regime is 'normal'"),
    (dict(spectrum="rank:2"), "spectrum.*regime aniso"),
    (dict(clusters=3), "clusters.*regime clustered"),
    (dict(regime="clustered", clusters=100), "100 clusters is more than points 32"),
    (dict(values="ones"), "values.*quantity kc or attention"),
    (dict(sampler="orthogonal", estimators=["oprf"]), "sampler: only used with Monte Carlo"),
])
def test_out_of_context_options_are_refused(kwargs, words):
    with pytest.raises(ValueError, match=words):
        kestrel.variance_study(sigma=[0.5], dim=4, points=32, pairs=1, **kwargs)
    if "sampler" in kwargs:  # with Monte Carlo it is read
        assert kestrel.variance_study(sigma=[0.5], dim=4, points=32, pairs=1, mc=8, **kwargs)


def test_out_of_context_advise_options_are_refused():
    with pytest.raises(ValueError, match="pairs '100': only used with quantity kernel"):
        kestrel.advise(X.T, Y.T, pairs=100)
    with pytest.raises(ValueError, match="draws '8': only used with quantity attention"):
        kestrel.advise(X.T, Y.T, quantity="kernel", draws=8)


def test_random_features_preserve_float32():
    from kestrel.sklearn import RandomFeatures
    rows = np.random.default_rng(0).normal(size=(40, 4))
    rf = RandomFeatures(n_features=16, random_state=0)
    assert rf._get_tags()["preserves_dtype"] == [np.float64, np.float32]  # as RBFSampler's
    z32 = rf.fit(rows.astype(np.float32)).transform(rows.astype(np.float32))
    z64 = rf.transform(rows)
    assert z32.dtype == np.float32 and z64.dtype == np.float64
    assert np.allclose(z32, z64, rtol=1e-6, atol=1e-7)  # computed in float64 either way


def test_progress_is_printed_only_when_asked(tmp_path, capfd):
    rng = np.random.default_rng(0)
    Q, K = 0.3 * rng.normal(size=(16, 4)), 0.3 * rng.normal(size=(16, 4))
    small = dict(estimators=["pos"], samplers=["iid"], budget=8, draws=4, rows=4)
    grid = dict(sigma=[0.5], dim=4, points=8, pairs=1, estimators=["oprf"])
    runs = [(lambda p: kestrel.advise(Q, K, progress=p, **small), "fitting pos"),
            (lambda p: kestrel.sweep(str(tmp_path / f"s{p}.h5"), progress=p, **grid), "grid point 1/1"),
            (lambda p: kestrel.reproduce("crt-fig1", str(tmp_path / f"r{p}"), quick=True, progress=p), "plotting")]
    for call, line in runs:
        call(False)
        quiet = capfd.readouterr()
        assert quiet.out == "" and quiet.err == "", (line, quiet)
        call(True)
        assert line in capfd.readouterr().err, line
    for f in (kestrel.classify, kestrel.variance_study):  # no progress option: never a word
        f("wine", "oprf", seeds=1, features=8) if f is kestrel.classify else f(**grid)
        assert capfd.readouterr() == ("", "")


@pytest.mark.skipif(not os.environ.get("KESTREL_CLI"), reason="KESTREL_CLI not given")
def test_the_same_bad_file_gives_the_same_message_on_the_command_line(tmp_path):
    import subprocess
    write_points(tmp_path / "comma.csv", sep=";", dec=",")
    path = str(tmp_path / "comma.csv")
    with pytest.raises(ValueError) as info:
        kestrel.variance_study(regime="file", x_file=path)
    cli = subprocess.run([os.environ["KESTREL_CLI"], "variance", "--regime", "file", "--x-file", path],
                         capture_output=True, text=True)
    assert cli.returncode == 2 and cli.stderr.strip() == f"kestrel: error: {info.value}"


def test_unwritable_outputs_are_refused_before_computing(tmp_path):
    """Items 1, 4, 5 through the Python functions that write: the command line's errors, at once, nothing written."""
    import time
    (tmp_path / "file").write_text("x")
    grid = dict(sigma=[0.5], dim=4, points=8192, pairs=1, estimators=["oprf"])  # minutes if it computed first
    file = str(tmp_path / "file")
    bad = [("/proc/x.h5", "No such file or directory", "No such file or directory"),
           (file + "/x.h5", "Not a directory", "Not a directory"),
           (str(tmp_path / "missing" / "x.h5"), "does not exist", "does not exist"),
           ("", "empty path", "must not be empty"),
           (file, "exists; pass force=True to replace it", "exists and is not a directory")]
    for out, sweep_says, reproduce_says in bad:
        for call, says in ((lambda: kestrel.sweep(out, **grid), sweep_says),
                           (lambda: kestrel.reproduce("crt-fig1", out, quick=True), reproduce_says)):
            t0 = time.monotonic()
            with pytest.raises(ValueError, match=says):
                call()
            assert time.monotonic() - t0 < 5, (out, "computed before failing?")
    assert (tmp_path / "file").read_text() == "x" and sorted(p.name for p in tmp_path.iterdir()) == ["file"]


# Round three (issue 49). -------------------------------------------------------------------------------------------

def advise_inputs(scale=1.0):
    r = np.random.default_rng(5)
    Q, K = 0.3 * r.normal(size=(48, 4)), 0.3 * r.normal(size=(48, 4))
    return Q, K, scale * (1 + r.normal(size=(48, 2)))


ADVISE = dict(budget=16, draws=8, rows=8, estimators=["pos"], samplers=["iid"], no_timing=True)


def test_advise_refuses_what_cannot_work_and_scales_values():
    """A tv target of 2, estimators that cannot apply (not a report saying nothing could be evaluated) and arrays of
    another dimension (named with advise's convention, tokens as rows); V of 1e300 and 1e-300 give the advice of V near
    1 (relative metrics: V * 2^1000 gives the identical report)."""
    Q, K, V = advise_inputs()
    with pytest.raises(ValueError, match=r"target '2': metric tv .* is at most 1"):
        kestrel.advise(Q, K, metric="tv", target=2, **ADVISE)
    with pytest.raises(ValueError, match=r"no estimator can be evaluated .*trig: its features can be negative"):
        kestrel.advise(Q, K, V, **dict(ADVISE, estimators=["trig"]))
    with pytest.raises(ValueError, match=r"Q must be a 2-D array \(Lq x d, one token per row\), got 1 dimensions"):
        kestrel.advise(Q[0], K, V, **ADVISE)
    # A stack of heads beside a 2-D array (test_advise_heads.py has the stacks that fit).
    with pytest.raises(ValueError, match=r"K has the shape \[48, 4\] but Q has \[1, 48, 4\]: give all of them as "
                                         r"\[heads, L, d\]"):
        kestrel.advise(Q[None], K, V, **ADVISE)
    reports = [kestrel.advise(Q, K, np.ldexp(V, e), **ADVISE) for e in (0, 1000, -1000)]
    for r in reports:
        del r["provenance"]
    assert reports[1] == reports[0] and reports[2] == reports[0]
    assert all(row["status"] == "ok" and np.isfinite(row["error_at_m_p95"]) for row in reports[0]["rows"])


def test_advise_warns_when_tokens_are_fewer_than_their_dimension():
    r = np.random.default_rng(6)
    Q = 0.05 * r.normal(size=(4, 100))
    with pytest.warns(UserWarning, match=r"Q is 4 x 100: read as 4 tokens of dimension d = 100 .* pass Q\.T"):
        kestrel.advise(Q, Q, **dict(ADVISE, budget=4, draws=4, rows=2))


def test_restore_results_and_spellings_are_python_words(tmp_path):
    """restore('garbage') names the text, not the JSON parser; results.read on a CSV, a directory or a missing file
    names what it is, not h5py's internals; errors name keywords (force=True), not command-line options (--force)."""
    with pytest.raises(ValueError, match=r"restore: 'garbage' is not an estimator state \(not JSON text: invalid at "
                                         r"character 1\); pass the text that Estimator.state\(\) returned"):
        kestrel.restore("garbage")
    from kestrel import results
    write_points(tmp_path / "x.csv")
    with pytest.raises(kestrel.InputFileError, match=r"x.csv: a text file, not an HDF5 file: kestrel.results reads"):
        results.read(str(tmp_path / "x.csv"))
    with pytest.raises(IsADirectoryError, match="a directory, not a kestrel HDF5 file"):
        results.read(str(tmp_path))
    with pytest.raises(FileNotFoundError, match="no such file"):
        results.read_table(str(tmp_path / "missing.h5"))
    (tmp_path / "orf.h5").write_text("mine")
    with pytest.raises(ValueError, match=r"orf.h5' exists; pass force=True to replace it$"):
        kestrel.reproduce("orf", str(tmp_path), quick=True)
    with pytest.raises(ValueError, match=r"the string '0,5'"):  # a decimal comma cannot pass for a list here
        kestrel.variance_study(sigma="0,5")


def run_python(code, **env):
    """`code` in a fresh /usr/bin/python3 (this one) with OPENBLAS_CORETYPE unset unless given; its stdout and
    stderr."""
    import subprocess
    import sys
    e = {k: v for k, v in os.environ.items() if k not in ("OPENBLAS_CORETYPE", "OPENBLAS_VERBOSE")}
    e.update(env)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=e, timeout=120)
    assert r.returncode == 0, r.stderr
    return r.stdout.strip(), r.stderr


CORE = "import warnings; warnings.simplefilter('always'); {}; import kestrel; print(kestrel.versions()['libraries'].get('openblas_core', ''))"


def test_the_python_package_takes_the_fast_openblas_kernels():
    """Item 2: `import kestrel` sets OPENBLAS_CORETYPE from the CPU's flags (kestrel._blas_core) before OpenBLAS is
    loaded; imported after NumPy (which loads the same OpenBLAS first) it cannot, and warns where OpenBLAS then runs its
    generic Prescott kernels on a CPU that supports better ones; a value the user set is kept, without a warning."""
    with open("/proc/cpuinfo") as f:
        flags = next((line.split(":", 1)[1] for line in f if line.startswith("flags")), "")
    better = kestrel._blas_core.openblas_core_for_flags(flags)
    first, _ = run_python(CORE.format("pass"))
    if not first:
        pytest.skip("the BLAS is not OpenBLAS")
    if better:
        assert first != "Prescott", f"this CPU supports {better}"
    late, said = run_python(CORE.format("import numpy; numpy.ones((4, 4)) @ numpy.ones((4, 4))"))
    warned = "OpenBLAS runs its generic Prescott kernels" in said
    assert warned == (late == "Prescott" and bool(better)), (late, said)
    if warned:
        assert f"set OPENBLAS_CORETYPE={better} before starting Python" in said
    kept, said = run_python(CORE.format("import numpy"), OPENBLAS_CORETYPE="Prescott")
    assert kept == "Prescott" and "RuntimeWarning" not in said


# Round four (issue 68). --------------------------------------------------------------------------------------------

def test_a_finished_sweep_is_never_dropped_without_force(tmp_path):
    """Item 1: a grid that leaves out grid points of a finished sweep is refused without force=True, naming them and the
    grid that keeps them; the file is untouched; force=True replaces it; a superset extends it."""
    out = tmp_path / "s.h5"
    grid = dict(dim=4, points=16, pairs=1, estimators=["oprf"])
    kestrel.sweep(str(out), sigma=[0.5, 1.0], **grid)
    before = out.read_bytes()
    for sigma in ([0.5], [0.5, 2.0]):
        with pytest.raises(ValueError, match=r"1 grid points that this grid leaves out \(d=4 L=16 M=1 sigma=1\).*"
                                             r"rerun with sigma .*,1 to extend it, or pass force=True"):
            kestrel.sweep(str(out), sigma=sigma, **grid)
        assert out.read_bytes() == before
    assert len(kestrel.sweep(str(out), sigma=[0.5, 1.0, 2.0], **grid)) == 3
    assert len(kestrel.sweep(str(out), sigma=[0.5], force=True, **grid)) == 1


def test_a_broken_sweep_part_is_named_with_the_fix(tmp_path):
    """Item 2: a truncated grid point file is an InputFileError naming it and what to do, before anything is
    computed."""
    out = tmp_path / "s.h5"
    grid = dict(sigma=[0.5, 1.0], dim=4, points=16, pairs=1, estimators=["oprf"])
    kestrel.sweep(str(out), shard="0/2", **grid)
    part = next(p for p in (tmp_path / "s.h5.parts").iterdir() if p.name.startswith("d4_"))
    part.write_bytes(part.read_bytes()[:20])
    with pytest.raises(kestrel.InputFileError, match=rf"grid point file '{part}' is not valid JSON .*delete it and "
                                                     r"rerun shard 0/2"):
        kestrel.sweep(str(out), shard="0/2", **grid)


def test_advise_takes_stacks_as_lists_and_tensors_and_refuses_complex(tmp_path):
    """Item 3: [heads, L, d] as nested lists (and torch tensors, where PyTorch is installed) give the report of the
    array; complex stacks are refused as the 2-D path and the command line refuse them; an out= that is a directory is
    refused before computing, with force=True too."""
    r = np.random.default_rng(8)
    Q, K, V = (0.3 * r.normal(size=(2, 24, 4)), 0.3 * r.normal(size=(2, 24, 4)), r.normal(size=(2, 24, 2)))
    opts = dict(ADVISE, budget=16, draws=4, rows=4)
    want = kestrel.advise(Q, K, V, **opts)
    del want["provenance"]
    got = kestrel.advise(Q.tolist(), K.tolist(), V.tolist(), **opts)
    del got["provenance"]
    assert got == want
    try:
        import torch
    except ImportError:
        torch = None
    if torch is not None:
        got = kestrel.advise(*(torch.from_numpy(a) for a in (Q, K, V)), **opts)
        del got["provenance"]
        assert got == want
    with pytest.raises(ValueError, match=r"^Q holds complex numbers \(dtype complex128\): kestrel takes real tokens; "
                                         r"pass Q\.real"):
        kestrel.advise(Q + 1j, K, V, **opts)
    for force in (False, True):
        with pytest.raises(ValueError, match=r"output '.*' is a directory; give a file name"):
            kestrel.advise(Q, K, V, out=str(tmp_path), force=force, **opts)
        with pytest.raises(ValueError, match=r"output '.*' is a directory; give a file name"):
            kestrel.advise(Q[0], K[0], V[0], out=str(tmp_path), force=force, **opts)


def test_advise_on_all_zero_queries_and_keys_is_exact():
    """Item 4: every key the same makes every estimated attention row exact: M = 1, error 0 (not 'inputs too large')."""
    Z = np.zeros((48, 4))
    V = np.random.default_rng(9).normal(size=(48, 2)) + 1
    rep = kestrel.advise(Z, Z, V, **dict(ADVISE, estimators=["pos", "oprf"], samplers=["iid", "orthogonal"]))
    assert {(row["status"], row["decision"], row["m_for_target_p95"]) for row in rep["rows"]} == {("ok", "M", 1)}


def test_reports_and_claims_read_back_say_what_is_wrong(tmp_path):
    """Files read back (issue 68 item 2): kestrel.advice.read_report names a missing file, a non-HDF5 file, an HDF5
    file without a report and a broken report; `python3 -m kestrel.advice` exits 2 with that line. The results page
    (experiments/index_page.py) names a claims file it cannot read, with what to do, and exits 2."""
    import subprocess
    import sys
    import h5py
    from kestrel import advice

    with pytest.raises(FileNotFoundError, match="no such file"):
        advice.read_report(str(tmp_path / "missing.h5"))
    (tmp_path / "x.h5").write_text("not hdf5")
    with pytest.raises(ValueError, match=r"x.h5' is not an HDF5 file: give a report written by `kestrel advise"):
        advice.read_report(str(tmp_path / "x.h5"))
    with h5py.File(tmp_path / "empty.h5", "w") as f:
        f["other"] = 1
    with pytest.raises(ValueError, match=r"empty.h5' has no /advise/report.json"):
        advice.read_report(str(tmp_path / "empty.h5"))
    with h5py.File(tmp_path / "broken.h5", "w") as f:
        f["advise/report.json"] = '{"rows": ['
    with pytest.raises(ValueError, match=r"broken.h5': /advise/report.json is not an advise report"):
        advice.read_report(str(tmp_path / "broken.h5"))
    r = subprocess.run([sys.executable, "-m", "kestrel.advice", str(tmp_path / "broken.h5"), str(tmp_path / "p.png")],
                       capture_output=True, text=True)
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "is not an advise report" in r.stderr, r.stderr
    assert not (tmp_path / "p.png").exists()
    page = os.path.join(os.path.dirname(__file__), "..", "..", "experiments", "index_page.py")
    (tmp_path / "other.claims.json").write_text("{")
    r = subprocess.run(["/usr/bin/python3", page, str(tmp_path)], capture_output=True, text=True)
    assert r.returncode == 2 and "other.claims.json' is not a kestrel claims file (not JSON)" in r.stderr, r.stderr
    assert "rerun `kestrel reproduce other --force`" in r.stderr and not (tmp_path / "index.html").exists()
