#!/usr/bin/env python3
# Issue 20 part 3: evaluates the image pipelines a 2021-2022 JAX/TF/PyTorch user would have run (preprocessing x
# resize x pixel scale) against the CRT and DERF mnist / cifar10 / mnist-cifar10 claims at once, with
# `kestrel variance` at the reproductions' settings, and writes the table docs/mnist-pipelines.md.
#
# Usage: scripts/mnist_pipelines.py [--kestrel build/bin/kestrel] [--data-dir DIR] [--out docs/mnist-pipelines.md]
# Run time: about 2 minutes on 2 cores (21 pipelines x 4 panels, one `kestrel variance` call each).
# Standard library only (the machine's Python has no NumPy).
import argparse
import json
import math
import os
import subprocess
import sys
import time

# The calls crt-fig2 and derf-fig2 make (experiments/*/): d = 64, L = 1024, 5 set pairs, seed 1; the claims read
# sigma = 1 only, and a set pair's sigma = 1 result does not depend on the other sigmas of the grid.
COMMON = ["--sigma", "1", "--dim", "64", "--points", "1024", "--pairs", "5", "--seed", "1"]
CRT = ["--kernel", "gaussian", "--estimators", "trig,gerf,pos,oprf,geom+", "--halve-real"]
DERF = ["--kernel", "softmax", "--estimators", "trig-real,pos,oprf,aderf,sderf"]

# The preprocessing forms; the pixel scale only matters for raw and center (the others standardise it away).
PREPROCESS = ["raw", "center", "standardize", "standardize-global", "mnist-norm"]
RESIZE = ["area", "bilinear", "bilinear-aa"]


def pipelines():
    for pre in PREPROCESS:
        for rs in RESIZE:
            for scale in (["1", "255"] if pre in ("raw", "center") else ["1"]):
                yield pre, rs, scale


def name(pre, rs, scale):
    return f"{pre}/{rs}" + (f"/{scale}" if pre in ("raw", "center") else "")


def run(kestrel, data_dir, regime, extra, pre, rs, scale):
    # --pixel-scale is refused where nothing reads it (the standardising forms), as every out-of-context option.
    scaled = ["--pixel-scale", scale] if pre in ("raw", "center") else []
    cmd = [kestrel, "variance", "--regime", regime, *COMMON, *extra, "--preprocess", pre, "--resize", rs, *scaled,
           "--data-dir", data_dir, "--json"]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    res = {}
    for r in json.loads(out)["results"]:
        if r["status"] != "ok":
            raise RuntimeError(f"{' '.join(cmd)}: {r['estimator']} is {r['status']}")
        vals = r["mean_log_var_per_set"] + [r["mean_log_var"], r["mean_log_rel_var"]]
        if not all(math.isfinite(v) for v in vals):
            raise RuntimeError(f"{' '.join(cmd)}: non-finite result for {r['estimator']}")
        res[r["estimator"]] = r
    return res


def gap(res, a, b, relative=False):
    """mean log Var(a) - mean log Var(b) (relative: of Var/K, as derf-fig2 reads it) and the standard error of the
    gap over the set pairs (the between-pair spread of the per-pair gaps / sqrt(pairs))."""
    key = "mean_log_rel_var" if relative else "mean_log_var"
    g = res[a][key] - res[b][key]
    per = [x - y for x, y in zip(res[a]["mean_log_var_per_set"], res[b]["mean_log_var_per_set"])]
    m = sum(per) / len(per)
    se = math.sqrt(sum((p - m) ** 2 for p in per) / (len(per) - 1) / len(per))
    return g, se


