"""MKKM-RK: multiple kernel k-means by selecting representative kernels (Yao & Chen, AAAI
2019), as a scikit-learn estimator: :class:`MKKMRK`."""

from __future__ import annotations

from numbers import Real
from typing import Any

from sklearn.utils._param_validation import Interval, StrOptions

from .._text import format_number
from ..backends import KernelBackend
from ..choices import MKKMRK_PAPER
from ..dissimilarity import MEASURES
from ..loop import SolverResult, equal_weights, solve
from ..validation import LAM, LAM_SCALINGS
from ._base import MultipleKernelKMeans

__all__ = ["MKKMRK"]


class MKKMRK(MultipleKernelKMeans):
    """Multiple kernel k-means by selecting representative kernels (Yao & Chen, AAAI 2019).

    Learns weights ``w`` for a set of base kernels and clusters with the combined kernel
    ``K_w = sum_p w_p^2 K_p``. Every base kernel chooses representatives among the others (the
    matrix Y); the weight of a kernel is the mean of its row of Y. In the paper's
    configuration (:meth:`paper`, ``dissimilarity="fip"``) a larger lambda concentrates the
    weight on fewer, representative kernels; with the default ``"sfn"`` a smaller one does,
    and at the default ``lam=1`` every kernel represents itself and the weights are equal
    (see ``lam``).

    Parameters
    ----------
    n_clusters : int, default=8
        Number of clusters k.
    lam : float, default=1.0
        Trade-off lambda >= 0 between the kernel k-means loss and the representation cost
        ``<C, Y>``. With the default ``lam_scaling="normalized"`` it means the same at every n;
        at 1 every kernel represents itself and the weights are **equal**: the default does
        not select kernels. It cannot select among identical or near-identical kernels at any
        lambda (the objective is symmetric in them and strictly convex in the weights, so they
        share their weight equally; measured in the docs' "Defaults" page), and without labels
        learning the weights did not beat equal weights by more than seed noise. A smaller
        lambda (with ``sfn``) concentrates the weight on the kernels whose clusters are
        tightest; the paper (``lam_scaling="none"``, ``fip``) searches 2^-15 to 2^5 with the
        labels; see :meth:`paper` and :func:`mkrk_dask.lambda_search`. Which way lambda moves
        the weights depends on C: with ``sfn`` a kernel represents itself at no cost, so a
        larger lambda spreads the weight (equal at 1 with the default scaling) and a smaller
        one concentrates it; with ``fip`` (an inner product, not a distance) it is not free,
        and a larger lambda concentrates the weight, as in the paper.
    kernels : "auto", "paper", "precomputed" or list, default="auto"
        ``"auto"``: per view, cosine and Gaussians at 0.5, 1 and 2 times the median pairwise
        distance of a sample: Gaussians of the angle between rows for intensities and counts
        (non-negative, at least 10% zero entries), Euclidean ones otherwise; other non-negative
        data (measurements) add one Gaussian of the angle at the median; a view of one column
        gets the three Euclidean Gaussians alone (see :meth:`plan`).
        ``"paper"``: the paper's 12 kernels on every view. ``"precomputed"``: ``X`` is an
        ``(m, n, n)`` array or a list of ``(n, n)`` kernels. A list: kernel specifications
        (:class:`~mkrk_dask.KernelSpec`, strings such as ``"gaussian(c=0.1)@1"``, or dicts).
    dissimilarity : {"fip", "sfn", "vn", "ld"}, default="sfn"
        The kernel dissimilarity C. ``"fip"`` (the paper's) is ``tr(K_i K_j)``; see
        :mod:`mkrk_dask.dissimilarity`.
    lam_scaling : {"none", "normalized"}, default="normalized"
        ``"none"`` uses lambda as the paper does; ``"normalized"`` makes it independent of the
        scales of C and of the residuals (see :func:`mkrk_dask.loop.effective_lambda`).
    final_step : {"auto", "features", "spectral"}, default="auto"
        ``"features"``: k-means on the unit rows of the features ``V sqrt(mu)`` of the top
        ``n_components`` eigenpairs of ``K_w`` (a low-rank kernel k-means; unit rows, as
        every row of ``K_w`` has length 1: :func:`~mkrk_dask.assignment.final_rows`).
        ``"spectral"``: k-means on the unit rows of the top eigenvectors H (the paper's step,
        with the top k). ``"auto"``: the features.
    final_clustering : {"auto", "graph", "kmeans"}, default="auto"
        How the final rows are partitioned. ``"kmeans"``: k-means, the paper's. ``"graph"``: the
        k-means partition is refined by spectral clustering on the anchor graph of the final rows
        (:class:`~mkrk_dask.AnchorGraphClustering`, at most 2,000 anchors and one per two rows, 10
        nearest, Euclidean; above 70,000 rows built with 1,000 anchors on a uniform sample of 20,000
        of them that labels the others), which follows curved clusters where k-means assumes convex
        ones; the refinement is kept where its NMI with a k-means partition (of 3 restarts: a coarse
        check; where the graph is not kept, the k-means of ``n_init`` restarts is the answer)
        reaches 0.5 (not a different answer, such as nearly every row in one cluster beside tiny
        ones), or where the graph clearly has k parts: its Laplacian's k-th smallest eigenvalue at
        most a tenth of the next, and no cluster of fewer than 20 rows (two moons, two rings: curves
        that k-means cuts across), or k parts with no edge between them, each its own cluster,
        beside stray parts of fewer than 20 rows in all. ``"auto"``: ``"graph"`` with
        ``final_step="auto"`` (the label-free default) where there are at least 10 anchors a cluster
        (20 rows a cluster on average: fewer, and a row's nearest anchors reach into other
        clusters), more than one column (the graph of points on a line is a path, cut at its sparse
        tails) and some column of more than two values (on binary data the graph lost to k-means),
        ``"kmeans"`` otherwise and with an explicit step (the paper's configuration). What was kept:
        ``final_clustering_``, ``final_graph_``, ``final_graph_agreement_``, ``final_graph_clear_``,
        ``final_graph_extra_parts_``.
    n_components : "auto" or int, default="auto"
        Eigenpairs of the final step. ``"auto"``: 2k for the features (at most what the
        Nystrom factors hold), k for the spectral step (the loop's own eigenvectors). An
        integer fixes the rank (at most n_samples - 1; at least k with ``"spectral"``).
    preprocessing : {"auto", "none", "standardize"}, default="auto"
        The columns of every view: ``"auto"`` standardises a dense view's columns where their
        standard deviations (on a sample of rows) spread over more than 10x, columns in
        different units (their binary columns stay 0/1), and centres columns of one unit
        whose means lie more than 10^5 standard deviations from zero (their squared distances
        would lose their digits). A view of binary columns alone (dense, or sparse with every
        stored value 1) is divided column by column by the root mean square ``sqrt(p)``,
        not centred, where those spread over more than 10x (the rare words of documents
        beside common ones), and is kept as given otherwise, as other sparse views are;
        ``"standardize"`` always, every column, ``"none"``
        never (the paper's configuration). ``predict`` and ``transform`` apply the same
        transform; ``plan_`` records it. A few informative columns among many quiet ones of
        the same unit look like columns in different units, and ``"auto"`` standardises
        them: pass ``"none"`` where the columns share a unit (``docs/defaults.rst``).
    view_weights : {"auto", "equal", "agreement"}, default="auto"
        Where the weights stay equal (the default ``lam=1``), how the views are weighed.
        ``"agreement"``: each view by the mean adjusted mutual information of its own
        partition with the other views' (a view of noise, or of other samples, drops out;
        ``view_weights_``, ``view_agreement_``); ``"equal"``: every kernel alike. ``"auto"``:
        ``"agreement"`` for three or more views on the exact backend, with the default
        ``lam``, ``dissimilarity`` and ``lam_scaling``; ``"equal"`` otherwise (MKKM-RK's own
        weights do not drop such a view: ``docs/defaults.rst``). Given ``"agreement"``, it
        replaces the weights the loop learned.
    solver : {"exact", "blockwise", "nystrom", "auto"}, default="auto"
        Backend. ``"exact"`` holds the m dense n x n kernels in memory. ``"blockwise"`` stores
        them in a Zarr store and computes on Dask workers. ``"nystrom"`` approximates every
        kernel by ``n_landmarks`` landmarks and scales to millions of samples. ``"auto"``
        chooses exact (in memory, up to the Nystrom backend's exact-C limit for the kernels,
        :func:`mkrk_dask.auto.smooth_exact_max_n`: 6,441 rows for the default four kernels, 5,000
        to 12,000 for other kernels as smooth; 12,000 for narrower ones) or Nystrom from n
        and the memory and disk
        available (precomputed kernels: exact where their prepared copy fits in memory,
        blockwise otherwise), records its choice in ``solver_`` and ``solver_reason_``, and
        raises a one-line MemoryError saying what would fit when nothing does.
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
    backend_options : dict, optional
        Options of the backend: the fields of :class:`~mkrk_dask.backends.ExactOptions`,
        :class:`~mkrk_dask.backends.BlockwiseOptions` or
        :class:`~mkrk_dask.backends.NystromOptions`, checked there before any work starts
        (one line naming a bad one). With ``solver="auto"`` the options of the backends it did
        not choose are left out; a given solver refuses an option it does not have. ``plan_``
        records them, every ``"auto"`` resolved. Among them:

        - ``"n_landmarks"`` (int or one per kernel, default 500): Nystrom landmarks per
          kernel, the largest rank a kernel's factor can have. With ``"rank_tol"``, each kernel
          keeps only the fewest components that hold all but that share of the trace of its
          landmark block, so smooth kernels cost less (``nystrom_ranks_``); see the Nystrom
          page of the docs for its measured cost in accuracy.
        - ``"landmarks"`` ({"kmeans++", "uniform"}, default "kmeans++"): Nystrom landmark
          selection.
        - ``"chunk_size"`` (int, default chosen from n): rows per block of the stores
          (blockwise and Nystrom).
        - ``"dtype"`` ({"auto", "float64", "float32"}, default "auto"; any solver): storage
          precision of the blockwise kernels / Nystrom factors (the arithmetic is float64).
          ``"auto"``, resolved by the plan: float32 Nystrom factors for the plain Nystrom
          backend (n above the exact-C limit,
          :meth:`~mkrk_dask.backends.NystromOptions.exact_dissimilarity_limit`: n = 20,000,
          or fewer rows with many kernels; as accurate against exact as float64 ones, half the
          disk and the bytes every pass moves) and where only float32 factors fit the free
          disk; float64 otherwise. ``dtype_`` records the choice and ``solver_reason_`` why.
          With float32, the Nystrom ``embedding_`` is kept in float32 and the final k-means
          runs on float32 rows: at millions of rows these set the fit's peak memory. The
          centres that ``predict`` uses are polished in float64.
        - ``{"products": "fused", "overwrite": True}`` for the blockwise backend (see
          :class:`~mkrk_dask.backends.blockwise.BlockwiseBackend`), ``{"eigen_method":
          "lapack"}`` or, for precomputed kernels the caller lets the fit overwrite,
          ``{"copy": False}`` (normalised in place, no copy) for the exact one, or
          ``{"local_threshold": 0}`` to turn off the Nystrom backend's sparse local part,
          which by default follows the exact solution up to the exact-C limit.
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
        Restarts of the final k-means (the paper's code uses 10) and of the final graph's.
        The k-means partition a final graph is only checked against has at most 3
        (``final_clustering``).
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
        Cluster of every sample. Above 10^6 rows on the Nystrom backend (its
        ``final_rows``), the final partition is fitted on a uniform sample of the rows, and
        every row gets the label that partition gives it (what ``predict`` gives it).
    weights_ : ndarray of shape (n_kernels,)
        Learned kernel weights (sum to 1).
    representation_ : ndarray of shape (n_kernels, n_kernels)
        The representation matrix Y; ``Y[i, j]`` is how much kernel i represents kernel j.
    view_weights_ : ndarray of shape (n_views,)
        ``view_weights="agreement"`` only (the default on three or more views): each view's
        share of ``weights_`` (the sum of its kernels'), where each kernel is weighted by the
        agreement of its view's own partition with the other views'.
    view_agreement_ : ndarray of shape (n_views, n_views)
        ``view_weights="agreement"`` only: the adjusted mutual information of the views' own
        partitions, two by two.
    inertia_ : float
        The kernel k-means objective of ``labels_``, as ``KMeans.inertia_`` defines it: the
        squared distance of every sample to its cluster's centre in the feature space of
        the learned kernel ``K_w = sum_p w_p^2 K_p`` (the kernels as the fit used them,
        normalised), summed: ``tr(K_w) - sum_c (1/|c|) sum_{i,j in c} K_w[i, j]``. Exact on
        the exact and blockwise backends (one more pass over the store); on the Nystrom
        backend the cluster sums are those of the factors (one more pass over them), so the
        value is above the exact one by at most ``tr(K_w)`` times
        ``nystrom_missed_fraction_``; where the partition was fitted on a sample
        (``final_rows``), each cluster's sum is estimated as its sampled rows' mean times its
        rows (a uniform sample: an estimate within about ``1/sqrt(sampled rows)`` of it).
    view_names_ : list of str
        The names of the views: the keys of a dict given to ``fit`` (``{"pixels": A,
        "hog": B}``), else ``view0``, ``view1``, ...; ``predict`` and ``transform`` take the
        views in this order, or as a dict by these names. None for precomputed kernels.
    embedding_ : ndarray of shape (n_samples, n_components_)
        What the final k-means clustered: the top ``n_components_`` eigenvectors H of the
        combined kernel (``final_step_="spectral"``; the k-means sees their unit rows), or
        their features ``H sqrt(mu)``.
    final_step_ : {"features", "spectral"}
        The final step the plan chose.
    n_components_ : int
        Eigenpairs the final k-means saw.
    plan_ : FitPlan
        What the fit did: every ``"auto"`` resolved, with its reason and expected cost
        (:meth:`plan` gives it without fitting).
    feature_scale_ : ndarray or None
        ``sqrt`` of those eigenvalues (``final_step_="features"``), which :meth:`transform`
        applies to the rows of H.
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
        see :data:`mkrk_dask.loop.SELECTION_THRESHOLD`).
    kernels_ : list of KernelSpec or None
        The resolved kernels (Gaussian widths filled in); None for precomputed kernels.
    kernel_names_ : list of str
    qp_relative_gaps_ : ndarray of shape (n_iter,)
        Certified duality gap of every Y-step, relative to its objective.
    lam_effective_ : float
        The lambda the Y-step used (differs from ``lam`` under ``lam_scaling="normalized"``).
    solver_ : str
        The backend that ran.
    dtype_ : str
        The storage precision used (what the ``"auto"`` of ``backend_options["dtype"]``
        resolved to).
    n_features_in_ : int
        Features seen in ``fit``: the matrix's columns, or for a list of views the total
        over all views (``sum(n_features_per_view_)``; :meth:`predict` still takes the views
        separately, never their concatenation). Not set for precomputed kernels.
    n_features_per_view_ : tuple of int
        Features of every view seen in ``fit``, in order (one entry for a single matrix).
        Not set for precomputed kernels.
    feature_names_in_ : ndarray of str
        Column names seen in ``fit``, for a single matrix whose columns are all strings (a
        pandas DataFrame) only.
    timings_ : dict
        Seconds spent per stage, which add up to ``fit`` (the wall time of the whole fit):
        ``plan``, ``build`` (the kernels, stores or factors), ``loop`` (the alternating
        iterations), ``embedding`` (the final eigenpairs and rows), ``kmeans`` (the final
        k-means), ``finish`` (the map for new rows, the backend's closing checks and the
        fitted attributes) and ``graph`` (the final graph; 0 without one). Within the loop:
        ``dissimilarity``, ``h_step``, ``quad_forms``, ``y_step`` and their ``total``.
    row_map_ : object
        The map of new rows to the embedding that :meth:`transform` and :meth:`predict`
        apply (feature input only): the spectral out-of-sample extension through the
        training rows (exact, blockwise), or the Nystrom landmarks and transforms.
    cluster_centers_ : ndarray of shape (n_clusters, n_components_)
        Centres of the unit-length rows of ``embedding_`` (``predict`` assigns the nearest;
        with ``final_clustering_="graph"``, the clusters' means of the final rows, and
        ``predict`` goes through ``final_graph_``).
    final_clustering_ : {"graph", "kmeans"}
        How the final rows were partitioned (see ``final_clustering``).
    final_graph_ : AnchorGraphClustering or None
        The anchor graph of the final rows whose partition is ``labels_``
        (``final_clustering_="graph"``), else None.
    final_graph_agreement_ : float or None
        NMI between the graph's partition and the k-means partition of the final rows (None
        where no graph was built).
    final_graph_clear_ : bool or None
        Whether the graph clearly has ``n_clusters`` parts (its Laplacian's eigengap, or
        k parts with no edge between them beside a few stray rows; see
        ``final_clustering``), which keeps its partition at any agreement (None where no
        graph was built).
    final_graph_extra_parts_ : bool or None
        Whether the graph has more parts with no edge between them than ``n_clusters``
        (which of them it joined is then arbitrary: k-means is kept unless the graph is
        clear); None where no graph was built.
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
    nystrom_ranks_ : ndarray of shape (n_kernels,)
        ``solver="nystrom"`` only: the components of every kernel's factor, chosen from the
        eigenvalues of its landmark block (at most ``n_landmarks``; see ``rank_tol``).

    Examples
    --------
    >>> from sklearn.datasets import load_digits
    >>> from mkrk_dask import MKKMRK
    >>> X, y = load_digits(return_X_y=True)
    >>> model = MKKMRK(n_clusters=10, random_state=0).fit(X[:300])
    >>> len(model.weights_) == len(model.kernel_names_)
    True
    >>> MKKMRK.paper(n_clusters=10, random_state=0).fit(X[:300]).weights_.shape
    (12,)
    """

    def __init__(
        self,
        n_clusters: int = 8,
        *,
        lam: float = 1.0,
        kernels: Any = "auto",
        dissimilarity: str = "sfn",
        lam_scaling: str = "normalized",
        solver: str = "auto",
        final_step: str = "auto",
        final_clustering: str = "auto",
        n_components: Any = "auto",
        normalize: bool = True,
        tol: float = 1e-5,
        tol_mode: str = "absolute",
        max_iter: int = 100,
        n_init: int = 10,
        qp_gap_tol: float = 1e-8,
        store: Any = None,
        storage_options: dict | None = None,
        scheduler: Any = None,
        backend_options: dict | None = None,
        random_state: Any = None,
        verbose: int = 0,
        preprocessing: str = "auto",
        view_weights: str = "auto",
    ):
        self.n_clusters = n_clusters
        self.lam = lam
        self.kernels = kernels
        self.dissimilarity = dissimilarity
        self.lam_scaling = lam_scaling
        self.solver = solver
        self.final_step = final_step
        self.final_clustering = final_clustering
        self.n_components = n_components
        self.normalize = normalize
        self.tol = tol
        self.tol_mode = tol_mode
        self.max_iter = max_iter
        self.n_init = n_init
        self.qp_gap_tol = qp_gap_tol
        self.store = store
        self.storage_options = storage_options
        self.scheduler = scheduler
        self.backend_options = backend_options
        self.random_state = random_state
        self.verbose = verbose
        self.preprocessing = preprocessing
        self.view_weights = view_weights

    method = "MKKM-RK"

    #: the paper's configuration (Table 2): its 12 kernels, fip, lambda as given, the
    #: spectral final step, exact kernels; :meth:`paper` builds it
    PAPER_SETTINGS = dict(MKKMRK_PAPER)

    _parameter_constraints: dict = {
        **MultipleKernelKMeans._parameter_constraints,
        "lam": LAM,
        "dissimilarity": [StrOptions(set(MEASURES))],
        "lam_scaling": [StrOptions(set(LAM_SCALINGS))],
        "qp_gap_tol": [Interval(Real, 0, None, closed="neither")],
        "view_weights": [StrOptions({"auto", "equal", "agreement"})],
    }

    def _check_backend(self, backend: KernelBackend) -> None:
        if backend.n_kernels > 0 and self.dissimilarity not in backend.measures:
            raise ValueError(f"dissimilarity {self.dissimilarity!r} is not available with "
                             f"solver={self.solver!r}; choose one of {backend.measures}")

    def loop_inputs(self, backend: KernelBackend) -> dict:
        return {"C": backend.dissimilarity(self.dissimilarity)}

    def solve_lambda(self, backend: KernelBackend, inputs: dict, lam: float) -> SolverResult:
        return solve(backend, self.n_clusters, lam, C=inputs["C"],
                     lam_scaling=self.lam_scaling, tol=self.tol, tol_mode=self.tol_mode,
                     max_iter=self.max_iter, qp_gap_tol=self.qp_gap_tol)

    def _run(self, backend: KernelBackend, first_rank: int | None = None) -> SolverResult:
        return solve(
            backend, self.n_clusters, self.lam, dissimilarity=self.dissimilarity,
            lam_scaling=self.lam_scaling, tol=self.tol, tol_mode=self.tol_mode,
            max_iter=self.max_iter, qp_gap_tol=self.qp_gap_tol,
            callback=self._progress if self.verbose else None,
            checkpoint=backend.loop_checkpoint(self._fit_key(
                "lam", "dissimilarity", "lam_scaling", "qp_gap_tol")), first_rank=first_rank)

    def _set_method_fitted(self, result: SolverResult) -> None:
        self.representation_ = result.representation
        self.dissimilarity_ = result.dissimilarity
        self.qp_relative_gaps_ = result.qp_relative_gaps
        self.lam_effective_ = result.lam_effective

    def _summary_choices(self) -> list[str]:
        lines = super()._summary_choices()
        if self.lam_scaling == "normalized":
            lines.append(f"lambda: {format_number(self.lam)} relative to the scales of C and of "
                         "the residuals "
                         f"(the same effect at every n; effective {self.lam_effective_:.3g})"
                         + ("; every kernel represents itself at this lambda, so the weights "
                            "are equal: no kernel selected (with sfn a smaller lambda selects "
                            "representatives)" if equal_weights(self.weights_) else ""))
        if getattr(self, "view_weights_", None) is not None:
            shares = ", ".join(f"view {v} {w:.2f}" for v, w in enumerate(self.view_weights_))
            lines.append(f"weights from the views' agreement (the loop's were equal): {shares}")
        return lines
