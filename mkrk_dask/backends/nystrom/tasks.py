"""Tasks of the Nystrom backend; they run on the workers.

- :func:`factor_task`: rows ``start:stop`` to factors (written to the store chunk by chunk),
  their Gram matrix ``F^T F`` (float64) and the exact diagonal sums: the ONE pass over the data.
- :func:`embed_task`: the final pass, ``H = F B`` for a range of rows of the stored factors;
  :func:`stream_embed_task`: the same from the data, for a build that did not store them.
- :func:`cluster_sums_task`: the sum of the factor rows of every cluster (``Z^T F``), from
  the stored factors or the data, for the fit's inertia;
- :func:`labelled_embed_task`: H, the labels of its rows and the sampled rows' cluster sums
  in one reading of the rows (the final pass where the partition was fitted on a sample);
- :func:`kernel_gram_pair_task`: a row-block pair's ``sum K_p K_q`` (exact C) and, optionally,
  the residual entries of the sparse local part.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import scipy.sparse as sp

from ..._lapack import syrk_upper
from ..._malloc import trims_heap
from ...kernels import KernelSpec, kernel_blocks, kernel_products
from ...passes import read_rows
from ...store.zarr_store import read_checked
from .local import residual_entries
from .model import NystromModel, embed_rows

__all__ = ["factor_task", "embed_task", "stream_embed_task", "cluster_sums_task",
           "labelled_embed_task",
           "kernel_gram_pair_task",
           "add_gram", "gram_order", "GRAM_BYTES"]

#: factors per Gram update in a factor task (whole store chunks; at least one)
GRAM_BYTES = 32 * 2**20
#: column blocks of a float32 Gram product added to the float64 sums (see add_gram)
_ADD_BLOCKS = 8


@trims_heap
def factor_task(model: NystromModel, blocks: list, start: int, stop: int, chunk: int,
                factors_array: Any, sample: np.ndarray | None = None) -> dict[str, Any]:
    """Rows ``start:stop``: factors (written to the store chunk by chunk, unless
    ``factors_array`` is None), their Gram matrix
    (accumulated in float64) and the exact diagonal sums. (BLAS threads are set for the whole
    pass: :func:`mkrk_dask.passes.blas_threads`.)

    With ``sample`` (a boolean mask of the rows), the Gram matrix and the factors' diagonal
    products are summed over the sampled rows only, whose factors alone are formed where none
    are written; the exact diagonal sums still cover every row."""
    # float32 input stays float32 until its chunk is used: half the memory a task holds
    views = [read_rows(*b, native=True) for b in blocks]
    R = model.n_components
    m = len(model.specs)
    gram = np.zeros((R, R), order=gram_order(model.dtype))  # F^T F: see add_gram
    diag = np.zeros(m)
    exact_diag_products = np.zeros((m, m))
    nystrom_diag_products = np.zeros((m, m))
    seconds = {"factors": 0.0, "write": 0.0, "gram": 0.0}
    # Whole chunks at a time, about GRAM_BYTES of factors: each Gram update reads and writes
    # the R x R sums, which costs as much as the product of a few hundred rows. One factor
    # buffer serves them all, instead of fresh pages mapped (and faulted) every time.
    step = chunk * max(1, GRAM_BYTES // (chunk * R * np.dtype(model.dtype).itemsize))
    buffer = np.empty((min(step, stop - start), R), dtype=model.dtype)
    # float32 factors: their F^T F in a reused buffer (fresh 4 R^2 bytes per chunk cost page
    # faults and zeroing); see add_gram
    scratch = (np.zeros((R, R), dtype=model.dtype, order="F")
               if model.dtype != np.float64 else None)

    def as_rows(v: Any, a: int, b: int) -> Any:
        return v[a:b] if sp.issparse(v) else np.asarray(v[a:b], dtype=np.float64)

    def add_diagonal(part: list) -> None:
        kappa = model.diagonal(part)
        diag[:] += kappa.sum(axis=0)
        exact_diag_products[:] += kappa.T @ kappa

    diagonal_done = False
    if sample is not None and factors_array is None:
        # The exact diagonal of every row from the rows as read (it needs at most their
        # norms, summed in float64), then the sampled rows alone, whole steps of them at a
        # time: a step of which a tenth is sampled made Gram updates of a tenth of the rows,
        # each reading and writing the R x R sums (most of the pass, profiled at 10^7 rows).
        add_diagonal(views)
        views = [v[sample] for v in views]
        sample, diagonal_done = None, True
    n_rows = views[0].shape[0]
    for a in range(0, n_rows, step):
        b = min(a + step, n_rows)
        part = [as_rows(v, a, b) for v in views]
        t0 = time.perf_counter()
        if not diagonal_done:
            add_diagonal(part)
        keep = None if sample is None else sample[a:b]
        # Diagonals of F_p F_p^T: squared row norms per block
        nys = np.empty((b - a, m))
        F = model.factors(part, sq_norms=nys, out=buffer[:b - a])
        if keep is not None:
            nys = nys[keep]
        nystrom_diag_products += nys.T @ nys
        t1 = time.perf_counter()
        if factors_array is not None:
            factors_array[start + a:start + b] = F
        t2 = time.perf_counter()
        sampled = F if keep is None else F[keep]
        if sampled.shape[0]:
            gram = add_gram(gram, sampled, scratch)
        t3 = time.perf_counter()
        seconds["factors"] += t1 - t0
        seconds["write"] += t2 - t1
        seconds["gram"] += t3 - t2
    return {"gram": gram, "diag": diag, "exact_diag_products": exact_diag_products,
            "nystrom_diag_products": nystrom_diag_products, "seconds": seconds}


def gram_order(dtype: Any) -> str:
    """Memory order of the Gram sums of factors of ``dtype``: Fortran, that of
    :func:`add_gram`'s BLAS product (adding it up never strides across rows)."""
    return "F"


