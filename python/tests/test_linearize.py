"""kestrel.torch.linearize (issue 67 item 2): the linearized copy of a model computes, per head, softmax attention or
random-feature attention with kestrel's own draw. Checked against code paths that share nothing with the torch
features: the model itself (softmax heads), kestrel's C++ features and kernel estimates (Estimator.features,
approximate_kernel_times) for the same draw, bidirectional and causal (each row's own prefix of keys, summed here row by
row), in float64 to 1e-10; gradients reach the model's projections; the model itself is unchanged; bad plans are
named. Deterministic: fixed seeds, no Monte Carlo thresholds."""
import numpy as np
import pytest

import kestrel

try:
    import torch
    import torch.nn as nn
    import kestrel.torch as kt
except ImportError:
    torch = None

needs_torch = pytest.mark.skipif(torch is None, reason="PyTorch not installed (Debian: python3-torch)")


def mha(seed=0, E=16, H=2):
    torch.manual_seed(seed)
    m = nn.MultiheadAttention(E, H, batch_first=True).double().eval()
    with torch.no_grad():
        m.in_proj_weight.mul_(3.0)  # logits of a few units: attention far from uniform
    return m


def batch(seed=1, B=2, L=24, E=16):
    x = torch.randn(B, L, E, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
    return (x, x, x)


def reference_head(c, h, entry, causal=False):
    """Head h's random-feature attention from kestrel's C++ features of the same draw: [B, L, dv]."""
    d = c.q.shape[-1]
    q = c.q[:, h].reshape(-1, d).T
    k = c.k[:, h].reshape(-1, d).T
    e = kestrel.fit(entry["estimator"], q, k)
    w = e.draw(entry["m"], seed=entry["seed"], sampler=entry.get("sampler", "iid"))
    out = np.empty(c.v[:, h].shape)
    for b in range(c.q.shape[0]):
        Q, K, V = c.q[b, h].T, c.k[b, h].T, c.v[b, h]
        V1 = np.hstack([V, np.ones((V.shape[0], 1))])
        if not causal:
            kv = e.approximate_kernel_times(w, Q, K, V1)  # K-hat [V 1], C++
            out[b] = kv[:, :-1] / kv[:, -1:]
            continue
        fq, fk = e.features(w, Q, side="query"), e.features(w, K, side="key")
        for i in range(Q.shape[1]):  # row i over keys 0..i
            s = fq[i] @ (fk[: i + 1].T @ V1[: i + 1])
            out[b, i] = s[:-1] / s[-1]
    return out


@needs_torch
@pytest.mark.parametrize("estimator,sampler", [("pos", "iid"), ("oprf", "orthogonal")])
def test_a_random_head_is_kestrels_estimate_of_the_same_draw(estimator, sampler):
    m, x = mha(), batch()
    entry = {"kind": "random", "estimator": estimator, "m": 32, "sampler": sampler, "seed": 7}
    lin = kt.linearize(m, {"": [entry, {"kind": "softmax"}]}, x)
    c = kt.capture(m, x)[0]
    y_rf = reference_head(c, 0, entry)
    y_soft = kt.exact_attention(c)[:, 1]  # the capture's own exact attention of head 1
    want = c.merge(torch.as_tensor(np.stack([y_rf, y_soft], 1))).detach().numpy()
    with torch.no_grad():
        got = lin(*x)[0].numpy()
    assert np.abs(got - want).max() <= 1e-10 * np.abs(want).max()
    assert np.abs(got - c.output.numpy()).max() > 1e-3, "the random head changes the output"


@needs_torch
def test_causal_heads_sum_their_own_prefix_of_keys():
    m, x = mha(seed=2), batch(seed=3, L=20)
    mask = nn.Transformer.generate_square_subsequent_mask(20).double()
    entry = {"kind": "random", "estimator": "pos", "m": 16, "seed": 5}
    plan = {"": [{"kind": "softmax"}, entry]}
    args = dict(attn_mask=mask)
    lin = kt.linearize(m, plan, {"query": x[0], "key": x[1], "value": x[2], **args})
    c = kt.capture(m, {"query": x[0], "key": x[1], "value": x[2], **args})[0]
    assert c.causal
    want = c.merge(torch.as_tensor(np.stack([kt.exact_attention(c)[:, 0], reference_head(c, 1, entry, True)], 1))).detach()
    with torch.no_grad():
        got = lin(*x, **args)[0]
    assert (got - want).abs().max().item() <= 1e-10 * want.abs().max().item()


@needs_torch
def test_softmax_everywhere_is_the_model_and_gradients_reach_its_projections():
    torch.manual_seed(4)
    layer = nn.TransformerEncoderLayer(16, 2, dim_feedforward=32, dropout=0.0, batch_first=True).double().eval()
    x = batch(seed=5)[0]
    with torch.no_grad():
        before = layer(x)
    same = kt.linearize(layer, {"self_attn": [{"kind": "softmax"}] * 2}, (x,))
    with torch.no_grad():
        assert (same(x) - before).abs().max().item() <= 1e-12  # the fused fast path is off in the copy only
    lin = kt.linearize(layer, {"self_attn": [{"kind": "random", "estimator": "pos", "m": 8, "seed": 1}] * 2}, (x,))
    loss = lin(x).pow(2).mean()
    loss.backward()
    g = lin.self_attn.in_proj_weight.grad
    assert g is not None and torch.isfinite(g).all() and g.abs().max() > 0
    assert layer.self_attn.in_proj_weight.grad is None, "the model itself is not touched"
    with torch.no_grad():
        assert torch.equal(layer(x), before)


@needs_torch
def test_bad_plans_are_named():
    m, x = mha(), batch()
    with pytest.raises(ValueError, match=r"plan\[''\]: expected a list of 2 entries"):
        kt.linearize(m, {"": [{"kind": "softmax"}]}, x)
    with pytest.raises(ValueError, match="estimator 'sderf' is not one linearize computes"):
        kt.linearize(m, {"": [{"kind": "random", "estimator": "sderf", "m": 8}, {"kind": "softmax"}]}, x)
    with pytest.raises(ValueError, match="estimator 'nope' is not in kestrel's registry"):
        kt.linearize(m, {"": [{"kind": "random", "estimator": "nope", "m": 8}, {"kind": "softmax"}]}, x)
    with pytest.raises(ValueError, match="m must be a whole number"):
        kt.linearize(m, {"": [{"kind": "random", "estimator": "pos", "m": 0}, {"kind": "softmax"}]}, x)
    with pytest.raises(ValueError, match="each head's entry"):
        kt.linearize(m, {"": ["softmax", {"kind": "softmax"}]}, x)
    with pytest.raises(ValueError, match=r"no module named \['nope'\]"):
        kt.linearize(m, {"nope": []}, x)


def hedgehog_reference(q, k, v, W, b):
    """A Hedgehog head from its definition, in NumPy row by row: S_ij = sum_p exp(z_p(q_i) + z_p(k_j)) +
    exp(-z_p(q_i) - z_p(k_j)), z(x) = W x + b, Y-hat_i = sum_j S_ij v_j / sum_j S_ij."""
    zq, zk = q @ W.T + b, k @ W.T + b
    out = np.empty((q.shape[0], v.shape[1]))
    for i in range(q.shape[0]):
        s = (np.exp(zq[i] + zk) + np.exp(-zq[i] - zk)).sum(1)
        out[i] = s @ v / s.sum()
    return out


@needs_torch
def test_a_learned_head_is_advises_fitted_map_and_fine_tunes():
    """A Hedgehog map fitted by advise on 6 sequences of head 0 (2 held out) goes into the copy as trainable W and b:
    - the copy's head is the map's definition (NumPy, row by row) on every sequence, to 1e-10 (float64);
    - its row errors against the model's own softmax head on the held-out sequences give advise's
      parameters_held_out_p95 (C++ fit and judgement against torch: 1e-9 relative);
    - W and b are parameters of the copy; 30 Adam steps on them alone lower the mean squared difference between the
      copy's output and the model's on the batch (deterministic: fixed seeds, plain torch ops)."""
    m, x = mha(seed=6), batch(seed=7, B=6, L=20)
    c = kt.capture(m, x)[0]
    Q, K, V = (np.ascontiguousarray(a[:, 0]) for a in (c.q, c.k, c.v))  # head 0: [sequences, L, d]
    rep = kestrel.advise(Q, K, V, scaling="none", learned=["hedgehog"], learned_features=[4, 8], fit_seeds=1,
                         held_out=2, estimators=["pos"], samplers=["iid"], target=0.5, budget=64, no_timing=True)
    row = next(r for r in rep["rows"] if r["sampler"] == "learned")
    par = {p["name"]: np.reshape(p["values"], p["shape"]) for p in row["learned"]["parameters"]}
    entry = {"kind": "learned", "map": "hedgehog", "W": par["W"], "b": par["b"]}
    lin = kt.linearize(m, {"": [entry, {"kind": "softmax"}]}, x)
    heads = []
    for s in range(Q.shape[0]):
        heads.append(hedgehog_reference(Q[s], K[s], V[s], par["W"], par["b"]))
    want = c.merge(torch.as_tensor(np.stack([np.stack(heads), kt.exact_attention(c)[:, 1]], 1))).detach()
    with torch.no_grad():
        got = lin(*x)[0]
    assert (got - want).abs().max().item() <= 1e-10 * want.abs().max().item()
    held = row["learned"]["held_out_sequences"]
    y = kt.exact_attention(c)[:, 0]
    err = np.concatenate([np.linalg.norm(heads[s] - y[s], axis=1) for s in held])
    rms = np.sqrt(np.mean(np.concatenate([(y[s] ** 2).sum(1) for s in held])))
    p95 = np.percentile(err / rms, 95)
    assert abs(p95 - row["learned"]["parameters_held_out_p95"]) <= 1e-9 * p95
    learned = [p for n, p in lin.named_parameters() if "kestrel_learned_head0" in n]
    assert len(learned) == 2
    opt = torch.optim.Adam(learned, lr=0.05)
    target = c.output.detach()
    losses = []
    for _ in range(30):
        loss = (lin(*x)[0] - target).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    print(f"fine-tuning the learned head: loss {losses[0]:.4g} -> {losses[-1]:.4g}")
    assert losses[-1] < 0.75 * losses[0]  # measured: 0.343 -> 0.179
    assert m.in_proj_weight.grad is None, "the model itself is not touched"


class CausalBlock(nn.Module if torch is not None else object):
    """One causal self-attention module (2 heads, d = 8) with sharp logits: a decoder's attention in miniature."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(8)
        self.attn = nn.MultiheadAttention(16, 2, batch_first=True).double()
        with torch.no_grad():
            self.attn.in_proj_weight.mul_(2.0)

    def forward(self, x):
        L = x.shape[1]
        return self.attn(x, x, x, attn_mask=nn.Transformer.generate_square_subsequent_mask(L).double())[0]


@needs_torch
def test_a_causal_plan_with_learned_maps_runs_and_reports_what_it_measured(tmp_path):
    """plan on a causal block with learned maps among the candidates, a loose target and costs at L = 4096 (so every
    named head pays): each head's choice is a named row of advise (or softmax), every linearized head carries its
    measured error beside the prediction, the loss is measured (finite, SE from the draws), and bad arguments are
    refused naming them. The loss is the mean squared distance to the block's own output."""
    model = CausalBlock().eval()
    x = torch.randn(8, 24, 16, generator=torch.Generator().manual_seed(9), dtype=torch.float64)
    hold = torch.randn(4, 24, 16, generator=torch.Generator().manual_seed(10), dtype=torch.float64)

    def loss(m, b):
        return float((m(b) - model(b)).pow(2).mean())

    p = kt.plan(model, (x,), hold, loss, target=0.6, length=4096, draws=3, head_draws=20, learned=True,
                learned_features=[4, 8], fit_seeds=2, held_out=3, estimators=["pos"], budget=256, no_timing=True,
                out=str(tmp_path / "p.h5"))
    assert p["causal"] and p["schema"] == "kestrel.plan" and len(p["heads"]) == 2
    for h in p["heads"]:
        assert h["choice"] in ("softmax", "random", "learned")
        if h["choice"] != "softmax":
            assert h["m"] >= 1 and h["flops"] < h["softmax_flops"]
            assert np.isfinite(h["measured_p95"]) and h["measured_p95_se"] >= 0
    assert np.isfinite(p["loss"]["plan_mean"]) and p["loss"]["draws"] in (1, 3) and p["met"]
    assert (tmp_path / "p.png").exists()
    for bad, words in ((dict(draws=1), "draws: expected a whole number >= 2"),
                       (dict(loss_budget=-1), "loss_budget: expected a number >= 0"),
                       (dict(out=str(tmp_path / "p.txt")), "out: expected a path ending in .h5"),
                       (dict(out=str(tmp_path / "p.h5")), "exists")):
        with pytest.raises(ValueError, match=words):
            kt.plan(model, (x,), hold, loss, **bad)
