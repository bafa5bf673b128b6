"""Shared helpers for the reproduction plot scripts: read kestrel's HDF5 results with h5py."""
import json
import sys

import h5py
import matplotlib
import numpy as np

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

# Sizes in points at the saved size (the figures are saved at their figsize, so a point is a point): nothing under 8 pt
# (issue #38), so every legend and tick label reads on the results page without zooming.
MIN_FONT = 8
plt.rcParams.update({"font.size": 9, "axes.titlesize": 9, "axes.labelsize": 9, "xtick.labelsize": 8,
                     "ytick.labelsize": 8, "legend.fontsize": 8, "legend.title_fontsize": 8, "figure.titlesize": 10,
                     "legend.framealpha": 0.85, "lines.markersize": 4})

# Filled by args() from the `families` attribute that `kestrel reproduce` writes (the estimator registry:
# lib/estimators/registry.cpp), so that every plot names and colours a family the same way.
COLORS, LABELS, MARKERS, LINES = {}, {}, {}, {}


def args():
    if len(sys.argv) != 3:
        sys.exit("usage: plot.py RESULT.h5 OUT.png")
    with h5py.File(sys.argv[1], "r") as f:
        for fam in json.loads(attr_str(f, "families")):
            n = fam["name"]
            COLORS[n], LABELS[n], MARKERS[n], LINES[n] = fam["color"], fam["label"], fam["marker"], fam["line"]
    return sys.argv[1], sys.argv[2]


def attr_str(f, name):
    """String attribute written by kestrel (fixed-length ASCII: h5py returns bytes)."""
    v = f.attrs[name]
    return v.decode() if isinstance(v, bytes) else str(v)


def curve(ax, x, y, name, label=None, **kw):
    """One family's curve: colour, marker and line from the registry, so families that share a colour stay apart.
    Markers are hollow and shrink with each curve drawn on the axes (8, 6.5, 5, 3.5 pt, repeating), so that curves which
    coincide show every family's marker, one inside the other."""
    k = ax.__dict__.get("_kestrel_curves", 0)
    ax.__dict__["_kestrel_curves"] = k + 1
    return ax.plot(x, y, ls=LINES.get(name, "-"), marker=MARKERS.get(name, "o"), ms=8 - 1.5 * (k % 4), mfc="none", mew=1.1,
                   color=COLORS.get(name), label=label or LABELS.get(name, name), **kw)


def dodge(k, n, spread=0.12):
    """A factor that sets the k-th of n series side by side on a log x-axis (x * dodge(k, n)), within +-spread/2 of
    log x: points and error bars at the same x stay apart, and the true x is the middle of the group."""
    return float(np.exp(((k - (n - 1) / 2) / max(1, n - 1)) * spread)) if n > 1 else 1.0


def band(ax, x, mean, std, name, label=None):
    """mean +- std over pairs as a line and a shaded band; clip_bands(ax) afterwards keeps wide bands from hiding
    the means."""
    curve(ax, x, mean, name, label)
    poly = ax.fill_between(x, mean - std, mean + std, color=COLORS.get(name), alpha=0.12, lw=0)
    ax.__dict__.setdefault("_kestrel_bands", []).append((np.asarray(x), np.asarray(mean), np.asarray(std), name, poly))


def clip_bands(ax, ratio=3.0):
    """Where the +-std bands span more than `ratio` times the range of the means, shaded bands would bury the means:
    the y-axis then shows the means (with a margin), the spread is drawn as error bars side by side (clipped at the
    axes) instead of bands, and the panel's title says so and names the largest std. Returns whether it clipped."""
    bands = ax.__dict__.get("_kestrel_bands", [])
    if not bands:
        return False
    means = np.concatenate([m[np.isfinite(m)] for _, m, _, _, _ in bands])
    lo_b = min(np.nanmin(m - s) for _, m, s, _, _ in bands)
    hi_b = max(np.nanmax(m + s) for _, m, s, _, _ in bands)
    lo, hi = float(means.min()), float(means.max())
    span = max(hi - lo, 1e-9 * max(1.0, abs(hi)))
    if hi_b - lo_b <= ratio * span:
        return False
    ax.set_ylim(lo - 0.3 * span, hi + 0.3 * span)
    xs = np.concatenate([x for x, _, _, _, _ in bands])
    step = np.min(np.diff(np.unique(xs))) if len(np.unique(xs)) > 1 else 1.0
    for k, (x, m, s, name, poly) in enumerate(bands):
        poly.remove()
        off = (k - (len(bands) - 1) / 2) * 0.06 * step
        ax.errorbar(x + off, m, yerr=s, fmt="none", ecolor=COLORS.get(name), elinewidth=1.0, capsize=2, alpha=0.7)
    top = max(float(np.nanmax(s)) for _, _, s, _, _ in bands)
    ax.set_title(ax.get_title() + f"\nspread as bars, clipped (largest std {top:.3g})")
    return True


def heading(f):
    """The figure's title: the reproduction, the paper's figure it reproduces, the protocol where the reproduction has
    several (`--protocol`), and 'quick'."""
    name, title, protocol = attr_str(f, "experiment"), attr_str(f, "title"), attr_str(f, "protocol")
    quick = int(np.ravel(f.attrs["quick"])[0])
    extra = ([f"protocol {protocol}"] if protocol else []) + (["--quick: reduced sizes"] if quick else [])
    return f"{name}: {title}" + (f"  [{', '.join(extra)}]" if extra else "")


def footer(fig, f):
    prov = json.loads(attr_str(f, "provenance"))
    seed, quick = int(np.ravel(f.attrs["seed"])[0]), int(np.ravel(f.attrs["quick"])[0])
    fig.text(0.005, 0.003, f"kestrel {prov['git_revision'][:12]}  seed {seed}{'  (quick)' if quick else ''}",
             fontsize=MIN_FONT, color="gray", va="bottom")


def finish(fig, f, out, dpi=110):
    """Title (heading), footer, layout and save: the last step of every plot script."""
    import textwrap
    width_chars = max(40, int(fig.get_figwidth() * 72 / (0.55 * 10)))  # about 0.55 em per character at 10 pt
    title = fig.suptitle("\n".join(textwrap.wrap(heading(f), width_chars)), fontsize=10)
    footer(fig, f)
    fig.tight_layout(rect=(0, 0.02, 1, 1))
    # The panels (with their titles and legends) stay below the figure's title: where tight_layout left them touching
    # or under it (luna, attention), the panels move down.
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    title_bottom = title.get_window_extent(renderer).y0
    panels_top = max((ax.get_tightbbox(renderer).y1 for ax in fig.axes if ax.get_visible()), default=0)
    overlap = panels_top - (title_bottom - 6)
    if overlap > 0:
        fig.subplots_adjust(top=fig.subplotpars.top - overlap / fig.bbox.height)
    fig.savefig(out, dpi=dpi)
