"""Precomputed kernels: their shapes, symmetry and positive semi-definiteness checked, and
their normalised copy (or the input normalised in place), with the PSD test run beside the
exact backend's loop where it can (:class:`DeferredPsdTest`).

Every function raises a ValueError (or TypeError) whose message names the problem.
"""

from __future__ import annotations

import threading
import time
import warnings
from typing import Any

import numpy as np
import scipy.sparse as sp

from . import psd_digests
from ._lapack import cholesky_info
from ._packed import PackedLayout
from ._threads import held_threads, local_threads, map_threads, usable_cores
from .kernels import tiled_symmetric_pass
from .validation import is_lazy

__all__ = ["check_precomputed", "prepare_precomputed", "prepare_precomputed_deferred",
           "prepare_precomputed_packed", "DeferredPsdTest", "PackedKernel", "kernel_stack",
           "PSD_FULL_CHECK_MAX_N", "PSD_TOL"]


#: precomputed kernels up to this size are checked for positive semi-definiteness whole;
#: larger ones on a random principal submatrix of this size (with a warning)
PSD_FULL_CHECK_MAX_N = 1500
#: default tolerance of the PSD test, in units of n times the largest diagonal entry (at
#: n = 1,000, an eigenvalue of -0.001 x the largest diagonal entry is allowed); from this
#: tolerance up the test factorises in float32 (whose round-off, 2^-23 in these units, is 8x
#: smaller than the shift), confirmed in float64 only when that fails
PSD_TOL = 1e-6


def check_precomputed(K: Any, symmetry_tol: float = 1e-8, psd_tol: float = PSD_TOL) -> np.ndarray:
    """Validate precomputed kernels: an ``(m, n, n)`` array, one ``(n, n)`` matrix, or a list.

    Each kernel must be square, finite, symmetric to ``symmetry_tol`` relative to its largest
    entry, and positive semi-definite to ``psd_tol * n`` times its largest diagonal entry
    (a Cholesky factorisation of ``K + tol I``, in float32 first from the default
    :data:`PSD_TOL` up, a refusal always confirmed in float64; on a random principal submatrix of
    :data:`PSD_FULL_CHECK_MAX_N` rows when n is larger, with a warning). Returns a float64
    C-contiguous ``(m, n, n)`` array (the input itself when it already is one: no copy; dask
    or Zarr kernels as a dask array, read one kernel at a time).
    :func:`prepare_precomputed` makes the same checks while making the normalised copy a fit
    needs.
    """
    K = kernel_stack(K)
    sample = _psd_sample(K.shape[1])

    def check(p: int, work: np.ndarray) -> None:
        Kp = np.asarray(K[p], dtype=np.float64) if is_lazy(K) else K[p]  # one kernel read
        scale = _largest_entry(Kp, p)  # NaN and infinity first
        _check_symmetric(p, tiled_symmetric_pass(Kp), scale, symmetry_tol)
        _check_psd(_psd_part(Kp, sample), p, psd_tol, work)

    map_threads(check, K.shape[0], lambda: _psd_work(K.shape[1], sample))
    return K


