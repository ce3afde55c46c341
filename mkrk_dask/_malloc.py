"""The C heap: give the memory a task freed back to the OS (glibc only).

glibc keeps freed blocks below its mmap threshold in its heaps, and raises that threshold
(up to 32 MiB) each time a large block is freed, so a worker whose tasks allocate and free
large temporaries keeps the high-water mark of its heaps as resident memory, and a pass's
memory creeps up from task to task. :func:`trims_heap` tasks call ``malloc_trim`` when they
end, on whichever worker ran them: one call, and the page faults of the next task's first
allocations. A low fixed trim threshold (``MALLOC_TRIM_THRESHOLD_=65536``, which distributed
gives its worker processes) bounds the heap harder, but maps and faults every temporary
above 128 KiB afresh, which slowed the Nystrom build noticeably.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
from collections.abc import Callable
from typing import Any

__all__ = ["malloc_trim", "trims_heap"]


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


def trims_heap(task: Callable) -> Callable:
    """A task that calls :func:`malloc_trim` when it ends (on the worker that ran it)."""

    @functools.wraps(task)
    def trimmed(*args: Any, **kwargs: Any) -> Any:
        try:
            return task(*args, **kwargs)
        finally:
            malloc_trim()

    return trimmed
