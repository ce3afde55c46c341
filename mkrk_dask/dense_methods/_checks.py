"""Input checks shared by the dense Table 2 baselines (one-line ValueErrors naming the problem)."""

from __future__ import annotations

import numbers
from typing import Any

import numpy as np

from ..precomputed import check_precomputed
from ..validation import check_n_clusters

__all__ = ["check_dense_input", "check_iterations", "check_tolerance"]


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


def check_iterations(name: str, value: Any) -> int:
    """A positive integer count of iterations or steps."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")
    return int(value)


def check_tolerance(name: str, value: Any) -> float:
    """A finite non-negative tolerance."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real) \
            or not np.isfinite(value) or value < 0:
        raise ValueError(f"{name} must be a finite number >= 0, got {value!r}")
    return float(value)
