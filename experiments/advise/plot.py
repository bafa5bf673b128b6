#!/usr/bin/python3
"""Measured against predicted 95th-percentile relative error at the M `kestrel advise` names (2 SE bars), per
combination of input, quantity and estimator, with the 10% target."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import h5py  # noqa: E402
import numpy as np  # noqa: E402
from plotlib import args, footer, plt  # noqa: E402

src, out = args()
with h5py.File(src) as f:
    pred, meas, se = f["predicted_p95"][:], f["measured_p95"][:], f["measured_p95_se"][:]
    raw = f["combinations"][()]
    labels = (raw.decode() if isinstance(raw, bytes) else raw).split("\n")
    target = float(np.ravel(f.attrs["target"])[0])
    fig, ax = plt.subplots(figsize=(4.6, 4.0))
    kinds = sorted({" ".join(lbl.split()[:2]) for lbl in labels if lbl})
    for i, k in enumerate(kinds):
        idx = [j for j, lbl in enumerate(labels[: len(pred)]) if lbl.startswith(k + " ")]
        ax.errorbar(pred[idx], meas[idx], yerr=2 * se[idx], fmt="o", ms=3, color=f"C{i % 10}", label=k)
    lo, hi = 0.0, max(target * 1.3, float(np.max(meas + 2 * se)) if len(meas) else target)
    ax.plot([lo, hi], [lo, hi], color="gray", lw=0.6)
    ax.axhline(target, color="gray", ls=":", lw=0.8)
    ax.set_xlabel("predicted 95th-percentile error at advise's M")
    ax.set_ylabel("measured (simulation)")
    ax.legend(fontsize=5, ncol=2)
    footer(fig, f)
    fig.tight_layout()
    fig.savefig(out, dpi=130)
