"""Top-k eigensolvers against a full dense eigendecomposition."""

import numpy as np
import pytest

from mkrk_dask.eigen import block_krylov_top_k, top_k_dense


def psd(n, rank, seed):
    rng = np.random.default_rng(seed)
    A = rng.normal(size=(n, rank))
    spectrum = 1.0 / (1 + np.arange(rank)) ** 1.5
    return (A * spectrum) @ A.T


@pytest.mark.parametrize("method", ["lapack", "krylov", "lanczos"])
def test_top_k_matches_full_eigh(method):
    A = psd(300, 120, 0)
    values, vectors = np.linalg.eigh(A)
    top_values, top_vectors = top_k_dense(A, 8, method=method)
    np.testing.assert_allclose(top_values, values[::-1][:8], rtol=1e-10)
    # Same subspace: the projectors agree.
    P_ref = vectors[:, -8:] @ vectors[:, -8:].T
    np.testing.assert_allclose(top_vectors @ top_vectors.T, P_ref, atol=1e-8)
    np.testing.assert_allclose(top_vectors.T @ top_vectors, np.eye(8), atol=1e-12)


def test_warm_start_converges_faster_and_to_the_same_answer():
    A = psd(400, 200, 1)
    B = A + 1e-3 * psd(400, 200, 2)
    _, cold_vectors, cold = block_krylov_top_k(A.__matmul__, 400, 10, tol=1e-11)
    values, vectors, warm = block_krylov_top_k(B.__matmul__, 400, 10, start=cold_vectors,
                                               tol=1e-11)
    assert warm["converged"] and cold["converged"]
    assert warm["products"] < cold["products"]
    np.testing.assert_allclose(values, np.linalg.eigvalsh(B)[::-1][:10], rtol=1e-10)


def test_k_out_of_range():
    with pytest.raises(ValueError, match="k must be"):
        top_k_dense(np.eye(3), 4)
