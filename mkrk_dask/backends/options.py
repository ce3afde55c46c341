"""Typed options of every backend, validated completely before any Dask or Zarr work starts.

One dataclass per backend; :func:`make_options` builds the one for a solver from keyword
settings and rejects an unknown option, a wrong type or a value out of range with a one-line
error naming it (a typo costs nothing, not a kernel build).
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass, fields
from numbers import Integral, Real
from typing import Any, ClassVar

import numpy as np
from sklearn.utils._param_validation import Interval, StrOptions

from ..choices import DTYPE_CHOICES, STORE_DTYPES  # noqa: F401 - re-exported
from ..landmarks import DEFAULT_RANK_TOL, DEFAULT_REL_FLOOR, LANDMARK_METHODS
from ..validation import ListOf, Phrased, check_constraints

__all__ = ["ExactOptions", "BlockwiseOptions", "NystromOptions", "BackendOptions",
           "make_options", "option_names", "SOLVER_OPTIONS", "PRODUCTS", "EIGEN_METHODS",
           "STORE_DTYPES", "DTYPE_CHOICES", "dtype_name"]

PRODUCTS = ("combined", "fused")
EIGEN_METHODS = ("auto", "lapack", "lanczos")
#: NystromOptions(max_components="auto")'s limit on the factors' total rank above
#: exact_dissimilarity_max_n
AUTO_MAX_COMPONENTS = 2048
#: NystromOptions(landmark_oversampling="auto")'s factor above exact_dissimilarity_max_n
AUTO_LANDMARK_OVERSAMPLING = 2.0
#: NystromOptions(exact_dissimilarity_max_n="auto"): the exact C and the local part at most
#: up to this n, and above :data:`AUTO_EXACT_DISSIMILARITY_MIN_N` only while their pass's
#: cost, ``n^2`` pairs of rows at :meth:`NystromOptions.pass_products_per_pair` each, stays
#: within :data:`EXACT_DISSIMILARITY_BUDGET`
AUTO_EXACT_DISSIMILARITY_MAX_N = 20_000
#: ... and always up to this n, whatever the number of kernels: there the pass costs no more
#: than the factor pass and the eigensolver of the uncapped R (which grow with m too), and
#: without it many kernels lose accuracy (UCI mfeat, n = 2,000 and 72 kernels, forced to
#: Nystrom: NMI 24.5 points from exact without the exact C and the local part)
AUTO_EXACT_DISSIMILARITY_MIN_N = 5_000
#: what evaluating one kernel entry in that pass costs, in products (an exponential or a
#: power and the normalisation): with the local part off, 4 and 12 kernels took 11.5-12.9
#: and 21.3-26.8 ns per pair of rows (n = 6,000, 2 cores,
#: ``benchmarks/results/nystrom/exact_c_pass.md``)
KERNEL_ENTRY_PRODUCTS = 100
#: the pass ran at 0.012-0.032 ns per product on 2 cores in that report (the local part's
#: residuals, R products per pair, are most of it: 500 landmarks for each of 4 kernels took
#: 30.6-34.4 ns per pair), so this budget keeps it to 1-3 s. With 500 landmarks per kernel
#: and the local part, 1 kernel stops at n = 12,899, 4 at 6,441, 12 or more at the floor
EXACT_DISSIMILARITY_BUDGET = 1e11
#: NystromOptions(gram_rows="auto"): the factors' Gram matrix (and the Nystrom diagonal
#: sums) summed over every row up to this n, over a uniform sample of
#: :data:`AUTO_GRAM_SAMPLE_ROWS` rows above. The build (the factors and their ``2 n R^2`` Gram
#: flops) took 550.9 of 1,042.6 s of the fit at 10^7, 184.7 s with a sample of 10^6 rows
#: (``benchmarks/results/scale/scaling_issue77.md``, ``scaling_gram_sample.md``)
AUTO_GRAM_ROWS = 1_000_000
#: ... the sample's rows: the R x R matrix is a mean of outer products, which a uniform
#: sample of 250,000 estimates to about 0.2% (one over its square root) whatever n; its
#: ``2 s R^2`` flops at R = 2,048 are about a quarter of those of 10^6 rows, most of the build
#: at 10^7 (``benchmarks/results/scale/scaling_gram_250k.md``)
AUTO_GRAM_SAMPLE_ROWS = 250_000
#: ``final_rows="auto"``: above :data:`AUTO_GRAM_ROWS` rows, the final partition (its k-means
#: and graph) is fitted on a uniform sample of this many rows of the embedding, and one pass
#: makes every row's embedding and its label, and the sampled rows' cluster sums for
#: ``inertia_`` (at 10^7
#: rows the k-means of every row, the graph's labels and a second pass over the kernels were
#: 175 of 403 s, ``benchmarks/results/scale/scaling_aligned.md``). 200,000 rows hold 20,000
#: of each of 10 clusters, and 200 of each of 1,000
AUTO_FINAL_ROWS = 200_000


def _sample_rows(given: Any, n: int, auto_sample: int) -> int | None:
    """A row-sample option of ``n`` rows resolved: ``"auto"`` is every row up to
    :data:`AUTO_GRAM_ROWS` and ``auto_sample`` rows above; None, or a sample of n rows or
    more, is every row (None)."""
    rows = (None if n <= AUTO_GRAM_ROWS else auto_sample) if given == "auto" else given
    return None if rows is None or int(rows) >= n else int(rows)


def _at_least(minimum: int) -> Interval:
    return Interval(Integral, minimum, None, closed="left")


def _check(options: Any) -> None:
    """Every field of ``options`` against its class's ``_parameter_constraints``."""
    check_constraints({f.name: getattr(options, f.name) for f in fields(options)},
                      options._parameter_constraints)


