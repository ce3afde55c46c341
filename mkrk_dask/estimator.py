"""The scikit-learn face of MKKM-RK: :class:`MKKMRK`."""

from __future__ import annotations

import contextlib
import copy
import inspect
import numbers
import warnings
from typing import Any

import numpy as np
from sklearn.base import (
    BaseEstimator,
    ClassNamePrefixFeaturesOutMixin,
    ClusterMixin,
    TransformerMixin,
)
from sklearn.utils import check_random_state
from sklearn.utils.metaestimators import available_if
from sklearn.utils.validation import check_is_fitted, validate_data

from . import progress
from .assignment import assign_clusters, lloyd_centres, nearest_centre, unit_rows
from .backends import KernelBackend, make_backend, make_options, option_names
from .backends.base import APPROXIMATION_WARNING
from .cluster import is_client
from .dissimilarity import check_measure
from .exceptions import NystromApproximationWarning
from .kernels import KernelSpec, as_kernel_specs
from .solver import SELECTION_THRESHOLD, IterationInfo, selected_kernels, solve
from .validation import (
    LAM_SCALINGS,
    TOL_MODES,
    check_choice,
    check_lambda,
    check_lazy_views,
    check_magnitude,
    check_n_clusters,
    check_precomputed,
    check_views,
    is_lazy,
    is_multiview,
    materialize,
)

__all__ = ["MKKMRK", "SOLVERS"]

SOLVERS = ("exact", "blockwise", "nystrom", "auto")


