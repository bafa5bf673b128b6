#!/usr/bin/python3
"""DERF Fig. 3: test accuracy (%) vs M per data set and the average curve over data sets."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import h5py  # noqa: E402
import numpy as np  # noqa: E402
from plotlib import args, attr_str, curve, finish, plt  # noqa: E402

src, out = args()
with h5py.File(src) as f:
    a = f["average"]
    sets, methods, Ms = attr_str(a, "datasets").split(), attr_str(a, "methods").split(), a["M"][:]
    # Per data set also the accuracy of always answering the test part's most frequent class (absent from older files).
    panels = [(s, f[s]["accuracy_mean"][:], f[s]["exact"].attrs["test_mean"] * 100,
               100 * float(np.ravel(f[s].attrs.get("majority_share_test", np.nan))[0])) for s in sets]
    panels.append(("average", a["accuracy_mean"][:], a["exact_accuracy"][:].mean(), np.nan))
    cols = 3
    nrow = (len(panels) + cols - 1) // cols
    fig, axes = plt.subplots(nrow, cols, figsize=(11, 2.6 * nrow), squeeze=False)
    for ax, (name, acc, ex, majority) in zip(axes.flat, panels):
        for j, m in enumerate(methods):
            curve(ax, Ms, acc[j], m)
        ex = float(np.ravel(ex)[0])
        ax.axhline(ex, ls="--", color="gray", lw=1, label="exact")
        if np.isfinite(majority):
            ax.axhline(majority, ls=":", color="k", lw=1, label="majority class (test part)")
            if np.allclose(np.append(acc.ravel(), ex), majority, atol=0.05):
                name += f": every method and the exact\nkernel = majority class ({majority:.1f}%)"
        ax.set_xscale("log", base=2)
        ax.set_xticks(Ms, [str(int(m)) for m in Ms])
        ax.set_title(name, fontsize=9)
        ax.set_xlabel("M", fontsize=8)
        ax.set_ylabel("test accuracy %", fontsize=8)
    axes[0][-1].legend(*axes.flat[0].get_legend_handles_labels(), loc="upper left", bbox_to_anchor=(1.02, 1.0))
    for ax in list(axes.flat)[len(panels):]:
        ax.axis("off")
    finish(fig, f, out, dpi=110)
