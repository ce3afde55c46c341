"""The anchor graph's Lanczos budget: the product cost it counts, against entries alone.

The graph's eigensolver (``mkrk_dask.estimators._anchor_graph``) runs Lanczos for at most the
work of a dense eigendecomposition of the anchors' matrix, then falls back to the dense
solver. It counts a Lanczos product as ``SPARSE_ENTRY_COST`` per stored entry plus
``LANCZOS_PRODUCT_COST`` for the product itself (ARPACK's reverse communication). Until git
cacc10e it counted the stored entries alone (the two constants at 1 and 0 here), which
allowed about a hundred times the dense work on sparse graphs whose eigenvalues pack
against 1: the anchors of one-column data make a path of many parts.

For each data set and seed, both budgets in turn (interleaved, so both see the same load):
``MKKMRK(k)`` and ``AnchorGraphClustering(k)``, their NMI and seconds a fit, the
graph stage's seconds (``timings_["graph"]``) and its share of the rest of the default's
fit (issue 48's budget: at most 1).

Usage (from ``benchmarks/``)::

    python bench_graph_lanczos.py            # 1-, 2- and 5-column blobs, tr11, digits: ~4 min
"""

from __future__ import annotations

import time
import warnings

import numpy as np

import mkrk_dask.estimators._anchor_graph as anchor_graph
from mkrk_dask import MKKMRK, AnchorGraphClustering
from mkrk_dask.metrics import normalized_mutual_info

from _common import BLOB_ROWS, dataset_seed_parser, now, positive_args, write_report
from bench_defaults_wide import load

BUDGETS = {"entries only (before cacc10e)": (1, 0),
           "entries and product (cacc10e)": (anchor_graph.SPARSE_ENTRY_COST,
                                             anchor_graph.LANCZOS_PRODUCT_COST)}
DATASETS = ("blobs:1", "blobs:2", "blobs:5", "tr11", "sklearn:digits")


def run(name: str, seeds: int) -> dict:
    views, y, _ = load(name, None)
    k = int(np.unique(y).size)
    rows = {b: {"default": [], "agc": [], "graph": [], "rest": []} for b in BUDGETS}
    saved = (anchor_graph.SPARSE_ENTRY_COST, anchor_graph.LANCZOS_PRODUCT_COST)
    try:
        for seed in range(seeds):
            for budget, constants in BUDGETS.items():
                anchor_graph.SPARSE_ENTRY_COST, anchor_graph.LANCZOS_PRODUCT_COST = constants
                start = time.perf_counter()
                model = MKKMRK(k, random_state=seed).fit(views)
                wall = time.perf_counter() - start
                rows[budget]["default"].append((normalized_mutual_info(y, model.labels_), wall))
                rows[budget]["graph"].append(model.timings_["graph"])
                rows[budget]["rest"].append(wall - model.timings_["graph"])
                start = time.perf_counter()
                labels = AnchorGraphClustering(k, random_state=seed).fit(views).labels_
                rows[budget]["agc"].append((normalized_mutual_info(y, labels),
                                            time.perf_counter() - start))
                print(name, seed, budget, rows[budget]["default"][-1],
                      rows[budget]["agc"][-1], flush=True)
    finally:
        anchor_graph.SPARSE_ENTRY_COST, anchor_graph.LANCZOS_PRODUCT_COST = saved
    return {"n": int(views[0].shape[0]), "d": int(views[0].shape[1]), "k": k, "rows": rows}


def main() -> None:
    args = positive_args(dataset_seed_parser(__doc__.split("\n")[0], DATASETS, 3), "seeds")
    warnings.simplefilter("ignore")
    started = now()
    lines = [f"{args.seeds} seeds, the two budgets interleaved within each seed. blobs:d: "
             f"{BLOB_ROWS:,} rows of 3 Gaussian blobs in d columns, 4 apart. NMI in percent, "
             "mean over the seeds; seconds: mean of one fit; graph / rest: the default's "
             "graph stage over the rest of its fit.", "",
             "| data set | n x d | k | budget | default NMI | default s | graph s | "
             "graph / rest | AnchorGraphClustering NMI | its s |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for name in args.datasets:
        res = run(name, args.seeds)
        for budget, r in res["rows"].items():
            d_nmi, d_sec = np.mean(r["default"], axis=0)
            a_nmi, a_sec = np.mean(r["agc"], axis=0)
            share = np.mean(np.array(r["graph"]) / np.array(r["rest"]))
            lines.append(f"| {name} | {res['n']:,} x {res['d']:,} | {res['k']} | {budget} | "
                         f"{100 * d_nmi:.2f} | {d_sec:.2f} | {np.mean(r['graph']):.2f} | "
                         f"{share:.2f} | {100 * a_nmi:.2f} | {a_sec:.2f} |")
    path = write_report("defaults", "graph_lanczos", "The anchor graph's Lanczos budget",
                        "\n".join(lines), started=started)
    print(open(path).read())


if __name__ == "__main__":
    main()
