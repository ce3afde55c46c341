"""The one way to make a backend: :func:`make_backend`, from typed options.

The estimator, :func:`mkrk_dask.lambda_search` and the command line all build their backend
here. The options object decides which backend it is (:mod:`mkrk_dask.backends.options`); it
was validated when it was made, so nothing below starts Dask or writes a store on a bad option.
"""

from __future__ import annotations

from typing import Any

from ..kernels import KernelSpec
from .base import KernelBackend
from .construction import check_backend_input, refuse_precomputed
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
        Where the scaled backends run (see :class:`mkrk_dask.dask_session.DaskSession`).
    random_state : int, RandomState or None
        Seeds what the backend draws (Nystrom landmarks and samples).

    Returns
    -------
    KernelBackend
        Use it in a ``with`` block, or call ``close()``: it may hold a cluster and a store.
    """
    check_backend_input(views, specs, kernels)
    if isinstance(options, ExactOptions):
        from .exact import ExactBackend

        if kernels is not None:
            return ExactBackend.from_precomputed(kernels, normalize=normalize,
                                                 eigen_method=options.eigen_method,
                                                 copy=options.copy)
        return ExactBackend.from_views(views, specs, normalize=normalize,
                                       eigen_method=options.eigen_method)
    if kernels is not None:
        refuse_precomputed(options)
    if not isinstance(options, BlockwiseOptions | NystromOptions):
        raise TypeError(f"options must be ExactOptions, BlockwiseOptions or NystromOptions, "
                        f"got {type(options).__name__}")
    if isinstance(options, BlockwiseOptions):
        from .blockwise.backend import open_blockwise

        return open_blockwise(options, views=views, specs=specs, kernels=kernels,
                              normalize=normalize, store=store,
                              storage_options=storage_options, scheduler=scheduler)
    from .nystrom.backend import open_nystrom

    return open_nystrom(options, views=views, specs=specs, normalize=normalize, store=store,
                        storage_options=storage_options, scheduler=scheduler,
                        random_state=random_state)
