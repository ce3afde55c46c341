"""What making any backend shares: the input check, and for the Dask backends the session and
store location their build runs in.

:func:`mkrk_dask.backends.make_backend` and the shortcuts of the backends themselves
(``BlockwiseBackend.from_views``, ...) both build through here, so a shortcut never calls back
up into the factory.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..dask_session import DaskSession
from ..store.locations import StoreLocation, check_workers_read
from .base import KernelBackend
from .options import BackendOptions, NystromOptions

__all__ = ["check_backend_input", "refuse_precomputed", "build_on_dask"]


def check_backend_input(views: list | None, specs: list | None, kernels: Any) -> None:
    """Feature views with their kernel specifications, or precomputed kernels: one of them."""
    if (kernels is None) == (views is None):
        raise ValueError("give either views (with specs) or precomputed kernels")
    if views is not None and specs is None:
        raise ValueError("feature views need kernel specifications (specs)")


def refuse_precomputed(options: BackendOptions) -> None:
    """Precomputed kernels go to the exact or the blockwise backend: the Nystrom factors are
    built from the features (the estimator asks before it reads the kernels, the factory
    before it builds)."""
    if isinstance(options, NystromOptions):
        raise ValueError("solver='nystrom' needs features, not precomputed kernels")


def build_on_dask(build: Callable[[StoreLocation | None, DaskSession], KernelBackend], *,
                  views: list | None, store: Any, storage_options: dict | None,
                  scheduler: Any) -> KernelBackend:
    """``build(location, session)`` in a Dask session on ``scheduler`` (see
    :class:`mkrk_dask.dask_session.DaskSession`), with the store at ``store`` (a path or URL, or
    None for a temporary one), once the workers are known to read the ``views``; the session
    is closed again if the build fails."""
    location = None if store is None else StoreLocation.parse(store, storage_options)
    session = DaskSession(scheduler)
    try:
        if views is not None:
            check_workers_read(session.client, list(views))
        return build(location, session)
    except BaseException:
        session.close()
        raise
