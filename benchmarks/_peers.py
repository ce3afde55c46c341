"""The label-free methods the default is measured against (issue 48), each one fit of
``(views, k, seed) -> labels``; the defaults benchmark times and scores them.

- ``KMeans`` on the raw columns, and on standardised columns (``StandardScaler``);
- ``Nystroem(cosine)`` and ``Nystroem(rbf)`` + ``KMeans``: ``n_components = min(n, 1000)``, the
  rbf gamma 1 / the median squared distance of a sample (``_common.median_rbf_gamma``);
- scikit-learn ``SpectralClustering(affinity="nearest_neighbors")`` (10 neighbours);
- the average kernel: the default's dictionary (the fitted ``kernels_`` of ``MKKMRK(k)``)
  with equal weights, through the library's own fixed-weight path
  (:func:`mkrk_dask.average_kernel_clustering` on a backend of those kernels): spectral kernel
  k-means on the mean kernel, no weight learning and no final step. The kernels are
  evaluated on the columns the default saw: its plan's column transform (standardisation of
  columns in different units, issue 48) is applied first;
- ``AnchorGraphClustering`` (the library's) with its defaults;
- LSC-K, written here from Chen & Cai, "Large Scale Spectral Clustering with Landmark-Based
  Representation" (AAAI 2011), see :func:`lsc_k`.

Methods on several views see them side by side (``np.hstack``), except the library's own
(the default, the average kernel, the anchor graph), which take the views.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from scipy import sparse
from sklearn.cluster import KMeans, SpectralClustering
from sklearn.kernel_approximation import Nystroem
from sklearn.neighbors import NearestNeighbors
from sklearn.preprocessing import StandardScaler

from mkrk_dask import MKKMRK, AnchorGraphClustering, average_kernel_clustering
from mkrk_dask.backends import make_backend, make_options

from _common import median_rbf_gamma

__all__ = ["PEERS", "SPECTRAL_MAX_N", "lsc_k", "average_kernel", "LSC_LANDMARKS",
           "LSC_NEIGHBOURS"]

#: scikit-learn's SpectralClustering runs up to this many rows (a dense eigenproblem beyond)
SPECTRAL_MAX_N = 10_000
#: LSC-K's landmarks (at most half the rows) and nearest landmarks per row, as in the paper
LSC_LANDMARKS = 1000
LSC_NEIGHBOURS = 5
#: the average kernel's backend: exact (m dense n x n kernels) up to this many rows, Nystrom
#: (the library's default options) above
AVERAGE_EXACT_MAX_N = 5000


def _kmeans(Z, k: int, seed: int) -> np.ndarray:
    return KMeans(n_clusters=k, n_init=10, random_state=seed).fit_predict(Z)


def kmeans_raw(views, k, seed):
    return _kmeans(np.hstack(views), k, seed)


def kmeans_standardised(views, k, seed):
    return _kmeans(StandardScaler().fit_transform(np.hstack(views)), k, seed)


def _nystroem(views, k, seed, **kernel):
    X = np.hstack(views)
    Z = Nystroem(n_components=min(X.shape[0], 1000), random_state=seed,
                 **kernel).fit_transform(X)
    return _kmeans(Z, k, seed)


def nystroem_cosine(views, k, seed):
    return _nystroem(views, k, seed, kernel="cosine")


def nystroem_rbf(views, k, seed):
    X = np.hstack(views)
    return _nystroem(views, k, seed, kernel="rbf", gamma=median_rbf_gamma(X))


def spectral(views, k, seed):
    return SpectralClustering(n_clusters=k, affinity="nearest_neighbors",
                              random_state=seed).fit_predict(np.hstack(views))


def average_kernel(views, k, seed, *, kernels, transform=None) -> np.ndarray:
    """Equal weights over ``kernels`` (the default's fitted ``kernels_``): spectral kernel
    k-means on the mean kernel, by the library's fixed-weight baseline. ``transform``: the
    default's column transform (its plan's ``apply_scaling``), applied first when given."""
    views = list(views) if transform is None else transform(list(views))
    n = views[0].shape[0]
    options = make_options("exact" if n <= AVERAGE_EXACT_MAX_N else "nystrom")
    with make_backend(options, views=list(views), specs=list(kernels),
                      random_state=seed) as backend:
        return average_kernel_clustering(backend, k, 1, random_state=seed)[0]


def anchor_graph(views, k, seed):
    return AnchorGraphClustering(k, random_state=seed).fit(views).labels_


def lsc_k(views, k, seed, *, n_landmarks: int = LSC_LANDMARKS,
          n_neighbours: int = LSC_NEIGHBOURS) -> np.ndarray:
    """Landmark-based spectral clustering with k-means landmarks (LSC-K).

    1. ``p = min(n_landmarks, n // 2)`` landmarks: the centres of k-means on the rows (one
       start from random rows, 10 iterations, as the authors' code does: the landmarks need to
       cover the data, not to converge).
    2. Each row is joined to its ``r`` nearest landmarks with Gaussian weights
       ``exp(-d^2 / (2 h^2))``, ``h`` the mean distance of the rows to those landmarks; each
       row of ``Z`` (n x p, sparse) is scaled to sum 1.
    3. ``Zh = Z D^{-1/2}``, ``D`` the diagonal of the column sums of ``Z``; the graph
       ``W = Zh Zh^T`` is never formed: its top ``k`` eigenvectors are the top ``k`` left
       singular vectors of ``Zh``, ``U = Zh V S^{-1}`` from the eigenpairs ``(V, S^2)`` of the
       p x p matrix ``Zh^T Zh``.
    4. k-means (10 starts) on the rows of ``U``.

    Checked once against the dense construction (the top ``k`` eigenvectors of ``Zh Zh^T``
    span the same subspace as ``U``). On small data ``p = n / 2`` landmarks make a sparse
    graph: LSC-K is a method for large n, measured here as its authors define it.
    """
    X = np.hstack(views)
    n = X.shape[0]
    p = max(min(n_landmarks, n // 2), k)
    r = min(n_neighbours, p)
    centres = KMeans(n_clusters=p, init="random", n_init=1, max_iter=10,
                     random_state=seed).fit(X).cluster_centers_
    dist, idx = NearestNeighbors(n_neighbors=r).fit(centres).kneighbors(X)
    h = float(dist.mean()) or 1.0  # all rows on their landmarks: any width will do
    weights = np.exp(-(dist**2) / (2 * h * h))
    weights /= weights.sum(axis=1, keepdims=True)
    Z = sparse.csr_matrix((weights.ravel(), idx.ravel(), np.arange(0, n * r + 1, r)),
                          shape=(n, p))
    col = np.asarray(Z.sum(axis=0)).ravel()
    Zh = Z @ sparse.diags(1.0 / np.sqrt(np.maximum(col, np.finfo(float).tiny)))
    vals, vecs = np.linalg.eigh((Zh.T @ Zh).toarray())
    top = np.argsort(vals)[::-1][:k]
    U = Zh @ (vecs[:, top] / np.sqrt(np.maximum(vals[top], np.finfo(float).tiny)))
    return _kmeans(np.asarray(U), k, seed)


def paper(views, k, seed, *, big: bool):
    """``MKKMRK.paper`` at lambda 2^-15 (the paper's configuration); on big data its kernels
    through the Nystrom backend (300 landmarks per kernel, float32), the exact backend's 12
    dense n x n kernels being out of reach."""
    if big:
        est = MKKMRK.paper(k, lam=2.0**-15, solver="nystrom", tol=1e-6, tol_mode="relative",
                           random_state=seed,
                           backend_options={"n_landmarks": 300, "dtype": "float32"})
    else:
        est = MKKMRK.paper(k, lam=2.0**-15, random_state=seed)
    return est.fit(views if len(views) > 1 else views[0]).labels_


#: name -> the method; ``average kernel`` and ``paper`` need keyword arguments (the runner
#: binds them)
PEERS: dict[str, Callable] = {
    "paper": paper,
    "KMeans": kmeans_raw,
    "KMeans(standardised)": kmeans_standardised,
    "Nystroem(cosine)+KMeans": nystroem_cosine,
    "Nystroem(rbf)+KMeans": nystroem_rbf,
    "SpectralClustering(nn)": spectral,
    "average kernel": average_kernel,
    "AnchorGraphClustering": anchor_graph,
    "LSC-K": lsc_k,
}
