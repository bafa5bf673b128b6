#!/usr/bin/python3
"""The plot of `kestrel advise --out R.h5`: kestrel.advice.plot_report on the report (predicted error against M per
estimator, one panel per sampler, +-2 SE bands where simulated, the target, the --validate points).
Usage: advise_plot.py REPORT.h5 OUT.png"""
import importlib.util
import json
import sys
from pathlib import Path

import h5py
import matplotlib

matplotlib.use("Agg")

# The package's plotting module by path: it needs neither the compiled module nor an installed package.
_spec = importlib.util.spec_from_file_location(
    "kestrel_advice", Path(__file__).resolve().parents[2] / "python" / "kestrel" / "advice.py")
advice = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(advice)

src, out = sys.argv[1], sys.argv[2]
with h5py.File(src) as f:
    raw = f["advise/report.json"][()]
    report = json.loads(raw.decode() if isinstance(raw, bytes) else raw)
advice.plot_report(report).savefig(out, dpi=130)
