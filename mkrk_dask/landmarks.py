"""Nystrom landmarks: which rows to use, and the floored inverse square root of their kernel.

Landmarks are rows of the data, chosen per view (every kernel of a view uses a prefix of the
view's landmark list, so the landmark count can differ per kernel):

- ``"uniform"``: a uniform sample without replacement;
- ``"kmeans++"``: k-means++ (D^2) seeding in the input space, run on a uniform candidate pool
  of at most ``pool_size`` rows (default ``max(20 r, 5000)``), so its cost does not grow with n.
  D^2 seeding spreads the landmarks over the data and picks far-out groups a uniform sample
  misses; a prefix of a k-means++ sequence is itself a k-means++ seeding.

Both are deterministic for a given ``random_state``.

:func:`landmark_transform` turns the landmark kernel block ``W = K(L, L)`` into the factor map
``T = U diag(lambda)^(-1/2)`` with a RELATIVE eigenvalue floor: eigenvalues below
``rel_floor * lambda_max`` (tiny, zero or negative from duplicated or nearly identical
landmarks and round-off) are treated as zero (the pseudo-inverse of the floored block), so no
factor column is ever scaled by ``1/sqrt(tiny)``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.sparse as sp
from sklearn.utils import check_random_state

from ._compute import compute_here
from .choices import LANDMARK_METHODS  # noqa: F401 - re-exported
from .kernel_evaluation import self_sq_distances, sq_distances
from .kernels import row_sq_norms

__all__ = ["LANDMARK_METHODS", "select_landmarks", "take_rows", "landmark_transform",
           "allocate_ranks", "DEFAULT_REL_FLOOR", "DEFAULT_RANK_TOL"]


#: eigenvalues of a landmark block below this times the largest are dropped
DEFAULT_REL_FLOOR = 1e-10
#: share of a landmark block's trace its dropped trailing eigenvalues may carry (Nystrom).
#: Off: 1e-3 and 1e-4 moved the weights of the paper's kernels by up to 0.021 and 0.020 from
#: the exact ones (NMI within 1.0 point; bench_nystrom_paper.py), over the 0.02 bar
DEFAULT_RANK_TOL = 0.0
#: most rows of a k-means++ pool whose squared distances are tabulated at once (a table of
#: at most 32 MiB)
TABLE_POOL_ROWS = 2048
#: most columns of a larger pool whose rows are lifted (:func:`_distance_rows`): the lift
#: saves passes over a step's distances, a large share of a step only where the product is
#: over a few columns, and costs a copy of the pool
LIFT_MAX_COLUMNS = 64


def take_rows(X: Any, indices: np.ndarray) -> Any:
    """Rows ``indices`` of a numpy, scipy sparse, dask or Zarr array, in the order given.

    Returns a numpy array (or CSR matrix for sparse input).
    """
    indices = np.asarray(indices, dtype=np.int64)
    order = np.argsort(indices, kind="stable")
    sorted_idx = indices[order]
    if sp.issparse(X):
        rows = sp.csr_matrix(X)[sorted_idx]
    elif hasattr(X, "compute"):  # dask
        rows = np.asarray(compute_here(X[sorted_idx]))
    elif hasattr(X, "get_orthogonal_selection"):  # zarr
        rows = np.asarray(X.get_orthogonal_selection((sorted_idx, slice(None))))
    else:
        rows = np.asarray(X)[sorted_idx]
    inverse = np.empty_like(order)
    inverse[order] = np.arange(order.size)
    return rows[inverse]


def _distance_rows(pool: Any, sq: np.ndarray) -> Any:
    """What :func:`kmeanspp_order` reads a step's squared distances from: a table of them
    all for a pool of at most :data:`TABLE_POOL_ROWS` rows; for a larger dense pool, its
    rows and their lifts ``[-2 y, 1, |y|^2]``, against which the lifts ``[x, |x|^2, 1]`` of a
    step's candidates give the squared distances in one matrix product (the formula's three
    passes over the step's distances after its product were most of a step on rows of a few
    columns); None for a sparse pool or one of more than :data:`LIFT_MAX_COLUMNS` columns
    (the formula a step)."""
    if pool.shape[0] <= TABLE_POOL_ROWS:
        return self_sq_distances(pool, sq)
    if sp.issparse(pool) or pool.shape[1] > LIFT_MAX_COLUMNS:
        return None
    rows = np.asarray(pool, dtype=np.float64)
    # as columns: a step's product then adds up rows of it, a few columns' worth each
    lifted = np.empty((rows.shape[1] + 2, rows.shape[0]))
    np.multiply(rows.T, -2.0, out=lifted[:-2])
    lifted[-2], lifted[-1] = 1.0, sq
    return rows, lifted


def _lift_candidates(rows: np.ndarray, sq: np.ndarray, picks: np.ndarray) -> np.ndarray:
    """``[x, |x|^2, 1]`` of the rows ``picks``: times a pool's lift ``[-2 y, 1, |y|^2]`` (as
    columns, :func:`_distance_rows`), their squared distances to every row of the pool."""
    picked = np.empty((picks.size, rows.shape[1] + 2))
    picked[:, :-2], picked[:, -2], picked[:, -1] = rows[picks], sq[picks], 1.0
    return picked


def kmeanspp_order(pool: Any, n_select: int, rng: np.random.RandomState,
                   local_trials: int = 1) -> np.ndarray:
    """Indices into ``pool`` in k-means++ (D^2) order; falls back to uniform draws among the
    unchosen rows once every remaining row coincides with a chosen one.

    ``local_trials > 1`` is the greedy k-means++ of scikit-learn's ``kmeans_plusplus``: that
    many rows are drawn at each step and the one that lowers the potential most is kept.
    Here a step is a few array operations; scikit-learn's validates its inputs at every step,
    which was most of the time of a thousand seeds on a few thousand rows. A pool of at most
    :data:`TABLE_POOL_ROWS` rows has its squared distances computed once, as one product
    (a step then reads rows of the table): at hundreds of seeds on such a pool (the anchors
    of a small fit's graph), one product per step was half the seeding's time. A larger
    dense pool forms a step's distances in one product (:func:`_distance_rows`).
    """
    size = pool.shape[0]
    sq = row_sq_norms(pool)
    chosen = np.empty(n_select, dtype=np.int64)
    taken = np.zeros(size, dtype=bool)
    first = int(rng.randint(size))
    chosen[0] = first
    taken[first] = True

    source = _distance_rows(pool, sq) if n_select > 1 else None
    # one work buffer for every step: a step's candidates are rows of it, as C-ordered rows
    # (the candidates' distances as columns of a transposed product were read across
    # memory, and made temporaries at every step: four times slower at 11,000 rows)
    buffer = np.empty((max(local_trials, 1), size))

    def sq_dist_to(rows: np.ndarray) -> np.ndarray:
        out = buffer[:rows.size]
        if isinstance(source, np.ndarray):
            return np.take(source, rows, axis=0, out=out)
        if source is not None:
            dense, lifted = source
            np.matmul(_lift_candidates(dense, sq, rows), lifted, out=out)
            return np.maximum(out, 0.0, out=out)
        return sq_distances(pool[rows], pool, sq[rows], sq, out=out)

    # a chosen row's distance is 0 (its own), so the D^2 weights need no mask of taken rows
    closest = sq_dist_to(np.array([first]))[0].copy()
    closest[first] = 0.0
    cumulative = np.empty(size)
    for t in range(1, n_select):
        np.cumsum(closest, out=cumulative)
        total = cumulative[-1]
        if total > 0:
            draws = rng.uniform(0, total) if local_trials == 1 else rng.uniform(
                0, total, size=local_trials)
            picks = np.searchsorted(cumulative, np.atleast_1d(draws))
            np.minimum(picks, size - 1, out=picks)
            if taken[picks].any():  # round-off at the boundary of the cumulative sum
                picks = np.where(taken[picks], np.flatnonzero(~taken & (closest > 0))[0],
                                 picks)
            candidates = sq_dist_to(picks)
            np.minimum(closest, candidates, out=candidates)
            best = int(candidates.sum(axis=1).argmin()) if picks.size > 1 else 0
            pick = int(picks[best])
            np.copyto(closest, candidates[best])
        else:
            pick = int(rng.choice(np.flatnonzero(~taken)))
            np.minimum(closest, sq_dist_to(np.array([pick]))[0], out=closest)
        closest[pick] = 0.0
        chosen[t] = pick
        taken[pick] = True
    return chosen


def select_landmarks(
    X: Any,
    n_landmarks: int,
    method: str = "kmeans++",
    random_state: Any = None,
    *,
    pool_size: int | None = None,
    return_rows: bool = False,
) -> Any:
    """Choose ``n_landmarks`` distinct rows of ``X`` as Nystrom landmarks.

    Parameters
    ----------
    X : ndarray, sparse matrix, dask array or Zarr array of shape (n, d)
    n_landmarks : int
        Capped at n.
    method : {"kmeans++", "uniform"}
    random_state : int, RandomState or None
    pool_size : int, optional
        k-means++ only: size of the uniform candidate pool (default ``max(20 r, 5000)``).
    return_rows : bool, default=False
        Also return the chosen rows (in selection order): k-means++ takes them from its pool,
        so lazy input is not read a second time (every read of a uniform sample decodes
        every chunk).

    Returns
    -------
    ndarray of int64, shape (min(n_landmarks, n),)
        Row indices, in selection order (any prefix is a valid smaller landmark set).
    rows : ndarray (float64) or CSR matrix
        With ``return_rows``: the chosen rows, as :func:`take_rows` gives them.
    """
    if method not in LANDMARK_METHODS:
        raise ValueError(f"landmarks must be one of {LANDMARK_METHODS}, got {method!r}")
    n = int(X.shape[0])
    if isinstance(n_landmarks, bool) or int(n_landmarks) != n_landmarks or n_landmarks < 1:
        raise ValueError(f"n_landmarks must be a positive integer, got {n_landmarks!r}")
    r = min(int(n_landmarks), n)
    rng = check_random_state(random_state)
    if method == "uniform":
        chosen = rng.choice(n, size=r, replace=False).astype(np.int64)
        return (chosen, take_rows(X, chosen)) if return_rows else chosen
    pool_size = max(20 * r, 5000) if pool_size is None else max(int(pool_size), r)
    if pool_size >= n:
        pool_idx = np.arange(n, dtype=np.int64)
    else:
        pool_idx = np.sort(rng.choice(n, size=pool_size, replace=False)).astype(np.int64)
    pool = take_rows(X, pool_idx)
    if not sp.issparse(pool):
        pool = np.asarray(pool, dtype=np.float64)
    order = kmeanspp_order(pool, r, rng)
    return (pool_idx[order], pool[order]) if return_rows else pool_idx[order]


def landmark_transform(W: np.ndarray, rel_floor: float = DEFAULT_REL_FLOOR,
                       rank_tol: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
    """``T = U diag(lambda)^(-1/2)`` of a landmark block ``W = U diag(lambda) U^T``, floored.

    With ``F = K(X, L) T``, ``F F^T = K(X, L) W^+ K(L, X)`` is the Nystrom approximation.

    Parameters
    ----------
    W : ndarray of shape (r, r)
        Kernel among the landmarks (symmetrised here).
    rel_floor : float
        Eigenvalues ``<= rel_floor * lambda_max`` (and all non-positive ones) are dropped.
    rank_tol : float, default=0
        Then the smallest leading eigenvalues are dropped too, as many as leave out at most
        this share of the trace of the (floored) block: the rank adapts to the kernel's
        smoothness (a wide Gaussian needs few components, a narrow one many). 0 keeps all.

    Returns
    -------
    T : ndarray of shape (r, r_kept)
        Columns ordered by decreasing eigenvalue; ``r_kept >= 1`` unless W is zero.
    eigenvalues : ndarray of shape (r_kept,)
        The eigenvalues kept.
    """
    if not rel_floor > 0:
        raise ValueError(f"rel_floor must be > 0, got {rel_floor}")
    W = np.asarray(W, dtype=np.float64)
    values, vectors = np.linalg.eigh(0.5 * (W + W.T))
    order = np.argsort(values)[::-1]
    values, vectors = values[order], vectors[:, order]
    top = values[0] if values.size else 0.0
    if not np.isfinite(values).all():
        raise ValueError("the landmark kernel block has non-finite eigenvalues")
    keep = values > max(rel_floor * top, 0.0) if top > 0 else np.zeros(values.size, bool)
    values, vectors = values[keep], vectors[:, keep]
    if rank_tol > 0 and values.size > 1:
        # tails[i]: the trace left out when the first i + 1 eigenvalues are kept
        tails = np.cumsum(values[::-1])[::-1][1:]
        kept = 1 + int(np.count_nonzero(tails > rank_tol * float(values.sum())))
        values, vectors = values[:kept], vectors[:, :kept]
    return vectors / np.sqrt(values)[None, :], values


def allocate_ranks(eigenvalues: list[np.ndarray], budget: int | None) -> list[int]:
    """How many leading eigenvectors each kernel keeps so that all of them keep at most
    ``budget`` together (``None``: every one).

    Components are kept in the order of the share of their kernel's trace they carry (the
    eigenvalue over the block's trace, comparable across kernels of one landmark set and
    independent of n), at least one per kernel: the trace the kernels leave out, summed over
    them, is the smallest any split of ``budget`` leaves out. So smooth kernels (a fast-decaying
    spectrum) give their tails to rough ones.

    Parameters
    ----------
    eigenvalues : list of ndarray
        Per kernel, the eigenvalues its transform keeps, in decreasing order
        (:func:`landmark_transform`'s second value).
    budget : int or None
        Largest total rank; at least the number of kernels.

    Returns
    -------
    list of int
        Per kernel, its number of leading components kept.
    """
    ranks = [int(v.size) for v in eigenvalues]
    if budget is None or sum(ranks) <= budget:
        return ranks
    if budget < len(ranks):
        raise ValueError(f"max_components={budget} is below the number of kernels "
                         f"({len(ranks)}): every kernel needs one component")
    # every kernel's first component, then the largest shares among the rest: shares decrease
    # along a kernel's spectrum, so the ones taken form a prefix of each kernel's
    shares = [np.asarray(v[1:], dtype=np.float64) / float(np.sum(v)) for v in eigenvalues]
    owner = np.concatenate([np.full(s.size, p) for p, s in enumerate(shares)])
    order = np.argsort(-np.concatenate(shares), kind="stable")[:budget - len(ranks)]
    return (1 + np.bincount(owner[order], minlength=len(ranks))).tolist()