class MKKMRK(ClassNamePrefixFeaturesOutMixin, TransformerMixin, ClusterMixin, BaseEstimator):
    """Multiple kernel k-means by selecting representative kernels (Yao & Chen, AAAI 2019).

    Learns sparse, diverse weights ``w`` for a set of base kernels and clusters with the
    combined kernel ``K_w = sum_p w_p^2 K_p``. Every base kernel chooses representatives among
    the others (the matrix Y); the weight of a kernel is the mean of its row of Y.

    Parameters
    ----------
    n_clusters : int, default=8
        Number of clusters k.
    lam : float, default=2**-15
        Trade-off lambda >= 0 between the kernel k-means loss and the representation cost
        ``<C, Y>``. The paper searches 2^-15 to 2^5 and its best lambda is nearly always at the
        small end (with ``fip``, C grows like n^2, so a larger lambda soon puts all weight on
        the near-identity Gaussian); see :func:`mkrk_dask.lambda_search` and ``lam_scaling``.
    kernels : "paper", "precomputed" or list, default="paper"
        ``"paper"``: the paper's 12 kernels on every view. ``"precomputed"``: ``X`` is an
        ``(m, n, n)`` array or a list of ``(n, n)`` kernels. A list: kernel specifications
        (:class:`~mkrk_dask.KernelSpec`, strings such as ``"gaussian(c=0.1)@1"``, or dicts).
    dissimilarity : {"fip", "sfn", "vn", "ld"}, default="fip"
        The kernel dissimilarity C. ``"fip"`` (the paper's) is ``tr(K_i K_j)``; see
        :mod:`mkrk_dask.dissimilarity`.
    lam_scaling : {"none", "normalized"}, default="none"
        ``"none"`` uses lambda as the paper does; ``"normalized"`` makes it independent of the
        scales of C and of the residuals (see :func:`mkrk_dask.solver.effective_lambda`).
    solver : {"exact", "blockwise", "nystrom", "auto"}, default="exact"
        Backend. ``"exact"`` holds the m dense n x n kernels in memory. ``"blockwise"`` stores
        them in a Zarr store and computes on Dask workers. ``"nystrom"`` approximates every
        kernel by ``n_landmarks`` landmarks and scales to millions of samples. ``"auto"``
        chooses from n and the memory available and records its choice in ``solver_``.
    store : str or path-like, optional
        Zarr store for the blockwise kernels or the Nystrom factors: a path, or any URL that
        Zarr and fsspec accept (``s3://bucket/run.zarr``: the way to run on a cluster whose
        workers share no disk with the client); reopened and reused when
        it holds the same data and kernels (a lambda grid search pays for the kernels once).
        Default: a temporary store, deleted after the fit. Before any work, every worker must
        read back a marker written into it (else a one-line error says which cannot).
    storage_options : dict, optional
        fsspec options of a URL store (endpoint, credentials); default: the environment
        (``AWS_ACCESS_KEY_ID``, ``AWS_ENDPOINT_URL``, ...). Never written into the store.
    scheduler : str or distributed.Client, optional
        Dask scheduler address (``tcp://...``, ``tls://...``) or Client for the blockwise and
        Nystrom backends; default: the current Client if one is active (``with Client(...):``),
        else a local cluster started in-process (on 127.0.0.1) and shut down after the fit. An
        estimator given a Client can be cloned (the clone shares it) and pickled (its
        scheduler's address is kept).
    chunk_size : int, optional
        Rows per block of the stores (default chosen from n).
    n_landmarks : int, default=500
        Nystrom landmarks per kernel.
    landmarks : {"kmeans++", "uniform"}, default="kmeans++"
        Nystrom landmark selection.
    dtype : {"float64", "float32"}, default="float64"
        Storage precision of the blockwise kernels / Nystrom factors.
    backend_options : dict, optional
        Further options of the backend (the fields of
        :class:`~mkrk_dask.backends.ExactOptions`, :class:`~mkrk_dask.backends.BlockwiseOptions`
        or :class:`~mkrk_dask.backends.NystromOptions`; checked before any work starts), e.g.
        ``{"products": "fused", "overwrite": True}`` for the blockwise backend (see
        :class:`~mkrk_dask.backends.blockwise.BlockwiseBackend`),
        ``{"eigen_method": "lapack"}`` for the exact one, or ``{"local_threshold": 0}`` to
        turn off the Nystrom backend's sparse local part, which by default follows the exact
        solution up to n = 20,000 (see
        :class:`~mkrk_dask.backends.NystromOptions`).
    normalize : bool, default=True
        Normalise every kernel as ``K_ij / sqrt(K_ii K_jj)`` (the paper does).
    tol : float, default=1e-5
        Stopping tolerance on the change of the objective.
    tol_mode : {"absolute", "relative"}, default="absolute"
        ``"absolute"``: ``|f_t - f_{t-1}| < tol`` (the paper's). ``"relative"``: divided by
        ``|f_{t-1}|``; objectives are 1e3..1e6, where an absolute 1e-5 is very strict.
    max_iter : int, default=100
        Maximum number of alternating iterations.
    n_init : int, default=10
        Restarts of the final k-means (the paper's code uses 10).
    qp_gap_tol : float, default=1e-8
        Every Y-step solution must have a duality gap below ``qp_gap_tol * |objective|``;
        otherwise an :class:`~mkrk_dask.qp.UncertifiedSolutionWarning` is emitted.
    random_state : int, RandomState or None, default=None
        Seeds the final k-means, so that a fit is repeatable.
    verbose : int, default=0
        Progress on standard error: 1 one line per pass and per iteration, and the Dask
        dashboard's address; 2 also every eigensolver pass.

    Attributes
    ----------
    labels_ : ndarray of shape (n_samples,)
        Cluster of every sample.
    weights_ : ndarray of shape (n_kernels,)
        Learned kernel weights (sum to 1).
    representation_ : ndarray of shape (n_kernels, n_kernels)
        The representation matrix Y; ``Y[i, j]`` is how much kernel i represents kernel j.
    embedding_ : ndarray of shape (n_samples, n_clusters)
        H, the top-k eigenvectors of the combined kernel (orthonormal columns).
    dissimilarity_ : ndarray of shape (n_kernels, n_kernels)
        C.
    objective_history_ : ndarray of shape (n_iter,)
        Objective after every iteration (non-increasing).
    n_iter_ : int
        Iterations run.
    converged_ : bool
        Whether the tolerance was met within ``max_iter``.
    selected_kernels_ : ndarray of int
        Indices of the kernels whose weight is at least 1e-3 (the representative kernels;
        see :data:`mkrk_dask.solver.SELECTION_THRESHOLD`).
    kernels_ : list of KernelSpec or None
        The resolved kernels (Gaussian widths filled in); None for precomputed kernels.
    kernel_names_ : list of str
    qp_relative_gaps_ : ndarray of shape (n_iter,)
        Certified duality gap of every Y-step, relative to its objective.
    lam_effective_ : float
        The lambda the Y-step used (differs from ``lam`` under ``lam_scaling="normalized"``).
    solver_ : str
        The backend that ran.
    n_features_in_ : int
        Features seen in ``fit`` (single-view feature input only).
    timings_ : dict
        Seconds spent per phase.
    row_map_ : object
        The map of new rows to the embedding that :meth:`transform` and :meth:`predict`
        apply (feature input only): the spectral out-of-sample extension through the
        training rows (exact, blockwise), or the Nystrom landmarks and transforms.
    cluster_centers_ : ndarray of shape (n_clusters, n_clusters)
        Centres of the unit-length rows of ``embedding_`` (``predict`` assigns the nearest).
    n_labels_polished_ : int
        Labels moved by the Lloyd steps that make the centres a fixed point (0 after k-means
        run to convergence).
    nystrom_model_ : NystromModel
        ``solver="nystrom"`` only: ``row_map_``, carrying the centres too.
    nystrom_residual_ : ndarray of shape (n_kernels,)
        ``solver="nystrom"`` only: the share of every kernel's trace its factors miss,
        ``1 - ||F_p||_F^2 / tr(K_p)``.
    nystrom_missed_fraction_ : float
        ``solver="nystrom"`` only: the share of the trace of the learned ``K_w`` the factors
        miss. Above :data:`~mkrk_dask.backends.base.APPROXIMATION_WARNING` a
        :class:`~mkrk_dask.NystromApproximationWarning` names the kernels responsible: the
        H-step did not see that part of ``K_w``, so the result can differ from the exact one.

    Examples
    --------
    >>> from sklearn.datasets import load_digits
    >>> from mkrk_dask import MKKMRK
    >>> X, y = load_digits(return_X_y=True)
    >>> model = MKKMRK(n_clusters=10, random_state=0).fit(X[:300])
    >>> model.weights_.shape
    (12,)
    """

    def __init__(
        self,
        n_clusters: int = 8,
        *,
        lam: float = 2.0**-15,
        kernels: Any = "paper",
        dissimilarity: str = "fip",
        lam_scaling: str = "none",
        solver: str = "exact",
        normalize: bool = True,
        tol: float = 1e-5,
        tol_mode: str = "absolute",
        max_iter: int = 100,
        n_init: int = 10,
        qp_gap_tol: float = 1e-8,
        store: Any = None,
        storage_options: dict | None = None,
        scheduler: Any = None,
        chunk_size: int | None = None,
        n_landmarks: int = 500,
        landmarks: str = "kmeans++",
        dtype: str = "float64",
        backend_options: dict | None = None,
        random_state: Any = None,
        verbose: int = 0,
    ):
        self.n_clusters = n_clusters
        self.lam = lam
        self.kernels = kernels
        self.dissimilarity = dissimilarity
        self.lam_scaling = lam_scaling
        self.solver = solver
        self.normalize = normalize
        self.tol = tol
        self.tol_mode = tol_mode
        self.max_iter = max_iter
        self.n_init = n_init
        self.qp_gap_tol = qp_gap_tol
        self.store = store
        self.storage_options = storage_options
        self.scheduler = scheduler
        self.chunk_size = chunk_size
        self.n_landmarks = n_landmarks
        self.landmarks = landmarks
        self.dtype = dtype
        self.backend_options = backend_options
        self.random_state = random_state
        self.verbose = verbose

    # -- validation -----------------------------------------------------------------------

    def _check_params(self) -> None:
        check_lambda(self.lam)
        check_measure(self.dissimilarity)
        check_choice("solver", self.solver, SOLVERS)
        check_choice("lam_scaling", self.lam_scaling, LAM_SCALINGS)
        check_choice("tol_mode", self.tol_mode, TOL_MODES)
        for name in ("tol", "qp_gap_tol"):
            value = getattr(self, name)
            if not isinstance(value, numbers.Real) or not value > 0:
                raise ValueError(f"{name} must be a positive number, got {value!r}")
        for name in ("max_iter", "n_init"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        if self.backend_options is not None and not isinstance(self.backend_options, dict):
            raise ValueError(f"backend_options must be a dict or None, got "
                             f"{type(self.backend_options).__name__}")
        # The settings of every backend the fit could use, validated now (not after a build).
        for solver in (("exact", "blockwise", "nystrom") if self.solver == "auto"
                       else (self.solver,)):
            self._backend_options(solver, strict=self.solver != "auto")

    def _backend_options(self, solver: str, strict: bool = True) -> Any:
        """The typed options of ``solver`` from the estimator's parameters and
        ``backend_options``. With ``strict=False`` (``solver="auto"``), options that belong to
        another backend are left out instead of refused."""
        names = set(option_names(solver))
        settings = {key: getattr(self, key) for key in ("chunk_size", "dtype", "n_landmarks",
                                                          "landmarks") if key in names}
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
        """Validated views (or precomputed kernels), kernel specs and n_samples."""
        if isinstance(self.kernels, str) and self.kernels == "precomputed":
            K = check_precomputed(X)
            return K, None, K.shape[1]
        if any(is_lazy(v) for v in (X if is_multiview(X) else [X])):
            # Dask and Zarr input stays where it is: shape and dtype now, values as the
            # first pass reads them.
            views = check_lazy_views(X)
            if len(views) == 1:
                self.n_features_in_ = int(views[0].shape[1])
                if hasattr(self, "feature_names_in_"):
                    del self.feature_names_in_
        elif is_multiview(X):
            views = check_views(X)
        else:
            # Single view: let scikit-learn record n_features_in_ and word its errors.
            views = [validate_data(self, X, accept_sparse="csr", dtype=np.float64,
                                   ensure_min_samples=1)]
            check_magnitude(views[0])
        specs = as_kernel_specs(self.kernels, n_views=len(views))
        return views, specs, int(views[0].shape[0])

    def _choose_solver(self, n_samples: int, n_kernels: int) -> str:
        if self.solver != "auto":
            return self.solver
        from .auto import choose_solver

        choice, reason = choose_solver(n_samples, n_kernels)
        if self.verbose:
            print(f"[MKKMRK] solver='auto' chose {choice!r}: {reason}", flush=True)
        self.solver_reason_ = reason
        return choice

    def _make_backend(self, data: Any, specs: list[KernelSpec] | None) -> KernelBackend:
        """The backend for the chosen solver, made by :func:`mkrk_dask.backends.make_backend`."""
        n_samples = data.shape[1] if specs is None else data[0].shape[0]
        solver = self._choose_solver(n_samples, data.shape[0] if specs is None else len(specs))
        if specs is None and solver == "nystrom":
            raise ValueError("solver='nystrom' needs features, not precomputed kernels")
        options = self._backend_options(solver, strict=self.solver != "auto")
        self._solver_used = solver
        if solver == "exact" and specs is not None and any(is_lazy(v) for v in data):
            data = materialize(data)  # dense kernels in memory: the data fit there too
        inputs = dict(kernels=data) if specs is None else dict(views=data, specs=specs)
        return make_backend(options, **inputs, normalize=self.normalize, store=self.store,
                            storage_options=self.storage_options, scheduler=self.scheduler,
                            random_state=self.random_state)

    def _build(self, X: Any) -> tuple[KernelBackend, int]:
        """Validate everything and build the backend; shared with :func:`lambda_search`."""
        self._check_params()
        data, specs, n_samples = self._prepare_input(X)
        check_n_clusters(self.n_clusters, n_samples)
        backend = self._make_backend(data, specs)
        if backend.n_kernels > 0 and self.dissimilarity not in backend.measures:
            backend.close()
            raise ValueError(f"dissimilarity {self.dissimilarity!r} is not available with "
                             f"solver={self.solver!r}; choose one of {backend.measures}")
        return backend, n_samples

    # -- fitting ----------------------------------------------------------------------------

    def _progress(self, info: IterationInfo) -> None:
        progress.reporter().log(
            f"[MKKMRK] iter {info.iteration:3d}  objective {info.objective:.10g}  "
            f"change {info.change:.3g}  qp gap {info.qp_relative_gap:.1e}  "
            f"{info.seconds:.2f}s")

    def _fit_key(self) -> str:
        """What identifies this fit's loop in a store: a checkpoint saved by a fit with other
        settings is never resumed."""
        import hashlib
        import json

        settings = {k: getattr(self, k) for k in (
            "n_clusters", "lam", "dissimilarity", "lam_scaling", "tol", "tol_mode", "max_iter",
            "qp_gap_tol")}
        text = json.dumps({"method": "MKKM-RK", **settings}, sort_keys=True, default=str)
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    def _reporting(self) -> Any:
        """Progress at ``verbose`` (on stderr), unless a caller (the CLI) already reports."""
        if progress.is_active():
            return contextlib.nullcontext()
        return progress.reporting(int(self.verbose or 0))

    def fit(self, X: Any, y: Any = None) -> MKKMRK:
        """Learn the kernel weights and cluster ``X``.

        Parameters
        ----------
        X : array-like, sparse matrix, list of views, or precomputed kernels
            ``(n_samples, n_features)`` features; a list of such matrices (one per view); or,
            with ``kernels="precomputed"``, an ``(m, n, n)`` array / list of ``(n, n)`` kernels.
        y : ignored

        Returns
        -------
        self
        """
        with self._reporting():
            backend, _ = self._build(X)
            try:
                result = solve(
                    backend, self.n_clusters, self.lam, dissimilarity=self.dissimilarity,
                    lam_scaling=self.lam_scaling, tol=self.tol, tol_mode=self.tol_mode,
                    max_iter=self.max_iter, qp_gap_tol=self.qp_gap_tol,
                    callback=self._progress if self.verbose else None,
                    checkpoint=backend.loop_checkpoint(self._fit_key()))
                embedding = backend.embedding(result.top)
                # The small map of new rows to H that predict/transform use, where one exists.
                row_map = backend.row_map(result.top)
                approximation = backend.approximation(result.weights)
            finally:
                backend.close()
        self._set_fitted(result, embedding, backend.kernel_specs)
        self._set_out_of_sample(row_map, embedding)
        self._set_approximation(approximation, result)
        return self

    def _set_approximation(self, report: Any, result: Any) -> None:
        """What an approximate backend misses of every kernel and of ``K_w``; warn if much."""
        if report is None:
            for name in ("nystrom_residual_", "nystrom_missed_fraction_"):
                if hasattr(self, name):
                    delattr(self, name)
            return
        residual, missed = report.residual_fractions, report.missed_fraction
        self.nystrom_residual_ = residual
        self.nystrom_missed_fraction_ = missed
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

    # -- out of sample ----------------------------------------------------------------------

    def _set_out_of_sample(self, row_map: Any, embedding: np.ndarray) -> None:
        """Keep the map of new rows to H (``row_map_``) and the learned centres.

        The centres are the means of the unit-length rows of H per cluster, polished by Lloyd
        steps to a fixed point (``labels_`` follows if a border row moves, which k-means run to
        convergence leaves at zero; the count is ``n_labels_polished_``), so that ``predict``
        on the training data gives ``labels_`` back.
        """
        for name in ("row_map_", "cluster_centers_", "nystrom_model_", "n_labels_polished_"):
            if hasattr(self, name):
                delattr(self, name)
        if row_map is None:
            return
        centres, labels, changed = lloyd_centres(unit_rows(embedding), self.labels_,
                                                 self.n_clusters)
        self.labels_ = labels
        self.cluster_centers_ = centres
        self.n_labels_polished_ = changed
        self.row_map_ = row_map
        if self.solver_ == "nystrom":
            # The Nystrom map also predicts by itself (a saved model needs nothing else).
            row_map.centres = centres
            row_map.n_labels_polished = changed
            self.nystrom_model_ = row_map

    def _out_of_sample_views(self, X: Any) -> list:
        check_is_fitted(self)
        if not hasattr(self, "row_map_"):
            raise NotImplementedError(
                "predict/transform of new data needs features: with kernels='precomputed' "
                "there is no kernel between new points and the training points")
        if any(is_lazy(v) for v in (X if is_multiview(X) else [X])):
            views = check_lazy_views(X)
        elif is_multiview(X):
            views = check_views(X)
        else:
            views = [validate_data(self, X, reset=False, accept_sparse="csr", dtype=np.float64)]
        dims = self.row_map_.n_features
        if len(views) != len(dims):
            raise ValueError(f"the model was fitted on {len(dims)} view(s), got {len(views)}")
        for v, (view, dim) in enumerate(zip(views, dims, strict=True)):
            if dim is not None and view.shape[1] != dim:
                raise ValueError(f"view {v} has {view.shape[1]} features; the model was "
                                 f"fitted with {dim}")
        return views

    def _maps_new_points(self) -> bool:
        """New points have kernels with the training points only for feature input."""
        return not (isinstance(self.kernels, str) and self.kernels == "precomputed")

    @available_if(_maps_new_points)
    def transform(self, X: Any) -> np.ndarray:
        """Embed samples into the learned spectral space.

        The spectral out-of-sample extension ``h(x) = K_w(x, X) H diag(mu)^-1`` through the
        training rows (exact and blockwise backends), or ``F(x) B`` through the Nystrom
        landmarks; on the training data it reproduces ``embedding_``.

        Parameters
        ----------
        X : array-like, sparse matrix, dask or Zarr array, or list of views, like the data
            given to ``fit``

        Returns
        -------
        ndarray of shape (n_samples, n_clusters)
        """
        views = self._out_of_sample_views(X)
        return self.row_map_.transform(views)

    @available_if(_maps_new_points)
    def predict(self, X: Any) -> np.ndarray:
        """Cluster of new samples: the nearest learned centre of the unit-length rows of
        :meth:`transform` (on the training data it returns ``labels_``).

        Parameters
        ----------
        X : array-like, sparse matrix, dask or Zarr array, or list of views, like the data
            given to ``fit``

        Returns
        -------
        ndarray of shape (n_samples,)
        """
        return nearest_centre(unit_rows(self.transform(X)), self.cluster_centers_)

    def _set_fitted(self, result: Any, embedding: np.ndarray,
                    specs: list[KernelSpec] | None) -> None:
        self.weights_ = result.weights
        self.representation_ = result.representation
        self.embedding_ = embedding
        self.dissimilarity_ = result.dissimilarity
        self.objective_history_ = result.objective_history
        self.n_iter_ = result.n_iter
        self.converged_ = result.converged
        self.qp_relative_gaps_ = result.qp_relative_gaps
        self.lam_effective_ = result.lam_effective
        self.traces_ = result.traces
        self.timings_ = dict(result.timings)
        self.selected_kernels_ = selected_kernels(result.weights)
        self.kernels_ = specs
        self.kernel_names_ = ([s.name for s in specs] if specs is not None
                              else [f"K{p}" for p in range(len(result.weights))])
        self.solver_ = getattr(self, "_solver_used", self.solver)
        self.labels_ = assign_clusters(embedding, self.n_clusters, n_init=self.n_init,
                                       random_state=check_random_state(self.random_state))

    def fit_predict(self, X: Any, y: Any = None, **kwargs: Any) -> np.ndarray:
        """Fit and return ``labels_``."""
        return self.fit(X, y).labels_

    def fit_transform(self, X: Any, y: Any = None, **kwargs: Any) -> np.ndarray:
        """Fit and return ``embedding_`` (what :meth:`transform` gives on the training data)."""
        return self.fit(X, y).embedding_

    @property
    def _n_features_out(self) -> int:
        """Columns of :meth:`transform`: one per cluster (the embedding's)."""
        return int(self.n_clusters)

    def __sklearn_clone__(self) -> MKKMRK:
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

    def summary(self) -> str:
        """A short human-readable account of the fit."""
        check_is_fitted(self)
        lines = [f"MKKM-RK: {len(self.weights_)} kernels, lambda={self.lam:g}, "
                 f"{self.n_iter_} iterations ({'converged' if self.converged_ else 'max_iter'})",
                 f"objective {self.objective_history_[-1]:.10g}, "
                 f"max QP relative gap {self.qp_relative_gaps_.max():.1e}",
                 "weights:"]
        for p in np.argsort(-self.weights_):
            if self.weights_[p] >= SELECTION_THRESHOLD:
                lines.append(f"  {self.kernel_names_[p]:<28s} {self.weights_[p]:.4f}")
        if hasattr(self, "nystrom_missed_fraction_"):
            lines.append(f"Nystrom factors miss {self.nystrom_missed_fraction_:.1%} of the trace "
                         "of the combined kernel")
        return "\n".join(lines)
