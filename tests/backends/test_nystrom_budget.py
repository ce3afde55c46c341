"""The Nystrom factors' rank budget (max_components) and the build that does not store them
(store_factors=False), on real Zarr stores and a real LocalCluster."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import zarr

from mkrk_dask import MKKMRK
from mkrk_dask.backends.options import (
    AUTO_EXACT_DISSIMILARITY_MAX_N,
    AUTO_EXACT_DISSIMILARITY_MIN_N,
    AUTO_FINAL_ROWS,
    AUTO_GRAM_ROWS,
    AUTO_GRAM_SAMPLE_ROWS,
    AUTO_LANDMARK_OVERSAMPLING,
    AUTO_MAX_COMPONENTS,
    EXACT_DISSIMILARITY_BUDGET,
    NystromOptions,
)
from mkrk_dask.landmarks import allocate_ranks
from mkrk_dask.metrics import normalized_mutual_info
from mkrk_dask.passes import uniform_row_mask
from mkrk_dask.synthetic import make_multiview_blobs


def test_allocate_ranks_leaves_out_the_least_trace():
    """Against every split of the budget (brute force): the kept shares add up to the most
    any split with at least one component per kernel keeps."""
    rng = np.random.default_rng(0)
    spectra = [np.sort(rng.exponential(scale, size))[::-1]
               for scale, size in ((1.0, 6), (0.2, 5), (3.0, 4))]
    shares = [np.cumsum(v) / v.sum() for v in spectra]
    for budget in range(3, 16):
        ranks = allocate_ranks(spectra, budget)
        assert sum(ranks) == min(budget, 15) and all(r >= 1 for r in ranks)
        best = max(sum(s[r - 1] for s, r in zip(shares, split, strict=True))
                   for split in itertools.product(*(range(1, v.size + 1) for v in spectra))
                   if sum(split) <= budget)
        kept = sum(s[r - 1] for s, r in zip(shares, ranks, strict=True))
        assert kept == pytest.approx(best, abs=1e-12)
    assert allocate_ranks(spectra, None) == [6, 5, 4]
    with pytest.raises(ValueError, match="below the number of kernels"):
        allocate_ranks(spectra, 2)


def test_max_components_option():
    options = NystromOptions(exact_dissimilarity_max_n=1000)
    assert options.resolved_max_components(1000, 12) is None
    assert options.resolved_max_components(1001, 12) == AUTO_MAX_COMPONENTS
    assert NystromOptions(max_components=None).resolved_max_components(10**9, 12) is None
    assert NystromOptions(max_components=7).resolved_max_components(10, 12) == 7
    for bad in (0, 2.5, True, "all"):
        with pytest.raises(ValueError, match="max_components must be 'auto', None or an "
                                             "integer >= 1"):
            NystromOptions(max_components=bad)
    with pytest.raises(ValueError, match="store_factors must be 'auto', True or False"):
        NystromOptions(store_factors=1)
    with pytest.raises(ValueError, match="local part reads the stored factors"):
        NystromOptions(store_factors=False).factors_storage(100, 12)
    assert NystromOptions(store_factors=False, local_threshold=0).factors_storage(100, 12) is False
    # "auto": stored for the local part; above it, left to their size (None)
    one = NystromOptions().exact_dissimilarity_limit(1)
    assert NystromOptions().factors_storage(one, 1) is True
    assert NystromOptions().factors_storage(one + 1, 1) is None
    assert NystromOptions().factors_storage(5_001, 16) is None
    assert NystromOptions().factors_storage(5_000, 64) is True  # the floor


def test_pass_cost_model():
    """Products per pair of rows: m (m + 1) / 2 for C, 100 per kernel entry evaluated and,
    with the local part, one per landmark of every kernel (written out here by hand)."""
    assert NystromOptions().pass_products_per_pair(4) == 10 + 400 + 4 * 500
    assert NystromOptions(local_threshold=0).pass_products_per_pair(4) == 10 + 400
    assert NystromOptions(n_landmarks=(100, 200)).pass_products_per_pair(2) == 3 + 200 + 300
    assert NystromOptions(n_landmarks=50).pass_products_per_pair(12) == 78 + 1200 + 600


def test_exact_dissimilarity_limit():
    """"auto": n = 20,000, or fewer rows where the exact C's pass over all pairs of rows
    (n^2 pairs at pass_products_per_pair each) would exceed the budget, but never fewer than
    the floor; a number is taken as given."""
    auto = NystromOptions()
    assert auto.exact_dissimilarity_max_n == "auto"
    # without the local part one kernel costs little: the cap
    plain = NystromOptions(local_threshold=0)
    assert plain.exact_dissimilarity_limit(1) == AUTO_EXACT_DISSIMILARITY_MAX_N
    # the residuals of 500 landmarks per kernel dominate: 4 kernels stop well below the cap
    assert auto.exact_dissimilarity_limit(4) < plain.exact_dissimilarity_limit(4) < 20_000
    for options, m in itertools.product((auto, plain), (1, 2, 4, 7, 12, 16, 64, 72)):
        limit = options.exact_dissimilarity_limit(m)
        pairs = options.pass_products_per_pair(m)
        assert AUTO_EXACT_DISSIMILARITY_MIN_N <= limit <= AUTO_EXACT_DISSIMILARITY_MAX_N
        if limit > AUTO_EXACT_DISSIMILARITY_MIN_N:
            assert limit**2 * pairs <= EXACT_DISSIMILARITY_BUDGET
        if AUTO_EXACT_DISSIMILARITY_MIN_N < limit < AUTO_EXACT_DISSIMILARITY_MAX_N:
            assert (limit + 1) ** 2 * pairs > EXACT_DISSIMILARITY_BUDGET
        if limit == AUTO_EXACT_DISSIMILARITY_MIN_N:
            assert (limit + 1) ** 2 * pairs > EXACT_DISSIMILARITY_BUDGET
        assert options.exact_dissimilarity(limit, m)
        assert not options.exact_dissimilarity(limit + 1, m)
        # the other "auto" settings switch at the same n
        assert options.resolved_max_components(limit, m) is None
        assert options.resolved_max_components(limit + 1, m) == AUTO_MAX_COMPONENTS
        assert (options.resolved_landmark_oversampling(limit + 1, m)
                == AUTO_LANDMARK_OVERSAMPLING)
    # the paper's data sets (12 kernels, n <= 1,440) and UCI mfeat (2,000 rows, 72 kernels)
    # keep the exact C; 16 kernels at 10^4 not
    assert auto.exact_dissimilarity(1440, 12) and auto.exact_dissimilarity(2000, 72)
    assert not auto.exact_dissimilarity(10_000, 16)
    fixed = NystromOptions(exact_dissimilarity_max_n=10_000)
    assert fixed.exact_dissimilarity_limit(64) == 10_000 and fixed.exact_dissimilarity(10_000, 64)
    for bad in (-1, 2.5, "all", True):
        with pytest.raises(ValueError,
                           match="exact_dissimilarity_max_n must be 'auto' or an integer"):
            NystromOptions(exact_dissimilarity_max_n=bad)


@pytest.fixture(scope="module")
def blobs():
    views, y, _ = make_multiview_blobs(1500, 4, n_informative=1, n_noise=1, n_redundant=0,
                                       n_features=6, random_state=1)
    return views, y


def test_many_kernels_skip_the_exact_pass_by_default(client):
    """With 64 kernels the default limit is the floor, 5,000 rows: 5,200 rows get C from the
    factors, no local part, R capped and float32 factors, as far larger n do; 1,000 rows still
    get the exact C and the local part (checked against the option itself, not a copy of its
    rule)."""
    views, y, _ = make_multiview_blobs(5200, 4, n_informative=1, n_noise=1, n_redundant=0,
                                       n_features=6, random_state=1)
    kernels = [f"gaussian(c={c:.4f})" for c in np.geomspace(0.5, 5.0, 64)]
    limit = NystromOptions().exact_dissimilarity_limit(64)
    assert 1000 <= limit < 5200
    params = dict(kernels=kernels, backend_options={"n_landmarks": 20}, scheduler=client,
                  random_state=0, solver="nystrom", lam=1.0, max_iter=3)
    above = MKKMRK(4, **params).fit(views[0])
    assert above.nystrom_model_.info["dissimilarity_source"] == "nystrom"
    assert above.nystrom_model_.info["local_part"] is None and above.dtype_ == "float32"
    below = MKKMRK(4, **params).fit(views[0][:1000])
    assert below.nystrom_model_.info["dissimilarity_source"] == "exact"
    assert below.dtype_ == "float64"
    assert normalized_mutual_info(y, above.labels_) > 0.9


def _params(client, **backend):
    return dict(kernels=["gaussian(c=0.5)", "gaussian(c=2)", "polynomial(a=1,b=2)"],
                scheduler=client, random_state=0, solver="nystrom",
                backend_options={"n_landmarks": 80, "exact_dissimilarity_max_n": 0, **backend})


def test_the_budget_limits_the_factors_rank(client, blobs):
    """max_components caps R and takes the tails of the kernels; "auto" applies above
    exact_dissimilarity_max_n only (here 0: always)."""
    views, y = blobs
    full = MKKMRK(4, **_params(client, max_components=None)).fit(views)
    capped = MKKMRK(4, **_params(client, max_components=60)).fit(views)
    assert sum(full.nystrom_ranks_) > 60 and sum(capped.nystrom_ranks_) == 60
    assert all(1 <= c <= f for c, f in zip(capped.nystrom_ranks_, full.nystrom_ranks_,
                                          strict=True))
    # (float32 factors: a kernel kept whole misses only round-off, a few 1e-8 either way)
    assert np.all(capped.nystrom_residual_ >= full.nystrom_residual_ - 1e-6)
    assert capped.nystrom_residual_[:2].sum() > full.nystrom_residual_[:2].sum() + 1e-4
    assert normalized_mutual_info(y, capped.labels_) > 0.9
    assert "Nystrom components: R = 60 (max_components = 60): " in capped.summary()
    # Narrow data: the final pass computes the factors again instead of reading them back.
    assert "Nystrom factors: not stored: computing them again" in capped.summary(detail=True)
    assert "MFLOP" not in capped.summary()  # a diagnostic: detail only


def test_unstored_factors_give_the_same_fit(client, blobs, tmp_path):
    """store_factors=False: no n x R array in the store, the final pass computes the factors
    again from the (Zarr) data (the same labels); a complete store without factors is
    reused."""
    views, y = blobs
    paths = []
    for v, X in enumerate(views):
        paths.append(zarr.open_array(str(tmp_path / f"v{v}.zarr"), mode="w", shape=X.shape,
                                     chunks=(400, X.shape[1]), dtype="f8"))
        paths[-1][...] = X
    stored = MKKMRK(4, store=tmp_path / "a.zarr", **_params(client, store_factors=True)
                    ).fit(paths)
    streamed = MKKMRK(4, store=tmp_path / "b.zarr", **_params(client, store_factors=False)
                      ).fit(paths)
    assert "factors" in zarr.open_group(str(tmp_path / "a.zarr"), mode="r")
    assert "factors" not in zarr.open_group(str(tmp_path / "b.zarr"), mode="r")
    # the final pass from the data skips F: equal up to F's float32 rounding
    assert streamed.dtype_ == "float32"
    np.testing.assert_allclose(streamed.embedding_, stored.embedding_, atol=1e-6)
    np.testing.assert_array_equal(streamed.labels_, stored.labels_)
    again = MKKMRK(4, store=tmp_path / "b.zarr", **_params(client, store_factors=False)
                   ).fit(paths)
    assert again.nystrom_model_.info["reused_store"]
    np.testing.assert_array_equal(again.embedding_, streamed.embedding_)
    np.testing.assert_allclose(streamed.transform(views), streamed.embedding_, atol=1e-6)
    assert normalized_mutual_info(y, streamed.labels_) > 0.9


def test_auto_stores_the_factors_where_they_fit_in_memory(client, blobs, tmp_path,
                                                           monkeypatch):
    """store_factors="auto" above the local part: computed again by the final pass where
    that is cheaper than writing and reading them (narrow data); otherwise stored in a local
    store while they fit in half the available memory, computed again if not (same labels)."""
    import collections

    import psutil

    from mkrk_dask.backends.nystrom import build

    views, _ = blobs
    narrow = MKKMRK(4, store=tmp_path / "n.zarr", **_params(client)).fit(views)
    assert narrow.nystrom_model_.info["factors_storage"].startswith(
        "not stored: computing them again in the final pass")
    assert "factors" not in zarr.open_group(str(tmp_path / "n.zarr"), mode="r")
    # As wide data would: computing them again costs more than any write.
    monkeypatch.setattr(build, "STORE_FLOPS_PER_BYTE", 0)
    fitted = MKKMRK(4, store=tmp_path / "a.zarr", **_params(client)).fit(views)
    np.testing.assert_array_equal(narrow.labels_, fitted.labels_)
    assert fitted.nystrom_model_.info["factors_storage"].startswith("stored")
    assert "factors" in zarr.open_group(str(tmp_path / "a.zarr"), mode="r")
    memory = collections.namedtuple("memory", "available total")
    monkeypatch.setattr(psutil, "virtual_memory", lambda: memory(1000, 1000))
    tight = MKKMRK(4, store=tmp_path / "b.zarr", **_params(client)).fit(views)
    assert tight.nystrom_model_.info["factors_storage"].startswith("not stored")
    assert "factors" not in zarr.open_group(str(tmp_path / "b.zarr"), mode="r")
    np.testing.assert_array_equal(tight.labels_, fitted.labels_)


def test_auto_stores_the_factors_of_wide_data(client, tmp_path):
    """Computing the factors of wide rows again (their products with the landmarks) costs
    more than writing and reading them: store_factors="auto" stores them, narrow rows not."""
    views, y, _ = make_multiview_blobs(300, 3, n_informative=1, n_noise=0, n_redundant=0,
                                       n_features=4, random_state=2)
    # The 4 features seen through 6,000 (a random isometry): the same kernels, wide rows.
    basis = np.linalg.qr(np.random.default_rng(0).normal(size=(6000, 4)))[0]
    X = views[0] @ basis.T
    params = dict(kernels=["gaussian(m=1)"], scheduler=client, random_state=0,
                  solver="nystrom",
                  backend_options={"n_landmarks": 60, "exact_dissimilarity_max_n": 0})
    wide = MKKMRK(3, store=tmp_path / "w.zarr", **params).fit(X)
    narrow = MKKMRK(3, store=tmp_path / "n.zarr", **params).fit(views[0])
    # 2 x 60 x 6,000 flops per row of landmark products, above 200 per byte of an (at most)
    # 60-entry factor row (96,000); 2 x 60 x 4 below it.
    assert wide.nystrom_model_.info["factors_storage"].startswith("stored:")
    assert "factors" in zarr.open_group(str(tmp_path / "w.zarr"), mode="r")
    assert narrow.nystrom_model_.info["factors_storage"].startswith("not stored: computing")
    assert normalized_mutual_info(narrow.labels_, wide.labels_) > 0.95
    assert normalized_mutual_info(y, wide.labels_) > 0.9


def test_landmark_oversampling_option():
    options = NystromOptions(exact_dissimilarity_max_n=1000)
    assert options.resolved_landmark_oversampling(1000, 12) is None
    assert options.resolved_landmark_oversampling(1001, 12) == AUTO_LANDMARK_OVERSAMPLING
    assert NystromOptions(
        landmark_oversampling=None).resolved_landmark_oversampling(10**9, 12) is None
    assert NystromOptions(landmark_oversampling=3).resolved_landmark_oversampling(10, 12) == 3.0
    for bad in (0.5, True, "all", -2):
        with pytest.raises(ValueError, match="landmark_oversampling must be 'auto', None or a "
                                             "number >= 1"):
            NystromOptions(landmark_oversampling=bad)


def test_a_smooth_kernel_uses_a_prefix_of_the_landmarks(blobs):
    """With oversampling s, a kernel that keeps r < n_landmarks / s components uses the first
    ceil(s r) landmarks, and its factor is the Nystrom approximation from those alone (against
    the textbook formula K(X, L) W^+ K(L, X) truncated to its top r eigenvectors); the rough
    kernel keeps all of them; the ranks stay (within the floor's reach)."""
    from mkrk_dask.backends.nystrom.build import _build_model
    from mkrk_dask.kernel_widths import median_scales
    from mkrk_dask.kernels import KernelSpec, kernel_blocks, resolve_kernels

    views, _ = blobs
    specs = [KernelSpec("gaussian", m=m, view=v) for v in (0, 1) for m in (16.0, 0.25)]
    specs = resolve_kernels(specs, [0.0, 0.0], median_scales(views, specs))
    args = (views, specs, True, [150] * 4, "kmeans++", 0, 1e-10, 0.0, np.dtype(np.float64))
    whole, _ = _build_model(*args)
    prefixed, _ = _build_model(*args, None, 2.0)
    # at most the rank it had: the smaller block may hold fewer eigenvalues above the floor
    assert np.all(prefixed.ranks <= whole.ranks) and np.all(prefixed.ranks >= whole.ranks - 2)
    counts = prefixed.kernel_landmarks
    for p, rank in enumerate(whole.ranks):
        assert counts[p] == min(150, int(np.ceil(2.0 * rank)))
    assert counts[0] < 150 and counts[1] == 150  # the wide Gaussian is smooth, the narrow not
    F = prefixed.factors(views)
    offsets = prefixed.offsets
    for p, spec in enumerate(specs):
        X, L = views[spec.view], prefixed.landmarks[spec.view][:counts[p]]
        C, W = kernel_blocks([spec], X, L)[0], kernel_blocks([spec], L, L)[0]
        values, vectors = np.linalg.eigh(W)
        top = np.argsort(values)[::-1][:int(prefixed.ranks[p])]
        ref = C @ (vectors[:, top] / np.sqrt(values[top]))
        Fp = F[:, offsets[p]:offsets[p + 1]]
        np.testing.assert_allclose(Fp @ Fp.T, ref @ ref.T, atol=1e-8)
    # the prefix evaluates fewer kernel entries, and the whole model is what None gives
    np.testing.assert_array_equal(whole.factors(views), _build_model(*args, None, None)[0]
                                  .factors(views))


def test_auto_oversampling_above_the_local_part_keeps_the_clustering(client, blobs):
    """landmark_oversampling="auto" prefixes the smooth kernels' landmarks only above
    exact_dissimilarity_max_n (here 0: always); the weights and labels stay those of all
    landmarks, and summary() says which kernels use a prefix."""
    views, y = blobs
    auto = MKKMRK(4, **_params(client)).fit(views)
    every = MKKMRK(4, **_params(client, landmark_oversampling=None)).fit(views)
    counts = auto.nystrom_model_.kernel_landmarks
    assert min(counts) < 80 and every.nystrom_model_.kernel_landmarks == [80, 80, 80]
    assert np.abs(auto.weights_ - every.weights_).max() < 0.02
    assert normalized_mutual_info(auto.labels_, every.labels_) > 0.95
    assert "landmarks)" in auto.summary() and "landmarks)" not in every.summary()
    below = MKKMRK(4, **_params(client, exact_dissimilarity_max_n=10**6)).fit(views)
    assert below.nystrom_model_.kernel_landmarks == [80, 80, 80]


@pytest.mark.parametrize("name, sample", [("gram_rows", AUTO_GRAM_SAMPLE_ROWS),
                                          ("final_rows", AUTO_FINAL_ROWS)])
def test_row_sample_options(name, sample):
    """gram_rows and final_rows: "auto" is every row up to AUTO_GRAM_ROWS, a sample of
    ``sample`` rows above; a number at or above n is every row; bad values are refused in
    one line."""
    def resolved(options, n):
        return getattr(options, f"resolved_{name}")(n)

    auto = NystromOptions()
    assert resolved(auto, AUTO_GRAM_ROWS) is None
    assert resolved(auto, AUTO_GRAM_ROWS + 1) == sample
    assert resolved(NystromOptions(**{name: None}), 10**9) is None
    assert resolved(NystromOptions(**{name: 500}), 500) is None
    assert resolved(NystromOptions(**{name: 500}), 501) == 500
    for bad in (0, 2.5, True, "all"):
        with pytest.raises(ValueError, match=f"{name} must be 'auto', None or an integer"):
            NystromOptions(**{name: bad})


def test_uniform_row_mask_is_uniform_and_repeatable():
    first = uniform_row_mask(10_000, 3_000, 7)
    assert first.dtype == bool and first.sum() == 3_000
    assert np.array_equal(first, uniform_row_mask(10_000, 3_000, 7))
    assert not np.array_equal(first, uniform_row_mask(10_000, 3_000, 8))
    # every tenth of the rows gets about its share (binomial sd about 14 rows)
    assert np.all(np.abs(first.reshape(10, -1).sum(axis=1) - 300) < 100)
    assert uniform_row_mask(10_000, None, 7) is None and uniform_row_mask(10_000, 10_000, 7) is None


@pytest.mark.parametrize("store", [False, True])
def test_a_gram_of_sampled_rows_estimates_that_of_every_row(client, store):
    """The same fit with the Gram matrix of every row and of a uniform third of them: the
    plan says which, the exact traces are those of every row, the objective agrees to 1%
    and the partition to NMI 0.98; the factors stored or not, the sample is the same."""
    views, y, _ = make_multiview_blobs(6000, 4, n_informative=1, n_noise=1, n_redundant=0,
                                       n_features=6, random_state=3)
    fits = {}
    for rows in (None, 2000):
        fits[rows] = MKKMRK(4, solver="nystrom", scheduler=client, random_state=0,
                            backend_options={"n_landmarks": 60, "gram_rows": rows,
                                             "store_factors": store,
                                             "exact_dissimilarity_max_n": 0}).fit(views)
    every, sampled = fits[None], fits[2000]
    assert every.plan_.decision("gram rows").value == "every row"
    assert sampled.plan_.decision("gram rows").value == "a uniform sample of 2,000"
    assert every.nystrom_model_.info["gram_pass"]["gram_rows"] == 6000
    assert sampled.nystrom_model_.info["gram_pass"]["gram_rows"] == 2000
    np.testing.assert_allclose(sampled.traces_, every.traces_, rtol=1e-12)
    assert sampled.objective_history_[-1] == pytest.approx(every.objective_history_[-1],
                                                           rel=0.01)
    assert normalized_mutual_info(every.labels_, sampled.labels_) > 0.98
    assert normalized_mutual_info(y, sampled.labels_) > 0.9
