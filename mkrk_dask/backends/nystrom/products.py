"""Row products of the Nystrom factors: ``F B`` in float64 (:func:`embed_rows`), the strong
columns' product with a lower-trapezoidal transform (:func:`trapezoid_product`) and the
cluster indicators a block of kernel rows is summed with (:func:`indicator_rows`)."""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.sparse as sp

__all__ = ["FACTOR_BLOCK_ROWS", "TRAPEZOID_COLUMNS", "embed_rows", "indicator_rows",
           "lower_trapezoidal", "trapezoid_product"]

#: rows of the kernel blocks evaluated at once by :meth:`NystromModel.factors`: at 500
#: landmarks a block of 512 rows is 2 MiB in float64, so the several elementwise passes of a
#: kernel's evaluation (distances, scaling, exp, normalisation) run in cache; with 4,096 rows
#: (16 MiB) each pass went to memory, and a factor chunk took 20-30% longer (measured on 4
#: views x 3 kernels x 500 landmarks, R = 2,048, one and two threads)
FACTOR_BLOCK_ROWS = 512
#: columns per product of a kernel's strong columns, rotated so that T's head is lower
#: triangular (:meth:`NystromModel.product_transforms`): a block of columns starting at j
#: skips the first j rows of T, which are zero. Narrower blocks skip more zeros but run BLAS
#: on thinner products: 48-128 columns took 18-20% less time than one product of all the
#: columns, 32 and 192 columns 13%, for the default dictionary's 16 kernels on 500 landmarks
#: per view (R = 2,048), one thread
TRAPEZOID_COLUMNS = 96


def embed_rows(F: np.ndarray, B: np.ndarray) -> np.ndarray:
    """``F B`` in float64 (the same arithmetic in the fit's final pass and in ``transform``).

    float32 factors are cast :data:`FACTOR_BLOCK_ROWS` rows at a time: a float64 copy of a
    whole chunk would be twice the chunk."""
    if F.dtype == np.float64:
        return F @ B
    out = np.empty((F.shape[0], B.shape[1]))
    for a in range(0, F.shape[0], FACTOR_BLOCK_ROWS):
        np.matmul(np.asarray(F[a:a + FACTOR_BLOCK_ROWS], dtype=np.float64), B,
                  out=out[a:a + FACTOR_BLOCK_ROWS])
    return out


def lower_trapezoidal(head: np.ndarray) -> np.ndarray:
    """``head Q`` (float64) for the orthogonal ``Q`` that makes its first ``s`` rows lower
    triangular with a non-negative diagonal (``head[:s]^T = Q R``: ``head[:s] Q = R^T``); the
    entries above the diagonal are set to their exact zero. A head of at most
    :data:`TRAPEZOID_COLUMNS` columns is returned as it is (one product either way)."""
    s = head.shape[1]
    if s <= TRAPEZOID_COLUMNS:
        return head
    q, r = np.linalg.qr(head[:s].T)
    signs = np.where(np.diag(r) < 0, -1.0, 1.0)
    rotated = head @ (q * signs[None, :])
    rotated[:s] = np.tril(rotated[:s])
    return rotated


def trapezoid_product(left: np.ndarray, head: np.ndarray, out: np.ndarray,
                       triangle: bool = True) -> np.ndarray:
    """``left @ head`` into ``out`` for a ``head`` whose first rows are lower triangular
    (:func:`lower_trapezoidal`): columns ``j0:j1`` read rows ``j0:`` only. ``triangle=False``:
    one product (a head that was not rotated)."""
    s = head.shape[1]
    if s <= TRAPEZOID_COLUMNS or not triangle:
        return np.matmul(left, head, out=out)
    for j0 in range(0, s, TRAPEZOID_COLUMNS):
        j1 = min(j0 + TRAPEZOID_COLUMNS, s)
        np.matmul(left[:, j0:], head[j0:, j0:j1], out=out[:, j0:j1])
    return out


def indicator_rows(labels: np.ndarray, n_clusters: int, single: bool) -> Any:
    """``Z^T`` of a block's ``labels``: dense float32 for float32 kernel blocks, else a
    sparse float64 matrix (see :meth:`NystromModel.cluster_sums`)."""
    if single:
        dense = np.zeros((n_clusters, labels.size), dtype=np.float32)
        dense[labels, np.arange(labels.size)] = 1.0
        return dense
    return sp.csr_matrix((np.ones(labels.size), (labels, np.arange(labels.size))),
                         shape=(n_clusters, labels.size))
