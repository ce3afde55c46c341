"""The final step: from the embedding H to labels, and the centres that label new rows.

The paper's step scales every row of H to unit length and runs k-means (:func:`assign_clusters`;
the paper's protocol repeats it, :func:`repeated_assignments`). For ``predict``, the centres are
the means of the unit rows per cluster, polished by Lloyd steps to a fixed point
(:func:`lloyd_centres`), so that the nearest centre of a training row is its label.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from sklearn.cluster import KMeans

from ._threads import single_blas_thread
from .choices import FINAL_CLUSTERINGS, FINAL_STEP_CHOICES, FINAL_STEPS  # noqa: F401 - re-exported

__all__ = ["unit_rows", "final_rows", "graph_rows", "assign_clusters", "FINAL_STEPS",
           "FINAL_STEP_CHOICES", "FINAL_CLUSTERINGS", "cluster_means",
           "repeated_assignments", "nearest_centre", "lloyd_centres", "within_cluster_loss",
           "assign_rows", "RowLabels"]


#: rows per block of :func:`nearest_centre`
_BLOCK_ROWS = 65536


def unit_rows(H: np.ndarray, dtype: Any = np.float64) -> np.ndarray:
    """Rows of H scaled to unit length (in ``dtype``), as before the final k-means; zero rows
    stay zero (they carry no direction)."""
    H = np.asarray(H, dtype=dtype)
    norms = _row_norms(H)
    return np.divide(H, norms, out=np.zeros_like(H), where=norms > 0)


def _row_norms(H: np.ndarray) -> np.ndarray:
    """``(n, 1)`` lengths of the rows, by row blocks: the norms of all rows at once square H
    into a temporary of its size."""
    norms = np.empty((H.shape[0], 1), dtype=H.dtype)
    for a in range(0, H.shape[0], _BLOCK_ROWS):
        norms[a:a + _BLOCK_ROWS] = np.linalg.norm(H[a:a + _BLOCK_ROWS], axis=1, keepdims=True)
    return norms


def final_rows(H: np.ndarray, step: str, dtype: Any = np.float64) -> np.ndarray:
    """What the final k-means clusters: the unit-length rows of H, the top eigenvectors
    (``"spectral"``, the paper's) or their features ``V sqrt(mu)`` (``"features"``).

    Unit rows for the features too: every kernel of a dictionary has a unit diagonal (they
    are normalised), so every row of the learned kernel has length 1 in its feature space. Cut
    to its top eigenpairs, a row keeps the length of its part in them, short for a row they
    represent poorly (an outlier far from every cluster); k-means on those lengths splits
    typical rows from atypical ones instead of clusters (spam mail, 4,601 rows: NMI 7 against
    40 on unit rows, ``docs/defaults.rst``). Features of one eigenpair stay as they are: the
    direction of a single number is only its sign.
    """
    if not _unit(step, H):
        return np.asarray(H, dtype=dtype)
    return unit_rows(H, dtype)


def _unit(step: str, H: np.ndarray) -> bool:
    """Whether :func:`final_rows` scales the rows of H to unit length for ``step``."""
    if step not in FINAL_STEPS:
        raise ValueError(f"unknown final step {step!r}; one of {FINAL_STEPS}")
    return step == "spectral" or H.shape[1] > 1


def graph_rows(H: np.ndarray, step: str, dtype: Any = np.float64) -> np.ndarray:
    """What the final anchor graph is built on: the unit rows of the eigenvectors
    (``"spectral"``), or the features ``V sqrt(mu)`` as they are (``"features"``: the graph
    links near neighbours, which a row's length does not mislead the way it misleads the
    k-means' global centres)."""
    return unit_rows(H, dtype) if step == "spectral" else np.asarray(H, dtype=dtype)


def assign_clusters(H: np.ndarray, n_clusters: int, *, n_init: int = 10, max_iter: int = 1000,
                    random_state: int | np.random.RandomState | None = None,
                    step: str = "spectral", dtype: Any = np.float64) -> np.ndarray:
    """The final step: k-means on :func:`final_rows` of H (by default the paper's: every row
    of H scaled to unit length; rows that are exactly zero stay zero), in ``dtype`` (float32
    halves the memory of the k-means at millions of rows)."""
    # copy_x=False: k-means centres the rows in place and adds the mean back, instead of
    # holding a second n x d copy (what bounds the memory of a fit at millions of rows).
    model = KMeans(n_clusters=n_clusters, n_init=n_init, max_iter=max_iter,
                   random_state=random_state, copy_x=False)
    rows = np.asarray(H, dtype=dtype)
    with single_blas_thread():  # k-means++'s distances too (its Lloyd steps limit their own)
        if step == "spectral" or not _unit(step, rows) or not rows.flags.writeable:
            # the spectral step's H is the loop's own eigenvectors: a unit copy, as ever
            return model.fit_predict(final_rows(rows, step, dtype))
        # The features' unit rows in place, then their lengths given back, for the same
        # reason: the caller's rows come back equal to within rounding, as from copy_x=False.
        norms = _row_norms(rows)
        np.divide(rows, norms, out=rows, where=norms > 0)
        try:
            return model.fit_predict(rows)
        finally:
            np.multiply(rows, norms, out=rows, where=norms > 0)


def repeated_assignments(H: np.ndarray, n_clusters: int, n_repeats: int, *, n_init: int = 10,
                         random_state: Any = None) -> list[np.ndarray]:
    """The final k-means repeated ``n_repeats`` times with independent seeds.

    The paper's protocol repeats it 20 times and reports the best; report the spread too.
    """
    seeds = np.random.SeedSequence(random_state if isinstance(random_state, int) else None)
    return [assign_clusters(H, n_clusters, n_init=n_init,
                            random_state=int(child.generate_state(1)[0]))
            for child in seeds.spawn(n_repeats)]


def _blocks(U: np.ndarray, step: str | None) -> Any:
    """``(first row, rows)`` of U by row blocks; with ``step``, U is H and the rows are its
    :func:`final_rows`, formed block by block (never all at once: at millions of rows that
    copy is as large as H)."""
    for a in range(0, U.shape[0], _BLOCK_ROWS):
        block = U[a:a + _BLOCK_ROWS]
        yield a, (block if step is None else final_rows(block, step))


def nearest_centre(U: np.ndarray, centres: np.ndarray, *, step: str | None = None
                   ) -> np.ndarray:
    """Index of the nearest centre of every row (in row blocks: the n x k distances of
    millions of rows are never held at once). With ``step``, of every row of
    ``final_rows(U, step)``."""
    norms = np.einsum("ij,ij->i", centres, centres)[None, :]
    out = np.empty(U.shape[0], dtype=np.int64)
    for a, rows in _blocks(U, step):
        sq = norms - 2.0 * rows @ centres.T
        out[a:a + rows.shape[0]] = np.argmin(sq, axis=1)
    return out


def assign_rows(rows: np.ndarray, step: str, *, centres: np.ndarray | None = None,
                graph: Any = None) -> np.ndarray:
    """The labels a fitted final partition gives rows of the final embedding: the final
    graph's (``graph``, fitted on :func:`graph_rows`) where it partitioned the rows, else
    the nearest of ``centres`` (of :func:`final_rows`). What ``predict`` does with the rows
    of ``transform``."""
    if graph is not None:  # rows of a fit's own embedding: finite, in memory
        return graph.predict_checked([graph_rows(rows, step)])
    return nearest_centre(rows, centres, step=step)


class RowLabels:
    """:func:`assign_rows` of blocks of H (the unscaled top eigenvectors, in the fit's
    dtype), as a picklable callable for the workers of a pass: scaled by ``feature_scale``
    first where there is one (in place on a copy, in H's dtype, as ``transform`` scales
    them: the same bits); H itself is left as it is."""

    def __init__(self, step: str, feature_scale: np.ndarray | None, *,
                 centres: np.ndarray | None = None, graph: Any = None):
        self.step, self.feature_scale = step, feature_scale
        self.centres, self.graph = centres, graph

    def __call__(self, H: np.ndarray) -> np.ndarray:
        rows = H
        if self.feature_scale is not None:
            rows = np.array(H, copy=True)
            rows *= self.feature_scale[None, :]
        return assign_rows(rows, self.step, centres=self.centres, graph=self.graph)


def within_cluster_loss(U: np.ndarray, labels: np.ndarray, centres: np.ndarray, *,
                        step: str | None = None) -> float:
    """Sum over rows of the squared distance to the centre of their cluster (in row blocks, as
    :func:`nearest_centre`); with ``step``, of the rows of ``final_rows(U, step)``. The
    k-means objective in the space the final step clustered (``KMeans.score`` is its
    negative)."""
    labels = np.asarray(labels)
    total = 0.0
    for a, rows in _blocks(U, step):
        diff = rows - centres[labels[a:a + rows.shape[0]]]
        total += float(np.einsum("ij,ij->", diff, diff))
    return total


def _cluster_sums(U: np.ndarray, labels: np.ndarray, n_clusters: int, step: str | None
                  ) -> np.ndarray:
    """Sum of the rows of every cluster, as one-hot products over row blocks (no copy of a
    cluster's rows: at millions of rows that copy is most of U)."""
    sums = np.zeros((n_clusters, U.shape[1]))
    clusters = np.arange(n_clusters)[:, None]
    for a, rows in _blocks(U, step):
        onehot = (labels[a:a + rows.shape[0]][None, :] == clusters).astype(rows.dtype)
        sums += onehot @ rows
    return sums


def cluster_means(U: np.ndarray, labels: np.ndarray, n_clusters: int, *,
                  step: str | None = None, out: np.ndarray | None = None) -> np.ndarray:
    """The mean row of every cluster (of ``final_rows(U, step)`` with ``step``), by row
    blocks; an empty cluster keeps its row of ``out`` (zeros without it)."""
    centres = np.zeros((n_clusters, U.shape[1])) if out is None else out
    counts = np.bincount(labels, minlength=n_clusters)
    sums = _cluster_sums(U, labels, n_clusters, step)
    filled = counts > 0
    centres[filled] = sums[filled] / counts[filled, None]
    return centres


def lloyd_centres(U: np.ndarray, labels: np.ndarray, n_clusters: int, max_iter: int = 300,
                  *, step: str | None = None) -> tuple[np.ndarray, np.ndarray, int]:
    """Centres as the means of ``labels``, polished by Lloyd steps to a fixed point.

    At a fixed point every row's label is its nearest centre, so that ``predict`` on the
    training rows gives back the labels. With ``step``, the rows are
    ``final_rows(U, step)``, formed block by block. Returns ``(centres, labels, n_changed)``.
    """
    labels = np.asarray(labels, dtype=np.int64)
    original = labels.copy()
    centres = np.zeros((n_clusters, U.shape[1]))
    for _ in range(max_iter):
        centres = cluster_means(U, labels, n_clusters, step=step, out=centres)
        new = nearest_centre(U, centres, step=step)
        if np.array_equal(new, labels):
            break
        labels = new
    return centres, labels, int(np.sum(labels != original))
