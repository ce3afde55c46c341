"""The Y-step of MKKM-RK as a problem: objective, gradient and optimality certificates.

Given per-kernel residuals ``d`` (m,), a dissimilarity ``C`` (m, m) and ``lam >= 0``::

    minimize    f(Y) = (1/m^2) sum_i d_i s_i^2 + lam <C, Y>,     s = Y @ 1 (row sums)
    subject to  every column of Y sums to 1,  Y >= 0.

The gradient is ``G_ij = (2/m^2) d_i s_i + lam C_ij``. Because the feasible set is a product of
simplices (one per column), the Frank-Wolfe gap

    gap(Y) = sum_j ( sum_i Y_ij G_ij - min_i G_ij )

is a computable upper bound on ``f(Y) - f*`` and vanishes exactly at an optimum. The optimum
``Y`` is *not* unique (only ``f*`` is), so everything here is judged by objective and gap.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

__all__ = ["QPSolution", "frank_wolfe_gap", "kkt_residuals", "yqp_gradient", "yqp_objective"]

# Denominator floor for relative quantities (a problem whose objective is exactly 0 is solved
# exactly by the closed forms or the polish, so dividing a 0 gap by this stays 0).
_TINY = np.finfo(float).tiny
# Entries of d in [-tol, 0) with tol = max(_D_NEG_REL * max|d|, _D_NEG_ABS) are treated as
# round-off of tr(K_p) - tr(H^T K_p H) and set to 0; anything more negative is an error.
_D_NEG_REL = 1e-10
_D_NEG_ABS = 1e-12



# --------------------------------------------------------------------------------------------
# Objective, gradient and optimality measures (plain functions: usable on any Y, any solver)
# --------------------------------------------------------------------------------------------


def _as_problem(Y, d, C, lam) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
    """Convert the arguments to float arrays and check that their shapes agree."""
    Y = np.asarray(Y, dtype=float)
    d = np.asarray(d, dtype=float)
    C = np.asarray(C, dtype=float)
    m = C.shape[0] if C.ndim == 2 else -1
    if C.ndim != 2 or C.shape != (m, m):
        raise ValueError(f"C must be a square matrix, got shape {C.shape}")
    if Y.shape != (m, m):
        raise ValueError(f"Y must have shape {(m, m)}, got {Y.shape}")
    if d.shape != (m,):
        raise ValueError(f"d must have shape {(m,)}, got {d.shape}")
    return Y, d, C, float(lam)


def _objective_parts(Y: np.ndarray, d: np.ndarray, C: np.ndarray, lam: float):
    """The quadratic term and the linear term of f separately (their sum is f)."""
    m = C.shape[0]
    s = Y.sum(axis=1)
    quad = float(np.dot(d, s * s)) / m**2
    lin = lam * float(np.vdot(C, Y)) if lam != 0.0 else 0.0
    return quad, lin


def _objective_scale(quad: float, lin: float, d: np.ndarray, C: np.ndarray, lam: float) -> float:
    """Denominator of relative gaps: ``max(quad + |lin|, 1e-15 * fmax)``.

    ``quad + |lin|`` equals ``|f|`` whenever ``lam <C, Y> >= 0`` (the usual C >= 0) and keeps
    the ratio meaningful when a C with negative entries makes the two terms cancel. The floor
    ``fmax = max(d) + lam m max|C|`` bounds ``|f|`` over the whole feasible set, so ``1e-15
    fmax`` is the floating-point resolution of the problem: when ``f* = 0`` (a zero ``d_i``
    and a zero cost available) a gap of 1e-50 is a perfect solution, not a relative error of
    order 1.
    """
    m = C.shape[0]
    fmax = float(np.max(d, initial=0.0)) + lam * m * float(np.max(np.abs(C), initial=0.0))
    return max(quad + abs(lin), 1e-15 * fmax, _TINY)


def yqp_objective(Y, d, C, lam) -> float:
    """Objective of the Y-step, ``(1/m^2) sum_i d_i s_i^2 + lam <C, Y>`` with ``s = Y 1``.

    Parameters
    ----------
    Y : array_like of shape (m, m)
        Representation matrix (need not be feasible).
    d : array_like of shape (m,)
        Per-kernel residuals, ``d >= 0``.
    C : array_like of shape (m, m)
        Dissimilarity between kernels.
    lam : float
        Weight of the representation cost, ``lam >= 0``.

    Returns
    -------
    float
    """
    quad, lin = _objective_parts(*_as_problem(Y, d, C, lam))
    return quad + lin


def _gradient(Y: np.ndarray, d: np.ndarray, C: np.ndarray, lam: float) -> np.ndarray:
    m = C.shape[0]
    t = (2.0 / m**2) * d * Y.sum(axis=1)  # row "prices" a_i s_i
    return t[:, None] + lam * C


def yqp_gradient(Y, d, C, lam) -> np.ndarray:
    """Gradient of :func:`yqp_objective`: ``G_ij = (2/m^2) d_i s_i + lam C_ij``.

    Parameters
    ----------
    Y, d, C, lam
        As in :func:`yqp_objective`.

    Returns
    -------
    ndarray of shape (m, m)
    """
    return _gradient(*_as_problem(Y, d, C, lam))


def _fw_gap_from_gradient(Y: np.ndarray, G: np.ndarray) -> float:
    """Frank-Wolfe gap given the gradient.

    Computed as ``sum_ij Y_ij (G_ij - nu_j) + sum_j nu_j (colsum_j - 1)``, which equals the
    textbook ``sum_j (sum_i Y_ij G_ij - nu_j)`` but subtracts ``nu`` *before* summing, so a
    feasible Y's gap is not drowned by cancellation between large gradient entries.
    """
    nu = G.min(axis=0)
    reduced = G - nu  # >= 0 exactly in floating point
    gap = float(np.sum(Y * reduced)) + float(np.dot(nu, Y.sum(axis=0) - 1.0))
    return gap


def frank_wolfe_gap(Y, d, C, lam) -> float:
    """Frank-Wolfe gap ``sum_j (sum_i Y_ij G_ij - min_i G_ij)``.

    For a feasible ``Y`` (columns summing to 1, ``Y >= 0``) it is ``>= f(Y) - f*`` and it is
    0 exactly at an optimum, so it certifies a solution without knowing ``f*``.

    Parameters
    ----------
    Y, d, C, lam
        As in :func:`yqp_objective`.

    Returns
    -------
    float
        The gap (absolute, in objective units).
    """
    Y, d, C, lam = _as_problem(Y, d, C, lam)
    return _fw_gap_from_gradient(Y, _gradient(Y, d, C, lam))


def kkt_residuals(Y, d, C, lam, nu=None) -> dict[str, float]:
    """KKT residuals of the Y-step at ``Y``.

    Parameters
    ----------
    Y, d, C, lam
        As in :func:`yqp_objective`.
    nu : array_like of shape (m,), optional
        Multipliers of the column-sum constraints. By default ``nu_j = min_i G_ij``, the
        choice that makes the Frank-Wolfe gap the duality gap; then the dual residual is 0 by
        construction and complementarity carries all the information. Pass a solver's own
        multipliers to test those.

    Returns
    -------
    dict
        ``"primal"``: ``max(max_j |sum_i Y_ij - 1|, max_ij (-Y_ij)^+)``. Y is dimensionless
        (entries in [0, 1]), so this is not rescaled.
        ``"dual"``: ``max_ij (nu_j - G_ij)^+`` and ``"complementarity"``:
        ``max_ij Y_ij |G_ij - nu_j|``, both in objective units divided by the objective scale
        ``(1/m^2) sum_i d_i s_i^2 + |lam <C, Y>|`` (equal to ``|f(Y)|`` when ``lam <C, Y> >=
        0``, floored at ``1e-15 (max(d) + lam m max|C|)``), the same denominator as
        :attr:`QPSolution.relative_gap`. With the default ``nu`` and a feasible Y,
        complementarity is therefore at most the relative gap.
    """
    Y, d, C, lam = _as_problem(Y, d, C, lam)
    G = _gradient(Y, d, C, lam)
    nu = G.min(axis=0) if nu is None else np.asarray(nu, dtype=float).reshape(-1)
    if nu.shape != (C.shape[0],):
        raise ValueError(f"nu must have shape {(C.shape[0],)}, got {nu.shape}")
    scale = _objective_scale(*_objective_parts(Y, d, C, lam), d, C, lam)
    primal = max(float(np.max(np.abs(Y.sum(axis=0) - 1.0))), float(np.max(-Y, initial=0.0)))
    dual = float(np.max(nu[None, :] - G, initial=0.0))
    comp = float(np.max(Y * np.abs(G - nu[None, :])))
    return {"primal": primal, "dual": max(dual, 0.0) / scale, "complementarity": comp / scale}


# --------------------------------------------------------------------------------------------
# Solution record
# --------------------------------------------------------------------------------------------


@dataclass
class QPSolution:
    """Result of one Y-step.

    Attributes
    ----------
    Y : ndarray of shape (m, m)
        Feasible solution (columns sum to 1 to round-off, ``Y >= 0``). Not unique: compare
        solutions by ``objective`` and ``gap``, not by Y or the weights.
    objective : float
        ``f(Y)``.
    gap : float
        ``frank_wolfe_gap(Y)``: a certified bound on ``f(Y) - f*``.
    relative_gap : float
        ``gap`` divided by the objective scale ``quad + |lin|`` (``= |objective|`` when
        ``lam <C, Y> >= 0``), floored at the problem's floating-point resolution
        ``1e-15 (max(d) + lam m max|C|)`` so that ``f* = 0`` problems are not penalised.
    certified : bool
        ``relative_gap <= gap_tol``.
    osqp_status : str
        OSQP's status string after its last stage; ``"closed_form"`` when the problem has one
        (``lam C == 0``, or ``d == 0``: a linear program); ``"skipped_warm_polish"`` when the
        polish from the previous solution certified without OSQP.
    osqp_iterations : int
        ADMM iterations of this solve (all stages).
    polish_rounds : int
        Active-set rounds the KKT polish ran (0 if skipped).
    timings : dict
        Wall-clock seconds: ``"osqp"``, ``"polish"`` and ``"total"``.
    """

    Y: np.ndarray
    objective: float
    gap: float
    relative_gap: float
    certified: bool
    osqp_status: str
    osqp_iterations: int
    polish_rounds: int
    timings: dict[str, float] = field(default_factory=dict)

    @property
    def weights(self) -> np.ndarray:
        """Kernel weights ``w = s / m`` (row means of Y; they sum to 1)."""
        return self.Y.mean(axis=1)


# --------------------------------------------------------------------------------------------
# Input validation
# --------------------------------------------------------------------------------------------


def _check_C(C) -> np.ndarray:
    C = np.array(C, dtype=float)  # a copy: later changes by the caller must not leak in
    if C.ndim != 2 or C.shape[0] != C.shape[1] or C.shape[0] == 0:
        raise ValueError(f"C must be a non-empty square matrix, got shape {C.shape}")
    if not np.all(np.isfinite(C)):
        raise ValueError("C contains NaN or infinite entries")
    return C


def _check_d(d, m: int) -> np.ndarray:
    d = np.array(d, dtype=float)
    if d.shape != (m,):
        raise ValueError(f"d must have shape {(m,)}, got {d.shape}")
    if not np.all(np.isfinite(d)):
        raise ValueError("d contains NaN or infinite entries")
    tol = max(_D_NEG_REL * float(np.max(np.abs(d))), _D_NEG_ABS)
    if np.any(d < -tol):
        raise ValueError(f"d must be >= 0; got min(d) = {d.min():.3e} (round-off allowance "
                         f"{tol:.1e})")
    return np.maximum(d, 0.0)  # round-off negatives -> 0
