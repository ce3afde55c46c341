"""The label-free choice of the final step's rank (n_components="auto") and of the geometry on a
sample of rows, against independent references (scikit-learn's NMI, explicit fits)."""

import numpy as np
import pytest
from sklearn.datasets import load_digits, make_blobs
from sklearn.metrics import normalized_mutual_info_score

from mkrk_dask import MKKMRK
from mkrk_dask.assignment import unit_rows
from mkrk_dask.backends import ExactBackend
from mkrk_dask.consensus import (
    CANDIDATE_BYTES,
    agreement_scores,
    candidate_components,
    choose_partition,
    within_share,
)
from mkrk_dask.estimators import _dictionary
from mkrk_dask.estimators._dictionary import auto_dictionary
from mkrk_dask.model_io import load_model, save_model

DIGITS, _ = load_digits(return_X_y=True)
X = DIGITS[:400]


def test_agreement_is_the_mean_nmi_with_the_others():
    rng = np.random.default_rng(0)
    base = rng.integers(0, 4, 200)
    near = base.copy()
    near[:10] = (near[:10] + 1) % 4
    partitions = [base, near, rng.integers(0, 4, 200)]
    scores = agreement_scores(partitions)
    for i, p in enumerate(partitions):
        expected = np.mean([normalized_mutual_info_score(p, q)
                            for j, q in enumerate(partitions) if j != i])
        assert scores[i] == pytest.approx(expected, abs=1e-12)
    best, _ = choose_partition(partitions)
    assert best in (0, 1) and scores[2] < scores[best]
    # a tie (two partitions agree equally with each other) goes to the first: the smallest rank
    assert choose_partition([base, near])[0] == 0
    assert choose_partition([base])[0] == 0 and agreement_scores([base]) == pytest.approx([1])


def test_within_share_by_blocks_matches_the_plain_formula(monkeypatch):
    Z = np.random.default_rng(1).normal(size=(500, 4)).astype(np.float32)
    labels = np.random.default_rng(2).integers(0, 5, 500)
    Zd = Z.astype(np.float64)
    within = sum(((Zd[labels == c] - Zd[labels == c].mean(0)) ** 2).sum() for c in range(5))
    expected = within / ((Zd - Zd.mean(0)) ** 2).sum()
    monkeypatch.setattr("mkrk_dask.consensus._BLOCK_ROWS", 64)  # several blocks
    assert within_share(Z, labels) == pytest.approx(expected, rel=1e-9)


def test_within_share_of_unit_rows_by_blocks(monkeypatch):
    H = np.random.default_rng(3).normal(size=(300, 5))
    labels = np.random.default_rng(4).integers(0, 3, 300)
    monkeypatch.setattr("mkrk_dask.consensus._BLOCK_ROWS", 64)
    unit = H / np.linalg.norm(H, axis=1, keepdims=True)
    assert within_share(H, labels, step="spectral") == pytest.approx(
        within_share(unit, labels), rel=1e-12)
    assert within_share(H, labels, step="features") == within_share(H, labels)


def test_spectral_candidates_only_within_the_memory_bound(monkeypatch):
    # 400 rows: float64 rows of rank 10 take 32,000 bytes, of rank 20 64,000
    monkeypatch.setattr("mkrk_dask.consensus.CANDIDATE_BYTES", 40_000)
    model = MKKMRK(10, final_clustering="kmeans", random_state=0).fit(X)
    # 4k and 8k are not tried, nor the spectral ranks, 20 being too large: the features alone
    assert list(model.component_scores_) == ["features"]
    assert list(model.component_scores_["features"]) == [20]
    features = MKKMRK(10, kernels=model.kernels_, final_step="features",
                      random_state=0).fit(X)
    np.testing.assert_array_equal(model.labels_, features.labels_)
    np.testing.assert_array_equal(model.embedding_, features.embedding_)
    # two candidates agree with each other equally (the first would be kept): none is added
    model = MKKMRK(3, n_components=3, random_state=0).fit(X[:60])
    assert list(model.component_scores_) == ["features"]


def test_candidate_ranks_stay_below_n_and_within_the_memory_bound():
    assert candidate_components(10, 5000) == [20, 40, 80]
    assert candidate_components(10, 300) == [20, 40]  # 8k would be more than n / 4
    assert candidate_components(10, 30) == [20]
    assert candidate_components(4, 5) == [4]
    big = CANDIDATE_BYTES // (8 * 40) + 1  # 40 columns no longer fit, 20 still do
    assert candidate_components(10, big) == [20]