def prepare_precomputed(K: Any, *, normalize: bool = True, symmetry_tol: float = 1e-8,
                        psd_tol: float = PSD_TOL, timings: dict | None = None,
                        copy: bool = True) -> np.ndarray:
    """The checks of :func:`check_precomputed`, made while writing the copy a fit works on.

    Returns a new C-contiguous float64 ``(m, n, n)`` array (with ``copy``, the default, the
    input is never modified): every kernel normalised ``K_ij / sqrt(K_ii K_jj)`` when
    ``normalize``, then made exactly symmetric, ``(K + K^T) / 2``. Each kernel is scaled
    straight into the copy, which one tiled pass then symmetrises while it compares the input
    with its transpose; the PSD test (a Cholesky factorisation) factorises the copy in an
    n x n buffer that serves kernel after kernel. Nothing else of size n x n is allocated.

    ``copy=False`` prepares the input itself in place, when it is a writeable C-contiguous
    float64 ``(m, n, n)`` array (anything else is converted to one first, which is then the
    only copy), and returns it: no second ``8 m n^2`` bytes, and no fresh pages to write.
    The same tiled pass compares each tile pair before it writes it, so the result is the same
    to the bit. When a check refuses a kernel, the kernels may be left partly normalised
    (the others are prepared on other threads meanwhile): a caller who allows this has no
    further use for the raw kernels.

    The kernels are prepared on one thread per core (one buffer each, BLAS on one thread
    meanwhile): the copy is numpy on large arrays and the factorisation LAPACK without the
    GIL (:mod:`mkrk_dask._lapack`), so the threads run side by side. An error names the
    lowest-numbered kernel that fails, as a sequential loop would.

    The PSD test is that of :func:`check_precomputed` on the kernel the fit uses: with
    ``normalize`` on the normalised kernel, whose largest diagonal entry is 1 (normalising is
    a congruence, which keeps the signs of the eigenvalues). A negative diagonal entry fails
    it at once; a zero one fails normalisation. :func:`prepare_precomputed_deferred` leaves
    the PSD test to run beside the caller's work.

    Parameters
    ----------
    K : array-like of shape (m, n, n) or (n, n), or list of (n, n) arrays
    normalize : bool, default=True
    symmetry_tol, psd_tol : float
        As for :func:`check_precomputed`.
    timings : dict, optional
        Seconds are added to its ``copy`` (the checks before the PSD test and the copy) and
        ``psd`` (the PSD test) entries: thread-seconds, summed over the kernels.
    copy : bool, default=True
        False: prepare ``K`` in place where it allows (see above).

    Returns
    -------
    ndarray of shape (m, n, n)
    """
    return _prepare(K, normalize, symmetry_tol, psd_tol, timings, psd_now=True, copy=copy)[0]


def prepare_precomputed_deferred(K: Any, *, normalize: bool = True, symmetry_tol: float = 1e-8,
                                 psd_tol: float = PSD_TOL, copy: bool = True
                                 ) -> tuple[np.ndarray, DeferredPsdTest]:
    """:func:`prepare_precomputed` without its PSD test, which is returned to run later or
    beside the caller's work on the copy (see :class:`DeferredPsdTest`). Every other check
    has been made when it returns."""
    return _prepare(K, normalize, symmetry_tol, psd_tol, None, psd_now=False, copy=copy)


