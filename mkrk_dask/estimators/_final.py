"""The final step of a fit: the embedding of the learned kernel and its k-means partition.

``final_step="spectral"`` (the paper's) clusters the unit rows of the top-k eigenvectors H.
``final_step="features"`` clusters the features ``V sqrt(mu)`` of the top ``n_components``
eigenpairs; ``n_components="auto"`` computes the largest candidate rank once and keeps the
partition that agrees most with those of the other ranks (:mod:`mkrk_dask.consensus`).
``final_step="auto"`` (the default) puts the spectral embeddings in the same competition: the
unit rows of the top k eigenvectors (the paper's step) and of the top r, for every rank r the
features try. Both kinds come from the one eigendecomposition.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
from sklearn.utils import check_random_state

from ..assignment import FINAL_CLUSTERINGS, assign_clusters, final_rows
from ..consensus import (
    candidate_components,
    choose_partition,
    fits_candidate_bytes,
    within_share,
)
from ..exceptions import DisconnectedGraphWarning

__all__ = ["FINAL_CLUSTERINGS", "GRAPH_MIN_AGREEMENT", "GRAPH_NEIGHBORS", "component_candidates",
           "final_embedding", "fitted_final_step", "graph_partition", "uses_graph"]


def component_candidates(estimator: Any, n_samples: int, limit: int | None = None
                         ) -> list[int]:
    """The ranks the features final step of ``estimator`` tries (one unless
    ``n_components="auto"``), at most ``limit`` (the eigenpairs the backend has for the
    learned weights: Nystrom factors may hold fewer than the larger candidate ranks)."""
    if estimator.n_components == "auto":
        ranks = candidate_components(estimator.n_clusters, n_samples)
        if limit is not None:
            ranks = ([r for r in ranks if r <= limit]
                     or [max(estimator.n_clusters, min(ranks[0], limit))])
        return ranks
    rank = max(1, min(int(estimator.n_components), n_samples - 1))
    if limit is not None and rank > limit:
        raise ValueError(f"n_components={rank}, but the kernels with nonzero weight have only "
                         f"{limit} Nystrom components; use more landmarks (n_landmarks) or "
                         "fewer components")
    return [rank]


def _candidates(estimator: Any, ranks: list[int], n_samples: int) -> list[tuple[str, int]]:
    """``(step, rank)`` of every partition the final step computes, features first (the
    first is kept on a tie of agreement). ``"auto"`` adds the spectral candidates (at ranks of
    k and up) only where the rows of every one fit
    :data:`~mkrk_dask.consensus.CANDIDATE_BYTES` and they make at least three candidates (two
    agree with each other equally: the first would be kept)."""
    if estimator.final_step == "spectral":
        return [("spectral", ranks[0])]
    candidates = [("features", rank) for rank in ranks]
    if estimator.final_step == "auto":
        # never fewer eigenvectors than clusters (see _check_params): none where the ranks
        # given are all below k
        spectral = [r for r in sorted({estimator.n_clusters, *ranks})
                    if estimator.n_clusters <= r <= ranks[-1]]
        if (len(candidates) + len(spectral) >= 3
                and all(fits_candidate_bytes(n_samples, rank) for rank in spectral)):
            candidates += [("spectral", rank) for rank in spectral]
    return candidates


def final_embedding(estimator: Any, backend: Any, result: Any, n_samples: int
                    ) -> tuple[Any, np.ndarray, np.ndarray, dict[str, Any]]:
    """``(top, embedding, labels, fitted)`` of the final step; ``fitted`` holds the
    estimator's ``final_step_``, ``n_components_`` and ``component_scores_`` (per step, one
    entry per rank tried: the default dictionary compares geometries by the within-cluster
    share of the smallest features rank).

    Run inside the backend's ``with`` block: the backend's checks of its input may still be
    running (the k-means here runs while they end), so the caller sets nothing on the
    estimator before leaving the block, which waits for them."""
    dtype = estimator._kmeans_dtype()

    def cluster(rows: np.ndarray, step: str) -> np.ndarray:
        # The same seed for every candidate: the chosen one's labels are what a fit with its
        # step and rank given explicitly returns.
        return assign_clusters(rows, estimator.n_clusters, n_init=estimator.n_init,
                               step=step, dtype=dtype,
                               random_state=check_random_state(estimator.random_state))

    if estimator.final_step == "spectral" and estimator.n_components == "auto":
        top = result.top  # the loop's top-k eigenvectors (the paper's step)
        ranks = [top.eigenvalues.size]
    else:
        ranks = component_candidates(estimator, n_samples, backend.max_rank(result.weights))
        top = backend.top_k(result.weights, ranks[-1])
        top.weights = np.array(result.weights)
    vectors = backend.draft_embedding(top)  # n x r, owned here
    scale = np.sqrt(np.maximum(top.eigenvalues, 0.0))
    candidates = _candidates(estimator, ranks, n_samples)
    partitions: list[Any] = [None] * len(candidates)
    shares: list[float] = [0.0] * len(candidates)
    # The spectral candidates see the eigenvectors as they are; a copy is kept for them only
    # where features are clustered too (bounded: every rank fits CANDIDATE_BYTES then).
    scaled = any(step == "features" for step, _ in candidates)
    unscaled = vectors.copy() if scaled and len(candidates) > len(ranks) else vectors
    if scaled:
        vectors *= scale[None, :]  # in place: n x r
    for i, (step, rank) in enumerate(candidates):
        rows = (vectors if step == "features" else unscaled)[:, :rank]
        partitions[i] = cluster(rows, step)
        shares[i] = within_share(rows, partitions[i],
                                 step="spectral" if step == "spectral" else None)
    best, agreement = choose_partition(partitions)
    step, rank = candidates[best]
    scores: dict[str, dict[int, dict[str, float]]] = {}
    for i, (kind, r) in enumerate(candidates):
        scores.setdefault(kind, {})[r] = {"agreement": float(agreement[i]),
                                          "within_share": shares[i]}
    fitted = {"final_step_": step, "n_components_": rank, "component_scores_": scores}
    if step == "spectral":
        vectors = unscaled
    del unscaled
    if rank < vectors.shape[1]:
        top = top.leading(rank)
        vectors = np.ascontiguousarray(vectors[:, :rank])
    return top, vectors, partitions[best], fitted


def fitted_final_step(estimator: Any) -> str:
    """The step whose embedding a fitted estimator clustered (``final_step_``; a model saved
    before that attribute existed clustered its ``final_step``)."""
    return getattr(estimator, "final_step_", estimator.final_step)


#: neighbours of a row in the final step's graph (scikit-learn's SpectralClustering default for
#: its nearest-neighbour graph)
GRAPH_NEIGHBORS = 10
#: the graph's partition is kept only if its NMI with the k-means partition of the same rows
#: reaches this: a refinement of it, not a different answer (such as one cluster of nearly
#: every row beside tiny ones, split off along the graph's weakest links)
GRAPH_MIN_AGREEMENT = 0.5


def uses_graph(estimator: Any) -> bool:
    """Whether the fit refines its k-means partition on the anchor graph of its final rows:
    ``final_clustering="graph"``, or ``"auto"`` with ``final_step="auto"`` (the label-free
    default; an explicit step, as the paper's configuration gives, keeps k-means)."""
    return estimator.final_clustering == "graph" or (
        estimator.final_clustering == "auto" and estimator.final_step == "auto")


def graph_partition(estimator: Any, embedding: np.ndarray, labels: np.ndarray, step: str
                    ) -> tuple[np.ndarray, dict[str, Any]]:
    """The partition of the final rows (of ``step``) by spectral clustering on their anchor
    graph (:class:`~mkrk_dask.AnchorGraphClustering`, :data:`GRAPH_NEIGHBORS` neighbours,
    Euclidean), kept where it agrees with the k-means partition ``labels`` (NMI at least
    :data:`GRAPH_MIN_AGREEMENT`). The k-means partition assumes convex clusters in the
    embedding; the graph follows curved ones. Returns the labels kept and the fitted
    attributes ``final_clustering_``, ``final_graph_`` (None where k-means is kept) and
    ``final_graph_agreement_``."""
    from sklearn.metrics import normalized_mutual_info_score

    from ._anchor_graph import AnchorGraphClustering

    rows = final_rows(embedding, step)
    n = rows.shape[0]
    if n // 2 < max(estimator.n_clusters, GRAPH_NEIGHBORS):
        return labels, {"final_clustering_": "kmeans", "final_graph_": None,
                        "final_graph_agreement_": None}
    graph = AnchorGraphClustering(
        estimator.n_clusters, n_neighbors=GRAPH_NEIGHBORS, geometry="euclidean",
        n_init=estimator.n_init, random_state=estimator.random_state)
    with warnings.catch_warnings():
        # disconnected parts are judged by the agreement below
        warnings.simplefilter("ignore", DisconnectedGraphWarning)
        graph.fit(rows)
    agreement = float(normalized_mutual_info_score(labels, graph.labels_))
    if agreement < GRAPH_MIN_AGREEMENT:
        return labels, {"final_clustering_": "kmeans", "final_graph_": None,
                        "final_graph_agreement_": agreement}
    return graph.labels_.copy(), {"final_clustering_": "graph", "final_graph_": graph,
                                  "final_graph_agreement_": agreement}
