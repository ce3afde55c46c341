"""The anchor graph of one view (Liu, He & Chang, ICML 2010): a local similarity in O(n m d).

Every row is joined to its ``s`` nearest of ``m`` anchors (the centres of a mini-batch k-means
of the rows) by Gaussian weights that sum to 1, the rows of a sparse ``Z`` (n x m). The kernel
``Z diag(Z^T 1)^-1 Z^T`` is a graph normalised by its degrees (its rows sum to 1); its factor
``F = Z diag(Z^T 1)^-1/2`` is exact and has ``s`` non-zeros per row, so that the graph's
spectrum comes from the m x m matrix ``F^T F`` at any n, and a new row has its own row of F
(its nearest anchors) without the training rows.

Unlike the dictionary's Gaussians, whose widths are global (multiples of the median pairwise
distance), the graph only links near neighbours. It suits data sampled densely along curved
clusters (images with many rows per cluster); with few rows per cluster, or where distances
between far rows carry the clusters (text, tables of measurements), it falls short of the
global kernels (``docs/defaults.rst`` has the measurements).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.sparse as sp
from sklearn.cluster import MiniBatchKMeans
from sklearn.neighbors import NearestNeighbors
from sklearn.utils import check_random_state

from .choices import GRAPH_GEOMETRIES as GEOMETRIES  # noqa: F401 - re-exported
from .dask_session import current_client
from .kernel_widths import directions_differ, sample_rows, unit_rows
from .landmarks import kmeanspp_order
from .passes import RowSource, Shared, client_threads, read_rows, row_bounds, run_pass
from .validation import is_lazy

__all__ = ["ANCHOR_SAMPLE_ROWS", "GEOMETRIES", "ViewGraph", "fit_view_graph", "graph_factor",
           "embed_neighbours", "factor_rows"]

#: most rows the anchors are learned from (a uniform sample of larger data)
ANCHOR_SAMPLE_ROWS = 100_000
#: rows per block of a pass over the rows to their nearest anchors (a task's rows)
BLOCK_ROWS = 8192
#: rows per mini-batch of the anchors' k-means
BATCH_ROWS = 4096
#: most rows the anchors' k-means++ seeding draws from, or three an anchor (scikit-learn's
#: ``init_size``)
SEED_ROWS = 3 * BATCH_ROWS


@dataclass
class ViewGraph:
    """What maps rows of one view to their rows of the graph's factor F."""

    anchors: np.ndarray
    #: rows scaled to unit length before distances are measured
    angular: bool
    #: the Gaussian width of the weights: the median squared distance of the training rows
    #: to their nearest anchors
    width: float
    #: ``diag(Z^T 1)^-1/2`` of the training rows
    column_scale: np.ndarray
    n_neighbors: int

    def factor(self, view: Any, index: int = 0) -> sp.csr_matrix:
        """The rows of F of ``view``'s rows (new rows, or the training rows again); ``index``
        names the view in errors."""
        return factor_rows(*self.neighbour_weights(view, index), self.column_scale.size)

    def neighbour_weights(self, view: Any, index: int = 0) -> tuple[np.ndarray, np.ndarray]:
        """The non-zeros of :meth:`factor`'s rows: ``(nearest, weights)``, each (n, s): a
        row's nearest anchors and its entries of F there."""
        nearest, sq_dist = nearest_anchors(view, self.anchors, self.n_neighbors, self.angular,
                                           index=index)
        return nearest, _weights(nearest, sq_dist, self.width, self.column_scale)


def _geometry_rows(rows: Any, angular: bool) -> Any:
    """Dense float64 rows (CSR stays CSR), scaled to unit length for the angular geometry."""
    rows = rows.astype(np.float64) if sp.issparse(rows) else np.asarray(rows, dtype=np.float64)
    return unit_rows(rows, zero_rows="keep") if angular else rows


