"""kestrel.torch: the queries, keys and values of a PyTorch model's own attention, captured on a batch, and
`kestrel advise` on them per layer and head (issue 48; docs/torch.md). PyTorch is imported when a function needs it,
so `import kestrel` and `import kestrel.torch` work without it.

Convention: a captured head's q and k carry the module's logit scale, split evenly (q sqrt(s), k sqrt(s)), so its
attention logits are exactly q.k; advise is run with scaling="none" (the command line: `--scaling none`)."""
import dataclasses
import inspect
import json
import math
import os
import time

import numpy as np

AXES = ("layers", "heads", "tokens", "d")  # the dimension labels `kestrel advise` reads (lib/data/points_file.cpp)


def _torch():
    try:
        import torch
    except ImportError as e:
        raise ImportError("kestrel.torch needs PyTorch (Debian: python3-torch)") from e
    return torch


@dataclasses.dataclass
class Capture:
    """One call of one attention module, as float64 NumPy arrays: q [batch, heads, Lq, d], k [batch, kv_heads, Lk, d],
    v [batch, kv_heads, Lk, dv], with logits q.k; causal (query i attends to keys 0..i); keep [batch, Lk] (False: a
    padded key, left out) or None; self_attention (queries are the key positions: padded positions are dropped from
    both); output, the module's own output; merge, the adapter's map from per-head outputs to that output (or None)."""
    name: str
    q: np.ndarray
    k: np.ndarray
    v: np.ndarray
    causal: bool = False
    keep: np.ndarray = None
    self_attention: bool = False
    output: object = None
    merge: object = None


# ---- adapters: module, its call's arguments -> q, k, v per head ------------------------------------------------------

def _mask_blocked(mask, name):
    """A bool mask (True: blocked) or an additive float mask (-inf: blocked, 0: allowed) as a bool tensor."""
    torch = _torch()
    if mask.dtype == torch.bool:
        return mask
    finite = torch.isfinite(mask)
    if bool((mask[finite] != 0).any()) or bool((mask[~finite] > 0).any()):
        raise ValueError(f"{name} adds a bias to the logits (entries other than 0 and -inf): advise has no logit bias")
    return ~finite


def attn_mask_is_causal(attn_mask, L, S):
    """True for the causal mask (query i attends to keys 0..i), False for none or one that blocks nothing; any other
    mask is refused (advise knows bidirectional and causal attention only)."""
    torch = _torch()
    if attn_mask is None:
        return False
    blocked = _mask_blocked(attn_mask, "attn_mask")
    if blocked.dim() == 3:  # [batch * heads, L, S]: one mask for all is all advise can take
        if not bool((blocked == blocked[:1]).all()):
            raise ValueError("attn_mask differs between heads or sequences: advise takes one mask for all")
        blocked = blocked[0]
    if not bool(blocked.any()):
        return False
    if L == S and torch.equal(blocked.cpu(), torch.ones(L, S, dtype=torch.bool).triu(1)):
        return True
    raise ValueError(f"attn_mask [{L}, {S}] is neither causal (keys after the query blocked) nor empty: advise has "
                     "bidirectional and causal attention only")


