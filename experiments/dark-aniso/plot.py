#!/usr/bin/python3
"""DARK Thm 3.2: expected variance against the condition number of Lambda; where Sigma* exists."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import h5py  # noqa: E402
import numpy as np  # noqa: E402
from plotlib import args, attr_str, finish, plt  # noqa: E402

src, out = args()
with h5py.File(src) as f:
    dims = attr_str(f, "dims").split()
    fig, axes = plt.subplots(1, len(dims) + 1, figsize=(4.2 * (len(dims) + 1), 3.4))
    for ax, d in zip(axes, dims):
        g = f[f"d{d}"]
        k = g["kappa"][:]
        ax.semilogx(k, g["log_expected_var_isotropic"][:], "o-", label=r"isotropic PRF ($\Sigma = I$)")
        ax.semilogx(k, g["log_expected_var_best_isotropic"][:], "s-", label=r"best $\tau I$")
        ax.semilogx(k, g["log_expected_var_optimal"][:], "^-", label=r"$\Sigma^*$ (importance sampling)")
        mc, se = g["mc_expected_var_optimal"][:], g["mc_expected_var_optimal_se"][:]
        ok = g["mc_se_reliable"][:] > 0
        ax.errorbar(k[ok], np.log(mc[ok]), yerr=2 * se[ok] / mc[ok], fmt="k.", label="Monte Carlo")
        ax.set_xlabel(r"condition number $\kappa$ of $\Lambda$")
        ax.set_ylabel("log E[Var] (one feature)")
        ax.set_title(f"d = {d}, lambda_max = {float(np.ravel(g.attrs['lambda_max'])[0])}", fontsize=9)
        ax.legend(fontsize=8)
    s = f["scan"]
    ax = axes[-1]
    ax.step(s["lambda_max"][:], s["sigma_star_exists"][:], where="mid", label=r"$\Sigma^*$ exists")
    ax.step(s["lambda_max"][:], s["isotropic_expected_var_finite"][:], where="mid", ls="--",
            label="isotropic E[Var] finite")
    ax2 = ax.twinx()
    ax2.plot(s["lambda_max_where_sigma_star_exists"][:], s["log_expected_var_optimal"][:], "k.-", ms=4)
    ax2.set_ylabel(r"log E[Var]($\Sigma^*$)")
    ax.axvline(0.5, color="gray", lw=0.5)
    ax.set_xlabel(r"$\lambda_{max}$ (d = 16, $\kappa$ = 10)")
    ax.legend(fontsize=8)
    finish(fig, f, out, dpi=110)
