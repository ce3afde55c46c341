"""The one way to make a backend: :func:`make_backend`, from typed options.

The estimator, :func:`mkrk_dask.lambda_search` and the command line all build their backend
here. The options object decides which backend it is (:mod:`mkrk_dask.backends.options`); it
was validated when it was made, so nothing below starts Dask or writes a store on a bad option.
"""

from __future__ import annotations

from typing import Any

from ..cluster import DaskSession
from ..kernels import KernelSpec
from ..locations import StoreLocation, check_workers_read
from .base import KernelBackend
from .options import BackendOptions, BlockwiseOptions, ExactOptions, NystromOptions

__all__ = ["make_backend"]


def make_backend(options: BackendOptions, *, views: list | None = None,
                 specs: list[KernelSpec] | None = None, kernels: Any = None,
                 normalize: bool = True, store: Any = None,
                 storage_options: dict | None = None, scheduler: Any = None,
                 random_state: Any = None) -> KernelBackend:
    """Build (or reopen) the backend that ``options`` describes.

    Parameters
    ----------
    options : ExactOptions, BlockwiseOptions or NystromOptions
    views, specs : list, list of KernelSpec
        Feature input: one n-row array per view (numpy, scipy sparse, dask or Zarr) and the
        kernels to compute on them.
    kernels : array of shape (m, n, n)
        Precomputed kernels instead of ``views``/``specs`` (not with Nystrom).
    normalize : bool
        ``K_ij / sqrt(K_ii K_jj)``.
    store : path or URL, optional
        Zarr store of the scaled backends (reused when it matches, resumed when its build was
        interrupted; default temporary). A URL (``s3://bucket/run.zarr``) for a cluster whose
        workers share no disk with the client.
    storage_options : dict, optional
        fsspec options of a URL store (endpoint, credentials; default: the environment).
    scheduler : None, address or distributed.Client
        Where the scaled backends run (see :class:`mkrk_dask.cluster.DaskSession`).
    random_state : int, RandomState or None
        Seeds what the backend draws (Nystrom landmarks and samples).

    Returns
    -------
    KernelBackend
        Use it in a ``with`` block, or call ``close()``: it may hold a cluster and a store.
    """
    if (kernels is None) == (views is None):
        raise ValueError("give either views (with specs) or precomputed kernels")
    if views is not None and specs is None:
        raise ValueError("feature views need kernel specifications (specs)")
    if isinstance(options, ExactOptions):
        from .exact import ExactBackend

        if kernels is not None:
            return ExactBackend.from_precomputed(kernels, normalize=normalize,
                                                 eigen_method=options.eigen_method,
                                                 copy=options.copy)
        return ExactBackend.from_views(views, specs, normalize=normalize,
                                       eigen_method=options.eigen_method)
    if isinstance(options, NystromOptions) and kernels is not None:
        raise ValueError("solver='nystrom' needs features, not precomputed kernels")
    if not isinstance(options, BlockwiseOptions | NystromOptions):
        raise TypeError(f"options must be ExactOptions, BlockwiseOptions or NystromOptions, "
                        f"got {type(options).__name__}")
    location = None if store is None else StoreLocation.parse(store, storage_options)
    session = DaskSession(scheduler)
    try:
        if views is not None:
            check_workers_read(session.client, list(views))
        if isinstance(options, BlockwiseOptions):
            return _blockwise(options, views, specs, kernels, normalize, location, session)
        from .nystrom.build import build_nystrom

        return build_nystrom(views, specs, options, normalize=normalize, location=location,
                             session=session, random_state=random_state)
    except BaseException:
        session.close()
        raise


def _blockwise(options: BlockwiseOptions, views: list | None, specs: list | None, kernels: Any,
               normalize: bool, location: StoreLocation | None,
               session: DaskSession) -> KernelBackend:
    import numpy as np

    from .blockwise.backend import BlockwiseBackend
    from .blockwise.build import build_from_precomputed, build_from_views, open_or_build

    if kernels is not None:
        m, n = int(kernels.shape[0]), int(kernels.shape[1])
        # (dask kernels: the fingerprint reads them slab by slab, as the build kernel by
        # kernel; never all of them at once)
        stacked = kernels.reshape(m * n, n) if hasattr(kernels, "dask") else \
            np.asarray(kernels).reshape(m * n, n)
        common = dict(source="precomputed", n=n, m=m, request=None, fingerprint_of=[stacked])

        def build(parts: dict) -> Any:
            return build_from_precomputed(kernels, normalize=normalize, **parts)
    else:
        views = list(views)
        common = dict(source="views", n=int(views[0].shape[0]), m=len(specs),
                      request=[s.to_dict() for s in specs], fingerprint_of=views)

        def build(parts: dict) -> Any:
            return build_from_views(views, specs, normalize=normalize, **parts)

    group, location, temp_dir, built, timings = open_or_build(
        **common, normalize=normalize, location=location, session=session, options=options,
        build=build)
    backend = BlockwiseBackend(session, group, location, temp_dir=temp_dir, built=built,
                               options=options)
    backend.train_views = None if views is None else list(views)
    backend.timings.update(timings)
    return backend