def multihead_attention(module, args, kwargs):
    """The adapter of torch.nn.MultiheadAttention (also inside nn.TransformerEncoderLayer / DecoderLayer): its
    in-projection (in_proj_weight, or q/k/v_proj_weight when kdim/vdim differ), the head split of its forward, logits
    q.k / sqrt(head_dim); attn_mask causal -> causal, key_padding_mask -> keys left out."""
    torch = _torch()
    F = torch.nn.functional
    m = module
    if m.bias_k is not None or m.add_zero_attn:
        raise ValueError("MultiheadAttention with add_bias_kv or add_zero_attn is not supported (an extra key that "
                         "every query sees, also under a causal mask)")
    if m.training and m.dropout > 0:
        raise ValueError("MultiheadAttention is in training mode with dropout > 0: call model.eval() first")
    a = inspect.signature(type(m).forward).bind(m, *args, **kwargs)  # type's: capture() wraps the instance's
    a.apply_defaults()
    query, key, value = a.arguments["query"], a.arguments["key"], a.arguments["value"]
    unbatched = query.dim() == 2
    as_batch_first = (lambda x: x.unsqueeze(0)) if unbatched else (
        (lambda x: x) if m.batch_first else (lambda x: x.transpose(0, 1)))
    x_q, x_k, x_v = (as_batch_first(t).double() for t in (query, key, value))
    if m._qkv_same_embed_dim:
        w_q, w_k, w_v = m.in_proj_weight.double().chunk(3)
    else:
        w_q, w_k, w_v = m.q_proj_weight.double(), m.k_proj_weight.double(), m.v_proj_weight.double()
    b_q, b_k, b_v = m.in_proj_bias.double().chunk(3) if m.in_proj_bias is not None else (None, None, None)
    H, hd = m.num_heads, m.head_dim
    split = lambda x: x.reshape(x.shape[0], x.shape[1], H, hd).transpose(1, 2)  # [B, L, E] -> [B, H, L, hd]
    q, k, v = split(F.linear(x_q, w_q, b_q)), split(F.linear(x_k, w_k, b_k)), split(F.linear(x_v, w_v, b_v))
    pad = a.arguments["key_padding_mask"]
    if pad is not None:
        pad = _mask_blocked(pad, "key_padding_mask").reshape(q.shape[0], -1)

    def merge(y):  # per-head outputs [B, H, L, hd] -> the module's output (out_proj of the concatenated heads)
        y = torch.as_tensor(y).transpose(1, 2).reshape(y.shape[0], y.shape[2], H * hd)
        y = F.linear(y, m.out_proj.weight.double(), None if m.out_proj.bias is None else m.out_proj.bias.double())
        return y[0] if unbatched else (y if m.batch_first else y.transpose(0, 1))

    return dict(q=q, k=k, v=v, scale=hd ** -0.5, causal=attn_mask_is_causal(a.arguments["attn_mask"], q.shape[2],
                                                                            k.shape[2]),
                key_padding_mask=pad, self_attention=query is key, merge=merge)


def default_adapters():
    """{module class: adapter}: the adapters capture() uses when none are given."""
    return {_torch().nn.MultiheadAttention: multihead_attention}


# ---- capture -----------------------------------------------------------------------------------------------------

def _no_fast_path(model):
    """PyTorch 1.13's nn.TransformerEncoderLayer, in eval mode without gradients, may compute its attention in one fused
    kernel that never calls its self_attn: it then takes its ordinary path (the same mathematics), which capture()
    sees. Returns the undo."""
    torch = _torch()
    undo = []
    for mod in model.modules():
        if isinstance(mod, torch.nn.TransformerEncoderLayer) and getattr(mod, "activation_relu_or_gelu", 0):
            undo.append((mod, mod.activation_relu_or_gelu))
            mod.activation_relu_or_gelu = 0  # the fast path's precondition; the ordinary path uses mod.activation
    return lambda: [setattr(mod, "activation_relu_or_gelu", v) for mod, v in undo]


def _run(model, batch):
    if isinstance(batch, dict):
        return model(**batch)
    if isinstance(batch, (tuple, list)):
        return model(*batch)
    return model(batch)


def _shown(name):
    """A captured module as errors name it: 'module 'layers.0.self_attn'', the model itself when it is the module."""
    return f"module '{name}'" if name else "the model (module '')"


def _adapter_tensors(name, got):
    """q, k, v of an adapter's result as float64 tensors, checked: a dict with q, k and v of [batch, heads, L, d] and
    finite values (NaN from the model, e.g. a NaN in the batch, is named here, not as advise's Q)."""
    torch = _torch()
    if not isinstance(got, dict):
        raise ValueError(f"{_shown(name)}: the adapter returned {type(got).__name__}, not a dict: it must return "
                         "dict(q=..., k=..., v=...) (docs/torch.md)")
    missing = {"q", "k", "v"} - set(got)
    if missing:
        raise ValueError(f"{_shown(name)}: the adapter returned no {', '.join(sorted(missing))} (it returns q, k and "
                         "v)")
    q, k, v = (torch.as_tensor(got[n]).detach().double() for n in "qkv")
    if q.dim() != 4 or k.dim() != 4 or v.dim() != 4:
        raise ValueError(f"{_shown(name)}: q, k, v must be [batch, heads, L, d], got {list(q.shape)}, "
                         f"{list(k.shape)}, {list(v.shape)}")
    for n, t in zip("qkv", (q, k, v)):
        bad = (~torch.isfinite(t)).nonzero()
        if len(bad):
            raise ValueError(f"{_shown(name)}: the adapter's {n} has {len(bad)} values that are NaN or infinite "
                             f"(the first at [batch, head, position, i] = {bad[0].tolist()}): check the batch for NaN "
                             "or Inf and the module's weights")
    return q, k, v


