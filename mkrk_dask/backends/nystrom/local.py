"""The sparse local part of the Nystrom kernels, ``K_p ~ F_p F_p^T + S_p``.

``S_p`` holds the entries of the residual ``K_p - F_p F_p^T`` of magnitude at least a threshold:
for a narrow Gaussian, the pairs of nearby rows. A few hundred landmarks cannot represent that
local structure, and the exact solution depends on it; with it, the Nystrom backend follows the
exact one (``benchmarks/bench_nystrom_variants.py``, ``benchmarks/bench_nystrom_paper.py``). It
is collected in the block-pair pass of the exact C, so only up to
``exact_dissimilarity_max_n`` rows.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.sparse as sp

from ...store.zarr_store import read_checked

__all__ = ["LocalPart", "LocalBasis", "local_residual", "residual_entries", "load_local",
           "LOCAL_RESULTS", "NO_ENTRIES", "LOCAL_THRESHOLD", "LOCAL_MAX_PER_ROW"]

#: default smallest residual entry |K_p - F_p F_p^T|_ij kept in the sparse local part
LOCAL_THRESHOLD = 0.01
#: the local part is dropped (with a warning) above this many entries per row and kernel
LOCAL_MAX_PER_ROW = 64
#: names under which a store keeps the part's entries
LOCAL_RESULTS = ("local_rows", "local_columns", "local_kernels", "local_values")
NO_ENTRIES = (np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int32), np.zeros(0))


@dataclass
class LocalPart:
    """``S_p`` for every kernel: symmetric n x n CSR matrices, and the threshold.

    Attributes
    ----------
    kernels : list of scipy.sparse.csr_matrix
    threshold : float
    """

    kernels: list[sp.csr_matrix]
    threshold: float

    @classmethod
    def from_entries(cls, entries: tuple, n: int, m: int, threshold: float) -> LocalPart:
        """From ``(rows, columns, kernels, values)`` of the upper triangles (row <= column)."""
        rows, cols, kernel, values = entries
        mats = []
        for p in range(m):
            sel = kernel == p
            upper = sp.csr_matrix((values[sel], (rows[sel], cols[sel])), shape=(n, n))
            mats.append((upper + upper.T - sp.diags(upper.diagonal())).tocsr())
        return cls(mats, float(threshold))

    def entries(self) -> tuple:
        """The upper triangles as ``(rows, columns, kernels, values)`` (what the store keeps)."""
        parts = []
        for p, S in enumerate(self.kernels):
            upper = sp.triu(S).tocoo()
            parts.append((upper.row.astype(np.int64), upper.col.astype(np.int64),
                          np.full(upper.nnz, p, dtype=np.int32), upper.data))
        return tuple(np.concatenate(c) for c in zip(*parts, strict=True))

    def nonzeros_per_row(self) -> np.ndarray:
        """Average stored entries per row of every ``S_p``."""
        return np.array([S.nnz / S.shape[0] for S in self.kernels])

    def traces(self) -> np.ndarray:
        return np.array([S.diagonal().sum() for S in self.kernels])

    def combined(self, weights: np.ndarray) -> sp.csr_matrix:
        """``sum_p w_p^2 S_p``."""
        n = self.kernels[0].shape[0]
        out = sp.csr_matrix((n, n))
        for w, S in zip(np.asarray(weights, dtype=np.float64), self.kernels, strict=True):
            if w != 0 and S.nnz:
                out = out + (w * w) * S
        return out.tocsr()

    def quad_forms(self, H: np.ndarray) -> np.ndarray:
        """``tr(H^T S_p H)`` for every kernel."""
        return np.array([float(np.sum(H * (S @ H))) if S.nnz else 0.0 for S in self.kernels])


@dataclass
class LocalBasis:
    """The H-step's basis when the kernels have a local part: ``H`` itself (n x k), and the
    weights it was computed for."""

    embedding: np.ndarray
    weights: np.ndarray

    def leading(self, count: int) -> LocalBasis:
        return LocalBasis(self.embedding[:, :count], self.weights)


def local_residual(kernel_block: np.ndarray, Fa: np.ndarray, Fb: np.ndarray, threshold: float
                   ) -> tuple[np.ndarray, np.ndarray]:
    """``K_p(A, B) - F_p(A) F_p(B)^T`` and where it is kept in the local part (``>= threshold``
    in magnitude): the one rule of the fit and of new rows, so that the training rows get
    their own entries back."""
    residual = kernel_block - Fa @ Fb.T
    return residual, np.abs(residual) >= threshold


def residual_entries(factors: Any, offsets: np.ndarray, threshold: float, kernels: np.ndarray,
                     stacked: np.ndarray, shape: tuple[int, int], same: bool, start_a: int,
                     start_b: int) -> tuple:
    """Entries ``>= threshold`` in magnitude of ``K_p(A, B) - F_p(A) F_p(B)^T``, row <= column;
    the factor rows are read from the store the factor pass wrote (the ones the fit uses)."""
    n_a, n_b = shape
    Fa = read_checked(factors, (slice(start_a, start_a + n_a),))
    Fb = Fa if same else read_checked(factors, (slice(start_b, start_b + n_b),))
    found: list[tuple] = [NO_ENTRIES]
    for p in kernels:
        cols = slice(offsets[p], offsets[p + 1])
        residual, mask = local_residual(stacked[p].reshape(n_a, n_b), Fa[:, cols], Fb[:, cols],
                                        threshold)
        if same:
            mask = np.triu(mask)
        i, j = np.nonzero(mask)
        found.append((i + start_a, j + start_b, np.full(i.size, p, dtype=np.int32),
                      residual[i, j]))
    return tuple(np.concatenate(parts) for parts in zip(*found, strict=True))


def load_local(group: Any, load_result: Callable, n: int, m: int) -> LocalPart | None:
    """The local part of a complete store, if it was built with one."""
    threshold = float(group.attrs.asdict().get("local_threshold", 0.0))
    entries = [load_result(group, name) for name in LOCAL_RESULTS]
    if threshold <= 0 or any(e is None for e in entries):
        return None
    return LocalPart.from_entries(tuple(entries), n, m, threshold)
