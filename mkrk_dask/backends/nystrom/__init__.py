"""Nystrom backend: MKKM-RK on millions of samples through one pass over the data.

``model`` is the picklable row map (landmarks, transforms; ``predict``), ``local`` the sparse
local part of the narrow kernels, ``tasks`` what runs on the workers, ``build`` makes (or
reopens) the store, ``backend`` holds the five quantities of the loop.
"""

from .backend import (
    MISSED_FRACTION_WARNING,
    NystromBackend,
    NystromBasis,
    NystromLocalBackend,
)
from .build import STORE_KIND, factor_chunk_rows
from .local import LOCAL_MAX_PER_ROW, LOCAL_THRESHOLD, LocalBasis, LocalPart
from .model import NystromModel

__all__ = ["NystromBackend", "NystromLocalBackend", "NystromModel", "NystromBasis",
           "LocalPart", "LocalBasis", "STORE_KIND", "factor_chunk_rows",
           "MISSED_FRACTION_WARNING", "LOCAL_THRESHOLD", "LOCAL_MAX_PER_ROW"]
