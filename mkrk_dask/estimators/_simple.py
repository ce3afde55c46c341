"""SimpleMKKM as a scikit-learn estimator: :class:`SimpleMKKM`.

It runs the one alternating loop (:func:`mkrk_dask.loop.alternate`) with a weight step that
is a reduced-gradient line search (:class:`~mkrk_dask.weight_steps.ReducedGradientStep`), whose
trial points are H-steps of the same backend: so it runs on every backend (exact, blockwise,
Nystrom) and scales as MKKM-RK does.
"""

from __future__ import annotations

from numbers import Real
from typing import Any

import numpy as np
from sklearn.utils._param_validation import Interval, StrOptions

from .._text import plural
from ..backends import KernelBackend, TopK
from ..loop import SolverResult, alternate
from ..weight_steps import ReducedGradientStep
from ..weight_steps.reduced_gradient import DIRECTIONS
from ._base import MultipleKernelKMeans
from ._mkkm import PAPER_COMMON

__all__ = ["SimpleMKKM"]


class SimpleMKKM(MultipleKernelKMeans):
    """SimpleMKKM (Liu, Zhu, Liu, Hospedales, Wang & Wang, IEEE TPAMI 2023), on the engine of
    MKKM-RK.

    Minimises over the kernel weights ``gamma`` on the simplex the optimal value

    ``J(gamma) = max_{H^T H = I_k} tr(H^T K_gamma H)``, ``K_gamma = sum_p gamma_p^2 K_p``,

    the sum of the k largest eigenvalues of the combined kernel. J is convex in gamma, and its
    gradient ``2 gamma_p tr(H^T K_p H)`` needs only the quadratic forms of the loop. Each
    iteration is one reduced-gradient step with a line search on J, every trial point of which
    is one H-step (top-k eigenvectors) of the backend; the objective never rises. Every step is
    certified: ``relative_gaps_`` bounds how far J at the step's weights is above the minimum
    over the simplex (``(2 J - min_p g_p) / J``, by convexity), and the fit stops when it is
    below ``gap_tol``.

    The paper and the authors' public MATLAB code (github.com/xinwangliu/SimpleMKKMcodes) leave
    these choices open or take them in code; where they are taken from:

    - the start: equal weights (``simpleMKKM.m``);
    - the base variable of the reduced gradient: the largest weight, the first of ties (their
      ``firstbasevariable='first'``, ``simpleMKKMupdate.m``);
    - the gradient is scaled to unit length before the direction is formed, and the first trial
      step along it is at most 0.1 (``max_step``; ``simpleMKKMupdate.m``);
    - the step size: along the direction to the boundary of the simplex while J decreases,
      then a golden-section search to ``line_search_tol`` of the largest step (their
      ``goldensearch_deltmax``, 1e-3 in ``Demo_of_SimpleMKKM.m``). Here each round of the
      search reuses one of its two interior points, so it costs one H-step where theirs costs
      two; the points searched are the same;
    - the stop: theirs when no weight changes by more than 1e-5 (the demo's
      ``seuildiffsigma``); here when the certified gap is below ``gap_tol``, when the change
      of J is below ``tol``, or when the line search finds no lower J;
    - the kernels: their demo centres and normalises every kernel (``kcenter``, ``knorm``);
      here ``normalize`` gives the unit diagonal, and ``mkrk reproduce`` centres as they do;
    - the H-step: their ``eigs(K, k, 'LA')``; here the backend's top-k eigensolver, warm-started
      from the iteration's H;
    - the final partition: their k-means on the unit rows of H (``myNMIACCV2.m``); here
      ``final_step`` (``"spectral"`` is theirs, in :meth:`paper`).

    Parameters
    ----------
    n_clusters : int, default=8
        Number of clusters k.
    direction : {"scaled", "reduced"}, default="scaled"
        The descent direction of every step. ``"reduced"`` is the authors': the reduced
        gradient scaled to unit length, with their line search (to the boundary of the
        simplex while J decreases, then golden section). ``"scaled"`` scales the reduced
        gradient by the inverse of the diagonal Hessian ``2 tr(H^T K_p H)`` of J's quadratic
        model at the current H (the step to that model's minimiser over the simplex),
        combined with the previous direction as a preconditioned conjugate gradient
        (Polak-Ribiere+); its line search tries step 1 (later, twice the last step taken)
        and, when it promises enough, the minimiser of the parabola through J(0), its slope
        and J there, and keeps the lower if J decreases enough (Armijo), else backtracks by
        parabolic interpolation. Both descend to the same minimum (J is convex); the scaled
        one takes far fewer H-steps (measured in ``docs/methods.rst``).
    gap_tol : float, default=1e-4
        Stop when the certified relative optimality gap of the weights is below this.
    line_search_tol : float, default=1e-3
        With ``direction="reduced"``, the golden-section search ends when its interval is
        below this share of the largest feasible step.
    max_step : float, default=0.1
        With ``direction="reduced"``, the largest first trial step along the unit direction.
    kernels, solver, final_step, final_clustering, n_components, normalize, tol, tol_mode, \
max_iter, n_init, store, storage_options, scheduler, backend_options, random_state, verbose, \
preprocessing
        As for :class:`~mkrk_dask.MKKMRK` (the same meaning and defaults), except ``tol`` and
        ``tol_mode``, whose defaults (``1e-9``, ``"relative"``) leave the stop to ``gap_tol``:
        a small change of J is no proof of the optimum, the gap is.

    Attributes
    ----------
    relative_gaps_ : ndarray of shape (n_iter,)
        The certified relative optimality gap of the weights after every step.
    optimality_gap_ : float
        The last of them: J at ``weights_`` is at most this share above the minimum of J.
    n_h_steps_ : int
        H-steps (top-k eigendecompositions) the fit made, the line searches' included.
    inertia_ : float
        The kernel k-means objective of ``labels_`` in the learned kernel, as
        ``KMeans.inertia_`` (see :class:`~mkrk_dask.MKKMRK`: exact but on Nystrom).
    labels_, weights_, embedding_, feature_scale_, final_step_, n_components_, plan_, \
objective_history_, n_iter_, converged_, \
selected_kernels_, kernels_, kernel_names_, solver_, timings_, row_map_, cluster_centers_, \
view_names_
        As for :class:`~mkrk_dask.MKKMRK`; ``objective_history_`` holds J after every step.

    Examples
    --------
    >>> from sklearn.datasets import load_iris
    >>> from mkrk_dask import SimpleMKKM
    >>> X, y = load_iris(return_X_y=True)
    >>> model = SimpleMKKM(n_clusters=3, kernels="paper", random_state=0).fit(X)
    >>> bool(model.optimality_gap_ <= 1e-4)
    True
    """

    method = "SimpleMKKM"
    # the authors' weight step and line-search precision (Demo_of_SimpleMKKM.m)
    PAPER_SETTINGS = {**PAPER_COMMON, "direction": "reduced", "line_search_tol": 1e-3}

    def __init__(
        self,
        n_clusters: int = 8,
        *,
        direction: str = "scaled",
        gap_tol: float = 1e-4,
        line_search_tol: float = 1e-3,
        max_step: float = 0.1,
        kernels: Any = "auto",
        solver: str = "auto",
        final_step: str = "auto",
        final_clustering: str = "auto",
        n_components: Any = "auto",
        normalize: bool = True,
        tol: float = 1e-9,
        tol_mode: str = "relative",
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
        self.direction = direction
        self.gap_tol = gap_tol
        self.line_search_tol = line_search_tol
        self.max_step = max_step
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
        "direction": [StrOptions(set(DIRECTIONS))],
        "gap_tol": [Interval(Real, 0, None, closed="neither")],
        "line_search_tol": [Interval(Real, 0, 1, closed="neither")],
        "max_step": [Interval(Real, 0, 1, closed="right")],
    }

    def _run(self, backend: KernelBackend, first_rank: int | None = None) -> SolverResult:
        k = self.n_clusters
        traces = np.asarray(backend.traces(), dtype=np.float64)

        def evaluate(weights: np.ndarray, warm_start: TopK | None) -> tuple[TopK, np.ndarray]:
            top = backend.top_k(weights, k, warm_start=warm_start)
            if top.quad_forms is None:
                top.quad_forms = np.asarray(backend.quad_forms(top), dtype=np.float64)
            return top, top.quad_forms

        step = ReducedGradientStep(evaluate, traces, gap_tol=self.gap_tol,
                                   line_search_tol=self.line_search_tol,
                                   max_step=self.max_step, direction=self.direction)
        return alternate(backend, k, step, traces=traces, tol=self.tol, tol_mode=self.tol_mode,
                         max_iter=self.max_iter,
                         callback=self._progress if self.verbose else None,
                         checkpoint=backend.loop_checkpoint(self._fit_key(
                             "gap_tol", "line_search_tol", "max_step", "direction")),
                         first_rank=first_rank)

    def _set_method_fitted(self, result: SolverResult) -> None:
        self.relative_gaps_ = result.qp_relative_gaps
        self.optimality_gap_ = float(result.qp_relative_gaps[-1])
        self.n_h_steps_ = int(result.h_steps)

    def _summary_head(self, detail: bool = False) -> list[str]:
        lines = [f"SimpleMKKM: {len(self.weights_)} kernels, {self._iterations_words()} "
                 f"({plural(self.n_h_steps_, 'H-step')}), objective J "
                 f"{self.objective_history_[-1]:.10g}"]
        if detail:
            lines.append(f"certified relative optimality gap {self.optimality_gap_:.1e}")
        return lines
