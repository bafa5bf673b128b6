#!/usr/bin/python3
"""Softmax attention by random features (CRT eq. 3): relative errors of Y and of the row normalisers
against M per input, fractions of negative estimates (HRF Fig. 3), exact vs linear attention time vs L."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import h5py  # noqa: E402
import numpy as np  # noqa: E402
from plotlib import COLORS, LABELS, args, attr_str, footer, plt  # noqa: E402

src, out = args()
colors, labels = COLORS, LABELS  # from the registry
with h5py.File(src) as f:
    inputs = attr_str(f, "inputs").split()
    ests = attr_str(f, "estimators").split()
    n = len(inputs)
    fig, axes = plt.subplots(3, n, figsize=(3.3 * n, 9.0), squeeze=False)
    for c, name in enumerate(inputs):
        g = f[name]
        for row, key in ((0, "rel_error_Y"), (1, "rel_error_normaliser")):
            ax = axes[row][c]
            for e in ests:
                M = g[e]["features"][:]
                ax.errorbar(M, g[e][key][:], yerr=2 * g[e][key + "_se"][:], fmt="o", ms=3,
                            color=colors.get(e), label=labels.get(e, e),
                            ls="-" if int(np.ravel(g[e].attrs["positive"])[0]) else "--")
            ax.set_xscale("log", base=2)
            ax.set_yscale("log")
            ax.set_xlabel("feature budget M")
            ax.set_title(f"{name}: {'Y' if row == 0 else 'normalisers A1'}", fontsize=8)
            if c == 0:
                ax.set_ylabel("relative Frobenius error")
        if c == 0:
            axes[0][0].legend(fontsize=5)
    t = f["timing"]
    ax = axes[2][0]
    L = t["L"][:]
    ax.loglog(L, t["exact_seconds"][:], "-o", ms=3, color="k", label="exact (streaming)")
    for M in t["features"][:]:
        ax.loglog(L, t[f"approx_seconds_M{int(M)}"][:], "-o", ms=3, label=f"OPRF M = {int(M)}")
    ax.set_xlabel("sequence length L")
    ax.set_ylabel("seconds (machine-dependent)")
    ax.set_title("wall time, d = dv = 64", fontsize=8)
    ax.legend(fontsize=6)
    ax = axes[2][1]
    base = "iso-0.5" if "iso-0.5" in inputs else inputs[0]
    for e in ests:
        if not int(np.ravel(f[base][e].attrs["positive"])[0]):
            ax.plot(f[base][e]["features"][:], f[base][e]["frac_negative_weights"][:], "-o", ms=3,
                    color=colors.get(e), label=labels.get(e, e))
    ax.set_xscale("log", base=2)
    ax.set_xlabel("feature budget M")
    ax.set_title(f"{base}: fraction of negative attention weights", fontsize=8)
    ax.legend(fontsize=6)
    ax = axes[2][2]
    for e in ests:
        if not int(np.ravel(f[base][e].attrs["positive"])[0]):
            ax.plot(f[base][e]["features"][:], f[base][e]["frac_nonpositive_normaliser"][:], "-o", ms=3,
                    color=colors.get(e), label=labels.get(e, e))
    ax.set_xscale("log", base=2)
    ax.set_xlabel("feature budget M")
    ax.set_title(f"{base}: fraction of normalisers <= 0 (positive RFs: 0)", fontsize=8)
    for ax in axes[2][3:]:
        ax.axis("off")
    footer(fig, f)
    fig.tight_layout()
    fig.savefig(out, dpi=100)
