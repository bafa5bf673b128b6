"""kestrel's results as pandas DataFrames: the rows that kestrel.variance_study / kestrel.sweep return, and the tables
of any kestrel HDF5 file (`kestrel variance --out`, `kestrel sweep`, `kestrel reproduce`).

    frame(kestrel.variance_study(...))    one row per (estimator, sigma[, grid point]); the Monte Carlo block as mc_*
    read(path)                            every dataset: {group: DataFrame} for tables, {dataset: array or text} else
    read_table(path[, "/sweep"])          one DataFrame of a results table (group/<estimator>/<column>[row])
    provenance(path)                      options, seeds, git revision and library versions of the file

A table is a group whose 1-D datasets share their length; in a results table (variance, sweep) every estimator's
subgroup is such a table, and read_table stacks them with an `estimator` column, status as text.
"""
import errno
import json
import os

import numpy as np

from ._kestrel import InputFileError, _check_schema

__all__ = ["frame", "read", "read_table", "provenance"]

_STATUS = {0: "ok", 1: "exact", 2: "undefined", 3: "failed"}


def _pandas():
    try:
        import pandas
    except ImportError as e:  # pragma: no cover - Debian: python3-pandas
        raise ImportError("kestrel.results needs pandas (Debian: python3-pandas)") from e
    return pandas


def _h5py():
    try:
        import h5py
    except ImportError as e:  # pragma: no cover - Debian: python3-h5py
        raise ImportError("kestrel.results needs h5py to read HDF5 files (Debian: python3-h5py)") from e
    return h5py


def frame(rows):
    """A DataFrame of result rows (a list of dicts as kestrel.variance_study and kestrel.sweep return them): nested
    dicts become prefixed columns (mc -> mc_reps, mc_mean_log_var, ...); lists (params, per-set means) stay objects."""
    pd = _pandas()
    if isinstance(rows, dict):
        rows = [rows]
    if not isinstance(rows, (list, tuple)) or not all(isinstance(r, dict) for r in rows):
        raise TypeError(f"frame() takes a list of result dicts, got {type(rows).__name__}")
    flat = []
    for r in rows:
        f = {}
        for k, v in r.items():
            if isinstance(v, dict) and k != "params":
                f.update({f"{k}_{kk}": vv for kk, vv in v.items()})
            else:
                f[k] = v
        flat.append(f)
    return pd.DataFrame(flat)


def _open(path):
    """path opened read-only as HDF5; a directory, a missing file or another kind of file is named as such (as the
    command line names points files), not with h5py's internals. Not HDF5, or written with a newer major version of
    its schema (root attributes schema, schema_version; kestrel.schemas()): kestrel.InputFileError (a ValueError and
    an OSError)."""
    h5py = _h5py()
    p = os.fspath(path)
    if os.path.isdir(p):
        raise IsADirectoryError(errno.EISDIR, "a directory, not a kestrel HDF5 file: give one of its .h5 files", p)
    if not os.path.isfile(p):
        raise FileNotFoundError(errno.ENOENT, "no such file", p)
    if not h5py.is_hdf5(p):
        with open(p, "rb") as fh:
            head = fh.read(64)
        kind = "a text file" if head and all(b in b"\t\n\r" or 32 <= b < 127 for b in head) else "not HDF5"
        raise InputFileError(f"{p}: {kind}, not an HDF5 file: kestrel.results reads the .h5 files kestrel writes "
                             "(`--out FILE.h5`, kestrel.sweep, kestrel.reproduce)")
    f = h5py.File(p, "r")
    schema, version = (_text(f.attrs.get(k)) for k in ("schema", "schema_version"))
    if isinstance(schema, str) and isinstance(version, str):
        try:
            _check_schema(p, schema, version)
        except Exception:
            f.close()
            raise
    return f


def _text(v):
    return v.decode() if isinstance(v, bytes) else v


def provenance(path):
    """The root attributes of a kestrel HDF5 file: the provenance JSON as a dict (options, seeds, git revision,
    library versions, command, time)."""
    with _open(path) as f:
        if "provenance" not in f.attrs:
            raise ValueError(f"{path} has no kestrel provenance (not written by kestrel?)")
        return json.loads(_text(f.attrs["provenance"]))


def _columns(group):
    """The 1-D numeric datasets of a group that share the most common length, as {name: array}."""
    h5py = _h5py()
    cols = {k: v for k, v in group.items()
            if isinstance(v, h5py.Dataset) and v.ndim == 1 and v.dtype.kind in "fiub"}
    if not cols:
        return {}
    lengths = [v.shape[0] for v in cols.values()]
    n = max(set(lengths), key=lengths.count)
    return {k: v[()] for k, v in cols.items() if v.shape[0] == n}


_TEXT_COLUMNS = ("reason", "params")


