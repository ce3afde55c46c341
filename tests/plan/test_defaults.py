"""The label-free default path: the default kernels, median widths, the features final step,
the kernels' geometry, and the paper's configuration one call away."""

import dask.array as da
import numpy as np
import pytest
from scipy.spatial.distance import pdist
from sklearn.cluster import KMeans
from sklearn.datasets import load_digits, make_blobs
from sklearn.metrics import adjusted_rand_score

from mkrk_dask import MKKMRK
from mkrk_dask.backends.exact import ExactBackend
from mkrk_dask.kernel_widths import median_scales, sample_rows, unit_rows
from mkrk_dask.kernels import KernelSpec, as_kernel_specs
from mkrk_dask.metrics import normalized_mutual_info
from mkrk_dask.plan import auto_kernels

from test_plan import same_plan

DIGITS, DIGIT_LABELS = load_digits(return_X_y=True)
X = DIGITS[:300]


def test_widths_are_multiples_of_the_median_distance_of_a_sample():
    assert sample_rows(DIGITS, size=400).shape == (400, 64)
    specs = as_kernel_specs(["gaussian(m=0.5)", "angular(m=2)"])
    medians = median_scales([DIGITS], specs)
    # the sample has a fixed seed (widths depend on the data only): an independent median
    sample = sample_rows(DIGITS)
    assert medians[(0, "gaussian")] == pytest.approx(np.median(pdist(sample)), rel=1e-9)
    unit = sample / np.linalg.norm(sample, axis=1, keepdims=True)
    assert medians[(0, "angular")] == pytest.approx(np.median(pdist(unit)), rel=1e-9)
    backend = ExactBackend.from_views([DIGITS[:200]], specs)
    assert backend.kernel_specs[0].sigma == pytest.approx(0.5 * np.median(pdist(DIGITS[:200])))
    assert backend.kernel_specs[1].sigma == pytest.approx(2 * np.median(pdist(
        DIGITS[:200] / np.linalg.norm(DIGITS[:200], axis=1, keepdims=True))))



def test_sparse_rows_are_never_densified_for_the_widths_or_the_dictionary():
    # A sparse view may have millions of columns: the sample the widths and the geometry come
    # from stays sparse (a dense 2,000 x d sample was 1.5 GiB at d = 100,000), and gives the
    # dense sample's medians and geometry.
    import tracemalloc

    import scipy.sparse as sp

    rng = np.random.default_rng(0)
    n, d = 300, 200_000
    rows = np.repeat(np.arange(n), 20)
    wide = sp.csr_matrix((rng.random(n * 20) + 0.5, (rows, rng.integers(0, d, n * 20))),
                         shape=(n, d))
    assert sp.issparse(sample_rows(wide))
    specs = as_kernel_specs(["gaussian(m=1)", "angular(m=1)"])
    tracemalloc.start()
    try:
        medians = median_scales([wide], specs)
        kernels = MKKMRK(3).plan(wide).decision("kernels").value
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 50 * 2**20  # the dense sample alone: 480 MB
    small = sp.csr_matrix(DIGITS[:500])
    dense_medians = median_scales([DIGITS[:500]], specs)
    for key, value in median_scales([small], specs).items():
        assert value == pytest.approx(dense_medians[key], rel=1e-12)
    assert (MKKMRK(3).plan(small).decision("kernels")
            == MKKMRK(3).plan(DIGITS[:500]).decision("kernels"))
    # 20 of 200,000 columns a row: nearly every pair shares none, the cosine alone
    assert kernels == "cosine" and medians[(0, "angular")] > 0
    # An all-zero row's direction is its own (orthogonal to every other row): sparse as dense.
    zero = sp.vstack([small, sp.csr_matrix((1, 64))]).tocsr()
    assert median_scales([zero], specs)[(0, "angular")] == pytest.approx(
        median_scales([zero.toarray()], specs)[(0, "angular")], rel=1e-12)

def test_angular_kernel_against_a_dense_computation():
    data = np.abs(np.random.default_rng(1).normal(size=(40, 6)))
    backend = ExactBackend.from_views([data], as_kernel_specs(["angular(sigma=0.7)"]))
    unit = data / np.linalg.norm(data, axis=1, keepdims=True)
    sq = ((unit[:, None, :] - unit[None, :, :]) ** 2).sum(-1)
    np.testing.assert_allclose(backend.kernels[0], np.exp(-sq / (2 * 0.7**2)), atol=1e-12)
    with pytest.raises(ValueError, match="takes no parameter 'c'"):
        as_kernel_specs(["angular(c=0.1)"])


