"""SimpleMKKM's weight step: a reduced-gradient descent step on the optimal value function.

SimpleMKKM (Liu, Zhu, Liu, Hospedales, Wang & Wang, TPAMI 2023) minimises over the simplex

    J(gamma) = max_{H^T H = I_k} tr(H^T K_gamma H),    K_gamma = sum_p gamma_p^2 K_p,

the sum of the k largest eigenvalues of ``K_gamma``. J is convex (a maximum of convex
quadratics in gamma) and, by Danskin's theorem, ``g_p = 2 gamma_p tr(H^T K_p H)`` at a maximising
H is a (sub)gradient: it needs only the quadratic forms the loop already computes.

Every step of :class:`ReducedGradientStep` is a descent step: a reduced-gradient direction on
the simplex, then a line search on J along it in which every trial point is one H-step. It
returns the best point found (never worse than the start), the H of that point for the loop to
reuse, and a certificate of the point's optimality: by convexity,

    J(gamma) - J* <= g^T gamma - min_p g_p = 2 J(gamma) - min_p g_p,

so the step reports ``(2 J - min_p g_p) / J`` as its relative gap, and says the fit converged
once that is below ``gap_tol``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from .base import WeightStep, WeightUpdate

__all__ = ["ReducedGradientStep", "DIRECTIONS", "optimality_gap", "reduced_direction",
           "scaled_direction"]

#: the golden ratio's inverse: the golden-section search keeps this share of its interval
_GOLDEN = (np.sqrt(5.0) - 1.0) / 2.0
#: weights below this (relative to 1) are set to zero after a move (round-off of a boundary)
_ZERO = 1e-12
#: the scaled step is taken when J falls by at least this share of the decrease its slope
#: promises (Armijo's sufficient decrease)
_ARMIJO = 1e-4
#: the scaled search tries the parabola's minimiser up to this multiple of step 1, and only
#: when it is farther than this share of the step from it
_EXTRAPOLATE = 4.0
_INTERPOLATION_TOL = 0.05
#: ... and only when the parabola promises at least this share of the decrease already made
_WORTH = 0.1
#: the scaled search's first trial step is this multiple of the last step taken (at most 1)
_GROWTH = 2.0
#: the scaled search halves (or more) its step at most this many times (2^-8 of step 1)
_BACKTRACKS = 8
#: the weight step's directions: the authors' unit reduced gradient, or scaled by the model
DIRECTIONS = ("scaled", "reduced")


@dataclass
class _Point:
    """J at some weights, with the H-step that gave it."""

    weights: np.ndarray
    objective: float
    quad_forms: np.ndarray
    top: Any


def optimality_gap(weights: np.ndarray, quad_forms: np.ndarray) -> float:
    """``(g^T gamma - min_p g_p) / J`` with ``g = 2 gamma * q``: a bound on how far J at
    ``weights`` is above the minimum over the simplex, relative to J (0 at the optimum)."""
    w = np.asarray(weights, dtype=np.float64)
    g = 2.0 * w * np.asarray(quad_forms, dtype=np.float64)
    objective = float(np.dot(w * w, quad_forms))
    if objective <= 0:
        return 0.0
    return max(float(np.dot(g, w) - g.min()), 0.0) / objective


def reduced_direction(weights: np.ndarray, gradient: np.ndarray) -> np.ndarray:
    """The reduced-gradient descent direction on the simplex (Rakotomamonjy et al.'s SimpleMKL,
    as SimpleMKKM uses it): the largest weight u carries the equality constraint; every other
    weight moves against ``g_p - g_u`` unless it is zero and would have to go negative; u takes
    the opposite of their sum, so the weights keep summing to 1. The gradient is scaled to unit
    length first (the authors' code), so that the step bound means the same at every scale."""
    g = np.asarray(gradient, dtype=np.float64)
    norm = float(np.linalg.norm(g))
    if norm == 0.0:
        return np.zeros_like(g)
    g = g / norm
    u = int(np.argmax(weights))  # the first of ties, as the authors' 'first' rule
    reduced = g - g[u]
    return _balanced(np.where((weights > 0) | (reduced < 0), -reduced, 0.0), weights)


def _balanced(direction: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """``direction`` with the largest weight's entry set to the opposite of the others' sum, so
    that a step along it keeps the weights summing to 1 (that weight is the base variable)."""
    u = int(np.argmax(weights))
    direction[u] = 0.0
    direction[u] = -direction.sum()
    return direction


def scaled_direction(weights: np.ndarray, quad_forms: np.ndarray) -> np.ndarray:
    """The reduced gradient scaled by the inverse of the diagonal Hessian ``2 q`` of J's
    quadratic model at the current H: the step to the model's minimiser over the simplex,
    ``w_p = (1/q_p) / sum_q (1/q_q)`` (weights where ``q_p = 0`` share all of it)."""
    q = np.asarray(quad_forms, dtype=np.float64)
    zero = q <= 0
    target = zero / zero.sum() if zero.any() else (1.0 / q) / np.sum(1.0 / q)
    return target - np.asarray(weights, dtype=np.float64)


class ReducedGradientStep(WeightStep):
    """SimpleMKKM's weight step (see the module docstring).

    Parameters
    ----------
    evaluate : callable
        ``evaluate(weights, warm_start) -> (top, quad_forms)``: the H-step at ``weights``
        (warm-started from ``warm_start``, a :class:`~mkrk_dask.backends.TopK` or None) and
        ``tr(H^T K_p H)`` for every kernel.
    traces : ndarray of shape (m,)
        ``tr(K_p)``: the loop hands the step residuals ``tr(K_p) - tr(H^T K_p H)``.
    gap_tol : float
        The step says the fit converged when the certified relative gap of its weights is
        below this.
    line_search_tol : float
        With ``direction="reduced"``, the golden-section search stops when its interval is
        below this share of the largest feasible step (the authors' ``goldensearch_deltmax``).
    max_step : float
        With ``direction="reduced"``, the first trial step along the unit direction is at
        most this (the authors' 0.1).
    direction : {"scaled", "reduced"}
        ``"reduced"``: the authors' rule, the reduced gradient scaled to unit length, to the
        boundary while J decreases, then a golden-section search. ``"scaled"``: the reduced
        gradient scaled by the inverse diagonal Hessian of J's quadratic model at the current
        H (:func:`scaled_direction`), as a preconditioned conjugate gradient (Polak-Ribiere+);
        its first trial step is 1 (the model's minimiser), then twice the last step taken;
        the better of the trial and the parabola's minimiser when it decreases J enough
        (Armijo), else backtracking by parabolic interpolation.
    """

    name = "SimpleMKKM"

    def __init__(self, evaluate: Callable[[np.ndarray, Any], tuple[Any, np.ndarray]],
                 traces: np.ndarray, *, gap_tol: float = 1e-4, line_search_tol: float = 1e-3,
                 max_step: float = 0.1, direction: str = "scaled"):
        self.evaluate = evaluate
        self.traces = np.asarray(traces, dtype=np.float64)
        self.gap_tol = float(gap_tol)
        self.line_search_tol = float(line_search_tol)
        self.max_step = float(max_step)
        if direction not in DIRECTIONS:
            raise ValueError(f"direction must be one of {DIRECTIONS}, got {direction!r}")
        self.direction = direction
        self.weights: np.ndarray | None = None
        # the last scaled search's direction, gradient, scaled gradient and (every entry) the
        # step it took along its direction
        self._memory: tuple[np.ndarray, ...] | None = None
        #: H-steps the line searches made (the loop's own are not counted)
        self.evaluations = 0

    def initial_weights(self, m: int) -> np.ndarray:
        self.weights = np.full(m, 1.0 / m)
        return self.weights.copy()

    def resume(self, update: WeightUpdate) -> None:
        self.weights = np.array(update.weights, dtype=np.float64)
        state = update.representation
        self._memory = None if state is None else tuple(np.array(row) for row in state)

    def update(self, residuals: np.ndarray) -> WeightUpdate:
        return self.advance(residuals, None)

    def advance(self, residuals: np.ndarray, top: Any) -> WeightUpdate:
        if self.weights is None:
            self.initial_weights(len(residuals))
        quad = self.traces - np.asarray(residuals, dtype=np.float64)
        start = _Point(self.weights, float(np.dot(self.weights**2, quad)), quad, top)
        best = self._line_search(start)
        self.weights = best.weights
        gap = optimality_gap(best.weights, best.quad_forms)
        moved = best is not start
        # the conjugate-gradient memory travels as the step's state (saved in a checkpoint)
        state = None if self._memory is None else np.stack(self._memory)
        return WeightUpdate(weights=best.weights.copy(), objective=best.objective,
                            relative_gap=gap, certified=True, representation=state,
                            top=best.top if moved else None,
                            converged=gap <= self.gap_tol or not moved)

    # -- the line search ---------------------------------------------------------------------

    def _at(self, weights: np.ndarray, warm_start: Any) -> _Point:
        self.evaluations += 1
        top, quad = self.evaluate(weights, warm_start)
        quad = np.asarray(quad, dtype=np.float64)
        return _Point(weights, float(np.dot(weights**2, quad)), quad, top)

    @staticmethod
    def _move(weights: np.ndarray, direction: np.ndarray, step: float) -> np.ndarray:
        w = weights + step * direction
        w[w < _ZERO] = 0.0
        return w / w.sum()

    @staticmethod
    def _boundary(weights: np.ndarray, direction: np.ndarray) -> float:
        """The largest step that keeps every weight non-negative (inf if none decreases)."""
        down = direction < 0
        return float(np.min(-weights[down] / direction[down])) if down.any() else np.inf

    def _line_search(self, start: _Point) -> _Point:
        if self.direction == "scaled":
            return self._scaled_search(start)
        return self._authors_search(start)

    def _scaled_search(self, start: _Point) -> _Point:
        """The scaled direction's natural step is 1 (the model's minimiser), the first trial;
        later searches start from twice the last step taken (at most 1). J along the line is
        convex: fit a parabola to J(0), its slope and J at the trial, and try its minimiser too
        (one more H-step) when it promises a further decrease worth a tenth of the first; keep
        the lower point if it decreases J enough (Armijo), else backtrack."""
        scaled = scaled_direction(start.weights, start.quad_forms)
        gradient = 2.0 * start.weights * start.quad_forms
        direction = scaled
        first = 1.0
        if self._memory is not None:
            # preconditioned nonlinear conjugate gradient (Polak-Ribiere+): the scaled
            # directions of successive steps zig-zag where the H-step turns with the weights
            previous, old_gradient, old_scaled, taken = self._memory
            # The model's minimiser (step 1) overshoots where H turns with the weights (the
            # model holds H fixed, J maximises over it): start from twice the last step taken.
            first = min(1.0, _GROWTH * float(taken[0]))
            denominator = -float(np.dot(old_gradient, old_scaled))
            beta = (max(0.0, -float(np.dot(gradient, scaled - old_scaled))) / denominator
                    if denominator > 0 else 0.0)
            conjugate = scaled + beta * previous
            if np.dot(gradient, conjugate) < 0:
                direction = conjugate
        slope = float(np.dot(gradient, direction))
        if not np.any(direction) or slope >= 0:
            return start
        bound = self._boundary(start.weights, direction)
        step = min(first, bound)
        trial = self._at(self._move(start.weights, direction, step), start.top)
        curvature = (trial.objective - start.objective - slope * step) / step**2
        if curvature > 0:
            fitted = min(-slope / (2.0 * curvature), _EXTRAPOLATE * step, bound)
            # the parabola's further decrease from the trial to its minimiser
            promised = curvature * (fitted - step) ** 2
            if (abs(fitted - step) > _INTERPOLATION_TOL * step
                    and promised > _WORTH * max(start.objective - trial.objective, 0.0)):
                other = self._at(self._move(start.weights, direction, fitted), start.top)
                if other.objective < trial.objective:
                    trial, step = other, fitted
        if trial.objective > start.objective + _ARMIJO * step * slope:
            trial, step = self._backtrack(start, trial, direction, step, slope)
        # a search that found nothing lower leaves a tiny step: the next starts small too
        self._memory = (direction, gradient, scaled,
                        np.full_like(direction, step if trial is not start else 1e-3 * step))
        return trial

    def _backtrack(self, start: _Point, trial: _Point, direction: np.ndarray, step: float,
                   slope: float) -> tuple[_Point, float]:
        """Shorter steps until J falls enough (Armijo): each the minimiser of the parabola
        through J(0), its slope and J at the last step, kept within [0.1, 0.5] of that step
        (at most ``_BACKTRACKS`` H-steps; J is only piecewise smooth, where eigenvalues cross).
        Returns the lowest point seen (``start`` when none is lower) and its step."""
        best, best_step = (trial, step) if trial.objective < start.objective else (start, 0.0)
        for _ in range(_BACKTRACKS):
            excess = trial.objective - start.objective - slope * step
            fitted = -slope * step**2 / (2.0 * excess) if excess > 0 else 0.5 * step
            step = min(max(fitted, 0.1 * step), 0.5 * step)
            trial = self._at(self._move(start.weights, direction, step), start.top)
            if trial.objective < best.objective:
                best, best_step = trial, step
            if trial.objective <= start.objective + _ARMIJO * step * slope:
                return trial, step
        return best, (best_step or step)

    def _authors_search(self, start: _Point) -> _Point:
        """The authors' rule: go to the boundary along the direction while J decreases
        (dropping the kernel that reaches zero and turning the direction), then a golden-section
        search between the last point and the next trial; return the best point seen."""
        warm = start.top
        base = start
        direction = reduced_direction(base.weights, 2.0 * base.weights * base.quad_forms)
        if not np.any(direction):
            return start
        step = min(self._boundary(base.weights, direction), self.max_step)
        if not np.isfinite(step) or step <= 0:
            return start
        while True:
            trial = self._at(self._move(base.weights, direction, step), warm)
            if trial.objective >= base.objective:
                break
            base = trial
            # keep the direction where it stays feasible; the base variable balances the sum
            direction = _balanced(np.where((base.weights > _ZERO) | (direction > 0),
                                           direction, 0.0), base.weights)
            step = self._boundary(base.weights, direction)
            if not np.isfinite(step) or step <= 0 or not np.any(direction):
                return base
        return self._golden(base, trial, direction, step, warm)

    def _golden(self, low: _Point, high: _Point, direction: np.ndarray, span: float,
                warm: Any) -> _Point:
        """Golden-section search for the minimum of the convex J on ``[0, span]`` along
        ``direction`` from ``low`` (J at ``span`` is ``high``'s, not below ``low``'s). Each
        round reuses one interior point, so it costs one H-step (the authors' code evaluates
        both)."""
        origin = low.weights
        a, b = 0.0, span
        best = low
        c, d = b - _GOLDEN * (b - a), a + _GOLDEN * (b - a)
        fc = self._at(self._move(origin, direction, c), warm)
        fd = self._at(self._move(origin, direction, d), warm)
        while True:
            for point in (fc, fd):
                if point.objective < best.objective:
                    best = point
            if b - a <= self.line_search_tol * span:
                return best
            if fc.objective <= fd.objective:
                b, d, fd = d, c, fc
                c = b - _GOLDEN * (b - a)
                fc = self._at(self._move(origin, direction, c), warm)
            else:
                a, c, fc = c, d, fd
                d = a + _GOLDEN * (b - a)
                fd = self._at(self._move(origin, direction, d), warm)
