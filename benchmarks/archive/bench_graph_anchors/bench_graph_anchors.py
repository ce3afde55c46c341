"""The default's final graph at several anchor caps: quality and cost, in one run.

The default refines its k-means partition by spectral clustering on the anchor graph of the
final rows, with at most :data:`mkrk_dask.plan.final_choice.GRAPH_ANCHORS` anchors (one per two
rows).
Below twice the cap every row pair has its anchor and the cap does nothing; above it the
cap decides how finely the graph follows the rows, and what the graph costs. This benchmark
fits ``MKKMRK(k)`` on the data sets with more rows than twice the smallest cap, for each cap
(``--caps``), over the seeds, and reports for each: the mean NMI, the wall time of a fit,
the graph stage's time (``timings_["graph"]``) and its share of the rest of the fit (the
issue 48 budget: what the default adds on top of one MKKM-RK fit costs at most as much as
that fit). Caps are interleaved within each seed, so that each sees the same load.

It sets the module constant ``mkrk_dask.plan.final_choice.GRAPH_ANCHORS`` for each cap (the plan
reads it when it is made; it is no parameter of the estimator).

Usage::

    python benchmarks/archive/bench_graph_anchors/bench_graph_anchors.py   # usps, fashion, spam
    python benchmarks/archive/bench_graph_anchors/bench_graph_anchors.py \
        --datasets blobs:2:50000 blobs:10:20000 --caps 500 1000 2000 \
        --report graph_anchors_blobs   # many rows of few columns

The first (usps, Fashion-MNIST, spam) takes about 10 min.

``blobs:d:n`` is n rows of three Gaussian blobs in d columns (``_common.blob_data``).
"""

from __future__ import annotations

import sys
from pathlib import Path

# An archived study (benchmarks/README.md, "Archive"): benchmarks/ and the other studies importable
sys.path.insert(1, str(Path(__file__).resolve().parents[2]))
sys.path.extend(str(p) for p in sorted(Path(__file__).resolve().parents[1].glob("bench_*")))

import time
import warnings

import numpy as np

import mkrk_dask.plan.final_choice as plan_module
from mkrk_dask import MKKMRK

from _common import dataset_seed_parser, now, positive_args, write_report
from bench_defaults_wide import _score, load

DATASETS = ("usps", "fashion_mnist", "kernlab:spam")


def run(name: str, caps: list[int], seeds: int) -> dict | None:
    loaded = load(name, None)
    if loaded is None:
        return None
    views, y, _ = loaded
    k = len(np.unique(y))
    rows = {cap: [] for cap in caps}
    kept = dict.fromkeys(caps, 0)
    saved = plan_module.GRAPH_ANCHORS
    try:
        for seed in range(seeds):
            for cap in caps:
                plan_module.GRAPH_ANCHORS = cap
                start = time.perf_counter()
                model = MKKMRK(k, random_state=seed).fit(views)
                wall = time.perf_counter() - start
                graph = model.timings_["graph"]
                rows[cap].append((_score(y, model.labels_)[0], wall, graph))
                kept[cap] += model.final_clustering_ == "graph"
                print(name, cap, seed, rows[cap][-1], model.plan_.graph_anchors, flush=True)
    finally:
        plan_module.GRAPH_ANCHORS = saved
    out = {}
    for cap in caps:
        nmi, wall, graph = (np.array(col) for col in zip(*rows[cap], strict=True))
        out[cap] = {"nmi": float(nmi.mean()), "per_seed": nmi.round(2).tolist(),
                    "wall": float(wall.mean()), "graph": float(graph.mean()),
                    "share": float(np.mean(graph / (wall - graph))), "kept": kept[cap]}
    return {"n": int(views[0].shape[0]), "k": k, "caps": out}


def main() -> None:
    parser = dataset_seed_parser(__doc__.split("\n")[0], DATASETS, 5)
    parser.add_argument("--caps", nargs="+", type=int, default=[1000, 2000, 3000])
    parser.add_argument("--report", default="graph_anchors",
                        help="the report's name in results/defaults (default: %(default)s)")
    args = positive_args(parser, "caps", "seeds")
    warnings.simplefilter("ignore")
    started = now()
    lines = [f"`MKKMRK(k).fit` with `mkrk_dask.plan.GRAPH_ANCHORS` set to each cap (the "
             f"library's: {plan_module.GRAPH_ANCHORS}); {args.seeds} seeds, caps interleaved "
             "within each seed. NMI in percent, mean over the seeds; seconds: mean of one "
             "fit; graph / rest: the graph stage's time over the rest of the fit (issue "
             "48's budget: at most 1); kept: fits whose graph partition was kept.", "",
             "| data set | n | k | cap | anchors | NMI | every seed | fit s | graph s | "
             "graph / rest | kept |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    for name in args.datasets:
        res = run(name, args.caps, args.seeds)
        if res is None:
            lines.append(f"| {name} | - | - | - | - | skipped: not on this machine | "
                         "| | | | |")
            continue
        for cap, r in res["caps"].items():
            anchors = min(cap, res["n"] // plan_module.GRAPH_ROWS_PER_ANCHOR)
            lines.append(f"| {name} | {res['n']:,} | {res['k']} | {cap:,} | {anchors:,} | "
                         f"{r['nmi']:.2f} | {', '.join(f'{v:.2f}' for v in r['per_seed'])} "
                         f"| {r['wall']:.1f} | {r['graph']:.1f} | {r['share']:.2f} | "
                         f"{r['kept']} of {args.seeds} |")
    path = write_report("defaults", args.report, "The default's final graph at several "
                        "anchor caps", "\n".join(lines), started=started)
    print(open(path).read())


if __name__ == "__main__":
    main()