def _chosen(scores: dict) -> tuple[str, int]:
    """The (step, rank) of highest agreement, the first in the order tried on a tie."""
    tried = [(kind, rank, s["agreement"]) for kind, ranks in scores.items()
             for rank, s in ranks.items()]
    best = max(agreement for _, _, agreement in tried)
    return next((kind, rank) for kind, rank, agreement in tried if agreement >= best - 1e-12)


def test_auto_rank_is_the_fit_with_that_rank_given():
    # the step and rank chosen (the anchor graph's refinement of the partition aside)
    auto = MKKMRK(10, final_clustering="kmeans", random_state=0).fit(X)
    # both kinds on the one eigendecomposition: features at 2k, 4k, 8k; spectral at k too
    assert list(auto.component_scores_) == ["features", "spectral"]
    assert sorted(auto.component_scores_["features"]) == [20, 40, 80]
    assert sorted(auto.component_scores_["spectral"]) == [10, 20, 40, 80]
    assert (auto.final_step_, auto.n_components_) == _chosen(auto.component_scores_)
    assert auto.final_step_ == "features"  # on these digits
    fixed = MKKMRK(10, random_state=0, kernels=auto.kernels_, final_step="features",
                   n_components=auto.n_components_).fit(X)
    assert list(fixed.component_scores_) == ["features"]
    np.testing.assert_array_equal(auto.labels_, fixed.labels_)
    np.testing.assert_allclose(auto.embedding_, fixed.embedding_, atol=1e-10)
    assert auto.embedding_.shape == (400, auto.n_components_)
    np.testing.assert_array_equal(auto.predict(X), auto.labels_)
    assert f"top {auto.n_components_} eigenpairs" in auto.summary()
    assert "agrees most" in auto.summary()
    # the share of the features at 2k is what the geometries were compared by
    assert auto.dictionary_scores_[auto.dictionary_] == \
        auto.component_scores_["features"][20]["within_share"]


def test_auto_step_can_keep_the_spectral_embedding(tmp_path):
    # 40 small, overlapping clusters: the unit rows of the top k eigenvectors agree most
    blobs, _ = make_blobs(400, 20, centers=40, cluster_std=4.0, random_state=1)
    auto = MKKMRK(40, final_clustering="kmeans", random_state=0).fit(blobs)
    assert (auto.final_step_, auto.n_components_) == ("spectral", 40)
    assert (auto.final_step_, auto.n_components_) == _chosen(auto.component_scores_)
    assert sorted(auto.component_scores_["spectral"]) == [40, 80]
    # what the paper's step gives with the same kernels and seed; H is kept unscaled
    paper = MKKMRK(40, kernels=auto.kernels_, final_step="spectral", random_state=0).fit(blobs)
    np.testing.assert_array_equal(auto.labels_, paper.labels_)
    np.testing.assert_allclose(np.abs(auto.embedding_), np.abs(paper.embedding_), atol=1e-10)
    assert auto.feature_scale_ is None
    # H against the dense reference: the top 40 eigenvectors of sum_p w_p^2 K_p
    K = np.tensordot(auto.weights_**2, ExactBackend.from_views([blobs], auto.kernels_).kernels,
                     axes=1)
    vectors = np.linalg.eigh(K)[1][:, -40:]
    np.testing.assert_allclose(auto.embedding_ @ auto.embedding_.T, vectors @ vectors.T,
                               atol=1e-8)
    if auto.n_labels_polished_ == 0:
        assert auto.component_scores_["spectral"][40]["within_share"] == pytest.approx(
            within_share(unit_rows(auto.embedding_), auto.labels_))
    np.testing.assert_array_equal(auto.predict(blobs), auto.labels_)
    np.testing.assert_allclose(auto.transform(blobs[:50]), auto.embedding_[:50], atol=1e-8)
    assert "unit rows of the top 40 eigenvectors, the paper's" in auto.summary()
    # a saved model keeps the step it chose
    loaded = load_model(save_model(auto, tmp_path / "model"))
    assert loaded.final_step_ == "spectral"
    np.testing.assert_array_equal(loaded.predict(blobs), auto.labels_)


