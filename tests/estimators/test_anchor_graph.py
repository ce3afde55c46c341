"""AnchorGraphClustering against a plain dense construction of the same graph, on dask and
Zarr input under a real scheduler, out of sample, and on bad input."""

from __future__ import annotations

import warnings

import dask.array as da
import numpy as np
import pytest
import scipy.sparse as sp
import zarr
from sklearn.datasets import make_blobs, make_circles
from sklearn.metrics import normalized_mutual_info_score
from sklearn.utils.estimator_checks import check_estimator

from mkrk_dask import AnchorGraphClustering, DisconnectedGraphWarning


def _blobs(n=600, seed=0):
    X, y = make_blobs(n, n_features=5, centers=4, cluster_std=1.5, random_state=seed)
    return X, y


def _dense_reference(views, model):
    """The averaged graph from the fitted anchors by brute force: every distance, a sort, the
    n x n kernel ``Z diag(Z^T 1)^-1 Z^T`` and its full eigendecomposition."""
    kernel = 0.0
    for view, graph in zip(views, model.view_graphs_, strict=True):
        rows = np.asarray(view, dtype=np.float64)
        if graph.angular:
            rows = rows / np.linalg.norm(rows, axis=1, keepdims=True)
        dist = ((rows[:, None, :] - graph.anchors[None, :, :]) ** 2).sum(-1)
        nearest = np.argsort(dist, axis=1)[:, :graph.n_neighbors]
        near = np.take_along_axis(dist, nearest, 1)
        width = np.median(near)
        Z = np.zeros_like(dist)
        np.put_along_axis(Z, nearest, np.exp(-near / width), 1)
        Z /= Z.sum(1, keepdims=True)
        degrees = Z.sum(0)
        used = degrees > 0
        kernel = kernel + Z[:, used] @ np.diag(1 / degrees[used]) @ Z[:, used].T
    values, vectors = np.linalg.eigh(kernel / len(views))
    return values[::-1], vectors[:, ::-1]


@pytest.mark.parametrize("geometry", ["euclidean", "angular"])
@pytest.mark.parametrize("block_rows", [None, 7])
def test_spectrum_and_embedding_match_the_dense_graph(geometry, block_rows, monkeypatch):
    # block_rows: the rows' nearest anchors found 7 rows at a time (every block, the last one
    # short), as a pass over many rows is
    if block_rows is not None:
        import mkrk_dask.anchor_graph

        monkeypatch.setattr(mkrk_dask.anchor_graph, "BLOCK_ROWS", block_rows)
    X, _ = _blobs()
    X = X - X.min() + 0.1 if geometry == "angular" else X
    k = 4
    model = AnchorGraphClustering(k, n_anchors=60, geometry=geometry, random_state=0).fit(X)
    values, vectors = _dense_reference([X], model)
    np.testing.assert_allclose(model.eigenvalues_, values[:k + 1], atol=1e-10)
    assert model.eigenvalues_[0] == pytest.approx(1.0)  # rows of the graph sum to 1
    # the same invariant subspace: equal projectors
    U = model.embedding_
    np.testing.assert_allclose(U @ U.T, vectors[:, :k] @ vectors[:, :k].T, atol=1e-8)
    np.testing.assert_allclose(U.T @ U, np.eye(k), atol=1e-8)
    assert model.geometry_ == [geometry]


@pytest.mark.parametrize("layout", ["dense", "sparse"])
def test_every_part_of_a_disconnected_graph_is_in_the_spectrum(layout):
    # Many equal rows (zeros) make a graph of several parts, eigenvalue 1 once a part. Lanczos
    # from one start vector had found two of three on one machine, three on another.
    X, _ = _blobs()
    X = np.where(np.abs(X) < 3, 0.0, X)
    k = 4
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DisconnectedGraphWarning)
        model = AnchorGraphClustering(k, n_anchors=60, random_state=0).fit(
            sp.csr_matrix(X) if layout == "sparse" else X)
    values, _ = _dense_reference([X], model)
    assert np.sum(values > 1 - 1e-8) >= 2  # the case this test is for
    np.testing.assert_allclose(model.eigenvalues_, values[:k + 1], atol=1e-10)


