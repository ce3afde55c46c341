"""Input and parameter checks (mkrk_dask.validation, mkrk_dask.precomputed): one-line errors that
name the problem."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from mkrk_dask.precomputed import check_precomputed
from mkrk_dask.validation import (
    check_choice,
    check_lambda,
    check_n_clusters,
    check_views,
    is_multiview,
)


def test_views_are_float64_and_sparse_stays_sparse():
    X = np.arange(12).reshape(4, 3)
    views = check_views([X, sp.csr_matrix(X)])
    assert views[0].dtype == np.float64 and sp.issparse(views[1])
    assert is_multiview([X, X]) and not is_multiview(X)


@pytest.mark.parametrize("call, message", [
    (lambda: check_views([np.ones((3, 2)), np.ones((4, 2))]), "same number of rows"),
    (lambda: check_views([np.ones((3, 2)), np.full((3, 2), np.inf)]), "view 1: .*infinity"),
    (lambda: check_precomputed(np.ones((2, 3, 4))), "square"),
    (lambda: check_precomputed([np.eye(2), np.eye(3)]), "different shapes"),
    (lambda: check_precomputed(np.triu(np.ones((3, 3)))), "not symmetric"),
    (lambda: check_precomputed(sp.eye(3)), "dense"),
    (lambda: check_n_clusters(0, 10), ">= 1"),
    (lambda: check_n_clusters(2.0, 10), "integer"),
    (lambda: check_n_clusters(11, 10), "larger than n_samples"),
    (lambda: check_lambda(float("inf")), "finite"),
    (lambda: check_lambda(True), "lam must be a finite number"),
    (lambda: check_lambda(-0.5), ">= 0"),
    (lambda: check_choice("mode", "x", ("a", "b")), r"mode must be one of \('a', 'b'\)"),
])
def test_bad_input_is_named_in_one_line(call, message):
    with pytest.raises((ValueError, TypeError), match=message) as caught:
        call()
    assert "\n" not in str(caught.value)


def test_good_values_pass_through():
    assert check_lambda(np.float32(0.25)) == 0.25
    assert check_n_clusters(np.int64(3), 5) == 3
    assert check_choice("mode", "a", ("a",)) == "a"
    K = check_precomputed(np.eye(3))
    assert K.shape == (1, 3, 3) and K.dtype == np.float64


# --------------------------------------------------------------------------- precomputed kernels


def _raw_kernels(n: int = 300, seed: int = 0) -> np.ndarray:
    """Two PSD kernels with unequal diagonals and round-off asymmetry (n spans two tiles)."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 6))
    linear = X @ X.T + 1e-3 * np.eye(n)
    sq = np.sum(X**2, axis=1)
    gaussian = 3.0 * np.exp(-(sq[:, None] + sq[None, :] - 2 * X @ X.T) / 20.0)
    K = np.stack([linear, gaussian])
    return K + 1e-12 * np.abs(K).max() * rng.normal(size=K.shape)


@pytest.mark.parametrize("normalize", [True, False])
def test_prepared_copy_is_normalise_then_symmetrize_to_the_bit(normalize):
    from mkrk_dask.kernels import normalize_kernels, symmetrize
    from mkrk_dask.precomputed import prepare_precomputed

    K = _raw_kernels()
    before = K.copy()
    expected = K.copy()
    if normalize:
        normalize_kernels(expected)
    symmetrize(expected, unit_diagonal=False)
    got = prepare_precomputed(K, normalize=normalize)
    assert np.array_equal(got, expected)
    assert np.array_equal(got, got.transpose(0, 2, 1))
    assert np.array_equal(K, before)  # the input is never modified
    assert not np.shares_memory(got, K)


@pytest.mark.parametrize("normalize", [True, False])
@pytest.mark.parametrize("n", [300, 512])  # a partial last tile, and whole tiles only
def test_prepared_in_place_is_the_copy_to_the_bit(normalize, n):
    from mkrk_dask.precomputed import prepare_precomputed

    K = _raw_kernels(n)
    expected = prepare_precomputed(K, normalize=normalize)
    got = prepare_precomputed(K, normalize=normalize, copy=False)
    assert got is K  # prepared in the caller's array: no second 8 m n^2 bytes
    assert np.array_equal(got, expected)


