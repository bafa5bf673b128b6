"""`kestrel advise` reports as pictures: the predicted error against M per estimator (one panel per sampler, +-2 SE
bands where simulated, the target), with measured points from independent draws; for inputs over heads and layers the
heat map (layer x head) of the M each head needs. Pure matplotlib, NumPy and h5py (the
compiled module is imported only by `check_points`), so the command line runs this file for the plot of
`kestrel advise --out R.h5`: `python3 -m kestrel.advice R.h5 OUT.png` (or the file by its path in the package)."""
import errno
import json
import os
import sys

import numpy as np

MARKERS = "os^vD<>ph*"


def check_points(Q, K, V, targets=(0.4, 0.2, 0.1, 0.05), validate=100, **options):
    """Measured points for the plot: `kestrel.advise` at each target with `validate` independent draws at the M it
    names (fresh draws through the production attention code, not the prediction's nested draws). Returns a list of
    dicts: estimator, sampler, target, m, measured_p95, measured_p95_se, predicted_p95."""
    import kestrel

    out = []
    for t in targets:
        rep = kestrel.advise(Q, K, V, target=t, validate=validate, **options)
        for r in rep["rows"]:
            if r["status"] == "ok" and "validation" in r:
                v = r["validation"]
                out.append({"estimator": r["estimator"], "sampler": r["sampler"], "target": t, "m": v["m"],
                            "measured_p95": v["measured_p95"], "measured_p95_se": v["measured_p95_se"],
                            "predicted_p95": r["error_at_m_p95"]})
    return out


def _named_m(ax, r, target, color):
    """The named M and its interval on the target line; a learned map's M is the fitted one at or above it."""
    lo, hi = r.get("m_for_target_p95_interval") or (None, None)
    named = r.get("m_for_target_p95")
    if r.get("decision") != "M" or not (lo and hi):
        return
    if lo <= named <= hi:
        ax.errorbar([named], [target], xerr=[[named - lo], [hi - named]], fmt="|", color=color, ms=8, capsize=2, lw=1)
    else:
        ax.plot([lo, hi], [target, target], color=color, lw=1)
        ax.plot([named], [target], "|", color=color, ms=8)


def plot_report(report, points=(), title=None):
    """A figure of the report's curves (95th percentile solid with its +-2 SE band, median dotted; each estimator its
    own colour and marker, the recommended curve drawn thick), the target dashed, the named M and its interval as a
    bar on the target, and `points` (dicts with estimator, sampler, m, measured_p95, measured_p95_se; the report's own
    --validate points are added) as open markers with 2 SE bars. The legend sits beside the panels, off the data."""
    import matplotlib.pyplot as plt

    ok = [r for r in report["rows"] if r["status"] == "ok"]
    samplers = list(dict.fromkeys(r["sampler"] for r in ok)) or ["iid"]
    names = list(dict.fromkeys(r["estimator"] for r in ok))
    pts = list(points) + [dict(estimator=r["estimator"], sampler=r["sampler"], **r["validation"])
                          for r in ok if "validation" in r]
    target = report["options"]["target"]
    best = report.get("best")  # the recommended row's label: "NAME" (iid) or "NAME (SAMPLER)", or None
    colors = plt.get_cmap("tab20").colors if len(names) > 10 else [f"C{k}" for k in range(10)]
    causal = [r for r in ok if "causal" in r]  # --causal: one more panel, the error against position
    fig, axes = plt.subplots(1, len(samplers) + bool(causal), figsize=(3.6 * (len(samplers) + bool(causal)) + 1.2, 4.0),
                             squeeze=False)
    for ax in axes[0][1:len(samplers)]:
        ax.sharey(axes[0][0])
    if causal:
        ax = axes[0][-1]
        for r in causal:
            k = names.index(r["estimator"])
            pos, err = np.array(r["causal"]["position"]), np.array(r["causal"]["error_at_m"])
            order = np.argsort(pos)
            ax.plot(pos[order], err[order], MARKERS[k % len(MARKERS)], ms=1.5, alpha=0.4, color=colors[(k + samplers.index(r["sampler"])) % len(colors)])
            b = r["causal"]["bands"]
            ax.step([x["lo"] for x in b] + [b[-1]["hi"]], [x["p95"] for x in b] + [b[-1]["p95"]], where="post",
                    color=colors[(k + samplers.index(r["sampler"])) % len(colors)], lw=1, label=f"{r['estimator']} {r['sampler']} M={r['causal']['m']}")
        ax.axhline(target, color="gray", ls="--", lw=0.8)
        ax.set_xlabel("position (keys seen - 1)", fontsize=9)
        ax.set_title("causal: error by position (steps: band p95)", fontsize=9)
        ax.legend(fontsize=6)
        ax.tick_params(labelsize=8)
    for ax, sampler in zip(axes[0], samplers):
        for r in (x for x in ok if x["sampler"] == sampler):
            k = names.index(r["estimator"])
            color, marker = colors[k % len(colors)], MARKERS[k % len(MARKERS)]
            chosen = best == (r["estimator"] if sampler == "iid" else f"{r['estimator']} ({sampler})")
            c = r["curve"]
            m, p95 = np.array(c["m"]), np.array(c["p95"])
            se = np.array(c.get("p95_se", np.zeros(len(m))))
            label = r["estimator"] + (" (recommended)" if chosen else "")
            ax.plot(m, p95, "-", color=color, marker=marker, ms=4 if chosen else 3, markevery=4, lw=2.6 if chosen else 1,
                    label=label, zorder=3 if chosen else 2)
            if np.any(se > 0):
                ax.fill_between(m, np.maximum(p95 - 2 * se, p95 / 10), p95 + 2 * se, color=color, alpha=0.15, lw=0)
            ax.plot(m, c["median"], ":", color=color, lw=0.9)
            _named_m(ax, r, target, color)
            for p in (p for p in pts if p["estimator"] == r["estimator"] and p["sampler"] == sampler):
                ax.errorbar([p["m"]], [p["measured_p95"]], yerr=[2 * p["measured_p95_se"]], fmt=marker, color=color,
                            mfc="white", ms=6, capsize=2)
        ax.axhline(target, color="gray", ls="--", lw=0.8)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("features M", fontsize=9)
        ax.set_title(f"{sampler} projections", fontsize=9)
        ax.tick_params(labelsize=8)
    axes[0][0].set_ylabel("error (95th pct solid, median dotted)", fontsize=9)
    handles, labels = axes[0][0].get_legend_handles_labels()
    for ax in axes[0][1:len(samplers)]:
        for h, lab in zip(*ax.get_legend_handles_labels()):
            if lab not in labels:
                handles.append(h), labels.append(lab)
    fig.legend(handles, labels, fontsize=7, loc="center left", bbox_to_anchor=(1.0, 0.5),
               title="open markers: measured", title_fontsize=7)
    i = report["inputs"]
    metric = report["options"].get("metric", "rmse")
    fig.suptitle(title or f"kestrel advise: d={i['d']} Lq={i['Lq']} Lk={i['Lk']} dv={i['dv']}, "
                          f"{report['options']['quantity']}, metric {metric}, target {100 * target:g}% (dashed)",
                 fontsize=9)
    fig.text(0.01, 0.01, report["quantity"], fontsize=7, color="gray")
    fig.tight_layout(rect=(0, 0.03, 1, 1))
    return fig


