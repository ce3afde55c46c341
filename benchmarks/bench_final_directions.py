"""Three directions for the default's final partition, judged by the fold protocol (issue 76).

The default's largest gaps to the label-free peers are on sets where a nearest-neighbour graph
of the raw rows wins (mv:Cora, mv:ACM: ``SpectralClustering(nn, unit rows)``) and on sets where
the paper's spectral step beats the features step (orl, MASS:Cars93, MASS:survey, MASS:crabs,
mv:MNIST-4). Each direction below is a candidate the default does not have; it is judged as
``_protocol.py`` judges a candidate: on each fold, its mean NMI gain over its reference and
its worst set (it passes where the mean gain is positive and no set loses more than
``MAX_LOSS``). All three use the public API only (``build_backend`` and the exact backend's
``combined_kernel`` for the learned kernel ``K_w``), on the sets the default fits on the exact
backend (every set of ``folds.json`` at ``--max-rows 5000``):

- **step by kernel k-means cost**: the default's partition, or the one with the paper's
  spectral step and the same final partition, whichever has the lower ``inertia_`` (both are
  partitions of the same ``K_w``, so their kernel k-means costs compare); reference: the
  default;
- **graph of the learned kernel**: spectral clustering (scikit-learn, ``affinity=
  "precomputed"``) of the symmetrised 10-nearest-neighbour graph of ``K_w`` itself (its rows'
  largest entries), in place of the default's final partition; reference: the default;
- **degree-normalised features**: k-means on the unit rows of the features of the top 2k
  eigenpairs of ``D^-1/2 K_w D^-1/2`` (``D``: the row sums of ``K_w``; the normalised-cut
  form of the learned kernel) in place of those of ``K_w``, without the final graph;
  reference: the default without its final graph (``final_clustering="kmeans"``).

    python benchmarks/bench_final_directions.py --seeds 2 --max-rows 5000
"""

from __future__ import annotations

import argparse
import warnings

import numpy as np
import scipy.sparse as sp
from scipy.linalg import eigh
from sklearn.cluster import KMeans, SpectralClustering

from mkrk_dask import MKKMRK
from mkrk_dask.metrics import normalized_mutual_info

from _common import now, write_report
from _protocol import MAX_LOSS, judge, load_folds
from bench_defaults_wide import load, subsample

#: neighbours of a row in the learned kernel's graph (scikit-learn's SpectralClustering default)
NEIGHBORS = 10
#: candidate -> its reference
DIRECTIONS = {"step by kernel k-means cost": "default",
              "graph of the learned kernel": "default",
              "degree-normalised features": "default without the final graph"}


def unit_features(M: np.ndarray, rank: int) -> np.ndarray:
    """Unit rows of ``V sqrt(mu)`` of the top ``rank`` eigenpairs of ``M``."""
    n = M.shape[0]
    mu, V = eigh(M, subset_by_index=[n - rank, n - 1])
    F = V * np.sqrt(np.clip(mu, 0.0, None))
    return F / np.maximum(np.linalg.norm(F, axis=1, keepdims=True), 1e-12)


def neighbour_graph(K: np.ndarray, neighbors: int) -> sp.csr_matrix:
    """The symmetrised 0/1 graph of each row's ``neighbors`` largest off-diagonal entries."""
    n = K.shape[0]
    work = K.copy()
    np.fill_diagonal(work, -np.inf)
    nearest = np.argpartition(-work, neighbors, axis=1)[:, :neighbors]
    A = sp.csr_matrix((np.ones(n * neighbors), (np.repeat(np.arange(n), neighbors),
                                                 nearest.ravel())), shape=(n, n))
    return ((A + A.T) > 0).astype(np.float64)


