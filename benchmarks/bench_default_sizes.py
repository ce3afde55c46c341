"""The default fit's time and NMI against n, and the backend ``solver="auto"`` passed over.

``MKKMRK(n_clusters=k).fit(X)`` on uniform random subsets of one data set (the same subset
for every method at a size), at each size also with the other backend forced (exact where
``"auto"`` chose Nystrom, up to ``--exact-max-n`` rows; Nystrom where it chose exact), so that
the report shows what the choice costs and gains. One seed per size (``--seed``); the
missed-trace warning of the Nystrom fits is silenced.

    python benchmarks/bench_default_sizes.py [--dataset fashion_mnist]
        [--n 3000 5000 6441 6442 9000 12000 16000 30000 70000] [--exact-max-n 12000]

Writes ``benchmarks/results/defaults/default_sizes.md``.
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np

from mkrk_dask import MKKMRK
from mkrk_dask.metrics import normalized_mutual_info

from _common import dense_views, load_or_skip, now, results_dir, write_report


def timed_fit(X: np.ndarray, k: int, seed: int, solver: str) -> tuple[MKKMRK, float]:
    model = MKKMRK(k, solver=solver, random_state=seed)
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model.fit(X)
    return model, time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", default="fashion_mnist")
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--n", type=int, nargs="+",
                        default=[3000, 5000, 6441, 6442, 9000, 12000, 16000, 30000, 70000])
    parser.add_argument("--exact-max-n", type=int, default=12_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default=str(results_dir("defaults") / "default_sizes.md"))
    args = parser.parse_args()
    started = now()
    data = load_or_skip(args.dataset, args.data_dir)
    if data is None:
        return
    if len(data.views) != 1:
        raise SystemExit("one view only: the subsets are of one feature matrix")
    views, y_all = dense_views(data)
    X_all = views[0]
    k = int(np.unique(y_all).size)
    rows = ["| n | auto chose | dictionary | NMI | s | other backend | NMI | s |",
            "|---|---|---|---|---|---|---|---|"]
    for n in args.n:
        n = min(n, y_all.size)
        idx = np.sort(np.random.default_rng(args.seed).permutation(y_all.size)[:n])
        X, y = X_all[idx], y_all[idx]
        model, seconds = timed_fit(X, k, args.seed, "auto")
        line = (f"| {n:,} | {model.solver_} | {model.dictionary_} | "
                f"{100 * normalized_mutual_info(y, model.labels_):.2f} | {seconds:.1f} |")
        other = "nystrom" if model.solver_ == "exact" else "exact"
        if other == "nystrom" or n <= args.exact_max_n:
            twin, twin_seconds = timed_fit(X, k, args.seed, other)
            line += (f" {other} | {100 * normalized_mutual_info(y, twin.labels_):.2f} | "
                     f"{twin_seconds:.1f} |")
        else:
            line += " – | – | – |"
        rows.append(line)
        print(line, flush=True)
    body = [f"Data: uniform random subsets of {args.dataset} ({X_all.shape[1]} features, k = "
            f"{k}), seed {args.seed} for the subset and the fit. Seconds: the whole `fit`, "
            "wall clock, one run (the local Dask cluster of a Nystrom fit included). `other "
            "backend`: the same fit with the backend `solver=\"auto\"` did not choose (exact "
            f"only up to {args.exact_max_n:,} rows).", "", *rows]
    write_report("defaults", "default_sizes", "The default fit against n",
                 "\n".join(body) + "\n", started=started, path=args.out)


if __name__ == "__main__":
    main()
