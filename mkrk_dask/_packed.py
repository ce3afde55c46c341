"""Symmetric matrices stored by their upper triangle, strip of rows by strip ("packed").

The rows of an n x n symmetric matrix are cut into strips of :data:`PACKED_STRIP` rows; strip
``a..b`` keeps its columns from ``a`` on, the rectangle ``A[a:b, a:]``, C-ordered, and the
strips follow each other in one flat array (:class:`PackedLayout`). That is the upper
triangle and the diagonal blocks whole: ``n (n + strip) / 2`` entries or fewer, about half of
``n^2`` (52% at n = 1,440, 50.2% at 12,000). Each strip is a plain 2-D array, so every pass
over it is one numpy or BLAS call per strip, never one per row.

The exact backend keeps precomputed kernels so (:mod:`mkrk_dask.backends.exact`): half the
memory of the full ``(m, n, n)`` stack, and each pass of the loop over the stacked kernels
(``K_w``, the quadratic forms, C) reads half as many bytes.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

__all__ = ["PackedLayout", "PACKED_STRIP"]

#: rows per strip of the packed layout
PACKED_STRIP = 64


class PackedLayout:
    """Where the strips of a packed n x n symmetric matrix lie in its flat array.

    Parameters
    ----------
    n : int
    strip : int, default=:data:`PACKED_STRIP`
    """

    def __init__(self, n: int, strip: int = PACKED_STRIP):
        self.n, self.strip = int(n), int(strip)
        starts = np.arange(0, self.n, self.strip, dtype=np.int64)
        ends = np.minimum(starts + self.strip, self.n)
        sizes = (ends - starts) * (self.n - starts)
        self.starts, self.ends = starts, ends
        self.offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
        #: entries of the flat array
        self.size = int(self.offsets[-1])
        rows = np.arange(self.n, dtype=np.int64)
        strip_of = rows // self.strip
        local = rows - starts[strip_of]
        #: where each diagonal entry lies
        self.diagonal_index = (self.offsets[strip_of] + local * (self.n - starts[strip_of])
                               + local)
        self._masks: dict[int, np.ndarray] = {}

    @classmethod
    def from_size(cls, size: int, strip: int = PACKED_STRIP) -> PackedLayout:
        """The layout whose flat array has ``size`` entries (a ValueError if none has)."""
        n = int(np.sqrt(2 * size))  # size is about n^2 / 2
        for candidate in range(max(n - strip - 2, 1), n + 2):
            layout = cls(candidate, strip)
            if layout.size == size:
                return layout
        raise ValueError(f"{size} entries are no packed symmetric matrix")

    def strips(self, flat: np.ndarray) -> Iterator[tuple[int, int, np.ndarray]]:
        """``(a, b, A[a:b, a:])`` for every strip, the last a view of ``flat``."""
        for s in range(self.starts.size):
            a, b = int(self.starts[s]), int(self.ends[s])
            yield a, b, flat[self.offsets[s]:self.offsets[s + 1]].reshape(b - a, self.n - a)

    def unpack_upper(self, flat: np.ndarray, out: np.ndarray) -> np.ndarray:
        """The packed matrix into the upper triangle and the diagonal blocks of the C-ordered
        n x n ``out``; the rest of it is not written."""
        for a, b, strip in self.strips(flat):
            out[a:b, a:] = strip
        return out

    def unpack_full(self, flat: np.ndarray, out: np.ndarray) -> np.ndarray:
        """The packed matrix into the whole of ``out`` (both triangles)."""
        from .kernels import mirror_upper

        return mirror_upper(self.unpack_upper(flat, out))

    def fill_upper(self, flat: np.ndarray, out: np.ndarray,
                   sample: np.ndarray | None = None) -> np.ndarray:
        """The upper triangle of the packed matrix's principal submatrix on the sorted rows
        ``sample`` (all rows: None) into the upper triangle of the square ``out`` (any float
        dtype: the values are cast as an assignment casts them); other entries of ``out``
        may be written too."""
        if sample is None:
            return self.unpack_upper(flat, out)
        strip_of = sample // self.strip
        for s in np.unique(strip_of):
            a = int(self.starts[s])
            rows = np.flatnonzero(strip_of == s)  # positions in sample, ascending
            first = int(rows[0])
            block = flat[self.offsets[s]:self.offsets[s + 1]].reshape(-1, self.n - a)
            # rows of this strip against the sampled columns from the first of them on
            out[first:first + rows.size, first:] = block[np.ix_(sample[rows] - a,
                                                                 sample[first:] - a)]
        return out

    def diagonals(self, packed: np.ndarray) -> np.ndarray:
        """The diagonals of stacked packed matrices ``(m, size)``: ``(m, n)``."""
        return np.ascontiguousarray(packed[:, self.diagonal_index])

    def _mask(self, t: int) -> np.ndarray:
        """Weights of a diagonal block's entries in a Frobenius product: 0 below the
        diagonal (the mirror of entries counted above it), 1/2 on it (halving undoes the
        doubling exactly), 1 above it."""
        if t not in self._masks:
            self._masks[t] = np.triu(np.ones((t, t)), 1) + 0.5 * np.eye(t)
        return self._masks[t]

    def outer(self, H: np.ndarray, out: np.ndarray) -> np.ndarray:
        """The weights that turn the packed layout into the Frobenius product with
        ``H H^T``: ``out`` (flat, :attr:`size`) holds ``2 (H H^T)_ij`` above the diagonal,
        ``(H H^T)_ii`` on it and 0 below it, so that ``packed(K) @ out = <K, H H^T> =
        tr(H^T K H)`` for a symmetric K. Half the products of ``H H^T``."""
        # The factor 2 on one side (exact: a power of two), not one more pass over ``out``.
        doubled = H + H
        for a, b, strip in self.strips(out):
            np.matmul(H[a:b], doubled[a:].T, out=strip)
            strip[:, :b - a] *= self._mask(b - a)
        return out

    def gram(self, packed: np.ndarray) -> np.ndarray:
        """``[tr(K_p K_q)]`` (m x m) of symmetric matrices stacked packed ``(m, size)``: the
        entries above the diagonal count twice, those of the diagonal blocks are stored both
        sides of the diagonal, ``2 P P^T - B`` with ``B`` the product over the diagonal
        blocks."""
        gram = packed @ packed.T
        gram *= 2.0
        for s in range(self.starts.size):
            a, b = int(self.starts[s]), int(self.ends[s])
            rows = packed[:, self.offsets[s]:self.offsets[s + 1]].reshape(-1, b - a, self.n - a)
            blocks = rows[:, :, :b - a].reshape(rows.shape[0], -1)
            gram -= blocks @ blocks.T
        return gram
