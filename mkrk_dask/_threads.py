"""Threads of this process: the cores it may use, BLAS/OpenMP limits for a block, and
independent items spread over a thread per core."""

from __future__ import annotations

import contextlib
import functools
import os
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

__all__ = ["usable_cores", "local_threads", "held_threads", "single_blas_thread", "map_threads"]


def usable_cores() -> int:
    """The cores this process may run on (its CPU affinity where the OS reports one)."""
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return max(1, os.cpu_count() or 1)


#: the limit this thread's innermost :func:`local_threads` block holds
_HELD = threading.local()


def local_threads(threads: int | None) -> Any:
    """BLAS/OpenMP threads of this process for a ``with`` block (None: as they are). Inside
    a block of this thread that already holds the same limit nothing is done: an eigensolver
    called once per iteration would otherwise set and restore the limits every time."""
    if threads is None or getattr(_HELD, "threads", None) == threads:
        return contextlib.nullcontext()
    return _holding(threads)


def held_threads() -> int | None:
    """The BLAS/OpenMP limit this thread's innermost :func:`local_threads` block holds (None
    outside any)."""
    return getattr(_HELD, "threads", None)


def single_blas_thread() -> Any:
    """BLAS on one thread for a ``with`` block, OpenMP as it is (scikit-learn's k-means runs
    its own loops on OpenMP and limits BLAS so too).

    For work made of many small BLAS calls (ARPACK on a graph of a thousand anchors, k-means
    on an embedding of a few thousand rows): a second BLAS thread only waits there, and the
    idle threads of numpy's and SciPy's OpenBLAS (two copies of it) and of OpenMP spin beside
    each other on a small machine; right after a k-means, the graph's eigensolver on
    scikit-learn's digits took several times as long with two BLAS threads as with one.
    """
    if held_threads() == 1:  # already one thread for every library
        return contextlib.nullcontext()
    return _controller().limit(limits=1, user_api="blas")


@functools.cache
def _controller() -> Any:
    """threadpoolctl's view of the thread pools of the libraries loaded, taken once: taking it
    inspects every loaded library, which each of a small fit's half-dozen limits paid
    before. The package's imports load numpy's, SciPy's and scikit-learn's pools
    (scikit-learn keeps one such controller too)."""
    from threadpoolctl import ThreadpoolController

    return ThreadpoolController()


@contextlib.contextmanager
def _holding(threads: int) -> Iterator[None]:
    outer = getattr(_HELD, "threads", None)
    with _controller().limit(limits=threads):
        _HELD.threads = threads
        try:
            yield
        finally:
            _HELD.threads = outer


def map_threads(task: Callable[[int, Any], None], count: int,
                make_state: Callable[[], Any] = lambda: None) -> None:
    """``task(i, state)`` for ``i`` in ``range(count)``, on one thread per usable core (at
    most ``count``), each thread with its own ``state`` from ``make_state`` (a work buffer),
    and BLAS/OpenMP on one thread meanwhile. An error is raised for the lowest ``i`` that
    failed, as in a sequential loop, and items not yet started are cancelled.

    Meant for tasks whose time is spent where the GIL is released (numpy on large arrays,
    LAPACK through :mod:`mkrk_dask._lapack`). With one core, or one item, it is a plain loop
    with the caller's BLAS threads.
    """
    threads = min(count, usable_cores())
    if threads <= 1:
        state = make_state()
        for i in range(count):
            task(i, state)
        return
    local = threading.local()

    def run(i: int) -> None:
        if not hasattr(local, "state"):
            local.state = make_state()
        task(i, local.state)

    # Executor.map yields in order and, on the first error, cancels what has not started.
    with local_threads(1), ThreadPoolExecutor(threads) as pool:
        for _ in pool.map(run, range(count)):
            pass
