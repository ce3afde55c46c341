"""The scikit-learn face shared by the multiple kernel k-means estimators.

:class:`MultipleKernelKMeans` holds everything but the method: input validation (numpy,
scipy.sparse, dask and Zarr arrays, several views, precomputed kernels), the backend
(:func:`mkrk_dask.backends.make_backend`), the final step, ``predict`` / ``transform`` (from
:class:`~mkrk_dask.estimators._out_of_sample.OutOfSampleMixin`) and the fitted attributes
common to all. A method subclasses it with its own parameters and
:meth:`MultipleKernelKMeans._run`, the alternating loop with its weight step.
"""

from __future__ import annotations

import contextlib
import copy
import hashlib
import inspect
import json
import numbers
import os
import time
import warnings
from dataclasses import replace
from numbers import Integral, Real
from typing import Any

import numpy as np
from sklearn.base import (
    BaseEstimator,
    ClassNamePrefixFeaturesOutMixin,
    ClusterMixin,
    TransformerMixin,
)
from sklearn.utils._param_validation import HasMethods, Interval, StrOptions
from sklearn.utils.validation import check_is_fitted

from .. import progress
from .._compute import compute_here
from .._threads import local_threads
from ..assignment import FINAL_STEP_CHOICES
from ..backends import KernelBackend, make_backend, make_options, option_names
from ..backends.base import APPROXIMATION_WARNING
from ..backends.options import DTYPE_CHOICES
from ..cluster import is_client
from ..exceptions import NystromApproximationWarning
from ..kernels import KernelSpec, as_kernel_specs
from ..landmarks import LANDMARK_METHODS
from ..precomputed import check_precomputed, kernel_stack
from ..solver import SELECTION_THRESHOLD, IterationInfo, SolverResult, selected_kernels
from ..validation import (
    LAM_SCALINGS,
    TOL_MODES,
    check_choice,
    check_feature_views,
    check_lambda,
    check_n_clusters,
    is_lazy,
    materialize,
)
from ._final import (
    FINAL_CLUSTERINGS,
    GRAPH_MIN_AGREEMENT,
    GRAPH_NEIGHBORS,
    final_embedding,
    fitted_final_step,
    graph_partition,
    uses_graph,
)
from ._out_of_sample import OutOfSampleMixin
from ._solver_choice import choose_for
from ._summary import approximation_lines

__all__ = ["MultipleKernelKMeans", "SOLVERS"]

SOLVERS = ("exact", "blockwise", "nystrom", "auto")


