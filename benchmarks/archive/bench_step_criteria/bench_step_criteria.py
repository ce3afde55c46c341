"""Can the final step be chosen without labels? Three criteria against the two steps, one run.

The default clusters the unit rows of the features ``V sqrt(mu)`` of the learned kernel's top
2k eigenpairs (``"features"``); the paper clusters the unit rows of its top k eigenvectors
(``"spectral"``). Both come from the same eigendecomposition, so the default could make
both partitions for one more k-means and keep one, if something other than the labels said
which. Each wins on some data sets by many points (issue 48's wide benchmark), so this
benchmark asks whether a label-free criterion picks the winner.

For every data set and seed it fits ``MKKMRK(k)``, takes its ``embedding_`` (the features),
makes the k-means partition of each step's unit rows (the library's ``assign_clusters``,
the same seed), and scores each partition by:

- **stability**: the mean NMI between 6 single-start k-means runs of the same rows (a
  partition the rows hold firmly is found every time);
- **silhouette**: scikit-learn's silhouette of the partition on its own unit rows;
- **kernel k-means**: the share of the learned kernel's trace (approximated by the
  features) that the partition's cluster means keep, ``sum_c |sum_{i in c} f_i|^2 / |c|``
  over ``sum_i |f_i|^2``.

A criterion picks the step whose partition scores higher. The report gives each step's NMI
and each criterion's, and counts the data sets where each rule is within 0.5 NMI of the
better step (labels used only to score).

It also gives the partition of a third final step the library could make from the same rows,
spectral clustering on their k-nearest-neighbour graph (scikit-learn's
``SpectralClustering(affinity="nearest_neighbors")``, 10 neighbours, on the rows the default's
graph is built on), and **the best of the fit's partitions** (features, spectral, the kNN
graph and the default's own labels, chosen per data set with the labels): a bound on what
choosing among final steps could reach. With ``--peers`` (the JSON reports of
``bench_defaults_wide.py``, whose seeds must be those of this run) it counts, for the default
and for that bound, issue 48's two quality bars: the data sets within 0.5 NMI of the best
label-free peer, and those more than 2 NMI below the better of raw and standardised KMeans.

Usage (from ``benchmarks/``)::

    python archive/bench_step_criteria/bench_step_criteria.py  # wide, hold-out but USPS: ~5 min
    python archive/bench_step_criteria/bench_step_criteria.py --seeds 5 --report step_bound \
        --peers results/defaults/defaults_wide.json results/defaults/defaults_holdout.json
"""

from __future__ import annotations

import sys
from pathlib import Path

# An archived study (benchmarks/README.md, "Archive"): benchmarks/ and the other studies importable
sys.path.insert(1, str(Path(__file__).resolve().parents[2]))
sys.path.extend(str(p) for p in sorted(Path(__file__).resolve().parents[1].glob("bench_*")))

import argparse
import json
import warnings

import numpy as np
from sklearn.cluster import KMeans, SpectralClustering
from sklearn.metrics import silhouette_score

from mkrk_dask import MKKMRK
from mkrk_dask.assignment import assign_clusters, final_rows, graph_rows
from mkrk_dask.metrics import normalized_mutual_info

from _common import dataset_seed_parser, now, positive_args, write_report
from _tabular import HOLDOUT
from bench_defaults_wide import BELOW_KMEANS, DATASETS, load

STEPS = ("features", "spectral")
CRITERIA = ("stability", "silhouette", "kernel k-means")
RULES = (*STEPS, *CRITERIA)
#: the third step, and the best of the fit's partitions (a bound, chosen with the labels)
KNN, BOUND = "kNN graph", "best of the fit's"
KNN_NEIGHBOURS = 10
#: the two KMeans peers of issue 48's second bar
KMEANS_PEERS = ("KMeans", "KMeans(standardised)")
STABILITY_RUNS = 6
WITHIN = 0.5


def _stability(rows: np.ndarray, k: int, seed: int) -> float:
    runs = [KMeans(k, n_init=1, random_state=seed * 100 + r).fit(rows).labels_
            for r in range(STABILITY_RUNS)]
    return float(np.mean([normalized_mutual_info(runs[i], runs[j])
                          for i in range(len(runs)) for j in range(i + 1, len(runs))]))


def _silhouette(rows: np.ndarray, labels: np.ndarray) -> float:
    return float(silhouette_score(rows, labels)) if np.unique(labels).size > 1 else -1.0


def _kernel_share(features: np.ndarray, labels: np.ndarray) -> float:
    kept = sum(float(np.sum(features[labels == c].sum(axis=0) ** 2)) / np.sum(labels == c)
               for c in np.unique(labels))
    return kept / float(np.sum(features ** 2))


