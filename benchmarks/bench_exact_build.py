"""Time the exact backend's kernel build: the library's against the whole-matrix build.

The library's :func:`mkrk_dask.kernels.kernel_matrices` evaluates the upper triangle in blocks
of rows on a thread per core and mirrors it. The whole-matrix build is what it replaced: one
:func:`~mkrk_dask.kernels.kernel_blocks` call on all n x n pairs of rows (numpy's elementwise
passes on one core, n x n temporaries), then :func:`~mkrk_dask.kernels.symmetrize`. Both run
on the first n rows of a data set with the same resolved kernels, interleaved, ``--repeats``
times each (the median is reported), the peak resident memory each added to the process
sampled during its build. The largest entry difference between the two is given too.

The kernels: the default dictionary's (cosine and Gaussians at 0.5, 1 and 2 x the median
distance, of ``--geometry``) and, up to ``--paper-max-n`` rows, the paper's 12.

    python benchmarks/bench_exact_build.py [--dataset fashion_mnist] [--n 4000 8000 12000]
        [--geometry angular] [--paper-max-n 4000] [--repeats 5] [--data-dir DIR]

Writes ``benchmarks/results/exact/exact_build.md``.
"""

from __future__ import annotations

import argparse
import gc
import time

import numpy as np

from mkrk_dask.kernel_widths import median_scales
from mkrk_dask.kernels import (
    fill_kernel_blocks,
    kernel_matrices,
    max_pairwise_distance,
    paper_kernels,
    resolve_kernels,
    row_sq_norms,
    symmetrize,
)
from mkrk_dask.plan import GEOMETRIES, auto_kernels

from _common import PeakRSS, dense_views, fmt_bytes, load_or_skip, now, results_dir, write_report


def whole_matrix_build(X: np.ndarray, specs: list) -> np.ndarray:
    """The build before the blocked one: every pair of rows in one call, then symmetrised."""
    n = X.shape[0]
    out = np.empty((len(specs), n, n))
    sq = row_sq_norms(X)
    fill_kernel_blocks(out, list(range(len(specs))), specs, X, X, sq, sq)
    return symmetrize(out, unit_diagonal=True)


def measured(build, *args) -> tuple[float, int, np.ndarray]:
    """``(seconds, bytes of peak memory above the start, result)`` of one build."""
    gc.collect()
    with PeakRSS(interval=0.02) as peak:
        base = peak.current()
        start = time.perf_counter()
        result = build(*args)
        seconds = time.perf_counter() - start
    return seconds, peak.peak - base, result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", default="fashion_mnist")
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--n", type=int, nargs="+", default=[4000, 8000, 12000])
    parser.add_argument("--geometry", default="angular",
                        choices=list(GEOMETRIES))
    parser.add_argument("--paper-max-n", type=int, default=4000,
                        help="the paper's 12 kernels only up to this n (both builds' kernels "
                             "are held at once: 2 x 96 n^2 bytes)")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--out", default=str(results_dir("exact") / "exact_build.md"))
    args = parser.parse_args()
    started = now()
    data = load_or_skip(args.dataset, args.data_dir)
    if data is None:
        return
    view = dense_views(data)[0][0]
    rows = []
    for n in args.n:
        X = view[:n]
        dictionary = auto_kernels([args.geometry] * 1)
        sets = [(f"default ({args.geometry})",
                 resolve_kernels(dictionary, [0.0], median_scales([X], dictionary))),
                ("paper (12)", resolve_kernels(paper_kernels(), [max_pairwise_distance(X)]))]
        if n > args.paper_max_n:
            sets = sets[:1]
        for label, specs in sets:
            times = {"blocked": [], "whole": []}
            peaks = {"blocked": [], "whole": []}
            difference = 0.0
            for _ in range(args.repeats):
                blocked = whole = None
                for name, build in (("whole", whole_matrix_build),
                                    ("blocked", lambda X, s: kernel_matrices([X], s))):
                    seconds, peak, result = measured(build, X, specs)
                    times[name].append(seconds)
                    peaks[name].append(peak)
                    if name == "whole":
                        whole = result
                    else:
                        blocked = result
                    del result
                difference = max(difference, float(np.abs(blocked - whole).max()))
                del blocked, whole
            t_whole, t_blocked = np.median(times["whole"]), np.median(times["blocked"])
            rows.append((n, label, len(specs), t_whole, t_blocked, t_whole / t_blocked,
                         max(peaks["whole"]), max(peaks["blocked"]), 8 * len(specs) * n * n,
                         difference))
            print(f"n={n} {label}: whole {t_whole:.2f} s, blocked {t_blocked:.2f} s",
                  flush=True)
    body = [
        f"Data: the first n rows of {args.dataset} ({view.shape[1]} features). Median of "
        f"{args.repeats} builds each, interleaved (whole-matrix first). Peak: the most "
        "resident memory the build added to the process (sampled every 20 ms), against the "
        "kernels' own 8 m n^2 bytes. `max |diff|`: the largest entry difference between the "
        "two builds' kernels.",
        "",
        "| n | kernels | m | whole-matrix s | blocked s | speed-up | whole-matrix peak | "
        "blocked peak | kernels | max abs diff |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for n, label, m, tw, tb, ratio, pw, pb, kb, diff in rows:
        body.append(f"| {n} | {label} | {m} | {tw:.2f} | {tb:.2f} | {ratio:.2f}x | "
                    f"{fmt_bytes(pw)} | {fmt_bytes(pb)} | {fmt_bytes(kb)} | {diff:.1e} |")
    write_report("exact", "exact_build", "Exact kernel build: blocked vs whole-matrix",
                 "\n".join(body) + "\n", started=started, path=args.out)


if __name__ == "__main__":
    main()