def prepare_precomputed_packed(K: Any, *, normalize: bool = True, symmetry_tol: float = 1e-8,
                               psd_tol: float = PSD_TOL, timings: dict | None = None
                               ) -> tuple[np.ndarray, PackedLayout, DeferredPsdTest]:
    """:func:`prepare_precomputed_deferred` into a packed copy: the upper triangle of every
    prepared kernel, strip of rows by strip (:class:`mkrk_dask._packed.PackedLayout`), an
    ``(m, layout.size)`` array, about half the bytes of the full copy. The input is never
    modified. Returns the copy, its layout and the PSD test.

    The entries are those of :func:`prepare_precomputed` to the bit, and the checks and their
    errors the same (the lowest-numbered failing kernel named, its first failing check). One
    pass per kernel, strip by strip: each strip of rows of the kernel and the matching strip
    of columns are read once, compared (symmetry; a NaN or an infinity shows there too),
    normalised, symmetrised and written into the copy. The PSD test is returned to run later
    or beside the caller's work (:class:`DeferredPsdTest`, which factorises the packed
    kernels). ``timings`` gets the thread-seconds of the pass added to its ``copy`` entry.
    """
    K = kernel_stack(K)
    lazy = is_lazy(K)
    m, n, _ = K.shape
    layout = PackedLayout(n)
    out = np.empty((m, layout.size))
    sample = _psd_sample(n)
    seconds = np.zeros(m)

    def prepare(p: int, buffer: np.ndarray) -> None:
        start = time.perf_counter()
        Kp = np.asarray(K[p], dtype=np.float64) if lazy else K[p]  # one kernel read
        diagonal = np.diagonal(Kp).copy()
        if normalize and not np.all(diagonal > 0):  # also NaN: the full checks' errors, in order
            scale = _largest_entry(Kp, p)
            _check_symmetric(p, tiled_symmetric_pass(Kp), scale, symmetry_tol)
            _check_diagonal(diagonal, p, psd_tol * n * max(float(np.max(np.abs(diagonal))),
                                                           1e-300))
        rows = 1.0 / np.sqrt(diagonal) if normalize else None
        # NaN or infinity is reported below, once the pass has seen it
        with np.errstate(invalid="ignore", over="ignore"):
            asym = _packed_pass(Kp, out[p], layout, rows, buffer)
        # A NaN or an infinity anywhere leaves max |K - K^T| NaN or infinite (its difference
        # with its mirror image, or with itself on the diagonal). The largest entry, which the
        # tolerance is relative to, is at least the largest diagonal entry: it is needed only
        # when the kernel is not symmetric to that.
        if not (np.isfinite(asym) and asym <= symmetry_tol * max(
                float(np.max(np.abs(diagonal))), 1e-300)):
            _check_symmetric(p, asym, _largest_entry(Kp, p), symmetry_tol)
        seconds[p] = time.perf_counter() - start

    map_threads(prepare, m, lambda: np.empty((n, layout.strip + 8)))
    if timings is not None:
        timings["copy"] = timings.get("copy", 0.0) + float(seconds.sum())
    return out, layout, DeferredPsdTest(out, psd_tol, sample, layout=layout)


def _packed_pass(K: np.ndarray, out: np.ndarray, layout: PackedLayout,
                 rows: np.ndarray | None, buffer: np.ndarray) -> float:
    """Write ``(N + N^T) / 2`` packed into ``out``, N = ``K`` scaled by ``rows`` on both sides
    with a diagonal of ones (or ``K`` itself); return ``max |K - K^T|`` (NaN or infinite
    where ``K`` holds a NaN or an infinity).

    Strip by strip of the layout, rows ``a:b``: the strip ``K[a:b, a:]`` and the columns
    ``K[a:, a:b]`` (which hold the rest of the strip's pairs) are each read once; the columns
    go through ``buffer``, whose rows are padded by 8 entries (see
    :func:`mkrk_dask.kernels.tile_buffer`). The operations and their order on every entry are
    those of :func:`~mkrk_dask.kernels.tiled_symmetric_pass` (rows scaled, then columns; the
    diagonal set to 1; the two halves added, then halved), so the packed entries are those of
    the full copy to the bit.
    """
    n = K.shape[0]
    asym = 0.0  # numpy's maximum, not Python's: a NaN must carry through
    for a, b, strip in layout.strips(out):
        t = b - a
        upper = K[a:b, a:]  # (t, n - a)
        columns = buffer[:n - a, :t]
        np.copyto(columns, K[a:, a:b])  # (n - a, t): the one strided read
        np.subtract(upper, columns.T, out=strip)
        asym = np.maximum(asym, np.maximum(strip.max(), -strip.min()))
        if rows is None:
            np.add(upper, columns.T, out=strip)
        else:
            np.multiply(upper, rows[a:b, None], out=strip)
            strip *= rows[None, a:]
            columns *= rows[a:, None]
            columns *= rows[None, a:b]
            diagonal = np.arange(t)
            strip[diagonal, diagonal] = 1.0
            columns[diagonal, diagonal] = 1.0
            strip += columns.T
        strip *= 0.5
    return float(asym)


