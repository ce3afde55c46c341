"""The final step of a fit, as its plan says: the embedding of the learned kernel, its k-means
partition and, where planned, that partition refined on an anchor graph of the same rows.

``final_step="spectral"`` (the paper's) clusters the unit rows of the top-k eigenvectors H.
``final_step="features"`` clusters the unit rows of the features ``V sqrt(mu)`` of the top
``n_components`` eigenpairs (a low-rank kernel k-means); its graph is built on the features
as they are (:func:`~mkrk_dask.assignment.graph_rows`). What ``"auto"`` means is decided in
:mod:`mkrk_dask.plan`, not here.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import scipy.sparse as sp
from sklearn.utils import check_random_state

from .._threads import single_blas_thread
from ..assignment import FINAL_CLUSTERINGS, assign_clusters, graph_rows
from ..exceptions import DisconnectedGraphWarning
from ..plan import (
    GRAPH_ANCHOR_ITERATIONS,
    GRAPH_CLEAR_GAP,
    GRAPH_CLEAR_ROWS,
    GRAPH_MIN_AGREEMENT,
    GRAPH_NEIGHBORS,
    FitPlan,
)
from ._anchor_graph import DISCONNECTED_TOL, AnchorGraphClustering, _connected_parts

#: rows per block of the graph's labels of the rows it was not built on
_BLOCK_ROWS = 65536

__all__ = ["FINAL_CLUSTERINGS", "GRAPH_MIN_AGREEMENT", "GRAPH_NEIGHBORS", "final_embedding",
           "kmeans_partition", "graph_partition", "clear_parts", "more_parts", "parts_apart",
           "anchor_weights", "kmeans_dtype"]


def kmeans_dtype(plan: FitPlan) -> np.dtype:
    """float32 rows for the final k-means where the plan stores float32 on a scaled backend:
    at millions of rows its copy of H, and scikit-learn's temporaries of the same size, set
    the fit's peak memory. ``predict``'s centres are polished in float64."""
    if plan.solver != "exact" and np.dtype(plan.dtype) == np.float32:
        return np.dtype(np.float32)
    return np.dtype(np.float64)


def final_embedding(plan: FitPlan, backend: Any, result: Any) -> tuple[Any, np.ndarray]:
    """``(top, rows)``: the eigenpairs of the learned kernel at the plan's rank and the rows
    the final k-means sees before any unit scaling (``H``, or its features ``H sqrt(mu)``).

    The spectral step at rank k reuses the loop's last eigenvectors, and every step reuses
    the first H-step's where the loop made it at the plan's rank and ended at its weights
    (:func:`~mkrk_dask.solver.alternate`); otherwise one eigendecomposition is made. Run
    inside the backend's ``with`` block."""
    limit = backend.max_rank(result.weights)
    shared = result.final_top
    if plan.final_step == "spectral" and plan.n_components == result.top.eigenvalues.size:
        top = result.top
    else:
        rank = plan.n_components
        if limit is not None and rank > limit:
            if plan.decision("n_components").auto:
                rank = max(1, limit)  # the Nystrom factors hold fewer components
            else:
                raise ValueError(f"n_components={rank}, but the kernels with nonzero weight "
                                 f"have only {limit} Nystrom components; use more landmarks "
                                 "(backend_options={'n_landmarks': ...}) or fewer components")
        if shared is not None and shared.eigenvalues.size == rank:
            top = shared
        else:
            top = backend.top_k(result.weights, rank)
            top.weights = np.array(result.weights)
    vectors = backend.draft_embedding(top)  # n x r, owned here
    if plan.final_step == "features":
        vectors *= np.sqrt(np.maximum(top.eigenvalues, 0.0))[None, :]  # in place
    return top, vectors


