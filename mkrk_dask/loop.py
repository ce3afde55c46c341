"""The alternating loop, written once against the backend interface and a weight step.

Each iteration (the paper's Algorithm 1; ``docs/architecture.rst`` shows where the loop sits):

1. H-step: ``H`` = top-k eigenvectors of ``K_w = sum_p w_p^2 K_p`` (warm-started), by the
   backend;
2. residuals ``d_p = tr(K_p) - tr(H^T K_p H)``;
3. weight step (:mod:`mkrk_dask.weight_steps`): for MKKM-RK the convex Y-step QP, certified by
   its duality gap; ``w = Y 1 / m`` and ``f = sum_p w_p^2 d_p + lambda <C, Y>``.

Both steps minimise ``f`` exactly over their block, so ``f`` never increases.
:func:`alternate` is the loop for any weight step; :func:`solve` is MKKM-RK's entry point (it
computes C and the effective lambda, then runs the loop with
:class:`~mkrk_dask.weight_steps.RepresentativeStep`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .backends.base import KernelBackend, TopK
from .progress import reporter
from .validation import LAM_SCALINGS, TOL_MODES, check_choice, check_lambda
from .weight_steps import RepresentativeStep, WeightStep, WeightUpdate

__all__ = ["SolverResult", "IterationInfo", "effective_lambda", "solve", "alternate",
           "SELECTION_THRESHOLD", "EQUAL_SPREAD", "selected_kernels", "equal_weights",
           "selection_words", "LAM_SCALINGS", "TOL_MODES"]

#: A kernel counts as selected (a representative) when its weight is at least this. K_w uses
#: w_p^2, so a smaller weight contributes less than 1e-6 of the combination; the exact QP
#: optimum often spreads such crumbs over kernels whose column of C is nearly constant.
SELECTION_THRESHOLD = 1e-3
#: weights that spread over less than this are equal (every kernel represents itself)
EQUAL_SPREAD = 1e-6


@dataclass
class IterationInfo:
    """What a progress callback receives after each iteration."""

    iteration: int
    objective: float
    change: float
    seconds: float
    qp_relative_gap: float


@dataclass
class SolverResult:
    """Everything the loop produced. Arrays are plain numpy except ``top.basis``."""

    weights: np.ndarray
    representation: np.ndarray | None
    top: TopK
    objective_history: np.ndarray
    n_iter: int
    converged: bool
    qp_relative_gaps: np.ndarray
    qp_certified: bool
    dissimilarity: np.ndarray | None
    traces: np.ndarray
    residuals: np.ndarray
    lam_effective: float
    timings: dict[str, float] = field(default_factory=dict)
    #: H-steps (top-k eigendecompositions) made: the loop's and the weight step's own
    h_steps: int = 0
    #: the first H-step's eigenpairs at ``first_rank`` where the loop ended at its weights
    #: (the final embedding's, already made); None otherwise
    final_top: TopK | None = None


def effective_lambda(lam: float, scaling: str, traces: np.ndarray, C: np.ndarray) -> float:
    """The lambda the QP uses.

    ``"none"`` is the paper's lambda. ``"normalized"`` divides out the scales of the two terms,
    ``lam * mean(tr K_p) / mean(|C|)``: with ``fip``, C grows like n^2 and the residuals like n,
    so the paper's lambda means different things on different data; the normalised one does not.
    """
    check_choice("lam_scaling", scaling, LAM_SCALINGS)
    if scaling == "none":
        return float(lam)
    c_scale = float(np.mean(np.abs(C)))
    return float(lam) * float(np.mean(traces)) / c_scale if c_scale > 0 else float(lam)


def selected_kernels(weights: np.ndarray) -> np.ndarray:
    """Indices of the kernels whose weight reaches :data:`SELECTION_THRESHOLD`."""
    return np.flatnonzero(np.asarray(weights) >= SELECTION_THRESHOLD)


def equal_weights(weights: np.ndarray) -> bool:
    """Whether the weights are all equal (to :data:`EQUAL_SPREAD`): nothing was selected."""
    return float(np.ptp(np.asarray(weights))) < EQUAL_SPREAD


def selection_words(weights: np.ndarray) -> str:
    """What the weights select, in plain words: equal weights select nothing, although
    every kernel reaches the threshold."""
    if equal_weights(weights):
        return "equal weights: no kernel selected at this lambda"
    return (f"{selected_kernels(weights).size} of {np.asarray(weights).size} kernels carry "
            f"weight (>= {SELECTION_THRESHOLD:g})")


def _residuals(traces: np.ndarray, quad_forms: np.ndarray) -> np.ndarray:
    """``d_p = tr(K_p) - tr(H^T K_p H)``; it is >= 0 for a PSD kernel."""
    d = traces - quad_forms
    # Round-off on a nearly rank-k kernel can give -1e-13 * trace; a real negative value means
    # the kernel is not positive semi-definite and the QP would not be convex.
    floor = -1e-9 * np.maximum(np.abs(traces), 1.0)
    bad = np.flatnonzero(d < floor)
    if bad.size:
        p = int(bad[0])
        raise ValueError(
            f"kernel {p} has a negative residual tr(K) - tr(H^T K H) = {d[p]:.3g}: it is not "
            "positive semi-definite, so the Y-step is not convex. Use PSD kernels.")
    return np.maximum(d, 0.0)


def solve(
    backend: KernelBackend,
    n_clusters: int,
    lam: float,
    *,
    dissimilarity: str = "fip",
    C: np.ndarray | None = None,
    lam_scaling: str = "none",
    tol: float = 1e-5,
    tol_mode: str = "absolute",
    max_iter: int = 100,
    qp_gap_tol: float = 1e-8,
    qp_strict: bool = False,
    callback: Callable[[IterationInfo], None] | None = None,
    checkpoint: Any = None,
    first_rank: int | None = None,
) -> SolverResult:
    """Run MKKM-RK's alternating minimisation.

    Parameters
    ----------
    backend : KernelBackend
    n_clusters : int
        k, the number of eigenvectors of the H-step.
    lam : float
        The trade-off lambda >= 0.
    dissimilarity : str
        Measure for C (ignored when ``C`` is given).
    C : ndarray of shape (m, m), optional
        A precomputed dissimilarity matrix (a lambda grid search computes it once).
    lam_scaling : {"none", "normalized"}
        See :func:`effective_lambda`.
    tol, tol_mode : float, {"absolute", "relative"}
        Stop when ``|f_t - f_{t-1}| < tol`` (absolute, the paper's) or
        ``< tol * |f_{t-1}|`` (relative).
    max_iter : int
    qp_gap_tol : float
        A Y-step solution is certified when its duality gap over its objective is below this.
    qp_strict : bool
        Raise instead of warning when a Y-step solution is not certified.
    callback : callable, optional
        Called with an :class:`IterationInfo` after every iteration.
    checkpoint : LoopCheckpoint, optional
        Save the state after every iteration and resume from a saved one (see
        :func:`alternate`).
    first_rank : int, optional
        The final embedding's rank, made by the first H-step (see :func:`alternate`).
    """
    check_lambda(lam)
    check_choice("tol_mode", tol_mode, TOL_MODES)
    check_choice("lam_scaling", lam_scaling, LAM_SCALINGS)
    start = time.perf_counter()
    traces = np.asarray(backend.traces(), dtype=np.float64)
    if C is None:
        C = backend.dissimilarity(dissimilarity)
    seconds = time.perf_counter() - start
    lam_eff = effective_lambda(lam, lam_scaling, traces, C)
    step = RepresentativeStep(C, lam_eff, gap_tol=qp_gap_tol, strict=qp_strict)
    result = alternate(backend, n_clusters, step, traces=traces, tol=tol, tol_mode=tol_mode,
                       max_iter=max_iter, callback=callback, checkpoint=checkpoint,
                       first_rank=first_rank)
    result.dissimilarity = C
    result.lam_effective = lam_eff
    result.timings["dissimilarity"] = seconds
    result.timings["total"] += seconds
    return result


def alternate(
    backend: KernelBackend,
    n_clusters: int,
    step: WeightStep,
    *,
    traces: np.ndarray | None = None,
    tol: float = 1e-5,
    tol_mode: str = "absolute",
    max_iter: int = 100,
    callback: Callable[[IterationInfo], None] | None = None,
    checkpoint: Any = None,
    first_rank: int | None = None,
) -> SolverResult:
    """The alternating loop for any weight step (see :mod:`mkrk_dask.weight_steps`).

    Parameters are as for :func:`solve`; ``traces`` may be given when already known. With a
    ``checkpoint`` (:class:`~mkrk_dask.store.checkpoints.LoopCheckpoint`), the state is saved after
    every iteration; a fit that finds a saved state continues from it (the iterations already
    done are not run again, and it ends as the uninterrupted fit would, to the bit) and clears
    it when it ends.

    With ``first_rank`` above ``n_clusters`` (the final embedding's rank), the first H-step
    makes that many eigenpairs and the loop uses the leading ``n_clusters``. Where the loop
    ends at that step's weights (a fixed point at the first iteration, as at MKKM-RK's
    default, where every kernel represents itself), they are the embedding's
    (``SolverResult.final_top``), and the fit makes no second eigendecomposition of the same
    kernel.
    """
    check_choice("tol_mode", tol_mode, TOL_MODES)
    timings = {"dissimilarity": 0.0, "h_step": 0.0, "quad_forms": 0.0, "y_step": 0.0}
    start = time.perf_counter()
    if traces is None:
        traces = np.asarray(backend.traces(), dtype=np.float64)
    m = backend.n_kernels
    weights = step.initial_weights(m)
    Y = step.initial_representation(m)
    top: TopK | None = None
    history: list[float] = []
    gaps: list[float] = []
    certified = True
    converged = False
    d = traces.copy()
    first = 1
    # an H-step the weight step already made at the current weights (a line search's last
    # point), so the loop does not make it again
    pending: TopK | None = None
    h_steps = 0
    wide: TopK | None = None  # the first H-step at first_rank
    try:
        saved = checkpoint.load() if checkpoint is not None else None
        if saved is not None:
            weights, d = saved["weights"], saved["residuals"]
            Y = saved.get("representation")
            history, gaps = saved["history"].tolist(), saved["gaps"].tolist()
            certified, converged = bool(saved["certified"]), bool(saved["converged"])
            top = backend.decode_top(saved["basis_kind"], {k[4:]: v for k, v in saved.items()
                                                           if k.startswith("top_")})
            top.weights = saved["hstep_weights"]
            if "pending_quad" in saved:  # the saved H-step is at the saved weights: reuse it
                top.quad_forms = saved["pending_quad"]
                pending = top
            first = int(saved["iteration"]) + 1
            step.resume(WeightUpdate(weights, history[-1], gaps[-1], certified, Y))
            reporter().log(f"resuming the fit saved in the store after iteration {first - 1}")
        for iteration in range(first, max_iter + 1):
            if converged:
                break
            t0 = time.perf_counter()
            if pending is None:
                rank = n_clusters
                if first_rank is not None and h_steps == 0 and saved is None:
                    rank = max(n_clusters, min(first_rank, backend.max_rank(weights)))
                top = backend.top_k(weights, rank, warm_start=top)
                if rank > n_clusters:
                    wide, top = top, top.leading(n_clusters)
                    wide.weights = np.array(weights)
                h_steps += 1
            else:
                top = pending
            top.weights = np.array(weights)
            t1 = time.perf_counter()
            quad = top.quad_forms if top.quad_forms is not None else backend.quad_forms(top)
            d = _residuals(traces, np.asarray(quad, dtype=np.float64))
            t2 = time.perf_counter()
            update = step.advance(d, top)
            t3 = time.perf_counter()
            timings["h_step"] += t1 - t0
            timings["quad_forms"] += t2 - t1
            timings["y_step"] += t3 - t2
            Y = update.representation
            weights = update.weights
            pending = update.top
            if pending is not None:
                pending.weights = np.array(weights)
            history.append(float(update.objective))
            gaps.append(float(update.relative_gap))
            certified &= bool(update.certified)
            change = history[-1] - history[-2] if len(history) > 1 else np.inf
            if len(history) > 1:
                threshold = tol if tol_mode == "absolute" else tol * max(abs(history[-2]), 1e-300)
                converged = abs(change) < threshold
            converged |= bool(update.converged)
            # the weights the last H-step was made at: the next H-step would give the same
            # eigenvectors, residuals and weights again (a fixed point; at MKKM-RK's default
            # every kernel represents itself and this is the first iteration)
            converged |= pending is None and np.array_equal(weights, top.weights)
            if checkpoint is not None:
                saved_top = pending if pending is not None else top
                kind, arrays = backend.encode_top(saved_top)
                checkpoint.save({"iteration": iteration, "certified": certified,
                                 "converged": converged, "basis_kind": kind, "weights": weights,
                                 "representation": Y, "residuals": d,
                                 "history": np.asarray(history), "gaps": np.asarray(gaps),
                                 "hstep_weights": saved_top.weights,
                                 "pending_quad": None if pending is None else pending.quad_forms,
                                 **{f"top_{k}": v for k, v in arrays.items()}})
            if callback is not None:
                callback(IterationInfo(iteration, history[-1], change, t3 - t0,
                                       update.relative_gap))
        if checkpoint is not None:
            checkpoint.clear()
    finally:
        if checkpoint is not None:  # the state stays for a resume; another process may take it
            checkpoint.release()
    if pending is not None:  # the H-step at the final weights (the last one is before them)
        top = pending
    elif wide is not None and not np.array_equal(weights, wide.weights):
        wide = None
    timings["total"] = time.perf_counter() - start
    return SolverResult(
        weights=weights, representation=Y, top=top, objective_history=np.asarray(history),
        n_iter=len(history), converged=converged, qp_relative_gaps=np.asarray(gaps),
        qp_certified=certified, dissimilarity=None, traces=traces, residuals=d,
        lam_effective=0.0, timings=timings, h_steps=h_steps + step.evaluations,
        final_top=None if pending is not None else wide)
