"""MKKM and MKKM-MR as scikit-learn estimators: :class:`MKKM`, :class:`MKKMMR`.

Both run the one alternating loop (:func:`mkrk_dask.loop.alternate`) with their own weight
step (:mod:`mkrk_dask.weight_steps.mkkm`), so they run on every backend (exact, blockwise,
Nystrom), scale as MKKM-RK does, and ``predict`` / ``transform`` new points the same way.
"""

from __future__ import annotations

import time
from numbers import Real
from typing import Any

import numpy as np
from sklearn.utils._param_validation import Interval, StrOptions

from ..backends import KernelBackend
from ..choices import PAPER_COMMON
from ..loop import SolverResult, alternate, effective_lambda
from ..validation import LAM, LAM_SCALINGS, check_lambda
from ..weight_steps import AverageResidualStep, MatrixRegularizedStep
from ._base import MultipleKernelKMeans

__all__ = ["MKKM", "MKKMMR", "PAPER_COMMON"]


class MKKM(MultipleKernelKMeans):
    """Multiple kernel k-means (Huang, Chuang & Chen, 2012), on the engine of MKKM-RK.

    Minimises ``tr(K_w (I - H H^T))`` over H (``H^T H = I``) and the kernel weights ``w`` on
    the simplex, ``K_w = sum_p w_p^2 K_p``. For a fixed H the weights have a closed form,
    ``w_p = (1/d_p) / sum_q (1/d_q)`` with ``d_p = tr(K_p) - tr(H^T K_p H)``: every kernel
    gets weight in inverse proportion to its own k-means loss, so no kernel is ever dropped.
    MKKM-RK is this objective plus the representation term.

    Parameters
    ----------
    n_clusters : int, default=8
        Number of clusters k.
    kernels, solver, final_step, final_clustering, n_components, normalize, tol, tol_mode, \
max_iter, n_init, store, storage_options, scheduler, backend_options, random_state, verbose, \
preprocessing
        As for :class:`~mkrk_dask.MKKMRK` (the same meaning and defaults).

    Attributes
    ----------
    inertia_ : float
        The kernel k-means objective of ``labels_`` in the learned kernel, as
        ``KMeans.inertia_`` (see :class:`~mkrk_dask.MKKMRK`: exact but on Nystrom).
    labels_, weights_, embedding_, feature_scale_, final_step_, n_components_, plan_, \
objective_history_, n_iter_, converged_, \
selected_kernels_, kernels_, kernel_names_, solver_, timings_, row_map_, cluster_centers_, \
view_names_
        As for :class:`~mkrk_dask.MKKMRK`.

    Examples
    --------
    >>> from sklearn.datasets import load_iris
    >>> from mkrk_dask import MKKM
    >>> X, y = load_iris(return_X_y=True)
    >>> MKKM(n_clusters=3, kernels="paper", random_state=0).fit(X).weights_.shape
    (12,)
    """

    method = "MKKM"
    PAPER_SETTINGS = dict(PAPER_COMMON)

    def __init__(
        self,
        n_clusters: int = 8,
        *,
        kernels: Any = "auto",
        solver: str = "auto",
        final_step: str = "auto",
        final_clustering: str = "auto",
        n_components: Any = "auto",
        normalize: bool = True,
        tol: float = 1e-5,
        tol_mode: str = "absolute",
        max_iter: int = 100,
        n_init: int = 10,
        store: Any = None,
        storage_options: dict | None = None,
        scheduler: Any = None,
        backend_options: dict | None = None,
        random_state: Any = None,
        verbose: int = 0,
        preprocessing: str = "auto",
    ):
        self.n_clusters = n_clusters
        self.kernels = kernels
        self.solver = solver
        self.final_step = final_step
        self.final_clustering = final_clustering
        self.n_components = n_components
        self.normalize = normalize
        self.tol = tol
        self.tol_mode = tol_mode
        self.max_iter = max_iter
        self.n_init = n_init
        self.store = store
        self.storage_options = storage_options
        self.scheduler = scheduler
        self.backend_options = backend_options
        self.random_state = random_state
        self.verbose = verbose
        self.preprocessing = preprocessing

    def _run(self, backend: KernelBackend, first_rank: int | None = None) -> SolverResult:
        return alternate(backend, self.n_clusters, AverageResidualStep(), tol=self.tol,
                         tol_mode=self.tol_mode, max_iter=self.max_iter,
                         callback=self._progress if self.verbose else None,
                         checkpoint=backend.loop_checkpoint(self._fit_key()),
                         first_rank=first_rank)


