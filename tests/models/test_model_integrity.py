"""Saved models whose arrays are damaged are refused, in one line naming the array, before
they predict (issue 80): an array that does not match its digest in model.json, is missing
or was added; a non-finite array where a fitted model holds none, even with the digests
rewritten to match; an array whose shape disagrees with model.json or the other arrays.
``mkrk predict`` reports each in one line and exits 2."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import numpy as np
import pytest
from sklearn.datasets import load_digits

from mkrk_dask import MKKMRK
from mkrk_dask.cli import main
from mkrk_dask.model_io import _MAY_BE_NON_FINITE, _digest, load_model, save_model

X = load_digits(return_X_y=True)[0][:240]
KERNELS = ["cosine", "polynomial(a=1,b=2)", "gaussian(c=0.2)"]
#: the three kinds of model: the exact row map and its centres; the Nystrom map (its own
#: coefficients and centres); the exact map with a final graph (which predicts)
MODELS = {
    "exact": lambda: MKKMRK.paper(10, kernels=KERNELS, random_state=0),
    "nystrom": lambda: MKKMRK.paper(10, kernels=KERNELS, solver="nystrom", random_state=0,
                                    backend_options={"n_landmarks": 40}),
    "graph": lambda: MKKMRK(10, kernels=KERNELS, random_state=0, final_clustering="graph"),
}
#: per kind, the arrays ``predict`` reads the clusters from
CENTRES = {"exact": "fitted.cluster_centers_", "nystrom": "nys.centres",
           "graph": "final_graph_.fitted.cluster_centers_"}


@pytest.fixture(scope="module")
def saved(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Each kind of model, fitted once and saved."""
    root = tmp_path_factory.mktemp("saved")
    folders = {}
    for kind, make in MODELS.items():
        model = make().fit(X)
        assert (model.final_graph_ is not None) == (kind == "graph")
        folders[kind] = save_model(model, root / kind)
    return folders


def _copy(folder: Path, tmp_path: Path) -> Path:
    return Path(shutil.copytree(folder, tmp_path / folder.name))


def _arrays(folder: Path) -> dict[str, np.ndarray]:
    with np.load(folder / "arrays.npz", allow_pickle=False) as npz:
        return {name: npz[name] for name in npz.files}


def _rewrite(folder: Path, arrays: dict[str, np.ndarray], digests: bool) -> None:
    """``arrays.npz`` holds ``arrays``; with ``digests``, model.json's digests are made to match
    them (what someone who edits the arrays on purpose would do)."""
    np.savez(folder / "arrays.npz", **arrays)
    if digests:
        document = json.loads((folder / "model.json").read_text())
        document["digests"] = {name: _digest(array) for name, array in arrays.items()}
        (folder / "model.json").write_text(json.dumps(document))


def _refused(folder: Path, message: str) -> str:
    with pytest.raises(ValueError, match=message) as caught:
        load_model(folder)
    assert "\n" not in str(caught.value)
    return str(caught.value)


def _with_nan(array: np.ndarray) -> np.ndarray:
    array = array.copy()
    array.flat[0] = np.nan
    return array


def test_the_digests_are_recorded_and_an_undamaged_model_loads(saved):
    for folder in saved.values():
        document = json.loads((folder / "model.json").read_text())
        arrays = _arrays(folder)
        assert document["format_version"] == 4
        assert document["digests"] == {name: _digest(a) for name, a in arrays.items()}
        loaded = load_model(folder)
        np.testing.assert_array_equal(loaded.predict(X), loaded.labels_)


@pytest.mark.parametrize("kind, name", [*CENTRES.items(), ("nystrom", "nys.coefficients"),
                                        ("graph", "final_graph_.graph0.anchors")])
def test_an_array_that_does_not_match_its_digest_is_refused(saved, tmp_path, kind, name):
    folder = _copy(saved[kind], tmp_path)
    arrays = _arrays(folder)
    _rewrite(folder, {**arrays, name: _with_nan(arrays[name])}, digests=False)
    _refused(folder, rf"^arrays.npz: array '{name}' does not match its digest in model.json "
                     r"\(damaged or edited\)$")
    # a finite change too: the digest covers every byte
    changed = arrays[name].copy()
    changed.flat[-1] += 1e-12
    _rewrite(folder, {**arrays, name: changed}, digests=False)
    _refused(folder, f"array '{name}' does not match its digest")


