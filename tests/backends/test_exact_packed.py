"""Precomputed kernels kept packed by the exact backend (mkrk_dask._packed): the packed copy is
the full one to the bit, every quantity of the loop is its dense definition, and a fit's
objective is that of a plain dense loop to 1e-10 (issue #77)."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.datasets import load_digits
from threadpoolctl import threadpool_limits

from mkrk_dask import MKKMRK
from mkrk_dask._packed import PackedLayout
from mkrk_dask.backends.base import TopK
from mkrk_dask.backends.exact import ExactBackend
from mkrk_dask.kernels import paper_kernels
from mkrk_dask.loop import solve
from mkrk_dask.precomputed import (
    PackedKernel,
    _check_psd,
    prepare_precomputed,
    prepare_precomputed_packed,
)
from mkrk_dask.qp import RepresentativeQP


@pytest.fixture(scope="module")
def raw():
    """The 12 paper kernels of 600 digits, not normalised, a hair asymmetric (within the
    symmetry tolerance): the precomputed kernels a user passes. 600 rows: above 500, where
    the eigensolver is ARPACK."""
    X, _ = load_digits(return_X_y=True)
    K = ExactBackend.from_views([X[:600]], paper_kernels(), normalize=False).kernels
    K[:, 3, 5] *= 1 + 1e-12
    return K


@pytest.mark.parametrize("n, strip", [(600, 64), (70, 64), (64, 64), (130, 16), (5, 2)])
def test_the_layout_holds_every_entry_of_the_upper_triangle_once_per_strip(n, strip):
    layout = PackedLayout(n, strip)
    A = np.random.default_rng(n).normal(size=(n, n))
    A = A + A.T
    flat = np.concatenate([A[a:b, a:].ravel() for a, b in zip(layout.starts, layout.ends,
                                                               strict=True)])
    assert flat.size == layout.size <= n * (n + strip) // 2
    assert PackedLayout.from_size(layout.size, strip).n == n
    np.testing.assert_array_equal(layout.unpack_full(flat, np.empty((n, n))), A)
    np.testing.assert_array_equal(flat[layout.diagonal_index], np.diagonal(A))
    H = np.linalg.qr(np.random.default_rng(1).normal(size=(n, min(n, 4))))[0]
    np.testing.assert_allclose(flat @ layout.outer(H, np.empty(layout.size)),
                               np.trace(H.T @ A @ H), rtol=1e-12, atol=1e-12)
    stack = np.stack([flat, 2 * flat + 1, -flat])
    dense = np.stack([A, 2 * A + 1, -A]).reshape(3, -1)
    np.testing.assert_allclose(layout.gram(stack), dense @ dense.T, rtol=1e-12)
    sample = np.sort(np.random.default_rng(2).choice(n, max(n // 3, 1), replace=False))
    sub = np.zeros((sample.size, sample.size))
    layout.fill_upper(flat, sub, sample)
    np.testing.assert_array_equal(np.triu(sub), np.triu(A[np.ix_(sample, sample)]))


@pytest.mark.parametrize("normalize", [True, False])
def test_the_packed_copy_is_the_full_copy_to_the_bit(raw, normalize):
    full = prepare_precomputed(raw, normalize=normalize)
    packed, layout, test = prepare_precomputed_packed(raw, normalize=normalize)
    test.wait()
    assert packed.shape == (raw.shape[0], layout.size) and layout.size < 0.56 * 600**2
    for p in range(raw.shape[0]):
        np.testing.assert_array_equal(layout.unpack_full(packed[p], np.empty((600, 600))),
                                      full[p])
    np.testing.assert_array_equal(ExactBackend(packed, layout=layout).kernels, full)


def test_the_psd_test_reads_a_packed_kernel_as_the_full_one(raw):
    full = prepare_precomputed(raw)
    packed, layout, _ = prepare_precomputed_packed(raw)
    sample = np.sort(np.random.default_rng(0).choice(600, 200, replace=False))
    for rows in (None, sample):
        part = PackedKernel(packed[0], layout, rows)
        dense = full[0] if rows is None else full[0][np.ix_(rows, rows)]
        np.testing.assert_array_equal(part.diagonal(), np.diagonal(dense))
        _check_psd(part, 0, 1e-6)
    # a kernel with an eigenvalue of -1: refused from its packed copy too
    v = np.random.default_rng(1).normal(size=600)
    v /= np.linalg.norm(v)
    K = full[0] - (np.linalg.eigvalsh(full[0])[0] + 1.0) * np.outer(v, v)
    flat = np.concatenate([K[a:b, a:].ravel() for a, b in zip(layout.starts, layout.ends,
                                                               strict=True)])
    with pytest.raises(ValueError, match="precomputed kernel 4 is not positive semi"):
        _check_psd(PackedKernel(flat, layout), 4, 1e-6)


def test_packed_backend_quantities_match_dense_definitions(raw):
    backend = ExactBackend.from_precomputed(raw)
    assert backend.packed
    K = prepare_precomputed(raw)
    m = K.shape[0]
    with backend:
        np.testing.assert_allclose(backend.traces(), [np.trace(Kp) for Kp in K], rtol=1e-14)
        gram = K.reshape(m, -1) @ K.reshape(m, -1).T
        np.testing.assert_allclose(backend.dissimilarity("fip"), gram, rtol=1e-12)
        w = np.random.default_rng(0).dirichlet(np.ones(m))
        Kw = np.tensordot(w**2, K, axes=1)
        np.testing.assert_allclose(backend.combined_kernel(w), Kw, rtol=1e-12, atol=1e-14)
        values = np.linalg.eigvalsh(Kw)[::-1]
        for k in (10, 3):  # ARPACK on the upper triangle, then again on the same work matrix
            top = backend.top_k(w, k)
            np.testing.assert_allclose(top.eigenvalues, values[:k], rtol=1e-10)
            H = top.basis
            np.testing.assert_allclose(Kw @ H, H * top.eigenvalues, atol=1e-8)
            np.testing.assert_allclose(backend.quad_forms(top),
                                       [np.trace(H.T @ Kp @ H) for Kp in K], rtol=1e-10)
        H = np.linalg.qr(np.random.default_rng(3).normal(size=(600, 5)))[0]
        np.testing.assert_allclose(backend.quad_forms(TopK(np.ones(5), H)),
                                   [np.trace(H.T @ Kp @ H) for Kp in K], rtol=1e-10)


def plain_dense_loop(K: np.ndarray, k: int, lam: float, iterations: int) -> np.ndarray:
    """The loop in plain dense numpy (full eigendecompositions, explicit traces) with the
    library's certified QP, which is checked on its own by its KKT conditions."""
    m = K.shape[0]
    C = K.reshape(m, -1) @ K.reshape(m, -1).T
    traces = np.einsum("pii->p", K)
    qp = RepresentativeQP(C, lam)
    w, history = np.full(m, 1.0 / m), []
    for _ in range(iterations):
        H = np.linalg.eigh(np.tensordot(w**2, K, axes=1))[1][:, -k:]
        d = traces - np.array([np.sum((Kp @ H) * H) for Kp in K])
        Y = qp.solve(d).Y
        w = Y.mean(axis=1)
        history.append(w**2 @ d + lam * np.sum(C * Y))
    return np.array(history)