def kmeans_partition(plan: FitPlan, rows: np.ndarray, *, n_clusters: int, n_init: int,
                     random_state: Any) -> np.ndarray:
    """The k-means partition of the final rows (their unit rows for the spectral step)."""
    return assign_clusters(rows, n_clusters, n_init=n_init, step=plan.final_step,
                           dtype=kmeans_dtype(plan),
                           random_state=check_random_state(random_state))


def graph_partition(plan: FitPlan, rows: np.ndarray, labels: np.ndarray, *, n_clusters: int,
                    n_init: int, random_state: Any) -> tuple[np.ndarray, dict[str, Any]]:
    """The partition of the final rows by spectral clustering on their anchor graph
    (:class:`~mkrk_dask.AnchorGraphClustering`, the plan's anchors, :data:`GRAPH_NEIGHBORS`
    neighbours, Euclidean), kept where it agrees with the k-means partition ``labels`` (NMI
    at least :data:`GRAPH_MIN_AGREEMENT`) or where the graph clearly has ``n_clusters``
    parts (:func:`clear_parts`): k-means assumes convex clusters in the embedding, the graph
    follows curved ones. Returns the labels kept and the fitted attributes
    ``final_clustering_``, ``final_graph_`` (None where k-means is kept),
    ``final_graph_agreement_``, ``final_graph_clear_`` and ``final_graph_extra_parts_``."""
    from sklearn.metrics import normalized_mutual_info_score

    if plan.final_clustering != "graph":
        return labels, {"final_clustering_": "kmeans", "final_graph_": None,
                        "final_graph_agreement_": None, "final_graph_clear_": None,
                        "final_graph_extra_parts_": None}
    graph = AnchorGraphClustering(
        n_clusters, n_anchors=plan.graph_anchors, n_neighbors=GRAPH_NEIGHBORS,
        geometry="euclidean", n_init=n_init, anchor_max_iter=GRAPH_ANCHOR_ITERATIONS,
        random_state=random_state)
    n = rows.shape[0]
    sampled = plan.graph_rows < n
    if sampled:
        rng = np.random.default_rng(random_state if isinstance(random_state, int) else 0)
        sample = np.sort(rng.choice(n, plan.graph_rows, replace=False))
        fitted_rows = rows[sample]
    else:
        fitted_rows = rows
    fitted_rows = graph_rows(fitted_rows, plan.final_step)
    with warnings.catch_warnings(), single_blas_thread():
        # disconnected parts are judged below; the final rows have 2k
        # columns at most, so that every product of the graph is thin: a second BLAS thread
        # only waits
        warnings.simplefilter("ignore", DisconnectedGraphWarning)
        graph.fit(fitted_rows)
    if sampled:  # the other rows labelled by the graph, a block at a time
        graph_labels = np.concatenate([
            graph.predict(graph_rows(rows[a:a + _BLOCK_ROWS], plan.final_step))
            for a in range(0, n, _BLOCK_ROWS)])
    else:
        graph_labels = graph.labels_.copy()
    agreement = float(normalized_mutual_info_score(labels, graph_labels))
    clear = clear_parts(graph.eigenvalues_, graph_labels, n_clusters)
    # more disconnected parts than clusters: which of them the graph joined is arbitrary, not
    # a refinement (tight clusters, each its own few anchors) ...
    extra_parts = more_parts(graph.eigenvalues_, n_clusters)
    if extra_parts:  # ... unless all but k of them are a few stray rows
        clear = parts_apart(anchor_weights(graph, fitted_rows), graph.labels_, n_clusters)
    del fitted_rows
    fitted = {"final_graph_agreement_": agreement, "final_graph_clear_": clear,
              "final_graph_extra_parts_": extra_parts}
    if not clear and (extra_parts or agreement < GRAPH_MIN_AGREEMENT):
        return labels, {"final_clustering_": "kmeans", "final_graph_": None, **fitted}
    return graph_labels, {"final_clustering_": "graph", "final_graph_": graph, **fitted}