def _as_capture(name, got, output):
    torch = _torch()
    q, k, v = _adapter_tensors(name, got)
    scale = got.get("scale")
    scale = q.shape[-1] ** -0.5 if scale is None else float(scale)
    if not (scale > 0 and math.isfinite(scale)):
        raise ValueError(f"{_shown(name)}: the adapter's scale must be finite and > 0 (the logits are scale q.k), "
                         f"got {scale}")
    root = scale ** 0.5  # logits s q.k = (sqrt(s) q).(sqrt(s) k): split evenly, as advise's own scaling does
    pad = got.get("key_padding_mask")
    keep = None if pad is None else ~torch.as_tensor(pad).bool().cpu().numpy()
    if keep is not None and keep.shape != (k.shape[0], k.shape[2]):
        raise ValueError(f"{_shown(name)}: key_padding_mask must be [batch, Lk] = {[k.shape[0], k.shape[2]]}, got "
                         f"{list(keep.shape)}")
    return Capture(name, (q * root).cpu().numpy(), (k * root).cpu().numpy(), v.cpu().numpy(),
                   bool(got.get("causal", False)), keep, bool(got.get("self_attention", False)),
                   output[0] if isinstance(output, tuple) else output, got.get("merge"))


def _module_names(modules):
    """modules= as a set of names: a list (tuple, set) of strings, or None. One string is refused (it would be read as
    its characters)."""
    if modules is None:
        return None
    if isinstance(modules, (str, bytes)):
        raise ValueError(f"modules: expected a list of module names, got the string {modules!r}: pass "
                         f"modules=[{modules!r}]")
    try:
        names = list(modules)
    except TypeError:
        raise ValueError(f"modules: expected a list of module names, got {modules!r}") from None
    bad = [m for m in names if not isinstance(m, str)]
    if bad:
        raise ValueError(f"modules: expected module names (strings, as model.named_modules() gives), got {bad[0]!r}")
    return set(names)


def _check_batch(batch):
    """NaN or +Inf in a floating-point tensor or array of the batch (or of its tuple, list or dict) is named with where
    it is, before the model runs: it would reach every attention module's q, k and v. -Inf is allowed: additive
    attention masks (PyTorch's float masks) use it for "never attend"; a -Inf that reaches q, k or v is caught where the
    modules' q, k and v are checked."""
    torch = _torch()
    items = batch.items() if isinstance(batch, dict) else enumerate(batch) if isinstance(batch, (tuple, list)) \
        else [(None, batch)]
    for key, x in items:
        if isinstance(x, np.ndarray) and x.dtype.kind in "fc":
            x = torch.as_tensor(x)
        if isinstance(x, torch.Tensor) and (x.is_floating_point() or x.is_complex()):
            d = x.detach()
            bad = (torch.isnan(d) | (d == float("inf"))).nonzero()
            if len(bad):
                where = "batch" if key is None else f"batch[{key!r}]"
                raise ValueError(f"{where} has {len(bad)} values that are NaN or +infinite (the first at index "
                                 f"{bad[0].tolist()}): attention on it is not defined; clean the batch first")


