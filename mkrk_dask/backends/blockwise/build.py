"""Building (or reopening) a blockwise kernel store.

Layout of a kernel store (kind ``"kernels"``, see :mod:`mkrk_dask.store`)::

    kernels            (m, n, n) array, chunks (1, c, c), uncompressed, dtype float64/float32
    results_gram       (m, m) tr(K_i K_j), added when computed (-> fip and sfn)
    results_traces     (m,)   tr(K_p)
    attrs              format, format_version, kind, complete, kernel_request (as asked),
                       kernel_specs (resolved: Gaussian sigmas filled in), max_distances, n, m,
                       chunk_size, normalize, dtype, fingerprint, source

One task per block pair ``(i, j)``, ``i <= j``, evaluates every kernel with
:func:`mkrk_dask.kernels.kernel_blocks` and writes the block and its transpose (the kernels are
exactly symmetric). The same tasks return the pair's contribution to the Gram matrix
``tr(K_i K_j)`` and the traces, so a fresh store needs no separate pass for C.
"""

from __future__ import annotations

import math
import shutil
import tempfile
import time
import uuid
from typing import Any

import numpy as np

from ...dask_session import DaskSession
from ...kernel_widths import distributed_scales, median_scales
from ...kernels import KernelSpec, normalize_kernels, resolve_kernels, symmetrize
from ...passes import RowSource, block_pairs, client_threads, row_bounds, run_pass
from ...progress import reporter
from ...store.checkpoints import PassCheckpoint
from ...store.fingerprints import data_fingerprint
from ...store.locations import StoreLocation, check_workers_see
from ...store.zarr_store import (
    create_data_array,
    create_store,
    mark_complete,
    open_store,
    save_result,
    verify_store,
)
from ..options import BlockwiseOptions
from .tasks import KERNELS, build_pair

__all__ = ["STORE_KIND", "default_chunk_size", "open_or_build"]

STORE_KIND = "kernels"
#: target bytes of one (m, c, c) float64 slab, the unit of work of every pass
_SLAB_BYTES = 2**26


def default_chunk_size(n: int, m: int) -> int:
    """Rows per block: an ``(m, c, c)`` float64 slab of about 64 MiB, a multiple of 128."""
    c = int(math.sqrt(_SLAB_BYTES / (8.0 * max(m, 1)))) // 128 * 128
    return int(min(n, max(256, min(c, 4096))))


def open_or_build(*, source: str, n: int, m: int, request: list | None, fingerprint_of: list,
                  normalize: bool, location: StoreLocation | None, session: DaskSession,
                  options: BlockwiseOptions, build: Any
                  ) -> tuple[Any, StoreLocation, str | None, bool, dict]:
    """Reopen the complete store at ``location`` that matches, resume one whose build was
    interrupted, or build one.

    Returns ``(group, location, temp_dir, built, timings)``; ``temp_dir`` is the temporary
    directory holding the store when none was given (the backend deletes it when closed).
    """
    temp_dir = None
    try:
        t0 = time.perf_counter()
        expected = {"source": source, "kernel_request": request, "n": n, "m": m,
                    "normalize": bool(normalize), "dtype": options.dtype,
                    "fingerprint": data_fingerprint(fingerprint_of, session.client)}
        if options.chunk_size is not None:
            expected["chunk_size"] = int(options.chunk_size)
        group, complete = None, False
        if location is None:
            temp_dir = tempfile.mkdtemp(prefix="mkrk-blockwise-")
            location = StoreLocation.parse(f"{temp_dir}/kernels.zarr")
        elif not options.overwrite:
            group, complete = open_store(location, kind=STORE_KIND, expected=expected)
        timings = {"fingerprint": time.perf_counter() - t0}
        if group is not None and complete:
            verify_store(location, group, KERNELS)
            check_workers_see(session.client, location)
            return group, location, temp_dir, False, timings
        t1 = time.perf_counter()
        if group is None:
            c = options.chunk_size if options.chunk_size is not None else default_chunk_size(n, m)
            metadata = dict(expected, chunk_size=c, build_id=uuid.uuid4().hex,
                            layout=f"{KERNELS}: (m, n, n) chunks (1, c, c)")
            parts = dict(client=session.client, location=location, metadata=metadata,
                         overwrite=options.overwrite, n=n, m=m, c=c, dtype=options.dtype)
        else:
            attrs = group.attrs.asdict()
            reporter().log(f"resuming the interrupted build of {location}")
            parts = dict(client=session.client, location=location, metadata=attrs,
                         overwrite=False, n=n, m=m, c=int(attrs["chunk_size"]),
                         dtype=options.dtype, resume=group)
        group = build(parts)
        timings["build"] = time.perf_counter() - t1
        return group, location, temp_dir, True, timings
    except BaseException:
        if temp_dir is not None:
            shutil.rmtree(temp_dir, ignore_errors=True)
        raise


