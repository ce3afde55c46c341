"""Exact backend: dense in-memory kernels, LAPACK/ARPACK top-k eigensolver.

For n up to ~10-15k (the m kernels must fit in memory: ``8 m n^2`` bytes, or half of that
for precomputed kernels, which are kept packed).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .._packed import PackedLayout
from .._threads import local_threads
from ..dissimilarity import GRAM_MEASURES, MEASURES, dense_dissimilarity, from_gram
from ..eigen import SINGLE_THREAD_MAX_N, top_k_dense
from ..kernel_widths import median_scales, memory_scales
from ..kernels import KernelSpec, kernel_matrices, mirror_upper, resolve_kernels
from ..precomputed import (
    DeferredPsdTest,
    prepare_precomputed_deferred,
    prepare_precomputed_packed,
)
from .base import KernelBackend, TopK

__all__ = ["ExactBackend"]


class ExactBackend(KernelBackend):
    """Dense kernels held as one C-contiguous ``(m, n, n)`` float64 array, or packed: the
    upper triangle of every kernel, strip of rows by strip, an ``(m, layout.size)`` array
    (:class:`mkrk_dask._packed.PackedLayout`; precomputed kernels copied by
    :meth:`from_precomputed`).

    Packed, the kernels take about half the memory, and every pass of the loop over them
    (``K_w``, the quadratic forms, C: memory-bound matrix products) reads about half the
    bytes.

    Made by :func:`mkrk_dask.backends.make_backend` with
    :class:`~mkrk_dask.backends.options.ExactOptions`, or by :meth:`from_views` /
    :meth:`from_precomputed`.

    Parameters
    ----------
    kernels : ndarray of shape (m, n, n), or (m, layout.size) with ``layout``
        Validated, exactly symmetric base kernels (see :meth:`from_precomputed`).
    eigen_method : {"auto", "lapack", "lanczos"}
        See :func:`mkrk_dask.eigen.top_k_dense`.
    layout : PackedLayout, optional
        The layout of packed ``kernels``.
    """

    measures = MEASURES

    def __init__(self, kernels: np.ndarray, eigen_method: str = "auto", *,
                 layout: PackedLayout | None = None):
        stacked = np.ascontiguousarray(kernels, dtype=np.float64)
        self.n_kernels = stacked.shape[0]
        self._layout = layout
        if layout is not None:
            if stacked.ndim != 2 or stacked.shape[1] != layout.size:
                raise ValueError(f"packed kernels of shape {stacked.shape} do not have the "
                                 f"layout's {layout.size} entries each")
            self.n_samples = layout.n
            self._full, self._packed = None, stacked
            self._diagonals = layout.diagonals(stacked)
        else:
            self.n_samples = stacked.shape[1]
            self._full, self._packed = stacked, None
            self._diagonals = np.ascontiguousarray(np.einsum("pii->pi", stacked))
        self.eigen_method = eigen_method
        self._dissimilarity: dict[str, np.ndarray] = {}
        self.kernel_specs: list[KernelSpec] | None = None
        self._train: tuple[list, bool] | None = None
        self._psd_test: DeferredPsdTest | None = None
        self._work: np.ndarray | None = None  # see _work_matrix
        self._flat_work: np.ndarray | None = None  # packed K_w and H H^T weights

    @property
    def packed(self) -> bool:
        """Whether the kernels are kept packed (their upper triangles alone)."""
        return self._layout is not None

    @property
    def kernels(self) -> np.ndarray:
        """The kernels as an ``(m, n, n)`` array: the backend's own, or for packed kernels a
        new full copy made at every access (``8 m n^2`` bytes: for checks and small data)."""
        if self._full is not None:
            return self._full
        m, n = self.n_kernels, self.n_samples
        full = np.empty((m, n, n))
        for p in range(m):
            self._layout.unpack_full(self._packed[p], full[p])
        return full

    @classmethod
    def from_views(cls, views: list, specs: list[KernelSpec], *, normalize: bool = True,
                   eigen_method: str = "auto") -> ExactBackend:
        """Build the dense kernels from validated views (see :func:`check_views`)."""
        scales = memory_scales(views, specs)
        distances = [scales[v]["value"] if v in scales else 0.0 for v in range(len(views))]
        resolved = resolve_kernels(specs, distances, median_scales(views, specs))
        backend = cls(kernel_matrices(views, resolved, normalize=normalize), eigen_method)
        backend.kernel_specs = resolved
        backend._train = (list(views), bool(normalize))
        return backend

    @classmethod
    def from_precomputed(cls, kernels: Any, *, normalize: bool = True,
                         eigen_method: str = "auto", copy: bool = True) -> ExactBackend:
        """Use precomputed kernels ``(m, n, n)``, checked, normalised and made exactly
        symmetric (the eigensolver's assumptions hold to the last bit) in one copy, as
        :func:`~mkrk_dask.precomputed.prepare_precomputed` does; ``kernels`` is not modified
        unless ``copy=False`` (then prepared in place where it allows, and kept full).
        The copy is packed (:func:`~mkrk_dask.precomputed.prepare_precomputed_packed`: the
        same entries to the bit, half the bytes).

        Every check but the PSD test is made before this returns (above
        :data:`~mkrk_dask.eigen.SINGLE_THREAD_MAX_N` rows, the PSD test too). Up to that size
        the PSD test (:class:`~mkrk_dask.precomputed.DeferredPsdTest`) starts with the first
        computation on the kernels, on a second core beside the loop when the caller holds
        one BLAS thread (as a fit does). Its error
        is raised by that loop as soon as it is known, and at the latest by :meth:`embedding`
        or on leaving the backend's ``with`` block: no result comes out of kernels that fail
        it. (:meth:`draft_embedding` does not wait: a fit's final k-means runs while the test
        ends, and its results are set only after the block.)"""
        layout = None
        if copy:
            prepared, layout, psd_test = prepare_precomputed_packed(kernels,
                                                                    normalize=normalize)
        else:
            prepared, psd_test = prepare_precomputed_deferred(kernels, normalize=normalize,
                                                              copy=False)
        backend = cls(prepared, eigen_method, layout=layout)
        backend.kernel_specs = None
        backend._psd_test = psd_test
        if backend.compute_threads() != 1:
            # A fit cannot run it beside the loop here: test now, before any work.
            psd_test.wait()
        return backend

    def _checking(self) -> None:
        """Start the pending PSD test, or raise its error if it has failed already."""
        if self._psd_test is not None:
            self._psd_test.start()
            self._psd_test.raise_if_failed()

    def _checked(self) -> None:
        """Wait for the pending PSD test to pass."""
        if self._psd_test is not None:
            self._psd_test.wait()

    def __exit__(self, exc_type: type | None, *exc: object) -> None:
        # An error of the loop on kernels that are not PSD is explained by the PSD test's
        # error; an interrupt is not held up by it.
        try:
            if exc_type is None or issubclass(exc_type, Exception):
                self._checked()
        finally:
            self.close()

    def close(self) -> None:
        self._work = self._flat_work = None
        if self._psd_test is not None:
            self._psd_test.cancel()

    def compute_threads(self) -> int | None:
        """One thread up to :data:`~mkrk_dask.eigen.SINGLE_THREAD_MAX_N` rows: there each
        product takes milliseconds, and a second thread (BLAS's, then the final k-means'
        OpenMP team, each spinning after its turn) costs more than it brings (on COIL20's 12
        kernels, ``benchmarks/results/exact/exact_fit.md``)."""
        return 1 if self.n_samples <= SINGLE_THREAD_MAX_N else None

    def traces(self) -> np.ndarray:
        self._checking()
        return self._diagonals.sum(axis=1)

    def dissimilarity(self, measure: str) -> np.ndarray:
        self._checking()
        if measure not in self._dissimilarity:
            if self.packed and measure in GRAM_MEASURES:
                C = from_gram(self._layout.gram(self._packed), measure)
            else:
                C = dense_dissimilarity(self.kernels, measure)
            self._dissimilarity[measure] = C
        return self._dissimilarity[measure].copy()

    def combined_kernel(self, weights: np.ndarray, out: np.ndarray | None = None
                        ) -> np.ndarray:
        """``K_w = sum_p w_p^2 K_p`` as one matrix-vector product over the stacked kernels
        (into ``out``, C-contiguous ``(n, n)`` float64, if given)."""
        self._checking()
        if self.packed:
            return mirror_upper(self._combined_upper(weights, out))
        m, n = self.n_kernels, self.n_samples
        flat = None if out is None else out.reshape(n * n)
        return np.matmul(np.asarray(weights, dtype=np.float64) ** 2,
                         self._full.reshape(m, n * n), out=flat).reshape(n, n)

    def _combined_upper(self, weights: np.ndarray, out: np.ndarray | None = None
                        ) -> np.ndarray:
        """Packed kernels: ``K_w``'s upper triangle into ``out`` (the rest of its strict lower
        triangle left as it was), from one matrix-vector product over the packed kernels."""
        n = self.n_samples
        flat = np.matmul(np.asarray(weights, dtype=np.float64) ** 2, self._packed,
                         out=self._flat_matrix())
        return self._layout.unpack_upper(flat, np.empty((n, n)) if out is None else out)

    def _flat_matrix(self) -> np.ndarray:
        """Packed kernels: one packed n x n matrix (``K_w``, then the weights of ``H H^T``),
        kept as :meth:`_work_matrix` is."""
        if self._flat_work is None:
            self._flat_work = np.empty(self._packed.shape[1])
        return self._flat_work

    def _work_matrix(self) -> np.ndarray:
        """One n x n float64 matrix the loop's products fill in turn (K_w for the eigensolver,
        then H H^T for the quadratic forms), kept for the backend's life: a fresh n x n
        array costs its page faults every time, more than the product itself where the
        memory is new to the process (0.1-2.4 s at n = 12,000 on a 2-core VM, against 0.11 s
        for K_w's product). At most one such matrix existed at a time before, so the peak
        memory is unchanged."""
        if self._work is None:
            self._work = np.empty((self.n_samples, self.n_samples))
        return self._work

    def top_k(self, weights: np.ndarray, k: int, warm_start: TopK | None = None) -> TopK:
        previous = None if warm_start is None else warm_start.basis
        if self.packed:
            # The eigensolvers read one triangle: K_w's upper one is not mirrored.
            self._checking()
            values, vectors = top_k_dense(self._combined_upper(weights, self._work_matrix()),
                                          k, previous, method=self.eigen_method,
                                          triangle="upper")
        else:
            values, vectors = top_k_dense(self.combined_kernel(weights,
                                                               out=self._work_matrix()),
                                          k, previous, method=self.eigen_method)
        return TopK(values, vectors)

    def quad_forms(self, top: TopK) -> np.ndarray:
        H = np.asarray(top.basis, dtype=np.float64)
        # tr(H^T K_p H) = <K_p, H H^T>: one pass over the stacked kernels (a GEMV), several
        # times cheaper than m products K_p @ H for k << n (memory-bound, not compute-bound).
        if self.packed:
            return self._packed @ self._layout.outer(H, self._flat_matrix())
        m, n = self.n_kernels, self.n_samples
        outer = np.matmul(H, H.T, out=self._work_matrix())
        return self._full.reshape(m, n * n) @ outer.reshape(n * n)

    def cluster_quad_forms(self, labels: np.ndarray, n_clusters: int) -> np.ndarray:
        """As every backend's, on :meth:`compute_threads`: a fit asks for them (its inertia)
        after leaving its one-thread block, while the PSD test may still run beside it, and
        two BLAS threads then fought over the cores (0.32 s for this pass on COIL20 instead
        of 0.02 on one thread, ``benchmarks/results/exact/exact_fit.md`` at git 5969884)."""
        with local_threads(self.compute_threads()):
            return super().cluster_quad_forms(labels, n_clusters)

    def embedding(self, top: TopK) -> np.ndarray:
        self._checked()
        return self.draft_embedding(top)

    def draft_embedding(self, top: TopK) -> np.ndarray:
        self._checking()
        return np.array(top.basis)  # the caller owns (and scales) it

    def row_map(self, top: TopK) -> Any:
        """The spectral out-of-sample map through the training rows (feature input only)."""
        if self._train is None:
            return None
        from .row_map import kernel_row_map

        views, normalize = self._train
        return kernel_row_map(self.kernel_specs, normalize, views, top)
