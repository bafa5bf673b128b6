"""kestrel.torch.plan (issue 67 items 1 and 3): per head of a model, keep softmax attention, or random features at M,
or a learned Hedgehog map at M: of the rows advise names an M for at the per-head target (predicted: advise's
simulated, or held-out, 95th-percentile row error), the one with the fewest FLOPs at the model's length, if it costs
fewer than softmax attention there (advise's FLOP counts, tasks/advise/cost.cpp). Then measured: the linearized
model's loss on a held-out batch against the model's own, over `draws` draws of the random heads (mean and SE of the
increase). With a loss budget the plan is met only when the increase + 2 SE is within it; otherwise heads go back to
softmax, the one with the largest predicted error relative to the target first, and the plan is measured again."""
import math
import os

import numpy as np



def _entry(row, seed):
    """linearize's entry for an advise row at its named M."""
    if row["sampler"] == "learned":
        par = {p["name"]: np.reshape(p["values"], p["shape"]).tolist() for p in row["learned"]["parameters"]}
        return {"kind": "learned", "map": row["estimator"], "W": par["W"], "b": par["b"]}
    return {"kind": "random", "estimator": row["estimator"], "m": int(row["m_for_target_p95"]),
            "sampler": row["sampler"], "seed": seed}


def _choose(rows, inputs, causal, length):
    """The head's choice: (row or None, its FLOPs, softmax's FLOPs) at Lq = Lk = length."""
    from . import _kestrel
    from .linearize import computes

    L, d, dv = float(length), float(inputs["d"]), float(inputs["dv"] or 1)
    exact = _kestrel._attention_flops(L, L, d, dv, causal)
    named = [r for r in rows if r.get("status") == "ok" and r["decision"] == "M"
             and (r["sampler"] == "learned" or (computes(r["estimator"]) and r["sampler"] in ("iid", "orthogonal")))]
    best = min(named, key=lambda r: r["m_for_target_p95"], default=None)
    flops = _kestrel._attention_flops(L, L, d, dv, causal, best["m_for_target_p95"]) if best else exact
    return (best, flops, exact) if best and flops < exact else (None, exact, exact)


def _measure(model, linear_plan, calibration, holdout, loss, draws, seed, adapters):
    """The loss of the linearized model on holdout over draws (each random head's seed + k): (mean, SE, values)."""
    from .linearize import linearize
    from .torch import _torch

    torch = _torch()
    random = any(e["kind"] == "random" for es in linear_plan.values() for e in es)
    values = []
    for k in range(draws if random else 1):
        shifted = {n: [dict(e, seed=seed + k) if e["kind"] == "random" else e for e in es]
                   for n, es in linear_plan.items()}
        lin = linearize(model, shifted, calibration, adapters=adapters)
        with torch.no_grad():
            values.append(float(loss(lin, holdout)))
    se = float(np.std(values, ddof=1) / math.sqrt(len(values))) if len(values) > 1 else 0.0
    return float(np.mean(values)), se, values


def _heads(rep, causal, length):
    """Each head's choice from advise's report (rows per layer and head)."""
    names = rep["torch"]["modules"]
    heads = []
    for h in rep["heads"]:
        rows = [r for r in rep["rows"] if r.get("layer") == h["layer"] and r.get("head") == h["head"]]
        best, flops, exact = _choose(rows, h["inputs"], causal, length or h["inputs"]["Lk"])
        heads.append({"layer": h["layer"], "head": h["head"], "module": names[h["layer"]], "flops": flops,
                      "softmax_flops": exact, "_row": None})
        _set(heads[-1], best)
    return heads


def _set(h, row):
    """A head's choice: row (random or learned at its M) or None (softmax)."""
    h.update(choice="softmax" if row is None else "learned" if row["sampler"] == "learned" else "random",
             estimator=row and row["estimator"], sampler=row and row["sampler"],
             m=row and int(row["m_for_target_p95"]), predicted_p95=row and row["error_at_m_p95"],
             predicted_p95_se=row and row["error_at_m_p95_se"], _row=row)
    if row is None:
        h["flops"] = h["softmax_flops"]