# (label, paper, relation, claimed, tolerance): ">" must exceed, "~" within tolerance (derf-fig2's reading: half
# the exponent), "<" below (SDERF on par: within 0.5 nats of the best other method).
CLAIMS = [
    ("CRT mnist TrigRF-GERF", "CRT", ">", 10, 0),
    ("CRT mnist PosRF-OPRF", "CRT", ">", 7, 0),
    ("CRT mnist PosRF-GeomRF+", "CRT", ">", 7, 0),
    ("DERF mnist GERF-SDERF", "DERF", "~", 5, 2.5),
    ("DERF cifar10 GERF-SDERF", "DERF", "~", 10, 5),
    ("DERF mnist/cifar10 GERF-SDERF", "DERF", "~", 5, 2.5),
    ("DERF mnist/cifar10 GERF-ADERF", "DERF", "~", 3, 1.5),
    ("DERF SDERF on par, worst of 3 sets", "DERF", "<", 0.5, 0),
]


def measure(kestrel, data_dir, pre, rs, scale):
    crt = run(kestrel, data_dir, "mnist", CRT, pre, rs, scale)
    derf = {p: run(kestrel, data_dir, p, DERF, pre, rs, scale) for p in ("mnist", "cifar10", "mnist/cifar10")}
    m = [gap(crt, "trig", "gerf"), gap(crt, "pos", "oprf"), gap(crt, "pos", "geom+"),
         gap(derf["mnist"], "oprf", "sderf", True), gap(derf["cifar10"], "oprf", "sderf", True),
         gap(derf["mnist/cifar10"], "oprf", "sderf", True), gap(derf["mnist/cifar10"], "oprf", "aderf", True)]
    par = max(r["sderf"]["mean_log_rel_var"] -
              min(r[e]["mean_log_rel_var"] for e in ("oprf", "aderf", "pos", "trig-real")) for r in derf.values())
    m.append((par, 0.0))
    return m