def add_gram(gram: np.ndarray, F: np.ndarray, scratch: np.ndarray | None = None
             ) -> np.ndarray:
    """``gram + F^T F`` in the upper triangle (the one the sums are read from).

    One BLAS ``syrk`` (half the flops of ``F.T @ F``), called with the GIL released
    (:func:`mkrk_dask._lapack.syrk_upper`: the other task thread's numpy work goes on beside
    it). float64 factors: into ``gram`` (Fortran order) in place. float32 factors: into
    ``scratch`` (an R x R float32 Fortran-ordered buffer the caller reuses, so no fresh pages
    per chunk, whose lower triangle is zero: ``syrk`` never writes it; without it, a new
    one), then added in float64, so the sum over chunks does not accumulate float32
    round-off.
    """
    if F.dtype == np.float64:
        return syrk_upper(F, gram, accumulate=True)
    if scratch is None:
        scratch = np.zeros((F.shape[1], F.shape[1]), dtype=F.dtype, order="F")
    syrk_upper(F, scratch)
    # Column blocks down to the diagonal: little more than the upper triangle is added (a
    # whole R x R float64 sum took 2.8 ms beside the 144 ms product at R = 2,048).
    R = gram.shape[0]
    step = max(1, -(-R // _ADD_BLOCKS))
    for j0 in range(0, R, step):
        j1 = min(j0 + step, R)
        gram[:j1, j0:j1] += scratch[:j1, j0:j1]
    return gram


@trims_heap
def embed_task(factors_array: Any, start: int, stop: int, B: np.ndarray,
               chunk: int, rows: np.ndarray | None = None) -> np.ndarray:
    """``F B`` for rows ``start:stop`` (of them, those of the boolean mask ``rows``), read one
    Zarr chunk at a time (bounded memory).

    Computed in float64, kept in the factors' dtype: float32 factors give a float32 H, half
    the memory of the fit's largest array at millions of rows."""
    n = stop - start if rows is None else int(rows.sum())
    out = np.empty((n, B.shape[1]), dtype=factors_array.dtype)
    done = 0
    for a in range(start, stop, chunk):
        b = min(a + chunk, stop)
        F = read_checked(factors_array, (slice(a, b),), dtype=factors_array.dtype)
        if rows is not None:
            F = F[rows[a - start:b - start]]
        out[done:done + F.shape[0]] = embed_rows(F, B)
        done += F.shape[0]
    return out


def _data_rows(blocks: list, rows: np.ndarray | None = None) -> list:
    """The task's rows of every view as read (those of the boolean mask ``rows``)."""
    views = [read_rows(*b, native=True) for b in blocks]
    return views if rows is None else [v[rows] for v in views]


def _float_rows(views: list, a: int, b: int) -> list:
    """Rows ``a:b`` of every view: dense ones in float64, sparse ones as they are."""
    return [v[a:b] if sp.issparse(v) else np.asarray(v[a:b], dtype=np.float64) for v in views]


@trims_heap
def stream_embed_task(model: NystromModel, blocks: list, start: int, stop: int, B: np.ndarray,
                      chunk: int, rows: np.ndarray | None = None) -> np.ndarray:
    """``F B`` for rows ``start:stop`` of the data (of them, those of the boolean mask
    ``rows``), for a build that did not store the factors: :meth:`NystromModel.project`,
    ``chunk`` rows at a time (in float64, kept in the model's dtype)."""
    views = _data_rows(blocks, rows)
    n = views[0].shape[0]
    out = np.empty((n, B.shape[1]), dtype=model.dtype)
    maps = model.projection_maps(B)  # once a task, not once a chunk
    for a in range(0, n, chunk):
        b = min(a + chunk, n)
        out[a:b] = model.project(_float_rows(views, a, b), B, maps=maps)
    return out


@trims_heap
def labelled_embed_task(factors_array: Any, model: NystromModel | None, blocks: list,
                        start: int, stop: int, B: np.ndarray, assign: Any, n_clusters: int,
                        chunk: int, known: tuple[np.ndarray, np.ndarray]
                        ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(H, labels, Z_s^T F)`` of rows ``start:stop`` in one reading of them: ``H = F B``
    (the factors' dtype), the labels ``assign`` gives its rows, and the factor rows of the
    sampled rows ``known = (positions from start, their labels)`` summed per cluster (k x R,
    float64), those rows keeping their labels. From the stored factors, or from the data
    (``model`` and ``blocks``) by
    :meth:`~mkrk_dask.backends.nystrom.model.NystromModel.embed_label_sums`, which
    evaluates each kernel block once for all three."""
    H = np.empty((stop - start, B.shape[1]),
                 dtype=model.dtype if model is not None else factors_array.dtype)
    labels = np.empty(stop - start, dtype=np.int64)
    sums = np.zeros((n_clusters, B.shape[0]))
    views = _data_rows(blocks) if model is not None else []
    maps = model.projection_maps(B) if model is not None else None
    positions, sample_labels = known
    for a in range(0, stop - start, chunk):
        b = min(a + chunk, stop - start)
        lo, hi = np.searchsorted(positions, (a, b))
        here = (positions[lo:hi] - a, sample_labels[lo:hi])
        if model is not None:
            H[a:b], labels[a:b], part = model.embed_label_sums(
                _float_rows(views, a, b), B, assign, n_clusters, here, maps=maps)
            sums += part
            continue
        F = read_checked(factors_array, (slice(start + a, start + b),),
                         dtype=factors_array.dtype)
        H[a:b] = embed_rows(F, B)
        labels[a:b] = assign(H[a:b])
        labels[a:b][here[0]] = here[1]
        sums += _factor_cluster_sums(F[here[0]], here[1], n_clusters)
    return H, labels, sums


def _factor_cluster_sums(F: np.ndarray, labels: np.ndarray, n_clusters: int) -> np.ndarray:
    """``Z^T F`` of a chunk of stored factors, in float64 (as the embedding pass)."""
    indicator = np.zeros((n_clusters, labels.size))
    indicator[labels, np.arange(labels.size)] = 1.0
    return embed_rows(F.T, indicator.T).T


@trims_heap
def cluster_sums_task(factors_array: Any, model: NystromModel | None, blocks: list, start: int,
                      stop: int, labels: np.ndarray, n_clusters: int, chunk: int) -> np.ndarray:
    """``Z^T F`` for rows ``start:stop`` (k x R, float64): the factor rows of every cluster
    summed (``labels`` are those rows'), ``chunk`` rows at a time; read from the stored
    factors, or from the data (``model`` and ``blocks``) where none are stored, by
    :meth:`~mkrk_dask.backends.nystrom.model.NystromModel.cluster_sums` (the kernel blocks
    summed per cluster, then mapped: F is not formed)."""
    views = _data_rows(blocks) if model is not None else []
    sums = None
    for a in range(0, stop - start, chunk):
        b = min(a + chunk, stop - start)
        if model is not None:  # the kernel blocks summed per cluster: F is never formed
            part = model.cluster_sums(_float_rows(views, a, b), labels[a:b], n_clusters)
        else:
            F = read_checked(factors_array, (slice(start + a, start + b),),
                             dtype=factors_array.dtype)
            part = _factor_cluster_sums(F, labels[a:b], n_clusters)
        sums = part if sums is None else sums + part
    return sums


@trims_heap
def kernel_gram_pair_task(block_a: tuple, block_b: tuple, same: bool, specs: list[KernelSpec],
                          normalize: bool,
                          local: tuple[Any, np.ndarray, float, np.ndarray] | None = None
                          ) -> tuple:
    """``sum_{i in A, j in B} K_p(i, j) K_q(i, j)`` for every pair of kernels (m x m), doubled
    for an off-diagonal block pair (the kernels are symmetric).

    A block is ``(first row, {view: rows})``. With ``local = (factors, offsets, threshold,
    kernels)`` (the factor store, its kernels' column offsets, and the indices of the kernels
    that get a local part), also the entries of those residuals ``K_p - F_p F_p^T`` of
    magnitude ``>= threshold`` with row <= column (global indices):
    ``(rows, columns, kernels, values)``; else None.
    """
    (start_a, views_a), (start_b, views_b) = block_a, block_b
    Xa = {v: read_rows(*b) for v, b in views_a.items()}
    Xb = Xa if same else {v: read_rows(*b) for v, b in views_b.items()}
    n_a, n_b = next(iter(Xa.values())).shape[0], next(iter(Xb.values())).shape[0]
    stacked = np.empty((len(specs), n_a * n_b))
    entries = None
    for view in Xa:
        idx = [p for p, s in enumerate(specs) if s.view == view]
        stacked[idx] = kernel_blocks([specs[p] for p in idx], Xa[view], Xb[view],
                                     normalize=normalize).reshape(len(idx), -1)
    products = kernel_products(stacked)
    if local is not None:
        entries = residual_entries(*local, stacked, (n_a, n_b), same, start_a, start_b)
    return (products if same else 2.0 * products), entries
