"""The Y-step of MKKM-RK: a convex QP over a product of simplices, solved and certified.

Given per-kernel residuals ``d`` (m,), a dissimilarity ``C`` (m, m) and ``lam >= 0``::

    minimize    f(Y) = (1/m^2) sum_i d_i s_i^2 + lam <C, Y>,     s = Y @ 1 (row sums)
    subject to  every column of Y sums to 1,  Y >= 0.

The gradient is ``G_ij = (2/m^2) d_i s_i + lam C_ij``. Because the feasible set is a product of
simplices (one per column), the Frank-Wolfe gap

    gap(Y) = sum_j ( sum_i Y_ij G_ij - min_i G_ij )

is a computable upper bound on ``f(Y) - f*`` and vanishes exactly at an optimum. The optimum
``Y`` is *not* unique (only ``f*`` is), so everything here is judged by objective and gap.

How it is solved. One OSQP workspace per (C, lam) is built once and reused across the
alternating loop; each solve only updates P's values and q. The result is then refined by an
*active-set KKT polish* (a primal active-set method with exact line searches: solve the KKT
equations on a guessed support by least squares, step towards that point as far as Y >= 0
allows, add the most violated entry, repeat). The polish matters because the large-sigma
Gaussian kernels have tiny ``d_i``: their weights move while the objective barely does, and ADMM
needs 10-100x more iterations to reach 1e-10 than to find the right support. So OSQP runs in
tightening stages (1e-6, 1e-8, ``eps``), each followed by the polish, and stops at the first
certified result; a warm solve first tries the polish alone from the previous solution and
skips OSQP when that certifies. Every candidate is feasible and certified with the Frank-Wolfe
gap; the one with the smallest objective is returned. An uncertified result is never silent:
it warns (:class:`UncertifiedSolutionWarning`) or, with ``strict=True``, raises
(:class:`QPCertificationError`).
"""

from __future__ import annotations

import contextlib
import time
import warnings
from dataclasses import dataclass, field

import numpy as np
import osqp
import scipy.linalg
import scipy.sparse as sp
from sklearn.exceptions import ConvergenceWarning

__all__ = [
    "QPCertificationError",
    "QPSolution",
    "RepresentativeQP",
    "UncertifiedSolutionWarning",
    "frank_wolfe_gap",
    "kkt_residuals",
    "yqp_gradient",
    "yqp_objective",
]

# Denominator floor for relative quantities (a problem whose objective is exactly 0 is solved
# exactly by the closed forms or the polish, so dividing a 0 gap by this stays 0).
_TINY = np.finfo(float).tiny
#: OSQP's status when Ctrl-C arrived during a solve
_OSQP_SIGINT = (osqp.SolverStatus.OSQP_SIGINT.value if hasattr(osqp, "SolverStatus")
                else osqp.constant("OSQP_SIGINT"))
# Entries of d in [-tol, 0) with tol = max(_D_NEG_REL * max|d|, _D_NEG_ABS) are treated as
# round-off of tr(K_p) - tr(H^T K_p H) and set to 0; anything more negative is an error.
_D_NEG_REL = 1e-10
_D_NEG_ABS = 1e-12
# Cap on the unknowns of the dense KKT least-squares solve of the polish (about 0.3 s at 1000).
# An optimal basic solution has at most 2m - 1 support entries, so this binds only for m > 300
# or for a dense, near-degenerate starting point (then the support guess is thinned).
_POLISH_MAX_UNKNOWNS = 1000
# KKT equations on a support whose stationarity misfit (relative to the gradient scale) exceeds
# this are inconsistent (a cycle of ties that cannot all hold); the polish then takes a
# proximal step with this weight (relative to the gradient scale) instead.
_KKT_CONSISTENT = 1e-10
_PROX_MU = 1e-9


class UncertifiedSolutionWarning(ConvergenceWarning):
    """The returned Y-step solution's relative Frank-Wolfe gap exceeds ``gap_tol``."""


class QPCertificationError(RuntimeError):
    """Raised instead of :class:`UncertifiedSolutionWarning` when ``strict=True``."""


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


def _check_lam(lam) -> float:
    try:
        lam = float(lam)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"lam must be a real number, got {lam!r}") from exc
    if not np.isfinite(lam) or lam < 0:
        raise ValueError(f"lam must be finite and >= 0, got {lam}")
    return lam


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


