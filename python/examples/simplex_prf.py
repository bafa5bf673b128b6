# Simplex-coupled PosRF (Reid et al. 2023, "Simplex random features") written in NumPy as a kestrel.custom estimator:
# certified unbiased, then its empirical variance compared with iid/orthogonal PosRF and OPRF on MNIST.
# Run: PYTHONPATH=build/python /usr/bin/python3 python/examples/simplex_prf.py [--quick]
import sys

import numpy as np

import kestrel
import kestrel.custom


def haar_rotation(d, rng):
    """A Haar-random orthogonal matrix: QR of a Gaussian with the signs fixed (plain QR is not Haar, GUIDE)."""
    q, r = np.linalg.qr(rng.standard_normal((d, d)))
    return q * np.sign(np.diag(r))


class SimplexPosRF(kestrel.custom.Estimator):
    """PosRF features exp(w^T x - |x|^2/2) whose w come in blocks of d: the d unit vertices of a regular simplex
    centred at 0 (pairwise inner product -1/(d-1)), randomly rotated, times iid chi(d) norms. Each w is marginally
    N(0, I), so the estimate is unbiased; the coupling changes the variance, which has no closed form here (the iid
    PosRF formula does not apply), so log_var_over_k2 is left out and kestrel estimates the variance by Monte Carlo."""

    name, label, positive = "simplex-pos", "PosRF (simplex)", True
    description = "simplex-coupled PosRF (Reid et al. 2023), written in NumPy"

    def draw(self, M, rng):
        d = self.d
        simplex = np.eye(d) - 1.0 / d if d > 1 else np.ones((1, 1))  # columns e_i - 1/d: cosines -1/(d-1)
        simplex /= np.linalg.norm(simplex, axis=0)
        blocks = [haar_rotation(d, rng) @ simplex * np.sqrt(rng.chisquare(d, size=d)) for _ in range(-(-M // d))]
        return np.hstack(blocks)[:, :M]

    def features(self, omega, X, side):
        return np.exp(omega.T @ X - 0.5 * np.sum(X * X, axis=0)).T


def mean_log_mse(est, X, Y, M, reps, sampler="iid", seed=5):
    """Mean over pairs of log of the Monte Carlo MSE of the M-feature kernel estimate."""
    m = kestrel.simulate(est, X, Y, reps=reps, features=M, seed=seed, sampler=sampler)["kernel"]
    return float(np.mean(np.log(m["variance"] + (m["mean"] - m["exact"]) ** 2)))


if __name__ == "__main__":
    quick = "--quick" in sys.argv
    rng = np.random.default_rng(0)
    print(kestrel.custom.certify(SimplexPosRF, 0.3 * rng.standard_normal((3, 4)), 0.3 * rng.standard_normal((3, 4)),
                                 reps=5000 if quick else 20000))
    kestrel.custom.register(SimplexPosRF)
    d, L, M, reps = 64, 32 if quick else 64, 64, 200 if quick else 1000
    print(f"\nmean log MSE over {L}x{L} MNIST pairs (8x8, centred), M = {M}, {reps} draws per entry")
    print(f"{'sigma':>6} {'PosRF iid':>10} {'PosRF orth':>10} {'PosRF simplex':>13} {'OPRF iid':>10} {'OPRF orth':>10}")
    for sigma in (0.1, 0.25, 0.5):
        X, Y = kestrel.draw_regime("mnist", d, L, sigma, seed=1, preprocess="center")
        pos, oprf, simplex = (kestrel.fit(n, X, Y, layout="columns") for n in ("pos", "oprf", "simplex-pos"))
        row = [mean_log_mse(pos, X, Y, M, reps), mean_log_mse(pos, X, Y, M, reps, "orthogonal"),
               mean_log_mse(simplex, X, Y, M, reps), mean_log_mse(oprf, X, Y, M, reps),
               mean_log_mse(oprf, X, Y, M, reps, "orthogonal")]
        print(f"{sigma:>6} {row[0]:>10.3f} {row[1]:>10.3f} {row[2]:>13.3f} {row[3]:>10.3f} {row[4]:>10.3f}")
