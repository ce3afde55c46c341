"""The final stage of a fit, as its plan says: :class:`FinalPartition` makes the embedding of
the learned kernel, its k-means partition and, where planned, that partition refined on an
anchor graph of the same rows; it decides which is kept, and returns it all as one
:class:`FinalResult`.

``final_step="spectral"`` (the paper's) clusters the unit rows of the top-k eigenvectors H.
``final_step="features"`` clusters the unit rows of the features ``V sqrt(mu)`` of the top
``n_components`` eigenpairs (a low-rank kernel k-means); its graph is built on the features
as they are (:func:`~mkrk_dask.assignment.graph_rows`). What ``"auto"`` means is decided in
:mod:`mkrk_dask.plan`, not here. The graph's keep rule reads this module's names at call time
(:data:`GRAPH_MIN_AGREEMENT`, :data:`GRAPH_CLEAR_ROWS`, :func:`parts_apart`), which tests and
``benchmarks/bench_toy_shapes.py`` replace to switch a rule off.
"""

from __future__ import annotations

import time
import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.sparse as sp
from sklearn.utils import check_random_state

from .. import progress
from .._threads import local_threads, single_blas_thread
from ..assignment import (
    FINAL_CLUSTERINGS,
    RowLabels,
    assign_clusters,
    cluster_means,
    graph_rows,
    lloyd_centres,
)
from ..exceptions import DisconnectedGraphWarning
from ..passes import uniform_row_mask
from ..plan import (
    GRAPH_ANCHOR_ITERATIONS,
    GRAPH_CLEAR_GAP,
    GRAPH_CLEAR_ROWS,
    GRAPH_MIN_AGREEMENT,
    GRAPH_NEIGHBORS,
    FitPlan,
    final_rank,
    reference_inits,
)
from ._anchor_graph import DISCONNECTED_TOL, AnchorGraphClustering, _connected_parts

#: rows per block of the graph's labels of the rows it was not built on
_BLOCK_ROWS = 65536

__all__ = ["FINAL_CLUSTERINGS", "GRAPH_MIN_AGREEMENT", "GRAPH_NEIGHBORS", "FinalPartition",
           "FinalResult", "GraphVerdict", "clear_parts", "more_parts", "parts_apart",
           "anchor_weights", "kmeans_dtype"]


def kmeans_dtype(plan: FitPlan) -> np.dtype:
    """float32 rows for the final k-means where the plan stores float32 on a scaled backend:
    at millions of rows its copy of H, and scikit-learn's temporaries of the same size, set
    the fit's peak memory. ``predict``'s centres are polished in float64."""
    if plan.solver != "exact" and np.dtype(plan.dtype) == np.float32:
        return np.dtype(np.float32)
    return np.dtype(np.float64)


@dataclass(frozen=True)
class GraphVerdict:
    """What the final anchor graph showed, and whether its partition was kept.

    ``clustering``: ``"graph"`` or ``"kmeans"``, the partition kept; ``graph``: the fitted
    :class:`~mkrk_dask.AnchorGraphClustering` where its partition is kept, else None;
    ``agreement``: its partition's NMI with the k-means one; ``clear``: it clearly has k
    parts (:func:`clear_parts`, :func:`parts_apart`); ``extra_parts``: it has more parts with
    no edge to the rest than clusters (:func:`more_parts`). The last three are None where no
    graph was planned. ``reason``: the decision in words."""

    clustering: str
    graph: Any
    agreement: float | None
    clear: bool | None
    extra_parts: bool | None
    reason: str