class MKKMMR(MultipleKernelKMeans):
    """Multiple kernel k-means with matrix-induced regularisation (Liu, Dou, Yin, Wang & Zhu,
    AAAI 2016), on the engine of MKKM-RK.

    Minimises ``tr(K_w (I - H H^T)) + (lam/2) w^T M w`` with ``M_pq = tr(K_p K_q)``, ``w`` on
    the simplex and ``K_w = sum_p w_p^2 K_p``. The regulariser penalises giving weight to two
    kernels that are alike (a large ``M_pq``), so the weights favour diverse kernels. For a
    fixed H the weight step is a convex QP in m variables, solved exactly by an active-set
    method and certified by its duality gap (:class:`~mkrk_dask.qp.SimplexQP`); the
    objective never increases.

    Parameters
    ----------
    n_clusters : int, default=8
        Number of clusters k.
    lam : float, default=1.0
        The regularisation weight lambda >= 0. With the default
        ``lam_scaling="normalized"`` it means the same at every n (M grows like n^2, the
        k-means term like n). The authors search ``2^-15 .. 2^15`` with the labels.
    lam_scaling : {"none", "normalized"}, default="normalized"
        ``"none"``: lambda as the paper's; ``"normalized"``: multiplied by
        ``mean(tr K_p) / mean(M)`` (see :func:`mkrk_dask.loop.effective_lambda`).
    qp_gap_tol : float, default=1e-8
        Every weight step must have a duality gap below ``qp_gap_tol`` times its objective,
        else an :class:`~mkrk_dask.qp.UncertifiedSolutionWarning` is emitted.
    kernels, solver, final_step, final_clustering, n_components, normalize, tol, tol_mode, \
max_iter, n_init, store, storage_options, scheduler, backend_options, random_state, verbose, \
preprocessing
        As for :class:`~mkrk_dask.MKKMRK` (the same meaning and defaults).

    Attributes
    ----------
    kernel_products_ : ndarray of shape (n_kernels, n_kernels)
        M, the matrix of ``tr(K_p K_q)``.
    qp_relative_gaps_ : ndarray of shape (n_iter,)
        Certified duality gap of every weight step, relative to its objective.
    lam_effective_ : float
        The lambda the weight step used.
    inertia_ : float
        The kernel k-means objective of ``labels_`` in the learned kernel, as
        ``KMeans.inertia_`` (see :class:`~mkrk_dask.MKKMRK`: exact but on Nystrom).
    labels_, weights_, embedding_, feature_scale_, final_step_, n_components_, plan_, \
objective_history_, n_iter_, converged_, \
selected_kernels_, kernels_, kernel_names_, solver_, timings_, row_map_, cluster_centers_, \
view_names_
        As for :class:`~mkrk_dask.MKKMRK`.

    Examples
    --------
    >>> from sklearn.datasets import load_iris
    >>> from mkrk_dask import MKKMMR
    >>> X, y = load_iris(return_X_y=True)
    >>> model = MKKMMR(n_clusters=3, kernels="paper", random_state=0).fit(X)
    >>> bool(abs(model.weights_.sum() - 1) < 1e-12)
    True
    """

    method = "MKKM-MR"
    PAPER_SETTINGS = {**PAPER_COMMON, "lam_scaling": "none", "lam": 1.0}

    def __init__(
        self,
        n_clusters: int = 8,
        *,
        lam: float = 1.0,
        lam_scaling: str = "normalized",
        qp_gap_tol: float = 1e-8,
        kernels: Any = "auto",
        solver: str = "auto",
        final_step: str = "auto",
        final_clustering: str = "auto",
        n_components: Any = "auto",
        normalize: bool = True,
        tol: float = 1e-5,
        tol_mode: str = "absolute",
        max_iter: int = 100,
        n_init: int = 10,
        store: Any = None,
        storage_options: dict | None = None,
        scheduler: Any = None,
        backend_options: dict | None = None,
        random_state: Any = None,
        verbose: int = 0,
        preprocessing: str = "auto",
    ):
        self.n_clusters = n_clusters
        self.lam = lam
        self.lam_scaling = lam_scaling
        self.qp_gap_tol = qp_gap_tol
        self.kernels = kernels
        self.solver = solver
        self.final_step = final_step
        self.final_clustering = final_clustering
        self.n_components = n_components
        self.normalize = normalize
        self.tol = tol
        self.tol_mode = tol_mode
        self.max_iter = max_iter
        self.n_init = n_init
        self.store = store
        self.storage_options = storage_options
        self.scheduler = scheduler
        self.backend_options = backend_options
        self.random_state = random_state
        self.verbose = verbose
        self.preprocessing = preprocessing

    _parameter_constraints: dict = {
        **MultipleKernelKMeans._parameter_constraints,
        "lam": LAM,
        "lam_scaling": [StrOptions(set(LAM_SCALINGS))],
        "qp_gap_tol": [Interval(Real, 0, None, closed="neither")],
    }

    def _check_backend(self, backend: KernelBackend) -> None:
        if backend.n_kernels > 0 and "fip" not in backend.measures:
            raise ValueError(f"MKKM-MR needs tr(K_p K_q), which solver={self.solver!r} does "
                             "not provide")

    def loop_inputs(self, backend: KernelBackend) -> dict[str, np.ndarray]:
        return {"traces": np.asarray(backend.traces(), dtype=np.float64),
                "M": backend.dissimilarity("fip")}

    def solve_lambda(self, backend: KernelBackend, inputs: dict, lam: float,
                     checkpoint: Any = None, first_rank: int | None = None) -> SolverResult:
        check_lambda(lam)
        lam_eff = effective_lambda(lam, self.lam_scaling, inputs["traces"], inputs["M"])
        step = MatrixRegularizedStep(inputs["M"], lam_eff, gap_tol=self.qp_gap_tol)
        result = alternate(backend, self.n_clusters, step, traces=inputs["traces"],
                           tol=self.tol, tol_mode=self.tol_mode, max_iter=self.max_iter,
                           callback=self._progress if self.verbose else None,
                           checkpoint=checkpoint, first_rank=first_rank)
        result.dissimilarity = inputs["M"]
        result.lam_effective = lam_eff
        return result

    def _run(self, backend: KernelBackend, first_rank: int | None = None) -> SolverResult:
        start = time.perf_counter()
        inputs = self.loop_inputs(backend)
        seconds = time.perf_counter() - start
        result = self.solve_lambda(backend, inputs, self.lam, checkpoint=backend.loop_checkpoint(
            self._fit_key("lam", "lam_scaling", "qp_gap_tol")), first_rank=first_rank)
        result.timings["dissimilarity"] = seconds
        result.timings["total"] += seconds
        return result

    def _set_method_fitted(self, result: SolverResult) -> None:
        self.kernel_products_ = result.dissimilarity
        self.qp_relative_gaps_ = result.qp_relative_gaps
        self.lam_effective_ = result.lam_effective

