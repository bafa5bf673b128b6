"""Compares two kestrel HDF5 files (issue #10): same objects, bit-identical datasets, same attributes
except the provenance that legitimately differs between runs (creation time, threads, MPI ranks, the shards of a
merged sweep)."""
import json
import sys

import h5py
import numpy as np

# Root attributes / provenance keys that describe how a run was executed, not what it computed.
RUN_ATTRS = {"mpi_ranks", "created_utc"}
RUN_PROVENANCE = {"created_utc", "threads", "mpi_ranks", "shards"}


def attrs(obj):
    out = {}
    for k, v in obj.attrs.items():
        if k in RUN_ATTRS:
            continue
        if k == "provenance":
            v = {p: q for p, q in json.loads(v).items() if p not in RUN_PROVENANCE}
        elif isinstance(v, np.ndarray):
            v = v.tolist()
        elif isinstance(v, bytes):
            v = v.decode()
        out[k] = v
    return out


def contents(path):
    objs = {}
    with h5py.File(path, "r") as f:
        def visit(name, obj):
            data = obj[()] if isinstance(obj, h5py.Dataset) else None
            if isinstance(data, np.ndarray):
                if data.dtype.kind == "f":
                    assert np.all(np.isfinite(data) | np.isneginf(data)), f"{path}:{name} has NaN or +Inf"
                data = (data.dtype.str, data.shape, data.tobytes())  # bitwise comparison
            objs[name] = (type(obj).__name__, data, attrs(obj))
        objs["/"] = ("Group", None, attrs(f))
        f.visititems(visit)
    return objs


def main(a, b):
    ca, cb = contents(a), contents(b)
    if ca.keys() != cb.keys():
        sys.exit(f"different objects: only in {a}: {sorted(ca.keys() - cb.keys())}, "
                 f"only in {b}: {sorted(cb.keys() - ca.keys())}")
    bad = [k for k in ca if ca[k] != cb[k]]
    if bad:
        sys.exit(f"{a} and {b} differ in {bad}")
    n = sum(1 for v in ca.values() if v[0] == "Dataset")
    print(f"same: {a} {b} ({n} datasets)")


if __name__ == "__main__":
    main(*sys.argv[1:3])