def test_features_final_step_against_dense_eigenpairs():
    specs = auto_kernels(["euclidean"])
    model = MKKMRK(4, kernels=specs, final_step="features", random_state=0).fit(X)
    np.testing.assert_allclose(model.weights_, 0.25, atol=1e-9)  # every kernel itself
    K = ExactBackend.from_views([X], specs).kernels.mean(axis=0) / 4  # sum_p w_p^2 K_p
    values, vectors = np.linalg.eigh(K)
    rank = model.n_components_
    assert rank == 8  # 2k
    top = vectors[:, -rank:] * np.sqrt(values[-rank:])
    assert model.embedding_.shape == (300, rank)
    # the same rank-r Gram matrix, whatever the signs and rotations of the eigenvectors
    np.testing.assert_allclose(model.embedding_ @ model.embedding_.T, top @ top.T, atol=1e-8)
    # k-means on the unit rows of the features (every row of K_w has length 1)
    unit = model.embedding_ / np.linalg.norm(model.embedding_, axis=1, keepdims=True)
    reference = KMeans(4, n_init=10, random_state=0).fit_predict(unit)
    assert adjusted_rand_score(reference, model.labels_) == pytest.approx(1.0)
    np.testing.assert_array_equal(model.predict(X), model.labels_)
    np.testing.assert_allclose(model.transform(X), model.embedding_, atol=1e-8)


def _families(X, **params):
    return [s.family for s in MKKMRK(3, **params).plan(X).kernels]


def test_measurements_grouped_by_their_proportions():
    # Three groups of the same sizes (a common factor from 1 to 3) that differ only in their
    # proportions, as species in body measurements. The Euclidean Gaussians see the sizes and
    # split along them; the angular Gaussian of the measurements' dictionary sees the groups.
    rng = np.random.default_rng(1)
    groups = np.repeat([0, 1, 2], 100)
    shapes = np.array([[1.0, 2.0, 3.0], [1.0, 3.0, 2.0], [2.0, 1.5, 2.5]])[groups]
    X = shapes * rng.uniform(1, 3, (300, 1)) * np.exp(0.05 * rng.standard_normal((300, 3)))
    assert MKKMRK(3).plan(X).decision("kernels").reason.startswith("non-negative measurements")
    found = [adjusted_rand_score(groups, MKKMRK(3, random_state=seed).fit(X).labels_)
             for seed in range(2)]
    sizes_only = [adjusted_rand_score(groups, MKKMRK(3, kernels=auto_kernels(["euclidean"]),
                                                     random_state=seed).fit(X).labels_)
                  for seed in range(2)]
    assert min(found) > 0.95 and max(sizes_only) < 0.5


def test_kernels_follow_the_data():
    # intensities (non-negative, many zeros): cosine and the Gaussians of the angle
    assert _families(DIGITS) == ["linear"] + ["angular"] * 3
    # non-negative measurements with no zeros: their size is information (Euclidean), and
    # so are their proportions (one Gaussian of the angle)
    sizes = 1.0 + DIGITS[:, :3] + 5 * np.random.default_rng(0).random((len(DIGITS), 3))
    plan = MKKMRK(3).plan(sizes)
    assert _families(sizes) == ["linear"] + ["gaussian"] * 3 + ["angular"]
    assert [s.m for s in plan.kernels] == [None, 0.5, 1.0, 2.0, 1.0]
    assert "measurements (0% zero entries" in plan.decision("kernels").reason
    # negative values: the plain cosine and Euclidean Gaussians (a lift off the origin failed
    # both folds of the protocol)
    centred = DIGITS - DIGITS.mean(axis=0)
    plan = MKKMRK(3).plan(centred)
    assert [s.name for s in plan.kernels] == ["cosine", "gaussian(m=0.5)", "gaussian(m=1)",
                                              "gaussian(m=2)"]
    assert "negative values" in plan.decision("kernels").reason
    unit = DIGITS[1:] / np.linalg.norm(DIGITS[1:], axis=1, keepdims=True)
    reason = MKKMRK(3).plan(unit).decision("kernels").reason
    assert _families(unit) == ["linear"] + ["gaussian"] * 3 and "unit-length" in reason
    # One positive column: every row points the same way, though scaling a row to unit
    # length leaves some at 1 - 1e-16 (the angular kernels would have a zero width); the
    # cosine kernel of one column says nothing (or, with zeros, only which rows are zero)
    groups = np.repeat([0, 1, 2], 40)
    column = (1.0 + 4.0 * groups + np.random.default_rng(0).random(120))[:, None]
    assert np.ptp(unit_rows(column, zero_rows="keep")) > 0
    counts = np.vstack([column, [[0.0]]])
    for data in (column, counts):
        plan = MKKMRK(3).plan(data)
        assert "one column" in plan.decision("kernels").reason
        assert [s.family for s in plan.kernels] == ["gaussian"] * 3
        assert plan.final_clustering == "kmeans"
    # the k-means partition of the final rows finds the three groups (a graph of a line is
    # a path, whose cuts can split such tight groups along their spread)
    model = MKKMRK(3, random_state=0).fit(column)
    assert [s.family for s in model.kernels_] == ["gaussian"] * 3
    assert adjusted_rand_score(groups, model.labels_) == 1.0
    with pytest.raises(ValueError, match="median pairwise distance of the sampled rows is 0.0"):
        MKKMRK(3, kernels=["angular(m=1)"]).fit(column)
    # several views: the kernels of each
    blobs, _ = make_blobs(200, centers=3, random_state=0)
    two = MKKMRK(3, random_state=0).fit([blobs, blobs[:, ::-1] * 2])
    assert len(two.kernels_) == 8 and {s.view for s in two.kernels_} == {0, 1}