# --------------------------------------------------------------------------------------------
# Closed forms and projections
# --------------------------------------------------------------------------------------------


def _project_columns(Y: np.ndarray, G: np.ndarray | None = None) -> np.ndarray:
    """Clip to ``Y >= 0`` and rescale every column to sum 1.

    A column with no positive entry left is replaced by a unit vector at its smallest gradient
    entry (or at row 0 without a gradient): the Frank-Wolfe vertex, always a sensible choice.
    """
    Y = np.maximum(Y, 0.0)
    col = Y.sum(axis=0)
    empty = col <= 0
    if np.any(empty):
        rows = np.argmin(G, axis=0)[empty] if G is not None else np.zeros(empty.sum(), int)
        Y[:, empty] = 0.0
        Y[rows, np.flatnonzero(empty)] = 1.0
        col = Y.sum(axis=0)
    return Y / col


def _closed_form_lam0(d: np.ndarray) -> np.ndarray:
    """Optimum for ``lam C == 0``: minimise ``sum_i d_i w_i^2`` over the simplex (w = s/m).

    With every d_i > 0, ``w_i = (1/d_i) / sum_j (1/d_j)`` (all ``d_i w_i`` equal); if some
    d_i == 0 those rows absorb all the mass (shared equally) and f* = 0. Any Y with these row
    means is optimal; we return ``Y = w 1^T``.
    """
    m = d.size
    zero = d == 0
    if np.any(zero):
        w = zero / zero.sum()
    else:
        inv = 1.0 / d
        w = inv / inv.sum()
    return np.repeat(w[:, None], m, axis=1)


def _closed_form_lp(c: np.ndarray) -> np.ndarray:
    """Optimum for ``d == 0`` (a pure LP): every column puts its mass on its cheapest row."""
    m = c.shape[0]
    Y = np.zeros((m, m))
    Y[np.argmin(c, axis=0), np.arange(m)] = 1.0
    return Y


# --------------------------------------------------------------------------------------------
# Active-set KKT polish
# --------------------------------------------------------------------------------------------


def _initial_support(Y0: np.ndarray, G0: np.ndarray, y_thr: float, r_thr: float,
                     max_size: int) -> np.ndarray:
    """Support guess: entries clearly in use and not clearly too expensive, plus each column's
    cheapest entry (so every column-sum equation has at least one unknown).

    An optimal *basic* solution needs at most ``2m - 1`` entries, but a near-degenerate
    OSQP point can be dense; the threshold on Y is raised until at most ``max_size`` entries
    remain, keeping the dense KKT solve cheap (the polish adds back what is missing).
    """
    m = Y0.shape[0]
    nu = G0.min(axis=0)
    gscale = max(float(np.max(np.abs(G0))), _TINY)
    cheap = G0 - nu <= r_thr * gscale
    while True:
        S = (Y0 > y_thr) & cheap
        S[np.argmin(G0, axis=0), np.arange(m)] = True
        if S.sum() <= max_size or y_thr >= 1.0:
            return S
        y_thr *= 10.0


def _lstsq(A: np.ndarray, b: np.ndarray) -> np.ndarray:
    # gelsy (QR with column pivoting) gives the minimum-norm solution of a rank-deficient
    # system like gelsd, at a fraction of the cost of an SVD.
    return scipy.linalg.lstsq(A, b, lapack_driver="gelsy", check_finite=False)[0]


_BLAS_CONTROLLER = None


def _single_threaded_blas():
    """Context limiting BLAS to one thread.

    The polish systems are a few hundred unknowns at most; threaded BLAS gains nothing there
    and, on a machine busy with other work (Dask workers), OpenBLAS's spinning threads made a
    181 x 181 least-squares solve 100x slower (0.4 s instead of 4 ms) in our measurements.
    """
    global _BLAS_CONTROLLER
    try:
        from threadpoolctl import ThreadpoolController
    except ImportError:  # pragma: no cover - threadpoolctl comes with scikit-learn
        return contextlib.nullcontext()
    if _BLAS_CONTROLLER is None:
        _BLAS_CONTROLLER = ThreadpoolController()  # scanning the loaded libraries costs ms
    return _BLAS_CONTROLLER.limit(limits=1, user_api="blas")