def _prepare(K: Any, normalize: bool, symmetry_tol: float, psd_tol: float,
             timings: dict | None, psd_now: bool, copy: bool = True
             ) -> tuple[np.ndarray, DeferredPsdTest]:
    K = kernel_stack(K)
    m, n, _ = K.shape
    if not (copy or K.flags.writeable):
        K = K.copy()  # read-only input (a memory map, a broadcast view): the one copy
    out = np.empty((m, n, n)) if copy else K
    sample = _psd_sample(n)
    seconds = np.zeros((m, 2))  # per kernel, so that no two threads add to one entry

    def prepare(p: int, work: np.ndarray) -> None:
        start = time.perf_counter()
        Kp = K[p]
        scale = _largest_entry(Kp, p)
        # A copy: in place, the pass overwrites the diagonal with ones.
        diagonal = np.diagonal(Kp).copy()
        shift = psd_tol * n * max(float(np.max(np.abs(diagonal))), 1e-300)
        if normalize and not np.all(diagonal > 0):
            # The symmetry error comes first, as in check_precomputed.
            _check_symmetric(p, tiled_symmetric_pass(Kp), scale, symmetry_tol)
            _check_diagonal(diagonal, p, shift)
        rows = 1.0 / np.sqrt(diagonal) if normalize else None
        _check_symmetric(p, tiled_symmetric_pass(Kp, Kp if out is K else out[p], rows), scale,
                         symmetry_tol)
        copied = time.perf_counter()
        if psd_now:
            _check_psd(_psd_part(out[p], sample), p, psd_tol, work)
        seconds[p] = copied - start, time.perf_counter() - copied

    map_threads(prepare, m, lambda: _psd_work(n, sample) if psd_now else None)
    if timings is not None:
        for key, value in zip(("copy", "psd"), seconds.sum(axis=0), strict=True):
            timings[key] = timings.get(key, 0.0) + float(value)
    return out, DeferredPsdTest(out, psd_tol, sample, done=psd_now)


