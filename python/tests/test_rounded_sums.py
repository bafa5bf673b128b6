"""The key sums in number formats (kestrel.round_to, kestrel.rounded_sums; advise sums=[...], chunk=) against an
independent emulation written here: fp16 with NumPy's float16 arithmetic (each float16 operation is computed in
float32 and rounded once to float16, which is exact for sums and products of float16 values: 24 >= 2 * 11 + 2 digits),
bf16 rounding written from its definition (8 significant bits, exponents -126..127, ties to even), fp32 with NumPy's
float32. No code is shared with the C++ emulation, and every comparison is exact (bit-equal)."""
import json
import math
import os
import subprocess

import numpy as np
import pytest

import kestrel

CLI = os.environ.get("KESTREL_CLI", "")
needs_cli = pytest.mark.skipif(not CLI, reason="KESTREL_CLI (the kestrel command line) not given")

BF16_MAX = (2 - 2.0 ** -7) * 2.0 ** 127


def bf16(x):
    """x (float64 array) rounded to bf16 from the definition: the spacing at |x| is 2^(e - 7) for
    2^e <= |x| < 2^(e + 1), e clamped below at -126 (subnormals); the remainder decides, a tie goes to the even
    multiple; beyond the largest finite value: inf."""
    x = np.asarray(x, dtype=np.float64)
    out = np.empty_like(x)
    for i, v in np.ndenumerate(x):
        if v == 0 or not math.isfinite(v):
            out[i] = v
            continue
        e = max(math.frexp(abs(v))[1] - 1, -126)
        spacing = math.ldexp(1.0, e - 7)
        n = abs(v) / spacing  # exact: a power of two
        k = math.floor(n)
        if n - k > 0.5 or (n - k == 0.5 and k % 2 == 1):
            k += 1
        r = k * spacing
        out[i] = math.copysign(math.inf if r > BF16_MAX else r, v)
    return out


def numpy_sums(phi, V, fmt, chunk):
    """S = sum_j phi_j [v_j, 1]^T: features and values stored in the format; chunk 1: each term added in the format
    token by token; chunk C: terms summed in float32 over C tokens, each chunk's total added in the format (an
    unfinished chunk added at the end)."""
    L, M = phi.shape
    Vx = np.hstack([V, np.ones((L, 1))])
    if fmt == "fp16":
        store, add = (lambda a: np.asarray(a).astype(np.float16)), (lambda s, t: (s + t).astype(np.float16))
    elif fmt == "fp32":
        store, add = (lambda a: np.asarray(a).astype(np.float32)), (lambda s, t: (s + t).astype(np.float32))
    else:
        store, add = bf16, (lambda s, t: bf16(s.astype(np.float64) + t.astype(np.float64)))
    p, v = store(phi), store(Vx)
    s = store(np.zeros((M, Vx.shape[1])))
    acc = np.zeros((M, Vx.shape[1]), dtype=np.float32)
    with np.errstate(over="ignore"):
        for j in range(L):
            if chunk == 1:
                s = add(s, store(p[j][:, None].astype(np.float64) * v[j][None, :].astype(np.float64)))
            else:
                acc = (acc + (p[j][:, None].astype(np.float32) * v[j][None, :].astype(np.float32))).astype(np.float32)
                if (j + 1) % chunk == 0:
                    s, acc = add(s, store(acc)), np.zeros_like(acc)
        if chunk > 1 and L % chunk:
            s = add(s, store(acc))
    return s.astype(np.float64)


def test_rounding_agrees_with_numpy_and_the_bf16_definition():
    r = np.random.default_rng(3)
    x = r.uniform(-2, 2, 20000) * 2.0 ** r.integers(-30, 18, 20000)  # fp16 normals, subnormals and overflow
    with np.errstate(over="ignore"):
        assert np.array_equal(kestrel.round_to(x, "fp16"), x.astype(np.float16).astype(np.float64))
    y = r.uniform(-2, 2, 20000) * 2.0 ** r.integers(-140, 129, 20000)
    with np.errstate(over="ignore"):
        assert np.array_equal(kestrel.round_to(y, "fp32"), y.astype(np.float32).astype(np.float64))
    assert np.array_equal(kestrel.round_to(y, "bf16"), bf16(y))
    ties = np.array([257.0, 259.0, 1 + 2.0 ** -8, 2.0 ** -134, 3 * 2.0 ** -134, 3.4e38])
    assert list(bf16(ties)) == [256.0, 260.0, 1.0, 0.0, 2.0 ** -132, math.inf]
    assert np.array_equal(kestrel.round_to(ties, "bf16"), bf16(ties))