def _solve_kkt_on_support(S: np.ndarray, a: np.ndarray, c: np.ndarray,
                          center: np.ndarray | None = None, mu: float = 0.0):
    """Solve the KKT equations with Y supported on ``S``.

    Unknowns: ``y`` (one per support entry) and the column multipliers ``nu``. Equations:

    - stationarity on the support: ``a_i sum_{j': (i,j') in S} y_ij' + c_ij - nu_j = 0``;
    - column sums: ``sum_{i: (i,j) in S} y_ij = 1``.

    The row sums are substituted rather than carried as unknowns, so that when the support is
    wrong (ties that cannot all hold) the least-squares misfit lands on stationarity, where
    the polish detects it, instead of hiding in a row-sum equation. Stationarity is divided
    by a gradient scale so both blocks are O(1). The system is square but may be
    rank-deficient (Y is not unique; rows with d_i = 0 leave their mass free), hence
    minimum-norm least squares plus one step of iterative refinement.

    With ``mu > 0`` the proximal term ``(mu * gscale / 2) ||Y - center||^2`` is added to f:
    the equations are then always consistent, and the solution is a descent direction even
    when the support holds a cycle of ties that cannot all hold.

    Returns ``(Y, nu, misfit)``: Y dense (zeros off the support; entries may be negative),
    and the largest stationarity residual relative to the gradient scale (round-off level
    when the support is consistent).
    """
    m = a.size
    ii, jj = np.nonzero(S)
    k = ii.size
    # Gradient units -> O(1): the largest price a_i * m (s_i <= m) or cost on the support.
    gscale = max(float(np.max(a)) * m, float(np.max(np.abs(c[ii, jj]))), _TINY)
    A = np.zeros((k + m, k + m))
    b = np.zeros(k + m)
    rows = np.arange(k)
    A[:k, :k] = (ii[:, None] == ii[None, :]) * (a[ii] / gscale)[:, None]  # a_i s_i
    A[rows, k + jj] = -1.0  # - nu_j (nu in units of gscale)
    b[:k] = -c[ii, jj] / gscale
    A[k + jj, rows] = 1.0  # column sums
    b[k:] = 1.0
    if mu > 0:
        A[rows, rows] += mu
        b[:k] += mu * center[ii, jj]
    with _single_threaded_blas():
        x = _lstsq(A, b)
        # One refinement step recovers digits lost to the wide range of a_i / gscale.
        x += _lstsq(A, b - A @ x)
    misfit = float(np.max(np.abs(A[:k] @ x - b[:k])))
    Y = np.zeros((m, m))
    Y[ii, jj] = x[:k]
    return Y, x[k:] * gscale, misfit


def _prices(Y: np.ndarray, a: np.ndarray, c: np.ndarray) -> np.ndarray:
    """Gradient ``G = a_i s_i + c_ij`` from the prices ``a = 2 d / m^2`` and cost ``c = lam C``."""
    return (a * Y.sum(axis=1))[:, None] + c


def _line_search(Y: np.ndarray, D: np.ndarray, a: np.ndarray, c: np.ndarray):
    """Exact line search from a feasible ``Y`` along ``D`` (columns of D sum to 0).

    f is quadratic along the line: ``f(Y + t D) = f(Y) + t <G, D> + t^2/2 sum_i a_i (D 1)_i^2``,
    so the minimiser is closed-form; it is capped by the ratio test that keeps ``Y >= 0``.

    Returns ``(Y_new, blocking)``: ``blocking`` marks the entries that the cap drove to 0
    (all False if the unconstrained minimiser along the line was reached). ``Y_new`` is None
    when ``D`` is not a descent direction.
    """
    slope = float(np.sum(_prices(Y, a, c) * D))
    if not slope < 0:
        return None, None
    rows = D.sum(axis=1)
    curvature = float(np.dot(a, rows * rows))
    t_star = -slope / curvature if curvature > 0 else np.inf
    dec = D < 0
    ratios = np.where(dec, Y / np.where(dec, -D, 1.0), np.inf)
    t_max = float(ratios.min())
    t = min(t_star, t_max)
    if not np.isfinite(t):
        return None, None
    Y_new = Y + t * D
    blocking = dec & (ratios <= t * (1 + 1e-12)) if t_max <= t_star else np.zeros_like(dec)
    Y_new[blocking] = 0.0
    return _project_columns(Y_new), blocking


