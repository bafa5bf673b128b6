#!/usr/bin/python3
"""CRT Fig. 1 right: log(Var OPRF / Var PosRF) against |x + y|^2 for several d."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import h5py  # noqa: E402
from plotlib import args, finish, plt  # noqa: E402

src, out = args()
with h5py.File(src) as f:
    S, dims, util = f["sum_sq"][:], f["dims"][:], f["utility"][:]
    fig, ax = plt.subplots(figsize=(5, 3.6))
    for d, u in zip(dims, util):
        ax.plot(S, u, label=f"d = {int(d)}")
    ax.axvline(100, color="gray", lw=0.5, ls=":")
    ax.set_xlabel(r"$\|x+y\|^2$")
    ax.set_ylabel(r"$\mu = \log(\mathrm{Var}_{OPRF} / \mathrm{Var}_{PosRF})$")
    ax.set_title("CRT Fig. 1 (right): OPRF vs PosRF")
    ax.legend(fontsize=8)
    finish(fig, f, out, dpi=130)