def holds(rel, claimed, tol, v):
    return v > claimed if rel == ">" else v < claimed if rel == "<" else abs(v - claimed) <= tol


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    here = os.path.dirname(os.path.abspath(__file__))
    ap.add_argument("--kestrel", default=os.path.join(here, "..", "build", "bin", "kestrel"))
    ap.add_argument("--data-dir", default=os.environ.get("KESTREL_DATA_DIR", os.path.join(here, "..", "datasets")))
    ap.add_argument("--out", default=os.path.join(here, "..", "docs", "mnist-pipelines.md"))
    a = ap.parse_args()
    t0 = time.time()
    rows = []
    for pre, rs, scale in pipelines():
        m = measure(a.kestrel, a.data_dir, pre, rs, scale)
        ok = [holds(c[2], c[3], c[4], v) for c, (v, _) in zip(CLAIMS, m)]
        # Distance to the paper: |measured - claimed| over the seven numeric claims (a "more than e^c" claim is read
        # as the figure's value rounded down, so overshooting it counts as a gap too).
        dist = sum(abs(v - c[3]) for c, (v, _) in zip(CLAIMS[:7], m[:7]))
        about = sum(abs(v - c[3]) for c, (v, _) in zip(CLAIMS, m) if c[2] == "~")
        rows.append((name(pre, rs, scale), m, ok, about, dist))
        print(f"{rows[-1][0]:34s} holds {sum(ok)}/{len(ok)} about-gap {about:6.2f} distance {dist:7.2f}",
              file=sys.stderr)
    minutes = (time.time() - t0) / 60
    rows.sort(key=lambda r: (-sum(r[2]), r[3]))
    lines = [
        "<!-- Written by scripts/mnist_pipelines.py; do not edit by hand. -->",
        "# Image pipelines against the CRT and DERF mnist / cifar10 claims (issue 20, part 3)",
        "",
        "Each row is one pipeline `preprocess/resize[/pixel scale]` (lib/data/regimes.hpp, images.hpp), run at the",
        "reproductions' settings: d = 64, L = 1024, 5 set pairs, seed 1, sigma = 1; CRT: Gaussian kernel, real",
        "estimators' variance halved; DERF: softmax kernel, log(Var/K), M = 1. Cells: the measured gap in nats",
        "(mean log variance of the baseline minus the estimator's) +- its standard error over the 5 set pairs,",
        "marked `*` where the claim holds. 'on par' is SDERF minus the best other method, worst of mnist, cifar10",
        "and mnist/cifar10 (claim: < 0.5). Standardising forms do not depend on the pixel scale and are listed once;",
        "mnist-norm is (x - 0.1307)/0.3081 for MNIST and, for CIFAR-10 grayscale, the same construction with",
        "CIFAR-10's own full-resolution pixel mean and std.",
        "",
        "Scores: `holds` = claims holding out of 8; `about` = sum of |gap - claimed| over the four 'about e^c'",
        "claims; `distance` = sum of |gap - claimed| over the seven numeric claims (a 'more than e^c' overshoot counts,",
        "since the papers quote their figures' values rounded down). Rows are sorted by holds, then about.",
        "",
        f"Generated by `scripts/mnist_pipelines.py` in {minutes:.1f} min ({len(rows)} pipelines x 4 panels).",
        "",
    ]
    head = "| pipeline | " + " | ".join(c[0] for c in CLAIMS) + " | holds | about | distance |"
    lines += [head, "|" + "---|" * (len(CLAIMS) + 4),
              "| *paper* | " + " | ".join(f"{c[2]} {c[3]:g}" + (f" +- {c[4]:g}" if c[2] == "~" else "")
                                          for c in CLAIMS) + " | 8 | 0 | 0 |"]
    for n, m, ok, about, dist in rows:
        m = [(v + 0.0 if abs(v) >= 0.005 else 0.0, se) for v, se in m]  # no "-0.00"
        cells = [f"{v:.2f} +- {se:.2f}" + (" *" if o else "") if i < 7 else f"{v:.2f}" + (" *" if o else "")
                 for i, ((v, se), o) in enumerate(zip(m, ok))]
        lines.append(f"| `{n}` | " + " | ".join(cells) + f" | {sum(ok)} | {about:.2f} | {dist:.2f} |")
    best = rows[0]
    lines += ["", f"Most consistent: `{best[0]}` ({sum(best[2])}/8 claims, about-gap {best[3]:.2f} nats, distance "
              f"{best[4]:.2f} nats); next: `{rows[1][0]}` ({sum(rows[1][2])}/8, about-gap {rows[1][3]:.2f}, distance "
              f"{rows[1][4]:.2f}).", ""]
    lines += ["## Which pipelines reproduce which claim", ""]
    for i, c in enumerate(CLAIMS):
        yes = [r[0] for r in rows if r[2][i]]
        closest = min(rows, key=lambda r: abs(r[1][i][0] - c[3]))
        lines.append(f"- {c[0]} ({c[2]} {c[3]:g}): " + (", ".join(f"`{n}`" for n in yes) if yes else "**none**") +
                     f"; closest: `{closest[0]}` ({closest[1][i][0]:.2f})")
    lines += [
        "",
        "## Reading",
        "",
        "No single pipeline reproduces both papers. The CRT mnist claims ('more than e^10 / e^7') need inputs",
        "whose norms are far above those of [0,1] pixels: they hold with standardised or [0,255] pixels and fail",
        "with raw or centred [0,1] pixels. DERF's 'about e^5 in mnist' holds only with raw [0,1] pixels, 'about e^3'",
        "for ADERF only with centred [0,1] pixels, and its cifar10 and mnist/cifar10 SDERF gains are reproduced by no",
        "pipeline. [0,255] pixels satisfy the CRT inequalities by absurd margins and overshoot every DERF value, so",
        "their 'holds' are not evidence. The recommended pipeline (first row) is the best compromise by the scores",
        "above, offered as `kestrel reproduce crt-fig2|derf-fig2 --protocol <name>`; the default protocol `kestrel`",
        "stays raw/centred/standardised pixels with area resize.",
        "",
    ]
    with open(a.out, "w") as f:
        f.write("\n".join(lines))
    print(f"wrote {a.out} in {minutes:.1f} min", file=sys.stderr)


if __name__ == "__main__":
    main()
