"""Time and peak memory against n: MKKM-RK's defaults beside the one-kernel peers (issue 17).

For every n, synthetic multi-view data from the project's generator (``bench_scale_api.py``'s
``default`` layout: k = 10, 4 views of 64 features in float32) are written once into Zarr on
local disk. Then each method runs in a fresh process, end to end from the Zarr arrays to the
labels, while its whole process tree's peak RSS is sampled from outside:

- ``MKKM-RK``: ``MKKMRK(10, random_state=seed).fit([da.from_zarr(v) for v in views])``, every
  other parameter at its default (the embedded LocalCluster);
- ``SimpleMKKM``: ``SimpleMKKM(10, random_state=seed)`` the same way (issue 47), so that its
  time and memory stand beside MKKM-RK's from one run;
- ``Nystroem+KMeans``: scikit-learn ``Nystroem(rbf, n_components=min(n, 1000))`` and
  ``KMeans(10)`` on the views side by side, read into memory (rbf gamma = 1 / the median
  squared distance of a 2,000-row sample, as in ``bench_defaults.py``);
- ``dask-ml Spectral``: dask-ml's ``SpectralClustering(10)`` with the same gamma and its
  defaults otherwise (100 Nystrom components), on the views side by side as one dask array
  read lazily from Zarr, under a LocalCluster (threads, 2 cores). Its own k-means|| fails
  under the installed dask (a KeyError in its graph), so its n x k embedding is clustered by
  scikit-learn's ``KMeans(10)`` (``assign_labels`` accepts an estimator);
- ``KMeans``: scikit-learn ``KMeans(10)`` on the views side by side, in memory;
- ``AnchorGraph``: the library's ``AnchorGraphClustering(10, random_state=seed)`` on the Zarr
  views as they are (one anchor graph per view, averaged), its defaults otherwise, under a
  LocalCluster (threads, 2 cores) as its current client.

A method is stopped after ``--time-limit`` seconds (``--mkrk-time-limit`` for MKKM-RK) and is
then not run at larger n. A method that holds the data in memory is not run where its
estimated footprint exceeds ``--memory-budget``. The report gives each row, the least-squares
slope of log time against log n per method, and a log-log figure (``scaling.png``).

    python benchmarks/bench_scaling.py --n 10000 100000 1000000 10000000

dask-ml is not a dependency of the library; install it beside it to run its rows
(``pip install dask-ml``); without it they are reported as not installed.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from _common import (
    dir_nbytes,
    fmt_bytes,
    measured_child,
    median_rbf_gamma,
    now,
    results_dir,
    write_report,
)
from bench_scale_api import add_data_arguments, data_path, generate, label_scores, measured_fit

K = 10
SCENARIO = "default"
#: the library's estimators, timed by bench_scale_api.measured_fit with their defaults
OURS = ("MKKM-RK", "SimpleMKKM")
METHODS = (*OURS, "Nystroem+KMeans", "dask-ml Spectral", "KMeans", "AnchorGraph")
NYSTROEM_COMPONENTS = 1000
# Bytes per row held in memory (float32): the 256 features, plus for Nystroem the 1000
# features and the copy KMeans may make of them; a floor, so the budget errs on the safe side.
ROW_BYTES = {"KMeans": 2 * 256 * 4, "Nystroem+KMeans": 256 * 4 + 2 * NYSTROEM_COMPONENTS * 4}


def _views(path: Path) -> list[Path]:
    return sorted(path.glob("view*.zarr"))


def _gram_rows(text: str) -> str:
    """``--gram-rows``: "auto" or a positive integer, refused in one line otherwise."""
    if text != "auto" and not (text.isdigit() and int(text) > 0):
        raise argparse.ArgumentTypeError(f"{text!r} is not 'auto' or a positive integer")
    return text


def peer(method: str, path: Path, seed: int) -> dict:
    """One peer method end to end, in this (child) process: read, fit, labels."""
    import zarr
    from sklearn.cluster import KMeans

    t0 = time.perf_counter()
    if method == "AnchorGraph":
        from distributed import Client, LocalCluster

        from mkrk_dask import AnchorGraphClustering

        with LocalCluster(n_workers=1, threads_per_worker=2, processes=False,
                          dashboard_address="127.0.0.1:0",
                          worker_dashboard_address="127.0.0.1:0") as cluster, Client(cluster):
            views = [zarr.open_array(str(v), mode="r") for v in _views(path)]
            labels = AnchorGraphClustering(K, random_state=seed).fit(views).labels_
    elif method == "dask-ml Spectral":
        import dask.array as da
        from dask_ml.cluster import SpectralClustering
        from distributed import Client, LocalCluster

        with LocalCluster(n_workers=1, threads_per_worker=2, processes=False,
                          dashboard_address="127.0.0.1:0",
                          worker_dashboard_address="127.0.0.1:0") as cluster, Client(cluster):
            X = da.concatenate([da.from_zarr(str(v)) for v in _views(path)], axis=1)
            X = X.rechunk({1: -1})
            # dask-ml's own k-means|| fails under this dask (a KeyError in its graph), so its
            # embedding (n x k) is clustered by scikit-learn's KMeans, which it accepts.
            model = SpectralClustering(K, gamma=median_rbf_gamma(X), random_state=seed,
                                       assign_labels=KMeans(K, random_state=seed))
            labels = model.fit(X).labels_
            labels = np.asarray(labels.compute() if hasattr(labels, "compute") else labels)
    else:
        X = np.hstack([zarr.open_array(str(v), mode="r")[...] for v in _views(path)])
        if method == "Nystroem+KMeans":
            from sklearn.kernel_approximation import Nystroem

            X = Nystroem(kernel="rbf", gamma=median_rbf_gamma(X), random_state=seed,
                         n_components=min(X.shape[0], NYSTROEM_COMPONENTS)).fit_transform(X)
        labels = KMeans(K, random_state=seed).fit(X).labels_
    return {"fit": time.perf_counter() - t0, "labels": labels}


def run_peer(method: str, path: Path, seed: int, timeout: float) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        result = Path(tmp) / "result.json"
        run = measured_child([sys.executable, __file__, "--child", method, str(path),
                              "--seed", str(seed), "--result", str(result)], timeout=timeout)
        out = dict(peak_rss=run["peak_rss"], process=run["wall"], timed_out=run["timed_out"])
        if not run["timed_out"]:
            if run["code"]:
                return dict(out, failed=f"exit {run['code']}")
            out.update(json.loads(result.read_text()))
    return out


def _expected(r: dict) -> str:
    """The plan's expected seconds and their ratio to the fit's ``timings_['fit']`` (two
    cells), or two empty cells (a peer)."""
    if r.get("expected") is None:
        return " |"
    return f"{r['expected']:.1f} | {r['expected'] / r['timings']['fit']:.2f}"


def installed(module: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(module) is not None


def slope(points: list[tuple[int, float]]) -> float | None:
    """Least-squares slope of log(time) against log(n); None with fewer than two points."""
    if len(points) < 2:
        return None
    n, t = np.log(np.array(points, dtype=float)).T
    return float(np.polyfit(n, t, 1)[0])


def figure(series: dict[str, list[tuple[int, float]]], out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4.2))
    for method, points in series.items():
        if points:
            n, t = zip(*points, strict=True)
            s = slope(points)
            label = method + (f" (slope {s:.2f})" if s is not None else "")
            ax.loglog(n, t, "o-", label=label)
    ax.set_xlabel("n (samples)")
    ax.set_ylabel("end-to-end seconds")
    ax.set_title("Time against n (synthetic 4 x 64 views, k = 10)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out, dpi=120)
    plt.close(fig)


def _final_share(timings: dict) -> str:
    """The final partition's share of the fit (embedding, k-means, graph over
    ``timings_['fit']``: issue 77's bar is 25% at n >= 10^5)."""
    if not timings.get("fit"):
        return ""
    final = sum(timings.get(stage, 0.0) for stage in ("embedding", "kmeans", "graph"))
    share = final / timings["fit"]
    return f"; final partition (embedding + k-means + graph) {share:.1%} of the fit"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, nargs="*", default=[10_000, 100_000, 1_000_000])
    parser.add_argument("--methods", nargs="*", choices=METHODS, default=list(METHODS))
    parser.add_argument("--time-limit", type=float, default=900.0,
                        help="seconds after which a peer is stopped (and not run at larger n)")
    parser.add_argument("--mkrk-time-limit", type=float, default=1800.0)
    parser.add_argument("--memory-budget", type=float, default=12.0,
                        help="GiB; in-memory methods whose estimate exceeds it are not run")
    add_data_arguments(parser, "folder for MKKM-RK's store")
    parser.add_argument("--gram-rows", default="auto", type=_gram_rows,
                        help="MKKM-RK's Nystrom gram_rows (default: auto, the library's rule)")
    parser.add_argument("--report", default="scaling")
    parser.add_argument("--child", nargs=2, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--result", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        method, path = args.child
        try:
            out = peer(method, Path(path), args.seed)
            out["nmi"], out["acc"] = label_scores(Path(path), out.pop("labels"))
        except Exception as exc:  # reported by the parent
            out = {"error": f"{type(exc).__name__}: {exc}"}
        Path(args.result).write_text(json.dumps(out))
        return

    started = now()
    rows, details = [], []
    series: dict[str, list[tuple[int, float]]] = {m: [] for m in args.methods}
    stopped: dict[str, str] = {}
    measured: dict[tuple[int, str], dict] = {}
    mkrk_argv = (["--seed", str(args.seed), "--gram-rows", args.gram_rows]
                 + (["--tmp", args.tmp] if args.tmp else []))
    for n in sorted(args.n):
        path = data_path(Path(args.data), SCENARIO, n, args.seed)
        if not (path / "complete").exists():
            t0 = time.perf_counter()
            generate(path, SCENARIO, n, args.seed)
            print(f"generated {path} in {time.perf_counter() - t0:.0f} s", flush=True)
        on_disk = fmt_bytes(dir_nbytes(path))
        for method in args.methods:
            need = ROW_BYTES.get(method, 0) * n
            if method in stopped:
                why = stopped[method]
            elif method == "dask-ml Spectral" and not installed("dask_ml"):
                why = "dask-ml not installed"
            elif need > args.memory_budget * 2**30:
                why = (f"not run: needs about {fmt_bytes(need)} in memory "
                       f"(budget {args.memory_budget:g} GiB)")
            else:
                why = None
            if why:
                rows.append(f"| {n:,} | {method} | {why} | | | | | | |")
                print(rows[-1], flush=True)
                continue
            if method in OURS:
                r = measured_fit(path, SCENARIO, [*mkrk_argv, "--method", method],
                                 timeout=args.mkrk_time_limit)
                limit = args.mkrk_time_limit
            else:
                r = run_peer(method, path, args.seed, args.time_limit)
                limit = args.time_limit
            if r.get("timed_out"):
                stopped[method] = f"not run: stopped at a smaller n after {limit:.0f} s"
                rows.append(f"| {n:,} | {method} | stopped after {limit:.0f} s | | "
                            f"{fmt_bytes(r['peak_rss'])} | | | | |")
            elif r.get("failed") or r.get("error"):
                why = (r.get("error") or r["failed"]).splitlines()[0].replace("|", "/")
                stopped[method] = "not run: failed at a smaller n"
                rows.append(f"| {n:,} | {method} | failed: {why.split(':')[0]} (below) | | "
                            f"{fmt_bytes(r['peak_rss'])} | | | | |")
                details.append(f"- n = {n:,}: {method} failed: {why}")
            else:
                series[method].append((n, r["process"]))
                measured[(n, method)] = r
                rows.append(f"| {n:,} | {method} | {r['process']:.1f} | {r['fit']:.1f} | "
                            f"{fmt_bytes(r['peak_rss'])} | {r['nmi']:.2f} / {r['acc']:.2f} | "
                            f"{fmt_bytes(r['store_bytes']) if 'store_bytes' in r else ''} | "
                            f"{_expected(r)} |")
                if method in OURS:
                    details.append(
                        f"- n = {n:,}: {method} chose solver {r['solver']!r}, kernels "
                        f"{r['kernels']}, ranks {r['ranks']}; {r['n_iter']} iterations, "
                        f"{r['h_steps']} H-steps; phases (s) "
                        f"{ {k: round(v, 1) for k, v in r['timings'].items()} }"
                        f"{_final_share(r['timings'])}")
            print(rows[-1], flush=True)
        details.append(f"- n = {n:,}: data on disk {on_disk}")

    png = results_dir("scale") / f"{args.report}.png"
    png.parent.mkdir(parents=True, exist_ok=True)
    figure(series, png)
    slopes = [f"| {m} | {', '.join(f'{n:,}' for n, _ in pts) or '-'} | "
              f"{'-' if slope(pts) is None else f'{slope(pts):.2f}'} |"
              for m, pts in series.items()]
    ratios = [f"| {n:,} | {r['process'] / measured[(n, 'MKKM-RK')]['process']:.2f} | "
              f"{fmt_bytes(r['peak_rss'])} |"
              for (n, method), r in sorted(measured.items())
              if method == "SimpleMKKM" and (n, "MKKM-RK") in measured]
    simple = ("SimpleMKKM against MKKM-RK in this run (issue 47: at most 1.5x the time, at "
              "most 4 GB peak RSS):\n\n| n | process s SimpleMKKM / MKKM-RK | SimpleMKKM "
              "peak RSS |\n|---|---|---|\n" + "\n".join(ratios) + "\n\n") if ratios else ""
    big = [(n, t) for n, t in series.get("MKKM-RK", []) if n >= 100_000]
    big_slope = slope(big)
    body = (
        "Synthetic `make_multiview_blobs` data (k = 10; 4 views of 64 features: 2 informative, "
        "1 noise, 1 redundant; float32), written beforehand into Zarr on local disk. Each "
        "method runs in a fresh process, end to end from the Zarr arrays to the labels; the "
        "whole process tree's peak RSS is sampled every 0.1 s from outside. Process s: the "
        "child from start to exit (imports, cluster, read, fit, labels); fit s: from opening "
        "the data to the labels. Store: MKKM-RK's temporary store on disk (removed after). "
        "Expected s: the plan's expected seconds (`plan_.expected_seconds`, from its "
        "calibration on the sample it reads, in the fit's own process), then over the fit's "
        "`timings_['fit']`.\n\n"
        "| n | method | process s | fit s | peak RSS | NMI / ACC | store | expected s | "
        "expected / timings_['fit'] |\n"
        "|---|---|---|---|---|---|---|---|---|\n" + "\n".join(rows) + "\n\n"
        "Least-squares slope of log(process s) against log(n), over the n where the method "
        "ran:\n\n| method | n | slope |\n|---|---|---|\n" + "\n".join(slopes) + "\n\n"
        f"MKKM-RK's slope over n >= 100,000: "
        f"{'-' if big_slope is None else f'{big_slope:.2f}'} (issue 17: at most 1.1 between "
        f"10^5 and 10^7).\n\n" + simple + f"![time against n]({png.name})\n\n"
        + "\n".join(details))
    path = write_report("scale", args.report, "Time and peak memory against n: MKKM-RK's "
                        "defaults beside the one-kernel peers", body, started=started)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
