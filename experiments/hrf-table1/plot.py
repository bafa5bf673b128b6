#!/usr/bin/python3
"""HRF Table 1: MSE (x1e-3) per method on wine and Boston, ours (bars) against the paper's (markers)."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import h5py  # noqa: E402
import numpy as np  # noqa: E402
from plotlib import args, attr_str, finish, plt  # noqa: E402

src, out = args()
with h5py.File(src) as f:
    methods = attr_str(f, "methods").split()
    fig, axes = plt.subplots(1, 2, figsize=(9, 3.4))
    for ax, ds in zip(axes, ["wine", "boston"]):
        g = f[ds]
        x = np.arange(len(methods))
        if "mse_mean_1e-3" not in g:
            ax.text(0.5, 0.5, attr_str(g, "reason"), ha="center", transform=ax.transAxes, fontsize=8)
            continue
        ax.bar(x, g["mse_mean_1e-3"][:], yerr=g["mse_std_1e-3"][:], capsize=3, label="kestrel")
        ax.plot(x, g["paper_mse_1e-3"][:], "k_", ms=20, mew=2, label="paper")
        ax.set_xticks(x, methods, fontsize=8)
        ax.set_ylabel("MSE x 1e-3")
        ax.set_title(ds)
        ax.legend(fontsize=8)
    finish(fig, f, out, dpi=120)