@dataclass(frozen=True)
class FinalResult:
    """What :meth:`FinalPartition.run` made: the fit's final stage, whole.

    Attributes
    ----------
    top : TopK
        The eigenpairs of the learned kernel the embedding is made of.
    embedding : ndarray of shape (n_samples, n_components)
        The final rows (``H``, or the features ``H sqrt(mu)``), before any unit scaling.
    feature_scale : ndarray or None
        ``sqrt(mu)`` that scales the columns of the features (``final_step="features"``).
    labels : ndarray of shape (n_samples,)
        The partition kept (polished by Lloyd steps where it is the k-means one and there
        are centres).
    verdict : GraphVerdict
        The graph's partition against the k-means one, and which was kept.
    row_map : object or None
        The backend's map of new rows to the embedding (feature input only).
    centres : ndarray or None
        The learned centres ``predict`` uses (where there is a row map).
    n_labels_polished : int or None
        Labels the Lloyd steps of the centres moved.
    marks : tuple of (str, float)
        ``(stage, time.perf_counter() at its end)`` for the stages run (``embedding``,
        ``kmeans``, ``graph``; ``kmeans`` again where the graph is not kept; ``embedding``
        again for the pass that labels every row where the partition was fitted on a
        sample).
    cluster_forms : ndarray of shape (n_kernels,) or None
        The clusters' quadratic forms of every kernel
        (:meth:`~mkrk_dask.backends.KernelBackend.cluster_quad_forms` of ``labels``), where
        the pass that labelled the rows summed them; None: not yet made.
    fitted_rows : int or None
        The rows of the uniform sample the partition was fitted on (the plan's
        ``final_rows``); None: every row.
    """

    top: Any
    embedding: np.ndarray
    feature_scale: np.ndarray | None
    labels: np.ndarray
    verdict: GraphVerdict
    row_map: Any
    centres: np.ndarray | None
    n_labels_polished: int | None
    marks: tuple[tuple[str, float], ...]
    cluster_forms: np.ndarray | None = None
    fitted_rows: int | None = None


