"""Digests of the precomputed kernels that passed the PSD test, so that a later fit on the
same kernels (a grid of lambdas, a repeated fit) skips their factorisations.

A digest is the SHA-256 of exactly what the test reads (the kernel's float64 entries, its
layout, the sampled rows) and its tolerance. Hashing a packed COIL20 kernel (n = 1,440)
takes 6 ms against 20 ms for its float32 factorisation (issue 77); :mod:`hashlib` releases the
GIL while it hashes. A refusal is never kept.
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from typing import Any

import numpy as np

__all__ = ["PSD_CACHE_SIZE", "digest", "has_passed", "remember_passed"]

#: how many digests :data:`_PASSED` keeps
PSD_CACHE_SIZE = 256
#: digests of the kernels that passed, most recent last
_PASSED: OrderedDict[bytes, None] = OrderedDict()
_LOCK = threading.Lock()


def digest(data: Any, layout: tuple, sample: np.ndarray | None, tol: float) -> bytes | None:
    """The digest of the entries ``data`` tested in ``layout`` on the rows ``sample`` at
    ``tol``; None where ``data`` is not one contiguous float64 block (no copy is made to hash
    it: it is tested)."""
    if not (isinstance(data, np.ndarray) and data.dtype == np.float64
            and data.flags.c_contiguous):
        return None
    hashed = hashlib.sha256(repr((layout, float(tol))).encode())
    if sample is not None:
        hashed.update(np.ascontiguousarray(sample, dtype=np.int64).tobytes())
    hashed.update(memoryview(data).cast("B"))
    return hashed.digest()


def has_passed(key: bytes | None) -> bool:
    """Whether the kernel of digest ``key`` passed the test before."""
    if key is None:
        return False
    with _LOCK:
        if key in _PASSED:
            _PASSED.move_to_end(key)
            return True
    return False


def remember_passed(key: bytes | None) -> None:
    """Keep ``key`` as passed (the oldest beyond :data:`PSD_CACHE_SIZE` forgotten)."""
    if key is None:
        return
    with _LOCK:
        _PASSED[key] = None
        _PASSED.move_to_end(key)
        while len(_PASSED) > PSD_CACHE_SIZE:
            _PASSED.popitem(last=False)