@pytest.mark.parametrize("lam", [2.0**-15, 2.0**-3])
def test_the_fit_on_precomputed_kernels_has_the_dense_objective_to_1e10(raw, lam):
    """Issue #77's bar: the library's objective is the plain dense computation's to 1e-10,
    for the default packed copy and for the caller's array prepared in place (kept full)."""
    with threadpool_limits(1):
        copied = MKKMRK.paper(10, kernels="precomputed", lam=lam, random_state=0).fit(raw)
        in_place = MKKMRK.paper(10, kernels="precomputed", lam=lam, random_state=0,
                                backend_options={"copy": False}).fit(raw.copy())
        dense = plain_dense_loop(prepare_precomputed(raw), 10, lam, copied.n_iter_)
    np.testing.assert_allclose(copied.objective_history_, dense, rtol=1e-10)
    np.testing.assert_allclose(in_place.objective_history_, dense, rtol=1e-10)
    np.testing.assert_array_equal(copied.labels_, in_place.labels_)


def test_the_loop_on_packed_kernels_is_the_loop_on_full_ones(raw):
    full = ExactBackend(prepare_precomputed(raw))
    packed = ExactBackend.from_precomputed(raw)
    with threadpool_limits(1), packed:
        a, b = solve(full, 10, 2.0**-8, tol=0.0, max_iter=5), solve(packed, 10, 2.0**-8,
                                                                    tol=0.0, max_iter=5)
    np.testing.assert_allclose(b.objective_history, a.objective_history, rtol=1e-12)
    np.testing.assert_allclose(b.dissimilarity, a.dissimilarity, rtol=1e-13)
