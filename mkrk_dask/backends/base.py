"""The interface between the alternating loop and the kernels.

The MKKM-RK loop needs only five things from the base kernels, so it is written once against
this interface and every scale gets its own backend (exact dense, blockwise on Dask + Zarr,
Nystrom). A backend owns the kernels; the loop owns everything else.

Beyond the five, a backend may offer optional capabilities, declared here with a default that
says "not available" (the estimator asks, it never probes with ``hasattr``):

- :meth:`KernelBackend.approximation`: what an approximate backend leaves out of the kernels;
- :meth:`KernelBackend.row_map`: a map from new rows to the embedding (``predict``).

See ``docs/architecture.rst`` for the layers and where a new backend goes.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

__all__ = ["KernelBackend", "TopK", "ApproximationReport", "RowMap", "APPROXIMATION_WARNING",
           "cluster_basis", "kernel_inertia"]

#: the estimator warns when an approximate backend misses more than this share of the trace
#: of the learned K_w
APPROXIMATION_WARNING = 0.05


@dataclass
class ApproximationReport:
    """What an approximate backend leaves out of the kernels.

    Attributes
    ----------
    residual_fractions : ndarray of shape (m,)
        The share of every kernel's trace the approximation misses.
    missed_fraction : float
        The share of the trace of the learned ``K_w`` it misses.
    ranks : ndarray of shape (m,), optional
        The number of components that represent every kernel.
    """

    residual_fractions: np.ndarray
    missed_fraction: float
    ranks: np.ndarray | None = None


class RowMap(Protocol):
    """Maps new rows (one array per view) to rows of the embedding H; picklable."""

    n_features: list[int | None]

    def transform(self, views: Sequence[Any]) -> np.ndarray:
        """H rows of the given rows, shape (n_rows, k)."""


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
    weights : ndarray of shape (m,) or None
        The weights of the ``K_w`` it is the eigenbasis of.
    """

    def __init__(self, eigenvalues: np.ndarray, basis: Any, quad_forms: np.ndarray | None = None,
                 weights: np.ndarray | None = None):
        self.eigenvalues = np.asarray(eigenvalues, dtype=np.float64)
        self.basis = basis
        self.quad_forms = quad_forms
        #: the kernel weights ``K_w`` was formed with (set by the loop)
        self.weights = weights

    def leading(self, count: int) -> TopK:
        """The top ``count`` eigenpairs alone (the basis's leading columns)."""
        basis = self.basis
        basis = basis.leading(count) if hasattr(basis, "leading") else basis[:, :count]
        return TopK(self.eigenvalues[:count], basis, weights=self.weights)


