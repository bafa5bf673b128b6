#!/usr/bin/python3
"""The plot of `kestrel advise --out R.h5`: predicted relative error (95th percentile over rows, solid; median,
dotted) against M per estimator and sampler, the target line, and the measured 95th percentile (with 2 SE) where
--validate ran. Usage: advise_plot.py REPORT.h5 OUT.png"""
import json
import sys

import h5py
import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

src, out = sys.argv[1], sys.argv[2]
with h5py.File(src) as f:
    raw = f["advise/report.json"][()]
    report = json.loads(raw.decode() if isinstance(raw, bytes) else raw)
target = report["options"]["target"]
fig, ax = plt.subplots(figsize=(6.4, 4.2))
for i, r in enumerate(x for x in report["rows"] if x["status"] == "ok"):
    label = r["estimator"] + ("" if r["sampler"] == "iid" else f" ({r['sampler']})")
    color = f"C{i % 10}"
    c = r["curve"]
    ax.plot(c["m"], c["p95"], "-", color=color, label=label)
    ax.plot(c["m"], c["median"], ":", color=color, lw=0.8)
    if "validation" in r:
        v = r["validation"]
        ax.errorbar([v["m"]], [v["measured_p95"]], yerr=[2 * v["measured_p95_se"]], fmt="o", color=color, ms=4)
ax.axhline(target, color="gray", ls="--", lw=0.8, label=f"target {100 * target:g}%")
ax.set_xscale("log", base=2)
ax.set_yscale("log")
ax.set_xlabel("features M")
ax.set_ylabel("relative error (95th pct solid, median dotted)")
i = report["inputs"]
ax.set_title(f"kestrel advise: d={i['d']} Lq={i['Lq']} Lk={i['Lk']} dv={i['dv']}, {report['options']['quantity']}",
             fontsize=9)
ax.legend(fontsize=6, ncol=2)
fig.text(0.01, 0.01, report["quantity"], fontsize=5, color="gray")
fig.tight_layout()
fig.savefig(out, dpi=130)
