"""Random-feature estimators written in NumPy (issue #16): subclass kestrel.custom.Estimator, certify it against the
exact kernel with the Monte Carlo simulator, register it and use it by name next to the built-in estimators.

    class MyPRF(kestrel.custom.Estimator):
        name = "my-pos"; label = "PosRF (mine)"; positive = True
        def draw(self, M, rng):              # numpy Generator seeded by kestrel -> omega, d x M
            return rng.standard_normal((self.d, M))
        def features(self, omega, X, side):  # X: d x L (points are columns), side "query"/"key" -> L x M
            return np.exp(omega.T @ X - 0.5 * (X * X).sum(0)).T
        def log_var_over_k2(self, X, Y):     # optional: exact log(Var/K^2) of ONE feature, Lx x Ly
            ...

    kestrel.custom.certify(MyPRF, X, Y)      # unbiased? exact variance right? -> printable report, .passed
    kestrel.custom.register(MyPRF)           # now kestrel.fit("my-pos", ...), variance_study(estimators=[...]), sweep,
                                             # classify(set, "my-pos"), attention_error(Q, K, V, "my-pos")

Features are f(omega_m, x_i) of the softmax kernel exp(x^T y), not divided by sqrt(M) (kestrel does that). The C++
adapter (python/bind_custom.cpp) calls these methods under the GIL, one call at a time, from kestrel's threads: draw()
gets a Generator seeded from kestrel's random stream for that draw, so results depend only on the seed and are
identical for any kestrel.set_threads(). An estimator without log_var_over_k2 gets an empirical variance in the
variance study (kestrel.variance_study rows with "variance": "empirical"; lib/analysis/variance_study.hpp).
The study's `sampler` option does not reach draw(): a Python estimator draws what its draw() draws. See
docs/own-estimator-python.md.
"""
import json as _json

import numpy as _np

from . import _kestrel

__all__ = ["Estimator", "Check", "Report", "certify", "register", "wrap", "registered", "K_SIGMAS"]

# The Monte Carlo rule of the C++ tests (tests/test_util.hpp): a check passes when |empirical - exact| < 4.5 standard
# errors; for a normal statistic P(|Z| > 4.5) = 6.8e-6 per check.
K_SIGMAS = 4.5
P_FALSE_FAILURE = 6.8e-6

_classes = {}  # registered name -> class (the C++ families hold only the name)


class Estimator:
    """Base class of an estimator written in NumPy. Class attributes: name (registry name), label (plots), description,
    positive (every feature >= 0), color/marker/line (plot style). Methods to write: draw, features, and optionally
    log_var_over_k2 (the exact log(Var/K^2) of one feature; leave it out when it is not known exactly, e.g. for coupled
    features). An estimator with fitted parameters overrides fit (a classmethod returning the fitted instance),
    __init__(d, **params) and params() (a JSON-able dict), so that cls(d, **est.params()) rebuilds it (pickling and
    kestrel.restore use that)."""

    name = None
    label = None
    description = ""
    positive = False
    color, marker, line = "k", "o", "-"
    log_var_over_k2 = None  # optional method (X, Y) -> Lx x Ly

    def __init__(self, d):
        self.d = int(d)

    @classmethod
    def fit(cls, X, Y):
        """The estimator fitted on the pair of sets X, Y (d x L each); by default cls(d)."""
        return cls(X.shape[0])

    def params(self):
        """Fitted parameters as a JSON-able dict: cls(d, **params()) rebuilds the estimator."""
        return {}

    def draw(self, M, rng):
        """M random objects omega (d x M) from the numpy Generator rng."""
        raise NotImplementedError(f"{type(self).__name__}.draw")

    def features(self, omega, X, side):
        """Features f(omega_m, x_i): L x M for points X (d x L), side 'query' or 'key'; not divided by sqrt(M)."""
        raise NotImplementedError(f"{type(self).__name__}.features")

    def _params_json(self):
        return _json.dumps(self.params(), default=lambda v: v.tolist() if hasattr(v, "tolist") else str(v))

    def __repr__(self):
        return f"<{type(self).__name__} {self.name} d={self.d}>"


def _check_class(cls):
    if not (isinstance(cls, type) and issubclass(cls, Estimator)):
        raise ValueError(f"expected a subclass of kestrel.custom.Estimator, got {cls!r}")
    if not isinstance(cls.name, str) or not cls.name or any(c in cls.name for c in ", \t\n"):
        raise ValueError(f"{cls.__name__}.name must be a non-empty string without commas or spaces, got {cls.name!r}")
    for method in ("draw", "features"):
        if getattr(cls, method) is getattr(Estimator, method):
            raise ValueError(f"estimator '{cls.name}': {cls.__name__} must define {method}()")
    if not isinstance(cls.positive, bool):
        raise ValueError(f"estimator '{cls.name}': positive must be True or False, got {cls.positive!r}")


def wrap(est):
    """The kestrel.Estimator over an instance (draw, features, log_var_over_k2, kestrel.simulate, ... work on it)."""
    if isinstance(est, _kestrel.Estimator):
        return est
    _check_class(type(est))
    return _kestrel._custom_estimator(est)


