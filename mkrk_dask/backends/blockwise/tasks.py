"""Tasks of the blockwise backend: they run on the workers and read or write the kernel store.

Work is split by row blocks of ``c`` rows (the chunk size). A task reads the ``(m, c_i, c_j)``
slabs of its row block one column block at a time (memory ``~ m c^2`` per task, whatever n),
so the kernels never leave the disk.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...kernels import (
    KernelSpec,
    fill_kernel_blocks,
    kernel_products,
    row_sq_norms,
    symmetrize,
)
from ...passes import read_rows
from ...store.zarr_store import read_checked

#: name of the (m, n, n) kernel array in the store
KERNELS = "kernels"

_OPEN: dict[tuple, Any] = {}
_OPEN_MAX = 8


def store_array(store: tuple[Any, str], name: str = KERNELS, mode: str = "r") -> Any:
    """An array of the store (the kernels, or a scratch array such as the combined kernel),
    opened once per worker process and kept in a small cache.

    ``store`` is ``(location, build_id)``: a store rebuilt at the same place gets a new build
    id, so a worker never uses the metadata (shape, chunks) of the array it replaced.
    """
    location, build_id = store
    key = (location.url, build_id, name, mode)
    if key not in _OPEN:
        while len(_OPEN) >= _OPEN_MAX:
            _OPEN.pop(next(iter(_OPEN)))
        _OPEN[key] = location.open_array(name, mode=mode)
    return _OPEN[key]


def read_slab(arr: Any, rows: tuple[int, int], cols: tuple[int, int]) -> np.ndarray:
    """The ``(m, rows, cols)`` slab, checked: a damaged or missing chunk is an error that
    names it, never zeros."""
    return read_checked(arr, (slice(None), slice(*rows), slice(*cols)))


def build_pair(store: tuple[str, str], groups: list[tuple[list[int], list[KernelSpec]]],
               blocks_i: list[tuple], blocks_j: list[tuple], rows: tuple[int, int],
               cols: tuple[int, int], m: int, normalize: bool, dtype: str
               ) -> tuple[np.ndarray, np.ndarray]:
    """Evaluate all kernels on block pair (rows, cols), write it and its transpose.

    ``blocks_i``/``blocks_j``: the rows of every view used (task arguments of
    :class:`~mkrk_dask.passes.RowSource`). Returns this pair's contribution to the Gram matrix
    ``tr(K_i K_j)`` (counted twice for an off-diagonal pair, which stands for both blocks) and
    to the traces, computed from the values as stored (after the cast to the store's dtype).
    """
    arr = store_array(store, mode="r+")
    block = np.empty((m, rows[1] - rows[0], cols[1] - cols[0]), dtype=np.float64)
    diagonal = rows == cols
    for (idx, specs), a, b in zip(groups, blocks_i, blocks_j, strict=True):
        Xa = read_rows(*a)
        Xb = Xa if diagonal else read_rows(*b)
        sq_a = row_sq_norms(Xa)
        sq_b = sq_a if diagonal else row_sq_norms(Xb)
        fill_kernel_blocks(block, idx, specs, Xa, Xb, sq_a, sq_b, normalize=normalize)
    if diagonal:
        # As the exact backend does: exactly symmetric, and a diagonal of exactly 1.
        symmetrize(block, unit_diagonal=normalize)
    stored = block.astype(dtype, copy=False)
    arr[:, rows[0]:rows[1], cols[0]:cols[1]] = stored
    if not diagonal:
        arr[:, cols[0]:cols[1], rows[0]:rows[1]] = stored.transpose(0, 2, 1)
    gram = kernel_products(stored.astype(np.float64, copy=False))
    traces = np.zeros(m)
    if diagonal:
        traces = np.einsum("pii->p", stored, dtype=np.float64)
    else:
        gram *= 2.0
    return gram, traces


def gram_rows(store: tuple[str, str], rows: tuple[int, int], col_bounds: list[tuple[int, int]]
              ) -> tuple[np.ndarray, np.ndarray]:
    """Row block's contribution to ``tr(K_i K_j)`` and the traces: one read of its slabs."""
    arr = store_array(store)
    m = arr.shape[0]
    gram = np.zeros((m, m))
    traces = np.zeros(m)
    for cols in col_bounds:
        slab = read_slab(arr, rows, cols)
        gram += kernel_products(slab)
        if cols == rows:
            traces += np.einsum("pii->p", slab)
    return gram, traces


def row_images(store: tuple[str, str], rows: tuple[int, int], col_bounds: list[tuple[int, int]],
               V: np.ndarray) -> np.ndarray:
    """Per-kernel images ``(K_p V)[rows]`` for every p, shape (m, rows, b)."""
    arr = store_array(store)
    m, r, b = arr.shape[0], rows[1] - rows[0], V.shape[1]
    out = np.zeros((m * r, b))
    for cols in col_bounds:
        # one GEMM over the stacked slab (much faster than a batched matmul)
        out += read_slab(arr, rows, cols).reshape(m * r, -1) @ V[cols[0]:cols[1]]
    return out.reshape(m, r, b)


def form_combined_rows(store: tuple[str, str], rows: tuple[int, int],
                       col_bounds: list[tuple[int, int]], name: str,
                       squared_weights: np.ndarray) -> int:
    """Write rows of ``K_w = sum_p w_p^2 K_p`` into the scratch array (one read of the slabs)."""
    arr = store_array(store)
    out = store_array(store, name, "r+")
    for cols in col_bounds:
        out[rows[0]:rows[1], cols[0]:cols[1]] = np.tensordot(
            squared_weights, read_slab(arr, rows, cols), axes=1)
    return rows[1] - rows[0]


def combined_rows(store: tuple[str, str], rows: tuple[int, int],
                  col_bounds: list[tuple[int, int]], name: str, V: np.ndarray) -> np.ndarray:
    """``(K_w V)[rows]`` from the scratch combined kernel."""
    arr = store_array(store, name)
    out = np.zeros((rows[1] - rows[0], V.shape[1]))
    for cols in col_bounds:
        out += read_checked(arr, (slice(*rows), slice(*cols))) @ V[cols[0]:cols[1]]
    return out


def combine_images(images: np.ndarray, squared_weights: np.ndarray) -> np.ndarray:
    """``(K_w V)[rows] = sum_p w_p^2 (K_p V)[rows]``."""
    return np.tensordot(squared_weights, images, axes=1)


def fused_quad(images: list[np.ndarray], coefficients: list[np.ndarray], U: np.ndarray,
               rows: tuple[int, int]) -> np.ndarray:
    """``sum over rows of U * (K_p U)`` with ``K_p U = sum_l (K_p V_l) S_l`` (shape (m,))."""
    m, r, _ = images[0].shape
    KU = sum(img.reshape(m * r, -1) @ S for img, S in zip(images, coefficients, strict=True))
    KU = KU.reshape(m, r, -1)
    return np.einsum("pik,ik->p", KU, U[rows[0]:rows[1]])


def row_quad(store: tuple[str, str], rows: tuple[int, int], col_bounds: list[tuple[int, int]],
             H: np.ndarray) -> np.ndarray:
    """Row block's contribution to ``tr(H^T K_p H)`` for every p (one read of its slabs)."""
    images = row_images(store, rows, col_bounds, H)
    return np.einsum("pik,ik->p", images, H[rows[0]:rows[1]])
