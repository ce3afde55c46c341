"""The final stage's share of one default fit at scale (issue 77): ``MKKMRK(10)`` on
bench_scaling.py's data (``default`` scenario of bench_scale_api.py: k = 10, 4 views of 64
float32 features in Zarr, generated into ``--data`` where missing), in this process with the
estimator's embedded LocalCluster. Prints ``timings_``, the wall and CPU seconds of the final
graph (``FinalPartition.graph_verdict``), the share of embedding + k-means + graph in
``timings_['fit']``, the NMI and ``inertia_``; ``--profile`` adds cProfile of the graph.

    python benchmarks/profile_final_stage.py --n 100000
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import tempfile
import time
from pathlib import Path

import dask.array as da
import zarr

from bench_scale_api import data_path, generate


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--data", default="/tmp/mkrk-bench-data")
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args()

    import mkrk_dask.estimators._final as final
    from mkrk_dask import MKKMRK
    from mkrk_dask.metrics import normalized_mutual_info

    path = data_path(Path(args.data), "default", args.n, args.seed)
    if not (path / "complete").exists():
        generate(path, "default", args.n, args.seed)
    profile = cProfile.Profile()
    verdict = final.FinalPartition.graph_verdict

    def timed(self, *a, **k):
        t, c = time.perf_counter(), time.process_time()
        if args.profile:
            profile.enable()
        try:
            return verdict(self, *a, **k)
        finally:
            if args.profile:
                profile.disable()
            print(f"graph: {time.perf_counter() - t:.2f} s wall, "
                  f"{time.process_time() - c:.2f} s CPU", flush=True)

    final.FinalPartition.graph_verdict = timed
    with tempfile.TemporaryDirectory() as tmp:
        X = [da.from_zarr(str(v)) for v in sorted(path.glob("view*.zarr"))]
        model = MKKMRK(10, random_state=args.seed, store=Path(tmp) / "store.zarr").fit(X)
    t = model.timings_
    print({k: round(float(v), 2) for k, v in t.items()})
    stage = t["embedding"] + t["kmeans"] + t["graph"]
    print(f"final stage {stage / t['fit']:.3f} of the fit ({(stage + t['inertia']) / t['fit']:.3f}"
          " with the inertia pass)")
    y = zarr.open_array(str(path / "y.zarr"), mode="r")[...]
    print(f"NMI {100 * normalized_mutual_info(y, model.labels_):.3f}, "
          f"inertia_ {model.inertia_!r}, final partition {model.final_clustering_}")
    print(model.plan_.decision("final partition").reason)
    if args.profile:
        out = io.StringIO()
        pstats.Stats(profile, stream=out).sort_stats("tottime").print_stats(20)
        print(out.getvalue())


if __name__ == "__main__":
    main()
