#!/usr/bin/python3
"""The figure of docs/advise.md: kestrel.advise's predicted error against M on one input (the isotropic case of issue
34: Q, K 192 x 16 with entries N(0, 0.36), V 192 x 4 with entries N(1, 1)) for PosRF, OPRF and SDERF with iid,
orthogonal and simplex projections, and measured points from independent draws at the M advise names for targets of
40%, 20%, 10% and 5% (kestrel.advice.check_points). Prints the points as a table.
Usage: PYTHONPATH=build/python /usr/bin/python3 scripts/advise_curve.py OUT.png"""
import sys

import matplotlib

matplotlib.use("Agg")
import numpy as np  # noqa: E402

import kestrel  # noqa: E402
from kestrel import advice  # noqa: E402

r = np.random.default_rng(0)
Q, K, V = 0.6 * r.normal(size=(192, 16)), 0.6 * r.normal(size=(192, 16)), 1 + r.normal(size=(192, 4))
opts = dict(estimators="pos,oprf,sderf", samplers="iid,orthogonal,simplex", budget=2048, seed=0, no_timing=True)
report = kestrel.advise(Q, K, V, target=0.1, full_curve=True, **opts)  # the whole curve: points lie past 4x M
points = advice.check_points(Q, K, V, validate=100, **opts)
print("estimator sampler target M predicted measured se")
for p in points:
    print(f"{p['estimator']} {p['sampler']} {p['target']} {p['m']} {p['predicted_p95']:.4f} {p['measured_p95']:.4f} "
          f"{p['measured_p95_se']:.4f}")
advice.plot_report(report, points).savefig(sys.argv[1], dpi=130)