def test_default_fit_carries_out_its_plan_and_says_why():
    plan = MKKMRK(10, random_state=0).plan(X)
    model = MKKMRK(10, random_state=0).fit(X)
    assert same_plan(model.plan_, plan)  # what plan() said is what fit did
    assert model.solver_ == "exact" == plan.solver and model.final_step_ == "features"
    assert model.n_components_ == 20 and [s.name for s in model.kernels_] == [
        s.name for s in plan.kernels]
    text = model.summary()
    for what in ("preprocessing", "kernels", "solver", "final step", "n_components",
                 "final partition", "expected cost", "lambda"):
        assert what in text, what


def test_default_path_never_reads_labels():
    plain = MKKMRK(10, random_state=0).fit(X)
    shuffled = MKKMRK(10, random_state=0).fit(X, np.random.default_rng(0).permutation(300))
    np.testing.assert_array_equal(plain.labels_, shuffled.labels_)


def test_default_matches_plain_kmeans_on_digits_and_predicts_held_out_rows():
    train, test = slice(0, 1200), slice(1200, None)
    model = MKKMRK(10, random_state=0).fit(DIGITS[train])
    kmeans = KMeans(10, n_init=10, random_state=0).fit(DIGITS[train])
    y = DIGIT_LABELS[train]
    # the bar: no worse than the one-kernel alternative by more than half a point
    assert (normalized_mutual_info(y, model.labels_)
            >= normalized_mutual_info(y, kmeans.labels_) - 0.005)
    # the held-out rows: predict agrees with the clusters of a refit on all rows
    refit = MKKMRK(10, random_state=0).fit(DIGITS)
    agreement = adjusted_rand_score(refit.labels_[test], model.predict(DIGITS[test]))
    assert agreement > 0.8, agreement


@pytest.mark.parametrize("solver, options", [
    ("blockwise", {"backend_options": {"chunk_size": 128}}),
    ("nystrom", {"backend_options": {"n_landmarks": 150}})])
def test_distributed_backends_predict_held_out_rows_like_a_refit(client, solver, options):
    # Fit on 300 digits, predict the next 150, refit on all 450: the held-out predictions
    # agree with the refit's clusters of those rows. Measured ARI (seeds 0-3): blockwise
    # 0.76-0.80 (the exact backend's own figures), Nystrom with 150 landmarks for 300
    # training rows 0.79-0.89; two random labelings score about 0.
    data, train = DIGITS[:450], slice(0, 300)
    params = dict(kernels=["linear", "gaussian(m=0.5)", "gaussian(m=1)", "gaussian(m=2)"],
                  solver=solver, scheduler=client, random_state=0, **options)
    model = MKKMRK(10, **params).fit(data[train])
    assert model.solver_ == solver
    np.testing.assert_array_equal(model.predict(data[train]), model.labels_)
    refit = MKKMRK(10, **params).fit(data)
    agreement = adjusted_rand_score(refit.labels_[300:], model.predict(data[300:]))
    assert agreement > 0.7, agreement


@pytest.mark.parametrize("solver, options", [
    ("blockwise", {"backend_options": {"chunk_size": 128}}),
    ("nystrom", {"backend_options": {"n_landmarks": 400}})])
