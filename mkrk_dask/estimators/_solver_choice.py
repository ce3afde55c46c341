"""``solver="auto"`` and ``dtype="auto"`` for an estimator: which backend a fit uses, and
in what precision its store keeps the data. The figures the choice is made from are in
:mod:`mkrk_dask.auto`; this module reads the estimator's settings and records the choice
(``solver_reason_``, the log, ``_dtype_used``)."""

from __future__ import annotations

from functools import partial
from typing import Any

import numpy as np

from .. import progress
from ..exceptions import ProblemTooLargeError
from ..kernel_evaluation import WIDTHED_FAMILIES
from ._dictionary import WIDTHS

__all__ = ["choose_for", "smooth_kernels"]


def smooth_kernels(specs: Any) -> bool:
    """Whether no kernel is narrower than the default dictionary's: every Gaussian at least
    half the median distance wide (``m``). The Nystrom factors represent those well (the
    default fit gave the same NMI as exact, ``benchmarks/results/defaults/default_sizes.md``);
    a width given by ``c`` or ``sigma`` has no known relation to the median."""
    return specs is not None and all(
        spec.family not in WIDTHED_FAMILIES or (spec.m is not None and spec.m >= min(WIDTHS))
        for spec in specs)


def choose_for(estimator: Any, n_samples: int, n_kernels: int, *,
               precomputed: bool = False, lazy: bool = False, specs: Any = None) -> str:
    """The solver, and what ``dtype="auto"`` stores: float32 Nystrom factors where the
    backend is plain Nystrom (n above ``exact_dissimilarity_max_n`` as resolved for the
    kernels: no local part, whose residuals are differences of nearly equal numbers) or
    where only float32 ones fit
    the disk; float64 otherwise. Measured: float32 factors match float64 ones against
    exact (``benchmarks/results/nystrom/nystrom_paper_float32.md``) and halve the store
    and the bytes every pass moves. Precomputed kernels: :func:`_for_precomputed` (``lazy``:
    in dask or Zarr arrays). Exact up to :data:`~mkrk_dask.auto.EXACT_MAX_N` rows, or for
    :func:`smooth_kernels` ``specs`` only up to :func:`~mkrk_dask.auto.smooth_exact_max_n` of the
    Nystrom backend's exact-C limit."""
    if precomputed:
        return _for_precomputed(estimator, n_samples, n_kernels, lazy)
    nystrom = plain = None
    if estimator._auto_dtype() and estimator.solver in ("auto", "nystrom"):
        nystrom = estimator._backend_options("nystrom", strict=False)
        plain = not nystrom.exact_dissimilarity(n_samples, n_kernels)
    estimator._dtype_used = "float32" if plain else "float64"
    if estimator.solver != "auto":
        return estimator.solver
    from ..auto import choose_solver, smooth_exact_max_n

    if nystrom is None:
        nystrom = estimator._backend_options("nystrom", strict=False)
    counts = np.atleast_1d(np.asarray(estimator.n_landmarks))
    limit = nystrom.exact_dissimilarity_limit(n_kernels)
    choose = partial(choose_solver, n_samples, n_kernels, n_landmarks=int(counts.max()),
                     exact_max_n=smooth_exact_max_n(limit) if smooth_kernels(specs) else None,
                     max_components=nystrom.resolved_max_components(n_samples, n_kernels),
                     # "auto" stores them only where they fit (never needs the disk)
                     store_factors=bool(nystrom.factors_storage(n_samples, n_kernels)))
    try:
        choice, reason = choose(itemsize=np.dtype(estimator._storage_dtype()).itemsize)
    except ProblemTooLargeError:
        if not estimator._auto_dtype() or estimator._dtype_used == "float32":
            raise
        choice, reason = choose(itemsize=4)
        estimator._dtype_used = "float32"
        reason += "; dtype='auto': float32 factors (float64 ones would not fit the disk)"
    else:
        if choice != "nystrom":
            estimator._dtype_used = "float64"
        elif plain:
            reason += (f"; dtype='auto': float32 factors (plain Nystrom: n > {limit:,}, the "
                       f"exact C's limit for {n_kernels} kernels)")
    return _record(estimator, choice, reason)


def _for_precomputed(estimator: Any, n_samples: int, n_kernels: int, lazy: bool) -> str:
    """Precomputed kernels: no Nystrom (it needs features), float64 storage
    (:func:`mkrk_dask.auto.choose_precomputed_solver`); dask or Zarr kernels need the memory
    of a copy for the exact backend, which reads them whole, whatever ``copy``."""
    estimator._dtype_used = "float64"
    if estimator.solver != "auto":
        return estimator.solver
    from ..auto import choose_precomputed_solver

    copy = estimator._backend_options("exact", strict=False).copy or lazy
    return _record(estimator, *choose_precomputed_solver(n_samples, n_kernels, copy=copy))


def _record(estimator: Any, choice: str, reason: str) -> str:
    progress.reporter().log(f"[{type(estimator).__name__}] solver='auto' chose {choice!r}: "
                            f"{reason}")
    estimator.solver_reason_ = reason
    return choice
