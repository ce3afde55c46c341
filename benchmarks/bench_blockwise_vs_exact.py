"""Blockwise vs exact backend on USPS subsets: time, peak memory, agreement of weights and labels.

Every (backend, n) runs in its own child process, whose whole process tree's peak RSS the parent
samples; the children save weights, labels and objective histories, which the parent compares.

    python benchmarks/bench_blockwise_vs_exact.py                    # n = 2000 4000 6000 8000
    python benchmarks/bench_blockwise_vs_exact.py --sizes 1000 --name blockwise_vs_exact_smoke

Not run in CI. Needs ../shared/datasets/usps.npz (or MKRK_DATASETS).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

import mkrk_dask

from _common import PeakRSS, fmt_bytes, now, write_report


def child(args: argparse.Namespace) -> None:
    """One fit; writes an .npz with the results and the phase timings."""
    from mkrk_dask.assignment import assign_clusters
    from mkrk_dask.backends.exact import ExactBackend
    from mkrk_dask.datasets import load_dataset
    from mkrk_dask.kernels import paper_kernels
    from mkrk_dask.loop import solve
    from mkrk_dask.metrics import clustering_scores

    data = load_dataset("usps", subset=args.n, random_state=0)
    k = len(np.unique(data.y))
    t0 = time.perf_counter()
    if args.backend == "exact":
        backend = ExactBackend.from_views([data.X], paper_kernels())
    else:
        from mkrk_dask.backends.blockwise import BlockwiseBackend

        backend = BlockwiseBackend.from_views([data.X], paper_kernels(), store=args.store,
                                              products=args.products)
    build = time.perf_counter() - t0
    try:
        result = solve(backend, k, args.lam)
        embedding = backend.embedding(result.top)
    finally:
        backend.close()
    fit = time.perf_counter() - t0 - build
    labels = assign_clusters(embedding, k, random_state=0)
    total = time.perf_counter() - t0
    scores = clustering_scores(data.y, labels)
    np.savez(args.out, weights=result.weights, labels=labels,
             history=result.objective_history, traces=result.traces, C=result.dissimilarity,
             times=np.array([build, fit, total]), scores=json.dumps(scores))


def report(args, rows, started, load_start, sizes_left):
    lines = [
        "## Setup",
        "",
        f"- USPS subsets (rows drawn uniformly, seed 0), the paper's 12 kernels, k = 10, "
        f"lambda = {args.lam:g}, fip, tol 1e-5 (absolute); final k-means seeded 0",
        "- exact: dense (m, n, n) in memory. blockwise: Zarr store in a temporary directory, "
        f"in-process LocalCluster (1 worker, threads = cores), products={args.products!r}",
        "- every fit runs in its own child process; peak RSS is that process tree's, sampled "
        "every 0.1 s; times are wall clock of the child (data loading included)",
        f"- load average (1, 5, 15 min) at the start: {load_start[0]:.1f}, {load_start[1]:.1f}, "
        f"{load_start[2]:.1f}; at the end: "
        + ", ".join(f"{x:.1f}" for x in os.getloadavg())
        + " (a shared 2-core machine: other jobs ran at the same time, times are noisy)",
        *([f"- note: {args.note}"] if args.note else []),
        *([f"- PARTIAL: sizes {sizes_left} not run yet (the report is rewritten after every "
           "size)"] if sizes_left else []),
        "",
        "## Results",
        "",
        "| n | exact time (build / fit) | blockwise time (build / fit) | exact peak RSS | "
        "blockwise peak RSS | iterations (e / b) | max abs weight diff | objective history "
        "max rel diff | C / traces rel diff | labels equal | ARI(exact, blockwise) | ACC e / b |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        e, b = r["e"], r["b"]
        acc_e = json.loads(str(e["scores"]))["acc"]
        acc_b = json.loads(str(b["scores"]))["acc"]
        lines.append(
            f"| {r['n']} | {e['wall']:.1f} s ({e['times'][0]:.1f} / {e['times'][1]:.1f}) | "
            f"{b['wall']:.1f} s ({b['times'][0]:.1f} / {b['times'][1]:.1f}) | "
            f"{fmt_bytes(e['peak'])} | {fmt_bytes(b['peak'])} | {r['iters'][0]} / "
            f"{r['iters'][1]} | {r['w']:.2e} | {r['hist']:.2e} | {r['C']:.1e} / {r['tr']:.1e} | "
            f"{r['equal']} | {r['ari']:.6f} | {acc_e:.4f} / {acc_b:.4f} |")
    path = write_report("blockwise", args.name, "Blockwise vs exact backend on USPS subsets",
                        "\n".join(lines), started=started)
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[2000, 4000, 6000, 8000])
    parser.add_argument("--lam", type=float, default=2.0**-10)
    parser.add_argument("--products", default="combined", choices=["fused", "combined"])
    parser.add_argument("--name", default="blockwise_vs_exact")
    parser.add_argument("--note", default="", help="a remark printed in the report")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--backend", help=argparse.SUPPRESS)
    parser.add_argument("--n", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    parser.add_argument("--store", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args)
        return
    started = now()
    load_start = os.getloadavg()
    work = Path(tempfile.mkdtemp(prefix="mkrk-bench-vs-exact-"))
    # The children import the library this process imported (a checkout on PYTHONPATH, say).
    library = str(Path(mkrk_dask.__file__).resolve().parent.parent)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [library] + ([os.environ["PYTHONPATH"]] if os.environ.get("PYTHONPATH") else [])))
    rows = []
    try:
        for n in args.sizes:
            runs = {}
            for backend in ("exact", "blockwise"):
                out = work / f"{backend}-{n}.npz"
                cmd = [sys.executable, __file__, "--child", "--backend", backend, "--n", str(n),
                       "--out", str(out), "--lam", repr(args.lam), "--products", args.products,
                       "--store", str(work / f"store-{n}.zarr")]
                proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL,
                                        stderr=open(work / f"{backend}-{n}.log", "w"))  # noqa: SIM115
                rss = PeakRSS(proc.pid).start()
                t0 = time.perf_counter()
                code = proc.wait()
                wall = time.perf_counter() - t0
                peak = rss.stop()
                if code != 0:
                    raise RuntimeError(f"{backend} n={n} failed:\n"
                                       + (work / f"{backend}-{n}.log").read_text()[-3000:])
                res = dict(np.load(out))
                res.update(wall=wall, peak=peak)
                runs[backend] = res
                shutil.rmtree(work / f"store-{n}.zarr", ignore_errors=True)
                print(f"n={n} {backend}: {wall:.1f}s peak {fmt_bytes(peak)}", flush=True)
            e, b = runs["exact"], runs["blockwise"]
            from sklearn.metrics import adjusted_rand_score

            same_len = len(e["history"]) == len(b["history"])
            rows.append(dict(
                n=n, e=e, b=b,
                w=float(np.abs(e["weights"] - b["weights"]).max()),
                ari=adjusted_rand_score(e["labels"], b["labels"]),
                equal=bool(np.array_equal(e["labels"], b["labels"])),
                hist=(float(np.max(np.abs(e["history"] - b["history"]) / np.abs(e["history"])))
                      if same_len else float("nan")),
                iters=(len(e["history"]), len(b["history"])),
                C=float(np.abs(e["C"] - b["C"]).max() / np.abs(e["C"]).max()),
                tr=float(np.abs(e["traces"] - b["traces"]).max() / np.abs(e["traces"]).max()),
            ))
            path = report(args, rows, started, load_start,
                          [s for s in args.sizes if s > n])
    finally:
        shutil.rmtree(work, ignore_errors=True)

    print(path.read_text())


if __name__ == "__main__":
    main()
