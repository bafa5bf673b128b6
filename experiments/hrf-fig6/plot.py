#!/usr/bin/python3
"""HRF Fig. 6 / Table 3. Protocol h3: mean empirical MSE against M (lines) with our [min, max] over the
trials (band) and Table 3's [min, max] (bars), per data set. Protocol radius: empirical (markers, 2 SE)
and exact (lines) log mean MSE."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import h5py  # noqa: E402
import numpy as np  # noqa: E402
from plotlib import COLORS, LABELS, args, attr_str, finish, plt  # noqa: E402

src, out = args()
colors, labels = COLORS, LABELS  # from the registry
with h5py.File(src) as f:
    if attr_str(f, "protocol") == "h3-scan":
        s = f["scan"]
        fig, ax = plt.subplots(figsize=(4.8, 3.4))
        im = ax.imshow(s["mean_log_distance"][:], cmap="viridis_r")
        ax.set_xticks(range(len(s["norms"])), [f"{v:g}" for v in s["norms"][:]])
        ax.set_yticks(range(len(s["base_scales"])), [f"{v:g}" for v in s["base_scales"][:]])
        ax.set_xlabel("norm of the points")
        ax.set_ylabel("spread of X0, Y0")
        fig.colorbar(im, label="mean |log distance| to Table 3")
        finish(fig, f, out, dpi=110)
        sys.exit(0)
    configs = attr_str(f, "configs").split()
    h3 = attr_str(f, "protocol") == "h3"
    fig, axes = plt.subplots(1, len(configs), figsize=(3.6 * len(configs), 3.3), squeeze=False)
    for ax, c in zip(axes[0], configs):
        for k, n in enumerate(attr_str(f, "estimators").split()):
            g = f[c][n]
            M = g["features"][:]
            if h3:
                ax.loglog(M, g["mse_empirical"][:], "-o", ms=4, color=colors[n], label=labels[n])
                ax.fill_between(M, g["mse_empirical_min"][:], g["mse_empirical_max"][:], color=colors[n], alpha=0.15)
                pm, lo, hi = g["paper_features"][:], g["paper_mse_min"][:], g["paper_mse_max"][:]
                x = pm * (1 + 0.04 * (k - 1))  # side by side
                ax.vlines(x, lo, hi, color=colors[n], lw=2.5, alpha=0.6,
                          label="paper [min, max]" if k == 0 else None)
            else:
                ax.semilogx(M, g["log_mse_exact"][:], "-", color=colors[n], label=labels[n])
                ax.errorbar(M, g["log_mse_empirical"][:], yerr=2 * g["mse_empirical_relative_se"][:],
                            fmt="o", ms=4, color=colors[n])
        if h3:
            s = np.sort(f[c]["s_means"][:].ravel())[::-1]
            ax.set_title(f"{c}: sigma {float(f[c].attrs['sigma'][0]):.3g}, s = {', '.join(f'{v:.3f}' for v in s)}",
                         fontsize=8)
            ax.set_ylabel("empirical MSE")
        else:
            ax.set_title(f"{c} (sigma {float(f[c].attrs['sigma'][0])}, "
                         f"radius {float(f[c].attrs['cluster_radius'][0])})", fontsize=8)
            ax.set_ylabel("log mean MSE")
        ax.set_xlabel("M")
    axes[0][-1].legend(*axes[0][0].get_legend_handles_labels(), loc="upper left", bbox_to_anchor=(1.02, 1.0))
    finish(fig, f, out, dpi=110)
