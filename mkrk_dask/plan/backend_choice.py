"""The backend of a fit and its options: the solver (``solver="auto"``: from n, m and the
machine's memory and disk, :mod:`mkrk_dask.auto`), the storage precision
(:func:`requested_dtype`), the backend options from the estimator's ``backend_options``
(:func:`backend_settings`) with every ``"auto"`` among them resolved (:func:`resolve_options`,
:func:`resolve_eigen_method`, :func:`store_factors_decision`, :func:`gram_rows_decision`), and
the refusals made before anything is written: a store that would not fit the free disk, a chunk
size that cuts the rows into too many blocks."""

from __future__ import annotations

from dataclasses import fields, replace
from typing import Any

import numpy as np

from ..choices import BACKENDS
from .fit_plan import Decision, is_auto
from .kernel_choice import smooth_kernels


def requested_dtype(params: dict) -> str:
    """The storage precision ``backend_options`` asks for (``"auto"`` by default), checked
    (:func:`~mkrk_dask.backends.options.dtype_name`)."""
    from ..backends.options import DTYPE_CHOICES, dtype_name

    return dtype_name((params.get("backend_options") or {}).get("dtype", "auto"),
                      DTYPE_CHOICES)


def backend_settings(solver: str, params: dict, dtype: str | None = None,
                     strict: bool = True) -> dict:
    """The options of ``solver`` from the estimator's ``backend_options``, the storage
    precision set to ``dtype`` (the plan's; by default the one requested, ``"auto"`` checked
    as float64). With ``strict=False`` (``solver="auto"``) options of another backend are
    left out, and only an option no backend has is refused."""
    from ..backends import option_names

    names = set(option_names(solver))
    settings = dict(params.get("backend_options") or {})
    requested = requested_dtype(params)
    settings.pop("dtype", None)  # the plan's, for every solver (the exact one stores none)
    if not strict:
        known = set().union(*(option_names(s) for s in BACKENDS))
        unknown = sorted(set(settings) - known)
        if unknown:
            raise ValueError(f"unknown backend option(s) {', '.join(map(repr, unknown))}; "
                             f"no backend has them")
        settings = {k: v for k, v in settings.items() if k in names}
    if "dtype" in names:
        settings["dtype"] = dtype or ("float64" if is_auto(requested) else requested)
    return settings


def resolve_options(solver: str, params: dict, n: int, m: int, dtype: str,
                    strict: bool) -> dict:
    """The backend options of ``solver`` (:func:`backend_settings`), every ``"auto"`` among
    them resolved for ``n`` rows and ``m`` kernels."""
    from ..backends import make_options

    options = make_options(solver, **backend_settings(solver, params, dtype, strict))
    _refuse_tiny_chunks(getattr(options, "chunk_size", None), n)
    if solver == "nystrom":
        options = replace(
            options, max_components=options.resolved_max_components(n, m),
            landmark_oversampling=options.resolved_landmark_oversampling(n, m),
            exact_dissimilarity_max_n=options.exact_dissimilarity_limit(m),
            gram_rows=options.resolved_gram_rows(n),
            final_rows=options.resolved_final_rows(n))
    return {f.name: getattr(options, f.name) for f in fields(options)}


def resolve_eigen_method(options: dict, n: int, ranks: Any) -> dict:
    """The exact backend's options with ``eigen_method`` resolved for the eigenpairs the fit
    asks of its ``n x n`` kernels (``ranks``: the loop's k, the final step's rank) by the one
    rule, :func:`mkrk_dask.eigen.eigen_method_for` (the plan records it in its options).
    Where the ranks take different solvers (many clusters: ``k < n / 3 <= rank``) it stays
    ``"auto"``, which the backend resolves by that rule at each call."""
    from ..eigen import eigen_method_for

    chosen = {eigen_method_for(options["eigen_method"], n, r) for r in set(ranks)}
    return {**options, "eigen_method": chosen.pop()} if len(chosen) == 1 else options


