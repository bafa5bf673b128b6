#!/usr/bin/python3
"""kestrel advise checked by independent simulation: the M advise decides against the M the simulation needs, one
panel per sampler. x: advise's M with its interval (bars; "out of reach" at the budget, "not settled" at the middle of
the interval reached); y: the simulation's M (log-log between its two checks, slope -1/2 beyond them, at most 4x
the budget), with the checks as ticks: ^ where the
target was missed (the M needed is above), v where it was met (below), green on the side advise implies, red on the
other, orange where the check ran out of draws before its power. Grey lines: y = x and 1.25x either way."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import h5py  # noqa: E402
import numpy as np  # noqa: E402
from plotlib import args, finish, plt  # noqa: E402

DECISIONS = {"M": ("o", "full", "named M"), "out of reach": (">", "full", "out of reach (at the budget)"),
             "not settled": ("D", "none", "not settled (interval reached)")}
OUTCOME_COLORS = {"confirmed": "tab:green", "differs": "tab:red", "underpowered": "tab:orange"}


def lines(f, name):
    raw = f[name][()]
    return [ln for ln in (raw.decode() if isinstance(raw, bytes) else raw).split("\n") if ln.strip()]


src, out = args()
with h5py.File(src) as f:
    combos = [c.split() for c in lines(f, "combinations")]
    decisions, outcomes = lines(f, "decisions"), lines(f, "outcomes")
    d = {k: f[k][:] for k in ("m_named", "m_named_low", "m_named_high", "budget", "m_simulated", "check_missed_m",
                              "check_missed_p95", "check_met_m", "check_met_p95")}
    target = float(np.ravel(f.attrs["target"])[0])
    samplers = [s for s in ("iid", "orthogonal", "simplex") if any(c[-1] == s for c in combos)]
    fig, axes = plt.subplots(1, len(samplers), figsize=(4.2 * len(samplers) + 2.4, 4.6), squeeze=False)
    for ax, smp in zip(axes[0], samplers):
        pos = []
        for j, c in enumerate(combos):
            if c[-1] != smp:
                continue
            dec, low, high, budget = decisions[j], d["m_named_low"][j], d["m_named_high"][j], d["budget"][j]
            if dec == "M":
                x = d["m_named"][j]
            elif dec == "out of reach":
                x = budget
            else:
                x = np.sqrt(max(low, 1) * (high if high > 0 else budget))
            xl, xh = (max(low, 1), high if high > 0 else budget) if dec != "out of reach" else (x, x)
            y = min(max(d["m_simulated"][j], 0.5), 4 * budget)  # beyond 4x the budget: drawn at its edge
            marker, fill, _ = DECISIONS[dec]
            color = OUTCOME_COLORS[outcomes[j]]
            ax.errorbar(x, y, xerr=[[x - xl], [xh - x]], marker=marker, fillstyle=fill, ms=5, color=color,
                        elinewidth=0.7, alpha=0.8)
            for side, want_missed in (("missed", True), ("met", False)):
                m = d[f"check_{side}_m"][j]
                if m <= 0:
                    continue
                missed = d[f"check_{side}_p95"][j] > target
                tick_color = "tab:orange" if outcomes[j] == "underpowered" else (
                    "tab:green" if missed == want_missed else "tab:red")
                ax.plot([x], [m], marker="^" if missed else "v", ms=4, color=tick_color, alpha=0.8)
                ax.plot([x, x], [y, m], color=tick_color, lw=0.4, alpha=0.6)
            pos += [xl, xh, y]
        lo, hi = max(min(pos, default=1) / 2, 0.5), max(pos, default=10) * 2
        grid = np.array([lo, hi])
        ax.plot(grid, grid, color="gray", lw=0.8)
        for k in (1.25, 1 / 1.25):
            ax.plot(grid, k * grid, color="gray", lw=0.6, ls="--")
        ax.set(xscale="log", yscale="log", xlim=(lo, hi), ylim=(lo, hi), title=f"{smp} features",
               xlabel="M advise decides (interval)", ylabel="M the independent simulation needs")
        ax.grid(lw=0.3, alpha=0.5)
    handles = [plt.Line2D([], [], ls="", marker=m, fillstyle=fs, color="k", label=lab)
               for m, fs, lab in DECISIONS.values()]
    handles += [plt.Line2D([], [], ls="", marker="s", color=c, label=o) for o, c in OUTCOME_COLORS.items()]
    handles += [plt.Line2D([], [], ls="", marker="^", color="k", label="check: target missed"),
                plt.Line2D([], [], ls="", marker="v", color="k", label="check: target met")]
    axes[0][-1].legend(handles=handles, loc="upper left", bbox_to_anchor=(1.03, 1.0), title=f"target {target:g} (p95)")
    finish(fig, f, out, dpi=110)
