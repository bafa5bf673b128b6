#!/usr/bin/python3
"""bench/long_context.sh's report: a table and a log-log plot of wall time and peak RSS against L, with the slopes
of least-squares lines through log(time) and log(RSS) against log(L) (slope 2: the cost grows as L^2).
usage: long_context_report.py TSV RESULTS_DIR SAMPLERS LOAD"""
import csv
import json
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

tsv, results, samplers, load = sys.argv[1:5]
series = {}
for r in csv.DictReader(open(tsv), delimiter="\t"):
    series.setdefault(r["command"], []).append((int(r["L"]), float(r["seconds"]), float(r["peak_rss_kb"]) / 1e6))
kc_path = os.path.join(results, "long_context_kc.json")
if os.path.exists(kc_path):  # kc_variance(rows=512) timings, if bench/long_context_kc.py has run
    kc = json.load(open(kc_path))
    for side, name in (("kestrel", "kc_variance(rows=512)"), ("attention", "predict_attention(rows=512)")):
        pts = [(int(x["L"]), float(x[side]["median_s"]), float(x[side]["peak_rss_mb"]) / 1e3)
               for x in kc.get("lengths", []) if "median_s" in x.get(side, {})]
        if pts:
            series[name] = pts


def slope(points, k):
    if len(points) < 2:
        return float("nan")
    L = np.log([p[0] for p in points])
    return float(np.polyfit(L, np.log([p[k] for p in points]), 1)[0])


lines = [f"Long-context `kestrel advise` (`bench/long_context.sh`; d = dv = 128, --rows 512, samplers {samplers}; "
         f"load average at the end {load}). One run per L.\n",
         "| command | L | wall (s) | peak RSS (GB) |", "|---|---:|---:|---:|"]
for name, pts in series.items():
    for L, t, rss in sorted(pts):
        lines.append(f"| {name} | {L} | {t:.1f} | {rss:.2f} |")
lines += ["", "| command | slope of log time vs log L | slope of log RSS vs log L |", "|---|---:|---:|"]
for name, pts in series.items():
    lines.append(f"| {name} | {slope(sorted(pts), 1):.2f} | {slope(sorted(pts), 2):.2f} |")
adv, peer = dict((p[0], p[1]) for p in series.get("advise", [])), dict((p[0], p[1]) for p in series.get("numpy-peer", []))
ratios = [adv[L] / peer[L] for L in adv if L in peer]
if ratios:
    lines.append(f"\nadvise / NumPy peer wall-time ratio: median {np.median(ratios):.1f} "
                 f"(per L: {', '.join(f'{L}: {adv[L] / peer[L]:.1f}' for L in sorted(adv) if L in peer)}). "
                 "The peer measures one estimator at one M; advise simulates every estimator's curve.")
open(os.path.join(results, "long_context.md"), "w").write("\n".join(lines) + "\n")

fig, ax = plt.subplots(1, 2, figsize=(10, 4))
for name, pts in series.items():
    pts = sorted(pts)
    L = [p[0] for p in pts]
    ax[0].loglog(L, [p[1] for p in pts], "-o", ms=4, label=f"{name} (slope {slope(pts, 1):.2f})")
    ax[1].loglog(L, [p[2] for p in pts], "-o", ms=4, label=f"{name} (slope {slope(pts, 2):.2f})")
ax[0].set(xlabel="sequence length L", ylabel="wall time (s)", title="time")
ax[1].set(xlabel="sequence length L", ylabel="peak RSS (GB)", title="memory")
for a in ax:
    a.legend(fontsize=8)
    a.grid(True, which="both", alpha=0.3)
fig.tight_layout()
fig.savefig(os.path.join(results, "long_context.png"), dpi=120)
print("\n".join(lines))