def run(name: str, seeds: int) -> dict | None:
    loaded = load(name, None)
    if loaded is None:
        return None
    views, y, _ = loaded
    k = int(np.unique(y).size)
    nmi = {rule: [] for rule in (*RULES, "default", KNN)}
    for seed in range(seeds):
        model = MKKMRK(k, random_state=seed).fit(views)
        features = np.array(model.embedding_, dtype=np.float64)
        mu = np.sum(features ** 2, axis=0)
        vectors = features[:, :k] / np.sqrt(np.maximum(mu[:k], np.finfo(float).tiny))
        rows = {"features": final_rows(features, "features"),
                "spectral": final_rows(vectors, "spectral")}
        labels = {step: assign_clusters(rows[step], k, step=step,
                                        random_state=np.random.RandomState(seed))
                  for step in STEPS}
        score = {step: normalized_mutual_info(y, labels[step]) for step in STEPS}
        crit = {"stability": {s: _stability(rows[s], k, seed) for s in STEPS},
                "silhouette": {s: _silhouette(rows[s], labels[s]) for s in STEPS},
                "kernel k-means": {s: _kernel_share(features, labels[s]) for s in STEPS}}
        for step in STEPS:
            nmi[step].append(score[step])
        for name_c, values in crit.items():
            nmi[name_c].append(score[max(STEPS, key=values.get)])
        nmi["default"].append(normalized_mutual_info(y, model.labels_))
        nmi[KNN].append(normalized_mutual_info(y, _knn_graph(features, k, seed)))
        print(name, seed, {r: round(100 * v[-1], 2) for r, v in nmi.items()}, flush=True)
    means = {r: 100 * float(np.mean(v)) for r, v in nmi.items()}
    means[BOUND] = max(means[r] for r in (*STEPS, KNN, "default"))
    return {"n": int(views[0].shape[0]), "k": k, "nmi": means}


def _knn_graph(features: np.ndarray, k: int, seed: int) -> np.ndarray:
    """Spectral clustering on the k-nearest-neighbour graph of the rows the default's graph
    is built on (scikit-learn's, which a small fit could make instead of its anchor graph)."""
    rows = graph_rows(features, "features")
    neighbours = min(KNN_NEIGHBOURS, rows.shape[0] - 1)
    return SpectralClustering(k, affinity="nearest_neighbors", n_neighbors=neighbours,
                              random_state=seed).fit(rows).labels_


def best_peers(paths: list[str], seeds: int) -> dict[str, tuple[float, float]]:
    """Per data set in ``bench_defaults_wide.py``'s JSON reports, the mean NMI of the best
    label-free peer and of the better of raw and standardised KMeans, where the report ran
    the seeds of this run (0 to ``seeds - 1``, as here)."""
    best = {}
    for path in paths:
        try:
            with open(path) as fh:
                datasets = json.load(fh)["datasets"]
        except (OSError, ValueError, KeyError) as exc:
            raise SystemExit(f"--peers {path}: not a report of bench_defaults_wide.py "
                             f"({type(exc).__name__}: {exc})") from None
        for name, res in datasets.items():
            nmi = {p: m["nmi_mean"] for p, m in res["methods"].items()
                   if p != "default" and "nmi_mean" in m}
            if res["methods"].get("default", {}).get("n_seeds") != seeds:
                raise SystemExit(f"{path}: {name} ran another number of seeds than "
                                 f"--seeds {seeds}, or not the default")
            if nmi:  # a peer that could not fit the set has no NMI (NaN: never below)
                best[name] = (max(nmi.values()), max(
                    (nmi[p] for p in KMEANS_PEERS if p in nmi), default=float("nan")))
    return best


def bar_counts(results: dict, peers: dict[str, tuple[float, float]], columns: tuple[str, ...]
               ) -> tuple[dict[str, int], dict[str, list[str]]]:
    """Issue 48's two quality bars for each of ``columns`` (keys of every result's ``"nmi"``),
    over the data sets in both ``results`` and ``peers``: how many are within
    :data:`WITHIN` NMI of the best peer, and which are more than :data:`BELOW_KMEANS` below
    the better KMeans."""
    within = dict.fromkeys(columns, 0)
    below: dict[str, list[str]] = {column: [] for column in columns}
    for name in (n for n in results if n in peers):
        v, (peer, kmeans) = results[name]["nmi"], peers[name]
        for column in columns:
            within[column] += v[column] >= peer - WITHIN
            if v[column] < kmeans - BELOW_KMEANS:
                below[column].append(name)
    return within, below


def wide_sets_parser(description: str, report: str, peers_help: str
                     ) -> tuple[argparse.ArgumentParser, list[str]]:
    """The arguments of a run over the wide and hold-out sets but USPS and Fashion-MNIST
    (their defaults), with ``--peers`` and ``--report``."""
    default_sets = [d for d in DATASETS if d not in ("usps", "fashion_mnist")] + list(HOLDOUT)
    parser = dataset_seed_parser(description, default_sets, 3)
    parser.add_argument("--peers", nargs="+", default=[], metavar="JSON", help=peers_help)
    parser.add_argument("--report", default=report)
    return parser, default_sets


