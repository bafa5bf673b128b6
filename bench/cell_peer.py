#!/usr/bin/python3
"""The NumPy peer of one crt-fig2 cell (bench/numpy_peer.py's cell_study: 11 estimators fitted on each of 5 set pairs,
log Var pooled over all 5 x 1024^2 pairs) on 5 seeded standard-normal set pairs of the cell's shape (d = 64, L = 1024):
a timing peer for `kestrel variance --regime normal --sigma 1 --dim 64 --points 1024 --pairs 5 --estimators
trig,pos,gerf,oprf,pois,geom,pois+,geom+,aderf,sderf,saderf` without kestrel_bench's dump (same work, its own sets).
Prints the wall seconds. Pair the two commands, e.g. with /usr/bin/time, on a quiet machine."""
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import numpy_peer as P  # noqa: E402

rng = np.random.default_rng(19)
cell = [(rng.standard_normal((64, 1024)), rng.standard_normal((64, 1024))) for _ in range(5)]
t0 = time.perf_counter()
for name in ["trig", "pos", "gerf", "oprf", "pois", "geom", "pois+", "geom+", "aderf", "sderf", "saderf"]:
    acc = P.Moments()
    for X, Y in cell:
        P.pairwise_summary(P.lvk2_for(name, P.fitted(name, X, Y), 64, rng), X, Y, P.log_softmax, acc)
print(f"{time.perf_counter() - t0:.2f}")