class DeferredPsdTest:
    """The PSD test of :func:`prepare_precomputed` on prepared kernels, made beside other work.

    The exact backend's loop spends its time in memory-bound products on one BLAS thread,
    while the test is compute-bound (a Cholesky factorisation per kernel): on a second core
    the two run side by side, and the test's time leaves the fit's critical path.

    :meth:`start` begins the test on a background thread, only when the calling thread holds
    one BLAS/OpenMP thread (:func:`mkrk_dask._threads.local_threads`; BLAS limits are
    process-wide, so the test then runs on one thread too) and more than one core is usable.
    :meth:`wait` finishes it, the calling thread taking kernels not yet started (without a
    background thread, the test runs on a thread per core as in :func:`prepare_precomputed`),
    and raises the error of the lowest-numbered kernel that fails, once. :meth:`raise_if_failed`
    raises it early without waiting; :meth:`cancel` stops handing out kernels.

    Parameters
    ----------
    kernels : ndarray of shape (m, n, n), or (m, n (n + 1) / 2) packed
        The prepared kernels; they are only read.
    psd_tol : float
    sample : ndarray or None
        The rows of the principal submatrix tested (None: all of them).
    done : bool, default=False
        Nothing to test (the kernels were tested already).
    layout : PackedLayout, optional
        The layout of the kernels when they are packed, ``(m, layout.size)``.
    """

    def __init__(self, kernels: np.ndarray, psd_tol: float, sample: np.ndarray | None,
                 done: bool = False, layout: PackedLayout | None = None):
        self._kernels, self._tol, self._sample = kernels, psd_tol, sample
        self._layout = layout
        self._lock = threading.Lock()
        self._next = 0
        # Kernels from _stop on are not handed out: set past a failure (every lower kernel
        # was handed out before it, so the lowest failure is still found).
        self._stop = 0 if done else kernels.shape[0]
        self._errors: dict[int, Exception] = {}
        self._running: set[int] = set()
        self._thread: threading.Thread | None = None
        self._cancelled = False
        self._reported = done
        #: thread-seconds spent in the test so far
        self.seconds = 0.0

    @property
    def background(self) -> bool:
        """Whether the test was started on a background thread."""
        return self._thread is not None

    def start(self) -> None:
        """Begin on a background thread, where that runs beside the caller (see above)."""
        if self._thread is not None or self._reported or self._next >= self._stop:
            return
        if held_threads() != 1 or usable_cores() < 2:
            return
        self._thread = threading.Thread(target=self._work, name="mkrk-psd-test", daemon=True)
        self._thread.start()

    def wait(self) -> None:
        """Finish the test (also after :meth:`cancel`) and raise its error (once; later calls
        return)."""
        if self._reported:
            return
        self._cancelled = False
        try:
            if self._thread is None or not self._thread.is_alive():
                remaining = range(self._next, self._stop)
                self._next = self._stop

                def check(i: int, work: np.ndarray) -> None:
                    if remaining[i] < self._stop:  # none past a failure
                        self._check(remaining[i], work)

                map_threads(check, len(remaining), self._buffer)
            else:
                with local_threads(1):
                    self._work()
                self._thread.join()
        except BaseException:
            self.cancel()
            raise
        self.raise_if_failed()
        self._reported = True

    def raise_if_failed(self) -> None:
        """Raise the error of the lowest-numbered kernel that failed so far, if any."""
        if not self._errors or self._reported:
            return
        with self._lock:
            # Every kernel below a failure was handed out before it: the failure is the
            # lowest one once none of those is still being tested.
            lowest = min(self._errors)
            final = not any(q < lowest for q in self._running)
        if final:
            self._reported = True
            raise self._errors[lowest]

    def cancel(self) -> None:
        """Hand out no more kernels until :meth:`wait`, and wait for those being tested (one
        factorisation each at most)."""
        self._cancelled = True
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join()

    def _fail(self, p: int, error: Exception) -> None:
        with self._lock:
            self._errors[p] = error
            self._stop = min(self._stop, p + 1)

    def _buffer(self) -> np.ndarray:
        n = self._kernels.shape[1] if self._layout is None else self._layout.n
        return _psd_work(n, self._sample)

    def _part(self, p: int) -> np.ndarray | PackedKernel:
        if self._layout is None:
            return _psd_part(self._kernels[p], self._sample)
        return PackedKernel(self._kernels[p], self._layout, self._sample)

    def _take(self) -> int | None:
        with self._lock:
            if self._cancelled or self._next >= self._stop:
                return None
            self._next += 1
            self._running.add(self._next - 1)
            return self._next - 1

    def _work(self) -> None:
        work = self._buffer()
        while (p := self._take()) is not None:
            self._check(p, work)

    def _check(self, p: int, work: np.ndarray) -> None:
        start = time.perf_counter()
        try:
            _check_psd(self._part(p), p, self._tol, work)
        except ValueError as err:  # the test refuses the kernel
            self._fail(p, err)
        except BaseException as err:
            # Anything else leaves the kernel untested: that is an error too, never a pass.
            self._fail(p, RuntimeError(
                f"precomputed kernel {p} could not be tested for positive semi-definiteness "
                f"({type(err).__name__}: {err})"))
            if not isinstance(err, Exception):
                raise
        finally:
            with self._lock:
                self._running.discard(p)
                self.seconds += time.perf_counter() - start


class PackedKernel:
    """One packed kernel (:class:`mkrk_dask._packed.PackedLayout`), or its principal
    submatrix on the sorted rows ``sample``, as the PSD test reads it: its order, its
    diagonal, and its upper triangle written into a square buffer."""

    def __init__(self, packed: np.ndarray, layout: PackedLayout,
                 sample: np.ndarray | None = None):
        self.packed, self.layout, self.sample = packed, layout, sample
        self.n = layout.n if sample is None else sample.size

    def diagonal(self) -> np.ndarray:
        index = self.layout.diagonal_index
        return self.packed[index if self.sample is None else index[self.sample]]

    def fill_upper(self, out: np.ndarray) -> np.ndarray:
        return self.layout.fill_upper(self.packed, out, self.sample)