@pytest.mark.parametrize("sizes, k", [((300, 250, 40), 3), ((2, 2, 0), 4),
                                       ((30,) * 12 + (0,), 3)])
def test_a_graph_of_several_parts_is_solved_part_by_part(sizes, k):
    """F F^T over several parts (F block-diagonal; a size of 0 stands for anchors without a
    row): its top eigenpairs, taken part by part (Lanczos in the large parts), are those of
    the whole, against a dense eigendecomposition. Parts large enough for Lanczos, more parts
    than eigenpairs asked for, and fewer eigenpairs in the parts than asked for."""
    from scipy.linalg import eigh

    from mkrk_dask.estimators._anchor_graph import _top_eigenpairs

    rng = np.random.default_rng(0)
    blocks = [sp.random(2 * c, c, density=0.2, random_state=rng) + sp.eye(2 * c, c)
              if c else sp.csr_matrix((3, 3)) for c in sizes]
    F = sp.block_diag(blocks).tocsr()
    top, projection = _top_eigenpairs(F, k)
    reference = eigh((F.T @ F).toarray(), eigvals_only=True)[::-1]
    np.testing.assert_allclose(top, np.maximum(reference[:k + 1], 0), rtol=1e-9, atol=1e-12)
    U = F @ projection
    np.testing.assert_allclose(U.T @ U, np.eye(k), atol=1e-8)
    np.testing.assert_allclose(F @ (F.T @ U), U * top[:k], rtol=1e-7, atol=1e-8)


def test_passes_scikit_learn_checks():
    # the checks' data are small and clustered: graphs with more parts than clusters warn
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DisconnectedGraphWarning)
        check_estimator(AnchorGraphClustering(n_clusters=2, n_anchors=10, random_state=0))


def test_auto_geometry_follows_the_sign_of_the_data():
    X, _ = _blobs()
    assert AnchorGraphClustering(4, n_anchors=60, random_state=0).fit(X).geometry_ == [
        "euclidean"]
    positive = AnchorGraphClustering(4, n_anchors=60, random_state=0).fit(X - X.min())
    assert positive.geometry_ == ["angular"]


def test_auto_geometry_of_one_column_is_euclidean():
    # Counts in one column (R's InsectSprays is such a set): every non-zero row points the
    # same way, so the angle would put them all on one point (the fit failed with "fewer
    # distinct rows than clusters"). Six groups of counts, some zero.
    rng = np.random.default_rng(0)
    groups = np.repeat(np.arange(6), 20)
    counts = rng.poisson(np.array([0.5, 6, 14, 25, 40, 60])[groups])[:, None].astype(float)
    assert (counts == 0).any()
    model = AnchorGraphClustering(6, n_anchors=30, random_state=0).fit(counts)
    assert model.geometry_ == ["euclidean"]
    # the groups overlap (Poisson counts): KMeans on the column gets 0.61
    assert normalized_mutual_info_score(groups, model.labels_) > 0.6
    with pytest.raises(ValueError, match="fewer distinct directions"):
        AnchorGraphClustering(6, n_anchors=30, geometry="angular", random_state=0).fit(counts)


def test_multiview_graph_is_the_average_of_the_views():
    X, y = _blobs(400)
    rng = np.random.default_rng(1)
    views = [X, np.abs(X @ rng.normal(size=(5, 7)))]
    model = AnchorGraphClustering(4, n_anchors=50, random_state=0).fit(views)
    values, vectors = _dense_reference(views, model)
    np.testing.assert_allclose(model.eigenvalues_, values[:5], atol=1e-10)
    U = model.embedding_
    np.testing.assert_allclose(U @ U.T, vectors[:, :4] @ vectors[:, :4].T, atol=1e-8)
    assert model.geometry_ == ["euclidean", "angular"]
    assert model.n_features_per_view_ == (5, 7) and model.n_features_in_ == 12
    np.testing.assert_array_equal(model.predict(views), model.labels_)


