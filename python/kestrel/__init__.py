"""kestrel: exact variances, Monte Carlo and parameter fitting for random-feature estimators of the softmax and
Gaussian kernels (the compiled module kestrel._kestrel), with scikit-learn transformers (kestrel.sklearn), estimators
written in NumPy (kestrel.custom), readers of kestrel's HDF5 results into pandas (kestrel.results) and advise on a
PyTorch model's own attention (kestrel.torch; PyTorch is imported only there).

Points are columns: a set of L points in R^d is a d x L float64 array (kestrel.fit(..., layout="rows") takes L x d).
Logs are natural logs. See the README, section "Python", and docs/own-estimator.md.
"""
import importlib as _importlib
import pickle as _pickle

from . import _blas_core

# OpenBLAS chooses its kernels when it is loaded (by _kestrel, just below): OPENBLAS_CORETYPE is set first from the CPU's
# flags where the user has not set it, and _kestrel warns if OpenBLAS was loaded earlier (by NumPy) with its generic
# kernels (lib/core/blas_core.hpp).
_blas_core.set_openblas_core()

from . import _kestrel  # noqa: E402
from ._kestrel import *  # noqa: F401,F403  (the compiled API: fit, variance_study, sweep, reproduce, ...)
from ._kestrel import Estimator, __version__, _input_address, _raise  # noqa: F401,E402

__doc__ = (__doc__ or "") + "\n" + (_kestrel.__doc__ or "")


def _options():
    """Every option table of the Python functions that take options, from the declared entry points
    (experiments/entry_points.hpp) and their C++ option tables (frontend/option_table.hpp): {command-line name, or the
    function's where it has none: [{"name", "kind", "list", "default", "help"}, ...]}; names use '-', defaults are the
    command line's text ("" where the default depends on other options)."""
    return {e["cli"] or e["python"]: e["options"] for e in _kestrel._entry_points() if e["python"]}


def _python_default(option):
    """An option's default as a Python value (None where it depends on other options)."""
    text, kind = option["default"], option["kind"]
    if text == "":
        return None
    convert = {"integer": int, "real": float, "flag": lambda t: t == "true", "text": str}[kind]
    return [convert(t) for t in text.split(",")] if option["list"] else convert(text)


def _with_signature(function, table, leading, extra=()):
    """`function` (compiled, taking **options) with the signature generated from its option table: the leading
    parameters, then every option as a keyword with its default (inspect.signature, help())."""
    import functools
    import inspect
    P = inspect.Parameter
    params = list(leading) + [P(o["name"].replace("-", "_"), P.KEYWORD_ONLY, default=_python_default(o)) for o in table]
    params += list(extra)

    @functools.wraps(function)
    def wrapper(*args, **kwargs):
        return function(*args, **kwargs)
    wrapper.__signature__ = inspect.Signature(params)
    wrapper.__wrapped__ = function
    return wrapper


def _signatures():
    """The signature of each entry point's function, generated from its declaration: its inputs (positional), its
    options and its other keywords (keyword-only), with their defaults."""
    import inspect
    P = inspect.Parameter

    constants = {"None": None, "False": False, "True": True}

    def default(i, kind):
        return P(i["name"], kind) if i["default"] is None else P(i["name"], kind, default=constants[i["default"]])
    g = globals()
    for e in _kestrel._entry_points():
        if e["python"]:
            leading = [default(i, P.POSITIONAL_OR_KEYWORD) for i in e["inputs"]]
            extra = [default(i, P.KEYWORD_ONLY) for i in e["keywords"]]
            g[e["python"]] = _with_signature(getattr(_kestrel, e["python"]), e["options"], leading, extra)


_signatures()
_SUBMODULES = ("sklearn", "custom", "results", "advice", "torch")


def __getattr__(name):
    # kestrel.sklearn etc. are imported on first use (scikit-learn and pandas are slow to import).
    if name in _SUBMODULES:
        return _importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module 'kestrel' has no attribute '{name}'")


def __dir__():
    return sorted(set(globals()) | set(_SUBMODULES))
