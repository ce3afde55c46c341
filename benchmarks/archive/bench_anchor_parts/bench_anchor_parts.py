"""The anchor graph's eigenpairs on a graph of several parts: part by part against one dense
eigendecomposition of the whole, in one run.

A graph whose rows fall in far-apart groups has one connected part per group, eigenvalue 1
once a part. :class:`~mkrk_dask.AnchorGraphClustering` takes its top eigenpairs part by part
(Lanczos in a large part, git 40773a8); before, such a graph went to a dense
eigendecomposition of the whole anchors' matrix (git 2057fe2 to 7fb3a2c), O(anchors^3). This
benchmark builds one graph (``--groups`` Gaussian blobs 100 standard deviations apart, ``--n``
rows, ``--anchors`` anchors) and times both on the same factor F: the library's
``_top_eigenpairs`` (a private function: this measures it, it is no API) and scipy's ``eigh``
of ``F^T F`` for the same top k + 1 eigenvalues. It checks that both give the same
eigenvalues and reports the ratio.

Usage::

    python benchmarks/archive/bench_anchor_parts/bench_anchor_parts.py
    # 40,000 rows, 8,000 anchors: about 4 min
"""

from __future__ import annotations

import sys
from pathlib import Path

# An archived study (benchmarks/README.md, "Archive"): benchmarks/ and the other studies importable
sys.path.insert(1, str(Path(__file__).resolve().parents[2]))
sys.path.extend(str(p) for p in sorted(Path(__file__).resolve().parents[1].glob("bench_*")))

import argparse
import time

import numpy as np
from scipy.linalg import eigh
from sklearn.datasets import make_blobs

from mkrk_dask.anchor_graph import fit_view_graph, graph_factor
from mkrk_dask.estimators._anchor_graph import _connected_parts, _top_eigenpairs

from _common import now, write_report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=40_000)
    parser.add_argument("--anchors", type=int, default=8000)
    parser.add_argument("--groups", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    started = now()
    centres = 100.0 * np.arange(args.groups)[:, None] * np.ones((1, 5))
    X, _ = make_blobs(args.n, centers=centres, cluster_std=1.0, random_state=0)
    k = args.groups
    start = time.perf_counter()
    _, rows = fit_view_graph(X, args.anchors, 3, "euclidean", random_state=0, max_iter=3)
    F = graph_factor([rows])
    build = time.perf_counter() - start
    small = (F.T @ F).tocsr()
    parts, _ = _connected_parts(small)
    part_s, dense_s = [], []
    for _ in range(args.repeats):  # interleaved: each pair sees the same load
        start = time.perf_counter()
        top, _ = _top_eigenpairs(F, k)
        part_s.append(time.perf_counter() - start)
        start = time.perf_counter()
        side = small.shape[0]
        dense = eigh(small.toarray(), eigvals_only=True,
                     subset_by_index=[side - k - 1, side - 1])[::-1]
        dense_s.append(time.perf_counter() - start)
    gap = float(np.max(np.abs(top - np.maximum(dense, 0.0))))
    part_med, dense_med = float(np.median(part_s)), float(np.median(dense_s))
    body = "\n".join([
        f"{args.n:,} rows in {args.groups} blobs 100 standard deviations apart (5 columns), "
        f"{args.anchors:,} anchors, 3 nearest; the graph built in {build:.1f} s; "
        f"{parts} connected parts; top {k + 1} eigenpairs, {args.repeats} interleaved "
        "repeats, median seconds.", "",
        "| method | median s | every repeat |", "|---|---|---|",
        f"| part by part (`_top_eigenpairs`) | {part_med:.2f} | "
        f"{', '.join(f'{s:.2f}' for s in part_s)} |",
        f"| dense `eigh` of the whole F^T F | {dense_med:.2f} | "
        f"{', '.join(f'{s:.2f}' for s in dense_s)} |", "",
        f"- part by part / dense: {part_med / dense_med:.3f}x "
        f"({dense_med / part_med:.1f} times faster).",
        f"- largest difference of the eigenvalues: {gap:.1e}."])
    path = write_report("defaults", "anchor_parts", "The anchor graph's eigenpairs on a "
                        "graph of several parts: part by part against dense", body,
                        started=started)
    print(open(path).read())


if __name__ == "__main__":
    main()
