"""The final step as the plan says: the features or the spectral step at a rank, the rank
capped by what the Nystrom factors hold, and the default's partition refined on the anchor
graph of its final rows, against independent references (explicit fits, scikit-learn)."""

import numpy as np
import pytest
from sklearn.cluster import KMeans
from sklearn.datasets import load_digits
from sklearn.metrics import normalized_mutual_info_score

from mkrk_dask import MKKMRK
from mkrk_dask.estimators._base import STAGES
from mkrk_dask.model_io import load_model, save_model
from mkrk_dask.plan import GRAPH_REFERENCE_INITS, auto_kernels

DIGITS, _ = load_digits(return_X_y=True)
X = DIGITS[:400]


def _said(model: MKKMRK) -> str:
    """The words of ``model.summary()``: it wraps its lines at 100 characters."""
    return " ".join(model.summary().split())


def test_spectral_step_at_a_given_rank():
    model = MKKMRK(10, final_step="spectral", n_components=20, random_state=0).fit(X)
    assert model.final_step_ == "spectral" and model.n_components_ == 20
    assert model.embedding_.shape == (400, 20) and model.feature_scale_ is None
    H = model.embedding_
    np.testing.assert_allclose(H.T @ H, np.eye(20), atol=1e-8)  # eigenvectors, unscaled
    np.testing.assert_array_equal(model.predict(X), model.labels_)
    text = _said(model)
    assert "final step: spectral (given)" in text and "n_components: 20 (given)" in text
    # an explicit step keeps k-means
    assert model.final_clustering_ == "kmeans" and model.plan_.graph_anchors == 0


def test_spectral_step_at_k_is_the_loops_own_eigenvectors():
    model = MKKMRK(10, final_step="spectral", random_state=0).fit(X)
    again = MKKMRK(10, final_step="spectral", n_components=10, random_state=0).fit(X)
    assert model.n_components_ == 10
    np.testing.assert_array_equal(model.labels_, again.labels_)


def test_n_components_is_checked():
    for bad in (0, -3, "many", 2.5, True):
        with pytest.raises(ValueError, match="n_components"):
            MKKMRK(3, n_components=bad).fit(X[:50])
    with pytest.raises(ValueError, match="final_step must be one of"):
        MKKMRK(3, final_step="kmeans").fit(X[:50])
    # more eigenpairs than the samples allow: refused before any kernel is built
    with pytest.raises(ValueError, match="n_components=50 is more than the 49 eigenpairs"):
        MKKMRK(3, n_components=50).fit(X[:50])


def test_spectral_step_never_sees_fewer_eigenvectors_than_clusters():
    # The unit rows of one eigenvector are +-1: k-means put all rows in one cluster of three.
    with pytest.raises(ValueError, match=r"final_step='spectral' needs n_components >= "
                                         r"n_clusters \(3\), got 2"):
        MKKMRK(3, final_step="spectral", n_components=2).fit(X[:60])
    # the default step at one eigenpair: the features, three clusters all the same
    model = MKKMRK(3, n_components=1, random_state=0).fit(X[:60])
    assert model.final_step_ == "features" and np.unique(model.labels_).size == 3


@pytest.mark.filterwarnings("ignore::mkrk_dask.exceptions.NystromApproximationWarning")
def test_auto_rank_is_cut_to_what_the_nystrom_factors_hold(client):
    # 2 landmarks for each of 4 kernels: 8 components; the default rank 2k = 10 for k = 5
    # is cut to them, a rank given above them is refused.
    kwargs = dict(kernels=auto_kernels(["euclidean"]), solver="nystrom",
                  backend_options={"n_landmarks": 2, "local_threshold": 0}, scheduler=client,
                  random_state=0)
    model = MKKMRK(5, final_clustering="kmeans", **kwargs).fit(X)
    assert int(np.sum(model.nystrom_ranks_)) == 8 and model.n_components_ == 8
    with pytest.raises(ValueError, match="n_components=9, but the kernels with nonzero weight "
                                         "have only 8 Nystrom components"):
        MKKMRK(3, n_components=9, **kwargs).fit(X)