def test_default_fits_data_with_all_zero_rows_on_every_backend(client, solver, options):
    # Counts and intensities often hold all-zero rows (an empty document, a blank image).
    # The default dictionary's cosine and angular kernels give them a direction of their
    # own, so the default fit runs on them with every backend and agrees with exact (the
    # Nystrom backend with every row a landmark, the zero rows too), and a new all-zero row
    # gets the label of the training ones.
    data = DIGITS[:400].copy()
    data[::40] = 0.0
    # The backends compared on the k-means partition of the final rows: the final graph's
    # anchors (a mini-batch k-means of 200 centres on these 400 rows) can follow rounding
    # differences to another partition, which the default's own fits below check.
    exact = MKKMRK(10, random_state=0, final_clustering="kmeans").fit(data)
    assert exact.solver_ == "exact" and "angular(m=1)" in exact.kernel_names_
    assert len(set(exact.labels_[::40])) == 1  # alike: one cluster
    model = MKKMRK(10, solver=solver, scheduler=client, random_state=0,
                   final_clustering="kmeans", **options).fit(data)
    assert model.kernel_names_ == exact.kernel_names_
    assert adjusted_rand_score(exact.labels_, model.labels_) > 0.99
    np.testing.assert_array_equal(model.predict(data), model.labels_)
    assert model.predict(np.zeros((1, data.shape[1])))[0] == model.labels_[0]
    default = MKKMRK(10, solver=solver, scheduler=client, random_state=0, **options).fit(data)
    assert len(set(default.labels_[::40])) == 1
    np.testing.assert_array_equal(default.predict(data), default.labels_)
    assert default.predict(np.zeros((1, data.shape[1])))[0] == default.labels_[0]


@pytest.mark.parametrize("solver, options", [
    ("blockwise", {"backend_options": {"chunk_size": 128}}),
    ("nystrom", {"backend_options": {"n_landmarks": 400}})])
def test_signed_data_agree_with_exact_on_every_backend(client, solver, options):
    # Centred digits have negative values: the plan's kernels, resolved from the sample of
    # rows, are the same on every backend (and a lazy copy of the rows), and so, on the
    # k-means partition of the final rows, are the exact backend's labels (the Nystrom
    # backend with every row a landmark).
    data = DIGITS[:400] - DIGITS[:400].mean(axis=0)
    exact = MKKMRK(10, random_state=0, final_clustering="kmeans").fit(data)
    assert exact.solver_ == "exact" and exact.kernels_[0].family == "linear"
    model = MKKMRK(10, solver=solver, scheduler=client, random_state=0,
                   final_clustering="kmeans", **options).fit(da.from_array(data, chunks=100))
    assert model.solver_ == solver and model.kernel_names_ == exact.kernel_names_
    assert adjusted_rand_score(exact.labels_, model.labels_) > 0.99
    np.testing.assert_array_equal(model.predict(data), model.labels_)


def test_paper_configuration_is_one_call_away():
    model = MKKMRK.paper(5, lam=2.0**-10)
    params = model.get_params()
    assert params["kernels"] == "paper" and params["dissimilarity"] == "fip"
    assert params["lam_scaling"] == "none" and params["final_step"] == "spectral"
    assert params["lam"] == 2.0**-10 and params["solver"] == "exact"
    fitted = MKKMRK.paper(5, random_state=0).fit(X)
    assert fitted.embedding_.shape == (300, 5) and len(fitted.weights_) == 12
    np.testing.assert_allclose(np.linalg.norm(fitted.cluster_centers_, axis=1) <= 1 + 1e-9, 1)


def test_a_store_given_is_reused(client, tmp_path):
    store = tmp_path / "k.zarr"
    params = dict(solver="blockwise", store=store, scheduler=client, random_state=0)
    first = MKKMRK(10, **params).fit(X[:120])
    assert (store / "zarr.json").exists() or any(store.iterdir())
    again = MKKMRK(10, **params).fit(X[:120])  # reopened, not refused
    np.testing.assert_array_equal(first.labels_, again.labels_)


def test_a_group_around_the_origin_is_one_kernel_list_away():
    # Three Gaussian blobs in the plane, one around the origin: the default's plain cosine
    # gives the rows of that blob every direction and cuts it into sectors on some seeds (the
    # known cost of dropping the lifted cosine, docs/defaults.rst). The cosine of the rows
    # lifted by half their median length, given as a kernel, keeps that blob whole.
    rng = np.random.default_rng(0)
    groups = np.repeat([0, 1, 2], 200)
    X = np.array([[0.0, 0.0], [4.0, 0.0], [0.0, 4.0]])[groups] + rng.standard_normal((600, 2))
    plan = MKKMRK(3).plan(X)
    assert plan.kernels[0].family == "linear" and auto_kernels(["signed"]) == list(plan.kernels)
    half_length = 0.5 * np.median(np.linalg.norm(X, axis=1))
    lifted = [KernelSpec("polynomial", a=half_length ** 2, b=1)] + list(plan.kernels[1:])
    scores = [adjusted_rand_score(groups, MKKMRK(3, kernels=lifted, random_state=s).fit(X)
                                  .labels_) for s in range(2)]
    best = adjusted_rand_score(groups, KMeans(3, n_init=10, random_state=0).fit_predict(X))
    assert min(scores) > best - 0.03, (scores, best)
