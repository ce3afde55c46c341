"""Weight steps of the alternating loop: one per multiple kernel k-means method.

:class:`WeightStep` is the interface; :class:`RepresentativeStep` is MKKM-RK's Y-step QP,
:class:`AverageResidualStep` MKKM's closed form, :class:`MatrixRegularizedStep` MKKM-MR's
simplex QP and :class:`ReducedGradientStep` SimpleMKKM's reduced-gradient line search.
"""

from .base import WeightStep, WeightUpdate
from .mkkm import AverageResidualStep, MatrixRegularizedStep, mkkm_weights
from .reduced_gradient import ReducedGradientStep, optimality_gap
from .representative import RepresentativeStep

__all__ = ["WeightStep", "WeightUpdate", "RepresentativeStep", "AverageResidualStep",
           "MatrixRegularizedStep", "ReducedGradientStep", "mkkm_weights", "optimality_gap"]