# --------------------------------------------------------------------------------------------
# The solver
# --------------------------------------------------------------------------------------------


@dataclass
class _Layout:
    """Sparsity patterns and constant data of one OSQP formulation of the Y-step.

    Variables start with row-major ``vec(Y)`` (index ``i*m + j``). ``P_row[k]`` says which
    price ``a_i = 2 d_i / m^2`` the k-th stored entry of P carries, so ``Px = a[P_row]``; the
    pattern stores every entry explicitly, zeros included, so it never changes with ``d``.
    """

    formulation: str
    m: int
    n_var: int
    P_indices: np.ndarray
    P_indptr: np.ndarray
    P_row: np.ndarray
    A: sp.csc_matrix
    l: np.ndarray
    u: np.ndarray


def _column_sum_rows(m: int, n_var: int) -> sp.csc_matrix:
    k = np.arange(m * m)
    return sp.csc_matrix((np.ones(m * m), (k % m, k)), shape=(m, n_var))


def _bound_rows(m: int, n_var: int) -> sp.csc_matrix:
    k = np.arange(m * m)
    return sp.csc_matrix((np.ones(m * m), (k, k)), shape=(m * m, n_var))


def _block_layout(m: int) -> _Layout:
    """P block-diagonal over vec(Y), block i = a_i 1 1^T (upper triangle); A = [colsum; I]."""
    n = m * m
    col = np.arange(n)
    blk = col // m  # the row i of Y that variable k = i*m + j belongs to
    counts = col % m + 1  # upper triangle of a dense m x m block: its column j has j+1 entries
    indptr = np.concatenate([[0], np.cumsum(counts)])
    nnz = int(indptr[-1])
    indices = np.repeat(blk * m, counts) + np.arange(nnz) - np.repeat(indptr[:-1], counts)
    A = sp.vstack([_column_sum_rows(m, n), _bound_rows(m, n)], format="csc")
    A.sort_indices()
    l = np.concatenate([np.ones(m), np.zeros(n)])
    u = np.concatenate([np.ones(m), np.full(n, np.inf)])
    return _Layout("block", m, n, indices.astype(np.int64), indptr.astype(np.int64),
                   np.repeat(blk, counts), A, l, u)


