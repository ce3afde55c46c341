"""``score`` (the opposite of the within-cluster loss in the fitted feature map) and dask in,
dask out for ``predict``/``transform`` (issue 46)."""

from __future__ import annotations

import dask.array as da
import numpy as np
import pytest
from sklearn.datasets import make_blobs
from sklearn.model_selection import GridSearchCV

from mkrk_dask import MKKMRK, AnchorGraphClustering
from mkrk_dask.assignment import final_rows


@pytest.fixture(scope="module")
def blobs():
    X, _ = make_blobs(n_samples=240, centers=3, n_features=4, random_state=0)
    return X


@pytest.fixture(scope="module")
def fitted(blobs):
    return MKKMRK(3, random_state=0).fit(blobs)


def test_score_is_the_negative_within_cluster_loss(fitted, blobs):
    rows = final_rows(fitted.transform(blobs), fitted.final_step_)
    labels = fitted.predict(blobs)
    expected = -sum(float(np.sum((rows[labels == c] - fitted.cluster_centers_[c]) ** 2))
                    for c in range(3))
    assert fitted.score(blobs) == pytest.approx(expected, rel=1e-9)
    assert fitted.score(blobs) < 0
    # a subset has a smaller loss: the score is a sum over samples, as KMeans.score
    assert fitted.score(blobs[:60]) > fitted.score(blobs)


def test_grid_search_over_lam_uses_the_estimators_score(blobs):
    search = GridSearchCV(MKKMRK(3, random_state=0), {"lam": [2.0 ** -5, 1.0]}, cv=2)
    search.fit(blobs)
    scores = search.cv_results_["mean_test_score"]
    assert np.all(np.isfinite(scores)) and np.all(scores <= 0)
    assert search.best_params_["lam"] in (2.0 ** -5, 1.0)
    assert search.best_estimator_.score(blobs) <= 0


def test_anchor_graph_scores(blobs):
    model = AnchorGraphClustering(3, n_anchors=40, random_state=0).fit(blobs)
    assert model.score(blobs) <= 0
    assert model.score(da.from_array(blobs, chunks=50)) == pytest.approx(model.score(blobs))


@pytest.mark.parametrize("make", [lambda: MKKMRK(3, random_state=0),
                                  lambda: AnchorGraphClustering(3, n_anchors=40,
                                                                random_state=0)])
def test_dask_in_dask_out(make, blobs, client):
    model = make().fit(blobs)
    lazy = da.from_array(blobs, chunks=(70, 2))
    labels, rows = model.predict(lazy), model.transform(lazy)
    assert isinstance(labels, da.Array) and isinstance(rows, da.Array)
    assert labels.chunks[0] == lazy.chunks[0] and rows.shape == (240, model.embedding_.shape[1])
    np.testing.assert_array_equal(labels.compute(), model.predict(blobs))
    np.testing.assert_allclose(rows.compute(), model.transform(blobs))
    with pytest.raises(ValueError, match="features"):
        model.predict(da.ones((10, 3), chunks=5))


def test_dask_predict_and_score_send_the_model_once():
    """A fitted model's arrays travelled inside every task graph of predict and score on a
    dask array (``Sending large graph of size 26.99 MiB`` at 200,000 rows): scattered once
    now. The large-graph threshold is lowered to 1 MB so that a model of 20,000 rows, whose
    embedding and labels take 1.4 MB, shows it; the 10^6 rows are made on the workers."""
    import warnings

    import dask
    from distributed import Client, LocalCluster

    X, _ = make_blobs(n_samples=20000, centers=4, n_features=8, random_state=0)
    with dask.config.set({"distributed.admin.large-graph-warning-threshold": "1MB"}), \
            LocalCluster(n_workers=2, threads_per_worker=1, dashboard_address=None,
                         host="127.0.0.1") as cluster, Client(cluster):
        # few landmarks: the 10^6 rows' factors are cheap, the model still 1.4 MB
        model = MKKMRK(4, solver="nystrom", random_state=0,
                       backend_options={"n_landmarks": 60, "max_components": 20}).fit(X)
        lazy = da.random.default_rng(0).normal(size=(10**6, 8), chunks=(250_000, 8)) * 4
        with warnings.catch_warnings():
            warnings.filterwarnings("error", message=".*large graph.*")
            labels = model.predict(lazy).compute()
            score = model.score(lazy)
            first = model.score(lazy[:20000])
            again = model.score(lazy[:20000])  # the scattered model is reused
    assert labels.shape == (10**6,) and set(np.unique(labels)) <= set(range(4))
    rows = lazy[:20000].compute()
    np.testing.assert_array_equal(labels[:20000], model.predict(rows))
    assert first == again == pytest.approx(model.score(rows), rel=1e-6)
    assert score < first < 0