def test_finds_curved_clusters_that_kmeans_cannot():
    """Two concentric rings: no convex split separates them, the local graph does."""
    X, y = make_circles(2000, factor=0.4, noise=0.04, random_state=0)
    model = AnchorGraphClustering(2, n_anchors=200, geometry="euclidean",
                                  random_state=0).fit(X)
    assert normalized_mutual_info_score(y, model.labels_) > 0.95
    from sklearn.cluster import KMeans

    assert normalized_mutual_info_score(
        y, KMeans(2, n_init=10, random_state=0).fit_predict(X)) < 0.1


def test_predict_and_transform_of_training_and_new_rows():
    X, y = _blobs(800)
    model = AnchorGraphClustering(4, n_anchors=80, random_state=0).fit(X[:600])
    np.testing.assert_allclose(model.transform(X[:600]), model.embedding_, atol=1e-12)
    np.testing.assert_array_equal(model.predict(X[:600]), model.labels_)
    assert normalized_mutual_info_score(y[600:], model.predict(X[600:])) > 0.9
    # a new row alone is mapped as it is within a batch
    np.testing.assert_allclose(model.transform(X[700:701]), model.transform(X[600:])[100:101],
                               atol=1e-12)


def test_sparse_input_gives_the_dense_result():
    X, _ = _blobs()
    X = np.where(np.abs(X) < 3, 0.0, X)
    dense = AnchorGraphClustering(4, n_anchors=60, random_state=0).fit(X)
    sparse = AnchorGraphClustering(4, n_anchors=60, random_state=0).fit(sp.csr_matrix(X))
    np.testing.assert_array_equal(sparse.labels_, dense.labels_)
    np.testing.assert_allclose(sparse.eigenvalues_, dense.eigenvalues_, atol=1e-12)


def test_dask_and_zarr_input_under_a_real_scheduler(client, tmp_path):
    X, _ = _blobs(900)
    X = X - X.min()
    reference = AnchorGraphClustering(4, n_anchors=70, random_state=3).fit(X)
    store = zarr.create_array(str(tmp_path / "x.zarr"), shape=X.shape, chunks=(100, 5),
                              dtype="f8")
    store[...] = X
    with client.as_current():
        for data in (da.from_array(X, chunks=(250, 3)), store):
            model = AnchorGraphClustering(4, n_anchors=70, random_state=3).fit(data)
            np.testing.assert_array_equal(model.labels_, reference.labels_)
            np.testing.assert_allclose(model.embedding_, reference.embedding_, atol=1e-12)
            np.testing.assert_array_equal(model.predict(da.from_array(X, chunks=(300, 5))),
                                          reference.labels_)
    # the row pass ran on the cluster's scheduler
    assert any("nearest_task" in p for p in client.run_on_scheduler(
        lambda dask_scheduler: list(dask_scheduler.task_prefixes)))


def test_far_rows_do_not_underflow_the_weights():
    """Columns of very different scales: a row far from every anchor relative to the width
    (exp underflows to 0/0 unless the weights are shifted) still gets finite weights."""
    rng = np.random.default_rng(0)
    X = np.hstack([rng.normal(size=(500, 3)), rng.choice([0, 1e4], size=(500, 1))])
    X[:5, 3] = 5e5
    model = AnchorGraphClustering(3, n_anchors=40, geometry="euclidean", random_state=0).fit(X)
    assert np.isfinite(model.embedding_).all()


