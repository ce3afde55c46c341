"""The final step of a fit: the embedding of the learned kernel and its k-means partition.

``final_step="spectral"`` (the paper's) clusters the unit rows of the top-k eigenvectors H.
``final_step="features"`` clusters the features ``V sqrt(mu)`` of the top ``n_components``
eigenpairs; ``n_components="auto"`` computes the largest candidate rank once and keeps the
partition that agrees most with those of the other ranks (:mod:`mkrk_dask.consensus`).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from sklearn.utils import check_random_state

from ..assignment import assign_clusters
from ..consensus import candidate_components, choose_partition, within_share

__all__ = ["component_candidates", "final_embedding"]


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


def final_embedding(estimator: Any, backend: Any, result: Any, n_samples: int
                    ) -> tuple[Any, np.ndarray, np.ndarray, dict[str, Any]]:
    """``(top, embedding, labels, fitted)`` of the final step; ``fitted`` holds the
    estimator's ``n_components_`` and ``component_scores_`` (one entry per rank tried, the
    spectral step's k included: the default dictionary compares geometries by its
    within-cluster share).

    Run inside the backend's ``with`` block: the backend's checks of its input may still be
    running (the k-means here runs while they end), so the caller sets nothing on the
    estimator before leaving the block, which waits for them."""
    def cluster(rows: np.ndarray) -> np.ndarray:
        # The same seed for every candidate: the chosen one's labels are what a fit with its
        # rank given explicitly returns.
        return assign_clusters(rows, estimator.n_clusters, n_init=estimator.n_init,
                               step=estimator.final_step, dtype=estimator._kmeans_dtype(),
                               random_state=check_random_state(estimator.random_state))

    spectral = estimator.final_step == "spectral"
    if spectral:
        top = result.top  # the loop's top-k eigenvectors: no other rank is tried
        ranks = [top.eigenvalues.size]
    else:
        ranks = component_candidates(estimator, n_samples, backend.max_rank(result.weights))
        top = backend.top_k(result.weights, ranks[-1])
        top.weights = np.array(result.weights)
    embedding = backend.draft_embedding(top)
    if not spectral:
        embedding *= np.sqrt(np.maximum(top.eigenvalues, 0.0))[None, :]  # in place: n x r
    partitions = [cluster(embedding[:, :rank]) for rank in ranks]
    best, agreement = choose_partition(partitions)
    fitted = {"component_scores_": {
        rank: {"agreement": float(agreement[i]),
               "within_share": within_share(embedding[:, :rank], partitions[i])}
        for i, rank in enumerate(ranks)}, "n_components_": ranks[best]}
    rank = ranks[best]
    if rank < embedding.shape[1]:
        top = top.leading(rank)
        embedding = np.ascontiguousarray(embedding[:, :rank])
    return top, embedding, partitions[best], fitted