def kernel_stack(K: Any) -> Any:
    """Precomputed kernels as a float64 C-contiguous ``(m, n, n)`` array, shapes checked,
    values not (the input itself when it already is one: no copy). Dask or Zarr kernels stay
    where they are, as a dask array: a backend reads them one kernel at a time."""
    if is_lazy(K):
        import dask.array as da

        K = K if hasattr(K, "dask") else da.from_array(K, chunks=K.chunks)
        if not (np.issubdtype(K.dtype, np.floating) or np.issubdtype(K.dtype, np.integer)):
            raise ValueError(f"precomputed kernels must be real numbers, got dtype {K.dtype}")
        return _checked_stack_shape(K[None] if K.ndim == 2 else K)
    if isinstance(K, list | tuple):
        shapes = {np.shape(k) for k in K}
        if len(shapes) != 1:
            raise ValueError(f"precomputed kernels have different shapes: {sorted(shapes)}")
        K = np.stack([np.asarray(k) for k in K])
    if sp.issparse(K):
        raise TypeError("precomputed kernels must be dense arrays")
    K = np.ascontiguousarray(K, dtype=np.float64)
    return _checked_stack_shape(K[None] if K.ndim == 2 else K)


def _checked_stack_shape(K: Any) -> Any:
    if K.ndim != 3:
        raise ValueError(f"precomputed kernels must have shape (m, n, n) or (n, n), got {K.shape}")
    m, n, n2 = K.shape
    if n != n2:
        raise ValueError(f"precomputed kernels must be square, got {n} x {n2}")
    if m == 0 or n == 0:
        raise ValueError(f"precomputed kernels are empty: shape {K.shape}")
    return K


def _psd_work(n: int, sample: np.ndarray | None) -> np.ndarray:
    """The buffer in which the PSD test factorises one kernel (reused for the next one,
    which spares the page faults of a fresh 8 n^2 bytes per kernel)."""
    return np.empty((n, n) if sample is None else (sample.size,) * 2)


def _psd_part(K: np.ndarray, sample: np.ndarray | None) -> np.ndarray:
    """The part of one kernel the PSD test factorises."""
    return K if sample is None else K[np.ix_(sample, sample)]


def _psd_sample(n: int) -> np.ndarray | None:
    """The rows of the principal submatrix the PSD test uses (None: all of them)."""
    if n <= PSD_FULL_CHECK_MAX_N:
        return None
    warnings.warn(f"precomputed kernels of {n} rows are checked for positive "
                  f"semi-definiteness on a random principal submatrix of "
                  f"{PSD_FULL_CHECK_MAX_N} rows only", UserWarning, stacklevel=4)
    return np.sort(np.random.default_rng(0).choice(n, PSD_FULL_CHECK_MAX_N, replace=False))


def _largest_entry(K: np.ndarray, p: int) -> float:
    """``max |K_ij|``, or a ValueError for NaN or infinity. The largest and the smallest
    entry carry both (NaN propagates through max and min), without an n x n temporary."""
    high, low = float(K.max()), float(K.min())
    if not (np.isfinite(high) and np.isfinite(low)):
        raise ValueError(f"precomputed kernel {p} contains NaN or infinity")
    return max(abs(high), abs(low), 1e-300)


def _check_symmetric(p: int, asym: float, scale: float, tol: float) -> None:
    if asym > tol * scale:
        raise ValueError(f"precomputed kernel {p} is not symmetric: max |K - K^T| = "
                         f"{asym:.3g} (relative {asym / scale:.3g})")


def _not_psd(p: int, shift: float, where: str) -> ValueError:
    return ValueError(
        f"precomputed kernel {p} is not positive semi-definite (an eigenvalue is below "
        f"-{shift:.2g}; {where}); kernel k-means needs PSD kernels: fix the kernel, or shift "
        "it (K + c I)")


