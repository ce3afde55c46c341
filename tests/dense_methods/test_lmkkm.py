"""Tests of LMKKM (mkrk_dask.dense_methods.lmkkm) against independent references.

The reference below is written in another style on purpose: explicit loops over kernels and
samples for the localized kernel and the objective, a full LAPACK eigendecomposition for H, and
OSQP (an ADMM solver with its own polish) for the Theta-step QP on the stacked vec(Theta).
"""

from __future__ import annotations

import warnings

import numpy as np
import osqp
import pytest
import scipy.optimize
import scipy.sparse as sp

from mkrk_dask.assignment import assign_clusters
from mkrk_dask.dense_methods import LMKKMResult, lmkkm
from mkrk_dask.dense_methods._gating_qp import (
    gating_frank_wolfe_gap,
    gating_objective,
    project_rows_to_simplex,
    solve_gating_qp,
)
from mkrk_dask.dense_methods.lmkkm import localized_kernel
from mkrk_dask.exceptions import UncertifiedSolutionWarning

# ---- data ----------------------------------------------------------------------------------


def gaussian_kernels(n: int, widths, seed: int) -> np.ndarray:
    """Gaussian kernels (unit diagonal, positive definite) of one random data set, one per
    width (relative to the median pairwise distance)."""
    rng = np.random.default_rng(seed)
    centres = rng.normal(scale=3.0, size=(3, 4))
    X = centres[rng.integers(0, 3, n)] + rng.normal(size=(n, 4))
    sq = ((X[:, None, :] - X[None, :, :]) ** 2).sum(axis=2)
    med = np.median(sq[np.triu_indices(n, 1)])
    return np.stack([np.exp(-sq / (2.0 * w * w * med)) for w in widths])