def test_auto_rank_on_nystrom_predicts_its_own_labels(client):
    model = MKKMRK(10, kernels=auto_kernels(["euclidean"]), solver="nystrom",
                   scheduler=client, random_state=0, backend_options={"n_landmarks": 100}).fit(X)
    assert model.n_components_ == 20 and model.embedding_.shape == (400, 20)
    np.testing.assert_allclose(model.transform(X), model.embedding_, atol=1e-6)
    np.testing.assert_array_equal(model.predict(X), model.labels_)


def test_default_refines_the_partition_on_the_anchor_graph_of_the_final_rows(tmp_path,
                                                                            monkeypatch):
    """The default's labels are AnchorGraphClustering's on the final rows of the k-means fit
    with the same step and rank (built here independently), kept because they agree with the
    k-means partition; below the agreement required, k-means is kept and summary() says so."""
    from mkrk_dask import AnchorGraphClustering
    from mkrk_dask.assignment import graph_rows

    auto = MKKMRK(10, random_state=0).fit(X)
    plain = MKKMRK(10, final_clustering="kmeans", random_state=0).fit(X)
    assert auto.final_clustering_ == "graph" and plain.final_clustering_ == "kmeans"
    assert (auto.final_step_, auto.n_components_) == (plain.final_step_, plain.n_components_)
    # the graph is built on the features as they are (its k-means fall-back: on their unit rows)
    rows = graph_rows(np.asarray(plain.embedding_, dtype=np.float64), plain.final_step_)
    np.testing.assert_array_equal(rows, plain.embedding_)
    graph = AnchorGraphClustering(10, n_anchors=auto.plan_.graph_anchors, n_neighbors=10,
                                  geometry="euclidean", anchor_max_iter=10, random_state=0
                                  ).fit(rows)
    np.testing.assert_array_equal(auto.labels_, graph.labels_)
    # checked against a k-means of GRAPH_REFERENCE_INITS restarts (on the unit rows), not
    # the fit's n_init: the check is coarse, and where the graph is kept its labels are the
    # answer
    unit = rows / np.linalg.norm(rows, axis=1, keepdims=True)
    reference = KMeans(10, n_init=GRAPH_REFERENCE_INITS, max_iter=1000,
                       random_state=0).fit_predict(unit)
    assert GRAPH_REFERENCE_INITS < auto.n_init
    assert auto.final_graph_agreement_ == pytest.approx(
        normalized_mutual_info_score(reference, graph.labels_))
    assert auto.final_graph_agreement_ >= 0.5
    assert "partition kept: the anchor graph's" in _said(auto)
    np.testing.assert_array_equal(auto.predict(X), auto.labels_)
    loaded = load_model(save_model(auto, tmp_path / "model"))
    np.testing.assert_array_equal(loaded.predict(X), auto.labels_)
    # the paper's configuration and an explicit step keep k-means
    assert MKKMRK.paper(10, random_state=0).fit(X).final_clustering_ == "kmeans"
    monkeypatch.setattr("mkrk_dask.estimators._final.GRAPH_MIN_AGREEMENT", 1.01)
    guarded = MKKMRK(10, random_state=0).fit(X)
    assert guarded.final_clustering_ == "kmeans" and guarded.final_graph_ is None
    # the graph not kept, the k-means is made again with n_init restarts: the labels of a
    # fit that plans no graph
    np.testing.assert_array_equal(guarded.labels_, plain.labels_)
    stages = {k: v for k, v in guarded.timings_.items() if k in STAGES and k != "fit"}
    assert sum(stages.values()) == pytest.approx(guarded.timings_["fit"], rel=1e-9)
    assert "partition kept: k-means" in _said(guarded)


