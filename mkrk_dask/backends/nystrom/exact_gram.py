"""The Nystrom build's exact pass, below ``exact_dissimilarity_max_n`` rows: ``[tr(K_p K_q)]``
from the data over all pairs of row blocks, and the sparse local part of the residuals
``K_p - F_p F_p^T`` from the same pairs."""

from __future__ import annotations

from typing import Any

import numpy as np

from ...passes import RowSource, Shared, blas_threads, block_pairs, run_pass, task_blas_threads
from . import local as local_part
from .local import NO_ENTRIES, LocalPart
from .model import NystromModel
from .tasks import kernel_gram_pair_task

__all__ = ["exact_gram_pass"]

#: rows per block of the exact kernel Gram pass (m blocks of this squared, in float64)
_KERNEL_GRAM_BLOCK = 1024


def exact_gram_pass(client: Any, sources: list[RowSource], model: NystromModel, n: int,
                    threads: int, blas: int | None, local_threshold: float = 0.0,
                    factors_array: Any = None) -> tuple[np.ndarray, LocalPart | None, list[int]]:
    """``[tr(K_p K_q)]`` exactly, from the data by row-block pairs on the workers; with
    ``local_threshold > 0``, also the sparse local part (:class:`LocalPart`) from the same
    pairs and the stored factors.

    A kernel whose residual has more than ``LOCAL_MAX_PER_ROW`` entries per row gets no local
    part (``S_p = 0``); their indices are the third value. Each kernel's count is estimated
    first, from the first block (its entries per row, scaled by n over the block's rows,
    assuming neighbours spread evenly), so that a hopeless kernel costs one block pair; then it
    is counted over all pairs.
    """
    with blas_threads(client, task_blas_threads(client, blas)):
        return _gram_and_local_part(client, sources, model, n, threads, local_threshold,
                                    factors_array)


def _gram_and_local_part(client: Any, sources: list[RowSource], model: NystromModel, n: int,
                         threads: int, local_threshold: float, factors_array: Any
                         ) -> tuple[np.ndarray, LocalPart | None, list[int]]:
    views = sorted({s.view for s in model.specs})
    m = len(model.specs)
    starts = list(range(0, n, _KERNEL_GRAM_BLOCK))

    def block(i: int) -> tuple:
        # held: every block takes part in many pairs (n <= exact_dissimilarity_max_n)
        a = starts[i]
        return (a, {v: sources[v].block(a, min(a + _KERNEL_GRAM_BLOCK, n), hold=True)
                    for v in views})

    specs = Shared(client, list(model.specs))
    cap = local_part.LOCAL_MAX_PER_ROW * n
    dropped = np.zeros(m, dtype=bool)
    local = first = None
    if local_threshold > 0:
        everything = Shared(client, (factors_array, model.offsets, float(local_threshold),
                                     np.arange(m)))
        found_first: list[Any] = []
        run_pass(client, 1, lambda _: client.submit(
            kernel_gram_pair_task, block(0), block(0), True, specs.ref, model.normalize,
            everything.ref, pure=False),
            lambda _, value: found_first.append(value), label="local part size estimate",
            max_in_flight=1)
        first = found_first[0]
        everything.release()
        rows_first = min(_KERNEL_GRAM_BLOCK, n)
        kernels_first = first[1][2]
        both = (np.bincount(kernels_first, minlength=m) * 2
                - np.bincount(kernels_first[first[1][0] == first[1][1]], minlength=m))
        dropped = both / rows_first * (n / rows_first) > cap / n
        if not dropped.all():
            local = Shared(client, (factors_array, model.offsets, float(local_threshold),
                                    np.flatnonzero(~dropped)))
    total = np.zeros((m, m))
    found: list[tuple] = []
    count = np.zeros(m)

    def combine(value: tuple) -> None:
        total[...] += value[0]
        if value[1] is None:
            return
        rows_, cols_, kernel = value[1][:3]
        # both triangles, the diagonal once
        count[...] += (2 * np.bincount(kernel, minlength=m)
                       - np.bincount(kernel[rows_ == cols_], minlength=m))
        dropped[...] |= count > cap
        keep = ~dropped[value[1][2]]
        found.append(tuple(a[keep] for a in value[1]))

    if first is not None:
        combine(first)  # entries of kernels dropped by the estimate are filtered out there
    pairs = block_pairs(len(starts))[1 if first is not None else 0:]

    def submit(t: int) -> Any:
        i, j = pairs[t]
        return client.submit(kernel_gram_pair_task, block(i), block(j), i == j, specs.ref,
                             model.normalize, None if local is None else local.ref,
                             pure=False)

    # In task order: C comes out the same to the bit whichever tasks finish first.
    run_pass(client, len(pairs), submit, lambda _, value: combine(value),
             label="exact C and local part", max_in_flight=2 * threads, ordered=True)
    specs.release()
    part = None
    if local is not None:
        local.release()
        if not dropped.all():
            entries = tuple(np.concatenate(c) for c in zip(NO_ENTRIES, *found, strict=True))
            keep = ~dropped[entries[2]]  # entries collected before their kernel was dropped
            if keep.any():  # an empty local part would only make the iterations n-dimensional
                part = LocalPart.from_entries(tuple(a[keep] for a in entries), n, m,
                                              float(local_threshold))
    return (0.5 * (total + total.T), part,
            np.flatnonzero(dropped).tolist() if local_threshold > 0 else [])
