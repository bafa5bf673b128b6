#!/usr/bin/python3
"""CRT Thm 4.1: log(Var orthogonal / Var iid) against d for PosRF, OPRF and TrigRF."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import h5py  # noqa: E402
from plotlib import COLORS, LABELS, args, attr_str, finish, plt  # noqa: E402

src, out = args()
with h5py.File(src) as f:
    fig, ax = plt.subplots(figsize=(5, 3.4))
    for n in attr_str(f, "estimators").split():
        g = f[n]
        ax.errorbar(g["dims"][:], g["mean_log_ratio"][:], yerr=2 * g["se_mean_log_ratio"][:], fmt="-o", ms=4,
                    color=COLORS[n], label=LABELS[n], capsize=2)
    ax.axhline(0, color="gray", lw=0.5)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("d (M = d)")
    ax.set_ylabel("mean log(Var_ort / Var_iid)")
    ax.set_title("Orthogonal vs iid projections (CRT Thm 4.1)")
    ax.legend(fontsize=8)
    finish(fig, f, out, dpi=130)
