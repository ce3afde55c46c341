"""The scikit-learn face shared by the multiple kernel k-means estimators.

:class:`MultipleKernelKMeans` holds everything but the method: input validation (numpy,
scipy.sparse, dask and Zarr arrays, several views, precomputed kernels), the backend
(:func:`mkrk_dask.backends.make_backend`), the final step, ``predict`` / ``transform`` (from
:class:`~mkrk_dask.estimators._out_of_sample.OutOfSampleMixin`), ``summary()`` (from
:class:`~mkrk_dask.estimators._summary.SummaryMixin`) and the fitted attributes common to
all. A method subclasses it with its own parameters and
:meth:`MultipleKernelKMeans._run`, the alternating loop with its weight step.
"""

from __future__ import annotations

import contextlib
import copy
import hashlib
import json
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

from .. import progress
from .._compute import compute_here
from .._text import LINE_WIDTH
from .._threads import local_threads
from ..assignment import FINAL_STEP_CHOICES
from ..backends import KernelBackend, kernel_inertia, make_backend, make_options
from ..backends.construction import refuse_precomputed
from ..choices import BACKENDS, SOLVERS
from ..dask_session import is_client
from ..exceptions import NystromApproximationWarning
from ..kernel_widths import shared_samples
from ..loop import IterationInfo, SolverResult
from ..plan import (
    PREPROCESSING_CHOICES,
    FitPlan,
    backend_settings,
    make_plan,
)
from ..precomputed import check_precomputed, kernel_stack
from ..validation import (
    MAX_N_INIT,
    TOL_MODES,
    check_constraints,
    check_feature_views,
    check_n_clusters,
    is_lazy,
    materialize,
)
from ..view_agreement import agreement_weights
from ..views import default_view_names, split_named_views
from ._final import FINAL_CLUSTERINGS, FinalPartition
from ._out_of_sample import OutOfSampleMixin
from ._record import FittedRecord
from ._summary import SummaryMixin

__all__ = ["MultipleKernelKMeans", "SOLVERS"]


