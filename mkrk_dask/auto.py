"""``solver="auto"`` (the default): exact or Nystrom, from n, m and the machine's resources.

- exact: the m dense kernels (``8 m n^2`` bytes) fit in at most half of the available memory,
  and ``n <= 12,000`` (the dense eigensolver and the O(m n^2) passes stay fast);
- Nystrom otherwise: it needs memory for one ``R x R`` Gram matrix (R = landmarks per kernel
  x m, at most ``max_components``) and, where its factors are stored (``8 n R`` bytes in
  float64; by default only up to n = 20,000, where the sparse local part reads them), a
  fraction of the free disk space. With the estimators' ``dtype="auto"``, factors are float32
  above n = 20,000 and where only float32 ones fit the disk (half the bytes; the arithmetic
  stays float64).

The blockwise backend (exact kernels on disk, every iteration reads all ``m n^2`` of them) is
never chosen automatically: where it fits and exact does not, Nystrom gives nearly the same
answer much faster. Ask for it with ``solver="blockwise"``.
"""

from __future__ import annotations

import shutil
import tempfile

import numpy as np

from .exceptions import ProblemTooLargeError

__all__ = ["choose_solver", "EXACT_MAX_N"]

EXACT_MAX_N = 12_000
#: fraction of the available memory the exact kernels may take
MEMORY_FRACTION = 0.5
#: fraction of the free disk space the Nystrom factors may take
DISK_FRACTION = 0.8


def _gib(n_bytes: float) -> str:
    return f"{n_bytes / 2**30:.1f} GiB"


def choose_solver(n_samples: int, n_kernels: int, *, n_landmarks: int = 500,
                  available_memory: int | None = None, free_disk: int | None = None,
                  itemsize: int = 8, max_components: int | None = None,
                  store_factors: bool = True) -> tuple[str, str]:
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
    if n_samples < 1 or n_kernels < 1:
        raise ValueError(f"n_samples and n_kernels must be >= 1, got {n_samples}, {n_kernels}")
    if available_memory is None:
        import psutil

        available_memory = int(psutil.virtual_memory().available)
    if free_disk is None:
        free_disk = int(shutil.disk_usage(tempfile.gettempdir()).free)
    kernel_bytes = 8.0 * n_kernels * float(n_samples) ** 2
    facts = (f"n={n_samples}, m={n_kernels}: the dense kernels need {_gib(kernel_bytes)} "
             f"(8 m n^2 bytes); {_gib(available_memory)} memory available, "
             f"{_gib(free_disk)} free disk")
    if kernel_bytes <= MEMORY_FRACTION * available_memory and n_samples <= EXACT_MAX_N:
        return "exact", (f"{facts}; they fit in {MEMORY_FRACTION:.0%} of memory and "
                         f"n <= {EXACT_MAX_N}")
    R = n_landmarks * n_kernels
    if max_components is not None:
        R = min(R, max_components)
    factor_bytes = float(itemsize) * n_samples * R if store_factors else 0.0
    gram_bytes = 8.0 * 3 * R * R  # the Gram matrix, its eigenvectors and a work copy
    why = (f"n > {EXACT_MAX_N}" if n_samples > EXACT_MAX_N
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