def test_disconnected_parts_warn():
    """Eight far-apart groups clustered into two: the graph has eight parts, more than the
    clusters, and says so."""
    X, _ = make_blobs(400, n_features=2, centers=8, cluster_std=0.01, center_box=(-1e3, 1e3),
                      random_state=0)
    with pytest.warns(DisconnectedGraphWarning, match="more than n_clusters=2"):
        AnchorGraphClustering(2, n_anchors=40, random_state=0).fit(X)
    with warnings.catch_warnings():
        warnings.simplefilter("error", DisconnectedGraphWarning)
        AnchorGraphClustering(8, n_anchors=40, random_state=0).fit(X)


@pytest.mark.parametrize(("params", "data", "message"), [
    ({"n_clusters": 4, "n_anchors": 3}, None, "needs at least n_clusters=4 anchors"),
    ({"n_clusters": 4}, np.zeros((6, 2)), "needs at least n_clusters=4 anchors"),
    ({"n_clusters": 2, "n_neighbors": 50, "n_anchors": 20}, None, "n_neighbors=50 exceeds"),
    ({"n_clusters": 2, "geometry": "cosine"}, None, "geometry"),
])
def test_bad_parameters_raise_one_line(params, data, message):
    X = _blobs()[0] if data is None else data
    with pytest.raises(ValueError, match=message) as info:
        AnchorGraphClustering(**params).fit(X)
    assert "\n" not in str(info.value)


def test_bad_input_raises_one_line():
    X, _ = _blobs()
    bad = X.copy()
    bad[3, 1] = np.nan
    with pytest.raises(ValueError, match="NaN") as info:
        AnchorGraphClustering(4).fit(bad)
    assert "\n" not in str(info.value)
    model = AnchorGraphClustering(4, n_anchors=50, random_state=0).fit(X)
    with pytest.raises(ValueError, match="features"):
        model.predict(X[:, :3])
    with pytest.raises(ValueError, match="1 view"):
        model.predict([X, X])


def test_lazy_input_with_nan_names_the_view_and_rows(client, tmp_path):
    """NaN outside the rows the anchors are learned from is found by the pass over the rows,
    on the workers, and named."""
    from mkrk_dask.anchor_graph import nearest_anchors

    X, _ = _blobs(900)
    bad = X.copy()
    bad[850, 2] = np.nan
    anchors = X[:40]
    with client.as_current(), pytest.raises(ValueError, match=r"view 1, rows 0\.\.899") as info:
        nearest_anchors(da.from_array(bad, chunks=(300, 5)), anchors, 3, False, index=1)
    assert "\n" not in str(info.value)
    with client.as_current(), pytest.raises(ValueError, match="NaN") as info:
        AnchorGraphClustering(4, n_anchors=40, random_state=0).fit(
            da.from_array(bad, chunks=(300, 5)))
    assert "\n" not in str(info.value)


def test_saved_and_loaded_without_pickle(tmp_path):
    from mkrk_dask.model_io import load_model, save_model

    X, _ = _blobs(500)
    views = [X, np.abs(X)]
    model = AnchorGraphClustering(4, n_anchors=50, random_state=0).fit(views)
    loaded = load_model(save_model(model, tmp_path / "model"))
    assert type(loaded) is AnchorGraphClustering
    assert loaded.get_params() == model.get_params()
    assert loaded.geometry_ == model.geometry_
    np.testing.assert_array_equal(loaded.labels_, model.labels_)
    np.testing.assert_array_equal(loaded.predict(views), model.labels_)
    np.testing.assert_array_equal(loaded.transform(views), model.transform(views))