def measure_sets(names: list[str], seeds: int, run) -> tuple:
    """``(started, results)``: ``run(name, seeds)`` on each set of ``names`` that loads
    (None: skipped), the fits' warnings off."""
    warnings.simplefilter("ignore")
    started = now()
    return started, {name: res for name in names if (res := run(name, seeds))}


def bound_lines(results: dict, peers: dict[str, tuple[float, float]]) -> list[str]:
    """Issue 48's two quality bars for the default and for the best of the fit's
    partitions."""
    shared = [n for n in results if n in peers]
    lines = ["", f"Against the peers of `--peers` ({len(shared)} data sets in both):", "",
             "| data set | best peer | better KMeans | default | best of the fit's | "
             "its gap to the peer | to KMeans |", "|---|---|---|---|---|---|---|"]
    within, below = bar_counts(results, peers, ("default", BOUND))
    for name in shared:
        v, (peer, kmeans) = results[name]["nmi"], peers[name]
        lines.append(f"| {name} | {peer:.2f} | {kmeans:.2f} | {v['default']:.2f} | "
                     f"{v[BOUND]:.2f} | {v[BOUND] - peer:+.2f} | {v[BOUND] - kmeans:+.2f} |")
    lines += ["", f"Within {WITHIN} NMI of the best peer: the default on {within['default']} "
              f"of {len(shared)}, the best of the fit's partitions on {within[BOUND]} of "
              f"{len(shared)}.", "",
              f"More than {BELOW_KMEANS:g} NMI below the better of raw and standardised "
              f"KMeans: the default on {len(below['default'])} "
              f"({', '.join(below['default']) or 'none'}), the best of the fit's partitions on "
              f"{len(below[BOUND])} ({', '.join(below[BOUND]) or 'none'})."]
    missing = [n for n in peers if n not in results]
    if missing:
        lines.append(f"In `--peers` but not in this run: {', '.join(missing)}.")
    return lines


def main() -> None:
    parser, default_sets = wide_sets_parser(
        __doc__.split("\n")[0], "step_criteria", "bench_defaults_wide.py's JSON reports; "
        "without --datasets, their data sets (but Fashion-MNIST) are the run's")
    args = positive_args(parser, "seeds")
    peers = best_peers(args.peers, args.seeds)
    if peers and args.datasets == default_sets:
        args.datasets = [name for name in peers if name != "fashion_mnist"]
    started, results = measure_sets(args.datasets, args.seeds, run)
    head = " | ".join(RULES)
    lines = [f"`MKKMRK(k).fit` per data set and seed ({args.seeds} seeds); each step's k-means "
             "partition from the fit's own eigendecomposition (`embedding_`); NMI in percent, "
             "mean over the seeds. A criterion's column is the NMI of the step it picked. "
             "*default*: the fit's labels (the features step, refined by its graph where "
             "kept).", "",
             f"| data set | n | k | {head} | default |",
             "|---|---|---|" + "---|" * (len(RULES) + 1)]
    within = dict.fromkeys(RULES, 0)
    for name, res in results.items():
        v = res["nmi"]
        better = max(v[s] for s in STEPS)
        for rule in RULES:
            within[rule] += v[rule] >= better - WITHIN
        cells = " | ".join(f"{v[r]:.2f}" for r in RULES)
        lines.append(f"| {name} | {res['n']:,} | {res['k']} | {cells} | {v['default']:.2f} |")
    gaps = {s: [n for n, r in results.items() if r["nmi"][s] < max(r["nmi"][t] for t in STEPS)
                - WITHIN] for s in STEPS}
    lines += ["", f"Within {WITHIN} NMI of the better step, of {len(results)} data sets:", ""]
    lines += [f"- {rule}: {within[rule]}" for rule in RULES]
    lines += ["", f"The features step is more than {WITHIN} below the spectral one on "
              f"{len(gaps['features'])} ({', '.join(gaps['features']) or 'none'}); the spectral "
              f"step below the features one on {len(gaps['spectral'])} "
              f"({', '.join(gaps['spectral']) or 'none'})."]
    lines += ["", f"*{KNN}*: spectral clustering on the {KNN_NEIGHBOURS}-nearest-neighbour graph "
              f"of the rows the default's graph is built on; *{BOUND}*: the best of the "
              "features, spectral, kNN graph and default columns, chosen per data set with the "
              "labels (a bound on choosing a final step, not a method).", "",
              "| data set | " + " | ".join((*STEPS, KNN, "default", BOUND)) + " |",
              "|---|" + "---|" * 5]
    lines += [f"| {name} | " + " | ".join(f"{res['nmi'][r]:.2f}"
                                          for r in (*STEPS, KNN, "default", BOUND)) + " |"
              for name, res in results.items()]
    if peers:
        lines += bound_lines(results, peers)
    path = write_report("defaults", args.report, "Choosing the final step without labels",
                        "\n".join(lines), started=started)
    print(open(path).read())


if __name__ == "__main__":
    main()
