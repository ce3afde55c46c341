"""mkrk_dask.cli.commands: what every command writes and prints (real runs, small data)."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from mkrk_dask.cli import main
from mkrk_dask.datasets import PAPER_DATASETS
from mkrk_dask.loop import SELECTION_THRESHOLD

PNG = b"\x89PNG\r\n\x1a\n"


def test_fit_writes_every_output(digits_npz: Path, tmp_path: Path,
                                 capsys: pytest.CaptureFixture) -> None:
    out = tmp_path / "run"
    assert main(["fit", str(digits_npz), "--lam", "2^-15", "--out", str(out),
                 "--n-init", "3"]) == 0
    printed = capsys.readouterr()
    assert "ACC" in printed.out and "iter   1" in printed.err  # per-iteration lines (a log)
    for name in ("labels.npy", "labels.csv", "weights.npy", "weights.csv", "Y.npy", "Y.csv",
                 "objective.npy", "objective.csv", "result.json", "metrics.json"):
        assert (out / name).is_file(), name
    assert (out / json.loads((out / "result.json").read_text())["model"]).exists()
    result = json.loads((out / "result.json").read_text())
    assert result["n_clusters"] == 10 and result["solver"] == "exact"
    assert result["command"].startswith("mkrk fit ") and result["data"] == str(digits_npz)
    assert np.load(out / "labels.npy").shape == (150,)
    assert np.isclose(np.load(out / "weights.npy").sum(), 1.0)
    m = np.load(out / "weights.npy").size  # the default dictionary
    assert np.load(out / "Y.npy").shape == (m, m) and m == 4  # digits: intensities, 4 kernels
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
                                      "digits_fig3_selected.png", "digits_fig4_objective.png",
                                      "digits_fig5_weights.png"]
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
        "digits_fig2_representation.png", "digits_fig4_objective.png",
        "digits_fig5_weights.png"]
    assert main(["figures", str(tmp_path / "absent.json")]) == 2
    assert "does not exist" in capsys.readouterr().err


# the fit with --max-components 50 leaves residuals too dense for a local part, and says so
@pytest.mark.filterwarnings(
    "ignore:.*get no local part:mkrk_dask.exceptions.NystromApproximationWarning")
def test_build_then_fit_reuses_store_and_nystrom_predict(digits_npz: Path, tmp_path: Path,
                                                          capsys: pytest.CaptureFixture) -> None:
    store = tmp_path / "factors.zarr"
    common = ["--solver", "nystrom", "--n-landmarks", "60", "--chunk-size", "75",
              "--landmarks", "uniform"]
    assert main(["build", str(digits_npz), "--store", str(store), *common]) == 0
    assert "built" in capsys.readouterr().out
    assert main(["build", str(digits_npz), "--store", str(store), *common]) == 0
    assert "reused" in capsys.readouterr().out
    # --max-components caps the factors' total rank (the summary says so)
    capped = tmp_path / "capped"
    assert main(["fit", str(digits_npz), *common, "--max-components", "50", "--paper",
                 "--n-init", "2", "--out", str(capped)]) == 0
    assert "R = 50 (max_components = 50)" in capsys.readouterr().out
    # the saved model is read back without --trust when it is not a pickle
    # fit opens the store only if every setting matches (the landmark scheme included);
    # a mismatch would be a StoreError and exit 1.
    out = tmp_path / "run"
    assert main(["fit", str(digits_npz), "--store", str(store), *common, "--paper",
                 "--n-init", "3", "--out", str(out), "-q"]) == 0
    fitted = np.load(out / "labels.npy")
    labels = tmp_path / "pred.csv"
    trust = ["--trust"] if (out / "model.joblib").is_file() else []
    assert main(["predict", str(out), str(digits_npz), "--out", str(labels), "-q",
                 *trust]) == 0
    predicted = np.loadtxt(labels, skiprows=1, dtype=int)
    np.testing.assert_array_equal(predicted, fitted)  # predict on the training data
    assert capsys.readouterr().out.startswith("ACC")  # with --out, the scores on stdout
    # Without --out the labels go to stdout, one per line, and the scores to stderr; the
    # labels file predict wrote (a header line, then the labels) serves as --labels.
    assert main(["predict", str(out), str(digits_npz), *trust, "--labels", str(labels)]) == 0
    printed = capsys.readouterr()
    np.testing.assert_array_equal(np.array(printed.out.split(), dtype=int), fitted)
    assert "ACC 100.00" in printed.err
    assert "ACC" in printed.err and "predicted 150 samples" in printed.err
    # An exact model predicts where the library extends it out of sample; otherwise a
    # one-line user error.
    exact = tmp_path / "exact"
    assert main(["fit", str(digits_npz), "--lam", "2^-15", "--n-init", "2", "--out",
                 str(exact), "-q"]) == 0
    capsys.readouterr()  # the fit's scores
    code = main(["predict", str(exact), str(digits_npz), "--trust", "-q"])
    printed = capsys.readouterr()
    assert code == 0 and len(printed.out.split()) == 150


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


@pytest.fixture(scope="module")
def demo_run() -> tuple[subprocess.CompletedProcess, float]:
    """``mkrk demo`` on all 1797 digits, once for the tests below, and its wall time."""
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "mkrk_dask.cli", "demo"], capture_output=True,
                          text=True, timeout=300)
    return proc, time.perf_counter() - start


def test_demo_explains_itself_and_shows_the_dask_passes(demo_run) -> None:
    """mkrk demo: the default first, then the paper's configuration with the Dask passes and
    every iteration on stderr, and on stdout the scores explained, the weights, and a count of
    the selected kernels that follows the library's threshold; lambda written one way."""
    proc, seconds = demo_run
    assert proc.returncode == 0, proc.stderr
    assert seconds < 120  # under 25 s on a 2-core machine shared by five; CI may be loaded
    out = proc.stdout
    default, paper = out.split("2. The paper's configuration")
    assert "1. The default: MKKMRK(n_clusters=10, random_state=0).fit(X)" in default
    assert "plan: MKKM-RK, n=1,797" in default  # the summary: what the default chose and why
    assert "1797 images" in out and "solver nystrom on an embedded Dask cluster" in paper
    for explained in ("ACC", "accuracy", "NMI", "normalized mutual information", "purity"):
        assert explained in default and explained in paper
    assert "[dask]" in proc.stderr and "iter   1" in proc.stderr
    assert "lambda = 2^-15" in paper and "3.05" not in paper and "e-05" not in paper
    weights = [float(line.split()[1]) for line in paper.splitlines()
               if line.startswith("  ") and len(line.split()) >= 2
               and line.split()[0][0].isalpha() and line.split()[1].startswith("0.")]
    assert len(weights) == 12 and abs(sum(weights) - 1) < 1e-3
    selected = sum(w >= SELECTION_THRESHOLD for w in weights)
    effective = 1 / sum(w * w for w in weights)
    assert f"{selected} of 12 kernels have a weight >= {SELECTION_THRESHOLD:g}" in paper
    assert f"1/sum(w^2) = {effective:.1f}" in paper.replace("\n", " ") or \
        abs(float(paper.split("1/sum(w^2) = ")[1].split()[0]) - effective) < 0.1


