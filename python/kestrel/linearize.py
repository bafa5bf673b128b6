"""kestrel.torch.linearize (issue 67 item 2, a first step): a copy of a model whose attention modules compute a plan's
map per head: softmax attention kept, or random-feature attention with its draw fixed by seed. The random families
are the GERF family of positive features (PosRF, OPRF, GERF; DERF paper eq. 7): for the softmax kernel exp(q.k),
f(w, x) = D exp(A |w|^2 + B w.x - |x|^2 / 2) / sqrt(M), B = sqrt(1 - 4A), D = (1 - 4A)^(d/4), w ~ N(0, I) drawn by
kestrel (Estimator.draw: the same draws as `kestrel advise` at that seed and sampler), A fitted by kestrel on the
calibration batch's queries and keys. Attention is sum_j f(q_i).f(k_j) v_j / sum_j f(q_i).f(k_j); causal by prefix sums
(Performer's unidirectional mode). Forward and backward run in torch (float64), so gradients reach the model's
projections. A learned head (advise --learned hedgehog) has log-features [z, -z], z = W x + b, with W and b trainable.
Stabilised: a per-query-row and one key maximum are subtracted from the log-features (they cancel)."""
import copy
import functools
import math

import numpy as np



def _torch():
    from kestrel.torch import _torch as t
    return t()


def _check_entry(name, h, e):
    """A plan entry: {"kind": "softmax"}, {"kind": "random", "estimator": a registered name, "m": M >= 1, and optional
    "sampler" (iid, orthogonal), "seed"} or {"kind": "learned", "map": "hedgehog", "W": [P x d], "b": [P]}."""
    where = f"plan['{name}'][{h}]"
    if not isinstance(e, dict) or e.get("kind") not in ("softmax", "random", "learned"):
        raise ValueError(f"{where} = {e!r}: each head's entry is {{'kind': 'softmax'}}, {{'kind': 'random', "
                         "'estimator': 'pos', 'm': 256}} or {'kind': 'learned', 'map': 'hedgehog', 'W': ..., 'b': ...}")
    if e["kind"] == "learned":
        if e.get("map") != "hedgehog":
            raise ValueError(f"{where}: map {e.get('map')!r}: the learned maps linearize computes are: hedgehog")
        W, b = np.asarray(e.get("W"), dtype=float), np.asarray(e.get("b"), dtype=float)
        if W.ndim != 2 or b.shape != (W.shape[0],) or not (np.isfinite(W).all() and np.isfinite(b).all()):
            raise ValueError(f"{where}: W must be a finite P x d matrix and b P finite numbers, got shapes "
                             f"{W.shape} and {b.shape}")
    if e["kind"] == "random":
        import kestrel
        if e.get("estimator") not in kestrel.estimators():
            raise ValueError(f"{where}: estimator {e.get('estimator')!r} is not in kestrel's registry "
                             f"(kestrel.estimators(): {', '.join(kestrel.estimators())})")
        m = e.get("m")
        if not isinstance(m, int) or isinstance(m, bool) or m < 1:
            raise ValueError(f"{where}: m must be a whole number of features >= 1, got {m!r}")
        if e.get("sampler", "iid") not in ("iid", "orthogonal"):
            raise ValueError(f"{where}: sampler {e.get('sampler')!r}: use iid or orthogonal")


def _computed(params):
    """Whether fitted parameters are the GERF family's real positive features (A real, s = 1), which torch computes."""
    return "A_re" in params and params.get("s", 1) == 1 and params.get("A_im", 0.0) == 0.0


@functools.lru_cache(maxsize=None)
def computes(estimator):
    """Whether linearize computes this registered estimator in torch: its parameters, fitted on a few small points, are
    the GERF family's (the registry's names are not listed here: they are asked)."""
    import kestrel
    x = np.random.default_rng(0).normal(size=(4, 16)) * 0.3
    try:
        return _computed(kestrel.fit(estimator, x, x).params())
    except (ValueError, RuntimeError):  # e.g. a learned map: not an estimator with a draw
        return False


