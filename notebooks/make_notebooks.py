#!/usr/bin/python3
"""Writes the notebooks in this folder from the cell sources below (run it after editing them).
Each notebook reads kestrel's HDF5 results from $KESTREL_RESULTS (default ../results)."""
import nbformat as nbf

SETUP = """import json, os
import h5py, numpy as np
import matplotlib.pyplot as plt
R = os.environ.get("KESTREL_RESULTS", "../results")

def text(v):
    return v.decode() if isinstance(v, bytes) else str(v)

def claims(name):
    with open(f"{R}/{name}.claims.json") as f:
        for c in json.load(f)["claims"]:
            print(f"[{'ok' if c['holds'] else 'differs'}] {c['statement']}: measured {c['measured']:.3f}, "
                  f"claimed {c['relation']} {c['claimed']:.3g}  ({c['settings']}) {c['note']}")"""

NOTEBOOKS = {
    "crt.ipynb": [
        ("md", "# Chefs' Random Tables (CRT): variance of TrigRF, PosRF, GERF, OPRF, PoisRF, GeomRF\n"
               "Results of `kestrel reproduce crt-fig1 crt-fig2 orf` (HDF5 layout: README, experiments/README.md)."),
        ("code", SETUP),
        ("md", "## Fig. 1 (right): log(Var OPRF / Var PosRF) against |x + y|^2"),
        ("code", """with h5py.File(f"{R}/crt-fig1.h5") as f:
    print(json.loads(text(f.attrs["provenance"]))["git_revision"])
    S, dims, u = f["sum_sq"][:], f["dims"][:], f["utility"][:]
for d, row in zip(dims, u):
    plt.plot(S, row, label=f"d={int(d)}")
plt.xlabel("|x+y|^2"); plt.ylabel("log Var OPRF / Var PosRF"); plt.legend(); plt.show()
claims("crt-fig1")"""),
        ("md", "## Fig. 2: mean log-variance against sigma (Gaussian kernel, real estimators' variance halved)"),
        ("code", """with h5py.File(f"{R}/crt-fig2.h5") as f:
    panels = text(f.attrs["panels"]).split()
    fig, axes = plt.subplots(1, len(panels), figsize=(3 * len(panels), 3))
    for ax, p in zip(axes, panels):
        for est in f[p]:
            g = f[p][est]
            ax.plot(g["sigma"][:], g["mean_log_var"][:], label=est)
        ax.set_title(p)
    axes[0].legend(fontsize=6); plt.show()
    at1 = {est: f["normal"][est]["mean_log_var"][-1] for est in f["normal"]}
print("normal, sigma = 1:", {k: round(float(v), 2) for k, v in at1.items()})
claims("crt-fig2")"""),
        ("md", "## Thm 4.1: orthogonal vs iid projections"),
        ("code", """with h5py.File(f"{R}/orf.h5") as f:
    for est in text(f.attrs["estimators"]).split():
        g = f[est]
        plt.errorbar(g["dims"][:], g["mean_log_ratio"][:], yerr=2 * g["se_mean_log_ratio"][:], label=est)
plt.xscale("log", base=2); plt.axhline(0, color="gray"); plt.xlabel("d"); plt.ylabel("log Var_ort / Var_iid")
plt.legend(); plt.show()
claims("orf")"""),
    ],
    "derf.ipynb": [
        ("md", "# Dense-Exponential Random Features (DERF): log relative variance of GERF, ADERF, SDERF\n"
               "Results of `kestrel reproduce derf-fig2`."),
        ("code", SETUP),
        ("code", """with h5py.File(f"{R}/derf-fig2.h5") as f:
    panels = text(f.attrs["panels"]).split()
    fig, axes = plt.subplots(1, len(panels), figsize=(3 * len(panels), 3))
    for ax, p in zip(axes, panels):
        for est in ["trig-real", "pos", "oprf", "aderf", "sderf"]:
            g = f[p][est]
            ax.plot(g["sigma"][:], g["mean_log_rel_var"][:], label=est)
        ax.set_title(p)
    axes[0].legend(fontsize=6); plt.show()
    gains = {p: float(f[p]["oprf"]["mean_log_rel_var"][-1] - f[p]["sderf"]["mean_log_rel_var"][-1]) for p in panels}
print("log gain of SDERF over GERF at sigma = 1:", {k: round(v, 2) for k, v in gains.items()})
claims("derf-fig2")"""),
    ],
    "hrf.ipynb": [
        ("md", "# Hybrid Random Features (HRF): MSE over angles and lengths, pointwise estimation, QMC baselines,"
               " clustered data\nResults of `kestrel reproduce hrf-fig1 hrf-fig2 hrf-table1 hrf-fig6`."),
        ("code", SETUP),
        ("code", """with h5py.File(f"{R}/hrf-fig1.h5") as f:
    g = f["thm35"]
    for r, e, b, c in zip(g["r"][:], g["max_rel_error"][:], g["bound_printed"][:], g["bound_corrected"][:]):
        print(f"r = {r}: max relative error {e:.4g}, Thm 3.5 as printed {b:.4g}, corrected {c:.4g}")
claims("hrf-fig1")"""),
        ("code", """with h5py.File(f"{R}/hrf-fig2.h5") as f:
    for r in text(f.attrs["lengths"]).split():
        g = f[f"r{r}"]
        for est in ["trig", "pos", "hrf-angular"]:
            plt.plot(g["theta"][:], g[est]["rel_error_exact"][:], label=f"{est} r={r}")
plt.xlabel("theta"); plt.ylabel("relative error (exact)"); plt.legend(fontsize=6); plt.show()
claims("hrf-fig2")"""),
        ("code", """with h5py.File(f"{R}/hrf-table1.h5") as f:
    methods = text(f.attrs["methods"]).split()
    for ds in ["wine", "boston"]:
        print(ds, dict(zip(methods, np.round(f[ds]["mse_mean_1e-3"][:], 3))))
claims("hrf-table1")
claims("hrf-fig6")"""),
    ],
    "dark.ipynb": [
        ("md", "# DARKFormer: importance-sampled PRFs for anisotropic queries and keys\n"
               "Results of `kestrel reproduce dark-aniso`."),
        ("code", SETUP),
        ("code", """with h5py.File(f"{R}/dark-aniso.h5") as f:
    for d in text(f.attrs["dims"]).split():
        g = f[f"d{d}"]
        k = g["kappa"][:]
        red = g["log_expected_var_isotropic"][:] - g["log_expected_var_optimal"][:]
        plt.semilogx(k, red, "o-", label=f"d = {d}")
plt.xlabel("condition number"); plt.ylabel("log E[Var](I) - log E[Var](Sigma*)"); plt.legend(); plt.show()
claims("dark-aniso")"""),
    ],
    # Path 2 of docs/own-estimator.md on MNIST: an estimator written in NumPy, certified, registered, compared.
    "own_estimator.ipynb": [
        ("md", "# Your own estimator in Python: simplex-coupled PosRF on MNIST\n"
               "Path 2 of `docs/own-estimator.md`: a new random-feature estimator written in NumPy (simplex-coupled "
               "directions, Reid et al. 2023), certified against kestrel's Monte Carlo simulator, registered by "
               "name, and compared with the built-in iid and orthogonal PosRF and OPRF on 8x8 MNIST images. "
               "No result files needed."),
        ("code", """import numpy as np, matplotlib.pyplot as plt
import kestrel, kestrel.custom   # PYTHONPATH=build/python, or the installed package

def haar_rotation(d, rng):
    q, r = np.linalg.qr(rng.standard_normal((d, d)))
    return q * np.sign(np.diag(r))          # signs fixed: plain QR is not Haar

class SimplexPosRF(kestrel.custom.Estimator):
    \"\"\"PosRF exp(w^T x - |x|^2/2); the w come in blocks of d: a randomly rotated regular simplex (pairwise cosine
    -1/(d-1)) times iid chi(d) norms. Each w is N(0, I): unbiased; coupled, so no closed-form variance here.\"\"\"
    name, label, positive = "simplex-pos", "PosRF (simplex)", True

    def draw(self, M, rng):
        d = self.d
        simplex = np.eye(d) - 1.0 / d
        simplex /= np.linalg.norm(simplex, axis=0)
        blocks = [haar_rotation(d, rng) @ simplex * np.sqrt(rng.chisquare(d, size=d)) for _ in range(-(-M // d))]
        return np.hstack(blocks)[:, :M]

    def features(self, omega, X, side):
        return np.exp(omega.T @ X - 0.5 * np.sum(X * X, axis=0)).T"""),
        ("md", "## 1. Certify: unbiased? (4.5-SE rule per entry, false-failure rate in the report)"),
        ("code", """rng = np.random.default_rng(0)
X0, Y0 = 0.3 * rng.standard_normal((6, 4)), 0.3 * rng.standard_normal((6, 4))
report = kestrel.custom.certify(SimplexPosRF, X0, Y0, reps=5000, features=(6,))
print(report)
assert report.passed"""),
        ("md", "## 2. Register and compare on MNIST\n"
               "Mean over 32 x 32 pairs of the log Monte Carlo MSE of the M = 64 feature kernel estimate (d = 64, "
               "centred 8x8 MNIST images times sigma), next to the built-in estimators with iid and orthogonal "
               "projections."),
        ("code", """kestrel.custom.register(SimplexPosRF, replace=True)

def mean_log_mse(est, X, Y, sampler="iid"):
    m = kestrel.simulate(est, X, Y, reps=200, features=64, seed=5, sampler=sampler)["kernel"]
    return float(np.mean(np.log(m["variance"] + (m["mean"] - m["exact"]) ** 2)))

sigmas, table = (0.1, 0.25, 0.5), {}
for sigma in sigmas:
    X, Y = kestrel.draw_regime("mnist", 64, 32, sigma, seed=1, preprocess="center")
    pos, oprf, simplex = (kestrel.fit(n, X, Y, layout="columns") for n in ("pos", "oprf", "simplex-pos"))
    table[sigma] = {"PosRF iid": mean_log_mse(pos, X, Y), "PosRF orthogonal": mean_log_mse(pos, X, Y, "orthogonal"),
                    "PosRF simplex": mean_log_mse(simplex, X, Y), "OPRF iid": mean_log_mse(oprf, X, Y),
                    "OPRF orthogonal": mean_log_mse(oprf, X, Y, "orthogonal")}
for name in table[sigmas[0]]:
    plt.plot(sigmas, [table[s][name] for s in sigmas], "o-", label=name)
    print(f"{name:>17}: " + "  ".join(f"{table[s][name]:8.3f}" for s in sigmas))
plt.xlabel("sigma"); plt.ylabel("mean log MSE, M = 64"); plt.legend(); plt.show()"""),
        ("md", "The simplex blocks' directions sum to (nearly) zero, so the part of the estimate linear in w almost "
               "cancels within a block: at small sigma, where that part dominates the variance, the gain over iid "
               "and orthogonal directions is largest. `kestrel.variance_study(estimators=[..., \"simplex-pos\"])` "
               "and `kestrel.sweep` take the registered name too (empirical variance, marked as such)."),
    ],
    # Calls the library through the Python module (python/; run_notebooks.sh puts build/python on PYTHONPATH).
    "bindings.ipynb": [
        ("md", "# A new estimator experiment through the Python module: OPRF vs SDERF on Fashion-MNIST\n"
               "Exact log relative variance log(Var/K) of one feature (softmax kernel) over all 256 x 256 pairs of "
               "two disjoint sets of 8x8 Fashion-MNIST images (raw pixels in [0,1], times sigma), each estimator "
               "fitted on the pair of sets; then a Monte Carlo check at one sigma. No result files needed."),
        ("code", """import numpy as np, matplotlib.pyplot as plt
import kestrel   # PYTHONPATH=build/python
sigmas = np.round(np.linspace(0.1, 1.0, 10), 2)
rel = {name: [] for name in ("oprf", "sderf")}
for s in sigmas:
    X, Y = kestrel.draw_regime("fashion-mnist", 64, 256, s, seed=1)   # d x L each, points are columns
    for name in rel:
        rel[name].append(kestrel.fit(name, X, Y).summarize_variance(X, Y)["mean_log_rel_var"])
for name, v in rel.items():
    plt.plot(sigmas, v, "o-", label=name)
plt.xlabel("sigma"); plt.ylabel("mean log(Var/K)"); plt.title("fashion-mnist, d = 64, L = 256"); plt.legend(); plt.show()
for s, a, b in zip(sigmas, rel["oprf"], rel["sderf"]):
    print(f"sigma = {s:4.2f}: OPRF {a:8.3f}  SDERF {b:8.3f}  gain {a - b:6.3f}")"""),
        ("md", "Monte Carlo check on the first 16 points of each set (R = 2000 draws of one feature): mean log of the "
               "empirical variance next to the exact one, and the share of the 256 entries whose empirical variance "
               "is within 3 standard errors of the exact one. OPRF's feature values are heavy-tailed: as sigma grows "
               "the rare draws that carry its variance are missed and the sample variance falls far below the exact one; "
               "SDERF's are much lighter."),
        ("code", """for s in (0.2, 0.5):
    X, Y = kestrel.draw_regime("fashion-mnist", 64, 256, s, seed=1)
    X, Y = X[:, :16], Y[:, :16]
    for name in rel:
        e = kestrel.fit(name, X, Y, layout="columns")  # d = 64 > L = 16 on purpose
        mc = kestrel.simulate(e, X, Y, reps=2000, seed=2)["kernel"]
        exact = e.log_variance(X, Y)
        within = np.mean(np.abs(mc["variance"] - np.exp(exact)) < 3 * mc["se_variance"])
        print(f"sigma = {s}, {name:5}: MC mean log Var {np.log(mc['variance']).mean():7.3f}, exact {exact.mean():7.3f}, "
              f"within 3 se: {100 * within:.0f}%")"""),
    ],
    # kestrel.advise on the user's own Q, K, V: MNIST and CIFAR-10 patch tokens, anisotropic Gaussian Q and K.
    "advise.ipynb": [
        ("md", "# Which estimator, how many features, which number format: `kestrel.advise`\n"
               "`kestrel.advise(Q, K, V)` takes queries, keys and values with one token per row, fits every "
               "estimator family on them, and predicts the relative error of the random-feature attention output "
               "rows against the number of features M (95th percentile and median over the query rows; simulated on "
               "the inputs with nested draws, each point with its standard error). It reads "
               "off the M that reaches a target error (here 10%), checks each prediction with `validate` Monte Carlo "
               "draws at that M, measures the features' exponents against fp32, bf16 and fp16 (raw and with the "
               "stabiliser), and says what to use. Three inputs below: patch tokens of MNIST and of CIFAR-10 images, "
               "and Gaussian queries and keys with a strongly anisotropic covariance. No result files needed; "
               "the images come from `kestrel.default_data_dir()` (`scripts/install-data.sh`)."),
        ("code", """import time
import numpy as np, pandas as pd, matplotlib.pyplot as plt
import kestrel   # PYTHONPATH=build/python
t_start = time.time()
ESTIMATORS = "pos,oprf,aderf,sderf,dark"   # a subset of kestrel.estimators(), to keep the validation short

def patch_tokens(images, side, p=4):
    \"\"\"images: side*side x n (columns, row-major pixels) -> the non-blank p x p patches as rows, each
    standardised to mean 0 and standard deviation 1 (as a LayerNorm without gain would).\"\"\"
    n = images.shape[1]
    t = images.T.reshape(n, side // p, p, side // p, p).transpose(0, 1, 3, 2, 4).reshape(-1, p * p)
    t = t[t.std(axis=1) > 0.05]
    return (t - t.mean(axis=1, keepdims=True)) / t.std(axis=1, keepdims=True)

def attention_inputs(tokens, L=256, c=0.5, seed=0):
    \"\"\"Self-attention of L sampled tokens: Q = c T Wq, K = c T Wk, V = T Wv with Gaussian W (variance 1/d).\"\"\"
    rng = np.random.default_rng(seed)
    T = tokens[rng.choice(len(tokens), L, replace=False)]
    d = T.shape[1]
    Wq, Wk, Wv = (rng.standard_normal((d, d)) / np.sqrt(d) for _ in range(3))
    return c * T @ Wq, c * T @ Wk, T @ Wv

def table(r):
    \"\"\"One line per evaluated estimator: M for the target, predicted 95th percentile at that M (at the budget where
    the target is not reached), the measured one where validate ran, and the fp16 verdicts.\"\"\"
    lines = []
    for row in r["rows"]:
        if row["status"] != "ok":
            continue
        v, f16 = row.get("validation", {}), row["range"]["formats"]["fp16"]
        lines.append({"estimator": row["estimator"], "sampler": row["sampler"],
                      "M for target": row["m_for_target_p95"] or f"> {r['options']['budget']}",
                      "predicted p95": round(row["error_at_m_p95"], 4),
                      "measured p95": round(v.get("measured_p95", np.nan), 4),
                      "se": round(v.get("measured_p95_se", np.nan), 4), "at M": v.get("m"),
                      "within target": v.get("within_target"), "fp16 raw": f16["raw"],
                      "fp16 stabilised": f16["stabilised"]})
    print(pd.DataFrame(lines).to_string(index=False))

def skipped(r):
    \"\"\"The rows advise could not evaluate, grouped by reason.\"\"\"
    why = {}
    for row in r["rows"]:
        if row["status"] != "ok":
            why.setdefault(f"{row['status']}: {row['reason']}", []).append(f"{row['estimator']} ({row['sampler']})")
    for reason, who in why.items():
        print(", ".join(who), "--", reason)

def plot(r, title):
    \"\"\"Predicted error against M per sampler (95th percentile solid with +-2 SE, median dotted), the target, and
    the measured 95th percentile with 2 standard errors where validate ran (kestrel.advice.plot_report).\"\"\"
    kestrel.advice.plot_report(r, title=title); plt.show()

def report(r, title):
    print(r["quantity"])
    print("recommendation:", r["recommendation"])
    table(r)
    skipped(r)
    plot(r, title)"""),
        ("md", "## 0. Predicted against simulated\n"
               "advise simulates the error on your own points with nested feature draws (each draw of M features holds "
               "a draw of every smaller M in its first columns), so one pass gives the whole curve with its standard "
               "error. Here the curve for one input (Q, K: 192 tokens, d = 16, entries N(0, 0.36); V: N(1, 1), 4 "
               "columns) and PosRF, OPRF and SDERF with iid, orthogonal and simplex projections, against points "
               "measured with 100 independent draws at the M advise names for targets of 40%, 20%, 10% and 5% "
               "(`kestrel.advice.check_points`: fresh draws through the production attention code)."),
        ("code", """r = np.random.default_rng(0)
Q, K, V = 0.6 * r.normal(size=(192, 16)), 0.6 * r.normal(size=(192, 16)), 1 + r.normal(size=(192, 4))
opts = dict(estimators="pos,oprf,sderf", samplers="iid,orthogonal,simplex", budget=2048, seed=0, no_timing=True)
curve = kestrel.advise(Q, K, V, target=0.1, full_curve=True, **opts)  # the whole curve, not only 4x past M
points = kestrel.advice.check_points(Q, K, V, validate=100, **opts)
print(pd.DataFrame(points).round(4).to_string(index=False))
plot(curve, "predicted (lines, +-2 SE) against measured (open markers, 2 SE)")"""),
        ("md", "## 1. MNIST patch tokens\n"
               "256 tokens: non-blank 4 x 4 patches (d = 16) of 30 MNIST training images, loaded through "
               "`kestrel.draw_regime` at full resolution (d = 784), each patch standardised. Queries, keys and values are "
               "random projections of the same tokens, as in a self-attention layer; queries and keys are scaled by "
               "c = 0.5, so the logits q.k / sqrt(d) are divided by 4 (a softmax temperature; change `c` to see the "
               "advice move). `validate=50` measures each estimator's error with 50 independent feature draws at its "
               "M. In the table, 'predicted p95' and 'measured p95' are the 95th percentile over the query rows of "
               "the relative error of an output row; 'within target' says whether the measured value minus 3 standard "
               "errors is at most the target. An estimator that does not reach the target within the budget has no M to "
               "check and is not drawn. Orthogonal projections are simulated like iid ones."),
        ("code", """images, _ = kestrel.draw_regime("mnist", 28 * 28, 30, 1.0, seed=1)   # 30 images as columns, pixels in [0, 1]
Q, K, V = attention_inputs(patch_tokens(images, 28), L=256, c=0.5)
print(f"Q {Q.shape}, K {K.shape}, V {V.shape}; logits q.k/sqrt(d): sd {np.std(Q @ K.T / np.sqrt(Q.shape[1])):.3f}")
mnist = kestrel.advise(Q, K, V, estimators=ESTIMATORS, target=0.1, budget=4096, validate=50, seed=0)
report(mnist, "MNIST 4x4 patches, d = 16, L = 256")"""),
        ("md", "## 2. CIFAR-10 patch tokens\n"
               "The same construction on 10 CIFAR-10 training images, converted to grayscale by the package "
               "(BT.601 luma) at full resolution (32 x 32): non-blank 4 x 4 patches, 256 tokens, c = 0.5."),
        ("code", """images, _ = kestrel.draw_regime("cifar10", 32 * 32, 10, 1.0, seed=1)
Q, K, V = attention_inputs(patch_tokens(images, 32), L=256, c=0.5)
print(f"Q {Q.shape}, K {K.shape}, V {V.shape}; logits q.k/sqrt(d): sd {np.std(Q @ K.T / np.sqrt(Q.shape[1])):.3f}")
cifar = kestrel.advise(Q, K, V, estimators=ESTIMATORS, target=0.1, budget=4096, validate=50, seed=0)
report(cifar, "CIFAR-10 grayscale 4x4 patches, d = 16, L = 256")"""),
        ("md", "## 3. Anisotropic queries and keys (DARK's setting)\n"
               "Queries and keys drawn independently from N(0, sigma^2 Lambda), d = 32, with Lambda's eigenvalues "
               "decaying geometrically from the largest to the smallest by a factor of 100 (mean eigenvalue 1; "
               "`kestrel.draw_regime(\"aniso\", ...)`), sigma = 0.6, 256 of each. Without V, advise predicts the "
               "relative error of the row normalisers D_i = sum_j exp(q_i.k_j / sqrt(d)) (exact, not the delta "
               "method). pos and oprf draw isotropic projections; aderf and sderf fit a linear map of the points, "
               "and dark an importance-sampling proposal, to the data."),
        ("code", """X, Y = kestrel.draw_regime("aniso", 32, 256, 0.6, seed=1, spectrum="geometric:100")   # d x L each
Q, K = X.T, Y.T
print(f"Q {Q.shape}, K {K.shape}; |q|: median {np.median(np.linalg.norm(Q, axis=1)):.2f}, "
      f"max {np.linalg.norm(Q, axis=1).max():.2f}")
aniso = kestrel.advise(Q, K, None, estimators=ESTIMATORS, target=0.1, budget=4096, validate=50, seed=0)
report(aniso, "N(0, 0.36 Lambda), geometric spectrum, condition 100, d = 32, L = 256")"""),
        ("md", "### The same covariance with large norms: number formats\n"
               "sigma = 2 instead of 0.6 (norms 3.3 times larger), no validation. For each estimator the table "
               "shows the largest natural-log exponents of one draw of features at the budget (query features, key "
               "features, the key sums every output row divides by) and the verdicts for fp16 and bf16 without "
               "the stabiliser (raw) and with it (a per-query-row maximum and one key maximum subtracted in log "
               "space), next to the predicted error at the budget. The raw verdict also checks the exact row "
               "normalisers D_i, which the raw products of query features and key sums must hold, so the exponent "
               "it names can exceed the columns. Rows advise could not fit are listed with the reason."),
        ("code", """X, Y = kestrel.draw_regime("aniso", 32, 256, 2.0, seed=1, spectrum="geometric:100")
Q, K = X.T, Y.T
print(f"|q|: median {np.median(np.linalg.norm(Q, axis=1)):.2f}, max {np.linalg.norm(Q, axis=1).max():.2f}")
large = kestrel.advise(Q, K, None, estimators=ESTIMATORS, target=0.1, budget=4096, seed=0)
print("recommendation:", large["recommendation"])
lines = []
for row in large["rows"]:
    if row["status"] != "ok" or row["sampler"] != "iid":
        continue
    g, f = row["range"], row["range"]["formats"]
    c = row["curve"]  # a simulated curve may stop past the answer (see --full-curve): its last point
    lines.append({"estimator": row["estimator"], "p95 error (at M)": f"{c['p95'][-1]:.3g} ({c['m'][-1]:.0f})",
                  "max log query feature": round(g["query_max"], 1), "max log key feature": round(g["key_max"], 1),
                  "max log key sum": round(g["key_sum_max"], 1), "fp16 raw": f["fp16"]["raw"],
                  "fp16 stabilised": f["fp16"]["stabilised"], "bf16 raw": f["bf16"]["raw"],
                  "bf16 stabilised": f["bf16"]["stabilised"]})
print(pd.DataFrame(lines).to_string(index=False))
skipped(large)
print(f"notebook ran in {time.time() - t_start:.0f} s")"""),
    ],
}

for name, cells in NOTEBOOKS.items():
    nb = nbf.v4.new_notebook()
    nb.cells = [nbf.v4.new_markdown_cell(s) if k == "md" else nbf.v4.new_code_cell(s) for k, s in cells]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbf.write(nb, name)
