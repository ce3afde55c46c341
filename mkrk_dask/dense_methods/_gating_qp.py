"""The Theta-step of LMKKM: a convex QP over a product of simplices, solved and certified.

Minimise ``f(Theta) = sum_m theta_m^T Q_m theta_m`` with ``Q_m = K_m * (I - H H^T)`` (PSD by the
Schur product theorem) over Theta (n x m) whose rows lie on the probability simplex.

Every solution is certified by its Frank-Wolfe gap ``sum_i (g_i . theta_i - min_m g_im)``,
``g = 2 Q theta``, a bound on ``f(Theta) - f*`` (convexity, and the minimum of a linear function
over a product of simplices taking each row's smallest entry).

Why not plain projected gradient: with the paper's kernels the wide Gaussians are nearly
all-ones, so ``Q_m`` is nearly ``I - H H^T``: k eigenvalues of order 1e-5 against a largest of 1.
Accelerated projected gradient (FISTA) then needs thousands of passes over the m n x n blocks
per Theta-step. The small eigenvalues sit (nearly) in span(H), which gives a cheap
preconditioner, but only for an unconstrained or equality-constrained problem. Hence block
principal pivoting (Judice & Pires 1994; Kim & Park 2011 for NNLS): guess the face (the entries
allowed to be positive), minimise on it with the sign constraints dropped, by projected
preconditioned CG (Gould, Hribar & Nocedal 2001), then move every free entry that came out
negative to zero and free every zero entry whose multiplier is negative, until the face solution
is feasible and its gap within tolerance. A face that may still be wrong is solved only roughly
(enough for the signs). If pivoting stalls, FISTA with gradient restart (O'Donoghue & Candes
2015) from the best feasible point takes over.

Measured on ORL (paper kernels, k = 40, the uniform start of the first iteration): FISTA 6900
passes to a relative gap of 1e-7; this solver 209 passes to 1e-6 (928 to 1e-9), and 2426 to
1e-6 with Jacobi scaling alone. Warm-started Theta-steps take 20-100 passes.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.linalg

__all__ = ["GatingQPSolution", "solve_gating_qp", "project_rows_to_simplex", "gating_objective",
           "gating_frank_wolfe_gap", "objective_noise"]

#: pivoting rounds without fewer infeasible entries before FISTA takes over
_STALL_ROUNDS = 3
#: passes over Q per face solve (CG that has not converged by then has lost conjugacy)
_CG_MAX_PRODUCTS = 400
#: CG steps between recomputations of Q x
_REPLACE_EVERY = 50
#: a face that may still be wrong is solved until its share of the gap has fallen by this
#: factor (enough to tell the signs), the right one to the tolerance
_PIVOT_REDUCTION = 1e-3
#: smallest eigenvalue of the scaled coarse matrix the preconditioner inverts
_COARSE_FLOOR = 1e-8
#: eigenvalues of the scaled coarse matrix below this get a coarse correction
_COARSE_KEEP = 0.25


@dataclass
class GatingQPSolution:
    """A Theta-step solution and its certificate.

    Attributes
    ----------
    gating : ndarray of shape (n, m)
        Feasible: every row on the simplex.
    objective : float
        Never above the start's.
    gap : float
        A certified bound on ``objective - f*``.
    relative_gap : float
        ``gap / max(objective, objective_noise(Q) / tol)``: a gap at the round-off level
        counts as solved whatever the objective.
    products : int
        Passes over the m blocks of Q (the cost unit: each reads m n^2 numbers).
    certified : bool
        ``relative_gap <= tol``.
    """

    gating: np.ndarray
    objective: float
    gap: float
    relative_gap: float
    products: int
    certified: bool


def project_rows_to_simplex(V: np.ndarray) -> np.ndarray:
    """Euclidean projection of every row of V onto the probability simplex.

    The sort-based rule (Held, Wolfe & Crowder 1974; Duchi et al. 2008): with the row sorted
    descending as u, the threshold is ``tau = (sum_{j<=r} u_j - 1) / r`` for the largest r with
    ``u_r > tau_r``; the projection is ``max(v - tau, 0)``.
    """
    V = np.asarray(V, dtype=np.float64)
    c = V.shape[1]
    U = -np.sort(-V, axis=1)
    excess = np.cumsum(U, axis=1) - 1.0
    support = U * np.arange(1, c + 1) > excess     # u_r > (cumsum_r - 1) / r; true for r = 1
    last = c - 1 - np.argmax(support[:, ::-1], axis=1)
    tau = excess[np.arange(V.shape[0]), last] / (last + 1)
    return np.maximum(V - tau[:, None], 0.0)


def _apply(Q: np.ndarray, X: np.ndarray) -> np.ndarray:
    """``Q_m x_m`` for every kernel; X and the result are (m, n). One pass over Q."""
    # einsum reads each block once; measured faster than a stacked matmul (a gemv per block)
    return np.einsum("mij,mj->mi", Q, X)


def _gap(X: np.ndarray, QX: np.ndarray) -> float:
    """Frank-Wolfe gap of X (m, n) given Q X: per sample, ``sum_m x_m (g_m - min g)``, a sum of
    non-negative terms (no cancellation between large gradient entries)."""
    G = 2.0 * QX
    return float(np.sum(X * (G - G.min(axis=0, keepdims=True))))


def objective_noise(Q: np.ndarray) -> float:
    """The round-off level of f and of its gap as computed here: ``n eps`` times the largest f
    on the simplex (``sum_i max_m Q_m,ii``). Below it a gap says nothing, so a relative
    tolerance is met once the gap is there: an f that falls towards 0 (the gating settling on a
    nearly constant kernel) would otherwise ask for a gap below round-off, never certified."""
    n = Q.shape[1]
    diag = np.diagonal(Q, axis1=1, axis2=2)
    return n * np.finfo(np.float64).eps * max(float(diag.max(axis=0).sum()), 1e-300)


def gating_objective(Q: np.ndarray, gating: np.ndarray) -> float:
    """``sum_m theta_m^T Q_m theta_m`` for Q (m, n, n) and ``gating`` (n, m)."""
    X = np.ascontiguousarray(gating.T)
    return float(np.sum(X * _apply(Q, X)))


def gating_frank_wolfe_gap(Q: np.ndarray, gating: np.ndarray) -> float:
    """Frank-Wolfe gap ``sum_i (g_i . theta_i - min_m g_im)``, ``g = 2 Q theta``, of a feasible
    ``gating`` (n, m): a bound on ``f(gating) - f*``."""
    X = np.ascontiguousarray(gating.T)
    return _gap(X, _apply(Q, X))


def _face_project(D: np.ndarray, face: np.ndarray) -> np.ndarray:
    """Euclidean projection onto the face's directions: zero off the face, zero sum per sample."""
    D = np.where(face, D, 0.0)
    mean = D.sum(axis=0) / np.maximum(face.sum(axis=0), 1)
    return np.where(face, D - mean, 0.0)