def _create_kernel_array(group: Any, m: int, n: int, c: int, dtype: str) -> None:
    create_data_array(group, KERNELS, shape=(m, n, n), chunks=(1, c, c), dtype=dtype)


def build_from_views(views: list, specs: list[KernelSpec], *, normalize: bool, client: Any,
                     location: StoreLocation, metadata: dict, overwrite: bool, n: int, m: int,
                     c: int, dtype: str, resume: Any = None) -> Any:
    """Compute every kernel of ``views`` into a new store at ``location`` on the workers, or
    finish the interrupted build ``resume`` from its recorded progress."""
    bounds = row_bounds(n, c)
    used = sorted({spec.view for spec in specs})
    sources = {v: RowSource(client, views[v], view=v) for v in used}
    if resume is None:
        # Relative Gaussian widths: the exact largest pairwise distance, on the workers.
        scales = distributed_scales(client, [sources.get(v) for v in range(len(views))],
                                    specs, exact_max_n=max(n, 1))
        distances = [scales[v]["value"] if v in scales else 0.0 for v in range(len(views))]
        resolved = resolve_kernels(specs, distances, median_scales(views, specs))
        metadata = dict(metadata, kernel_specs=[s.to_dict() for s in resolved],
                        max_distances=distances)
        group = create_store(location, kind=STORE_KIND, metadata=metadata, overwrite=overwrite)
        check_workers_see(client, location)
        _create_kernel_array(group, m, n, c, dtype)
    else:
        group = resume
        resolved = [KernelSpec(**d) for d in metadata["kernel_specs"]]
        check_workers_see(client, location)
        if KERNELS not in group:
            # the store was created, then the build was lost before its array (a scheduler
            # lost while the workers checked they see the store): nothing of it to keep
            _create_kernel_array(group, m, n, c, dtype)
    groups = [([p for p, s in enumerate(resolved) if s.view == v],
               [s for s in resolved if s.view == v]) for v in used]
    key = (location, metadata["build_id"])
    pairs = block_pairs(len(bounds))
    checkpoint = PassCheckpoint(group, "build")
    state = checkpoint.load() if resume is not None else None
    first = 0 if state is None else state[0]
    sums = {"gram": np.zeros((m, m)), "traces": np.zeros(m)} if state is None else state[1]
    if first:
        reporter().log(f"{first} of {len(pairs)} block pairs were built before; building the "
                       "rest")

    def submit(t: int) -> Any:
        i, j = pairs[first + t]
        return client.submit(build_pair, key, groups,
                             [sources[v].block(*bounds[i], hold=True) for v in used],
                             [sources[v].block(*bounds[j], hold=True) for v in used],
                             bounds[i], bounds[j], m, normalize, dtype, pure=False)

    def combine(t: int, value: tuple[np.ndarray, np.ndarray]) -> None:
        sums["gram"] += value[0]
        sums["traces"] += value[1]
        checkpoint.save(first + t + 1, sums)

    try:
        run_pass(client, len(pairs) - first, submit, combine, label="kernel build",
                 max_in_flight=2 * client_threads(client), ordered=True)
    finally:
        for s in sources.values():
            s.release()
    _finish_store(group, sums["gram"], sums["traces"])
    checkpoint.clear()
    return group


def _finish_store(group: Any, gram: np.ndarray, traces: np.ndarray) -> None:
    """Persist the Gram matrix and traces gathered from the build, then mark complete."""
    save_result(group, "gram", gram)
    save_result(group, "traces", traces)
    mark_complete(group)


def build_from_precomputed(kernels: Any, *, normalize: bool, client: Any,
                           location: StoreLocation, metadata: dict, overwrite: bool, n: int,
                           m: int, c: int, dtype: str, resume: Any = None) -> Any:
    """Precomputed kernels are already in the client's memory: write them from here (an
    interrupted write is simply written again)."""
    group = resume if resume is not None else create_store(
        location, kind=STORE_KIND, metadata=dict(metadata, kernel_specs=None),
        overwrite=overwrite)
    check_workers_see(client, location)
    if KERNELS not in group:
        _create_kernel_array(group, m, n, c, dtype)
    arr = group[KERNELS]
    gram = np.zeros((m, m))
    traces = np.zeros(m)
    for p in range(m):
        K = np.array(kernels[p], dtype=np.float64)[None]
        if normalize:
            normalize_kernels(K)
        K = symmetrize(K, unit_diagonal=False)[0].astype(dtype, copy=False)
        arr[p] = K
        traces[p] = np.trace(K, dtype=np.float64)
    # Gram matrix from the stored values, one kernel pair at a time (m^2 n^2 flops).
    for p in range(m):
        Kp = np.asarray(arr[p], dtype=np.float64).ravel()
        for q in range(p, m):
            Kq = Kp if q == p else np.asarray(arr[q], dtype=np.float64).ravel()
            gram[p, q] = gram[q, p] = Kp @ Kq
    _finish_store(group, gram, traces)
    return group
