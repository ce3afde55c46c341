"""The kernels' check shared by the dense Table 2 baselines (one-line ValueErrors naming the
problem). Their other parameters are declared where they are defined
(:func:`mkrk_dask.validation.constrained`)."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..precomputed import check_precomputed
from ..validation import check_n_clusters

__all__ = ["check_dense_input"]


def check_dense_input(kernels: Any, n_clusters: Any,
                      check_input: bool = True) -> tuple[np.ndarray, int]:
    """The kernels as a float64 ``(m, n, n)`` array (square, finite, symmetric, PSD: see
    :func:`mkrk_dask.precomputed.check_precomputed`) and ``n_clusters`` checked against n.
    ``check_input=False`` (kernels the caller has validated) checks the shape only."""
    if not check_input:
        K = np.asarray(kernels, dtype=np.float64)
        if K.ndim != 3 or K.shape[1] != K.shape[2]:
            raise ValueError(f"kernels must have shape (m, n, n), got {K.shape}")
        return K, check_n_clusters(n_clusters, K.shape[1])
    K = np.asarray(kernels) if not isinstance(kernels, list | tuple) else kernels
    if isinstance(K, np.ndarray) and K.ndim == 3 and K.shape[1] != K.shape[2]:
        raise ValueError(f"kernels must be square: got shape {K.shape}, expected (m, n, n)")
    # check_precomputed factorises the kernels on a thread per core, BLAS on one thread each
    K = check_precomputed(K)
    return K, check_n_clusters(n_clusters, K.shape[1])
