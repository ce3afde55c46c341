"""mkrk_dask.cli.commands: what every command writes and prints (real runs, small data)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from mkrk_dask.cli import main
from mkrk_dask.datasets import PAPER_DATASETS

PNG = b"\x89PNG\r\n\x1a\n"


def test_fit_writes_every_output(digits_npz: Path, tmp_path: Path,
                                 capsys: pytest.CaptureFixture) -> None:
    out = tmp_path / "run"
    assert main(["fit", str(digits_npz), "--lam", "2^-15", "--out", str(out),
                 "--n-init", "3"]) == 0
    printed = capsys.readouterr()
    assert "ACC" in printed.out and "iter   1" in printed.err  # per-iteration lines (a log)
    for name in ("labels.npy", "labels.csv", "weights.npy", "weights.csv", "Y.npy", "Y.csv",
                 "objective.npy", "objective.csv", "result.json", "metrics.json",
                 "model.joblib"):
        assert (out / name).is_file(), name
    result = json.loads((out / "result.json").read_text())
    assert result["n_clusters"] == 10 and result["solver"] == "exact"
    assert result["command"].startswith("mkrk fit ") and result["data"] == str(digits_npz)
    assert np.load(out / "labels.npy").shape == (150,)
    assert np.isclose(np.load(out / "weights.npy").sum(), 1.0)
    assert np.load(out / "Y.npy").shape == (12, 12)
    assert result["objective_history"] == np.load(out / "objective.npy").tolist()
    assert (out / "labels.csv").read_text().splitlines()[0] == "label"
    assert set(json.loads((out / "metrics.json").read_text())) == {"acc", "nmi", "purity"}
    # -q prints only the results
    assert main(["fit", str(digits_npz), "-q", "--lam", "2^-15", "--n-init", "2"]) == 0
    assert capsys.readouterr().out.strip().startswith("ACC")


def test_fit_without_labels_needs_k(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    path = tmp_path / "x.npy"
    np.save(path, np.random.default_rng(0).random((40, 3)))
    assert main(["fit", str(path), "-q"]) == 2
    assert "--n-clusters is required" in capsys.readouterr().err
    assert main(["fit", str(path), "-k", "2", "-q", "--n-init", "2"]) == 0
    assert "ACC" not in capsys.readouterr().out  # no labels, no scores


def test_search_then_figures(digits_npz: Path, tmp_path: Path) -> None:
    results = tmp_path / "search.json"
    assert main(["search", str(digits_npz), "--lams", "2^-15,2^-10,2^0", "--repeats", "2",
                 "--n-init", "2", "--out", str(results), "-q"]) == 0
    report = json.loads(results.read_text())
    assert report["kind"] == "mkrk-search" and report["repeats"] == 2
    per_lambda = report["datasets"][0]["MKKM-RK"]["per_lambda"]
    assert [p["lam"] for p in per_lambda] == [2.0**-15, 2.0**-10, 1.0]
    assert all(len(p["scores"]) == 2 and p["summary"]["acc"]["best"] > 0 for p in per_lambda)
    assert len(report["datasets"][0]["kernel_names"]) == 12
    figures = tmp_path / "figs"
    assert main(["figures", str(results), "--out", str(figures), "-q"]) == 0
    pngs = sorted(figures.glob("*.png"))
    assert [p.name for p in pngs] == ["digits_fig1_sensitivity.png",
                                      "digits_fig2_representation.png",
                                      "digits_fig3_selected.png", "digits_fig4_objective.png"]
    assert all(p.read_bytes()[:8] == PNG for p in pngs)


def test_search_rejects_zero_repeats(digits_npz: Path, capsys: pytest.CaptureFixture) -> None:
    assert main(["search", str(digits_npz), "--repeats", "0"]) == 2
    assert "--repeats must be >= 1" in capsys.readouterr().err


def test_figures_of_one_fit_and_missing_file(digits_npz: Path, tmp_path: Path,
                                             capsys: pytest.CaptureFixture) -> None:
    out = tmp_path / "run"
    assert main(["fit", str(digits_npz), "-q", "--n-init", "2", "--out", str(out)]) == 0
    assert main(["figures", str(out / "result.json"), "-q"]) == 0
    assert sorted(p.name for p in (out / "figures").glob("*.png")) == [
        "digits_fig2_representation.png", "digits_fig4_objective.png"]
    assert main(["figures", str(tmp_path / "absent.json")]) == 2
    assert "does not exist" in capsys.readouterr().err


def test_build_then_fit_reuses_store_and_nystrom_predict(digits_npz: Path, tmp_path: Path,
                                                          capsys: pytest.CaptureFixture) -> None:
    store = tmp_path / "factors.zarr"
    common = ["--solver", "nystrom", "--n-landmarks", "60", "--chunk-size", "75",
              "--landmarks", "uniform"]
    assert main(["build", str(digits_npz), "--store", str(store), *common]) == 0
    assert "built" in capsys.readouterr().out
    assert main(["build", str(digits_npz), "--store", str(store), *common]) == 0
    assert "reused" in capsys.readouterr().out
    # fit opens the store only if every setting matches (the landmark scheme included);
    # a mismatch would be a StoreError and exit 1.
    out = tmp_path / "run"
    assert main(["fit", str(digits_npz), "--store", str(store), *common, "--lam", "2^-15",
                 "--n-init", "3", "--out", str(out), "-q"]) == 0
    fitted = np.load(out / "labels.npy")
    labels = tmp_path / "pred.csv"
    assert main(["predict", str(out), str(digits_npz), "--out", str(labels), "-q"]) == 0
    predicted = np.loadtxt(labels, skiprows=1, dtype=int)
    np.testing.assert_array_equal(predicted, fitted)  # predict on the training data
    assert capsys.readouterr().out.startswith("ACC")  # with --out, the scores on stdout
    # Without --out the labels go to stdout, one per line, and the scores to stderr.
    assert main(["predict", str(out / "model.joblib"), str(digits_npz), "-q"]) == 0
    printed = capsys.readouterr()
    np.testing.assert_array_equal(np.array(printed.out.split(), dtype=int), fitted)
    assert printed.err.startswith("ACC")
    # an exact model cannot predict new data: a user error
    exact = tmp_path / "exact"
    assert main(["fit", str(digits_npz), "--lam", "2^-15", "--n-init", "2", "--out",
                 str(exact), "-q"]) == 0
    assert main(["predict", str(exact), str(digits_npz)]) == 2
    assert "--solver nystrom" in capsys.readouterr().err


def test_reproduce_writes_the_protocol_report(digits_npz: Path, tmp_path: Path,
                                              capsys: pytest.CaptureFixture) -> None:
    data_dir = tmp_path / "datasets"
    data_dir.mkdir()
    (data_dir / PAPER_DATASETS["usps"]).write_bytes(digits_npz.read_bytes())  # a stand-in
    out = tmp_path / "rep"
    assert main(["reproduce", "--datasets", "usps", "orl", "--data-dir", str(data_dir),
                 "--repeats", "2", "--lams", "2^-15", "--out", str(out), "--figures",
                 "--threads", "1", "--library-only"]) == 0
    printed = capsys.readouterr()
    assert "deprecated" in printed.err and "skipping orl" in printed.err
    report = json.loads((out / "paper_table.json").read_text())
    assert report["kind"] == "mkrk-protocol" and report["command"].startswith("mkrk reproduce")
    assert [d["dataset"] for d in report["datasets"]] == ["usps"]
    assert set(report["datasets"][0]) >= {"SB-KKM", "A-MKKM", "MKKM-RK"}
    markdown = (out / "paper_table.md").read_text()
    assert markdown.startswith("# The paper's Table 2") and "## usps" in markdown
    assert "## usps" in printed.out  # the table is printed too
    assert (out / "figures" / "usps_fig1_sensitivity.png").read_bytes()[:8] == PNG
    assert main(["reproduce", "--datasets", "no_such_set", "--out", str(out)]) == 2


def test_demo_runs_on_the_embedded_dask_cluster_and_matches_exact(run_mkrk) -> None:
    blockwise = run_mkrk("demo", "--n-samples", "300")
    exact = run_mkrk("demo", "--n-samples", "300", "--solver", "exact")
    assert blockwise.returncode == 0, blockwise.stderr
    assert exact.returncode == 0, exact.stderr
    assert "backend blockwise" in blockwise.stdout and "backend exact" in exact.stdout

    def scores_and_weights(out: str) -> list[str]:
        # The ACC/NMI/purity line and the weight lines must agree between the two backends.
        return [line for line in out.splitlines()
                if line.startswith("ACC") or line.startswith("  ")]

    assert scores_and_weights(blockwise.stdout) == scores_and_weights(exact.stdout)
    assert scores_and_weights(exact.stdout)[0].startswith("ACC")