@dataclass(frozen=True)
class ExactOptions:
    """Options of the exact (dense, in-memory) backend.

    eigen_method : {"auto", "lapack", "lanczos"}
        The H-step's top-k solver (:func:`mkrk_dask.eigen.top_k_dense`).
    copy : bool
        Precomputed kernels: True (default) checks and normalises them into a packed copy
        (the upper triangles, about ``4 m n^2`` bytes: :mod:`mkrk_dask._packed`), leaving the
        input as it was; False does it in the caller's array, when that is a writeable
        C-contiguous float64 ``(m, n, n)`` array, which saves the copy, but the loop then
        reads the full kernels, twice the bytes per pass (timed on COIL20's kernels in
        ``benchmarks/results/exact/exact_fit.md``). The input then holds the normalised
        kernels afterwards, also after a fit that refuses them (see
        :func:`mkrk_dask.precomputed.prepare_precomputed`).
        Kernels built from features are the backend's own either way.
    """

    eigen_method: str = "auto"
    copy: bool = True

    _parameter_constraints: ClassVar[dict] = {
        "eigen_method": [StrOptions(set(EIGEN_METHODS))],
        "copy": ["boolean"],
    }

    def __post_init__(self) -> None:
        _check(self)


@dataclass(frozen=True)
class _StoreOptions:
    """Options shared by the backends that keep their data in a Zarr store.

    chunk_size : int, optional
        Rows per block of the store (default: chosen from n).
    dtype : {"float64", "float32"}
        Storage precision (the arithmetic is float64 either way).
    overwrite : bool
        Rebuild over an existing store instead of refusing (or reusing) it.
    max_store_bytes : int, optional
        The largest store the fit or build may write, in bytes: a larger one is refused
        before anything is written. Default: no limit beyond a share of the free disk where
        the store goes (an object store has no free space to read: give one there).
    """

    chunk_size: int | None = None
    dtype: str = "float64"
    overwrite: bool = False
    max_store_bytes: int | None = None

    _parameter_constraints: ClassVar[dict] = {
        "chunk_size": Phrased("an integer >= 1 or None", None, _at_least(1)),
        "dtype": [StrOptions(set(STORE_DTYPES))],
        "overwrite": ["boolean"],
        "max_store_bytes": Phrased("an integer >= 1 or None", None, _at_least(1)),
    }

    def __post_init__(self) -> None:
        object.__setattr__(self, "dtype", _dtype_name(self.dtype))
        _check(self)


def _is_dtype(value: Any) -> bool:
    try:
        np.dtype(value)
    except TypeError:
        return False
    return not isinstance(value, bool)


def dtype_name(value: Any, allowed: tuple[str, ...] = STORE_DTYPES) -> str:
    """The storage precision ``value`` names (a name, a numpy type or dtype), checked against
    ``allowed``: :data:`STORE_DTYPES` for a store, :data:`DTYPE_CHOICES` (``"auto"`` too) for
    the ``dtype`` of ``backend_options``, which the plan resolves."""
    name = _dtype_name(value)
    check_constraints({"dtype": name}, {"dtype": [StrOptions(set(allowed))]})
    return name


def _dtype_name(value: Any) -> Any:
    """The name of the dtype ``value`` is, or ``value`` as it is."""
    return np.dtype(value).name if _is_dtype(value) else value


