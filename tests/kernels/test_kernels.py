"""Kernels and dissimilarities against independent dense formulas (scikit-learn, scipy)."""

import numpy as np
import pytest
import scipy.linalg
import scipy.sparse as sp
from scipy.spatial.distance import pdist
from sklearn.metrics.pairwise import cosine_similarity, polynomial_kernel, rbf_kernel

from mkrk_dask.dissimilarity import dense_dissimilarity
from mkrk_dask.kernel_widths import median_scales
from mkrk_dask.kernels import (
    KernelSpec,
    as_kernel_specs,
    fill_kernel_blocks,
    kernel_blocks,
    kernel_matrices,
    max_pairwise_distance,
    mirror_upper,
    paper_kernels,
    parse_kernel,
    resolve_kernels,
    symmetrize,
)


@pytest.fixture
def X():
    return np.random.default_rng(0).normal(size=(40, 7))


def normalized(K):
    d = np.sqrt(np.diag(K))
    return K / np.outer(d, d)


def test_paper_preset_matches_independent_formulas(X):
    M = pdist(X).max()
    assert max_pairwise_distance(X, block_rows=7) == pytest.approx(M, rel=1e-12)
    specs = resolve_kernels(paper_kernels(), [M])
    K = kernel_matrices([X], specs)
    assert K.shape == (12, 40, 40)
    expected = [cosine_similarity(X)]
    for a in (0.0, 1.0):
        for b in (2, 4):
            expected.append(normalized(polynomial_kernel(X, degree=b, gamma=1.0, coef0=a)))
    for c in (0.01, 0.05, 0.1, 1, 10, 50, 100):
        expected.append(rbf_kernel(X, gamma=1.0 / (2 * (c * M) ** 2)))
    for p in range(12):
        np.testing.assert_allclose(K[p], expected[p], rtol=1e-10, atol=1e-12,
                                   err_msg=specs[p].name)
        np.testing.assert_array_equal(K[p], K[p].T)
        np.testing.assert_array_equal(np.diag(K[p]), 1.0)


def test_sparse_input_matches_dense_and_is_not_densified(X):
    Xs = sp.csr_matrix(np.where(np.abs(X) > 0.8, X, 0.0))
    specs = resolve_kernels(paper_kernels(), [max_pairwise_distance(Xs)])
    np.testing.assert_allclose(kernel_matrices([Xs], specs),
                               kernel_matrices([Xs.toarray()], specs), rtol=1e-12, atol=1e-14)


def _with_own_directions(X):
    """Independent reference: unit rows with one more coordinate, 1 for an all-zero row."""
    norms = np.linalg.norm(X, axis=1, keepdims=True)
    unit = np.divide(X, norms, out=np.zeros_like(X), where=norms > 0)
    return np.hstack([unit, (norms == 0).astype(float)])


@pytest.mark.parametrize("precision", ["double", "single"])
@pytest.mark.parametrize("sparse", [False, True])
def test_all_zero_rows_have_a_direction_of_their_own(precision, sparse):
    """The kernels of directions (cosine, the normalised homogeneous polynomial, angular
    Gaussians) on data with all-zero rows: those of the unit rows with one more coordinate,
    1 for an all-zero row (so all-zero rows are alike and orthogonal to every other row),
    symmetric and PSD with a unit diagonal; the other kernels are unchanged."""
    X = np.abs(np.random.default_rng(3).normal(size=(30, 6)))
    X[[4, 17, 29]] = 0.0
    specs = resolve_kernels(as_kernel_specs(["cosine", "polynomial(a=0,b=2)", "angular(m=1)",
                                             "angular(m=0.5)", "gaussian(m=1)"]), [1.0],
                            median_scales([X], as_kernel_specs(["angular(m=1)",
                                                                "gaussian(m=1)"])))
    U = _with_own_directions(X)
    cos = U @ U.T
    chord = ((U[:, None, :] - U[None, :, :]) ** 2).sum(-1)
    expected = [cos, cos**2] + [np.exp(-chord / (2 * spec.sigma**2)) for spec in specs[2:4]]
    expected.append(rbf_kernel(X, gamma=1 / (2 * specs[4].sigma**2)))
    rows = sp.csr_matrix(X) if sparse else X
    tol = 1e-5 if precision == "single" else 1e-12  # single: float32 output, sparse rows too
    # columns with all-zero rows, and without
    for index in (np.arange(30), np.arange(5, 15), np.array([4, 5])):
        cols = sp.csr_matrix(X[index]) if sparse else X[index]
        K = kernel_blocks(specs, rows, cols, precision=precision)
        for p in range(len(specs)):
            np.testing.assert_allclose(K[p], expected[p][:, index], atol=tol, rtol=0)
    K = kernel_matrices([X], specs)
    for p in range(len(specs)):
        np.testing.assert_allclose(K[p], expected[p], atol=1e-12)
        assert np.allclose(np.diag(K[p]), 1.0) and np.array_equal(K[p], K[p].T)
        assert np.linalg.eigvalsh(K[p]).min() > -1e-10
    assert K[0][4, 17] == 1.0 and K[0][4, 5] == 0.0  # alike, and orthogonal to the others
    # The angular widths come from the same rows: a median over these directions.
    assert median_scales([X], as_kernel_specs(["angular(m=1)"]))[(0, "angular")] == pytest.approx(
        np.sqrt(np.median(pdist(U, "sqeuclidean"))), rel=1e-12)


