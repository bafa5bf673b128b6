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
            # The delta method holds where a row's error is small; where more than half of the rows are beyond its
            # range (frac_rows_outside) the prediction is drawn faint and dotted, and not trusted.
            M, pred, beyond = g["features"][:], g["predicted_rel_rmse"][:], g["frac_rows_outside"][:] > 0.5
            inside = np.where(beyond, np.nan, pred)
            curve(ax, M, inside, e, markevery=3, lw=1.2)
            # the dotted part reaches to its neighbours, so that it joins the solid one
            near = beyond | np.concatenate([beyond[1:], [False]]) | np.concatenate([[False], beyond[:-1]])
            ax.plot(M, np.where(near, pred, np.nan), ls=":", lw=0.9, color=COLORS.get(e), alpha=0.6)
            ax.errorbar(g["mc_features"][:] * dodge(k, len(ests), 0.4), g["measured_rel_rmse"][:],
                        yerr=2 * g["measured_rel_rmse_se"][:], ls="", marker=MARKERS.get(e, "o"), ms=5, mfc="none",
                        mew=1.1, elinewidth=0.8, color=COLORS.get(e))
        if all(np.all(f[name][e]["frac_rows_outside"][:] > 0.5) for e in ests):
            ax.text(0.03, 0.03, "every prediction here is beyond\nthe delta method's range", transform=ax.transAxes,
                    fontsize=8, color="dimgray", va="bottom")
        ax.axhline(target, color="gray", lw=0.6, ls=":")
        ax.plot([], [], ls=":", color="gray", label="predicted beyond the\ndelta method's range\n(> half of the rows)")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("features M")
        ax.set_title(name, fontsize=8)
    axes[0][0].set_ylabel("relative RMSE of Y")
    axes[0][-1].legend(*axes[0][0].get_legend_handles_labels(), title="lines: predicted\npoints: simulated (2 SE)",
                       loc="center left", bbox_to_anchor=(1.03, 0.5))
    finish(fig, f, out, dpi=130)