def _lifted_layout(m: int) -> _Layout:
    """Variables [vec(Y), s]: P = diag(0, a) (only the s entries stored), A = [colsum;
    rowsum(Y) - s; I]. Same optimum, but P has m entries instead of m^2 (m+1)/2."""
    n = m * m
    n_var = n + m
    indptr = np.concatenate([np.zeros(n + 1, dtype=np.int64), np.arange(1, m + 1)])
    indices = np.arange(n, n_var, dtype=np.int64)
    k = np.arange(n)
    row_def = sp.csc_matrix(
        (np.concatenate([np.ones(n), -np.ones(m)]),
         (np.concatenate([k // m, np.arange(m)]), np.concatenate([k, n + np.arange(m)]))),
        shape=(m, n_var))
    A = sp.vstack([_column_sum_rows(m, n_var), row_def, _bound_rows(m, n_var)], format="csc")
    A.sort_indices()
    l = np.concatenate([np.ones(m), np.zeros(m), np.zeros(n)])
    u = np.concatenate([np.ones(m), np.zeros(m), np.full(n, np.inf)])
    return _Layout("lifted", m, n_var, indices, indptr, np.arange(m), A, l, u)


_LAYOUTS = {"block": _block_layout, "lifted": _lifted_layout}


@dataclass
class _Candidate:
    """A feasible point with its objective, Frank-Wolfe gap and objective scale."""

    Y: np.ndarray
    objective: float
    fw_gap: float
    scale: float


class RepresentativeQP:
    """The Y-step QP for a fixed ``C`` and ``lam``, solved repeatedly for changing ``d``.

    The OSQP problem is built once: ``P`` is block-diagonal over row-major ``vec(Y)`` with
    block i equal to ``(2 d_i / m^2) 1 1^T`` (stored with explicit entries even when
    ``d_i = 0``, so its sparsity never changes), ``q = lam vec(C)``, and ``A`` stacks the
    column-sum rows over the identity. Each :meth:`solve` only updates ``P``'s values and
    ``q`` (both divided by a per-solve cost scale so OSQP always sees O(1) data) and is
    warm-started from the previous solution, since the alternating loop changes ``d`` slowly.

    Parameters
    ----------
    C : array_like of shape (m, m)
        Dissimilarity matrix (finite).
    lam : float
        Weight of the representation cost (finite, ``>= 0``).
    gap_tol : float, default 1e-8
        A solution is *certified* when its relative Frank-Wolfe gap is at most this.
    eps : float, default 1e-10
        OSQP ``eps_abs`` and ``eps_rel``.
    max_iter : int, default 200_000
        OSQP iteration cap.
    polish : bool, default True
        Run the active-set KKT polish after OSQP. (OSQP's own polishing is always on.)
    strict : bool, default False
        Raise :class:`QPCertificationError` instead of warning when a solution is not
        certified.
    formulation : {"lifted", "block"}, default "lifted"
        ``"block"``: P block-diagonal over ``vec(Y)``, block i = ``(2 d_i/m^2) 1 1^T``.
        ``"lifted"``: the row sums ``s`` are extra variables tied to Y by ``m`` equality rows,
        so P is diagonal; same optimum, far sparser KKT system (about 3x faster per OSQP
        iteration at m = 30 and 10x at m = 100; in the alternating loop on 400 samples with
        the 12 paper kernels, warm solves took a median 3 ms lifted vs 22 ms block).

    Attributes
    ----------
    m : int
    n_solves : int
        Number of :meth:`solve` calls so far.
    total_time : dict
        Cumulative wall-clock seconds per phase (``"osqp"``, ``"polish"``, ``"total"``).
    last_solution : QPSolution or None
    """

    def __init__(self, C, lam, *, gap_tol: float = 1e-8, eps: float = 1e-10,
                 max_iter: int = 200_000, polish: bool = True, strict: bool = False,
                 formulation: str = "lifted"):
        self.C = _check_C(C)
        self.lam = _check_lam(lam)
        if not (np.isfinite(gap_tol) and gap_tol >= 0):
            raise ValueError(f"gap_tol must be finite and >= 0, got {gap_tol}")
        if not (np.isfinite(eps) and eps > 0):
            raise ValueError(f"eps must be finite and > 0, got {eps}")
        if int(max_iter) < 1:
            raise ValueError(f"max_iter must be >= 1, got {max_iter}")
        self.gap_tol = float(gap_tol)
        self.eps = float(eps)
        self.max_iter = int(max_iter)
        self.polish = bool(polish)
        self.strict = bool(strict)
        if formulation not in _LAYOUTS:
            raise ValueError(f"formulation must be one of {tuple(_LAYOUTS)}, got "
                             f"{formulation!r}")
        self.formulation = formulation
        self.m = self.C.shape[0]
        self._c = self.lam * self.C  # the linear cost, in the same units as the gradient
        self.n_solves = 0
        self.total_time = {"osqp": 0.0, "polish": 0.0, "total": 0.0}
        self.last_solution: QPSolution | None = None
        # Patterns are built once; OSQP itself is set up on the first solve that needs it,
        # so that its (fixed) Ruiz scaling is computed from real data rather than a guess.
        self._layout = _LAYOUTS[formulation](self.m)
        self._solver: osqp.OSQP | None = None
        self._Y_prev: np.ndarray | None = None
        self._fallback: RepresentativeQP | None = None

    # ---- OSQP problem -----------------------------------------------------------------------

    def _settings(self, eps: float) -> dict:
        return dict(eps_abs=eps, eps_rel=eps, polishing=True, verbose=False, adaptive_rho=True,
                    max_iter=self.max_iter, warm_starting=True, polish_refine_iter=10)

    def _eps_stages(self) -> list[float]:
        """OSQP tolerances to try in turn, loosest first.

        The KKT polish usually certifies from a 1e-6 OSQP point already (the support is what
        it needs, not digits), while driving ADMM to 1e-10 can take 10-100x more iterations
        or stall at ``max_iter`` on degenerate problems. So we tighten only until the result
        certifies; ADMM resumes from its own iterate between stages, so nothing is wasted.
        Without the polish there is nothing to stop early for: one stage at ``eps``.
        """
        if not self.polish:
            return [self.eps]
        return [e for e in (1e-6, 1e-8) if e > self.eps] + [self.eps]

    def _osqp_setup(self, Px: np.ndarray, q: np.ndarray, eps: float) -> None:
        lay = self._layout
        P = sp.csc_matrix((Px, lay.P_indices, lay.P_indptr), shape=(lay.n_var, lay.n_var))
        self._solver = osqp.OSQP()
        self._solver.setup(P, q, lay.A, lay.l, lay.u, **self._settings(eps))

    def _osqp_load(self, a: np.ndarray) -> None:
        """Put the data for prices ``a = 2 d / m^2`` into the workspace."""
        # Divide the cost by its largest coefficient: OSQP's Ruiz scaling is fixed at setup,
        # and d, lam C can span 1e-8 .. 1e6, so normalising per solve keeps its data O(1).
        cost_scale = max(float(np.max(a)), float(np.max(np.abs(self._c))), _TINY)
        lay = self._layout
        Px = a[lay.P_row] / cost_scale
        q = np.zeros(lay.n_var)
        q[: self.m**2] = self._c.ravel() / cost_scale
        if self._solver is None:
            self._osqp_setup(Px, q, self._eps_stages()[0])
        else:
            # warm_starting=True: ADMM resumes from its last iterate. We measured explicit
            # warm starts from the polished Y and its implied duals: never clearly better, and
            # sometimes they stalled ADMM (5000+ iterations instead of ~400 at m = 60).
            self._solver.update(Px=Px, q=q)

    def _osqp_run(self, eps: float, max_iter: int):
        """One OSQP solve at tolerance ``eps``; returns (Y or None, status, iterations)."""
        self._solver.update_settings(eps_abs=eps, eps_rel=eps, max_iter=max_iter)
        res = self._solver.solve(raise_error=False)
        if res.info.status_val == _OSQP_SIGINT:
            # OSQP traps Ctrl-C during a solve and returns; pass the interrupt on.
            raise KeyboardInterrupt
        x = np.array(res.x, dtype=float)  # copy: OSQP reuses the buffer
        m = self.m
        ok = x.size == self._layout.n_var and np.all(np.isfinite(x))
        Y = x[: m * m].reshape(m, m) if ok else None
        return Y, str(res.info.status), int(res.info.iter)

    # ---- candidates and polish ----------------------------------------------------------------

    def _candidate(self, Y: np.ndarray, d: np.ndarray) -> _Candidate:
        quad, lin = _objective_parts(Y, d, self.C, self.lam)
        G = _gradient(Y, d, self.C, self.lam)
        return _Candidate(Y, quad + lin, max(_fw_gap_from_gradient(Y, G), 0.0),
                          _objective_scale(quad, lin, d, self.C, self.lam))

    def _polish(self, Y0: np.ndarray, d: np.ndarray, a: np.ndarray) -> tuple[list, int]:
        """Active-set KKT polish from ``Y0``; returns (feasible candidates, rounds run).

        A primal active-set method on the support ``S``, kept monotone by line searches:

        1. solve the KKT equations on ``S`` (the minimiser of f over matrices supported on
           ``S`` with unit column sums) and move towards it from the current feasible point,
           as far as ``Y >= 0`` allows; an entry that blocks the step leaves ``S``;
        2. if ``S`` holds ties that cannot all hold, those equations are inconsistent; a
           proximal KKT step (always a descent direction) replaces the exact one, and its line
           search soon drops an entry of the offending cycle;
        3. once an exact step is taken in full, Y minimises f on ``S``; if an entry outside
           ``S`` is cheaper than its column's multiplier (``G_ij < nu_j``), the most violated
           one joins ``S``; if none is, Y is a KKT point of the whole problem.

        f never increases, so the rounds cannot cycle the way "drop every negative entry,
        add every violated one" did (it oscillated between near-identical supports on
        near-degenerate problems). Every iterate is a feasible candidate for the certificate.
        """
        m = self.m
        c = self._c
        G0 = _prices(Y0, a, c)
        S = _initial_support(Y0, G0, y_thr=1e-7, r_thr=1e-6, max_size=_POLISH_MAX_UNKNOWNS - m)
        Y = _project_columns(np.where(S, Y0, 0.0), G0)
        cands = [self._candidate(Y, d)]
        rounds = 0
        # One round adds or removes about one support entry; from an OSQP point 1 round is
        # typical, from a poor start a few per active row.
        while rounds < 20 + 4 * m and S.sum() + m <= _POLISH_MAX_UNKNOWNS:
            rounds += 1
            target, _, misfit = _solve_kkt_on_support(S, a, c)
            exact = misfit <= _KKT_CONSISTENT
            if not exact:
                target, _, _ = _solve_kkt_on_support(S, a, c, center=Y, mu=_PROX_MU)
            Y_new, blocking = _line_search(Y, np.where(S, target - Y, 0.0), a, c)
            if Y_new is not None:
                Y = Y_new
                S &= ~blocking
                cand = self._candidate(Y, d)
                cands.append(cand)
                if cand.fw_gap <= 1e-3 * self.gap_tol * cand.scale:
                    break  # far below the certificate; further rounds cannot matter
                if np.any(blocking) or not exact:
                    continue  # re-solve on the new support / from the new point
            elif not exact:
                break  # no descent even with the proximal step: round-off level
            # Y minimises f on S: price the entries outside S.
            G = _prices(Y, a, c)
            nu = np.where(S, G, np.inf).min(axis=0)
            rho = np.where(S, np.inf, G - nu[None, :])
            # Price to the accuracy the certificate needs (a violation rho costs at most
            # |rho| per column), but not below round-off in G: with a data scale (lam * C)
            # far above the objective, a tolerance relative to max |G| stops too early.
            g_scale = max(float(np.max(np.abs(G))), _TINY)
            tol = max(min(1e-12 * g_scale, 1e-2 * self.gap_tol * cands[-1].scale / m),
                      1e-15 * g_scale)
            if not rho.min() < -tol:
                break  # a KKT point of the whole problem
            S[np.unravel_index(np.argmin(rho), rho.shape)] = True
        return cands, rounds

    # ---- public -------------------------------------------------------------------------------

    def solve(self, d) -> QPSolution:
        """Solve the Y-step for residuals ``d`` and certify the result.

        Parameters
        ----------
        d : array_like of shape (m,)
            Per-kernel residuals, finite and ``>= 0`` (negatives within round-off of 0 are
            set to 0).

        Returns
        -------
        QPSolution

        Raises
        ------
        ValueError
            On a malformed ``d``.
        QPCertificationError
            With ``strict=True`` when the relative gap exceeds ``gap_tol``.

        Warns
        -----
        UncertifiedSolutionWarning
            With ``strict=False`` when the relative gap exceeds ``gap_tol``.
        """
        t0 = time.perf_counter()
        d = _check_d(d, self.m)
        m = self.m
        a = (2.0 / m**2) * d
        timings = {"osqp": 0.0, "polish": 0.0}
        status, iters, rounds = "closed_form", 0, 0
        if not np.any(self._c):  # lam == 0 or C == 0: no linear cost
            cands = [self._candidate(_closed_form_lam0(d), d)]
        elif not np.any(d):
            cands = [self._candidate(_closed_form_lp(self._c), d)]
        else:
            cands, status, iters, rounds = self._solve_numerically(d, a, timings)
            if self.polish and self._certificate(cands)[1] > self.gap_tol:
                # The two formulations fail on different problems (seen: lifted stalls on an
                # "ld" C spanning 1e-8..1e8 that block certifies in 750 iterations), so the
                # other one gets a try before anything is reported uncertified.
                more, status, extra, more_rounds = self._other_formulation()._solve_numerically(
                    d, a, timings)
                cands += more
                iters += extra
                rounds += more_rounds
        sol = self._select(cands, status, iters, rounds)
        sol.timings = {**timings, "total": time.perf_counter() - t0}
        for key, value in sol.timings.items():
            self.total_time[key] += value
        self.n_solves += 1
        self._Y_prev = sol.Y.copy()
        self.last_solution = sol
        self._report(sol)
        return sol

    def _solve_numerically(self, d: np.ndarray, a: np.ndarray, timings: dict):
        """OSQP in tightening stages, each followed by the KKT polish, until certified.

        Returns (candidates, last OSQP status, total iterations, total polish rounds).
        """
        m = self.m
        cands = []
        if self._Y_prev is not None:
            cands.append(self._candidate(self._Y_prev, d))  # a free fallback
        status, iters, rounds = "not_run", 0, 0
        if self.polish and self._Y_prev is not None:
            # The cheapest warm start: d moved a little, so the previous support is usually
            # still right and the KKT polish alone certifies; OSQP is then not needed at all.
            t = time.perf_counter()
            more, rounds = self._polish(self._Y_prev, d, a)
            timings["polish"] += time.perf_counter() - t
            cands.extend(more)
            if self._certificate(cands)[1] <= self.gap_tol:
                return cands, "skipped_warm_polish", 0, rounds
        t = time.perf_counter()
        self._osqp_load(a)
        timings["osqp"] += time.perf_counter() - t
        stages = self._eps_stages()
        for stage, eps in enumerate(stages):
            # Early stages get a bounded budget: if ADMM stalls there, the polish usually
            # certifies from wherever it stopped, and the last stage still has max_iter.
            budget = self.max_iter if stage == len(stages) - 1 else min(self.max_iter, 10_000)
            t = time.perf_counter()
            Y0, status, it = self._osqp_run(eps, budget)
            timings["osqp"] += time.perf_counter() - t
            iters += it
            if Y0 is not None:
                Y0 = _project_columns(Y0)
                cands.append(self._candidate(Y0, d))
            if self.polish:
                if Y0 is not None:
                    start = Y0
                elif cands:  # OSQP gave nothing usable: polish from the best point we have
                    start = min(cands, key=lambda z: z.objective).Y
                else:
                    start = np.full((m, m), 1.0 / m)
                t = time.perf_counter()
                more, r = self._polish(start, d, a)
                timings["polish"] += time.perf_counter() - t
                cands.extend(more)
                rounds += r
            if cands and self._certificate(cands)[1] <= self.gap_tol:
                break
        if not cands:
            cands.append(self._candidate(np.full((m, m), 1.0 / m), d))
        return cands, status, iters, rounds

    def _certificate(self, cands: list) -> tuple[_Candidate, float]:
        """The candidate to return and its relative gap.

        Among the certified candidates, the one with the smallest objective (any two differ
        by at most their gaps); if none is certified, the one with the smallest relative gap.
        Its own Frank-Wolfe gap is what we report, so users can recompute it from Y alone.
        """
        def rel(z: _Candidate) -> float:
            return z.fw_gap / z.scale

        certified = [z for z in cands if rel(z) <= self.gap_tol]
        best = min(certified, key=lambda z: z.objective) if certified else min(cands, key=rel)
        return best, rel(best)

    def _select(self, cands: list, status: str, iters: int, rounds: int) -> QPSolution:
        best, rel = self._certificate(cands)
        return QPSolution(Y=best.Y, objective=best.objective, gap=best.fw_gap, relative_gap=rel,
                          certified=bool(rel <= self.gap_tol), osqp_status=status,
                          osqp_iterations=iters, polish_rounds=rounds)

    def _other_formulation(self) -> RepresentativeQP:
        """The same problem in the other formulation (built once, on first need)."""
        if self._fallback is None:
            other = next(name for name in _LAYOUTS if name != self.formulation)
            self._fallback = RepresentativeQP(self.C, self.lam, gap_tol=self.gap_tol,
                                              eps=self.eps, max_iter=self.max_iter,
                                              polish=True, formulation=other)
        return self._fallback

    def _report(self, sol: QPSolution) -> None:
        if sol.certified:
            return
        msg = (f"Y-step QP not certified: relative Frank-Wolfe gap {sol.relative_gap:.3e} > "
               f"gap_tol {self.gap_tol:.1e} (gap {sol.gap:.3e}, objective "
               f"{sol.objective:.6e}, OSQP status {sol.osqp_status!r} after "
               f"{sol.osqp_iterations} iterations, {sol.polish_rounds} polish rounds)")
        if self.strict:
            raise QPCertificationError(msg)
        warnings.warn(msg, UncertifiedSolutionWarning, stacklevel=3)
