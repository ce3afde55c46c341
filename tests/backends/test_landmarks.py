"""Landmark selection and the floored landmark transform."""

from __future__ import annotations

import dask.array as da
import numpy as np
import pytest
import scipy.sparse as sp
import zarr

from mkrk_dask.kernels import KernelSpec, kernel_blocks, resolve_kernels
from mkrk_dask.landmarks import kmeanspp_order, landmark_transform, select_landmarks, take_rows


@pytest.fixture(scope="module")
def X():
    rng = np.random.default_rng(0)
    # Two tight groups and one small far-away group of 5 rows.
    return np.vstack([rng.normal(0, 1, (300, 4)), rng.normal(0, 1, (300, 4)) + 5,
                      rng.normal(0, 0.1, (5, 4)) + 100])


@pytest.mark.parametrize("method", ["kmeans++", "uniform"])
def test_selection_is_deterministic_by_seed(X, method):
    a = select_landmarks(X, 40, method, random_state=3)
    b = select_landmarks(X, 40, method, random_state=3)
    c = select_landmarks(X, 40, method, random_state=4)
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)
    assert len(np.unique(a)) == 40 and a.min() >= 0 and a.max() < len(X)


def test_count_is_capped_at_n_and_validated(X):
    assert len(select_landmarks(X[:10], 50, "kmeans++", random_state=0)) == 10
    with pytest.raises(ValueError, match="landmarks must be one of"):
        select_landmarks(X, 5, "leverage")
    with pytest.raises(ValueError, match="positive integer"):
        select_landmarks(X, 0)


def test_kmeanspp_finds_the_far_group_uniform_sampling_misses(X):
    # The 5-row group holds 0.8% of the rows; D^2 seeding picks it within the first few.
    hits = [np.any(select_landmarks(X, 10, "kmeans++", random_state=s) >= 600)
            for s in range(10)]
    assert all(hits)


def test_kmeanspp_on_duplicates_still_returns_distinct_rows():
    X = np.repeat(np.arange(3.0)[:, None], 20, axis=0)  # 3 distinct rows, 60 in all
    idx = select_landmarks(X, 10, "kmeans++", random_state=0)
    assert len(np.unique(idx)) == 10
    assert len(np.unique(X[idx, 0])) == 3


def _potential(X, idx):
    d2 = ((X[:, None, :] - X[idx][None, :, :]) ** 2).sum(axis=2)
    return d2.min(axis=1).sum()


def _plain_d2_order(X, n_select, rng):
    """Reference D^2 seeding, written from the definition (one draw per step)."""
    chosen = [int(rng.randint(len(X)))]
    for _ in range(1, n_select):
        w = ((X[:, None, :] - X[chosen][None, :, :]) ** 2).sum(axis=2).min(axis=1)
        chosen.append(min(int(np.searchsorted(np.cumsum(w), rng.uniform(0, w.sum()))),
                          len(X) - 1))
    return np.array(chosen)


def test_one_trial_seeding_is_plain_d2_sampling(X):
    got = kmeanspp_order(X, 30, np.random.RandomState(7))
    np.testing.assert_array_equal(got, _plain_d2_order(X, 30, np.random.RandomState(7)))


def test_local_trials_pick_the_draw_that_lowers_the_potential_most():
    # Greedy k-means++ (scikit-learn's): of the draws of a step, the one kept leaves the
    # smallest sum of squared distances to the seeds, so over seeds it covers the rows better.
    rng = np.random.default_rng(1)
    X = np.vstack([rng.normal(0, 0.3, (60, 3)) + 4 * rng.normal(size=3) for _ in range(12)])
    plain = [_potential(X, kmeanspp_order(X, 12, np.random.RandomState(s))) for s in range(12)]
    greedy = [_potential(X, kmeanspp_order(X, 12, np.random.RandomState(s), local_trials=6))
              for s in range(12)]
    assert np.mean(greedy) < 0.8 * np.mean(plain)
    for s in range(3):
        idx = kmeanspp_order(X, 40, np.random.RandomState(s), local_trials=4)
        assert len(np.unique(idx)) == 40
    dup = np.repeat(np.arange(3.0)[:, None], 20, axis=0)
    idx = kmeanspp_order(dup, 10, np.random.RandomState(0), local_trials=4)
    assert len(np.unique(idx)) == 10 and len(np.unique(dup[idx, 0])) == 3


def test_take_rows_numpy_sparse_dask_zarr_agree(X, tmp_path):
    idx = np.array([7, 3, 600, 3, 0])
    expected = X[idx]
    z = zarr.create_array(str(tmp_path / "x.zarr"), shape=X.shape, chunks=(64, 4),
                          dtype="f8")
    z[...] = X
    np.testing.assert_array_equal(take_rows(X, idx), expected)
    np.testing.assert_array_equal(take_rows(da.from_array(X, chunks=(100, 4)), idx), expected)
    np.testing.assert_array_equal(take_rows(z, idx), expected)
    np.testing.assert_array_equal(take_rows(sp.csr_matrix(X), idx).toarray(), expected)


