#!/usr/bin/python3
"""Predicted (delta method, lines) and simulated (points, 2 SE) relative RMSE of random-feature attention rows
against M per input, with the 10% target."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import h5py  # noqa: E402
import numpy as np  # noqa: E402
from plotlib import COLORS, LABELS, args, attr_str, footer, plt  # noqa: E402

src, out = args()
with h5py.File(src) as f:
    inputs, ests = attr_str(f, "inputs").split(), attr_str(f, "estimators").split()
    target = float(np.ravel(f.attrs["target_rel_rmse"])[0])
    fig, axes = plt.subplots(1, len(inputs), figsize=(3.2 * len(inputs), 3.4), squeeze=False)
    for ax, name in zip(axes[0], inputs):
        for e in ests:
            g = f[name][e]
            ax.plot(g["features"][:], g["predicted_rel_rmse"][:], "-", color=COLORS.get(e), label=LABELS.get(e, e))
            ax.errorbar(g["mc_features"][:], g["measured_rel_rmse"][:], yerr=2 * g["measured_rel_rmse_se"][:],
                        fmt="o", ms=3, color=COLORS.get(e))
        ax.axhline(target, color="gray", lw=0.6, ls=":")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("features M")
        ax.set_title(name, fontsize=8)
    axes[0][0].set_ylabel("relative RMSE of Y")
    axes[0][0].legend(fontsize=5)
    footer(fig, f)
    fig.tight_layout()
    fig.savefig(out, dpi=130)
