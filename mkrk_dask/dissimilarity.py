"""Dissimilarity between base kernels: the m x m matrix C of the Y-step.

``C[i, j]`` says how badly kernel ``i`` represents kernel ``j`` (smaller is better). Measures:

- ``"fip"`` (the paper's): Frobenius inner product ``tr(K_i K_j)``.
- ``"sfn"``: squared Frobenius distance ``||K_i - K_j||_F^2``.
- ``"vn"``: von Neumann divergence ``tr(K_i log K_i - K_i log K_j - K_i + K_j)``.
- ``"ld"``: LogDet divergence ``tr(K_i K_j^-1) - log det(K_i K_j^-1) - n``.

``vn`` and ``ld`` are asymmetric and need every kernel's eigendecomposition, so they are
offered for the exact backend only; ``fip`` and ``sfn`` follow from the Gram matrix of the
kernels, ``F = [tr(K_i K_j)]``, which every backend can compute blockwise.
"""

from __future__ import annotations

import numpy as np

from .choices import MEASURES  # noqa: F401 - re-exported
from .kernels import kernel_products

__all__ = ["MEASURES", "GRAM_MEASURES", "check_measure", "from_gram", "dense_dissimilarity"]

GRAM_MEASURES = ("fip", "sfn")


def check_measure(measure: str, allowed: tuple[str, ...] = MEASURES) -> str:
    """Return ``measure`` if it is one of ``allowed``, else raise a ValueError naming both."""
    if measure not in allowed:
        raise ValueError(f"unknown or unsupported dissimilarity {measure!r} here; "
                         f"expected one of {allowed}")
    return measure


def from_gram(gram: np.ndarray, measure: str) -> np.ndarray:
    """``fip`` or ``sfn`` from the kernels' Gram matrix ``gram[i, j] = tr(K_i K_j)``."""
    check_measure(measure, GRAM_MEASURES)
    gram = 0.5 * (gram + gram.T)
    if measure == "fip":
        return gram
    diag = np.diag(gram)
    sfn = diag[:, None] + diag[None, :] - 2.0 * gram
    # Exact zero on the diagonal, and no negative distance from round-off.
    np.fill_diagonal(sfn, 0.0)
    return np.maximum(sfn, 0.0)


def _spectra(kernels: np.ndarray, ridge: float) -> tuple[np.ndarray, np.ndarray]:
    """Eigenvalues (floored at ``ridge``) and eigenvectors of every kernel."""
    m, n, _ = kernels.shape
    values = np.empty((m, n))
    vectors = np.empty((m, n, n))
    for p in range(m):
        values[p], vectors[p] = np.linalg.eigh(kernels[p])
    # Kernels are PSD but often numerically singular; log and inverse need a floor.
    scale = np.maximum(values.max(axis=1, keepdims=True), 1e-300)
    return np.maximum(values, ridge * scale), vectors


def dense_dissimilarity(kernels: np.ndarray, measure: str = "fip", ridge: float = 1e-8
                        ) -> np.ndarray:
    """The dissimilarity matrix of dense kernels ``(m, n, n)``.

    Parameters
    ----------
    kernels : ndarray of shape (m, n, n)
    measure : {"fip", "sfn", "vn", "ld"}
    ridge : float
        For ``vn`` and ``ld``: eigenvalues are floored at ``ridge`` times the kernel's largest,
        which regularises the logarithm and the inverse of singular kernels.
    """
    check_measure(measure)
    m, n, _ = kernels.shape
    if measure in GRAM_MEASURES:
        return from_gram(kernel_products(kernels), measure)
    values, vectors = _spectra(kernels, ridge)
    C = np.zeros((m, m))
    for i in range(m):
        for j in range(m):
            if i == j:
                continue
            # overlap[a, b] = (u_a . v_b)^2 with u from K_i and v from K_j
            overlap = (vectors[i].T @ vectors[j]) ** 2
            if measure == "vn":
                a, b = values[i], values[j]
                C[i, j] = (a @ np.log(a) - a @ overlap @ np.log(b) - a.sum() + b.sum())
            else:
                a, b = values[i], values[j]
                # tr(K_i K_j^-1) = sum_ab a_a / b_b (u_a . v_b)^2 ; logdet = sum log a - sum log b
                C[i, j] = a @ overlap @ (1.0 / b) - (np.log(a).sum() - np.log(b).sum()) - n
    return C