def clear_parts(eigenvalues: np.ndarray, labels: np.ndarray, n_clusters: int) -> bool:
    """Whether a graph clearly has ``n_clusters`` parts, and its partition is them: the
    eigengap of spectral clustering, its normalised Laplacian's ``n_clusters``-th smallest
    eigenvalue ``1 - eigenvalues[k-1]`` at most :data:`GRAPH_CLEAR_GAP` times the next,
    and no cluster of ``labels`` smaller than :data:`GRAPH_CLEAR_ROWS` rows (a tiny clump
    apart from the rest makes such a gap too). The next must be above the tolerance the
    graph counts a part with no edge to the rest with: more such parts than clusters leave
    the join arbitrary, unless all but k of them are a few stray rows (:func:`parts_apart`
    decides that case)."""
    kth = 1.0 - float(eigenvalues[n_clusters - 1])
    following = 1.0 - float(eigenvalues[n_clusters])
    if more_parts(eigenvalues, n_clusters) or kth > GRAPH_CLEAR_GAP * following:
        return False
    return int(np.bincount(labels, minlength=n_clusters).min()) >= GRAPH_CLEAR_ROWS


def more_parts(eigenvalues: np.ndarray, n_clusters: int) -> bool:
    """Whether a graph has more parts with no edge to the rest than ``n_clusters``: its
    ``n_clusters + 1``-th largest eigenvalue within ``DISCONNECTED_TOL`` of 1."""
    return bool(eigenvalues[n_clusters] >= 1.0 - DISCONNECTED_TOL)


def anchor_weights(graph: Any, rows: np.ndarray) -> sp.csr_matrix:
    """Z of a one-view anchor graph: every row's weights on its nearest anchors (they sum to
    1), that is its factor F without the anchors' degree scaling."""
    (view_graph,) = graph.view_graphs_
    scale = view_graph.column_scale
    inverse = np.divide(1.0, scale, out=np.zeros_like(scale), where=scale > 0)
    return (view_graph.factor(rows) @ sp.diags(inverse)).tocsr()


def parts_apart(weights: sp.csr_matrix, labels: np.ndarray, n_clusters: int) -> bool:
    """Whether a graph's rows fall into exactly ``n_clusters`` parts of at least
    :data:`GRAPH_CLEAR_ROWS` rows with no edge between any two, each part wholly in its own
    cluster of ``labels``, and fewer than :data:`GRAPH_CLEAR_ROWS` rows in all in smaller
    parts: k parts clearly apart, beside a few stray rows (points of two moons far from
    every anchor but one), which make more disconnected parts than clusters.

    ``weights``: the rows' weights on the anchors (:func:`anchor_weights`). A weight below
    ``DISCONNECTED_TOL`` times its row's largest is no edge: a part joined to the rest by no
    more moves the graph's eigenvalue by less than that tolerance, the one the graph counts
    disconnected parts with."""
    strong = weights.tocsr(copy=True)
    largest = strong.max(axis=1).toarray().ravel()
    strong.data[strong.data < DISCONNECTED_TOL * np.repeat(largest, np.diff(strong.indptr))] = 0
    strong.eliminate_zeros()
    # the anchors' parts, as the graph counts them; a row is in the part of its strongest
    # anchor (which all its remaining anchors share: the row joins them)
    _, anchor_part = _connected_parts((strong.T @ strong).tocsr())
    row_part = anchor_part[np.asarray(strong.argmax(axis=1)).ravel()]
    sizes = np.bincount(row_part)
    large = np.flatnonzero(sizes >= GRAPH_CLEAR_ROWS)
    if large.size != n_clusters or row_part.size - int(sizes[large].sum()) >= GRAPH_CLEAR_ROWS:
        return False
    # each large part wholly in one cluster, and no two in the same: k (part, cluster) pairs
    # with k different clusters
    in_large = np.isin(row_part, large)
    pairs = np.unique(np.c_[row_part[in_large], labels[in_large]], axis=0)
    return pairs.shape[0] == n_clusters and np.unique(pairs[:, 1]).size == n_clusters
