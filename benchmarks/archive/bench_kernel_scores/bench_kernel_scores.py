"""Can the kernels be weighted by how clustered each one looks, without labels? One run.

The default gives its dictionary's kernels equal weights (``docs/defaults.rst``: at lambda 1
every kernel represents itself). Where one kernel carries the clusters and the others blur
them (the crabs of MASS: the angle kernels against the sizes' Gaussians) equal weights lose,
so this benchmark tries a label-free score of each kernel's own cluster structure, in the
spirit of the gap statistic (Tibshirani, Walther & Hastie, 2001):

- the kernel on a uniform sample of at most 1,500 rows, centred; its top ``k - 1``
  eigenpairs give each row a point ``U sqrt(lambda)``;
- ``W``: the share of those points' scatter left within the clusters of a k-means (3
  restarts); ``W0``: the same for Gaussian points of the same variances (2 draws), a
  reference without clusters;
- the score ``log(W0 / W)``: how much more clustered the kernel's rows are than that
  reference.

Three weightings of the default fit (``MKKMRK(k)``, everything else its own) are compared with
its equal weights: **best** (each view's best-scoring kernel alone), **soft 3** and **soft 6**
(weights ``exp(c (s - max s))`` within each view, each view keeping an equal share). The
weights replace the loop's, so the final step (features, graph) runs on the reweighted
kernel. With ``--peers`` (``bench_defaults_wide.py``'s JSON reports, of the same seeds) it
counts issue 48's two quality bars for each column.

Usage (from ``benchmarks/``)::

    python archive/bench_kernel_scores/bench_kernel_scores.py --seeds 5 \
        --peers results/defaults/defaults_wide.json results/defaults/defaults_holdout.json \
        --report kernel_scores   # ~5 min
"""

from __future__ import annotations

import sys
from pathlib import Path

# An archived study (benchmarks/README.md, "Archive"): benchmarks/ and the other studies importable
sys.path.insert(1, str(Path(__file__).resolve().parents[2]))
sys.path.extend(str(p) for p in sorted(Path(__file__).resolve().parents[1].glob("bench_*")))

import dataclasses

import numpy as np
import scipy.linalg
from sklearn.cluster import KMeans

from mkrk_dask import MKKMRK
from mkrk_dask.kernel_widths import sample_rows
from mkrk_dask.kernels import kernel_matrices
from mkrk_dask.metrics import normalized_mutual_info

from _common import positive_args, write_report
from bench_defaults_wide import BELOW_KMEANS, load
from bench_step_criteria import WITHIN, bar_counts, best_peers, measure_sets, wide_sets_parser

SAMPLE_ROWS = 1500
WEIGHTINGS = ("equal", "best", "soft 3", "soft 6")


class FixedWeights(MKKMRK):
    """``MKKMRK`` whose learned weights are replaced by ``fixed`` (``w_p^2`` sum to 1) before
    the final step; the subclass hook ``_run`` is the loop."""

    fixed: np.ndarray | None = None

    def _run(self, backend, first_rank=None):
        result = super()._run(backend, first_rank)
        if self.fixed is None:
            return result
        # the loop's eigenpairs belong to its own weights: the final step makes its own
        return dataclasses.replace(result, weights=np.sqrt(self.fixed), final_top=None)


def _within_share(points: np.ndarray, k: int, seed: int) -> float:
    km = KMeans(k, n_init=3, random_state=seed).fit(points)
    return km.inertia_ / max(float((points ** 2).sum()), np.finfo(float).tiny)


def kernel_score(K: np.ndarray, k: int, rng: np.random.Generator) -> float:
    """``log(W0 / W)`` of one kernel matrix (module docstring)."""
    n = K.shape[0]
    J = K - K.mean(axis=0) - K.mean(axis=1)[:, None] + K.mean()
    r = max(k - 1, 1)
    lam, U = scipy.linalg.eigh(J, subset_by_index=[n - r, n - 1])
    lam = lam.clip(0.0)
    W = _within_share(U * np.sqrt(lam), k, 0)
    W0 = np.mean([_within_share(rng.standard_normal((n, r)) * np.sqrt(lam), k, s)
                  for s in range(2)])
    return float(np.log(W0 / max(W, np.finfo(float).tiny)))