def _measure_heads(model, heads, linear_plan, calibration, draws, adapters):
    """Each linearized head's error measured in place by linearize's own torch maps on sequence 0 of the calibration
    batch (random heads over `draws` draws: advise's metric, per row sqrt(mean over draws |Y-hat_i - Y_i|^2) / RMS
    |Y|, its 95th percentile and the SE of the row there by the delta method; learned heads once, on the sequences
    their fit held out)."""
    from . import torch as kt
    from .linearize import _RandomHead, _learned_head, random_attention

    torch = kt._torch()
    caps = {c.name: c for c in kt.capture(model, calibration, adapters=adapters, modules=list(linear_plan))}
    for h in heads:
        if h["_row"] is None:
            continue
        c, e = caps[h["module"]], linear_plan[h["module"]][h["head"]]
        group = c.q.shape[1] // c.k.shape[1]
        Y = kt.exact_attention(c)[:, h["head"]]
        seqs = h["_row"]["learned"]["held_out_sequences"] if e["kind"] == "learned" else [0]
        t = lambda a, s: torch.as_tensor(a[s], dtype=torch.float64)  # noqa: E731
        q, k, v = (c.q[:, h["head"]], c.k[:, h["head"] // group], c.v[:, h["head"] // group])
        sq = []
        for j in range(1 if e["kind"] == "learned" else draws):
            if e["kind"] == "learned":
                head = _learned_head(e, q.shape[-1])
            else:
                head = _RandomHead(dict(e, seed=e["seed"] + j), q.reshape(-1, q.shape[-1]).T,
                                   k.reshape(-1, k.shape[-1]).T)
            with torch.no_grad():
                sq.append(np.concatenate([((random_attention(head, t(q, s), t(k, s), t(v, s), c.causal).numpy()
                                            - Y[s]) ** 2).sum(1) for s in seqs]))
        sq = np.array(sq)
        rms, mean = np.sqrt(np.concatenate([(Y[s] ** 2).sum(1) for s in seqs]).mean()), sq.mean(0)
        rel = np.sqrt(mean) / rms
        i = int(np.argsort(rel)[int(round(0.95 * (len(rel) - 1)))])
        se = float(sq[:, i].std(ddof=1) / math.sqrt(len(sq)) / (2 * math.sqrt(mean[i]) * rms)) if len(sq) > 1 else 0.0
        h.update(measured_p95=float(np.percentile(rel, 95)), measured_p95_se=se,
                 measured_on="held-out sequences " + str(seqs) if e["kind"] == "learned" else
                 f"sequence 0 of the calibration batch, {len(sq)} draws")


def _within_budget(heads, base, target, budget, measure, seed):
    """Measures the plan; while the increase + 2 SE exceeds the budget, the linearized head with the largest predicted
    error relative to the target goes back to softmax. Returns (plan, mean, SE, values, met, tried)."""
    tried = []
    while True:
        linear_plan = {}
        for h in heads:
            linear_plan.setdefault(h["module"], []).append(
                {"kind": "softmax"} if h["_row"] is None else _entry(h["_row"], seed))
        mean, se, values = measure(linear_plan)
        tried.append({"heads_softmax": sum(h["_row"] is None for h in heads), "loss_mean": mean, "loss_se": se,
                      "increase": mean - base})
        met = budget is None or mean - base + 2 * se <= budget
        linearized = [h for h in heads if h["_row"] is not None]
        if met or not linearized:
            return linear_plan, mean, se, values, met, tried
        _set(max(linearized, key=lambda h: h["predicted_p95"] / target), None)


CHOICES = ("softmax", "random", "learned")  # the codes of /plan/choice


def plot_plan(report):
    """The plan's figure: layers x heads, coloured by choice, with each head's M."""
    import matplotlib.pyplot as plt
    from matplotlib.colors import ListedColormap

    layers = 1 + max(h["layer"] for h in report["heads"])
    heads = 1 + max(h["head"] for h in report["heads"])
    grid = np.zeros((layers, heads))
    fig, ax = plt.subplots(figsize=(1.2 + 0.9 * heads, 1.0 + 0.6 * layers))
    for h in report["heads"]:
        grid[h["layer"], h["head"]] = CHOICES.index(h["choice"])
        ax.text(h["head"], h["layer"], "softmax" if h["m"] is None else f"{h['estimator']}\nM = {h['m']}",
                ha="center", va="center", fontsize=8)
    ax.imshow(grid, cmap=ListedColormap(["#dddddd", "#9ecae1", "#a1d99b"]), vmin=0, vmax=2, aspect="auto")
    ax.set(xlabel="head", ylabel="layer", xticks=range(heads), yticks=range(layers))
    loss = report["loss"]
    ax.set_title(f"plan at L = {report['length']}: loss {loss['model']:.4g} -> {loss['plan_mean']:.4g} +- "
                 f"{loss['plan_se']:.2g} (measured, {loss['draws']} draws); FLOPs "
                 f"{report['cost']['flops'] / report['cost']['softmax_flops']:.0%} of softmax", fontsize=8)
    fig.tight_layout()
    return fig


def _write(report, out, force):
    """out.h5 (/plan/report.json, /plan/choice and /plan/m per layer x head, the provenance as root attributes) and
    out.png beside it, each written to a temporary file and published only when both are done."""
    import json

    import matplotlib

    from . import _kestrel
    from .torch import _publish, _stamp

    matplotlib.use("Agg")
    png = out[:-3] + ".png"
    tmp_h5, tmp_png = _kestrel._temp_beside(out), _kestrel._temp_beside(png)
    try:
        plot_plan(report).savefig(tmp_png, dpi=130, bbox_inches="tight")
        import h5py
        with h5py.File(tmp_h5, "w") as f:
            _stamp(f, "kestrel.plan")
            f.attrs["provenance"] = json.dumps(report["provenance"])
            g = f.create_group("plan")
            g["report.json"] = json.dumps(report, default=str)
            g["report.json"].attrs["description"] = "the plan as kestrel.torch.plan returns it (JSON)"
            g["report.json"].attrs["axes"] = ""
            shape = (1 + max(h["layer"] for h in report["heads"]), 1 + max(h["head"] for h in report["heads"]))
            choice, m = np.zeros(shape, dtype=np.int8), np.zeros(shape, dtype=np.int64)
            for h in report["heads"]:
                choice[h["layer"], h["head"]] = CHOICES.index(h["choice"])
                m[h["layer"], h["head"]] = h["m"] or 0
            for name, a, what in (("choice", choice, "0 softmax, 1 random features, 2 learned map"),
                                  ("m", m, "features per head (0: softmax kept)")):
                g[name] = a
                g[name].attrs["description"] = what
                g[name].attrs["axes"] = "layer,head"
                g[name].dims[0].label, g[name].dims[1].label = "layers", "heads"
        _publish(tmp_h5, out, force)
        try:
            _publish(tmp_png, png, force)
        except (OSError, ValueError):
            os.unlink(out)  # no report without its figure
            raise
    finally:
        for p in (tmp_h5, tmp_png):
            if os.path.exists(p):
                os.unlink(p)


def plan(model, calibration, holdout, loss, *, target=0.25, length=None, loss_budget=None, draws=4, head_draws=100,
         seed=1, estimators=None, samplers=("iid",), learned=False, adapters=None, modules=None, out=None,
         force=False, **options):
    """A plan for every attention head of `model` and its measured effect on `loss(model, holdout)` (a float, lower is
    better: e.g. the held-out cross-entropy). advise runs on `calibration` (kestrel.torch.advise_model with target,
    estimators, samplers and `options`; learned=True adds Hedgehog maps fitted on some sequences of the calibration
    batch and judged on the others). `length` is the sequence length the costs are counted at (default: the
    calibration batch's). estimators: default, every registered one linearize computes in torch (linearize.computes).
    Returns a dict:
      "plan": linearize's plan, {module: [entry per head]};
      "heads": per layer and head the choice, estimator, sampler, M, predicted p95 +- SE, FLOPs against softmax's,
        and each linearized head's error measured in place by linearize's torch maps (random heads over head_draws
        draws);
      "cost": the model's attention FLOPs against all-softmax;
      "loss": the model's, the plan's mean +- SE over `draws` draws, the increase and every draw's value;
      "met" (with loss_budget: increase + 2 SE <= budget), "tried" (each plan measured, in order), the provenance
        (advise's, with the plan's options) and the schema.
    out="P.h5" also writes it (_write) and P.png; force=True replaces them."""
    from .torch import _check_new, _path, _torch, advise_model

    if loss_budget is not None and not (isinstance(loss_budget, (int, float)) and loss_budget >= 0):
        raise ValueError("loss_budget: expected a number >= 0 (the largest loss increase to accept), got "
                         f"{loss_budget!r}")
    for name, n in (("draws", draws), ("head_draws", head_draws)):
        if not isinstance(n, int) or isinstance(n, bool) or n < 2:
            raise ValueError(f"{name}: expected a whole number >= 2 (an SE needs two draws), got {n!r}")
    if out is not None:
        out = _path(out, "out")
        if not out.endswith(".h5"):
            raise ValueError(f"out: expected a path ending in .h5 (the figure goes beside it as .png), got '{out}'")
        for p in (out, out[:-3] + ".png"):
            _check_new(p, force)
    if estimators is None:
        import kestrel
        from .linearize import computes
        estimators = [n for n in kestrel.estimators() if computes(n)]
    extra = dict(learned=["hedgehog"]) if learned else {}
    rep = advise_model(model, calibration, target=target, estimators=list(estimators), samplers=list(samplers),
                       seed=seed, adapters=adapters, modules=modules, **extra, **options)
    causal = bool(rep["options"].get("causal", False))
    heads = _heads(rep, causal, length)
    with _torch().no_grad():
        base = float(loss(model, holdout))

    def measure(p):
        return _measure(model, p, calibration, holdout, loss, draws, seed, adapters)

    linear_plan, mean, se, values, met, tried = _within_budget(heads, base, target, loss_budget, measure, seed)
    _measure_heads(model, heads, linear_plan, calibration, head_draws, adapters)
    for h in heads:
        del h["_row"]
    from . import _kestrel

    version = next(x["version"] for x in _kestrel.schemas() if x["name"] == "kestrel.plan")
    prov = dict(rep["provenance"], torch=rep["torch"],
                plan_options={"target": target, "length": length, "loss_budget": loss_budget, "draws": draws,
                              "head_draws": head_draws,
                              "seed": seed, "estimators": list(estimators), "samplers": list(samplers),
                              "learned": learned})
    report = {"schema": "kestrel.plan", "schema_version": version, "provenance": prov, "target": target,
              "length": length or rep["heads"][0]["inputs"]["Lk"],
            "causal": causal, "plan": linear_plan, "heads": heads,
            "cost": {"flops": sum(h["flops"] for h in heads), "softmax_flops": sum(h["softmax_flops"] for h in heads)},
            "loss": {"model": base, "plan_mean": mean, "plan_se": se, "increase": mean - base, "draws": len(values),
                     "values": values, "what": "measured: the loss of the linearized model on holdout"},
            "predicted": "per head: advise's 95th-percentile row error at M (simulated for random rows, held out for "
                         "learned ones)",
            "loss_budget": loss_budget, "met": met, "tried": tried}
    if out is not None:
        _write(report, out, force)
    return report