def plot_heads(report, title=None):
    """A figure of a report over heads and layers (Q, K, V as [heads, L, d] or [layers, heads, L, d]): the heat map
    (layer x head) of the M each head needs for the recommended estimator x sampler (where none is, the one that names
    an M on the most heads; heads with no M named are hatched and say their decision: "out" of reach, "?" not
    settled), and that row's 95th-percentile curves, one per head; with --causal, a third panel: that row's error
    against position per head (dots: sampled rows at the head's M; steps: the p95 of each band of positions)."""
    import matplotlib.pyplot as plt

    summary = [s for s in report["summary"] if s["status"] == "ok"]
    if not summary:
        raise ValueError("the report has no estimator x sampler that was evaluated on every head")
    best = report.get("best")
    label = lambda s: s["estimator"] if s["sampler"] == "iid" else f"{s['estimator']} ({s['sampler']})"
    # Without a recommendation: the row that names an M on the most heads (the smaller median M on a tie).
    chosen = next((s for s in summary if label(s) == best), None) or max(
        summary, key=lambda s: (s["heads_named"], -(s["m_for_target_median_head"] or float("inf"))))
    i = report["inputs"]
    layers, heads = i["layers"], i["query_heads"]
    m = np.array(chosen["m_for_target_each_head"], dtype=float).reshape(layers, heads)
    decisions = np.array(chosen["decision_each_head"]).reshape(layers, heads)
    rows = [r for r in report["rows"]
            if r["status"] == "ok" and r["estimator"] == chosen["estimator"] and r["sampler"] == chosen["sampler"]]
    causal = [r for r in rows if "causal" in r]
    widths = [max(heads, 2), 4] + ([4] if causal else [])
    fig, axes = plt.subplots(1, len(widths), figsize=(4.0 + 0.5 * heads + 3.2 * bool(causal), 3.6 + 0.35 * layers),
                             gridspec_kw={"width_ratios": widths})
    ax, ax2 = axes[0], axes[1]
    shown = np.ma.masked_where(m <= 0, m)
    im = ax.imshow(shown, cmap="viridis", aspect="auto", origin="upper")
    for (l, h), d in np.ndenumerate(decisions):
        text = f"{int(m[l, h])}" if d == "M" else {"out of reach": "out", "not settled": "?"}.get(d, d)
        ax.text(h, l, text, ha="center", va="center", fontsize=7, color="white" if d == "M" else "black")
        if d != "M":
            ax.add_patch(plt.Rectangle((h - 0.5, l - 0.5), 1, 1, fill=False, hatch="//", lw=0))
    ax.set_xticks(range(heads))
    ax.set_yticks(range(layers))
    ax.set_xlabel("query head", fontsize=9)
    ax.set_ylabel("layer", fontsize=9)
    ax.set_title(f"M needed: {label(chosen)}", fontsize=9)
    ax.tick_params(labelsize=8)
    fig.colorbar(im, ax=ax, fraction=0.05, label="M (p95 meets the target)")
    target = report["options"]["target"]
    for k, r in enumerate(rows):
        ax2.plot(r["curve"]["m"], r["curve"]["p95"], lw=0.9, color=f"C{k % 10}", label=f"L{r['layer']} H{r['head']}")
    if causal:
        ax3 = axes[2]
        for k, r in enumerate(causal):
            c = r["causal"]
            pos, err = np.array(c["position"]), np.array(c["error_at_m"])
            order = np.argsort(pos)
            ax3.plot(pos[order], err[order], MARKERS[k % len(MARKERS)], ms=1.5, alpha=0.35, color=f"C{k % 10}")
            b = c["bands"]
            ax3.step([x["lo"] for x in b] + [b[-1]["hi"]], [x["p95"] for x in b] + [b[-1]["p95"]], where="post",
                     lw=1, color=f"C{k % 10}", label=f"L{r['layer']} H{r['head']} M={c['m']}")
        ax3.axhline(target, color="gray", ls="--", lw=0.8)
        ax3.set_xlabel("position (keys seen - 1)", fontsize=9)
        ax3.set_ylabel("error at the head's M", fontsize=9)
        ax3.set_title("causal: error by position", fontsize=9)
        ax3.tick_params(labelsize=8)
        if layers * heads <= 16:
            ax3.legend(fontsize=6)
    ax2.axhline(target, color="gray", ls="--", lw=0.8)
    ax2.set_xscale("log", base=2)
    ax2.set_yscale("log")
    ax2.set_xlabel("features M", fontsize=9)
    ax2.set_ylabel("95th-percentile error", fontsize=9)
    ax2.set_title("per head", fontsize=9)
    ax2.tick_params(labelsize=8)
    if layers * heads <= 16:
        ax2.legend(fontsize=6)
    gq = f", {i['kv_heads']} kv heads (grouped-query)" if i.get("grouped_query") else ""
    plural = lambda n, w: f"{n} {w}" + ("s" if n != 1 else "")
    fig.suptitle(title or f"kestrel advise: {plural(layers, 'layer')} x {plural(heads, 'head')}{gq}{', causal' if causal else ''}, d={i['d']} Lq={i['Lq']} "
                          f"Lk={i['Lk']}, target {100 * target:g}% (dashed)", fontsize=9)
    fig.tight_layout()
    return fig


