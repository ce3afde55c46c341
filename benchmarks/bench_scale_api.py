"""Nystrom MKKM-RK at scale through the public API, on synthetic data held in Zarr.

The data are written once, block by block, into Zarr arrays on local disk by a separate
process (``--data``, reused when it is there). The timed part is what a user runs::

    MKKMRK(...).fit([da.from_zarr(view) for view in views])

in a fresh process whose whole process tree's peak resident memory is sampled from start to
finish (imports, the embedded LocalCluster, the fit, the scores). Three scenarios:

- ``multiview``: 4 views of d = 64, m = 12 kernels (per view Gaussian c = 0.1, 1 and a
  polynomial), the paper's fip and lambda; ``scale_nystrom_r500.md``'s configuration, which
  called the backend internals on data persisted in memory.
- ``default``: the same 4 views in float32, ``MKKMRK(10, random_state=seed)`` with every
  other parameter at its default (issue 17's n = 10^6 with the default dictionary).
- ``wide``: one view of d = 256 in float32 (2 GB at n = 2 * 10^6), 3 kernels, the estimator's
  defaults otherwise.

    python benchmarks/bench_scale_api.py --scenario multiview --n 100000 1000000 --landmarks 500
    python benchmarks/bench_scale_api.py --scenario wide --n 2000000
    python benchmarks/bench_scale_api.py --scenario default --n 1000000
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from _common import dir_nbytes, fmt_bytes, measured_child, now, write_report

K = 10
SCENARIOS = {
    # view layout of make_multiview_blobs, data dtype, kernels
    "multiview": dict(views=dict(n_informative=2, n_noise=1, n_redundant=1, n_features=64),
                      dtype="float64",
                      kernels=[f"{k}@{v}" for v in range(4)
                               for k in ("gaussian(c=0.1)", "gaussian(c=1)",
                                         "polynomial(a=1,b=2)")]),
    # the multiview layout in float32 (10 GB at n = 10^7) with the estimator's defaults
    # throughout (kernels="auto", ...); also bench_scaling.py's data
    "default": dict(views=dict(n_informative=2, n_noise=1, n_redundant=1, n_features=64),
                    dtype="float32", kernels=None),
    "wide": dict(views=dict(n_informative=1, n_noise=0, n_redundant=0, n_features=256),
                 dtype="float32",
                 kernels=["gaussian(c=0.1)", "gaussian(c=1)", "polynomial(a=1,b=2)"]),
}
BLOCK = 65536


def data_path(root: Path, scenario: str, n: int, seed: int) -> Path:
    return root / f"{scenario}-n{n}-seed{seed}"


def generate(path: Path, scenario: str, n: int, seed: int) -> None:
    """Write the views and labels into ``path`` (one Zarr array each), block by block on a
    local cluster; a ``complete`` file marks a finished write."""
    import dask
    import dask.array as da
    import zarr
    from distributed import Client, LocalCluster

    from mkrk_dask.synthetic import make_multiview_blobs

    spec = SCENARIOS[scenario]

    def part(a, b):
        views, y, _ = make_multiview_blobs(n, K, random_state=seed, row_slice=(a, b),
                                           dtype=spec["dtype"], **spec["views"])
        return views, y

    starts = range(0, n, BLOCK)
    with LocalCluster(n_workers=1, threads_per_worker=2, processes=False,
                      dashboard_address="127.0.0.1:0",
                      worker_dashboard_address="127.0.0.1:0") as cluster, Client(cluster):
        parts = [dask.delayed(part, nout=2)(a, min(a + BLOCK, n)) for a in starts]
        d = spec["views"]["n_features"]
        n_views = sum(spec["views"][key] for key in ("n_informative", "n_noise", "n_redundant"))
        targets = []
        for v in range(n_views):
            blocks = [da.from_delayed(p[0][v], shape=(min(a + BLOCK, n) - a, d),
                                      dtype=spec["dtype"]) for a, p in zip(starts, parts,
                                                                           strict=True)]
            targets.append(da.concatenate(blocks).rechunk((BLOCK, d)))
        labels = da.concatenate([da.from_delayed(p[1], shape=(min(a + BLOCK, n) - a,),
                                                 dtype=np.int64)
                                 for a, p in zip(starts, parts, strict=True)])
        stores = [zarr.create_array(str(path / f"view{v}.zarr"), shape=(n, d),
                                    chunks=(BLOCK, d), dtype=spec["dtype"], overwrite=True)
                  for v in range(n_views)]
        y_store = zarr.create_array(str(path / "y.zarr"), shape=(n,), chunks=(BLOCK,),
                                    dtype=np.int64, overwrite=True)
        da.store(targets + [labels], stores + [y_store], lock=False)
    (path / "complete").write_text("ok\n")


def label_scores(path: Path, labels: np.ndarray) -> tuple[float, float]:
    """NMI and ACC (percent) of ``labels`` against the generated data's ``y.zarr``."""
    import zarr

    from mkrk_dask.metrics import clustering_accuracy, normalized_mutual_info

    y = zarr.open_array(str(path / "y.zarr"), mode="r")[...]
    return 100 * normalized_mutual_info(y, labels), 100 * clustering_accuracy(y, labels)