class MultipleKernelKMeans(SummaryMixin, OutOfSampleMixin, ClassNamePrefixFeaturesOutMixin,
                          TransformerMixin, ClusterMixin, BaseEstimator):
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
        "n_init": [Interval(Integral, 1, MAX_N_INIT, closed="both")],
        "store": [None, str, os.PathLike],
        "storage_options": [None, dict],
        "scheduler": [None, str, HasMethods(["submit", "scatter"])],
        "backend_options": [None, dict],
        "final_step": [StrOptions(set(FINAL_STEP_CHOICES))],
        "final_clustering": [StrOptions(set(FINAL_CLUSTERINGS))],
        "preprocessing": [StrOptions(set(PREPROCESSING_CHOICES))],
        "n_components": [StrOptions({"auto"}), Interval(Integral, 1, None, closed="left")],
        "random_state": ["random_state"],
        "verbose": ["verbose"],
    }

    # -- validation and the plan -------------------------------------------------------------

    def _check_params(self) -> dict:
        """Every parameter, before any work: each against its ``_parameter_constraints``
        (:func:`~mkrk_dask.validation.check_constraints`, the one place), then what involves
        several (the method's too), then the settings of every backend the fit could use.
        Returns the parameters as the plan reads them."""
        params = self.get_params(deep=False)
        check_constraints(params, self._parameter_constraints)
        if (self.final_step == "spectral" and self.n_components != "auto"
                and self.n_components < self.n_clusters):
            # The unit rows of fewer eigenvectors than clusters cannot tell the clusters apart
            # (of one eigenvector they are +-1): k-means would return fewer clusters.
            raise ValueError(f"final_step='spectral' needs n_components >= n_clusters "
                             f"({self.n_clusters}), got {self.n_components}; use "
                             f"final_step='features' for fewer eigenpairs")
        if self.solver == "exact" and self.store is not None:
            # It would be ignored: the user would believe the fit resumable.
            raise ValueError("store applies to solver='blockwise' or 'nystrom' (or 'auto'); "
                             "the exact backend keeps its kernels in memory")
        self._check_method_params()
        for solver in (BACKENDS if self.solver == "auto"
                       else (self.solver,)):
            make_options(solver, **backend_settings(solver, params,
                                                    strict=self.solver != "auto"))
        return params

    def _check_method_params(self) -> None:  # noqa: B027 - optional hook
        """Checks of the method's own parameters that involve more than one of them."""

    def _prepare_input(self, X: Any) -> tuple[Any, bool]:
        """Validated views, or precomputed kernels (``(data, precomputed)``).

        Records what the features were: ``n_features_per_view_`` (one count per view) and
        ``n_features_in_``, their total (the single view's count for one matrix);
        ``view_names_`` (a dict's keys, else ``view0``, ...);
        ``feature_names_in_`` only for one matrix with string column names (precomputed
        kernels have no features)."""
        if isinstance(self.kernels, str) and self.kernels == "precomputed":
            # Shapes now; the values when the backend is made (_make_backend): the exact
            # backend checks them while making its normalised copy.
            self.view_names_ = None
            return kernel_stack(X), True
        X, names = split_named_views(X)
        # Dask and Zarr input stays where it is: shape and dtype now, values as the first
        # pass reads them.
        views = check_feature_views(self, X, reset=True)
        self.view_names_ = names or default_view_names(len(views))
        self.n_features_per_view_ = tuple(int(v.shape[1]) for v in views)
        self.n_features_in_ = sum(self.n_features_per_view_)
        return views, False

    def _resolve(self, X: Any) -> tuple[FitPlan, Any]:
        """Validate every parameter and ``X``, and make the plan (:func:`mkrk_dask.plan.make_plan`,
        where every ``"auto"`` is resolved): ``(plan, data)``."""
        params = self._check_params()
        data, precomputed = self._prepare_input(X)
        n_samples = int(data.shape[1] if precomputed else data[0].shape[0])
        check_n_clusters(self.n_clusters, n_samples)
        if self.n_components != "auto" and self.n_components > n_samples - 1:
            raise ValueError(f"n_components={self.n_components} is more than the "
                             f"{n_samples - 1} eigenpairs that {n_samples} samples allow "
                             "(n_samples - 1)")
        plan = make_plan(self.method, params, data, precomputed=precomputed)
        return plan, data

    def plan(self, X: Any) -> FitPlan:
        """What :meth:`fit` would do on ``X``, decided without fitting: every ``"auto"``
        resolved, with its reason and the expected cost (:class:`~mkrk_dask.plan.FitPlan`).

        Reads a sample of at most 2,000 rows of every view; computes no kernel.

        Examples
        --------
        >>> from sklearn.datasets import load_wine
        >>> from mkrk_dask import MKKMRK
        >>> X, _ = load_wine(return_X_y=True)
        >>> MKKMRK(3).plan(X).decision("preprocessing").value
        'standardize'
        """
        from sklearn.base import clone

        return clone(self)._resolve(X)[0]

    def _make_backend(self, plan: FitPlan, data: Any) -> KernelBackend:
        """The backend the plan chose, made by :func:`mkrk_dask.backends.make_backend`."""
        solver, options = plan.solver, plan.backend_options()
        precomputed = plan.kernels is None
        if precomputed:
            refuse_precomputed(options)
        if precomputed and solver != "exact":
            data = check_precomputed(data)
        if not precomputed:
            data = plan.apply_scaling(data)
            if solver == "exact" and any(is_lazy(v) for v in data):
                data = materialize(data)  # dense kernels in memory: the data fit there too
        elif solver == "exact" and is_lazy(data):
            # Read whole for the exact backend; the array read is the fit's own, so it is
            # prepared in place instead of copied again.
            data = np.ascontiguousarray(compute_here(data), dtype=np.float64)
            options = replace(options, copy=False)
        inputs = (dict(kernels=data) if precomputed
                  else dict(views=data, specs=list(plan.kernels)))
        return make_backend(options, **inputs, normalize=self.normalize, store=self.store,
                            storage_options=self.storage_options, scheduler=self.scheduler,
                            random_state=self.random_state)

    def _check_backend(self, backend: KernelBackend) -> None:  # noqa: B027 - optional hook
        """Refuse a backend the method cannot use (before any iteration)."""

    def build_backend(self, X: Any) -> tuple[KernelBackend, int]:
        """Validate ``X``, plan the fit (``plan_``) and build its backend, without fitting:
        ``(backend, n_samples)``. For :func:`~mkrk_dask.lambda_search` and
        :func:`~mkrk_dask.build_store`, which run loops of their own on it; the caller closes
        the backend (``with backend:``)."""
        with shared_samples():
            plan, data = self._resolve(X)
            self.plan_ = plan
            return self._checked_backend(plan, data), plan.n_samples

    def _checked_backend(self, plan: FitPlan, data: Any) -> KernelBackend:
        """The plan's backend, closed again if the method refuses it."""
        backend = self._make_backend(plan, data)
        try:
            self._check_backend(backend)
        except BaseException:
            backend.close()
            raise
        return backend

    # -- fitting ----------------------------------------------------------------------------

    def _progress(self, info: IterationInfo) -> None:
        report = progress.reporter()
        # the change and the weight step's certified gap are the solver's diagnostics, for
        # verbose=2 (-v): nothing a user acts on at the default
        detail = (f"  change {info.change:.3g}  gap {info.qp_relative_gap:.1e}"
                  if report.wants(2) else "")
        report.log(f"[{type(self).__name__}] iter {info.iteration:3d}  objective "
                   f"{info.objective:.10g}{detail}  {info.seconds:.2f}s")

    def _fit_key(self, *names: str) -> str:
        """What identifies this fit's loop in a store: a checkpoint saved by a fit with other
        settings is never resumed."""
        settings = {k: getattr(self, k) for k in (
            "n_clusters", "tol", "tol_mode", "max_iter", *names)}
        text = json.dumps({"method": self.method, **settings}, sort_keys=True, default=str)
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    def _run(self, backend: KernelBackend, first_rank: int | None = None) -> SolverResult:
        """The method's alternating loop on ``backend`` (subclasses); ``first_rank`` as for
        :func:`~mkrk_dask.loop.alternate`."""
        raise NotImplementedError

    def solve(self, backend: KernelBackend, first_rank: int | None = None) -> SolverResult:
        """The method's loop on ``backend`` (from :meth:`build_backend`), as :meth:`fit` runs
        it, for callers that make the embedding and partition themselves (the protocol).
        With ``first_rank`` (the final embedding's rank), the first H-step makes that many
        eigenpairs, which the embedding reuses where the loop ends at its weights."""
        return self._run(backend, first_rank)

    def loop_inputs(self, backend: KernelBackend) -> dict:
        """What the loop needs that no lambda changes (C, M): :func:`lambda_search` computes it
        once per backend."""
        return {}

    def solve_lambda(self, backend: KernelBackend, inputs: dict, lam: float) -> SolverResult:
        """The loop at ``lam`` with ``inputs`` from :meth:`loop_inputs` (methods with a
        lambda)."""
        raise ValueError(f"{self.method} has no lambda to search")

    def _reporting(self) -> Any:
        """Progress at ``verbose`` (on stderr), unless a caller (the CLI) already reports."""
        stack = contextlib.ExitStack()
        if not progress.is_active():
            stack.enter_context(progress.reporting(int(self.verbose or 0)))
        # the whole fit is a stage: never silent between the named ones either
        stack.enter_context(progress.stage(f"[{type(self).__name__}] fit"))
        return stack

    def fit(self, X: Any, y: Any = None) -> MultipleKernelKMeans:
        """Learn the kernel weights and cluster ``X``, as :meth:`plan` says.

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
        clock = [("start", time.perf_counter())]

        def mark(stage: str) -> None:
            clock.append((stage, time.perf_counter()))

        # the plan's samples of lazy views serve the build's kernel widths (read once)
        with shared_samples():
            plan, data = self._resolve(X)
            with self._reporting():
                prefix = f"[{type(self).__name__}] "
                for line in plan.lines(LINE_WIDTH - len(prefix)):
                    progress.reporter().log(prefix + line)
                mark("plan")
                name = f"[{type(self).__name__}]"
                with progress.stage(f"{name} kernels"):
                    backend = self._checked_backend(plan, data)
                mark("build")
                k = self.n_clusters
                final_stage = FinalPartition(plan, k, self.n_init, self.random_state, name)
                with backend:
                    with local_threads(backend.compute_threads()):
                        with progress.stage(f"{name} weights"):
                            result = self.solve(backend, plan.n_components)
                            agreement = None
                            if plan.view_weights == "agreement":
                                result, agreement = _agreement_result(backend, result, k,
                                                                      self.random_state)
                        mark("loop")
                    final = final_stage.run(backend, result)
                    clock.extend(final.marks)
                    approximation = backend.approximation(result.weights)
                    # the kernel k-means objective of the final labels, from the backend's kernels
                    with progress.stage(f"{name} inertia"):
                        inertia = kernel_inertia(backend, result.weights, final.labels, k,
                                                 final.cluster_forms)
                    mark("inertia")
                # Only now, the backend's checks passed (leaving the block waited for them).
                mark("finish")
            mark("finish")
        record = FittedRecord(plan=plan, loop=result, final=final, specs=backend.kernel_specs,
                              inertia=inertia, view_agreement=agreement,
                              approximation=approximation,
                              timings={**result.timings, **_stage_seconds(clock)})
        self._set_fitted(record)
        return self

    def _clear_fitted(self) -> None:
        """Remove every fitted attribute of an earlier fit: a refit with other settings (a
        solver, a dictionary) must not keep attributes, or a ``summary()`` line, that only
        the earlier fit had."""
        for name in [a for a in vars(self) if a.endswith("_") and not a.startswith("__")]:
            delattr(self, name)

    def _set_fitted(self, record: FittedRecord) -> None:
        """Every fitted attribute, in one place: the record's
        (:meth:`~mkrk_dask.estimators._record.FittedRecord.attributes`), then the method's
        own; warn where an approximate backend misses more than the plan allows."""
        for name, value in record.attributes().items():
            setattr(self, name, value)
        self._set_method_fitted(record.loop)
        self._warn_approximation(record)

    def _warn_approximation(self, record: FittedRecord) -> None:
        """Warn if an approximate backend misses more of ``K_w`` than the plan allows
        (``plan.missed_warning``), naming the kernels it misses most of."""
        report, result = record.approximation, record.loop
        if report is None or report.missed_fraction <= record.plan.missed_warning:
            return
        residual, missed = report.residual_fractions, report.missed_fraction
        share = result.weights**2 * residual * result.traces
        worst = [p for p in np.argsort(-share) if share[p] > 0.1 * share.max()]
        names = ", ".join(f"{self.kernel_names_[p]} ({residual[p]:.0%} of its trace)"
                          for p in worst)
        warnings.warn(
            f"the Nystrom factors miss {missed:.0%} of the trace of the learned combined "
            f"kernel, mostly of {names}; the H-step did not see that part, so the "
            "weights and labels can differ from the exact solution's. Give these kernels "
            "more landmarks (backend_options={'n_landmarks': ...} accepts one count per "
            "kernel), or use solver='exact' or 'blockwise' if n allows.",
            NystromApproximationWarning, stacklevel=4)

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
        # Credentials never travel in a saved model: the keys are kept, the values masked.
        # (copy.copy, and so clone, keeps them: see __copy__.)
        from ..secrets import mask_options

        if state.get("storage_options"):
            state["storage_options"] = mask_options(state["storage_options"])
        return state

    def __copy__(self):
        twin = type(self).__new__(type(self))
        twin.__dict__.update(self.__dict__)
        return twin

    def __sklearn_is_fitted__(self) -> bool:
        return hasattr(self, "labels_")

    def _more_tags(self) -> dict[str, Any]:  # pragma: no cover - older scikit-learn
        return {"pairwise": self.kernels == "precomputed"}

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        tags.input_tags.pairwise = isinstance(self.kernels, str) and self.kernels == "precomputed"
        return tags


#: the stages of a fit, in order; ``timings_`` holds the seconds of each, which add up to
#: ``timings_["fit"]``
def _agreement_result(backend: KernelBackend, result: SolverResult, n_clusters: int,
                      random_state: Any) -> tuple[SolverResult, Any]:
    """The loop's result with the weights of the views' agreement
    (:func:`~mkrk_dask.view_agreement.agreement_weights`) and their top-k eigenpairs."""
    agreement = agreement_weights(backend, [s.view for s in backend.kernel_specs], n_clusters,
                                  random_state)
    top = backend.top_k(agreement.weights, n_clusters)
    top.weights = np.array(agreement.weights)
    return replace(result, weights=agreement.weights, top=top, final_top=None), agreement


STAGES = ("plan", "build", "loop", "embedding", "kmeans", "finish", "graph", "inertia")


def _stage_seconds(clock: list[tuple[str, float]]) -> dict[str, float]:
    """Seconds per stage from ``(stage, time at its end)`` marks (a stage may end twice: its
    times add), and ``fit``: all of it."""
    seconds = dict.fromkeys(STAGES, 0.0)
    for (_, before), (stage, after) in zip(clock, clock[1:], strict=False):
        seconds[stage] += after - before
    seconds["fit"] = clock[-1][1] - clock[0][1]
    return seconds