def capture(model, batch, *, adapters=None, modules=None):
    """Runs `model` once on `batch` (model(batch); model(*batch) for a tuple, model(**batch) for a dict) without
    gradients and returns a Capture per call of an attention module, in call order: every module that is an instance of
    a class in `adapters` ({class: adapter}, default: nn.MultiheadAttention's), or only those whose qualified names are
    in `modules`. An adapter(module, args, kwargs) returns a dict: q [B, H, Lq, d], k [B, Hkv, Lk, d],
    v [B, Hkv, Lk, dv] as the module computes them, and optionally scale (the logits are scale q.k; default d^-1/2),
    causal, key_padding_mask ([B, Lk], True: left out), self_attention and merge (per-head outputs -> the module's
    output). docs/torch.md has the protocol and an example."""
    torch = _torch()
    adapters = default_adapters() if adapters is None else adapters
    modules = _module_names(modules)
    _check_batch(batch)
    captures, originals = [], []
    named = dict(model.named_modules())
    unknown = sorted(set(modules or ()) - set(named))
    if unknown:
        raise ValueError(f"modules: no module named {unknown} in the model")
    for name, mod in named.items():
        adapter = next((f for cls, f in adapters.items() if isinstance(mod, cls)), None)
        if adapter is None or (modules is not None and name not in modules):
            continue

        def wrapped(*args, _mod=mod, _name=name, _forward=mod.forward, _adapter=adapter, **kwargs):
            # The call's own arguments (PyTorch 1.13's forward hooks do not see keyword arguments such as attn_mask).
            out = _forward(*args, **kwargs)
            calls = sum(c.name.split("#")[0] == _name for c in captures)
            captures.append(_as_capture(_name + (f"#{calls}" if calls else ""), _adapter(_mod, args, kwargs), out))
            return out
        originals.append((mod, mod.__dict__.get("forward")))
        mod.forward = wrapped
    if not originals:
        raise ValueError("the model has no attention module that an adapter knows"
                         + ("" if modules is None else f" among modules={sorted(modules)}"))
    undo = _no_fast_path(model)
    try:
        with torch.no_grad():
            _run(model, batch)
    finally:
        undo()
        for mod, own in originals:
            if own is None:
                del mod.forward  # the instance attribute: the class's forward is back
            else:
                mod.forward = own
    if not captures:
        raise ValueError("no attention module was called on this batch")
    return captures


# ---- exact attention, the check of a capture -------------------------------------------------------------------

def exact_attention(c):
    """Softmax attention of a capture, per head: [B, H, Lq, dv] float64 (masked as captured; a query with no key left
    is NaN, as in PyTorch)."""
    group = c.q.shape[1] // c.k.shape[1]
    k, v = np.repeat(c.k, group, axis=1), np.repeat(c.v, group, axis=1)
    logits = c.q @ k.transpose(0, 1, 3, 2)
    blocked = np.zeros(logits.shape[-2:], bool)[None, None]
    if c.causal:
        blocked = blocked | np.triu(np.ones(logits.shape[-2:], bool), 1)[None, None]
    if c.keep is not None:
        blocked = blocked | ~c.keep[:, None, None, :]
    logits = np.where(blocked, -np.inf, logits)
    top = logits.max(axis=-1, keepdims=True)
    with np.errstate(invalid="ignore"):
        w = np.exp(logits - top)
        return (w @ v) / w.sum(axis=-1, keepdims=True)


def verify(c):
    """The largest |difference| between the module's own output and its output recomputed from the capture (exact
    attention per head, then the adapter's merge); rows with no key left are skipped."""
    torch = _torch()
    if c.merge is None:
        raise ValueError(f"{c.name}: its adapter gives no merge (per-head outputs -> the module's output)")
    mine = c.merge(exact_attention(c)).detach().cpu().numpy()
    theirs = torch.as_tensor(c.output).detach().double().cpu().numpy()
    ok = np.isfinite(mine) & np.isfinite(theirs)
    return float(np.abs(mine - theirs)[ok].max())


# ---- one sequence as advise's [layers, heads, L, d] ----------------------------------------------------------------

