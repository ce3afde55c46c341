"""Kernel weights from how far the views agree: the default's weights on three or more views.

Each view is clustered on its own (spectral kernel k-means on the equal combination of its
kernels), and a view's score is the mean adjusted mutual information of its partition with
the other views' partitions. Each kernel's weight is its view's score (normalised to sum to 1),
so that views of equal scores keep the method's equal weights, and ``K_w = sum_p w_p^2 K_p``
holds a view in proportion to its score squared, relative to equal weights. A view of pure
noise, or real data that belong to other samples (a shuffled copy), agrees with no other view
(adjusted: about 0 where the agreement is chance) and drops out; views that tell the same
story keep their share. The method's own weights cannot do this: MKKM-RK's weights barely
move when such a view is added
(``benchmarks/results/defaults/defaults_folds.md``, the noise-view table).

Where no view agrees with another (every score 0), the weights stay equal. With two views
the score is one number for both, so the plan applies the rule from three views up
(:data:`MIN_VIEWS`).
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import combinations
from typing import Any

import numpy as np
from sklearn.metrics import adjusted_mutual_info_score
from sklearn.utils import check_random_state

from .assignment import assign_clusters

__all__ = ["ViewAgreement", "agreement_weights", "MIN_VIEWS", "AGREEMENT_SAMPLE_ROWS",
           "AGREEMENT_INITS"]

#: views from which the default weighs them by their agreement
MIN_VIEWS = 3
#: rows a view's partition and the agreement are measured on, at most (a uniform sample):
#: the adjusted mutual information of 10,000 rows tells chance from agreement well
AGREEMENT_SAMPLE_ROWS = 10_000
#: k-means restarts of a view's own partition: a coarse partition is enough to agree or not
AGREEMENT_INITS = 3


@dataclass(frozen=True)
class ViewAgreement:
    """The views' agreement and the kernel weights it gives.

    Attributes
    ----------
    agreement : ndarray of shape (n_views, n_views)
        Adjusted mutual information of the views' own partitions (1 on the diagonal).
    view_weights : ndarray of shape (n_views,)
        Each view's share of the weight: the sum of its kernels' (they sum to 1).
    weights : ndarray of shape (n_kernels,)
        Each kernel's weight: its view's score, over the sum of every kernel's (equal weights
        where the views' scores are equal).
    """

    agreement: np.ndarray
    view_weights: np.ndarray
    weights: np.ndarray


def view_scores(agreement: np.ndarray) -> np.ndarray:
    """Each view's mean agreement with the others, negative (worse than chance) read as 0."""
    n_views = agreement.shape[0]
    off = np.clip(agreement, 0.0, None) * (1.0 - np.eye(n_views))
    return off.sum(axis=1) / max(n_views - 1, 1)


def agreement_weights(backend: Any, kernel_views: list[int], n_clusters: int,
                      random_state: Any = None) -> ViewAgreement:
    """The weights of the kernels of ``backend`` from the agreement of the views' own
    partitions (``kernel_views[p]``: the view kernel ``p`` reads). One eigendecomposition and
    one k-means of at most :data:`AGREEMENT_SAMPLE_ROWS` rows per view."""
    view_of = np.asarray(kernel_views)
    views = np.unique(view_of)
    rng = check_random_state(random_state)
    labels = []
    rows = None
    for view in views:
        mine = view_of == view
        top = backend.top_k(mine / mine.sum(), n_clusters)
        H = np.asarray(backend.draft_embedding(top))
        if rows is None:
            n = H.shape[0]
            rows = (np.arange(n) if n <= AGREEMENT_SAMPLE_ROWS else
                    np.sort(rng.choice(n, AGREEMENT_SAMPLE_ROWS, replace=False)))
        labels.append(assign_clusters(H[rows], n_clusters, n_init=AGREEMENT_INITS,
                                      step="spectral", random_state=rng))
    agreement = np.eye(views.size)
    for a, b in combinations(range(views.size), 2):
        agreement[a, b] = agreement[b, a] = adjusted_mutual_info_score(labels[a], labels[b])
    scores = view_scores(agreement)
    if scores.sum() <= 0:
        scores = np.ones(views.size)
    # Each kernel takes its view's score, so that views that agree alike keep the method's
    # equal weights exactly: a view's share then grows with its kernels, as with equal weights.
    # (Shared out per view instead, a view of one kernel beside views of four held it at 16x
    # each of theirs in K_w = sum w_p^2 K_p: a noise view added to mv:Movies, and weighed at
    # zero, still cost 8 NMI by turning the other two views' 4 : 1 into 1 : 4.)
    index = np.searchsorted(views, view_of)
    weights = scores[index] / scores[index].sum()
    view_weights = np.bincount(index, weights=weights, minlength=views.size)
    return ViewAgreement(agreement=agreement, view_weights=view_weights, weights=weights)
