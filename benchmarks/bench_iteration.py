"""Time ONE MKKM-RK iteration: the plain reference against the exact backend, in the same run.

On COIL20 (12 paper kernels, n = 1440, k = 20) at a fixed lambda, one iteration is the H-step
(top-k eigenvectors of K_w), the residuals d (quadratic forms) and the Y-step QP. Two starting
points are timed, both sides starting from the same weights:

- "cold": the first iteration, w = 1/m, Y = I, no warm start (the library uses LAPACK's
  top-k ``syevr``; its QP workspace is set up from scratch);
- "warm": the second iteration, from the library's iteration-1 weights and Y; the library
  warm-starts its eigensolver from the iteration-1 H and its QP from the iteration-1 solve, as
  it does inside the loop. The reference is the same either way (full ``eigh``, SLSQP from
  the previous Y).

Each is repeated ``--repeats`` times, reference and library interleaved, and the median taken.
Writes ``benchmarks/results/exact/iteration.md``. The reference is ``tests/reference_mkkmrk.py``
(the tests check the library against the same code).

    python benchmarks/bench_iteration.py [--data-dir DIR] [--lam 0.0009765625] [--repeats 3]
        [--threads default,1] [--eigen-methods auto,lanczos]
"""

from __future__ import annotations

import os
import time

import numpy as np
from threadpoolctl import threadpool_limits

from mkrk_dask.backends.base import TopK
from mkrk_dask.backends.exact import ExactBackend
from mkrk_dask.eigen import top_k_dense
from mkrk_dask.kernels import paper_kernels
from mkrk_dask.qp import RepresentativeQP
from mkrk_dask.validation import check_views

from _common import (
    SETTLE_SECONDS,
    exact_benchmark_parser,
    load_or_skip,
    now,
    reference_implementation,
    thread_limits,
    write_report,
)

reference = reference_implementation()


def library_iteration(backend: ExactBackend, C: np.ndarray, lam: float, k: int,
                      weights: np.ndarray, warm_H: np.ndarray | None,
                      warm_d: np.ndarray | None) -> tuple[dict[str, float], tuple]:
    """One iteration of the exact backend, phase by phase, as ``solver.solve`` runs it.

    ``warm_d``: if given, a fresh QP first solves it (untimed) so that the timed solve is
    warm-started as the second solve inside the loop is.
    """
    traces = backend.traces()
    qp = RepresentativeQP(C, lam)
    if warm_d is not None:
        qp.solve(warm_d)
    t0 = time.perf_counter()
    Kw = backend.combined_kernel(weights)
    t1 = time.perf_counter()
    values, H = top_k_dense(Kw, k, warm_H, method=backend.eigen_method)
    t2 = time.perf_counter()
    quad = backend.quad_forms(TopK(values, H))
    d = np.maximum(traces - quad, 0.0)
    t3 = time.perf_counter()
    sol = qp.solve(d)
    t4 = time.perf_counter()
    times = {"combine": t1 - t0, "eigen": t2 - t1, "quad_forms": t3 - t2, "qp": t4 - t3,
             "total": t4 - t0}
    return times, (sol.Y.sum(axis=1) / len(d), sol.Y, H, d, sol)


def reference_timed(kernels: list[np.ndarray], C: np.ndarray, lam: float, k: int,
                    weights: np.ndarray, Y_prev: np.ndarray) -> tuple[dict[str, float], tuple]:
    timings: dict[str, float] = {}
    t0 = time.perf_counter()
    out = reference.reference_iteration(kernels, C, weights, Y_prev, k, lam, timings)
    timings["total"] = time.perf_counter() - t0
    return timings, out


def measure(backend, kernels, C, C_ref, args, k):
    """Median timings of the cold and warm iterations, both sides interleaved."""
    m = backend.n_kernels
    load_before = os.getloadavg()
    w0 = np.full(m, 1.0 / m)
    Y0 = np.eye(m)
    # The library's iteration 1 gives the common starting point of the warm iteration.
    _, (w1, Y1, H1, d1, _) = library_iteration(backend, C, args.lam, k, w0, None, None)

    results: dict[str, dict[str, list]] = {"cold": {"ref": [], "lib": []},
                                           "warm": {"ref": [], "lib": []}}
    objectives: dict[str, dict[str, float]] = {"cold": {}, "warm": {}}
    for rep in range(args.repeats):
        for case, (w, Y, H, dprev) in (("cold", (w0, Y0, None, None)),
                                       ("warm", (w1, Y1, H1, d1))):
            time.sleep(SETTLE_SECONDS)  # see SETTLE_SECONDS in _common
            r_times, r_out = reference_timed(kernels, C_ref, args.lam, k, w, Y)
            time.sleep(SETTLE_SECONDS)
            l_times, l_out = library_iteration(backend, C, args.lam, k, w, H, dprev)
            results[case]["ref"].append(r_times)
            results[case]["lib"].append(l_times)
            objectives[case] = {"ref": r_out[3], "lib": float(l_out[4].objective),
                                "lib_gap": float(l_out[4].relative_gap)}
            print(f"repeat {rep} {case}: reference {r_times['total']:.3f}s, "
                  f"library {l_times['total']:.3f}s", flush=True)
    load_after = os.getloadavg()
    return results, objectives, load_before, load_after



def median_times(runs: list[dict[str, float]]) -> dict[str, float]:
    return {key: float(np.median([r[key] for r in runs])) for key in runs[0]}


