"""The Nystrom backends: every iteration on the Gram matrix G, or in n dimensions with the
sparse local part.

With ``F = [F_1 .. F_m]`` (n x R) and ``G = F^T F`` (:mod:`.build`), every iteration of
:class:`NystromBackend` works on G alone, independent of n. With ``D_w = w_p I`` on block p,
``K_w ~ (F D_w)(F D_w)^T``, whose nonzero eigenpairs come from ``D_w G D_w v = mu v``:
``H = F B`` with ``B = D_w V diag(mu)^(-1/2)`` (so ``H^T H = B^T G B = I``), and
``tr(H^T K_p H) = ||G_{p,:} B||_F^2``. Kernels with zero weight drop out of ``D_w G D_w``, so
the eigenproblem shrinks as the weights become sparse. ``C``: ``tr(K_p K_q) ~ ||G_pq||_F^2``
(``fip``), and ``sfn`` from the same Gram matrix of kernels. A final pass reads ``F`` and forms
``H = F B``.

:class:`NystromLocalBackend` adds the sparse local part ``S_p`` (up to
``exact_dissimilarity_max_n`` rows): the iterations run on ``F D_w^2 F^T + sum_p w_p^2 S_p`` in
n dimensions (ARPACK, warm-started, F in memory) and follow the exact backend.

:func:`open_nystrom` makes either one: :func:`mkrk_dask.backends.make_backend` for
:class:`~mkrk_dask.backends.options.NystromOptions`, and :meth:`NystromBackend.from_views`.
"""

from __future__ import annotations

import shutil
import time
from typing import Any

import numpy as np
import scipy.sparse.linalg

from ...dask_session import DaskSession
from ...dissimilarity import GRAM_MEASURES, from_gram
from ...eigen import block_krylov_top_k, fix_signs, top_k_dense
from ...kernels import KernelSpec
from ...passes import (
    RowSource,
    Shared,
    blas_threads,
    client_threads,
    release_memory,
    run_pass,
)
from ...store.locations import StoreLocation
from ...store.zarr_store import read_checked
from ..base import (
    APPROXIMATION_WARNING,
    ApproximationReport,
    KernelBackend,
    TopK,
    cluster_basis,
)
from ..construction import build_on_dask, check_backend_input
from ..options import NystromOptions, make_options
from .build import NystromParts, build_nystrom
from .local import LocalBasis, LocalPart
from .model import NystromModel
from .tasks import cluster_sums_task, embed_task, labelled_embed_task, stream_embed_task

__all__ = ["NystromBackend", "NystromLocalBackend", "NystromBasis", "MISSED_FRACTION_WARNING",
           "open_nystrom"]

#: the estimator warns when the factors miss more than this share of the trace of K_w
MISSED_FRACTION_WARNING = APPROXIMATION_WARNING


class NystromBasis:
    """The H-step's basis: ``H = F @ coefficients``; ``vectors`` are the eigenvectors of
    ``D_w G D_w`` (R x k, zero outside the support) used to warm-start the next iteration."""

    def __init__(self, coefficients: np.ndarray, vectors: np.ndarray):
        self.coefficients = coefficients
        self.vectors = vectors

    def leading(self, count: int) -> NystromBasis:
        return NystromBasis(self.coefficients[:, :count], self.vectors[:, :count])


