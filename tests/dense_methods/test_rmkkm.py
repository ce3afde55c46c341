"""Tests of RMKKM (mkrk_dask.dense_methods.rmkkm) against independent references.

The reference below is written in another style on purpose: explicit loops over samples,
clusters and kernels, distances from the textbook formula, and the weight step found by a
root-finder on the Lagrange multiplier instead of the closed form. The objective is also checked
against explicit feature vectors (linear kernels), with no kernel trick at all.
"""

from __future__ import annotations

from functools import partial

import numpy as np
import pytest
import scipy.optimize
from _data import gaussian_blobs

from mkrk_dask.dense_methods import RMKKMResult, rmkkm
from mkrk_dask.dense_methods.rmkkm import _fill_empty, rmkkm_objective, weight_step

EPS = np.finfo(float).eps

# ---- data ----------------------------------------------------------------------------------


#: ``blobs(n, seed=...)``: X, y of Gaussian blobs in 3 columns around 3 centres
blobs = partial(gaussian_blobs, d=3, k=3, spread=3.0)


def kernels_of(X: np.ndarray, widths) -> np.ndarray:
    """Gaussian kernels (unit diagonal) for widths relative to the median distance, plus the
    cosine kernel."""
    sq = ((X[:, None, :] - X[None, :, :]) ** 2).sum(axis=2)
    med = np.median(sq[np.triu_indices(len(X), 1)])
    out = [np.exp(-sq / (2.0 * w * w * med)) for w in widths]
    G = X @ X.T
    d = np.sqrt(np.diag(G))
    out.append(G / np.outer(d, d))
    return np.stack(out)


def labels_for(n: int, k: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, k, n)
    labels[:k] = np.arange(k)
    return labels


# ---- the reference -------------------------------------------------------------------------


def ref_sq_dist(K, j, s):
    """||phi(x_j) - sum_i s_i phi(x_i)||^2 = K_jj - 2 sum_i s_i K_ji + sum_il s_i s_l K_il."""
    return K[j, j] - 2.0 * sum(s[i] * K[j, i] for i in range(len(s))) + s @ K @ s


def ref_weights(h, gamma):
    """argmin h.w subject to sum w^gamma = 1, w >= 0, from the stationarity condition
    h_v = lam gamma w_v^(gamma - 1), with lam found by a root-finder."""
    def w_of(log_lam):
        return (h / (np.exp(log_lam) * gamma)) ** (1.0 / (gamma - 1.0))

    log_lam = scipy.optimize.brentq(lambda t: np.sum(w_of(t) ** gamma) - 1.0, -200.0, 200.0,
                                    xtol=1e-14)
    w = w_of(log_lam)
    return w / np.sum(w ** gamma) ** (1.0 / gamma)


def ref_rmkkm(K, k, gamma, labels, n_iter, inner=10):
    m, n, _ = K.shape
    w = np.full(m, m ** (-1.0 / gamma))
    labels = labels.copy()
    S = np.zeros((n, k))
    for j in range(n):
        S[j, labels[j]] = 1.0
    for c in range(k):
        S[:, c] /= S[:, c].sum()
    history = []
    for _ in range(n_iter):
        Kw = sum(w[v] * K[v] for v in range(m))
        for _ in range(inner):
            D = np.array([[max(ref_sq_dist(Kw, j, S[:, c]), 0.0) for c in range(k)]
                          for j in range(n)])
            new = np.array([int(np.argmin(D[j])) for j in range(n)])
            nearest = np.array([D[j, new[j]] for j in range(n)])
            new = _fill_empty(new, nearest, k)
            # Weiszfeld weights, floored as the authors' code
            weight = np.array([0.5 / np.sqrt(max(nearest[j], EPS)) for j in range(n)])
            close = [j for j in range(n) if max(nearest[j], EPS) < 1e-10]
            far = [j for j in range(n) if j not in close]
            for j in close:
                weight[j] = np.mean(weight[far])
            S_new = np.zeros((n, k))
            for c in range(k):
                members = [j for j in range(n) if new[j] == c]
                total = sum(weight[j] for j in members)
                for j in members:
                    S_new[j, c] = weight[j] / total
            for c in range(k):
                members = [j for j in range(n) if new[j] == c]
                cost_new = sum(np.sqrt(max(ref_sq_dist(Kw, j, S_new[:, c]), 0)) for j in members)
                cost_old = sum(np.sqrt(max(ref_sq_dist(Kw, j, S[:, c]), 0)) for j in members)
                if cost_new <= cost_old:
                    S[:, c] = S_new[:, c]
            repeated = np.array_equal(new, labels)
            labels = new
            if repeated:
                break
        A = np.array([[max(ref_sq_dist(K[v], j, S[:, labels[j]]), 0.0) for v in range(m)]
                      for j in range(n)])
        d = np.array([0.5 / np.sqrt(A[j] @ w) for j in range(n)])
        h = np.array([sum(d[j] * A[j, v] for j in range(n)) for v in range(m)])
        w = ref_weights(h, gamma)
        history.append(sum(np.sqrt(A[j] @ w) for j in range(n)))
    return labels, w, np.array(history)


