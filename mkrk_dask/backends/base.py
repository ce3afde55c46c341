"""The interface between the alternating loop and the kernels.

The MKKM-RK loop needs only five things from the base kernels, so it is written once against
this interface and every scale gets its own backend (exact dense, blockwise on Dask + Zarr,
Nystrom). A backend owns the kernels; the loop owns everything else.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any

import numpy as np

__all__ = ["KernelBackend", "TopK"]


class TopK:
    """The H-step's result: the top-k eigenbasis of ``K_w`` in the backend's representation.

    Attributes
    ----------
    eigenvalues : ndarray of shape (k,)
        Descending.
    basis : object
        Whatever the backend needs to recover ``H`` (a dense ``n x k`` array for the exact
        backend, a Dask array for the blockwise one, coefficients for Nystrom).
    quad_forms : ndarray of shape (m,) or None
        ``tr(H^T K_p H)`` for every kernel, if the backend got them for free while computing
        the basis (the blockwise backend fuses the two); else computed by ``quad_forms``.
    """

    def __init__(self, eigenvalues: np.ndarray, basis: Any, quad_forms: np.ndarray | None = None):
        self.eigenvalues = np.asarray(eigenvalues, dtype=np.float64)
        self.basis = basis
        self.quad_forms = quad_forms


class KernelBackend(ABC):
    """Abstract backend. ``n_samples`` and ``n_kernels`` are set by subclasses."""

    n_samples: int
    n_kernels: int
    #: dissimilarity measures the backend can compute
    measures: tuple[str, ...] = ("fip", "sfn")

    @abstractmethod
    def traces(self) -> np.ndarray:
        """``tr(K_p)`` for every kernel, shape (m,)."""

    @abstractmethod
    def dissimilarity(self, measure: str) -> np.ndarray:
        """The m x m dissimilarity matrix C (see :mod:`mkrk_dask.dissimilarity`)."""

    @abstractmethod
    def top_k(self, weights: np.ndarray, k: int, warm_start: TopK | None = None) -> TopK:
        """Top-k eigenbasis of ``K_w = sum_p weights[p]**2 K_p``."""

    @abstractmethod
    def quad_forms(self, top: TopK) -> np.ndarray:
        """``tr(H^T K_p H)`` for every kernel p, shape (m,)."""

    @abstractmethod
    def embedding(self, top: TopK) -> np.ndarray:
        """The n x k matrix H as an in-memory array."""

    def close(self) -> None:  # noqa: B027 - optional hook, most backends hold nothing to free
        """Release resources (clusters started, open stores). Idempotent."""

    def __enter__(self) -> KernelBackend:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
