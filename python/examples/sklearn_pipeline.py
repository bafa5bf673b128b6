"""kestrel.sklearn.RandomFeatures in a scikit-learn Pipeline next to RBFSampler: test accuracy of a RidgeClassifier on
random features of the Gaussian kernel, against the number of features, on a staged UCI set.

    /usr/bin/python3 python/examples/sklearn_pipeline.py [--set wifi] [--gamma 0.5] [--repeats 5] [--features 16,64,256]

Each cell is the mean (and standard error) over `repeats` seeds of the feature draw; the split is fixed (seed 0).
"""
import argparse

import numpy as np
from sklearn.kernel_approximation import RBFSampler
from sklearn.linear_model import RidgeClassifier
from sklearn.model_selection import train_test_split
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

import kestrel
from kestrel.sklearn import RandomFeatures


def accuracy(features, X_train, X_test, y_train, y_test):
    model = make_pipeline(StandardScaler(), features, RidgeClassifier(alpha=1e-3))
    return model.fit(X_train, y_train).score(X_test, y_test)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--set", default="wifi", choices=kestrel.uci_sets())
    ap.add_argument("--gamma", type=float, default=0.1)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--features", default="16,64,256")
    ap.add_argument("--estimators", default="trig-real,pos,oprf,sderf")
    a = ap.parse_args()
    data = kestrel.load_uci(a.set)
    X_train, X_test, y_train, y_test = train_test_split(data["data"], data["target"], test_size=0.25, random_state=0)
    makers = {"RBFSampler": lambda m, s: RBFSampler(gamma=a.gamma, n_components=m, random_state=s)}
    for e in a.estimators.split(","):
        for sampler in ("iid", "orthogonal"):
            makers[f"{e} {sampler}"] = lambda m, s, e=e, sampler=sampler: RandomFeatures(
                estimator=e, n_features=m, kernel="gaussian", gamma=a.gamma, sampler=sampler, random_state=s)
    sizes = [int(m) for m in a.features.split(",")]
    print(f"{a.set}: {len(X_train)} train / {len(X_test)} test rows, d = {X_train.shape[1]}, Gaussian kernel "
          f"gamma = {a.gamma}; test accuracy, mean +- SE over {a.repeats} draws")
    print(f"{'features':<22}" + "".join(f"{m:>16}" for m in sizes))
    for name, make in makers.items():
        cells = []
        for m in sizes:
            acc = [accuracy(make(m, s), X_train, X_test, y_train, y_test) for s in range(a.repeats)]
            cells.append(f"{np.mean(acc):.3f} +- {np.std(acc, ddof=1) / np.sqrt(len(acc)):.3f}")
        print(f"{name:<22}" + "".join(f"{c:>16}" for c in cells))


if __name__ == "__main__":
    main()
