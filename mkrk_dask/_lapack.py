"""LAPACK's Cholesky factorisation (``?potrf``) and BLAS's symmetric rank-k update (``?syrk``)
with the GIL released.

scipy's f2py wrappers of LAPACK and BLAS hold the GIL for the whole call, so factorisations
in two Python threads run one after the other, and a long ``?syrk`` in one task thread stalls
the numpy work of the other (in a Nystrom pass, the factor evaluation beside it took twice as
long). scipy also exports the same routines as raw function pointers (its public Cython API,
``scipy.linalg.cython_lapack`` and ``cython_blas``); called through :mod:`ctypes`, which
releases the GIL around a foreign call, they run side by side. Where the pointer cannot be
had, the f2py wrapper is used (same result, GIL held).
"""

from __future__ import annotations

import ctypes
import functools
from typing import Any

import numpy as np

__all__ = ["cholesky_info", "syrk_upper"]

_INT = ctypes.POINTER(ctypes.c_int)
_REAL = {"s": ctypes.c_float, "d": ctypes.c_double}


@functools.cache
def _raw_potrf(prefix: str) -> Any:
    """``void ?potrf(char *uplo, int *n, T *a, int *lda, int *info)``, or None."""
    address = _raw_address("cython_lapack", f"{prefix}potrf", b"void(char*,int*,")
    if address is None:
        return None
    # CFUNCTYPE (not PYFUNCTYPE): ctypes releases the GIL for the call.
    return ctypes.CFUNCTYPE(None, ctypes.c_char_p, _INT, ctypes.c_void_p, _INT, _INT)(address)


@functools.cache
def _raw_syrk(prefix: str) -> Any:
    """``void ?syrk(char *uplo, char *trans, int *n, int *k, T *alpha, T *a, int *lda,
    T *beta, T *c, int *ldc)``, or None."""
    address = _raw_address("cython_blas", f"{prefix}syrk", b"void(char*,char*,int*,int*,")
    if address is None:
        return None
    real = ctypes.POINTER(_REAL[prefix])
    return ctypes.CFUNCTYPE(None, ctypes.c_char_p, ctypes.c_char_p, _INT, _INT, real,
                            ctypes.c_void_p, _INT, real, ctypes.c_void_p, _INT)(address)


def _raw_address(module: str, name: str, prototype: bytes) -> int | None:
    """Address of scipy's exported routine ``name`` of ``scipy.linalg.<module>``, or None
    (no such export, or a signature that does not start with ``prototype``)."""
    try:
        import importlib

        capsule = importlib.import_module(f"scipy.linalg.{module}").__pyx_capi__[name]
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
    # The prototypes assume 32-bit integers (LP64 BLAS and LAPACK); a build whose signature
    # says otherwise gets the f2py wrapper, never a call with the wrong argument sizes.
    if not signature or not signature.replace(b" ", b"").startswith(prototype):
        return None
    return address or None


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


def syrk_upper(F: np.ndarray, out: np.ndarray, accumulate: bool = False) -> np.ndarray:
    """``F^T F`` into the upper triangle of ``out`` (added to it with ``accumulate``); the
    lower triangle is not written.

    ``F`` is a C-contiguous float32 or float64 array of shape ``(rows, R)``, ``out`` a
    writeable Fortran-ordered ``(R, R)`` array of the same dtype; returns ``out``.
    """
    R = F.shape[1] if F.ndim == 2 else -1
    if F.ndim != 2 or not F.flags.c_contiguous or F.dtype not in (np.float32, np.float64) \
            or out.shape != (R, R) or out.dtype != F.dtype or not out.flags.f_contiguous \
            or not out.flags.writeable:
        raise ValueError("syrk_upper needs a C-contiguous float32 or float64 F and a "
                         "writeable Fortran-ordered (R, R) out of its dtype, got "
                         f"{F.dtype} {F.shape} and {out.dtype} {out.shape}")
    prefix = "s" if F.dtype == np.float32 else "d"
    syrk = _raw_syrk(prefix)
    if syrk is None or F.shape[0] == 0 or R == 0:
        from scipy.linalg import blas

        if R and F.shape[0]:
            getattr(blas, f"{prefix}syrk")(1.0, F.T, beta=float(accumulate), c=out, trans=0,
                                           lower=0, overwrite_c=1)
        elif not accumulate:
            out[...] = 0.0
        return out
    # Row-major F (rows x R) is column-major F^T (R x rows, leading dimension R): C = A A^T.
    n, k = ctypes.c_int(R), ctypes.c_int(F.shape[0])
    alpha, beta = _REAL[prefix](1.0), _REAL[prefix](float(accumulate))
    syrk(b"U", b"N", ctypes.byref(n), ctypes.byref(k), ctypes.byref(alpha), F.ctypes.data,
         ctypes.byref(n), ctypes.byref(beta), out.ctypes.data, ctypes.byref(n))
    return out