@pytest.mark.filterwarnings("ignore::mkrk_dask.exceptions.NystromApproximationWarning")
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_auto_step_keeps_the_spectral_embedding_on_nystrom(client, dtype, tmp_path):
    blobs, _ = make_blobs(400, 20, centers=40, cluster_std=4.0, random_state=1)
    # k-means partitions: the Nystrom map's centres decide (a final graph would)
    model = MKKMRK(40, solver="nystrom", n_landmarks=200, dtype=dtype, scheduler=client,
                   final_clustering="kmeans", random_state=0).fit(blobs)
    assert (model.final_step_, model.n_components_) == ("spectral", 40)
    assert model.embedding_.dtype == np.dtype(dtype) and model.feature_scale_ is None
    np.testing.assert_allclose(model.transform(blobs), model.embedding_,
                               atol=1e-5 if dtype == "float32" else 1e-10)
    np.testing.assert_array_equal(model.predict(blobs), model.labels_)
    # the Nystrom map predicts by itself from a saved model: unit rows, no feature scale
    loaded = load_model(save_model(model, tmp_path / "model"))
    assert loaded.nystrom_model_.feature_scale is None
    np.testing.assert_array_equal(loaded.nystrom_model_.predict([blobs]), model.labels_)


def test_spectral_step_at_a_given_rank():
    model = MKKMRK(10, final_step="spectral", n_components=20, random_state=0).fit(X)
    assert model.final_step_ == "spectral" and model.n_components_ == 20
    assert model.embedding_.shape == (400, 20) and model.feature_scale_ is None
    H = model.embedding_
    np.testing.assert_allclose(H.T @ H, np.eye(20), atol=1e-8)  # eigenvectors, unscaled
    np.testing.assert_array_equal(model.predict(X), model.labels_)
    assert "unit rows of the top 20 eigenvectors" in model.summary()
    assert "the paper's" not in model.summary()


def test_n_components_is_checked():
    for bad in (0, -3, "many", 2.5, True):
        with pytest.raises(ValueError, match="n_components"):
            MKKMRK(3, n_components=bad).fit(X[:50])
    with pytest.raises(ValueError, match="final_step must be one of"):
        MKKMRK(3, final_step="kmeans").fit(X[:50])
    # more eigenpairs than the samples allow: refused before any kernel is built (it was
    # clamped to n - 1 without a word)
    with pytest.raises(ValueError, match="n_components=50 is more than the 49 eigenpairs"):
        MKKMRK(3, n_components=50).fit(X[:50])


def test_spectral_step_never_sees_fewer_eigenvectors_than_clusters():
    # The unit rows of one eigenvector are +-1: k-means put all rows in one cluster of three.
    with pytest.raises(ValueError, match=r"final_step='spectral' needs n_components >= "
                                         r"n_clusters \(3\), got 2"):
        MKKMRK(3, final_step="spectral", n_components=2).fit(X[:60])
    # "auto" with fewer eigenpairs than clusters tries the features alone
    model = MKKMRK(3, n_components=1, random_state=0).fit(X[:60])
    assert list(model.component_scores_) == ["features"] and model.final_step_ == "features"
    assert np.unique(model.labels_).size == 3


@pytest.mark.filterwarnings("ignore::mkrk_dask.exceptions.NystromApproximationWarning")
def test_auto_rank_tries_only_the_ranks_the_nystrom_factors_hold(client):
    # 2 landmarks for each of 4 kernels: 8 components. The candidates 2k = 6, 4k = 12 and
    # 8k = 24 are cut to what the factors hold; the fit failed after the whole loop, with
    # "fewer than k=24" for a k of 3.
    kwargs = dict(kernels=auto_dictionary("euclidean", 1), solver="nystrom", n_landmarks=2,
                  backend_options={"local_threshold": 0}, scheduler=client, random_state=0)
    model = MKKMRK(3, **kwargs).fit(X)
    assert int(np.sum(model.nystrom_ranks_)) == 8
    assert list(model.component_scores_["features"]) == [6]
    assert sorted(model.component_scores_["spectral"]) == [3, 6]
    assert model.n_components_ in (3, 6)
    with pytest.raises(ValueError, match="n_components=9, but the kernels with nonzero weight "
                                         "have only 8 Nystrom components"):
        MKKMRK(3, n_components=9, **kwargs).fit(X)


def test_auto_rank_on_nystrom_predicts_its_own_labels(client):
    model = MKKMRK(10, kernels=auto_dictionary("euclidean", 1), solver="nystrom",
                   n_landmarks=100, scheduler=client, random_state=0).fit(X)
    assert model.n_components_ in model.component_scores_[model.final_step_]
    assert model.embedding_.shape == (400, model.n_components_)
    np.testing.assert_allclose(model.transform(X), model.embedding_, atol=1e-6)
    np.testing.assert_array_equal(model.predict(X), model.labels_)


