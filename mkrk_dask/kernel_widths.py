"""The data scales that relative kernel widths are measured in, in memory or on Dask.

The paper's Gaussian widths are relative to the largest pairwise distance ``M`` of a view.
Up to ``exact_max_n`` rows it is computed exactly (``O(n^2 d)``; on Dask by row-block pairs,
:func:`mkrk_dask.passes.block_pairs`); above, it is ESTIMATED as the largest of (a) the exact
maximum over a uniform sample of 4096 rows and (b) two farthest-point passes over all rows (from
a sample point to its farthest row q, then from q to its farthest row). The estimate is a lower
bound of M and at least M/2 (in practice within a few percent). Which was used is recorded with
the value (``{"value", "method", ...}``).
"""

from __future__ import annotations

import contextlib
import contextvars
import math
from typing import Any

import numpy as np
import scipy.sparse as sp
from sklearn.utils import check_random_state

from ._malloc import trims_heap
from .kernel_evaluation import direction_roots, self_sq_distances, sq_distances
from .kernels import (
    KernelSpec,
    block_max_sq_distance,
    max_pairwise_distance,
    medians_needed,
    row_sq_norms,
    views_needing_scale,
)
from .landmarks import take_rows
from .passes import (
    RowSource,
    block_pairs,
    client_threads,
    read_rows,
    row_bounds,
    rows_per_task,
    run_pass,
)

__all__ = ["memory_scales", "distributed_scales", "median_scales", "sample_rows", "unit_rows",
           "shared_samples",
           "directions_differ",
           "EXACT_DISTANCE_MAX_N", "MEDIAN_SAMPLE_ROWS", "ROUND_OFF"]

#: default largest n whose largest pairwise distance is computed exactly on Dask
EXACT_DISTANCE_MAX_N = 100_000
#: rows per block of the exact pairwise pass
_PAIR_BLOCK = 4096
#: rows of the uniform sample of the estimate
_SAMPLE_ROWS = 4096
#: rows of the uniform sample the median pairwise distance is estimated from
MEDIAN_SAMPLE_ROWS = 2000
#: most rows per task of a farthest-point pass (fewer for wide rows)
_FARTHEST_BLOCK = 65536


def memory_scales(views: list, specs: list[KernelSpec]) -> dict[int, dict]:
    """The exact largest pairwise distance of every view that needs one (in memory)."""
    return {v: {"value": max_pairwise_distance(views[v]), "method": "exact"}
            for v in sorted(views_needing_scale(specs))}


#: the samples of lazy views read in the fit under way (:func:`shared_samples`)
_SAMPLES: contextvars.ContextVar[dict | None] = contextvars.ContextVar("mkrk_samples",
                                                                       default=None)


@contextlib.contextmanager
def shared_samples() -> Any:
    """Within it, :func:`sample_rows` reads the sample of a lazy view (dask or Zarr) once:
    the plan's (preprocessing, its calibration) and the build's kernel widths draw the same
    rows (the seed is fixed), and each read of a uniform sample decodes every chunk of the
    view. A fit holds one for its plan and build."""
    token = _SAMPLES.set({})
    try:
        yield
    finally:
        _SAMPLES.reset(token)


def sample_rows(X: Any, size: int = MEDIAN_SAMPLE_ROWS) -> Any:
    """A uniform sample of at most ``size`` rows of X (numpy, sparse, dask or Zarr), in
    float64: dense, or CSR for sparse X (never densified: a sparse view may have millions of
    columns); a copy of the one read before for the same lazy X within
    :func:`shared_samples`.

    The seed is fixed: what is derived from the sample (the kernel widths, the default
    dictionary) depends on the data only, not on ``random_state``.
    """
    cache = _SAMPLES.get()
    if cache is None or not (hasattr(X, "compute") or hasattr(X, "get_orthogonal_selection")):
        return _read_sample(X, size)
    key = (id(X), min(size, X.shape[0]))
    if key not in cache or cache[key][0] is not X:  # the id of a view no longer alive
        cache[key] = (X, _read_sample(X, size))
    return cache[key][1].copy()


def _read_sample(X: Any, size: int) -> Any:
    n = X.shape[0]
    idx = np.sort(np.random.default_rng(0).choice(n, size=min(size, n), replace=False))
    rows = take_rows(X, idx)
    return rows.astype(np.float64) if sp.issparse(rows) else np.asarray(rows, dtype=np.float64)


