"""Label-free refinements of the default, each against the default itself, in one run.

Issue 12 asks for defaults chosen by investigation and measurement. This benchmark keeps the
record of refinements that were tried and not adopted, so anyone can re-run them. Every
variant is label-free; the labels only score the result. For every seed:

- ``default``: ``MKKMRK(k, random_state=seed)``.
- ``30 restarts``: the same with ``n_init=30``. Each candidate rank keeps the partition of
  lowest k-means objective among 30 restarts instead of 10.
- ``restart ensemble``: a cluster ensemble instead of a selection. The default's final step
  runs 10 k-means restarts at each candidate rank; here every one of them is kept. Their
  co-association (the stacked normalised cluster indicators) is clustered by k-means, and
  the result is polished by Lloyd steps in the features of the rank the default chose, as
  ``predict`` needs.
- ``kernel medoid``: the partitions of every kernel of the kept dictionary alone, and the
  default's, compete. The one with the highest mean NMI with the others is kept (Strehl &
  Ghosh's consensus criterion, as the rank choice uses).
- ``lambda 2^-6``, ``lambda 2^-8``: the default with ``lam`` 2^-6 or 2^-8 instead of 1, so
  that the Y-step learns unequal weights (at 1 every kernel represents itself and the weights
  are equal; above 2^-4 they hardly move). MKKM-RK's own way of selecting representative
  kernels, at two fixed values (a label-free choice among them is the open question).
- ``restart medoid``: the default's final k-means, at the step and rank it kept, run as 10
  single restarts; the restart whose partition has the highest mean NMI with the others is
  kept instead of the one of lowest k-means objective.
- ``kernel ensemble``: late fusion of the same partitions (every kernel's own and the
  default's): their co-association (the stacked normalised cluster indicators) clustered by
  k-means, not polished (a measure of the partition only).
- ``within-share weights`` (exact kernels, n <= ``--max-n-kernels``): each kernel is
  weighted by the inverse of the share of its own centred scatter left within the default's
  clusters (MKKM's closed-form weights, with a loss that does not favour wide kernels for
  their constant component). The weighted sum of the kernels is clustered by the default's
  final step.
- ``anchor graph``: a kernel family outside the dictionary, local instead of global widths:
  :class:`~mkrk_dask.AnchorGraphClustering` with its defaults, the anchor graph of Liu, He &
  Chang (ICML 2010) per view, with the default's geometry rules (unit rows for non-negative
  data). 1,000 anchors (at most half the rows) are the centres of a mini-batch k-means;
  every row is joined to its 3 nearest anchors by Gaussian weights (width: the median
  squared distance to them) that sum to 1. The kernel ``Z diag(Z^T 1)^-1 Z^T`` (whose rows
  sum to 1: a graph normalised by its degrees), averaged over the views; the unit rows of
  its top k eigenvectors are clustered by k-means (the spectral step, the graph's natural
  one). The parameters are the paper's usual ones, not tuned here.

Reported: NMI and ACC as the mean (and best) over the seeds, and for each variant its mean
paired difference from the default in NMI points with the standard error of that mean.

Usage::

    python benchmarks/archive/bench_label_free_variants/bench_label_free_variants.py
        [--datasets jaffe orl ...] [--seeds 5] [--variants "anchor graph" ...]
"""

from __future__ import annotations

import sys
from pathlib import Path

# An archived study (benchmarks/README.md, "Archive"): benchmarks/ and the other studies importable
sys.path.insert(1, str(Path(__file__).resolve().parents[2]))
sys.path.extend(str(p) for p in sorted(Path(__file__).resolve().parents[1].glob("bench_*")))

import argparse
import time
import warnings

import numpy as np
import scipy.sparse as sp
from bench_defaults import DATASETS, HELD_OUT, _load, _record, _score
from mkrk_dask.consensus import choose_partition
from mkrk_dask.estimators._dictionary import auto_dictionary
from sklearn.cluster import KMeans

from mkrk_dask import MKKMRK, AnchorGraphClustering
from mkrk_dask.assignment import final_rows, lloyd_centres
from mkrk_dask.kernel_widths import median_scales
from mkrk_dask.kernels import kernel_matrices, resolve_kernels

from _common import now, write_report

VARIANTS = ("default", "30 restarts", "restart ensemble", "kernel medoid", "kernel ensemble",
            "within-share weights", "lambda 2^-6", "lambda 2^-8", "restart medoid",
            "anchor graph")


def _indicators(labels: np.ndarray, k: int) -> sp.csr_matrix:
    """The normalised cluster indicator of a partition: ``1 / sqrt(|cluster|)`` per row."""
    counts = np.bincount(labels, minlength=k).astype(np.float64)
    values = 1.0 / np.sqrt(counts[labels])
    return sp.csr_matrix((values, (np.arange(labels.size), labels)), shape=(labels.size, k))


