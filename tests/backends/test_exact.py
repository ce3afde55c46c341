"""The exact backend and the alternating loop against plain dense computations."""

import numpy as np
import pytest

from mkrk_dask import MKKMRK
from mkrk_dask.backends.exact import ExactBackend
from mkrk_dask.kernels import max_pairwise_distance, paper_kernels, resolve_kernels
from mkrk_dask.loop import solve
from mkrk_dask.qp import RepresentativeQP, frank_wolfe_gap, kkt_residuals
from mkrk_dask.results import weight_stats

#: how many rows of scikit-learn's digits the shared ``digits`` fixture gives (conftest.py)
DIGITS_ROWS = 240


@pytest.fixture(scope="module")
def backend(digits):
    return ExactBackend.from_views([digits[0]], paper_kernels())


def plain_loop(K, k, lam, iterations):
    """The algorithm as written in the paper, with full eigendecompositions and explicit
    traces; the QP is the only shared part (it is checked on its own by its KKT conditions)."""
    m, n, _ = K.shape
    C = np.array([[np.trace(K[i].T @ K[j]) for j in range(m)] for i in range(m)])
    qp = RepresentativeQP(C, lam)
    w = np.full(m, 1.0 / m)
    history = []
    for _ in range(iterations):
        Kw = sum(w[p] ** 2 * K[p] for p in range(m))
        H = np.linalg.eigh(Kw)[1][:, -k:]
        d = np.array([np.trace(K[p] @ (np.eye(n) - H @ H.T)) for p in range(m)])
        Y = qp.solve(d).Y
        w = Y.mean(axis=1)
        history.append(sum(w[p] ** 2 * d[p] for p in range(m)) + lam * np.sum(C * Y))
    return np.array(history), w, H


def test_backend_quantities_match_dense_definitions(backend):
    K = backend.kernels
    m, n, _ = K.shape
    np.testing.assert_allclose(backend.traces(), [np.trace(Kp) for Kp in K], rtol=1e-14)
    w = np.random.default_rng(0).dirichlet(np.ones(m))
    Kw = sum(w[p] ** 2 * K[p] for p in range(m))
    np.testing.assert_allclose(backend.combined_kernel(w), Kw, rtol=1e-12, atol=1e-14)
    top = backend.top_k(w, 10)
    values, vectors = np.linalg.eigh(Kw)
    np.testing.assert_allclose(top.eigenvalues, values[::-1][:10], rtol=1e-10)
    H = top.basis
    np.testing.assert_allclose(backend.quad_forms(top), [np.trace(H.T @ Kp @ H) for Kp in K],
                               rtol=1e-10)


def test_work_matrix_is_reused_and_leaves_no_trace(backend):
    """K_w and H H^T share one n x n work matrix: every top_k and quad_forms after another
    (any order, other weights and ranks in between) gives the dense definitions' values."""
    K = backend.kernels
    m, n, _ = K.shape
    rng = np.random.default_rng(1)
    out = np.full((n, n), np.nan)
    w = rng.dirichlet(np.ones(m))
    assert np.shares_memory(backend.combined_kernel(w, out=out), out)
    np.testing.assert_allclose(out, sum(w[p] ** 2 * K[p] for p in range(m)), rtol=1e-12)
    work = None
    for k in (3, 12, 5):
        w = rng.dirichlet(np.ones(m))
        top = backend.top_k(w, k)
        work = backend._work if work is None else work
        assert backend._work is work
        Kw = sum(w[p] ** 2 * K[p] for p in range(m))
        np.testing.assert_allclose(top.eigenvalues, np.linalg.eigvalsh(Kw)[::-1][:k],
                                   rtol=1e-10)
        H = top.basis
        np.testing.assert_allclose(backend.quad_forms(top),
                                   [np.trace(H.T @ Kp @ H) for Kp in K], rtol=1e-10)
        np.testing.assert_allclose(backend.quad_forms(top),
                                   [np.trace(H.T @ Kp @ H) for Kp in K], rtol=1e-10)


def test_loop_matches_plain_dense_loop(backend):
    lam = 2.0**-8
    result = solve(backend, 10, lam, tol=0.0, max_iter=6)
    history, w, H = plain_loop(backend.kernels, 10, lam, 6)
    np.testing.assert_allclose(result.objective_history, history, rtol=1e-8)
    np.testing.assert_allclose(result.weights, w, atol=1e-6)
    P = backend.embedding(result.top)
    np.testing.assert_allclose(P @ P.T, H @ H.T, atol=1e-6)