@pytest.mark.parametrize("shape", ["moons", "rings"])
def test_a_graph_of_k_clear_parts_is_kept_where_k_means_cuts_across_them(shape, monkeypatch):
    """Two moons and two rings (scikit-learn's toy sets): k-means on the final rows cuts
    across the curves, so the graph's partition disagrees with it, and only the eigengap
    (clear_parts) keeps it: the right partition, as scikit-learn's SpectralClustering finds
    it. Where no cluster may be that large, the same fit keeps k-means."""
    from sklearn.cluster import SpectralClustering
    from sklearn.datasets import make_circles, make_moons

    data, truth = (make_moons(1000, noise=0.05, random_state=1) if shape == "moons" else
                   make_circles(1000, noise=0.03, factor=0.5, random_state=1))
    model = MKKMRK(2, random_state=0).fit(data)
    plain = MKKMRK(2, final_clustering="kmeans", random_state=0).fit(data)
    reference = SpectralClustering(2, affinity="nearest_neighbors",
                                   random_state=0).fit_predict(data)
    assert normalized_mutual_info_score(truth, reference) > 0.99  # the toy's answer
    assert normalized_mutual_info_score(truth, plain.labels_) < 0.5  # k-means cuts across
    assert model.final_clustering_ == "graph" and model.final_graph_clear_ is True
    assert model.final_graph_agreement_ < 0.5  # kept by the gap, not by the agreement
    assert normalized_mutual_info_score(reference, model.labels_) > 0.99
    eigenvalues = model.final_graph_.eigenvalues_
    assert 1 - eigenvalues[1] <= 0.1 * (1 - eigenvalues[2])
    assert "which clearly has 2 parts" in _said(model)
    np.testing.assert_array_equal(model.predict(data), model.labels_)
    monkeypatch.setattr("mkrk_dask.estimators._final.GRAPH_CLEAR_ROWS", data.shape[0])
    guarded = MKKMRK(2, random_state=0).fit(data)
    assert guarded.final_clustering_ == "kmeans" and guarded.final_graph_clear_ is False
    np.testing.assert_array_equal(guarded.labels_, plain.labels_)


def test_clear_parts_asks_for_a_gap_above_round_off_and_no_tiny_cluster():
    from mkrk_dask.estimators._final import clear_parts

    even = np.repeat([0, 1], 50)
    # 1 - eigenvalues: 0, 1e-6, then 1e-4 (a gap of 100x), 1.1e-5 and 9e-6 (about the 10x
    # the rule asks for)
    assert clear_parts(np.array([1.0, 1 - 1e-6, 1 - 1e-4]), even, 2)
    assert clear_parts(np.array([1.0, 1 - 1e-6, 1 - 1.1e-5]), even, 2)
    assert not clear_parts(np.array([1.0, 1 - 1e-6, 1 - 9e-6]), even, 2)
    # a third part with no edge to the rest (within the graph's tolerance, 1e-8): which
    # two are joined is arbitrary, unless the third is a few stray rows (parts_apart)
    assert not clear_parts(np.array([1.0, 1.0, 1.0 - 1e-15]), even, 2)
    assert not clear_parts(np.array([1.0, 1.0, 1.0 - 1e-10]), even, 2)
    assert clear_parts(np.array([1.0, 1.0, 1.0 - 1e-7]), even, 2)
    # the gap of a tiny clump apart from the rest: 19 rows against 81
    assert not clear_parts(np.array([1.0, 1 - 1e-9, 1 - 1e-3]), np.repeat([0, 1], [81, 19]), 2)
    assert clear_parts(np.array([1.0, 1 - 1e-9, 1 - 1e-3]), np.repeat([0, 1], [80, 20]), 2)
    # a label missing altogether is a cluster of no rows
    assert not clear_parts(np.array([1.0, 1 - 1e-9, 1 - 1e-3]), np.zeros(100, int), 2)


#: kernels whose final rows of two moons hold a few stray rows, far from every anchor but one
STRAY_KERNELS = ["cosine", "gaussian(m=0.5)", "gaussian(m=1)", "gaussian(m=2)"]


