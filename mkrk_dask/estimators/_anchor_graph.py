"""Spectral clustering on the views' averaged anchor graphs: a local alternative to the global
kernels of the multiple kernel k-means estimators, for data sampled densely along curved
clusters."""

from __future__ import annotations

import warnings
from numbers import Integral
from typing import Any

import numpy as np
import scipy.sparse as sp
from scipy.linalg import eigh
from scipy.sparse.csgraph import connected_components
from scipy.sparse.linalg import ArpackNoConvergence, eigsh
from sklearn.base import BaseEstimator, ClusterMixin, TransformerMixin
from sklearn.utils import check_random_state
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.validation import check_is_fitted

from .._threads import single_blas_thread
from ..anchor_graph import (
    GEOMETRIES,
    embed_neighbours,
    factor_rows,
    fit_view_graph,
    graph_factor,
)
from ..assignment import assign_clusters, lloyd_centres, nearest_centre
from ..backends.base import cluster_basis
from ..exceptions import DisconnectedGraphWarning
from ..passes import is_dask
from ..validation import MAX_N_INIT, check_constraints, check_feature_views, check_n_clusters
from ..views import check_new_views, default_view_names, split_named_views
from ._out_of_sample import lazy_rows, score_rows

__all__ = ["AnchorGraphClustering"]

#: eigenvalues of the graph this close to 1 count a part with no edge to the rest
DISCONNECTED_TOL = 1e-8
#: eigenvalues (at most 1) below this are round-off of zero: the graph's rank is below it
RANK_TOL = 1e-10


#: a Lanczos product's cost in the dense eigensolver's multiply-adds: per stored entry of the
#: sparse matrix (scattered reads, against BLAS's blocked ones), and per product (ARPACK's
#: reverse communication through scipy's Python wrappers, a fixed cost). Set from timings of
#: a dense top-4 of path graphs against ARPACK restarts on a 2-core VM, one BLAS thread;
#: ``benchmarks/bench_graph_lanczos.py`` measures what the budget does to whole fits
SPARSE_ENTRY_COST = 10
LANCZOS_PRODUCT_COST = 400_000


