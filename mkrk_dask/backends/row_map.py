"""Out-of-sample rows for the backends whose kernels exist only among the training rows.

The spectral out-of-sample extension (Bengio et al., NIPS 2003): H's columns are eigenvectors
of ``K_w = sum_p w_p^2 K_p`` with eigenvalues ``mu``, so a new row ``x`` maps to

    h(x) = K_w(x, X) H diag(mu)^(-1) = sum_p w_p^2 K_p(x, X) (H / mu),

which on a training row gives its own row of H back (``K_w H = H diag(mu)``). Computed by blocks
of new rows against the training rows, with the kernels evaluated by
:func:`mkrk_dask.kernels.kernel_blocks` exactly as in the fit. The Nystrom backend has its own
map (:mod:`mkrk_dask.backends.nystrom.model`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.sparse as sp

from .._compute import compute_here
from ..kernels import KernelSpec, kernel_blocks, row_sq_norms

__all__ = ["KernelRowMap", "kernel_row_map"]

#: bytes of the kernel blocks of one step (new rows x training rows x active kernels)
_STEP_BYTES = 2**28


@dataclass
class KernelRowMap:
    """``h(x) = sum_p w_p^2 K_p(x, X) (H / mu)`` for new rows ``x``; picklable.

    Attributes
    ----------
    specs : list of KernelSpec
        The resolved kernels of the fit.
    normalize : bool
    views : list of ndarray or CSR matrix (or None for a view no kernel reads)
        The training rows.
    weights2 : ndarray of shape (m,)
        Squared kernel weights.
    scaled_embedding : ndarray of shape (n, k)
        ``H / mu``.
    """

    specs: list[KernelSpec]
    normalize: bool
    views: list[Any]
    weights2: np.ndarray
    scaled_embedding: np.ndarray

    def __post_init__(self) -> None:
        self._train_sq = {v: row_sq_norms(X) for v, X in enumerate(self.views) if X is not None}

    def __getstate__(self) -> dict:
        return {k: v for k, v in self.__dict__.items() if k != "_train_sq"}

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self.__post_init__()

    @property
    def n_features(self) -> list[int | None]:
        return [None if X is None else int(X.shape[1]) for X in self.views]

    def transform(self, views: Sequence[Any]) -> np.ndarray:
        """Rows of H of the given rows (one array per view, the same rows), shape (rows, k)."""
        n_rows = int(views[0].shape[0])
        n_train, k = self.scaled_embedding.shape
        active = [p for p, w2 in enumerate(self.weights2) if w2 > 0]
        out = np.zeros((n_rows, k))
        step = max(1, _STEP_BYTES // (8 * n_train * max(1, len(active))))
        for a in range(0, n_rows, step):
            combined = np.zeros((min(step, n_rows - a), n_train))
            for view in sorted({self.specs[p].view for p in active}):
                idx = [p for p in active if self.specs[p].view == view]
                rows = _rows(views[view][a:a + step], view)
                blocks = kernel_blocks([self.specs[p] for p in idx], rows, self.views[view],
                                       None, self._train_sq[view], normalize=self.normalize)
                combined += np.tensordot(self.weights2[idx], blocks, axes=1)
            out[a:a + step] = combined @ self.scaled_embedding
        return out


def _rows(block: Any, view: int) -> Any:
    """A block of new rows in memory, float64 (dask and Zarr blocks are read here), finite."""
    if sp.issparse(block):
        return sp.csr_matrix(block, dtype=np.float64)
    rows = np.asarray(compute_here(block) if hasattr(block, "compute") else block,
                      dtype=np.float64)
    if not np.isfinite(rows).all():
        raise ValueError(f"view {view}: the new rows contain NaN or infinity")
    return rows


def kernel_row_map(specs: list[KernelSpec], normalize: bool, views: list[Any], top: Any
                   ) -> KernelRowMap:
    """The map of a fit whose H-step result ``top`` holds H (n x k) and its eigenvalues."""
    H = np.asarray(top.basis, dtype=np.float64)
    mu = np.asarray(top.eigenvalues, dtype=np.float64)
    used = {s.view for s in specs}
    train = [_rows(v, i) if i in used else None for i, v in enumerate(views)]
    return KernelRowMap(list(specs), bool(normalize), train,
                        np.asarray(top.weights, dtype=np.float64) ** 2, H / mu)