@pytest.mark.slow
def test_readme_quick_start_and_demo_give_the_same_figures(demo_run,
                                                            capsys: pytest.CaptureFixture
                                                            ) -> None:
    """The README's Python quick start, run as written, prints the scores that the demo's
    first part (the default) prints: one first run (issue 46)."""
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    block = readme.split("## Use it from Python", 1)[1].split("```python\n", 1)[1]
    code = block.split("```", 1)[0]
    assert "MKKMRK(n_clusters=10, random_state=0).fit(X)" in code
    exec(compile(code, "README.md", "exec"), {})  # noqa: S102 - the README's own code
    printed = capsys.readouterr().out
    scores = ast.literal_eval(printed.splitlines()[0])
    demo = demo_run[0].stdout.split("2. The paper's configuration")[0]
    for name, label in (("acc", "ACC"), ("nmi", "NMI"), ("purity", "purity")):
        shown = next(line for line in demo.splitlines() if line.strip().startswith(label + " "))
        assert f"{100 * scores[name]:6.2f}" in shown, (name, shown, scores)


def test_demo_backends_agree_and_quiet_is_silent(run_mkrk) -> None:
    exact = run_mkrk("demo", "--n-samples", "300", "--solver", "exact", "-q")
    blockwise = run_mkrk("demo", "--n-samples", "300", "--solver", "blockwise", "-q")
    assert exact.returncode == 0 and blockwise.returncode == 0, blockwise.stderr
    assert exact.stderr == "" and blockwise.stderr == ""

    def scores_and_weights(out: str) -> list[str]:
        """Of the paper's configuration, which --solver runs (the default's summary names the
        memory available, which changes between runs)."""
        paper = out.split("2. The paper's configuration")[1]
        return [line for line in paper.splitlines()[2:] if line.startswith("  ")]

    assert scores_and_weights(exact.stdout) == scores_and_weights(blockwise.stdout)


