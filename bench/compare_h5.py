#!/usr/bin/python3
"""Compares the numeric datasets of two kestrel HDF5 outputs (issue #19: results before and after a performance change
must be identical or differ at rounding level). Prints one line per dataset that differs, with its largest absolute
and relative difference, and a summary line; exits 1 if a dataset is missing from either file or changes shape.

usage: /usr/bin/python3 bench/compare_h5.py BEFORE.h5 AFTER.h5 [--skip PREFIX ...]
  --skip PREFIX  leave out datasets whose path starts with PREFIX (e.g. measured wall times: /timing)
"""
import sys

import h5py
import numpy as np


def datasets(f):
    out = {}
    f.visititems(lambda name, obj: out.__setitem__("/" + name, obj) if isinstance(obj, h5py.Dataset) else None)
    return out


def main():
    args = sys.argv[1:]
    skip = [args[i + 1] for i, a in enumerate(args) if a == "--skip"]
    files = [a for i, a in enumerate(args) if a != "--skip" and (i == 0 or args[i - 1] != "--skip")]
    if len(files) != 2:
        print(__doc__.strip().splitlines()[-3], file=sys.stderr)
        sys.exit(2)
    with h5py.File(files[0], "r") as fa, h5py.File(files[1], "r") as fb:
        a, b = datasets(fa), datasets(fb)
        bad = sorted(set(a) ^ set(b))
        for name in bad:
            print(f"{name}: only in {'the first' if name in a else 'the second'} file")
        same = differ = 0
        worst = 0.0
        for name in sorted(set(a) & set(b)):
            if any(name.startswith(p) for p in skip):
                continue
            x, y = a[name][()], b[name][()]
            if not np.issubdtype(np.asarray(x).dtype, np.number):
                continue
            x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
            if x.shape != y.shape:
                print(f"{name}: shape {x.shape} vs {y.shape}")
                bad.append(name)
                continue
            both = np.isfinite(x) & np.isfinite(y)
            if np.array_equal(x, y, equal_nan=True):
                same += 1
                continue
            differ += 1
            nonfinite = int((np.isfinite(x) != np.isfinite(y)).sum())
            dx = np.abs(x[both] - y[both])
            rel = dx / np.maximum(np.abs(x[both]), np.finfo(float).tiny)
            r = float(rel.max()) if rel.size else 0.0
            worst = max(worst, r)
            print(f"{name}: max |diff| {dx.max() if dx.size else 0:.3g}, max rel {r:.3g}, "
                  f"{int((x != y).sum())} of {x.size} entries differ" + (f", {nonfinite} finite/non-finite" if nonfinite
                                                                        else ""))
        print(f"{same} numeric datasets identical, {differ} differ (largest relative difference {worst:.3g}), "
              f"{len(bad)} missing or reshaped")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