def co_association(partitions: list[np.ndarray], k: int, seed: int) -> np.ndarray:
    """The partitions' co-association (stacked normalised indicators) clustered by k-means."""
    stacked = sp.hstack([_indicators(p, k) for p in partitions]).toarray()
    stacked /= np.sqrt(len(partitions))
    return KMeans(k, n_init=10, random_state=seed).fit(stacked).labels_


def restart_ensemble(features: np.ndarray, ranks: list[int], chosen: int, k: int, n_init: int,
                     seed: int) -> np.ndarray:
    """Every k-means restart at every rank, clustered by their co-association, then polished
    in the features of the chosen rank."""
    rng = np.random.RandomState(seed)
    partitions = [KMeans(k, n_init=1, random_state=rng.randint(2**31)).fit(
        features[:, :rank]).labels_ for rank in ranks for _ in range(n_init)]
    return lloyd_centres(features[:, :chosen], co_association(partitions, k, seed), k)[1]


def restart_medoid(model: MKKMRK, k: int, n_init: int, seed: int) -> np.ndarray:
    """The final step's restarts at the kept step and rank, the most central one kept."""
    rows = final_rows(model.embedding_, model.final_step_)
    rng = np.random.RandomState(seed)
    partitions = [KMeans(k, n_init=1, random_state=rng.randint(2**31)).fit(rows).labels_
                  for _ in range(n_init)]
    return partitions[choose_partition(partitions)[0]]


def _centred_within_share(K: np.ndarray, labels: np.ndarray) -> float:
    """Share of the centred scatter of a kernel's feature space left within clusters."""
    total = np.trace(K) - K.sum() / labels.size
    within = np.trace(K)
    for cluster in np.unique(labels):
        members = labels == cluster
        within -= K[np.ix_(members, members)].sum() / members.sum()
    return within / total


def within_share_weights(views: list, dictionary: str, labels: np.ndarray, k: int,
                         seed: int) -> np.ndarray:
    """Kernels weighted by the inverse of their within-cluster share of the default's
    partition; the weighted sum clustered by the default's final step."""
    specs = auto_dictionary(dictionary, len(views))
    specs = resolve_kernels(specs, [0.0] * len(views), median_scales(views, specs))
    kernels = kernel_matrices(views, specs)
    weights = np.array([1.0 / _centred_within_share(K, labels) for K in kernels])
    combined = np.tensordot(weights / weights.sum(), kernels, axes=1)
    return MKKMRK(k, kernels="precomputed", random_state=seed).fit(combined[None]).labels_


def anchor_graph(X, k: int, seed: int) -> np.ndarray:
    """The library's anchor graph (``AnchorGraphClustering`` with its defaults)."""
    return AnchorGraphClustering(k, random_state=seed).fit(X).labels_


def _timed(y: np.ndarray, labels_of, *args, **kwargs) -> tuple[float, float, float]:
    """``(NMI, ACC, seconds)`` of the partition ``labels_of(*args, **kwargs)`` computes."""
    start = time.perf_counter()
    labels = labels_of(*args, **kwargs)
    return (*_score(y, labels), time.perf_counter() - start)


def _fit_labels(X, k: int, **params) -> np.ndarray:
    return MKKMRK(k, **params).fit(X).labels_


