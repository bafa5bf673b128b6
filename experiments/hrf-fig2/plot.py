#!/usr/bin/python3
"""HRF Fig. 2 / Fig. 5: pointwise estimates (5th-95th percentile band) and relative errors over angles: exact (lines)
and simulated (points, bars of 2 exact SE of the simulated MSE; hollow where that SE exceeds half the MSE: heavy
tails that 10,000 draws do not resolve)."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import h5py  # noqa: E402
import numpy as np  # noqa: E402
from plotlib import COLORS, args, attr_str, finish, plt  # noqa: E402

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
        for (n, lab), ls in zip(names.items(), ("--", ":", "-.")):
            # Filled bands overlap: each band's edges are also drawn, in its own line style, so all three stay visible.
            ax.fill_between(th, g[n]["q05"][:], g[n]["q95"][:], alpha=0.15, color=COLORS[n], lw=0)
            ax.plot(th, g[n]["q05"][:], ls=ls, lw=1.2, color=COLORS[n], label=lab)
            ax.plot(th, g[n]["q95"][:], ls=ls, lw=1.2, color=COLORS[n])
        ax.set_title(f"r = {r}: 5th-95th percentiles", fontsize=9)
        ax.set_xlabel(r"$\theta$")
        ax.legend(fontsize=8)
        ax = axes[1][j]
        top = 0
        for k, (n, lab) in enumerate(names.items()):
            exact, emp, rse = g[n]["rel_error_exact"][:], g[n]["rel_error_empirical"][:], \
                g[n]["mse_empirical_relative_se"][:]
            ax.plot(th, exact, "-", color=COLORS[n], label=f"{lab} exact")
            # 2 SE of the simulated MSE, in units of the relative error: sqrt(emp^2 -+ 2 SE), SE = rse * exact^2.
            lo = np.sqrt(np.maximum(emp ** 2 - 2 * rse * exact ** 2, 0))
            hi = np.sqrt(emp ** 2 + 2 * rse * exact ** 2)
            x = th + (k - 1) * 0.012 * np.pi  # side by side
            ax.errorbar(x, emp, yerr=[emp - lo, hi - emp], fmt="none", ecolor=COLORS[n], elinewidth=0.8, capsize=1.5)
            bad = rse > 0.5
            ax.plot(x[~bad], emp[~bad], "o", ms=4, color=COLORS[n])
            ax.plot(x[bad], emp[bad], "o", ms=5, mfc="white", mew=1.1, color=COLORS[n])
            top = max(top, float(np.max(exact)), float(np.max(emp)))
        ax.set_ylim(0, 1.25 * top)
        ax.plot([], [], "o", ms=5, mfc="white", color="gray", label="SE > MSE/2: tail not resolved")
        ax.set_title(f"r = {r}: relative error (points: simulated, 2 SE, clipped)", fontsize=9)
        ax.set_xlabel(r"$\theta$")
        ax.legend(fontsize=8)
    finish(fig, f, out, dpi=110)
