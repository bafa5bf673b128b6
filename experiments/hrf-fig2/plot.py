#!/usr/bin/python3
"""HRF Fig. 2 / Fig. 5: pointwise estimates (5th-95th percentile band) and relative errors over angles."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import h5py  # noqa: E402
from plotlib import COLORS, args, attr_str, footer, plt  # noqa: E402

src, out = args()
names = {"trig": "TrigRF (128)", "pos": "FAVOR+ (128)", "hrf-angular": "angular hybrid (64+64+1)"}
with h5py.File(src) as f:
    lengths = attr_str(f, "lengths").split()
    fig, axes = plt.subplots(2, len(lengths), figsize=(4.2 * len(lengths), 6), squeeze=False)
    for j, r in enumerate(lengths):
        g = f[f"r{r}"]
        th = g["theta"][:]
        ax = axes[0][j]
        ax.plot(th, g["true"][:], "k-", lw=1.5, label="true SM")
        for n, lab in names.items():
            ax.fill_between(th, g[n]["q05"][:], g[n]["q95"][:], alpha=0.25, color=COLORS[n], label=lab)
        ax.set_title(f"r = {r}: 5th-95th percentiles", fontsize=9)
        ax.set_xlabel(r"$\theta$")
        ax.legend(fontsize=6)
        ax = axes[1][j]
        for n, lab in names.items():
            ax.plot(th, g[n]["rel_error_exact"][:], "-", color=COLORS[n], label=f"{lab} exact")
            ax.plot(th, g[n]["rel_error_empirical"][:], "o", ms=3, color=COLORS[n])
        ax.set_title(f"r = {r}: relative error (dots: empirical)", fontsize=9)
        ax.set_xlabel(r"$\theta$")
        ax.legend(fontsize=6)
    footer(fig, f)
    fig.tight_layout()
    fig.savefig(out, dpi=110)