def main(argv: list[str] | None = None) -> int:
    parser = exact_benchmark_parser(__doc__.split("\n")[0], lam=2.0**-10, repeats=3,
                                    report="iteration")
    parser.add_argument("--eigen-methods", default="auto",
                        help="comma list of the exact backend's eigen_method to measure in turn "
                             "(auto, lapack, krylov, lanczos)")
    args = parser.parse_args(argv)
    started = now()

    data = load_or_skip(args.dataset, args.data_dir)
    if data is None:
        return 0
    k = data.n_classes
    t = time.perf_counter()
    backend = ExactBackend.from_views(check_views([data.X]), paper_kernels())
    build = time.perf_counter() - t
    kernels = list(backend.kernels)  # views into the same memory: a list of n x n arrays
    m, n = backend.n_kernels, backend.n_samples
    t = time.perf_counter()
    C = backend.dissimilarity("fip")
    c_lib_time = time.perf_counter() - t
    t = time.perf_counter()
    C_ref = reference.fip_dissimilarity(kernels)
    c_ref_time = time.perf_counter() - t
    print(f"{args.dataset}: n={n}, m={m}, k={k}, lam={args.lam:g}; kernels built in "
          f"{build:.1f}s; C agrees to {np.abs(C - C_ref).max() / np.abs(C).max():.1e}",
          flush=True)

    sections = []
    for setting, limit in thread_limits(args.threads):
        for method in args.eigen_methods.split(","):
            backend.eigen_method = method
            label = f"BLAS/OpenMP threads: {setting}, library eigensolver: {method}"
            print(f"-- {label}", flush=True)
            with threadpool_limits(limit):
                sections.append((label, *measure(backend, kernels, C, C_ref, args, k)))
    lines = [
        "The machine is shared with other jobs; reference and library ran interleaved, so "
        "they saw the same load (load averages below).",
        "",
        f"Data: {args.dataset}, n = {n}, m = {m} paper kernels, k = {k}, lambda = "
        f"{args.lam:g}; median of {args.repeats} repeats. Kernel construction "
        f"({build:.1f} s) and C (library {c_lib_time:.2f} s, reference {c_ref_time:.2f} s) are "
        "set-up, not part of the iteration.",
        "",
        "Reference (`tests/reference_mkkmrk.py`): K_w by a Python loop, full "
        "`np.linalg.eigh`, d_p = tr(K_p (I - H H^T)) with explicit n x n products, the QP by "
        "SLSQP (analytic gradient, warm-started from the previous Y). Library: "
        "`ExactBackend` (K_w as one GEMV over the stacked kernels, top-k eigensolver "
        "`top_k_dense` with the method named in each section, warm-started from the previous "
        "H where the method uses one), tr(H^T K_p H) = <K_p, H H^T> as one GEMV, "
        "`RepresentativeQP` (OSQP + KKT polish, certified).",
        "",
        f"Each timed side starts after {SETTLE_SECONDS} s idle, so that BLAS threads still "
        "spinning after the other side's threaded calls do not slow it.",
        "",
        "\"cold\" = iteration 1 (w = 1/m, Y = I, nothing warm); \"warm\" = iteration 2 from "
        "the library's iteration-1 weights, Y and H (the library warm-starts its eigensolver "
        "and QP as inside the loop; the reference does the same work either way).",
    ]
    phases = [("K_w", "combine", "combine"), ("eigensolver", "eigh", "eigen"),
              ("quad forms / d", "residuals", "quad_forms"), ("QP", "qp", "qp"),
              ("total", "total", "total")]
    for setting, results, objectives, load_before, load_after in sections:
        med = {case: {side: median_times(results[case][side]) for side in ("ref", "lib")}
               for case in results}
        lines += ["", f"## {setting}", "",
                  f"Load average {load_before[0]:.1f} before, {load_after[0]:.1f} after.", "",
                  "| iteration | reference (s) | library (s) | ratio ref/lib |",
                  "|---|---|---|---|"]
        for case in ("cold", "warm"):
            r, lib = med[case]["ref"]["total"], med[case]["lib"]["total"]
            lines.append(f"| {case} | {r:.3f} | {lib:.3f} | {r / lib:.1f}x |")
        lines += ["", "Breakdown (median seconds):", "",
                  "| phase | ref cold | lib cold | ref warm | lib warm |",
                  "|---|---|---|---|---|"]
        for label, rk, lk in phases:
            lines.append(f"| {label} | {med['cold']['ref'][rk]:.3f} | "
                         f"{med['cold']['lib'][lk]:.3f} | {med['warm']['ref'][rk]:.3f} | "
                         f"{med['warm']['lib'][lk]:.3f} |")
        lines += ["", "Objective after the timed iteration (same starting point; the Y-step "
                  "optimum is not unique, the objective is):", ""]
        for case in ("cold", "warm"):
            o = objectives[case]
            lines.append(f"- {case}: reference {o['ref']:.10g}, library {o['lib']:.10g} "
                         f"(relative difference {abs(o['ref'] - o['lib']) / abs(o['lib']):.1e}; "
                         f"library QP relative duality gap {o['lib_gap']:.1e})")
        lines += ["", "All repeats (seconds, total):", ""]
        for case in ("cold", "warm"):
            lines.append(f"- {case}: reference "
                         + ", ".join(f"{x['total']:.3f}" for x in results[case]["ref"])
                         + "; library "
                         + ", ".join(f"{x['total']:.3f}" for x in results[case]["lib"]))
    path = write_report("exact", "iteration",
                        "One MKKM-RK iteration: plain reference vs the exact backend",
                        "\n".join(lines), started=started, path=args.out)
    print(path.read_text())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
