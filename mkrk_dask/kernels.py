"""Base-kernel families, the paper's preset, and their evaluation on blocks of rows.

All kernel math of the project lives here (one kernel's description, :class:`KernelSpec`, in
:mod:`mkrk_dask.kernel_spec`, and the evaluation on blocks in
:mod:`mkrk_dask.kernel_evaluation`, both re-exported). Every backend evaluates kernels through
:func:`kernel_blocks`, which takes one block of rows against another block of rows of the same
view and returns every requested kernel on that block, already normalised as in the paper,
``K_ij / sqrt(K_ii K_jj)``. Computing the inner products once per block and deriving all kernels
of a view from them is what makes the 12-kernel preset cheap.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from ._threads import map_threads
from .kernel_evaluation import (
    fill_kernel_blocks,
    inner_products,
    kernel_blocks,
    kernel_diagonal,
    row_sq_norms,
    sq_distances,
)
from .kernel_spec import WIDTH_TEXT, KernelSpec, in_width_range

__all__ = [
    "KernelSpec",
    "paper_kernels",
    "parse_kernel",
    "as_kernel_specs",
    "row_sq_norms",
    "inner_products",
    "kernel_diagonal",
    "kernel_blocks",
    "fill_kernel_blocks",
    "max_pairwise_distance",
    "block_max_sq_distance",
    "resolve_kernels",
    "kernel_matrices",
    "normalize_kernels",
    "views_needing_scale",
    "medians_needed",
    "symmetrize",
    "symmetric_from_upper",
    "KERNEL_ROW_BLOCK",
    "tile_pairs",
    "tile_buffer",
    "symmetrize_tile",
    "tiled_symmetric_pass",
    "mirror_upper",
    "kernel_products",
]

PAPER_GAUSSIAN_FACTORS = (0.01, 0.05, 0.1, 1.0, 10.0, 50.0, 100.0)


def paper_kernels(view: int = 0) -> list[KernelSpec]:
    """The 12 base kernels of the paper, in the paper's order.

    One cosine kernel, four polynomial kernels ``(a + x.y)^b`` with ``a in {0, 1}``,
    ``b in {2, 4}``, and seven Gaussian kernels with ``sigma = c * M``,
    ``c in {0.01, 0.05, 0.1, 1, 10, 50, 100}``.
    """
    specs = [KernelSpec("linear", view=view)]
    specs += [KernelSpec("polynomial", a=a, b=b, view=view) for a in (0.0, 1.0) for b in (2, 4)]
    specs += [KernelSpec("gaussian", c=c, view=view) for c in PAPER_GAUSSIAN_FACTORS]
    return specs


_CALL = re.compile(r"^\s*([a-z]+)\s*(?:\((.*)\))?\s*(?:@\s*(\d+))?\s*$")
#: the parameters each family takes in a kernel's text
_PARAMETERS = {"linear": (), "polynomial": ("a", "b"), "gaussian": ("c", "m", "sigma"),
               "angular": ("m", "sigma")}
_ALIASES = {"linear": "linear", "cosine": "linear", "poly": "polynomial",
            "polynomial": "polynomial", "gaussian": "gaussian", "rbf": "gaussian",
            "angular": "angular"}


def parse_kernel(text: str) -> KernelSpec:
    """Parse a kernel written as text.

    Examples: ``"cosine"``, ``"linear"``, ``"polynomial(a=1,b=2)"``, ``"poly(a=0, b=4)"``,
    ``"gaussian(c=0.1)"``, ``"gaussian(m=0.5)"``, ``"rbf(sigma=2.5)"``, ``"angular(m=1)"``; a
    suffix ``@2`` selects view 2.
    """
    match = _CALL.match(text.lower())
    if not match or match.group(1) not in _ALIASES:
        raise ValueError(f"cannot parse kernel {text!r}; examples: 'cosine', "
                         "'polynomial(a=1,b=2)', 'gaussian(c=0.1)', 'gaussian(sigma=2)@1'")
    family = _ALIASES[match.group(1)]
    params: dict[str, float] = {}
    if match.group(2):
        for item in match.group(2).split(","):
            if not item.strip():
                continue
            key, sep, value = item.partition("=")
            key = key.strip()
            if not sep or key not in ("a", "b", "c", "m", "sigma"):
                raise ValueError(f"bad kernel parameter {item.strip()!r} in {text!r}")
            if key not in _PARAMETERS[family]:
                raise ValueError(f"kernel {text!r}: the {family} kernel takes no parameter "
                                 f"{key!r} (it takes {', '.join(_PARAMETERS[family]) or 'none'})")
            if key in params:
                raise ValueError(f"kernel {text!r}: parameter {key!r} is given twice")
            try:
                params[key] = float(value)
            except ValueError:
                raise ValueError(f"kernel {text!r}: parameter {key!r} needs a number, got "
                                 f"{value.strip()!r}") from None
    widths = [key for key in ("c", "m", "sigma") if key in params]
    if len(widths) > 1:
        raise ValueError(f"kernel {text!r}: give one width, {' or '.join(widths)}, not "
                         "several (they contradict each other)")
    if "b" in params and params["b"].is_integer():  # 2.5 stays 2.5, and KernelSpec refuses it
        params["b"] = int(params["b"])
    view = int(match.group(3)) if match.group(3) else 0
    return KernelSpec(family, view=view, **params)  # type: ignore[arg-type]


def as_kernel_specs(kernels: Any, n_views: int = 1) -> list[KernelSpec]:
    """Normalise the ``kernels`` argument of the estimator into a list of :class:`KernelSpec`.

    ``"paper"`` gives the 12 paper kernels on every view (``12 * n_views`` kernels); a list may
    mix :class:`KernelSpec`, strings (:func:`parse_kernel`) and dicts of ``KernelSpec`` fields.
    """
    if isinstance(kernels, str):
        if kernels != "paper":
            return as_kernel_specs([kernels], n_views)
        return [spec for view in range(n_views) for spec in paper_kernels(view)]
    if not isinstance(kernels, Iterable):
        raise TypeError(f"kernels must be 'paper', 'precomputed' or a list, got {kernels!r}")
    specs: list[KernelSpec] = []
    for item in kernels:
        if isinstance(item, KernelSpec):
            specs.append(item)
        elif isinstance(item, str):
            specs.append(parse_kernel(item))
        elif isinstance(item, dict):
            specs.append(KernelSpec(**item))
        else:
            raise TypeError(f"cannot interpret kernel specification {item!r}")
    if not specs:
        raise ValueError("the kernel list is empty")
    for spec in specs:
        if spec.view >= n_views:
            raise ValueError(f"kernel {spec.name} reads view {spec.view} but only {n_views} "
                             "view(s) were given")
    return specs


def block_max_sq_distance(Xa: Any, Xb: Any, sq_norms_a: np.ndarray | None = None,
                          sq_norms_b: np.ndarray | None = None) -> float:
    """Largest squared Euclidean distance between a row of ``Xa`` and a row of ``Xb``.

    The block step of every exact largest-distance pass (in memory and on Dask workers).
    """
    sq_a = row_sq_norms(Xa) if sq_norms_a is None else sq_norms_a
    sq_b = row_sq_norms(Xb) if sq_norms_b is None else sq_norms_b
    return float(sq_distances(Xa, Xb, sq_a, sq_b).max())


def max_pairwise_distance(X: Any, block_rows: int = 2048) -> float:
    """Largest Euclidean distance between two rows of ``X``, computed exactly by row blocks.

    Cost ``O(n^2 d)`` time and ``O(block_rows * n)`` memory.
    """
    n = X.shape[0]
    sq = row_sq_norms(X)
    best = 0.0
    for start in range(0, n, block_rows):
        stop = min(start + block_rows, n)
        best = max(best, block_max_sq_distance(X[start:stop], X, sq[start:stop], sq))
    return math.sqrt(max(best, 0.0))


def _with_width(spec: KernelSpec, sigma: float, scale: str) -> KernelSpec:
    """``spec`` with the absolute width ``sigma`` its relative one gives on this view; a width
    outside the range a kernel takes is the data's scale (values near the float limits), named
    as such rather than as a bad width."""
    if not in_width_range(sigma):
        raise ValueError(f"view {spec.view}: {scale}, so {spec.name} would be {sigma:.3g} "
                         f"wide, outside {WIDTH_TEXT}; rescale the data")
    return replace(spec, sigma=sigma)


def zero_median_error(spec: KernelSpec, D: float = 0.0) -> ValueError:
    """The error for a width relative to a median pairwise distance of zero (the fit's, and
    the plan's, which reads the same sample)."""
    same = "points the same way" if spec.family == "angular" else "is the same"
    return ValueError(f"view {spec.view}: the median pairwise distance of the sampled rows is "
                      f"{D} (every row of the sample {same}), so the relative width of "
                      f"{spec.name} is zero; leave such a view out, or give it kernels without "
                      "a relative width")


def resolve_kernels(
    specs: Sequence[KernelSpec], max_distances: Sequence[float],
    medians: dict[tuple[int, str], float] | None = None,
) -> list[KernelSpec]:
    """Turn relative widths into absolute ones: ``sigma = c * M`` or ``sigma = m * D`` of the
    kernel's view.

    Parameters
    ----------
    specs : sequence of KernelSpec
    max_distances : sequence of float
        ``M`` for every view (:func:`max_pairwise_distance`).
    medians : dict, optional
        ``D`` for every ``(view, family)`` a width ``m`` needs
        (:func:`mkrk_dask.kernel_widths.median_scales`).
    """
    resolved = []
    for spec in specs:
        if spec.sigma is None and spec.m is not None:
            D = float((medians or {}).get((spec.view, spec.family), 0.0))
            if not D > 0:
                # the median falls back to the distinct pairs' where most rows repeat: zero
                # means every sampled row (or its direction, for angular) is the same
                raise zero_median_error(spec, D)
            spec = _with_width(spec, spec.m * D, f"the median pairwise distance of the "
                               f"sampled rows is {D:.3g}")
        elif spec.family == "gaussian" and spec.sigma is None:
            M = float(max_distances[spec.view])
            if not M > 0:
                raise ValueError(f"view {spec.view}: all rows are identical (largest pairwise "
                                 f"distance {M}), so the relative width of {spec.name} is zero")
            spec = _with_width(spec, spec.c * M, f"the largest pairwise distance is {M:.3g}")
        resolved.append(spec)
    return resolved


#: rows of the blocks in which :func:`kernel_matrices` evaluates the upper triangle (rounded
#: down to whole :data:`SYMMETRY_TILE` tiles, so that no diagonal tile straddles two blocks)
KERNEL_ROW_BLOCK = 512


def kernel_matrices(
    views: Sequence[Any], specs: Sequence[KernelSpec], *, normalize: bool = True,
    dtype: Any = np.float64,
) -> np.ndarray:
    """All base kernels as one dense ``(m, n, n)`` array (the exact backend's input).

    ``specs`` must be resolved. The upper triangle is evaluated in blocks of
    :data:`KERNEL_ROW_BLOCK` rows against the columns from the block's first row on (inner
    products once per view and block), a thread per core (numpy's elementwise passes, most
    of the time, run on one core otherwise), and the lower triangle is its mirror image, as
    the blockwise backend stores it: half the evaluations, and temporaries of a block's
    size instead of ``n x n``.
    """
    n = views[0].shape[0]
    out = np.empty((len(specs), n, n), dtype=dtype)
    groups = []
    for view in sorted({spec.view for spec in specs}):
        idx = [p for p, spec in enumerate(specs) if spec.view == view]
        groups.append((idx, [specs[p] for p in idx], views[view], row_sq_norms(views[view])))
    side = SYMMETRY_TILE * max(1, KERNEL_ROW_BLOCK // SYMMETRY_TILE)  # whole tiles
    starts = range(0, n, side)

    def evaluate(i: int, _: Any) -> None:
        a = starts[i]
        b = min(a + side, n)
        for idx, group, X, sq in groups:
            fill_kernel_blocks(out[:, a:b, a:], idx, group, X[a:b], X[a:], sq[a:b], sq[a:],
                               normalize=normalize)

    map_threads(evaluate, len(starts))
    return symmetric_from_upper(out, unit_diagonal=normalize)


#: side of the square tiles in which a kernel is read with its transpose: a pair of 256 x 256
#: float64 tiles (1 MiB) stays in the L2 cache, where a whole-matrix ``K + K.T`` strides
#: through memory and makes an n x n temporary
SYMMETRY_TILE = 256


def tile_pairs(n: int, side: int = SYMMETRY_TILE):
    """``(rows_a, rows_b)`` slices of the tile pairs ``a <= b`` of an n x n matrix: the order
    in which a kernel and its transpose are read together."""
    for a in range(0, n, side):
        rows_a = slice(a, min(a + side, n))
        for b in range(a, n, side):
            yield rows_a, slice(b, min(b + side, n))


def tile_buffer(n: int, dtype: Any = np.float64) -> np.ndarray:
    """One tile's work buffer for :func:`tile_pairs` of an n x n matrix. Its rows are padded
    by 8 entries: with a stride of exactly 2 KiB the rows of a tile map to the same cache
    sets, and reading it transposed was 2.5x slower (measured)."""
    side = min(SYMMETRY_TILE, n)
    return np.empty((side, side + 8), dtype=dtype)


def symmetrize_tile(source: np.ndarray, out: np.ndarray, rows_a: slice, rows_b: slice,
                    buffer: np.ndarray) -> None:
    """``(S + S^T) / 2`` on one tile pair of ``source`` into ``out`` (which may be
    ``source``: the pair is read before it is written), both tiles."""
    upper = source[rows_a, rows_b]
    tile = buffer[:upper.shape[0], :upper.shape[1]]
    np.add(upper, source[rows_b, rows_a].T, out=tile)
    tile *= 0.5
    out[rows_a, rows_b] = tile
    if rows_a != rows_b:
        out[rows_b, rows_a] = tile.T


def symmetrize(kernels: np.ndarray, *, unit_diagonal: bool) -> np.ndarray:
    """Make square kernel blocks ``(m, c, c)`` exactly symmetric, ``(K + K^T) / 2``, in place,
    with a diagonal of exactly 1 when they are normalised.

    Round-off leaves ``K_ij`` and ``K_ji`` a bit apart and the normalised diagonal a bit off 1;
    the eigensolvers and the stored kernels rely on both holding to the last bit. Tile pair by
    tile pair (:func:`tile_pairs`): ``K += K.T`` on a whole matrix reads it transposed across
    memory, through a temporary copy, several times slower.
    """
    buffer = tile_buffer(kernels.shape[1], kernels.dtype)
    for K in kernels:
        for rows_a, rows_b in tile_pairs(K.shape[0], buffer.shape[0]):
            symmetrize_tile(K, K, rows_a, rows_b, buffer)
        if unit_diagonal:
            np.fill_diagonal(K, 1.0)
    return kernels


def symmetric_from_upper(kernels: np.ndarray, *, unit_diagonal: bool) -> np.ndarray:
    """Make square kernels ``(m, n, n)`` whose upper triangle and diagonal tiles
    (:func:`tile_pairs`) hold the values exactly symmetric, in place: each tile below the
    diagonal becomes its mirror image, each diagonal tile ``(S + S^T) / 2`` (as
    :func:`symmetrize` makes it), and with ``unit_diagonal`` the diagonal exactly 1. A thread
    per core, over the kernels' rows of tiles."""
    n = kernels.shape[1]
    starts = range(0, n, SYMMETRY_TILE)

    def mirror_row(i: int, buffer: np.ndarray) -> None:
        K = kernels[i // len(starts)]
        a = starts[i % len(starts)]
        rows_a = slice(a, min(a + SYMMETRY_TILE, n))
        symmetrize_tile(K, K, rows_a, rows_a, buffer)
        for b in range(a + SYMMETRY_TILE, n, SYMMETRY_TILE):
            rows_b = slice(b, min(b + SYMMETRY_TILE, n))
            K[rows_b, rows_a] = K[rows_a, rows_b].T
        if unit_diagonal:
            diagonal = K[rows_a, rows_a]
            np.fill_diagonal(diagonal, 1.0)

    map_threads(mirror_row, kernels.shape[0] * len(starts),
                lambda: tile_buffer(n, kernels.dtype))
    return kernels


def mirror_upper(matrix: np.ndarray) -> np.ndarray:
    """Copy the upper triangle of a square matrix onto its lower one, in place, tile pair by
    tile pair (:func:`tile_pairs`; whole-matrix ``triu`` and transposes took 64 ms at
    2,048 x 2,048, through three temporary copies)."""
    for rows_a, rows_b in tile_pairs(matrix.shape[0]):
        if rows_a == rows_b:
            tile = np.triu(matrix[rows_a, rows_a])
            matrix[rows_a, rows_a] = tile + np.triu(tile, 1).T
        else:
            matrix[rows_b, rows_a] = matrix[rows_a, rows_b].T
    return matrix


def kernel_products(stacked: np.ndarray) -> np.ndarray:
    """``[sum_ij A_p[i, j] A_q[i, j]]`` (m x m) of blocks stacked as ``(m, ...)``: one matrix
    product over the flattened blocks. Summed over all blocks of the kernels, it is
    ``tr(K_p K_q)`` (symmetric kernels), from which ``fip`` and ``sfn`` come."""
    flat = stacked.reshape(stacked.shape[0], -1)
    return flat @ flat.T


def views_needing_scale(specs: Sequence[KernelSpec]) -> set[int]:
    """Views whose largest pairwise distance is needed (they carry a width ``c``)."""
    return {spec.view for spec in specs
            if spec.family == "gaussian" and spec.sigma is None and spec.c is not None}


def medians_needed(specs: Sequence[KernelSpec]) -> set[tuple[int, str]]:
    """``(view, family)`` pairs whose median distance is needed (a width ``m``)."""
    return {(spec.view, spec.family) for spec in specs if spec.sigma is None and spec.m is not None}


def normalize_kernels(kernels: np.ndarray) -> np.ndarray:
    """Normalise precomputed kernels ``(m, n, n)`` in place: ``K_ij / sqrt(K_ii K_jj)``."""
    for p in range(kernels.shape[0]):
        diag = np.diag(kernels[p]).copy()
        bad = np.flatnonzero(~(diag > 0))
        if bad.size:
            raise ValueError(f"precomputed kernel {p}: diagonal entry {int(bad[0])} is "
                             f"{diag[bad[0]]:.3g}; normalisation needs a positive diagonal "
                             "(pass normalize=False to use the kernels as they are)")
        scale = 1.0 / np.sqrt(diag)
        kernels[p] *= scale[:, None]
        kernels[p] *= scale[None, :]
        np.fill_diagonal(kernels[p], 1.0)
    return kernels


def tiled_symmetric_pass(K: np.ndarray, out: np.ndarray | None = None,
                rows: np.ndarray | None = None) -> float:
    """``max |K - K^T|``, tile pair by tile pair; with ``out``, also write
    ``(N + N^T) / 2`` there, N = ``K`` scaled by ``rows`` on both sides (diagonal 1) or ``K``.
    ``out`` may be ``K`` itself: each tile pair is then compared and scaled before it is
    written, and only it.

    The operations and their order are those of :func:`mkrk_dask.kernels.normalize_kernels`
    followed by :func:`mkrk_dask.kernels.symmetrize`, so the result is the same to the bit
    (in place or not). Only what reads a transposed tile goes tile by tile; tile buffers
    serve them all, and nothing of size n x n is allocated.
    """
    buffer = tile_buffer(K.shape[0])
    in_place = out is K
    source = K
    if out is not None and rows is not None and not in_place:
        source = np.multiply(K, rows[:, None], out=out)
        source *= rows[None, :]
        np.fill_diagonal(source, 1.0)
    worst = 0.0
    for rows_a, rows_b in tile_pairs(K.shape[0], buffer.shape[0]):
        upper, lower = K[rows_a, rows_b], K[rows_b, rows_a]
        tile = buffer[:upper.shape[0], :upper.shape[1]]
        np.subtract(upper, lower.T, out=tile)
        worst = max(worst, float(tile.max()), -float(tile.min()))
        if in_place and rows is not None:
            # This pair only, now that it is compared: scaled as the whole-matrix path
            # scales (rows, then columns; a diagonal tile's diagonal set to 1).
            pairs = [(rows_a, rows_b)] + ([(rows_b, rows_a)] if rows_a != rows_b else [])
            for a, b in pairs:
                K[a, b] *= rows[a, None]
                K[a, b] *= rows[None, b]
            if rows_a == rows_b:
                np.fill_diagonal(upper, 1.0)
        if out is not None:
            symmetrize_tile(source, out, rows_a, rows_b, buffer)
    return worst
