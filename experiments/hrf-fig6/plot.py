#!/usr/bin/python3
"""HRF Fig. 6: empirical (markers, 2 SE) and exact (lines) log mean MSE against M on clustered data."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import h5py  # noqa: E402
from plotlib import COLORS, LABELS, args, attr_str, footer, plt  # noqa: E402

src, out = args()
colors, labels = COLORS, LABELS  # from the registry
with h5py.File(src) as f:
    configs = attr_str(f, "configs").split()
    fig, axes = plt.subplots(1, len(configs), figsize=(3.6 * len(configs), 3.3), squeeze=False)
    for ax, c in zip(axes[0], configs):
        for n in attr_str(f, "estimators").split():
            g = f[c][n]
            ax.semilogx(g["features"][:], g["log_mse_exact"][:], "-", color=colors[n], label=labels[n])
            ax.errorbar(g["features"][:], g["log_mse_empirical"][:], yerr=2 * g["mse_empirical_relative_se"][:],
                        fmt="o", ms=3, color=colors[n])
        ax.set_title(f"{c} (sigma {float(f[c].attrs['sigma'][0])}, radius {float(f[c].attrs['cluster_radius'][0])})",
                     fontsize=8)
        ax.set_xlabel("M")
        ax.set_ylabel("log mean MSE")
        ax.legend(fontsize=6)
    footer(fig, f)
    fig.tight_layout()
    fig.savefig(out, dpi=110)
