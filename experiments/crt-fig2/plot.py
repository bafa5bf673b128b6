#!/usr/bin/python3
"""CRT Fig. 2: log-variance (mean +- std over all pairs) against sigma, non-positive and positive RFs; bands much
wider than the means' range are clipped at the axes (the panel says so)."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import h5py  # noqa: E402
from plotlib import args, attr_str, band, clip_bands, finish, plt  # noqa: E402

src, out = args()
groups = [("non-positive", ["trig", "gerf", "pois", "geom"]), ("positive", ["pos", "oprf", "pois+", "geom+"])]
with h5py.File(src) as f:
    panels = attr_str(f, "panels").split()
    fig, axes = plt.subplots(2, len(panels), figsize=(3.2 * len(panels), 6), squeeze=False)
    for j, p in enumerate(panels):
        for i, (title, names) in enumerate(groups):
            ax = axes[i][j]
            for n in names:
                g = f[p][n]
                band(ax, g["sigma"][:], g["mean_log_var"][:], g["std_log_var"][:], n)
            ax.set_title(f"{p}, {title}", fontsize=9)
            ax.set_xlabel(r"$\sigma$")
            if j == 0:
                ax.set_ylabel("log Var (Gaussian kernel)")
            clip_bands(ax)  # mnist-standardize: std in the thousands around means near 0 (issue #38)
            ax.legend(loc="best")
    finish(fig, f, out, dpi=110)
