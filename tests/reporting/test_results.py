"""Tests of mkrk_dask.results: atomic JSON files, the fit and search records, the reader
(real fits on small data, real files in tmp_path)."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest

import mkrk_dask
from mkrk_dask import MKKMRK, lambda_search
from mkrk_dask.cli import models
from mkrk_dask.io import Dataset, read_labels
from mkrk_dask.plotting import make_figures
from mkrk_dask.results import (
    dataset_entries,
    machine_line,
    mkkmrk_summary,
    read_results,
    report_header,
    search_record,
    search_report,
    write_fit,
    write_json,
    write_labels,
    write_text,
)

#: how many rows of scikit-learn's digits the shared ``digits`` fixture gives (conftest.py)
DIGITS_ROWS = 120


@pytest.fixture(scope="module")
def dataset(digits: tuple[np.ndarray, np.ndarray]) -> Dataset:
    return Dataset("digits", *digits)


@pytest.fixture(scope="module")
def fitted(dataset: Dataset) -> MKKMRK:
    return MKKMRK.paper(n_clusters=10, lam=2.0**-10, n_init=2, random_state=0).fit(dataset.X)


# --------------------------------------------------------------------------- files


def test_write_json_replaces_atomically(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "r.json"
    write_json(path, {"a": 1})
    assert json.loads(path.read_text()) == {"a": 1}
    write_json(path, {"a": 2})
    assert json.loads(path.read_text()) == {"a": 2}
    # A value JSON cannot hold fails while writing the temporary file: the previous file
    # stays whole, and no temporary file is left behind.
    with pytest.raises(TypeError):
        write_json(path, {"a": object()})
    assert json.loads(path.read_text()) == {"a": 2}
    assert [p.name for p in path.parent.iterdir()] == ["r.json"]


def test_write_text_leaves_the_old_file_when_interrupted(tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    path = write_text(tmp_path / "r.md", "old\n")

    def interrupted(src, dst):
        raise KeyboardInterrupt

    monkeypatch.setattr("mkrk_dask.results.os.replace", interrupted)
    with pytest.raises(KeyboardInterrupt):
        write_text(path, "new\n")
    assert path.read_text() == "old\n"
    assert [p.name for p in tmp_path.iterdir()] == ["r.md"]  # the temporary file is gone
    monkeypatch.undo()
    assert write_text(path, "new\n").read_text() == "new\n"


def test_report_header() -> None:
    header = report_header("T", command="mkrk x", started="s", finished="f", machine="m",
                           library="l", directory="/d")
    assert header.splitlines() == ["# T", "", "- command: `mkrk x` (run from `/d`)",
                                   "- started s, finished f", "- machine: m", "- library: l",
                                   "- every figure below was measured in this run", ""]
    assert f"numpy {np.__version__}" in machine_line()


def test_read_results_errors(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="does not exist"):
        read_results(tmp_path / "absent.json")
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(ValueError, match="not a JSON results file"):
        read_results(bad)
    bad.write_text("[1, 2]")
    with pytest.raises(ValueError, match="JSON object expected"):
        read_results(bad)
    assert read_results({"datasets": []}) == {"datasets": []}
    with pytest.raises(ValueError, match="not a results file"):
        dataset_entries({"something": 1})


def test_write_labels_npy_and_csv(tmp_path: Path) -> None:
    labels = np.array([2, 0, 1])
    np.testing.assert_array_equal(np.load(write_labels(tmp_path / "l.npy", labels)), labels)
    text = write_labels(tmp_path / "out" / "l.csv", labels).read_text().splitlines()
    assert text == ["label", "2", "0", "1"]
    # and --labels reads them back: the header line was read as a fourth label
    np.testing.assert_array_equal(read_labels(tmp_path / "out" / "l.csv"), labels)


# --------------------------------------------------------------------------- a fit


def test_write_fit_files_and_record(fitted: MKKMRK, dataset: Dataset, tmp_path: Path) -> None:
    out = tmp_path / "run"
    result = write_fit(out, fitted, dataset, source="digits.npz", command="mkrk fit x",
                       seconds=1.5, save_model=models.save)
    on_disk = json.loads((out / "result.json").read_text())
    assert on_disk == json.loads(json.dumps(result))
    assert on_disk["kind"] == "mkrk-fit" and on_disk["version"] == mkrk_dask.__version__
    assert on_disk["data"] == "digits.npz" and on_disk["n_samples"] == 120
    assert on_disk["n_features"] == [64] and on_disk["seconds"] == 1.5
    np.testing.assert_allclose(on_disk["weights"], fitted.weights_)
    np.testing.assert_allclose(np.load(out / "Y.npy"), fitted.representation_)
    with open(out / "Y.csv", newline="") as handle:
        rows = list(csv.reader(handle))
    assert rows[0] == ["kernel", *fitted.kernel_names_]
    assert [row[0] for row in rows[1:]] == list(fitted.kernel_names_)
    np.testing.assert_allclose(np.array([row[1:] for row in rows[1:]], dtype=float),
                               fitted.representation_)
    np.testing.assert_array_equal(np.load(out / "labels.npy"), fitted.labels_)
    np.testing.assert_array_equal(read_labels(out / "labels.csv"), fitted.labels_)
    weights_csv = (out / "weights.csv").read_text().splitlines()
    assert weights_csv[0] == "kernel,weight" and len(weights_csv) == 1 + len(fitted.weights_)
    objective = np.loadtxt(out / "objective.csv", delimiter=",", skiprows=1)
    np.testing.assert_allclose(np.atleast_2d(objective)[:, 1], fitted.objective_history_)
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics == on_disk["metrics"] and 0 < metrics["acc"] <= 1
    assert on_disk["model"] in (models.MODEL_DIR, models.PICKLE_FILE)
    model = models.load(str(out), trust=True)
    np.testing.assert_array_equal(model.labels_, fitted.labels_)
    # A fit's result.json is one entry for the figures.
    entries = dataset_entries(read_results(out / "result.json"))
    assert entries[0]["dataset"] == "digits" and entries[0]["single_fit"]


def test_fit_record_without_labels_has_no_metrics(fitted: MKKMRK, dataset: Dataset,
                                                  tmp_path: Path) -> None:
    unlabeled = Dataset("u", dataset.X, None)
    result = write_fit(tmp_path, fitted, unlabeled, source="u.npy")
    assert "metrics" not in result and not (tmp_path / "metrics.json").exists()
    assert result["model"] is None and (tmp_path / "result.json").is_file()
    assert not (tmp_path / models.PICKLE_FILE).exists()
    assert not (tmp_path / models.MODEL_DIR).exists()


# --------------------------------------------------------------------------- a search


def test_search_records_and_report_draw(dataset: Dataset, tmp_path: Path) -> None:
    estimator = MKKMRK.paper(n_clusters=10, n_init=2, random_state=0)
    found = lambda_search(estimator, dataset.X, [2.0**-15, 1.0], dataset.y, n_repeats=2)
    per_lambda = [search_record(res) for res in found]
    assert [p["lam"] for p in per_lambda] == [2.0**-15, 1.0]
    assert per_lambda[0]["log2_lam"] == -15.0 and len(per_lambda[0]["scores"]) == 2
    for record, res in zip(per_lambda, found, strict=True):
        assert record["summary"]["acc"]["best"] == max(s["acc"] for s in res.scores)
        assert record["n_iter"] == res.n_iter and record["weights"] == res.weights.tolist()
    entry = mkkmrk_summary(per_lambda)
    best = int(np.argmax([p["summary"]["acc"]["best"] for p in per_lambda]))
    assert entry["best_index"] == best and entry["lam"] == per_lambda[best]["lam"]
    report = search_report("mkrk-search", command="mkrk search", repeats=2, seed=0,
                           lams=[2.0**-15, 1.0],
                           datasets=[{"dataset": "digits", "kernel_names": None,
                                      "MKKM-RK": entry}])
    assert report["version"] == mkrk_dask.__version__ and report["kind"] == "mkrk-search"
    path = write_json(tmp_path / "s.json", report)
    written = make_figures(path, tmp_path / "figs")
    assert len(written) == 5


def test_unscored_search_has_no_best() -> None:
    assert mkkmrk_summary([{"lam": 1.0, "summary": None}]) == {
        "per_lambda": [{"lam": 1.0, "summary": None}]}
    assert mkkmrk_summary([]) == {"per_lambda": []}
