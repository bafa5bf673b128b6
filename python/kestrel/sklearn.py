"""scikit-learn transformers over kestrel's random features. Rows are samples here, as everywhere in scikit-learn.

RandomFeatures(estimator=None, n_features=128, kernel="gaussian", gamma=0.5, sampler="iid", random_state=None)
fits the estimator's parameters on the training rows (OPRF's rho*, SDERF's matrices, DARK's Sigma*, ...: kestrel.fit
on the rows as both sets), draws its random objects once, and transforms X into features Phi(X) whose inner products
Phi(x) . Phi(y) are an unbiased estimate of the kernel
    "gaussian": exp(-gamma |x - y|^2)     (the kernel of scikit-learn's RBFSampler with the same gamma)
    "softmax":  exp(2 gamma x . y)
(kestrel's kernels at the points scaled by sqrt(2 gamma)). One map serves both sides of the inner product, so the
estimator's query and key maps must agree: fit refuses estimators whose maps differ (ADERF, the hybrids, complex
features) and says which ones to use instead.
"""
import numbers
import warnings

import numpy as np
from sklearn.base import BaseEstimator, ClassNamePrefixFeaturesOutMixin, TransformerMixin
from sklearn.utils import check_random_state
from sklearn.utils.validation import check_is_fitted

from . import _kestrel

__all__ = ["RandomFeatures"]

_SAMPLERS = ("iid", "orthogonal", "structured", "halton")