#: relative round-off below which two unit rows (or squared distances, relative to the largest
#: squared norm) are taken as equal: 64 float64 units
ROUND_OFF = 64 * float(np.finfo(np.float64).eps)


def unit_rows(rows: Any, zero_rows: str = "own") -> Any:
    """``rows`` scaled to unit length (dense or sparse). An all-zero row has no direction:
    ``zero_rows="keep"`` leaves it zero; ``"own"`` gives every row one more coordinate, 1 for
    an all-zero row and 0 otherwise, so that all-zero rows share a direction orthogonal to
    every other row (the angular kernels' convention, :mod:`mkrk_dask.kernel_evaluation`)."""
    root, zero = direction_roots(row_sq_norms(rows))
    scale = 1.0 / root
    unit = sp.diags(scale) @ rows if sp.issparse(rows) else rows * scale[:, None]
    if zero_rows == "keep" or not zero.any():
        return unit
    own = zero[:, None].astype(np.float64)
    return sp.hstack([unit, sp.csr_matrix(own)]).tocsr() if sp.issparse(rows) else np.hstack(
        [unit, own])


def directions_differ(rows: Any) -> bool:
    """Whether the non-zero rows point in more than one direction. Where they do not (one
    column, or proportional columns), every angle between them is zero: the angle has
    nothing to tell (an all-zero row has no direction and counts for neither)."""
    units = unit_rows(rows, zero_rows="keep")
    units = units[row_sq_norms(rows) > 0]
    if units.shape[0] < 2:
        return False
    spread = (units.max(axis=0).toarray() - units.min(axis=0).toarray() if sp.issparse(units)
              else np.ptp(units, axis=0))
    return float(np.max(spread, initial=0.0)) > ROUND_OFF


def one_point(rows: Any, family: str) -> bool:
    """True where the rows of the sample ``rows`` (their directions, for ``angular``) are one
    point to round-off: the median distance :func:`median_scales` finds is then zero. Read
    from the columns' ranges, so that the plan can tell before the fit (``O(s d)``)."""
    return not _values_differ(unit_rows(rows) if family == "angular" else rows)


def _median_distance(rows: Any) -> float:
    if not np.isfinite(rows.data if sp.issparse(rows) else rows).all():
        raise ValueError("the data contain NaN or infinite values (found in the rows sampled "
                         "for the kernel widths)")
    n = rows.shape[0]
    if n < 2:
        raise ValueError(f"n_samples={n}: a kernel width relative to the median "
                         "pairwise distance needs at least 2 samples")
    sq = row_sq_norms(rows)
    d2 = self_sq_distances(rows, sq)
    # Distances within the round-off of this formula are zero (equal rows, or the unit rows
    # of one-column data), not a scale to build a width on.
    d2[d2 <= ROUND_OFF * float(sq.max(initial=0.0))] = 0.0
    # Off the diagonal every pair appears twice, so the two middle values of those n(n-1)
    # entries are the middle value(s) of the pairs: the same median, without the triangle.
    d2.flat[::n + 1] = np.inf
    flat = d2.reshape(-1)
    pairs = n * (n - 1) // 2
    flat.partition(pairs - 1)
    median = 0.5 * (float(flat[pairs - 1]) + float(flat[pairs:].min()))
    if median == 0.0:
        positive = flat[np.isfinite(flat) & (flat > 0)]
        if positive.size:  # mostly duplicate rows: the distinct pairs
            median = float(np.median(positive))
        elif _values_differ(rows):  # every distance lost to round-off, not equal rows
            raise ValueError(
                "the sampled rows differ, but every distance between them is below the "
                "round-off of |x|^2 + |y|^2 - 2 x.y: their values lie far from zero beside "
                "their spread; centre the columns (preprocessing='auto' or 'standardize', or "
                "subtract their means)")
    return math.sqrt(median)


def _values_differ(rows: Any) -> bool:
    """Whether any column of ``rows`` (dense or sparse) holds values further apart than the
    round-off of its largest magnitude (unit rows of one column differ by an ulp)."""
    if sp.issparse(rows):
        high, low = rows.max(axis=0).toarray(), rows.min(axis=0).toarray()
    else:
        high, low = rows.max(axis=0), rows.min(axis=0)
    return bool(np.any(high - low > ROUND_OFF * np.maximum(np.abs(high), np.abs(low))))


