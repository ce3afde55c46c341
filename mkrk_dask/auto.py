"""``solver="auto"``: exact, blockwise or Nystrom from n, m and the machine's resources.

- exact: the m dense kernels (``8 m n^2`` bytes) fit in at most half of the available memory,
  and ``n <= 12,000`` (the dense top-k solver and the O(m n^2) passes stay fast);
- blockwise: the kernel store (``8 m n^2`` bytes, float64) fits in at most 80% of the free disk
  space of the temporary directory, and ``n <= 30,000`` (every iteration reads the store);
- Nystrom otherwise: memory and time linear in n.
"""

from __future__ import annotations

import shutil
import tempfile

__all__ = ["choose_solver", "EXACT_MAX_N", "BLOCKWISE_MAX_N"]

EXACT_MAX_N = 12_000
BLOCKWISE_MAX_N = 30_000
#: fraction of the available memory the exact kernels may take
MEMORY_FRACTION = 0.5
#: fraction of the free disk space the blockwise store may take
DISK_FRACTION = 0.8


def _gib(n_bytes: float) -> str:
    return f"{n_bytes / 2**30:.1f} GiB"


def choose_solver(n_samples: int, n_kernels: int, *, available_memory: int | None = None,
                  free_disk: int | None = None) -> tuple[str, str]:
    """Choose the backend for ``n_samples`` samples and ``n_kernels`` kernels.

    Parameters
    ----------
    n_samples, n_kernels : int
    available_memory : int, optional
        Bytes of memory available (default: ``psutil.virtual_memory().available``).
    free_disk : int, optional
        Free bytes where a temporary store would go (default: free space of
        ``tempfile.gettempdir()``).

    Returns
    -------
    choice : {"exact", "blockwise", "nystrom"}
    reason : str
        The figures the choice was made from.
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
    if kernel_bytes <= DISK_FRACTION * free_disk and n_samples <= BLOCKWISE_MAX_N:
        why = (f"n > {EXACT_MAX_N}" if n_samples > EXACT_MAX_N
               else f"more than {MEMORY_FRACTION:.0%} of memory")
        return "blockwise", (f"{facts}; exact ruled out ({why}); the kernel store fits in "
                             f"{DISK_FRACTION:.0%} of the free disk and n <= {BLOCKWISE_MAX_N}")
    why = (f"n > {BLOCKWISE_MAX_N}" if n_samples > BLOCKWISE_MAX_N
           else f"the kernel store exceeds {DISK_FRACTION:.0%} of the free disk")
    return "nystrom", f"{facts}; exact and blockwise ruled out ({why})"