def test_k_parts_apart_beside_stray_rows_are_clear():
    """Two moons of 3,000 rows: a stray row or two, far from every anchor but one, make
    parts of their own, so that the graph has more disconnected parts than clusters. The two
    moons are still clearly apart: the graph's partition is kept (scikit-learn's answer)."""
    from sklearn.datasets import make_moons

    data, truth = make_moons(3000, noise=0.05, random_state=0)
    # the cosine beside the default's Gaussians: final rows with such stray rows
    model = MKKMRK(2, kernels=STRAY_KERNELS, random_state=0).fit(data)
    eigenvalues = model.final_graph_.eigenvalues_
    assert 1 - eigenvalues[2] < 1e-8  # a third part: the eigengap alone cannot tell
    assert model.final_clustering_ == "graph" and model.final_graph_clear_ is True
    assert model.final_graph_agreement_ < 0.5  # k-means cuts across the moons
    assert normalized_mutual_info_score(truth, model.labels_) > 0.98
    assert "2 parts with no edge between them, beside a few stray rows" in _said(model)
    # the default's own kernels find the moons too
    default = MKKMRK(2, random_state=0).fit(data)
    assert normalized_mutual_info_score(truth, default.labels_) > 0.98


def test_more_parts_than_clusters_keep_k_means_and_summary_says_why(monkeypatch):
    """Where the graph has more disconnected parts than clusters and they are not k large
    parts beside stray rows, k-means is kept at any agreement, and summary() gives that
    reason, not a low agreement."""
    from sklearn.datasets import make_moons

    data, _ = make_moons(3000, noise=0.05, random_state=0)
    # every agreement suffices, and no part is large enough to be apart: only the extra
    # parts can keep k-means
    monkeypatch.setattr("mkrk_dask.estimators._final.GRAPH_MIN_AGREEMENT", 0.0)
    monkeypatch.setattr("mkrk_dask.estimators._summary.GRAPH_MIN_AGREEMENT", 0.0)
    monkeypatch.setattr("mkrk_dask.estimators._final.GRAPH_CLEAR_ROWS", data.shape[0])
    model = MKKMRK(2, kernels=STRAY_KERNELS, random_state=0).fit(data)
    assert model.final_clustering_ == "kmeans" and model.final_graph_clear_ is False
    text = _said(model)
    assert "more parts with no edge between them than clusters" in text
    assert "below 0.0" not in text


