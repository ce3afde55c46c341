"""Nystrom backend: MKKM-RK on millions of samples through one pass over the data.

Every base kernel is approximated from ``r_p`` landmarks (rows of the data, see
:mod:`mkrk_dask.landmarks`)::

    K_p ~ F_p F_p^T,   F_p = K_p(X, L_p) U_p diag(lambda_p)^(-1/2)     (n x r_p')

where ``W_p = K_p(L_p, L_p) = U_p diag(lambda_p) U_p^T`` with eigenvalues below a relative floor
dropped (``r_p' <= r_p``). With ``F = [F_1 .. F_m]`` (n x R, ``R = sum r_p'``):

- ONE distributed pass over row chunks of the data computes ``F`` (written to a Zarr store,
  chunked by rows), the Gram matrix ``G = F^T F`` (R x R) and the EXACT traces (the sum of the
  kernel diagonal, ``n`` after normalisation; ``||F_p||_F^2`` would be biased low and tilts the
  weights towards the local Gaussian kernels, see DESIGN.md).
- Every iteration then works on G alone, independent of n. With ``D_w = w_p I`` on block p,
  ``K_w ~ (F D_w)(F D_w)^T``, whose nonzero eigenpairs come from ``D_w G D_w v = mu v``:
  ``H = F B`` with ``B = D_w V diag(mu)^(-1/2)`` (so ``H^T H = B^T G B = I``), and
  ``tr(H^T K_p H) = ||F_p^T F B||_F^2 = ||G_{p,:} B||_F^2``. Kernels with zero weight drop out
  of ``D_w G D_w``, so the eigenproblem shrinks as the weights become sparse.
- ``C``: ``tr(K_p K_q) ~ ||F_p^T F_q||_F^2 = ||G_pq||_F^2`` (``fip``), and ``sfn`` from the same
  Gram matrix of kernels (``||K_p||_F^2 ~ ||G_pp||_F^2``).
- A final pass reads ``F`` and forms ``H = F B`` (n x k) for the labels.

Up to ``exact_dissimilarity_max_n`` rows (default 20,000), a pass over row-block pairs of the
data computes C exactly and a sparse LOCAL PART ``S_p`` of every kernel: the entries of
``K_p - F_p F_p^T`` of magnitude ``>= local_threshold`` (:class:`LocalPart`). The
narrow Gaussians are nearly identity matrices that no few-hundred-landmark factor holds, and
the exact solution depends on their values between nearby rows. With
``K_p ~ F_p F_p^T + S_p``, the iterations run in n dimensions (ARPACK, F in memory) and follow
the exact backend (``benchmarks/bench_nystrom_paper.py``).

New points map through the same landmarks and transforms (:class:`NystromModel`), which is
what ``MKKMRK.predict`` / ``transform`` use.

Gaussian kernels with relative widths need the largest pairwise distance ``M`` of their view.
It is computed exactly on the workers (``O(n^2 d)``, row-block pairs) up to
``exact_distance_max_n`` rows (default 100,000); above, it is ESTIMATED as the largest of (a)
the exact maximum over a uniform sample of 4096 rows and (b) two farthest-point passes over
all rows (from a sample point to its farthest row q, then from q to its farthest row); the
estimate is a lower bound of M and at least M/2 (in practice within a few percent). Which was
used is recorded in ``backend.info["scales"]``.
"""

from __future__ import annotations

import math
import shutil
import tempfile
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp
import scipy.sparse.linalg
from sklearn.utils import check_random_state

from ..cluster import DaskSession
from ..dissimilarity import GRAM_MEASURES, from_gram
from ..eigen import fix_signs, top_k_dense
from ..kernels import (
    KernelSpec,
    block_max_sq_distance,
    inner_products,
    kernel_blocks,
    kernel_diagonal,
    resolve_kernels,
    row_sq_norms,
    views_needing_scale,
)
from ..landmarks import DEFAULT_REL_FLOOR, landmark_transform, select_landmarks, take_rows
from ..solver import unit_rows
from .base import KernelBackend, TopK

__all__ = ["NystromBackend", "NystromModel", "NystromBasis", "STORE_KIND",
           "factor_chunk_rows", "NystromApproximationWarning", "MISSED_FRACTION_WARNING"]

STORE_KIND = "nystrom"
#: rows per pair block of the exact largest-distance computation
_DISTANCE_BLOCK = 4096
#: rows of the uniform sample of the estimated largest distance
_DISTANCE_SAMPLE = 4096
#: target bytes of one factor chunk (rows x R)
_CHUNK_BYTES = 32 * 2**20
#: rows per block of the exact kernel Gram pass (m blocks of this squared, in float64)
_KERNEL_GRAM_BLOCK = 1024
#: default largest n for which tr(K_p K_q) (hence C) is computed exactly
EXACT_DISSIMILARITY_MAX_N = 20_000
#: the estimator warns when the factors miss more than this share of the trace of K_w
MISSED_FRACTION_WARNING = 0.05
#: default smallest residual entry |K_p - F_p F_p^T|_ij kept in the sparse local part
LOCAL_THRESHOLD = 0.01
#: the local part is dropped (with a warning) above this many entries per row and kernel
LOCAL_MAX_PER_ROW = 64


class NystromApproximationWarning(UserWarning):
    """The Nystrom factors leave out a large share of the learned combined kernel."""


# -- the picklable map from rows to factors ---------------------------------------------------