@pytest.mark.parametrize("make", [
    lambda K: np.broadcast_to(K, K.shape),  # read-only
    # converted first: that conversion is the one copy (symmetric before the cast, as float32
    # round-off would exceed the symmetry tolerance)
    lambda K: ((K + K.transpose(0, 2, 1)) / 2).astype(np.float32),
    lambda K: np.asfortranarray(K),
])
def test_in_place_preparation_of_input_it_cannot_overwrite_copies_it_once(make):
    from mkrk_dask.precomputed import prepare_precomputed

    source = make(_raw_kernels())
    before = np.array(source)
    got = prepare_precomputed(source, copy=False)
    np.testing.assert_array_equal(got, prepare_precomputed(source))
    assert not np.shares_memory(got, source)
    np.testing.assert_array_equal(source, before)


def test_a_fit_in_place_is_the_fit_of_the_copy():
    """``backend_options={"copy": False}``: the same fit, and the caller's array then holds
    the prepared kernels; the default leaves it as it was. The default's copy is packed (the
    same entries to the bit, stored once per pair) and the caller's array is not, so the
    loop's sums run in another order: the same to round-off."""
    from mkrk_dask import MKKMRK
    from mkrk_dask.precomputed import prepare_precomputed

    K = _raw_kernels()
    before = K.copy()

    def fit(kernels, **options):
        return MKKMRK.paper(3, kernels="precomputed", lam=2.0**-3, random_state=0,
                            **options).fit(kernels)

    copied = fit(K)
    np.testing.assert_array_equal(K, before)
    own = K.copy()
    in_place = fit(own, backend_options={"copy": False})
    np.testing.assert_array_equal(in_place.labels_, copied.labels_)
    # the optimal Y is not unique: weights may move where the objective does not
    np.testing.assert_allclose(in_place.weights_, copied.weights_, rtol=0, atol=1e-6)
    np.testing.assert_allclose(in_place.objective_history_, copied.objective_history_,
                               rtol=1e-12)
    np.testing.assert_array_equal(own, prepare_precomputed(K))


def _bad_kernel(kind: str) -> np.ndarray:
    K = _raw_kernels()
    n = K.shape[1]
    if kind == "not symmetric":
        K[1, 280, 3] += 1e-3  # in the second tile row: the tiled comparison must reach it
    elif kind == "NaN":
        K[1, 299, 299] = np.nan
    elif kind == "infinity":
        K[1, 0, 5] = K[1, 5, 0] = np.inf
    elif kind == "not PSD":
        # One negative eigenvalue, -1, along a unit vector: the Cholesky test must fail.
        v = np.random.default_rng(1).normal(size=n)
        v /= np.linalg.norm(v)
        K[1] -= (np.linalg.eigvalsh(K[1])[0] + 1.0) * np.outer(v, v)
    elif kind == "negative diagonal":
        K[1, 7, 7] = -1.0
    elif kind == "zero diagonal":
        K[1, 7, :] = K[1, :, 7] = 0.0  # still PSD: a zero row
    return K


BAD_KERNELS = [("not symmetric", "precomputed kernel 1 is not symmetric"),
               ("NaN", "precomputed kernel 1 contains NaN or infinity"),
               ("infinity", "precomputed kernel 1 contains NaN or infinity"),
               ("not PSD", "precomputed kernel 1 is not positive semi-definite"),
               ("negative diagonal", "precomputed kernel 1 is not positive semi-definite"),
               ("zero diagonal", "diagonal entry 7 is 0; normalisation needs a positive")]


@pytest.mark.parametrize("kind, message", BAD_KERNELS)
def test_bad_precomputed_kernel_one_line_error_and_input_untouched(kind, message):
    from mkrk_dask import MKKMRK
    from mkrk_dask.precomputed import prepare_precomputed

    K = _bad_kernel(kind)
    before = K.copy()
    calls = [lambda: prepare_precomputed(K),
             lambda: MKKMRK.paper(3, kernels="precomputed").fit(K)]
    if kind != "zero diagonal":  # a PSD kernel: only normalisation refuses it
        calls.append(lambda: check_precomputed(K))
    for call in calls:
        with pytest.raises(ValueError, match=message) as caught:
            call()
        assert "\n" not in str(caught.value)
    np.testing.assert_array_equal(K, before)  # NaN compares equal here too
    # In place the same checks refuse it with the same error (the kernel may then be left
    # partly prepared: the caller allowed it to be overwritten).
    for call in (lambda A: prepare_precomputed(A, copy=False),
                 lambda A: MKKMRK.paper(3, kernels="precomputed",
                                        backend_options={"copy": False}).fit(A)):
        with pytest.raises(ValueError, match=message):
            call(K.copy())