def _heavy_tailed(seed, n=450, k=3, d=4):
    """k Gaussian centres plus Student t noise of 2 degrees of freedom (infinite variance):
    a few rows lie far out, alone."""
    rng = np.random.default_rng(seed)
    truth = np.repeat(np.arange(k), n // k)
    return rng.normal(0, 5, (k, d))[truth] + rng.standard_t(2, (n, d)), truth


def test_summary_points_at_a_graph_cluster_of_a_few_rows():
    """A graph partition kept on its agreement with a cluster of fewer than 20 rows: on heavy
    tails a few outlying rows set apart (two real clusters merged, the k-means partition is
    better); on a true cluster of 10 rows, the right answer. No rule tried tells the two
    apart (docs/defaults.rst), so the fit keeps the graph and summary() says what to do."""
    # (seed 4: of the seeds 0 to 7, 4 of 8 keep a graph with a cluster of 1 to 15 rows, better
    # by k-means on each; on the other 4 the graph is not kept, or is the better partition)
    data, truth = _heavy_tailed(4)
    model = MKKMRK(3, random_state=0).fit(data)
    plain = MKKMRK(3, final_clustering="kmeans", random_state=0).fit(data)
    assert model.final_clustering_ == "graph" and model.final_graph_clear_ is False
    smallest = int(np.bincount(model.labels_, minlength=3).min())
    assert smallest < 20
    assert (f"its smallest cluster holds {smallest} rows (fewer than 20): if they are "
            "outlying rows, not a group, final_clustering='kmeans'") in _said(model)
    assert (normalized_mutual_info_score(truth, plain.labels_)
            > normalized_mutual_info_score(truth, model.labels_) + 0.05)
    # a true small cluster: 10 rows, well apart, which the graph finds
    rng = np.random.default_rng(0)
    small_truth = np.repeat(np.arange(4), [600, 150, 40, 10])
    blobs = rng.normal(0, 4, (4, 5))[small_truth] + rng.normal(size=(800, 5))
    found = MKKMRK(4, random_state=0).fit(blobs)
    assert found.final_clustering_ == "graph"
    assert normalized_mutual_info_score(small_truth, found.labels_) > 0.99
    assert "its smallest cluster holds 10 rows" in _said(found)
    # a graph whose clusters are all large says nothing of the kind
    assert "its smallest cluster" not in _said(MKKMRK(10, random_state=0).fit(X))


def test_k_parts_apart_on_the_sample_a_graph_of_many_rows_is_built_on(monkeypatch):
    # Above GRAPH_SAMPLE_ROWS the parts are those of the sample's graph: its rows' weights
    # and its own labels; the other rows take the graph's labels.
    from sklearn.datasets import make_moons

    import mkrk_dask.estimators._final as final

    seen = []

    def spy(weights, labels, n_clusters):
        seen.append((weights.shape[0], labels.shape[0]))
        return parts_apart(weights, labels, n_clusters)

    parts_apart = final.parts_apart
    monkeypatch.setattr(final, "parts_apart", spy)
    monkeypatch.setattr("mkrk_dask.plan.final_choice.GRAPH_SAMPLE_ROWS", 3000)
    monkeypatch.setattr("mkrk_dask.plan.final_choice.GRAPH_ALL_ROWS", 3000)
    data, truth = make_moons(6000, noise=0.05, random_state=0)
    model = MKKMRK(2, kernels=STRAY_KERNELS, random_state=0).fit(data)
    assert model.plan_.graph_rows == 3000 and seen == [(3000, 3000)]
    assert 1 - model.final_graph_.eigenvalues_[2] < 1e-8
    assert model.final_clustering_ == "graph" and model.final_graph_clear_ is True
    assert normalized_mutual_info_score(truth, model.labels_) > 0.98
    np.testing.assert_array_equal(model.predict(data), model.labels_)


def test_parts_apart_asks_for_k_large_parts_each_its_own_cluster():
    import scipy.sparse as sp

    from mkrk_dask.estimators._final import parts_apart

    def weights(groups, anchors_of, weak=()):
        """Rows of group g on anchors anchors_of[g] (equal weights), plus weak links."""
        rows, cols, vals = [], [], []
        start = 0
        for g, size in enumerate(groups):
            for r in range(start, start + size):
                for a in anchors_of[g]:
                    rows.append(r), cols.append(a), vals.append(1.0)
            start += size
        for r, a, w in weak:
            rows.append(r), cols.append(a), vals.append(w)
        z = sp.csr_matrix((vals, (rows, cols)), shape=(start, 30))
        return sp.diags(1 / np.asarray(z.sum(axis=1)).ravel()) @ z

    two = {0: [0, 1], 1: [2, 3], 2: [4], 3: [5]}
    labels = np.repeat([0, 1, 0, 1], [30, 30, 1, 2])
    assert parts_apart(weights([30, 30, 1, 2], two), labels, 2)
    # a weight of 1e-9 of a row's largest is no edge; one of 1e-3 joins the parts
    assert parts_apart(weights([30, 30, 1, 2], two, weak=[(0, 2, 1e-9)]), labels, 2)
    assert not parts_apart(weights([30, 30, 1, 2], two, weak=[(0, 2, 1e-3)]), labels, 2)
    # a large part split between clusters, or two in one cluster
    assert not parts_apart(weights([30, 30, 1, 2], two), np.r_[labels[:59], 0, 0, 0, 0], 2)
    assert not parts_apart(weights([30, 30, 1, 2], two), np.repeat([0, 0, 1, 1], [30, 30, 1, 2]),
                           2)
    # three large parts for two clusters; or stray parts of 20 rows in all
    assert not parts_apart(weights([30, 30, 20], {0: [0], 1: [1], 2: [2]}),
                           np.repeat([0, 1, 1], [30, 30, 20]), 2)
    strays = [30, 30] + [1] * 20
    anchors = {g: [g] for g in range(22)}
    assert not parts_apart(weights(strays, anchors), np.r_[np.repeat([0, 1], 30), [0] * 20],
                           2)
    assert parts_apart(weights(strays[:-1], anchors), np.r_[np.repeat([0, 1], 30), [0] * 19],
                       2)


def test_the_graph_of_many_rows_is_built_on_a_sample_that_labels_the_rest(monkeypatch):
    # Above GRAPH_SAMPLE_ROWS the graph is built on a uniform sample (its memory stays the
    # sample's at any n) and labels every row, block by block; predict agrees with the labels.
    monkeypatch.setattr("mkrk_dask.plan.final_choice.GRAPH_SAMPLE_ROWS", 250)
    monkeypatch.setattr("mkrk_dask.plan.final_choice.GRAPH_ALL_ROWS", 250)
    monkeypatch.setattr("mkrk_dask.estimators._final._BLOCK_ROWS", 64)
    model = MKKMRK(10, random_state=0).fit(X)
    assert model.plan_.graph_rows == 250 and "sample of 250 rows" in _said(model)
    assert model.final_clustering_ == "graph" and model.final_graph_.embedding_.shape[0] == 250
    np.testing.assert_array_equal(model.predict(X), model.labels_)
    full = MKKMRK(10, random_state=0, final_clustering="kmeans").fit(X)
    assert normalized_mutual_info_score(full.labels_, model.labels_) > 0.5


def test_the_plan_samples_the_graph_above_its_rows():
    # Up to GRAPH_ALL_ROWS (70,000: the wide benchmark's largest set, Fashion-MNIST) the
    # graph is built on every row, as it always was; above, on a sample of
    # GRAPH_SAMPLE_ROWS (20,000) with GRAPH_SAMPLE_ANCHORS (1,000), which the plan says with
    # its reason (issue 77: the graph's cost stays that of the sample).
    from mkrk_dask.plan.final_choice import GRAPH_ALL_ROWS, GRAPH_SAMPLE_ROWS, final_graph_rows

    assert (GRAPH_ALL_ROWS, GRAPH_SAMPLE_ROWS) == (70_000, 20_000)
    assert final_graph_rows(5_000, 2000) == 5_000 and final_graph_rows(70_000, 2000) == 70_000
    assert final_graph_rows(70_001, 2000) == 20_000 and final_graph_rows(10**6, 0) == 0
    rng = np.random.default_rng(0)
    for n, rows in [(70_000, 70_000), (70_001, 20_000)]:
        plan = MKKMRK(10, random_state=0).plan(rng.normal(size=(n, 3)))
        said = plan.decision("final partition").reason
        assert plan.graph_rows == rows and plan.graph_anchors == (2000 if rows == n else 1000)
        assert ("1000 anchors" in said) == (rows < n), said
        assert ("sample of 20,000 rows" in said) == (rows < n), said
        assert ("n > 70,000" in said) == (rows < n), said


def _features_reference(kernels, weights, rank):
    """The features V sqrt(mu) of the top ``rank`` eigenpairs of ``sum_p w_p^2 K_p``, by a
    full dense eigendecomposition, each column's sign fixed by its largest entry."""
    values, vectors = np.linalg.eigh(np.tensordot(weights**2, kernels, axes=1))
    values, vectors = values[::-1][:rank], vectors[:, ::-1][:, :rank]
    vectors = vectors * np.sign(vectors[np.abs(vectors).argmax(axis=0), range(rank)])
    return vectors * np.sqrt(values)


@pytest.mark.parametrize("lam, weights_move", [(1.0, False), (2.0**-8, True)])
def test_the_embedding_is_the_first_h_step_where_the_weights_stay(lam, weights_move):
    # Precomputed kernels (scikit-learn's), so that K_w is known without the library. At the
    # default lambda every kernel represents itself: the weights never leave 1/m, and the
    # embedding is the first H-step's (made at rank 2k); at a small lambda they move, and
    # the embedding is a decomposition of its own at the final weights. Either way it is
    # the learned kernel's top 2k features, and the loop's H at rank k is unchanged.
    from sklearn.metrics.pairwise import cosine_similarity, rbf_kernel

    rows = X[:300] / 16.0
    kernels = np.stack([cosine_similarity(rows)] + [rbf_kernel(rows, gamma=g)
                                                     for g in (0.02, 0.05, 0.2)])
    model = MKKMRK(6, kernels="precomputed", lam=lam, random_state=0).fit(kernels)
    weights = model.weights_
    assert np.ptp(weights) > 1e-3 if weights_move else np.ptp(weights) == 0.0
    assert model.n_components_ == 12 and model.final_step_ == "features"
    np.testing.assert_allclose(model.embedding_, _features_reference(kernels, weights, 12),
                               atol=1e-7)
    # the loop saw the leading k: the same objective as a fit whose final step is at rank k
    at_k = MKKMRK(6, kernels="precomputed", lam=lam, final_step="spectral",
                  random_state=0).fit(kernels)
    np.testing.assert_allclose(model.objective_history_, at_k.objective_history_, rtol=1e-9)
    # the loop's own result: the first H-step at rank 12 kept for the embedding, or not
    estimator = MKKMRK(6, kernels="precomputed", lam=lam, random_state=0)
    backend, _ = estimator.build_backend(kernels)
    with backend:
        result = estimator.solve(backend, 12)
    assert result.top.eigenvalues.size == 6
    if weights_move:
        assert result.final_top is None and result.n_iter > 1
    else:
        assert result.n_iter == 1 and result.h_steps == 1
        np.testing.assert_array_equal(result.final_top.weights, result.weights)
        np.testing.assert_allclose(result.final_top.eigenvalues[:6], result.top.eigenvalues)
        assert result.final_top.eigenvalues.size == 12
    text = model.plan_.cost["eigendecompositions"]
    assert "none where the weights stay: the first is made at rank 12" in text
    assert "rank" not in at_k.plan_.cost["eigendecompositions"]


@pytest.mark.parametrize("clustering", ["auto", "kmeans"])
def test_the_final_stage_is_one_object_whose_result_the_fit_keeps(clustering):
    """FinalPartition, run on the loop's result, returns one frozen FinalResult: the fit's
    labels, centres and graph verdict; the FittedRecord's attributes are the fit's."""
    import dataclasses

    from mkrk_dask._threads import local_threads
    from mkrk_dask.estimators._final import FinalPartition, FinalResult

    model = MKKMRK(10, final_clustering=clustering, random_state=0).fit(X)
    twin = MKKMRK(10, final_clustering=clustering, random_state=0)
    backend, _ = twin.build_backend(X)
    with backend:
        with local_threads(backend.compute_threads()):
            loop = twin.solve(backend, twin.plan_.n_components)
        final = FinalPartition(twin.plan_, 10, twin.n_init, 0).run(backend, loop)
    assert isinstance(final, FinalResult)
    with pytest.raises(dataclasses.FrozenInstanceError):
        final.labels = None
    np.testing.assert_array_equal(final.labels, model.labels_)
    np.testing.assert_array_equal(final.centres, model.cluster_centers_)
    np.testing.assert_array_equal(final.embedding, model.embedding_)
    verdict = final.verdict
    assert verdict.clustering == model.final_clustering_
    assert verdict.agreement == model.final_graph_agreement_
    assert (verdict.graph is None) == (model.final_graph_ is None)
    assert verdict.reason.startswith("graph" if verdict.graph is not None else "k-means")
    assert [stage for stage, _ in final.marks][:3] == ["embedding", "kmeans", "graph"]
