"""The MKKM-RK alternating loop, written once against the backend interface.

Each iteration (DESIGN.md, the paper's Algorithm 1):

1. H-step: ``H`` = top-k eigenvectors of ``K_w = sum_p w_p^2 K_p`` (warm-started);
2. residuals ``d_p = tr(K_p) - tr(H^T K_p H)``;
3. Y-step: the convex QP of :mod:`mkrk_dask.qp`, certified by its duality gap;
4. ``w = Y 1 / m`` and ``f = sum_p w_p^2 d_p + lambda <C, Y>``.

Both steps minimise ``f`` exactly over their block, so ``f`` never increases.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from sklearn.cluster import KMeans

from .backends.base import KernelBackend, TopK
from .qp import RepresentativeQP

__all__ = ["SolverResult", "IterationInfo", "effective_lambda", "solve", "assign_clusters",
           "repeated_assignments", "unit_rows", "SELECTION_THRESHOLD", "selected_kernels",
           "LAM_SCALINGS", "TOL_MODES"]

LAM_SCALINGS = ("none", "normalized")

#: A kernel counts as selected (a representative) when its weight is at least this. K_w uses
#: w_p^2, so a smaller weight contributes less than 1e-6 of the combination; the exact QP
#: optimum often spreads such crumbs over kernels whose column of C is nearly constant.
SELECTION_THRESHOLD = 1e-3
TOL_MODES = ("absolute", "relative")


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
    representation: np.ndarray
    top: TopK
    objective_history: np.ndarray
    n_iter: int
    converged: bool
    qp_relative_gaps: np.ndarray
    qp_certified: bool
    dissimilarity: np.ndarray
    traces: np.ndarray
    residuals: np.ndarray
    lam_effective: float
    timings: dict[str, float] = field(default_factory=dict)


def effective_lambda(lam: float, scaling: str, traces: np.ndarray, C: np.ndarray) -> float:
    """The lambda the QP uses.

    ``"none"`` is the paper's lambda. ``"normalized"`` divides out the scales of the two terms,
    ``lam * mean(tr K_p) / mean(|C|)``: with ``fip``, C grows like n^2 and the residuals like n,
    so the paper's lambda means different things on different data; the normalised one does not.
    """
    if scaling == "none":
        return float(lam)
    if scaling == "normalized":
        c_scale = float(np.mean(np.abs(C)))
        return float(lam) * float(np.mean(traces)) / c_scale if c_scale > 0 else float(lam)
    raise ValueError(f"lam_scaling must be one of {LAM_SCALINGS}, got {scaling!r}")


def selected_kernels(weights: np.ndarray) -> np.ndarray:
    """Indices of the kernels whose weight reaches :data:`SELECTION_THRESHOLD`."""
    return np.flatnonzero(np.asarray(weights) >= SELECTION_THRESHOLD)


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
) -> SolverResult:
    """Run the alternating minimisation.

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
    """
    if tol_mode not in TOL_MODES:
        raise ValueError(f"tol_mode must be one of {TOL_MODES}, got {tol_mode!r}")
    m = backend.n_kernels
    timings = {"dissimilarity": 0.0, "h_step": 0.0, "quad_forms": 0.0, "y_step": 0.0}
    start = time.perf_counter()
    traces = np.asarray(backend.traces(), dtype=np.float64)
    if C is None:
        C = backend.dissimilarity(dissimilarity)
    timings["dissimilarity"] = time.perf_counter() - start
    lam_eff = effective_lambda(lam, lam_scaling, traces, C)
    qp = RepresentativeQP(C, lam_eff, gap_tol=qp_gap_tol, strict=qp_strict)

    # The authors' code starts from a one-hot Y, whose row means are all 1/m.
    weights = np.full(m, 1.0 / m)
    Y = np.eye(m)
    top: TopK | None = None
    history: list[float] = []
    gaps: list[float] = []
    certified = True
    converged = False
    d = traces.copy()
    for iteration in range(1, max_iter + 1):
        t0 = time.perf_counter()
        top = backend.top_k(weights, n_clusters, warm_start=top)
        t1 = time.perf_counter()
        quad = top.quad_forms if top.quad_forms is not None else backend.quad_forms(top)
        d = _residuals(traces, np.asarray(quad, dtype=np.float64))
        t2 = time.perf_counter()
        solution = qp.solve(d)
        t3 = time.perf_counter()
        timings["h_step"] += t1 - t0
        timings["quad_forms"] += t2 - t1
        timings["y_step"] += t3 - t2
        Y = solution.Y
        weights = Y.sum(axis=1) / m
        history.append(float(solution.objective))
        gaps.append(float(solution.relative_gap))
        certified &= bool(solution.certified)
        change = history[-1] - history[-2] if len(history) > 1 else np.inf
        if callback is not None:
            callback(IterationInfo(iteration, history[-1], change, t3 - t0,
                                   solution.relative_gap))
        if len(history) > 1:
            threshold = tol if tol_mode == "absolute" else tol * max(abs(history[-2]), 1e-300)
            if abs(change) < threshold:
                converged = True
                break
    timings["total"] = time.perf_counter() - start
    return SolverResult(
        weights=weights, representation=Y, top=top, objective_history=np.asarray(history),
        n_iter=len(history), converged=converged, qp_relative_gaps=np.asarray(gaps),
        qp_certified=certified, dissimilarity=C, traces=traces, residuals=d,
        lam_effective=lam_eff, timings=timings)


def unit_rows(H: np.ndarray) -> np.ndarray:
    """Rows of H scaled to unit length, as before the final k-means; zero rows stay zero
    (they carry no direction)."""
    H = np.asarray(H, dtype=np.float64)
    norms = np.linalg.norm(H, axis=1, keepdims=True)
    return np.divide(H, norms, out=np.zeros_like(H), where=norms > 0)


def assign_clusters(H: np.ndarray, n_clusters: int, *, n_init: int = 10, max_iter: int = 1000,
                    random_state: int | np.random.RandomState | None = None) -> np.ndarray:
    """The paper's final step: scale every row of H to unit length, then k-means.

    Rows of H that are exactly zero stay zero (they carry no direction).
    """
    unit = unit_rows(H)
    model = KMeans(n_clusters=n_clusters, n_init=n_init, max_iter=max_iter,
                   random_state=random_state)
    return model.fit_predict(unit)


def repeated_assignments(H: np.ndarray, n_clusters: int, n_repeats: int, *, n_init: int = 10,
                         random_state: Any = None) -> list[np.ndarray]:
    """The final k-means repeated ``n_repeats`` times with independent seeds.

    The paper's protocol repeats it 20 times and reports the best; report the spread too.
    """
    seeds = np.random.SeedSequence(random_state if isinstance(random_state, int) else None)
    return [assign_clusters(H, n_clusters, n_init=n_init,
                            random_state=int(child.generate_state(1)[0]))
            for child in seeds.spawn(n_repeats)]
