#!/usr/bin/python3
"""LUNA 3.2/5.4: held-out kernel error (left) and NW test accuracy (right) per method over M, one row per data set."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import h5py  # noqa: E402
import numpy as np  # noqa: E402
from plotlib import LABELS, args, attr_str, curve, finish, plt  # noqa: E402

src, out = args()
with h5py.File(src) as f:
    methods = attr_str(f, "methods").split()
    datasets = attr_str(f, "datasets").split()
    fig, axes = plt.subplots(len(datasets), 2, figsize=(9, 2.8 * len(datasets)), squeeze=False)
    for row, ds in zip(axes, datasets):
        g = f[ds]
        M = g["M"][:]
        for i, m in enumerate(methods):
            key = m if m in LABELS else "luna-" + m  # the file names LUNA variants without the prefix
            curve(row[0], M, g["kernel_log_rel_mse"][i, :], key)
            curve(row[1], M, 100 * g["accuracy"][i, :], key)
        row[1].axhline(100 * g["exact_accuracy"][0], color="gray", lw=0.8, label="exact kernel")
        row[0].set_ylabel("log held-out rel. MSE")
        row[1].set_ylabel("test accuracy (%)")
        for ax in row:
            ax.set_xscale("log", base=2)
            ax.set_xlabel("features M")
            ax.set_title(f"{ds} (d = {int(g.attrs['d'])})", fontsize=9)
    axes[0][1].legend(loc="upper left", bbox_to_anchor=(1.02, 1.0))
    finish(fig, f, out, dpi=120)
