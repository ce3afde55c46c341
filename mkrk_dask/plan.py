"""The fit plan: every ``"auto"`` of an estimator resolved in one place, before any kernel is
computed, with the reason of each choice and what the fit will cost.

:func:`make_plan` reads the estimator's parameters (a dict, never the estimator) and a sample
of the data, and returns a frozen :class:`FitPlan`. ``MKKMRK(k).plan(X)`` returns it without
fitting; ``fit`` carries it out and keeps it as ``plan_``; ``summary()`` and ``mkrk plan``
print it. What the plan decides:

- **preprocessing** (per view): columns in different units are standardised, from the spread of
  the columns' standard deviations on a sample of rows, binary columns of very different rates
  are scaled, and columns far from zero beside their spread are centred
  (:func:`column_scaling`);
- **kernels** (``kernels="auto"``): per view, the cosine kernel and Gaussians at 0.5, 1 and 2
  times the median pairwise distance, of the Euclidean distance or, for intensities and counts
  (non-negative with many zeros), of the angle between rows; other non-negative data
  (measurements) add one Gaussian of the angle at the median; data with negative values get
  the cosine of their rows lifted by :data:`LIFT` times their median length in place of the
  cosine (:func:`auto_kernels`). No candidate dictionaries are fitted;
- **solver, dtype and backend options**: the backend from n, m and the machine's memory and
  disk (:mod:`mkrk_dask.auto`), the storage precision, and every ``"auto"`` of the Nystrom
  options as a number (:func:`resolve_options`);
- **the final step**: ``"auto"`` is the features of the top 2k eigenpairs of the learned kernel
  (one eigendecomposition, one k-means) and, for the default, their partition refined on an
  anchor graph of those rows (kept where it agrees with the k-means partition).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, fields, replace
from typing import Any

import numpy as np
import scipy.sparse as sp

from ._text import LINE_WIDTH, wrap_lines
from .backends.base import APPROXIMATION_WARNING
from .choices import PREPROCESSING_CHOICES  # noqa: F401 - re-exported
from .kernel_evaluation import WIDTHED_FAMILIES
from .kernels import KernelSpec, row_sq_norms
from .preprocessing import (  # noqa: F401
    OFFSET_LIMIT,
    SAMPLE_ROWS,
    SCALE_SPREAD_LIMIT,
    ColumnScaling,
    column_scaling,
    preprocess,
    two_valued,
    view_sample,
)

__all__ = ["FitPlan", "Decision", "ColumnScaling", "make_plan", "auto_kernels",
           "column_scaling", "SCALE_SPREAD_LIMIT", "OFFSET_LIMIT", "PREPROCESSING_CHOICES",
           "WIDTHS", "SAMPLE_ROWS",
           "GRAPH_NEIGHBORS", "GRAPH_MIN_AGREEMENT", "GRAPH_CLEAR_GAP", "GRAPH_CLEAR_ROWS",
           "GEOMETRIES", "GRAPH_SAMPLE_ROWS", "LIFT", "median_length",
           "GRAPH_ANCHORS", "GRAPH_ANCHOR_ITERATIONS", "GRAPH_REFERENCE_INITS",
           "reference_inits", "smooth_kernels", "backend_settings",
           "resolve_options", "requested_dtype"]

#: the default kernels' geometries (:func:`auto_kernels`)
GEOMETRIES = ("signed", "euclidean", "measurements", "angular", "mixed", "column")
#: a view with negative values gets the cosine of its rows lifted by one more coordinate of
#: this many times their median length, ``[x, LIFT * median |x|]``: the normalised linear
#: kernel with offset ``a = (LIFT * median |x|)^2``. Rows far from the arbitrary origin keep
#: their direction; rows near it, whose direction is noise, share the added one instead of
#: being scattered over every angle (the plain cosine cut a group lying around the origin
#: into sectors: three blobs around the origin, 62 to 70 NMI against KMeans's 85 to 87 in
#: ``benchmarks/results/defaults/toy_shapes.md``). Chosen on synthetic blobs: the smallest
#: of 0.25, 0.5 and 1 that kept make_blobs of 2 and 3 columns within 2 NMI of KMeans; larger
#: lifts blur the cosine of many columns more (``docs/defaults.rst``)
LIFT = 0.5
#: share of zero entries from which non-negative data count as intensities or counts (an
#: image's dark pixels, a document's absent words)
ANGULAR_MIN_ZEROS = 0.1
#: Gaussian widths of the default kernels, in multiples of the median pairwise distance
WIDTHS = (0.5, 1.0, 2.0)
#: neighbours of a row in the final graph (scikit-learn's SpectralClustering default)
GRAPH_NEIGHBORS = 10
#: the graph's partition is kept only if its NMI with the k-means partition reaches this: a
#: refinement of it, not a different answer (one cluster of nearly every row beside tiny ones)
GRAPH_MIN_AGREEMENT = 0.5
#: ... or where the graph clearly has k parts (the eigengap of spectral clustering): its
#: normalised Laplacian's k-th smallest eigenvalue ``1 - lambda_k`` at most this fraction of
#: the next one, and every cluster of at least :data:`GRAPH_CLEAR_ROWS` rows. Two moons or
#: two rings are k well separated curves that k-means cuts across: the graph's answer is then
#: a different one, and the right one. Where the graph has more parts with no edge to the
#: rest than clusters, it is clear only with k parts of at least GRAPH_CLEAR_ROWS rows beside
#: stray ones (``estimators/_final.parts_apart``)
GRAPH_CLEAR_GAP = 0.1
#: restarts of the k-means partition the final graph is checked against (its NMI with the
#: graph's, against :data:`GRAPH_MIN_AGREEMENT`): a coarse test, which does not need the
#: ``n_init`` restarts of the partition a fit returns. Where the graph is kept its labels
#: are the fit's, and where it is not the k-means is made again with ``n_init`` restarts
#: (the same labels as a single k-means of ``n_init``)
GRAPH_REFERENCE_INITS = 3
#: anchors of the final graph, at most ... More anchors follow the final rows more finely,
#: and cost more (seeding, the mini-batch k-means and the nearest-anchor pass all grow with
#: them): at 2,000 the graph costs less than the fit it refines on 11,000 to 70,000 images
#: (``docs/defaults.rst``)
GRAPH_ANCHORS = 2000
#: passes of the anchors' mini-batch k-means (they need only cover the final rows)
GRAPH_ANCHOR_ITERATIONS = 10
#: ... and at most one per this many rows
GRAPH_ROWS_PER_ANCHOR = 2
#: rows of the smallest cluster of a clear graph: a row's nearest anchors' worth, the floor the
#: plan puts on the rows a cluster for a graph at all (a tiny isolated clump also makes a
#: clear gap, of a partition into the clump and the rest)
GRAPH_CLEAR_ROWS = GRAPH_NEIGHBORS * GRAPH_ROWS_PER_ANCHOR
#: most rows the final graph is built on: above, on a uniform sample of them, the other rows
#: labelled by the graph block by block (its memory stays that of the sample at any n)
GRAPH_SAMPLE_ROWS = 100_000
#: the share of the learned kernel's trace the Nystrom factors may miss before the fit warns,
#: for the default kernels (Gaussians at least half the median distance wide): their factors
#: at 500 landmarks miss 10-15% on Fashion-MNIST and on Gaussian blobs, where the default's
#: Nystrom fits gave the exact fits' NMI within 1 point (6,441 to 12,000 rows of Fashion-MNIST,
#: ``benchmarks/results/defaults/default_sizes.md``); a warning there would be one a user
#: cannot act on. Kernels the user gives: :data:`~mkrk_dask.backends.base.APPROXIMATION_WARNING`
DEFAULT_KERNELS_MISSED_WARNING = 0.25


#: the plan's cost keys as :meth:`FitPlan.lines` names them
_COST_LABELS = {"kmeans": "k-means runs", "graph": "anchor graphs",
                "passes": "passes over the data"}


@dataclass(frozen=True)
class Decision:
    """One choice of the plan: what, the value, why, and whether ``"auto"`` made it."""

    what: str
    value: str
    reason: str
    auto: bool = True


@dataclass(frozen=True)
class FitPlan:
    """What a fit will do, decided before any kernel is computed.

    Attributes
    ----------
    method : str
    n_samples, n_views : int
        ``n_views`` is 0 for precomputed kernels.
    scaling : tuple of ColumnScaling
        One per view.
    kernels : tuple of KernelSpec or None
        None for precomputed kernels.
    solver, dtype : str
    options : dict
        The backend's options, every ``"auto"`` resolved.
    final_step : {"features", "spectral"}
    n_components : int
        Eigenpairs of the final step.
    final_clustering : {"graph", "kmeans"}
    graph_anchors : int
        Anchors of the final graph (0 without one).
    graph_rows : int
        Rows the final graph is built on (all, or a uniform sample; 0 without a graph).
    missed_warning : float
        Share of the learned kernel's trace an approximate backend may miss before the fit
        warns.
    decisions : tuple of Decision
    cost : dict
        What the fit will run: ``fits`` (loops over the data: 1), ``eigendecompositions``
        (one per iteration, at most ``max_iter``, and the final one; SimpleMKKM's one per
        line-search point), ``kmeans`` (k-means runs
        of ``n_init`` restarts each), ``graph`` (anchor graphs) and ``passes`` (over the rows
        of the data, where the data are read block by block).
    view_weights : {"equal", "agreement"}
        The kernels' weights where the method leaves them equal: ``"agreement"`` weighs
        each view by how far its own partition agrees with the other views'
        (:mod:`mkrk_dask.view_agreement`).
    expected_seconds : float or None
        The fit's expected wall time on this machine, from a short calibration on the
        plan's sample (:mod:`mkrk_dask.plan_time`); None where not estimated.
    """

    method: str
    n_samples: int
    n_views: int
    scaling: tuple[ColumnScaling, ...]
    kernels: tuple[KernelSpec, ...] | None
    solver: str
    dtype: str
    options: dict
    final_step: str
    n_components: int
    final_clustering: str
    graph_anchors: int
    graph_rows: int
    missed_warning: float
    decisions: tuple[Decision, ...]
    cost: dict = field(default_factory=dict)
    view_weights: str = "equal"
    # measured, so two plans of the same choices differ in it: left out of ==
    expected_seconds: float | None = field(default=None, compare=False)

    def decision(self, what: str) -> Decision:
        """The decision about ``what`` (e.g. ``"solver"``)."""
        for d in self.decisions:
            if d.what == what:
                return d
        raise KeyError(what)

    def backend_options(self) -> Any:
        """The typed options of :attr:`solver`."""
        from .backends import make_options

        return make_options(self.solver, **self.options)

    def apply_scaling(self, views: list) -> list:
        """``views`` with every view's column transform applied."""
        if len(views) != len(self.scaling):
            raise ValueError(f"the plan has {len(self.scaling)} view(s), got {len(views)}")
        return [s.apply(v) for s, v in zip(self.scaling, views, strict=True)]

    def lines(self, width: int | None = LINE_WIDTH) -> list[str]:
        """The plan as text for a terminal: a line per decision, then the cost.

        Parameters
        ----------
        width : int or None, default=100
            The widest line; a longer decision is wrapped onto indented continuation lines
            (:func:`~mkrk_dask._text.wrap_lines`). None: one line per decision, however long.
            :meth:`to_dict` keeps every reason whole.
        """
        out = [f"plan: {self.method}, n={self.n_samples:,}"
               + (f", {self.n_views} view(s)" if self.n_views else ", precomputed kernels")]
        for d in self.decisions:
            out.append(f"  {d.what}: {d.value}" + (f" ({'auto: ' if d.auto else ''}{d.reason})"
                                                   if d.reason else ""))
        from .plan_time import expected_time_text

        # counts of the steps the fit will run, then their expected seconds
        cost = ", ".join(f"{_COST_LABELS.get(k, k)} {v}" for k, v in self.cost.items())
        out.append(f"  expected cost, in steps: {cost}")
        out.append("  " + expected_time_text(self))
        return out if width is None else wrap_lines(out, width)

    def __str__(self) -> str:
        return "\n".join(self.lines())

    def to_dict(self) -> dict:
        """JSON-able form (for ``result.json`` and saved models)."""
        data = asdict(self)
        data["kernels"] = (None if self.kernels is None
                           else [s.to_dict() for s in self.kernels])
        data["options"] = {k: _jsonable(v) for k, v in self.options.items()}
        return data

    @classmethod
    def from_dict(cls, data: dict) -> FitPlan:
        """The plan :meth:`to_dict` wrote."""
        known = {f.name for f in fields(cls)}
        values = {k: v for k, v in data.items() if k in known}
        values["scaling"] = tuple(
            ColumnScaling(s["method"],
                          None if s.get("center") is None else tuple(s["center"]),
                          None if s.get("scale") is None else tuple(s["scale"]))
            for s in data["scaling"])
        values["kernels"] = (None if data.get("kernels") is None
                             else tuple(KernelSpec(**d) for d in data["kernels"]))
        values["decisions"] = tuple(Decision(**d) for d in data["decisions"])
        return cls(**values)