def test_not_a_number_under_a_kernel_of_directions_is_a_clear_error(X):
    X = X.copy()
    X[3, 1] = np.nan
    with pytest.raises(ValueError, match="self-similarity is negative or not a number"):
        kernel_matrices([X], [KernelSpec("linear")])


def test_multiview_kernels_read_their_view(X):
    Z = np.random.default_rng(1).normal(size=(40, 3))
    specs = as_kernel_specs(["cosine", "cosine@1", "gaussian(sigma=2)@1"], n_views=2)
    K = kernel_matrices([X, Z], specs)
    np.testing.assert_allclose(K[0], cosine_similarity(X), atol=1e-12)
    np.testing.assert_allclose(K[1], cosine_similarity(Z), atol=1e-12)
    np.testing.assert_allclose(K[2], rbf_kernel(Z, gamma=1 / 8), atol=1e-12)
    assert len(as_kernel_specs("paper", n_views=2)) == 24
    with pytest.raises(ValueError, match="view 1"):
        as_kernel_specs(["cosine@1"], n_views=1)


@pytest.mark.parametrize("text", ["cosine", "polynomial(a=1,b=4)", "gaussian(c=0.05)",
                                  "gaussian(sigma=3)@2"])
def test_names_round_trip(text):
    spec = parse_kernel(text)
    assert parse_kernel(spec.name) == spec


@pytest.mark.parametrize("bad", ["cubic", "gaussian", "poly(a=-1,b=2)", "poly(b=0)",
                                 "gaussian(c=0)", "gaussian(q=1)"])
def test_bad_kernel_specifications(bad):
    with pytest.raises(ValueError):
        parse_kernel(bad)


