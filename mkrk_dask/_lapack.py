"""LAPACK's Cholesky factorisation (``?potrf``) with the GIL released.

scipy's f2py wrappers of LAPACK hold the GIL for the whole factorisation, so factorisations
in two Python threads run one after the other. scipy also exports the same LAPACK routines as
raw function pointers (its public Cython LAPACK API, ``scipy.linalg.cython_lapack``); called
through :mod:`ctypes`, which releases the GIL around a foreign call, they run side by side.
Where the pointer cannot be had, the f2py wrapper is used (same result, GIL held).
"""

from __future__ import annotations

import ctypes
import functools
from typing import Any

import numpy as np

__all__ = ["cholesky_info"]

_INT = ctypes.POINTER(ctypes.c_int)


@functools.cache
def _raw_potrf(prefix: str) -> Any:
    """``void ?potrf(char *uplo, int *n, T *a, int *lda, int *info)``, or None."""
    try:
        from scipy.linalg import cython_lapack

        capsule = cython_lapack.__pyx_capi__[f"{prefix}potrf"]
        # Own prototypes, not ctypes.pythonapi's shared function objects (whose argtypes
        # other code may set differently).
        get_name = ctypes.PYFUNCTYPE(ctypes.c_char_p, ctypes.py_object)(
            ("PyCapsule_GetName", ctypes.pythonapi))
        get_pointer = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.py_object, ctypes.c_char_p)(
            ("PyCapsule_GetPointer", ctypes.pythonapi))
        signature = get_name(capsule)
        address = get_pointer(capsule, signature)
    except (ImportError, AttributeError, KeyError, TypeError, ValueError, OSError):
        return None
    # The prototype below assumes 32-bit integers (LP64 LAPACK); a build whose signature
    # says otherwise gets the f2py wrapper, never a call with the wrong argument sizes.
    if not signature or not signature.replace(b" ", b"").startswith(b"void(char*,int*,"):
        return None
    if not address:
        return None
    # CFUNCTYPE (not PYFUNCTYPE): ctypes releases the GIL for the call.
    return ctypes.CFUNCTYPE(None, ctypes.c_char_p, _INT, ctypes.c_void_p, _INT, _INT)(address)


def cholesky_info(a: np.ndarray) -> int:
    """Factorise the symmetric matrix ``a`` in place; LAPACK's ``info``: 0 on success,
    ``i > 0`` when the leading minor of order ``i`` is not positive definite.

    ``a`` is a square C-contiguous float32 or float64 array; its upper triangle is read
    (LAPACK's lower triangle of the same memory in Fortran order) and overwritten by the
    factor, the rest is left as it was.
    """
    if a.ndim != 2 or a.shape[0] != a.shape[1] or not a.flags.c_contiguous \
            or not a.flags.writeable or a.dtype not in (np.float32, np.float64):
        raise ValueError("cholesky_info needs a writeable square C-contiguous float32 or "
                         f"float64 array, got {a.dtype} {a.shape}")
    prefix = "s" if a.dtype == np.float32 else "d"
    potrf = _raw_potrf(prefix)
    if potrf is None:
        from scipy.linalg import lapack

        return int(getattr(lapack, f"{prefix}potrf")(a.T, lower=1, overwrite_a=1, clean=0)[1])
    n, info = ctypes.c_int(a.shape[0]), ctypes.c_int(0)
    potrf(b"L", ctypes.byref(n), a.ctypes.data, ctypes.byref(n), ctypes.byref(info))
    return info.value
