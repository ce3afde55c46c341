"""The real multi-view sets of ``../shared/datasets/multiview`` (issue 76), their peers, and the
noise views the robustness check adds.

Each ``.mat`` file holds ``X``, a cell of views (rows are the same samples; some views are uint8
counts or 0/1 links, cast here to float64), and ``y``. A set is named ``mv:<file stem>``.

Peers written for several views (each one fit of ``(views, k, seed) -> labels``):

- ``KMeans(unit rows)``: every view's rows scaled to unit length, the views side by side, KMeans;
- ``SpectralClustering(nn, unit rows)``: the same rows, scikit-learn's
  ``SpectralClustering(affinity="nearest_neighbors")``;
- ``average Gaussian``: one Gaussian per view at its median pairwise distance, their mean, its
  top k eigenvectors with unit rows, KMeans (the classic spectral kernel k-means on the average
  kernel, written here in numpy).
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
from scipy.io import loadmat
from scipy.linalg import eigh
from sklearn.cluster import KMeans, SpectralClustering
from sklearn.metrics.pairwise import euclidean_distances

__all__ = ["MULTIVIEW", "load_multiview", "with_noise_view", "MV_PEERS", "NOISE_KINDS"]

MULTIVIEW = ("mv:ACM", "mv:Cora", "mv:Movies", "mv:MNIST-4", "mv:ProteinFold",
             "mv:Prokaryotic", "mv:Reuters-1200", "mv:Wikipedia")
#: rows of the sample the peers' median distance is read from (fixed seed)
MEDIAN_SAMPLE = 2000
NOISE_KINDS = ("gaussian", "shuffled")


def _root(data_dir: str | None) -> Path:
    base = data_dir or os.environ.get("MKRK_DATASETS") or str(
        Path(__file__).resolve().parents[1].parent / "shared" / "datasets")
    return Path(base) / "multiview"


def load_multiview(name: str, data_dir: str | None = None
                   ) -> tuple[list[np.ndarray], np.ndarray, dict] | None:
    """``(views, y, info)`` of ``mv:<stem>``, or None (with a line) where the file is absent."""
    path = _root(data_dir) / f"{name.split(':', 1)[1]}.mat"
    if not path.exists():
        print(f"skipped {name}: {path} not found")
        return None
    data = loadmat(path)
    views = [np.asarray(v.toarray() if hasattr(v, "toarray") else v, dtype=np.float64)
             for v in data["X"].ravel()]
    y = np.asarray(data["y"]).ravel()
    kinds = ", ".join(f"{v.shape[1]}" for v in views)
    return views, y, {"kinds": f"{len(views)} views of {kinds} columns ({path.name})"}


def with_noise_view(views: list[np.ndarray], kind: str, seed: int = 0) -> list[np.ndarray]:
    """``views`` and one more view of pure noise: ``"gaussian"``, a standard normal matrix as
    wide as the widest view (at most 100 columns); ``"shuffled"``, a copy of the first view with
    its rows permuted (real structure, unrelated to the samples)."""
    rng = np.random.default_rng(seed)
    n = views[0].shape[0]
    if kind == "gaussian":
        noise = rng.normal(size=(n, min(100, max(v.shape[1] for v in views))))
    elif kind == "shuffled":
        noise = views[0][rng.permutation(n)]
    else:
        raise ValueError(f"noise kind {kind!r}: one of {NOISE_KINDS}")
    return [*views, noise]


def unit_rows(views: list[np.ndarray]) -> np.ndarray:
    """Every view's rows at unit length (a zero row stays zero), side by side."""
    out = []
    for v in views:
        norm = np.linalg.norm(v, axis=1, keepdims=True)
        out.append(v / np.where(norm > 0, norm, 1.0))
    return np.hstack(out)


def kmeans_unit_rows(views, k, seed):
    return KMeans(n_clusters=k, n_init=10, random_state=seed).fit_predict(unit_rows(views))


def spectral_unit_rows(views, k, seed):
    return SpectralClustering(n_clusters=k, affinity="nearest_neighbors",
                              random_state=seed).fit_predict(unit_rows(views))


def _median_distance(X: np.ndarray) -> float:
    rng = np.random.default_rng(0)
    rows = X[rng.choice(X.shape[0], min(MEDIAN_SAMPLE, X.shape[0]), replace=False)]
    d = euclidean_distances(rows)
    positive = d[np.triu_indices_from(d, 1)]
    positive = positive[positive > 0]
    return float(np.median(positive)) if positive.size else 1.0


def average_gaussian(views, k, seed):
    n = views[0].shape[0]
    K = np.zeros((n, n))
    for v in views:
        sigma = _median_distance(v)
        K += np.exp(-euclidean_distances(v, squared=True) / (2 * sigma * sigma))
    K /= len(views)
    _, H = eigh(K, subset_by_index=[n - k, n - 1])
    H /= np.maximum(np.linalg.norm(H, axis=1, keepdims=True), 1e-12)
    return KMeans(n_clusters=k, n_init=10, random_state=seed).fit_predict(H)


MV_PEERS = {
    "KMeans(unit rows)": kmeans_unit_rows,
    "SpectralClustering(nn, unit rows)": spectral_unit_rows,
    "average Gaussian": average_gaussian,
}
