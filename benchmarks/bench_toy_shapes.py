"""The default on scikit-learn's toy shapes (two moons, two rings, anisotropic and
unequal blobs) and on three blobs around the origin, the first data a new user tries: does
its graph keep the curves k-means cuts across, and does its cosine keep a group at the origin
whole?

For every shape, size and data seed, the mean NMI over the seeds of:

- ``default``: ``MKKMRK(k)``, the label-free default;
- ``default, agreement only``: the same fit where the graph's partition may be kept only by
  its agreement with the k-means partition (the eigengap rule of
  :func:`mkrk_dask.estimators._final.clear_parts` and the parts rule of
  :func:`~mkrk_dask.estimators._final.parts_apart` switched off by asking for clusters larger
  than the data): the default before those rules;
- ``default, gap only``: the eigengap rule alone, without the parts rule (k parts with no
  edge between them beside a few stray rows, which decides wherever the graph has more
  parts with no edge to the rest than clusters);
- ``default, 8 features``: the default with ``n_components=8`` (4k for two clusters, where
  the default takes 2k);
- ``default, lifted cosine``: the default's kernels with, in place of the cosine, the cosine
  of the rows lifted by half their median length (``polynomial(a=(0.5 median |x|)^2, b=1)``),
  which the default gave data with negative values until the protocol of issue 76 dropped it;
- ``KMeans`` (10 starts) and scikit-learn's ``SpectralClustering(affinity="nearest_neighbors")``.

``graph kept by the gap`` counts the default's fits whose graph was kept though it disagreed
with k-means (``final_graph_clear_`` and an agreement below 0.5), by either rule.

Usage::

    python benchmarks/bench_toy_shapes.py            # 5 shapes x 6 sizes x 4 seeds: about 10 min
"""

from __future__ import annotations

import argparse
import warnings

import numpy as np
from sklearn.cluster import KMeans, SpectralClustering
from sklearn.datasets import make_blobs, make_circles, make_moons

import mkrk_dask.estimators._final as final
from mkrk_dask import MKKMRK, KernelSpec
from mkrk_dask.metrics import normalized_mutual_info

from _common import now, write_report

#: the shapes of scikit-learn's "comparing clustering algorithms" page, with its noise levels
#: and three blobs, one around the origin (as data centred by the user often have one)
SHAPES = ("moons", "rings", "anisotropic", "unequal blobs", "blobs around the origin")
SIZES = (300, 600, 1000, 1500, 3000, 5000)
METHODS = ("default", "default, agreement only", "default, gap only", "default, 8 features",
           "default, lifted cosine", "KMeans", "SpectralClustering(nn)")


def make_shape(shape: str, n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    if shape == "moons":
        return make_moons(n, noise=0.05, random_state=seed)
    if shape == "rings":
        return make_circles(n, noise=0.05, factor=0.5, random_state=seed)
    if shape == "anisotropic":
        X, y = make_blobs(n, random_state=170 + seed)
        return X @ np.array([[0.6, -0.6], [-0.4, 0.8]]), y
    if shape == "unequal blobs":
        return make_blobs(n, cluster_std=[1.0, 2.5, 0.5], random_state=170 + seed)
    return make_blobs(n, centers=[[0.0, 0.0], [4.0, 0.0], [0.0, 4.0]], random_state=seed)


def fit(method: str, X: np.ndarray, k: int) -> tuple[np.ndarray, bool]:
    """Labels, and whether the default's graph was kept by its gap alone."""
    if method == "KMeans":
        return KMeans(k, n_init=10, random_state=0).fit_predict(X), False
    if method == "SpectralClustering(nn)":
        return SpectralClustering(k, affinity="nearest_neighbors",
                                  random_state=0).fit_predict(X), False
    saved = final.GRAPH_CLEAR_ROWS, final.parts_apart
    if method == "default, agreement only":
        final.GRAPH_CLEAR_ROWS = X.shape[0] + 1
    if method == "default, gap only":
        final.parts_apart = lambda *args: False
    params = {"n_components": 8} if method == "default, 8 features" else {}
    if method == "default, lifted cosine":
        lift = (0.5 * np.median(np.linalg.norm(X, axis=1))) ** 2
        params = {"kernels": [KernelSpec("polynomial", a=lift, b=1, view=s.view)
                              if s.family == "linear" else s for s in MKKMRK(k).plan(X).kernels]}
    try:
        model = MKKMRK(k, random_state=0, **params).fit(X)
    finally:
        final.GRAPH_CLEAR_ROWS, final.parts_apart = saved
    by_gap = bool(model.final_clustering_ == "graph" and model.final_graph_clear_
                  and model.final_graph_agreement_ < final.GRAPH_MIN_AGREEMENT)
    return model.labels_, by_gap


def run(seeds: int) -> dict:
    results = {}
    for shape in SHAPES:
        for n in SIZES:
            scores = {m: [] for m in METHODS}
            by_gap = 0
            for seed in range(seeds):
                X, y = make_shape(shape, n, seed)
                k = int(y.max() + 1)
                for method in METHODS:
                    labels, gap = fit(method, X, k)
                    scores[method].append(100 * normalized_mutual_info(y, labels))
                    by_gap += gap and method == "default"
            results[(shape, n)] = ({m: float(np.mean(v)) for m, v in scores.items()}, by_gap)
            print(shape, n, results[(shape, n)], flush=True)
    return results


def report(results: dict, seeds: int) -> str:
    rows = ["| shape | n | " + " | ".join(METHODS) + " | graph kept by the gap |",
            "|---|---|" + "---|" * (len(METHODS) + 1)]
    for (shape, n), (scores, by_gap) in results.items():
        rows.append(f"| {shape} | {n} | " + " | ".join(f"{scores[m]:.2f}" for m in METHODS)
                    + f" | {by_gap} of {seeds} |")
    return "\n".join([f"NMI in percent, mean over {seeds} data seeds (each method's own seed "
                      "0).", "", *rows])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", type=int, default=4)
    parser.add_argument("--report", default="toy_shapes")
    args = parser.parse_args()
    started = now()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        results = run(args.seeds)
    path = write_report("defaults", args.report, "The default on scikit-learn's toy shapes",
                        report(results, args.seeds), started=started)
    print(open(path).read())


if __name__ == "__main__":
    main()
