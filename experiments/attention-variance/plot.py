#!/usr/bin/python3
"""Predicted (delta method, lines) and simulated (points, 2 SE) relative RMSE of random-feature attention rows
against M per input, with the 10% target."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import h5py  # noqa: E402
import numpy as np  # noqa: E402
from plotlib import COLORS, MARKERS, args, attr_str, curve, dodge, finish, plt  # noqa: E402

src, out = args()
with h5py.File(src) as f:
    inputs, ests = attr_str(f, "inputs").split(), attr_str(f, "estimators").split()
    target = float(np.ravel(f.attrs["target_rel_rmse"])[0])
    fig, axes = plt.subplots(1, len(inputs), figsize=(3.2 * len(inputs), 3.4), squeeze=False)
    for ax, name in zip(axes[0], inputs):
        for k, e in enumerate(ests):
            g = f[name][e]
            # Lines in the registry's styles with a marker every few points (predicted curves often coincide), the
            # simulated points side by side (dodge) with the same hollow markers.
            curve(ax, g["features"][:], g["predicted_rel_rmse"][:], e, markevery=3, lw=1.2)
            ax.errorbar(g["mc_features"][:] * dodge(k, len(ests), 0.4), g["measured_rel_rmse"][:],
                        yerr=2 * g["measured_rel_rmse_se"][:], ls="", marker=MARKERS.get(e, "o"), ms=5, mfc="none",
                        mew=1.1, elinewidth=0.8, color=COLORS.get(e))
        ax.axhline(target, color="gray", lw=0.6, ls=":")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("features M")
        ax.set_title(name, fontsize=8)
    axes[0][0].set_ylabel("relative RMSE of Y")
    axes[0][-1].legend(*axes[0][0].get_legend_handles_labels(), title="lines: predicted\npoints: simulated (2 SE)",
                       loc="center left", bbox_to_anchor=(1.03, 0.5))
    finish(fig, f, out, dpi=130)