class _Preconditioner:
    """Jacobi scaling plus a coarse correction on span(H), per kernel.

    With ``S_m = diag(Q_m)^(-1/2)`` and the k x k matrix ``G_m = H^T S_m Q_m S_m H = V L V^T``,
    ``M_m^(-1) = S_m (I + W_m W_m^T) S_m`` with ``W_m = H V (1/L - 1)^(1/2)`` over the
    eigenvalues ``L < 1/4``: on those directions of span(H) it inverts the Galerkin block of
    ``S Q S`` (where the nearly all-ones kernels put their tiny eigenvalues), elsewhere it is
    Jacobi. :meth:`project` is the M-orthogonal projection onto the face's directions, the
    constraint preconditioner of projected PCG; the zero-sum system ``A M^(-1) A^T`` is a
    diagonal plus ``U U^T`` (U: the face rows of all ``S_m W_m`` side by side), by Woodbury.
    """

    def __init__(self, Q: np.ndarray, basis: np.ndarray | None):
        diag = np.diagonal(Q, axis1=1, axis2=2)
        # entries with a zero diagonal have zero rows (Q is PSD): any scale will do for them
        self.inv_diag = 1.0 / np.maximum(diag, 1e-12 * max(float(diag.max()), 1e-300))
        self.coarse: list[np.ndarray] = []
        if basis is not None:
            scale = np.sqrt(self.inv_diag)
            for p in range(Q.shape[0]):
                SH = scale[p][:, None] * basis
                G = SH.T @ (Q[p] @ SH)
                values, vectors = np.linalg.eigh(0.5 * (G + G.T))
                # only directions of small curvature need the correction; Jacobi serves the
                # others as well, and every column kept costs in set_face
                keep = values < _COARSE_KEEP
                boost = np.sqrt(1.0 / np.maximum(values[keep], _COARSE_FLOOR) - 1.0)
                self.coarse.append(SH @ (vectors[:, keep] * boost))

    def set_face(self, face: np.ndarray) -> None:
        self.face = face
        self.J = np.where(face, self.inv_diag, 0.0)
        N = self.J.sum(axis=0)
        self.N = np.where(N > 0, N, 1.0)
        self.W = [C * face[p][:, None] for p, C in enumerate(self.coarse) if C.shape[1]]
        self.kernels = [p for p, C in enumerate(self.coarse) if C.shape[1]]
        if not self.W:
            return
        self.U = np.hstack(self.W)
        small = np.eye(self.U.shape[1]) + self.U.T @ (self.U / self.N[:, None])
        self.factor = scipy.linalg.cho_factor(small)

    def _inverse(self, R: np.ndarray) -> np.ndarray:
        out = self.J * R
        for p, W in zip(self.kernels, self.W, strict=True):
            # W is zero off the face, so R's off-face entries do not enter
            out[p] += W @ (W.T @ R[p])
        return out

    def _zero_sum_solve(self, b: np.ndarray) -> np.ndarray:
        u = b / self.N
        if not self.W:
            return u
        w = scipy.linalg.cho_solve(self.factor, self.U.T @ u)
        return u - (self.U @ w) / self.N

    def project(self, R: np.ndarray) -> np.ndarray:
        y = self._zero_sum_solve(self._inverse(R).sum(axis=0))
        # the Euclidean correction removes the round-off of a badly scaled coarse block: the
        # face directions must sum to exactly zero per sample, or Theta drifts off the simplex
        return _face_project(self._inverse(R - np.where(self.face, y, 0.0)), self.face)


