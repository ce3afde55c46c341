"""RMKKM: robust multiple kernel k-means with the l2,1 loss (Du et al., IJCAI 2015), on dense
kernels.

Every sample pays the distance (not its square) to its cluster's centre in the combined feature
space ``phi_w(x) = [sqrt(w_1) phi_1(x); ...; sqrt(w_m) phi_m(x)]``:

    J(labels, S, w) = sum_j || phi_w(x_j) - c_{l_j} ||_2 = sum_j sqrt( sum_v w_v A_jv ),
    A_jv = K_v,jj - 2 (K_v S)_{j, l_j} + (S^T K_v S)_{l_j, l_j},

with every centre a combination ``c_c = sum_i S_ic phi_w(x_i)`` of the samples (columns of S
sum to 1) and kernel coefficients ``w >= 0`` with ``sum_v w_v^gamma = 1``, ``0 < gamma < 1``
(``K_w = sum_v w_v K_v``). Three blocks, each step lowering J:

- labels: every sample to its nearest centre under ``K_w``;
- centres: one Weiszfeld step per cluster, i.e. the iteratively reweighted mean with weights
  ``D_jj = 1 / (2 ||phi_w(x_j) - c||)`` (the l2,1 reweighting; Weiszfeld is a
  majorise-minimise step for the sum of distances);
- weights: ``sqrt`` is concave, so ``sum_j d_j w^T A_j`` with ``d_j = 1 / (2 sqrt(w_old^T A_j))``
  majorises J - const; its minimum over ``{w >= 0, sum w^gamma = 1}`` is the closed form
  ``w_v = h_v^(1/(gamma-1)) / (sum_u h_u^(gamma/(gamma-1)))^(1/gamma)``, ``h = sum_j d_j A_j``.

Choices the paper leaves open, and where they come from (the authors' code, csliangdu/RMKKM:
``RMKKM/RMKKM.m``, ``L21KKM/L21KKM.m``; the MKKM-RK authors' driver ``demo_rmkkm.m`` of
zcbgit/MKKM_RK calls ``RMKKM(Ks, k, 'gamma', g, 'maxiter', 50, 'replicates', 1)`` for g in
0.1:0.1:0.9):

- the weight constraint and gamma's range: the code's ``lp_simplex_proj`` minimises ``h^T w``
  subject to ``sum w^gamma = 1`` and asserts ``0 < gamma < 1``; ``weights`` are those
  coefficients (what the driver stores), ``simplex_weights = weights ** gamma`` sum to 1;
- initial weights: the code starts from ``1/m``, which is off that constraint; we start from
  the equal weights on it, ``m^(-1/gamma)``. ``K_w`` only changes scale, which moves neither
  labels nor centres, so the clustering is the same; J is comparable from the first iteration;
- initial clustering (``init_labels=None``): as the code's first iteration, l2,1 kernel k-means
  on the equal-weight kernel from 10 replicates of k distinct random samples as centres, at
  most 30 iterations each, keeping the lowest sum of distances;
- later label steps: the code's active branch reruns that 10-replicate random search at every
  outer iteration, so J jumps and the iterations do not build on each other; its other branch
  (``L21KKM_single``) warm-starts from the current centres for at most 10 label/centre steps
  until the labels repeat. We use the warm-started one: it is the block coordinate descent the
  paper describes, and J never increases;
- the epsilons (as ``L21KKM``): squared distances are floored at machine epsilon before
  ``1/(2 sqrt(.))``, and samples within ``1e-10`` (squared) of their centre get the mean of
  the other samples' weights instead of an infinite one. In the weight step a sample exactly at
  its centre in every kernel costs 0 whatever w is and is left out of h (the code floors A at
  machine epsilon instead);
- safeguard (ours): a centre moves only if that lowers its cluster's sum of distances; the
  reweighting's floor above is the only way Weiszfeld's step could raise it;
- empty clusters (as ``L21KKM``): the samples farthest from their nearest centre move to the
  empty clusters; ours takes them only from clusters with at least two members;
- stopping: the code's outer loop compares the labels with a variable it never updates, so it
  always runs ``maxiter``; we stop when an iteration changed no label and lowered J by at most
  ``tol`` relative, or after ``max_iter`` (default 50, the driver's);
- ``replicates``: the code's replicates rerun everything and keep the lowest sum of
  distances; the driver uses 1, as here (rerun with other ``random_state`` values to repeat).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from numbers import Integral, Real
from typing import Any

import numpy as np
from scipy import sparse
from sklearn.utils._param_validation import Interval

from .._threads import local_threads
from ..validation import N_CLUSTERS, Phrased, constrained
from ._checks import check_dense_input

__all__ = ["rmkkm", "RMKKMResult", "rmkkm_objective", "weight_step"]

#: label/centre steps per outer iteration (the code's ``L21KKM_single``)
_INNER_STEPS = 10
#: the initial clustering: replicates and steps per replicate (the code's L21KKM call)
_INIT_REPLICATES = 10
_INIT_STEPS = 30
#: squared distances below this are "at the centre" (the code's threshold)
_AT_CENTRE = 1e-10
_EPS = np.finfo(np.float64).eps


@dataclass
class RMKKMResult:
    """The outcome of :func:`rmkkm`.

    Attributes
    ----------
    labels : ndarray of shape (n,)
    weights : ndarray of shape (m,)
        Kernel coefficients w (``K_w = sum_v w_v K_v``), with ``sum_v w_v^gamma = 1``.
    simplex_weights : ndarray of shape (m,)
        ``w ** gamma``: non-negative, summing to 1.
    centres : ndarray of shape (n, k)
        S: centre c of cluster c is ``sum_i S_ic phi_w(x_i)``; columns sum to 1.
    objective_history : ndarray of shape (n_iter,)
        J after every iteration's weight step; never increases.
    n_iter : int
    converged : bool
        Stopped by the rule (no label changed, relative decrease of J at most ``tol``)
        rather than by ``max_iter``.
    """

    labels: np.ndarray
    weights: np.ndarray
    simplex_weights: np.ndarray
    centres: np.ndarray = field(repr=False)
    objective_history: np.ndarray
    n_iter: int
    converged: bool


def _per_kernel_sq_distances(kernels: np.ndarray, S: np.ndarray, labels: np.ndarray
                             ) -> np.ndarray:
    """``A`` (n, m): squared distance of every sample to its centre in every kernel.

    Only ``(K_v S)[j, labels[j]]`` is needed, one entry per sample: a pass over the kernels
    against ``M[j, i] = S[i, labels[j]]`` (memory-bound; the full ``K_v S`` costs k times the
    flops). A centre's norm ``s_c^T K_v s_c`` then follows from those entries when S's column
    c lives on the samples labelled c (the usual case); otherwise from its own block.
    """
    T = np.einsum("vji,ji->vj", kernels, S[:, labels].T)         # (m, n)
    m, k = kernels.shape[0], S.shape[1]
    centre_sq = np.zeros((m, k))
    for c in np.unique(labels):
        support = np.flatnonzero(S[:, c])
        s = S[support, c]
        if np.all(labels[support] == c):
            centre_sq[:, c] = T[:, support] @ s
        else:
            centre_sq[:, c] = (kernels[:, support[:, None], support] @ s) @ s
    diag = np.diagonal(kernels, axis1=1, axis2=2)                # (m, n)
    A = diag - 2.0 * T + centre_sq[:, labels]
    return np.maximum(A, 0.0).T


def _times_centres(Kw: np.ndarray, S: np.ndarray) -> np.ndarray:
    """``Kw @ S`` for S with about one non-zero per row: as the sparse ``(S^T Kw)^T``, n^2
    multiply-adds instead of the n^2 k of a dense product (Kw is symmetric)."""
    return (sparse.csr_matrix(S.T) @ Kw).T


def rmkkm_objective(kernels: np.ndarray, weights: np.ndarray, labels: np.ndarray,
                    centres: np.ndarray) -> float:
    """J: the sum over samples of the distance to their centre in the combined space."""
    A = _per_kernel_sq_distances(kernels, centres, labels)
    return float(np.sum(np.sqrt(A @ weights)))


def weight_step(A: np.ndarray, weights: np.ndarray, gamma: float) -> np.ndarray:
    """The closed-form weights minimising the majoriser of J at ``weights``.

    Parameters
    ----------
    A : ndarray of shape (n, m)
        Squared distances of every sample to its centre in every kernel.
    weights : ndarray of shape (m,)
        The current coefficients (on ``sum w^gamma = 1``).
    gamma : float
        In (0, 1).
    """
    sq = A @ weights
    # a sample at its centre in every kernel costs 0 for any w: no majoriser term
    d = np.divide(0.5, np.sqrt(sq), out=np.zeros_like(sq), where=sq > 0)
    h = d @ A
    zero = h <= 0
    if zero.any():
        # those kernels cost nothing: put all the weight on them
        return np.where(zero, zero.sum() ** (-1.0 / gamma), 0.0)
    # w_v = h_v^(1/(gamma-1)) / (sum_u h_u^(gamma/(gamma-1)))^(1/gamma), in logs (gamma near 1
    # makes the exponents large)
    log_h = np.log(h)
    a = gamma / (gamma - 1.0)
    top = a * log_h
    log_norm = top.max() + np.log(np.sum(np.exp(top - top.max())))
    return np.exp(log_h / (gamma - 1.0) - log_norm / gamma)


def _sq_distances(Kw_diag: np.ndarray, KS: np.ndarray, S: np.ndarray) -> np.ndarray:
    """(n, k) squared distances of every sample to every centre under one kernel."""
    centre_sq = np.einsum("ic,ic->c", S, KS)
    return np.maximum(Kw_diag[:, None] - 2.0 * KS + centre_sq[None, :], 0.0)


def _fill_empty(labels: np.ndarray, nearest: np.ndarray, k: int) -> np.ndarray:
    """Move the samples farthest from their nearest centre into the empty clusters, taking
    them only from clusters that keep a member."""
    labels = labels.copy()
    counts = np.bincount(labels, minlength=k)
    missing = np.flatnonzero(counts == 0)
    if missing.size == 0:
        return labels
    for j in np.argsort(-nearest, kind="stable"):
        if missing.size == 0:
            break
        if counts[labels[j]] > 1:
            counts[labels[j]] -= 1
            labels[j] = missing[0]
            counts[missing[0]] += 1
            missing = missing[1:]
    return labels


def _weiszfeld_centres(labels: np.ndarray, sq: np.ndarray, k: int) -> np.ndarray:
    """The reweighted means: sample j weighs ``1 / (2 sqrt(sq_j))`` in its cluster (``sq``: its
    squared distance to the previous centre)."""
    floored = np.maximum(sq, _EPS)
    weight = 0.5 / np.sqrt(floored)
    at_centre = floored < _AT_CENTRE
    if at_centre.any() and not at_centre.all():
        weight[at_centre] = weight[~at_centre].mean()
    S = np.zeros((labels.size, k))
    S[np.arange(labels.size), labels] = weight
    return S / np.maximum(S.sum(axis=0), 1e-300)


def _cluster_costs(dist: np.ndarray, labels: np.ndarray, k: int) -> np.ndarray:
    return np.bincount(labels, weights=dist, minlength=k)


def _l21_steps(Kw: np.ndarray, S: np.ndarray, KS: np.ndarray, labels: np.ndarray | None,
               steps: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Label and centre steps of l2,1 kernel k-means under ``Kw`` until the labels repeat.

    Returns labels, S and ``Kw @ S``. Each step: nearest centres (empty clusters filled), then
    a Weiszfeld step per cluster kept only where it lowers that cluster's sum of distances.
    """
    n, k = S.shape
    diag = np.diagonal(Kw).copy()
    for _ in range(steps):
        sq = _sq_distances(diag, KS, S)
        nearest = sq.argmin(axis=1)
        new = _fill_empty(nearest, sq[np.arange(n), nearest], k)
        old_sq = sq[np.arange(n), new]
        S_new = _weiszfeld_centres(new, sq[np.arange(n), nearest], k)
        KS_new = _times_centres(Kw, S_new)
        new_sq = _sq_distances(diag, KS_new, S_new)[np.arange(n), new]
        better = (_cluster_costs(np.sqrt(new_sq), new, k)
                  <= _cluster_costs(np.sqrt(old_sq), new, k))
        S = np.where(better[None, :], S_new, S)
        KS = np.where(better[None, :], KS_new, KS)
        repeated = labels is not None and np.array_equal(new, labels)
        labels = new
        if repeated:
            break
    return labels, S, KS