def store_factors_decision(options: dict, params: dict, n: int, m: int, specs: Any,
                           widths: list[int]) -> Decision:
    """Whether the Nystrom build stores its factors (``store_factors``), by the rule the build
    applies (:func:`mkrk_dask.backends.nystrom.build.factors_storage`): decided here where the
    factors' rank R does not change it (given, the sparse local part, a store off local disk,
    a budget no R can meet), else the rank range in which they are stored (R is known once
    the landmarks are chosen)."""
    from ..backends import make_options
    from ..backends.nystrom.build import factors_storage, landmark_counts, landmark_flops

    nystrom = make_options("nystrom", **options)
    counts = landmark_counts(nystrom.n_landmarks, m, n)
    flops = landmark_flops(counts, [s.view for s in specs], widths)
    stored, reason = factors_storage(nystrom, n, m, store=params.get("store"),
                                     storage_options=params.get("storage_options"),
                                     distance_flops=flops, rank=None,
                                     max_rank=min(sum(counts), nystrom.max_components or
                                                  sum(counts)))
    value = "by their rank R" if stored is None else "stored" if stored else "not stored"
    if reason.startswith(value + ": "):
        reason = reason[len(value) + 2:]
    return Decision("store_factors", value, reason, auto=is_auto(nystrom.store_factors))


def gram_rows_decision(options: dict, params: dict, n: int) -> Decision:
    """The rows the Nystrom factors' Gram matrix is summed over (``gram_rows``, resolved in
    ``options``: None for every row)."""
    from ..backends.options import AUTO_GRAM_ROWS

    rows = options.get("gram_rows")
    given = dict(params.get("backend_options") or {}).get("gram_rows", "auto")
    if rows is None:
        reason = (f"n = {n:,} <= {AUTO_GRAM_ROWS:,}" if is_auto(given) else
                  "gram_rows=None" if given is None else f"gram_rows={given} >= n")
        return Decision("gram rows", "every row", reason, auto=is_auto(given))
    reason = (f"n = {n:,} > {AUTO_GRAM_ROWS:,}: " if is_auto(given) else "given: ") + (
        f"a uniform sample estimates the R x R Gram matrix of the factors (scaled by "
        f"n / {rows:,}); the exact traces, the embedding and the inertia read every row")
    return Decision("gram rows", f"a uniform sample of {rows:,}", reason, auto=is_auto(given))


def final_rows_decision(options: dict, params: dict, n: int, k: int) -> Decision:
    """The rows the final partition of ``k`` clusters is fitted on (``final_rows``, resolved
    in ``options``: None for every row); refused below ``k`` rows."""
    from ..backends.options import AUTO_GRAM_ROWS

    rows = options.get("final_rows")
    given = dict(params.get("backend_options") or {}).get("final_rows", "auto")
    if rows is not None and rows < k:
        raise ValueError(f"final_rows={rows} is below n_clusters={k}: the final partition is "
                         f"fitted on a sample of at least one row a cluster")
    if rows is None:
        reason = (f"n = {n:,} <= {AUTO_GRAM_ROWS:,}" if is_auto(given) else
                  "final_rows=None" if given is None else f"final_rows={given} >= n")
        return Decision("final rows", "every row", reason + ": the k-means of every row, then a "
                        "pass for the clusters' sums (inertia_)", auto=is_auto(given))
    reason = (f"n = {n:,} > {AUTO_GRAM_ROWS:,}: " if is_auto(given) else "given: ") + (
        f"the final partition is fitted on the embedding of a uniform sample of {rows:,} rows"
        + "; one pass then makes every row's embedding and labels it by that partition (the "
        "sampled rows keep theirs); inertia_ takes each cluster's sum from its sampled rows")
    return Decision("final rows", f"a uniform sample of {rows:,}", reason, auto=is_auto(given))


