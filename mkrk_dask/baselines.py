"""The paper's two simplest baselines, on any backend.

- SB-KKM: kernel k-means (spectral relaxation) on every single kernel; the best is reported.
- A-MKKM: kernel k-means on the equally weighted combination of all kernels.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .assignment import repeated_assignments
from .backends.base import KernelBackend

__all__ = ["kernel_backend", "fixed_weight_clustering", "single_kernel_clustering",
           "average_kernel_clustering"]


def kernel_backend(X: Any, kernels: Any = "paper") -> KernelBackend:
    """The kernels of ``X`` in memory, normalised, for the baselines below (the exact backend;
    close it, or use it in a ``with`` block, when done).

    Parameters
    ----------
    X : array-like or sparse matrix of shape (n_samples, n_features), or a list of views
    kernels : "paper" or list of str or KernelSpec, default="paper"
        As the estimators' ``kernels`` (``"paper"``: the paper's 12 on every view).

    Returns
    -------
    KernelBackend
    """
    from .backends import make_backend, make_options
    from .kernels import as_kernel_specs
    from .validation import check_views

    views = check_views(X)
    return make_backend(make_options("exact"), views=views,
                        specs=as_kernel_specs(kernels, len(views)))


def fixed_weight_clustering(backend: KernelBackend, weights: np.ndarray, n_clusters: int,
                            n_repeats: int = 1, *, n_init: int = 10,
                            random_state: Any = 0) -> list[np.ndarray]:
    """Spectral kernel k-means on ``K_w`` for fixed weights, with repeated final k-means."""
    top = backend.top_k(np.asarray(weights, dtype=np.float64), n_clusters)
    H = backend.embedding(top)
    return repeated_assignments(H, n_clusters, n_repeats, n_init=n_init,
                                random_state=random_state)


def single_kernel_clustering(backend: KernelBackend, n_clusters: int, n_repeats: int = 1,
                             **kwargs: Any) -> list[list[np.ndarray]]:
    """SB-KKM: for every kernel p, the labels of ``n_repeats`` k-means runs on kernel p alone."""
    m = backend.n_kernels
    return [fixed_weight_clustering(backend, np.eye(m)[p], n_clusters, n_repeats, **kwargs)
            for p in range(m)]


def average_kernel_clustering(backend: KernelBackend, n_clusters: int, n_repeats: int = 1,
                              **kwargs: Any) -> list[np.ndarray]:
    """A-MKKM: labels of ``n_repeats`` k-means runs on the equally weighted kernel."""
    m = backend.n_kernels
    return fixed_weight_clustering(backend, np.full(m, 1.0 / m), n_clusters, n_repeats,
                                   **kwargs)
