"""Input that is not whole: Zarr arrays with missing or undecodable chunks are refused in one
line naming the array (and the chunk), never read as rows of the fill value."""

from __future__ import annotations

import os

import dask
import dask.array as da
import numpy as np
import pytest
import zarr

from mkrk_dask import MKKMRK
from mkrk_dask.cli import main

rng = np.random.default_rng(5)
X = np.vstack([rng.normal(c, 0.5, size=(40, 4)) for c in (0.0, 3.0, 6.0)])


def _array(tmp_path, name="x.zarr", damage=None):
    path = tmp_path / name
    array = zarr.open_array(str(path), mode="w", shape=X.shape, chunks=(30, 4), dtype="f8")
    array[...] = X
    if damage == "delete":
        os.remove(path / "c" / "1" / "0")
    elif damage == "garbage":
        (path / "c" / "1" / "0").write_bytes(np.random.default_rng(1).bytes(200))
    return path, zarr.open_array(str(path), mode="r")


def _fit(data):
    return MKKMRK.paper(3, kernels=["cosine", "gaussian(c=1)"], solver="exact",
                        random_state=0).fit(data)


@pytest.mark.parametrize("wrap", [lambda a: a, da.from_zarr], ids=["zarr", "dask-from-zarr"])
def test_an_input_with_a_deleted_chunk_is_refused(tmp_path, wrap):
    _, array = _array(tmp_path, damage="delete")
    with pytest.raises(ValueError, match="has 1 of 4 chunks missing") as caught:
        _fit(wrap(array))
    assert "\n" not in str(caught.value) and "allow-missing-chunks" in str(caught.value)


def test_an_array_sparse_by_fill_value_is_accepted_when_asked(tmp_path):
    _, array = _array(tmp_path, damage="delete")
    with dask.config.set({"mkrk-dask.allow-missing-chunks": True}):
        model = _fit(array)
    expected = X.copy()
    expected[30:60] = 0.0  # the fill value, as the user asked
    np.testing.assert_array_equal(model.labels_, _fit(expected).labels_)


def test_a_whole_input_is_accepted(tmp_path):
    _, array = _array(tmp_path)
    np.testing.assert_array_equal(_fit(array).labels_, _fit(X).labels_)


@pytest.mark.parametrize("damage, message", [
    ("delete", "has 1 of 4 chunks missing"),
    ("garbage", r"chunk \(1, 0\) cannot be decoded")])
def test_the_command_line_names_the_damage_in_one_line(tmp_path, capsys, damage, message):
    path, _ = _array(tmp_path, damage=damage)
    code = main(["fit", str(path), "--n-clusters", "3", "--solver", "exact", "-q",
                 "--kernels", "cosine", "gaussian(c=1)"])
    err = capsys.readouterr().err
    assert code == 2, err
    assert len(err.strip().splitlines()) == 1
    assert str(path) in err
    import re

    assert re.search(message, err), err


# -- messages that named the wrong problem ------------------------------------------------


@pytest.mark.parametrize("suffix, message", [(".npz", "not a readable .npz file"),
                                             (".npy", "not a readable .npy file")])
def test_a_file_of_random_bytes_is_not_called_pickled_data(tmp_path, suffix, message):
    from mkrk_dask.io import load_input

    path = tmp_path / f"noise{suffix}"
    path.write_bytes(np.random.default_rng(2).bytes(4096))
    with pytest.raises(ValueError, match=message) as caught:
        load_input(str(path))
    text = str(caught.value)
    assert "pickle" not in text and "unsafe" not in text and "\n" not in text


def test_a_deeply_nested_model_description_is_one_line(tmp_path):
    from mkrk_dask.model_io import load_model

    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "model.json").write_text("[" * 200_000 + "]" * 200_000)
    np.savez(folder / "arrays.npz", a=np.zeros(1))
    with pytest.raises(ValueError, match="model.json is not a model description: it is nested"):
        load_model(folder)

    from mkrk_dask.model_io import save_model

    saved = tmp_path / "saved"
    save_model(_fit(X), saved)
    (saved / "arrays.npz").write_bytes(np.random.default_rng(3).bytes(512))
    with pytest.raises(ValueError, match="arrays.npz cannot be read: it is not a .npz"):
        load_model(saved)