def _check_diagonal(diagonal: np.ndarray, p: int, shift: float) -> None:
    """Before normalising: a diagonal entry below ``-shift`` fails the PSD test (the
    Cholesky factorisation fails at that row at the latest); one in ``[-shift, 0]`` cannot be
    normalised."""
    low = int(np.argmin(diagonal))
    if diagonal[low] < -shift:
        raise _not_psd(p, shift, f"diagonal entry {low} is {diagonal[low]:.3g}")
    raise ValueError(f"precomputed kernel {p}: diagonal entry {low} is "
                     f"{diagonal[low]:.3g}; normalisation needs a positive diagonal "
                     "(pass normalize=False to use the kernels as they are)")


def _flush_tiny(single: np.ndarray, shift: float) -> None:
    """Set the entries of the float32 ``single`` below ``2^-20 shift / n`` in magnitude to zero.

    A narrow Gaussian kernel holds entries far below float32's smallest normal number
    (1.2e-38): converted, they become subnormal, and arithmetic on subnormal numbers takes a
    slow path of the CPU (on COIL20, one such kernel took 1.2 s to factorise against 20 ms
    for the others). Zeroing them changes the matrix by less than ``n`` times the threshold
    in 2-norm, ``2^-20 shift``: far inside the shift, and below float32's own round-off of
    the entries; entries the factorisation then computes are products of numbers of at least
    the threshold, or zero, far from the subnormal range.
    """
    n = single.shape[0]
    threshold = np.float32(shift * 2.0**-20 / max(n, 1))
    if not threshold > 0:
        return
    # One row strip at a time: a small boolean temporary, not an n x n one.
    step = max(1, (1 << 16) // max(n, 1))
    for a in range(0, n, step):
        rows = single[a:a + step]
        rows[np.abs(rows) < threshold] = 0.0


def _check_psd(K: np.ndarray | PackedKernel, p: int, tol: float,
               work: np.ndarray | None = None) -> None:
    """Raise unless a Cholesky factorisation of ``K + tol n max(diag) I`` exists, which it
    does iff no eigenvalue of K is below ``-tol n max(diag)`` (to round-off): the cheapest
    complete test.

    From ``tol >= PSD_TOL`` it factorises a float32 copy first (twice as fast; its round-off
    is well inside the shift; entries far below the shift flushed to zero, which keeps the
    factorisation off subnormal numbers: :func:`_flush_tiny`) and repeats the test in float64
    only if that fails, so that a kernel is refused only by the float64 test. ``K``
    (symmetric; or a :class:`PackedKernel`, whose upper triangle alone is copied: the only
    part LAPACK reads) is not modified:
    LAPACK factorises a copy in ``work``, an n x n float64 buffer (default: a new one; see
    :func:`_psd_work`), with the GIL released.
    """
    if isinstance(K, PackedKernel):
        key = psd_digests.digest(K.packed, ("packed", K.layout.n, K.layout.strip), K.sample,
                                 tol)
    else:
        key = psd_digests.digest(K, ("full", *K.shape), None, tol)
    if psd_digests.has_passed(key):
        return
    if isinstance(K, PackedKernel):
        n, diagonal, copy_into = K.n, K.diagonal(), K.fill_upper
    else:
        n, diagonal = K.shape[0], np.diagonal(K)

        def copy_into(out: np.ndarray) -> None:
            np.copyto(out, K, casting="same_kind")
    work = np.empty((n, n)) if work is None else work
    shift = tol * n * max(float(np.max(np.abs(diagonal))), 1e-300)
    if tol >= PSD_TOL:
        single = work.reshape(-1).view(np.float32)[:n * n].reshape(n, n)
        copy_into(single)
        _flush_tiny(single, shift)
        single[np.diag_indices(n)] += np.float32(shift)
        if cholesky_info(single) == 0:
            psd_digests.remember_passed(key)
            return
    copy_into(work)
    work[np.diag_indices(n)] += shift
    info = cholesky_info(work)
    if info > 0:
        raise _not_psd(p, shift, f"the Cholesky factorisation fails at row {info - 1}")
    psd_digests.remember_passed(key)