def median_scales(views: list, specs: list[KernelSpec]) -> dict[tuple[int, str], float]:
    """The median pairwise distance ``D`` of every ``(view, family)`` a width ``m`` needs,
    from a uniform sample of at most :data:`MEDIAN_SAMPLE_ROWS` rows (of the unit-length rows
    for ``angular``). Cost ``O(s^2 d)`` whatever n, on the client."""
    out: dict[tuple[int, str], float] = {}
    needed = medians_needed(specs)
    for view in sorted({v for v, _ in needed}):
        rows = sample_rows(views[view])
        for family in sorted(f for v, f in needed if v == view):
            if family == "angular":
                out[(view, family)] = _median_distance(unit_rows(rows))
            else:
                out[(view, family)] = _median_distance(rows)
    return out


def distributed_scales(client: Any, sources: list[RowSource], specs: list[KernelSpec], *,
                       exact_max_n: int = EXACT_DISTANCE_MAX_N,
                       random_state: Any = None) -> dict[int, dict]:
    """The largest pairwise distance of every view that needs one, on the workers."""
    out = {}
    rng = check_random_state(random_state)
    for view in sorted(views_needing_scale(specs)):
        source = sources[view]
        if source.n_rows <= exact_max_n:
            out[view] = {"value": _exact_max_distance(client, source), "method": "exact"}
        else:
            out[view] = _estimated_max_distance(client, source, rng)
    return out


@trims_heap
def _pair_max_task(a: tuple, b: tuple, same: bool) -> float:
    """Largest squared distance between two row blocks (runs on a worker)."""
    rows_a = read_rows(*a)
    return block_max_sq_distance(rows_a, rows_a if same else read_rows(*b))


@trims_heap
def _farthest_task(block: tuple, point: np.ndarray, point_sq: float) -> tuple[float, np.ndarray]:
    """The row of the block farthest from ``point`` and its squared distance."""
    rows = read_rows(*block)
    sq = sq_distances(rows, point[None, :], row_sq_norms(rows), np.array([point_sq])).ravel()
    i = int(np.argmax(sq))
    # a copy: a view would keep the whole block alive with the farthest point
    row = rows[i].toarray().ravel() if sp.issparse(rows) else np.array(rows[i]).ravel()
    return float(sq[i]), row


def _exact_max_distance(client: Any, source: RowSource) -> float:
    bounds = row_bounds(source.n_rows, _PAIR_BLOCK)
    pairs = block_pairs(len(bounds))
    best = [0.0]

    def submit(t: int) -> Any:
        i, j = pairs[t]
        return client.submit(_pair_max_task, source.block(*bounds[i], hold=True),
                             source.block(*bounds[j], hold=True), i == j, pure=False)

    def combine(_: int, value: float) -> None:
        best[0] = max(best[0], value)

    try:
        run_pass(client, len(pairs), submit, combine, label="largest distance",
                 max_in_flight=2 * client_threads(client))
    finally:
        source.release()
    return math.sqrt(max(best[0], 0.0))


def _estimated_max_distance(client: Any, source: RowSource, rng: np.random.RandomState) -> dict:
    n = source.n_rows
    sample_idx = np.sort(rng.choice(n, size=min(_SAMPLE_ROWS, n), replace=False))
    sample = take_rows(source.X, sample_idx)
    sample = sample.toarray() if sp.issparse(sample) else np.asarray(sample, dtype=np.float64)
    sq = row_sq_norms(sample)
    d2 = sq_distances(sample, sample, sq, sq)
    i, _ = np.unravel_index(np.argmax(d2), d2.shape)
    sample_max = math.sqrt(max(float(d2.max()), 0.0))
    point = sample[i]
    bounds = row_bounds(n, rows_per_task(8 * int(source.X.shape[1]), _FARTHEST_BLOCK))
    passes = []
    for _ in range(2):
        best: list[Any] = [-1.0, None]

        def submit(t: int, point: np.ndarray = point) -> Any:
            return client.submit(_farthest_task, source.block(*bounds[t]), point,
                                 float(point @ point), pure=False)

        def combine(_: int, value: tuple, best: list = best) -> None:
            if value[0] > best[0]:
                best[0], best[1] = value

        run_pass(client, len(bounds), submit, combine, label="farthest point",
                 max_in_flight=2 * client_threads(client), ordered=True)
        passes.append(math.sqrt(max(best[0], 0.0)))
        point = best[1]
    value = max(sample_max, *passes)
    return {"value": value, "method": "estimate", "sample_rows": int(sample_idx.size),
            "sample_max": sample_max, "farthest_point_passes": passes,
            "lower_bound": value, "upper_bound": 2.0 * max(passes)}