def _one_hot_centres(labels: np.ndarray, k: int) -> np.ndarray:
    S = np.zeros((labels.size, k))
    S[np.arange(labels.size), labels] = 1.0
    return S / S.sum(axis=0)


def _initial_clustering(Kw: np.ndarray, k: int, rng: np.random.Generator
                        ) -> tuple[np.ndarray, np.ndarray]:
    """The code's first label step: replicates from k distinct random samples as centres."""
    n = Kw.shape[0]
    best = None
    for _ in range(_INIT_REPLICATES):
        S = np.zeros((n, k))
        S[rng.choice(n, size=k, replace=False), np.arange(k)] = 1.0
        labels, S, KS = _l21_steps(Kw, S, _times_centres(Kw, S), None, _INIT_STEPS)
        cost = float(np.sum(np.sqrt(_sq_distances(np.diagonal(Kw), KS, S)[np.arange(n),
                                                                           labels])))
        if best is None or cost < best[0]:
            best = (cost, labels, S)
    return best[1], best[2]


def _check_init_labels(init_labels: Any, n: int, k: int) -> np.ndarray:
    labels = np.asarray(init_labels)
    if labels.shape != (n,) or not np.issubdtype(labels.dtype, np.integer):
        raise ValueError(f"init_labels must be {n} integers, got shape {labels.shape} and "
                         f"dtype {labels.dtype}")
    if labels.min() < 0 or labels.max() >= k or np.unique(labels).size != k:
        raise ValueError(f"init_labels must use every cluster 0..{k - 1}, got the values "
                         f"{np.unique(labels).tolist()[:10]}")
    return labels.astype(np.int64)


