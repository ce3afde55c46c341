"""Weight steps of the alternating loop: one per multiple kernel k-means method.

:class:`WeightStep` is the interface; :class:`RepresentativeStep` is MKKM-RK's Y-step QP.
"""

from .base import WeightStep, WeightUpdate
from .representative import RepresentativeStep

__all__ = ["WeightStep", "WeightUpdate", "RepresentativeStep"]
