"""kestrel's results as pandas DataFrames: the rows that kestrel.variance_study / kestrel.sweep return, and the tables
of any kestrel HDF5 file (`kestrel variance --out`, `kestrel sweep`, `kestrel reproduce`).

    frame(kestrel.variance_study(...))    one row per (estimator, sigma[, grid point]); the Monte Carlo block as mc_*
    read(path)                            {group: DataFrame} for every table in the file
    read_table(path, "/sweep")            one DataFrame of a results table (group/<estimator>/<column>[row])
    provenance(path)                      options, seeds, git revision and library versions of the file

A table is a group whose 1-D datasets share their length; in a results table (variance, sweep) every estimator's
subgroup is such a table, and read_table stacks them with an `estimator` column, status as text.
"""
import json

import numpy as np

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


def _text(v):
    return v.decode() if isinstance(v, bytes) else v


def provenance(path):
    """The root attributes of a kestrel HDF5 file: the provenance JSON as a dict (options, seeds, git revision,
    library versions, command, time)."""
    with _h5py().File(path, "r") as f:
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


def _estimator_table(group, name):
    pd = _pandas()
    cols = _columns(group)
    df = pd.DataFrame(cols)
    n = len(df)
    df.insert(0, "estimator", [name] * n)
    if "status" in df:
        df["status"] = [_STATUS.get(int(s), str(s)) for s in df["status"]]
    for text in ("reason", "params"):
        if text in group:
            values = json.loads(_text(group[text][()]))
            if len(values) == n:
                df[text] = values
    if "per_set_mean_log_var" in group and group["per_set_mean_log_var"].shape[:1] == (n,):
        df["per_set_mean_log_var"] = list(np.asarray(group["per_set_mean_log_var"][()]))
    return df


def read_table(path, group):
    """One results table (`/variance`, `/sweep`, or a reproduction's panel) as a DataFrame, one row per estimator
    row, with the estimator's name in `estimator` and status as text."""
    pd = _pandas()
    h5py = _h5py()
    with h5py.File(path, "r") as f:
        if group not in f or not isinstance(f[group], h5py.Group):
            raise KeyError(f"{path} has no group {group!r}; its tables: {', '.join(sorted(_tables(f)))}")
        g = f[group]
        subs = [k for k, v in g.items() if isinstance(v, h5py.Group) and _columns(v)]
        if subs:
            return pd.concat([_estimator_table(g[k], k) for k in subs], ignore_index=True)
        cols = _columns(g)
        if not cols:
            raise ValueError(f"{path}:{group} holds no table (no 1-D datasets)")
        return pd.DataFrame(cols)


def _tables(f):
    h5py = _h5py()
    found = []

    def visit(name, obj):
        if isinstance(obj, h5py.Group) and _columns(obj):
            found.append("/" + name)
    f.visititems(visit)
    return found


def read(path):
    """Every table of a kestrel HDF5 file as {group path: DataFrame}: results tables (variance, sweep) stacked over
    their estimators, any other group with 1-D datasets of one length as it is."""
    h5py = _h5py()
    with h5py.File(path, "r") as f:
        groups = _tables(f)
    parents = {g.rsplit("/", 1)[0] or "/" for g in groups}
    out = {}
    for g in groups:
        parent = g.rsplit("/", 1)[0] or "/"
        if parent in parents and parent != "/" and _is_results_table(path, parent):
            if parent not in out:
                out[parent] = read_table(path, parent)
        else:
            out[g] = read_table(path, g)
    return out


def _is_results_table(path, group):
    with _h5py().File(path, "r") as f:
        g = f[group]
        subs = [v for v in g.values() if isinstance(v, _h5py().Group)]
        return bool(subs) and all("status" in s for s in subs)
