"""The label-free choice of how many eigenpairs the final k-means sees, and of what it sees.

``final_step="features"`` clusters the features ``V sqrt(mu)`` of the top r eigenpairs of the
combined kernel: a rank-r kernel k-means. No single r suits every data set (measured on the
project's data: r = 2k is best on small text sets, r = 8k on 70,000 images), so by default a few
ranks are tried on the one eigendecomposition and the partition that agrees most with the
others (the highest mean normalised mutual information with them: the consensus criterion of
cluster ensembles, Strehl & Ghosh, JMLR 2002) is kept. Agreement needs no labels, and a rank
whose partition is an outlier among its neighbours is not chosen. ``final_step="auto"`` adds the
unit rows of the top eigenvectors (the paper's spectral step) to the same competition
(:mod:`mkrk_dask.estimators._final`).
"""

from __future__ import annotations

import numpy as np

from .assignment import final_rows
from .metrics import normalized_mutual_info

__all__ = ["COMPONENT_FACTORS", "CANDIDATE_BYTES", "candidate_components", "agreement_scores",
           "choose_partition", "fits_candidate_bytes", "within_share"]

#: ranks tried by ``n_components="auto"``, in multiples of k
COMPONENT_FACTORS = (2, 4, 8)
#: a rank above 2k, and a spectral candidate of ``final_step="auto"``, is tried only if its
#: float64 rows fit in this many bytes (at millions of rows the final step's rows set the
#: fit's peak memory, and each candidate is one more k-means over all rows)
CANDIDATE_BYTES = 256 * 2**20
#: rows per block of :func:`within_share`
_BLOCK_ROWS = 65536


def candidate_components(n_clusters: int, n_samples: int) -> list[int]:
    """The ranks ``n_components="auto"`` tries, ascending: 2k (below n), and 4k and 8k where
    they are at most n / 4 (features stay a summary of the rows, and the iterative
    eigensolvers converge) and their features fit in :data:`CANDIDATE_BYTES`."""
    ranks = [max(n_clusters, min(2 * n_clusters, n_samples - 1))]
    for factor in COMPONENT_FACTORS[1:]:
        rank = factor * n_clusters
        if rank <= n_samples // 4 and fits_candidate_bytes(n_samples, rank):
            ranks.append(rank)
    return ranks


def fits_candidate_bytes(n_samples: int, rank: int) -> bool:
    """Whether ``rank`` columns of float64 rows fit in :data:`CANDIDATE_BYTES`."""
    return n_samples * rank * 8 <= CANDIDATE_BYTES


def agreement_scores(partitions: list[np.ndarray]) -> np.ndarray:
    """Mean NMI of every partition with the others (1 for a single partition)."""
    count = len(partitions)
    if count == 1:
        return np.ones(1)
    nmi = np.eye(count)
    for i in range(count):
        for j in range(i + 1, count):
            nmi[i, j] = nmi[j, i] = normalized_mutual_info(partitions[i], partitions[j])
    return (nmi.sum(axis=1) - 1.0) / (count - 1)


def choose_partition(partitions: list[np.ndarray]) -> tuple[int, np.ndarray]:
    """The index of the partition that agrees most with the others (the first on a tie: the
    smallest rank), and every partition's agreement."""
    scores = agreement_scores(partitions)
    return int(np.flatnonzero(scores >= scores.max() - 1e-12)[0]), scores


def within_share(features: np.ndarray, labels: np.ndarray, step: str | None = None) -> float:
    """Within-cluster scatter over total scatter of ``features`` (0: tight clusters), by row
    blocks in float64 (no copy of the features); with ``step``, of their
    :func:`~mkrk_dask.assignment.final_rows` (``"spectral"``: the unit rows)."""
    labels = np.asarray(labels)
    groups, index = np.unique(labels, return_inverse=True)
    sums = np.zeros((groups.size, features.shape[1]))
    squares = 0.0
    for start in range(0, features.shape[0], _BLOCK_ROWS):
        block = np.asarray(features[start:start + _BLOCK_ROWS], dtype=np.float64)
        if step is not None:
            block = final_rows(block, step)
        squares += float(np.einsum("ij,ij->", block, block))
        np.add.at(sums, index[start:start + _BLOCK_ROWS], block)
    counts = np.bincount(index, minlength=groups.size).astype(np.float64)
    total = squares - float(np.sum(sums.sum(axis=0) ** 2)) / labels.size
    within = squares - float(np.sum(np.sum(sums**2, axis=1) / counts))
    return max(within, 0.0) / total if total > 0 else 0.0