def stack(captures, sequence=0):
    """Sequence `sequence` of the batch as Q [layers, H, Lq, d], K [layers, Hkv, Lk, d], V [layers, Hkv, Lk, dv] (one
    layer per capture) and whether it is causal. advise cannot leave keys out: padded positions are dropped (keys and
    values; queries too where they are the key positions), which is exact (the attention of every remaining query is
    unchanged). Returns (Q, K, V, causal, info)."""
    if not captures:
        raise ValueError("no captures")
    if isinstance(sequence, bool) or not isinstance(sequence, (int, np.integer)):
        raise ValueError(f"sequence: expected the index of a sequence in the batch (an integer >= 0), got {sequence!r}")
    picked, shapes, dropped = [], [], 0
    for c in captures:
        if not 0 <= sequence < c.q.shape[0]:
            raise ValueError(f"sequence {sequence} is not in the batch of {c.q.shape[0]} ({c.name}): give sequence = "
                             f"0..{c.q.shape[0] - 1}")
        q, k, v = c.q[sequence], c.k[sequence], c.v[sequence]
        if c.keep is not None:
            keep = c.keep[sequence]
            dropped = max(dropped, int((~keep).sum()))
            if not keep.any():
                raise ValueError(f"sequence {sequence}: key_padding_mask pads every key of {_shown(c.name)}, so no "
                                 "attention is left to advise on: pick another sequence=")
            k, v = k[:, keep], v[:, keep]
            if c.causal or c.self_attention:
                q = q[:, keep]
        picked.append((q, k, v))
        shapes.append((c.name, q.shape, k.shape, v.shape, c.causal))
    first = shapes[0]
    for s in shapes[1:]:
        if s[1:] != first[1:]:
            raise ValueError(f"attention modules differ: {first[0]} has q {list(first[1])} k {list(first[2])} v "
                             f"{list(first[3])} causal={first[4]}, {s[0]} has q {list(s[1])} k {list(s[2])} v "
                             f"{list(s[3])} causal={s[4]}: advise them apart (modules=[...])")
    Q, K, V = (np.ascontiguousarray(np.stack([p[i] for p in picked])) for i in range(3))
    info = {"modules": [c.name for c in captures], "sequence": sequence, "padded_positions_dropped": dropped,
            "scaling": "logits q.k: the module's scale split evenly between q and k (advise scaling none)"}
    return Q, K, V, first[4], info


def stack_sequences(captures):
    """Every sequence of the batch as Q [sequences, layers, H, Lq, d], K and V likewise (stack() of each), as learned
    maps take them (kestrel.advise(learned=...): fitted on some sequences, judged on the others). The sequences need
    the same lengths once padded positions are dropped. Returns (Q, K, V, causal, info)."""
    if not captures:
        raise ValueError("no captures")
    per = [stack(captures, s) for s in range(captures[0].q.shape[0])]
    lengths = sorted({p[0].shape[-2] for p in per} | {p[1].shape[-2] for p in per})
    if len(lengths) > 1:
        raise ValueError(f"the sequences have {lengths} tokens once padded positions are dropped: learned maps need "
                         "sequences of one length (a batch without padding, or one length per batch)")
    Q, K, V = (np.ascontiguousarray(np.stack([p[i] for p in per])) for i in range(3))
    info = dict(per[0][4], sequence="all", sequences=len(per),
                padded_positions_dropped=max(p[4]["padded_positions_dropped"] for p in per))
    return Q, K, V, per[0][3], info


def save_hdf5(path, captures, sequence=0, force=False):
    """Writes sequence `sequence` as /Q, /K, /V of [layers, heads, tokens, d] with the axes named, which
    `kestrel advise --queries PATH:/Q --keys PATH:/K --values PATH:/V --scaling none [--causal]` reads; the root's
    attributes say the modules, causal and that command. Returns the command's arguments after `kestrel advise`."""
    path = _path(path, "path")
    Q, K, V, causal, info = stack(captures, sequence)

    def write(f):
        _stamp(f, "kestrel.capture")
        _write_inputs(f, path, "/", Q, K, V, causal, info)

    _write_new(path, force, write)
    return _cli_args(path, "/", causal)


def _stamp(f, name):
    """The root attributes schema and schema_version of a file this module writes (kestrel.schemas())."""
    from . import _kestrel

    f.attrs["schema"] = name
    f.attrs["schema_version"] = next(s["version"] for s in _kestrel.schemas() if s["name"] == name)


def _cli_args(path, group, causal):
    g = group.rstrip("/")
    return (["--queries", f"{path}:{g}/Q", "--keys", f"{path}:{g}/K", "--values", f"{path}:{g}/V", "--scaling", "none"]
            + (["--causal"] if causal else []))