def add_data_arguments(parser: argparse.ArgumentParser, tmp_help: str) -> None:
    """The options both scale scripts share, so that they find the same generated data."""
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--data", default="/tmp/mkrk-bench-data",
                        help="folder of the generated Zarr data (reused)")
    parser.add_argument("--tmp", default=None, help=tmp_help)


def fit(path: Path, scenario: str, args) -> dict:
    """The timed run (in its own process): the public API on the Zarr arrays."""
    import dask.array as da

    from mkrk_dask.estimators import ESTIMATORS

    spec = SCENARIOS[scenario]
    views = sorted(path.glob("view*.zarr"))
    params = dict(kernels=spec["kernels"], solver="nystrom", random_state=args.seed,
                  n_init=args.n_init,
                  backend_options={"n_landmarks": args.landmarks, "dtype": "float32"})
    if scenario == "default":
        params = dict(random_state=args.seed)
        if args.gram_rows != "auto":  # the one option bench_scaling may set (issue 77)
            params["backend_options"] = {"gram_rows": int(args.gram_rows)}
    if scenario == "multiview" and args.method == "MKKM-RK":
        # scale_nystrom_r500.md's configuration, through the estimator.
        params.update(dissimilarity="fip", lam_scaling="none", lam=args.lam,
                      final_step="spectral", tol=1e-6, tol_mode="relative",
                      backend_options={**params["backend_options"],
                                       "exact_distance_max_n": args.exact_distance_max_n})
    out: dict = {"params": {k: v for k, v in params.items() if k != "kernels"}}
    store_name = "factors" if scenario != "default" else "store"
    with tempfile.TemporaryDirectory(dir=args.tmp) as tmp:
        t0 = time.perf_counter()
        X = [da.from_zarr(str(v)) for v in views]
        model = ESTIMATORS[args.method](K, store=Path(tmp) / f"{store_name}.zarr", **params).fit(
            X if len(X) > 1 else X[0])
        out["fit"] = time.perf_counter() - t0
        out["store_bytes"] = dir_nbytes(tmp)
    nmi, acc = label_scores(path, model.labels_)
    out.update(timings={k: float(v) for k, v in model.timings_.items()},
               n_iter=int(model.n_iter_), weights=np.round(model.weights_, 4).tolist(),
               h_steps=int(getattr(model, "n_h_steps_", model.n_iter_)),
               nmi=nmi, acc=acc, expected=getattr(model.plan_, "expected_seconds", None),
               missed=float(getattr(model, "nystrom_missed_fraction_", 0.0)),
               solver=model.solver_, kernels=[s.name for s in model.kernel_specs_]
               if hasattr(model, "kernel_specs_") else None,
               ranks=np.asarray(getattr(model, "nystrom_ranks_", [])).tolist())
    return out


