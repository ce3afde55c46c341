"""Tests of mkrk_dask.datasets: locating data, the benchmark files, user files, and the
synthetic multi-view generator."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import scipy.io
import scipy.sparse as sp
from sklearn.cluster import KMeans

from mkrk_dask.datasets import (
    BLOCK_ROWS,
    DATA_DIR_ENV,
    PAPER_DATASETS,
    Dataset,
    default_data_dir,
    load_array_file,
    load_dataset,
    make_multiview_blobs,
)
from mkrk_dask.metrics import normalized_mutual_info

# --------------------------------------------------------------------------- locating data


def test_default_data_dir_prefers_env(monkeypatch, tmp_path):
    monkeypatch.setenv(DATA_DIR_ENV, str(tmp_path / "somewhere"))
    # Returned even though it does not exist, so a wrong setting is not silently ignored.
    assert default_data_dir() == tmp_path / "somewhere"


def test_default_data_dir_looks_beside_cwd(monkeypatch, tmp_path):
    monkeypatch.delenv(DATA_DIR_ENV, raising=False)
    shared = tmp_path / "shared" / "datasets"
    shared.mkdir(parents=True)
    (tmp_path / "project").mkdir()
    monkeypatch.chdir(tmp_path / "project")
    assert default_data_dir() == shared.resolve()


def test_default_data_dir_without_candidates(monkeypatch, tmp_path):
    monkeypatch.delenv(DATA_DIR_ENV, raising=False)
    monkeypatch.chdir(tmp_path)
    found = default_data_dir()
    # Only the repo-root candidate is left, which exists on some machines and not on others.
    assert found is None or (found.is_dir() and found.parts[-2:] == ("shared", "datasets"))


def test_paper_datasets_names():
    assert set(PAPER_DATASETS) == {"jaffe", "orl", "tr11", "coil20", "usps", "fashion_mnist",
                                   "uci_mfeat"}
    assert PAPER_DATASETS["tr11"] == "tr11_414n_6429d_9c_tfidf_uni.mat"
    with pytest.raises(TypeError):
        PAPER_DATASETS["new"] = "x.mat"  # read-only


def test_missing_named_dataset_says_how_to_point(tmp_path):
    with pytest.raises(FileNotFoundError, match=DATA_DIR_ENV) as info:
        load_dataset("jaffe", data_dir=tmp_path)
    assert str(tmp_path / PAPER_DATASETS["jaffe"]) in str(info.value)


def test_missing_named_dataset_from_env(monkeypatch, tmp_path):
    monkeypatch.setenv(DATA_DIR_ENV, str(tmp_path / "nope"))
    with pytest.raises(FileNotFoundError, match="nope"):
        load_dataset("usps")


def test_unknown_name_lists_known_ones(tmp_path):
    with pytest.raises(FileNotFoundError, match="coil20"):
        load_dataset("no_such_dataset", data_dir=tmp_path)


# --------------------------------------------------------------------------- benchmark files

# name -> (rows, columns of each view, number of classes, sparse)
SHARED = {
    "jaffe": (213, [676], 10, False),
    "orl": (400, [1024], 40, False),
    "tr11": (414, [6429], 9, True),
    "coil20": (1440, [1024], 20, False),
    "usps": (11000, [256], 10, False),
    "uci_mfeat": (2000, [76, 216, 64, 240, 47, 6], 10, False),
}


def _check_dataset(data: Dataset, n_rows: int, widths: list[int], n_classes: int) -> None:
    assert isinstance(data, Dataset)
    assert data.n_samples == n_rows
    assert [v.shape for v in data.views] == [(n_rows, w) for w in widths]
    assert all(v.dtype == np.float64 for v in data.views)
    assert data.y.shape == (n_rows,) and data.y.dtype == np.int64
    assert data.n_classes == n_classes


@pytest.mark.datasets
@pytest.mark.parametrize("name", sorted(SHARED))
def test_shared_dataset(name, data_dir, require_dataset):
    require_dataset(name)
    n_rows, widths, n_classes, sparse = SHARED[name]
    data = load_dataset(name, data_dir)
    assert data.name == name
    _check_dataset(data, n_rows, widths, n_classes)
    assert sp.issparse(data.X) == sparse
    if sparse:
        assert data.X.format == "csr"
    if name == "uci_mfeat":
        assert isinstance(data.X, list) and len(data.view_names) == 6
    else:
        assert data.view_names is None
    if name == "usps":  # uint8 images scaled to [0, 1]
        assert data.X.min() >= 0.0 and data.X.max() <= 1.0


@pytest.mark.datasets
def test_fashion_mnist_subset(data_dir, require_dataset):
    require_dataset("fashion_mnist")
    data = load_dataset("fashion_mnist", data_dir, subset=1400, random_state=3)
    _check_dataset(data, 1400, [784], 10)
    assert 0.0 <= data.X.min() and data.X.max() <= 1.0
    rows = data.extra["subset_rows"]
    assert np.all(np.diff(rows) > 0)
    # n_train still splits train from test: 60000 of the 70000 rows are training rows.
    assert data.extra["n_train"] == np.count_nonzero(rows < 60000)
    assert 1000 < data.extra["n_train"] < 1400


@pytest.mark.datasets
def test_named_lookup_is_case_insensitive(data_dir, require_dataset):
    require_dataset("jaffe")
    assert load_dataset("JAFFE", data_dir).n_samples == 213


# --------------------------------------------------------------------------- user files


def test_npz_with_x_and_y(tmp_path):
    path = tmp_path / "mine.npz"
    np.savez(path, X=np.arange(12).reshape(4, 3), y=np.array([3, 3, 5, 5]), n_train=2)
    data = load_array_file(path)
    assert data.name == "mine"
    assert data.X.dtype == np.float64 and data.X.shape == (4, 3)
    np.testing.assert_array_equal(data.y, [3, 3, 5, 5])  # integral labels kept as they are
    assert data.extra == {"n_train": 2}


def test_npz_single_array_and_uint8_scaling(tmp_path):
    path = tmp_path / "images.npz"
    np.savez(path, pixels=np.array([[0, 255], [51, 102]], dtype=np.uint8))
    data = load_array_file(path)
    np.testing.assert_allclose(data.X, [[0.0, 1.0], [0.2, 0.4]])
    assert data.y is None and data.n_classes is None


def test_npz_views(tmp_path):
    path = tmp_path / "multi.npz"
    rng = np.random.default_rng(0)
    # view10 sorts after view2: views are ordered by number, not by name.
    views = {f"view{i}": rng.random((5, i + 1)) for i in (0, 1, 2, 10)}
    np.savez(path, y=np.array(["b", "a", "b", "c", "a"]),
             view_names=np.array(["p", "q", "r", "s"]), **views)
    data = load_array_file(path)
    assert [v.shape[1] for v in data.X] == [1, 2, 3, 11]
    assert data.view_names == ("p", "q", "r", "s")
    np.testing.assert_array_equal(data.y, [1, 0, 1, 2, 0])  # strings coded in sorted order


def test_npz_missing_keys(tmp_path):
    path = tmp_path / "bad.npz"
    np.savez(path, a=np.zeros((2, 2)), b=np.zeros(2))
    with pytest.raises(ValueError, match="'X'"):
        load_array_file(path)


def test_npy(tmp_path):
    path = tmp_path / "data.npy"
    np.save(path, np.ones((3, 2), dtype=np.float32))
    data = load_array_file(path)
    assert data.X.dtype == np.float64 and data.X.shape == (3, 2) and data.y is None


def test_npy_must_be_2d(tmp_path):
    path = tmp_path / "vector.npy"
    np.save(path, np.ones(3))
    with pytest.raises(ValueError, match="2-D"):
        load_array_file(path)


@pytest.mark.parametrize("header", ["", "a,b,c\n"])
def test_csv(tmp_path, header):
    path = tmp_path / "table.csv"
    path.write_text(header + "1,2,3\n4.5,-1e3,0\n")
    data = load_array_file(path)
    np.testing.assert_array_equal(data.X, [[1, 2, 3], [4.5, -1000, 0]])
    assert data.y is None


def test_csv_non_numeric_body(tmp_path):
    path = tmp_path / "table.csv"
    path.write_text("a,b\n1,2\n3,x\n")
    with pytest.raises(ValueError, match="comma-separated numbers"):
        load_array_file(path)


def test_mat_dense_with_row_labels(tmp_path):
    path = tmp_path / "dense.mat"
    scipy.io.savemat(path, {"X": np.eye(3), "y": np.array([[1.0, 2.0, 2.0]])})
    data = load_array_file(path)
    np.testing.assert_array_equal(data.X, np.eye(3))
    np.testing.assert_array_equal(data.y, [1, 2, 2])
    assert data.y.dtype == np.int64


def test_mat_sparse_stays_sparse(tmp_path):
    path = tmp_path / "sparse.mat"
    X = sp.random(6, 40, density=0.1, format="csc", random_state=0)
    scipy.io.savemat(path, {"X": X, "y": np.arange(6)[:, None]})
    data = load_array_file(path)
    assert sp.issparse(data.X) and data.X.format == "csr" and data.X.dtype == np.float64
    np.testing.assert_allclose(data.X.toarray(), X.toarray())


def test_mat_without_x(tmp_path):
    path = tmp_path / "other.mat"
    scipy.io.savemat(path, {"data": np.eye(2)})
    with pytest.raises(ValueError, match=r"no variable 'X'.*data"):
        load_array_file(path)


def test_unknown_extension_and_missing_file(tmp_path):
    path = tmp_path / "data.parquet"
    path.write_text("")
    with pytest.raises(ValueError, match="unknown extension '.parquet'"):
        load_array_file(path)
    with pytest.raises(FileNotFoundError, match="absent.npz"):
        load_array_file(tmp_path / "absent.npz")


def test_inconsistent_shapes(tmp_path):
    path = tmp_path / "bad.npz"
    np.savez(path, view0=np.zeros((4, 2)), view1=np.zeros((5, 2)))
    with pytest.raises(ValueError, match="differ in their number of rows"):
        load_array_file(path)
    np.savez(path, X=np.zeros((4, 2)), y=np.zeros(3))
    with pytest.raises(ValueError, match="3 labels for 4 rows"):
        load_array_file(path)
    np.savez(path, view0=np.zeros((4, 2)), view1=np.zeros((4, 2)), view_names=np.array(["a"]))
    with pytest.raises(ValueError, match="1 view names for 2 views"):
        load_array_file(path)


def test_load_dataset_by_path_and_in_data_dir(tmp_path, monkeypatch):
    path = tmp_path / "extra_set.npz"
    np.savez(path, X=np.ones((3, 2)), y=np.arange(3))
    assert load_dataset(path).name == "extra_set"
    monkeypatch.chdir(tmp_path.parent)
    # A relative name that is not beside the cwd is looked up in the data folder.
    assert load_dataset("extra_set.npz", data_dir=tmp_path).n_samples == 3


def test_subset_draws_rows_in_order(tmp_path):
    path = tmp_path / "sorted.npz"
    y = np.repeat(np.arange(5), 20)  # sorted by class, as usps and uci_mfeat are
    np.savez(path, X=np.arange(200).reshape(100, 2), y=y, n_train=50)
    data = load_dataset(path, subset=30, random_state=1)
    rows = data.extra["subset_rows"]
    assert rows.shape == (30,) and np.all(np.diff(rows) > 0)
    np.testing.assert_array_equal(data.y, y[rows])
    np.testing.assert_array_equal(data.X[:, 0], 2 * rows)
    assert data.extra["n_train"] == np.count_nonzero(rows < 50)
    assert data.n_classes > 1  # a draw, not the first 30 rows
    again = load_dataset(path, subset=30, random_state=1)
    np.testing.assert_array_equal(again.extra["subset_rows"], rows)
    with pytest.raises(ValueError, match="subset"):
        load_dataset(path, subset=101)
    with pytest.raises(TypeError, match="subset"):
        load_dataset(path, subset=0.5)


# --------------------------------------------------------------------------- synthetic data


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


def test_loaded_paths_are_paths():
    # A guard for the fixtures above: data_dir hands out Path objects.
    assert default_data_dir() is None or isinstance(default_data_dir(), Path)