def register(cls=None, *, replace=False):
    """Registers an Estimator subclass under cls.name, so that kestrel.fit, kestrel.variance_study(estimators=[...])
    and kestrel.sweep take it by name. Usable as a decorator. A built-in name is refused, a registered one too unless
    replace=True (e.g. when a notebook cell defining the class runs again). Returns cls."""
    if cls is None:
        return lambda c: register(c, replace=replace)
    _check_class(cls)
    exact = cls.log_var_over_k2 is not None
    _kestrel._register_custom(cls.name, cls.description or f"{cls.__name__} (Python)", exact, cls.label or cls.name,
                              cls.color, cls.marker, cls.line, replace)
    _classes[cls.name] = cls
    return cls


def registered():
    """The registered Python estimator classes by name."""
    return dict(_classes)


def _fit(name, X, Y):  # called by the C++ family (bind_custom.cpp)
    est = _classes[name].fit(X, Y)
    _check_instance(est, _classes[name], X.shape[0], "fit()")
    return est


def _restore(name, d, params_json):  # likewise, from Estimator.state()
    if name not in _classes:
        raise ValueError(f"estimator '{name}' is not registered in this process (kestrel.custom.register)")
    return _classes[name](d, **_json.loads(params_json))


def _check_instance(est, cls, d, what):
    if not isinstance(est, cls):
        raise ValueError(f"estimator '{cls.name}': {what} must return a {cls.__name__}, got {type(est).__name__}")
    if est.d != d:
        raise ValueError(f"estimator '{cls.name}': {what} gave d = {est.d} for points of dimension {d}")


# ---- certification ------------------------------------------------------------------------------------------------
class Check:
    """One check of a certification: name, passed, message, and details (a dict of numbers)."""

    def __init__(self, name, passed, message, **details):
        self.name, self.passed, self.message, self.details = name, passed, message, details

    def __repr__(self):
        return f"{'PASS' if self.passed else 'FAIL'} {self.name}: {self.message}"


class Report:
    """The outcome of certify(): .passed, .checks (a list of Check), .false_failure_rate; print() it."""

    def __init__(self, estimator, checks, n_tests):
        self.estimator, self.checks = estimator, checks
        self.passed = all(c.passed for c in checks)
        self.n_tests = n_tests
        self.false_failure_rate = n_tests * P_FALSE_FAILURE

    def __getitem__(self, name):
        return next(c for c in self.checks if c.name == name)

    def __bool__(self):
        return self.passed

    def __str__(self):
        head = (f"certification of '{self.estimator}': {'PASSED' if self.passed else 'FAILED'} "
                f"({self.n_tests} Monte Carlo tests at {K_SIGMAS} SE: false-failure rate <= "
                f"{self.false_failure_rate:.1e} by the union bound)")
        return "\n".join([head] + [f"  {c!r}" for c in self.checks])

    __repr__ = __str__


def certify(est, X, Y, reps=20000, features=(1, 2, 3), seed=0):
    """Certifies an estimator (a kestrel.custom.Estimator class, fitted on X, Y, or an instance) on the pair of sets
    X, Y (d x L each; keep them small and of small norm, e.g. d = 3, L = 4, entries N(0, 0.3^2): the Monte Carlo rule
    needs light tails). Checks, in order (a failure stops the later ones):

      shapes:        draw() gives d x M, features() gives L x M, finite (no NaN), >= 0 if positive, for each M;
      determinism:   the same seed gives the same draw and features, different seeds different draws;
      unbiased:      for each M in `features`, `reps` draws (kestrel's simulator, seed `seed` + M): every entry of the
                     mean kernel estimate within 4.5 standard errors of the exact K(x_i, y_j) = exp(x_i^T y_j);
      exact variance (if log_var_over_k2 is given): every entry's sample variance within 4.5 standard errors of
                     exp(log_var_over_k2) K^2 / M.

    False-failure rate: each Monte Carlo test fails a correct estimator with probability 6.8e-6 (normal
    approximation), so a correct estimator fails certification with probability <= (number of tests) x 6.8e-6 (union
    bound): Lx Ly |features| tests, twice that with an exact variance (Report.false_failure_rate; 3.3e-4 for L = 4
    and the defaults). Seeds are fixed: a result reproduces. Returns a Report."""
    X = _np.asarray(X, dtype=float)
    Y = _np.asarray(Y, dtype=float)
    if X.ndim != 2 or Y.ndim != 2 or X.shape[0] != Y.shape[0] or 0 in X.shape + Y.shape:
        raise ValueError(f"X and Y must be non-empty d x L arrays of the same d, got {X.shape} and {Y.shape}")
    if not (_np.isfinite(X).all() and _np.isfinite(Y).all()):
        raise ValueError("X and Y must be finite")
    if int(reps) < 4:
        raise ValueError(f"reps must be >= 4, got {reps}")
    if isinstance(est, type):
        _check_class(est)
        cls, est = est, est.fit(X, Y)
        _check_instance(est, cls, X.shape[0], "fit()")
    e = wrap(est)
    name = e.name
    exact = getattr(est, "log_var_over_k2", None) is not None
    n_tests = X.shape[1] * Y.shape[1] * len(features) * (2 if exact else 1)
    checks, sims = [], {}
    simulate = lambda M: sims.setdefault(M, _kestrel.simulate(e, X, Y, reps=reps, features=M, seed=seed + M)["kernel"])
    steps = [("shapes", lambda: _check_shapes(e, X, Y, features, seed)),
             ("determinism", lambda: _check_determinism(e, X, features, seed)),
             ("unbiased", lambda: _check_unbiased(simulate, features, reps))]
    if exact:
        steps.append(("exact variance", lambda: _check_variance(e, X, Y, simulate, features)))
    for what, check in steps:
        try:
            c = check()
        except (ValueError, ArithmeticError) as err:
            c = Check(what, False, str(err))
        checks.append(c)
        if not c.passed:
            break
    if not exact:
        checks.append(Check("exact variance", True, "not given (log_var_over_k2 is None): not checked"))
    return Report(name, checks, n_tests)