def _lanczos_restarts(small: sp.spmatrix, ncv: int) -> int:
    """ARPACK restarts whose products (``ncv`` each at most) cost what a dense
    eigendecomposition of ``small`` does (``side^3`` multiply-adds): beyond that, the dense
    solver is the cheaper way to the same eigenpairs. Counting a product as its stored
    entries alone allowed a hundred times more: on one-column data, whose graph is a path
    of many parts with eigenvalues packed against 1, Lanczos ran for seconds a part."""
    side = small.shape[0]
    per_product = SPARSE_ENTRY_COST * small.nnz + LANCZOS_PRODUCT_COST
    return max(1, int(side ** 3 // (per_product * ncv)))


def _connected_parts(small: sp.spmatrix) -> tuple[int, np.ndarray]:
    """The connected parts of the graph ``small`` among its nodes with an edge: their count
    (the multiplicity of eigenvalue 1) and each node's part, -1 for a node without an edge
    (an anchor no row chose: its eigenvalue is 0)."""
    linked = small.diagonal() > 0
    parts = np.full(small.shape[0], -1)
    if not linked.any():
        return 0, parts
    edges = small[linked][:, linked].tocsr()
    edges.eliminate_zeros()  # a weight that underflowed is no edge
    count, labels = connected_components(edges, directed=False)
    parts[linked] = labels
    return int(count), parts


def _top_of_connected(small: sp.spmatrix, count: int) -> tuple[np.ndarray, np.ndarray]:
    """The ``count`` largest eigenpairs (any order) of a graph of one connected part, where
    eigenvalue 1 is simple and Lanczos from one start vector finds every one of them."""
    side = small.shape[0]
    if side > 4 * count:
        # Lanczos on the sparse matrix: the largest few of many (a dense eigensolver's
        # O(side^3) was most of a fit at a thousand anchors), given at most the dense
        # solver's work: where eigenvalues cluster near 1 (parts joined by a few weak edges)
        # it may not converge, and ARPACK's own limit (ten times the side in restarts) made
        # the fallback most of a small fit's time
        ncv = min(side, max(2 * count + 1, 20))
        try:
            return eigsh(small.tocsc(), k=count, which="LA", ncv=ncv,
                         maxiter=_lanczos_restarts(small, ncv),
                         v0=np.ones(side) / np.sqrt(side))
        except ArpackNoConvergence:
            pass
    dense = small.toarray()
    values, vectors = eigh(dense, subset_by_index=[max(side - count, 0), side - 1])
    if len(values) < min(count, side):
        # LAPACK's syevr can return fewer of a subset than asked where eigenvalues
        # cluster: the full spectrum has them all
        values, vectors = eigh(dense)
        values, vectors = values[-count:], vectors[:, -count:]
    return values, vectors


def _top_by_parts(small: sp.spmatrix, count: int, parts: np.ndarray,
                  n_parts: int) -> tuple[np.ndarray, np.ndarray]:
    """The ``count`` largest eigenpairs of a graph of several parts, from each part's own:
    the matrix is block-diagonal over its parts, so its spectrum is theirs together. Each
    part's eigenvalue 1 is then found once (one start vector finds one of a repeated
    eigenvalue, and which one depended on round-off), and a large part keeps Lanczos."""
    small = small.tocsr()
    found = []  # (value, part, column of that part's vectors)
    blocks = []
    # each part's nodes in increasing order, from one sort (a graph may have thousands)
    by_part = np.argsort(parts, kind="stable")
    bounds = np.searchsorted(parts[by_part], np.arange(n_parts + 1))
    for part in range(n_parts):
        nodes = by_part[bounds[part]:bounds[part + 1]]
        values, vectors = _top_of_connected(small[nodes][:, nodes], min(count, nodes.size))
        blocks.append((nodes, vectors))
        found += [(float(v), part, j) for j, v in enumerate(values)]
    # largest first; ties (eigenvalue 1 in more parts than asked for) in the parts' order
    found.sort(key=lambda item: (-item[0], item[1], item[2]))
    chosen = found[:count]
    # fewer eigenpairs in the parts than asked for: nodes without an edge have eigenvalue 0
    spare = np.flatnonzero(parts < 0)[:count - len(chosen)]
    vectors = np.zeros((small.shape[0], len(chosen) + spare.size))
    for col, (_, part, j) in enumerate(chosen):
        nodes, block = blocks[part]
        vectors[nodes, col] = block[:, j]
    vectors[spare, len(chosen) + np.arange(spare.size)] = 1.0
    return np.array([v for v, _, _ in chosen] + [0.0] * spare.size), vectors


def _top_eigenpairs(F: sp.csr_matrix, k: int) -> tuple[np.ndarray, np.ndarray]:
    """The k + 1 largest eigenvalues of ``F F^T`` (decreasing) and the map ``P`` of rows of F
    to the top k eigenvectors (``U = F P``), from the smaller of ``F^T F`` and ``F F^T``."""
    n, m = F.shape
    small = F.T @ F if m <= n else F @ F.T
    n_parts, parts = _connected_parts(small)
    if n_parts > 1:
        values, vectors = _top_by_parts(small, k + 1, parts, n_parts)
    else:
        values, vectors = _top_of_connected(small, min(k + 1, small.shape[0]))
    order = np.argsort(values, kind="stable")
    values, vectors = values[order], vectors[:, order]
    values, vectors = np.maximum(values[::-1], 0.0), vectors[:, ::-1]
    if len(values) < k or not values[k - 1] > RANK_TOL:
        raise ValueError(f"the anchor graph has fewer than n_clusters={k} non-zero "
                         "eigenvalues (fewer distinct rows than clusters; with "
                         "geometry='angular', fewer distinct directions)")
    if m <= n:  # vectors are V: U = F V diag(sigma)^-1
        return values, vectors[:, :k] / np.sqrt(values[:k])[None, :]
    # vectors are U: V diag(sigma)^-1 = F^T U diag(sigma)^-2
    return values, np.asarray(F.T @ vectors[:, :k]) / values[:k][None, :]


class AnchorGraphClustering(ClusterMixin, TransformerMixin, BaseEstimator):
    """Spectral clustering on anchor graphs (Liu, He & Chang, ICML 2010), one per view.

    Every row is joined to its ``n_neighbors`` nearest of ``n_anchors`` anchors (the centres
    of a mini-batch k-means) by Gaussian weights; the graph of a view is
    ``Z diag(Z^T 1)^-1 Z^T``, the views' graphs are averaged, and the unit-length rows of
    the top ``n_clusters`` eigenvectors are clustered by k-means. Time and memory are linear
    in the number of rows: the spectrum comes from an m x m matrix (m anchors in all views).

    The graph links near neighbours only, where the kernels of :class:`MKKMRK` have global
    widths. On the raw rows it is the better choice for data sampled densely along curved
    clusters, such as images with many rows per cluster, and the worse one for few rows per
    cluster or where the distances between far rows carry the clusters (text, tables of
    measurements). :class:`MKKMRK`'s default builds it on its own final rows instead (the
    learned kernel's features; ``final_clustering``), which keeps most of the gain on images
    without the losses (``docs/defaults.rst`` has the measurements).

    Parameters
    ----------
    n_clusters : int
        Number of clusters k.
    n_anchors : int, default=1000
        Anchors per view, at most half the rows.
    n_neighbors : int, default=3
        Nearest anchors each row is joined to.
    geometry : {"auto", "angular", "euclidean"}, default="auto"
        Distances between the rows (``"angular"``: between the rows scaled to unit length).
        ``"auto"``: angular for a view with no negative value (intensities, counts,
        histograms, where a row's norm is mostly its overall level) whose rows point in
        more than one direction (not a single column), Euclidean otherwise.
    n_init : int, default=10
        Restarts of the final k-means.
    anchor_max_iter : int, default=100
        Most passes of the anchors' mini-batch k-means over the sampled rows (it also stops
        after 10 passes without improvement). Anchors need only cover the rows: a few passes
        place them nearly as well, at a fraction of the time where they are many.
    random_state : int, RandomState or None, default=None
        Seeds the anchors' k-means and the final k-means.

    Attributes
    ----------
    labels_ : ndarray of shape (n_samples,)
    cluster_centers_ : ndarray of shape (n_clusters, n_clusters)
        Centres of the unit-length rows of ``embedding_``, polished by Lloyd steps to a
        fixed point, so that ``predict`` on the training data gives ``labels_``.
    embedding_ : ndarray of shape (n_samples, n_clusters)
        The top eigenvectors of the averaged graph.
    eigenvalues_ : ndarray of shape (n_clusters + 1,)
        The graph's largest eigenvalues, in decreasing order (at most 1; the gap between the
        last two tells how clearly the graph has ``n_clusters`` parts).
    inertia_ : float
        The kernel k-means objective of ``labels_`` in the averaged graph ``W`` (as
        ``KMeans.inertia_``: ``tr(W) - sum_c (1/|c|) sum_{i,j in c} W[i, j]``, the squared
        distances of the samples to their cluster's centre in the graph's feature space,
        summed), computed from the graph's n x m factor, exactly.
    view_graphs_ : list of :class:`~mkrk_dask.anchor_graph.ViewGraph`
        Per view: anchors, geometry, weights' width and degrees.
    geometry_ : list of str
        The geometry used in each view.
    view_names_ : list of str
        The keys of a dict of views given to ``fit``, else ``view0``, ``view1``, ...
    n_features_per_view_ : tuple of int
    n_features_in_ : int
    """

    _parameter_constraints: dict = {
        "n_clusters": [Interval(Integral, 1, None, closed="left")],
        "n_anchors": [Interval(Integral, 1, None, closed="left")],
        "n_neighbors": [Interval(Integral, 1, None, closed="left")],
        "geometry": [StrOptions(set(GEOMETRIES))],
        "n_init": [Interval(Integral, 1, MAX_N_INIT, closed="both")],
        "anchor_max_iter": [Interval(Integral, 1, None, closed="left")],
        "random_state": ["random_state"],
    }

    def __init__(self, n_clusters: int = 8, *, n_anchors: int = 1000, n_neighbors: int = 3,
                 geometry: str = "auto", n_init: int = 10, anchor_max_iter: int = 100,
                 random_state: Any = None) -> None:
        self.n_clusters = n_clusters
        self.n_anchors = n_anchors
        self.n_neighbors = n_neighbors
        self.geometry = geometry
        self.n_init = n_init
        self.anchor_max_iter = anchor_max_iter
        self.random_state = random_state

    def fit(self, X: Any, y: Any = None) -> AnchorGraphClustering:
        """Build the views' anchor graphs and cluster their top eigenvectors.

        Parameters
        ----------
        X : array-like, sparse matrix, dask or Zarr array, or list of views of shape
            (n_samples, n_features_v)
        y : ignored

        Returns
        -------
        self
        """
        check_constraints(self.get_params(deep=False), self._parameter_constraints)
        X, names = split_named_views(X)
        views = check_feature_views(self, X, reset=True)
        self.view_names_ = names or default_view_names(len(views))
        n, k = int(views[0].shape[0]), check_n_clusters(self.n_clusters, views[0].shape[0])
        if min(self.n_anchors, n // 2) < k:
            raise ValueError(f"the graph needs at least n_clusters={k} anchors per view; "
                             f"n_anchors={self.n_anchors} with n_samples={n} gives "
                             f"{min(self.n_anchors, n // 2)} (at most half the rows)")
        if self.n_neighbors > min(self.n_anchors, n // 2):
            raise ValueError(f"n_neighbors={self.n_neighbors} exceeds the "
                             f"{min(self.n_anchors, n // 2)} anchors per view")
        self.n_features_per_view_ = tuple(int(v.shape[1]) for v in views)
        self.n_features_in_ = sum(self.n_features_per_view_)
        # An int seeds both k-means as given; otherwise two seeds are drawn from it.
        if isinstance(self.random_state, Integral):
            anchor_seed = kmeans_seed = int(self.random_state)
        else:
            anchor_seed, kmeans_seed = (int(s) for s in check_random_state(
                self.random_state).randint(2**31 - 1, size=2))
        graphs, parts = zip(*(fit_view_graph(v, self.n_anchors, self.n_neighbors,
                                             self.geometry, anchor_seed, index,
                                             self.anchor_max_iter)
                              for index, v in enumerate(views)), strict=True)
        sizes = [g.column_scale.size for g in graphs]
        F = graph_factor([factor_rows(*part, size) for part, size in zip(parts, sizes,
                                                                         strict=True)])
        # ARPACK's BLAS calls are on vectors of the anchors' count: one thread
        with single_blas_thread():
            top, self.projection_ = _top_eigenpairs(F, k)
        self.eigenvalues_ = top
        if np.sum(top >= 1.0 - DISCONNECTED_TOL) > k:
            warnings.warn(
                f"the anchor graph has more than n_clusters={k} disconnected parts, so which "
                "of them are joined is arbitrary; use fewer anchors or more neighbours "
                "(n_anchors, n_neighbors)", DisconnectedGraphWarning, stacklevel=2)
        self.embedding_ = embed_neighbours(list(parts), sizes, self.projection_)
        labels = assign_clusters(self.embedding_, k, n_init=self.n_init,
                                 random_state=kmeans_seed, step="spectral")
        self.cluster_centers_, self.labels_, _ = lloyd_centres(self.embedding_, labels, k,
                                                              step="spectral")
        # kernel k-means objective of the labels in the graph W = F F^T, from F (no n x n)
        spread = np.asarray(F.T @ cluster_basis(self.labels_, k))
        self.inertia_ = float(max(F.multiply(F).sum() - np.sum(spread**2), 0.0))
        self.view_graphs_ = list(graphs)
        self.geometry_ = ["angular" if g.angular else "euclidean" for g in graphs]
        return self

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        return tags

    def transform(self, X: Any) -> np.ndarray:
        """Rows of new samples in ``embedding_``'s space: their nearest anchors' weights
        mapped by the fit's eigenvectors (on the training data, ``embedding_``).

        Parameters
        ----------
        X : like the data given to ``fit``

        Returns
        -------
        ndarray of shape (n_samples, n_clusters)
            A dask array (lazy, in X's row chunks) where X is one.
        """
        check_is_fitted(self)
        if is_dask(X):
            return lazy_rows(self, "transform", X, self.embedding_.shape[1],
                             self.embedding_.dtype)
        names = (getattr(self, "view_names_", None)
                 or default_view_names(len(self.n_features_per_view_)))
        given = check_new_views(X, names, self.n_features_per_view_)
        views = check_feature_views(self, given if len(given) > 1 else given[0], reset=False)
        return self._embed_views(views)

    def _embed_views(self, views: list) -> np.ndarray:
        graphs = self.view_graphs_
        parts = [graph.neighbour_weights(view, index)
                 for index, (graph, view) in enumerate(zip(graphs, views, strict=True))]
        return embed_neighbours(parts, [g.column_scale.size for g in graphs],
                                self.projection_)

    def predict_checked(self, views: list) -> np.ndarray:
        """:meth:`predict` of rows its checks would pass as they are: a list of finite float64
        arrays in memory, one per view, with the fit's columns. For a caller that made the
        rows itself (a fit's final pass labels millions of rows, a block at a time: the
        checks would run on every block)."""
        check_is_fitted(self)
        return self._assign(self._embed_views(views))

    def predict(self, X: Any) -> np.ndarray:
        """The nearest of ``cluster_centers_`` to the unit-length rows of :meth:`transform`.

        Parameters
        ----------
        X : like the data given to ``fit``

        Returns
        -------
        ndarray of shape (n_samples,)
            A dask array (lazy, in X's row chunks) where X is one.
        """
        if is_dask(X):
            return lazy_rows(self, "predict", X, None, np.int64)
        return self._assign(self.transform(X))

    def score(self, X: Any, y: Any = None) -> float:
        """Opposite of the within-cluster loss of X (the analogue of ``KMeans.score``: higher
        is better): the squared distances of the unit-length rows of :meth:`transform` to
        their nearest centre, summed and negated. ``y`` is ignored."""
        return score_rows(self, X, "spectral")

    def _assign(self, rows: np.ndarray) -> np.ndarray:
        return nearest_centre(rows, self.cluster_centers_, step="spectral")