@dataclass(frozen=True)
class BlockwiseOptions(_StoreOptions):
    """Options of the blockwise backend (all m kernels in a Zarr store, products on Dask).

    products : {"combined", "fused"}
        How the H-step reads the store (:class:`~mkrk_dask.backends.blockwise.BlockwiseBackend`).
    eigen_tol, eigen_depth, eigen_oversample, eigen_max_restarts
        Of :func:`mkrk_dask.eigen.block_krylov_top_k`.
    """

    products: str = "combined"
    eigen_tol: float = 1e-10
    eigen_depth: int = 4
    eigen_oversample: int = 10
    eigen_max_restarts: int = 100

    _parameter_constraints: ClassVar[dict] = {
        **_StoreOptions._parameter_constraints,
        "products": [StrOptions(set(PRODUCTS))],
        "eigen_tol": [Interval(Real, 0, None, closed="neither")],
        "eigen_depth": Phrased("an integer >= 1", _at_least(1)),
        "eigen_oversample": [_at_least(0)],
        "eigen_max_restarts": Phrased("an integer >= 1", _at_least(1)),
    }


@dataclass(frozen=True)
class NystromOptions(_StoreOptions):
    """Options of the Nystrom backend (per-kernel low-rank factors in a Zarr store).

    n_landmarks : int or tuple of int
        Landmarks per kernel (one count, or one per kernel); capped at n.
    landmarks : {"kmeans++", "uniform"}
    rel_floor : float
        Relative eigenvalue floor of the landmark blocks.
    rank_tol : float
        Each kernel keeps the fewest leading eigenvectors of its landmark block that leave out
        at most this share of the block's trace (:func:`~mkrk_dask.landmarks.landmark_transform`),
        so smooth kernels get small ranks; 0 keeps every eigenvalue above ``rel_floor``.
    max_components : int, "auto" or None
        Largest total rank R of the factors (all kernels together); when the kernels' ranks add
        up to more, the components carrying the smallest share of their kernel's trace go first
        (:func:`~mkrk_dask.landmarks.allocate_ranks`). The factor pass costs ``2 n R^2``
        flops, so R sets the cost per row. ``"auto"``: :data:`AUTO_MAX_COMPONENTS` above
        ``exact_dissimilarity_max_n`` (where that pass is the fit's cost), none below (where
        the exact C and the local part cost more, and need the factors' full accuracy).
        None: no limit.
    landmark_oversampling : float, "auto" or None
        A kernel that keeps ``r`` components uses only the first ``ceil(oversampling * r)``
        landmarks of its view (k-means++ order: a prefix covers the data), its transform
        computed again from that prefix, so a smooth kernel's factor costs ``2 r^2
        oversampling`` flops per row instead of ``2 r n_landmarks``. ``"auto"``:
        :data:`AUTO_LANDMARK_OVERSAMPLING` above ``exact_dissimilarity_max_n`` (with
        ``max_components``), none below. None: every kernel uses all its landmarks.
    store_factors : bool or "auto"
        Write the factors to the store (``n R`` entries), to be read back by the final pass;
        False computes them again there from the data instead, so the store holds only the
        row map and the sums (no ``n R`` array on disk). ``"auto"``: stored up to
        ``exact_dissimilarity_max_n`` (the sparse local part reads them); above, only for
        wide data, where computing them again (the products of the rows with the landmarks)
        costs more than writing and reading them back
        (:data:`~mkrk_dask.backends.nystrom.build.STORE_FLOPS_PER_BYTE`), and there only in a
        store on local disk and where they fit in half the available memory (so they are read
        back from the page cache).
    exact_distance_max_n : int
        Largest n whose largest pairwise distance is computed exactly (else estimated).
    blas_threads : int, optional
        BLAS threads inside each task (default: 1 when a worker runs several threads).
    diagonal_correction : bool
        Estimate ``tr(K_p K_q)`` with the exact diagonal (above ``exact_dissimilarity_max_n``).
    exact_dissimilarity_max_n : int or "auto"
        Up to this n, C is computed exactly and the sparse local part is collected (a pass
        over all pairs of rows, :meth:`pass_products_per_pair` products each). ``"auto"``:
        up to :data:`AUTO_EXACT_DISSIMILARITY_MAX_N`, and above
        :data:`AUTO_EXACT_DISSIMILARITY_MIN_N` only while that pass stays within
        :data:`EXACT_DISSIMILARITY_BUDGET` products (:meth:`exact_dissimilarity_limit`).
    local_threshold : float
        Smallest residual entry kept in the sparse local part; 0 turns it off.
    gram_rows : int, "auto" or None
        Rows the factors' Gram matrix ``F^T F`` (and the sums of their diagonals) is summed
        over: a uniform sample of this many rows, scaled by ``n / sample``, where n is
        larger; the exact traces are still summed over every row. ``"auto"``: every row up
        to :data:`AUTO_GRAM_ROWS` rows, a sample of :data:`AUTO_GRAM_SAMPLE_ROWS` above.
        None: every row.
    final_rows : int, "auto" or None
        Rows the final partition (its k-means, and the graph's verdict) is fitted on: a
        uniform sample of this many rows of the embedding, where n is larger; then one pass
        makes the embedding of every row and labels it by that partition (its nearest centre,
        or the graph's label; the sampled rows keep their own), and ``inertia_`` takes each
        cluster's sum of factor rows as its sampled rows' mean times its rows. ``"auto"``:
        every row
        up to :data:`AUTO_GRAM_ROWS` rows, a sample of :data:`AUTO_FINAL_ROWS` above. None:
        every row (the k-means of all of them, then a pass for the inertia).
    """

    n_landmarks: Any = 500
    landmarks: str = "kmeans++"
    rel_floor: float = DEFAULT_REL_FLOOR
    rank_tol: float = DEFAULT_RANK_TOL
    max_components: Any = "auto"
    landmark_oversampling: Any = "auto"
    store_factors: Any = "auto"
    exact_distance_max_n: int = 100_000
    blas_threads: int | None = None
    diagonal_correction: bool = True
    exact_dissimilarity_max_n: Any = "auto"
    local_threshold: float = 0.01
    gram_rows: Any = "auto"
    final_rows: Any = "auto"

    _parameter_constraints: ClassVar[dict] = {
        **_StoreOptions._parameter_constraints,
        "n_landmarks": Phrased("an integer >= 1 or a non-empty list of them", _at_least(1),
                               ListOf(_at_least(1))),
        "landmarks": [StrOptions(set(LANDMARK_METHODS))],
        "rel_floor": [Interval(Real, 0, None, closed="neither")],
        "rank_tol": Phrased("< 1 and a finite number >= 0",
                            Interval(Real, 0, 1, closed="left")),
        "max_components": Phrased("'auto', None or an integer >= 1", StrOptions({"auto"}),
                                  None, _at_least(1)),
        # inf passes, as it always has (a number >= 1)
        "landmark_oversampling": Phrased("'auto', None or a number >= 1",
                                         StrOptions({"auto"}), None,
                                         Interval(Real, 1, None, closed="both")),
        "store_factors": Phrased("'auto', True or False", StrOptions({"auto"}), bool),
        "exact_distance_max_n": [_at_least(0)],
        "blas_threads": Phrased("an integer >= 1 or None", None, _at_least(1)),
        "diagonal_correction": ["boolean"],
        "exact_dissimilarity_max_n": Phrased("'auto' or an integer >= 0",
                                             StrOptions({"auto"}), _at_least(0)),
        "local_threshold": [Interval(Real, 0, None, closed="left")],
        "gram_rows": Phrased("'auto', None or an integer >= 1", StrOptions({"auto"}), None,
                             _at_least(1)),
        "final_rows": Phrased("'auto', None or an integer >= 1", StrOptions({"auto"}), None,
                              _at_least(1)),
    }

    def __post_init__(self) -> None:
        super().__post_init__()
        if not isinstance(self.n_landmarks, numbers.Integral):
            object.__setattr__(self, "n_landmarks", tuple(int(v) for v in self.n_landmarks))

    def pass_products_per_pair(self, m: int) -> float:
        """What the exact C's pass costs per pair of rows with ``m`` kernels, in products:
        ``m (m + 1) / 2`` products of kernel entries (C), :data:`KERNEL_ENTRY_PRODUCTS` per
        kernel entry evaluated and, with the local part on, one per factor column for the
        residuals ``K_p - F_p F_p^T`` (R: the landmarks of all kernels, at most)."""
        m = max(1, int(m))
        counts = self.n_landmarks
        landmarks = (sum(counts) if isinstance(counts, tuple) else m * int(counts))
        local = landmarks if self.local_threshold > 0 else 0
        return m * (m + 1) / 2 + KERNEL_ENTRY_PRODUCTS * m + local

    def exact_dissimilarity_limit(self, m: int) -> int:
        """The largest n whose C is computed exactly with ``m`` kernels (``"auto"`` resolved:
        the limit, or less where the pass over all pairs of rows would exceed the budget, but
        not below the floor)."""
        if self.exact_dissimilarity_max_n != "auto":
            return int(self.exact_dissimilarity_max_n)
        per_pair = self.pass_products_per_pair(m)
        return min(AUTO_EXACT_DISSIMILARITY_MAX_N,
                   max(AUTO_EXACT_DISSIMILARITY_MIN_N,
                       int(math.sqrt(EXACT_DISSIMILARITY_BUDGET / per_pair))))

    def exact_dissimilarity(self, n: int, m: int) -> bool:
        """Whether ``n`` rows and ``m`` kernels get the exact C and the sparse local part."""
        return n <= self.exact_dissimilarity_limit(m)

    def local_part(self, n: int, m: int) -> bool:
        """Whether ``n`` rows and ``m`` kernels get the sparse local part (else: plain
        Nystrom, whose factors may hold fewer eigenpairs than the final step asks)."""
        return self.exact_dissimilarity(n, m) and self.local_threshold > 0

    def resolved_max_components(self, n: int, m: int) -> int | None:
        """The limit on R for ``n`` rows and ``m`` kernels (``"auto"`` resolved)."""
        if self.max_components == "auto":
            return None if self.exact_dissimilarity(n, m) else AUTO_MAX_COMPONENTS
        return self.max_components

    def resolved_landmark_oversampling(self, n: int, m: int) -> float | None:
        """The landmark oversampling for ``n`` rows and ``m`` kernels (``"auto"``
        resolved)."""
        if self.landmark_oversampling == "auto":
            return None if self.exact_dissimilarity(n, m) else AUTO_LANDMARK_OVERSAMPLING
        return None if self.landmark_oversampling is None else float(
            self.landmark_oversampling)

    def resolved_gram_rows(self, n: int) -> int | None:
        """The rows of the sample the Gram matrix of ``n`` rows is summed over, or None for
        every row (``"auto"`` resolved; a sample of n rows or more is every row)."""
        return _sample_rows(self.gram_rows, n, AUTO_GRAM_SAMPLE_ROWS)

    def resolved_final_rows(self, n: int) -> int | None:
        """The rows of the sample the final partition of ``n`` rows is fitted on, or None
        for every row (``"auto"`` resolved; a sample of n rows or more is every row)."""
        return _sample_rows(self.final_rows, n, AUTO_FINAL_ROWS)

    def factors_storage(self, n: int, m: int) -> bool | None:
        """Whether the factors of ``n`` rows are stored: True or False, or None where
        ``"auto"`` leaves it to their size (the rule of
        :func:`~mkrk_dask.backends.nystrom.build.factors_storage`, which the plan shows).

        Raises
        ------
        ValueError
            ``store_factors=False`` where the sparse local part needs them.
        """
        local = self.local_part(n, m)
        if local and self.store_factors is False:
            raise ValueError(
                f"store_factors=False: at n = {n:,} <= exact_dissimilarity_max_n the sparse "
                "local part reads the stored factors; pass local_threshold=0 or "
                "store_factors=True")
        if self.store_factors == "auto":
            return True if local else None
        return bool(self.store_factors)


BackendOptions = ExactOptions | BlockwiseOptions | NystromOptions

#: the options class of every solver
SOLVER_OPTIONS: dict[str, type] = {"exact": ExactOptions, "blockwise": BlockwiseOptions,
                                   "nystrom": NystromOptions}


def option_names(solver: str) -> tuple[str, ...]:
    """The options ``solver`` accepts."""
    return tuple(f.name for f in fields(SOLVER_OPTIONS[solver]))


def make_options(solver: str, **settings: Any) -> BackendOptions:
    """The typed options of ``solver`` from keyword settings, validated.

    Raises
    ------
    ValueError
        An unknown solver, an option the solver does not have, or a bad value (one line that
        names it).
    """
    if solver not in SOLVER_OPTIONS:
        raise ValueError(f"solver must be one of {tuple(SOLVER_OPTIONS)}, got {solver!r}")
    valid = option_names(solver)
    unknown = sorted(set(settings) - set(valid))
    if unknown:
        raise ValueError(f"unknown option{'s' if len(unknown) > 1 else ''} "
                         f"{', '.join(map(repr, unknown))} for solver={solver!r}; its options "
                         f"are {', '.join(valid)}")
    return SOLVER_OPTIONS[solver](**settings)
