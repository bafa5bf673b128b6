#!/usr/bin/python3
"""CRT Table 1: test accuracy (%) per data set and method, ours (bars, std over seeds) against the paper's (markers),
with the exact-kernel accuracy as a dashed line."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import h5py  # noqa: E402
import numpy as np  # noqa: E402
from plotlib import COLORS, LABELS, args, attr_str, finish, plt  # noqa: E402

src, out = args()
with h5py.File(src) as f:
    t = f["table"]
    sets, methods = attr_str(t, "datasets").split(), attr_str(t, "methods").split()
    mean, std, paper, exact = (t[k][:] for k in ("accuracy_mean", "accuracy_std", "paper_accuracy_mean",
                                                  "exact_accuracy"))
    rows = sets + ["average"]
    mean = np.vstack([mean, mean.mean(0)])
    std = np.vstack([std, np.zeros(len(methods))])
    paper = np.vstack([paper, paper.mean(0)])
    exact = np.append(exact, exact.mean())
    # The accuracy of always answering the test part's most frequent class (absent from files of older runs).
    majority = [100 * float(np.ravel(f[s].attrs.get("majority_share_test", np.nan))[0]) for s in sets]
    cols = 3
    nrow = (len(rows) + cols - 1) // cols
    fig, axes = plt.subplots(nrow, cols, figsize=(11, 2.6 * nrow), squeeze=False)
    x = np.arange(len(methods))
    for ax, i in zip(axes.flat, range(len(rows))):
        ax.bar(x, mean[i], yerr=std[i], capsize=2, color=[COLORS.get(m, "gray") for m in methods], alpha=0.8)
        ax.plot(x, paper[i], "k_", ms=14, mew=2, label="paper")
        ax.axhline(exact[i], ls="--", color="gray", lw=1, label="exact kernel")
        title = rows[i]
        if i < len(sets):
            ax.axhline(majority[i], ls=":", color="k", lw=1, label="majority class (test part)")
            if np.allclose(np.append(mean[i], exact[i]), majority[i], atol=0.05):
                title += f": every method and the exact\nkernel = majority class ({majority[i]:.1f}%)"
        ax.set_xticks(x, [LABELS.get(m, m) for m in methods], fontsize=8, rotation=45)
        ax.set_title(title, fontsize=9)
        ax.set_ylabel("test accuracy %", fontsize=8)
        if i == min(cols, len(rows)) - 1:  # outside the last panel of the first row, clear of the bars
            ax.legend(loc="upper left", bbox_to_anchor=(1.02, 1.0))
    for ax in list(axes.flat)[len(rows):]:
        ax.axis("off")
    finish(fig, f, out, dpi=110)
