"""The Nystrom backend's exact-C pass: what it costs per pair of rows, and what it buys.

Below the exact-C limit (``NystromOptions.exact_dissimilarity_max_n``) the Nystrom build makes
one more pass over all pairs of rows, for the exact dissimilarity C and the sparse local part
of the residuals. ``"auto"`` sets the limit from a cost model,
:meth:`~mkrk_dask.backends.NystromOptions.pass_products_per_pair`. This benchmark measures:

1. the pass's seconds per pair of rows on seeded synthetic data (``--n`` rows, |N(0, 1)|
   features), for the default dictionary (4 kernels) and the paper's (12), narrow and wide
   rows, with the local part (500 landmarks per kernel) and without it, next to the model's
   products per pair and the ns per product they imply;
2. the default estimator (``MKKMRK(n_clusters=k, solver="nystrom")``) on random subsets of
   real data sets with the pass (``exact_dissimilarity_max_n=n``) and with ``"auto"``, the
   same seeds: NMI and seconds.

    python benchmarks/bench_exact_c_pass.py [--n 6000] [--subsets fashion_mnist:14000
        usps:11000] [--seeds 3] [--data-dir DIR]

Writes ``benchmarks/results/nystrom/exact_c_pass.md``.
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np

from mkrk_dask import MKKMRK
from mkrk_dask.backends import make_backend
from mkrk_dask.backends.options import EXACT_DISSIMILARITY_BUDGET, NystromOptions
from mkrk_dask.kernels import paper_kernels
from mkrk_dask.metrics import normalized_mutual_info
from mkrk_dask.plan import auto_kernels

from _common import dense_views, load_or_skip, now, results_dir, write_report


def pass_costs(n: int) -> list[str]:
    rng = np.random.default_rng(0)
    rows = ["| kernels | m | features | local part | pass s | ns per pair | model products "
            "per pair | ns per product |", "|---|---|---|---|---|---|---|---|"]
    for d in (10, 784):
        X = np.abs(rng.normal(size=(n, d)))
        for label, specs in (("default", auto_kernels(["euclidean"] * 1)),
                             ("paper", paper_kernels())):
            for threshold in (0.01, 0.0):
                options = NystromOptions(exact_dissimilarity_max_n=n, n_landmarks=500,
                                         local_threshold=threshold)
                with make_backend(options, views=[X], specs=specs, random_state=0) as backend:
                    seconds = backend.info["seconds"]["exact_kernel_gram"]
                per_pair = 1e9 * seconds / n**2
                products = options.pass_products_per_pair(len(specs))
                rows.append(f"| {label} | {len(specs)} | {d} | "
                            f"{'on (500 landmarks)' if threshold else 'off'} | {seconds:.2f} | "
                            f"{per_pair:.1f} | {products:,.0f} | {per_pair / products:.4f} |")
                print(rows[-1], flush=True)
    return rows


def with_and_without(subsets: list[str], seeds: int, data_dir: str | None) -> list[str]:
    rows = ["| data | n | seed | pass | auto limit | NMI with pass | NMI auto | s with pass | "
            "s auto |", "|---|---|---|---|---|---|---|---|---|"]
    for item in subsets:
        name, size = item.split(":")
        data = load_or_skip(name, data_dir)
        if data is None:
            continue
        views, y = dense_views(data)
        n, k = min(int(size), y.size), int(np.unique(y).size)
        for seed in range(seeds):
            idx = np.sort(np.random.default_rng(seed).permutation(y.size)[:n])
            X = [v[idx] for v in views]
            result = {}
            for label, options in (("pass", {"exact_dissimilarity_max_n": n}), ("auto", {})):
                model = MKKMRK(k, solver="nystrom", random_state=seed, backend_options=options)
                start = time.perf_counter()
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")  # the missed-trace warning, both sides
                    model.fit(X if len(X) > 1 else X[0])
                seconds = time.perf_counter() - start
                nmi = 100 * normalized_mutual_info(y[idx], model.labels_)
                result[label] = (nmi, seconds, model)
            limit = NystromOptions().exact_dissimilarity_limit(len(result["auto"][2].kernels_))
            rows.append(f"| {name} | {n} | {seed} | "
                        f"{result['pass'][2].nystrom_model_.info['dissimilarity_source']} / "
                        f"{result['auto'][2].nystrom_model_.info['dissimilarity_source']} | "
                        f"{limit:,} | {result['pass'][0]:.2f} | {result['auto'][0]:.2f} | "
                        f"{result['pass'][1]:.1f} | {result['auto'][1]:.1f} |")
            print(rows[-1], flush=True)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=6000)
    parser.add_argument("--subsets", nargs="*", default=["fashion_mnist:14000", "usps:11000"])
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--out", default=str(results_dir("nystrom") / "exact_c_pass.md"))
    args = parser.parse_args()
    started = now()
    costs = pass_costs(args.n)
    fits = with_and_without(args.subsets, args.seeds, args.data_dir)
    body = [f"## The pass's cost (n = {args.n:,}, synthetic)", "",
            "`pass s`: the backend's `info['seconds']['exact_kernel_gram']` (C and, if on, "
            "the local part). `model products per pair`: "
            "`NystromOptions.pass_products_per_pair(m)` for these options; the budget is "
            f"{EXACT_DISSIMILARITY_BUDGET:.1e} products.", "", *costs,
            "", "## With the pass and with `\"auto\"` (default estimator, solver='nystrom')", "",
            "`pass`: where C came from in each fit (`exact`: the pass ran). `auto limit`: the "
            "default exact-C limit for the fit's kernels. NMI in points.", "", *fits]
    write_report("nystrom", "exact_c_pass", "The exact-C pass: cost per pair and what it buys",
                 "\n".join(body) + "\n", started=started, path=args.out)


if __name__ == "__main__":
    main()
