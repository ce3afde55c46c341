"""Multi-view data on the command line: the views of an .npz (named by its keys) or of
several files, their names in every output, and mkrk predict's errors naming them (real
runs on 150 rows of scikit-learn's digits: the pixels and a histogram of their gradients)."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest
from sklearn.datasets import load_digits

from mkrk_dask.cli import main
from mkrk_dask.io import load_array_file

PNG = b"\x89PNG\r\n\x1a\n"


def _gradient_histograms(images: np.ndarray) -> np.ndarray:
    """A 9-bin histogram of the gradients' directions, weighted by their size, in each
    quarter of an 8 x 8 image: 36 columns (a small HOG)."""
    gx, gy = np.diff(images, axis=2)[:, :7, :], np.diff(images, axis=1)[:, :, :7]
    size, bins = np.hypot(gx, gy), ((np.arctan2(gy, gx) + np.pi) / (2 * np.pi) * 9).astype(int) % 9
    cells = [(slice(a, a + 4), slice(b, b + 4)) for a in (0, 3) for b in (0, 3)]
    return np.stack([(size[:, r, c] * (bins[:, r, c] == k)).sum(axis=(1, 2))
                     for r, c in cells for k in range(9)], axis=1)


@pytest.fixture(scope="module")
def views(tmp_path_factory: pytest.TempPathFactory) -> dict:
    X, y = load_digits(return_X_y=True)
    X, y = X[:150], y[:150]
    folder = tmp_path_factory.mktemp("views")
    hog = _gradient_histograms(X.reshape(-1, 8, 8))
    np.savez(folder / "two.npz", pixels=X, hog=hog, y=y)
    np.save(folder / "pixels.npy", X)
    np.save(folder / "hog.npy", hog)
    np.save(folder / "both.npy", np.hstack([X, hog]))
    np.savez(folder / "narrow.npz", pixels=X, hog=hog[:, :30])
    return {"folder": folder, "pixels": X, "hog": hog, "y": y}


@pytest.fixture(scope="module")
def run(views: dict, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """mkrk fit of the two-view .npz."""
    out = tmp_path_factory.mktemp("fit") / "run"
    assert main(["fit", str(views["folder"] / "two.npz"), "--out", str(out), "-q"]) == 0
    return out


def test_an_npz_of_named_arrays_is_read_as_named_views(views: dict) -> None:
    data = load_array_file(views["folder"] / "two.npz")
    assert data.view_names == ("pixels", "hog") and data.n_features == [64, 36]
    np.testing.assert_array_equal(data.y, views["y"])


def test_fit_names_the_views_in_its_outputs(views: dict, run: Path, tmp_path: Path,
                                            capsys: pytest.CaptureFixture) -> None:
    result = json.loads((run / "result.json").read_text())
    assert result["view_names"] == ["pixels", "hog"]
    kernel_views = result["kernel_views"]
    assert set(kernel_views) == {"pixels", "hog"}
    assert len(kernel_views) == len(result["kernel_names"])
    # a kernel's view is the one its @v reads
    assert all((view == "hog") == name.endswith("@1")
               for name, view in zip(result["kernel_names"], kernel_views, strict=True))
    with open(run / "weights.csv", encoding="utf-8") as handle:
        rows = list(csv.reader(handle))
    assert rows[0] == ["kernel", "view", "weight"]
    assert [row[1] for row in rows[1:]] == kernel_views
    # the terminal groups the kernels by view
    assert main(["fit", str(views["folder"] / "two.npz"), "-q"]) == 0
    out = capsys.readouterr().out
    grouped = out[out.index("weights by view:"):].splitlines()
    assert grouped[1].startswith("  pixels: ") and any(line.startswith("  hog: ")
                                                      for line in grouped)


def test_predict_and_figures_of_the_fit(views: dict, run: Path, tmp_path: Path,
                                        capsys: pytest.CaptureFixture) -> None:
    labels = tmp_path / "labels.csv"
    assert main(["predict", str(run), str(views["folder"] / "two.npz"), "--out", str(labels),
                 "-q"]) == 0
    np.testing.assert_array_equal(np.loadtxt(labels, skiprows=1), np.load(run / "labels.npy"))
    capsys.readouterr()
    assert main(["figures", str(run)]) == 0  # the run folder itself
    written = [Path(line) for line in capsys.readouterr().out.split()]
    assert [p.name for p in written] == ["two_fig2_representation.png",
                                         "two_fig4_objective.png", "two_fig5_weights.png"]
    for path in written:
        assert path.parent == run / "figures" and path.read_bytes()[:8] == PNG


def test_several_files_one_view_each(views: dict, tmp_path: Path) -> None:
    folder, out = views["folder"], tmp_path / "files"
    assert main(["fit", str(folder / "pixels.npy"), str(folder / "hog.npy"), "-k", "10",
                 "--view-names", "pix,grad", "--out", str(out), "-q"]) == 0
    result = json.loads((out / "result.json").read_text())
    assert result["view_names"] == ["pix", "grad"]
    assert result["data"] == [str(folder / "pixels.npy"), str(folder / "hog.npy")]
    labels = tmp_path / "labels.npy"
    # new data in two files too, named otherwise: taken in order
    assert main(["predict", str(out), str(folder / "pixels.npy"), str(folder / "hog.npy"),
                 "--out", str(labels), "-q"]) == 0
    np.testing.assert_array_equal(np.load(labels), np.load(out / "labels.npy"))
    # without --view-names, the views are named by the files
    assert main(["fit", str(folder / "pixels.npy"), str(folder / "hog.npy"), "-k", "10",
                 "--out", str(tmp_path / "plain"), "-q"]) == 0
    assert json.loads((tmp_path / "plain" / "result.json").read_text())["view_names"] == [
        "pixels", "hog"]


def _error(capsys: pytest.CaptureFixture) -> str:
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "Traceback" not in err
    return err


def test_predict_names_the_views_when_one_is_given(views: dict, run: Path,
                                                   capsys: pytest.CaptureFixture) -> None:
    assert main(["predict", str(run), str(views["folder"] / "both.npy"), "-q"]) == 2
    err = _error(capsys)
    assert ("the model was fitted on 2 views (pixels: 64 columns, hog: 36 columns); got 1 "
            "view of 100 columns: give the views as arrays pixels, hog") in err
    assert "or as 2 files in this order" in err


def test_predict_names_a_view_of_the_wrong_width(views: dict, run: Path,
                                                 capsys: pytest.CaptureFixture) -> None:
    assert main(["predict", str(run), str(views["folder"] / "narrow.npz"), "-q"]) == 2
    assert "view hog has 30 columns, not 36" in _error(capsys)


def test_view_names_must_match_the_views(views: dict, capsys: pytest.CaptureFixture) -> None:
    assert main(["fit", str(views["folder"] / "two.npz"), "--view-names", "a,b,c",
                 "-q"]) == 2
    assert "--view-names: 3 view names (a, b, c) for 2 views" in _error(capsys)
    assert main(["fit", str(views["folder"] / "two.npz"), "--view-names", "a,a", "-q"]) == 2
    assert "the view name 'a' is given twice" in _error(capsys)


def test_search_and_graph_name_the_views(views: dict, tmp_path: Path,
                                         capsys: pytest.CaptureFixture) -> None:
    data = str(views["folder"] / "two.npz")
    report = tmp_path / "s.json"
    assert main(["search", data, "--lams", "2^-10,1", "--repeats", "1", "--out", str(report),
                 "-q"]) == 0
    entry = json.loads(report.read_text())["datasets"][0]
    assert entry["kernel_views"] == ["pixels"] * 12 + ["hog"] * 12  # the paper's 12 each
    capsys.readouterr()
    assert main(["figures", str(report), "-q"]) == 0
    assert "two_fig5_weights.png" in capsys.readouterr().out
    graph = tmp_path / "graph"
    assert main(["graph", data, "--n-anchors", "40", "--out", str(graph), "-q"]) == 0
    record = json.loads((graph / "result.json").read_text())
    assert record["view_names"] == ["pixels", "hog"] and record["inertia"] > 0