class RandomFeatures(ClassNamePrefixFeaturesOutMixin, TransformerMixin, BaseEstimator):
    """Random features of a kestrel estimator fitted to the data (see the module docstring).

    Parameters
    ----------
    estimator : str, a kestrel estimator name (kestrel.estimators()); None: kestrel.default_estimator() (OPRF).
    n_features : int, the budget of real feature columns (the draws are kestrel.draws_for_budget(estimator, n)).
    kernel : "gaussian" or "softmax".
    gamma : float > 0, the kernel's scale (as RBFSampler's gamma for the Gaussian kernel).
    sampler : "iid", "orthogonal", "simplex", "structured" or "halton": how the projections are drawn.
    random_state : int, RandomState or None: the draw's seed (an int gives the same features in every run).

    Attributes
    ----------
    estimator_ : the fitted kestrel.Estimator (pickles with its parameters).
    draw_ : the kestrel.Draw of the random objects.
    n_features_in_ : the input dimension d.
    n_features_out_ : the number of output columns.
    seed_ : the seed the draw came from.
    expected_relative_error_ : {"median", "p95", "pairs"}: the exact relative error sqrt(Var)/K of the kernel estimate
        Phi(x) . Phi(y) at these n_features, over the pairs of a seeded sample of up to 64 fitted rows (None for
        estimators without an exact variance). fit warns (UserWarning) when its p95 exceeds `max_relative_error`.
    degenerate_features_ : the share of feature entries of the sampled rows that are exactly 0 or not finite
        (underflow or overflow); fit warns when it exceeds `max_degenerate_share`.
    """

    #: fit warns above these (class attributes; set them on an instance to change them). A relative error of 10 means
    #: the estimate's standard deviation is 10 times the kernel value at the 95th percentile of the sampled pairs (far
    #: pairs have small kernel values and relative errors above 1 are common; 10 is where the estimate is noise).
    max_relative_error = 10.0
    max_degenerate_share = 0.01

    def __init__(self, estimator=None, n_features=128, kernel="gaussian", gamma=0.5, sampler="iid",
                 random_state=None):
        self.estimator = estimator
        self.n_features = n_features
        self.kernel = kernel
        self.gamma = gamma
        self.sampler = sampler
        self.random_state = random_state

    def _name(self):
        return _kestrel.default_estimator() if self.estimator is None else self.estimator

    def _check_params(self):
        if self._name() not in _kestrel.estimators():
            raise ValueError(f"estimator must be None or one of {', '.join(_kestrel.estimators())}; "
                             f"got {self.estimator!r}")
        if not isinstance(self.n_features, numbers.Integral) or isinstance(self.n_features, bool) \
                or self.n_features < 1:
            raise ValueError(f"n_features must be an integer >= 1; got {self.n_features!r}")
        if self.kernel not in ("gaussian", "softmax"):
            raise ValueError(f"kernel must be 'gaussian' or 'softmax'; got {self.kernel!r}")
        if not isinstance(self.gamma, numbers.Real) or not np.isfinite(self.gamma) or self.gamma <= 0:
            raise ValueError(f"gamma must be a finite number > 0; got {self.gamma!r}")
        if self.sampler not in _SAMPLERS:
            raise ValueError(f"sampler must be one of {', '.join(_SAMPLERS)}; got {self.sampler!r}")

    def _points(self, X):
        # kestrel's points are columns: d x n, scaled so that kestrel's kernel is the one with this gamma. kestrel
        # computes in float64 whatever the input's precision.
        return np.asfortranarray(X.T.astype(np.float64) * np.sqrt(2.0 * self.gamma))

    def fit(self, X, y=None):
        """Fits the estimator's parameters on the rows of X and draws its random objects."""
        self._check_params()
        X = self._validate_data(X, dtype=[np.float64, np.float32])
        P = self._points(X)
        estimator = _kestrel.fit(self._name(), P, P, layout="columns")
        draws = max(1, _kestrel.draws_for_budget(self._name(), int(self.n_features)))
        seed = int(check_random_state(self.random_state).randint(np.iinfo(np.int32).max))
        draw = estimator.draw(draws, seed, self.sampler)
        probe = P[:, : min(P.shape[1], 16)]
        q = estimator.feature_map(draw, probe, "query", self.kernel)
        k = estimator.feature_map(draw, probe, "key", self.kernel)
        if q.shape != k.shape or not np.allclose(q, k, rtol=1e-12, atol=1e-300):
            raise ValueError(
                f"estimator {self._name()!r} has different query and key feature maps (asymmetric or complex "
                "features), so no single map Phi gives Phi(x) . Phi(y) = K(x, y); use one whose maps agree, such as "
                f"the default {_kestrel.default_estimator()!r}")
        self.estimator_, self.draw_, self.seed_ = estimator, draw, seed
        self.n_features_out_ = q.shape[1]
        self._n_features_out = self.n_features_out_  # for get_feature_names_out
        sample = P[:, np.random.default_rng(seed).permutation(P.shape[1])[: min(P.shape[1], 64)]]
        self.expected_relative_error_ = _expected_relative_error(estimator, sample, draws)
        feats = estimator.feature_map(draw, sample, "query", self.kernel)
        self.degenerate_features_ = float(np.mean((feats == 0) | ~np.isfinite(feats))) if feats.size else 0.0
        self._warn_if_noisy()
        return self

    def _warn_if_noisy(self):
        err, bad = self.expected_relative_error_, self.degenerate_features_
        if bad > self.max_degenerate_share:
            warnings.warn(
                f"RandomFeatures({self._name()!r}): {100 * bad:.0f}% of the feature values of the fitted rows are "
                "exactly 0 or not finite (the exponentials underflow or overflow), so the kernel estimate is "
                "degenerate (e.g. a kernel diagonal of 0 instead of 1): scale the inputs down (or lower gamma) so that "
                "gamma |x|^2 is of order 1, or use another estimator", UserWarning, stacklevel=3)
        elif err is not None and err["p95"] > self.max_relative_error:
            warnings.warn(
                f"RandomFeatures({self._name()!r}): the expected relative error of the kernel estimate at "
                f"n_features={self.n_features} is {err['p95']:.3g} at the 95th percentile of the fitted pairs "
                f"(median {err['median']:.3g}; above max_relative_error={self.max_relative_error:g}): use more "
                "features, scale the inputs down (or lower gamma), or another estimator (kestrel advise ranks them)",
                UserWarning, stacklevel=3)

    def transform(self, X):
        """Phi(X): n_samples x n_features_out_, with Phi(X) Phi(Y)^T an unbiased estimate of the kernel matrix; of X's
        dtype when that is float32 (computed in float64), else float64."""
        check_is_fitted(self, ("estimator_", "draw_"))
        X = self._validate_data(X, dtype=[np.float64, np.float32], reset=False)
        Z = self.estimator_.feature_map(self.draw_, self._points(X), "query", self.kernel)
        return Z.astype(X.dtype, copy=False)  # float32 in, float32 out (computed in float64), as RBFSampler

    def _more_tags(self):
        return {"preserves_dtype": [np.float64, np.float32]}


def _expected_relative_error(estimator, S, draws):
    """Median and 95th percentile over the pairs of the columns of S of sqrt(Var/K^2) at `draws` features, from the
    estimator's exact variance (kestrel.Estimator.log_var_over_k2); None where it has none."""
    try:
        lv = np.asarray(estimator.log_var_over_k2(S, S, features=int(draws)))
    except (ValueError, RuntimeError):
        return None
    with np.errstate(over="ignore"):
        rel = np.exp(0.5 * lv.ravel())  # exact pairs (-inf) give 0, beyond e^709 inf
    rel = np.where(np.isnan(rel), np.inf, rel)
    return {"median": float(np.quantile(rel, 0.5, method="higher")), "p95": float(np.quantile(rel, 0.95, method="higher")), "pairs": int(rel.size)}