def _face_gap(X: np.ndarray, G: np.ndarray, face: np.ndarray) -> float:
    """The face entries' share of the Frank-Wolfe gap, ``sum x_im (g_im - min over the face)``,
    with X's round-off negatives counted as zero."""
    lo = np.where(face, G, np.inf).min(axis=0)
    lo = np.where(np.isfinite(lo), lo, 0.0)           # samples without a face entry
    return float(np.sum(np.where(face, np.maximum(X, 0.0) * (G - lo), 0.0)))


def _solve_on_face(Q, pre: _Preconditioner, face: np.ndarray, X: np.ndarray, QX: np.ndarray,
                   target: float, max_products: int) -> tuple[np.ndarray, np.ndarray, int]:
    """Minimise f over ``{x: x = 0 off the face, rows summing to 1}`` (no sign constraints)
    by projected PCG from X (on that set), until the face's share of the gap
    (:func:`_face_gap`) is at most ``target``. Returns the point, its Q product, and the
    passes over Q."""
    pre.set_face(face)
    r = np.where(face, 2.0 * QX, 0.0)
    z = pre.project(r)
    rz = float(np.sum(r * z))
    X, QX = X.copy(), QX.copy()
    products = 0
    if not rz > 0 or _face_gap(X, r, face) <= target:
        return X, QX, products
    p = -z
    steps = 0
    while products < max_products:
        Qp = _apply(Q, p)
        products += 1
        steps += 1
        Hp = np.where(face, 2.0 * Qp, 0.0)
        curvature = float(np.sum(p * Hp))
        if not curvature > 0:
            break
        alpha = rz / curvature
        X += alpha * p
        QX += alpha * Qp
        if steps % _REPLACE_EVERY == 0 and products < max_products:
            # residual replacement: the updated Q x drifts from the true one by round-off,
            # which near a 1e-6 relative gap is of the size of the residual itself
            QX = _apply(Q, X)
            products += 1
            r = np.where(face, 2.0 * QX, 0.0)
        else:
            r += alpha * Hp
        if _face_gap(X, r, face) <= target:
            break
        z = pre.project(r)
        rz_new = float(np.sum(r * z))
        p = -z + (rz_new / rz) * p
        rz = rz_new
    return X, QX, products


