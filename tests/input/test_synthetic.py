"""Tests of mkrk_dask.synthetic: shapes, determinism, chunk invariance and the signal of the
multi-view generator."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.cluster import KMeans

from mkrk_dask.metrics import normalized_mutual_info
from mkrk_dask.synthetic import BLOCK_ROWS, make_multiview_blobs


def test_blobs_shapes_labels_and_kinds():
    views, y, kinds = make_multiview_blobs(500, 4, n_informative=2, n_noise=1, n_redundant=2,
                                           n_features=7, random_state=0)
    assert kinds == ["informative", "informative", "noise", "redundant", "redundant"]
    assert [v.shape for v in views] == [(500, 7)] * 5
    assert all(v.dtype == np.float64 for v in views)
    assert y.shape == (500,) and y.dtype == np.int64
    assert set(np.unique(y)) == {0, 1, 2, 3}


def test_blobs_more_clusters_than_features():
    views, y, _ = make_multiview_blobs(300, 12, n_features=3, random_state=0)
    assert views[0].shape == (300, 3) and y.max() == 11


def test_blobs_float32():
    views, y, _ = make_multiview_blobs(100, random_state=0, dtype=np.float32)
    assert all(v.dtype == np.float32 for v in views)
    _, y64, _ = make_multiview_blobs(100, random_state=0)
    np.testing.assert_array_equal(y, y64)  # labels do not depend on the dtype


def test_blobs_deterministic_by_seed():
    first = make_multiview_blobs(300, random_state=5, n_features=8)
    second = make_multiview_blobs(300, random_state=5, n_features=8)
    other = make_multiview_blobs(300, random_state=6, n_features=8)
    np.testing.assert_array_equal(first[1], second[1])
    for a, b, c in zip(first[0], second[0], other[0], strict=True):
        np.testing.assert_array_equal(a, b)
        assert not np.allclose(a, c)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_blobs_chunk_invariance(dtype):
    n = 2 * BLOCK_ROWS + 1234  # three blocks, the last one partial
    kwargs = dict(n_clusters=3, n_features=4, random_state=11, dtype=dtype)
    full_views, full_y, _ = make_multiview_blobs(n, **kwargs)
    # Uneven chunks that start and end inside blocks and straddle the block boundaries.
    edges = [0, 10, BLOCK_ROWS - 1, BLOCK_ROWS + 5, 2 * BLOCK_ROWS + 7, n - 1, n]
    pieces = [make_multiview_blobs(n, row_slice=(a, b), **kwargs)
              for a, b in zip(edges[:-1], edges[1:], strict=True)]
    np.testing.assert_array_equal(np.concatenate([p[1] for p in pieces]), full_y)
    for v, full in enumerate(full_views):
        np.testing.assert_array_equal(np.concatenate([p[0][v] for p in pieces]), full)


def test_blobs_row_slice_object_and_view_selection():
    n = BLOCK_ROWS + 100
    kwargs = dict(n_clusters=3, n_features=4, random_state=2)
    full_views, full_y, full_kinds = make_multiview_blobs(n, **kwargs)
    # The redundant view (5) is made without its source (0) being selected.
    views, y, kinds = make_multiview_blobs(n, row_slice=slice(BLOCK_ROWS - 3, None),
                                           select_views=[5, 3], **kwargs)
    assert kinds == [full_kinds[5], full_kinds[3]] == ["redundant", "noise"]
    np.testing.assert_array_equal(y, full_y[BLOCK_ROWS - 3:])
    np.testing.assert_array_equal(views[0], full_views[5][BLOCK_ROWS - 3:])
    np.testing.assert_array_equal(views[1], full_views[3][BLOCK_ROWS - 3:])
    empty_views, empty_y, _ = make_multiview_blobs(n, row_slice=(7, 7), **kwargs)
    assert empty_y.shape == (0,) and empty_views[0].shape == (0, 4)


def _kmeans_nmi(X: np.ndarray, y: np.ndarray, k: int) -> float:
    labels = KMeans(k, n_init=3, random_state=0).fit_predict(X)
    return normalized_mutual_info(y, labels)


def test_blobs_views_carry_the_signal_they_claim():
    views, y, kinds = make_multiview_blobs(2000, 6, n_features=16, random_state=3)
    scores = {kind: _kmeans_nmi(v, y, 6) for v, kind in zip(views, kinds, strict=True)}
    assert scores["informative"] > 0.9
    assert scores["redundant"] > 0.9
    assert scores["noise"] < 0.05


def test_blobs_redundant_view_is_a_noisy_copy():
    kwargs = dict(n_informative=2, n_noise=0, n_redundant=3, n_features=8, random_state=4)
    views, _, kinds = make_multiview_blobs(2000, redundant_noise=0.1, **kwargs)
    assert kinds == ["informative"] * 2 + ["redundant"] * 3
    for j, source in ((2, 0), (3, 1), (4, 0)):  # redundant view j copies view j % 2
        diff = views[j] - views[source]
        # Isotropic noise (equal spread in every column), small beside the view itself.
        column_stds = diff.std(axis=0)
        assert column_stds.max() < 1.2 * column_stds.min()
        assert diff.std() < 0.1 * views[source].std()
    exact, _, _ = make_multiview_blobs(2000, redundant_noise=0.0, **kwargs)
    np.testing.assert_array_equal(exact[2], exact[0])


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        (dict(n_samples=0), ValueError, "n_samples"),
        (dict(n_samples=10.0), TypeError, "n_samples"),
        (dict(n_clusters=0), ValueError, "n_clusters"),
        (dict(n_features=0), ValueError, "n_features"),
        (dict(n_noise=-1), ValueError, "n_noise"),
        (dict(n_informative=0, n_noise=0, n_redundant=0), ValueError, "at least one view"),
        (dict(n_informative=0, n_redundant=1), ValueError, "n_informative"),
        (dict(cluster_std=0.0), ValueError, "cluster_std"),
        (dict(separation=-1.0), ValueError, "separation"),
        (dict(separation=float("nan")), ValueError, "separation"),
        (dict(redundant_noise=-0.1), ValueError, "redundant_noise"),
        (dict(random_state=-1), ValueError, "random_state"),
        (dict(dtype=np.int32), ValueError, "dtype"),
        (dict(row_slice=(5, 3)), ValueError, "row_slice"),
        (dict(row_slice=(0, 11)), ValueError, "row_slice"),
        (dict(row_slice=slice(0, 5, 2)), ValueError, "step"),
        (dict(row_slice=(1, 2, 3)), ValueError, "row_slice"),
        (dict(select_views=[6]), ValueError, "select_views"),
        (dict(select_views=[1, 1]), ValueError, "repeated"),
    ],
)
def test_blobs_bad_parameters(kwargs, error, message):
    arguments = dict(n_samples=10, random_state=0) | kwargs
    with pytest.raises(error, match=message):
        make_multiview_blobs(**arguments)