def random_psd_kernels(n: int, m: int, seed: int) -> np.ndarray:
    """Random full-rank PSD matrices scaled to unit diagonal."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(m):
        A = rng.normal(size=(n, n + 5)) * rng.uniform(0.2, 2.0, n + 5)
        K = A @ A.T
        s = 1.0 / np.sqrt(np.diag(K))
        out.append(s[:, None] * K * s[None, :])
    return np.stack(out)


# ---- the reference -------------------------------------------------------------------------


def ref_localized_kernel(K, theta):
    m, n, _ = K.shape
    out = np.zeros((n, n))
    for p in range(m):
        for i in range(n):
            for j in range(n):
                out[i, j] += theta[i, p] * theta[j, p] * K[p, i, j]
    return out


def ref_objective(K, theta, H):
    """tr((I - H H^T) K_theta), term by term."""
    K_theta = ref_localized_kernel(K, theta)
    return float(np.trace(K_theta) - np.trace(H.T @ K_theta @ H))


def ref_top_k(A, k):
    values, vectors = np.linalg.eigh(A)          # the full decomposition, ascending
    return vectors[:, ::-1][:, :k]


def ref_theta_step(K, H, eps=1e-12):
    """The QP by OSQP on x = vec(Theta) (kernel-major): min x^T blkdiag(Q_p) x subject to
    sum_p theta_ip = 1 and 0 <= x <= 1."""
    m, n, _ = K.shape
    P_proj = np.eye(n) - H @ H.T
    blocks = [sp.csc_matrix(2.0 * K[p] * P_proj) for p in range(m)]
    P = sp.triu(sp.block_diag(blocks), format="csc")
    A = sp.vstack([sp.hstack([sp.identity(n)] * m), sp.identity(n * m)], format="csc")
    lower = np.concatenate([np.ones(n), np.zeros(n * m)])
    upper = np.ones(n + n * m)
    solver = osqp.OSQP()
    solver.setup(P, np.zeros(n * m), A, lower, upper, eps_abs=eps, eps_rel=eps,
                 max_iter=200000, polishing=True, verbose=False)
    x = np.array(solver.solve(raise_error=True).x)
    theta = np.clip(x.reshape(m, n).T, 0.0, None)
    return theta / theta.sum(axis=1, keepdims=True)


def ref_lmkkm(K, k, n_iter):
    m, n, _ = K.shape
    theta = np.full((n, m), 1.0 / m)
    history = []
    for _ in range(n_iter):
        H = ref_top_k(ref_localized_kernel(K, theta), k)
        theta = ref_theta_step(K, H)
        history.append(ref_objective(K, theta, H))
    return theta, np.array(history)


def ref_fw_gap(Q, theta):
    n, m = theta.shape
    G = np.zeros((n, m))
    for p in range(m):
        G[:, p] = 2.0 * Q[p] @ theta[:, p]
    return float(sum(G[i] @ theta[i] - G[i].min() for i in range(n)))


# ---- the method against the reference ------------------------------------------------------


def test_trajectory_matches_reference():
    K = gaussian_kernels(36, [0.5, 1.0, 2.0], seed=0)
    k, n_iter = 3, 4
    theta_ref, hist_ref = ref_lmkkm(K, k, n_iter)
    res = lmkkm(K, k, max_iter=n_iter, tol=0.0, qp_tol=1e-12, random_state=0)
    assert res.n_iter == n_iter and not res.converged
    np.testing.assert_allclose(res.objective_history, hist_ref, rtol=1e-8)
    np.testing.assert_allclose(res.gating, theta_ref, atol=1e-6)
    # the recorded objective is tr((I - H H^T) K_Theta) at the returned H and Theta
    assert np.isclose(ref_objective(K, res.gating, res.embedding), res.objective_history[-1],
                      rtol=1e-10)


def test_random_psd_kernels_match_reference():
    K = random_psd_kernels(30, 4, seed=1)
    theta_ref, hist_ref = ref_lmkkm(K, 2, 3)
    res = lmkkm(K, 2, max_iter=3, tol=0.0, qp_tol=1e-12, random_state=0)
    np.testing.assert_allclose(res.objective_history, hist_ref, rtol=1e-8)
    np.testing.assert_allclose(res.gating, theta_ref, atol=1e-6)


@pytest.mark.parametrize("seed", [2, 3])
def test_objective_never_increases_and_every_step_is_certified(seed):
    # with a nearly all-ones kernel (width 20): the ill-conditioned case of the paper's kernels
    K = gaussian_kernels(50, [0.3, 1.0, 3.0, 20.0], seed=seed)
    res = lmkkm(K, 3, max_iter=30, random_state=0)
    h = res.objective_history
    assert np.all(np.diff(h) <= 1e-10 * np.abs(h[1:]))
    assert res.qp_certified.all()
    assert np.all(res.qp_relative_gaps <= 1e-6)
    assert np.all(res.gating >= 0)
    np.testing.assert_allclose(res.gating.sum(axis=1), 1.0, atol=1e-12)
    # the last Theta-step's gap, recomputed from scratch at the returned H and Theta
    Q = K * (np.eye(50) - res.embedding @ res.embedding.T)
    assert ref_fw_gap(Q, res.gating) <= 1e-6 * h[-1] * (1 + 1e-9)
    if res.converged:
        assert res.n_iter < 30 and h[-2] - h[-1] <= 1e-6 * h[-1]


def test_labels_are_the_final_kmeans_on_the_embedding():
    K = gaussian_kernels(45, [0.5, 2.0], seed=4)
    res = lmkkm(K, 3, max_iter=5, random_state=7)
    assert isinstance(res, LMKKMResult)
    np.testing.assert_array_equal(res.labels, assign_clusters(res.embedding, 3, n_init=10,
                                                              max_iter=1000, random_state=7))
    np.testing.assert_allclose(res.embedding.T @ res.embedding, np.eye(3), atol=1e-10)


# ---- the Theta-step QP ---------------------------------------------------------------------


def qp_instance(n=30, seed=5, widths=(0.5, 1.0, 2.0, 10.0), k=3):
    K = gaussian_kernels(n, widths, seed=seed)
    theta = np.random.default_rng(seed).dirichlet(np.ones(len(widths)), size=n)
    H = ref_top_k(ref_localized_kernel(K, theta), k)
    return K * (np.eye(n) - H @ H.T), H, theta


@pytest.mark.parametrize("with_basis", [True, False])
def test_qp_solution_is_feasible_certified_and_no_worse_than_the_start(with_basis):
    Q, H, start = qp_instance()
    sol = solve_gating_qp(Q, start, basis=H if with_basis else None, tol=1e-9)
    assert sol.certified and sol.relative_gap <= 1e-9
    assert np.all(sol.gating >= 0)
    np.testing.assert_allclose(sol.gating.sum(axis=1), 1.0, atol=1e-13)
    f = gating_objective(Q, sol.gating)
    assert np.isclose(f, sol.objective, rtol=1e-12)
    assert f <= gating_objective(Q, start)
    assert ref_fw_gap(Q, sol.gating) <= 1e-9 * f * (1 + 1e-6)
    # Both sum terms of order f, so they agree to round-off in f, not in the tiny gap itself.
    assert np.isclose(gating_frank_wolfe_gap(Q, sol.gating), ref_fw_gap(Q, sol.gating),
                      rtol=1e-8, atol=1e-12 * f)


def test_qp_optimum_matches_slsqp_on_a_tiny_case():
    Q, H, start = qp_instance(n=8, seed=6, widths=(0.7, 1.5, 4.0), k=2)
    n, m = start.shape
    sol = solve_gating_qp(Q, start, basis=H, tol=1e-12)

    def fun(x):
        T = x.reshape(m, n)
        return sum(T[p] @ Q[p] @ T[p] for p in range(m))

    def jac(x):
        T = x.reshape(m, n)
        return np.concatenate([2.0 * Q[p] @ T[p] for p in range(m)])

    cons = {"type": "eq", "fun": lambda x: x.reshape(m, n).sum(axis=0) - 1.0,
            "jac": lambda x: np.hstack([np.eye(n)] * m)}
    ref = scipy.optimize.minimize(fun, start.T.ravel(), jac=jac, constraints=[cons],
                                  bounds=[(0.0, 1.0)] * (n * m), method="SLSQP",
                                  options={"ftol": 1e-15, "maxiter": 1000})
    assert ref.success
    assert abs(sol.objective - ref.fun) <= 1e-6 * ref.fun
    # and the certificate is honest: the bound covers the distance to SLSQP's value
    assert sol.objective - ref.fun <= sol.gap + 1e-15


def test_qp_optimum_matches_osqp():
    K = gaussian_kernels(24, [0.4, 1.0, 3.0], seed=8)
    theta = np.full((24, 3), 1 / 3)
    H = ref_top_k(ref_localized_kernel(K, theta), 3)
    Q = K * (np.eye(24) - H @ H.T)
    sol = solve_gating_qp(Q, theta, basis=H, tol=1e-12)
    ref = ref_theta_step(K, H)
    assert np.isclose(sol.objective, gating_objective(Q, ref), rtol=1e-8)
    np.testing.assert_allclose(sol.gating, ref, atol=1e-6)


def test_qp_step_cap_returns_an_uncertified_point_no_worse_than_the_start():
    Q, H, start = qp_instance(n=30, seed=9)
    sol = solve_gating_qp(Q, start, basis=None, tol=1e-14, max_products=3)
    assert not sol.certified and sol.products <= 3
    assert sol.objective <= gating_objective(Q, start)
    assert sol.relative_gap > 1e-14


def test_uncertified_steps_warn():
    K = gaussian_kernels(30, [0.5, 1.0, 3.0], seed=10)
    with pytest.warns(UncertifiedSolutionWarning, match="Theta-steps"):
        res = lmkkm(K, 2, max_iter=2, qp_tol=1e-15, qp_max_products=2)
    assert not res.qp_certified.all()


def test_projection_onto_the_simplex():
    rng = np.random.default_rng(11)
    V = rng.normal(scale=2.0, size=(40, 5))
    P = project_rows_to_simplex(V)
    assert np.all(P >= 0)
    np.testing.assert_allclose(P.sum(axis=1), 1.0, atol=1e-14)
    for v, p in zip(V, P, strict=True):
        # the projection's optimality: <v - p, q - p> <= 0 for every vertex q of the simplex
        assert np.all((v - p) @ (np.eye(5) - p).T <= 1e-12)
    np.testing.assert_allclose(project_rows_to_simplex(P), P, atol=1e-15)


def test_localized_kernel_matches_loops():
    K = random_psd_kernels(12, 3, seed=12)
    theta = np.random.default_rng(12).dirichlet(np.ones(3), size=12)
    np.testing.assert_allclose(localized_kernel(K, theta), ref_localized_kernel(K, theta),
                               rtol=1e-13, atol=1e-15)


# ---- bad input -----------------------------------------------------------------------------


@pytest.mark.parametrize("kwargs, match", [
    ({"n_clusters": 31}, "n_clusters=31 is larger than n_samples=30"),
    ({"n_clusters": 0}, "n_clusters must be >= 1"),
    ({"max_iter": 0}, "max_iter must be a positive integer"),
    ({"qp_tol": -1.0}, "qp_tol must be a finite number >= 0"),
    ({"tol": float("nan")}, "tol must be a finite number >= 0"),
])
def test_bad_arguments(kwargs, match):
    K = random_psd_kernels(30, 2, seed=13)
    args = {"n_clusters": 2, **kwargs}
    with pytest.raises(ValueError, match=match) as info:
        lmkkm(K, **args)
    assert "\n" not in str(info.value)


def test_kernels_not_square():
    with pytest.raises(ValueError, match="square") as info:
        lmkkm(np.ones((2, 5, 4)), 2)
    assert "\n" not in str(info.value)


def test_kernel_not_psd():
    K = random_psd_kernels(10, 2, seed=14)
    K[1] -= 2.0 * np.eye(10)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(ValueError, match="positive semi-definite"):
            lmkkm(K, 2)


def test_a_gating_that_settles_on_a_constant_kernel_is_certified_and_stops():
    """With a constant kernel (rank 1) among the kernels, the gating can put everything on it
    and f falls to round-off: every Theta-step is still certified (its gap is at the round-off
    level) and the fit stops before max_iter, instead of chasing a relative gap below
    round-off to the pass cap."""
    rng = np.random.default_rng(5)
    F = rng.normal(size=(60, 3))
    linear = F @ F.T
    linear /= np.sqrt(np.outer(np.diag(linear), np.diag(linear)))
    K = np.stack([np.ones((60, 60)), linear])
    with warnings.catch_warnings():
        warnings.simplefilter("error", UncertifiedSolutionWarning)
        res = lmkkm(K, 2, max_iter=100, qp_max_products=2000, random_state=0)
    assert res.gating[:, 0].min() > 0.99         # all on the constant kernel
    assert res.objective_history[-1] < 1e-10 * res.objective_history[0]
    assert res.qp_certified.all() and res.converged and res.n_iter < 100