class NystromBackend(KernelBackend):
    """Nystrom factors in a Zarr store, their Gram matrix in memory; see the module docstring.

    Made by :func:`mkrk_dask.backends.make_backend` with
    :class:`~mkrk_dask.backends.options.NystromOptions` (or :meth:`from_views`). ``info``
    records the landmarks, ranks, the largest distances (and whether exact or estimated), and
    the seconds and FLOPs of every pass.
    """

    measures = GRAM_MEASURES
    #: the sparse local part (:class:`NystromLocalBackend` only)
    local: LocalPart | None = None

    def __init__(self, model: NystromModel, gram: np.ndarray, traces: np.ndarray, n_samples: int,
                 *, diag_correction: np.ndarray | None = None, diagonal_correction: bool = True,
                 exact_kernel_gram: np.ndarray | None = None, factors_array: Any = None,
                 session: DaskSession | None = None,
                 row_tasks: list[tuple[int, int]] | None = None, temp_dir: str | None = None,
                 info: dict | None = None, n_features: list[int] | None = None,
                 group: Any = None, views: list | None = None, chunk: int | None = None,
                 task_blas_threads: int | None = None):
        self.model = model
        # the data, for a final pass that computes the factors again (none stored)
        self._views = views
        self._chunk = chunk
        # BLAS threads per task in the final pass (1 where a worker runs tasks side by side:
        # more oversubscribe the cores, 1.6x slower measured on 2 cores)
        self._task_blas_threads = task_blas_threads
        self.group = group
        self.kernel_specs = model.specs
        self.gram = np.asarray(gram, dtype=np.float64)
        self._traces = np.asarray(traces, dtype=np.float64)
        self.diag_correction = (None if diag_correction is None
                                else np.asarray(diag_correction, dtype=np.float64))
        self.diagonal_correction = bool(diagonal_correction)
        self.exact_kernel_gram = (None if exact_kernel_gram is None
                                  else np.asarray(exact_kernel_gram, dtype=np.float64))
        self.n_samples = int(n_samples)
        self.n_kernels = len(model.specs)
        self.offsets = model.offsets
        self.factors_array = factors_array
        self.session = session
        self.row_tasks = row_tasks or [(0, self.n_samples)]
        self._temp_dir = temp_dir
        self.info = info or {}
        self.reused_store = bool(self.info.get("reused_store", False))
        self._kernel_gram: np.ndarray | None = None
        self.n_features = n_features

    @classmethod
    def from_views(cls, views: list, specs: list[KernelSpec], *, normalize: bool = True,
                   store: Any = None, scheduler: Any = None, random_state: Any = None,
                   **options: Any) -> NystromBackend:
        """Build (or reopen) the Nystrom store of ``views`` on Dask; ``options`` as
        :class:`~mkrk_dask.backends.options.NystromOptions`."""
        chosen = make_options("nystrom", **options)
        check_backend_input(views, specs, None)
        return open_nystrom(chosen, views=views, specs=specs, normalize=normalize, store=store,
                            scheduler=scheduler, random_state=random_state)

    # -- the five quantities --------------------------------------------------------------

    def traces(self) -> np.ndarray:
        return self._traces.copy()

    def kernel_gram(self) -> np.ndarray:
        """The estimate of ``[tr(K_p K_q)]`` that ``fip`` and ``sfn`` are computed from.

        Plain Nystrom gives ``||G_pq||_F^2 = tr(F_p F_p^T F_q F_q^T)``. Its diagonal terms
        (``i = j``) use the approximate diagonals ``s_pi = ||f_pi||^2``, which are far too
        small for a near-identity kernel (a narrow Gaussian: ``s_pi ~ 0`` off the landmarks),
        so ``tr(K_p K_q)`` of such a kernel comes out ~ r instead of ~ n. With
        ``diagonal_correction`` (default) those terms are replaced by the exact ones, i.e.
        the kernels are taken as ``F_p F_p^T + diag(K_p - F_p F_p^T)``:
        ``tr(K_p K_q) ~ ||G_pq||_F^2 + sum_i (K_p,ii K_q,ii - s_pi s_qi)``, both sums
        accumulated in the same single pass.

        When the exact ``[tr(K_p K_q)]`` was computed (``n <= exact_dissimilarity_max_n``),
        it is returned instead.
        """
        if self.exact_kernel_gram is not None:
            return self.exact_kernel_gram.copy()
        if self._kernel_gram is None:
            starts = self.offsets[:-1]
            squares = self.gram * self.gram
            kernel_gram = np.add.reduceat(np.add.reduceat(squares, starts, axis=0),
                                          starts, axis=1)
            if self.diagonal_correction and self.diag_correction is not None:
                kernel_gram = kernel_gram + self.diag_correction
            self._kernel_gram = kernel_gram
        return self._kernel_gram.copy()

    def dissimilarity(self, measure: str) -> np.ndarray:
        return from_gram(self.kernel_gram(), measure)

    def _captured(self) -> np.ndarray:
        """The trace of every kernel that the approximation represents."""
        return np.add.reduceat(np.diag(self.gram), self.offsets[:-1])

    def residual_fractions(self) -> np.ndarray:
        """The share of every kernel's trace that its factors miss, shape (m,).

        ``1 - ||F_p||_F^2 / tr(K_p)``: 0 when ``F_p F_p^T = K_p`` (every row a landmark), near
        ``1 - r_p / n`` for a near-identity kernel (a narrow Gaussian), whose local structure
        a few hundred landmarks cannot represent. With a local part, the trace of ``S_p``
        counts as represented.
        """
        traces = np.where(self._traces > 0, self._traces, 1.0)
        return np.clip(1.0 - self._captured() / traces, 0.0, 1.0)

    def missed_fraction(self, weights: np.ndarray) -> float:
        """The share of the trace of ``K_w = sum_p w_p^2 K_p`` that the factors miss.

        The H-step sees only ``sum_p w_p^2 F_p F_p^T``; the rest of ``K_w`` (this share of its
        trace) is left out. A large share means ``H``, and with it the weights and labels, can
        differ from the exact backend's (``benchmarks/bench_nystrom_paper.py`` reports it next
        to the measured differences).
        """
        w2 = np.asarray(weights, dtype=np.float64) ** 2
        total = float(w2 @ self._traces)
        if not total > 0:
            return 0.0
        return float(w2 @ (self.residual_fractions() * self._traces)) / total

    def approximation(self, weights: np.ndarray) -> ApproximationReport:
        return ApproximationReport(self.residual_fractions(), self.missed_fraction(weights),
                                   np.array(self.model.ranks))

    def _columns(self, weights: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Columns of F whose kernel has a nonzero weight, and the weight of each column."""
        weights = np.asarray(weights, dtype=np.float64)
        cols = [np.arange(self.offsets[p], self.offsets[p + 1])
                for p in range(self.n_kernels) if weights[p] != 0]
        idx = np.concatenate(cols) if cols else np.zeros(0, dtype=np.int64)
        scale = np.repeat(weights, np.diff(self.offsets))[idx]
        return idx, scale

    def max_rank(self, weights: np.ndarray) -> int:
        """The factor columns of the kernels with nonzero weight: ``K_w``'s rank at most."""
        return int(self._columns(weights)[0].size)

    def top_k(self, weights: np.ndarray, k: int, warm_start: TopK | None = None) -> TopK:
        idx, scale = self._columns(weights)
        if idx.size < k:
            raise ValueError(
                f"the kernels with nonzero weight have only {idx.size} Nystrom components, "
                f"fewer than k={k}; use more landmarks (n_landmarks)")
        # every kernel weighted (the usual case): scale G in one pass, no gather of its rows
        A = (self.gram * scale[:, None] if idx.size == self.gram.shape[0]
             else self.gram[np.ix_(idx, idx)] * scale[:, None])
        A *= scale[None, :]
        previous = None
        if warm_start is not None and isinstance(warm_start.basis, NystromBasis):
            previous = warm_start.basis.vectors[idx]
            if not np.linalg.norm(previous, axis=0).min() > 1e-3:
                previous = None
        values, vectors = top_k_dense(A, k, previous)
        _check_rank(values, k, "the combined Nystrom kernel")
        R = self.gram.shape[0]
        full = np.zeros((R, k))
        full[idx] = vectors
        B = np.zeros((R, k))
        B[idx] = scale[:, None] * vectors / np.sqrt(values)[None, :]
        return TopK(values, NystromBasis(B, full))

    def quad_forms(self, top: TopK) -> np.ndarray:
        B = top.basis.coefficients
        idx = np.flatnonzero(np.any(B != 0, axis=1))
        GB = self.gram @ B if idx.size == B.shape[0] else self.gram[:, idx] @ B[idx]
        quad = np.add.reduceat(np.einsum("ij,ij->i", GB, GB), self.offsets[:-1])
        # Nystrom never exceeds the kernel (K - F_p F_p^T is PSD), so tr(H^T K_p H) <= tr(K_p)
        # up to round-off (float32 factors); clip so that the residual is never negative.
        return np.minimum(quad, self._traces)

    def embedding(self, top: TopK) -> np.ndarray:
        """The final pass: ``H = F B`` from the stored factors, or from the data where the
        build did not store them (computed in float64, kept in the factors' dtype)."""
        t0 = time.perf_counter()
        H = self._embedding_pass(top, None, "embedding H = F B")
        self.info["seconds"]["embedding_pass"] = time.perf_counter() - t0
        return H

    def sample_embedding(self, top: TopK, rows: np.ndarray) -> np.ndarray:
        """The rows of ``H = F B`` of the boolean mask ``rows`` (in row order): one pass that
        keeps only them."""
        return self._embedding_pass(top, rows, "embedding of the sampled rows")

    def _embedding_pass(self, top: TopK, rows: np.ndarray | None, label: str) -> np.ndarray:
        """The rows of ``H = F B`` (those of the mask ``rows``, or every row), each task's
        written where its rows go."""
        B = top.basis.coefficients
        # where each task's rows start in H: the rows kept before it
        kept = None if rows is None else np.concatenate([[0], np.cumsum(rows)])
        H = np.empty((self.n_samples if kept is None else int(kept[-1]), B.shape[1]),
                     dtype=self.model.dtype)

        def combine(i: int, value: np.ndarray) -> None:
            start = self.row_tasks[i][0]
            first = start if kept is None else int(kept[start])
            H[first:first + value.shape[0]] = value

        def mask(start: int, stop: int) -> np.ndarray | None:
            return None if rows is None else rows[start:stop]

        self._check_pass()
        shared = Shared(self.session.client, B)  # sent to the workers once
        try:
            self._factor_pass(label, lambda stored, model, blocks, start, stop: (
                (embed_task, self.factors_array, start, stop, shared.ref,
                 int(self.factors_array.chunks[0]), mask(start, stop)) if stored else
                (stream_embed_task, model, blocks, start, stop, shared.ref, self._chunk,
                 mask(start, stop))), combine)
        finally:
            shared.release()
        return H

    def labelled_embedding(self, top: TopK, assign: Any, n_clusters: int,
                           sample: np.ndarray, sample_labels: np.ndarray
                           ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(H, labels, forms)`` in one pass: ``H = F B``, the labels ``assign`` gives its
        rows (those of the boolean mask ``sample`` kept as ``sample_labels``), and the
        clusters' quadratic forms of :meth:`cluster_quad_forms` from the same reading of
        the rows (the data's kernel blocks are evaluated once for all three), estimated:
        each cluster's sum of factor rows is its sampled rows' mean times its rows
        (:meth:`_cluster_forms`). Summing only the sample's rows lets the labels of every
        row be made in large calls, after their kernel blocks are gone."""
        B = top.basis.coefficients
        t0 = time.perf_counter()
        H = np.empty((self.n_samples, B.shape[1]), dtype=self.model.dtype)
        labels = np.empty(self.n_samples, dtype=np.int64)
        sums = np.zeros((n_clusters, self.gram.shape[0]))
        positions = np.flatnonzero(sample)
        sample_labels = np.asarray(sample_labels, dtype=np.int64)

        def known(start: int, stop: int) -> tuple[np.ndarray, np.ndarray]:
            lo, hi = np.searchsorted(positions, (start, stop))
            return positions[lo:hi] - start, sample_labels[lo:hi]

        def combine(i: int, value: tuple) -> None:
            start, stop = self.row_tasks[i]
            H[start:stop], labels[start:stop], part = value
            sums[...] += part

        self._check_pass()
        client = self.session.client
        shared = [Shared(client, B), Shared(client, assign)]  # sent to the workers once
        try:
            self._factor_pass("embedding, labels and cluster sums", lambda stored, model,
                              blocks, start, stop: (
                labelled_embed_task, self.factors_array if stored else None, model, blocks,
                start, stop, shared[0].ref, shared[1].ref, n_clusters,
                int(self.factors_array.chunks[0]) if stored else self._chunk,
                known(start, stop)), combine)
        finally:
            for part in shared:
                part.release()
        self.info["seconds"]["embedding_pass"] = time.perf_counter() - t0
        return H, labels, self._cluster_forms(
            sums, labels, n_clusters, np.bincount(sample_labels, minlength=n_clusters))

    def _check_pass(self) -> None:
        if self.session is None or (self.factors_array is None and self._views is None):
            raise RuntimeError("the backend is closed")

    def _factor_pass(self, label: str, task: Any, combine: Any) -> None:
        """One pass over the rows of F: ``task(stored, model, blocks, start, stop)`` gives
        the function and arguments of a row task, reading the stored factors (``stored``) or
        the data (``model`` and ``blocks``, where the build stored no factors)."""
        self._check_pass()
        client = self.session.client
        sources = ([] if self._views is None else
                   [RowSource(client, v, view=i) for i, v in enumerate(self._views)])
        model = Shared(client, self.model) if sources else None

        def submit(i: int) -> Any:
            start, stop = self.row_tasks[i]
            blocks = [s.block(start, stop) for s in sources]
            function, *args = task(not sources, model.ref if model else None, blocks, start,
                                   stop)
            return client.submit(function, *args, pure=False)

        try:
            with blas_threads(client, self._task_blas_threads):
                run_pass(client, len(self.row_tasks), submit, combine, label=label,
                         max_in_flight=client_threads(client))
        finally:
            for source in sources:
                source.release()
            if model is not None:
                model.release()
        release_memory(client)

    def cluster_quad_forms(self, labels: np.ndarray, n_clusters: int) -> np.ndarray:
        """``sum_c ||F_p^T 1_c||^2 / |c|`` for every kernel: of the Nystrom factors, one pass
        over them (or over the data where they are not stored) for ``Z^T F``. It misses
        what the factors miss of each kernel, at most ``tr(K_p - F_p F_p^T)``."""
        labels = np.asarray(labels, dtype=np.int64)
        sums = np.zeros((n_clusters, self.gram.shape[0]))

        def combine(i: int, value: np.ndarray) -> None:
            sums[...] += value

        def task(stored: bool, model: Any, blocks: list, start: int, stop: int) -> tuple:
            chunk = int(self.factors_array.chunks[0]) if stored else self._chunk
            return (cluster_sums_task, self.factors_array if stored else None, model, blocks,
                    start, stop, labels[start:stop], n_clusters, chunk)

        self._factor_pass("cluster sums Z^T F", task, combine)
        return self._cluster_forms(sums, labels, n_clusters)

    def _cluster_forms(self, sums: np.ndarray, labels: np.ndarray, n_clusters: int,
                       summed: np.ndarray | None = None) -> np.ndarray:
        """Per kernel, ``sum_c ||F_p^T 1_c||^2 / |c|`` from the cluster sums ``Z^T F``;
        where they are sums of a sample's rows only (``summed``: the sampled rows of each
        cluster), from the estimates ``|c| / summed_c`` times them."""
        counts = np.maximum(np.bincount(labels, minlength=n_clusters), 1)
        if summed is not None:
            sums = sums * (counts / np.maximum(summed, 1))[:, None]
        scaled = sums / np.sqrt(counts)[:, None]
        quad = np.add.reduceat(np.einsum("ij,ij->j", scaled, scaled), self.offsets[:-1])
        return np.minimum(quad, self._traces)

    def loop_checkpoint(self, key: str) -> Any:
        from ...store.checkpoints import LoopCheckpoint

        if self._temp_dir is not None or self.group is None:
            return None
        return LoopCheckpoint(self.group, key)

    def encode_top(self, top: TopK) -> tuple[str, dict[str, np.ndarray]]:
        b = top.basis
        return "nystrom", {"eigenvalues": top.eigenvalues, "coefficients": b.coefficients,
                           "vectors": b.vectors}

    def decode_top(self, kind: str, arrays: dict[str, np.ndarray]) -> TopK:
        return TopK(arrays["eigenvalues"], NystromBasis(arrays["coefficients"],
                                                        arrays["vectors"]))

    def _row_map_parts(self, top: TopK) -> tuple[np.ndarray, dict | None]:
        """The coefficients ``B`` of the row map (and its local part, if any)."""
        return np.array(top.basis.coefficients), None

    def row_map(self, top: TopK) -> NystromModel:
        """A copy of the row map carrying the coefficients ``B`` of ``top`` (for predict)."""
        m = self.model
        coefficients, local = self._row_map_parts(top)
        return NystromModel(specs=list(m.specs), normalize=m.normalize,
                            landmarks=dict(m.landmarks), kernel_landmarks=list(m.kernel_landmarks),
                            transforms=list(m.transforms), dtype=m.dtype,
                            factor_layout=m.factor_layout,
                            coefficients=coefficients, local=local,
                            n_features=list(self.n_features or m.n_features),
                            info=dict(self.info))

    def close(self) -> None:
        if self.session is not None:
            self.session.close()
            self.session = None
        if self._temp_dir is not None:
            shutil.rmtree(self._temp_dir, ignore_errors=True)
            self._temp_dir = None
            self.factors_array = None
        self._views = None


#: from this many eigenpairs on, the local backend's top_k uses block Krylov products instead
#: of ARPACK (at n = 10^4 and R = 6,256, measured: ARPACK is faster at k <= 20, block Krylov
#: 1.8x at k = 40 and 3x at k = 80)
_BLOCK_KRYLOV_MIN_K = 32


class NystromLocalBackend(NystromBackend):
    """Nystrom factors plus the sparse local part: ``K_p ~ F_p F_p^T + S_p``, iterations in
    n dimensions (n <= ``exact_dissimilarity_max_n``)."""

    def __init__(self, model: NystromModel, gram: np.ndarray, traces: np.ndarray, n_samples: int,
                 *, local: LocalPart, train_views: list, **kwargs: Any):
        super().__init__(model, gram, traces, n_samples, **kwargs)
        self.local = local
        self._train_views = train_views
        self._factors_in_memory: np.ndarray | None = None

    def _captured(self) -> np.ndarray:
        return super()._captured() + self.local.traces()

    def max_rank(self, weights: np.ndarray) -> int:
        return self.n_samples  # the local part makes K_w full rank

    def _factors(self) -> np.ndarray:
        """F in memory, in float64: ARPACK multiplies by float64 vectors, and a float32 F
        would be upcast (copied) in every product."""
        if self._factors_in_memory is None:
            if self.factors_array is None:
                raise RuntimeError("the backend is closed")
            self._factors_in_memory = read_checked(self.factors_array, (Ellipsis,))
        return self._factors_in_memory

    def top_k(self, weights: np.ndarray, k: int, warm_start: TopK | None = None) -> TopK:
        """Top-k of ``sum_p w_p^2 (F_p F_p^T + S_p)`` in n dimensions (ARPACK, warm-started;
        block Krylov for many eigenpairs without a warm start, ARPACK if that fails to
        converge)."""
        n = self.n_samples
        F = self._factors()
        col_w2 = np.repeat(np.asarray(weights, dtype=np.float64) ** 2, np.diff(self.offsets))
        S = self.local.combined(weights)

        def apply(V: np.ndarray) -> np.ndarray:
            return F @ (col_w2.reshape((-1,) + (1,) * (V.ndim - 1)) * (F.T @ V)) + S @ V

        if n <= 500 or 3 * k >= n:
            A = (F * col_w2) @ F.T + S.toarray()
            values, vectors = top_k_dense(0.5 * (A + A.T), k, method="lapack")
            return self._local_top(values, vectors, weights, k)
        if k >= _BLOCK_KRYLOV_MIN_K and warm_start is None:
            # Many eigenpairs (the final step's ranks): ARPACK's single-vector products read
            # F once per Lanczos vector; block products use it at matrix-product speed.
            values, vectors, info = block_krylov_top_k(apply, n, k, depth=8, tol=1e-10)
            if info["converged"]:
                return self._local_top(values, vectors, weights, k)
        operator = scipy.sparse.linalg.LinearOperator((n, n), matvec=apply, matmat=apply,
                                                      dtype=np.float64)
        # A fixed start without a warm one: ARPACK's own random start depends on what ran
        # before in the process, and a resumed fit must repeat the same steps.
        v0 = (warm_start.basis.embedding.sum(axis=1)
              if warm_start is not None and isinstance(warm_start.basis, LocalBasis)
              else np.ones(n))
        values, vectors = scipy.sparse.linalg.eigsh(operator, k=k, which="LA", v0=v0, tol=1e-12)
        order = np.argsort(values)[::-1]
        return self._local_top(values[order], fix_signs(vectors[:, order]), weights, k)

    @staticmethod
    def _local_top(values: np.ndarray, vectors: np.ndarray, weights: np.ndarray, k: int
                   ) -> TopK:
        _check_rank(values, k, "the combined kernel")
        return TopK(values, LocalBasis(vectors, np.asarray(weights, dtype=np.float64)))

    def encode_top(self, top: TopK) -> tuple[str, dict[str, np.ndarray]]:
        return "local", {"eigenvalues": top.eigenvalues, "embedding": top.basis.embedding,
                         "weights": top.basis.weights}

    def decode_top(self, kind: str, arrays: dict[str, np.ndarray]) -> TopK:
        return TopK(arrays["eigenvalues"], LocalBasis(arrays["embedding"], arrays["weights"]))

    def quad_forms(self, top: TopK) -> np.ndarray:
        H = top.basis.embedding
        FH = self._factors().T @ H
        quad = (np.add.reduceat(np.einsum("ij,ij->i", FH, FH), self.offsets[:-1])
                + self.local.quad_forms(H))
        return np.minimum(quad, self._traces)

    # all in memory: H, and the clusters' forms, without a pass
    sample_embedding = KernelBackend.sample_embedding
    labelled_embedding = KernelBackend.labelled_embedding

    def cluster_quad_forms(self, labels: np.ndarray, n_clusters: int) -> np.ndarray:
        """Of the factors in memory and the local part (:meth:`quad_forms`): no pass."""
        basis = cluster_basis(labels, n_clusters)
        return self.quad_forms(TopK(np.ones(n_clusters), LocalBasis(basis, np.ones(
            self.n_kernels))))

    def embedding(self, top: TopK) -> np.ndarray:
        return np.array(top.basis.embedding, dtype=self.model.dtype)  # as F B's would be

    def _row_map_parts(self, top: TopK) -> tuple[np.ndarray, dict]:
        """A new point's row of H extends the eigenvector equation,
        ``h(x) = sum_p w_p^2 (f_p(x) F_p^T H + s_p(x)^T H) / mu``, which gives H back on the
        training rows: ``B`` holds the factor part, and the map keeps the training rows,
        ``H / mu`` and the weights for the local part ``s_p(x)``."""
        H = top.basis.embedding
        w2 = top.basis.weights ** 2
        scaled = H / top.eigenvalues[None, :]
        coefficients = np.repeat(w2, np.diff(self.offsets))[:, None] * (
            self._factors().T @ scaled)
        # A kernel left out of the local part has S_p = 0 in the fit, so none in the map
        # either (else a training row would not get its row of H back).
        left_out = set((self.info.get("local_part") or {}).get("left_out", []))
        has_local = np.array([spec.name not in left_out for spec in self.model.specs])
        local = {"views": self._train_views, "threshold": self.local.threshold,
                 "weights2": w2 * has_local, "scaled_embedding": scaled}
        return coefficients, local

    def close(self) -> None:
        super().close()
        self._factors_in_memory = None


def open_nystrom(options: NystromOptions, *, views: list, specs: list[KernelSpec],
                 normalize: bool = True, store: Any = None, storage_options: dict | None = None,
                 scheduler: Any = None, random_state: Any = None) -> NystromBackend:
    """Build (or reopen) the Nystrom store of ``views`` (with ``specs``) on Dask
    (:func:`~.build.build_nystrom`) and return the backend on it: a
    :class:`NystromLocalBackend` where the kernels have a sparse local part, else a
    :class:`NystromBackend` (the inputs already checked)."""
    def build(location: StoreLocation | None, session: DaskSession) -> NystromBackend:
        parts = build_nystrom(views, specs, options, normalize=normalize, location=location,
                              session=session, random_state=random_state)
        try:
            return _backend_on(parts)
        except BaseException:
            temp_dir = parts.backend_kwargs.get("temp_dir")
            if temp_dir is not None:
                shutil.rmtree(temp_dir, ignore_errors=True)
            raise

    return build_on_dask(build, views=views, store=store, storage_options=storage_options,
                         scheduler=scheduler)


def _backend_on(parts: NystromParts) -> NystromBackend:
    """The backend on what :func:`~.build.build_nystrom` built."""
    if parts.local is not None:
        backend: NystromBackend = NystromLocalBackend(
            parts.model, parts.gram, parts.traces, parts.n_samples, local=parts.local,
            train_views=parts.train_views, **parts.backend_kwargs)
    else:
        backend = NystromBackend(parts.model, parts.gram, parts.traces, parts.n_samples,
                                 **parts.backend_kwargs)
    backend.info["residual_fraction"] = backend.residual_fractions().tolist()
    return backend


def _check_rank(values: np.ndarray, k: int, what: str) -> None:
    if not values[-1] > 1e-12 * max(values[0], 1e-300):
        raise ValueError(f"{what} has rank < k={k} (eigenvalue {values[-1]:.3g}); use more "
                         "landmarks or fewer clusters")