def fit_set(views: list, y: np.ndarray, k: int, seed: int) -> dict[str, float] | None:
    """Every method's NMI on one set for one seed; None where the default is not exact."""
    def score(labels: np.ndarray) -> float:
        return 100 * normalized_mutual_info(y, labels)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        default = MKKMRK(k, random_state=seed).fit(views)
        if default.solver_ != "exact":
            return None
        clustering = MKKMRK(k).plan(views).final_clustering
        spectral = MKKMRK(k, random_state=seed, final_step="spectral",
                          final_clustering=clustering).fit(views)
        no_graph = MKKMRK(k, random_state=seed, final_clustering="kmeans").fit(views)
        backend, n = MKKMRK(k, random_state=seed).build_backend(views)
        with backend:
            Kw = np.array(backend.combined_kernel(np.asarray(default.weights_)))
        # a graph in several pieces is clustered as it is (scikit-learn warns)
        graph = SpectralClustering(k, affinity="precomputed", random_state=seed).fit_predict(
            neighbour_graph(Kw, NEIGHBORS))
    cheaper = default if default.inertia_ <= spectral.inertia_ else spectral
    degree = np.maximum(Kw.sum(axis=1), 1e-12) ** -0.5
    rank = min(2 * k, n - 1)
    normalised = KMeans(k, n_init=10, random_state=seed).fit_predict(
        unit_features(Kw * degree[:, None] * degree[None, :], rank))
    return {"default": score(default.labels_),
            "default without the final graph": score(no_graph.labels_),
            "step by kernel k-means cost": score(cheaper.labels_),
            "graph of the learned kernel": score(graph),
            "degree-normalised features": score(normalised)}


def fold_test(table: dict, names: list[str], candidate: str) -> dict:
    """The protocol's test (``_protocol.judge``) of ``candidate`` against its reference."""
    return judge({name: table[name][candidate] - table[name][DIRECTIONS[candidate]]
                  for name in names})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=2)
    parser.add_argument("--max-rows", type=int, default=5000)
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--datasets", nargs="*", default=None,
                        help="a subset of folds.json's sets (default: all)")
    args = parser.parse_args()
    started = now()
    folds = load_folds()
    table, fold_of = {}, {}
    for fold in ("A", "B"):
        for name in folds["folds"][fold]:
            if args.datasets and name not in args.datasets:
                continue
            loaded = load(name, args.data_dir)
            if loaded is None:
                continue
            views, y, _ = subsample(loaded, args.max_rows)
            k = int(np.unique(y).size)
            runs = [fit_set(views, y, k, seed) for seed in range(args.seeds)]
            if any(r is None for r in runs):
                print(f"skipped {name}: not on the exact backend", flush=True)
                continue
            table[name] = {m: float(np.mean([r[m] for r in runs])) for m in runs[0]}
            fold_of[name] = fold
            print(name, {m: round(v, 2) for m, v in table[name].items()}, flush=True)
    methods = list(next(iter(table.values())))
    body = [f"NMI in percent, mean over {args.seeds} seeds; sets of more than "
            f"{args.max_rows:,} rows sampled to that many (fixed seed). Folds: "
            "`benchmarks/folds.json`. No method sees the labels.", "",
            "## The protocol", "",
            f"A direction passes a fold where its mean gain over its reference is positive and "
            f"no set loses more than {MAX_LOSS:g} NMI.", "",
            "| direction | reference | fold A: mean gain, worst set | passes A | fold B: mean "
            "gain, worst set | passes B |", "|---|---|---|---|---|---|"]
    for candidate, reference in DIRECTIONS.items():
        cells = []
        for fold in ("A", "B"):
            names = [n for n in table if fold_of[n] == fold]
            if not names:
                cells += ["not run", "-"]
                continue
            test = fold_test(table, names, candidate)
            cells += [f"{test['mean']:+.2f}; {test['worst']} {test['worst_diff']:+.2f}",
                      "yes" if test["passes"] else "no"]
        body.append(f"| {candidate} | {reference} | " + " | ".join(cells) + " |")
    body += ["", "## NMI per set", "", "| set | fold | " + " | ".join(methods) + " |",
             "|---|---|" + "---|" * len(methods)]
    for name, row in table.items():
        body.append(f"| {name} | {fold_of[name]} | "
                    + " | ".join(f"{row[m]:.2f}" for m in methods) + " |")
    write_report("defaults", "final_directions",
                 "Three directions for the default's final partition (issue 76)",
                 "\n".join(body), started=started)


if __name__ == "__main__":
    main()
