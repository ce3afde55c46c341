"""Weight steps of the alternating loop: one per multiple kernel k-means method.

:class:`WeightStep` is the interface; :class:`RepresentativeStep` is MKKM-RK's Y-step QP,
:class:`AverageResidualStep` MKKM's closed form and :class:`MatrixRegularizedStep` MKKM-MR's
simplex QP.
"""

from .base import WeightStep, WeightUpdate
from .mkkm import AverageResidualStep, MatrixRegularizedStep, mkkm_weights
from .representative import RepresentativeStep

__all__ = ["WeightStep", "WeightUpdate", "RepresentativeStep", "AverageResidualStep",
           "MatrixRegularizedStep", "mkkm_weights"]
