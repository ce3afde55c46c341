"""A convex quadratic over the probability simplex, solved exactly and certified.

MKKM-MR's weight step (Liu et al., AAAI 2016) is::

    minimize    f(w) = w^T Q w,     Q = diag(d) + (lam / 2) M   (M_pq = tr(K_p K_q))
    subject to  sum(w) = 1,  w >= 0.

With m (the number of kernels) small, a primal active-set method solves it exactly: solve the
KKT equations on a support, step towards their solution as far as ``w >= 0`` allows, add the
entry whose gradient is lowest, repeat. Every solution carries its Frank-Wolfe gap
``w . g - min(g)`` (``g = 2 Q w``), a certified bound on ``f(w) - f*``; OSQP is the fallback
when the active-set method does not certify (a singular, near-degenerate Q).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np
import osqp
import scipy.linalg
import scipy.sparse as sp

from ..exceptions import QPCertificationError, UncertifiedSolutionWarning

__all__ = ["SimplexQP", "SimplexSolution", "simplex_gap"]

# A gap below this many units of round-off of ``2 Q w`` (eps * m * max|Q|) is noise: it
# certifies a problem whose optimum is 0 (the origin in the convex hull of Q's factor rows).
_ROUNDOFF_UNITS = 16.0


@dataclass
class SimplexSolution:
    """One solve of :class:`SimplexQP`.

    Attributes
    ----------
    w : ndarray of shape (m,)
        Feasible (``w >= 0``, ``sum(w) = 1`` to round-off).
    objective : float
        ``w^T Q w``.
    gap : float
        The Frank-Wolfe gap, a certified bound on ``objective - f*``.
    relative_gap : float
        ``gap / objective``, with the objective floored at ``noise / gap_tol`` where noise is
        the round-off of the gradient (``16 eps m max|Q|``): a gap within round-off is no
        gap, also when the optimum is 0.
    certified : bool
        ``relative_gap <= gap_tol``.
    method : str
        ``"active_set"`` or ``"osqp"``.
    """

    w: np.ndarray
    objective: float
    gap: float
    relative_gap: float
    certified: bool
    method: str


def simplex_gap(w: np.ndarray, Q: np.ndarray) -> tuple[float, float]:
    """``(f(w), gap(w))`` for ``f = w^T Q w`` on the simplex: the Frank-Wolfe gap
    ``w . g - min(g)`` with ``g = 2 Q w`` bounds ``f(w) - f*`` from above (f is convex)."""
    g = 2.0 * (Q @ w)
    return float(w @ Q @ w), max(float(w @ g - g.min()), 0.0)


class SimplexQP:
    """Minimise ``w^T Q w`` over the simplex for a symmetric positive semi-definite Q.

    Parameters
    ----------
    gap_tol : float
        A solution is certified when its gap over its objective is below this.
    strict : bool
        Raise :class:`~mkrk_dask.qp.QPCertificationError` instead of warning when a solution
        is not certified.
    """

    def __init__(self, *, gap_tol: float = 1e-8, strict: bool = False):
        self.gap_tol = float(gap_tol)
        self.strict = bool(strict)

    def solve(self, Q: np.ndarray) -> SimplexSolution:
        Q = np.asarray(Q, dtype=np.float64)
        m = Q.shape[0]
        if Q.ndim != 2 or Q.shape != (m, m) or m == 0:
            raise ValueError(f"Q must be a non-empty square matrix, got shape {Q.shape}")
        if not np.all(np.isfinite(Q)):
            raise ValueError("Q contains NaN or infinite entries")
        Q = 0.5 * (Q + Q.T)
        noise = _ROUNDOFF_UNITS * np.finfo(float).eps * m * float(np.abs(Q).max())
        floor = max(noise / self.gap_tol, np.finfo(float).tiny)
        # On the simplex w^T (Q - c 1 1^T) w = w^T Q w - c: the same minimiser and gap. With
        # M_pq = tr(K_p K_q) of alike kernels, Q is a huge near-constant matrix whose
        # differences matter; removing the constant keeps them from cancelling.
        shift = float(np.median(Q))
        centred = Q - shift
        best = self._certify(_active_set(centred), centred, shift, floor, "active_set")
        if not best.certified:
            other = self._certify(_osqp(centred), centred, shift, floor, "osqp")
            best = min((best, other), key=lambda s: (s.relative_gap, s.objective))
        if not best.certified:
            message = (f"the simplex QP's solution has a relative duality gap "
                       f"{best.relative_gap:.2e} above gap_tol {self.gap_tol:.1e}")
            if self.strict:
                raise QPCertificationError(message)
            warnings.warn(message, UncertifiedSolutionWarning, stacklevel=3)
        return best

    def _certify(self, w: np.ndarray, Q: np.ndarray, shift: float, floor: float,
                 method: str) -> SimplexSolution:
        w = np.maximum(w, 0.0)
        w /= w.sum()
        f, gap = simplex_gap(w, Q)
        f += shift
        relative = gap / max(abs(f), floor)
        return SimplexSolution(w, f, gap, relative, relative <= self.gap_tol, method)


def _kkt_point(Q: np.ndarray, S: np.ndarray) -> np.ndarray:
    """The minimiser of ``w^T Q w`` on the affine hull ``sum(w_S) = 1`` of the support S.

    Solved in the null space of the constraint, ``w = e_r + Z z`` with columns ``e_i - e_r``:
    the reduced Hessian holds differences of Q's entries, formed before anything is solved.
    The bordered KKT matrix ``[[2 Q_SS, 1], [1^T, 0]]`` would mix entries of 1e9 with ones and
    lose exactly those differences.
    """
    D = Q[np.ix_(S, S)]
    if S.size == 1:
        return np.ones(1)
    reduced = D[1:, 1:] - D[1:, :1] - D[:1, 1:] + D[0, 0]
    rhs = D[0, 0] - D[1:, 0]
    # gelsy: the minimum-norm solution also when the reduced Hessian is singular
    z = scipy.linalg.lstsq(reduced, rhs, lapack_driver="gelsy", check_finite=False)[0]
    return np.concatenate([[1.0 - z.sum()], z])


def _active_set(Q: np.ndarray, max_rounds: int | None = None) -> np.ndarray:
    """A primal active-set method from the best vertex; exact in finitely many rounds."""
    m = Q.shape[0]
    scale = max(float(np.abs(Q).max()), np.finfo(float).tiny)
    w = np.zeros(m)
    w[int(np.argmin(np.diag(Q)))] = 1.0
    for _ in range(max_rounds or 10 * m + 10):
        S = np.flatnonzero(w > 0)
        p = _kkt_point(Q, S)
        if np.all(p >= 0):
            w = np.zeros(m)
            w[S] = p
            g = 2.0 * (Q @ w)
            outside = np.setdiff1d(np.arange(m), S)
            level = float(w @ g)  # the common gradient on the support, at a KKT point
            if outside.size == 0:
                break
            j = outside[np.argmin(g[outside])]
            if g[j] >= level - 1e-13 * scale:
                break
            # Enter j with a tiny mass; the next KKT solve on S + {j} decides its value.
            w = (1.0 - 1e-12) * w
            w[j] = 1e-12
            continue
        # Step from w towards p until the first entry of the support reaches 0; drop it.
        current = w[S]
        falling = p < current
        ratios = np.where(falling & (p < 0), current / np.maximum(current - p, 1e-300), np.inf)
        t = float(min(1.0, ratios.min()))
        current = current + t * (p - current)
        current[np.argmin(ratios)] = 0.0
        w = np.zeros(m)
        w[S] = np.maximum(current, 0.0)
        if w.sum() <= 0:
            w[S[np.argmin(np.diag(Q)[S])]] = 1.0
        w /= w.sum()
    return w


def _osqp(Q: np.ndarray) -> np.ndarray:
    """OSQP with its polish at tight tolerances (the fallback)."""
    m = Q.shape[0]
    A = sp.vstack([sp.csc_matrix(np.ones((1, m))), sp.eye(m, format="csc")], format="csc")
    lower = np.concatenate([[1.0], np.zeros(m)])
    upper = np.concatenate([[1.0], np.full(m, np.inf)])
    solver = osqp.OSQP()
    solver.setup(P=sp.triu(sp.csc_matrix(2.0 * Q), format="csc"), q=np.zeros(m), A=A, l=lower,
                 u=upper, eps_abs=1e-12, eps_rel=1e-12, max_iter=200000, polishing=True,
                 verbose=False)
    x = solver.solve().x
    if x is None or not np.all(np.isfinite(x)) or np.maximum(x, 0).sum() <= 0:
        return np.full(m, 1.0 / m)
    return np.asarray(x, dtype=np.float64)
