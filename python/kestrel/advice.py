"""`kestrel advise` reports as pictures: the predicted error against M per estimator (one panel per sampler, +-2 SE
bands where simulated, the target), with measured points from independent draws. Pure matplotlib and NumPy (kestrel is
imported only by `check_points`), so the command line's plot script (apps/kestrel/advise_plot.py) loads this file too."""
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


def plot_report(report, points=(), title=None):
    """A figure of the report's curves (95th percentile solid with its +-2 SE band, median dotted), the target dashed,
    the extrapolated lower bound of a curve that ended because the target is out of reach thin-dashed to the budget,
    and `points` (dicts with estimator, sampler, m, measured_p95, measured_p95_se; the report's own --validate points
    are added) as open markers with 2 SE bars."""
    import matplotlib.pyplot as plt

    ok = [r for r in report["rows"] if r["status"] == "ok"]
    samplers = list(dict.fromkeys(r["sampler"] for r in ok)) or ["iid"]
    names = list(dict.fromkeys(r["estimator"] for r in ok))
    pts = list(points) + [dict(estimator=r["estimator"], sampler=r["sampler"], **r["validation"])
                          for r in ok if "validation" in r]
    target = report["options"]["target"]
    fig, axes = plt.subplots(1, len(samplers), figsize=(3.6 * len(samplers) + 1.2, 4.0), sharey=True, squeeze=False)
    for ax, sampler in zip(axes[0], samplers):
        for r in (x for x in ok if x["sampler"] == sampler):
            k = names.index(r["estimator"])
            color, marker = f"C{k % 10}", MARKERS[k % len(MARKERS)]
            c = r["curve"]
            m, p95 = np.array(c["m"]), np.array(c["p95"])
            se = np.array(c.get("p95_se", np.zeros(len(m))))
            ax.plot(m, p95, "-", color=color, marker=marker, ms=3, markevery=4, label=r["estimator"])
            if np.any(se > 0):
                ax.fill_between(m, np.maximum(p95 - 2 * se, p95 / 10), p95 + 2 * se, color=color, alpha=0.15, lw=0)
            ax.plot(m, c["median"], ":", color=color, lw=0.9)
            far = r.get("out_of_reach")
            if far:  # the extrapolated lower bound from the curve's end to the budget (advise.hpp OutOfReach)
                budget = report["options"]["budget"]
                ax.plot([far["from_m"], budget], [far["p95_minus_2se"], far["error_at_budget_p95_at_least"]], "--",
                        color=color, lw=0.8)
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
    axes[0][-1].legend(fontsize=8, loc="upper right", title="open markers: measured", title_fontsize=8)
    i = report["inputs"]
    metric = report["options"].get("metric", "rmse")
    fig.suptitle(title or f"kestrel advise: d={i['d']} Lq={i['Lq']} Lk={i['Lk']} dv={i['dv']}, "
                          f"{report['options']['quantity']}, metric {metric}, target {100 * target:g}% (dashed)",
                 fontsize=9)
    fig.text(0.01, 0.01, report["quantity"], fontsize=7, color="gray")
    fig.tight_layout(rect=(0, 0.03, 1, 1))
    return fig
