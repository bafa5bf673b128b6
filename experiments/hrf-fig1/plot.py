#!/usr/bin/python3
"""HRF Fig. 1: MSE of TrigRF, SM++ and the angular hybrid over (theta, r); Thm 3.5 bound."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import h5py  # noqa: E402
import numpy as np  # noqa: E402
from plotlib import args, finish, plt  # noqa: E402

src, out = args()
with h5py.File(src) as f:
    th, r = f["theta"][:], f["r"][:]
    sm2 = np.exp(2 * np.outer(r ** 2, np.cos(th)))
    fig, axes = plt.subplots(1, 4, figsize=(15, 3.4))
    for ax, key, title in zip(axes, ["rel_error_trig", "rel_error_pos_hyp", "rel_error_hybrid"],
                              ["TrigRF", "SM++ (hyperbolic PosRF)", "angular hybrid"]):
        mse = f[key][:] ** 2 * sm2
        im = ax.pcolormesh(th, r, np.log10(mse + 1e-300).clip(-12), shading="auto")
        fig.colorbar(im, ax=ax, label="log10 MSE")
        ax.set_xlabel(r"$\theta$")
        ax.set_ylabel("r")
        ax.set_title(f"{title}, m = 10", fontsize=9)
    g = f["thm35"]
    ax = axes[3]
    ax.semilogy(g["r"][:], g["max_rel_error"][:], "o-", label="exact max rel. error")
    ax.semilogy(g["r"][:], g["bound_printed"][:], "s--", label="Thm 3.5 as printed")
    ax.semilogy(g["r"][:], g["bound_corrected"][:], "^--", label="corrected (eq. 64)")
    ax.set_xlabel("r")
    ax.set_title("angular hybrid, m = 10, n = 1", fontsize=9)
    ax.legend(fontsize=8)
    finish(fig, f, out, dpi=110)