def test_clustered_eigenvalues_fall_back_to_the_dense_solver_early():
    """Eigenvalues packed against 1 (a graph of many almost disconnected parts, as data with
    many equal rows give): Lanczos gives up within the dense solver's cost, and the dense
    eigenpairs are exact (against the spectrum the graph was built with)."""
    from scipy.sparse.linalg import ArpackNoConvergence, eigsh
    from scipy.stats import ortho_group

    from mkrk_dask.estimators._anchor_graph import _lanczos_restarts, _top_eigenpairs

    m = 300
    values = np.r_[1.0, 1.0, 1.0 - np.geomspace(5e-7, 0.5, m - 2)]
    Q = ortho_group.rvs(m, random_state=0)
    F = sp.csr_matrix(np.sqrt(values)[:, None] * Q.T)  # F^T F = Q diag(values) Q^T
    small = (F.T @ F).tocsc()
    with pytest.raises(ArpackNoConvergence):
        eigsh(small, k=3, which="LA", ncv=20, maxiter=_lanczos_restarts(small, 20),
              v0=np.ones(m) / np.sqrt(m))
    top, projection = _top_eigenpairs(F, 2)
    np.testing.assert_allclose(top, values[:3], atol=1e-12)
    U = F @ projection
    np.testing.assert_allclose(U.T @ U, np.eye(2), atol=1e-8)
    np.testing.assert_allclose(F @ (F.T @ U), U * top[:2], atol=1e-8)


def test_lanczos_on_a_sparse_path_stops_within_the_dense_solvers_work(monkeypatch):
    """A graph with few stored entries a row and eigenvalues packed against 1 (the anchors of
    one-column data make a path): Lanczos's products, each costing ARPACK's reverse
    communication besides its stored entries, stop within what the dense solver costs
    (which used to allow a hundred times more: seconds a part), and the eigenpairs are the
    dense solver's."""
    from scipy.linalg import eigh

    import mkrk_dask.estimators._anchor_graph as module

    side = 1000
    path = sp.diags([np.full(side - 1, 0.25), np.full(side, 0.5), np.full(side - 1, 0.25)],
                    [-1, 0, 1]).tocsc()
    products = []
    real_eigsh = module.eigsh

    def counting_eigsh(A, **kwargs):
        operator = sp.linalg.LinearOperator(
            A.shape, matvec=lambda x: (products.append(1), A @ x)[1], dtype=A.dtype)
        return real_eigsh(operator, **kwargs)

    monkeypatch.setattr(module, "eigsh", counting_eigsh)
    values, vectors = module._top_of_connected(path, 4)
    per_product = module.SPARSE_ENTRY_COST * path.nnz + module.LANCZOS_PRODUCT_COST
    ncv = 20
    assert 0 < len(products) * per_product <= side ** 3 + ncv * per_product
    expected = eigh(path.toarray(), eigvals_only=True)[-4:]
    np.testing.assert_allclose(np.sort(values), expected, atol=1e-10)
    np.testing.assert_allclose(path @ vectors, vectors * values, atol=1e-8)


def test_more_anchors_than_the_seeding_sample(monkeypatch):
    # The anchors' k-means++ seeds from a sample of rows (scikit-learn's init_size); where
    # the anchors outnumber it, the sample grows to three rows an anchor, as scikit-learn's.
    import mkrk_dask.anchor_graph

    monkeypatch.setattr(mkrk_dask.anchor_graph, "SEED_ROWS", 40)
    X, y = _blobs(600)
    model = AnchorGraphClustering(4, n_anchors=150, random_state=0).fit(X)
    anchors = model.view_graphs_[0].anchors
    assert anchors.shape == (150, 5) and len(np.unique(anchors, axis=0)) == 150
    assert normalized_mutual_info_score(y, model.labels_) > 0.9


def test_predict_checked_is_predict_without_the_checks():
    """Rows of every view as the fit's final pass gives them (finite float64 in memory):
    the labels predict gives, two views and one."""
    X, _ = _blobs()
    views = [X[:, :3], X[:, 3:]]
    two = AnchorGraphClustering(4, n_anchors=40, random_state=0).fit(views)
    rows = [np.asarray(v, dtype=np.float64) for v in views]
    np.testing.assert_array_equal(two.predict_checked(rows), two.predict(views))
    one = AnchorGraphClustering(4, n_anchors=40, random_state=0).fit(views[0])
    np.testing.assert_array_equal(one.predict_checked(rows[:1]), one.labels_)
