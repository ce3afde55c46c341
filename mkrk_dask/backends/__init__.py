"""Backends: where the base kernels live and how the loop's five quantities are computed.

Make one with :func:`make_backend` from typed options (:mod:`.options`): ``exact`` (dense, in
memory), ``blockwise`` (all kernels in a Zarr store, products on Dask) or ``nystrom``
(low-rank factors, millions of samples). ``docs/architecture.rst`` says where a new one goes.
"""

from .base import ApproximationReport, KernelBackend, RowMap, TopK, kernel_inertia
from .exact import ExactBackend
from .factory import make_backend
from .options import (
    SOLVER_OPTIONS,
    BackendOptions,
    BlockwiseOptions,
    ExactOptions,
    NystromOptions,
    make_options,
    option_names,
)

__all__ = ["KernelBackend", "TopK", "ApproximationReport", "RowMap", "ExactBackend",
           "make_backend", "make_options", "option_names", "SOLVER_OPTIONS", "BackendOptions",
           "ExactOptions", "BlockwiseOptions", "NystromOptions", "kernel_inertia"]