def test_floor_drops_tiny_and_negative_eigenvalues():
    rng = np.random.default_rng(1)
    L = rng.normal(size=(8, 3))
    L = np.vstack([L, L[:2]])  # two duplicated landmarks: W is singular
    spec = resolve_kernels([KernelSpec("gaussian", c=1.0)], [5.0])
    W = kernel_blocks(spec, L, L)[0]
    W[0, 0] -= 1e-17  # round-off: the zero eigenvalues may come out negative
    T, values = landmark_transform(W)
    assert T.shape == (10, 8) and np.all(values > 0) and np.isfinite(T).all()
    # F = K(X, L) T reproduces K on the landmarks, duplicates included.
    F = W @ T
    np.testing.assert_allclose(F @ F.T, W, atol=1e-9)
    # A relative floor: scaling W scales nothing but the kept eigenvalues.
    T2, values2 = landmark_transform(1e-6 * W)
    assert T2.shape == T.shape
    np.testing.assert_allclose(values2, 1e-6 * values, rtol=1e-8)


@pytest.mark.parametrize("rank_tol", [1e-1, 1e-2, 1e-3, 1e-6])
def test_rank_tol_keeps_the_fewest_eigenvalues_within_the_trace_share(rank_tol):
    rng = np.random.default_rng(2)
    L = rng.normal(size=(60, 4))
    W = kernel_blocks(resolve_kernels([KernelSpec("gaussian", c=1.0)], [8.0]), L, L)[0]
    _, every = landmark_transform(W)
    T, values = landmark_transform(W, rank_tol=rank_tol)
    r = values.size
    # the leading eigenvalues, and the fewest of them whose left-out trace is within the share
    np.testing.assert_allclose(values, every[:r])
    assert every[r:].sum() <= rank_tol * every.sum()
    assert every[r - 1:].sum() > rank_tol * every.sum()
    # the factor map still reproduces the kept part of W: F F^T = U_r diag(values) U_r^T
    F = W @ T
    assert np.linalg.norm(F @ F.T - W, 2) <= every[r] * (1 + 1e-8) + 1e-12
    assert 1 <= r < every.size  # a smooth kernel: the tolerance cuts the rank


def test_rank_tol_zero_keeps_every_eigenvalue_above_the_floor():
    rng = np.random.default_rng(3)
    L = rng.normal(size=(30, 4))
    W = kernel_blocks(resolve_kernels([KernelSpec("gaussian", c=1.0)], [8.0]), L, L)[0]
    assert landmark_transform(W, rank_tol=0.0)[1].size == landmark_transform(W)[1].size


def test_a_tabulated_pool_seeds_as_one_product_a_step_does(monkeypatch):
    # A small pool's distances come from one table; a larger dense one's from its lifted
    # rows, one product a step; a larger sparse one's, or one of many columns, from the
    # distance formula a step. The same draws give the same seeds every way.
    import scipy.sparse as sp

    from mkrk_dask import landmarks

    X = np.random.default_rng(3).normal(size=(300, 5))
    tabulated = kmeanspp_order(X, 60, np.random.RandomState(2), local_trials=4)
    monkeypatch.setattr(landmarks, "TABLE_POOL_ROWS", 0)
    lifted = kmeanspp_order(X, 60, np.random.RandomState(2), local_trials=4)
    stepwise = kmeanspp_order(sp.csr_matrix(X), 60, np.random.RandomState(2), local_trials=4)
    monkeypatch.setattr(landmarks, "LIFT_MAX_COLUMNS", 4)
    wide = kmeanspp_order(X, 60, np.random.RandomState(2), local_trials=4)
    np.testing.assert_array_equal(tabulated, lifted)
    np.testing.assert_array_equal(tabulated, stepwise)
    np.testing.assert_array_equal(tabulated, wide)
    assert len(np.unique(tabulated)) == 60


def test_lifted_rows_give_the_squared_distances(monkeypatch):
    # [x, |x|^2, 1] . [-2 y, 1, |y|^2] = |x - y|^2, against the differences written out
    from mkrk_dask import landmarks

    monkeypatch.setattr(landmarks, "TABLE_POOL_ROWS", 0)
    X = np.random.default_rng(4).normal(size=(50, 3)) * [1.0, 10.0, 100.0]
    sq = (X ** 2).sum(axis=1)
    rows, lifted = landmarks._distance_rows(X, sq)
    picked = landmarks._lift_candidates(rows, sq, np.arange(len(X)))
    expected = ((X[:, None, :] - X[None, :, :]) ** 2).sum(axis=2)
    np.testing.assert_allclose(picked @ lifted, expected, rtol=1e-10, atol=1e-8)
    assert landmarks._distance_rows(np.c_[X, X], sq) is not None
    monkeypatch.setattr(landmarks, "LIFT_MAX_COLUMNS", 5)
    assert landmarks._distance_rows(np.c_[X, X], sq) is None  # 6 columns: the formula


@pytest.mark.parametrize("method", ["kmeans++", "uniform"])
def test_select_landmarks_returns_the_rows_it_chose(method):
    """return_rows gives the chosen rows as take_rows reads them (k-means++ from its pool:
    no second read of lazy input), the same choice as without it."""
    X = np.random.default_rng(0).normal(size=(3000, 5)).astype(np.float32)
    lazy = da.from_array(X, chunks=500)
    chosen, rows = select_landmarks(lazy, 30, method, random_state=3, return_rows=True)
    np.testing.assert_array_equal(chosen, select_landmarks(X, 30, method, random_state=3))
    np.testing.assert_array_equal(np.asarray(rows, dtype=np.float64),
                                  X[chosen].astype(np.float64))
    sparse_rows = select_landmarks(sp.csr_matrix(X), 30, method, random_state=3,
                                   return_rows=True)[1]
    np.testing.assert_array_equal(sparse_rows.toarray(), X[chosen].astype(np.float64))