class _RandomHead:
    """One head's fixed draw: omega [d, M] and A as float64 tensors."""

    def __init__(self, entry, q, k):
        import kestrel
        e = kestrel.fit(entry["estimator"], q, k)  # q, k: d x L, the calibration tokens (logits q.k)
        p = e.params()
        if not _computed(p):
            raise ValueError(f"estimator {entry['estimator']!r} is not one linearize computes in torch: it has the "
                             "real positive features of the GERF family (PosRF, OPRF, GERF), and this one's "
                             f"parameters are {p}"[:300])
        w = e.draw(entry["m"], seed=entry.get("seed", 1), sampler=entry.get("sampler", "iid"))
        torch = _torch()
        self.omega = torch.as_tensor(np.asarray(w.omega), dtype=torch.float64)
        self.A = float(p["A_re"])

    def log_features(self, x):
        """log f(w, x) for x [..., L, d]: [..., L, M]."""
        d, M = self.omega.shape
        c = 0.25 * d * math.log(1 - 4 * self.A) - 0.5 * math.log(M)
        return (c + self.A * (self.omega ** 2).sum(0) + math.sqrt(1 - 4 * self.A) * (x @ self.omega)
                - 0.5 * (x ** 2).sum(-1, keepdim=True))


def _learned_head(entry, d):
    """A Hedgehog map (advise --learned hedgehog) as a torch module whose W [P, d] and b [P] are trainable parameters:
    log-features [z, -z], z = x W^T + b, of the points x whose dot products are the logits (as advise fits them with
    scaling none, which kestrel.torch uses)."""
    torch = _torch()

    class LearnedHead(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.W = torch.nn.Parameter(torch.as_tensor(np.asarray(entry["W"], dtype=float), dtype=torch.float64))
            self.b = torch.nn.Parameter(torch.as_tensor(np.asarray(entry["b"], dtype=float), dtype=torch.float64))

        def log_features(self, x):
            z = x @ self.W.T + self.b
            return torch.cat([z, -z], -1)

    head = LearnedHead()
    if head.W.shape[1] != d:
        raise ValueError(f"a learned map with d = {head.W.shape[1]} for a head of d = {d}")
    return head


def random_attention(head, q, k, v, causal=False, keep=None):
    """Random-feature attention of one head: q [B, Lq, d], k [B, Lk, d], v [B, Lk, dv] (logits q.k), keep [B, Lk] or
    None (False: a padded key, left out). Returns [B, Lq, dv]."""
    torch = _torch()
    lq, lk = head.log_features(q), head.log_features(k)
    fq = torch.exp(lq - lq.amax(-1, keepdim=True))
    fk = torch.exp(lk - lk.amax(dim=(-2, -1), keepdim=True))
    if keep is not None:
        fk = fk * keep.unsqueeze(-1).to(fk.dtype)
    ones = torch.ones(*v.shape[:-1], 1, dtype=v.dtype)
    v1 = torch.cat([v, ones], -1)  # [B, Lk, dv + 1]: the values and the normaliser together
    if causal:  # S_i = sum_{j <= i} f(k_j) [v_j, 1]^T
        s = torch.cumsum(fk.unsqueeze(-1) * v1.unsqueeze(-2), dim=-3)  # [B, L, M, dv + 1]
        out = torch.einsum("blm,blme->ble", fq, s)
    else:
        out = fq @ (fk.transpose(-2, -1) @ v1)
    return out[..., :-1] / out[..., -1:]


def softmax_attention(q, k, v, causal=False, keep=None):
    """Exact attention of one head (logits q.k), the same shapes as random_attention."""
    torch = _torch()
    logits = q @ k.transpose(-2, -1)
    if causal:
        logits = logits.masked_fill(torch.ones_like(logits, dtype=torch.bool).triu(1), -math.inf)
    if keep is not None:
        logits = logits.masked_fill(~keep.unsqueeze(-2), -math.inf)
    return torch.softmax(logits, -1) @ v


def _forward(module, name, adapter, heads, original):
    """The module's new forward: the adapter's q, k, v (with gradients), each head's map, merged as the module does."""
    torch = _torch()

    def forward(*args, **kwargs):
        got = adapter(module, args, kwargs)
        root = math.sqrt(got.get("scale") or got["q"].shape[-1] ** -0.5)
        q, k, v = got["q"] * root, got["k"] * root, got["v"]
        causal, pad = bool(got.get("causal", False)), got.get("key_padding_mask")
        keep = None if pad is None else ~torch.as_tensor(pad).bool()
        group = q.shape[1] // k.shape[1]  # grouped-query attention: query head h reads kv head h // group
        ys = []
        for h, head in enumerate(heads):
            args3 = (q[:, h], k[:, h // group], v[:, h // group])
            ys.append(softmax_attention(*args3, causal, keep) if head is None else
                      random_attention(head, *args3, causal, keep))
        y = got["merge"](torch.stack(ys, 1))
        y = y.to(original.dtype) if hasattr(original, "dtype") else y
        return (y, None) if isinstance(module, torch.nn.MultiheadAttention) else y

    return forward


def linearize(model, plan, calibration, *, adapters=None):
    """A deep copy of `model` whose attention modules named in `plan` compute, per head, the plan's entry: `plan` maps a
    module name (as kestrel.torch.capture names them) to a list with one entry per query head, {"kind": "softmax"},
    {"kind": "random", "estimator": NAME, "m": M, "sampler": "iid" | "orthogonal", "seed": s}, NAME a family of
    real positive GERF features (PosRF, OPRF, GERF), or {"kind": "learned", "map": "hedgehog", "W": ..., "b": ...}
    (advise's fitted map, e.g. from a report's learned/parameters): its W and b become trainable parameters of the
    copy (registered on the attention module), so that the copy can be fine-tuned.
    Each random head's estimator is fitted on that head's queries and keys in `calibration` (a batch as capture takes
    it; every sequence's tokens pooled) and its draw of M features is fixed by the seed; the model itself is not
    changed. The copy runs forward and backward; its random draws are buffers, not parameters."""
    import kestrel.torch as kt
    torch = _torch()
    if not isinstance(plan, dict) or not plan:
        raise ValueError("plan: expected a dict {module name: [one entry per head]}, got " + repr(plan)[:80])
    caps = {c.name: c for c in kt.capture(model, calibration, adapters=adapters, modules=list(plan))}
    missing = sorted(set(plan) - set(caps))
    if missing:
        raise ValueError(f"plan: the modules {missing} were not called on the calibration batch")
    adapters = adapters or kt.default_adapters()
    out = copy.deepcopy(model)
    kt._no_fast_path(out)  # for good: a fused encoder layer would not call the attention module computed here
    mods = dict(out.named_modules())
    for name, entries in plan.items():
        c = caps[name]
        if not isinstance(entries, (list, tuple)) or len(entries) != c.q.shape[1]:
            raise ValueError(f"plan['{name}']: expected a list of {c.q.shape[1]} entries (one per query head), got "
                             f"{entries!r}"[:200])
        group = c.q.shape[1] // c.k.shape[1]
        heads = []
        for h, e in enumerate(entries):
            _check_entry(name, h, e)
            q = c.q[:, h].reshape(-1, c.q.shape[-1]).T  # d x (batch L): the tokens pooled
            k = c.k[:, h // group].reshape(-1, c.k.shape[-1]).T
            heads.append(None if e["kind"] == "softmax" else
                         _learned_head(e, q.shape[0]) if e["kind"] == "learned" else _RandomHead(e, q, k))
        mod = mods[name]
        for h, head in enumerate(heads):  # learned maps: their parameters are the copy's, to fine-tune
            if head is not None and not isinstance(head, _RandomHead):
                mod.add_module(f"kestrel_learned_head{h}", head)
        adapter = next(a for cls, a in adapters.items() if isinstance(mod, cls))
        dtype = next((p.dtype for p in mod.parameters()), torch.float32)
        mod.forward = _forward(mod, name, adapter, heads, torch.empty(0, dtype=dtype))
    return out
