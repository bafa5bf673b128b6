#!/usr/bin/python3
"""DERF Fig. 2: log relative variance log(Var/K) (mean over all pairs) against sigma, per regime."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import h5py  # noqa: E402
from plotlib import args, attr_str, curve, finish, plt  # noqa: E402

src, out = args()
names = ["trig-real", "pos", "oprf", "aderf", "sderf"]
labels = {"oprf": "GERF (=OPRF)"}
with h5py.File(src) as f:
    panels = attr_str(f, "panels").split()
    fig, axes = plt.subplots(1, len(panels), figsize=(3.1 * len(panels), 3.4), squeeze=False)
    for j, p in enumerate(panels):
        ax = axes[0][j]
        for n in names:
            g = f[p][n]
            curve(ax, g["sigma"][:], g["mean_log_rel_var"][:], n, labels.get(n))
        ax.set_title(p, fontsize=9)
        ax.set_xlabel(r"$\sigma$")
        if j == 0:
            ax.set_ylabel("mean log(Var / K), M = 1")
        ax.legend()
    finish(fig, f, out, dpi=110)