@constrained({
    "kernels": ["array-like"],
    "n_clusters": N_CLUSTERS,
    "gamma": Phrased("in the open interval (0, 1) (the constraint sum w^gamma = 1 of RMKKM)",
                     Interval(Real, 0, 1, closed="neither")),
    "max_iter": [Interval(Integral, 1, None, closed="left")],
    "tol": [Interval(Real, 0, None, closed="left")],
    "init_labels": [None, "array-like"],
    # what numpy's default_rng takes
    "random_state": Phrased("an int >= 0, a numpy Generator or None", None,
                            Interval(Integral, 0, None, closed="left"), np.random.Generator,
                            np.random.BitGenerator, np.random.SeedSequence),
    "check_input": ["boolean"],
})
def rmkkm(kernels: np.ndarray, n_clusters: int, *, gamma: float = 0.5, max_iter: int = 50,
          tol: float = 1e-6, init_labels: np.ndarray | None = None,
          random_state: Any = None, check_input: bool = True) -> RMKKMResult:
    """Robust multiple kernel k-means (Du et al. 2015) on dense kernels.

    Parameters
    ----------
    kernels : ndarray of shape (m, n, n)
        Symmetric PSD base kernels (checked by :func:`mkrk_dask.precomputed.check_precomputed`).
    n_clusters : int
        k, at most n.
    gamma : float
        In (0, 1): the exponent of the weight constraint ``sum_v w_v^gamma = 1`` (smaller is
        more even). The authors' driver tries 0.1, 0.2, ..., 0.9.
    max_iter : int
        Outer iterations (label/centre steps, then a weight step).
    tol : float
        Stop when no label changed and J decreased by at most ``tol`` times its value.
    init_labels : ndarray of shape (n,), optional
        Start from these labels (every cluster used; centres their plain means) instead of the
        randomised initial clustering.
    random_state : int, Generator or None
        Seeds the initial clustering.
    check_input : bool, default=True
        Validate the kernels (finite, symmetric, PSD). ``False`` skips that for kernels the
        caller validated once and fits many times (the protocol's 20 fits per parameter).

    Returns
    -------
    RMKKMResult
    """
    gamma, max_iter, tol = float(gamma), int(max_iter), float(tol)
    K, k = check_dense_input(kernels, n_clusters, check_input)
    m, n, _ = K.shape
    start = None if init_labels is None else _check_init_labels(init_labels, n, k)
    # One BLAS thread: the products are n x n by n x k; with a second thread they ran several
    # times slower whenever the other core was busy (measured beside a benchmark).
    with local_threads(1):
        weights = np.full(m, float(m) ** (-1.0 / gamma))
        Kw = np.tensordot(weights, K, axes=1)
        if start is None:
            labels, S = _initial_clustering(Kw, k, np.random.default_rng(random_state))
        else:
            labels, S = start, _one_hot_centres(start, k)
        KS = _times_centres(Kw, S)
        history: list[float] = []
        converged = False
        for _ in range(max_iter):
            previous = labels
            labels, S, KS = _l21_steps(Kw, S, KS, labels, _INNER_STEPS)
            A = _per_kernel_sq_distances(K, S, labels)
            weights = weight_step(A, weights, gamma)
            history.append(float(np.sum(np.sqrt(A @ weights))))
            Kw = np.tensordot(weights, K, axes=1)
            KS = _times_centres(Kw, S)
            if (np.array_equal(labels, previous) and len(history) > 1
                    and history[-2] - history[-1] <= tol * abs(history[-1])):
                converged = True
                break
    return RMKKMResult(labels=labels, weights=weights, simplex_weights=weights ** gamma,
                       centres=S, objective_history=np.asarray(history), n_iter=len(history),
                       converged=converged)