@pytest.mark.parametrize("lam", [2.0**-15, 2.0**-5, 2.0**0, 2.0**5])
@pytest.mark.parametrize("measure", ["fip", "sfn"])
def test_every_qp_certified_and_objective_monotone(backend, lam, measure):
    result = solve(backend, 10, lam, dissimilarity=measure, tol=0.0, max_iter=8)
    assert result.qp_certified
    assert np.all(result.qp_relative_gaps <= 1e-8)
    f = result.objective_history
    assert np.all(np.diff(f) <= 1e-9 * np.abs(f[:-1])), np.diff(f)
    # The final Y satisfies the KKT conditions of its QP (d from the final H).
    d = result.residuals
    Y = result.representation
    res = kkt_residuals(Y, d, result.dissimilarity, result.lam_effective)
    assert max(res.values()) <= 1e-8, res
    gap = frank_wolfe_gap(Y, d, result.dissimilarity, result.lam_effective)
    assert gap <= 1e-8 * abs(f[-1])
    np.testing.assert_allclose(result.weights.sum(), 1.0, atol=1e-12)


def test_permuting_kernels_permutes_weights(backend):
    perm = np.random.default_rng(3).permutation(12)
    K = backend.kernels
    a = MKKMRK.paper(10, lam=2.0**-6, kernels="precomputed", random_state=0).fit(K)
    b = MKKMRK.paper(10, lam=2.0**-6, kernels="precomputed", random_state=0).fit(K[perm])
    np.testing.assert_allclose(b.weights_, a.weights_[perm], atol=1e-6)
    np.testing.assert_allclose(b.objective_history_, a.objective_history_, rtol=1e-9)


def test_feature_input_equals_precomputed_input(digits, backend):
    X, _ = digits
    a = MKKMRK.paper(10, lam=2.0**-6, random_state=0).fit(X)
    b = MKKMRK.paper(10, lam=2.0**-6, kernels="precomputed", random_state=0).fit(backend.kernels)
    np.testing.assert_allclose(a.weights_, b.weights_, atol=1e-9)
    np.testing.assert_array_equal(a.labels_, b.labels_)


def test_relative_tolerance_stops_earlier(backend):
    absolute = solve(backend, 10, 2.0**-10, tol=1e-12, max_iter=30)
    relative = solve(backend, 10, 2.0**-10, tol=1e-4, tol_mode="relative", max_iter=30)
    assert relative.n_iter <= absolute.n_iter
    f = relative.objective_history
    assert relative.converged and abs(f[-1] - f[-2]) < 1e-4 * abs(f[-2])


def test_lambda_scaling_normalized(backend):
    C = backend.dissimilarity("fip")
    result = solve(backend, 10, 1.0, lam_scaling="normalized", max_iter=3)
    assert result.lam_effective == pytest.approx(np.mean(backend.traces()) / np.mean(C))


def test_resolved_gaussian_width_uses_largest_distance(digits):
    X, _ = digits
    specs = resolve_kernels(paper_kernels(), [max_pairwise_distance(X)])
    M = max_pairwise_distance(X)
    assert [s.sigma for s in specs[5:]] == pytest.approx(
        [c * M for c in (0.01, 0.05, 0.1, 1, 10, 50, 100)])


def test_small_fits_run_their_loop_on_one_thread_and_give_the_threads_back(digits, backend):
    """Up to SINGLE_THREAD_MAX_N rows the loop and the final k-means run on one BLAS/OpenMP
    thread (faster there); the caller's limits are what they were after the fit, and the
    fit gives the same labels as under a one-thread limit set by the caller."""
    from threadpoolctl import threadpool_info, threadpool_limits

    from mkrk_dask.eigen import SINGLE_THREAD_MAX_N

    assert backend.n_samples <= SINGLE_THREAD_MAX_N and backend.compute_threads() == 1

    def limits():
        return sorted((i["filepath"], i["num_threads"]) for i in threadpool_info())

    before = limits()
    model = MKKMRK(n_clusters=10, kernels=paper_kernels(), random_state=0).fit(digits[0])
    assert limits() == before
    with threadpool_limits(1):
        again = MKKMRK(n_clusters=10, kernels=paper_kernels(), random_state=0).fit(digits[0])
    np.testing.assert_array_equal(model.labels_, again.labels_)


def _effective_kernels(weights):
    return weight_stats(weights)["effective"]


def test_lambda_moves_the_weights_the_way_the_docstring_says(backend):
    # sfn: a kernel represents itself at no cost, so lambda 1 (normalised) gives equal weights
    # (up to the near-duplicates among the paper's kernels, which represent each other almost
    # for free) and a small lambda concentrates them; fip: a large lambda concentrates them.
    m = backend.n_kernels
    sfn_large = solve(backend, 10, 1.0, dissimilarity="sfn", lam_scaling="normalized")
    sfn_small = solve(backend, 10, 2.0**-8, dissimilarity="sfn", lam_scaling="normalized")
    np.testing.assert_allclose(sfn_large.weights, 1.0 / m, atol=2e-3)
    assert _effective_kernels(sfn_small.weights) < 0.9 * m
    fip_small = solve(backend, 10, 2.0**-15, dissimilarity="fip")
    fip_large = solve(backend, 10, 2.0**5, dissimilarity="fip")
    assert _effective_kernels(fip_large.weights) < 0.5 * _effective_kernels(fip_small.weights)
