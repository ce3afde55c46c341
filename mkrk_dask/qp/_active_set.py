"""The active-set KKT polish of the Y-step, and its closed forms.

A primal active-set method with exact line searches: solve the KKT equations on a guessed
support by least squares, step towards that point as far as ``Y >= 0`` allows, add the most
violated entry, repeat (:meth:`RepresentativeQP._polish` drives it). The polish matters
because the large-sigma Gaussian kernels have tiny ``d_i``: their weights move while the
objective barely does, and ADMM needs 10-100x more iterations to reach 1e-10 than to find the
right support.
"""

from __future__ import annotations

import contextlib
import functools

import numpy as np
import scipy.linalg

from .._threads import held_threads
from ._problem import _TINY

# Cap on the unknowns of the dense KKT least-squares solve of the polish (about 0.3 s at 1000).
# An optimal basic solution has at most 2m - 1 support entries, so this binds only for m > 300
# or for a dense, near-degenerate starting point (then the support guess is thinned).
_POLISH_MAX_UNKNOWNS = 1000
# KKT equations on a support whose stationarity misfit (relative to the gradient scale) exceeds
# this are inconsistent (a cycle of ties that cannot all hold); the polish then takes a
# proximal step with this weight (relative to the gradient scale) instead.
_KKT_CONSISTENT = 1e-10
_PROX_MU = 1e-9



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
    return np.repeat(residual_weights(d)[:, None], d.size, axis=1)


def residual_weights(d: np.ndarray) -> np.ndarray:
    """The minimiser of ``sum_i d_i w_i^2`` over the simplex: ``w_i ∝ 1/d_i``, or the kernels
    with ``d_i == 0`` sharing all the weight (MKKM's weight step, MKKM-RK's at lambda 0)."""
    d = np.asarray(d, dtype=np.float64)
    zero = d <= 0
    if np.any(zero):
        return zero / zero.sum()
    inverse = 1.0 / d
    return inverse / inverse.sum()


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
    # system like gelsd, at a fraction of the cost of an SVD. LAPACK's routine is called as
    # scipy.linalg.lstsq calls it (same arguments: the same solution to the bit), without
    # its checks and workspace query on every call: the polish solves a few hundred small
    # systems per fit, where those took half the time of a 20 x 20 solve.
    n = A.shape[1]
    if A.dtype != np.float64 or b.dtype != np.float64 or A.shape[0] != n or b.ndim != 1:
        return scipy.linalg.lstsq(A, b, lapack_driver="gelsy", check_finite=False)[0]
    gelsy, _ = _gelsy()
    _, x, _, _, info = gelsy(A, b, np.zeros((n, 1), dtype=np.int32), _EPS, _gelsy_lwork(n),
                             False, False)
    if info < 0:
        raise ValueError(f"illegal value in {-info}-th argument of internal gelsy")
    return x


_EPS = float(np.finfo(np.float64).eps)


@functools.cache
def _gelsy():
    return scipy.linalg.get_lapack_funcs(("gelsy", "gelsy_lwork"), (np.zeros((1, 1)),))


@functools.lru_cache(maxsize=256)
def _gelsy_lwork(n: int) -> int:
    work, _ = _gelsy()[1](n, n, 1, _EPS)
    return int(work)


_BLAS_CONTROLLER = None


def _single_threaded_blas():
    """Context limiting BLAS to one thread (nothing to do where the calling thread already
    holds one BLAS thread: :func:`mkrk_dask._threads.local_threads`, as a small fit does).

    The polish systems are a few hundred unknowns at most; threaded BLAS gains nothing there
    and, on a machine busy with other work (Dask workers), OpenBLAS's spinning threads made a
    181 x 181 least-squares solve 100x slower (0.4 s instead of 4 ms) in our measurements.
    """
    global _BLAS_CONTROLLER
    if held_threads() == 1:
        return contextlib.nullcontext()
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
