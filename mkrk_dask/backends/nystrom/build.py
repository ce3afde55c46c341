"""Building (or reopening) a Nystrom store: landmarks, the factor + Gram pass, exact C.

- Landmarks per view (:mod:`mkrk_dask.landmarks`) and the transforms of their kernel blocks.
- ONE distributed pass over row chunks computes ``F`` (written to a Zarr store, chunked by
  rows), the Gram matrix ``G = F^T F`` (R x R; above ``gram_rows``, from a uniform sample of
  rows) and the EXACT traces (the sum of the kernel diagonal; ``||F_p||_F^2`` would be
  biased low and tilts the weights towards the local Gaussian kernels).
- Up to ``exact_dissimilarity_max_n`` rows, a pass over row-block pairs of the data computes C
  exactly and the sparse local part (:mod:`.local`) from the stored factors.

A complete store built from the same data and settings is reopened instead (no pass).

:func:`build_nystrom` returns the parts (:class:`NystromParts`); the backend on them is made by
:func:`~.backend.open_nystrom`, so this module never imports the backend's.
"""

from __future__ import annotations

import math
import shutil
import tempfile
import time
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.sparse as sp
from sklearn.utils import check_random_state

from ...dask_session import DaskSession
from ...exceptions import NystromApproximationWarning, StoreError
from ...kernel_widths import distributed_scales, median_scales
from ...kernels import KernelSpec, kernel_blocks, mirror_upper, resolve_kernels, row_sq_norms
from ...landmarks import allocate_ranks, landmark_transform, select_landmarks
from ...passes import (
    RowSource,
    Shared,
    blas_threads,
    client_threads,
    input_row_starts,
    read_rows,
    release_memory,
    row_tasks,
    run_pass,
    task_blas_threads,
    uniform_row_mask,
)
from ...progress import reporter
from ...store.checkpoints import PassCheckpoint
from ...store.fingerprints import data_fingerprint
from ...store.locations import StoreLocation, check_workers_see, nearest_existing
from ...store.zarr_store import (
    create_data_array,
    create_store,
    load_result,
    mark_complete,
    open_store,
    read_checked,
    save_result,
    verify_store,
)
from ..options import NystromOptions
from . import local as local_part
from .exact_gram import exact_gram_pass
from .local import LOCAL_RESULTS, load_local
from .model import FACTOR_LAYOUT, NystromModel
from .tasks import factor_task, gram_order

__all__ = ["build_nystrom", "NystromParts", "factor_chunk_rows", "factors_storage",
           "landmark_counts", "landmark_flops", "STORE_KIND"]

STORE_KIND = "nystrom"
#: target bytes of one factor chunk (rows x R): every task in flight holds a chunk, its
#: encoded copy while it is written, and its float64 rows when it is read back
_CHUNK_BYTES = 32 * 2**20
#: the factor pass's checkpoint (its record counts rows done)
_FACTOR_PROGRESS = "factor_rows"
#: ``store_factors="auto"`` above the local part stores the factors only where computing them
#: again costs more than this many flops of products with the landmarks (per row) for every
#: byte of a factor row: writing the factors in the factor pass and reading them back in the
#: final pass cost more than computing them again from narrow data (n = 10^5, R = 2,048
#: float32 factors, 4 views of 64 features: 8.1 s for both passes stored, 7.1 s computed
#: again; benchmarks/results/scale/scale_gram_*_n1e5.md and docs/backends.rst), while on wide
#: data the products with the landmarks grow with the width and reading the data again with
#: them
STORE_FLOPS_PER_BYTE = 200
#: the factor pass queues a task behind each running one while a task's Gram result (R x R
#: float64) is at most this size (R <= 2,896)
_QUEUED_RESULT_BYTES = 64 * 2**20