@pytest.mark.parametrize("kind, name", [*CENTRES.items(), ("nystrom", "nys.coefficients"),
                                        ("exact", "map.scaled_embedding")])
def test_a_nan_array_is_refused_even_with_the_digests_rewritten(saved, tmp_path, kind, name):
    folder = _copy(saved[kind], tmp_path)
    arrays = _arrays(folder)
    for bad in (np.nan, np.inf):
        array = arrays[name].copy()
        array.flat[0] = bad
        _rewrite(folder, {**arrays, name: array}, digests=True)
        _refused(folder, rf"^arrays.npz: array '{name}' holds NaN or infinite values")


def test_only_the_fits_records_may_hold_non_finite_values(saved, tmp_path):
    """Every floating array of each kind is refused with a NaN in it, but the fit's
    per-iteration records (never read by predict), which load as they are."""
    for kind, source in saved.items():
        arrays = _arrays(source)
        for name, array in arrays.items():
            if array.dtype.kind != "f":
                continue
            folder = _copy(source, tmp_path / kind / name)
            _rewrite(folder, {**arrays, name: _with_nan(array)}, digests=True)
            if name.rpartition(".")[2] in _MAY_BE_NON_FINITE:
                assert np.isnan(getattr(load_model(folder), name.rpartition(".")[2])[0])
            else:
                _refused(folder, f"array '{name}' holds NaN or infinite values")


@pytest.mark.parametrize("kind, name, axis, message", [
    ("exact", "fitted.cluster_centers_", 0,
     r"shape \(9, 10\), not \(10, 10\) \(its clusters: 10 by n_clusters in model.json"),
    ("exact", "fitted.cluster_centers_", 1, r"shape \(10, 9\), not \(10, 10\) \(its embedding "
                                            r"columns: 10 by n_components_ in model.json"),
    ("exact", "fitted.labels_", 0,
     r"shape \(239,\), not \(240,\) \(its training rows: 240 in 'fitted.embedding_'"),
    ("exact", "map.view0", 0, r"shape \(239, 64\), not \(240, 64\) \(its training rows"),
    ("exact", "fitted.weights_", 0,
     r"shape \(2,\), not \(3,\) \(its kernels: 3 by the row map's specs in model.json"),
    ("nystrom", "nys.centres", 0, r"shape \(9, 10\), not \(10, 10\) \(its clusters"),
    ("nystrom", "nys.coefficients", 0,
     r"shape \(119, 10\), not \(120, 10\) \(its factor columns: 120, the columns of the "
     r"transforms"),
    ("nystrom", "nys.transform1", 0, r"shape \(39, 40\), not \(40, 40\) \(its landmarks of "
                                     r"kernel 1: 40 by kernel_landmarks\[1\] in model.json"),
    ("nystrom", "nys.transform1", 1, r"shape \(40, 39\), not \(40, 40\) \(its columns of "
                                     r"kernel 1: 40 by 'fitted.nystrom_ranks_'\[1\]"),
    ("nystrom", "nys.landmarks0", 1, r"shape \(40, 63\), not \(40, 64\) \(its features of "
                                     r"view 0: 64 by the row map's n_features\[0\]"),
    ("graph", "final_graph_.fitted.cluster_centers_", 0,
     r"shape \(9, 10\), not \(10, 10\) \(its clusters: 10 by n_clusters in model.json"),
    ("graph", "final_graph_.graph0.anchors", 0, r"shape \(119, 20\), not \(120, 20\) \(its "
                                                r"anchors of view 0: 120 in "
                                                r"'final_graph_.graph0.column_scale'"),
    ("graph", "final_graph_.graph0.column_scale", 0,
     r"shape \(119,\), not \(120,\) \(its anchors of view 0: 120 in "
     r"'final_graph_.graph0.anchors'"),
    ("graph", "final_graph_.graph0.anchors", 1, r"shape \(120, 19\), not \(120, 20\) \(its "
                                                r"features of view 0: 20 by n_components_ of "
                                                r"the model it partitions"),
    ("graph", "final_graph_.fitted.projection_", 0,
     r"shape \(119, 10\), not \(120, 10\) \(its anchors of view 0"),
])
def test_an_array_with_a_row_or_column_dropped_is_refused(saved, tmp_path, kind, name, axis,
                                                          message):
    """With the digests rewritten to match: the shapes alone tell."""
    folder = _copy(saved[kind], tmp_path)
    arrays = _arrays(folder)
    _rewrite(folder, {**arrays, name: np.delete(arrays[name], -1, axis=axis)}, digests=True)
    _refused(folder, rf"^arrays.npz: array '{name}' has {message}")


