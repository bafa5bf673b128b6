"""kestrel.advise on [heads, L, d] and [layers, heads, L, d] arrays (tasks/advise/heads.hpp): each head's rows equal
the 2-D call on that head with its derived seed (layer 0 head 0 keeps the seed), grouped-query heads read their
key/value head, the report equals the command line's on the same .npy files, the heat map is drawn, and shapes that do
not fit are a ValueError naming them. Exact comparisons only (no statistics)."""
import json
import os
import subprocess

import numpy as np
import pytest

import kestrel

CLI = os.environ.get("KESTREL_CLI", "")
needs_cli = pytest.mark.skipif(not CLI, reason="KESTREL_CLI (the kestrel command line) not given")
OPTS = dict(budget=256, draws=8, max_draws=32, rows=12, estimators=["pos", "oprf"], samplers=["iid"], no_timing=True,
            seed=11)


@pytest.fixture(scope="module")
def stack():
    r = np.random.default_rng(12)
    # 2 layers x 4 query heads, 2 key/value heads (grouped-query attention: query head h reads kv head h // 2).
    return (0.4 * r.normal(size=(2, 4, 40, 6)), 0.4 * r.normal(size=(2, 2, 40, 6)), 1 + r.normal(size=(2, 2, 40, 3)))


def strip(row):
    return {k: v for k, v in row.items() if k not in ("layer", "head", "kv_head")}


