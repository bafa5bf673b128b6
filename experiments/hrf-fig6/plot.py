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
    # Two panels a row, each large enough to read: ours and the paper's [min, max] as bars side by side at each M (as
    # bands they overlapped), the M axis labelled at every M.
    cols = min(2, len(configs))
    rows = (len(configs) + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(5.2 * cols, 4.0 * rows), squeeze=False)
    for ax in list(axes.flat)[len(configs):]:
        ax.axis("off")
    ests = attr_str(f, "estimators").split()
    for ax, c in zip(axes.flat, configs):
        for k, n in enumerate(ests):
            g = f[c][n]
            M = g["features"][:]
            if h3:
                shift = 1 + 0.06 * (k - (len(ests) - 1) / 2)  # side by side on the log axis
                mean, lo, hi = g["mse_empirical"][:], g["mse_empirical_min"][:], g["mse_empirical_max"][:]
                ax.errorbar(M * shift, mean, yerr=[mean - lo, hi - mean], fmt="-o", ms=4, capsize=3, lw=1.2,
                            color=colors[n], label=f"{labels[n]}: ours, mean and [min, max]")
                pm, plo, phi = g["paper_features"][:], g["paper_mse_min"][:], g["paper_mse_max"][:]
                ax.vlines(pm * shift * 1.035, plo, phi, color=colors[n], lw=4, alpha=0.35,
                          label=f"{labels[n]}: paper's [min, max]")
                ax.set_xscale("log")
                ax.set_yscale("log")
                ticks = np.union1d(M, pm)
                ax.set_xticks(ticks, [f"{int(v)}" for v in ticks], rotation=90 if len(ticks) > 6 else 0)
                ax.minorticks_off()
            else:
                ax.semilogx(M, g["log_mse_exact"][:], "-", color=colors[n], label=labels[n])
                ax.errorbar(M, g["log_mse_empirical"][:], yerr=2 * g["mse_empirical_relative_se"][:],
                            fmt="o", ms=4, color=colors[n])
        if h3:
            s = np.sort(f[c]["s_means"][:].ravel())[::-1]
            ax.set_title(f"{c}: sigma {float(f[c].attrs['sigma'][0]):.3g}, s = {', '.join(f'{v:.3f}' for v in s)}",
                         fontsize=9)
            ax.set_ylabel("empirical MSE")
        else:
            ax.set_title(f"{c} (sigma {float(f[c].attrs['sigma'][0])}, "
                         f"radius {float(f[c].attrs['cluster_radius'][0])})", fontsize=8)
            ax.set_ylabel("log mean MSE")
        ax.set_xlabel("M")
    axes[0][-1].legend(*axes[0][0].get_legend_handles_labels(), loc="upper left", bbox_to_anchor=(1.02, 1.0))
    finish(fig, f, out, dpi=110)
