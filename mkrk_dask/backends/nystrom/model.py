"""The picklable Nystrom row map: from rows of the data to factors and to the embedding.

Every base kernel is approximated from ``r_p`` landmarks (rows of the data)::

    K_p ~ F_p F_p^T,   F_p = K_p(X, L_p) U_p diag(lambda_p)^(-1/2)     (n x r_p')

where ``W_p = K_p(L_p, L_p) = U_p diag(lambda_p) U_p^T`` with eigenvalues below a relative floor
dropped (``r_p' <= r_p``). New points map through the same landmarks and transforms, which is
what ``MKKMRK.predict`` / ``transform`` use.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import scipy.sparse as sp

from ...assignment import nearest_centre
from ...kernels import KernelSpec, kernel_blocks, kernel_diagonal, row_sq_norms
from .local import local_residual

__all__ = ["NystromModel", "embed_rows", "FACTOR_BLOCK_ROWS", "FLOAT32_PRODUCT_MIN_EIGENVALUE"]

#: rows of the kernel blocks evaluated at once by :meth:`NystromModel.factors`: at 500
#: landmarks a block of 512 rows is 2 MiB in float64, so the several elementwise passes of a
#: kernel's evaluation (distances, scaling, exp, normalisation) run in cache; with 4,096 rows
#: (16 MiB) each pass went to memory, and a factor chunk took 20-30% longer (measured on 4
#: views x 3 kernels x 500 landmarks, R = 2,048, one and two threads)
FACTOR_BLOCK_ROWS = 512
#: float32 factors: the columns of ``T_p`` whose eigenvalue is at least this share of the
#: kernel's largest are multiplied in float32 (twice the rate of float64). The error of a
#: float32 product in column k is about eps_32 sqrt(lambda_max / lambda_k) of a factor row's
#: norm, so at most 100 eps_32 (1e-5) here; the weaker columns, where it would grow to swamp
#: the column itself, stay in float64
FLOAT32_PRODUCT_MIN_EIGENVALUE = 1e-4


def _in_memory(rows: Any, view: int) -> Any:
    """A block of new rows in memory (dask and Zarr blocks are read here), finite."""
    if sp.issparse(rows):
        return rows
    block = np.asarray(rows.compute() if hasattr(rows, "compute") else rows, dtype=np.float64)
    if not np.isfinite(block).all():
        raise ValueError(f"view {view}: the new rows contain NaN or infinity")
    return block


def embed_rows(F: np.ndarray, B: np.ndarray) -> np.ndarray:
    """``F B`` in float64 (the same arithmetic in the fit's final pass and in ``transform``).

    float32 factors are cast :data:`FACTOR_BLOCK_ROWS` rows at a time: a float64 copy of a
    whole chunk would be twice the chunk."""
    if F.dtype == np.float64:
        return F @ B
    out = np.empty((F.shape[0], B.shape[1]))
    for a in range(0, F.shape[0], FACTOR_BLOCK_ROWS):
        np.matmul(np.asarray(F[a:a + FACTOR_BLOCK_ROWS], dtype=np.float64), B,
                  out=out[a:a + FACTOR_BLOCK_ROWS])
    return out


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
        Fitted with a local part: the training rows (``"views"``), the ``"threshold"``, the
        squared weights (``"weights2"``) and ``H / mu`` (``"scaled_embedding"``), for the local
        term of :meth:`transform`.
    """

    specs: list[KernelSpec]
    normalize: bool
    landmarks: dict[int, np.ndarray]
    kernel_landmarks: list[int]
    transforms: list[np.ndarray]
    dtype: Any = np.float64
    coefficients: np.ndarray | None = None
    centres: np.ndarray | None = None
    #: sqrt of the eigenvalues when the final step clusters features ``H sqrt(mu)``
    feature_scale: np.ndarray | None = None
    n_features: list[int | None] | None = None
    chunk_rows: int = 4096
    n_labels_polished: int = 0
    local: dict | None = field(default=None, repr=False)
    info: dict = field(default_factory=dict, repr=False)
    _landmark_sq: dict[int, np.ndarray] = field(default_factory=dict, repr=False)
    _train_factors: np.ndarray | None = field(default=None, repr=False)
    #: per kernel: its leading columns of T in float32 (see :attr:`single_columns`)
    _single_transforms: list[np.ndarray] | None = field(default=None, repr=False)

    def __getstate__(self) -> dict:
        # The training rows' factors and the float32 transforms are caches, made on demand.
        return {**self.__dict__, "_train_factors": None, "_single_transforms": None}

    def __post_init__(self) -> None:
        self.dtype = np.dtype(self.dtype)
        # One memory layout whether built or read back from a store: BLAS rounds differently
        # for C- and F-ordered operands, and a resumed build must give the same bits.
        self.transforms = [np.ascontiguousarray(T, dtype=np.float64) for T in self.transforms]
        self.landmarks = {v: np.ascontiguousarray(L, dtype=np.float64)
                          for v, L in self.landmarks.items()}
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
    def single_columns(self) -> list[int]:
        """Per kernel, how many leading columns of F are computed by a float32 product: with
        float32 factors, those whose eigenvalue is at least
        :data:`FLOAT32_PRODUCT_MIN_EIGENVALUE` times the kernel's largest (the squared norms
        of T's columns are the inverse eigenvalues, in decreasing order of eigenvalue); none
        with float64 factors."""
        if self.dtype != np.float32:
            return [0] * len(self.transforms)
        counts = []
        for T in self.transforms:
            inverse = np.einsum("ij,ij->j", T, T)  # 1 / lambda_k
            if inverse.size == 0 or not inverse[0] > 0:
                counts.append(0)
                continue
            strong = inverse <= inverse[0] / FLOAT32_PRODUCT_MIN_EIGENVALUE
            counts.append(int(np.argmin(strong)) if not strong.all() else int(strong.size))
        return counts

    def _singles(self) -> list[np.ndarray]:
        if self.__dict__.get("_single_transforms") is None:
            self._single_transforms = [
                T[:, :r].astype(np.float32)
                for T, r in zip(self.transforms, self.single_columns, strict=True)]
        return self._single_transforms

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

        The kernel blocks are evaluated :data:`FACTOR_BLOCK_ROWS` rows at a time: their float64
        temporaries (distances, one block per kernel, the products with the transforms) are
        several times the factors' own size, and would otherwise set a pass's memory.
        """
        n = views[0].shape[0]
        if out is None:
            out = np.empty((n, self.n_components), dtype=self.dtype)
        for a in range(0, n, FACTOR_BLOCK_ROWS):
            b = min(a + FACTOR_BLOCK_ROWS, n)
            self._factor_block([None if v is None else v[a:b] for v in views],
                               None if sq_norms is None else sq_norms[a:b], out[a:b])
        return out

    def _landmark_blocks(self, views: Sequence[Any]) -> Any:
        """``(p, K_p(X, L_p))`` for every kernel; the kernels of a view share one distance
        block."""
        for view in sorted(self.landmarks):
            idx = [p for p, s in enumerate(self.specs) if s.view == view]
            X = views[view]
            if not sp.issparse(X):
                X = np.asarray(X, dtype=np.float64)
            blocks = kernel_blocks([self.specs[p] for p in idx], X, self.landmarks[view],
                                   row_sq_norms(X), self._landmark_sq[view],
                                   normalize=self.normalize,
                                   columns=[self.kernel_landmarks[p] for p in idx])
            for j, p in enumerate(idx):
                yield p, blocks[j][:, :self.kernel_landmarks[p]]

    def _factor_block(self, views: Sequence[Any], sq_norms: np.ndarray | None,
                      out: np.ndarray) -> None:
        offsets, singles = self.offsets, self._singles()
        for p, C in self._landmark_blocks(views):
            single = singles[p]
            split = offsets[p] + single.shape[1]
            parts = []
            if single.shape[1]:
                parts.append((np.asarray(C, dtype=np.float32), single, offsets[p]))
            if split < offsets[p + 1]:
                parts.append((C, self.transforms[p][:, single.shape[1]:], split))
            blocks = []
            for left, right, start in parts:
                target = out[:, start:start + right.shape[1]]
                if left.dtype == out.dtype:
                    # BLAS writes into the column slice (its rows are strided): no temporary
                    # block and no copy of it
                    blocks.append(np.matmul(left, right, out=target))
                else:
                    block = left @ right
                    target[...] = block
                    blocks.append(block)
            if sq_norms is not None:
                # from the products before any cast to the factors' dtype
                sq_norms[:, p] = sum(np.einsum("ij,ij->i", b, b, dtype=np.float64)
                                     for b in blocks)

    def project(self, views: Sequence[Any], B: np.ndarray) -> np.ndarray:
        """``F B`` of the given rows without forming F, in float64:
        ``sum_p K_p(X, L_p) (T_p B_p)``, ``2 r k`` flops per row and kernel instead of the
        factors' ``2 r r_p'``. Equal to :func:`embed_rows` of float64 factors up to round-off
        (float32 factors round F first: about 1e-7 relative)."""
        n = views[0].shape[0]
        offsets = self.offsets
        maps = [T @ B[offsets[p]:offsets[p + 1]] for p, T in enumerate(self.transforms)]
        out = np.zeros((n, B.shape[1]))
        for a in range(0, n, FACTOR_BLOCK_ROWS):
            part = [None if v is None else v[a:a + FACTOR_BLOCK_ROWS] for v in views]
            for p, C in self._landmark_blocks(part):
                out[a:a + FACTOR_BLOCK_ROWS] += C @ maps[p]
        return out

    def diagonal(self, views: Sequence[Any]) -> np.ndarray:
        """Exact ``K_p(x_i, x_i)`` of the given rows, shape (n_rows, m)."""
        n = views[0].shape[0]
        if self.normalize:
            return np.ones((n, len(self.specs)))
        return np.stack([kernel_diagonal(spec, row_sq_norms(views[spec.view]))
                         for spec in self.specs], axis=1)

    def _transform_block(self, views: Sequence[Any]) -> np.ndarray:
        """``H`` rows of new points: ``F(x) B`` (as in the fit: factors in ``self.dtype``)."""
        views = [v if v is None else _in_memory(v, i) for i, v in enumerate(views)]
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
                    residual, keep = local_residual(blocks[j], F_new[:, cols], F_train[:, cols],
                                                    local["threshold"])
                    residual[~keep] = 0.0
                    out[a:a + step] += local["weights2"][p] * (residual @ scaled)
        return out

    def transform(self, views: Sequence[Any]) -> np.ndarray:
        """Rows of H of the given rows, by blocks of ``chunk_rows`` rows (bounded memory)."""
        if self.coefficients is None:
            raise ValueError("this Nystrom model has no coefficients yet (not fitted)")
        n = views[0].shape[0]
        # Computed in float64, kept in the factors' dtype: the fit's embedding_ is.
        out = np.empty((n, self.coefficients.shape[1]), dtype=self.dtype)
        for a in range(0, n, self.chunk_rows):
            out[a:a + self.chunk_rows] = self._transform_block(
                [v[a:a + self.chunk_rows] for v in views])
        return out

    def predict(self, views: Sequence[Any]) -> np.ndarray:
        """Nearest learned centre of the unit-length rows of :meth:`transform`."""
        if self.centres is None:
            raise ValueError("this Nystrom model has no cluster centres yet (not fitted)")
        rows = self.transform(views)
        if self.feature_scale is None:
            return nearest_centre(rows, self.centres, step="spectral")
        rows *= self.feature_scale  # as the fit scaled its embedding
        return nearest_centre(rows, self.centres, step="features")
