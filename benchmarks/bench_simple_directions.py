"""SimpleMKKM's two weight steps on one data set: the authors' reduced gradient
(``direction="reduced"``: unit direction, to the boundary while J decreases, then a
golden-section search) against the Hessian-scaled one (``direction="scaled"``, the default:
step 1, a parabola, conjugate directions), from the same start on the same kernels.

The kernels are those of ``mkrk reproduce`` (the paper's 12 on a single-view set, a cosine
and a Gaussian per view on a multi-view one), centred and normalised as the authors' demo
does (:func:`mkrk_dask.protocol.methods.centred_kernels`); exact backend, the other settings
of ``SimpleMKKM.paper``. Per direction: iterations, H-steps (top-k eigendecompositions, the
line searches' included), H-steps per iteration, the final J and its certified relative
optimality gap, whether it converged, seconds; then how far apart the two ends are (J, and
the weights). Both minimise the same convex J, so they should end at the same J.

Writes ``benchmarks/results/paper/simple_directions.md``.

    python benchmarks/bench_simple_directions.py [--dataset uci_mfeat] [--data-dir DIR]
        [--gap-tol 1e-4] [--max-iter 100] [--threads N]
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from threadpoolctl import threadpool_limits

from mkrk_dask import SimpleMKKM
from mkrk_dask.backends import make_backend, make_options
from mkrk_dask.kernels import paper_kernels, parse_kernel
from mkrk_dask.protocol import MULTIVIEW_KERNELS
from mkrk_dask.protocol.methods import centred_kernels
from mkrk_dask.validation import check_views

from _common import load_or_skip, now, write_report

DIRECTIONS = ("reduced", "scaled")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--dataset", default="uci_mfeat")
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--gap-tol", type=float, default=1e-4,
                        help="SimpleMKKM's gap_tol (its default 1e-4)")
    parser.add_argument("--max-iter", type=int, default=100,
                        help="SimpleMKKM's max_iter (its default 100)")
    parser.add_argument("--threads", type=int, default=None,
                        help="limit BLAS/OpenMP threads (default: no limit)")
    parser.add_argument("--report", default="simple_directions")
    args = parser.parse_args(argv)
    started = now()
    data = load_or_skip(args.dataset, args.data_dir)
    if data is None:
        return 0
    views = data.views
    specs = paper_kernels() if len(views) == 1 else [
        parse_kernel(f"{text}@{v}") for v in range(len(views)) for text in MULTIVIEW_KERNELS]
    k = int(data.n_classes)
    backend = make_backend(make_options("exact"), views=check_views(views), specs=specs)
    names = [s.name for s in backend.kernel_specs]
    kernels = centred_kernels(backend.kernels)
    backend.close()
    del backend
    fits = {}
    with threadpool_limits(args.threads):
        for direction in DIRECTIONS:
            model = SimpleMKKM.paper(k, kernels="precomputed", normalize=False, random_state=0,
                                     direction=direction, gap_tol=args.gap_tol,
                                     max_iter=args.max_iter)
            start = time.perf_counter()
            model.fit(kernels)
            fits[direction] = (model, time.perf_counter() - start)
            print(f"{direction}: {model.n_iter_} iterations, {model.n_h_steps_} H-steps, "
                  f"J {model.objective_history_[-1]:.10g}, gap {model.optimality_gap_:.1e}, "
                  f"{fits[direction][1]:.1f} s", flush=True)
    lines = [f"{args.dataset}: n = {data.n_samples}, k = {k}, m = {len(names)} kernels "
             f"({', '.join(names)}), centred and normalised; exact backend; "
             f"gap_tol {args.gap_tol:g}, max_iter {args.max_iter}; BLAS threads "
             f"{args.threads or 'default'}.", "",
             "| direction | iterations | H-steps | H-steps per iteration | final J | "
             "certified gap | converged | seconds |",
             "|---|---|---|---|---|---|---|---|"]
    for direction, (model, seconds) in fits.items():
        lines.append(f"| {direction} | {model.n_iter_} | {model.n_h_steps_} | "
                     f"{model.n_h_steps_ / model.n_iter_:.1f} | "
                     f"{model.objective_history_[-1]:.10g} | {model.optimality_gap_:.1e} | "
                     f"{model.converged_} | {seconds:.1f} |")
    (reduced, _), (scaled, _) = fits["reduced"], fits["scaled"]
    J_r, J_s = reduced.objective_history_[-1], scaled.objective_history_[-1]
    lines += ["",
              f"Final J: relative difference {abs(J_r - J_s) / min(J_r, J_s):.1e} "
              f"({'scaled' if J_s < J_r else 'reduced'} lower); largest weight difference "
              f"{np.abs(reduced.weights_ - scaled.weights_).max():.1e}.", "",
              "| kernel | weight (reduced) | weight (scaled) |", "|---|---|---|"]
    for p in np.argsort(-scaled.weights_):
        lines.append(f"| {names[p]} | {reduced.weights_[p]:.4f} | {scaled.weights_[p]:.4f} |")
    path = write_report("paper", args.report,
                        "SimpleMKKM: the authors' reduced gradient against the scaled one",
                        "\n".join(lines), started=started)
    print(f"report: {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
