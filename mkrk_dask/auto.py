"""``solver="auto"`` (the default): exact or Nystrom, from n, m and the machine's resources.

- exact: the m dense kernels (``8 m n^2`` bytes) fit in at most half of the available memory,
  and ``n <= exact_max_n`` (at most 12,000: the dense eigensolver and the O(m n^2) passes stay
  fast; for kernels as smooth as the default's the estimators pass the Nystrom backend's
  exact-C limit where it is lower, see :func:`smooth_exact_max_n`);
- Nystrom otherwise: it needs memory for one ``R x R`` Gram matrix (R = landmarks per kernel
  x m, at most ``max_components``) and, where its factors are stored (``8 n R`` bytes in
  float64; by default only up to the exact-C limit,
  :meth:`~mkrk_dask.backends.NystromOptions.exact_dissimilarity_limit`, where the sparse local
  part reads them), a fraction of the free disk space. With the estimators' ``dtype="auto"``,
  factors are float32 above that limit and where only float32 ones fit the disk (half the
  bytes; the arithmetic stays float64).

The blockwise backend (exact kernels on disk, every iteration reads all ``m n^2`` of them) is
never chosen automatically for features: where it fits and exact does not, Nystrom gives nearly
the same answer much faster. Ask for it with ``solver="blockwise"``.

Precomputed kernels have no features for Nystrom (:func:`choose_precomputed_solver`): exact
where their prepared copy fits in memory (at any n: they are in memory already), blockwise
where they fit on disk instead.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from .exceptions import ProblemTooLargeError

__all__ = ["choose_solver", "choose_precomputed_solver", "smooth_exact_max_n", "EXACT_MAX_N",
           "free_disk_at", "store_bytes", "check_store_fits"]

EXACT_MAX_N = 12_000
#: fraction of the available memory the exact kernels may take
MEMORY_FRACTION = 0.5
#: fraction of the free disk space the Nystrom factors may take
DISK_FRACTION = 0.8


def _gib(n_bytes: float) -> str:
    return f"{n_bytes / 2**30:.1f} GiB"


def _resources(n_samples: int, n_kernels: int, available_memory: int | None,
               free_disk: int | None) -> tuple[int, int, float]:
    """``(available memory, free disk, 8 m n^2)``, measured where not given; checks n and m."""
    if n_samples < 1 or n_kernels < 1:
        raise ValueError(f"n_samples and n_kernels must be >= 1, got {n_samples}, {n_kernels}")
    if available_memory is None:
        import psutil

        available_memory = int(psutil.virtual_memory().available)
    if free_disk is None:
        free_disk = int(shutil.disk_usage(tempfile.gettempdir()).free)
    return available_memory, free_disk, 8.0 * n_kernels * float(n_samples) ** 2


def free_disk_at(store: Any) -> int | None:
    """Free bytes where a store at ``store`` would be written: the file system of its nearest
    existing folder for a local path, the temporary folder's where none is given, None for
    an object store (no free space to read)."""
    from .store.locations import StoreLocation, nearest_existing

    if store is None:
        return int(shutil.disk_usage(tempfile.gettempdir()).free)
    if not isinstance(store, str | os.PathLike | StoreLocation):
        return None
    location = StoreLocation.parse(store)  # its one reading of paths and URLs
    if not location.is_local:
        return None
    base = nearest_existing(Path(location.url))
    return int(shutil.disk_usage(base if base.is_dir() else base.parent).free)


def store_bytes(solver: str, n_samples: int, n_kernels: int, itemsize: int,
                factor_rank: int | None = None) -> float:
    """Bytes a backend's store takes: the ``(m, n, n)`` kernels (blockwise), the ``n x R``
    factors (Nystrom, where stored: ``factor_rank`` R), nothing for exact."""
    if solver == "blockwise":
        return float(itemsize) * n_kernels * float(n_samples) ** 2
    if solver == "nystrom" and factor_rank:
        return float(itemsize) * n_samples * factor_rank
    return 0.0


def check_store_fits(solver: str, needed: float, free: int | None, store: Any,
                     limit: int | None = None) -> str:
    """The store's size in words, or :class:`~mkrk_dask.exceptions.ProblemTooLargeError` (a
    user error: nothing is written) where it would take more than :data:`DISK_FRACTION` of
    the free disk, or more than ``limit`` bytes (``max_store_bytes``: the only check of an
    object store)."""
    where = "a temporary store" if store is None else "the store"
    text = f"{where} takes {_gib(needed)} ({needed:,.0f} bytes)"
    if limit is not None and needed > limit:
        raise ProblemTooLargeError(
            f"{text}, more than max_store_bytes={limit:,}; nothing was written: "
            f"{_smaller_store_hint(solver)}, or a larger max_store_bytes")
    if free is None:
        return text + " (an object store: its free space is not known)"
    if needed > DISK_FRACTION * free:
        raise ProblemTooLargeError(
            f"{text}, more than {DISK_FRACTION:.0%} of the {_gib(free)} free where it would "
            f"go; nothing was written: {_smaller_store_hint(solver)}, or a store on a larger "
            "disk or object store")
    return f"{text} of {_gib(free)} free"


def _smaller_store_hint(solver: str) -> str:
    return ("solver='nystrom' (--solver nystrom) stores n x R factors instead of the m n^2 "
            "kernels" if solver == "blockwise" else
            "fewer landmarks (n_landmarks), float32 factors or a larger disk")


def smooth_exact_max_n(exact_dissimilarity_limit: int) -> int:
    """The largest n ``solver="auto"`` fits exactly for kernels as smooth as the default's,
    given the Nystrom backend's exact-C limit for the same kernels: up to that limit Nystrom
    makes a pass over all pairs of rows anyway (the exact C and the local part, O(n^2 m) like
    the dense kernels), so exact costs no more there and is exact; above it Nystrom's cost
    grows like n. Never below
    :data:`~mkrk_dask.backends.options.AUTO_EXACT_DISSIMILARITY_MIN_N` (where Nystrom's fixed
    costs, the local cluster among them, dominate) nor above :data:`EXACT_MAX_N`."""
    from .backends.options import AUTO_EXACT_DISSIMILARITY_MIN_N

    return min(EXACT_MAX_N, max(AUTO_EXACT_DISSIMILARITY_MIN_N, int(exact_dissimilarity_limit)))


def choose_solver(n_samples: int, n_kernels: int, *, n_landmarks: int = 500,
                  available_memory: int | None = None, free_disk: int | None = None,
                  itemsize: int = 8, max_components: int | None = None,
                  store_factors: bool = True, exact_max_n: int | None = None
                  ) -> tuple[str, str]:
    """Choose the backend for ``n_samples`` samples and ``n_kernels`` kernels.

    Parameters
    ----------
    n_samples, n_kernels : int
    n_landmarks : int
        Nystrom landmarks per kernel.
    available_memory : int, optional
        Bytes of memory available (default: ``psutil.virtual_memory().available``).
    free_disk : int, optional
        Free bytes where a temporary store would go (default: free space of
        ``tempfile.gettempdir()``).
    itemsize : {8, 4}
        Bytes per stored Nystrom factor entry (float64 or float32 storage).
    max_components : int, optional
        Limit on the Nystrom factors' total rank R (``NystromOptions.max_components``).
    store_factors : bool
        Whether the Nystrom factors go to disk (False: computed again by the final pass).
    exact_max_n : int, optional
        The largest n fitted exactly (where the kernels fit in memory); default
        :data:`EXACT_MAX_N`.

    Returns
    -------
    choice : {"exact", "nystrom"}
    reason : str
        The figures the choice was made from.

    Raises
    ------
    ProblemTooLargeError
        A MemoryError: nothing fits; the message says what would.
    """
    available_memory, free_disk, kernel_bytes = _resources(n_samples, n_kernels,
                                                           available_memory, free_disk)
    facts = (f"n={n_samples}, m={n_kernels}: the dense kernels need {_gib(kernel_bytes)} "
             f"(8 m n^2 bytes); {_gib(available_memory)} memory available, "
             f"{_gib(free_disk)} free disk")
    exact_max_n = EXACT_MAX_N if exact_max_n is None else int(exact_max_n)
    if kernel_bytes <= MEMORY_FRACTION * available_memory and n_samples <= exact_max_n:
        return "exact", (f"{facts}; they fit in {MEMORY_FRACTION:.0%} of memory and "
                         f"n <= {exact_max_n:,}")
    R = n_landmarks * n_kernels
    if max_components is not None:
        R = min(R, max_components)
    factor_bytes = float(itemsize) * n_samples * R if store_factors else 0.0
    gram_bytes = 8.0 * 3 * R * R  # the Gram matrix, its eigenvectors and a work copy
    why = (f"n > {exact_max_n:,}" if n_samples > exact_max_n
           else f"more than {MEMORY_FRACTION:.0%} of memory")
    if factor_bytes <= DISK_FRACTION * free_disk and gram_bytes <= available_memory:
        where = (f"{_gib(factor_bytes)} on disk ({itemsize} n R bytes, R = {R})"
                 if store_factors else
                 f"no disk (R = {R}; not stored: the final pass computes them again)")
        return "nystrom", (f"{facts}; exact ruled out ({why}); the Nystrom factors need "
                           f"{where}")
    fit_landmarks = int(min(DISK_FRACTION * free_disk / (itemsize * n_samples * n_kernels)
                            if store_factors else np.inf,
                            (available_memory / (24.0 * n_kernels**2)) ** 0.5))
    raise ProblemTooLargeError(
        f"{facts}: the problem fits no backend: exact needs {_gib(kernel_bytes)} of memory, "
        f"Nystrom with {n_landmarks} landmarks per kernel {_gib(factor_bytes)} of disk "
        f"({'float64' if itemsize == 8 else 'float32'} factors) and "
        f"{_gib(gram_bytes)} of memory; n_landmarks <= {max(fit_landmarks, 0)} would fit, or a "
        "store on a larger disk or object store (store=...)")


def choose_precomputed_solver(n_samples: int, n_kernels: int, *, copy: bool = True,
                              available_memory: int | None = None,
                              free_disk: int | None = None) -> tuple[str, str]:
    """Choose the backend for precomputed kernels ``(n_kernels, n_samples, n_samples)``.

    Nystrom needs features, so the choice is between the exact backend, where the kernels'
    prepared copy fits in :data:`MEMORY_FRACTION` of the available memory (with ``copy=False``
    they are prepared in the caller's array: no more memory), and the blockwise backend, where
    a float64 store of them fits in :data:`DISK_FRACTION` of the free disk.
    :data:`EXACT_MAX_N` does not apply: the kernels are in memory already, and the blockwise
    backend would only read them back from disk.

    Returns ``(choice, reason)`` as :func:`choose_solver`; raises
    :class:`~mkrk_dask.exceptions.ProblemTooLargeError` when neither fits.
    """
    available_memory, free_disk, kernel_bytes = _resources(n_samples, n_kernels,
                                                           available_memory, free_disk)
    copy_bytes = kernel_bytes if copy else 0.0
    facts = (f"precomputed kernels, n={n_samples}, m={n_kernels}: "
             f"{_gib(kernel_bytes)} (8 m n^2 bytes); {_gib(available_memory)} memory "
             f"available, {_gib(free_disk)} free disk")
    if copy_bytes <= MEMORY_FRACTION * available_memory:
        where = ("their prepared copy fits in" if copy else
                 "they are prepared in place (copy=False), within")
        return "exact", f"{facts}; {where} {MEMORY_FRACTION:.0%} of memory"
    if kernel_bytes <= DISK_FRACTION * free_disk:
        return "blockwise", (f"{facts}; their prepared copy does not fit in "
                             f"{MEMORY_FRACTION:.0%} of memory; a blockwise store of them "
                             "fits on disk")
    raise ProblemTooLargeError(
        f"{facts}: the problem fits no backend: exact needs {_gib(copy_bytes)} more memory "
        f"for the prepared copy, blockwise {_gib(kernel_bytes)} of disk; "
        "backend_options={'copy': False} prepares them in place, or give a store on a larger "
        "disk or object store (store=...)")