def _block_nearest(block: Any, anchors: np.ndarray, s: int, angular: bool) -> np.ndarray:
    """``(b, 2 s)``: the indices of the ``s`` nearest anchors of every row (as floats), then
    the squared distances to them, by scikit-learn's brute-force nearest neighbours: they
    form the distances to the anchors in small reused chunks and keep the nearest on a
    heap, on OpenMP threads. Our own distances to all anchors, cut down by ``argpartition``,
    took several times as long, most of it the first touch of each new block of distances
    (the memory benchmark's graph, which labels every row so, in ``docs/defaults.rst``)."""
    rows = _geometry_rows(block, angular)
    index = NearestNeighbors(n_neighbors=s, algorithm="brute").fit(anchors)
    distances, nearest = index.kneighbors(rows)
    out = np.empty((rows.shape[0], 2 * s))
    out[:, :s] = nearest
    np.square(distances, out=out[:, s:])
    return out


def _nearest_task(block: tuple, anchors: np.ndarray, s: int, angular: bool) -> np.ndarray:
    """On a worker: :func:`_block_nearest` of the rows a :class:`RowSource` block names."""
    return _block_nearest(read_rows(*block), anchors, s, angular)


def nearest_anchors(view: Any, anchors: np.ndarray, s: int, angular: bool, *,
                    index: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """The ``s`` nearest anchors of every row of ``view`` and the squared distances to them.

    In memory by blocks of :data:`BLOCK_ROWS` rows. A dask or Zarr view is read block by
    block, on the current client's workers when there is one (through
    :func:`~mkrk_dask.passes.run_pass`, as every distributed pass: lost work resubmitted, a
    lost scheduler reported), each block checked for NaN, infinity and overflow (``index``
    names the view in the error); only ``2 s`` numbers per row come back.
    """
    n = int(view.shape[0])
    out = np.empty((n, 2 * s))
    bounds = row_bounds(n, BLOCK_ROWS)
    client = current_client() if is_lazy(view) else None
    if client is None:
        rows = view.tocsr() if sp.issparse(view) else view
        lazy = is_lazy(view)
        for a, b in bounds:
            block = read_rows(rows, a, b, (index, a, b)) if lazy else rows[a:b]
            out[a:b] = _block_nearest(block, anchors, s, angular)
    else:
        source = RowSource(client, view, view=index)
        shared = Shared(client, anchors)

        def submit(i: int) -> Any:
            return client.submit(_nearest_task, source.block(*bounds[i]), shared.ref, s,
                                 angular, pure=False)

        def combine(i: int, value: np.ndarray) -> None:
            out[slice(*bounds[i])] = value

        try:
            run_pass(client, len(bounds), submit, combine, label="nearest anchors",
                     max_in_flight=2 * client_threads(client))
        finally:
            source.release()
            shared.release()
    return out[:, :s].astype(np.int64), out[:, s:]


def _weights(nearest: np.ndarray, sq_dist: np.ndarray, width: float,
             column_scale: np.ndarray | None) -> np.ndarray:
    """The rows of Z (or F, with ``column_scale``) on their nearest anchors, (n, s).

    The weights are shifted by each row's smallest squared distance before ``exp``: the same
    weights once normalised, without the underflow to 0/0 of a row far from every anchor
    relative to the width (a view with columns of very different scales).
    """
    weights = np.exp(-(sq_dist - sq_dist.min(axis=1, keepdims=True)) / width)
    weights /= weights.sum(axis=1, keepdims=True)
    if column_scale is not None:
        weights *= column_scale[nearest]
    return weights


def factor_rows(nearest: np.ndarray, weights: np.ndarray, n_anchors: int) -> sp.csr_matrix:
    """The sparse rows with the entries ``weights`` at the columns ``nearest``."""
    n, s = nearest.shape
    return sp.csr_matrix((weights.ravel(), (np.repeat(np.arange(n), s), nearest.ravel())),
                         shape=(n, n_anchors))


def embed_neighbours(parts: list[tuple[np.ndarray, np.ndarray]], sizes: list[int],
                     projection: np.ndarray) -> np.ndarray:
    """``F @ projection`` for F the averaged graph's factor (:func:`graph_factor`) given by
    its non-zeros: every view's :meth:`ViewGraph.neighbour_weights` (``sizes``: its
    anchors), their anchors in order down ``projection``'s rows. A gather of ``s`` rows of
    ``projection`` per row and view, without a sparse matrix: labelling millions of rows,
    building one cost about as much as the nearest anchors. Fit and predict both embed rows
    so: a training row embeds to the same bits."""
    out = np.zeros((parts[0][0].shape[0], projection.shape[1]))
    offset = 0
    for (nearest, weights), size in zip(parts, sizes, strict=True):
        out += np.einsum("is,isk->ik", weights, projection[offset:offset + size][nearest])
        offset += size
    out /= np.sqrt(len(parts))
    return out


def _auto_is_angular(view: Any) -> bool:
    """Whether ``geometry="auto"`` takes the angle: no value of the view is negative, and its
    rows point in more than one direction (one column, or proportional ones, would put every
    row on one point). A lazy view is judged on a sample of rows, as the default
    dictionary's geometry is; the directions on a sample at any size."""
    sample = sample_rows(view)  # one read of a lazy view serves both questions
    if float((sample if is_lazy(view) else view).min()) < 0:
        return False
    return directions_differ(sample)


def fit_view_graph(view: Any, n_anchors: int, n_neighbors: int, geometry: str,
                   random_state: Any, index: int = 0, max_iter: int = 100
                   ) -> tuple[ViewGraph, tuple[np.ndarray, np.ndarray]]:
    """One view's anchors, learned from at most :data:`ANCHOR_SAMPLE_ROWS` rows, and the
    rows of its factor F (one pass over the view) by their non-zeros, as
    :meth:`ViewGraph.neighbour_weights` gives them.

    ``n_anchors`` is capped at half the rows, so that an anchor stands for two rows at least.
    """
    angular = geometry == "angular" or (geometry == "auto" and _auto_is_angular(view))
    rows = _geometry_rows(sample_rows(view, ANCHOR_SAMPLE_ROWS), angular)
    if not np.isfinite(rows.data if sp.issparse(rows) else rows).all():
        raise ValueError(f"view {index}: the data contain NaN or infinity (found in the rows "
                         "the anchors are learned from); clean them first")
    m = min(n_anchors, view.shape[0] // 2)
    rng = check_random_state(random_state)
    # seeded as scikit-learn's mini-batch k-means seeds itself (greedy k-means++ on at most
    # three batches of rows, or three rows an anchor), by our own loop: scikit-learn's checks
    # at each of a thousand steps were most of a small fit's graph
    pool_size = max(SEED_ROWS, 3 * m)
    seed_rows = (np.sort(rng.choice(rows.shape[0], pool_size, replace=False))
                 if rows.shape[0] > pool_size else slice(None))
    pool = rows[seed_rows]
    init = pool[kmeanspp_order(pool, m, rng, local_trials=2 + int(np.log(m)))]
    # only the centres serve: the rows' labels (a last pass over them all) are not computed
    anchors = MiniBatchKMeans(m, init=init.toarray() if sp.issparse(init) else init, n_init=1,
                              batch_size=BATCH_ROWS, max_iter=max_iter, compute_labels=False,
                              random_state=rng).fit(rows).cluster_centers_
    anchors = np.ascontiguousarray(anchors, dtype=np.float64)
    nearest, sq_dist = nearest_anchors(view, anchors, n_neighbors, angular, index=index)
    # the median squared distance; a positive width where most rows sit on an anchor
    width = float(np.median(sq_dist))
    if not width > 0:
        width = float(sq_dist.mean()) if sq_dist.mean() > 0 else 1.0
    weights = _weights(nearest, sq_dist, width, None)
    degrees = np.bincount(nearest.ravel(), weights=weights.ravel(), minlength=m)
    # An anchor no row chose has no degree and no column in the graph.
    column_scale = np.divide(1.0, np.sqrt(degrees), out=np.zeros(m), where=degrees > 0)
    weights *= column_scale[nearest]  # as neighbour_weights scales them: the same bits
    return ViewGraph(anchors, angular, width, column_scale, n_neighbors), (nearest, weights)


def graph_factor(factors: list[sp.csr_matrix]) -> sp.csr_matrix:
    """F of the views' averaged graphs: the views' factors side by side, scaled by
    ``1 / sqrt(views)`` so that the graph's eigenvalues stay in [0, 1]."""
    return (sp.hstack(factors).tocsr() / np.sqrt(len(factors))).tocsr()