def _jsonable(value: Any) -> Any:
    if isinstance(value, tuple):
        return list(value)
    if isinstance(value, np.dtype | type):
        return np.dtype(value).name
    try:
        json.dumps(value)
    except TypeError:
        return str(value)
    return value


# -- the data-driven choices --------------------------------------------------------------------

def _geometry(rows: Any) -> tuple[str, str]:
    """``"angular"`` (the cosine kernel and Gaussians of the angle between rows) for
    intensities and counts: non-negative rows with many zeros (dark pixels, absent words),
    whose length is mostly their overall level, and whose directions differ;
    ``"measurements"`` (Euclidean Gaussians, the cosine and one Gaussian of the angle) for
    other non-negative rows of different directions: lengths, weights, concentrations rarely
    read zero, and both their size and their proportions are information; ``"euclidean"``
    (the cosine kernel and Euclidean Gaussians) otherwise; ``"column"`` (Euclidean Gaussians
    alone) for a view of one column, where the cosine kernel only tells signs apart (data
    with negative values: it cut a group at the origin, ``blobs:1`` of
    ``benchmarks/results/defaults/graph_lanczos_18b1997.md``) or zeros from the rest. With
    the reason."""
    from .scales import directions_differ

    if rows.shape[1] == 1:
        return "column", ("one column (the angle of a single number is its sign, or nothing "
                          "where all share it): Euclidean Gaussians only")
    low = float(rows.min()) if not sp.issparse(rows) else min(0.0, float(rows.data.min(
        initial=0.0)))
    if low < 0:
        return "signed", ("negative values (an arbitrary origin, near which a row's direction "
                          "means nothing): Euclidean Gaussians and the cosine of the rows "
                          f"lifted by {LIFT:g} times their median length (polynomial(a=..., "
                          "b=1): the normalised linear kernel with that offset)")
    size = rows.shape[0] * rows.shape[1]
    zeros = 1.0 - (rows.nnz if sp.issparse(rows) else np.count_nonzero(rows)) / max(size, 1)
    if not directions_differ(rows):
        return "euclidean", "the rows all point the same way: cosine and Euclidean Gaussians"
    if np.allclose(row_sq_norms(rows), 1.0, atol=2e-6):
        return "euclidean", ("unit-length rows (angular and Euclidean Gaussians coincide): "
                             "cosine and Euclidean Gaussians")
    if zeros < ANGULAR_MIN_ZEROS:
        return "measurements", (f"non-negative measurements ({zeros:.0%} zero entries, fewer "
                                f"than {ANGULAR_MIN_ZEROS:.0%}): Euclidean Gaussians for their "
                                "sizes, cosine and a Gaussian of the angle for their "
                                "proportions")
    return "angular", (f"intensities or counts (non-negative, {zeros:.0%} zero entries: a row's "
                       "length is mostly its overall level): cosine and Gaussians of the angle "
                       "between rows")