class FinalPartition:
    """The final stage of a fit: the embedding of the learned kernel at the plan's rank, its
    k-means partition and, where the plan says ``final_clustering="graph"``, the partition of
    its anchor graph, kept or not (:meth:`graph_verdict`); then the centres ``predict`` uses.

    Parameters
    ----------
    plan : FitPlan
        Read for ``final_step``, ``n_components`` (and whether it was ``"auto"``),
        ``final_clustering``, ``graph_anchors``, ``graph_rows``, ``solver`` and ``dtype``.
    n_clusters, n_init, random_state
        The estimator's.
    name : str
        The estimator's, for the progress stages (``"[MKKMRK]"``).
    """

    def __init__(self, plan: FitPlan, n_clusters: int, n_init: int, random_state: Any,
                 name: str = "") -> None:
        self.plan = plan
        self.n_clusters = n_clusters
        self.n_init = n_init
        self.random_state = random_state
        self.name = name

    def run(self, backend: Any, loop: Any) -> FinalResult:
        """The final stage on ``backend`` (inside its ``with`` block) after the loop's
        ``loop`` (a :class:`~mkrk_dask.loop.SolverResult`).

        The embedding and the first k-means run on the backend's threads
        (:meth:`~mkrk_dask.backends.KernelBackend.compute_threads`); the first k-means has
        :func:`~mkrk_dask.plan.reference_inits` restarts, and where a planned graph is not
        kept with fewer than ``n_init`` of them it is made again with ``n_init``."""
        plan, name, marks = self.plan, self.name, []

        def mark(stage: str) -> None:
            marks.append((stage, time.perf_counter()))

        sample = uniform_row_mask(backend.n_samples, plan.options.get("final_rows"),
                                  self.random_state)
        with local_threads(backend.compute_threads()):
            with progress.stage(f"{name} embedding" + ("" if sample is None else
                                                       " of the sampled rows")):
                top, rows = self.embedding(backend, loop, sample)
            mark("embedding")
            with progress.stage(f"{name} final k-means"):
                first = reference_inits(plan.final_clustering, self.n_init)
                labels = self.kmeans(rows, first)
            mark("kmeans")
        # The small map of new rows to H that predict/transform use, where one exists.
        row_map = backend.row_map(top)
        with progress.stage(f"{name} anchor graph"):
            labels, verdict = self.graph_verdict(rows, labels)
        mark("graph")
        if verdict.clustering == "kmeans" and first < self.n_init:
            with progress.stage(f"{name} final k-means"):
                labels = self.kmeans(rows, self.n_init)
            mark("kmeans")
        feature_scale = (np.sqrt(np.maximum(top.eigenvalues, 0.0))
                         if plan.final_step == "features" else None)
        centres = polished = forms = None
        if sample is not None:  # every row labelled by the sample's partition, in one pass
            with progress.stage(f"{name} embedding, labels and cluster sums"):
                rows, labels, forms, centres, polished = self.label_rows(
                    backend, top, rows, labels, verdict.graph, feature_scale, sample)
            mark("embedding")
        elif row_map is not None:  # the centres predict uses (feature input)
            centres, labels, polished = self.centres(rows, labels, verdict.graph is not None)
        if row_map is not None and plan.solver == "nystrom":
            # The Nystrom map also predicts by itself (a saved model needs nothing else),
            # where the centres decide (not the final graph's partition).
            row_map.centres = centres if verdict.graph is None else None
            row_map.feature_scale = feature_scale
            row_map.n_labels_polished = polished
        return FinalResult(top=top, embedding=rows, feature_scale=feature_scale, labels=labels,
                           verdict=verdict, row_map=row_map, centres=centres,
                           n_labels_polished=polished, marks=tuple(marks), cluster_forms=forms,
                           fitted_rows=None if sample is None else int(sample.sum()))

    def label_rows(self, backend: Any, top: Any, rows: np.ndarray, labels: np.ndarray,
                   graph: Any, feature_scale: np.ndarray | None, sample: np.ndarray
                   ) -> tuple:
        """Every row labelled by the partition of the sample's ``rows`` (the rows of the
        boolean mask ``sample``; their ``labels``, which they keep: the final ``graph``'s
        where it was kept, else those of the sample's centres polished by Lloyd steps on
        it): :meth:`~mkrk_dask.backends.KernelBackend.labelled_embedding` makes every row
        of H, its label and the sampled rows' cluster sums for the inertia in one pass.
        Returns ``(embedding, labels, cluster_forms, centres, n_labels_polished)``, the
        polished count the sample's."""
        centres = polished = None
        if graph is None:  # the sample's centres label every row
            centres, labels, polished = self.centres(rows, labels, False)
        assign = RowLabels(self.plan.final_step, feature_scale, centres=centres, graph=graph)
        H, labels, forms = backend.labelled_embedding(top, assign, self.n_clusters, sample,
                                                      labels)
        if feature_scale is not None:
            H *= feature_scale[None, :]  # in place, as embedding() scales its rows
        if graph is not None:  # the means of the graph's clusters over every row
            centres, _, polished = self.centres(H, labels, True)
        return H, labels, forms, centres, polished

    def embedding(self, backend: Any, loop: Any, sample: np.ndarray | None = None
                  ) -> tuple[Any, np.ndarray]:
        """``(top, rows)``: the eigenpairs of the learned kernel at the plan's rank and the
        rows the final k-means sees before any unit scaling (``H``, or its features
        ``H sqrt(mu)``); with ``sample`` (a boolean mask), of the sampled rows only.

        The spectral step at rank k reuses the loop's last eigenvectors, and every step
        reuses the first H-step's where the loop made it at the plan's rank and ended at its
        weights (:func:`~mkrk_dask.loop.alternate`); otherwise one eigendecomposition is
        made."""
        plan = self.plan
        limit = backend.max_rank(loop.weights)
        shared = loop.final_top
        if plan.final_step == "spectral" and plan.n_components == loop.top.eigenvalues.size:
            top = loop.top
        else:
            rank = final_rank(plan.n_components, plan.decision("n_components").auto, limit)
            if shared is not None and shared.eigenvalues.size == rank:
                top = shared
            else:
                top = backend.top_k(loop.weights, rank)
                top.weights = np.array(loop.weights)
        vectors = (backend.draft_embedding(top) if sample is None else
                   backend.sample_embedding(top, sample))  # n x r, owned here
        if plan.final_step == "features":
            vectors *= np.sqrt(np.maximum(top.eigenvalues, 0.0))[None, :]  # in place
        return top, vectors

    def kmeans(self, rows: np.ndarray, n_init: int) -> np.ndarray:
        """The k-means partition of the final rows (their unit rows for the spectral step)
        with ``n_init`` restarts."""
        return assign_clusters(rows, self.n_clusters, n_init=n_init, step=self.plan.final_step,
                               dtype=kmeans_dtype(self.plan),
                               random_state=check_random_state(self.random_state))

    def graph_verdict(self, rows: np.ndarray, labels: np.ndarray
                      ) -> tuple[np.ndarray, GraphVerdict]:
        """The partition of the final rows by spectral clustering on their anchor graph
        (:class:`~mkrk_dask.AnchorGraphClustering`, the plan's anchors,
        :data:`GRAPH_NEIGHBORS` neighbours, Euclidean), kept where it agrees with the k-means
        partition ``labels`` (NMI at least :data:`GRAPH_MIN_AGREEMENT`) or where the graph
        clearly has ``n_clusters`` parts (:func:`clear_parts`): k-means assumes convex
        clusters in the embedding, the graph follows curved ones. Returns the labels kept and
        the verdict; without a planned graph, ``labels`` as they are."""
        from sklearn.metrics import normalized_mutual_info_score

        plan, n_clusters, random_state = self.plan, self.n_clusters, self.random_state
        if plan.final_clustering != "graph":
            return labels, GraphVerdict("kmeans", None, None, None, None,
                                        "k-means: no graph planned")
        graph = AnchorGraphClustering(
            n_clusters, n_anchors=plan.graph_anchors, n_neighbors=GRAPH_NEIGHBORS,
            geometry="euclidean", n_init=self.n_init, anchor_max_iter=GRAPH_ANCHOR_ITERATIONS,
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
            # columns at most, so that every product of the graph is thin: a second BLAS
            # thread only waits
            warnings.simplefilter("ignore", DisconnectedGraphWarning)
            graph.fit(fitted_rows)
        if sampled:  # the other rows labelled by the graph, a block at a time
            graph_labels = np.empty(n, dtype=np.int64)
            graph_labels[sample] = graph.labels_
            others = np.setdiff1d(np.arange(n), sample, assume_unique=True)
            for a in range(0, others.size, _BLOCK_ROWS):
                block = others[a:a + _BLOCK_ROWS]
                graph_labels[block] = graph.predict(graph_rows(rows[block], plan.final_step))
        else:
            graph_labels = graph.labels_.copy()
        agreement = float(normalized_mutual_info_score(labels, graph_labels))
        clear = clear_parts(graph.eigenvalues_, graph_labels, n_clusters)
        # more disconnected parts than clusters: which of them the graph joined is
        # arbitrary, not a refinement (tight clusters, each its own few anchors) ...
        extra_parts = more_parts(graph.eigenvalues_, n_clusters)
        if extra_parts:  # ... unless all but k of them are a few stray rows
            clear = parts_apart(anchor_weights(graph, fitted_rows), graph.labels_, n_clusters)
        del fitted_rows
        if clear:
            return graph_labels, GraphVerdict("graph", graph, agreement, clear, extra_parts,
                                              f"graph: it clearly has {n_clusters} parts")
        if extra_parts:
            return labels, GraphVerdict("kmeans", None, agreement, clear, extra_parts,
                                        "k-means: the graph has more parts with no edge "
                                        "between them than clusters")
        if agreement < GRAPH_MIN_AGREEMENT:
            return labels, GraphVerdict("kmeans", None, agreement, clear, extra_parts,
                                        f"k-means: the graph's partition agreed with it at "
                                        f"NMI {agreement:.4f}, below {GRAPH_MIN_AGREEMENT}")
        return graph_labels, GraphVerdict("graph", graph, agreement, clear, extra_parts,
                                          f"graph: NMI {agreement:.4f} with the k-means "
                                          f"partition, from {GRAPH_MIN_AGREEMENT}")

    def centres(self, rows: np.ndarray, labels: np.ndarray, graph: bool
                ) -> tuple[np.ndarray, np.ndarray, int]:
        """The learned centres of the final rows: ``(centres, labels, n_changed)``.

        The means of the final rows per cluster (unit rows for the spectral step), polished
        by Lloyd steps to a fixed point (a border row whose label moves, which k-means run to
        convergence leaves at zero, is counted), so that ``predict`` on the training data
        gives ``labels_``. ``graph``: the final anchor graph partitioned the rows; its
        partition stays as it is (Lloyd steps would pull it back towards convex clusters):
        its centres are the clusters' means of the final rows."""
        step = self.plan.final_step
        if graph:
            return cluster_means(rows, np.asarray(labels), self.n_clusters, step=step), \
                labels, 0
        return lloyd_centres(rows, labels, self.n_clusters, step=step)


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