def _fista(Q, X, QX, lipschitz_half: float, tol: float, floor: float, max_products: int
           ) -> tuple[np.ndarray, np.ndarray, float, int]:
    """FISTA with gradient restart from feasible X: the lowest-objective iterate, its Q product,
    a bound on its ``f - f*``, and the passes over Q.

    The step is ``1 / (2 lipschitz_half)`` with ``lipschitz_half`` a bound on every ``Q_m``'s
    largest eigenvalue. Q is linear, so ``Q y`` of the extrapolated point combines the two last
    ``Q x``: one pass over Q per step.
    """
    f = float(np.sum(X * QX))
    gap = _gap(X, QX)
    best = (f, X, QX, gap)
    y, Qy, t = X, QX, 1.0
    products = 0
    while products < max_products and gap > tol * max(f, floor):
        X_new = project_rows_to_simplex((y - Qy / lipschitz_half).T).T
        QX_new = _apply(Q, X_new)
        products += 1
        f = float(np.sum(X_new * QX_new))
        gap = _gap(X_new, QX_new)
        if f < best[0]:
            best = (f, X_new, QX_new, gap)
        if np.sum((y - X_new) * (X_new - X)) > 0:
            t = 1.0                               # momentum points uphill: restart it
        t_new = 0.5 * (1.0 + np.sqrt(1.0 + 4.0 * t * t))
        beta = (t - 1.0) / t_new
        y = X_new + beta * (X_new - X)
        Qy = QX_new + beta * (QX_new - QX)
        X, QX, t = X_new, QX_new, t_new
    # f(best) - f* <= f(last) - f* <= gap(last)
    return best[1], best[2], min(best[3], gap - (f - best[0])), products


def _feasible_point(X: np.ndarray) -> np.ndarray:
    """X with round-off negatives (a face solution's exact zeros) set to 0 and every sample's
    weights rescaled to sum to exactly 1."""
    X = np.maximum(X, 0.0)
    return X / X.sum(axis=0, keepdims=True)