def factor_chunk_rows(n: int, n_components: int, dtype: Any) -> int:
    """Default rows per factor chunk: about 32 MiB of ``n_components`` columns (at least 512
    rows, so that each chunk's Gram product ``F^T F`` stays an efficient matrix product; at
    most n)."""
    return min(n, max(512, _CHUNK_BYTES // (n_components * np.dtype(dtype).itemsize)))


def landmark_counts(n_landmarks: Any, m: int, n: int) -> list[int]:
    """The landmarks of each of ``m`` kernels (``n_landmarks``: one count or one per kernel),
    at most ``n``."""
    counts = list(n_landmarks) if isinstance(n_landmarks, tuple) else [n_landmarks] * m
    if len(counts) != m:
        raise ValueError(f"n_landmarks has {len(counts)} entries for {m} kernels")
    return [min(int(value), n) for value in counts]


@dataclass
class NystromParts:
    """What :func:`build_nystrom` built (or reopened): the row map, the Gram matrix of the
    factors and the exact traces of ``n_samples`` rows, the sparse local part (None without
    one) with the training rows it needs, and the keywords of the backend on them
    (:class:`~.backend.NystromBackend`; the session, store and ``info`` among them)."""

    model: NystromModel
    gram: np.ndarray
    traces: np.ndarray
    n_samples: int
    local: Any
    train_views: list | None
    backend_kwargs: dict


def build_nystrom(views: Sequence[Any], specs: Sequence[KernelSpec], options: NystromOptions,
                  *, normalize: bool, location: StoreLocation | None, session: DaskSession,
                  random_state: Any) -> NystromParts:
    """Select landmarks and run the factor + Gram pass on Dask, or reopen a complete store.

    Returns the :class:`NystromParts` of a :class:`~.backend.NystromBackend` (a
    :class:`~.backend.NystromLocalBackend` where the kernels have a sparse local part:
    ``local`` set). Their ``info`` records the landmarks, ranks, the largest distances (and
    whether exact or estimated), the seconds and FLOPs of every pass, and the local part's
    size. On an error the temporary store is removed again.
    """
    specs = list(specs)
    dtype = np.dtype(options.dtype)
    n = int(views[0].shape[0])
    if any(int(v.shape[0]) != n for v in views):
        raise ValueError("all views must have the same number of rows")
    m = len(specs)
    counts = landmark_counts(options.n_landmarks, m, n)
    info: dict[str, Any] = {"n_samples": n, "seconds": {}}
    client = session.client
    threads = client_threads(client)
    sources = [RowSource(client, v, view=i) for i, v in enumerate(views)]
    temp_dir = None
    try:
        expected = {
            "n_samples": n, "kernels": [s.to_dict() for s in specs],
            "normalize": bool(normalize), "dtype": dtype.name, "n_landmarks": counts,
            "landmarks": options.landmarks,
            "random_state": random_state if isinstance(random_state, int) else None,
            "rel_floor": float(options.rel_floor), "rank_tol": float(options.rank_tol),
            "max_components": options.resolved_max_components(n, m),
            "exact_distance_max_n": int(options.exact_distance_max_n),
            # the limit in force for these kernels ("auto" resolved)
            "exact_dissimilarity_max_n": options.exact_dissimilarity_limit(m),
            "local_threshold": float(options.local_threshold),
            # how factors follow from the transforms: a store of another layout (built before
            # it was recorded) has sums of other factors
            "factor_layout": FACTOR_LAYOUT}
        if options.resolved_gram_rows(n) is not None:
            # only where it applies: stores of every row still match without it
            expected["gram_rows"] = options.resolved_gram_rows(n)
        if options.resolved_landmark_oversampling(n, m) is not None:
            # only where it applies: stores built before the option still match without it
            expected["landmark_oversampling"] = options.resolved_landmark_oversampling(n, m)
        temporary = location is None
        if temporary:
            temp_dir = tempfile.mkdtemp(prefix="mkrk-nystrom-")
            location = StoreLocation.parse(f"{temp_dir}/factors.zarr")
        else:
            expected["fingerprint"] = data_fingerprint(list(views), client)
        group, complete = None, False
        if not temporary and not options.overwrite:
            group, complete = open_store(location, kind=STORE_KIND, expected=expected)
        if group is not None and complete:
            verify_store(location, group, "factors")
            check_workers_see(client, location)
            built = _reopen(group, n, info)
        else:
            # created, then lost before its landmarks were saved (a scheduler lost while the
            # workers checked they see it): nothing to resume, so built again in its place
            empty = group is not None and not group.attrs.get("model_saved")
            if group is not None:
                reporter().log(f"{'rebuilding' if empty else 'resuming'} the interrupted "
                               f"build of {location}")
            built = _build(views, sources, specs, options, counts, dtype, normalize, client,
                           threads, location, expected, temporary or empty, random_state,
                           info, resume=None if empty else group)
        path = location.url
        (model, gram, traces, correction, exact_kernel_gram, local, factors_array, chunk,
         group) = built
        info["chunk_size"] = chunk
        info["n_components"] = model.n_components
        info["max_components"] = options.resolved_max_components(n, m)
        info["store"] = str(path)
        info["dissimilarity_source"] = "nystrom" if exact_kernel_gram is None else "exact"
        left_out = info.pop("_left_out", [])
        info["local_part"] = (None if local is None else {
            "threshold": local.threshold,
            "nonzeros_per_row": local.nonzeros_per_row().round(2).tolist(),
            "left_out": [specs[p].name for p in left_out]})
        common = dict(diag_correction=correction,
                      diagonal_correction=options.diagonal_correction,
                      exact_kernel_gram=exact_kernel_gram, factors_array=factors_array,
                      session=session,
                      # a final pass from the data reads the rows: bounded as the factor pass
                      row_tasks=row_tasks(n, chunk, threads,
                                          0 if factors_array is not None else
                                          8 * sum(int(v.shape[1]) for v in views),
                                          starts=input_row_starts(views)),
                      views=None if factors_array is not None else list(views), chunk=chunk,
                      task_blas_threads=task_blas_threads(client, options.blas_threads),
                      temp_dir=temp_dir, info=info, n_features=[int(v.shape[1]) for v in views],
                      group=group)
        # predict/transform need the training rows for the local part
        train_views = None if local is None else [read_rows(v, 0, n) for v in views]
        return NystromParts(model=model, gram=gram, traces=traces, n_samples=n, local=local,
                            train_views=train_views, backend_kwargs=common)
    except BaseException:
        if temp_dir is not None:
            shutil.rmtree(temp_dir, ignore_errors=True)
        raise
    finally:
        for source in sources:
            source.release()


def _reopen(group: Any, n: int, info: dict) -> tuple:
    model, meta = _load_model(group)
    sums = _factor_sums(group)
    if sums is None:
        raise StoreError(f"{group.store} is complete but lacks its Gram matrix; rebuild it")
    exact_kernel_gram = load_result(group, "exact_kernel_gram")
    local = load_local(group, load_result, n, len(model.specs))
    stored = load_result(group, "local_left_out")
    info["_left_out"] = [] if stored is None else stored.tolist()
    info.update(meta)
    info["reused_store"] = True
    factors = _stored_factors(group)
    info["factors_storage"] = ("stored" if factors is not None else
                               "not stored") + " (a complete store, reused)"
    return (model, sums["gram"], sums["traces"], sums["diag_correction"], exact_kernel_gram,
            local, factors, int(meta["chunk_size"]), group)


def landmark_flops(counts: list[int], kernel_views: list[int], widths: list[int]) -> float:
    """The products of a row with the landmarks, in flops: ``2 r d`` for each view of ``d``
    columns whose kernels have at most ``r`` landmarks (``counts``, one per kernel;
    ``kernel_views``, the view of each kernel)."""
    return float(sum(2.0 * max(c for c, v in zip(counts, kernel_views, strict=True) if v == view)
                     * widths[view] for view in sorted(set(kernel_views))))


def factors_storage(options: NystromOptions, n: int, m: int, *, distance_flops: float,
                    rank: int | None, location: StoreLocation | None = None, store: Any = None,
                    storage_options: dict | None = None, max_rank: int | None = None
                    ) -> tuple[bool | None, str]:
    """Whether the build stores its factors, and why: the one rule of ``store_factors``.
    ``"auto"`` above the local part: only where computing them again would cost more than
    writing and reading them back (wide data: ``distance_flops``, the products with the
    landmarks per row, above :data:`STORE_FLOPS_PER_BYTE` times the bytes of a factor row,
    ``rank`` entries of ``options.dtype``), and where they stay in the page cache (a store on
    local disk, at most half the available memory and :data:`~mkrk_dask.auto.DISK_FRACTION` of
    the free disk); else the final pass computes them again.

    The store is at ``location`` (or ``store``, a path or URL with its ``storage_options``;
    None: a temporary one). The build knows the factors' ``rank``; the plan, before the
    landmarks are chosen, does not (``rank=None``, at most ``max_rank``): it gets the answer
    where no rank changes it, else None and the ranks that store them."""
    rule = options.factors_storage(n, m)
    if rule is not None and options.store_factors == "auto":
        return rule, "stored: the sparse local part reads them"
    if rule is not None:
        return rule, f"{'stored' if rule else 'not stored'}: store_factors={rule}"
    itemsize = np.dtype(options.dtype).itemsize
    if location is None and store is not None:
        location = StoreLocation.parse(store, storage_options)
    if rank is None:
        return _factors_storage_before(n, itemsize, location, distance_flops, max_rank)
    row_bytes = rank * itemsize
    if distance_flops <= STORE_FLOPS_PER_BYTE * row_bytes:
        return False, (f"not stored: computing them again in the final pass ("
                       f"{distance_flops / 1e6:.2g} MFLOP of products with the landmarks per "
                       f"row) costs less than writing and reading back {row_bytes:,} bytes "
                       "per row")
    size = float(n) * row_bytes
    if not location.is_local:
        return False, "not stored: the store is not on local disk"
    memory, free = _page_cache_room(location)
    if size <= 0.5 * memory and size <= _disk_fraction() * free:
        return True, (f"stored: {size / 2**30:.1f} GiB, within half the available memory "
                      f"({memory / 2**30:.1f} GiB)")
    return False, (f"not stored: {size / 2**30:.1f} GiB, more than half the available memory "
                   f"({memory / 2**30:.1f} GiB) or {_disk_fraction():.0%} of the free disk "
                   f"({free / 2**30:.1f} GiB); the final pass computes them again")


def _disk_fraction() -> float:
    from ...auto import DISK_FRACTION

    return DISK_FRACTION


def _page_cache_room(location: StoreLocation | None) -> tuple[float, float]:
    """The available memory and the free disk where the store goes (a temporary one: the
    temporary directory's)."""
    import psutil

    path = tempfile.gettempdir() if location is None else nearest_existing(location.url)
    return float(psutil.virtual_memory().available), float(shutil.disk_usage(path).free)


def _factors_storage_before(n: int, itemsize: int, location: StoreLocation | None,
                            distance_flops: float, max_rank: int | None
                            ) -> tuple[bool | None, str]:
    """:func:`factors_storage` before the factors' rank R is known (at least 1, at most
    ``max_rank``): stored only for R below ``cheaper`` (writing and reading a factor row back
    costs less than computing it again) and at most ``room`` (the page cache's share)."""
    budget = STORE_FLOPS_PER_BYTE * itemsize
    cheaper = distance_flops / budget if budget > 0 else math.inf
    if cheaper <= 1:
        return False, (f"not stored: computing them again in the final pass "
                       f"({distance_flops / 1e6:.2g} MFLOP of products with the landmarks per "
                       "row) costs less than writing and reading back any factor row")
    if location is not None and not location.is_local:
        return False, "not stored: the store is not on local disk"
    memory, free = _page_cache_room(location)
    room = int(min(0.5 * memory, _disk_fraction() * free) // (float(n) * itemsize))
    where = (f"half the available memory ({memory / 2**30:.1f} GiB) and "
             f"{_disk_fraction():.0%} of the free disk ({free / 2**30:.1f} GiB)")
    if room < 1:
        return False, f"not stored: not one factor column of {n:,} rows fits {where}"
    if max_rank is not None and max_rank < cheaper and max_rank <= room:
        return True, (f"stored: computing them again costs more than writing and reading "
                      f"them back, and {max_rank:,} components fit {where}")
    limit = min(room, math.ceil(cheaper) - 1)
    return None, (f"stored where the factors' rank R (at most "
                  f"{'?' if max_rank is None else f'{max_rank:,}'}, known once the landmarks "
                  f"are chosen) is at most {limit:,}: below {cheaper:,.0f} computing them "
                  f"again costs more than writing and reading them back, and up to "
                  f"{room:,} they fit {where}")


def _stored_factors(group: Any) -> Any:
    """The store's factor array, or None if the build did not store them."""
    return group["factors"] if "factors" in group else None


def _build(views: Sequence[Any], sources: list[RowSource], specs: list[KernelSpec],
           options: NystromOptions, counts: list[int], dtype: np.dtype, normalize: bool,
           client: Any, threads: int, location: StoreLocation, expected: dict,
           replace: bool, random_state: Any, info: dict, resume: Any = None) -> tuple:
    """A new store (``replace``: over what is at ``location``), or the rest of the
    interrupted build ``resume``: landmarks and scales (kept in the store), the factor pass
    (checkpointed by task prefix), then exact C."""
    n, m = sources[0].n_rows, len(specs)
    info["reused_store"] = False
    if resume is None:
        t0 = time.perf_counter()
        scales = distributed_scales(client, sources, specs,
                                    exact_max_n=options.exact_distance_max_n,
                                    random_state=random_state)
        info["seconds"]["scales"] = time.perf_counter() - t0
        distances = [scales[v]["value"] if v in scales else 0.0 for v in range(len(views))]
        resolved = resolve_kernels(specs, distances,
                                   median_scales([src.X for src in sources], specs))
        t0 = time.perf_counter()
        model, landmark_idx = _build_model(views, resolved, normalize, counts,
                                           options.landmarks, random_state, options.rel_floor,
                                           options.rank_tol, dtype,
                                           options.resolved_max_components(n, m),
                                           options.resolved_landmark_oversampling(n, m))
        info["seconds"]["landmarks"] = time.perf_counter() - t0
        R = model.n_components
        chunk = int(options.chunk_size or factor_chunk_rows(n, R, dtype))
        meta = {"resolved_kernels": [s.to_dict() for s in resolved],
                "scales": {str(k): v for k, v in scales.items()},
                "ranks": model.ranks.tolist(), "chunk_size": chunk,
                "kernel_landmarks": list(model.kernel_landmarks)}
        group = create_store(location, kind=STORE_KIND, metadata={**expected, **meta},
                             overwrite=options.overwrite or replace)
        check_workers_see(client, location)
        for v, L in model.landmarks.items():
            _save_array(group, f"landmarks_{v}", L)
            _save_array(group, f"landmark_indices_{v}", landmark_idx[v])
        for p, T in enumerate(model.transforms):
            _save_array(group, f"transform_{p}", T)
        store, info["factors_storage"] = factors_storage(
            options, n, m, rank=R, location=location,
            distance_flops=sum(2.0 * L.shape[0] * L.shape[1]
                               for L in model.landmarks.values()))
        factors_array = (create_data_array(group, "factors", shape=(n, R), chunks=(chunk, R),
                                           dtype=dtype) if store else None)
        group.attrs.update({"model_saved": True})
    else:
        group = resume
        check_workers_see(client, location)
        if not group.attrs.get("model_saved"):
            raise StoreError(f"{location} was interrupted before its landmarks were saved; "
                             "delete it, or pass overwrite=True to rebuild it")
        model, meta = _load_model(group)
        factors_array, chunk = _stored_factors(group), int(meta["chunk_size"])
    R = model.n_components
    sums = _factor_sums(group)
    if sums is None:
        t0 = time.perf_counter()
        row_bytes = 8 * sum(int(v.shape[1]) for v in views)
        sample = uniform_row_mask(n, options.resolved_gram_rows(n), random_state)
        sums, seconds = _factor_pass(client, sources, model, row_bytes, chunk, factors_array,
                                     threads, options.blas_threads,
                                     PassCheckpoint(group, _FACTOR_PROGRESS), sample)
        elapsed = time.perf_counter() - t0
        rows = n if sample is None else int(sample.sum())
        info["seconds"]["gram_pass"] = elapsed
        info["gram_pass"] = {"seconds": elapsed, "flops": 2.0 * rows * R * R,
                             "gflops_per_s": 2.0 * rows * R * R / elapsed / 1e9,
                             "gram_rows": rows, "task_seconds": seconds}
        for name in ("gram", "traces", "diag_correction"):
            save_result(group, name, sums[name])
        PassCheckpoint(group, _FACTOR_PROGRESS).clear()
    gram, traces, correction = sums["gram"], sums["traces"], sums["diag_correction"]
    exact_kernel_gram = local = None
    left_out: list[int] = []
    if options.exact_dissimilarity(n, m):
        t0 = time.perf_counter()
        exact_kernel_gram, local, left_out = exact_gram_pass(
            client, sources, model, n, threads, options.blas_threads, options.local_threshold,
            factors_array)
        info["seconds"]["exact_kernel_gram"] = time.perf_counter() - t0
        save_result(group, "exact_kernel_gram", exact_kernel_gram)
        if local is not None:
            for name, value in zip(LOCAL_RESULTS, local.entries(), strict=True):
                save_result(group, name, value)
        save_result(group, "local_left_out", np.array(left_out, dtype=np.int64))
        if left_out:
            names = ", ".join(specs[p].name for p in left_out)
            warnings.warn(
                f"the Nystrom residuals of {names} have more than "
                f"{local_part.LOCAL_MAX_PER_ROW} entries >= {options.local_threshold:g} per "
                "row; these kernels get no local part (raise local_threshold, or give them "
                "more landmarks)", NystromApproximationWarning, stacklevel=4)
    mark_complete(group)
    info.update(meta)
    info["_left_out"] = left_out
    return (model, gram, traces, correction, exact_kernel_gram, local, factors_array, chunk,
            group)


def _factor_sums(group: Any) -> dict[str, np.ndarray] | None:
    """The factor pass's results, if a resumed build already stored them."""
    found = {name: load_result(group, name) for name in ("gram", "traces", "diag_correction")}
    return None if any(v is None for v in found.values()) else found


def _factor_pass(client: Any, sources: list[RowSource], model: NystromModel, row_bytes: int,
                 chunk: int, factors_array: Any, threads: int, blas: int | None,
                 checkpoint: PassCheckpoint, sample: np.ndarray | None = None
                 ) -> tuple[dict[str, np.ndarray], dict]:
    """The one pass over the data: factors written to the store, and their sums (Gram
    matrix, exact traces, diagonal correction) combined in row order and checkpointed with
    the rows done, so that an interrupted pass continues with the same sums to the bit, also
    on a cluster with another number of threads (other task ranges).

    With ``sample`` (:func:`~mkrk_dask.passes.uniform_row_mask`), the Gram matrix and the
    factors' diagonal products are the sampled rows' sums scaled by ``n / rows``: estimates of
    the sums over every row
    (the exact diagonal sums, read from every row, are not scaled)."""
    R, m = model.n_components, len(model.specs)
    n = sources[0].n_rows
    blas = task_blas_threads(client, blas)
    state = checkpoint.load()
    done = 0 if state is None else state[0]
    sums = ({"gram": np.zeros((R, R), order=gram_order(model.dtype)), "traces": np.zeros(m),
             "diag_correction": np.zeros((m, m))} if state is None else state[1])
    if done:
        reporter().log(f"the factors of {done:,} of {n:,} rows were done before; doing the "
                       "rest")
    # ``done`` ends a task: with stored factors a whole number of their chunks (tasks are
    # aligned to the input's chunks only where none are stored)
    tasks = row_tasks(n, chunk, threads, row_bytes, first=done,
                      starts=input_row_starts([s.X for s in sources])
                      if factors_array is None else None)
    seconds = {"factors": 0.0, "write": 0.0, "gram": 0.0}
    shared_model = Shared(client, model)

    def submit(i: int) -> Any:
        start, stop = tasks[i]
        blocks = [s.block(start, stop) for s in sources]
        return client.submit(factor_task, shared_model.ref, blocks, start, stop, chunk,
                             factors_array, None if sample is None else sample[start:stop],
                             pure=False)

    scale = 1.0 if sample is None else n / float(sample.sum())

    def combine(i: int, value: dict) -> None:
        if scale != 1.0:
            value["gram"] *= scale  # in place: no second R x R array on the client
        sums["gram"] += value["gram"]
        sums["traces"] += value["diag"]
        sums["diag_correction"] += (value["exact_diag_products"]
                                    - scale * value["nystrom_diag_products"])
        for key, s in value["seconds"].items():
            seconds[key] += s
        checkpoint.save(tasks[i][1], sums)

    # a task queued behind each running one: a worker need not wait for the client
    queued = threads if R * R * 8 <= _QUEUED_RESULT_BYTES else 0
    with blas_threads(client, blas):
        run_pass(client, len(tasks), submit, combine, label="Nystrom factors + Gram",
                 max_in_flight=max(2, threads) + queued, ordered=True)
    shared_model.release()
    release_memory(client)
    # The tasks keep the upper triangle (add_gram); the lower one is its mirror.
    return {"gram": mirror_upper(sums["gram"]), "traces": sums["traces"],
            "diag_correction": 0.5 * (sums["diag_correction"] + sums["diag_correction"].T)
            }, seconds


def _build_model(views: Sequence[Any], specs: list[KernelSpec], normalize: bool,
                 counts: list[int], method: str, random_state: Any, rel_floor: float,
                 rank_tol: float, dtype: np.dtype, max_components: int | None = None,
                 oversampling: float | None = None
                 ) -> tuple[NystromModel, dict[int, np.ndarray]]:
    rng = check_random_state(random_state)
    counts = list(counts)
    landmarks: dict[int, np.ndarray] = {}
    indices: dict[int, np.ndarray] = {}
    transforms: list[Any] = [None] * len(specs)
    spectra: list[Any] = [None] * len(specs)
    blocks: list[Any] = [None] * len(specs)
    for view in sorted({s.view for s in specs}):
        idx = [p for p, s in enumerate(specs) if s.view == view]
        r = max(counts[p] for p in idx)
        chosen, L = select_landmarks(views[view], r, method, rng, return_rows=True)
        L = L.toarray() if sp.issparse(L) else np.asarray(L, dtype=np.float64)
        landmarks[view] = L
        indices[view] = chosen
        sq = row_sq_norms(L)
        W = kernel_blocks([specs[p] for p in idx], L, L, sq, sq, normalize=normalize)
        for j, p in enumerate(idx):
            T, values = landmark_transform(W[j][:counts[p], :counts[p]], rel_floor, rank_tol)
            if T.shape[1] == 0:
                raise ValueError(f"kernel {specs[p].name}: the landmark block is zero")
            transforms[p], spectra[p], blocks[p] = T, values, W[j]
    ranks = allocate_ranks(spectra, max_components)
    if oversampling is not None:
        for p, rank in enumerate(ranks):
            prefix = max(rank, math.ceil(oversampling * rank))
            if prefix < counts[p]:
                # The kernel's components from its first landmarks only (a smaller
                # block, so at most the rank it had).
                T, _ = landmark_transform(blocks[p][:prefix, :prefix], rel_floor, rank_tol)
                transforms[p], counts[p] = T, prefix
                ranks[p] = min(rank, T.shape[1])
    transforms = [T[:, :r] for T, r in zip(transforms, ranks, strict=True)]
    model = NystromModel(specs=specs, normalize=normalize, landmarks=landmarks,
                         kernel_landmarks=counts, transforms=transforms, dtype=dtype)
    return model, indices


def _save_array(group: Any, name: str, value: np.ndarray) -> None:
    value = np.asarray(value)
    array = create_data_array(group, name, shape=value.shape, chunks=value.shape,
                              dtype=value.dtype, overwrite=True)
    array[...] = value


def _load_model(group: Any) -> tuple[NystromModel, dict]:
    """The row map (landmarks, transforms) and the build's metadata saved in a store."""
    attrs = group.attrs.asdict()
    specs = [KernelSpec(**d) for d in attrs["resolved_kernels"]]
    landmarks = {v: read_checked(group[f"landmarks_{v}"], (Ellipsis,))
                 for v in sorted({s.view for s in specs})}
    transforms = [read_checked(group[f"transform_{p}"], (Ellipsis,))
                  for p in range(len(specs))]
    model = NystromModel(specs=specs, normalize=attrs["normalize"], landmarks=landmarks,
                         kernel_landmarks=list(attrs.get("kernel_landmarks",
                                                         attrs["n_landmarks"])),
                         transforms=transforms,
                         dtype=attrs["dtype"])
    meta = {k: attrs[k] for k in ("resolved_kernels", "scales", "ranks", "chunk_size")}
    return model, meta