def test_geometry_is_chosen_on_a_sample_then_fitted_on_all_rows(monkeypatch):
    monkeypatch.setattr(_dictionary, "GEOMETRY_SAMPLE_ROWS", 150)
    model = MKKMRK(10, random_state=0).fit(X)
    assert set(model.dictionary_scores_) == {"euclidean", "angular", "mixed"}
    assert model.dictionary_ == min(model.dictionary_scores_, key=model.dictionary_scores_.get)
    assert "sample of 150 of the 400 rows" in model.dictionary_reason_
    # the result is the chosen dictionary fitted on every row
    direct = MKKMRK(10, kernels=auto_dictionary(model.dictionary_, 1), random_state=0).fit(X)
    assert model.labels_.shape == (400,)
    np.testing.assert_array_equal(model.labels_, direct.labels_)
    assert model.n_components_ == direct.n_components_


# the narrowest kernel's Nystrom warning is not what is tested here
@pytest.mark.filterwarnings("ignore::mkrk_dask.exceptions.NystromApproximationWarning")
def test_geometry_sample_of_a_lazy_input_on_nystrom(monkeypatch, client):
    import dask.array as da

    monkeypatch.setattr(_dictionary, "GEOMETRY_SAMPLE_ROWS", 150)
    lazy = da.from_array(X, chunks=(100, 64))
    model = MKKMRK(10, solver="nystrom", n_landmarks=200, scheduler=client,
                   random_state=0).fit(lazy)
    assert "sample of 150 of the 400 rows" in model.dictionary_reason_
    assert model.solver_ == "nystrom" and model.labels_.shape == (400,)
    assert model.n_components_ in model.component_scores_[model.final_step_]
    np.testing.assert_array_equal(model.predict(lazy), model.labels_)


@pytest.mark.parametrize("sample_rows", [None, 150])
def test_spectral_step_with_the_default_dictionary(monkeypatch, sample_rows):
    if sample_rows is not None:
        monkeypatch.setattr(_dictionary, "GEOMETRY_SAMPLE_ROWS", sample_rows)
    model = MKKMRK(10, final_step="spectral", random_state=0).fit(X)
    assert model.dictionary_ == min(model.dictionary_scores_, key=model.dictionary_scores_.get)
    assert model.n_components_ == 10 and model.embedding_.shape == (400, 10)
    assert model.component_scores_ == {"spectral": {10: model.component_scores_["spectral"][10]}}
    scores = model.component_scores_["spectral"][10]
    assert scores["agreement"] == 1.0
    if model.n_labels_polished_ == 0:
        # the share of what the k-means clustered: the unit rows of H
        assert scores["within_share"] == pytest.approx(
            within_share(unit_rows(model.embedding_), model.labels_))
    assert "chosen:" not in model.summary()  # one candidate: nothing chosen


def test_default_refines_the_partition_on_the_anchor_graph_of_the_final_rows(tmp_path,
                                                                            monkeypatch):
    """The default's labels are AnchorGraphClustering's on the final rows of the k-means fit
    with the same step and rank (built here independently), kept because they agree with the
    k-means partition; below the agreement required, k-means is kept and summary() says so."""
    from sklearn.metrics import normalized_mutual_info_score

    from mkrk_dask import AnchorGraphClustering
    from mkrk_dask.assignment import final_rows

    auto = MKKMRK(10, random_state=0).fit(X)
    plain = MKKMRK(10, final_clustering="kmeans", random_state=0).fit(X)
    assert auto.final_clustering_ == "graph" and plain.final_clustering_ == "kmeans"
    assert (auto.final_step_, auto.n_components_) == (plain.final_step_, plain.n_components_)
    rows = final_rows(np.asarray(plain.embedding_, dtype=np.float64), plain.final_step_)
    graph = AnchorGraphClustering(10, n_neighbors=10, geometry="euclidean", random_state=0
                                  ).fit(rows)
    np.testing.assert_array_equal(auto.labels_, graph.labels_)
    assert auto.final_graph_agreement_ == pytest.approx(
        normalized_mutual_info_score(plain.labels_, graph.labels_))
    assert auto.final_graph_agreement_ >= 0.5
    assert "anchor graph of those rows" in auto.summary()
    np.testing.assert_array_equal(auto.predict(X), auto.labels_)
    loaded = load_model(save_model(auto, tmp_path / "model"))
    np.testing.assert_array_equal(loaded.predict(X), auto.labels_)
    # the paper's configuration and an explicit step keep k-means
    assert MKKMRK.paper(10, random_state=0).fit(X).final_clustering_ == "kmeans"
    monkeypatch.setattr("mkrk_dask.estimators._final.GRAPH_MIN_AGREEMENT", 1.01)
    guarded = MKKMRK(10, random_state=0).fit(X)
    assert guarded.final_clustering_ == "kmeans" and guarded.final_graph_ is None
    np.testing.assert_array_equal(guarded.labels_, plain.labels_)
    assert "partition: k-means" in guarded.summary()
