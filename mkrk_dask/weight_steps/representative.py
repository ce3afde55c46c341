"""MKKM-RK's weight step: the representation QP (Yao & Chen, AAAI 2019).

Minimise ``(1/m^2) s^T diag(d) s + lam <C, Y>`` over Y with unit column sums and ``Y >= 0``
(``s = Y 1``), then ``w = s / m``. Solved and certified by :class:`mkrk_dask.qp.RepresentativeQP`.
"""

from __future__ import annotations

import numpy as np

from ..qp import RepresentativeQP
from .base import WeightStep, WeightUpdate

__all__ = ["RepresentativeStep"]


class RepresentativeStep(WeightStep):
    """The Y-step for a fixed ``C`` and (effective) ``lam``.

    Parameters
    ----------
    C : ndarray of shape (m, m)
    lam : float
        The lambda the QP uses (after any scaling, see :func:`mkrk_dask.loop.effective_lambda`).
    gap_tol : float
        A solution is certified when its duality gap over its objective is below this.
    strict : bool
        Raise instead of warning when a solution is not certified.
    """

    name = "MKKM-RK"

    def __init__(self, C: np.ndarray, lam: float, *, gap_tol: float = 1e-8, strict: bool = False):
        self.qp = RepresentativeQP(C, lam, gap_tol=gap_tol, strict=strict)

    def initial_representation(self, m: int) -> np.ndarray:
        # The authors' code starts from a one-hot Y, whose row means are all 1/m.
        return np.eye(m)

    def resume(self, update: WeightUpdate) -> None:
        self.qp.restore(update.representation)

    def update(self, residuals: np.ndarray) -> WeightUpdate:
        solution = self.qp.solve(residuals)
        Y = solution.Y
        return WeightUpdate(weights=Y.sum(axis=1) / Y.shape[0],
                            objective=float(solution.objective),
                            relative_gap=float(solution.relative_gap),
                            certified=bool(solution.certified), representation=Y)
