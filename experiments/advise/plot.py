#!/usr/bin/python3
"""kestrel advise checked by simulation: measured / predicted 95th-percentile relative error at the M advise names
(2 SE bars), one panel per input, estimators along x, samplers as markers (iid o, orthogonal s, simplex ^); 1 = exact
agreement. Small multiples, because predicted and measured errors of every combination sit near the 10% target."""
import math
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import h5py  # noqa: E402
import numpy as np  # noqa: E402
from plotlib import COLORS, LABELS, args, attr_str, finish, plt  # noqa: E402

SAMPLER_MARKERS = {"iid": "o", "orthogonal": "s", "simplex": "^"}

src, out = args()
with h5py.File(src) as f:
    pred, meas, se = f["predicted_p95"][:], f["measured_p95"][:], f["measured_p95_se"][:]
    raw = f["combinations"][()]
    combos = [ln.split() for ln in (raw.decode() if isinstance(raw, bytes) else raw).split("\n") if ln.strip()]
    combos = combos[: len(pred)]
    inputs = attr_str(f, "inputs").split() if "inputs" in f.attrs else []
    inputs = [i for i in inputs if any(c[0] == i for c in combos)] or list(dict.fromkeys(c[0] for c in combos))
    ests = list(dict.fromkeys(c[1] for c in combos))
    samplers = [s for s in SAMPLER_MARKERS if any(c[2] == s for c in combos)]
    cols = min(5, len(inputs))
    rows = math.ceil(len(inputs) / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(3.3 * cols, 2.6 * rows + 1.0), squeeze=False, sharex=True,
                             sharey=True)
    ratio = meas / pred
    lo, hi = float(np.min(ratio - 2 * se / pred)), float(np.max(ratio + 2 * se / pred))
    for ax, name in zip(axes.flat, inputs):
        for j, (inp, est, smp) in enumerate(combos):
            if inp != name:
                continue
            x = ests.index(est) + (samplers.index(smp) - (len(samplers) - 1) / 2) * 0.25
            ax.errorbar(x, ratio[j], yerr=2 * se[j] / pred[j], marker=SAMPLER_MARKERS.get(smp, "o"), ms=4,
                        mfc="none", mew=1.0, elinewidth=0.8, color=COLORS.get(est, "k"))
        ax.axhline(1.0, color="gray", lw=0.8)
        ax.set_title(name)
        ax.set_xticks(range(len(ests)), [LABELS.get(e, e) for e in ests], rotation=90)
        ax.grid(axis="y", lw=0.3, alpha=0.5)
    for ax in list(axes.flat)[len(inputs):]:
        ax.axis("off")
    axes[0][0].set_ylim(max(0.0, lo - 0.05), hi + 0.05)
    for r in range(rows):
        axes[r][0].set_ylabel("measured / predicted p95")
    handles = [plt.Line2D([], [], ls="", marker=SAMPLER_MARKERS[s], mfc="none", color="k", label=s) for s in samplers]
    target = float(np.ravel(f.attrs["target"])[0])
    axes[0][-1].legend(handles=handles, title=f"sampler (target {target:g})", loc="upper right")
    finish(fig, f, out, dpi=110)
