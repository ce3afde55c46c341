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

__all__ = ["unit_rows", "final_rows", "assign_clusters", "FINAL_STEPS", "repeated_assignments",
           "nearest_centre", "lloyd_centres"]


#: the final steps: the paper's spectral one, or k-means on the features of the top 2k eigenpairs
FINAL_STEPS = ("features", "spectral")
#: rows per block of :func:`nearest_centre`
_BLOCK_ROWS = 65536


def unit_rows(H: np.ndarray) -> np.ndarray:
    """Rows of H scaled to unit length, as before the final k-means; zero rows stay zero
    (they carry no direction)."""
    H = np.asarray(H, dtype=np.float64)
    norms = np.linalg.norm(H, axis=1, keepdims=True)
    return np.divide(H, norms, out=np.zeros_like(H), where=norms > 0)


def final_rows(H: np.ndarray, step: str) -> np.ndarray:
    """What the final k-means clusters: the unit-length rows of H (``"spectral"``, the
    paper's) or the rows as they are (``"features"``: the eigenpairs' features ``V sqrt(mu)``)."""
    return unit_rows(H) if step == "spectral" else np.asarray(H, dtype=np.float64)


def assign_clusters(H: np.ndarray, n_clusters: int, *, n_init: int = 10, max_iter: int = 1000,
                    random_state: int | np.random.RandomState | None = None,
                    step: str = "spectral") -> np.ndarray:
    """The final step: k-means on :func:`final_rows` of H (by default the paper's: every row
    of H scaled to unit length; rows that are exactly zero stay zero)."""
    unit = final_rows(H, step)
    # copy_x=False: k-means centres the rows in place and adds the mean back, instead of
    # holding a second n x d copy (what bounds the memory of a fit at millions of rows).
    model = KMeans(n_clusters=n_clusters, n_init=n_init, max_iter=max_iter,
                   random_state=random_state, copy_x=False)
    return model.fit_predict(unit)


def repeated_assignments(H: np.ndarray, n_clusters: int, n_repeats: int, *, n_init: int = 10,
                         random_state: Any = None) -> list[np.ndarray]:
    """The final k-means repeated ``n_repeats`` times with independent seeds.

    The paper's protocol repeats it 20 times and reports the best; report the spread too.
    """
    seeds = np.random.SeedSequence(random_state if isinstance(random_state, int) else None)
    return [assign_clusters(H, n_clusters, n_init=n_init,
                            random_state=int(child.generate_state(1)[0]))
            for child in seeds.spawn(n_repeats)]


def nearest_centre(U: np.ndarray, centres: np.ndarray) -> np.ndarray:
    """Index of the nearest centre of every row (in row blocks: the n x k distances of
    millions of rows are never held at once)."""
    norms = np.einsum("ij,ij->i", centres, centres)[None, :]
    out = np.empty(U.shape[0], dtype=np.int64)
    for a in range(0, U.shape[0], _BLOCK_ROWS):
        sq = norms - 2.0 * U[a:a + _BLOCK_ROWS] @ centres.T
        out[a:a + _BLOCK_ROWS] = np.argmin(sq, axis=1)
    return out


def lloyd_centres(U: np.ndarray, labels: np.ndarray, n_clusters: int, max_iter: int = 300
                  ) -> tuple[np.ndarray, np.ndarray, int]:
    """Centres as the means of ``labels``, polished by Lloyd steps to a fixed point.

    At a fixed point every row's label is its nearest centre, so that ``predict`` on the
    training rows gives back the labels. Returns ``(centres, labels, n_changed)``.
    """
    labels = np.asarray(labels, dtype=np.int64)
    original = labels.copy()
    centres = np.zeros((n_clusters, U.shape[1]))
    for _ in range(max_iter):
        for j in range(n_clusters):
            members = labels == j
            if members.any():
                centres[j] = U[members].mean(axis=0)
        new = nearest_centre(U, centres)
        if np.array_equal(new, labels):
            break
        labels = new
    return centres, labels, int(np.sum(labels != original))