@pytest.mark.parametrize("cores", [1, 2, 5])
def test_the_lowest_failing_kernel_is_named_on_any_number_of_threads(monkeypatch, cores):
    """Kernels are checked on a thread per core; the error is the one a sequential loop
    would raise first, and the copy is the same on any number of threads."""
    from mkrk_dask import _threads
    from mkrk_dask.precomputed import prepare_precomputed

    monkeypatch.setattr(_threads, "usable_cores", lambda: cores)
    good = _raw_kernels()
    stack = np.concatenate([good, _bad_kernel("not PSD")[1:], good, _bad_kernel("NaN")[1:]])
    for call in (prepare_precomputed, check_precomputed):
        with pytest.raises(ValueError, match="precomputed kernel 2 is not positive semi"):
            call(stack)
        with pytest.raises(ValueError, match="precomputed kernel 5 contains NaN"):
            call(np.concatenate([good, good, good[:1], stack[-1:]]))
    expected = prepare_precomputed(np.concatenate([good, good, good]))
    monkeypatch.setattr(_threads, "usable_cores", lambda: 1)
    np.testing.assert_array_equal(prepare_precomputed(np.concatenate([good] * 3)), expected)


def test_zero_diagonal_passes_without_normalisation():
    from mkrk_dask.precomputed import prepare_precomputed

    K = _bad_kernel("zero diagonal")
    assert prepare_precomputed(K, normalize=False).shape == K.shape


def test_precomputed_values_are_checked_for_the_blockwise_solver_too():
    """Only the exact backend checks while copying; the others get check_precomputed, before
    any Dask cluster starts."""
    from mkrk_dask import MKKMRK

    with pytest.raises(ValueError, match="not symmetric"):
        MKKMRK.paper(3, kernels="precomputed", solver="blockwise").fit(
            _bad_kernel("not symmetric"))


def test_fit_leaves_the_precomputed_kernels_untouched():
    from mkrk_dask import MKKMRK

    K = _raw_kernels(60)
    before = K.copy()
    model = MKKMRK.paper(3, kernels="precomputed", random_state=0).fit(K)
    np.testing.assert_array_equal(K, before)
    assert model.labels_.shape == (60,)


def test_large_kernels_are_checked_on_a_principal_submatrix(monkeypatch):
    import mkrk_dask.precomputed as precomputed

    K = _raw_kernels(40)
    full = precomputed.prepare_precomputed(K)
    monkeypatch.setattr(precomputed, "PSD_FULL_CHECK_MAX_N", 16)
    with pytest.warns(UserWarning, match="principal submatrix of 16 rows"):
        sampled = precomputed.prepare_precomputed(K)
    assert np.array_equal(sampled, full)
    with pytest.warns(UserWarning, match="principal submatrix"):
        precomputed.check_precomputed(K)


def _kernel_with_smallest_eigenvalue(n: int, smallest: float, seed: int = 0) -> np.ndarray:
    """A random n x n symmetric kernel, diagonal entries at most 1 after the shift, whose
    smallest eigenvalue is ``smallest`` (rank-deficient apart from it: 10 positive ones)."""
    rng = np.random.default_rng(seed)
    Q = np.linalg.qr(rng.normal(size=(n, 11)))[0]
    values = np.concatenate([np.linspace(1.0, 0.1, 10) * n / 10, [smallest]])
    K = (Q * values) @ Q.T
    return (K + K.T) / 2


@pytest.mark.parametrize("psd_tol", [1e-6, 1e-9])  # the float32 screen, and float64 alone
def test_psd_test_refuses_exactly_below_its_tolerance(psd_tol):
    """An eigenvalue at twice the tolerance below zero is refused, one at half of it is
    accepted, with the float32 screen (the default) and without it (a tolerance below it):
    the screen never refuses a kernel the float64 test accepts, nor accepts one beyond it."""
    n = 300
    for factor, refused in ((2.0, True), (0.5, False)):
        # the tolerance's unit is n times the largest diagonal entry, which the smallest
        # eigenvalue barely moves: scale for it, then check where the eigenvalue landed
        unit = n * np.max(np.diagonal(_kernel_with_smallest_eigenvalue(n, 0.0)))
        K = _kernel_with_smallest_eigenvalue(n, -factor * psd_tol * unit)
        K /= np.max(np.diagonal(K))
        smallest = np.linalg.eigvalsh(K)[0] / n
        assert (smallest < -1.5 * psd_tol) if refused else (-0.6 * psd_tol < smallest < 0)
        if refused:
            with pytest.raises(ValueError, match="not positive semi-definite"):
                check_precomputed(K, psd_tol=psd_tol)
        else:
            check_precomputed(K, psd_tol=psd_tol)

