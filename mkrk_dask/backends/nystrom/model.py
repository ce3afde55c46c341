"""The picklable Nystrom row map: from rows of the data to factors and to the embedding.

Every base kernel is approximated from ``r_p`` landmarks (rows of the data)::

    K_p ~ F_p F_p^T,   F_p = K_p(X, L_p) U_p diag(lambda_p)^(-1/2)     (n x r_p')

where ``W_p = K_p(L_p, L_p) = U_p diag(lambda_p) U_p^T`` with eigenvalues below a relative floor
dropped (``r_p' <= r_p``). The leading (strong) columns of ``F_p`` are those of the product
with ``T_p Q_p``, ``Q_p`` an orthogonal rotation that makes the product cheaper and leaves
``F_p F_p^T`` as it is (:meth:`NystromModel.product_transforms`). New points map through the
same landmarks and transforms, which is what ``MKKMRK.predict`` / ``transform`` use.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import scipy.sparse as sp

from ..._compute import compute_here
from ...assignment import nearest_centre
from ...kernel_evaluation import direction_roots
from ...kernels import KernelSpec, kernel_blocks, kernel_diagonal, row_sq_norms
from .local import local_residual
from .products import (
    FACTOR_BLOCK_ROWS,
    TRAPEZOID_COLUMNS,
    embed_rows,
    indicator_rows,
    lower_trapezoidal,
    trapezoid_product,
)

__all__ = ["NystromModel", "embed_rows", "FACTOR_BLOCK_ROWS", "FLOAT32_PRODUCT_MIN_EIGENVALUE",
           "TRAPEZOID_COLUMNS", "FACTOR_LAYOUT"]

#: float32 factors: the columns of ``T_p`` whose eigenvalue is at least this share of the
#: kernel's largest are multiplied in float32 (twice the rate of float64). The error of a
#: float32 product in column k is about eps_32 sqrt(lambda_max / lambda_k) of a factor row's
#: norm, so at most 100 eps_32 (1e-5) here; the weaker columns, where it would grow to swamp
#: the column itself, stay in float64. The same factor multiplies the error of the kernel
#: values, which a view of strong columns only takes in float32 (:meth:`single_views`: a few
#: tens of eps_32, so at most a few thousand eps_32, 3e-4, in the weakest strong column)
FLOAT32_PRODUCT_MIN_EIGENVALUE = 1e-4
#: the factor layout of new models and stores (see :attr:`NystromModel.factor_layout`)
FACTOR_LAYOUT = "rotated"


def _in_memory(rows: Any, view: int) -> Any:
    """A block of new rows in memory (dask and Zarr blocks are read here), finite."""
    if sp.issparse(rows):
        return rows
    block = np.asarray(compute_here(rows) if hasattr(rows, "compute") else rows,
                       dtype=np.float64)
    if not np.isfinite(block).all():
        raise ValueError(f"view {view}: the new rows contain NaN or infinity")
    return block


def _has_features(spec: KernelSpec) -> bool:
    """Whether a kernel is an inner product of the rows' own few features (linear, or of
    degree 1 with an offset)."""
    return spec.family == "linear" or (spec.family == "polynomial" and int(spec.b) == 1)


def _offset(spec: KernelSpec) -> float:
    return float(spec.a) if spec.family == "polynomial" else 0.0


def _lifted(X: np.ndarray, spec: KernelSpec) -> np.ndarray:
    """``[X, sqrt(a)]``: the features of ``x . y + a`` (X itself without an offset)."""
    a = _offset(spec)
    return X if not a else np.hstack([X, np.full((X.shape[0], 1), np.sqrt(a), X.dtype)])


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
    #: how the factors are computed from ``transforms``: ``"rotated"`` (the strong columns
    #: rotated, :meth:`product_transforms`; float32 values for :meth:`single_views`) or
    #: ``"plain"`` (``K_p(X, L_p) T_p`` in float64 values: models saved before git 47915c5,
    #: whose coefficients were fitted to those factors)
    factor_layout: str = FACTOR_LAYOUT
    local: dict | None = field(default=None, repr=False)
    info: dict = field(default_factory=dict, repr=False)
    _landmark_sq: dict[int, np.ndarray] = field(default_factory=dict, repr=False)
    _train_factors: np.ndarray | None = field(default=None, repr=False)
    #: per kernel: its strong columns, rotated and in the product's dtype, and its weak ones
    #: (see :meth:`product_transforms`)
    _products: list[tuple[np.ndarray, np.ndarray, np.ndarray]] | None = field(default=None,
                                                                             repr=False)
    #: the views evaluated in float32 (see :meth:`single_views`)
    _single: set[int] | None = field(default=None, repr=False)
    #: per view: the landmarks' side of the float32 distances (``kernel_blocks``'
    #: ``columns_cache``)
    _landmark_side: dict[int, dict] = field(default_factory=dict, repr=False)
    #: per linear kernel of few features: its landmarks' side (see :meth:`_feature_parts`)
    _features: dict[int, tuple] | None = field(default=None, repr=False)

    def __getstate__(self) -> dict:
        # The training rows' factors, the product transforms, the views evaluated in float32
        # and the landmarks' side of the distances are caches, made on demand.
        return {**self.__dict__, "_train_factors": None, "_products": None, "_single": None,
                "_landmark_side": {}, "_features": None}

    def __post_init__(self) -> None:
        self.dtype = np.dtype(self.dtype)
        if self.factor_layout not in ("rotated", "plain"):
            raise ValueError(f"factor_layout must be 'rotated' or 'plain', got "
                             f"{self.factor_layout!r}")
        # One memory layout whether built or read back from a store: BLAS rounds differently
        # for C- and F-ordered operands, and a resumed build must give the same bits.
        self.transforms = [np.ascontiguousarray(T, dtype=np.float64) for T in self.transforms]
        self.landmarks = {v: np.ascontiguousarray(L, dtype=np.float64)
                          for v, L in self.landmarks.items()}
        self._landmark_sq = {v: row_sq_norms(L) for v, L in self.landmarks.items()}
        # of these landmarks (dataclasses.replace passes them on)
        self._landmark_side, self._features = {}, None
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
    def strong_columns(self) -> list[int]:
        """Per kernel, how many leading columns of ``T_p`` have an eigenvalue of at least
        :data:`FLOAT32_PRODUCT_MIN_EIGENVALUE` times the kernel's largest (the squared norms
        of T's columns are the inverse eigenvalues, in decreasing order of eigenvalue)."""
        counts = []
        for T in self.transforms:
            inverse = np.einsum("ij,ij->j", T, T)  # 1 / lambda_k
            if inverse.size == 0 or not inverse[0] > 0:
                counts.append(0)
                continue
            strong = inverse <= inverse[0] / FLOAT32_PRODUCT_MIN_EIGENVALUE
            counts.append(int(np.argmin(strong)) if not strong.all() else int(strong.size))
        return counts

    @property
    def single_columns(self) -> list[int]:
        """Per kernel, how many leading columns of F are computed by a float32 product: with
        float32 factors, the strong ones (:attr:`strong_columns`); none with float64
        factors."""
        if self.dtype != np.float32:
            return [0] * len(self.transforms)
        return self.strong_columns

    def product_transforms(self) -> list[np.ndarray]:
        """Per kernel, the float64 transform the factors are the product with:
        ``T_p`` whose strong columns are rotated (an orthogonal ``Q``, so ``F_p F_p^T``, the
        approximation, is unchanged) to make their first rows a lower triangle with a positive
        diagonal (unique, so every process derives the same F from the same ``T_p``).
        ``F_p = K_p(X, L_p) T_p Q`` then costs about ``r'^2 / 2`` fewer multiply-adds per row:
        :func:`trapezoid_product`. Weak columns are left as they are."""
        return [np.hstack([head, tail]) for head, _, tail in self._product_parts()]

    def _product_parts(self) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
        """Per kernel: its strong columns, rotated (:meth:`product_transforms`), in float64
        and in the dtype of their product (float32 for float32 factors); its weak columns
        (float64)."""
        if self.__dict__.get("_products") is None:
            dtype = np.float32 if self.dtype == np.float32 else np.float64
            rotate = lower_trapezoidal if self.factor_layout == "rotated" else np.asarray
            heads = [rotate(T[:, :s]) for T, s in zip(self.transforms, self.strong_columns,
                                                       strict=True)]
            self._products = [(head, head.astype(dtype), T[:, head.shape[1]:])
                              for head, T in zip(heads, self.transforms, strict=True)]
        return self._products

    def _feature_parts(self) -> dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]]:
        """The linear kernels (``linear``, ``cosine``, and ``polynomial`` of degree 1, the
        lifted cosine) with fewer features than landmarks: ``K_p(X, L_p) = phi(X)
        phi(L_p)^T`` for ``phi(x) = x``, or ``[x, sqrt(a)]`` with an offset ``a`` (divided by
        its length where normalised), so ``F_p = phi(X) (phi(L_p)^T T_p Q_p)`` costs
        ``2 d r_p'`` flops a row instead of ``2 r_p (d + r_p')``. Per such kernel:
        ``phi(L_p)^T`` (float64) and the products of :meth:`_product_parts`' strong columns
        (in their product's dtype) and weak columns (float64) with it."""
        if self.__dict__.get("_features") is None:
            features = {}
            for p, ((head, head_in_dtype, tail), spec) in enumerate(
                    zip(self._product_parts(), self.specs, strict=True)):
                L = self.landmarks[spec.view][:self.kernel_landmarks[p]]
                if not _has_features(spec):
                    continue
                L = _lifted(np.asarray(L, dtype=np.float64), spec)
                if L.shape[1] >= L.shape[0]:
                    continue
                root, zero = direction_roots(row_sq_norms(L))
                if self.normalize and zero.any():
                    continue  # an all-zero landmark's own direction is not a feature of x
                phi_t = (L / root[:, None] if self.normalize else L).T
                features[p] = (np.ascontiguousarray(phi_t),
                               (phi_t @ head).astype(head_in_dtype.dtype), phi_t @ tail)
            self._features = features
        return self._features

    def _read_views(self, views: Sequence[Any]) -> dict[int, tuple[Any, np.ndarray]]:
        """Per view of the landmarks: its rows (dense ones as float64, sparse as they are)
        and their squared norms, made once per block for its kernel blocks and features."""
        read = {}
        for view in self.landmarks:
            X = views[view]
            if not sp.issparse(X):
                X = np.asarray(X, dtype=np.float64)
            read[view] = (X, row_sq_norms(X))
        return read

    def _feature_rows(self, read: dict[int, tuple[Any, np.ndarray]]) -> dict[int, np.ndarray]:
        """``phi(X)`` (float64) of the rows of :meth:`_read_views` for the kernels of
        :meth:`_feature_parts` whose view is dense here (sparse rows go through their kernel
        block)."""
        rows, per_view = {}, {}
        for p in self._feature_parts():
            spec = self.specs[p]
            X, sq = read[spec.view]
            if sp.issparse(X):
                continue
            key = (spec.view, _offset(spec))
            if key not in per_view:  # the view's kernels of one offset share phi(X)
                if key[1]:
                    X, sq = _lifted(X, spec), sq + key[1]
                # an all-zero row stays zero: orthogonal to every (non-zero) landmark
                per_view[key] = (X / direction_roots(sq)[0][:, None] if self.normalize
                                 else X)
            rows[p] = per_view[key]
        return rows

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

    def single_views(self) -> set[int]:
        """The views whose kernels are evaluated in float32
        (``kernel_blocks(precision="single")``): with float32 factors, those whose kernels'
        columns are all strong (:attr:`strong_columns`). A strong column's error grows like
        ``sqrt(lambda_max / lambda_k)`` times that of the kernel values, at most 100 times;
        a weak column needs float64 values (and product) not to be swamped."""
        if self.dtype != np.float32 or self.factor_layout == "plain":
            return set()
        strong = self.strong_columns
        return {view for view in self.landmarks
                if all(strong[p] == T.shape[1] for p, T in enumerate(self.transforms)
                       if self.specs[p].view == view)}

    def _single_view_set(self) -> set[int]:
        """:meth:`single_views`, computed once."""
        if self.__dict__.get("_single") is None:
            self._single = self.single_views()
        return self._single

    def _landmark_blocks(self, read: dict[int, tuple[Any, np.ndarray]], skip: Any = ()) -> Any:
        """``(p, K_p(X, L_p))`` for every kernel not in ``skip``, from the rows of
        :meth:`_read_views`; the kernels of a view share one distance block (float32 for the
        :meth:`single_views`)."""
        single = self._single_view_set()
        for view in sorted(self.landmarks):
            idx = [p for p, s in enumerate(self.specs) if s.view == view and p not in skip]
            if not idx:
                continue
            X, sq = read[view]
            blocks = kernel_blocks([self.specs[p] for p in idx], X, self.landmarks[view],
                                   sq, self._landmark_sq[view],
                                   normalize=self.normalize,
                                   columns=[self.kernel_landmarks[p] for p in idx],
                                   precision="single" if view in single else "double",
                                   columns_cache=self.__dict__.setdefault(
                                       "_landmark_side", {}).setdefault(view, {}))
            for j, p in enumerate(idx):
                yield p, blocks[j][:, :self.kernel_landmarks[p]]

    def _factor_block(self, views: Sequence[Any], sq_norms: np.ndarray | None,
                      out: np.ndarray) -> None:
        offsets = self.offsets
        parts = [(head, tail) for _, head, tail in self._product_parts()]
        features = self._feature_parts()
        read = self._read_views(views)
        rows = self._feature_rows(read)
        # a generator: one view's kernel blocks are alive at a time
        for p, C in itertools.chain(self._landmark_blocks(read, skip=rows), rows.items()):
            head, tail = (features[p][1:]) if p in rows else parts[p]
            split = offsets[p] + head.shape[1]
            blocks = []
            if head.shape[1]:
                # the strong columns in the factors' dtype (float32: twice the rate), written
                # by BLAS straight into F's column slice (strided rows): no temporary, no copy
                blocks.append(trapezoid_product(np.asarray(C, dtype=head.dtype), head,
                                                 out[:, offsets[p]:split],
                                                 self.factor_layout == "rotated"
                                                 and p not in rows))
            if split < offsets[p + 1]:
                target = out[:, split:offsets[p + 1]]
                if out.dtype == np.float64:
                    blocks.append(np.matmul(C, tail, out=target))
                else:
                    block = C @ tail
                    target[...] = block
                    blocks.append(block)
            if sq_norms is not None:
                # from the products before any cast to the factors' dtype, each in its own
                # (a float32 sum of a few hundred squares: about 1e-7 relative, as F itself;
                # 4x faster than summing in float64)
                sq_norms[:, p] = sum(np.einsum("ij,ij->i", b, b).astype(np.float64)
                                     for b in blocks)

    def projection_maps(self, B: np.ndarray) -> tuple[list[np.ndarray], dict]:
        """What :meth:`project` multiplies each kernel block by: ``T_p Q_p B_p`` (in float32
        for the :meth:`single_views`), and for the linear kernels of few features
        ``phi(L_p)^T T_p Q_p B_p``; a pass makes them once and gives them to every call."""
        offsets = self.offsets
        single = self._single_view_set()
        # T_p Q_p B_p from the cached parts (head, weak tail), not product_transforms(): no
        # copy of every transform per call
        products = [head @ B[offsets[p]:offsets[p] + head.shape[1]]
                    + tail @ B[offsets[p] + head.shape[1]:offsets[p + 1]]
                    for p, (head, _, tail) in enumerate(self._product_parts())]
        maps = [product.astype(np.float32 if self.specs[p].view in single else np.float64)
                for p, product in enumerate(products)]
        # linear kernels of few features: in float64 (d columns only)
        feature_maps = {p: phi_t @ products[p]
                        for p, (phi_t, _, _) in self._feature_parts().items()}
        return maps, feature_maps

    def _block_kernels(self, views: Sequence[Any], a: int, b: int) -> Any:
        """``(p, C, feature)`` for every kernel of the rows ``a:b``: ``C`` its block
        ``K_p(X, L_p)`` (:meth:`_landmark_blocks`), or ``phi(X)`` (``feature``) for the
        kernels of :meth:`_feature_parts`."""
        read = self._read_views([None if v is None else v[a:b] for v in views])
        rows = self._feature_rows(read)
        for p, C in self._landmark_blocks(read, skip=rows):
            yield p, C, False
        for p, phi in rows.items():
            yield p, phi, True

    def project(self, views: Sequence[Any], B: np.ndarray, *, maps: tuple | None = None
                ) -> np.ndarray:
        """``F B`` of the given rows without forming F, summed in float64:
        ``sum_p K_p(X, L_p) (T_p Q_p B_p)``, ``2 r k`` flops per row and kernel instead of the
        factors' ``2 r r_p'``. Equal to :func:`embed_rows` of float64 factors up to round-off
        (float32 factors round F first: about 1e-7 relative). The kernels of the
        :meth:`single_views`, whose values are float32, take their product in float32 too
        (twice the rate; the fit keeps H in float32). ``maps``: :meth:`projection_maps` of
        ``B``, where the caller made them once for many calls."""
        n = views[0].shape[0]
        maps, feature_maps = self.projection_maps(B) if maps is None else maps
        out = np.zeros((n, B.shape[1]))
        for a in range(0, n, FACTOR_BLOCK_ROWS):
            b = min(a + FACTOR_BLOCK_ROWS, n)
            for p, C, feature in self._block_kernels(views, a, b):
                out[a:b] += C @ (feature_maps[p] if feature else maps[p])
        return out

    def cluster_sums(self, views: Sequence[Any], labels: np.ndarray, n_clusters: int
                     ) -> np.ndarray:
        """``Z^T F`` of the given rows without forming F (``Z`` the indicators of
        ``labels``), in float64: ``Z^T F_p = (Z^T K_p(X, L_p)) T_p Q_p``, the kernel blocks
        summed per cluster and mapped once at the end. The factors' own products (``2 r r_p'``
        flops a row and kernel, most of a pass that forms F) are made on ``k`` rows only.
        Equal to the column sums of :meth:`factors` in float64 up to round-off (float32
        factors round F first: about 1e-7 relative)."""
        n = views[0].shape[0]
        labels = np.asarray(labels, dtype=np.int64)
        sums: dict[tuple[int, bool], np.ndarray] = {}
        for a in range(0, n, FACTOR_BLOCK_ROWS):
            b = min(a + FACTOR_BLOCK_ROWS, n)
            self._add_cluster_sums(sums, self._block_kernels(views, a, b), labels[a:b],
                                   n_clusters)
        return self._mapped_sums(sums, n_clusters)

    def embed_label_sums(self, views: Sequence[Any], B: np.ndarray, assign: Any,
                         n_clusters: int, known: tuple[np.ndarray, np.ndarray], *,
                         maps: tuple | None = None
                         ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(H, labels, Z_s^T F)`` of the given rows from one evaluation of their kernel
        blocks: ``H = F B`` as :meth:`project` makes it (kept in the model's dtype), the
        labels ``assign`` gives the rows of H (one call for all of them: the graph's search
        of the nearest anchors costs less per row in large calls), and the cluster sums of
        :meth:`cluster_sums` over the sampled rows ``known = (positions, labels)`` only,
        by the labels given (the partition was fitted on them; they keep those labels). A
        sampled row's kernel rows are summed while its block is alive, one block of
        :data:`FACTOR_BLOCK_ROWS` rows at a time (holding several blocks made it slower:
        fresh pages for each group of them)."""
        n = views[0].shape[0]
        maps, feature_maps = self.projection_maps(B) if maps is None else maps
        H = np.empty((n, B.shape[1]), dtype=self.dtype)
        positions, sample_labels = known
        sums: dict[tuple[int, bool], np.ndarray] = {}
        for a in range(0, n, FACTOR_BLOCK_ROWS):
            b = min(a + FACTOR_BLOCK_ROWS, n)
            parts = list(self._block_kernels(views, a, b))
            rows = np.zeros((b - a, B.shape[1]))
            for p, C, feature in parts:  # in project's order: the same bits
                rows += C @ (feature_maps[p] if feature else maps[p])
            H[a:b] = rows
            lo, hi = np.searchsorted(positions, (a, b))
            if hi > lo:
                picked = positions[lo:hi] - a
                self._add_cluster_sums(sums, [(p, C[picked], f) for p, C, f in parts],
                                       sample_labels[lo:hi], n_clusters)
        labels = np.asarray(assign(H), dtype=np.int64)
        labels[positions] = sample_labels
        return H, labels, self._mapped_sums(sums, n_clusters)

    @staticmethod
    def _add_cluster_sums(sums: dict, parts: Any, labels: np.ndarray, n_clusters: int) -> None:
        """Add the per-cluster sums of a block's kernel rows ``parts`` (of
        :meth:`_block_kernels`) to ``sums``, by kernel."""
        # float64 blocks: a sparse indicator (no dense product of zeros); float32 ones (the
        # single views): a float32 product, summed into float64 every block, whose rounding
        # is that of the float32 factors themselves (about 1e-7 relative)
        indicators: dict[bool, Any] = {}  # made where a block of their kind comes
        for p, C, feature in parts:
            single = getattr(C, "dtype", None) == np.float32
            if single not in indicators:
                indicators[single] = indicator_rows(labels, n_clusters, single)
            part = indicators[single] @ (C if single else np.asarray(C))
            if single:
                part = part.astype(np.float64)
            key = (p, feature)
            sums[key] = part if key not in sums else sums[key] + part

    def _mapped_sums(self, sums: dict, n_clusters: int) -> np.ndarray:
        """``Z^T F`` (k x R) from the per-kernel sums of :meth:`_add_cluster_sums`: each
        mapped by its kernel's transform (``phi(L_p)^T`` first for a feature kernel)."""
        features = self._feature_parts()
        out = np.zeros((n_clusters, self.n_components))
        offsets = self.offsets
        for (p, feature), summed in sums.items():
            head, _, tail = self._product_parts()[p]
            if feature:
                summed = summed @ features[p][0]
            split = offsets[p] + head.shape[1]
            out[:, offsets[p]:split] += summed @ head
            out[:, split:offsets[p + 1]] += summed @ tail
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
            raise ValueError("this Nystrom model has no cluster centres: not fitted yet, or its "
                             "estimator's labels come from a final graph (final_clustering_="
                             "'graph'); call the estimator's predict")
        rows = self.transform(views)
        if self.feature_scale is None:
            return nearest_centre(rows, self.centres, step="spectral")
        rows *= self.feature_scale  # as the fit scaled its embedding
        return nearest_centre(rows, self.centres, step="features")