def _check_shapes(e, X, Y, features, seed):
    for M in features:
        w = e.draw(M, seed)  # the adapter checks shapes, NaN and signs and names the method
        for side in ("query", "key"):
            e.features(w, X, side)
            e.features(w, Y, side)
    return Check("shapes", True, f"draw() is d x M, features() L x M, no NaN, for M in {tuple(features)}")


def _check_determinism(e, X, features, seed):
    M = max(features)
    a, b, c = e.draw(M, seed), e.draw(M, seed), e.draw(M, seed + 1)
    if not _np.array_equal(a.omega, b.omega):
        return Check("determinism", False, "two draws with the same seed differ: draw() must take its randomness "
                     "from its rng argument only")
    if _np.array_equal(a.omega, c.omega):
        return Check("determinism", False, "draws with different seeds are equal: draw() ignores its rng")
    if not _np.array_equal(e.features(a, X, "query"), e.features(a, X, "query")):
        return Check("determinism", False, "features() of the same draw differ between calls")
    return Check("determinism", True, "same seed, same draw and features; different seeds, different draws")


def _z_failures(diff, se, floor):
    """Entries where |diff| > 4.5 se + floor, with their z-scores."""
    z = _np.where(se > 0, diff / _np.where(se > 0, se, 1), _np.where(_np.abs(diff) > floor, _np.inf, 0.0))
    bad = _np.argwhere(_np.abs(diff) > K_SIGMAS * se + floor)
    return z, [tuple(int(k) for k in ij) for ij in bad]


def _check_unbiased(simulate, features, reps):
    worst = 0.0
    for M in features:
        m = simulate(M)
        floor = 64 * _np.finfo(float).eps * m["exact"]  # rounding, for estimators exact at some pairs
        z, bad = _z_failures(m["mean"] - m["exact"], m["se_mean"], floor)
        if bad:
            i, j = max(bad, key=lambda ij: abs(z[ij]))
            return Check("unbiased", False,
                         f"biased at M = {M}: {len(bad)} of {z.size} entries have |mean - K| > {K_SIGMAS} SE; worst "
                         f"(x_{i}, y_{j}): mean {m['mean'][i, j]:.6g} vs exact K {m['exact'][i, j]:.6g}, z = "
                         f"{z[i, j]:.1f} ({reps} draws)", M=M, entries=bad, z=z, mean=m["mean"], exact=m["exact"])
        worst = max(worst, float(_np.abs(z).max()))
    return Check("unbiased", True, f"all entries within {K_SIGMAS} SE of K for M in {tuple(features)} "
                 f"({reps} draws each; max |z| = {worst:.2f})", max_abs_z=worst)


def _check_variance(e, X, Y, simulate, features):
    worst = 0.0
    for M in features:
        m = simulate(M)
        exact = _np.exp(e.log_var_over_k2(X, Y, features=M)) * m["exact"] ** 2
        floor = (64 * _np.finfo(float).eps * m["exact"]) ** 2
        z, bad = _z_failures(m["variance"] - exact, m["se_variance"], floor)
        if bad:
            i, j = max(bad, key=lambda ij: abs(z[ij]))
            return Check("exact variance", False,
                         f"wrong at M = {M}: {len(bad)} of {z.size} entries have |MC var - exact| > {K_SIGMAS} SE; "
                         f"worst (x_{i}, y_{j}): MC variance {m['variance'][i, j]:.6g} vs exact {exact[i, j]:.6g}, "
                         f"z = {z[i, j]:.1f}", M=M, entries=bad, z=z, variance=m["variance"], exact=exact)
        worst = max(worst, float(_np.abs(z).max()))
    return Check("exact variance", True, f"Monte Carlo variance within {K_SIGMAS} SE of log_var_over_k2 for M in "
                 f"{tuple(features)} (max |z| = {worst:.2f})", max_abs_z=worst)