def _write_inputs(f, path, group, Q, K, V, causal, info):
    """Q, K, V with their axes named; [sequences, layers, ...] (learned maps) are read back by kestrel.advise, the
    others by the command line too (the advise_arguments attribute)."""
    g = f.require_group(group)
    sequences = Q.ndim == len(AXES) + 1
    for name, a in zip("QKV", (Q, K, V)):
        g[name] = a
        for axis, label in enumerate(("sequences",) * sequences + AXES):
            g[name].dims[axis].label = label
    g.attrs["causal"] = causal
    g.attrs["kestrel_torch"] = json.dumps(info)
    if not sequences:
        g.attrs["advise_arguments"] = " ".join(_cli_args(path, group, causal))


def _write_new(path, force, write):
    """Writes a file through `write(h5py.File)` into a temporary file beside `path`, then publishes it with the
    command line's own publish (io/output.hpp): an existing `path` is replaced only with force=True, and nothing is
    left behind on failure."""
    import h5py
    from . import _kestrel

    _check_new(path, force)
    tmp = _kestrel._temp_beside(path)
    try:
        with h5py.File(tmp, "w") as f:
            write(f)
        _publish(tmp, path, force)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def _path(p, name):
    """A path given as str or os.PathLike (pathlib.Path), as str."""
    try:
        p = os.fspath(p)
    except TypeError:
        raise ValueError(f"{name}: expected a file path (str or pathlib.Path), got {p!r}") from None
    if isinstance(p, bytes):
        p = os.fsdecode(p)
    return p


def _check_new(path, force):
    """The command line's check of an output (io/output.hpp check_output): a new path, or with force an existing
    regular file, in a writable directory."""
    from . import _kestrel

    _kestrel._check_output(path, force)


def _publish(tmp, path, force):
    """The command line's publish (io/output.hpp publish_output): atomic; without force it never replaces a path
    that appeared meanwhile."""
    from . import _kestrel

    _kestrel._publish_output(tmp, path, force)


# ---- advise ------------------------------------------------------------------------------------------------------

def advise_model(model, batch, *, sequence=0, adapters=None, modules=None, out=None, force=False, **options):
    """Captures the model's attention on `batch` (capture()), stacks sequence `sequence` over layers and heads
    (stack()) and runs kestrel.advise on it with `options` (its keywords: target, budget, estimators, samplers, seed,
    ...; scaling is "none" and causal comes from the masks). Returns advise's multi-head report with a "torch" entry
    (modules, sequence, padded positions dropped, capture and advise seconds). out="R.h5" writes the report with the
    command line's own writer (kestrel.advise(out=...): what `kestrel advise --out` writes, every head's datasets
    included), adds the captured inputs as /inputs/Q, K, V with their axes named and the capture's provenance, and
    draws R.png beside it; force=True replaces them. learned=["hedgehog"] (with learned_features, fit_seeds,
    held_out) adds learned maps fitted per head on some sequences of the batch and judged on the others
    (stack_sequences()); the HDF5 report then holds each head's fitted parameters under
    /advise/layer<l>/head<h>/hedgehog/learned."""
    import kestrel

    if "scaling" in options:
        raise ValueError("scaling is fixed: the captured q and k carry the module's scale (scaling='none')")
    if isinstance(sequence, bool) or not isinstance(sequence, (int, np.integer)) or sequence < 0:
        raise ValueError(f"sequence: expected the index of a sequence in the batch (an integer >= 0), got {sequence!r}")
    modules = _module_names(modules)
    if out is not None:
        out = _path(out, "out")
        if not str(out).endswith(".h5"):
            raise ValueError(f"out: expected a path ending in .h5 (the plot goes beside it as .png), got '{out}'")
        for p in (out, out[:-3] + ".png"):
            _check_new(p, force)
    learned = bool(options.get("learned"))
    if learned and sequence != 0:
        raise ValueError(f"sequence={sequence}: with learned maps every sequence of the batch is used (the random rows "
                         "on the first, the maps fitted on some and judged on the others): leave sequence out")
    t0 = time.perf_counter()
    captures = capture(model, batch, adapters=adapters, modules=modules)
    Q, K, V, causal, info = stack_sequences(captures) if learned else stack(captures, sequence)
    t1 = time.perf_counter()
    if options.get("causal", causal) != causal:
        raise ValueError(f"causal={options['causal']} but the model's masks say causal={causal}")
    options["causal"] = causal
    if out is None:
        report = kestrel.advise(Q, K, V, scaling="none", **options)
        t2 = time.perf_counter()
    else:  # written into temporary files beside out, published once the plot is drawn: nothing left on failure
        import h5py
        from . import _kestrel, advice

        png = out[:-3] + ".png"
        tmp_h5, tmp_png = (_kestrel._temp_beside(p) for p in (out, png))
        try:
            report = kestrel.advise(Q, K, V, scaling="none", out=tmp_h5, force=True, **options)
            t2 = time.perf_counter()
            info.update(capture_seconds=round(t1 - t0, 3), advise_seconds=round(t2 - t1, 3),
                        torch_version=_torch().__version__)
            with h5py.File(tmp_h5, "a") as f:
                prov = json.loads(f.attrs["provenance"])
                prov["torch"] = info
                f.attrs["provenance"] = json.dumps(prov)
                _write_inputs(f, out, "/inputs", Q, K, V, causal, info)
            advice.plot_file(tmp_h5, tmp_png)
            _publish(tmp_h5, out, force)
            try:
                _publish(tmp_png, png, force)
            except (OSError, ValueError):  # ValueError: the plot's path appeared meanwhile
                os.unlink(out)  # no report without its plot (as the command line)
                raise
        finally:
            for p in (tmp_h5, tmp_png):
                if os.path.exists(p):
                    os.unlink(p)
    info.update(capture_seconds=round(t1 - t0, 3), advise_seconds=round(t2 - t1, 3),
                torch_version=_torch().__version__)
    report["torch"] = info
    return report


