"""Base-kernel families, the paper's preset, and their evaluation on blocks of rows.

All kernel math of the project lives here. Every backend evaluates kernels through
:func:`kernel_blocks`, which takes one block of rows against another block of rows of the same
view and returns every requested kernel on that block, already normalised as in the paper,
``K_ij / sqrt(K_ii K_jj)``. Computing the inner products once per block and deriving all kernels
of a view from them is what makes the 12-kernel preset cheap.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import scipy.sparse as sp

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
    "tile_pairs",
    "tile_buffer",
    "symmetrize_tile",
    "kernel_products",
]

_FAMILIES = ("linear", "polynomial", "gaussian", "angular")
_WIDTHED = ("gaussian", "angular")
PAPER_GAUSSIAN_FACTORS = (0.01, 0.05, 0.1, 1.0, 10.0, 50.0, 100.0)


@dataclass(frozen=True)
class KernelSpec:
    """One base kernel: a family, its parameters, and the view it reads.

    Parameters
    ----------
    family : {"linear", "polynomial", "gaussian", "angular"}
        ``linear`` is ``x_i . x_j`` (the cosine kernel once normalised); ``polynomial`` is
        ``(a + x_i . x_j) ** b``; ``gaussian`` is ``exp(-||x_i - x_j||^2 / (2 sigma^2))``;
        ``angular`` is the Gaussian of the distance between the unit-length rows,
        ``exp(-||u_i - u_j||^2 / (2 sigma^2))`` with ``u = x / ||x||`` (it depends on the
        angle only, as the cosine kernel does).
    a, b : float, int
        Polynomial offset and degree.
    c : float, optional
        Gaussian width relative to the largest pairwise distance ``M`` of the view:
        ``sigma = c * M`` (the paper's convention). Resolved to ``sigma`` by
        :func:`resolve_kernels`.
    m : float, optional
        Width relative to the median pairwise distance ``D`` of the view (of the unit-length
        rows for ``angular``), estimated from a sample of rows: ``sigma = m * D``. Unlike
        ``c``, it means the same kernel at every n (no exact O(n^2 d) pass).
    sigma : float, optional
        Absolute width. Exactly one of ``c``, ``m`` and ``sigma`` is given for a Gaussian
        (``c`` is not defined for ``angular``).
    view : int
        Index of the view (input matrix) the kernel is computed on.
    """

    family: str
    a: float = 0.0
    b: int = 1
    c: float | None = None
    sigma: float | None = None
    view: int = 0
    m: float | None = None

    def __post_init__(self) -> None:
        if self.family not in _FAMILIES:
            raise ValueError(f"unknown kernel family {self.family!r}; expected one of {_FAMILIES}")
        if self.family == "polynomial":
            if not float(self.b).is_integer() or self.b < 1:  # inf and nan included
                raise ValueError(f"polynomial degree b must be a positive integer, got {self.b}")
            if not math.isfinite(self.a) or self.a < 0:
                raise ValueError(f"polynomial offset a must be finite and >= 0, got {self.a}")
        if self.family in _WIDTHED:
            if self.c is None and self.sigma is None and self.m is None:
                raise ValueError(f"a {self.family} kernel needs m (width relative to the median "
                                 "distance), c (relative to the largest) or sigma")
            if self.family == "angular" and self.c is not None:
                raise ValueError("an angular kernel takes m (relative to the median distance "
                                 "of the unit rows) or sigma, not c")
            for label, value in (("c", self.c), ("m", self.m), ("sigma", self.sigma)):
                if value is not None and not (math.isfinite(value) and 1e-150 <= value <= 1e150):
                    raise ValueError(f"gaussian {label} must be in [1e-150, 1e150], got {value}")
        if int(self.view) != self.view or self.view < 0:
            raise ValueError(f"view must be a non-negative integer, got {self.view}")

    @property
    def name(self) -> str:
        """A short readable name, parseable back by :func:`parse_kernel`."""
        if self.family == "linear":
            base = "cosine"
        elif self.family == "polynomial":
            base = f"polynomial(a={self.a:g},b={int(self.b)})"
        elif self.c is not None:
            base = f"{self.family}(c={self.c:g})"
        elif self.m is not None:
            base = f"{self.family}(m={self.m:g})"
        else:
            base = f"{self.family}(sigma={self.sigma:g})"
        return base if self.view == 0 else f"{base}@{self.view}"

    @property
    def is_resolved(self) -> bool:
        """True when no data-dependent parameter remains (a Gaussian has its sigma)."""
        return self.family not in _WIDTHED or self.sigma is not None

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-serialisable description (for store metadata and saved models)."""
        return {"family": self.family, "a": self.a, "b": int(self.b), "c": self.c,
                "sigma": self.sigma, "view": int(self.view), "m": self.m}


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
            if not sep or key.strip() not in ("a", "b", "c", "m", "sigma"):
                raise ValueError(f"bad kernel parameter {item.strip()!r} in {text!r}")
            params[key.strip()] = float(value)
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


def row_sq_norms(X: Any) -> np.ndarray:
    """Squared Euclidean norm of every row (dense or scipy sparse), as float64."""
    if sp.issparse(X):
        return np.asarray(X.multiply(X).sum(axis=1), dtype=np.float64).ravel()
    X = np.asarray(X)
    return np.einsum("ij,ij->i", X, X, dtype=np.float64)


def inner_products(Xa: Any, Xb: Any) -> np.ndarray:
    """Dense block of inner products ``Xa @ Xb.T`` (either may be scipy sparse)."""
    if sp.issparse(Xa) or sp.issparse(Xb):
        product = Xa @ Xb.T
        return product.toarray() if sp.issparse(product) else np.asarray(product)
    return np.asarray(Xa) @ np.asarray(Xb).T


def _integer_power(base: np.ndarray, exponent: int, out: np.ndarray | None = None
                   ) -> np.ndarray:
    """``base ** exponent`` for an integer exponent >= 1 by repeated squaring, into ``out``
    (which may be ``base``); several times faster than ``np.power``'s general path."""
    bits = bin(int(exponent))[3:]
    # Odd steps multiply by the base again, so keep it if out overwrites it.
    factor = base.copy() if "1" in bits and out is base else base
    result = np.array(base, copy=True) if out is None else out
    if result is not base:
        np.copyto(result, base)
    for bit in bits:
        np.multiply(result, result, out=result)
        if bit == "1":
            np.multiply(result, factor, out=result)
    return result


def kernel_diagonal(spec: KernelSpec, sq_norms: np.ndarray) -> np.ndarray:
    """Unnormalised ``K(x_i, x_i)`` for every row, from the squared row norms."""
    if spec.family == "linear":
        return sq_norms
    if spec.family == "polynomial":
        return _integer_power(spec.a + sq_norms, int(spec.b))
    return np.ones_like(sq_norms)  # gaussian, angular


def _check_positive_diagonal(spec: KernelSpec, diag: np.ndarray) -> None:
    bad = np.flatnonzero(~(diag > 0))
    if bad.size:
        kind = "cosine" if spec.family == "linear" else spec.name
        raise ValueError(
            f"kernel {spec.name}: row {int(bad[0])} has a zero (or invalid) self-similarity, so "
            f"the {kind} kernel cannot be normalised; {bad.size} such row(s). Remove all-zero "
            "rows or use a kernel with an offset (e.g. polynomial a=1 or gaussian).")


def kernel_blocks(
    specs: Sequence[KernelSpec],
    Xa: Any,
    Xb: Any,
    sq_norms_a: np.ndarray | None = None,
    sq_norms_b: np.ndarray | None = None,
    *,
    normalize: bool = True,
    dtype: Any = np.float64,
    out: np.ndarray | None = None,
    columns: Sequence[int] | None = None,
) -> np.ndarray:
    """Evaluate several kernels of one view on a block of rows.

    Parameters
    ----------
    specs : sequence of KernelSpec
        Resolved kernels (Gaussians carry ``sigma``), all reading the view ``Xa``/``Xb`` come from.
    Xa, Xb : ndarray or sparse matrix
        Rows of the block (``na x d``) and columns of the block (``nb x d``).
    sq_norms_a, sq_norms_b : ndarray, optional
        Squared row norms, if already known (they are reused across blocks).
    normalize : bool
        Apply ``K_ij / sqrt(K_ii K_jj)``.
    dtype : dtype
        Output dtype; the arithmetic is float64.
    out : ndarray of shape (len(specs), na, nb), optional
        Filled instead of a new array (its dtype replaces ``dtype``): a caller that keeps
        the blocks in a larger array spares a second copy of them (see
        :func:`fill_kernel_blocks`).
    columns : sequence of int, optional
        Per kernel, how many leading columns of its block it needs (the Nystrom factors of a
        smooth kernel use a prefix of the view's landmarks). Those are evaluated (more where a
        narrower Gaussian is derived from the kernel, see Notes); the rest of its block is
        left as it was. Default: all.

    Returns
    -------
    ndarray of shape (len(specs), na, nb)

    Notes
    -----
    A Gaussian whose squared width is ``2^-j`` times that of the next wider one of its
    family in ``specs`` (``1 <= j <= 4``; the default widths 0.5, 1 and 2 x the median are
    such a chain) is that kernel's block squared ``j`` times, ``exp(-x)^(2^j)``: a
    multiplication costs a small fraction of an exponential. The relative error grows by
    ``2^j`` per link (a few units of round-off for the default chain; the evaluation alone
    agrees to about 1e-15).
    """
    sq_a = row_sq_norms(Xa) if sq_norms_a is None else sq_norms_a
    sq_b = row_sq_norms(Xb) if sq_norms_b is None else sq_norms_b
    inner = inner_products(Xa, Xb).astype(np.float64, copy=False)
    shape = (len(specs), inner.shape[0], inner.shape[1])
    if out is None:
        out = np.empty(shape, dtype=dtype)
    elif out.shape != shape:
        raise ValueError(f"out has shape {out.shape}, the blocks {shape}")
    widths = [shape[2]] * len(specs) if columns is None else [int(c) for c in columns]
    if len(widths) != len(specs) or not all(0 < c <= shape[2] for c in widths):
        raise ValueError(f"columns must give 1..{shape[2]} columns for each of the "
                         f"{len(specs)} kernels, got {columns!r}")
    # The Gaussians of a family run from wide to narrow: a narrower one whose squared width
    # is the wider one's over 2^j is its block squared j times (see Notes).
    order, source, needed = _evaluation_plan(specs, widths)
    # In-place arithmetic: the blocks are large (they feed the Nystrom and blockwise passes),
    # so every avoided temporary is a pass over memory saved. Outputs of another dtype are
    # computed in a float64 buffer per family (a chain is squared in place in its own).
    buffers = None if out.dtype == np.float64 else {}
    sq_dist = chord = None
    families = [specs[p].family for p in order]

    def reuse_inner(i: int, other: str, other_made: bool) -> np.ndarray | None:
        # The (new) inner products become a derived block in place, instead of a fresh
        # block's page faults, once no later kernel reads them or the other derived block.
        later = families[i + 1:]
        free = ("linear" not in later and "polynomial" not in later
                and (other_made or other not in later))
        return inner if free else None

    for i, p in enumerate(order):
        spec = specs[p]
        if not spec.is_resolved:
            raise ValueError(f"kernel {spec.name} needs resolve_kernels() before evaluation")
        cols = needed[p]
        full = out[p] if buffers is None else buffers.setdefault(spec.family,
                                                                 np.empty(inner.shape))
        block = full[:, :cols]
        if source[p] is not None:
            q, squarings = source[p]
            np.square((out[q] if buffers is None else full)[:, :cols], out=block)
            for _ in range(squarings - 1):
                np.square(block, out=block)
        elif spec.family == "linear":
            np.copyto(block, inner[:, :cols])
        elif spec.family == "polynomial":
            np.add(inner[:, :cols], spec.a, out=block)
            _integer_power(block, int(spec.b), out=block)
        elif spec.family == "angular":
            if chord is None:
                # ||u_i - u_j||^2 = 2 - 2 cos(x_i, x_j) for unit rows u = x / ||x||.
                _check_positive_diagonal(spec, sq_a)
                _check_positive_diagonal(spec, sq_b)
                chord = np.divide(inner, np.sqrt(sq_a)[:, None],
                                  out=reuse_inner(i, "gaussian", sq_dist is not None))
                chord /= np.sqrt(sq_b)[None, :]
                np.multiply(chord, -2.0, out=chord)
                chord += 2.0
                np.maximum(chord, 0.0, out=chord)
            np.multiply(chord[:, :cols], -0.5 / spec.sigma**2, out=block)
            np.exp(block, out=block)
        else:
            if sq_dist is None:
                sq_dist = np.multiply(inner, -2.0,
                                      out=reuse_inner(i, "angular", chord is not None))
                sq_dist += sq_a[:, None]
                sq_dist += sq_b[None, :]
                # Round-off can make a distance slightly negative; it is a distance, clip it.
                np.maximum(sq_dist, 0.0, out=sq_dist)
            np.multiply(sq_dist[:, :cols], -0.5 / spec.sigma**2, out=block)
            np.exp(block, out=block)
        if normalize and spec.family not in _WIDTHED:
            diag_a = kernel_diagonal(spec, sq_a)
            diag_b = kernel_diagonal(spec, sq_b)
            _check_positive_diagonal(spec, diag_a)
            _check_positive_diagonal(spec, diag_b)
            block /= np.sqrt(diag_a)[:, None]
            block /= np.sqrt(diag_b)[None, :cols]
        if buffers is not None:
            out[p, :, :cols] = block
    return out


#: most squarings that derive a narrower Gaussian from a wider one (a width ratio of 4)
_MAX_SQUARINGS = 4


def _evaluation_plan(specs: Sequence[KernelSpec], widths: list[int]
                     ) -> tuple[list[int], list[tuple[int, int] | None], list[int]]:
    """``(order, source, needed)`` of :func:`kernel_blocks`: the kernels without a width
    first (they read the inner products), then each Gaussian family from its widest kernel
    to its narrowest; ``source[p] = (q, j)`` when kernel p is kernel q's block squared j
    times (``sigma_q^2 = 2^j sigma_p^2``, q evaluated just before p); ``needed[p]``: the
    columns to evaluate, enough for p and every kernel derived from it."""
    plain = [p for p, spec in enumerate(specs) if spec.family not in _WIDTHED]
    order, source, needed = list(plain), [None] * len(specs), list(widths)
    for family in _WIDTHED:
        chain = sorted((p for p, spec in enumerate(specs) if spec.family == family),
                       key=lambda p: -float(specs[p].sigma))
        for wide, narrow in zip(chain, chain[1:], strict=False):
            ratio = (float(specs[wide].sigma) / float(specs[narrow].sigma)) ** 2
            steps = round(math.log2(ratio)) if ratio > 1 else 0
            if 1 <= steps <= _MAX_SQUARINGS and math.isclose(ratio, 2.0**steps, rel_tol=1e-12):
                source[narrow] = (wide, steps)
        for p in reversed(chain):  # narrow to wide: a source evaluates what its users read
            if source[p] is not None:
                q = source[p][0]
                needed[q] = max(needed[q], needed[p])
        order += chain
    return order, source, needed


def fill_kernel_blocks(out: np.ndarray, idx: Sequence[int], specs: Sequence[KernelSpec],
                       Xa: Any, Xb: Any, sq_norms_a: np.ndarray | None = None,
                       sq_norms_b: np.ndarray | None = None, *, normalize: bool = True) -> None:
    """``out[idx] = kernel_blocks(specs, Xa, Xb, ...)``: where ``idx`` is a run of consecutive
    kernels (the kernels of a view usually are), the blocks are evaluated straight into
    ``out``, without a second array of their size and the copy into ``out``."""
    first = idx[0]
    if list(idx) == list(range(first, first + len(idx))):
        kernel_blocks(specs, Xa, Xb, sq_norms_a, sq_norms_b, normalize=normalize,
                      out=out[first:first + len(idx)])
    else:
        out[list(idx)] = kernel_blocks(specs, Xa, Xb, sq_norms_a, sq_norms_b,
                                       normalize=normalize, dtype=out.dtype)


def block_max_sq_distance(Xa: Any, Xb: Any, sq_norms_a: np.ndarray | None = None,
                          sq_norms_b: np.ndarray | None = None) -> float:
    """Largest squared Euclidean distance between a row of ``Xa`` and a row of ``Xb``.

    The block step of every exact largest-distance pass (in memory and on Dask workers).
    """
    sq_a = row_sq_norms(Xa) if sq_norms_a is None else sq_norms_a
    sq_b = row_sq_norms(Xb) if sq_norms_b is None else sq_norms_b
    return float((sq_a[:, None] + sq_b[None, :] - 2.0 * inner_products(Xa, Xb)).max())


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
        (:func:`mkrk_dask.scales.median_scales`).
    """
    resolved = []
    for spec in specs:
        if spec.sigma is None and spec.m is not None:
            D = float((medians or {}).get((spec.view, spec.family), 0.0))
            if not D > 0:
                raise ValueError(f"view {spec.view}: the median pairwise distance of the sampled "
                                 f"rows is {D}, so the relative width of {spec.name} is zero")
            spec = replace(spec, sigma=spec.m * D)
        elif spec.family == "gaussian" and spec.sigma is None:
            M = float(max_distances[spec.view])
            if not M > 0:
                raise ValueError(f"view {spec.view}: all rows are identical (largest pairwise "
                                 f"distance {M}), so the relative width of {spec.name} is zero")
            spec = replace(spec, sigma=spec.c * M)
        resolved.append(spec)
    return resolved


def kernel_matrices(
    views: Sequence[Any], specs: Sequence[KernelSpec], *, normalize: bool = True,
    dtype: Any = np.float64,
) -> np.ndarray:
    """All base kernels as one dense ``(m, n, n)`` array (the exact backend's input).

    ``specs`` must be resolved. Inner products are computed once per view.
    """
    n = views[0].shape[0]
    out = np.empty((len(specs), n, n), dtype=dtype)
    for view in sorted({spec.view for spec in specs}):
        idx = [p for p, spec in enumerate(specs) if spec.view == view]
        X = views[view]
        sq = row_sq_norms(X)
        fill_kernel_blocks(out, idx, [specs[p] for p in idx], X, X, sq, sq,
                           normalize=normalize)
    return symmetrize(out, unit_diagonal=normalize)


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
