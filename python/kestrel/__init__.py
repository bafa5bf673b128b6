"""kestrel: exact variances, Monte Carlo and parameter fitting for random-feature estimators of the softmax and
Gaussian kernels (the compiled module kestrel._kestrel), with scikit-learn transformers (kestrel.sklearn), estimators
written in NumPy (kestrel.custom) and readers of kestrel's HDF5 results into pandas (kestrel.results).

Points are columns: a set of L points in R^d is a d x L float64 array (kestrel.fit(..., layout="rows") takes L x d).
Logs are natural logs. See the README, section "Python", and docs/own-estimator.md.
"""
import importlib as _importlib
import pickle as _pickle

from . import _kestrel
from ._kestrel import *  # noqa: F401,F403  (the compiled API: fit, variance_study, sweep, reproduce, ...)
from ._kestrel import Estimator, __version__, _input_address, _raise  # noqa: F401

__doc__ = (__doc__ or "") + "\n" + (_kestrel.__doc__ or "")
_SUBMODULES = ("sklearn", "custom", "results", "advice")


def __getattr__(name):
    # kestrel.sklearn etc. are imported on first use (scikit-learn and pandas are slow to import).
    if name in _SUBMODULES:
        return _importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module 'kestrel' has no attribute '{name}'")


def __dir__():
    return sorted(set(globals()) | set(_SUBMODULES))
