"""Shared helpers for the reproduction plot scripts: read kestrel's HDF5 results with h5py."""
import json
import sys

import h5py
import matplotlib
import numpy as np

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

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


def band(ax, x, mean, std, name, label=None):
    c = COLORS.get(name)  # colour, marker and line from the registry, so families that share a colour stay apart
    ax.plot(x, mean, ls=LINES.get(name, "-"), marker=MARKERS.get(name, "o"), ms=3, color=c,
            label=label or LABELS.get(name, name))
    ax.fill_between(x, mean - std, mean + std, color=c, alpha=0.15)


def footer(fig, f):
    prov = json.loads(attr_str(f, "provenance"))
    seed, quick = int(np.ravel(f.attrs["seed"])[0]), int(np.ravel(f.attrs["quick"])[0])
    fig.text(0.01, 0.005, f"kestrel {prov['git_revision'][:12]}  seed {seed}{'  (quick)' if quick else ''}",
             fontsize=6, color="gray")