def _refuse_tiny_chunks(chunk_size: int | None, n: int) -> None:
    """A chunk size that cuts the rows into more than :data:`MAX_ROW_BLOCKS` blocks starts
    work that never ends: refused before it starts, with the least one that is taken."""
    from ..validation import MAX_ROW_BLOCKS

    if chunk_size is not None and -(-n // chunk_size) > MAX_ROW_BLOCKS:
        least = -(-n // MAX_ROW_BLOCKS)
        raise ValueError(f"chunk_size={chunk_size} cuts the {n:,} rows into "
                         f"{-(-n // chunk_size):,} blocks (at most {MAX_ROW_BLOCKS:,}); give "
                         f"at least {least:,} rows a block, or leave it unset to have it chosen")


def solver_and_dtype(params: dict, n: int, m: int, specs: Any, precomputed: bool,
            lazy: bool) -> tuple[str, str, str, str]:
    """``(solver, its reason, dtype, its reason)``; the reason ends with the store's size,
    refused where it would not fit the free disk where it goes (before anything is
    written)."""
    from ..auto import check_store_fits, free_disk_at, store_bytes
    from ..backends import make_options

    solver, reason, dtype, dtype_reason = _choose_solver(params, n, m, specs, precomputed,
                                                         lazy)
    rank, limit = None, None
    if solver in ("blockwise", "nystrom"):
        options = make_options(solver, **backend_settings(solver, params, strict=False))
        limit = options.max_store_bytes
        if solver == "nystrom" and options.factors_storage(n, m):
            rank = min(min(int(np.max(options.n_landmarks)), n) * m,
                       options.resolved_max_components(n, m) or np.inf)
    needed = store_bytes(solver, n, m, np.dtype(dtype).itemsize, rank)
    if not needed:  # in memory: nothing to write
        return solver, reason, dtype, dtype_reason
    store = params.get("store")
    size = check_store_fits(solver, needed, free_disk_at(store), store, limit)
    return solver, f"{reason}; {size}", dtype, dtype_reason


def _choose_solver(params: dict, n: int, m: int, specs: Any, precomputed: bool,
                   lazy: bool) -> tuple[str, str, str, str]:
    """``(solver, its reason, dtype, its reason)``."""
    from ..auto import choose_precomputed_solver, choose_solver, smooth_exact_max_n
    from ..backends import make_options
    from ..exceptions import ProblemTooLargeError

    solver, dtype = params["solver"], requested_dtype(params)
    auto_dtype = is_auto(dtype)
    if precomputed:
        if solver != "auto":
            return solver, "given", "float64" if auto_dtype else dtype, "precomputed kernels"
        copy = make_options("exact", **backend_settings("exact", params, strict=False)
                            ).copy or lazy
        choice, reason = choose_precomputed_solver(n, m, copy=copy)
        return choice, reason, "float64", "precomputed kernels are kept in float64"
    nystrom = make_options("nystrom", **backend_settings("nystrom", params, strict=False))
    plain = not nystrom.exact_dissimilarity(n, m)
    limit = nystrom.exact_dissimilarity_limit(m)
    stored = "float32" if (auto_dtype and plain) else ("float64" if auto_dtype else dtype)
    dtype_reason = ("given" if not auto_dtype else
                    f"float32 factors (plain Nystrom: n > {limit:,}, the exact C's limit "
                    f"for {m} kernels)" if plain else
                    "float64 (the exact C and the local part need float64 factors)")
    if solver != "auto":
        if solver != "nystrom" and auto_dtype:
            stored, dtype_reason = "float64", "float64 kernels"
        return solver, "given", stored, dtype_reason
    kwargs = dict(n_landmarks=int(np.max(nystrom.n_landmarks)),
                  exact_max_n=smooth_exact_max_n(limit) if smooth_kernels(specs) else None,
                  max_components=nystrom.resolved_max_components(n, m),
                  store_factors=bool(nystrom.factors_storage(n, m)))
    try:
        choice, reason = choose_solver(n, m, itemsize=np.dtype(stored).itemsize, **kwargs)
    except ProblemTooLargeError:
        if not auto_dtype or stored == "float32":
            raise
        choice, reason = choose_solver(n, m, itemsize=4, **kwargs)
        return choice, reason, "float32", "float32 factors (float64 ones would not fit the disk)"
    if choice != "nystrom" and auto_dtype:
        stored, dtype_reason = "float64", f"float64 ({choice} backend)"
    return choice, reason, stored, dtype_reason