class KernelBackend(ABC):
    """Abstract backend. ``n_samples`` and ``n_kernels`` are set by subclasses."""

    n_samples: int
    n_kernels: int
    #: the resolved kernels (None for precomputed kernels)
    kernel_specs: list | None = None
    #: True when the backend reopened a complete store instead of building one
    reused_store: bool = False
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
        """The n x k matrix H as a new in-memory array (the caller owns it and may scale it in
        place)."""

    def draft_embedding(self, top: TopK) -> np.ndarray:
        """:meth:`embedding`, possibly before the backend's checks of its input have all
        passed: for a caller that publishes nothing made from it before leaving the backend's
        ``with`` block, which waits for them (the exact backend's PSD test of precomputed
        kernels then ends beside the caller's work on it)."""
        return self.embedding(top)

    def sample_embedding(self, top: TopK, rows: np.ndarray) -> np.ndarray:
        """The rows of H of the boolean mask ``rows``, in row order (here: from all of H; a
        backend that reads its rows in a pass reads only these)."""
        return self.draft_embedding(top)[rows]

    def labelled_embedding(self, top: TopK, assign: Any, n_clusters: int,
                           sample: np.ndarray, sample_labels: np.ndarray
                           ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(H, labels, forms)``: :meth:`draft_embedding`, the labels ``assign`` (a callable
        of a block of rows of H) gives its rows, those of the rows of the boolean mask
        ``sample`` (the partition was fitted on them) kept as ``sample_labels``, and
        :meth:`cluster_quad_forms` of the labels. A backend that reads its rows in passes
        makes all three in one, the forms estimated from the sampled rows."""
        H = self.draft_embedding(top)
        labels = np.asarray(assign(H), dtype=np.int64)
        labels[sample] = sample_labels
        return H, labels, self.cluster_quad_forms(labels, n_clusters)

    def cluster_quad_forms(self, labels: np.ndarray, n_clusters: int) -> np.ndarray:
        """``sum_c (1/|c|) sum_{i,j in c} K_p[i, j]`` for every kernel p, shape (m,): the
        quadratic forms of the clusters' indicators scaled to unit length
        (:func:`cluster_basis`), through :meth:`quad_forms` (the exact backend's product with
        the kernels in memory, one blockwise pass over the store)."""
        basis = cluster_basis(labels, n_clusters)
        return self.quad_forms(TopK(np.ones(basis.shape[1]), basis))

    def max_rank(self, weights: np.ndarray) -> int:
        """The most eigenpairs :meth:`top_k` can give for these weights."""
        return self.n_samples

    def approximation(self, weights: np.ndarray) -> ApproximationReport | None:
        """What the backend leaves out of the kernels; None for an exact backend."""
        return None

    def row_map(self, top: TopK) -> RowMap | None:
        """A map from new rows to the embedding of ``top``; None where there is none."""
        return None

    def compute_threads(self) -> int | None:
        """BLAS/OpenMP threads for the loop and the final step, which run in this process
        (None: as they are)."""
        return None

    def loop_checkpoint(self, key: str) -> Any:
        """Where the loop keeps its state after each iteration, so that an interrupted fit
        resumes (a :class:`~mkrk_dask.store.checkpoints.LoopCheckpoint`); None without a store."""
        return None

    def encode_top(self, top: TopK) -> tuple[str, dict[str, np.ndarray]]:
        """``top`` as named arrays (for a checkpoint); :meth:`decode_top` inverts it."""
        return "array", {"eigenvalues": top.eigenvalues, "basis": np.asarray(top.basis)}

    def decode_top(self, kind: str, arrays: dict[str, np.ndarray]) -> TopK:
        return TopK(arrays["eigenvalues"], arrays["basis"])

    def close(self) -> None:  # noqa: B027 - optional hook, most backends hold nothing to free
        """Release resources (clusters started, open stores). Idempotent."""

    def __enter__(self) -> KernelBackend:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def cluster_basis(labels: np.ndarray, n_clusters: int) -> np.ndarray:
    """The n x k indicator of the clusters, column c ``1_c / sqrt(|c|)`` (orthonormal
    columns; an empty cluster's is zero)."""
    labels = np.asarray(labels, dtype=np.int64)
    counts = np.bincount(labels, minlength=n_clusters).astype(np.float64)
    basis = np.zeros((labels.size, n_clusters))
    basis[np.arange(labels.size), labels] = 1.0 / np.sqrt(counts[labels])
    return basis


def kernel_inertia(backend: KernelBackend, weights: np.ndarray, labels: np.ndarray,
                   n_clusters: int, forms: np.ndarray | None = None) -> float:
    """The kernel k-means objective of ``labels`` in ``K_w = sum_p w_p^2 K_p``, as
    ``KMeans.inertia_`` defines it: ``tr(K_w) - sum_c (1/|c|) sum_{i,j in c} K_w[i, j]``,
    the squared distances of the samples to their cluster's centre in the kernel's feature
    space, summed. From the traces and :meth:`KernelBackend.cluster_quad_forms` (``forms``,
    where a pass that labelled the rows already made them): never an n x n matrix beyond the
    backend's own."""
    squared = np.asarray(weights, dtype=np.float64) ** 2
    if forms is None:
        forms = backend.cluster_quad_forms(labels, n_clusters)
    within = backend.traces() - forms
    # round-off can leave a kernel's share a hair below zero where a cluster is one point
    return float(max(squared @ within, 0.0))
