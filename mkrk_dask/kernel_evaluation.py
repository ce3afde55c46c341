"""Evaluation of base kernels on blocks of rows: :func:`kernel_blocks` and its helpers.

Every backend evaluates kernels through :func:`kernel_blocks` (re-exported by
:mod:`mkrk_dask.kernels`; the kernel families and their parameters are in
:mod:`mkrk_dask.kernel_spec`): one block of rows against another block of rows of the same
view, every requested kernel of that view from one block of inner products (or distances),
already normalised as in the paper, ``K_ij / sqrt(K_ii K_jj)``.

An all-zero row has no direction, so the kernels of directions (the cosine kernel, the
normalised homogeneous polynomials ``(x.y)^b`` and the angular Gaussians) are undefined on it
as written. Such rows are given a direction of their own, shared by all of them and
orthogonal to every other row: the kernels are those of the unit rows with one more
coordinate, 1 for an all-zero row and 0 otherwise. So an all-zero row is as similar to
another as an orthogonal pair of rows, and all-zero rows are alike; every kernel stays
positive semi-definite, with a unit diagonal. (Data of counts or intensities often hold
such rows: an empty document, a blank image.)
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import scipy.sparse as sp

from .kernel_spec import WIDTHED_FAMILIES, KernelSpec

__all__ = ["row_sq_norms", "inner_products", "sq_distances", "self_sq_distances", "kernel_diagonal",
           "kernel_blocks", "fill_kernel_blocks", "direction_roots", "WIDTHED_FAMILIES"]

_WIDTHED = WIDTHED_FAMILIES


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


def sq_distances(Xa: Any, Xb: Any, sq_a: np.ndarray, sq_b: np.ndarray, *,
                 out: np.ndarray | None = None) -> np.ndarray:
    """The ``(a, b)`` squared distances between the rows of Xa and of Xb (either may be scipy
    sparse) from their squared norms and inner products, ``(|x|^2 + |y|^2) - 2 x.y``, clipped
    at 0 against round-off; into ``out`` where given (a work buffer reused across calls)."""
    twice_inner = np.asarray(inner_products(Xa, Xb), dtype=np.float64)
    twice_inner *= 2.0  # exact: the same bits as the formula written out
    out = np.add(sq_a[:, None], sq_b[None, :], out=out)
    out -= twice_inner
    return np.maximum(out, 0.0, out=out)


def self_sq_distances(X: Any, sq_norms: np.ndarray) -> np.ndarray:
    """The ``(n, n)`` squared distances between the rows of X, from their inner products and
    squared norms, clipped at 0 against round-off; formed in place (one n x n array, where
    the formula's temporaries were three more)."""
    d2 = np.asarray(inner_products(X, X), dtype=np.float64)
    d2 *= -2.0
    d2 += sq_norms[:, None]
    d2 += sq_norms[None, :]
    return np.maximum(d2, 0.0, out=d2)


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


def _power_overflows(spec: KernelSpec, sq_a: np.ndarray, sq_b: np.ndarray,
                     dtype: Any) -> bool:
    """Whether a polynomial's values ``(x.y + a)^b`` can exceed ``dtype``'s range on these rows
    (``|x.y| <= max |x|^2``): rows of norm about 3e38 at degree 4 in float64, far sooner in
    float32. Checked on logarithms, which cannot overflow."""
    largest = spec.a + float(max(sq_a.max(initial=0.0), sq_b.max(initial=0.0)))
    return largest > 1 and spec.b * math.log(largest) >= math.log(np.finfo(dtype).max) - 1


def _normalise(block: np.ndarray, diag_a: np.ndarray, diag_b: np.ndarray, work: Any) -> None:
    """``block / sqrt(diag_a diag_b^T)`` in place, the all-zero rows (diagonal 0) given a
    direction of their own."""
    (root_a, zero_a), (root_b, zero_b) = direction_roots(diag_a), direction_roots(diag_b)
    block /= root_a.astype(work, copy=False)[:, None]
    block /= root_b.astype(work, copy=False)[None, :]
    _own_directions(block, zero_a, zero_b, 1.0)


def direction_roots(diag: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(sqrt(diag) with 1 where diag is 0, where diag is 0)``: what normalising by the
    self-similarities divides by, and the all-zero rows, which have a direction of their own
    (see the module's docstring). ``diag`` is a vector of self-similarities ``>= 0``."""
    if not np.all(diag >= 0):
        raise ValueError("a kernel's self-similarity is negative or not a number: the data "
                         "hold NaN or infinite values")
    zero = diag == 0
    return np.sqrt(np.where(zero, 1.0, diag)), zero


def _own_directions(block: np.ndarray, zero_a: np.ndarray, zero_b: np.ndarray, both: float,
                    one: float = 0.0) -> None:
    """Set the pairs of all-zero rows of ``block`` to ``both`` and add ``one`` to the pairs
    of an all-zero row with another row (in place; nothing to do, and nothing done, on
    data without all-zero rows)."""
    if not zero_a.any() and not zero_b.any():
        return
    if zero_a.any() and zero_b.any():
        block[np.ix_(zero_a, zero_b)] = both
    if one:
        block[np.ix_(zero_a, ~zero_b)] += one
        block[np.ix_(~zero_a, zero_b)] += one


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
    precision: str = "double",
    columns_cache: dict | None = None,
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
        Output dtype; the arithmetic is float64 (see ``precision``).
    out : ndarray of shape (len(specs), na, nb), optional
        Filled instead of a new array (its dtype replaces ``dtype``): a caller that keeps
        the blocks in a larger array spares a second copy of them (see
        :func:`fill_kernel_blocks`).
    columns : sequence of int, optional
        Per kernel, how many leading columns of its block it needs (the Nystrom factors of a
        smooth kernel use a prefix of the view's landmarks). Those are evaluated (more where a
        narrower Gaussian is derived from the kernel, see Notes); the rest of its block is
        left as it was. Default: all.
    precision : {"double", "single"}, default="double"
        ``"single"``: for dense rows, the inner products, distances and everything after them
        in float32 (about half the time), into a float32 output. The distances of the
        Gaussians (Euclidean, or between the unit rows for ``angular``) are taken between rows
        centred on the mean of ``Xb``, so that an offset of the data does not cancel away
        their digits. ``tests/kernels/test_kernels.py`` checks every family against float64 on data
        at the origin and at an offset of 1,000: within 64 float32 round-offs, relative where
        a Gaussian is at least 1e-3 and of the largest value otherwise (the narrowest
        Gaussian of a chain gathers the most). Sparse rows are evaluated in float64 and
        rounded.
    columns_cache : dict, optional
        With ``precision="single"``: a dict the caller keeps with ``Xb`` (the same rows on
        every call, e.g. a model's landmarks), which holds ``Xb``'s side of the float32
        distances (centred, with its squared norms) from one call to the next.

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
    if precision not in ("double", "single"):
        raise ValueError(f"precision must be 'double' or 'single', got {precision!r}")
    if precision == "single":
        dtype = np.float32
        if out is not None and out.dtype != np.float32:
            raise ValueError(f"precision='single' fills a float32 out, got {out.dtype}")
    single = precision == "single" and not (sp.issparse(Xa) or sp.issparse(Xb))
    work = np.float32 if single else np.float64
    sq_a = row_sq_norms(Xa) if sq_norms_a is None else sq_norms_a
    sq_b = row_sq_norms(Xb) if sq_norms_b is None else sq_norms_b
    shape = (len(specs), Xa.shape[0], Xb.shape[0])
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
    families = [specs[p].family for p in order]
    sq_dist = chord = None
    if single:
        # Only the columns the kernels that read inner products need; the distances of the
        # Gaussians (Euclidean, or between the unit rows) from their own centred products.
        readers = [needed[p] for p in order if specs[p].family in ("linear", "polynomial")]
        inner = (np.asarray(Xa, dtype=np.float32) @ np.asarray(
            Xb[:max(readers)], dtype=np.float32).T) if readers else None
        kept = {} if columns_cache is None else columns_cache
        if "gaussian" in families:
            if "gaussian" not in kept:
                kept["gaussian"] = _centred_columns(Xb)
            sq_dist = _centred_sq_distances(Xa, kept["gaussian"])
        if "angular" in families:
            (root_a, zero_a), (root_b, zero_b) = direction_roots(sq_a), direction_roots(sq_b)
            if "angular" not in kept:
                kept["angular"] = _centred_columns(np.asarray(Xb) / root_b[:, None])
            chord = _centred_sq_distances(np.asarray(Xa) / root_a[:, None], kept["angular"])
            # An all-zero row is the origin here: 1 from a unit row, where its own
            # direction is sqrt(2) away.
            _own_directions(chord, zero_a, zero_b, 0.0, 1.0)
    else:
        inner = inner_products(Xa, Xb).astype(np.float64, copy=False)
    # In-place arithmetic: the blocks are large (they feed the Nystrom and blockwise passes),
    # so every avoided temporary is a pass over memory saved. Outputs of another dtype are
    # computed in a float64 buffer per family (a chain is squared in place in its own).
    buffers = None if out.dtype == work else {}

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
        scaled = False  # a polynomial normalised before its power (see below)
        full = out[p] if buffers is None else buffers.setdefault(spec.family,
                                                                 np.empty(shape[1:]))
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
            scaled = _power_overflows(spec, sq_a, sq_b[:cols], block.dtype)
            if scaled and not normalize:
                raise ValueError(
                    f"{spec.name}: rows with squared norms up to "
                    f"{float(max(sq_a.max(initial=0), sq_b.max(initial=0))):.3g} make its "
                    f"values overflow {np.dtype(block.dtype).name}; rescale the data or "
                    "normalise the kernels")
            if scaled:  # the base normalised first (its diagonal is |x|^2 + a): powers <= 1
                _normalise(block, spec.a + sq_a, spec.a + sq_b[:cols], work)
            _integer_power(block, int(spec.b), out=block)
        elif spec.family == "angular":
            if chord is None:
                # ||u_i - u_j||^2 = 2 - 2 cos(x_i, x_j) for unit rows u = x / ||x||
                # (2 from an all-zero row, whose direction is its own).
                (root_a, zero_a), (root_b, zero_b) = (direction_roots(sq_a),
                                                      direction_roots(sq_b))
                chord = np.divide(inner, root_a[:, None],
                                  out=reuse_inner(i, "gaussian", sq_dist is not None))
                chord /= root_b[None, :]
                np.multiply(chord, -2.0, out=chord)
                chord += 2.0
                np.maximum(chord, 0.0, out=chord)
                _own_directions(chord, zero_a, zero_b, 0.0)
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
        if normalize and spec.family not in _WIDTHED and not (
                spec.family == "polynomial" and scaled):
            _normalise(block, kernel_diagonal(spec, sq_a), kernel_diagonal(spec, sq_b[:cols]),
                       work)
        if buffers is not None:
            out[p, :, :cols] = block
    return out


def _centred_columns(Xb: Any) -> tuple[np.ndarray, np.ndarray]:
    """``Xb``'s side of :func:`_centred_sq_distances`: the mean of its rows (float64), and
    ``[B^T; ||b||^2; 1]`` in float32 for the rows ``B`` centred on it, shape ``(d + 2, nb)``."""
    Xb = np.asarray(Xb, dtype=np.float64)
    centre = Xb.mean(axis=0)
    B = Xb - centre
    right = np.empty((B.shape[1] + 2, B.shape[0]), dtype=np.float32)
    right[:-2] = B.T
    right[-2] = row_sq_norms(B)
    right[-1] = 1.0
    return centre, right


def _centred_sq_distances(Xa: Any, columns: tuple[np.ndarray, np.ndarray]) -> np.ndarray:
    """Squared Euclidean distances in float32 between the rows of ``Xa`` and those of
    ``Xb`` (:func:`_centred_columns` of it), both centred on the mean of ``Xb``:
    ``||a||^2 + ||b||^2 - 2 a.b`` loses the digits the norms share, and centring leaves them
    about the size of the distances themselves. One product gives the three terms:
    ``[-2 A, 1, ||a||^2] @ [B^T; ||b||^2; 1]``."""
    centre, right = columns
    A = np.asarray(Xa, dtype=np.float64) - centre
    left = np.empty((A.shape[0], A.shape[1] + 2), dtype=np.float32)
    np.multiply(A, -2.0, out=left[:, :-2], casting="same_kind")
    left[:, -2] = 1.0
    left[:, -1] = row_sq_norms(A)
    # Not clipped at 0 (a pass over the block): a distance that round-off makes slightly
    # negative gives a Gaussian above 1 by about as much as the error stated for this path.
    return left @ right


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