def _estimator_table(group, name):
    """One estimator's rows of a results table, with its name in `estimator`; also returns the datasets it used."""
    pd = _pandas()
    cols = _columns(group)
    df = pd.DataFrame(cols)
    n = len(df)
    df.insert(0, "estimator", [name] * n)
    used = set(cols)
    if "status" in df:
        df["status"] = [_STATUS.get(int(s), str(s)) for s in df["status"]]
    for text in _TEXT_COLUMNS:
        if text in group:
            values = json.loads(_text(group[text][()]))
            if len(values) == n:
                df[text] = values
                used.add(text)
    if "per_set_mean_log_var" in group and group["per_set_mean_log_var"].shape[:1] == (n,):
        df["per_set_mean_log_var"] = list(np.asarray(group["per_set_mean_log_var"][()]))
        used.add("per_set_mean_log_var")
    return df, used


def _is_results_group(g):
    """A results table (variance, sweep): subgroups, one per estimator, each with a status column."""
    subs = [v for v in g.values() if isinstance(v, _h5py().Group)]
    return bool(subs) and all("status" in s for s in subs)


def _read_table(f, path, group):
    """(DataFrame, the datasets it holds as full paths) of one table group of an open file."""
    h5py = _h5py()
    if group not in f or not isinstance(f[group], h5py.Group):
        raise KeyError(f"{path} has no group {group!r}; its tables: {', '.join(sorted(_tables(f)))}")
    g = f[group]
    if _is_results_group(g):
        frames, used = [], set()
        for k, v in g.items():
            if isinstance(v, h5py.Group) and _columns(v):
                df, cols = _estimator_table(v, k)
                frames.append(df)
                used |= {f"{v.name}/{c}" for c in cols}
        return _pandas().concat(frames, ignore_index=True), used
    if g.parent.name != g.name and _is_results_group(g.parent):  # one estimator of a results table
        df, cols = _estimator_table(g, g.name.rsplit("/", 1)[1])
        return df, {f"{g.name}/{c}" for c in cols}
    cols = _columns(g)
    if not cols:
        raise ValueError(f"{path}:{group} holds no table (no 1-D datasets)")
    return _pandas().DataFrame(cols), {f"{g.name.rstrip('/')}/{c}" for c in cols}


def _find_table(f, path):
    """The table of a file that holds one: its results table (variance, sweep), else its only table."""
    h5py = _h5py()
    results = []
    f.visititems(lambda name, obj: results.append("/" + name)
                 if isinstance(obj, h5py.Group) and _is_results_group(obj) else None)
    candidates = results or _tables(f)
    if len(candidates) == 1:
        return candidates[0]
    if not candidates:
        raise ValueError(f"{path} holds no table (no group of 1-D datasets); kestrel.results.read({path!r}) "
                         "returns its datasets")
    raise ValueError(f"{path} holds several tables ({', '.join(sorted(candidates))}): name one, "
                     f"read_table({path!r}, {sorted(candidates)[0]!r})")


def read_table(path, group=None):
    """One results table (`/variance`, `/sweep`, or a reproduction's panel) as a DataFrame, one row per estimator
    row, with the estimator's name in `estimator` and status as text. Without `group`, the file's results table (or
    its only table); a group of one estimator (`/sweep/oprf`) keeps the `estimator` column too."""
    with _open(path) as f:
        return _read_table(f, path, group if group is not None else _find_table(f, path))[0]


def _tables(f):
    h5py = _h5py()
    found = []

    def visit(name, obj):
        if isinstance(obj, h5py.Group) and _columns(obj):
            found.append("/" + name)
    f.visititems(visit)
    return found


def _dataset_value(d):
    """A dataset outside the tables as it is: a numpy array (any shape), or text for a string dataset."""
    v = d[()]
    if isinstance(v, bytes) or d.dtype.kind in "SOU":
        return _text(v if not isinstance(v, np.ndarray) else v.tolist())
    return v


def read(path):
    """Every dataset of a kestrel HDF5 file, as {path: value}: results tables (variance, sweep) stacked over their
    estimators and any other group of 1-D datasets of one length as DataFrames (keyed by the group), and every other
    dataset (2-D arrays, vectors of another length, JSON text) under its own path as a numpy array or a string."""
    h5py = _h5py()
    out, used = {}, set()
    with _open(path) as f:
        groups = _tables(f)
        for g in groups:
            parent = g.rsplit("/", 1)[0] or "/"
            key = parent if parent != "/" and _is_results_group(f[parent]) else g
            if key not in out:
                out[key], cols = _read_table(f, path, key)
                used |= cols
        datasets = []
        f.visititems(lambda name, obj: datasets.append("/" + name) if isinstance(obj, h5py.Dataset) else None)
        for name in datasets:
            if name not in used:
                out[name] = _dataset_value(f[name])
    return out
