"""Tests of mkrk_dask.datasets: locating the benchmark data and loading it by name."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

from mkrk_dask.datasets import (
    DATA_DIR_ENV,
    PAPER_DATASETS,
    Dataset,
    default_data_dir,
    load_dataset,
)

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


def test_loaded_paths_are_paths():
    # A guard for the fixtures above: data_dir hands out Path objects.
    assert default_data_dir() is None or isinstance(default_data_dir(), Path)
