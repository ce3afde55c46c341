"""USPS (11,000 x 256, the paper's 12 kernels) end to end with the blockwise backend.

Measures, in one run: the store build, the Gram (C) pass, every iteration of the alternating
loop, the store's size on disk, the peak resident memory of the whole process tree, the bytes
read from the store per iteration, and the disk's own read rate (cold, after evicting the
files from the page cache) and the page cache's (warm).

    python benchmarks/bench_blockwise_usps.py      # full USPS, report in results/blockwise/
    python benchmarks/bench_blockwise_usps.py --n 2000 --name blockwise_usps_smoke

Not run in CI. Needs ../shared/datasets/usps.npz (or MKRK_DATASETS) and ~12 GB of free disk
for the store (``--store``; deleted afterwards unless ``--keep``).
"""

from __future__ import annotations

import argparse
import shutil
import time
from pathlib import Path

import numpy as np

from mkrk_dask.assignment import assign_clusters
from mkrk_dask.backends.blockwise import BlockwiseBackend
from mkrk_dask.datasets import load_dataset
from mkrk_dask.kernels import paper_kernels
from mkrk_dask.loop import solve
from mkrk_dask.metrics import clustering_scores

from _common import (
    PeakRSS,
    dir_nbytes,
    evict_from_page_cache,
    fmt_bytes,
    now,
    read_rate,
    write_report,
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=None, help="subset of USPS rows (default all)")
    parser.add_argument("--store", default="/tmp/mkrk-bench-usps/kernels.zarr")
    parser.add_argument("--keep", action="store_true", help="keep the store afterwards")
    parser.add_argument("--chunk-size", type=int, default=None)
    parser.add_argument("--dtype", default="float64")
    parser.add_argument("--lam", type=float, default=2.0**-15,
                        help="lambda (default: the library's, 2^-15)")
    parser.add_argument("--max-iter", type=int, default=100)
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--products", default="combined", choices=["fused", "combined"])
    parser.add_argument("--name", default="blockwise_usps")
    args = parser.parse_args()
    started = now()

    from distributed import Client, LocalCluster

    rss = PeakRSS().start()
    data = load_dataset("usps", subset=args.n)
    X, y = data.X, data.y
    k = len(np.unique(y))
    n = X.shape[0]
    store = Path(args.store)
    if store.exists():
        shutil.rmtree(store)
    cluster = LocalCluster(n_workers=1, threads_per_worker=args.threads, processes=False,
                           dashboard_address="127.0.0.1:0",
                           worker_dashboard_address="127.0.0.1:0")
    client = Client(cluster)
    lines: list[str] = []
    try:
        t0 = time.perf_counter()
        backend = BlockwiseBackend.from_views([X], paper_kernels(), store=store,
                                              scheduler=client, chunk_size=args.chunk_size,
                                              dtype=args.dtype, products=args.products)
        build_s = time.perf_counter() - t0
        rss_build = rss.peak
        store_bytes = dir_nbytes(store)
        kernel_bytes = dir_nbytes(store / "kernels")
        gram_from_build = backend.gram()

        # Disk vs page cache: read the kernel files cold (evicted), then warm.
        sample = min(kernel_bytes, 3 * 2**30)
        cold_rate, cold_bytes, cold_s = read_rate(store / "kernels", cold=True, max_bytes=sample)
        warm_rate, warm_bytes, warm_s = read_rate(store / "kernels", cold=False,
                                                  max_bytes=cold_bytes)

        # The C pass: one full read of the store (cold: evicted first).
        evict_from_page_cache(store)
        t0 = time.perf_counter()
        backend._gram_pass()
        gram_s = time.perf_counter() - t0
        gram_diff = (np.abs(backend.gram() - gram_from_build).max()
                     / np.abs(gram_from_build).max())

        # The fit, starting with a cold page cache.
        evict_from_page_cache(store)
        per_iter: list[dict] = []
        def full_passes() -> float:
            p = backend.passes
            # a product on the combined kernel reads 1/m of the store
            return (p["apply"] + p["combine"] + p["quad"] + p["apply_combined"]
                    / backend.n_kernels)

        state = {"t": time.perf_counter(), "apply": full_passes()}

        def callback(info) -> None:
            now = time.perf_counter()
            passes = full_passes() - state["apply"]
            per_iter.append(dict(it=info.iteration, seconds=now - state["t"], passes=passes,
                                 objective=info.objective, gap=info.qp_relative_gap,
                                 restarts=backend.eigen_info.get("restarts"),
                                 residual=backend.eigen_info.get("residual")))
            state.update(t=now, apply=full_passes())
            print(f"iter {per_iter[-1]}", flush=True)

        t0 = time.perf_counter()
        result = solve(backend, k, args.lam, callback=callback, max_iter=args.max_iter)
        fit_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        labels = assign_clusters(backend.embedding(result.top), k, random_state=0)
        kmeans_s = time.perf_counter() - t0
        scores = clustering_scores(y, labels)
        chunk = backend.chunk_size
        pass_counts = dict(backend.passes)
        backend.close()
    finally:
        client.close()
        cluster.close()
        peak = rss.stop()
        if not args.keep and store.exists():
            shutil.rmtree(store)

    total_passes = sum(r["passes"] for r in per_iter)
    lines += [
        "## Setup",
        "",
        f"- data: USPS, n = {n}, d = {X.shape[1]}, k = {k}; the paper's 12 kernels; "
        f"lambda = {args.lam:g}, fip; store dtype {args.dtype}, chunks (1, {chunk}, {chunk})",
        f"- Dask: in-process LocalCluster, 1 worker, {args.threads or 'all'} threads; "
        f"store at `{store}`",
        "",
        "## Results",
        "",
        "| quantity | value |",
        "|---|---|",
        f"| build (kernels -> Zarr, incl. max-distance pass and Gram/traces) | {build_s:.1f} s |",
        f"| store size on disk | {fmt_bytes(store_bytes)} ({store_bytes:,} bytes) |",
        f"| C pass (one cold read of the store -> Gram, traces) | {gram_s:.1f} s "
        f"({fmt_bytes(kernel_bytes / gram_s)}/s); agrees with the build's Gram to "
        f"{gram_diff:.1e} |",
        f"| disk read rate, cold (page cache evicted; {fmt_bytes(cold_bytes)} read) | "
        f"{fmt_bytes(cold_rate)}/s |",
        f"| page-cache read rate, warm (same files again) | {fmt_bytes(warm_rate)}/s |",
        f"| fit: {result.n_iter} iterations ({'converged' if result.converged else 'max_iter'})"
        f" | {fit_s:.1f} s |",
        f"| store passes in the fit (full-store equivalents) | {total_passes:.2f} "
        f"({fmt_bytes(total_passes * kernel_bytes)} read); pass counts {pass_counts} |",
        f"| final k-means (10 restarts) | {kmeans_s:.1f} s |",
        f"| **peak RSS of the whole process tree** | **{fmt_bytes(peak)}** "
        f"(after the build: {fmt_bytes(rss_build)}) |",
        f"| ACC / NMI / purity | {scores['acc']:.4f} / {scores['nmi']:.4f} / "
        f"{scores['purity']:.4f} |" if "acc" in scores else f"| scores | {scores} |",
        "",
        "## Per iteration",
        "",
        "| iter | seconds | store passes (full-store equiv.) | bytes read | effective read rate "
        "| eigensolver restarts | residual | objective | QP rel. gap |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in per_iter:
        read = r["passes"] * kernel_bytes
        lines.append(f"| {r['it']} | {r['seconds']:.1f} | {r['passes']:.2f} | {fmt_bytes(read)} | "
                     f"{fmt_bytes(read / r['seconds'])}/s | {r['restarts']} | "
                     f"{r['residual']:.1e} | {r['objective']:.10g} | {r['gap']:.1e} |")
    lines += [
        "",
        f"Weights: {np.array2string(result.weights, precision=4, max_line_width=200)}",
        "",
        "## Reading the figures",
        "",
        f"- H-step mode `products={args.products!r}`. `fused`: every product K_w V reads the "
        f"whole kernel array once ({fmt_bytes(kernel_bytes)}) and yields every K_p V too (no "
        "extra pass for tr(H^T K_p H)). `combined`: per iteration one pass over the m kernels "
        "writes K_w to a scratch array, the eigensolver's products read only K_w (1/m of the "
        "store, counted as 1/m pass), and one pass gives every tr(H^T K_p H).",
        "- The fit starts with the store evicted from the page cache. The machine's RAM "
        f"({fmt_bytes(__import__('psutil').virtual_memory().total)}) can cache much of the "
        "store, so later passes are partly served from memory: compare each iteration's "
        "effective read rate with the cold disk rate and the warm page-cache rate above. Page "
        "cache is not part of any process's RSS.",
    ]
    path = write_report("blockwise", args.name, f"Blockwise backend on USPS (n = {n})",
                        "\n".join(lines),
                        started=started)
    print(path.read_text())


if __name__ == "__main__":
    main()