def weightings(scores: np.ndarray, views: np.ndarray) -> dict[str, np.ndarray]:
    """Each column's ``w_p^2``, every view's share equal."""
    out = {}
    for name in WEIGHTINGS:
        q = np.zeros_like(scores)
        for v in np.unique(views):
            s = scores[views == v]
            if name == "equal":
                part = np.ones_like(s)
            elif name == "best":
                part = (np.arange(s.size) == np.argmax(s)).astype(float)
            else:
                part = np.exp(float(name.split()[1]) * (s - s.max()))
            q[views == v] = part / part.sum()
        out[name] = q / q.sum()
    return out


def run(name: str, seeds: int) -> dict | None:
    data = load(name, None)
    if data is None:
        return None
    views, y, _ = data
    k = int(np.unique(y).size)
    base = MKKMRK(k, random_state=0).fit(views)
    specs = list(base.kernels_)
    scaled = base.plan_.apply_scaling(views)
    sample = [sample_rows(v, SAMPLE_ROWS) for v in scaled]
    sample = [s.toarray() if hasattr(s, "toarray") else s for s in sample]
    rng = np.random.default_rng(0)
    scores = np.array([kernel_score(K, k, rng) for K in kernel_matrices(sample, specs)])
    nmi = {}
    for column, q in weightings(scores, np.array([s.view for s in specs])).items():
        values = []
        for seed in range(seeds):
            est = FixedWeights(k, random_state=seed)
            est.fixed = None if column == "equal" else q
            values.append(100 * normalized_mutual_info(y, est.fit(views).labels_))
        nmi[column] = float(np.mean(values))
    names = [str(n) for n in base.kernel_names_]
    print(name, {c: round(v, 2) for c, v in nmi.items()}, flush=True)
    return {"n": int(y.size), "k": k, "nmi": nmi,
            "scores": ", ".join(f"{n} {s:.2f}" for n, s in zip(names, scores, strict=True))}


def main() -> None:
    parser, _ = wide_sets_parser(__doc__.split("\n")[0], "kernel_scores",
                                 "bench_defaults_wide.py's JSON reports, of this run's seeds")
    args = positive_args(parser, "seeds")
    peers = best_peers(args.peers, args.seeds)
    started, results = measure_sets(args.datasets, args.seeds, run)
    head = " | ".join(WEIGHTINGS)
    lines = [f"`MKKMRK(k).fit` with its loop's weights replaced ({args.seeds} seeds); NMI in "
             "percent, mean over the seeds; *equal* is the default itself. Scores: each "
             "kernel's `log(W0 / W)` on a sample of at most "
             f"{SAMPLE_ROWS:,} rows (module docstring).", "",
             f"| data set | n | k | {head} | best peer | better KMeans | scores |",
             "|---|---|---|" + "---|" * (len(WEIGHTINGS) + 3)]
    within, below = bar_counts(results, peers, WEIGHTINGS)
    for name, res in results.items():
        peer, kmeans = peers.get(name, (float("nan"), float("nan")))
        cells = " | ".join(f"{res['nmi'][w]:.2f}" for w in WEIGHTINGS)
        lines.append(f"| {name} | {res['n']:,} | {res['k']} | {cells} | {peer:.2f} | "
                     f"{kmeans:.2f} | {res['scores']} |")
    if peers:
        lines += ["", "Against the peers of `--peers` (their means over the same seeds):", ""]
        lines += [f"- {w}: within {WITHIN} NMI of the best peer on {within[w]} of "
                  f"{len(results)}; more than {BELOW_KMEANS:g} below the better KMeans on "
                  f"{len(below[w])} "
                  f"({', '.join(below[w]) or 'none'})" for w in WEIGHTINGS]
    path = write_report("defaults", args.report,
                        "Kernel weights from each kernel's own cluster structure",
                        "\n".join(lines), started=started)
    print(open(path).read())


if __name__ == "__main__":
    main()