def test_missing_added_and_undigested_arrays_are_refused(saved, tmp_path):
    folder = _copy(saved["nystrom"], tmp_path)
    arrays = _arrays(folder)
    document = json.loads((folder / "model.json").read_text())
    _rewrite(folder, {k: v for k, v in arrays.items() if k != "nys.coefficients"},
             digests=False)
    _refused(folder, r"^arrays.npz lacks array\(s\) 'nys.coefficients' that model.json lists")
    _rewrite(folder, {**arrays, "extra": np.zeros(3)}, digests=False)
    _refused(folder, r"^arrays.npz holds array\(s\) 'extra' that model.json does not list")
    # removed from both: model.json still names it where the model reads it
    _rewrite(folder, {k: v for k, v in arrays.items() if k != "nys.coefficients"},
             digests=True)
    _refused(folder, r"^arrays.npz: model.json names an array 'nys.coefficients' it does not "
                     "hold")
    _rewrite(folder, arrays, digests=False)
    (folder / "model.json").write_text(json.dumps({k: v for k, v in document.items()
                                                   if k != "digests"}))
    _refused(folder, "^model.json records no digests of its arrays")


@pytest.fixture(scope="module")
def runs(digits_npz: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A run folder of ``mkrk fit --out`` of each kind of model."""
    root = tmp_path_factory.mktemp("runs")
    options = {"exact": ["--solver", "exact", "--final-clustering", "kmeans"],
               "nystrom": ["--solver", "nystrom", "--n-landmarks", "40",
                           "--final-clustering", "kmeans"],
               "graph": ["--solver", "exact", "--final-clustering", "graph"]}
    for kind, extra in options.items():
        assert main(["fit", str(digits_npz), *extra, "--n-init", "2", "-q", "--out",
                     str(root / kind)]) == 0
    assert "final_graph_.graph0.anchors" in _arrays(root / "graph" / "model")
    return {kind: root / kind for kind in options}


@pytest.mark.parametrize("kind, name, damage, message", [
    ("exact", "fitted.cluster_centers_", "nan", "holds NaN or infinite values"),
    ("nystrom", "nys.centres", "nan", "holds NaN or infinite values"),
    ("nystrom", "nys.coefficients", "nan", "holds NaN or infinite values"),
    ("graph", "final_graph_.fitted.cluster_centers_", "nan", "holds NaN or infinite values"),
    ("nystrom", "nys.coefficients", "digest", "does not match its digest in model.json"),
    ("exact", "fitted.cluster_centers_", "row", r"has shape \(9, 20\), not \(10, 20\)"),
    ("nystrom", "nys.coefficients", "row", r"has shape \(159, 20\), not \(160, 20\)"),
    ("graph", "final_graph_.graph0.anchors", "row", r"has shape \(74, 20\), not \(75, 20\)"),
])
def test_mkrk_predict_refuses_a_damaged_model_in_one_line(runs, digits_npz, tmp_path, capsys,
                                                          kind, name, damage, message):
    run = _copy(runs[kind], tmp_path)
    assert main(["predict", str(run), str(digits_npz), "-q"]) == 0  # undamaged: predicts
    capsys.readouterr()
    arrays = _arrays(run / "model")
    array = np.delete(arrays[name], -1, axis=0) if damage == "row" else _with_nan(arrays[name])
    _rewrite(run / "model", {**arrays, name: array}, digests=damage != "digest")
    assert main(["predict", str(run), str(digits_npz), "-q"]) == 2
    printed = capsys.readouterr()
    assert printed.out == ""
    lines = printed.err.splitlines()
    assert len(lines) == 1, printed.err
    assert lines[0].startswith(f"mkrk predict: error: cannot load the model {run / 'model'}: "
                               f"arrays.npz: array '{name}' ")
    assert re.search(message, lines[0])
