#!/usr/bin/python3
"""Softmax attention by random features (CRT eq. 3): relative errors of Y and of the row normalisers
against M per input, fractions of negative estimates (HRF Fig. 3), exact vs linear attention time vs L."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import h5py  # noqa: E402
import numpy as np  # noqa: E402
from plotlib import COLORS, LABELS, MARKERS, args, attr_str, curve, dodge, finish, plt  # noqa: E402

src, out = args()
colors, labels = COLORS, LABELS  # from the registry
with h5py.File(src) as f:
    inputs = attr_str(f, "inputs").split()
    ests = attr_str(f, "estimators").split()
    n = len(inputs)
    # Rows: Y's error, the normalisers' error, the positive estimators' error of Y relative to PosRF's (in the first
    # row they form one bundle), timing and negative weights.
    fig, axes = plt.subplots(4, n, figsize=(3.3 * n, 12.0), squeeze=False)
    positive = [e for e in ests if int(np.ravel(f[inputs[0]][e].attrs["positive"])[0])]
    ref = "pos" if "pos" in positive else positive[0]
    for c, name in enumerate(inputs):
        g = f[name]
        for row, key in ((0, "rel_error_Y"), (1, "rel_error_normaliser")):
            ax = axes[row][c]
            for k, e in enumerate(ests):
                M = g[e]["features"][:] * dodge(k, len(ests))  # side by side, so that the 2 SE bars stay apart
                ax.errorbar(M, g[e][key][:], yerr=2 * g[e][key + "_se"][:], marker=MARKERS.get(e, "o"), ms=5,
                            mfc="none", mew=1.1, elinewidth=0.8, color=colors.get(e), label=labels.get(e, e),
                            ls="-" if int(np.ravel(g[e].attrs["positive"])[0]) else "--")
            ax.set_xscale("log", base=2)
            ax.set_yscale("log")
            ax.set_xlabel("feature budget M")
            ax.set_title(f"{name}: {'Y' if row == 0 else 'normalisers A1'}")
            if c == 0:
                ax.set_ylabel("relative Frobenius error")
        ax = axes[2][c]
        base = g[ref]["rel_error_Y"][:]
        for k, e in enumerate(positive):
            ratio = g[e]["rel_error_Y"][:] / base
            # SE of a ratio of two independent means (first order); the reference's own curve is 1 by definition.
            se = 0 if e == ref else ratio * np.hypot(g[e]["rel_error_Y_se"][:] / g[e]["rel_error_Y"][:],
                                                     g[ref]["rel_error_Y_se"][:] / base)
            ax.errorbar(g[e]["features"][:] * dodge(k, len(positive)), ratio, yerr=2 * se,
                        marker=MARKERS.get(e, "o"), ms=5, mfc="none", mew=1.1, elinewidth=0.8, color=colors.get(e),
                        label=labels.get(e, e))
        ax.axhline(1, color="gray", lw=0.6)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")  # ratios: 2x worse as far from 1 as 2x better
        ax.set_xlabel("feature budget M")
        ax.set_title(f"{name}: Y error / {labels.get(ref, ref)}'s (positive)")
        if c == 0:
            ax.set_ylabel("error ratio (below 1: better)")
    t = f["timing"]
    ax = axes[3][0]
    L = t["L"][:]
    ax.loglog(L, t["exact_seconds"][:], "-o", ms=4, color="k", label="exact (streaming)")
    for M in t["features"][:]:
        ax.loglog(L, t[f"approx_seconds_M{int(M)}"][:], "-o", ms=4, label=f"OPRF M = {int(M)}")
    ax.set_xlabel("sequence length L")
    ax.set_ylabel("seconds (machine-dependent)")
    ax.set_title("wall time, d = dv = 64")
    ax.legend()
    ax = axes[3][1]
    base = "iso-0.5" if "iso-0.5" in inputs else inputs[0]
    for e in ests:
        if not int(np.ravel(f[base][e].attrs["positive"])[0]):
            curve(ax, f[base][e]["features"][:], f[base][e]["frac_negative_weights"][:], e)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("feature budget M")
    ax.set_title(f"{base}: fraction of negative attention weights")
    ax.legend()
    ax = axes[3][2]
    for e in ests:
        if not int(np.ravel(f[base][e].attrs["positive"])[0]):
            curve(ax, f[base][e]["features"][:], f[base][e]["frac_nonpositive_normaliser"][:], e)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("feature budget M")
    ax.set_title(f"{base}: fraction of normalisers <= 0 (positive RFs: 0)")
    ax.legend()
    for ax in axes[3][3:]:
        ax.axis("off")
    # One legend for the error panels, in the free space of the last row (dashed: estimators that can be negative).
    handles, names = axes[0][0].get_legend_handles_labels()
    (axes[3][3] if n > 3 else axes[3][-1]).legend(handles, names, loc="center", ncol=2 if n > 4 else 1,
                                                  title="estimators (2 SE bars; dashed: not positive)")
    finish(fig, f, out, dpi=100)