def median_length(rows: Any) -> float:
    """The median Euclidean length of the rows of a sample (dense or sparse)."""
    return float(np.median(np.sqrt(row_sq_norms(rows))))


#: the default's Gaussians per geometry: (family, widths in multiples of the median distance).
#: Measurements get one angular Gaussian beside the cosine: their rows nearly all point one
#: way (every cosine close to 1, so the cosine kernel is nearly constant), and a Gaussian at
#: the median angle reads their proportions at the data's own scale, as the Euclidean ones
#: read their sizes
_GAUSSIANS = {"signed": (("gaussian", WIDTHS),),
              "euclidean": (("gaussian", WIDTHS),),
              "measurements": (("gaussian", WIDTHS), ("angular", (1.0,))),
              "angular": (("angular", WIDTHS),),
              "mixed": (("gaussian", WIDTHS), ("angular", WIDTHS)),
              "column": (("gaussian", WIDTHS),)}
#: geometries without the cosine kernel
_NO_COSINE = ("column",)


def auto_kernels(geometries: list[str], lengths: list[float] | None = None) -> list[KernelSpec]:
    """The default kernels, per view: cosine and Gaussians at :data:`WIDTHS` times the median
    distance (Euclidean; ``"angular"``: of the angle; ``"measurements"``: Euclidean and one
    of the angle at the median; ``"mixed"``: both at every width; ``"column"``: Euclidean, no
    cosine; ``"signed"``: Euclidean, and the cosine of the rows lifted by :data:`LIFT` times
    ``lengths[view]``, the median length of the view's rows)."""
    specs = []
    for view, geometry in enumerate(geometries):
        if geometry == "signed":
            if lengths is None or not np.isfinite(lengths[view]) or lengths[view] < 0:
                raise ValueError(f"view {view}: the signed geometry needs the median length of "
                                 "its rows")
            # three significant digits: a readable plan, and the same kernel for data that
            # differ by round-off (columns centred from an offset of 10^9)
            specs.append(KernelSpec("polynomial", a=float(f"{(LIFT * lengths[view]) ** 2:.3g}"),
                                    b=1, view=view))
        elif geometry not in _NO_COSINE:
            specs.append(KernelSpec("linear", view=view))
        specs += [KernelSpec(family, m=m, view=view) for family, widths in _GAUSSIANS[geometry]
                  for m in widths]
    return specs


