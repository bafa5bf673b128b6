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
    """

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
        # kestrel's points are columns: d x n, scaled so that kestrel's kernel is the one with this gamma.
        return np.asfortranarray(X.T * np.sqrt(2.0 * self.gamma))

    def fit(self, X, y=None):
        """Fits the estimator's parameters on the rows of X and draws its random objects."""
        self._check_params()
        X = self._validate_data(X, dtype=np.float64)
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
        return self

    def transform(self, X):
        """Phi(X): n_samples x n_features_out_, with Phi(X) Phi(Y)^T an unbiased estimate of the kernel matrix."""
        check_is_fitted(self, ("estimator_", "draw_"))
        X = self._validate_data(X, dtype=np.float64, reset=False)
        return self.estimator_.feature_map(self.draw_, self._points(X), "query", self.kernel)

    def _more_tags(self):
        return {"preserves_dtype": [np.float64]}