def solve_gating_qp(Q: np.ndarray, start: np.ndarray, *, basis: np.ndarray | None = None,
                    tol: float = 1e-6, max_products: int = 5000,
                    eigenvalue_bound: float | None = None) -> GatingQPSolution:
    """Minimise ``sum_m theta_m^T Q_m theta_m`` over Theta with every row on the simplex.

    Block principal pivoting on faces solved by preconditioned projected CG, FISTA where the
    pivoting stalls (see the module docstring); never returns a point worse than ``start``.

    Parameters
    ----------
    Q : ndarray of shape (m, n, n)
        Symmetric PSD blocks.
    start : ndarray of shape (n, m)
        Feasible (rows on the simplex): the warm start.
    basis : ndarray of shape (n, k), optional
        H: the coarse space of the preconditioner (Jacobi alone without it).
    tol : float
        Relative gap tolerance.
    max_products : int
        Cap on the passes over Q; past it the best point so far is returned, uncertified.
    eigenvalue_bound : float, optional
        An upper bound on the largest eigenvalue of every ``Q_m`` (for ``K_m * (I - H H^T)``
        the largest diagonal entry of ``K_m`` is one); by default Gershgorin's.

    Returns
    -------
    GatingQPSolution
    """
    m, n, _ = Q.shape
    # relative gaps divide by max(f, floor): tol * floor is the round-off level
    floor = objective_noise(Q) / tol
    X = np.ascontiguousarray(start.T, dtype=np.float64)
    QX = _apply(Q, X)
    products = 1
    f_start = float(np.sum(X * QX))
    best = [f_start, _gap(X, QX), X, QX]          # lowest objective so far, and its own gap
    cert = best[1]                                 # a bound on best's f - f*

    def certified() -> bool:
        return cert <= tol * max(best[0], floor)

    if not certified():
        pre = _Preconditioner(Q, basis)
        face = X > 0
        fewest, stalled = np.inf, 0
        Xs, QXs = X, QX
        while products < max_products:
            solvable = face & (face.sum(axis=0) > 1)[None, :]   # one entry: fixed at 1
            # the face's share of the gap to half the tolerance; one pass is kept in hand to
            # certify the result
            target = 0.5 * tol * max(float(np.sum(Xs * QXs)), floor)
            loose = max(target, _PIVOT_REDUCTION * _face_gap(Xs, 2.0 * QXs, solvable))
            Xf, QXf, used = _solve_on_face(Q, pre, solvable, Xs, QXs, loose,
                                           min(_CG_MAX_PRODUCTS, max_products - products - 1))
            products += used
            # below this, a negative is the round-off of an exact zero, not a wrong face
            negative = face & (Xf < -1e-12)
            if not negative.any() and loose > target:
                # the signs say the face may be right: solve it to the tolerance
                Xf, QXf, used = _solve_on_face(Q, pre, solvable, Xf, QXf, target,
                                               min(_CG_MAX_PRODUCTS,
                                                   max_products - products - 1))
                products += used
                negative = face & (Xf < -1e-12)
            G = 2.0 * QXf
            f_face = float(np.sum(Xf * QXf))
            if not negative.any():
                Xc = _feasible_point(Xf)
                QXc = _apply(Q, Xc)
                products += 1
                fc, gc = float(np.sum(Xc * QXc)), _gap(Xc, QXc)
                if fc < best[0]:
                    best, cert = [fc, gc, Xc, QXc], gc
                else:
                    # f(best) - f* <= f(candidate) - f* <= its gap
                    cert = min(cert, gc - (fc - best[0]))
                if certified():
                    break
            nu = np.where(face, G, 0.0).sum(axis=0) / face.sum(axis=0)
            enter = ~face & (G - nu < -0.1 * tol * max(f_face, floor) / n)
            infeasible = int(negative.sum() + enter.sum())
            if infeasible == 0:
                break                      # the face is right but CG fell short: FISTA polishes
            if infeasible < fewest:
                fewest, stalled = infeasible, 0
            else:
                stalled += 1
                if stalled >= _STALL_ROUNDS:
                    break
            face = (face & ~negative) | enter
            Xs = np.where(face, np.maximum(Xf, 0.0), 0.0)
            Xs /= Xs.sum(axis=0, keepdims=True)
            if products >= max_products:
                break
            QXs = _apply(Q, Xs)
            products += 1
        if not certified() and products < max_products:
            bound = eigenvalue_bound
            if bound is None:
                bound = float(np.abs(Q).sum(axis=2).max())      # Gershgorin
            Xb, QXb, gb, used = _fista(Q, best[2], best[3], max(bound, 1e-300), tol, floor,
                                       max_products - products)
            products += used
            fb = float(np.sum(Xb * QXb))
            if fb <= best[0]:
                best, cert = [fb, gb, Xb, QXb], min(gb, cert)
    f = best[0]
    return GatingQPSolution(gating=np.ascontiguousarray(best[2].T), objective=f, gap=cert,
                            relative_gap=cert / max(f, floor), products=products,
                            certified=certified())