def smooth_kernels(specs: Any) -> bool:
    """Whether no kernel is narrower than the default's: every Gaussian at least half the
    median distance wide. The Nystrom factors represent those well; a width given by ``c`` or
    ``sigma`` has no known relation to the median."""
    return specs is not None and all(
        spec.family not in WIDTHED_FAMILIES or (spec.m is not None and spec.m >= min(WIDTHS))
        for spec in specs)


# -- the plan -----------------------------------------------------------------------------------

def _is_auto(value: Any) -> bool:
    return isinstance(value, str) and value == "auto"


def requested_dtype(params: dict) -> str:
    """The storage precision ``backend_options`` asks for (``"auto"`` by default), checked
    (:func:`~mkrk_dask.backends.options.dtype_name`)."""
    from .backends.options import DTYPE_CHOICES, dtype_name

    return dtype_name((params.get("backend_options") or {}).get("dtype", "auto"),
                      DTYPE_CHOICES)


def backend_settings(solver: str, params: dict, dtype: str | None = None,
                     strict: bool = True) -> dict:
    """The options of ``solver`` from the estimator's ``backend_options``, the storage
    precision set to ``dtype`` (the plan's; by default the one requested, ``"auto"`` checked
    as float64). With ``strict=False`` (``solver="auto"``) options of another backend are
    left out, and only an option no backend has is refused."""
    from .backends import option_names

    names = set(option_names(solver))
    settings = dict(params.get("backend_options") or {})
    requested = requested_dtype(params)
    settings.pop("dtype", None)  # the plan's, for every solver (the exact one stores none)
    if not strict:
        known = set().union(*(option_names(s) for s in ("exact", "blockwise", "nystrom")))
        unknown = sorted(set(settings) - known)
        if unknown:
            raise ValueError(f"unknown backend option(s) {', '.join(map(repr, unknown))}; "
                             f"no backend has them")
        settings = {k: v for k, v in settings.items() if k in names}
    if "dtype" in names:
        settings["dtype"] = dtype or ("float64" if _is_auto(requested) else requested)
    return settings