@dataclass
class NystromModel:
    """Everything needed to map rows of the data to Nystrom factors (and, once fitted, to the
    embedding H and the learned clusters). Small: landmarks and ``r x r'`` transforms.

    Attributes
    ----------
    specs : list of KernelSpec
        Resolved kernels.
    normalize : bool
    landmarks : dict view -> ndarray (r_v, d)
        Landmark rows of every view (dense).
    kernel_landmarks : list of int
        ``r_p``: kernel p uses the first ``r_p`` landmarks of its view.
    transforms : list of ndarray
        ``T_p = U_p diag(lambda_p)^(-1/2)``, shape ``(r_p, r_p')``.
    dtype : numpy dtype
        Storage dtype of the factors (float64 or float32).
    coefficients : ndarray (R, k) or None
        ``B`` with ``H = F B`` (set after a fit).
    centres : ndarray (k, k) or None
        Cluster centres of the unit-length rows of H (set after a fit).
    local : dict or None
        Fitted with a local part (:class:`LocalPart`): the training rows (``"views"``), the
        ``"threshold"``, the squared weights (``"weights2"``) and ``H / mu``
        (``"scaled_embedding"``), for the local term of :meth:`transform`.
    """

    specs: list[KernelSpec]
    normalize: bool
    landmarks: dict[int, np.ndarray]
    kernel_landmarks: list[int]
    transforms: list[np.ndarray]
    dtype: Any = np.float64
    coefficients: np.ndarray | None = None
    centres: np.ndarray | None = None
    n_features: list[int | None] | None = None
    chunk_rows: int = 4096
    n_labels_polished: int = 0
    local: dict | None = field(default=None, repr=False)
    info: dict = field(default_factory=dict, repr=False)
    _landmark_sq: dict[int, np.ndarray] = field(default_factory=dict, repr=False)
    _train_factors: np.ndarray | None = field(default=None, repr=False)

    def __getstate__(self) -> dict:
        # The training rows' factors are a cache, recomputed on demand.
        return {**self.__dict__, "_train_factors": None}

    def __post_init__(self) -> None:
        self.dtype = np.dtype(self.dtype)
        self._landmark_sq = {v: row_sq_norms(L) for v, L in self.landmarks.items()}
        if self.n_features is None:
            n_views = max(self.landmarks) + 1
            self.n_features = [int(self.landmarks[v].shape[1]) if v in self.landmarks else None
                               for v in range(n_views)]

    @property
    def landmarks_dims(self) -> list[int | None]:
        """Features of every view (None for a view no kernel reads)."""
        return list(self.n_features)

    @property
    def ranks(self) -> np.ndarray:
        """``r_p'``: factor columns of every kernel."""
        return np.array([T.shape[1] for T in self.transforms], dtype=np.int64)

    @property
    def offsets(self) -> np.ndarray:
        """Column offsets of the kernels' blocks in F (length m + 1)."""
        return np.concatenate([[0], np.cumsum(self.ranks)]).astype(np.int64)

    @property
    def n_components(self) -> int:
        """R, the columns of F."""
        return int(self.ranks.sum())

    def factors(self, views: Sequence[Any], sq_norms: np.ndarray | None = None,
                out: np.ndarray | None = None) -> np.ndarray:
        """``F`` for the given rows (one array per view, same rows), in ``self.dtype``.

        ``sq_norms``: an optional ``(n_rows, m)`` float64 array that receives the Nystrom
        diagonals ``||f_pi||^2``, taken from each block in float64 before any cast (cheaper
        than squaring all of F afterwards). ``out``: an optional ``(n_rows, R)`` buffer to
        fill (a pass reuses one, instead of mapping fresh pages for every chunk).
        """
        n = views[0].shape[0]
        offsets = self.offsets
        if out is None:
            out = np.empty((n, self.n_components), dtype=self.dtype)
        for view in sorted(self.landmarks):
            idx = [p for p, s in enumerate(self.specs) if s.view == view]
            X = views[view]
            if not sp.issparse(X):
                X = np.asarray(X, dtype=np.float64)
            blocks = kernel_blocks([self.specs[p] for p in idx], X, self.landmarks[view],
                                   row_sq_norms(X), self._landmark_sq[view],
                                   normalize=self.normalize)
            for j, p in enumerate(idx):
                r = self.kernel_landmarks[p]
                block = blocks[j][:, :r] @ self.transforms[p]
                if sq_norms is not None:
                    sq_norms[:, p] = np.einsum("ij,ij->i", block, block)
                out[:, offsets[p]:offsets[p + 1]] = block
        return out

    def diagonal(self, views: Sequence[Any]) -> np.ndarray:
        """Exact ``K_p(x_i, x_i)`` of the given rows, shape (n_rows, m)."""
        n = views[0].shape[0]
        if self.normalize:
            return np.ones((n, len(self.specs)))
        return np.stack([kernel_diagonal(spec, row_sq_norms(views[spec.view]))
                         for spec in self.specs], axis=1)

    def transform(self, views: Sequence[Any]) -> np.ndarray:
        """``H`` rows of new points: ``F(x) B`` (as in the fit: factors in ``self.dtype``)."""
        if self.coefficients is None:
            raise ValueError("this Nystrom model has no coefficients yet (not fitted)")
        H = embed_rows(self.factors(views), self.coefficients)
        if self.local is not None:
            H += self._local_term(views)
        return H

    def _local_term(self, views: Sequence[Any]) -> np.ndarray:
        """``sum_p w_p^2 s_p(x)^T H / mu``: the residual entries of the rows against the
        training rows, kept where ``|K_p(x, x_j) - f_p(x) f_p(x_j)| >= threshold`` (the rule of
        the fit, so the training rows get their rows of H back)."""
        local = self.local
        train = local["views"]
        if self._train_factors is None:
            self._train_factors = self.factors(train).astype(np.float64, copy=False)
        F_train = self._train_factors
        scaled = local["scaled_embedding"]
        n_rows, n_train = views[0].shape[0], F_train.shape[0]
        active = [p for p, w2 in enumerate(local["weights2"]) if w2 > 0]
        offsets = self.offsets
        out = np.zeros((n_rows, scaled.shape[1]))
        # Bounded memory: the kernel blocks of a step are about 256 MiB.
        step = max(1, 2**25 // (n_train * max(1, len(active))))
        for a in range(0, n_rows, step):
            part = [v if v is None else v[a:a + step] for v in views]
            F_new = self.factors(part).astype(np.float64, copy=False)
            for view in sorted(self.landmarks):
                idx = [p for p in active if self.specs[p].view == view]
                if not idx:
                    continue
                X = part[view] if sp.issparse(part[view]) else np.asarray(part[view],
                                                                         dtype=np.float64)
                blocks = kernel_blocks([self.specs[p] for p in idx], X, train[view],
                                       normalize=self.normalize)
                for j, p in enumerate(idx):
                    cols = slice(offsets[p], offsets[p + 1])
                    residual, keep = _local_residual(blocks[j], F_new[:, cols], F_train[:, cols],
                                                    local["threshold"])
                    residual[~keep] = 0.0
                    out[a:a + step] += local["weights2"][p] * (residual @ scaled)
        return out

    def predict(self, views: Sequence[Any]) -> np.ndarray:
        """Nearest learned centre of the unit-length rows of ``transform(views)``."""
        if self.centres is None:
            raise ValueError("this Nystrom model has no cluster centres yet (not fitted)")
        return nearest_centre(unit_rows(self.transform(views)), self.centres)

    def transform_chunked(self, views: Sequence[Any]) -> np.ndarray:
        """:meth:`transform` by blocks of ``chunk_rows`` rows (bounded memory)."""
        n = views[0].shape[0]
        if self.coefficients is None:
            raise ValueError("this Nystrom model has no coefficients yet (not fitted)")
        out = np.empty((n, self.coefficients.shape[1]))
        for a in range(0, n, self.chunk_rows):
            out[a:a + self.chunk_rows] = self.transform([v[a:a + self.chunk_rows]
                                                         for v in views])
        return out

    def predict_chunked(self, views: Sequence[Any]) -> np.ndarray:
        """:meth:`predict` by blocks of ``chunk_rows`` rows (bounded memory)."""
        if self.centres is None:
            raise ValueError("this Nystrom model has no cluster centres yet (not fitted)")
        return nearest_centre(unit_rows(self.transform_chunked(views)), self.centres)


def embed_rows(F: np.ndarray, B: np.ndarray) -> np.ndarray:
    """``F B`` in float64 (the same arithmetic in the fit's final pass and in ``transform``)."""
    return np.asarray(F, dtype=np.float64) @ B


def nearest_centre(U: np.ndarray, centres: np.ndarray) -> np.ndarray:
    """Index of the nearest centre of every row."""
    sq = (np.einsum("ij,ij->i", centres, centres)[None, :] - 2.0 * U @ centres.T)
    return np.argmin(sq, axis=1).astype(np.int64)


def lloyd_centres(U: np.ndarray, labels: np.ndarray, n_clusters: int, max_iter: int = 300
                  ) -> tuple[np.ndarray, np.ndarray, int]:
    """Centres as the means of ``labels``, polished by Lloyd steps to a fixed point.

    At a fixed point every row's label is its nearest centre, so that ``predict`` on the
    training rows gives back the labels. Returns ``(centres, labels, n_changed)``.
    """
    labels = np.asarray(labels, dtype=np.int64)
    original = labels.copy()
    centres = np.zeros((n_clusters, U.shape[1]))
    for _ in range(max_iter):
        for j in range(n_clusters):
            members = labels == j
            if members.any():
                centres[j] = U[members].mean(axis=0)
        new = nearest_centre(U, centres)
        if np.array_equal(new, labels):
            break
        labels = new
    return centres, labels, int(np.sum(labels != original))


# -- row access on the cluster ----------------------------------------------------------------


def _rows(obj: Any, start: int | None, stop: int | None) -> Any:
    """Rows ``start:stop`` of a numpy / sparse / Zarr array (``start is None``: all of obj)."""
    if start is None:
        block = obj
    else:
        block = obj[start:stop]
    if sp.issparse(block):
        return sp.csr_matrix(block, dtype=np.float64)
    return np.asarray(block, dtype=np.float64)


class _ViewRows:
    """Access to the rows of one view from tasks: numpy and sparse inputs are scattered once,
    Zarr arrays are read by the tasks, dask arrays are computed block by block on demand."""

    def __init__(self, client: Any, X: Any):
        self.X = X
        self.kind = ("dask" if hasattr(X, "dask") and hasattr(X, "compute")
                     else "zarr" if hasattr(X, "get_orthogonal_selection")
                     else "memory")
        if self.kind == "memory":
            if not sp.issparse(X):
                X = np.asarray(X)
            # hash=False: a unique key, never shared with (and released by) another backend
            # that scattered the same data on the same client.
            [self.ref] = client.scatter([X], hash=False)
        else:
            self.ref = X

    def block(self, client: Any, start: int, stop: int) -> tuple[Any, Any, Any]:
        """A task argument that :func:`_rows` turns into the rows ``start:stop``."""
        if self.kind == "dask":
            return (client.compute(self.X[start:stop]), None, None)
        return (self.ref, start, stop)


def _stream(client: Any, n_tasks: int, submit: Callable[[int], Any],
            combine: Callable[[int, Any], None], max_in_flight: int) -> None:
    """Submit tasks ``0..n_tasks-1`` keeping at most ``max_in_flight`` running, and combine
    each result on the client as it arrives (bounded memory whatever n is)."""
    from distributed import as_completed

    pending = iter(range(n_tasks))
    index: dict[str, int] = {}
    queue = as_completed()

    def launch() -> None:
        i = next(pending, None)
        if i is not None:
            future = submit(i)
            index[future.key] = i
            queue.add(future)

    for _ in range(min(max_in_flight, n_tasks)):
        launch()
    for future in queue:
        combine(index.pop(future.key), future.result())
        future.release()
        launch()


# -- tasks ------------------------------------------------------------------------------------


def _factor_task(model: NystromModel, blocks: list, start: int, stop: int, chunk: int,
                 factors_array: Any, blas_threads: int | None) -> dict[str, Any]:
    """Rows ``start:stop``: factors (written to the store chunk by chunk), their Gram matrix
    (accumulated in float64) and the exact diagonal sums."""
    from threadpoolctl import threadpool_limits

    views = [_rows(*b) for b in blocks]
    R = model.n_components
    m = len(model.specs)
    gram = np.zeros((R, R))
    diag = np.zeros(m)
    exact_diag_products = np.zeros((m, m))
    nystrom_diag_products = np.zeros((m, m))
    seconds = {"factors": 0.0, "write": 0.0, "gram": 0.0}
    # One factor buffer for all chunks of the task: a chunk's factors are ~32 MiB, above
    # glibc's largest mmap threshold, so a fresh array would map (and fault) new pages
    # every time.
    buffer = np.empty((min(chunk, stop - start), R), dtype=model.dtype)
    with threadpool_limits(limits=blas_threads):
        for a in range(0, stop - start, chunk):
            b = min(a + chunk, stop - start)
            part = [v[a:b] for v in views]
            t0 = time.perf_counter()
            # Diagonals of K_p and of F_p F_p^T (the latter: squared row norms per block).
            nys = np.empty((b - a, m))
            F = model.factors(part, sq_norms=nys, out=buffer[:b - a])
            kappa = model.diagonal(part)
            diag += kappa.sum(axis=0)
            exact_diag_products += kappa.T @ kappa
            nystrom_diag_products += nys.T @ nys
            t1 = time.perf_counter()
            if factors_array is not None:
                factors_array[start + a:start + b] = F
            t2 = time.perf_counter()
            gram += F.T @ F
            t3 = time.perf_counter()
            seconds["factors"] += t1 - t0
            seconds["write"] += t2 - t1
            seconds["gram"] += t3 - t2
    return {"gram": gram, "diag": diag, "exact_diag_products": exact_diag_products,
            "nystrom_diag_products": nystrom_diag_products, "seconds": seconds}


def _embed_task(factors_array: Any, start: int, stop: int, B: np.ndarray,
                chunk: int) -> np.ndarray:
    """``F B`` for rows ``start:stop``, read one Zarr chunk at a time (bounded memory)."""
    out = np.empty((stop - start, B.shape[1]))
    for a in range(start, stop, chunk):
        b = min(a + chunk, stop)
        out[a - start:b - start] = embed_rows(np.asarray(factors_array[a:b]), B)
    return out


def _farthest_task(X: Any, start: Any, stop: Any, point: np.ndarray, point_sq: float
                   ) -> tuple[float, np.ndarray]:
    rows = _rows(X, start, stop)
    sq = np.maximum(row_sq_norms(rows) + point_sq
                    - 2.0 * inner_products(rows, point[None, :]).ravel(), 0.0)
    i = int(np.argmax(sq))
    row = rows[i].toarray().ravel() if sp.issparse(rows) else np.asarray(rows[i]).ravel()
    return float(sq[i]), row


def _pair_max_task(a: tuple, b: tuple, same: bool) -> float:
    """Largest squared distance between two row blocks."""
    rows_a = _rows(*a)
    return block_max_sq_distance(rows_a, rows_a if same else _rows(*b))


def _kernel_gram_pair_task(block_a: tuple, block_b: tuple, same: bool, specs: list[KernelSpec],
                           normalize: bool, blas_threads: int | None,
                           local: tuple[Any, np.ndarray, float, np.ndarray] | None = None
                           ) -> tuple:
    """``sum_{i in A, j in B} K_p(i, j) K_q(i, j)`` for every pair of kernels (m x m), doubled
    for an off-diagonal block pair (the kernels are symmetric).

    A block is ``(first row, {view: rows})``. With ``local = (factors, offsets, threshold,
    kernels)`` (the factor store, its kernels' column offsets, and the indices of the kernels
    that get a local part), also the entries of those residuals ``K_p - F_p F_p^T`` of
    magnitude ``>= threshold`` with row <= column (global indices):
    ``(rows, columns, kernels, values)``; else None.
    """
    from threadpoolctl import threadpool_limits

    (start_a, views_a), (start_b, views_b) = block_a, block_b
    Xa = {v: _rows(*b) for v, b in views_a.items()}
    Xb = Xa if same else {v: _rows(*b) for v, b in views_b.items()}
    n_a, n_b = next(iter(Xa.values())).shape[0], next(iter(Xb.values())).shape[0]
    stacked = np.empty((len(specs), n_a * n_b))
    entries = None
    with threadpool_limits(limits=blas_threads):
        for view in Xa:
            idx = [p for p, s in enumerate(specs) if s.view == view]
            stacked[idx] = kernel_blocks([specs[p] for p in idx], Xa[view], Xb[view],
                                         normalize=normalize).reshape(len(idx), -1)
        products = stacked @ stacked.T
        if local is not None:
            entries = _residual_entries(*local, stacked, (n_a, n_b), same, start_a, start_b)
    return (products if same else 2.0 * products), entries


def _local_residual(kernel_block: np.ndarray, Fa: np.ndarray, Fb: np.ndarray, threshold: float
                   ) -> tuple[np.ndarray, np.ndarray]:
    """``K_p(A, B) - F_p(A) F_p(B)^T`` and where it is kept in the local part (``>= threshold``
    in magnitude): the one rule of the fit and of new rows, so that the training rows get
    their own entries back."""
    residual = kernel_block - Fa @ Fb.T
    return residual, np.abs(residual) >= threshold


def _residual_entries(factors: Any, offsets: np.ndarray, threshold: float, kernels: np.ndarray,
                      stacked: np.ndarray, shape: tuple[int, int], same: bool, start_a: int,
                      start_b: int) -> tuple:
    """Entries ``>= threshold`` in magnitude of ``K_p(A, B) - F_p(A) F_p(B)^T``, row <= column;
    the factor rows are read from the store the factor pass wrote (the ones the fit uses)."""
    n_a, n_b = shape
    Fa = np.asarray(factors[start_a:start_a + n_a], dtype=np.float64)
    Fb = Fa if same else np.asarray(factors[start_b:start_b + n_b], dtype=np.float64)
    found: list[tuple] = [_NO_ENTRIES]
    for p in kernels:
        cols = slice(offsets[p], offsets[p + 1])
        residual, mask = _local_residual(stacked[p].reshape(n_a, n_b), Fa[:, cols], Fb[:, cols],
                                        threshold)
        if same:
            mask = np.triu(mask)
        i, j = np.nonzero(mask)
        found.append((i + start_a, j + start_b, np.full(i.size, p, dtype=np.int32),
                      residual[i, j]))
    return tuple(np.concatenate(parts) for parts in zip(*found, strict=True))


# -- the backend ------------------------------------------------------------------------------


@dataclass
class NystromBasis:
    """The H-step's basis: ``H = F @ coefficients``; ``vectors`` are the eigenvectors of
    ``D_w G D_w`` (R x k, zero outside the support) used to warm-start the next iteration."""

    coefficients: np.ndarray
    vectors: np.ndarray


@dataclass
class LocalBasis:
    """The H-step's basis when the kernels have a local part: ``H`` itself (n x k), and the
    weights it was computed for."""

    embedding: np.ndarray
    weights: np.ndarray


@dataclass
class LocalPart:
    """The sparse local part of the kernels, ``K_p ~ F_p F_p^T + S_p``.

    ``S_p`` holds the entries of the residual ``K_p - F_p F_p^T`` of magnitude at least
    ``threshold``: for a narrow Gaussian, the pairs of nearby rows. A few hundred landmarks
    cannot represent that local structure, and the exact solution depends on it; with it, the
    Nystrom backend follows the exact one (``benchmarks/bench_nystrom_variants.py``,
    ``benchmarks/bench_nystrom_paper.py``). It is collected in the block-pair pass of the
    exact C, so only up to ``exact_dissimilarity_max_n`` rows.

    Attributes
    ----------
    kernels : list of scipy.sparse.csr_matrix
        ``S_p``, symmetric n x n, one per kernel.
    threshold : float
    """

    kernels: list[sp.csr_matrix]
    threshold: float

    @classmethod
    def from_entries(cls, entries: tuple, n: int, m: int, threshold: float) -> LocalPart:
        """From ``(rows, columns, kernels, values)`` of the upper triangles (row <= column)."""
        rows, cols, kernel, values = entries
        mats = []
        for p in range(m):
            sel = kernel == p
            upper = sp.csr_matrix((values[sel], (rows[sel], cols[sel])), shape=(n, n))
            mats.append((upper + upper.T - sp.diags(upper.diagonal())).tocsr())
        return cls(mats, float(threshold))

    def entries(self) -> tuple:
        """The upper triangles as ``(rows, columns, kernels, values)`` (what the store keeps)."""
        parts = []
        for p, S in enumerate(self.kernels):
            upper = sp.triu(S).tocoo()
            parts.append((upper.row.astype(np.int64), upper.col.astype(np.int64),
                          np.full(upper.nnz, p, dtype=np.int32), upper.data))
        return tuple(np.concatenate(c) for c in zip(*parts, strict=True))

    def nonzeros_per_row(self) -> np.ndarray:
        """Average stored entries per row of every ``S_p``."""
        return np.array([S.nnz / S.shape[0] for S in self.kernels])

    def traces(self) -> np.ndarray:
        return np.array([S.diagonal().sum() for S in self.kernels])

    def combined(self, weights: np.ndarray) -> sp.csr_matrix:
        """``sum_p w_p^2 S_p``."""
        n = self.kernels[0].shape[0]
        out = sp.csr_matrix((n, n))
        for w, S in zip(np.asarray(weights, dtype=np.float64), self.kernels, strict=True):
            if w != 0 and S.nnz:
                out = out + (w * w) * S
        return out.tocsr()

    def quad_forms(self, H: np.ndarray) -> np.ndarray:
        """``tr(H^T S_p H)`` for every kernel."""
        return np.array([float(np.sum(H * (S @ H))) if S.nnz else 0.0 for S in self.kernels])


def _check_dtype(dtype: Any) -> np.dtype:
    dtype = np.dtype(dtype)
    if dtype not in (np.dtype(np.float64), np.dtype(np.float32)):
        raise ValueError(f"dtype must be float64 or float32, got {dtype}")
    return dtype


def _landmark_counts(n_landmarks: Any, m: int, n: int) -> list[int]:
    if np.ndim(n_landmarks) == 0:
        counts = [n_landmarks] * m
    else:
        counts = list(n_landmarks)
        if len(counts) != m:
            raise ValueError(f"n_landmarks has {len(counts)} entries for {m} kernels")
    out = []
    for value in counts:
        if isinstance(value, bool) or int(value) != value or value < 1:
            raise ValueError(f"n_landmarks must be positive integers, got {value!r}")
        out.append(min(int(value), n))
    return out


class NystromBackend(KernelBackend):
    """Nystrom factors in a Zarr store, their Gram matrix in memory; see the module docstring.

    Build with :meth:`from_views`. ``info`` records the landmarks, ranks, the largest distances
    (and whether exact or estimated), and the seconds and FLOPs of every pass.
    """

    measures = GRAM_MEASURES

    def __init__(self, model: NystromModel, gram: np.ndarray, traces: np.ndarray, n_samples: int,
                 *, diag_correction: np.ndarray | None = None, diagonal_correction: bool = True,
                 exact_kernel_gram: np.ndarray | None = None, local: LocalPart | None = None,
                 factors_array: Any = None, session: DaskSession | None = None,
                 row_tasks: list[tuple[int, int]] | None = None, temp_dir: str | None = None,
                 info: dict | None = None):
        self.model = model
        self.kernel_specs = model.specs
        self.gram = np.asarray(gram, dtype=np.float64)
        self._traces = np.asarray(traces, dtype=np.float64)
        self.diag_correction = (None if diag_correction is None
                                else np.asarray(diag_correction, dtype=np.float64))
        self.diagonal_correction = bool(diagonal_correction)
        self.exact_kernel_gram = (None if exact_kernel_gram is None
                                  else np.asarray(exact_kernel_gram, dtype=np.float64))
        self.local = local
        self._factors_in_memory: np.ndarray | None = None
        self._local_views: list | None = None
        self.n_samples = int(n_samples)
        self.n_kernels = len(model.specs)
        self.offsets = model.offsets
        self.factors_array = factors_array
        self.session = session
        self.row_tasks = row_tasks or [(0, self.n_samples)]
        self._temp_dir = temp_dir
        self.info = info or {}
        self._kernel_gram: np.ndarray | None = None
        self.n_features: list[int] | None = None

    # -- construction ---------------------------------------------------------------------

    @classmethod
    def from_views(
        cls, views: Sequence[Any], specs: Sequence[KernelSpec], *, normalize: bool = True,
        store: Any = None, scheduler: Any = None, chunk_size: int | None = None,
        dtype: Any = "float64", n_landmarks: Any = 500, landmarks: str = "kmeans++",
        random_state: Any = None, rel_floor: float = DEFAULT_REL_FLOOR,
        exact_distance_max_n: int = 100_000, overwrite: bool = False,
        blas_threads: int | None = None, diagonal_correction: bool = True,
        exact_dissimilarity_max_n: int = EXACT_DISSIMILARITY_MAX_N,
        local_threshold: float = LOCAL_THRESHOLD,
    ) -> NystromBackend:
        """Select landmarks, run the factor + Gram pass on Dask (or reuse a complete store).

        Parameters
        ----------
        views : list of arrays
            One per view, same rows: numpy, scipy sparse, dask or Zarr arrays.
        specs : list of KernelSpec
        normalize : bool
        store : path, optional
            Zarr store for the factors; a complete store built from the same data and
            settings is reused (its landmarks, Gram matrix and traces are loaded, no pass).
            Default: a temporary store deleted by :meth:`close`.
        scheduler : None, address or distributed.Client
        chunk_size : int, optional
            Rows per Zarr chunk of the factors (default: about 32 MiB per chunk).
        dtype : {"float64", "float32"}
            Storage dtype of the factors (and of the Gram products per chunk; the Gram matrix
            is accumulated in float64).
        n_landmarks : int or sequence of int
            Landmarks per kernel (capped at n).
        landmarks : {"kmeans++", "uniform"}
        random_state : int, RandomState or None
            Seeds the landmark selection (and the distance sample).
        rel_floor : float
            Relative eigenvalue floor of the landmark blocks (:func:`landmark_transform`).
        exact_distance_max_n : int
            Largest n for which the largest pairwise distance is computed exactly.
        overwrite : bool
            Rebuild ``store`` even if it exists.
        blas_threads : int, optional
            BLAS threads inside each task. Default: 1 when a worker runs several threads
            (its tasks already run in parallel; more BLAS threads would oversubscribe the
            cores; ``benchmarks/bench_scale.py`` records the pass's task seconds), else
            BLAS's own setting.
        diagonal_correction : bool
            Estimate ``tr(K_p K_q)`` with the EXACT diagonal (see :meth:`kernel_gram`);
            False gives the plain ``||G_pq||_F^2``.
        exact_dissimilarity_max_n : int
            Up to this n, ``tr(K_p K_q)`` (hence C) is computed EXACTLY on the workers, by
            row-block pairs from the data (``O(n^2 (d + m^2))``, timed in
            ``info["seconds"]["exact_kernel_gram"]``);
            above, it is estimated from the Gram matrix. The Nystrom estimate of C is the
            largest source of weight error at moderate lambda (measured by
            ``benchmarks/bench_nystrom_paper.py``); which was used is
            ``backend.info["dissimilarity_source"]``.
        local_threshold : float
            Up to ``exact_dissimilarity_max_n`` rows, the same pass also keeps every entry of
            the residuals ``K_p - F_p F_p^T`` of magnitude ``>= local_threshold`` as a sparse
            local part (:class:`LocalPart`), and the iterations use ``F_p F_p^T + S_p``: the
            narrow Gaussians' near pairs, which the factors miss and the exact solution
            depends on (``benchmarks/bench_nystrom_paper.py``). The H-step is then
            n-dimensional (the factors are held in memory), and the fitted row map keeps the
            training rows for ``predict``. 0 turns it off. A kernel whose residual has more
            than ``LOCAL_MAX_PER_ROW`` such entries per row gets none, with a warning.
            ``info["local_part"]`` records the part's size and the kernels left out.
        """
        specs = list(specs)
        dtype = _check_dtype(dtype)
        if not (np.isfinite(local_threshold) and local_threshold >= 0):
            raise ValueError(f"local_threshold must be a finite number >= 0, got "
                             f"{local_threshold!r}")
        n = int(views[0].shape[0])
        if any(int(v.shape[0]) != n for v in views):
            raise ValueError("all views must have the same number of rows")
        counts = _landmark_counts(n_landmarks, len(specs), n)
        n_features = [int(v.shape[1]) for v in views]
        info: dict[str, Any] = {"n_samples": n, "seconds": {}}
        session = DaskSession(scheduler)
        temp_dir = None
        try:
            client = session.client
            threads = sum(client.nthreads().values()) or 1
            rows = [_ViewRows(client, v) for v in views]
            from ..store import (
                create_store,
                data_fingerprint,
                load_result,
                mark_complete,
                open_complete_store,
                save_result,
            )

            if store is None:
                temp_dir = tempfile.mkdtemp(prefix="mkrk-nystrom-")
                path = Path(temp_dir) / "factors.zarr"
                expected = None
            else:
                path = Path(store)
                expected = {
                    "fingerprint": data_fingerprint(list(views)), "n_samples": n,
                    "kernels": [s.to_dict() for s in specs], "normalize": bool(normalize),
                    "dtype": dtype.name, "n_landmarks": counts, "landmarks": str(landmarks),
                    "random_state": random_state if isinstance(random_state, int) else None,
                    "rel_floor": float(rel_floor),
                    "exact_distance_max_n": int(exact_distance_max_n),
                    "exact_dissimilarity_max_n": int(exact_dissimilarity_max_n),
                    "local_threshold": float(local_threshold)}
            group = None
            if expected is not None and not overwrite:
                group = open_complete_store(path, kind=STORE_KIND, expected=expected)
            if group is not None:
                model, gram, traces, correction, meta = _load_model(group, load_result)
                exact_kernel_gram = load_result(group, "exact_kernel_gram")
                local = _load_local(group, load_result, n, len(model.specs))
                stored = load_result(group, "local_left_out")
                left_out = [] if stored is None else stored.tolist()
                info.update(meta)
                info["reused_store"] = True
                chunk = int(group["factors"].chunks[0])
                factors_array = group["factors"]
            else:
                info["reused_store"] = False
                t0 = time.perf_counter()
                scales = _view_scales(client, rows, specs, n, exact_distance_max_n,
                                      random_state, threads)
                info["seconds"]["scales"] = time.perf_counter() - t0
                info["scales"] = scales
                distances = [scales[v]["value"] if v in scales else 0.0
                             for v in range(len(views))]
                resolved = resolve_kernels(specs, distances)
                t0 = time.perf_counter()
                model, landmark_idx = _build_model(views, resolved, normalize, counts,
                                                   landmarks, random_state, rel_floor, dtype)
                info["seconds"]["landmarks"] = time.perf_counter() - t0
                R = model.n_components
                chunk = int(chunk_size or factor_chunk_rows(n, R, dtype))
                meta = {"resolved_kernels": [s.to_dict() for s in resolved],
                        "scales": {str(k): v for k, v in scales.items()},
                        "ranks": model.ranks.tolist(), "chunk_size": chunk}
                group = create_store(path, kind=STORE_KIND, metadata={**(expected or {}),
                                                                      **meta},
                                     overwrite=overwrite or store is None)
                for v, L in model.landmarks.items():
                    _save_array(group, f"landmarks_{v}", L)
                    _save_array(group, f"landmark_indices_{v}", landmark_idx[v])
                for p, T in enumerate(model.transforms):
                    _save_array(group, f"transform_{p}", T)
                factors_array = group.create_array(
                    "factors", shape=(n, R), chunks=(chunk, R), dtype=dtype, compressors=None,
                    overwrite=True)
                tasks = _row_tasks(n, chunk, threads)
                t0 = time.perf_counter()
                gram, traces, correction, seconds = _factor_pass(client, rows, model, tasks, chunk,
                                                     factors_array, threads, blas_threads)
                elapsed = time.perf_counter() - t0
                info["seconds"]["gram_pass"] = elapsed
                info["gram_pass"] = {
                    "seconds": elapsed, "flops": 2.0 * n * R * R,
                    "gflops_per_s": 2.0 * n * R * R / elapsed / 1e9,
                    "task_seconds": seconds}
                exact_kernel_gram = local = None
                left_out: list[int] = []
                if n <= exact_dissimilarity_max_n:
                    t0 = time.perf_counter()
                    exact_kernel_gram, local, left_out = _exact_kernel_gram(
                        client, rows, model, n, threads, blas_threads, local_threshold,
                        factors_array)
                    info["seconds"]["exact_kernel_gram"] = time.perf_counter() - t0
                    save_result(group, "exact_kernel_gram", exact_kernel_gram)
                    if local is not None:
                        for name, value in zip(_LOCAL_RESULTS, local.entries(), strict=True):
                            save_result(group, name, value)
                    save_result(group, "local_left_out", np.array(left_out, dtype=np.int64))
                    if left_out:
                        names = ", ".join(specs[p].name for p in left_out)
                        warnings.warn(
                            f"the Nystrom residuals of {names} have more than "
                            f"{LOCAL_MAX_PER_ROW} entries >= {local_threshold:g} per row; these "
                            "kernels get no local part (raise local_threshold, or give them "
                            "more landmarks)", NystromApproximationWarning, stacklevel=2)
                save_result(group, "gram", gram)
                save_result(group, "traces", traces)
                save_result(group, "diag_correction", correction)
                mark_complete(group)
                info.update(meta)
            info["chunk_size"] = chunk
            info["n_components"] = model.n_components
            info["store"] = str(path)
            info["dissimilarity_source"] = "nystrom" if exact_kernel_gram is None else "exact"
            info["local_part"] = (None if local is None else {
                "threshold": local.threshold,
                "nonzeros_per_row": local.nonzeros_per_row().round(2).tolist(),
                "left_out": [specs[p].name for p in left_out]})
            backend = cls(model, gram, traces, n, diag_correction=correction,
                          diagonal_correction=diagonal_correction,
                          exact_kernel_gram=exact_kernel_gram, local=local,
                          factors_array=factors_array,
                          session=session, row_tasks=_row_tasks(n, chunk, threads),
                          temp_dir=temp_dir, info=info)
            backend.n_features = n_features
            if local is not None:
                # predict/transform need the training rows for the local part
                backend._local_views = [_rows(v, 0, n) for v in views]
            backend.info["residual_fraction"] = backend.residual_fractions().tolist()
            return backend
        except BaseException:
            session.close()
            if temp_dir is not None:
                shutil.rmtree(temp_dir, ignore_errors=True)
            raise

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

    def residual_fractions(self) -> np.ndarray:
        """The share of every kernel's trace that its factors miss, shape (m,).

        ``1 - ||F_p||_F^2 / tr(K_p)``: 0 when ``F_p F_p^T = K_p`` (every row a landmark), near
        ``1 - r_p / n`` for a near-identity kernel (a narrow Gaussian), whose local structure
        a few hundred landmarks cannot represent. With a local part, the trace of ``S_p``
        counts as represented.
        """
        captured = np.add.reduceat(np.diag(self.gram), self.offsets[:-1])
        if self.local is not None:
            captured = captured + self.local.traces()
        traces = np.where(self._traces > 0, self._traces, 1.0)
        return np.clip(1.0 - captured / traces, 0.0, 1.0)

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

    def _columns(self, weights: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Columns of F whose kernel has a nonzero weight, and the weight of each column."""
        weights = np.asarray(weights, dtype=np.float64)
        cols = [np.arange(self.offsets[p], self.offsets[p + 1])
                for p in range(self.n_kernels) if weights[p] != 0]
        idx = np.concatenate(cols) if cols else np.zeros(0, dtype=np.int64)
        scale = np.repeat(weights, np.diff(self.offsets))[idx]
        return idx, scale

    def top_k(self, weights: np.ndarray, k: int, warm_start: TopK | None = None) -> TopK:
        if self.local is not None:
            return self._top_k_local(weights, k, warm_start)
        idx, scale = self._columns(weights)
        if idx.size < k:
            raise ValueError(
                f"the kernels with nonzero weight have only {idx.size} Nystrom components, "
                f"fewer than k={k}; use more landmarks (n_landmarks)")
        A = self.gram[np.ix_(idx, idx)]
        A *= scale[:, None]
        A *= scale[None, :]
        previous = None
        if warm_start is not None and isinstance(warm_start.basis, NystromBasis):
            previous = warm_start.basis.vectors[idx]
            if not np.linalg.norm(previous, axis=0).min() > 1e-3:
                previous = None
        values, vectors = top_k_dense(A, k, previous)
        if not values[-1] > 1e-12 * max(values[0], 1e-300):
            raise ValueError(
                f"the combined Nystrom kernel has rank < k={k} (eigenvalue {values[-1]:.3g}); "
                "use more landmarks or fewer clusters")
        R = self.gram.shape[0]
        full = np.zeros((R, k))
        full[idx] = vectors
        B = np.zeros((R, k))
        B[idx] = scale[:, None] * vectors / np.sqrt(values)[None, :]
        return TopK(values, NystromBasis(B, full))

    def _factors(self) -> np.ndarray:
        """F in memory (the local part's n-dimensional H-step; n <= exact_dissimilarity_max_n)."""
        if self._factors_in_memory is None:
            if self.factors_array is None:
                raise RuntimeError("the backend is closed")
            # float64: ARPACK multiplies by float64 vectors, and a float32 F would be upcast
            # (copied) in every product.
            self._factors_in_memory = np.asarray(self.factors_array[...], dtype=np.float64)
        return self._factors_in_memory

    def _top_k_local(self, weights: np.ndarray, k: int, warm_start: TopK | None) -> TopK:
        """Top-k of ``sum_p w_p^2 (F_p F_p^T + S_p)`` in n dimensions (ARPACK, warm-started)."""
        n = self.n_samples
        F = self._factors()
        col_w2 = np.repeat(np.asarray(weights, dtype=np.float64) ** 2, np.diff(self.offsets))
        S = self.local.combined(weights)
        if n <= 500 or 3 * k >= n:
            A = (F * col_w2) @ F.T + S.toarray()
            values, vectors = top_k_dense(0.5 * (A + A.T), k, method="lapack")
        else:
            def apply(V: np.ndarray) -> np.ndarray:
                return F @ (col_w2.reshape((-1,) + (1,) * (V.ndim - 1)) * (F.T @ V)) + S @ V

            operator = scipy.sparse.linalg.LinearOperator((n, n), matvec=apply, matmat=apply,
                                                          dtype=np.float64)
            v0 = (warm_start.basis.embedding.sum(axis=1)
                  if warm_start is not None and isinstance(warm_start.basis, LocalBasis)
                  else None)
            values, vectors = scipy.sparse.linalg.eigsh(operator, k=k, which="LA", v0=v0,
                                                        tol=1e-12)
            order = np.argsort(values)[::-1]
            values, vectors = values[order], fix_signs(vectors[:, order])
        if not values[-1] > 1e-12 * max(values[0], 1e-300):
            raise ValueError(
                f"the combined kernel has rank < k={k} (eigenvalue {values[-1]:.3g}); use more "
                "landmarks or fewer clusters")
        return TopK(values, LocalBasis(vectors, np.asarray(weights, dtype=np.float64)))

    def quad_forms(self, top: TopK) -> np.ndarray:
        if isinstance(top.basis, LocalBasis):
            H = top.basis.embedding
            FH = self._factors().T @ H
            quad = (np.add.reduceat(np.einsum("ij,ij->i", FH, FH), self.offsets[:-1])
                    + self.local.quad_forms(H))
            return np.minimum(quad, self._traces)
        B = top.basis.coefficients
        idx = np.flatnonzero(np.any(B != 0, axis=1))
        GB = self.gram[:, idx] @ B[idx]
        quad = np.add.reduceat(np.einsum("ij,ij->i", GB, GB), self.offsets[:-1])
        # Nystrom never exceeds the kernel (K - F_p F_p^T is PSD), so tr(H^T K_p H) <= tr(K_p)
        # up to round-off (float32 factors); clip so that the residual is never negative.
        return np.minimum(quad, self._traces)

    def embedding(self, top: TopK) -> np.ndarray:
        """The final pass: ``H = F B`` from the stored factors (H itself with a local part)."""
        if isinstance(top.basis, LocalBasis):
            return np.array(top.basis.embedding)
        B = top.basis.coefficients
        H = np.empty((self.n_samples, B.shape[1]))
        t0 = time.perf_counter()
        if self.session is None or self.factors_array is None:
            raise RuntimeError("the backend is closed")
        client = self.session.client
        [B_ref] = client.scatter([B], broadcast=True, hash=False)

        def submit(i: int) -> Any:
            start, stop = self.row_tasks[i]
            return client.submit(_embed_task, self.factors_array, start, stop, B_ref,
                                 int(self.factors_array.chunks[0]), pure=False)

        def combine(i: int, value: np.ndarray) -> None:
            start, stop = self.row_tasks[i]
            H[start:stop] = value

        threads = sum(client.nthreads().values()) or 1
        _stream(client, len(self.row_tasks), submit, combine, threads)
        self.info["seconds"]["embedding_pass"] = time.perf_counter() - t0
        return H

    def fitted_model(self, top: TopK) -> NystromModel:
        """A copy of the row map carrying the coefficients ``B`` of ``top`` (for predict).

        With a local part, a new point's row of H extends the eigenvector equation,
        ``h(x) = sum_p w_p^2 (f_p(x) F_p^T H + s_p(x)^T H) / mu``, which gives H back on the
        training rows: ``B`` holds the factor part, and the model keeps the training rows,
        ``H / mu`` and the weights for the local part ``s_p(x)``.
        """
        m = self.model
        local = None
        if isinstance(top.basis, LocalBasis):
            H = top.basis.embedding
            w2 = top.basis.weights ** 2
            scaled = H / top.eigenvalues[None, :]
            coefficients = np.repeat(w2, np.diff(self.offsets))[:, None] * (
                self._factors().T @ scaled)
            local = {"views": self._local_views, "threshold": self.local.threshold,
                     "weights2": w2, "scaled_embedding": scaled}
        else:
            coefficients = np.array(top.basis.coefficients)
        return NystromModel(specs=list(m.specs), normalize=m.normalize,
                            landmarks=dict(m.landmarks), kernel_landmarks=list(m.kernel_landmarks),
                            transforms=list(m.transforms), dtype=m.dtype,
                            coefficients=coefficients, local=local,
                            n_features=list(self.n_features), info=dict(self.info))

    def close(self) -> None:
        if self.session is not None:
            self.session.close()
            self.session = None
        if self._temp_dir is not None:
            shutil.rmtree(self._temp_dir, ignore_errors=True)
            self._temp_dir = None
            self.factors_array = None
        self._factors_in_memory = None


# -- helpers of from_views --------------------------------------------------------------------


def _row_tasks(n: int, chunk: int, threads: int) -> list[tuple[int, int]]:
    """Row ranges of the tasks: whole chunks, about 4 tasks per thread (each task returns one
    R x R Gram matrix, so fewer, larger tasks mean less to add up)."""
    n_chunks = -(-n // chunk)
    per_task = max(1, -(-n_chunks // (4 * threads)))
    step = per_task * chunk
    return [(a, min(a + step, n)) for a in range(0, n, step)]


def factor_chunk_rows(n: int, n_components: int, dtype: Any) -> int:
    """Default rows per factor chunk: about 32 MiB of ``n_components`` columns (at least 256
    rows, at most n)."""
    return max(256, min(n, _CHUNK_BYTES // (n_components * np.dtype(dtype).itemsize)))


def _task_blas_threads(client: Any, requested: int | None) -> int | None:
    """BLAS threads per task: as requested, else 1 when a worker runs several task threads
    (more would oversubscribe its cores), else BLAS's own setting."""
    if requested is None and max(client.nthreads().values(), default=1) > 1:
        return 1
    return requested


def _exact_kernel_gram(client: Any, rows: list[_ViewRows], model: NystromModel, n: int,
                       threads: int, blas_threads: int | None, local_threshold: float = 0.0,
                       factors_array: Any = None
                       ) -> tuple[np.ndarray, LocalPart | None, list[int]]:
    """``[tr(K_p K_q)]`` exactly, from the data by row-block pairs on the workers; with
    ``local_threshold > 0``, also the sparse local part (:class:`LocalPart`) from the same
    pairs and the stored factors.

    A kernel whose residual has more than ``LOCAL_MAX_PER_ROW`` entries per row gets no local
    part (``S_p = 0``); their indices are the third value. Each kernel's count is estimated
    first, from the first block (its entries per row, scaled by n over the block's rows,
    assuming neighbours spread evenly), so that a hopeless kernel costs one block pair; then it
    is counted over all pairs.
    """
    blas_threads = _task_blas_threads(client, blas_threads)
    views = sorted({s.view for s in model.specs})
    m = len(model.specs)
    # Dask inputs: every block is computed once and held (n <= exact_dissimilarity_max_n).
    blocks = [(a, {v: rows[v].block(client, a, min(a + _KERNEL_GRAM_BLOCK, n)) for v in views})
              for a in range(0, n, _KERNEL_GRAM_BLOCK)]
    [specs_ref] = client.scatter([list(model.specs)], broadcast=True, hash=False)
    cap = LOCAL_MAX_PER_ROW * n
    dropped = np.zeros(m, dtype=bool)
    local = first = None
    if local_threshold > 0:
        everything = (factors_array, model.offsets, float(local_threshold), np.arange(m))
        first = client.submit(_kernel_gram_pair_task, blocks[0], blocks[0], True, specs_ref,
                              model.normalize, blas_threads, everything, pure=False).result()
        rows_first = min(_KERNEL_GRAM_BLOCK, n)
        kernels_first = first[1][2]
        both = (np.bincount(kernels_first, minlength=m) * 2
                - np.bincount(kernels_first[first[1][0] == first[1][1]], minlength=m))
        dropped = both / rows_first * (n / rows_first) > cap / n
        if not dropped.all():
            [local] = client.scatter([(factors_array, model.offsets, float(local_threshold),
                                       np.flatnonzero(~dropped))], broadcast=True, hash=False)
    total = np.zeros((m, m))
    found: list[tuple] = []
    count = np.zeros(m)

    def combine(value: tuple) -> None:
        total[...] += value[0]
        if value[1] is None:
            return
        rows_, cols_, kernel = value[1][:3]
        # both triangles, the diagonal once
        count[...] += (2 * np.bincount(kernel, minlength=m)
                       - np.bincount(kernel[rows_ == cols_], minlength=m))
        dropped[...] |= count > cap
        keep = ~dropped[value[1][2]]
        found.append(tuple(a[keep] for a in value[1]))

    if first is not None:
        combine(first)  # entries of kernels dropped by the estimate are filtered out there
    _stream_block_pairs(client, blocks, _kernel_gram_pair_task,
                        (specs_ref, model.normalize, blas_threads, local), combine, threads,
                        skip_first=first is not None)
    part = None
    if local is not None and not dropped.all():
        entries = tuple(np.concatenate(c) for c in zip(_NO_ENTRIES, *found, strict=True))
        keep = ~dropped[entries[2]]  # entries collected before their kernel was dropped
        if keep.any():  # an empty local part would only make the iterations n-dimensional
            part = LocalPart.from_entries(tuple(a[keep] for a in entries), n, m,
                                          float(local_threshold))
    return (0.5 * (total + total.T), part,
            np.flatnonzero(dropped).tolist() if local_threshold > 0 else [])


def _factor_pass(client: Any, rows: list[_ViewRows], model: NystromModel,
                 tasks: list[tuple[int, int]], chunk: int, factors_array: Any, threads: int,
                 blas_threads: int | None
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray, dict]:
    R, m = model.n_components, len(model.specs)
    blas_threads = _task_blas_threads(client, blas_threads)
    gram = np.zeros((R, R))
    diag = np.zeros(m)
    correction = np.zeros((m, m))
    seconds = {"factors": 0.0, "write": 0.0, "gram": 0.0}
    [model_ref] = client.scatter([model], broadcast=True, hash=False)

    def submit(i: int) -> Any:
        start, stop = tasks[i]
        blocks = [r.block(client, start, stop) for r in rows]
        return client.submit(_factor_task, model_ref, blocks, start, stop, chunk,
                             factors_array, blas_threads, pure=False)

    def combine(i: int, value: dict) -> None:
        nonlocal gram, diag, correction
        gram += value["gram"]
        diag += value["diag"]
        correction += value["exact_diag_products"] - value["nystrom_diag_products"]
        for key, s in value["seconds"].items():
            seconds[key] += s

    _stream(client, len(tasks), submit, combine, max(2, threads))
    gram = 0.5 * (gram + gram.T)
    return gram, diag, 0.5 * (correction + correction.T), seconds


def _build_model(views: Sequence[Any], specs: list[KernelSpec], normalize: bool,
                 counts: list[int], method: str, random_state: Any, rel_floor: float,
                 dtype: np.dtype) -> tuple[NystromModel, dict[int, np.ndarray]]:
    rng = check_random_state(random_state)
    landmarks: dict[int, np.ndarray] = {}
    indices: dict[int, np.ndarray] = {}
    transforms: list[np.ndarray | None] = [None] * len(specs)
    for view in sorted({s.view for s in specs}):
        idx = [p for p, s in enumerate(specs) if s.view == view]
        r = max(counts[p] for p in idx)
        chosen = select_landmarks(views[view], r, method, rng)
        L = take_rows(views[view], chosen)
        L = L.toarray() if sp.issparse(L) else np.asarray(L, dtype=np.float64)
        landmarks[view] = L
        indices[view] = chosen
        sq = row_sq_norms(L)
        W = kernel_blocks([specs[p] for p in idx], L, L, sq, sq, normalize=normalize)
        for j, p in enumerate(idx):
            rp = counts[p]
            T, _ = landmark_transform(W[j][:rp, :rp], rel_floor)
            if T.shape[1] == 0:
                raise ValueError(f"kernel {specs[p].name}: the landmark block is zero")
            transforms[p] = T
    model = NystromModel(specs=specs, normalize=normalize, landmarks=landmarks,
                         kernel_landmarks=counts, transforms=transforms, dtype=dtype)
    return model, indices


_LOCAL_RESULTS = ("local_rows", "local_columns", "local_kernels", "local_values")
_NO_ENTRIES = (np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int32), np.zeros(0))


def _load_local(group: Any, load_result: Callable, n: int, m: int) -> LocalPart | None:
    """The local part of a complete store, if it was built with one."""
    threshold = float(group.attrs.asdict().get("local_threshold", 0.0))
    entries = [load_result(group, name) for name in _LOCAL_RESULTS]
    if threshold <= 0 or any(e is None for e in entries):
        return None
    return LocalPart.from_entries(tuple(entries), n, m, threshold)


def _save_array(group: Any, name: str, value: np.ndarray) -> None:
    value = np.asarray(value)
    array = group.create_array(name, shape=value.shape, dtype=value.dtype,
                               chunks=value.shape, compressors=None, overwrite=True)
    array[...] = value


def _load_model(group: Any, load_result: Callable
                ) -> tuple[NystromModel, np.ndarray, np.ndarray, np.ndarray, dict]:
    attrs = group.attrs.asdict()
    specs = [KernelSpec(**d) for d in attrs["resolved_kernels"]]
    landmarks = {v: np.asarray(group[f"landmarks_{v}"][...])
                 for v in sorted({s.view for s in specs})}
    transforms = [np.asarray(group[f"transform_{p}"][...]) for p in range(len(specs))]
    model = NystromModel(specs=specs, normalize=attrs["normalize"], landmarks=landmarks,
                         kernel_landmarks=list(attrs["n_landmarks"]), transforms=transforms,
                         dtype=attrs["dtype"])
    gram, traces = load_result(group, "gram"), load_result(group, "traces")
    correction = load_result(group, "diag_correction")
    if gram is None or traces is None or correction is None:
        from ..store import StoreError

        raise StoreError(f"{group.store} is complete but lacks its Gram matrix; rebuild it")
    meta = {k: attrs[k] for k in ("resolved_kernels", "scales", "ranks", "chunk_size")}
    return model, gram, traces, correction, meta


def _view_scales(client: Any, rows: list[_ViewRows], specs: list[KernelSpec], n: int,
                 exact_max_n: int, random_state: Any, threads: int) -> dict[int, dict]:
    """The largest pairwise distance of every view that has a relative Gaussian."""
    out = {}
    rng = check_random_state(random_state)
    for view in sorted(views_needing_scale(specs)):
        if n <= exact_max_n:
            out[view] = {"value": _exact_max_distance(client, rows[view], n, threads),
                         "method": "exact"}
        else:
            out[view] = _estimated_max_distance(client, rows[view], n, threads, rng)
    return out


def _stream_block_pairs(client: Any, blocks: list, task: Callable, args: tuple,
                        combine: Callable[[Any], None], threads: int,
                        skip_first: bool = False) -> None:
    """``task(blocks[i], blocks[j], i == j, *args)`` on the workers for every pair ``i <= j``
    of row blocks, each result passed to ``combine`` as it arrives (bounded memory).
    ``skip_first``: leave out the pair (0, 0), which the caller has already combined."""
    pairs = [(i, j) for i in range(len(blocks)) for j in range(i, len(blocks))]
    pairs = pairs[1:] if skip_first else pairs

    def submit(t: int) -> Any:
        i, j = pairs[t]
        return client.submit(task, blocks[i], blocks[j], i == j, *args, pure=False)

    _stream(client, len(pairs), submit, lambda _, value: combine(value), 2 * threads)


def _exact_max_distance(client: Any, rows: _ViewRows, n: int, threads: int) -> float:
    # Dask inputs: every block is computed once and held (n <= exact_distance_max_n).
    blocks = [rows.block(client, a, min(a + _DISTANCE_BLOCK, n))
              for a in range(0, n, _DISTANCE_BLOCK)]
    best = [0.0]

    def combine(value: float) -> None:
        best[0] = max(best[0], value)

    _stream_block_pairs(client, blocks, _pair_max_task, (), combine, threads)
    return math.sqrt(max(best[0], 0.0))


def _estimated_max_distance(client: Any, rows: _ViewRows, n: int, threads: int,
                            rng: np.random.RandomState) -> dict:
    sample_idx = np.sort(rng.choice(n, size=min(_DISTANCE_SAMPLE, n), replace=False))
    sample = take_rows(rows.X, sample_idx)
    sample = sample.toarray() if sp.issparse(sample) else np.asarray(sample, dtype=np.float64)
    sq = row_sq_norms(sample)
    d2 = sq[:, None] + sq[None, :] - 2.0 * sample @ sample.T
    i, _ = np.unravel_index(np.argmax(d2), d2.shape)
    sample_max = math.sqrt(max(float(d2.max()), 0.0))
    point = sample[i]
    tasks = [(a, min(a + 65536, n)) for a in range(0, n, 65536)]
    passes = []
    for _ in range(2):
        best: list[Any] = [-1.0, None]

        def submit(t: int, point: np.ndarray = point) -> Any:
            a, b = tasks[t]
            return client.submit(_farthest_task, *rows.block(client, a, b), point,
                                 float(point @ point), pure=False)

        def combine(_: int, value: tuple, best: list = best) -> None:
            if value[0] > best[0]:
                best[0], best[1] = value

        _stream(client, len(tasks), submit, combine, 2 * threads)
        passes.append(math.sqrt(max(best[0], 0.0)))
        point = best[1]
    value = max(sample_max, *passes)
    return {"value": value, "method": "estimate", "sample_rows": int(sample_idx.size),
            "sample_max": sample_max, "farthest_point_passes": passes,
            "lower_bound": value, "upper_bound": 2.0 * max(passes)}