def test_graph_writes_its_outputs_and_predict_reads_its_model(
        digits_npz: Path, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    from mkrk_dask import AnchorGraphClustering

    out = tmp_path / "graph"
    assert main(["graph", str(digits_npz), "--n-anchors", "40", "--seed", "2",
                 "--out", str(out)]) == 0
    printed = capsys.readouterr()
    lines = printed.out.splitlines()
    assert lines[0].startswith("ACC") and lines[1].startswith("anchor graph: 40 anchors")
    data = np.load(digits_npz)
    reference = AnchorGraphClustering(10, n_anchors=40, random_state=2).fit(data["X"])
    np.testing.assert_array_equal(np.load(out / "labels.npy"), reference.labels_)
    result = json.loads((out / "result.json").read_text())
    assert result["kind"] == "mkrk-graph" and result["n_clusters"] == 10
    np.testing.assert_allclose(result["eigenvalues"], reference.eigenvalues_, atol=1e-12)
    assert set(json.loads((out / "metrics.json").read_text())) == {"acc", "nmi", "purity"}
    new = tmp_path / "new.npy"
    np.save(new, data["X"][:30])
    labels = tmp_path / "labels.npy"
    assert main(["predict", str(out), str(new), "--out", str(labels), "-q"]) == 0
    np.testing.assert_array_equal(np.load(labels), reference.labels_[:30])


def test_graph_on_zarr_input_and_bad_options(digits_npz: Path, tmp_path: Path,
                                             capsys: pytest.CaptureFixture) -> None:
    import zarr

    X = np.load(digits_npz)["X"]
    store = zarr.create_array(str(tmp_path / "x.zarr"), shape=X.shape, chunks=(50, 64),
                              dtype="f8")
    store[...] = X
    assert main(["graph", str(tmp_path / "x.zarr"), "-k", "10", "--n-anchors", "40",
                 "-q"]) == 0
    assert capsys.readouterr().out.startswith("anchor graph: 40 anchors")  # no labels
    assert main(["graph", str(digits_npz), "--n-anchors", "5", "-q"]) == 2
    err = capsys.readouterr().err.strip()
    assert "needs at least n_clusters=10 anchors" in err and "\n" not in err


def test_fit_records_the_final_partition_and_final_clustering_sets_it(
        digits_npz: Path, tmp_path: Path) -> None:
    # 150 rows in 10 clusters: too few for the default's graph (75 anchors, 7.5 a cluster);
    # asked for, the graph is built and its agreement recorded
    for name, extra, expected, built in (
            ("default", [], {"kmeans"}, False),
            ("graph", ["--final-clustering", "graph"], {"graph", "kmeans"}, True),
            ("kmeans", ["--final-clustering", "kmeans"], {"kmeans"}, False)):
        out = tmp_path / name
        assert main(["fit", str(digits_npz), "--n-init", "2", "--out", str(out), "-q",
                     *extra]) == 0
        result = json.loads((out / "result.json").read_text())
        assert result["final_clustering"] in expected
        assert (result["final_graph_agreement"] is not None) == built
        assert (result["final_graph_clear"] is not None) == built
    paper = tmp_path / "paper"
    assert main(["fit", str(digits_npz), "--paper", "--n-init", "2", "--out", str(paper),
                 "-q"]) == 0
    assert json.loads((paper / "result.json").read_text())["final_clustering"] == "kmeans"


def test_fit_and_predict_simple_mkkm(digits_npz: Path, tmp_path: Path,
                                     capsys: pytest.CaptureFixture) -> None:
    """mkrk fit --method SimpleMKKM end to end: its own stop (the certified gap, not the
    other methods' --tol 1e-5), its certificate and H-steps in result.json, its saved model
    read by mkrk predict."""
    out = tmp_path / "simple"
    assert main(["fit", str(digits_npz), "--method", "SimpleMKKM", "--out", str(out),
                 "--n-init", "3", "-v"]) == 0
    printed = capsys.readouterr()  # -v: with the solver's diagnostics
    assert "SimpleMKKM: " in printed.out and "certified relative optimality gap" in printed.out
    result = json.loads((out / "result.json").read_text())
    assert result["method"] == "SimpleMKKM" and result["lam"] is None and result["Y"] is None
    assert not (out / "Y.npy").exists()
    gaps = result["optimality_gaps"]
    assert len(gaps) == result["n_iter"] and result["h_steps"] > result["n_iter"]
    assert result["converged"] and gaps[-1] <= 1e-4  # stopped by its gap_tol
    assert np.all(np.diff(result["objective_history"]) <= 0)
    labels = tmp_path / "labels.npy"
    assert main(["predict", str(out), str(digits_npz), "--out", str(labels), "-q"]) == 0
    np.testing.assert_array_equal(np.load(labels), np.load(out / "labels.npy"))
    # --tol given is used; --paper is the authors' weight step; lambda is refused
    assert main(["fit", str(digits_npz), "--method", "SimpleMKKM", "--paper", "--max-iter",
                 "3", "--tol", "1e-3", "--tol-mode", "absolute", "--out",
                 str(tmp_path / "paper"), "-q"]) == 0
    paper = json.loads((tmp_path / "paper" / "result.json").read_text())
    assert paper["final_step"] == "spectral" and len(paper["weights"]) == 12
    assert paper["n_iter"] <= 3
    capsys.readouterr()
    assert main(["fit", str(digits_npz), "--method", "SimpleMKKM", "--lam", "1", "-q"]) == 2
    assert "--lam does not apply to --method SimpleMKKM" in capsys.readouterr().err


def test_reproduce_takes_the_simple_mkkm_column(digits_npz: Path, tmp_path: Path) -> None:
    data_dir = tmp_path / "datasets"
    data_dir.mkdir()
    (data_dir / PAPER_DATASETS["usps"]).write_bytes(digits_npz.read_bytes())  # a stand-in
    out = tmp_path / "rep"
    assert main(["reproduce", "--datasets", "usps", "--data-dir", str(data_dir), "--repeats",
                 "2", "--methods", "SimpleMKKM", "--out", str(out), "--threads", "1",
                 "-q"]) == 0
    report = json.loads((out / "paper_table.json").read_text())
    assert report["methods"] == ["SB-KKM", "A-MKKM", "SimpleMKKM"]
    assert "| SimpleMKKM |" in (out / "paper_table.md").read_text()
    from mkrk_dask.cli.parser import build_parser
    from mkrk_dask.protocol import METHODS

    parse = build_parser().parse_args
    assert parse(["reproduce"]).methods == list(METHODS)  # Table 2 by default
    assert parse(["reproduce", "--methods", "all"]).methods == ["all"]


def test_equal_weights_are_not_called_a_selection():
    # "4 of 4 kernels selected" claimed a choice where every kernel kept the same weight
    from mkrk_dask.cli.demo import explain

    scores = {"acc": 0.5, "nmi": 0.5, "purity": 0.5}
    names = ["cosine", "g0.5", "g1", "g2"]
    equal = " ".join(explain(scores, np.full(4, 0.25), names, 1.0))
    assert "4 kernels keep equal weights: none was selected" in equal
    assert "of 4 kernels have a weight" not in equal
    chosen = " ".join(explain(scores, np.array([0.7, 0.1, 0.1, 0.1]), names, 2.0**-6))
    assert "of 4 kernels have a weight" in chosen and "keep equal weights" not in chosen


@pytest.mark.parametrize("flag", ["gram-rows", "final-rows"])
def test_row_samples_from_the_command_line(digits_npz: Path, capsys: pytest.CaptureFixture,
                                           flag: str) -> None:
    """--gram-rows and --final-rows reach the Nystrom options (the plan says so); a bad
    value is one line, exit 2."""
    what, option = flag.replace("-", " "), flag.replace("-", "_")
    common = ["fit", str(digits_npz), "--solver", "nystrom", "--n-landmarks", "40", "--plan"]
    assert main([*common, f"--{flag}", "100"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert f"{what}: a uniform sample of 100 (given:" in out
    assert main([*common, f"--{flag}", "none"]) == 0
    assert f"{what}: every row ({option}=None" in " ".join(capsys.readouterr().out.split())
    assert main([*common, f"--{flag}", "0"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].endswith(f"--{flag} must be 'auto', 'none' or an integer >= 1, got '0'")