def resolve_options(solver: str, params: dict, n: int, m: int, dtype: str,
                    strict: bool) -> dict:
    """The backend options of ``solver`` (:func:`backend_settings`), every ``"auto"`` among
    them resolved for ``n`` rows and ``m`` kernels."""
    from .backends import make_options

    options = make_options(solver, **backend_settings(solver, params, dtype, strict))
    _refuse_tiny_chunks(getattr(options, "chunk_size", None), n)
    if solver == "nystrom":
        options = replace(
            options, max_components=options.resolved_max_components(n, m),
            landmark_oversampling=options.resolved_landmark_oversampling(n, m),
            exact_dissimilarity_max_n=options.exact_dissimilarity_limit(m))
    return {f.name: getattr(options, f.name) for f in fields(options)}


def _refuse_tiny_chunks(chunk_size: int | None, n: int) -> None:
    """A chunk size that cuts the rows into more than :data:`MAX_ROW_BLOCKS` blocks starts
    work that never ends: refused before it starts, with the least one that is taken."""
    from .validation import MAX_ROW_BLOCKS

    if chunk_size is not None and -(-n // chunk_size) > MAX_ROW_BLOCKS:
        least = -(-n // MAX_ROW_BLOCKS)
        raise ValueError(f"chunk_size={chunk_size} cuts the {n:,} rows into "
                         f"{-(-n // chunk_size):,} blocks (at most {MAX_ROW_BLOCKS:,}); give "
                         f"at least {least:,} rows a block, or leave it unset to have it chosen")


def _solver(params: dict, n: int, m: int, specs: Any, precomputed: bool,
            lazy: bool) -> tuple[str, str, str, str]:
    """``(solver, its reason, dtype, its reason)``; the reason ends with the store's size,
    refused where it would not fit the free disk where it goes (before anything is
    written)."""
    from .auto import check_store_fits, free_disk_at, store_bytes
    from .backends import make_options

    solver, reason, dtype, dtype_reason = _choose_solver(params, n, m, specs, precomputed,
                                                         lazy)
    rank = None
    if solver == "nystrom":
        nystrom = make_options("nystrom", **backend_settings("nystrom", params, strict=False))
        if nystrom.factors_storage(n, m):
            rank = min(min(int(np.max(nystrom.n_landmarks)), n) * m,
                       nystrom.resolved_max_components(n, m) or np.inf)
    needed = store_bytes(solver, n, m, np.dtype(dtype).itemsize, rank)
    if not needed:  # in memory: nothing to write
        return solver, reason, dtype, dtype_reason
    store = params.get("store")
    size = check_store_fits(solver, needed, free_disk_at(store), store)
    return solver, f"{reason}; {size}", dtype, dtype_reason


def _choose_solver(params: dict, n: int, m: int, specs: Any, precomputed: bool,
                   lazy: bool) -> tuple[str, str, str, str]:
    """``(solver, its reason, dtype, its reason)``."""
    from .auto import choose_precomputed_solver, choose_solver, smooth_exact_max_n
    from .backends import make_options
    from .exceptions import ProblemTooLargeError

    solver, dtype = params["solver"], requested_dtype(params)
    auto_dtype = _is_auto(dtype)
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


def _final(params: dict, n: int, k: int, *, line: bool = False, corners: bool = False
           ) -> tuple[list[Decision], str, int, str, int]:
    """The final step, its rank and the final partition; ``line``: the data are one number
    (one view of one column); ``corners``: every column takes two values."""
    step, rank, clustering = params["final_step"], params["n_components"], \
        params["final_clustering"]
    decisions = []
    if _is_auto(step):
        step_used = "features"
        decisions.append(Decision("final step", "features", "k-means on the unit rows of the "
                                  "features V sqrt(mu) of the top eigenpairs of the learned "
                                  "kernel: a low-rank kernel k-means, one eigendecomposition"))
    else:
        step_used = step
        decisions.append(Decision("final step", step, "given", auto=False))
    if _is_auto(rank):
        rank_used = k if step_used == "spectral" else max(1, min(2 * k, n - 1))
        why = ("the loop's top k eigenvectors (the paper's step)" if step_used == "spectral"
               else "2k: room for each cluster's direction and its spread")
        decisions.append(Decision("n_components", str(rank_used), why))
    else:
        rank_used = int(rank)
        decisions.append(Decision("n_components", str(rank_used), "given", auto=False))
    anchors = min(GRAPH_ANCHORS, n // GRAPH_ROWS_PER_ANCHOR)
    graph_possible = anchors >= max(k, GRAPH_NEIGHBORS)
    # A row's nearest anchors should lie in its own cluster: with fewer anchors a cluster
    # (on average) than neighbours, the graph joins every row to other clusters too.
    graph_local = anchors >= k * GRAPH_NEIGHBORS
    if _is_auto(clustering):
        used = ("graph" if _is_auto(step) and graph_local and not (line or corners)
                else "kmeans")
        sample = ("" if n <= GRAPH_SAMPLE_ROWS else
                  f", built on a uniform sample of {GRAPH_SAMPLE_ROWS:,} rows that labels the "
                  "others")
        if used == "graph":
            why = (f"k-means partition refined by spectral clustering on the anchor graph of "
                   f"the final rows ({anchors} anchors, {GRAPH_NEIGHBORS} nearest{sample}), "
                   f"kept where its NMI with a k-means partition of "
                   f"{reference_inits('graph', int(params['n_init']))} restarts reaches "
                   f"{GRAPH_MIN_AGREEMENT} or where the graph clearly has {k} parts (its "
                   f"eigengap; or, where it has more parts with no edge between them, {k} "
                   f"of at least {GRAPH_CLEAR_ROWS} rows beside stray ones, which costs one "
                   "more pass of the graph's rows to their anchors)")
        elif not graph_possible:
            why = f"k-means (too few rows for a graph of {k} clusters)"
        elif not _is_auto(step):
            why = "k-means (an explicit final step: the paper's configuration)"
        elif line:
            # three groups on a line: the graph split off a few rows of a tail and joined two
            # groups (tests/test_plan.py checks such data against k-means)
            why = ("k-means (one column: the rows lie on a line, whose anchor graph is a "
                   "path, and a path's spectral cuts fall at its sparse tails, not between "
                   "the groups)")
        elif corners:
            # binary data: wherever kept, the graph lost to k-means (docs/defaults.rst)
            why = ("k-means (every column takes two values: the rows are corners of a box, "
                   "with no curved cluster for a graph of near rows to follow; on binary "
                   "data the graph lost to k-means, docs/defaults.rst)")
        else:
            why = (f"k-means ({anchors} anchors, {anchors / k:.1f} a cluster, fewer than the "
                   f"{GRAPH_NEIGHBORS} nearest each row is joined to: too few rows a cluster "
                   "for a local graph)")
        decisions.append(Decision("final partition", used, why))
    else:
        used = clustering if (clustering == "kmeans" or graph_possible) else "kmeans"
        decisions.append(Decision("final partition", used, "given" if used == clustering else
                                  "k-means: too few rows for a graph", auto=used != clustering))
    return decisions, step_used, rank_used, used, anchors if used == "graph" else 0


def _view_weights(method: str, params: dict, n_views: int, solver: str) -> tuple[str, str]:
    """``("agreement" or "equal", the reason)``: where MKKM-RK's weights stay equal (the
    default: lambda 1, ``sfn``, normalised; every kernel represents itself), three or more
    views are weighed by their agreement (:mod:`mkrk_dask.view_agreement`), on the exact
    backend (one eigendecomposition and one k-means per view)."""
    from .view_agreement import MIN_VIEWS

    given = params.get("view_weights", "auto")
    if not _is_auto(given):
        return given, "given"
    if n_views < MIN_VIEWS:
        return "equal", (f"{n_views} view(s): the views' agreement needs {MIN_VIEWS} or more "
                         "(with two it is one number for both)" if n_views else
                         "precomputed kernels")
    equal = (method == "MKKM-RK" and float(params.get("lam", 0.0)) == 1.0
             and params.get("dissimilarity") == "sfn"
             and params.get("lam_scaling") == "normalized")
    if not equal:
        return "equal", "the method learns the weights"
    if solver != "exact":
        return "equal", (f"the {solver} backend (the views' own partitions are made where the "
                         "kernels are in memory)")
    return "agreement", (f"{n_views} views, each weighted by the adjusted mutual information of "
                         "its own partition with the other views' (a view that agrees with no "
                         "other, such as noise, drops out); the views' kernels share its weight")


def reference_inits(final_clustering: str, n_init: int) -> int:
    """Restarts of a fit's first k-means partition: ``n_init`` where it is the fit's answer;
    at most :data:`GRAPH_REFERENCE_INITS` where a final graph is planned, which needs it only
    to check the graph's partition against (made again with ``n_init`` where the graph is
    not kept)."""
    return min(n_init, GRAPH_REFERENCE_INITS) if final_clustering == "graph" else n_init


def _kmeans_cost(clustering: str, n_init: int) -> int | str:
    """The k-means runs a fit makes (:func:`reference_inits`)."""
    if clustering != "graph":
        return 1
    reference = reference_inits(clustering, n_init)
    again = "; 3 where the graph is not kept" if reference < n_init else ""
    return f"2 (the graph's, and one of {reference} restarts it is checked against{again})"


def _refuse_zero_widths(specs: Any, rows: list) -> None:
    """A plan for data the fit refuses is refused: a width relative to the median distance
    of a view whose sampled rows are one point (the fit reads the same sample)."""
    from .kernels import medians_needed, zero_median_error
    from .scales import one_point

    needed = medians_needed(specs)
    for spec in specs:
        if (spec.view, spec.family) in needed and one_point(rows[spec.view], spec.family):
            raise zero_median_error(spec)


def make_plan(method: str, params: dict, data: Any, *, precomputed: bool) -> FitPlan:
    """The plan of a fit of ``params`` (an estimator's ``get_params()``, validated, every
    backend option in ``backend_options``) on ``data``: the validated views, or the
    ``(m, n, n)`` precomputed kernels.

    Reads a uniform sample of at most :data:`SAMPLE_ROWS` rows of each view (the column
    scales and the geometry), nothing else of the data.
    """
    from .kernels import as_kernel_specs
    from .validation import is_lazy

    k = int(params["n_clusters"])
    decisions: list[Decision] = []
    if precomputed:
        n, m, n_views = int(data.shape[1]), int(data.shape[0]), 0
        scaling: tuple[ColumnScaling, ...] = ()
        specs = None
        decisions.append(Decision("kernels", f"{m} precomputed", "given", auto=False))
        lazy = is_lazy(data)
    else:
        n, n_views = int(data[0].shape[0]), len(data)
        lazy = any(is_lazy(v) for v in data)
        samples = [view_sample(v) for v in data]
        chosen = [preprocess(params.get("preprocessing", "none"), v, s)
                  for v, s in zip(data, samples, strict=True)]
        scaling = tuple(c for c, _ in chosen)
        for v, (c, why) in enumerate(chosen):
            decisions.append(Decision("preprocessing" + (f" (view {v})" if n_views > 1 else ""),
                                      c.method, why,
                                      auto=_is_auto(params.get("preprocessing", "none"))))
        rows = [s if c.method == "none" else c.apply(s)
                for s, c in zip(samples, scaling, strict=True)]
        if _is_auto(params["kernels"]):
            geometries = [_geometry(r) for r in rows]
            specs = auto_kernels([g for g, _ in geometries], [median_length(r) for r in rows])
            why = "; ".join(dict.fromkeys(r for _, r in geometries))
            decisions.append(Decision("kernels", ", ".join(s.name for s in specs), why))
        else:
            specs = as_kernel_specs(params["kernels"], n_views=n_views)
            decisions.append(Decision("kernels", ", ".join(s.name for s in specs), "given",
                                      auto=False))
        _refuse_zero_widths(specs, rows)
        m = len(specs)
    solver, solver_reason, dtype, dtype_reason = _solver(params, n, m, specs, precomputed,
                                                         lazy)
    decisions.append(Decision("solver", solver, solver_reason, auto=_is_auto(params["solver"])))
    decisions.append(Decision("dtype", dtype, dtype_reason, auto=_is_auto(requested_dtype(params))))
    options = resolve_options(solver, params, n, m, dtype,
                              strict=not _is_auto(params["solver"]))
    view_weights, why = _view_weights(method, params, n_views, solver)
    decisions.append(Decision("view weights", view_weights, why,
                              auto=_is_auto(params.get("view_weights", "auto"))))
    line = n_views == 1 and int(data[0].shape[1]) == 1
    # read only where the partition is the plan's to choose
    corners = (not precomputed and _is_auto(params["final_clustering"])
               and all(two_valued(s) for s in samples))
    final, step, rank, clustering, anchors = _final(params, n, k, line=line, corners=corners)
    decisions += final
    iterations = int(params.get("max_iter", 100))
    # SimpleMKKM's line search makes an H-step per trial point (docs/methods.rst measures
    # 1.8-2.2 a step with direction="scaled", 18.5-18.9 with the authors' "reduced")
    per_step = ({"scaled": "about 2", "reduced": "about 19"}[params["direction"]]
                if method == "SimpleMKKM" else None)
    # the first H-step is made at the final rank, and serves as the final one where the
    # weights end where they started (MKKM-RK's default: every kernel represents itself)
    shared = ("" if step == "spectral" and rank == k else
              f" (none where the weights stay: the first is made at rank {rank})")
    cost = {"fits": 1, "eigendecompositions":
            f"<= {iterations} (one per iteration) + 1 final{shared}" if per_step is None else
            f"<= {iterations} iterations x {per_step} (one per line-search point) + 1 final"
            f"{shared}",
            "kmeans": _kmeans_cost(clustering, int(params["n_init"])),
            "graph": 1 if clustering == "graph" else 0,
            "passes": ("none (in memory)" if solver == "exact" else
                       "3 per iteration (blockwise)" if solver == "blockwise" else
                       "3 + 1 final (Nystrom: scales, factors, exact C or Gram; final rows)")}
    plan = FitPlan(method=method, n_samples=n, n_views=n_views, scaling=scaling,
                   kernels=None if specs is None else tuple(specs), solver=solver,
                   dtype=dtype, options=options, final_step=step, n_components=rank,
                   final_clustering=clustering, graph_anchors=anchors,
                   graph_rows=min(n, GRAPH_SAMPLE_ROWS) if anchors else 0,
                   missed_warning=(DEFAULT_KERNELS_MISSED_WARNING if _is_auto(params["kernels"])
                                   else APPROXIMATION_WARNING),
                   decisions=tuple(decisions), cost=cost, view_weights=view_weights)
    # its expected seconds: a short calibration on the same sample (plan_time.py)
    from .plan_time import FinalCounts, with_expected_time

    return with_expected_time(plan, None if precomputed else rows, params, n_kernels=m,
                              counts=FinalCounts(reference_inits(clustering,
                                                                 int(params["n_init"])),
                                                 GRAPH_ANCHOR_ITERATIONS, GRAPH_NEIGHBORS))