def test_dissimilarities_against_dense_definitions(X):
    specs = resolve_kernels(paper_kernels(), [max_pairwise_distance(X)])
    K = kernel_matrices([X], specs)[[0, 1, 5, 8]]
    m = K.shape[0]
    fip = np.array([[np.trace(K[i].T @ K[j]) for j in range(m)] for i in range(m)])
    np.testing.assert_allclose(dense_dissimilarity(K, "fip"), fip, rtol=1e-12)
    sfn = np.array([[np.linalg.norm(K[i] - K[j]) ** 2 for j in range(m)] for i in range(m)])
    np.testing.assert_allclose(dense_dissimilarity(K, "sfn"), sfn, rtol=1e-9, atol=1e-9)
    # von Neumann and LogDet with matrix functions on ridge-regularised kernels.
    n = K.shape[1]
    reg = [Ki + 1e-3 * np.eye(n) for Ki in K]
    vn = np.array([[np.trace(reg[i] @ scipy.linalg.logm(reg[i]) - reg[i] @ scipy.linalg.logm(
        reg[j]) - reg[i] + reg[j]).real for j in range(m)] for i in range(m)])
    ld = np.array([[np.trace(reg[i] @ np.linalg.inv(reg[j]))
                    - np.linalg.slogdet(reg[i] @ np.linalg.inv(reg[j]))[1] - n
                    for j in range(m)] for i in range(m)])
    np.fill_diagonal(ld, 0.0)
    ours_vn = dense_dissimilarity(np.stack(reg), "vn", ridge=0.0)
    ours_ld = dense_dissimilarity(np.stack(reg), "ld", ridge=0.0)
    np.testing.assert_allclose(ours_vn, vn, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(ours_ld, ld, rtol=1e-6, atol=1e-6)
    assert not np.allclose(ours_vn, ours_vn.T)  # asymmetric, C[i, j] = D(K_i || K_j)


@pytest.mark.parametrize("families", [
    ["linear", "gaussian", "angular", "polynomial"], ["gaussian", "angular"],
    ["angular", "gaussian", "linear"], ["gaussian", "gaussian", "linear", "angular"],
    ["angular", "polynomial", "angular", "gaussian"]])
def test_kernels_evaluated_together_equal_each_alone(X, families):
    """The inner products become a distance block in place once no later kernel reads them:
    every kernel equals its evaluation alone, to the bit, whatever the order."""
    params = {"gaussian": {"m": 1.5}, "angular": {"m": 0.5}, "polynomial": {"a": 1, "b": 2},
              "linear": {}}
    specs = [KernelSpec(f, **params[f]) for f in families]
    specs = resolve_kernels(specs, [1.0], median_scales([X], specs))
    together = kernel_blocks(specs, X, X[:7])
    for p, spec in enumerate(specs):
        np.testing.assert_array_equal(together[p], kernel_blocks([spec], X, X[:7])[0])
    # Into a run of a larger array: the same blocks, no copy returned.
    out = np.full((len(specs) + 2, X.shape[0], 7), np.nan)
    fill_kernel_blocks(out, list(range(1, len(specs) + 1)), specs, X, X[:7])
    np.testing.assert_array_equal(out[1:-1], together)
    assert np.isnan(out[0]).all() and np.isnan(out[-1]).all()
    # Not a run: copied into place.
    scattered = np.zeros((2 * len(specs), X.shape[0], 7))
    fill_kernel_blocks(scattered, list(range(0, 2 * len(specs), 2)), specs, X, X[:7])
    np.testing.assert_array_equal(scattered[::2], together)
    with pytest.raises(ValueError, match="out has shape"):
        kernel_blocks(specs, X, X[:7], out=np.empty((1, 2, 3)))


@pytest.mark.parametrize("n", [1, 5, 255, 256, 257, 600])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_tiled_symmetrize_is_the_whole_matrix_formula(n, dtype):
    A = np.random.default_rng(n).random((2, n, n)).astype(dtype)
    reference = np.array([(K + K.T) * dtype(0.5) for K in A])
    for K in reference:
        np.fill_diagonal(K, 1.0)
    np.testing.assert_array_equal(symmetrize(A, unit_diagonal=True), reference)


@pytest.mark.parametrize("n", [2, 63, 64, 65, 300])
@pytest.mark.parametrize("normalize", [True, False])
def test_blocked_kernel_matrices_match_whole_blocks(monkeypatch, n, normalize):
    """The upper triangle in row blocks on a thread per core, mirrored: the kernels of the
    whole rows against themselves (one :func:`kernel_blocks` call, made symmetric), within
    round-off, exactly symmetric, sparse and dense views, several blocks and tiles."""
    import mkrk_dask.kernels as kernels_module

    monkeypatch.setattr(kernels_module, "SYMMETRY_TILE", 16)
    monkeypatch.setattr(kernels_module, "KERNEL_ROW_BLOCK", 32)
    rng = np.random.default_rng(n)
    X = np.abs(rng.normal(size=(n, 6)))
    Z = sp.random(n, 9, density=0.5, random_state=n, format="csr")
    specs = as_kernel_specs(["cosine@0", "gaussian(m=1)@0", "gaussian(m=0.5)@0",
                             "polynomial(a=1,b=2)@1", "angular(m=1)@1", "linear@1"], n_views=2)
    specs = resolve_kernels(specs, [0.0, 0.0], median_scales([X, Z], specs))
    K = kernel_matrices([X, Z], specs, normalize=normalize)
    whole = np.concatenate([kernel_blocks(specs[:3], X, X, normalize=normalize),
                            kernel_blocks(specs[3:], Z, Z, normalize=normalize)])
    expected = symmetrize(whole, unit_diagonal=normalize)
    np.testing.assert_allclose(K, expected, rtol=1e-13, atol=1e-13)
    for p in range(len(specs)):
        np.testing.assert_array_equal(K[p], K[p].T, err_msg=specs[p].name)
    if normalize:
        np.testing.assert_array_equal(np.diagonal(K, axis1=1, axis2=2), 1.0)


@pytest.mark.parametrize("n", [1, 5, 256, 257, 600])
@pytest.mark.parametrize("order", ["C", "F"])
def test_mirror_upper_is_the_whole_matrix_formula(n, order):
    A = np.asarray(np.random.default_rng(n).random((n, n)), order=order)
    expected = np.triu(A) + np.triu(A, 1).T
    assert mirror_upper(A) is A
    np.testing.assert_array_equal(A, expected)


@pytest.mark.parametrize("order", [[0.5, 1.0, 2.0], [2.0, 0.5, 1.0], [1.0, 2.0 ** 0.5, 4.0]])
@pytest.mark.parametrize("family", ["gaussian", "angular"])
def test_gaussians_whose_widths_double_are_squares_of_the_wider(X, family, order):
    """A Gaussian at half (or 1/sqrt 2) the width of another is that kernel squared twice
    (once): within a few units of round-off of its own exponential, whatever the order;
    widths 3 and 7 apart share nothing (the exponential alone, to the bit)."""
    X = np.abs(X) + 0.1  # angular kernels need non-zero rows
    specs = resolve_kernels([KernelSpec(family, m=m) for m in order] + [KernelSpec(family, m=3.0),
                            KernelSpec("linear")], [1.0], median_scales([X], [KernelSpec(
                                family, m=1.0)]))
    together = kernel_blocks(specs, X, X[:9])
    for p, spec in enumerate(specs):
        alone = kernel_blocks([spec], X, X[:9])[0]
        np.testing.assert_allclose(together[p], alone, rtol=5e-15, atol=0)
        if spec.family == "linear" or spec.m == 3.0:
            np.testing.assert_array_equal(together[p], alone)
    # The chain is what is used: the narrowest is not its own exponential.
    narrow = int(np.argmin([s.sigma if s.family == family else np.inf for s in specs]))
    assert not np.array_equal(together[narrow], kernel_blocks([specs[narrow]], X, X[:9])[0])
    # float32 output: the same kernels rounded once.
    np.testing.assert_array_equal(kernel_blocks(specs, X, X[:9], dtype=np.float32),
                                  together.astype(np.float32))


def test_columns_evaluate_a_prefix_of_each_block(X):
    """columns: only the leading columns asked for (more where a narrower Gaussian reads
    them) are evaluated, equal to the full evaluation; the rest are left as they were."""
    specs = resolve_kernels([KernelSpec("linear"), KernelSpec("gaussian", m=2.0),
                             KernelSpec("gaussian", m=1.0), KernelSpec("polynomial", a=1, b=2)],
                            [1.0], median_scales([X], [KernelSpec("gaussian", m=1.0)]))
    full = kernel_blocks(specs, X, X)
    for dtype in (np.float64, np.float32):
        out = np.full((4, 40, 40), np.nan, dtype=dtype)
        kernel_blocks(specs, X, X, columns=[3, 5, 30, 40], out=out)
        for p, cols in enumerate([3, 30, 30, 40]):  # the wide Gaussian serves the narrow one
            np.testing.assert_array_equal(out[p][:, :cols], full[p][:, :cols].astype(dtype))
            assert np.isnan(out[p][:, cols:]).all()
    for bad in ([1, 2, 3], [0, 1, 1, 1], [41, 1, 1, 1]):
        with pytest.raises(ValueError, match="columns must give 1..40 columns"):
            kernel_blocks(specs, X, X, columns=bad)


@pytest.mark.parametrize("offset", [0.0, 1e3])
def test_single_precision_is_float32_round_off_also_for_data_far_from_the_origin(offset):
    """precision="single": every family in float32, within a few tens of float32 round-offs
    of the float64 values (relative, where a Gaussian is at least 1e-3; absolute for the
    others); the Gaussians' distances come from centred rows, so an offset of the data costs
    nothing, where the plain float32 formula loses every digit of the narrowest one."""
    rng = np.random.default_rng(4)
    X = np.abs(rng.normal(size=(300, 12))) + offset  # non-negative: angular needs no sign
    families = [KernelSpec("gaussian", m=m) for m in (0.5, 1.0, 2.0)] + [
        KernelSpec("angular", m=m) for m in (0.5, 1.0, 2.0)]
    specs = resolve_kernels([KernelSpec("linear"), KernelSpec("polynomial", a=1, b=2)]
                            + families, [1.0], median_scales([X], families))
    L = X[::3]
    double = kernel_blocks(specs, X, L)
    single = kernel_blocks(specs, X, L, precision="single")
    assert single.dtype == np.float32
    eps = np.finfo(np.float32).eps
    for p, spec in enumerate(specs):
        error = np.abs(single[p] - double[p])
        if spec.family in ("gaussian", "angular"):
            big = double[p] >= 1e-3
            assert big.mean() > 0.05  # the bound is tested on many values
            assert (error[big] / double[p][big]).max() <= 64 * eps, spec.name
        assert error.max() <= 64 * eps * np.abs(double[p]).max(), spec.name
    # The plain float32 formula ||a||^2 + ||b||^2 - 2 a.b far from the origin: the bound
    # above is not vacuous.
    narrow = specs[2]
    a, b = X.astype(np.float32), L.astype(np.float32)
    plain = np.exp(-((a * a).sum(1)[:, None] + (b * b).sum(1)[None, :] - 2 * a @ b.T)
                   / np.float32(2 * narrow.sigma**2))
    big = double[2] >= 1e-3
    plain_error = (np.abs(plain - double[2])[big] / double[2][big]).max()
    assert plain_error > 64 * eps if offset else plain_error < 64 * eps


def test_single_precision_options(X):
    """A prefix of columns as in double precision; sparse rows in float64, rounded once;
    a float64 out or an unknown precision is refused."""
    specs = resolve_kernels([KernelSpec("linear"), KernelSpec("gaussian", m=2.0),
                             KernelSpec("gaussian", m=1.0), KernelSpec("polynomial", a=1, b=2)],
                            [1.0], median_scales([X], [KernelSpec("gaussian", m=1.0)]))
    full = kernel_blocks(specs, X, X, precision="single")
    out = np.full((4, 40, 40), np.nan, dtype=np.float32)
    kernel_blocks(specs, X, X, columns=[3, 5, 30, 40], out=out, precision="single")
    for p, cols in enumerate([3, 30, 30, 40]):
        np.testing.assert_allclose(out[p][:, :cols], full[p][:, :cols], rtol=1e-6, atol=1e-6)
        assert np.isnan(out[p][:, cols:]).all()
    S = sp.csr_matrix(np.where(X > -0.5, X, 0.0))
    np.testing.assert_array_equal(kernel_blocks(specs, S, S, precision="single"),
                                  kernel_blocks(specs, S, S).astype(np.float32))
    with pytest.raises(ValueError, match="precision='single' fills a float32 out"):
        kernel_blocks(specs, X, X, out=np.empty((4, 40, 40)), precision="single")
    with pytest.raises(ValueError, match="precision must be 'double' or 'single'"):
        kernel_blocks(specs, X, X, precision="half")


@pytest.mark.parametrize("precision, scale", [
    ("double", 1e-3), ("double", 1e12), ("double", 1e45), ("double", 1e100),
    # float32 data beyond about 1e19 overflow when squared, before any kernel
    ("single", 1e-3), ("single", 1e12)])
def test_normalised_polynomials_of_large_rows_stay_finite(precision, scale):
    """``(x.y + a)^b`` overflows long before the data do (rows of norm 3e38 at degree 4 in
    float64, 1e5 in float32); normalised, its values are at most 1, and they are: against
    scikit-learn's polynomial kernel normalised in float64 on the data rescaled to unit
    size (``a`` rescaled with them), where nothing overflows."""
    rng = np.random.default_rng(5)
    Z = rng.normal(size=(30, 6))
    X = Z * scale
    specs = [KernelSpec("polynomial", a=a, b=b) for a in (0.0, 1.0) for b in (2, 4)]
    K = kernel_blocks(specs, X, X[::2], precision=precision)
    assert np.isfinite(K).all()
    tol = 1e-4 if precision == "single" else 1e-10
    for p, spec in enumerate(specs):
        a = spec.a / scale**2  # (x.y + a) = scale^2 (z.w + a / scale^2)
        full = polynomial_kernel(Z, degree=spec.b, gamma=1.0, coef0=a)
        expected = full / np.sqrt(np.outer(np.diag(full), np.diag(full)))
        np.testing.assert_allclose(K[p], expected[:, ::2], rtol=tol, atol=tol,
                                   err_msg=spec.name)


def test_unnormalised_polynomial_overflow_is_a_clear_error():
    X = np.random.default_rng(5).normal(size=(10, 3)) * 1e45
    with pytest.raises(ValueError, match=r"polynomial\(a=1,b=4\): rows with squared norms up to "
                                         r".* make its values overflow float64; rescale"):
        kernel_blocks([KernelSpec("polynomial", a=1, b=4)], X, X, normalize=False)


def test_a_width_out_of_range_names_the_data_scale():
    """Data whose median distance is near 1e150 give widths a kernel cannot take: the error
    says that the data's scale is the cause."""
    X = np.random.default_rng(5).normal(size=(50, 3)) * 1e150
    family = [KernelSpec("gaussian", m=0.5)]
    with pytest.raises(ValueError, match=r"view 0: the median pairwise distance of the sampled "
                                         r"rows is .*e\+150, so gaussian\(m=0.5\) would be "
                                         r".* wide, outside \[1e-150, 1e150\]; rescale the data"):
        resolve_kernels(family, [1.0], median_scales([X], family))