def run_dataset(name: str, data_dir: str | None, seeds: int, max_n_kernels: int,
                wanted: tuple[str, ...] = VARIANTS) -> dict:
    views, y = _load(name, data_dir)
    k, n = int(np.unique(y).size), views[0].shape[0]
    X = views if len(views) > 1 else views[0]
    runs: dict[str, list] = {v: [] for v in VARIANTS if v in wanted or v == "default"}
    for seed in range(seeds):
        start = time.perf_counter()
        default = MKKMRK(k, random_state=seed).fit(X)
        runs["default"].append((*_score(y, default.labels_), time.perf_counter() - start))

        if "30 restarts" in runs:
            runs["30 restarts"].append(_timed(y, _fit_labels, X, k, n_init=30,
                                              random_state=seed))

        if "restart ensemble" in runs:
            start = time.perf_counter()
            ranks = sorted(default.component_scores_["features"])
            # polished in the features of the rank kept (the smallest if the spectral step was)
            chosen = default.n_components_ if default.final_step_ == "features" else ranks[0]
            specs = auto_dictionary(default.dictionary_, len(views))
            wide = MKKMRK(k, kernels=specs, final_step="features", n_components=ranks[-1],
                          random_state=seed).fit(X)
            labels = restart_ensemble(np.asarray(wide.embedding_, dtype=np.float64), ranks,
                                      chosen, k, default.n_init, seed)
            runs["restart ensemble"].append((*_score(y, labels), time.perf_counter() - start))

        if "kernel medoid" in runs or "kernel ensemble" in runs:
            start = time.perf_counter()
            specs = auto_dictionary(default.dictionary_, len(views))
            partitions = [MKKMRK(k, kernels=[spec], random_state=seed).fit(X).labels_
                          for spec in specs] + [default.labels_]
            best, _ = choose_partition(partitions)
            medoid = (*_score(y, partitions[best]), time.perf_counter() - start)
            start_fusion = time.perf_counter()
            labels = co_association(partitions, k, seed)
            # the same kernels' fits as the medoid's, plus the fusion itself
            fusion = (*_score(y, labels), medoid[-1] + time.perf_counter() - start_fusion)
            for variant, row in (("kernel medoid", medoid), ("kernel ensemble", fusion)):
                if variant in runs:
                    runs[variant].append(row)

        if "within-share weights" in runs and n <= max_n_kernels:
            runs["within-share weights"].append(_timed(
                y, within_share_weights, views, default.dictionary_, default.labels_, k, seed))
        for lam in (-6, -8):
            if f"lambda 2^{lam}" in runs:
                runs[f"lambda 2^{lam}"].append(_timed(y, _fit_labels, X, k, lam=2.0**lam,
                                                      random_state=seed))
        if "restart medoid" in runs:
            runs["restart medoid"].append(_timed(y, restart_medoid, default, k,
                                                 default.n_init, seed))
        if "anchor graph" in runs:
            runs["anchor graph"].append(_timed(y, anchor_graph, X, k, seed))
        print(name, seed, {v: round(r[-1][0], 2) for v, r in runs.items() if r}, flush=True)
    out = {"n": n, "k": k, "views": len(views), "methods": {}}
    base = np.array([r[0] for r in runs["default"]])
    for variant, rows in runs.items():
        if not rows:
            continue
        diff = np.array([r[0] for r in rows]) - base
        out["methods"][variant] = _record(
            rows, diff_mean=float(diff.mean()),
            diff_se=float(diff.std(ddof=1) / np.sqrt(diff.size)) if diff.size > 1 else 0.0)
    return out


def report(results: dict, wanted: tuple[str, ...] = VARIANTS) -> str:
    shown = [v for v in VARIANTS[1:] if v in wanted]
    head = ["| data set | n | default NMI | " + " | ".join(shown) + " |",
            "|---|---|---|" + "---|" * len(shown)]
    lines = ["Each variant's cell: its mean NMI minus the default's, in points, over the same "
             "seeds (paired), with the standard error of that mean; '-' where not run.", "",
             *head]
    detail = []
    for name, res in results.items():
        m = res["methods"]
        cells = [f"{m[v]['diff_mean']:+.2f} +/- {m[v]['diff_se']:.2f}" if v in m else "-"
                 for v in shown]
        lines.append(f"| {name} | {res['n']} | {m['default']['nmi_mean']:.2f} | "
                     + " | ".join(cells) + " |")
        detail += [f"### {name} (n = {res['n']}, k = {res['k']}, {res['views']} view(s))", "",
                   "| variant | NMI | ACC | seconds | seeds |", "|---|---|---|---|---|"]
        for variant, rec in m.items():
            detail.append(f"| {variant} | {rec['nmi_mean']:.2f} ({rec['nmi_best']:.2f}) | "
                          f"{rec['acc_mean']:.2f} ({rec['acc_best']:.2f}) | "
                          f"{rec['seconds']:.1f} | {rec['n_seeds']} |")
        detail.append("")
    return "\n".join(["## Summary", "", *lines, "", "## Per data set", "", *detail])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--datasets", nargs="+", default=list(DATASETS + HELD_OUT))
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--max-n-kernels", type=int, default=3000,
                        help="largest n for the within-share weights (dense n x n kernels)")
    parser.add_argument("--variants", nargs="+", choices=VARIANTS[1:], default=VARIANTS[1:],
                        help="the variants to run against the default (all by default; a "
                        "subset writes its own report, label_free_<variants>.md)")
    args = parser.parse_args()
    wanted = tuple(args.variants)
    name = "label_free_variants" if set(wanted) == set(VARIANTS[1:]) else "label_free_" + "_".join(
        v.replace(" ", "_").replace("^", "") for v in wanted)
    started = now()
    warnings.simplefilter("ignore")  # the Nystrom approximation warnings of large sets
    results = {data: run_dataset(data, args.data_dir, args.seeds, args.max_n_kernels, wanted)
               for data in args.datasets}
    path = write_report("defaults", name, "Label-free refinements of the default, against "
                        "the default (issue 12)", report(results, wanted), started=started)
    print(path.read_text())


if __name__ == "__main__":
    main()