# ---- the method against the reference ------------------------------------------------------


@pytest.mark.parametrize("gamma, seed", [(0.3, 0), (0.7, 1)])
def test_matches_reference_from_the_same_labels(gamma, seed):
    X, _ = blobs(40, seed=seed)
    K = kernels_of(X, [0.5, 1.0, 3.0])
    start = labels_for(40, 3, seed)
    ref_labels, ref_w, ref_hist = ref_rmkkm(K, 3, gamma, start, 4)
    res = rmkkm(K, 3, gamma=gamma, max_iter=4, tol=0.0, init_labels=start)
    assert isinstance(res, RMKKMResult) and res.n_iter == 4
    np.testing.assert_array_equal(res.labels, ref_labels)
    np.testing.assert_allclose(res.objective_history, ref_hist, rtol=1e-8)
    np.testing.assert_allclose(res.weights, ref_w, rtol=1e-6)
    np.testing.assert_allclose(res.simplex_weights, ref_w ** gamma, rtol=1e-6)
    assert np.isclose(np.sum(res.simplex_weights), 1.0, rtol=1e-12)


def test_objective_is_the_sum_of_feature_space_distances():
    # linear kernels of explicit features: the combined space is [sqrt(w_v) x_v] stacked
    rng = np.random.default_rng(3)
    feats = [rng.normal(size=(25, d)) for d in (2, 3, 4)]
    K = np.stack([F @ F.T for F in feats])
    w = np.array([0.2, 0.5, 0.3])
    labels = labels_for(25, 3, 3)
    S = rng.random((25, 3)) * (labels[:, None] == np.arange(3))
    S /= S.sum(axis=0)
    phi = np.hstack([np.sqrt(w[v]) * feats[v] for v in range(3)])
    centres = S.T @ phi
    expected = sum(np.linalg.norm(phi[j] - centres[labels[j]]) for j in range(25))
    assert np.isclose(rmkkm_objective(K, w, labels, S), expected, rtol=1e-10)
    # centres that live on other samples than their cluster's (a step kept an older centre)
    S = rng.random((25, 3)) * (np.roll(labels, 4)[:, None] == np.arange(3))
    S /= S.sum(axis=0)
    centres = S.T @ phi
    expected = sum(np.linalg.norm(phi[j] - centres[labels[j]]) for j in range(25))
    assert np.isclose(rmkkm_objective(K, w, labels, S), expected, rtol=1e-10)


@pytest.mark.parametrize("gamma", [0.1, 0.5, 0.9])
def test_objective_never_increases(gamma):
    X, _ = blobs(60, seed=4)
    K = kernels_of(X, [0.3, 1.0, 4.0])
    res = rmkkm(K, 3, gamma=gamma, max_iter=30, tol=0.0, random_state=0)
    h = res.objective_history
    assert res.n_iter >= 5          # with tol=0 it stops only at a fixed point
    assert np.all(np.diff(h) <= 1e-10 * h[1:])
    # the recorded value is J at the returned state
    assert np.isclose(rmkkm_objective(K, res.weights, res.labels, res.centres), h[-1],
                      rtol=1e-10)
    assert np.isclose(np.sum(res.weights ** gamma), 1.0, rtol=1e-12)
    assert set(np.unique(res.labels)) == {0, 1, 2}


