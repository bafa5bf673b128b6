#!/usr/bin/python3
"""Exact log(Var_coupled / Var_iid) of the M = d feature estimate against d for orthogonal (solid) and simplex
(dashed) projections, one panel per family, one line per input norm r at theta = pi/2; Monte Carlo points (2 SE) at r = 0.5."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import h5py  # noqa: E402
import numpy as np  # noqa: E402
from plotlib import LABELS, args, attr_str, finish, plt  # noqa: E402

src, out = args()
with h5py.File(src) as f:
    ests = attr_str(f, "estimators").split()
    dims, r, theta = f["dims"][:], f["geometry_r"][:], f["geometry_theta"][:]
    right = np.isclose(theta, np.pi / 2)
    fig, axes = plt.subplots(1, len(ests), figsize=(3.4 * len(ests), 3.4), squeeze=False)
    cmap = plt.get_cmap("viridis")
    for ax, e in zip(axes[0], ests):
        g = f[e]
        for k, gi in enumerate(np.flatnonzero(right)):
            c = cmap(k / max(1, right.sum() - 1))
            ax.plot(dims, g["log_ratio_orthogonal"][gi], "-", color=c, label=f"r = {r[gi]:g} orthogonal")
            ax.plot(dims, g["log_ratio_simplex"][gi], "--", color=c, label=f"r = {r[gi]:g} simplex")
        for name, fmt in (("orthogonal", "o"), ("simplex", "s")):
            ax.errorbar(dims, g["mc_log_ratio_" + name][:], yerr=2 * g["mc_log_ratio_se_" + name][:], fmt=fmt,
                        ms=4, color="k", mfc="none", capsize=2, label=f"Monte Carlo {name} (r = 0.5, 2 SE)")
        ax.axhline(0, color="gray", lw=0.5)
        ax.set_xscale("log", base=2)
        ax.set_xlabel("d (M = d)")
        ax.set_title(LABELS.get(e, e), fontsize=8)
    axes[0][0].set_ylabel("log(Var / Var_iid)")
    # Outside the panels, right of the last one: inside, it covered the curves.
    axes[0][-1].legend(*axes[0][0].get_legend_handles_labels(), loc="upper left", bbox_to_anchor=(1.03, 1.0))
    finish(fig, f, out, dpi=130)