def test_layer0_head0_is_the_2d_call_and_grouped_query_reads_its_kv_head(stack):
    Q, K, V = stack
    rep = kestrel.advise(Q, K, V, **OPTS)
    assert rep["inputs"]["layers"] == 2 and rep["inputs"]["query_heads"] == 4 and rep["inputs"]["kv_heads"] == 2
    assert "4 query heads share 2 key/value heads" in rep["inputs"]["grouped_query"]
    heads = {(h["layer"], h["head"]): h for h in rep["heads"]}
    assert heads[(0, 0)]["seed"] == 11 and len({h["seed"] for h in rep["heads"]}) == 8
    for (layer, head) in [(0, 0), (1, 3)]:
        h = heads[(layer, head)]
        assert h["kv_head"] == head // 2
        alone = kestrel.advise(Q[layer, head], K[layer, head // 2], V[layer, head // 2], **dict(OPTS, seed=h["seed"]))
        rows = [strip(r) for r in rep["rows"] if r["layer"] == layer and r["head"] == head]
        assert rows == alone["rows"]
        assert h["recommendation"] == alone["recommendation"]
    # The summary: every head's M; the largest where every head names one.
    for s in rep["summary"]:
        assert s["status"] == "ok" and len(s["m_for_target_each_head"]) == 8
        if s["decision_every_head"] == "M":
            assert s["m_for_target_every_head"] == max(s["m_for_target_each_head"])
            assert s["m_for_target_median_head"] == sorted(s["m_for_target_each_head"])[3]


def test_shapes_that_do_not_fit_are_refused(stack):
    Q, K, V = stack
    with pytest.raises(ValueError, match=r"K has 3 heads, which does not divide the 4 query heads of Q"):
        kestrel.advise(Q, np.concatenate([K, K[:, :1]], axis=1), None, **OPTS)
    with pytest.raises(ValueError, match=r"K has the shape \[40, 6\] but Q has \[2, 4, 40, 6\]"):
        kestrel.advise(Q, K[0, 0], None, **OPTS)
    with pytest.raises(ValueError, match=r"V has L = 39 tokens per head but K has L = 40"):
        kestrel.advise(Q, K, V[:, :, :39], **OPTS)
    with pytest.raises(ValueError, match=r"K has 1 layers but Q has 2"):
        kestrel.advise(Q, K[:1], None, **OPTS)


@needs_cli
def test_report_equals_the_command_line_and_the_heat_map_is_drawn(tmp_path, stack):
    Q, K, V = (a[:1, :2] for a in stack)  # 1 layer x 2 heads, as [layers, heads, L, d]
    for name, a in zip("QKV", (Q, K, V)):
        np.save(tmp_path / f"{name}.npy", a)
    py = kestrel.advise(Q, K, V, **OPTS)
    args = [CLI, "advise", "--queries", str(tmp_path / "Q.npy"), "--keys", str(tmp_path / "K.npy"), "--values",
            str(tmp_path / "V.npy"), "--budget", "256", "--draws", "8", "--max-draws", "32", "--rows", "12",
            "--estimators", "pos,oprf", "--samplers", "iid", "--no-timing", "--seed", "11", "--quiet"]
    cli = json.loads(subprocess.run(args + ["--json"], capture_output=True, text=True, check=True).stdout)
    py.pop("provenance")
    assert py == dict(cli["advice"], schema=cli["schema"], schema_version=cli["schema_version"])
    assert cli["schema"] == "kestrel.advise.heads"
    subprocess.run(args + ["--out", str(tmp_path / "r.h5")], check=True)
    import h5py
    from PIL import Image

    with h5py.File(tmp_path / "r.h5", "r") as f:
        if py["best"] is not None:
            m = f["advise/m_needed"][()]
            axes = f["advise/m_needed"].attrs["axes"]
            assert m.shape == (1, 2) and (axes.decode() if isinstance(axes, bytes) else axes) == "layer,head"
        assert f["advise/layer0/head1"].attrs["kv_head"] == 1
    with Image.open(tmp_path / "r.png") as im:
        assert im.size[0] > 300 and im.size[1] > 200
    # kestrel.advise(out=...) writes the same file with the command line's writer: the same datasets and values.
    kestrel.advise(Q, K, V, out=str(tmp_path / "p.h5"), **OPTS)
    with pytest.raises(Exception, match="exists"):
        kestrel.advise(Q, K, V, out=str(tmp_path / "p.h5"), **OPTS)
    kestrel.advise(Q, K, V, out=str(tmp_path / "p.h5"), force=True, **OPTS)

    def datasets(path):
        found = {}
        with h5py.File(path, "r") as f:
            f.visititems(lambda n, o: found.__setitem__(n, o[()]) if isinstance(o, h5py.Dataset) else None)
        return found
    cli_file, py_file = datasets(tmp_path / "r.h5"), datasets(tmp_path / "p.h5")
    assert sorted(cli_file) == sorted(py_file) and len(cli_file) > 10
    for name, value in cli_file.items():
        if name != "advise/report.json":  # its provenance differs (command line and call)
            assert np.array_equal(value, py_file[name]), name


def test_options_apply_per_head(stack):
    """--sums and --causal per head: each head's report has its own key sums in fp16 (the recommended row of that head)
    and causal rows, as the 2-D call on that head with its seed."""
    Q, K, V = (a[:1, :2] for a in stack)
    opts = dict(OPTS, sums=["fp16"], causal=True)
    rep = kestrel.advise(Q, K, V, **opts)
    for h in rep["heads"]:
        alone = kestrel.advise(Q[0, h["head"]], K[0, h["kv_head"]], V[0, h["kv_head"]], **dict(opts, seed=h["seed"]))
        assert h["sums"] == alone["sums"] and list(h["sums"]["formats"]) == ["fp16"]
        rows = [strip(r) for r in rep["rows"] if r["head"] == h["head"]]
        assert rows == alone["rows"] and all("causal" in r for r in rows if r["status"] == "ok")
    # The figure of a causal stack has a third panel: the error against position per head.
    from kestrel.advice import plot_heads

    fig = plot_heads(rep)
    assert [a.get_title() for a in fig.axes if a.get_title()][-1] == "causal: error by position"
    assert "1 layer x 2 heads" in fig._suptitle.get_text() and "causal" in fig._suptitle.get_text()


@needs_cli
def test_hdf5_inputs_with_named_axes_equal_the_npy_ones(tmp_path, stack):
    """FILE.h5:/dataset of [layers, heads, L, d] with its axes named (dimension labels) gives the .npy report; without
    the labels it is refused in one line (exit 2) naming the axes wanted, and no report is written."""
    import h5py

    Q, K, V = (a[:, :2] for a in stack)  # 2 layers x 2 query heads, 2 key/value heads
    with h5py.File(tmp_path / "in.h5", "w") as f:
        for name, a in zip("QKV", (Q, K, V)):
            f[name] = a
            for k, label in enumerate(["layers", "heads", "tokens", "d"]):
                f[name].dims[k].label = label
        f["unnamed"] = Q
    for name, a in zip("QKV", (Q, K, V)):
        np.save(tmp_path / f"{name}.npy", a)
    common = ["--estimators", "pos", "--samplers", "iid", "--budget", "64", "--draws", "8", "--rows", "8", "--seed", "5",
              "--no-timing", "--quiet", "--json"]
    run = lambda q, k, v: subprocess.run([CLI, "advise", "--queries", q, "--keys", k, "--values", v] + common,
                                         capture_output=True, text=True)
    h5 = run(*(f"{tmp_path / 'in.h5'}:/{n}" for n in "QKV"))
    npy = run(*(str(tmp_path / f"{n}.npy") for n in "QKV"))
    assert h5.returncode == 0 and npy.returncode == 0, h5.stderr + npy.stderr
    assert json.loads(h5.stdout)["advice"] == json.loads(npy.stdout)["advice"]
    bad = subprocess.run([CLI, "advise", "--queries", f"{tmp_path / 'in.h5'}:/unnamed", "--keys",
                          f"{tmp_path / 'in.h5'}:/K"] + common[:-1] + ["--out", str(tmp_path / "r.h5")],
                         capture_output=True, text=True)
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1, bad.stderr
    assert "a 4-D dataset needs its axes named [layers, heads, L, d]" in bad.stderr and "got [?, ?, ?, ?]" in bad.stderr
    assert not (tmp_path / "r.h5").exists()


@needs_cli
def test_a_split_run_merges_into_the_one_process_report(tmp_path):
    """Issue 66 item 4: a model's layers split over job-array tasks (--shard K/N, or a Slurm array task's shard from
    its environment) and merged: the merged report equals the one-process report (JSON; every HDF5 dataset bit for bit,
    every attribute but the run's provenance), with rows that are not applicable on every head. Bad splits and merges
    are refused with exit 2 (or 3 for a missing layer), writing nothing."""
    import h5py

    r = np.random.default_rng(5)
    for name, a in (("Q", 0.4 * r.normal(size=(3, 2, 40, 6))), ("K", 0.4 * r.normal(size=(3, 1, 40, 6))),
                    ("V", 1 + r.normal(size=(3, 1, 40, 3)))):
        np.save(tmp_path / f"{name}.npy", a)
    args = [CLI, "advise", "--queries", str(tmp_path / "Q.npy"), "--keys", str(tmp_path / "K.npy"), "--values",
            str(tmp_path / "V.npy"), "--budget", "256", "--draws", "8", "--max-draws", "32", "--rows", "12",
            "--estimators", "pos,oprf,trig", "--samplers", "iid", "--no-timing", "--seed", "11", "--quiet", "--causal"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}

    def run(extra, check=True, **more):
        return subprocess.run(args + extra, capture_output=True, text=True, check=check, env=dict(env, **more))

    whole = json.loads(run(["--out", str(tmp_path / "w.h5"), "--json"]).stdout)
    assert any(row["status"] != "ok" for row in whole["advice"]["rows"])  # trig: not applicable on every head
    split = str(tmp_path / "s.h5")
    part0 = json.loads(run(["--out", split, "--json", "--shard", "0/2"]).stdout)
    assert part0["schema"] == "kestrel.advise.part" and part0["advice"]["shard"]["layers"] == [0, 2]
    slurm = dict(SLURM_ARRAY_TASK_ID="1", SLURM_ARRAY_TASK_MIN="0", SLURM_ARRAY_TASK_MAX="1", SLURM_ARRAY_TASK_COUNT="2")
    run(["--out", split], **slurm)  # array task 1 of 2: layer 1
    assert sorted(os.listdir(split + ".parts")) == ["layers-0-of-2.h5", "layers-1-of-2.h5"]
    assert not os.path.exists(split)
    merged = json.loads(subprocess.run([CLI, "advise", "merge", split, "--json", "--quiet"], capture_output=True,
                                       text=True, check=True, env=env).stdout)
    assert merged["advice"] == whole["advice"] and merged["schema"] == whole["schema"]
    assert merged["provenance"]["shards"] == ["0/2", "1/2"]
    assert os.path.getsize(tmp_path / "s.png") > 1000

    def contents(path):
        found = {}
        with h5py.File(path, "r") as f:
            def visit(name, obj):
                value = obj[()] if isinstance(obj, h5py.Dataset) else None
                if name == "advise/report.json":
                    value = json.loads(value)
                elif isinstance(value, np.ndarray):
                    value = (value.dtype.str, value.shape, value.tobytes())
                attrs = {k: (v.tolist() if isinstance(v, np.ndarray) else v) for k, v in obj.attrs.items()}
                found[name] = (value, attrs)
            f.visititems(visit)
        return found
    a, b = contents(tmp_path / "w.h5"), contents(split)
    assert sorted(a) == sorted(b) and len(a) > 30
    assert [k for k in a if a[k] != b[k]] == []
    with h5py.File(split, "r") as f:
        assert f.attrs["schema"] in ("kestrel.advise.heads", b"kestrel.advise.heads")

    def refused(cmd, words, code=2, **more):
        p = subprocess.run(cmd, capture_output=True, text=True, env=dict(env, **more))
        assert p.returncode == code and all(w in p.stderr for w in words), (p.returncode, p.stderr)
        assert len(p.stderr.strip().splitlines()) == 1, p.stderr
    # The merged report and each part are finished results: not replaced without --force. A resubmitted task whose
    # part is there with the same options and inputs has nothing to do; with others it is refused.
    refused([CLI, "advise", "merge", split], ["exists", "--force"])
    before = os.stat(split + ".parts/layers-0-of-2.h5").st_mtime_ns
    again = subprocess.run([a for a in args if a != "--quiet"] + ["--out", split, "--shard", "0/2", "--json"],
                           capture_output=True, text=True, check=True, env=env)
    assert "is finished" in again.stderr and json.loads(again.stdout)["advice"] == part0["advice"]
    refused(args + ["--out", split, "--shard", "0/2", "--target", "0.2"], ["exists", "other options", "--force"])
    assert os.stat(split + ".parts/layers-0-of-2.h5").st_mtime_ns == before
    # A layer in no part: exit 3 naming it; nothing is written.
    os.remove(split + ".parts/layers-1-of-2.h5")
    refused([CLI, "advise", "merge", str(tmp_path / "s.h5"), "--force"], ["layers 1 of the 3"], code=3)
    assert os.path.exists(split)  # the earlier merge's file is left as it was
    # A part of other options does not merge with the rest.
    run(["--out", split, "--shard", "1/2", "--target", "0.2"])
    refused([CLI, "advise", "merge", split, "--force"], ["differ in their options"])
    # Shards that cannot be: beyond the layers, without --out, of a single head, malformed.
    refused(args + ["--out", str(tmp_path / "x.h5"), "--shard", "3/4"], ["3 layer(s)", "use N <= 3"])
    refused(args + ["--shard", "0/2"], ["--out"])
    one = [CLI, "advise", "--queries", str(tmp_path / "q2.npy"), "--keys", str(tmp_path / "q2.npy")]
    np.save(tmp_path / "q2.npy", 0.4 * r.normal(size=(20, 6)))
    refused(one + ["--shard", "0/2", "--out", str(tmp_path / "y.h5")], ["--shard 0/2", "one head"])
    refused(args + ["--out", str(tmp_path / "x.h5"), "--shard", "2/2"], ["--shard", "0 <= K < N"])
    refused([CLI, "advise", "merge", str(tmp_path / "none.h5")], ["no parts to merge"])
    assert not any(os.path.exists(tmp_path / n) for n in ("x.h5", "y.h5", "none.h5", "x.h5.parts", "y.h5.parts"))