def read_report(report_h5):
    """The report of `kestrel advise --out REPORT_H5` (its /advise/report.json) as a dict; ValueError naming the file
    and what it is instead when it is not such a report."""
    import h5py

    what = "`kestrel advise --out`, kestrel.advise(out=...) or kestrel.torch.advise_model(out=...)"
    if not os.path.isfile(report_h5):
        raise FileNotFoundError(errno.ENOENT, "no such file (an advise report is an .h5 file)", report_h5)
    if not h5py.is_hdf5(report_h5):
        raise ValueError(f"'{report_h5}' is not an HDF5 file: give a report written by {what}")
    with h5py.File(report_h5, "r") as f:
        raw = f["advise/report.json"][()] if isinstance(f.get("advise/report.json"), h5py.Dataset) else None
    if raw is None:
        raise ValueError(f"'{report_h5}' has no /advise/report.json: not a report of {what}")
    try:
        report = json.loads(raw.decode() if isinstance(raw, bytes) else raw)
    except (ValueError, TypeError):
        report = None
    if not isinstance(report, dict) or not isinstance(report.get("rows"), list):
        raise ValueError(f"'{report_h5}': /advise/report.json is not an advise report (broken or foreign JSON); write "
                         f"it anew with {what}")
    return report


def plot_file(report_h5, out_png):
    """The plot of `kestrel advise --out REPORT_H5` (its /advise/report.json) written to OUT_PNG."""
    import matplotlib

    matplotlib.use("Agg")
    report = read_report(report_h5)
    fig = plot_heads(report) if "summary" in report else plot_report(report)
    fig.savefig(out_png, dpi=130, bbox_inches="tight")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: python3 -m kestrel.advice REPORT.h5 OUT.png")
    try:
        plot_file(sys.argv[1], sys.argv[2])
    except (ValueError, OSError) as e:
        print(f"kestrel.advice: {e}", file=sys.stderr)
        sys.exit(2)
