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