class MultipleKernelKMeans(OutOfSampleMixin, ClassNamePrefixFeaturesOutMixin, TransformerMixin,
                           ClusterMixin, BaseEstimator):
    """Base class of the multiple kernel k-means estimators; not for direct use.

    Subclasses define ``__init__`` (scikit-learn reads the parameters from its signature),
    :attr:`method` and :meth:`_run`, and may extend :attr:`_parameter_constraints`,
    :meth:`_check_method_params` and :meth:`_set_method_fitted`.
    """

    #: the method's name, as in the paper's Table 2
    method: str = ""

    #: the settings of the paper's Table 2 (its 12 kernels, exact, the spectral final step,
    #: lambda as given); :meth:`paper` builds an estimator with them
    PAPER_SETTINGS: dict = {}

    @classmethod
    def paper(cls, n_clusters: int = 8, **params: Any) -> MultipleKernelKMeans:
        """The paper-faithful configuration (:attr:`PAPER_SETTINGS`), any of it overridable.

        Examples
        --------
        >>> from mkrk_dask import MKKMRK
        >>> MKKMRK.paper(10, lam=2**-10).get_params()["dissimilarity"]
        'fip'
        """
        return cls(n_clusters, **{**cls.PAPER_SETTINGS, **params})

    _parameter_constraints: dict = {
        "n_clusters": [Interval(Integral, 1, None, closed="left")],
        "kernels": [str, list, tuple],
        "solver": [StrOptions(set(SOLVERS))],
        "normalize": ["boolean"],
        "tol": [Interval(Real, 0, None, closed="neither")],
        "tol_mode": [StrOptions(set(TOL_MODES))],
        "max_iter": [Interval(Integral, 1, None, closed="left")],
        "n_init": [Interval(Integral, 1, None, closed="left")],
        "store": [None, str, os.PathLike],
        "storage_options": [None, dict],
        "scheduler": [None, str, HasMethods(["submit", "scatter"])],
        "chunk_size": [None, Interval(Integral, 1, None, closed="left")],
        "n_landmarks": [Interval(Integral, 1, None, closed="left"), "array-like"],
        "landmarks": [StrOptions(set(LANDMARK_METHODS))],
        "dtype": [StrOptions(set(DTYPE_CHOICES)), type, np.dtype],
        "backend_options": [None, dict],
        "final_step": [StrOptions(set(FINAL_STEP_CHOICES))],
        "final_clustering": [StrOptions(set(FINAL_CLUSTERINGS))],
        "n_components": [StrOptions({"auto"}), Interval(Integral, 1, None, closed="left")],
        "random_state": ["random_state"],
        "verbose": ["verbose"],
    }

    # -- validation -----------------------------------------------------------------------

    def _check_params(self) -> None:
        """Every parameter, before any work: the common ones (with messages that name the
        problem), the method's, then scikit-learn's declarative constraints."""
        check_n_clusters(self.n_clusters, np.iinfo(np.int64).max)
        check_choice("solver", self.solver, SOLVERS)
        check_choice("tol_mode", self.tol_mode, TOL_MODES)
        check_choice("final_step", self.final_step, FINAL_STEP_CHOICES)
        check_choice("final_clustering", self.final_clustering, FINAL_CLUSTERINGS)
        if not isinstance(self.tol, numbers.Real) or not self.tol > 0:
            raise ValueError(f"tol must be a positive number, got {self.tol!r}")
        for name in ("max_iter", "n_init"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        if not (self.n_components == "auto" or (
                isinstance(self.n_components, numbers.Integral)
                and not isinstance(self.n_components, bool) and self.n_components >= 1)):
            raise ValueError(f"n_components must be 'auto' or a positive integer, got "
                             f"{self.n_components!r}")
        if (self.final_step == "spectral" and self.n_components != "auto"
                and self.n_components < self.n_clusters):
            # The unit rows of fewer eigenvectors than clusters cannot tell the clusters apart
            # (of one eigenvector they are +-1): k-means would return fewer clusters.
            raise ValueError(f"final_step='spectral' needs n_components >= n_clusters "
                             f"({self.n_clusters}), got {self.n_components}; use "
                             f"final_step='features' for fewer eigenpairs")
        if isinstance(self.dtype, str) and self.dtype not in DTYPE_CHOICES:
            raise ValueError(f"dtype must be one of {DTYPE_CHOICES}, got {self.dtype!r}")
        if self.solver == "exact" and self.store is not None:
            # It would be ignored: the user would believe the fit resumable.
            raise ValueError("store applies to solver='blockwise' or 'nystrom' (or 'auto'); "
                             "the exact backend keeps its kernels in memory")
        if self.backend_options is not None and not isinstance(self.backend_options, dict):
            raise ValueError(f"backend_options must be a dict or None, got "
                             f"{type(self.backend_options).__name__}")
        self._check_method_params()
        # The settings of every backend the fit could use, validated now (not after a build).
        for solver in (("exact", "blockwise", "nystrom") if self.solver == "auto"
                       else (self.solver,)):
            self._backend_options(solver, strict=self.solver != "auto")
        # What the checks above do not cover (types of the other parameters).
        self._validate_params()

    def _check_method_params(self) -> None:  # noqa: B027 - optional hook
        """Checks of the method's own parameters (one-line errors)."""

    def _check_trade_off(self) -> None:
        """``lam``, ``lam_scaling`` and ``qp_gap_tol`` of a method with a lambda and a QP."""
        check_lambda(self.lam)
        check_choice("lam_scaling", self.lam_scaling, LAM_SCALINGS)
        if not isinstance(self.qp_gap_tol, numbers.Real) or not self.qp_gap_tol > 0:
            raise ValueError(f"qp_gap_tol must be a positive number, got {self.qp_gap_tol!r}")

    def _backend_options(self, solver: str, strict: bool = True) -> Any:
        """The typed options of ``solver`` from the estimator's parameters and
        ``backend_options``. With ``strict=False`` (``solver="auto"``), options that belong to
        another backend are left out instead of refused."""
        names = set(option_names(solver))
        settings = {key: getattr(self, key) for key in ("chunk_size", "dtype", "n_landmarks",
                                                          "landmarks") if key in names}
        if "dtype" in settings:
            settings["dtype"] = self._storage_dtype()
        extra = dict(self.backend_options or {})
        # backend_options may set what the parameter leaves at its default, not both.
        defaults = {k: v.default for k, v in inspect.signature(type(self)).parameters.items()}
        twice = sorted(k for k in set(extra) & set(settings)
                       if settings[k] is not defaults[k] and settings[k] != defaults[k])
        for key in set(extra) & set(settings):
            settings.pop(key)
        if twice:
            raise ValueError(f"{', '.join(twice)} given both as a parameter and in "
                             "backend_options; give it once")
        if not strict:
            known = set().union(*(option_names(s) for s in ("exact", "blockwise", "nystrom")))
            unknown = sorted(set(extra) - known)
            if unknown:
                raise ValueError(f"unknown backend option(s) {', '.join(map(repr, unknown))}; "
                                 f"no backend has them")
            extra = {k: v for k, v in extra.items() if k in names}
        return make_options(solver, **settings, **extra)

    def _prepare_input(self, X: Any) -> tuple[list | np.ndarray, list[KernelSpec] | None, int]:
        """Validated views (or precomputed kernels), kernel specs (None for precomputed
        kernels and for ``kernels="auto"``) and n_samples.

        Records what the features were: ``n_features_per_view_`` (one count per view) and
        ``n_features_in_``, their total (the single view's count for one matrix);
        ``feature_names_in_`` only for one matrix with string column names (precomputed
        kernels have no features)."""
        if isinstance(self.kernels, str) and self.kernels == "precomputed":
            # Shapes now; the values when the backend is chosen (_make_backend): the exact
            # backend checks them while making its normalised copy.
            K = kernel_stack(X)
            return K, None, K.shape[1]
        # Dask and Zarr input stays where it is: shape and dtype now, values as the first
        # pass reads them.
        views = check_feature_views(self, X, reset=True)
        self.n_features_per_view_ = tuple(int(v.shape[1]) for v in views)
        self.n_features_in_ = sum(self.n_features_per_view_)
        # kernels="auto" has no specs of its own: each candidate dictionary brings them.
        auto = isinstance(self.kernels, str) and self.kernels == "auto"
        specs = None if auto else as_kernel_specs(self.kernels, n_views=len(views))
        return views, specs, int(views[0].shape[0])

    def _storage_dtype(self) -> Any:
        """The storage precision: ``dtype``, or what ``dtype="auto"`` resolved to
        (:meth:`_choose_solver`)."""
        if self._auto_dtype():
            return getattr(self, "_dtype_used", "float64")
        return self.dtype

    def _auto_dtype(self) -> bool:
        return isinstance(self.dtype, str) and self.dtype == "auto"

    def _choose_solver(self, n_samples: int, n_kernels: int, precomputed: bool = False,
                       lazy: bool = False, specs: list[KernelSpec] | None = None) -> str:
        """The solver, and what ``dtype="auto"`` stores (:func:`._solver_choice.choose_for`)."""
        return choose_for(self, n_samples, n_kernels, precomputed=precomputed, lazy=lazy,
                          specs=specs)

    def _make_backend(self, data: Any, specs: list[KernelSpec] | None) -> KernelBackend:
        """The backend for the chosen solver, made by :func:`mkrk_dask.backends.make_backend`."""
        n_samples = data.shape[1] if specs is None else data[0].shape[0]
        lazy = specs is None and is_lazy(data)
        solver = self._choose_solver(n_samples, data.shape[0] if specs is None else len(specs),
                                     precomputed=specs is None, lazy=lazy, specs=specs)
        if specs is None and solver == "nystrom":
            raise ValueError("solver='nystrom' needs features, not precomputed kernels")
        if specs is None and solver != "exact":
            data = check_precomputed(data)
        options = self._backend_options(solver, strict=self.solver != "auto")
        self._solver_used = solver
        if solver == "exact" and specs is not None and any(is_lazy(v) for v in data):
            data = materialize(data)  # dense kernels in memory: the data fit there too
        if solver == "exact" and lazy:
            # Read whole for the exact backend; the array read is the fit's own, so it is
            # prepared in place instead of copied again.
            data = np.ascontiguousarray(compute_here(data), dtype=np.float64)
            options = replace(options, copy=False)
        inputs = dict(kernels=data) if specs is None else dict(views=data, specs=specs)
        return make_backend(options, **inputs, normalize=self.normalize, store=self.store,
                            storage_options=self.storage_options, scheduler=self.scheduler,
                            random_state=self.random_state)

    def _check_backend(self, backend: KernelBackend) -> None:  # noqa: B027 - optional hook
        """Refuse a backend the method cannot use (before any iteration)."""

    def _build(self, X: Any) -> tuple[KernelBackend, int]:
        """Validate everything and build the backend; shared with :func:`lambda_search`."""
        self._check_params()
        data, specs, n_samples = self._prepare_input(X)
        check_n_clusters(self.n_clusters, n_samples)
        if self.n_components != "auto" and self.n_components > n_samples - 1:
            raise ValueError(f"n_components={self.n_components} is more than the "
                             f"{n_samples - 1} eigenpairs that {n_samples} samples allow "
                             "(n_samples - 1)")
        backend = self._make_backend(data, specs)
        try:
            self._check_backend(backend)
        except BaseException:
            backend.close()
            raise
        return backend, n_samples

    # -- fitting ----------------------------------------------------------------------------

    def _progress(self, info: IterationInfo) -> None:
        progress.reporter().log(
            f"[{type(self).__name__}] iter {info.iteration:3d}  objective "
            f"{info.objective:.10g}  change {info.change:.3g}  gap {info.qp_relative_gap:.1e}  "
            f"{info.seconds:.2f}s")

    def _fit_key(self, *names: str) -> str:
        """What identifies this fit's loop in a store: a checkpoint saved by a fit with other
        settings is never resumed."""
        settings = {k: getattr(self, k) for k in (
            "n_clusters", "tol", "tol_mode", "max_iter", *names)}
        text = json.dumps({"method": self.method, **settings}, sort_keys=True, default=str)
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    def _run(self, backend: KernelBackend) -> SolverResult:
        """The method's alternating loop on ``backend`` (subclasses)."""
        raise NotImplementedError

    def _loop_inputs(self, backend: KernelBackend) -> dict:
        """What the loop needs that no lambda changes (C, M): :func:`lambda_search` computes it
        once per backend."""
        return {}

    def _search_loop(self, backend: KernelBackend, inputs: dict, lam: float) -> SolverResult:
        """The loop at ``lam`` with ``inputs`` from :meth:`_loop_inputs` (methods with a
        lambda)."""
        raise ValueError(f"{self.method} has no lambda to search")

    def _reporting(self) -> Any:
        """Progress at ``verbose`` (on stderr), unless a caller (the CLI) already reports."""
        if progress.is_active():
            return contextlib.nullcontext()
        return progress.reporting(int(self.verbose or 0))

    def fit(self, X: Any, y: Any = None) -> MultipleKernelKMeans:
        """Learn the kernel weights and cluster ``X``.

        Parameters
        ----------
        X : array-like, sparse matrix, dask or Zarr array, list of views, or precomputed kernels
            ``(n_samples, n_features)`` features; a list of such matrices (one per view); or,
            with ``kernels="precomputed"``, an ``(m, n, n)`` array / list of ``(n, n)`` kernels.
        y : ignored

        Returns
        -------
        self
        """
        self._clear_fitted()
        if isinstance(self.kernels, str) and self.kernels == "auto":
            from ._dictionary import fit_auto_dictionary

            return fit_auto_dictionary(self, X)
        started = time.perf_counter()
        with self._reporting():
            backend, n_samples = self._build(X)
            built = time.perf_counter()
            with backend:
                with local_threads(backend.compute_threads()):
                    result = self._run(backend)
                    looped = time.perf_counter()
                    top, embedding, labels, fitted = final_embedding(self, backend, result,
                                                                     n_samples)
                # The small map of new rows to H that predict/transform use, where one exists.
                row_map = backend.row_map(top)
                approximation = backend.approximation(result.weights)
        # Only now, the backend's checks passed (leaving the block waited for them).
        embedded = time.perf_counter()
        for name, value in fitted.items():
            setattr(self, name, value)
        self.feature_scale_ = (np.sqrt(np.maximum(top.eigenvalues, 0.0))
                               if self.final_step_ == "features" else None)
        if uses_graph(self):
            labels, graph = graph_partition(self, embedding, labels, self.final_step_)
        else:
            graph = {"final_clustering_": "kmeans", "final_graph_": None,
                     "final_graph_agreement_": None}
        for name, value in graph.items():
            setattr(self, name, value)
        self._set_fitted(result, embedding, backend.kernel_specs, labels)
        self._set_out_of_sample(row_map, embedding)
        self._set_approximation(approximation, result)
        self.timings_.update(build=built - started, embedding=embedded - looped,
                             kmeans=time.perf_counter() - embedded,
                             fit=time.perf_counter() - started)
        return self

    def _clear_fitted(self) -> None:
        """Remove every fitted attribute of an earlier fit: a refit with other settings (a
        solver, a dictionary) must not keep attributes, or a ``summary()`` line, that only
        the earlier fit had."""
        for name in [a for a in vars(self) if a.endswith("_") and not a.startswith("__")]:
            delattr(self, name)
        for name in ("_solver_used", "_dtype_used"):  # what solver/dtype="auto" chose
            self.__dict__.pop(name, None)

    def _set_approximation(self, report: Any, result: Any) -> None:
        """What an approximate backend misses of every kernel and of ``K_w``; warn if much."""
        if report is None:
            return
        residual, missed = report.residual_fractions, report.missed_fraction
        self.nystrom_residual_ = residual
        self.nystrom_missed_fraction_ = missed
        self.nystrom_ranks_ = report.ranks
        if missed > APPROXIMATION_WARNING:
            share = result.weights**2 * residual * result.traces
            worst = [p for p in np.argsort(-share) if share[p] > 0.1 * share.max()]
            names = ", ".join(f"{self.kernel_names_[p]} ({residual[p]:.0%} of its trace)"
                              for p in worst)
            warnings.warn(
                f"the Nystrom factors miss {missed:.0%} of the trace of the learned combined "
                f"kernel, mostly of {names}; the H-step did not see that part, so the "
                "weights and labels can differ from the exact solution's. Give these kernels "
                "more landmarks (n_landmarks accepts one count per kernel), or use "
                "solver='exact' or 'blockwise' if n allows.",
                NystromApproximationWarning, stacklevel=3)

    def _set_fitted(self, result: SolverResult, embedding: np.ndarray,
                    specs: list[KernelSpec] | None, labels: np.ndarray) -> None:
        self.weights_ = result.weights
        self.embedding_ = embedding
        self.objective_history_ = result.objective_history
        self.n_iter_ = result.n_iter
        self.converged_ = result.converged
        self.traces_ = result.traces
        self.timings_ = dict(result.timings)
        self.selected_kernels_ = selected_kernels(result.weights)
        self.kernels_ = specs
        self.kernel_names_ = ([s.name for s in specs] if specs is not None
                              else [f"K{p}" for p in range(len(result.weights))])
        self.solver_ = getattr(self, "_solver_used", self.solver)
        self.dtype_ = str(np.dtype(self._storage_dtype()))
        self._set_method_fitted(result)
        self.labels_ = labels

    def _kmeans_dtype(self) -> np.dtype:
        """float32 rows for the final k-means where the user chose float32 storage (the
        scaled backends): at millions of rows its copy of H, and sklearn's temporaries of the
        same size, are what sets the fit's peak memory. ``predict``'s centres are polished in
        float64 (:func:`~mkrk_dask.assignment.lloyd_centres`)."""
        if getattr(self, "_solver_used", self.solver) != "exact" and (
                np.dtype(self._storage_dtype()) == np.float32):
            return np.dtype(np.float32)
        return np.dtype(np.float64)

    def _set_method_fitted(self, result: SolverResult) -> None:  # noqa: B027 - optional hook
        """The method's own fitted attributes."""

    def fit_predict(self, X: Any, y: Any = None, **kwargs: Any) -> np.ndarray:
        """Fit and return ``labels_``."""
        return self.fit(X, y).labels_

    def fit_transform(self, X: Any, y: Any = None, **kwargs: Any) -> np.ndarray:
        """Fit and return ``embedding_`` (what :meth:`transform` gives on the training data)."""
        return self.fit(X, y).embedding_

    @property
    def _n_features_out(self) -> int:
        """Columns of :meth:`transform` (the embedding's)."""
        return int(self.embedding_.shape[1])

    def __sklearn_clone__(self) -> MultipleKernelKMeans:
        """``sklearn.base.clone``: a Client given as ``scheduler`` is shared with the clone (a
        connection, like ``n_jobs``), not deep-copied (which fails); every other parameter is
        cloned as usual. So ``GridSearchCV`` and ``cross_validate`` work on a cluster."""
        from sklearn.base import clone

        if not is_client(self.scheduler):
            return super().__sklearn_clone__()
        twin = copy.copy(self)
        twin.scheduler = None
        twin = clone(twin)
        twin.scheduler = self.scheduler
        return twin

    def __getstate__(self) -> dict:
        # A Client cannot be pickled: keep its scheduler's address, which a fit of the
        # unpickled estimator connects to again.
        state = dict(super().__getstate__())  # a copy: object.__getstate__ gives __dict__
        if is_client(state.get("scheduler")):
            state["scheduler"] = state["scheduler"].scheduler.address
        return state

    def __sklearn_is_fitted__(self) -> bool:
        return hasattr(self, "labels_")

    def _more_tags(self) -> dict[str, Any]:  # pragma: no cover - older scikit-learn
        return {"pairwise": self.kernels == "precomputed"}

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        tags.input_tags.pairwise = isinstance(self.kernels, str) and self.kernels == "precomputed"
        return tags

    def _summary_head(self) -> list[str]:
        return [f"{self.method}: {len(self.weights_)} kernels, {self.n_iter_} iterations "
                f"({'converged' if self.converged_ else 'max_iter'}), objective "
                f"{self.objective_history_[-1]:.10g}"]

    def summary(self) -> str:
        """A short human-readable account of the fit."""
        check_is_fitted(self)
        lines = self._summary_head() + ["weights:"]
        for p in np.argsort(-self.weights_):
            if self.weights_[p] >= SELECTION_THRESHOLD:
                lines.append(f"  {self.kernel_names_[p]:<28s} {self.weights_[p]:.4f}")
        lines += approximation_lines(self)
        lines += self._summary_choices()
        return "\n".join(lines)

    def _summary_choices(self) -> list[str]:
        """What the default path chose, and why."""
        step, rank = fitted_final_step(self), self.n_components_
        what = (f"k-means on the features of the top {rank} eigenpairs" if step == "features"
                else f"k-means on the unit rows of the top {rank} eigenvectors"
                + (", the paper's" if rank == self.n_clusters else ""))
        lines = [f"final step: {step} ({what})"]
        agreement = getattr(self, "final_graph_agreement_", None)
        if getattr(self, "final_clustering_", "kmeans") == "graph":
            lines.append(f"partition: spectral clustering on the anchor graph of those rows "
                         f"({GRAPH_NEIGHBORS} nearest anchors), NMI {agreement:.4f} with their "
                         f"k-means partition (kept from {GRAPH_MIN_AGREEMENT})")
        elif agreement is not None:
            lines.append(f"partition: k-means (the anchor graph's partition of those rows "
                         f"agreed with it at NMI {agreement:.4f}, below "
                         f"{GRAPH_MIN_AGREEMENT}: a different answer, not a refinement)")
        scores = getattr(self, "component_scores_", {})
        if sum(len(ranks) for ranks in scores.values()) > 1:
            agreement = ", ".join(f"{kind} {r} {score['agreement']:.4f}"
                                  for kind, ranks in scores.items()
                                  for r, score in ranks.items())
            lines.append(f"chosen: {step} at rank {rank}, the partition that agrees most "
                         f"with the others tried (mean NMI: {agreement})")
        if hasattr(self, "solver_reason_"):
            lines.append(f"solver: {self.solver_} ({self.solver_reason_})")
        if hasattr(self, "dictionary_"):
            scores = ", ".join(f"{g} {v:.4f}" for g, v in self.dictionary_scores_.items())
            lines.append(f"kernels: the {self.dictionary_} dictionary kept; "
                         f"{self.dictionary_reason_} (within-cluster shares: {scores})")
        return lines
