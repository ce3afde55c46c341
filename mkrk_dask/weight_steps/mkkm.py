"""The weight steps of MKKM and MKKM-MR: closed form and a certified simplex QP.

Both methods minimise ``tr(K_w (I - H H^T)) = sum_p w_p^2 d_p`` (plus MKKM-MR's regulariser)
over the simplex, with ``K_w = sum_p w_p^2 K_p`` as in MKKM-RK, so the H-step and the
residuals ``d`` are the same and only this step differs.

- MKKM (Huang, Chuang & Chen, 2012): ``min sum_p w_p^2 d_p``; the optimum is
  ``w_p = (1/d_p) / sum_q (1/d_q)`` (kernels with ``d_p = 0`` share all the weight).
- MKKM-MR (Liu, Dou, Yin, Wang & Zhu, AAAI 2016): ``min sum_p w_p^2 d_p + (lam/2) w^T M w``
  with ``M_pq = tr(K_p K_q)``: a QP in m variables (:class:`~mkrk_dask.qp.SimplexQP`), every
  solution certified by its duality gap.
"""

from __future__ import annotations

import numpy as np

from ..qp import SimplexQP
from ..qp._active_set import residual_weights
from .base import WeightStep, WeightUpdate

__all__ = ["AverageResidualStep", "MatrixRegularizedStep", "mkkm_weights"]


def mkkm_weights(residuals: np.ndarray) -> np.ndarray:
    """The minimiser of ``sum_p w_p^2 d_p`` over the simplex (the Y-step's closed form at
    lambda 0, :func:`mkrk_dask.qp._active_set.residual_weights`)."""
    return residual_weights(residuals)


class AverageResidualStep(WeightStep):
    """MKKM's weight step (closed form, so its gap is 0)."""

    name = "MKKM"

    def update(self, residuals: np.ndarray) -> WeightUpdate:
        w = mkkm_weights(residuals)
        return WeightUpdate(weights=w, objective=float(np.dot(w * w, residuals)))


class MatrixRegularizedStep(WeightStep):
    """MKKM-MR's weight step for a fixed ``M`` and (effective) ``lam``.

    Parameters
    ----------
    M : ndarray of shape (m, m)
        ``tr(K_p K_q)`` (the backends' ``"fip"`` dissimilarity).
    lam : float
        The lambda of the regulariser ``(lam/2) w^T M w``.
    gap_tol, strict : float, bool
        As for :class:`~mkrk_dask.qp.SimplexQP`.
    """

    name = "MKKM-MR"

    def __init__(self, M: np.ndarray, lam: float, *, gap_tol: float = 1e-8,
                 strict: bool = False):
        M = np.asarray(M, dtype=np.float64)
        self.regularizer = 0.5 * float(lam) * 0.5 * (M + M.T)
        self.qp = SimplexQP(gap_tol=gap_tol, strict=strict)

    def update(self, residuals: np.ndarray) -> WeightUpdate:
        solution = self.qp.solve(np.diag(np.asarray(residuals, dtype=np.float64))
                                 + self.regularizer)
        return WeightUpdate(weights=solution.w, objective=solution.objective,
                            relative_gap=solution.relative_gap, certified=solution.certified)
