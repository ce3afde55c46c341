"""The column transform of a view, decided from a sample of its rows before any kernel is
computed: columns in different units standardised, binary columns of very different rates
scaled (not centred), columns far from zero beside their spread centred, anything else kept
as given (:func:`column_scaling`, what ``preprocessing="auto"`` means).
:mod:`mkrk_dask.plan` records the choice in the plan; ``predict`` and ``transform`` apply the
same :class:`ColumnScaling`.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.sparse as sp

from .exceptions import PrecisionWarning

__all__ = ["ColumnScaling", "column_scaling", "column_offset", "preprocess", "view_sample",
           "two_valued", "presence_scaling", "SCALE_SPREAD_LIMIT", "OFFSET_LIMIT", "SAMPLE_ROWS",
           "SPARSE_MIN_ZEROS"]

#: rows of the sample the data-driven choices read (fixed seed: they depend on the data only)
SAMPLE_ROWS = 2000
#: relative size below which a column's standard deviation counts as constant
_CONSTANT = 1e-12

#: columns whose standard deviations spread over more than this factor (largest over median;
#: of two columns, larger over smaller)
#: are in different units: the default standardises them. An order of magnitude: columns of
#: one unit (pixels, word weights, lengths in cm) spread by a few times at most
SCALE_SPREAD_LIMIT = 10.0
#: columns of one unit whose means lie further from zero than this many standard deviations
#: (timestamps beside their minutes of spread, readings on a large offset) are centred by the
#: default: a squared distance computed as ``|x|^2 + |y|^2 - 2 x.y`` keeps about
#: ``16 - 2 log10(offset)`` of float64's digits: 6 at 10^5, none at 10^8 (every distance
#: reads zero). Centring changes what the angles between rows say (a non-negative view's
#: dictionary reads them), so below that limit the view is kept as given
OFFSET_LIMIT = 1e5
#: share of zero entries from which a dense non-negative view is read as a sparse one would
#: be (counts or weights of many possible items, a few in each row: words in documents, a
#: node's links), whatever its storage: its columns share a unit, and a rare column's small
#: standard deviation is its rate, not its unit (standardised, a text of word counts lost
#: most of its clusters to its rarest words, issue 76)
SPARSE_MIN_ZEROS = 0.9


@dataclass(frozen=True)
class ColumnScaling:
    """The column transform of one view: ``(x - center) / scale``, or nothing."""

    method: str  # "none", "center" (scale 1), "scale" (no center) or "standardize"
    center: tuple[float, ...] | None = None
    scale: tuple[float, ...] | None = None

    def apply(self, X: Any) -> Any:
        """The view transformed (numpy: a new array; dask and Zarr: a lazy dask array)."""
        if self.method == "none":
            return X
        center = 0.0 if self.center is None else np.asarray(self.center, dtype=np.float64)
        scale = np.asarray(self.scale, dtype=np.float64)
        if sp.issparse(X):  # never centred (see column_scaling): it stays sparse
            if self.method != "scale":
                raise ValueError("sparse views are only scaled, never centred")
            scaled = sp.csr_matrix(X, dtype=np.float64, copy=True)
            scaled.data *= (1.0 / scale)[scaled.indices]  # one copy, no product
            return scaled
        if hasattr(X, "dask") or hasattr(X, "get_orthogonal_selection"):
            import dask.array as da

            lazy = X if hasattr(X, "dask") else da.from_array(X, chunks=X.chunks)
            return (lazy.astype(np.float64) - center) / scale
        return (np.asarray(X, dtype=np.float64) - center) / scale


def view_sample(view: Any) -> Any:
    """A uniform sample of at most :data:`SAMPLE_ROWS` rows of ``view`` (fixed seed)."""
    from .kernel_widths import sample_rows
    from .validation import canonical_sparse

    # explicit zeros read as zeros: the plan reads the values, not how they are stored
    return canonical_sparse(sample_rows(view, SAMPLE_ROWS))


def column_scaling(view: Any, rows: Any | None = None) -> tuple[ColumnScaling, str]:
    """Whether the columns of ``view`` are standardised, and why, from a sample of its rows.

    Sparse views of counts or weights are kept as given: their columns share a unit; so are
    dense non-negative views of at least :data:`SPARSE_MIN_ZEROS` zero entries. Views of
    binary columns (flags, one-hot factors, which words a document holds; sparse or dense)
    share one too, a presence, and are kept as given unless the columns' rates differ so much
    that the common ones decide every distance: where the root mean squares ``sqrt(p)`` of
    the columns (``p`` the rate) spread over more than :data:`SCALE_SPREAD_LIMIT`, as the
    rarest words against the common ones, each column is divided by its root mean square,
    not centred (:func:`presence_scaling`). A dense view is standardised where the
    standard deviations of its non-constant columns spread over more than
    :data:`SCALE_SPREAD_LIMIT` (largest over median; of two columns, larger over smaller):
    columns in different units (a length in mm beside one in km), where the Euclidean
    distance, and every kernel built on it, would see the largest-scale columns only. Its
    binary columns (one-hot factors, flags) then stay 0 or 1. Centre and scale come from the
    sample (a fixed seed), so the transform is known before any pass over the data. A dense
    view of one unit whose columns' means lie more than :data:`OFFSET_LIMIT` standard
    deviations from zero is centred, not scaled.
    """
    rows = view_sample(view) if rows is None else rows
    if sp.issparse(rows):
        stored = rows.data[rows.data != 0]
        if stored.size and np.all(stored == 1):
            return presence_scaling(rows)
        return ColumnScaling("none"), "sparse columns (counts or weights): kept as given"
    std = rows.std(axis=0)
    varying = _varying(std)
    if not varying.any():
        return ColumnScaling("none"), "no column varies"
    binary = np.all((rows == 0) | (rows == 1), axis=0) & varying
    if np.array_equal(binary, varying):
        return presence_scaling(rows)
    zeros = 1.0 - np.count_nonzero(rows) / max(rows.size, 1)
    if zeros >= SPARSE_MIN_ZEROS and float(rows.min()) >= 0:
        return ColumnScaling("none"), (
            f"non-negative and {zeros:.0%} zero entries (>= {SPARSE_MIN_ZEROS:.0%}: counts or "
            "weights of many items, read as sparse ones): kept as given")
    spread = _spread(std[varying])
    numbers = varying & ~binary
    mean = rows.mean(axis=0)
    center = np.where(binary, 0.0, mean)
    if spread <= SCALE_SPREAD_LIMIT:
        one_unit = (f"the columns' standard deviations spread by {spread:.3g}x (<= "
                    f"{SCALE_SPREAD_LIMIT:g}x: one unit)")
        offset = column_offset(mean, std, numbers)
        if offset > OFFSET_LIMIT:
            return (ColumnScaling("center", tuple(map(float, center)),
                                  tuple(1.0 for _ in center)),
                    f"{one_unit}, but a column's mean lies {offset:.3g} standard deviations "
                    f"from zero (> {OFFSET_LIMIT:g}: the squared distances would lose their "
                    "digits to the squared norms): centred, not scaled")
        return ColumnScaling("none"), f"{one_unit}: kept as given"
    # Binary columns keep their unit (presence, 0 or 1) beside standardised numbers: scaled
    # to unit variance, a category of rate p would put its rows 1 / sqrt(p (1 - p)) apart
    # (4.6 at 5%), so the rare categories of one-hot factors would outweigh every number.
    scale = np.where(numbers, std, 1.0)
    kept = f"; {int(binary.sum())} binary columns kept as 0/1" if binary.any() else ""
    return (ColumnScaling("standardize", tuple(map(float, center)), tuple(map(float, scale))),
            f"the columns' standard deviations spread by {spread:.3g}x (> "
            f"{SCALE_SPREAD_LIMIT:g}x: columns in different units): standardised{kept}")


def _spread(scales: np.ndarray) -> float:
    """How far columns' scales spread: the largest over the median; of two, over the other
    (the median of two is their mean, never below half the larger: two columns in any units
    would stay as given)."""
    return float(scales.max() / (np.median(scales) if scales.size > 2 else scales.min()))


def presence_scaling(rows: Any) -> tuple[ColumnScaling, str]:
    """The transform of a view of binary columns (0/1; a sparse one's stored values all 1)
    from a sample of its rows: kept as given, or each column divided by its root mean square
    ``sqrt(p)`` where those spread over more than :data:`SCALE_SPREAD_LIMIT`.

    Kept as 0/1, two rows differ on a column of rate p with chance ``2 p (1 - p)``, so the
    common columns decide the distances and angles, and the rare ones (a word few documents
    hold, an item few baskets do), which tell the groups apart, count for nothing. Divided by
    ``sqrt(p)``, every column has the same mean square: not the standard deviation, which
    would make a column present in nearly every row a large shared part of every row's
    direction; not centred, so that an absent feature stays zero and a sparse view sparse. A
    column absent from the sample is scaled as one present once in it (the rarest rate the
    sample can tell)."""
    n = rows.shape[0]
    rate = np.asarray(rows.mean(axis=0), dtype=np.float64).ravel()
    varying = (rate > 0) & (rate < 1)
    if not varying.any():
        return ColumnScaling("none"), "no column varies"
    # a column constant in the sample at a value other than 0 keeps its scale
    rms = np.where(varying | (rate == 0), np.sqrt(np.maximum(rate, 1.0 / n)), 1.0)
    spread = _spread(rms[varying])
    if spread <= SCALE_SPREAD_LIMIT:
        return ColumnScaling("none"), (
            f"binary columns (one unit: presence; their root mean squares spread by "
            f"{spread:.3g}x, <= {SCALE_SPREAD_LIMIT:g}x): kept as given")
    return (ColumnScaling("scale", None, tuple(map(float, rms))),
            f"binary columns whose root mean squares spread by {spread:.3g}x (> "
            f"{SCALE_SPREAD_LIMIT:g}x: a few common columns would decide every distance): "
            "each divided by its root mean square, not centred")


def _varying(std: np.ndarray) -> np.ndarray:
    """The columns whose standard deviation is not constant (relative to the largest, or 1)."""
    return std > _CONSTANT * max(float(std.max(initial=0.0)), 1.0)


def two_valued(rows: Any) -> bool:
    """Whether some column of a sample varies and every column takes two values at most:
    flags, one-hot factors, answers coded 0/1, 1/2 or -1/1. The rows are then corners of a
    box, whatever each column's unit. A sparse sample counts as such where each column's
    stored values are one number (beside its zeros)."""
    if sp.issparse(rows):
        columns = sp.csc_matrix(rows, copy=True)
        columns.eliminate_zeros()
        starts = columns.indptr[:-1][np.diff(columns.indptr) > 0]
        if starts.size == 0:
            return False
        data = columns.data
        return bool(np.array_equal(np.minimum.reduceat(data, starts),
                                   np.maximum.reduceat(data, starts)))
    rows = np.asarray(rows)
    low, high = rows.min(axis=0), rows.max(axis=0)
    return bool((high > low).any() and np.all((rows == low) | (rows == high)))


def column_offset(mean: np.ndarray, std: np.ndarray, columns: np.ndarray) -> float:
    """How many standard deviations the mean of the farthest of ``columns`` (a mask) lies
    from zero, from the columns' ``mean`` and ``std`` on a sample (0 where no column is
    given)."""
    return float(np.max(np.abs(mean[columns]) / std[columns], initial=0.0))


def preprocess(choice: str, view: Any, rows: Any) -> tuple[ColumnScaling, str]:
    """The column transform ``choice`` gives ``view`` (``"auto"``: :func:`column_scaling`).
    ``"none"`` on columns far from zero beside their spread warns (:data:`OFFSET_LIMIT`)."""
    if choice == "auto":
        return column_scaling(view, rows)
    if sp.issparse(view):
        return ColumnScaling("none"), ("given" if choice == "none" else
                                       "sparse columns: never centred (kept as given)")
    std, mean = rows.std(axis=0), rows.mean(axis=0)
    varying = _varying(std)
    if choice == "none":
        offset = column_offset(mean, std, varying)
        if offset > OFFSET_LIMIT:
            warnings.warn(
                f"preprocessing='none': a column's mean lies {offset:.3g} standard deviations "
                "from zero, so the kernels' squared distances keep about "
                f"{max(0, round(16 - 2 * np.log10(offset)))} of float64's 16 digits; centre the "
                "columns (preprocessing='auto' or 'standardize', or subtract their means)",
                PrecisionWarning, stacklevel=2)
        return ColumnScaling("none"), "given"
    scale = np.where(varying, std, 1.0)
    return (ColumnScaling("standardize", tuple(map(float, mean)), tuple(map(float, scale))),
            "given")
