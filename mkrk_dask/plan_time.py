"""The expected time of a fit (:attr:`~mkrk_dask.plan.FitPlan.expected_seconds`): a short
calibration on the rows the plan samples, and a model of the work its fit does.

The calibration (:func:`calibrate`) times on this machine, as it is loaded now, the kinds of
work a fit spends its time on, on at most :data:`CALIBRATION_ROWS` rows of the plan's sample
(each the best of :data:`REPEATS` runs):

- **kernel evaluation**: every kernel of the plan on every view (``kernel_blocks``, which
  every backend evaluates them with), sampled rows against :data:`CALIBRATION_COLUMNS` of
  them, a thread per core as the passes run;
- **matrix products**: in the storage precision, a thread per core (the Nystrom factors'
  products and Gram matrix, the eigensolvers, the k-means);
- **k-means++ seeding**: steps over a pool of rows, as the landmarks and as the graph's
  anchors are seeded (each with its pool, threads and trials);
- **eigendecompositions**: a small dense one with the process's threads (the landmark
  blocks');
- **a k-means restart** on a few rows: what a small fit's k-means and graph are made of;
- **nearest anchors**: scikit-learn's brute-force search (the final graph and its labels).

Only what the plan's backend and final step use is timed. Up to :data:`QUICK_MAX_N` rows,
where the whole fit takes about a second, only the kernels on the sample and one product
are timed, once. :func:`expected_phases` multiplies the rates by the counts of what the fit
runs, stage by stage as ``timings_`` names them. What is not known before the fit is
assumed, and said in the plan's line (:func:`expected_time_text`): the weights' loop makes
:func:`assumed_h_steps` eigendecompositions (MKKM-RK's default usually keeps its starting
weights: one), and the fit runs on this machine's cores (a cluster given as ``scheduler``
has its own). The constants of the model were set on the 2-core VM the benchmarks run on
(``benchmarks/results/scale/scaling_expected_time.md`` compares the two).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import scipy.sparse as sp

__all__ = ["Calibration", "FinalCounts", "calibrate", "expected_phases", "with_expected_time",
           "expected_time_text", "assumed_h_steps", "CALIBRATION_ROWS", "QUICK_MAX_N"]

#: most sampled rows the calibration evaluates the kernels on ...
CALIBRATION_ROWS = 512
#: ... against this many of them (the landmarks' side): 512 x 256 of the default's 16
#: kernels took 20-25 ms on 2 cores, steadily; 128 columns varied 2x
CALIBRATION_COLUMNS = 256
#: side of the timed products: at 384 they ran at the rate of the factor pass's Gram products
#: (23-36 GFLOP/s against 25-33 for a 4,096 x 2,048 syrk, float32, 2 cores); at 256 at 4-8
PRODUCT_SIDE = 384
#: runs of the kernels' and the products' timings, the best kept: one run is often slowed
#: by another process (the longer timings below run once or twice)
REPEATS = 3
#: steps of the timed k-means++ seeding (over as many rows as the fit's pool, at most
#: :data:`SEED_POOL_ROWS`: the pool's size sets whether BLAS runs the steps on one thread)
SEED_STEPS = 16
#: ... the most rows of the timed pool: a landmark pool's 10,000 rows
SEED_POOL_ROWS = 10_000
#: side of the timed eigendecomposition ...
EIGEN_SIDE = 128
#: ... scaled to the landmarks' side as this power of the ratio: LAPACK on 2 threads took
#: 0.2-0.3 s at 128, 1.4-1.5 s at 256 and 0.3-1.0 s at 500 on the loaded VM (its threads wait
#: for each other), not the cube's growth; the landmark blocks of two loaded fits (10^4 and
#: 10^5 rows) took 1.2 and 2.2 times what this power gives (the square: 0.4 and 0.2 times)
EIGEN_GROWTH = 1.5
#: rows and anchors of the timed nearest-anchor search (the graph's anchors are 2,000)
NEIGHBOUR_ROWS, NEIGHBOUR_ANCHORS = 2048, 1024
#: up to this many rows the calibration times the kernels on the sample and one product,
#: once, on one thread, and takes the other rates in proportion (:data:`NEIGHBOUR_PER_FLOP`)
QUICK_MAX_N = 2000
#: seconds per row, anchor and column of the nearest-anchor search over seconds per flop of
#: a product, where it is not timed
NEIGHBOUR_PER_FLOP = 30.0
#: seconds to start the fit's local Dask cluster: 0.1-2.8 s on the 2-core VM (the first
#: start in a process imports distributed)
SESSION_SECONDS = 1.0
#: seconds of a fit besides its stages' work: checks of the input, the plan's choices
FIT_SECONDS = 0.05
#: seconds per row and anchor of the graph's mini-batch k-means over those of the
#: nearest-anchor search (its distances are one product a batch)
MINIBATCH_SHARE = 0.3
#: Lloyd passes of a k-means restart (scikit-learn stops at its tolerance; 10-40 seen)
KMEANS_PASSES = 30
#: bytes per second a pass reads the exact backend's kernels from memory (a product of the
#: stacked kernels with a vector ran at 2.1-4.3 GB/s on the 2-core VM)
MEMORY_BYTES_PER_SECOND = 3e9
#: bytes per second the blockwise backend writes or reads its Zarr store (compressed chunks
#: on local disk): a rough figure
STORE_BYTES_PER_SECOND = 2e8
#: products with the matrix an iterative top-k eigensolver makes (ARPACK on the exact
#: kernels, the Gram matrix; the blockwise backend's block Krylov)
EIGEN_PRODUCTS = 100
#: eigendecompositions of the weights' loop assumed where none is measured: MKKM-RK's default
#: usually keeps its starting weights (1 iteration at 10^4 to 10^7 rows,
#: ``benchmarks/results/scale/scaling.md``); SimpleMKKM made 26-30 iterations of 2 H-steps
#: (``scaling_simple_mkkm.md``); MKKM 26-36 iterations (``paper/simple_mkkm/paper_table.md``)
ASSUMED_H_STEPS = {"MKKM-RK": 1, "SimpleMKKM": 60}
#: ... and for the other methods
OTHER_H_STEPS = 30
#: flops of a Nystrom factor row's products, as a share of ``2 L R`` (``L`` landmarks per
#: view, ``R`` columns): the strong columns' trapezoidal product skips about half, the
#: linear kernels of few features much more
PRODUCT_SHARE = 0.5
#: landmark blocks decomposed per kernel: every kernel's, and again the prefix of most of
#: them (``landmark_oversampling``): 28 for the default's 16 kernels
LANDMARK_DECOMPOSITIONS = 1.75


@dataclass(frozen=True)
class Calibration:
    """Rates measured on the plan's sample, in seconds (0 where not timed).

    Attributes
    ----------
    kernel : float
        Per sampled row and column, every kernel of every view, on all cores.
    product : float
        Per flop of a matrix product in the storage precision, on all cores.
    seeding : float
        Per pool row and step of k-means++ seeding of the landmarks (the process's threads).
    graph_seeding : float
        Per pool row, step and trial of the graph's anchors' seeding (one BLAS thread).
    eigen : float
        One dense symmetric eigendecomposition of side :data:`EIGEN_SIDE` (the process's
        threads).
    load : float
        Runnable processes per core (the load average's last minute): a fit's scikit-learn
        steps run slower beside its Dask session the more there are (:func:`_final`).
    restart : float
        A k-means restart on a few rows: scikit-learn's checks and threads, which a small
        fit's k-means and graph are mostly made of (a few ms on an idle machine, 0.1 s on a
        loaded one).
    neighbours : float
        Per row, anchor and column of the nearest-anchor search (one BLAS thread).
    rows : int
        Sampled rows the kernels were timed on.
    seconds : float
        The calibration's own time.
    """

    kernel: float
    product: float
    seeding: float
    graph_seeding: float
    eigen: float
    load: float
    restart: float
    neighbours: float
    rows: int
    seconds: float


@dataclass(frozen=True)
class FinalCounts:
    """What the final step runs, as the plan counts it (its constants live in the plan).

    Attributes
    ----------
    restarts : int
        Restarts of the first k-means partition.
    graph_passes : int
        Passes of the graph's anchors' mini-batch k-means.
    graph_neighbors : int
        Nearest anchors of a row.
    """

    restarts: int
    graph_passes: int
    graph_neighbors: int


def _best(work: Any, parts: int = 1, repeats: int = REPEATS) -> float:
    """The least wall seconds of ``repeats`` runs of ``work(i)`` for ``i < parts``, on a thread
    per core where ``parts`` > 1 (:func:`~mkrk_dask._threads.map_threads`: BLAS on one
    thread each, as a pass's tasks)."""
    from ._threads import map_threads

    best = math.inf
    for _ in range(repeats):
        start = time.perf_counter()
        if parts > 1:
            map_threads(lambda i, _: work(i), parts)
        else:
            work(0)
        best = min(best, time.perf_counter() - start)
    return max(best, 1e-9)


def _timing_specs(specs: Any, rows: Any) -> list:
    """``specs`` with a width of the sampled rows' scale where theirs is relative (a kernel's
    time does not depend on its width, but an exponential far below 1 runs slower)."""
    from .kernel_widths import unit_rows
    from .kernels import row_sq_norms

    out = []
    for spec in specs:
        if spec.sigma is None and spec.family in ("gaussian", "angular"):
            scaled = unit_rows(rows) if spec.family == "angular" else rows
            half = scaled.shape[0] // 2
            pairs = scaled[:half] - scaled[half:2 * half]
            scale = math.sqrt(float(np.median(row_sq_norms(pairs)))) if half else 1.0
            spec = replace(spec, sigma=(spec.m or spec.c or 1.0) * max(scale, 1e-6))
        out.append(spec)
    return out


def _kernel_rate(rows: list, specs: Any, normalize: bool, parts: int, repeats: int) -> float:
    """Seconds per row and column of every kernel of every view: the sampled ``rows``
    against :data:`CALIBRATION_COLUMNS` of them, split over ``parts`` threads."""
    from .kernels import kernel_blocks

    s = int(rows[0].shape[0])
    columns = min(CALIBRATION_COLUMNS, s)
    groups = [(_timing_specs([p for p in specs if p.view == v], r), r)
              for v, r in enumerate(rows)]
    groups = [(g, r) for g, r in groups if g]
    cut = np.linspace(0, s, parts + 1).astype(int)

    def evaluate(i: int) -> None:
        for group, r in groups:
            kernel_blocks(group, r[cut[i]:cut[i + 1]], r[:columns], normalize=normalize)

    return _best(evaluate, parts, repeats) / (s * columns)


def calibrate(samples: list | None, specs: Any, *, n: int, normalize: bool = True,
              dtype: Any = np.float64, landmarks: int = 0, graph_columns: int = 0,
              graph_neighbors: int = 10, graph_anchors: int = 0, graph_pool: int = 0,
              n_clusters: int = 2) -> Calibration:
    """Time the fit's kinds of work on the plan's sample (see the module docstring).

    Parameters
    ----------
    samples : list of arrays or None
        The plan's sample of every view, as the kernels see it (None for precomputed
        kernels: no kernel is timed).
    specs : sequence of KernelSpec or None
    n : int
        Rows of the data (up to :data:`QUICK_MAX_N`, the quick calibration).
    normalize : bool, default=True
    dtype : dtype, default=float64
        The storage precision (of the timed products).
    landmarks : int, default=0
        Nystrom landmarks per view (their seeding and decompositions are timed), 0 for
        another backend.
    graph_columns : int, default=0
        Columns of the final rows where a final graph is planned (its nearest-anchor search
        and seeding are timed on as many), 0 without one.
    graph_neighbors : int, default=10
        Nearest anchors of a row in the graph.
    graph_anchors, graph_pool : int, default=0
        The graph's anchors and the rows they are seeded from.
    n_clusters : int, default=2
        Clusters of the timed k-means restart.

    Returns
    -------
    Calibration
    """
    from ._threads import single_blas_thread, usable_cores

    start = time.perf_counter()
    cores = usable_cores()
    rng = np.random.default_rng(0)
    quick = n <= QUICK_MAX_N
    s = min(CALIBRATION_ROWS, n)
    rows = None if samples is None or specs is None else [v[:s] for v in samples]
    kernel = rate_seeding = graph_seeding = eigen = neighbours = 0.0
    if rows is not None:
        s = int(rows[0].shape[0])
        kernel = (_kernel_rate(rows, specs, normalize, 1, 1) / cores if quick
                  else _kernel_rate(rows, specs, normalize, cores, REPEATS))
    parts = 1 if quick else cores
    side = min(PRODUCT_SIDE, max(16, s // 2)) if quick else PRODUCT_SIDE
    left = rng.standard_normal((parts * side, side)).astype(dtype)
    right = left[:side]
    product = _best(lambda i: left[i * side:(i + 1) * side] @ right, parts,
                    1 if quick else REPEATS) / (2.0 * parts * side**3)
    restart = _restart(rng, n_clusters, max(2, graph_columns), 1 if quick else 2)
    if quick:
        product /= cores
        neighbours = product * NEIGHBOUR_PER_FLOP
    else:
        if landmarks and samples is not None:
            rate_seeding = _seeding(_pool(samples[0], min(n, max(20 * landmarks, 5000))), 1)
            block = rng.standard_normal((EIGEN_SIDE, EIGEN_SIDE))
            block = block @ block.T
            eigen = _best(lambda _: np.linalg.eigh(block), repeats=1)
        if graph_columns:
            neighbours = _neighbours(rng, graph_columns, graph_neighbors)
            trials = 2 + int(np.log(graph_anchors))  # as the graph seeds its anchors
            with single_blas_thread():
                graph_seeding = _seeding(rng.standard_normal((min(graph_pool, SEED_POOL_ROWS),
                                                              graph_columns)), trials) / trials
    return Calibration(kernel=kernel, product=product, seeding=rate_seeding,
                       graph_seeding=graph_seeding, eigen=eigen, load=_load(cores),
                       restart=restart,
                       neighbours=neighbours, rows=s, seconds=time.perf_counter() - start)


def _load(cores: int) -> float:
    """Runnable processes per core over the last minute (0 where the OS does not say)."""
    import os

    try:
        return float(os.getloadavg()[0]) / cores
    except (AttributeError, OSError):
        return 0.0


def _pool(rows: Any, size: int) -> Any:
    """The sampled ``rows`` repeated to ``size`` rows (at most :data:`SEED_POOL_ROWS`)."""
    copies = max(1, -(-min(size, SEED_POOL_ROWS) // rows.shape[0]))
    return sp.vstack([rows] * copies).tocsr() if sp.issparse(rows) else np.tile(rows,
                                                                                (copies, 1))


def _restart(rng: np.random.Generator, k: int, columns: int, repeats: int) -> float:
    """Seconds of one k-means restart on a few rows, as the fit runs its k-means."""
    from sklearn.cluster import KMeans

    from ._threads import single_blas_thread

    data = rng.standard_normal((max(64, 4 * k), columns))
    with single_blas_thread():
        return _best(lambda _: KMeans(k, n_init=1, random_state=0).fit(data),
                     repeats=repeats)


def _seeding(pool: Any, trials: int) -> float:
    """Seconds per pool row and step of k-means++ seeding (``trials`` candidates a step) on
    ``pool``."""
    from .landmarks import kmeanspp_order

    steps = min(SEED_STEPS, pool.shape[0] - 1)
    if steps < 1:
        return 0.0
    seconds = _best(lambda _: kmeanspp_order(pool, steps + 1, np.random.RandomState(0),
                                             local_trials=trials), repeats=1)
    return seconds / (steps * pool.shape[0])


def _neighbours(rng: np.random.Generator, columns: int, neighbors: int) -> float:
    """Seconds per row, anchor and column of scikit-learn's brute-force nearest anchors."""
    from sklearn.neighbors import NearestNeighbors

    from ._threads import single_blas_thread

    data = rng.standard_normal((NEIGHBOUR_ROWS, columns))
    index = NearestNeighbors(n_neighbors=min(neighbors, NEIGHBOUR_ANCHORS), algorithm="brute")
    index.fit(data[:NEIGHBOUR_ANCHORS])
    with single_blas_thread():  # as the final graph runs it
        seconds = _best(lambda _: index.kneighbors(data), repeats=2)
    return seconds / (NEIGHBOUR_ROWS * NEIGHBOUR_ANCHORS * columns)


# -- the model ----------------------------------------------------------------------------------

def assumed_h_steps(method: str, max_iter: int = 10**9) -> int:
    """Eigendecompositions the weights' loop is assumed to make (:data:`ASSUMED_H_STEPS`),
    at most those ``max_iter`` allows (SimpleMKKM: two a step)."""
    per_step = 2 if method == "SimpleMKKM" else 1
    return max(1, min(ASSUMED_H_STEPS.get(method, OTHER_H_STEPS), per_step * int(max_iter)))


def _kmeans(rate: Calibration, rows: int, k: int, columns: int, restarts: int) -> float:
    """Seconds of a k-means of ``restarts`` restarts on ``rows`` x ``columns``."""
    return restarts * (rate.restart + KMEANS_PASSES * 2.0 * rows * k * columns * rate.product)


def _landmarks(plan: Any) -> int:
    """Landmarks per view of a Nystrom plan (the most any kernel has)."""
    counts = plan.options["n_landmarks"]
    return int(min(max(counts) if isinstance(counts, list | tuple) else counts,
                   plan.n_samples))


def _graph_pool(plan: Any) -> int:
    """Rows the final graph's anchors are seeded from (as the graph draws them)."""
    from .anchor_graph import SEED_ROWS

    return min(plan.graph_rows, max(SEED_ROWS, 3 * plan.graph_anchors))


def _final(plan: Any, rate: Calibration, k: int, n_init: int, counts: FinalCounts
           ) -> dict[str, float]:
    """Seconds of the final k-means and graph (the stages ``kmeans`` and ``graph``)."""
    from .anchor_graph import ANCHOR_SAMPLE_ROWS, BATCH_ROWS

    n, r = plan.n_samples, plan.n_components
    # A Nystrom or blockwise fit runs these (scikit-learn's threads) beside its Dask session,
    # slower the more the machine is loaded: the graph's nearest-anchor search took 7-9x its
    # time outside the fit (the same rows, in and after a fit of 10^4 rows) at a load average
    # of 9-11 on 2 cores, and about its time outside on the idle VM (the graph of
    # scaling_final_share.md at 10^5 and 10^6 rows against its parts): the runnable
    # processes per core, at least 1
    slower = max(1.0, rate.load) if plan.solver != "exact" else 1.0
    # fitted on a sample of the rows where the plan says so (the pass that labels every row
    # is the embedding's: _nystrom)
    n = int(plan.options.get("final_rows") or n)
    out = {"kmeans": _kmeans(rate, n, k, r, counts.restarts) * slower, "graph": 0.0}
    if plan.graph_anchors:
        g, a = plan.graph_rows, plan.graph_anchors
        learned = min(g, ANCHOR_SAMPLE_ROWS)
        per_pair = rate.neighbours * r
        # the anchors' seeding: a step weighs its candidates against every pool row
        seeding = (rate.graph_seeding or 2.0 * r * rate.product) * (2 + int(np.log(a)))
        out["graph"] = (a * _graph_pool(plan) * seeding
                        # their mini-batch k-means: every batch to every anchor
                        + counts.graph_passes * (MINIBATCH_SHARE * learned * a * per_pair
                                                 + -(-learned // BATCH_ROWS) * rate.restart)
                        + n * a * per_pair  # every row to its nearest anchors
                        + _kmeans(rate, g, k, k, n_init)) * slower
    return out


def _nystrom(plan: Any, rate: Calibration, m: int, k: int, h_steps: int
             ) -> dict[str, float]:
    """Seconds of the Nystrom backend's stages."""
    n, r = plan.n_samples, plan.n_components
    options = plan.options
    landmarks = _landmarks(plan)
    R = m * landmarks if options.get("max_components") is None else min(
        m * landmarks, int(options["max_components"]))
    pool = min(n, max(20 * landmarks, 5000))  # select_landmarks' pool
    exact_c = n <= int(options.get("exact_dissimilarity_max_n") or 0)
    kernel_row = rate.kernel * landmarks  # every kernel of a row against its landmarks
    products = PRODUCT_SHARE * 2.0 * landmarks * R * rate.product
    build = (SESSION_SECONDS + max(1, plan.n_views) * landmarks * pool * rate.seeding
             + landmarks * landmarks * rate.kernel
             + LANDMARK_DECOMPOSITIONS * m * rate.eigen
             * (landmarks / EIGEN_SIDE)**EIGEN_GROWTH
             # the factors and their Gram matrix: of the sampled rows only above gram_rows
             + (options.get("gram_rows") or n) * (kernel_row + products + R * R * rate.product))
    if exact_c:  # every pair of rows: the kernels, the local part's residuals
        build += 0.5 * n * n * (rate.kernel + 2.0 * R * rate.product)
    # an H-step: the top eigenpairs of the R x R Gram matrix
    loop = h_steps * EIGEN_PRODUCTS * 2.0 * R * R * rate.product
    if exact_c or options.get("store_factors") is True:  # the stored factors read back
        embedding = inertia = n * 2.0 * R * r * rate.product
    else:  # computed again from the data: the final rows, then the clusters' sums of F
        embedding = n * (kernel_row + 2.0 * landmarks * m * r * rate.product)
        inertia = n * (kernel_row + products)
    sample = options.get("final_rows")
    if sample:  # the sample's rows, then one pass: every row and its label, the sampled
        # rows' cluster sums
        embedding = embedding * (1.0 + sample / n) + sample * 2.0 * R * k * rate.product
        inertia = 0.0
    return {"build": build, "loop": loop, "embedding": embedding, "inertia": inertia}


def _in_memory(plan: Any, rate: Calibration, m: int, k: int, h_steps: int) -> dict[str, float]:
    """Seconds of the exact backend's stages: the dense kernels in memory."""
    n, r = plan.n_samples, plan.n_components
    read = 8.0 * m * n * n / MEMORY_BYTES_PER_SECOND  # one pass over the kernels
    if plan.kernels is not None:  # the upper triangles evaluated, mirrored
        build = 0.5 * n * n * rate.kernel + read
    else:  # precomputed: checked, normalised and copied, and a Cholesky test of each
        build = 3.0 * read + m * n**3 / 3.0 * rate.product
    # the dissimilarity: every tr(K_p K_q), one product of the stacked kernels
    build += 2.0 * m * m * n * n * rate.product
    eigen = EIGEN_PRODUCTS * 8.0 * n * n / MEMORY_BYTES_PER_SECOND
    # an H-step: K_w formed, its top eigenpairs, the quadratic forms (H H^T, then a pass)
    loop = h_steps * (2.0 * read + eigen + 2.0 * n * n * r * rate.product)
    return {"build": build, "loop": loop, "embedding": 0.0 if h_steps == 1 else eigen,
            "inertia": read + 2.0 * n * n * k * rate.product}


def _blockwise(plan: Any, rate: Calibration, m: int, h_steps: int) -> dict[str, float]:
    """Seconds of the blockwise backend's stages: the kernels in a Zarr store."""
    n = plan.n_samples
    store = 8.0 * m * n * n / STORE_BYTES_PER_SECOND  # one pass over the store
    # built: the upper triangles evaluated and written, then the Gram pass reads them
    build = SESSION_SECONDS + (0.5 * n * n * rate.kernel if plan.kernels is not None else 0.0)
    # an H-step: K_w formed (written: 1/m of the store), the eigensolver's products
    # reading it, the quadratic forms' pass
    loop = h_steps * (2.0 * store + EIGEN_PRODUCTS / 10 * store / m)
    return {"build": build + 2.0 * store, "loop": loop, "embedding": 0.0, "inertia": store}


def expected_phases(plan: Any, rate: Calibration, params: dict, counts: FinalCounts,
                    n_kernels: int) -> dict[str, float]:
    """Expected seconds of every stage of a fit of ``plan`` (the keys of ``timings_``:
    ``plan``, ``build``, ``loop``, ``embedding``, ``kmeans``, ``graph``, ``inertia``).

    Parameters
    ----------
    plan : FitPlan
    rate : Calibration
    params : dict
        The estimator's parameters (``n_clusters``, ``n_init``, ``max_iter``).
    counts : FinalCounts
    n_kernels : int

    Returns
    -------
    dict of str to float
    """
    k, m = int(params["n_clusters"]), int(n_kernels)
    h_steps = assumed_h_steps(plan.method, params.get("max_iter", 100))
    out = {"plan": rate.seconds + FIT_SECONDS,
           **_final(plan, rate, k, int(params["n_init"]), counts)}
    if plan.solver == "nystrom":
        out.update(_nystrom(plan, rate, m, k, h_steps))
    elif plan.solver == "blockwise":
        out.update(_blockwise(plan, rate, m, h_steps))
    else:
        out.update(_in_memory(plan, rate, m, k, h_steps))
    return out


def with_expected_time(plan: Any, samples: list | None, params: dict, *, n_kernels: int,
                       counts: FinalCounts) -> Any:
    """``plan`` with its ``expected_seconds``: :func:`calibrate` on ``samples`` (the plan's
    sample of every view, as the kernels see it; None for precomputed kernels), then the
    sum of :func:`expected_phases`."""
    if not _finite(samples):  # the fit's first pass names the bad rows; nothing to time
        return plan
    a = plan.graph_anchors
    rate = calibrate(samples, plan.kernels, n=plan.n_samples,
                     normalize=bool(params.get("normalize", True)),
                     dtype=np.float32 if plan.dtype == "float32" else np.float64,
                     landmarks=_landmarks(plan) if plan.solver == "nystrom" else 0,
                     graph_columns=plan.n_components if a else 0,
                     graph_neighbors=counts.graph_neighbors, graph_anchors=a,
                     graph_pool=_graph_pool(plan), n_clusters=int(params["n_clusters"]))
    phases = expected_phases(plan, rate, params, counts, n_kernels)
    return replace(plan, expected_seconds=float(sum(phases.values())))


def _finite(samples: list | None) -> bool:
    """Whether every sampled value is finite (dense or sparse)."""
    for rows in samples or ():
        values = rows.data if sp.issparse(rows) else np.asarray(rows)
        if not np.isfinite(values).all():
            return False
    return True


def _seconds_text(seconds: float) -> str:
    """``"about 140 s"``, ``"about 0.4 s"``, ``"about 25 min"``: two significant digits."""
    if seconds >= 600:
        return f"about {seconds / 60:,.0f} min"
    return f"about {float(f'{seconds:.2g}'):g} s"


def expected_time_text(plan: Any) -> str:
    """The plan's line of its expected time, with what it assumes."""
    seconds = getattr(plan, "expected_seconds", None)
    if seconds is None:
        return "expected time: not estimated"
    steps = assumed_h_steps(plan.method)
    loop = ("the weights stay where they start (1 eigendecomposition), as MKKM-RK's default "
            "usually does" if steps == 1 else
            f"{steps} eigendecompositions in the weights' loop, fewer where max_iter stops it")
    return (f"expected time: {_seconds_text(seconds)} (calibrated on the plan's sample, on "
            f"this machine's cores; assumes {loop})")