def write_report(report, out, force=False, inputs=None):
    """A report already computed (a dict of kestrel.advise) written for the plot and for kestrel.results:
    /advise/report.json (the same JSON) with the provenance as root attributes, the inputs (when given) as /inputs/Q,
    K, V with their axes named (so `kestrel advise` can re-run them), and OUT.png beside it. Not written: the command
    line's per-head datasets under /advise, which need the report's computation (advise_model(out=...) and
    kestrel.advise(out=...) write them)."""
    from . import advice
    import matplotlib

    import h5py
    from . import _kestrel

    out = _path(out, "out")
    png = out[:-3] + ".png"
    for p in (out, png):
        _check_new(p, force)
    needed = ("kestrel_version", "git_revision", "command", "created_utc", "options", "library_versions")
    if not isinstance(report, dict) or not all(k in report.get("provenance", {}) for k in needed):
        raise ValueError("report: expected the dict kestrel.advise or advise_model returned (with its provenance)")
    prov = dict(report["provenance"])
    prov["torch"] = report.get("torch", {})

    matplotlib.use("Agg")
    tmp_png, tmp_h5 = _kestrel._temp_beside(png), _kestrel._temp_beside(out)
    try:
        fig = advice.plot_heads(report) if "summary" in report else advice.plot_report(report)
        fig.savefig(tmp_png, dpi=130, bbox_inches="tight")
        # The command line's writers: provenance and schema as root attributes, /advise/report.json.
        _kestrel._write_report_file(tmp_h5, json.dumps(report), json.dumps(prov))
        if inputs is not None:
            with h5py.File(tmp_h5, "a") as f:
                _write_inputs(f, out, "/inputs", *inputs, report["options"].get("causal", False),
                              report.get("torch", {}))
        _publish(tmp_h5, out, force)
        try:
            _publish(tmp_png, png, force)
        except (OSError, ValueError):  # ValueError: the plot's path appeared meanwhile
            os.unlink(out)  # no report without its plot (as the command line)
            raise
    finally:
        for p in (tmp_png, tmp_h5):
            if os.path.exists(p):
                os.unlink(p)


from kestrel.linearize import linearize, random_attention, softmax_attention  # noqa: E402  (issue 67 item 2)
from kestrel.plan import plan  # noqa: E402  (issue 67 items 1 and 3)
