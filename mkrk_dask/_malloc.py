"""The C heap: give the memory a task freed back to the OS (glibc only).

glibc keeps freed blocks below its mmap threshold in its heaps, and raises that threshold
(up to 32 MiB) each time a large block is freed, so a worker whose tasks allocate and free
large temporaries keeps the high-water mark of its heaps as resident memory. distributed
starts its worker processes with ``MALLOC_TRIM_THRESHOLD_`` set for this reason
(``distributed.nanny.pre-spawn-environ``); :func:`apply_worker_settings` gives the same
setting to a process that hosts in-process workers, and :func:`trims_heap` tasks trim the
heap when they end on any worker. On a 2 * 10^6 x 256 Nystrom fit the peak RSS of the
process tree went from 0.83-1.17 GiB to 0.61-0.63 GiB (measured by sampling it every 0.1 s;
``benchmarks/results/scale/scale_api_wide.md``).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
from collections.abc import Callable
from typing import Any

__all__ = ["malloc_trim", "trims_heap", "apply_worker_settings"]

#: mallopt's parameter number of the trim threshold (malloc.h)
_M_TRIM_THRESHOLD = -1


@functools.cache
def _libc_function(name: str) -> Any:
    try:
        return getattr(ctypes.CDLL(ctypes.util.find_library("c")), name, None)
    except (OSError, TypeError):
        return None


def malloc_trim() -> bool:
    """Give the C heap's free pages back to the OS; False where there is no glibc."""
    trim = _libc_function("malloc_trim")
    return bool(trim(0)) if trim is not None else False


def apply_worker_settings() -> bool:
    """Set this process's trim threshold as distributed sets a worker process's.

    Process-wide and for the life of the process (setting it also fixes glibc's mmap
    threshold at 128 KiB: larger temporaries are mapped on their own and unmapped when
    freed). Returns False where there is no glibc or distributed sets no threshold.
    """
    import dask.config
    import distributed  # noqa: F401 - its defaults are in dask.config once it is imported

    environ = dask.config.get("distributed.nanny.pre-spawn-environ", default={}) or {}
    value = environ.get("MALLOC_TRIM_THRESHOLD_")
    mallopt = _libc_function("mallopt")
    if value is None or mallopt is None:
        return False
    return bool(mallopt(_M_TRIM_THRESHOLD, int(value)))


def trims_heap(task: Callable) -> Callable:
    """A task that calls :func:`malloc_trim` when it ends (on the worker that ran it)."""

    @functools.wraps(task)
    def trimmed(*args: Any, **kwargs: Any) -> Any:
        try:
            return task(*args, **kwargs)
        finally:
            malloc_trim()

    return trimmed
