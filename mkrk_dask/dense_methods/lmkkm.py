"""LMKKM: localized multiple kernel k-means (Gonen & Margolin, NIPS 2014), on dense kernels.

Every sample i has its own kernel weights ``theta_i`` (a row of the gating matrix Theta,
``n x m``, on the simplex). The combined kernel is ``K_Theta = sum_m (theta_m theta_m^T) * K_m``
(``*`` elementwise, ``theta_m`` the m-th column), and the method minimises

    f(H, Theta) = tr((I - H H^T) K_Theta) = sum_m theta_m^T (K_m * (I - H H^T)) theta_m

over H with ``H^T H = I`` (k columns) and Theta, alternately:

- H-step: the k leading eigenvectors of ``K_Theta`` (exact: Ky Fan);
- Theta-step: a convex QP in ``n m`` variables (``K_m * (I - H H^T)`` is PSD by the Schur
  product theorem), one simplex constraint per row. The authors call a generic solver (MOSEK);
  here :func:`~mkrk_dask.dense_methods._gating_qp.solve_gating_qp` (block principal pivoting
  over faces solved by CG preconditioned on span(H), FISTA as a fallback), warm-started from the
  previous Theta and never returning a worse point; every solution is certified by its
  Frank-Wolfe gap, a bound on ``f(Theta) - f*``.

Both steps minimise f over their block, so the objective never increases.

Choices, and where they come from (the MKKM-RK authors' copy of the LMKKM code,
``LMKKM/lmkkmeans_train.m`` and ``demo_lmkkm.m`` of zcbgit/MKKM_RK):

- start: ``Theta = 1/m`` everywhere (as the code);
- iterations: the code runs a fixed 100 (``iteration_count = 100`` in the demo) and has no
  stopping rule. Here at most ``max_iter`` (100), stopping early when the objective decreased
  by at most ``tol`` relative to it, or by less than its round-off level
  (:func:`~mkrk_dask.dense_methods._gating_qp.objective_noise`; the gating can settle on a
  nearly constant kernel, where f falls towards 0);
- the code records ``tr(H^T K_Theta H) - tr(K_Theta)``, the negative of f, after the Theta-step;
  we record f itself, at the same point (H of the iteration, Theta after its QP);
- final labels: as the code, k-means (10 restarts, at most 1000 iterations) on the rows of the
  last H-step's H scaled to unit length (:func:`mkrk_dask.assignment.assign_clusters`); the code
  does not recompute H after the last Theta-step, nor do we;
- the eigensolver: ``eigs(K_Theta, k)`` (largest magnitude) in the code; K_Theta is PSD, so the
  largest magnitude are the largest, here :func:`mkrk_dask.eigen.top_k_dense` warm-started.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from numbers import Integral, Real
from typing import Any

import numpy as np
from sklearn.utils._param_validation import Interval

from .._threads import local_threads
from ..assignment import assign_clusters
from ..eigen import top_k_dense
from ..exceptions import UncertifiedSolutionWarning
from ..validation import N_CLUSTERS, constrained
from ._checks import check_dense_input
from ._gating_qp import objective_noise, solve_gating_qp

__all__ = ["lmkkm", "LMKKMResult", "localized_kernel", "QP_MAX_PRODUCTS"]

#: passes over the m n x n blocks of the QP per Theta-step before it is given up as
#: uncertified (the best point so far is kept, and the result says so)
QP_MAX_PRODUCTS = 5000


@dataclass
class LMKKMResult:
    """The outcome of :func:`lmkkm`.

    Attributes
    ----------
    gating : ndarray of shape (n, m)
        Theta: every row on the simplex.
    embedding : ndarray of shape (n, k)
        H of the last H-step (orthonormal columns).
    labels : ndarray of shape (n,)
    objective_history : ndarray of shape (n_iter,)
        f after every iteration's Theta-step; never increases.
    qp_relative_gaps : ndarray of shape (n_iter,)
        Certified bound on ``(f - f*) / f`` of every Theta-step's QP.
    qp_products : ndarray of shape (n_iter,)
        Passes over the QP's m n x n blocks in every Theta-step (its cost).
    qp_certified : ndarray of bool, shape (n_iter,)
        The Theta-step reached ``qp_relative_gaps <= qp_tol`` within ``qp_max_products``.
    n_iter : int
    converged : bool
        The objective's relative decrease fell to ``tol``, at a certified Theta-step, before
        ``max_iter`` iterations.
    """

    gating: np.ndarray
    embedding: np.ndarray
    labels: np.ndarray
    objective_history: np.ndarray
    qp_relative_gaps: np.ndarray
    qp_products: np.ndarray
    qp_certified: np.ndarray
    n_iter: int
    converged: bool


def localized_kernel(kernels: np.ndarray, gating: np.ndarray) -> np.ndarray:
    """``K_Theta = sum_m (theta_m theta_m^T) * K_m`` for ``gating`` of shape (n, m)."""
    T = np.ascontiguousarray(gating.T)
    # one pass over the kernels, no n x n temporaries (3x faster than a loop over kernels)
    return np.einsum("mij,mi,mj->ij", kernels, T, T)


@constrained({
    "kernels": ["array-like"],
    "n_clusters": N_CLUSTERS,
    "max_iter": [Interval(Integral, 1, None, closed="left")],
    "tol": [Interval(Real, 0, None, closed="left")],
    "qp_tol": [Interval(Real, 0, None, closed="left")],
    "qp_max_products": [Interval(Integral, 1, None, closed="left")],
    "random_state": ["random_state"],
    "check_input": ["boolean"],
})
def lmkkm(kernels: np.ndarray, n_clusters: int, *, max_iter: int = 100, tol: float = 1e-6,
          qp_tol: float = 1e-6, qp_max_products: int = QP_MAX_PRODUCTS,
          random_state: Any = None, check_input: bool = True) -> LMKKMResult:
    """Localized multiple kernel k-means (Gonen & Margolin 2014) on dense kernels.

    Parameters
    ----------
    kernels : ndarray of shape (m, n, n)
        Symmetric PSD base kernels (checked by :func:`mkrk_dask.precomputed.check_precomputed`).
    n_clusters : int
        k, at most n.
    max_iter : int
        Iterations (an H-step and a Theta-step each); the authors' demo runs 100.
    tol : float
        Stop when the objective decreased by at most ``tol`` times its value.
    qp_tol : float
        Relative Frank-Wolfe gap every Theta-step must reach.
    qp_max_products : int
        Passes over the QP's blocks per Theta-step before it is given up as uncertified (with
        an :class:`~mkrk_dask.exceptions.UncertifiedSolutionWarning`).
    random_state : int, RandomState or None
        Seeds the final k-means (the only random step).
    check_input : bool, default=True
        Validate the kernels (finite, symmetric, PSD). ``False`` skips that for kernels the
        caller validated once and fits many times (the protocol's 20 fits per parameter).

    Returns
    -------
    LMKKMResult
    """
    max_iter, qp_max_products = int(max_iter), int(qp_max_products)
    tol, qp_tol = float(tol), float(qp_tol)
    # One BLAS/OpenMP thread: the fit's dense calls are small (k-column products,
    # factorisations of order m k, the final k-means on n x k) or memory-bound (the passes over
    # Q run in numpy's einsum); with a second thread they ran 4-15x slower whenever the other
    # core was busy (measured beside a benchmark), and gain little on an idle machine.
    with local_threads(1):
        K, k = check_dense_input(kernels, n_clusters, check_input)
        m, n, _ = K.shape
        # Q_m = K_m * (I - H H^T) <= diag(K_m) in the PSD order (Schur: K_m * H H^T >= 0)
        eigenvalue_bound = float(np.diagonal(K, axis1=1, axis2=2).max())
        # f's round-off level (Q_m,ii <= K_m,ii): smaller decreases are no progress
        noise = objective_noise(K)
        gating = np.full((n, m), 1.0 / m)
        H = None
        Q = np.empty_like(K)
        history: list[float] = []
        gaps: list[float] = []
        products: list[int] = []
        certified: list[bool] = []
        converged = False
        for _ in range(max_iter):
            _, H = top_k_dense(localized_kernel(K, gating), k, warm_start=H)
            projector = -(H @ H.T)
            projector[np.diag_indices(n)] += 1.0
            np.multiply(K, projector, out=Q)
            del projector
            solution = solve_gating_qp(Q, gating, basis=H, tol=qp_tol,
                                       max_products=qp_max_products,
                                       eigenvalue_bound=eigenvalue_bound)
            gating = solution.gating
            history.append(solution.objective)
            gaps.append(solution.relative_gap)
            products.append(solution.products)
            certified.append(solution.certified)
            # (a Theta-step stopped at its cap may not have moved: that is no convergence)
            if (len(history) > 1 and solution.certified
                    and history[-2] - history[-1] <= max(tol * abs(history[-1]), noise)):
                converged = True
                break
        labels = assign_clusters(H, k, n_init=10, max_iter=1000, random_state=random_state)
    if not all(certified):
        bad = len(certified) - sum(certified)
        warnings.warn(f"LMKKM: {bad} of {len(certified)} Theta-steps stopped at the cap "
                      f"({qp_max_products} passes) above the gap tolerance {qp_tol:g} "
                      f"(largest relative gap {max(gaps):.3g})", UncertifiedSolutionWarning,
                      stacklevel=2)
    return LMKKMResult(gating=gating, embedding=H, labels=labels,
                       objective_history=np.asarray(history),
                       qp_relative_gaps=np.asarray(gaps), qp_products=np.asarray(products),
                       qp_certified=np.asarray(certified), n_iter=len(history),
                       converged=converged)