def measured_fit(path: Path, scenario: str, argv: list[str], mmap_threshold: int = 0,
                 timeout: float | None = None) -> dict:
    """Run :func:`fit` in a fresh interpreter; sample its process tree's peak RSS. With
    ``mmap_threshold``, glibc maps every allocation above it on its own (and returns it when
    freed), instead of keeping freed memory in its heaps. A run stopped after ``timeout``
    seconds returns ``{"timed_out": True, ...}``."""
    cmd = [sys.executable, __file__, "--child", str(path), "--scenario", scenario, *argv]
    env = dict(os.environ)
    if mmap_threshold:
        env["MALLOC_MMAP_THRESHOLD_"] = str(mmap_threshold)
    with tempfile.NamedTemporaryFile("r", suffix=".json") as result:
        run = measured_child([*cmd, "--result", result.name], env=env, timeout=timeout)
        if run["timed_out"]:
            return dict(timed_out=True, peak_rss=run["peak_rss"], process=run["wall"])
        if run["code"]:
            raise SystemExit(f"the fit at {path} failed (exit {run['code']})")
        out = json.load(open(result.name))
    if "error" in out and timeout is None:
        raise SystemExit(f"the fit at {path} failed: {out['error']}")
    out.update(peak_rss=run["peak_rss"], process=run["wall"], timed_out=False)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenario", choices=sorted(SCENARIOS), default="multiview")
    parser.add_argument("--n", type=int, nargs="*", default=[100_000, 1_000_000])
    parser.add_argument("--landmarks", type=int, default=500)
    parser.add_argument("--lam", type=float, default=2.0**-10)
    parser.add_argument("--n-init", type=int, default=3)
    parser.add_argument("--method", choices=("MKKM-RK", "SimpleMKKM"), default="MKKM-RK",
                        help="the estimator timed (its defaults beside the scenario's)")
    parser.add_argument("--gram-rows", default="auto",
                        help="the default scenario's Nystrom gram_rows (default: auto)")
    parser.add_argument("--exact-distance-max-n", type=int, default=50_000,
                        help="largest n with the exact largest pairwise distance")
    add_data_arguments(parser, "folder for the factor store")
    parser.add_argument("--report", default=None,
                        help="report name (default scale_api_<scenario>)")
    parser.add_argument("--mmap-threshold", type=int, nargs="*", default=[],
                        help="also run with MALLOC_MMAP_THRESHOLD_ set to each of these bytes")
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--result", default=None, help=argparse.SUPPRESS)
    args, _ = parser.parse_known_args()
    if args.child:
        try:
            out = fit(Path(args.child), args.scenario, args)
        except Exception as exc:  # reported by the parent (e.g. a problem that fits nowhere)
            out = {"error": f"{type(exc).__name__}: {exc}"}
        Path(args.result).write_text(json.dumps(out))
        return
    started = now()
    passthrough = [a for flag in ("--landmarks", "--lam", "--n-init", "--seed",
                                  "--exact-distance-max-n", "--method")
                   for a in (flag, str(getattr(args, flag[2:].replace("-", "_"))))]
    if args.tmp:
        passthrough += ["--tmp", args.tmp]
    rows, details = [], []
    for n in args.n:
        path = data_path(Path(args.data), args.scenario, n, args.seed)
        if not (path / "complete").exists():
            t0 = time.perf_counter()
            generate(path, args.scenario, n, args.seed)
            print(f"generated {path} in {time.perf_counter() - t0:.0f} s", flush=True)
        for threshold in [0] + args.mmap_threshold:
            r = measured_fit(path, args.scenario, passthrough, threshold)
            t = r["timings"]
            glibc = f"{threshold:,}" if threshold else "default"
            rows.append(
                f"| {n:,} | {glibc} | {fmt_bytes(dir_nbytes(path))} | {r['process']:.0f} | "
                f"{r['fit']:.0f} | {t['build']:.0f} | {t['total']:.1f} ({r['n_iter']} it) | "
                f"{t['embedding']:.0f} | {t['kmeans']:.0f} | {fmt_bytes(r['peak_rss'])} | "
                f"{fmt_bytes(r['store_bytes'])} | {100 * r['missed']:.1f}% | "
                f"{r['nmi']:.2f} / {r['acc']:.2f} |")
            details.append(f"- n = {n:,}, glibc mmap threshold {glibc}: phases (s) "
                           f"{ {k: round(v, 1) for k, v in t.items()} }; weights "
                           f"{r['weights']}; estimator parameters {r['params']}")
            print(rows[-1], flush=True)
    spec = SCENARIOS[args.scenario]
    body = (
        f"Scenario `{args.scenario}`: synthetic `make_multiview_blobs` (k = {K}, views "
        f"{spec['views']}, {spec['dtype']}), written beforehand into Zarr arrays on local disk "
        f"(chunks of {BLOCK:,} rows), then `MKKMRK(...).fit` on `da.from_zarr` of every view "
        "in a fresh Python process with the estimator's embedded LocalCluster (threads, "
        + (f"2 cores); kernels {spec['kernels']}; {args.landmarks} Nystrom landmarks per "
           "kernel, factors in float32 in a temporary Zarr store on local disk.\n\n"
           if spec["kernels"] else
           "2 cores); every other parameter at its default (kernels, landmarks, dtype), the "
           "store in a temporary folder on local disk.\n\n")
        + "Process s: the child process from start to exit (imports, cluster start, fit, "
        "scores). Fit s: `MKKMRK.fit` alone, split into `timings_`'s build (scales, "
        "landmarks, the factor and Gram pass), loop (the alternating iterations), embedding "
        "(final eigenpairs and H pass) and k-means. Peak RSS: the sum over the child's "
        "process tree, sampled every 0.1 s from outside. Missed: "
        "`nystrom_missed_fraction_`. glibc mmap threshold: `MALLOC_MMAP_THRESHOLD_` in the "
        "child's environment (default: not set, "
        "glibc's dynamic threshold, under which freed temporaries of up to 32 MiB stay in its "
        "heaps).\n\n"
        "| n | glibc mmap threshold | data on disk | process s | fit s | build s | loop s | "
        "embedding s | k-means s | peak RSS | factor store | missed | NMI / ACC |\n"
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|\n"
        + "\n".join(rows) + "\n\n" + "\n".join(details))
    path = write_report("scale", args.report or f"scale_api_{args.scenario}",
                        f"Nystrom at scale through MKKMRK.fit on Zarr input ({args.scenario})",
                        body, started=started)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
