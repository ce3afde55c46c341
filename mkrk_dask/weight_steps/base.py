"""The weight step of the alternating loop: given the residuals, return the kernel weights.

Every multiple kernel k-means method of this family alternates two steps on
``K_w = sum_p w_p^2 K_p``: the H-step (top-k eigenvectors, the same for all of them, done by the
backend) and a weight step that, for fixed H, needs only the residuals
``d_p = tr(K_p) - tr(H^T K_p H)`` (and matrices computed once, such as C). A method is its
weight step: subclass :class:`WeightStep`, and the one loop (:func:`mkrk_dask.loop.alternate`)
runs it on every backend.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["WeightStep", "WeightUpdate"]


@dataclass
class WeightUpdate:
    """What a weight step returns.

    Attributes
    ----------
    weights : ndarray of shape (m,)
        Non-negative, summing to 1.
    objective : float
        The method's objective after the step (for the residuals it was given).
    relative_gap : float
        A certified bound on how far ``objective`` is above the step's optimum, relative to
        it (0 for a closed form).
    certified : bool
        ``relative_gap`` is within the step's tolerance.
    representation : ndarray of shape (m, m) or None
        MKKM-RK's Y (None for methods without one).
    top : TopK or None
        The H-step at ``weights``, when the step computed it (a line search): the loop reuses
        it instead of computing it again.
    converged : bool
        The step certifies that its weights are optimal (the loop stops).
    """

    weights: np.ndarray
    objective: float
    relative_gap: float = 0.0
    certified: bool = True
    representation: np.ndarray | None = None
    top: Any = None
    converged: bool = False


class WeightStep(ABC):
    """A method's weight step. Subclasses set :attr:`name` and implement :meth:`update`."""

    #: the method's short name, as in the paper's Table 2 (e.g. ``"MKKM-RK"``)
    name: str = ""
    #: H-steps the step made itself (a line search's trial points); the loop's are not counted
    evaluations: int = 0

    def initial_weights(self, m: int) -> np.ndarray:
        """The weights of the first H-step (equal weights unless a method says otherwise)."""
        return np.full(m, 1.0 / m)

    def initial_representation(self, m: int) -> np.ndarray | None:
        """The representation before the first step (None for methods without one)."""
        return None

    def resume(self, update: WeightUpdate) -> None:  # noqa: B027 - most steps keep no state
        """Continue after ``update``, the last step of an interrupted fit (restores any state
        the step keeps between iterations, so the resumed fit repeats the same steps)."""

    @abstractmethod
    def update(self, residuals: np.ndarray) -> WeightUpdate:
        """The weights minimising the objective for the given residuals (fixed H)."""

    def advance(self, residuals: np.ndarray, top: Any) -> WeightUpdate:
        """The loop's call: :meth:`update`, with the H-step ``top`` the residuals came from
        (for steps that evaluate more H-steps, warm-started from it)."""
        return self.update(residuals)