@pytest.mark.parametrize("fmt", ["fp16", "bf16", "fp32"])
@pytest.mark.parametrize("chunk", [1, 64, 100])
def test_running_sums_equal_the_numpy_emulation(fmt, chunk):
    r = np.random.default_rng(11)
    L, M, dv = 1500, 6, 3
    # Stabilised features (<= 1) spanning e^-20..1, so fp16 stores some as subnormals or 0; values N(0.5, 1).
    phi = np.exp(-20 * r.random((L, M)) ** 2)
    V = 0.5 + r.normal(size=(L, dv))
    got = kestrel.rounded_sums(phi, V, fmt, chunk=chunk)
    assert got["overflow"] == 0
    assert np.array_equal(got["state"], numpy_sums(phi, V, fmt, chunk)), (fmt, chunk)


def test_equal_terms_stall_and_overflow():
    ones = np.ones((4096, 1))
    h = kestrel.rounded_sums(ones, ones, "fp16")["state"]
    assert h[0, 1] == 2048 and numpy_sums(ones, ones, "fp16", 1)[0, 1] == 2048  # 2048 + 1 ties to 2048
    assert kestrel.rounded_sums(ones, ones, "bf16")["state"][0, 1] == 256 == numpy_sums(ones, ones, "bf16", 1)[0, 1]
    assert kestrel.rounded_sums(ones, ones, "fp16", chunk=256)["state"][0, 1] == 4096  # fp32 chunks of 256
    # Terms 2048: 31 * 2048 = 63488 is held, 32 * 2048 = 65536 > 65504 overflows at token 32.
    big = kestrel.rounded_sums(np.ones((40, 1)), np.full((40, 1), 2048.0), "fp16")
    assert big["overflow"] == 32
    with np.errstate(over="ignore"):
        assert np.isinf(numpy_sums(np.ones((32, 1)), np.full((32, 1), 2048.0), "fp16", 1)[0, 0])
        assert np.isfinite(numpy_sums(np.ones((31, 1)), np.full((31, 1), 2048.0), "fp16", 1)[0, 0])


def _inputs():
    r = np.random.default_rng(5)
    return 0.5 * r.normal(size=(200, 8)), 0.5 * r.normal(size=(200, 8)), 1 + r.normal(size=(200, 4))


@needs_cli
def test_advise_sums_from_python_equal_the_command_line(tmp_path):
    Q, K, V = _inputs()
    for name, a in zip("QKV", (Q, K, V)):
        np.save(tmp_path / f"{name}.npy", a)
    opts = dict(estimators=["pos"], samplers=["iid"], target=0.2, budget=256, rows=32, seed=2, no_timing=True,
                sums=["fp16", "bf16"], chunk=32)
    py = kestrel.advise(Q, K, V, **opts)
    out = subprocess.run([CLI, "advise", "--queries", str(tmp_path / "Q.npy"), "--keys", str(tmp_path / "K.npy"),
                          "--values", str(tmp_path / "V.npy"), "--estimators", "pos", "--samplers", "iid", "--target",
                          "0.2", "--budget", "256", "--rows", "32", "--seed", "2", "--no-timing", "--sums",
                          "fp16,bf16", "--chunk", "32", "--json", "--quiet"], capture_output=True, text=True, check=True)
    cli = json.loads(out.stdout)
    py.pop("provenance")
    assert py == dict(cli["advice"], schema=cli["schema"], schema_version=cli["schema_version"])
    s = py["sums"]
    assert s["chunk"] == 32 and sorted(s["formats"]) == ["bf16", "fp16"] and s["lengths"][-1] == 200
    assert all(v > 0 for v in s["formats"]["bf16"]["rounding_p95"])


def test_advise_sums_bad_values():
    Q, K, V = _inputs()
    with pytest.raises(ValueError, match="fp8"):
        kestrel.advise(Q, K, V, sums=["fp8"])
    with pytest.raises(ValueError, match="chunk"):
        kestrel.advise(Q, K, V, sums=["fp16"], chunk=0)
    with pytest.raises(ValueError, match="sums"):
        kestrel.advise(Q, K, V, chunk=8)
    with pytest.raises(ValueError, match="values"):
        kestrel.advise(Q, K, None, sums=["fp16"])
    with pytest.raises(ValueError, match="fp16"):
        kestrel.rounded_sums(np.ones((2, 1)), np.ones((2, 1)), "fp8")