def test_stopping_rule_and_repeatability():
    X, _ = blobs(50, seed=5)
    K = kernels_of(X, [0.5, 2.0])
    a = rmkkm(K, 3, gamma=0.5, random_state=1)
    b = rmkkm(K, 3, gamma=0.5, random_state=1)
    np.testing.assert_array_equal(a.labels, b.labels)
    np.testing.assert_array_equal(a.objective_history, b.objective_history)
    assert a.converged and a.n_iter < 50
    h = a.objective_history
    assert h[-2] - h[-1] <= 1e-6 * h[-1]


def test_weight_step_minimises_the_majoriser():
    rng = np.random.default_rng(6)
    A = rng.random((30, 4)) ** 2
    gamma = 0.4
    w0 = np.full(4, 4 ** (-1 / gamma))
    w = weight_step(A, w0, gamma)
    d = 0.5 / np.sqrt(A @ w0)
    h = d @ A
    # the same problem in a = w^gamma on the simplex, where it is convex: sum_v h_v a_v^(1/gamma)
    ref = scipy.optimize.minimize(lambda a: h @ np.maximum(a, 0) ** (1 / gamma), np.full(4, 0.25),
                                  constraints=[{"type": "eq", "fun": lambda a: a.sum() - 1}],
                                  bounds=[(0, 1)] * 4, method="SLSQP",
                                  options={"ftol": 1e-15, "maxiter": 500})
    np.testing.assert_allclose(w ** gamma, ref.x, atol=1e-6)
    assert h @ w <= h @ w0
    # and the majorisation makes it a descent step for J itself
    assert np.sum(np.sqrt(A @ w)) <= np.sum(np.sqrt(A @ w0))


def test_weight_step_puts_everything_on_a_kernel_that_costs_nothing():
    A = np.array([[1.0, 0.0, 2.0], [3.0, 0.0, 1.0]])
    w = weight_step(A, np.full(3, 3 ** -2.0), 0.5)
    np.testing.assert_allclose(w, [0.0, 1.0, 0.0])


def test_empty_clusters_take_the_farthest_samples():
    labels = np.array([0, 0, 0, 1, 1])
    nearest = np.array([0.1, 5.0, 0.2, 9.0, 0.3])
    out = _fill_empty(labels, nearest, 4)
    # sample 3 (farthest) fills cluster 2, sample 1 cluster 3; no cluster is emptied
    np.testing.assert_array_equal(out, [0, 3, 0, 2, 1])
    assert np.all(np.bincount(out, minlength=4) > 0)


# ---- bad input -----------------------------------------------------------------------------


@pytest.mark.parametrize("gamma", [0.0, 1.0, -0.2, 1.5, float("nan")])
def test_gamma_outside_the_open_unit_interval(gamma):
    K = kernels_of(blobs(12, seed=7)[0], [1.0])
    with pytest.raises(ValueError, match=r"gamma must be in the open interval \(0, 1\)") as e:
        rmkkm(K, 2, gamma=gamma)
    assert "\n" not in str(e.value)


@pytest.mark.parametrize("kwargs, match", [
    ({"n_clusters": 13}, "n_clusters=13 is larger than n_samples=12"),
    ({"max_iter": 0}, "max_iter must be a positive integer"),
    ({"tol": -1e-3}, "tol must be a finite number >= 0"),
    ({"init_labels": np.zeros(11, dtype=int)}, "init_labels must be 12 integers"),
    ({"init_labels": np.zeros(12, dtype=int)}, "init_labels must use every cluster 0..1"),
])
def test_bad_arguments(kwargs, match):
    K = kernels_of(blobs(12, seed=8)[0], [1.0])
    args = {"n_clusters": 2, **kwargs}
    with pytest.raises(ValueError, match=match) as e:
        rmkkm(K, **args)
    assert "\n" not in str(e.value)


def test_kernels_not_square():
    with pytest.raises(ValueError, match="square") as e:
        rmkkm(np.ones((3, 6, 5)), 2)
    assert "\n" not in str(e.value)
