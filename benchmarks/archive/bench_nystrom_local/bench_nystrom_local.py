"""Cost and accuracy of the Nystrom backend's sparse local part on a mid-sized dataset.

USPS (n = 11,000) by default: small enough for the exact backend (12 dense kernels, 11.6 GB
in float64) and large enough that the local part's n-dimensional iterations and its
block-pair pass show their cost. For the Nystrom backend with and without the local part:
build seconds, solve seconds per lambda, peak resident memory, the local part's size, and
the weights and NMI against the exact backend's, all measured in this run.

    python benchmarks/archive/bench_nystrom_local/bench_nystrom_local.py
"""

from __future__ import annotations

import sys
from pathlib import Path

# An archived study (benchmarks/README.md, "Archive"): benchmarks/ and the other studies importable
sys.path.insert(1, str(Path(__file__).resolve().parents[2]))
sys.path.extend(str(p) for p in sorted(Path(__file__).resolve().parents[1].glob("bench_*")))

import argparse
import gc
import time

import numpy as np

from mkrk_dask.backends.exact import ExactBackend
from mkrk_dask.backends.nystrom import LOCAL_THRESHOLD, NystromBackend
from mkrk_dask.backends.options import AUTO_EXACT_DISSIMILARITY_MAX_N
from mkrk_dask.datasets import load_dataset
from mkrk_dask.kernels import paper_kernels
from mkrk_dask.loop import solve

from _common import PeakRSS, fmt_bytes, now, scores, write_report


def run(make_backend, lams, k, y, repeats, seed):
    """Build a backend and solve every lambda; seconds, peak RSS, weights and NMI."""
    out = {"solve_seconds": {}, "weights": {}, "nmi": {}}
    with PeakRSS() as rss:
        t0 = time.perf_counter()
        backend = make_backend()
        out["build_seconds"] = time.perf_counter() - t0
        try:
            out["info"] = dict(getattr(backend, "info", {}))
            for e in lams:
                t0 = time.perf_counter()
                res = solve(backend, k, 2.0**e)
                H = backend.embedding(res.top)
                out["solve_seconds"][e] = time.perf_counter() - t0
                out["weights"][e] = res.weights
                out["nmi"][e] = scores(y, H, k, repeats, seed)[0]
        finally:
            backend.close()
            del backend
            gc.collect()
    out["peak_rss"] = rss.peak
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", default="usps")
    parser.add_argument("--landmarks", type=int, default=500)
    parser.add_argument("--lams", type=float, nargs="*", default=[-15, -10, -5],
                        help="log2 of the lambdas")
    parser.add_argument("--local-threshold", type=float, default=LOCAL_THRESHOLD)
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--report", default="nystrom_local_usps")
    args = parser.parse_args()
    started = now()
    data = load_dataset(args.dataset)
    X, y, k = data.X, data.y, data.n_classes
    specs = paper_kernels()
    results = {}
    for name, threshold in (("Nystrom, local part", args.local_threshold),
                            ("Nystrom, no local part", 0.0)):
        results[name] = run(
            lambda threshold=threshold: NystromBackend.from_views(
                [X], specs, n_landmarks=args.landmarks, random_state=args.seed,
                local_threshold=threshold,
                # the part this compares is built up to n = 20,000 when asked; "auto" would
                # leave it out here (12 kernels of 11,000 rows are above the budget)
                exact_dissimilarity_max_n=AUTO_EXACT_DISSIMILARITY_MAX_N),
            args.lams, k, y, args.repeats, args.seed)
        print(name, {e: round(v, 2) for e, v in results[name]["nmi"].items()},
              f"{results[name]['build_seconds']:.0f}s", flush=True)
    results["exact"] = run(lambda: ExactBackend.from_views([X], specs), args.lams, k, y,
                           args.repeats, args.seed)
    print("exact", {e: round(v, 2) for e, v in results["exact"]["nmi"].items()}, flush=True)
    exact = results["exact"]
    rows = []
    for name, res in results.items():
        for e in args.lams:
            dw = float(np.abs(res["weights"][e] - exact["weights"][e]).max())
            dnmi = res["nmi"][e] - exact["nmi"][e]
            rows.append(f"| {name} | {res['build_seconds']:.0f} | 2^{e:g} | "
                        f"{res['solve_seconds'][e]:.1f} | {fmt_bytes(res['peak_rss'])} | "
                        f"{dw:.4f} | {res['nmi'][e]:.2f} | {dnmi:+.2f} |")
    local = results["Nystrom, local part"]["info"].get("local_part")
    body = (
        f"{args.dataset}: n = {X.shape[0]}, d = {X.shape[1]}, k = {k}; the paper's 12 kernels; "
        f"{args.landmarks} k-means++ landmarks per kernel (seed {args.seed}); local part: "
        f"residual entries >= {args.local_threshold:g}. `solve s`: the alternating loop and "
        "the embedding for one lambda. Peak RSS: the process tree, over the build and all "
        "lambdas of that backend (each backend is closed before the next starts). NMI: mean "
        f"over {args.repeats} final k-means seeds, the same for every row; `dw` and `dNMI` "
        "against the exact backend.\n\n"
        "| backend | build s | lambda | solve s | peak RSS | max dw | NMI | dNMI |\n"
        "|---|---|---|---|---|---|---|---|\n" + "\n".join(rows) + "\n\n"
        f"- local part: {local}\n")
    path = write_report("nystrom", args.report, f"The Nystrom local part on {args.dataset}",
                        body,
                        started=started)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
