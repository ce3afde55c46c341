"""Tests of mkrk_dask.protocol: the paper's Table 2 protocol on a small stand-in dataset (a
real file in a temporary data folder), checked against the library calls it is made of."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest
from sklearn.datasets import load_digits

import mkrk_dask
from mkrk_dask import MKKMRK, average_kernel_clustering, lambda_search
from mkrk_dask.backends.exact import ExactBackend
from mkrk_dask.datasets import PAPER_DATASETS
from mkrk_dask.kernels import paper_kernels
from mkrk_dask.metrics import clustering_scores
from mkrk_dask.protocol import (
    PAPER_TABLE,
    PROTOCOL_DIFFERENCES,
    find_datasets,
    render_markdown,
    run_protocol,
)
from mkrk_dask.protocol.methods import run_lmkkm, run_rmkkm
from mkrk_dask.search import summarize_scores

LAMS = [2.0**-15, 2.0**-5]


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A data folder holding a small labelled set under the file name of ``usps``."""
    X, y = load_digits(return_X_y=True)
    folder = tmp_path_factory.mktemp("datasets")
    np.savez(folder / PAPER_DATASETS["usps"], X=X[:120], y=y[:120])
    return folder


@pytest.fixture(scope="module")
def report(data_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[dict, Path]:
    out = tmp_path_factory.mktemp("out")
    result = run_protocol(["usps", "jaffe"], data_dir=data_dir, lams=LAMS, repeats=2, seed=0,
                          out=out, command="mkrk reproduce --test", library="test library")
    return result, out


def test_find_datasets(data_dir: Path) -> None:
    assert find_datasets(["USPS", "orl"], data_dir) == (["usps"], ["orl"])
    with pytest.raises(ValueError, match="unknown dataset"):
        find_datasets(["no_such_set"], data_dir)


def test_nothing_found_and_bad_repeats(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="none of"):
        run_protocol(["orl"], data_dir=tmp_path, lams=LAMS, repeats=2)
    with pytest.raises(ValueError, match="repeats"):
        run_protocol(["orl"], data_dir=tmp_path, repeats=0)


def test_report_files_and_layout(report: tuple[dict, Path]) -> None:
    result, out = report
    on_disk = json.loads((out / "paper_table.json").read_text())
    assert on_disk == json.loads(json.dumps(result))
    assert on_disk["kind"] == "mkrk-protocol" and on_disk["version"] == mkrk_dask.__version__
    assert on_disk["lams"] == LAMS and on_disk["repeats"] == 2
    assert [d["dataset"] for d in on_disk["datasets"]] == ["usps"]  # jaffe: not in the folder
    entry = on_disk["datasets"][0]
    assert entry["n_samples"] == 120 and entry["n_clusters"] == 10
    assert len(entry["kernel_names"]) == 12 and len(entry["SB-KKM"]["per_kernel"]) == 12
    rk = entry["MKKM-RK"]
    assert [p["lam"] for p in rk["per_lambda"]] == LAMS and rk["n_lambdas"] == 2
    assert rk["lam"] == LAMS[rk["best_index"]]
    best = max(p["summary"]["acc"]["best"] for p in rk["per_lambda"])
    assert rk["summary"]["acc"]["best"] == best
    sb = entry["SB-KKM"]
    assert sb["summary"]["acc"]["best"] == max(k["summary"]["acc"]["best"]
                                               for k in sb["per_kernel"])


def test_numbers_are_those_of_the_library_calls(report: tuple[dict, Path],
                                                data_dir: Path) -> None:
    """The protocol adds no arithmetic of its own: the same seeds through the library give
    the same weights and scores."""
    entry = report[0]["datasets"][0]
    data = np.load(data_dir / PAPER_DATASETS["usps"])
    X, y = data["X"].astype(np.float64), data["y"]
    found = lambda_search(MKKMRK.paper(n_clusters=10, random_state=0), X, LAMS, y, n_repeats=2,
                          random_state=0)
    for record, res in zip(entry["MKKM-RK"]["per_lambda"], found, strict=True):
        assert record["weights"] == res.weights.tolist()
        assert record["summary"] == summarize_scores(res.scores)
    backend = ExactBackend.from_views([X], paper_kernels())
    labels = average_kernel_clustering(backend, 10, 2, random_state=0)
    assert entry["A-MKKM"]["summary"] == summarize_scores(
        [clustering_scores(y, lab) for lab in labels])
    # RMKKM and LMKKM ran side by side on threads: the same as one after the other
    sequential = run_rmkkm(backend.kernels, y, 10, 2, 0)
    assert {**entry["RMKKM"], "per_gamma": None} == {**sequential, "per_gamma": None}
    for threaded, alone in zip(entry["RMKKM"]["per_gamma"], sequential["per_gamma"],
                               strict=True):
        assert {**threaded, "seconds": 0} == {**alone, "seconds": 0}
    assert entry["LMKKM"] == json.loads(json.dumps(run_lmkkm(backend.kernels, y, 10, 2, 0)))


def test_markdown_report(report: tuple[dict, Path]) -> None:
    result, out = report
    text = (out / "paper_table.md").read_text()
    assert text == render_markdown(result)
    lines = text.splitlines()
    assert lines[0] == "# The paper's Table 2: all seven methods"
    assert f"- command: `mkrk reproduce --test` (run from `{os.getcwd()}`)" in lines
    assert "- library: test library" in lines
    assert any(line.startswith("- machine: ") for line in lines)
    assert "## usps (n = 120, d = 64, k = 10)" in lines
    for method in ("SB-KKM", "A-MKKM", "MKKM-RK"):
        row = next(line for line in lines if line.startswith(f"| {method} |"))
        assert row.count("|") == 10 and "| – | – |" in row  # no paper figure for usps
    assert "The paper has no figures for this dataset." in lines
    assert "lambda in 2^-15 .. 2^-5 (2 values)" in text
    assert sum(line.startswith("| 2^-") for line in lines) == 2


def _render_one(entry: dict) -> str:
    return render_markdown({"command": "c", "started": "s", "finished": "f", "machine": "m",
                            "library": "l", "threads": 1, "load_start": 0.0, "load_end": 0.0,
                            "total_seconds": 3.0, "seed": 0, "repeats": 2, "lams": [0.001],
                            "datasets": [entry]})


def test_markdown_shows_the_paper_figures() -> None:
    """A dataset of the paper gets its Table 2 figures and our best minus them."""
    summary = {m: {"best": 0.5, "mean": 0.4, "std": 0.1} for m in ("acc", "nmi", "purity")}
    entry = {"dataset": "orl", "n_samples": 400, "n_features": 1024, "n_clusters": 40,
             "kernel_names": ["k0", "k1"],
             "seconds": {"SB-KKM": 1.0, "A-MKKM": 1.0, "MKKM-RK": 1.0, "kernels": 1.0,
                         "total": 3.0},
             "SB-KKM": {"summary": summary, "best_kernel": 1}, "A-MKKM": {"summary": summary},
             "MKKM-RK": {"summary": summary, "lam": 0.001, "n_iter": 3, "weights": [0.5, 0.5],
                         "iterations": [3], "max_iter_hits": 0, "n_lambdas": 1,
                         "max_qp_relative_gap": 0.0, "uncertified_qp_warnings": 0,
                         "grid_best": {"acc": 0.5, "nmi": 0.5, "purity": 0.5},
                         "per_lambda": [{"lam": 0.001, "n_iter": 3, "summary": summary,
                                         "n_selected": 2, "seconds": 1.0}]}}
    text = _render_one(entry)
    paper = PAPER_TABLE["orl"]["MKKM-RK"]
    row = next(line for line in text.splitlines() if line.startswith("| MKKM-RK |"))
    assert "/".join(f"{v:.2f}" for v in paper) in row
    assert f"{50 - paper[0]:+.2f}" in row and "| 0.001 | 3 |" in row
    assert "SB-KKM" in text and "kernel: k1" in text
    # every cell here is far from the paper: each method gets its note, with the deltas
    notes = [line for line in text.splitlines() if line.startswith("- ") and ": ACC " in line]
    assert [n.split(":")[0][2:] for n in notes] == ["SB-KKM", "A-MKKM", "MKKM-RK"]
    rk = PAPER_TABLE["orl"]["MKKM-RK"]
    assert notes[-1] == (f"- MKKM-RK: ACC {50 - rk[0]:+.2f}, NMI {50 - rk[1]:+.2f} (below the "
                         f"paper): {PROTOCOL_DIFFERENCES['MKKM-RK']}.")
    # a cell within 3 points gets no note
    near = {m: {"best": v / 100, "mean": v / 100, "std": 0.0}
            for m, v in zip(("acc", "nmi", "purity"), rk, strict=True)}
    entry["MKKM-RK"]["summary"] = near
    text = _render_one(entry)
    assert not any(line.startswith("- MKKM-RK:") for line in text.splitlines())
    # one metric above, one below: the note says which
    near["nmi"] = {"best": rk[1] / 100 + 0.05, "mean": 0.0, "std": 0.0}
    near["acc"] = {"best": rk[0] / 100 - 0.01, "mean": 0.0, "std": 0.0}
    note = next(line for line in _render_one(entry).splitlines()
                if line.startswith("- MKKM-RK:"))
    assert note.startswith("- MKKM-RK: ACC -1.00, NMI +5.00 (above in NMI, below in ACC): ")
    assert any(line.startswith("- SB-KKM:") for line in text.splitlines())


# --------------------------------------------------------------------------- SimpleMKKM


def test_simple_mkkm_is_a_column_after_table_2(data_dir: Path, tmp_path: Path) -> None:
    """SimpleMKKM runs only when named, after Table 2's columns, and its column is the
    estimator's fit on the kernels centred and normalised as its authors' demo does."""
    from mkrk_dask import SimpleMKKM
    from mkrk_dask.assignment import repeated_assignments
    from mkrk_dask.protocol import PROTOCOL_METHODS
    from mkrk_dask.protocol.methods import centred_kernels

    assert PROTOCOL_METHODS[:-1] == mkrk_dask.protocol.METHODS
    assert PROTOCOL_METHODS[-1] == "SimpleMKKM"
    report = run_protocol(["usps"], data_dir=data_dir, lams=LAMS, repeats=2, seed=0,
                          out=tmp_path, methods=["SimpleMKKM"])
    assert report["methods"] == ["SB-KKM", "A-MKKM", "SimpleMKKM"]
    entry = report["datasets"][0]
    assert not {"MKKM", "LMKKM", "RMKKM", "MKKM-MR", "MKKM-RK"} & set(entry)
    column = entry["SimpleMKKM"]

    data = np.load(data_dir / PAPER_DATASETS["usps"])
    X, y = data["X"].astype(np.float64), data["y"]
    kernels = centred_kernels(ExactBackend.from_views([X], paper_kernels()).kernels)
    model = SimpleMKKM.paper(10, kernels="precomputed", normalize=False,
                             random_state=0).fit(kernels)
    assert model.get_params()["direction"] == "reduced"
    np.testing.assert_allclose(column["weights"], model.weights_, rtol=0, atol=1e-12)
    assert column["objective_history"] == pytest.approx(model.objective_history_.tolist(),
                                                        rel=1e-12)
    assert column["n_iter"] == model.n_iter_ and column["h_steps"] == model.n_h_steps_
    assert column["converged"] == model.converged_
    assert column["optimality_gap"] == pytest.approx(model.optimality_gap_, rel=1e-9)
    assert np.all(np.diff(column["objective_history"]) <= 0)
    # the repeats are the final k-means on the estimator's H, with the protocol's seeds
    labels = repeated_assignments(model.embedding_, 10, 2, random_state=0)
    assert column["summary"] == summarize_scores([clustering_scores(y, lab) for lab in labels])

    text = render_markdown(report)
    lines = text.splitlines()
    assert lines[0] == ("# The paper's Table 2: SB-KKM, A-MKKM; and SimpleMKKM "
                        "(not in the paper)")
    rows = [line.split(" |")[0] for line in lines if line.startswith("| ")
            and line.split(" |")[0] in ("| SB-KKM", "| A-MKKM", "| SimpleMKKM")]
    assert rows == ["| SB-KKM", "| A-MKKM", "| SimpleMKKM"]  # after the Table 2 columns
    row = next(line for line in lines if line.startswith("| SimpleMKKM |"))
    assert "| – | – | – |" in row  # no published figure, no lambda
    assert any(line.startswith("SimpleMKKM (Liu et al., TPAMI 2023) is not in the paper's")
               for line in lines)
    note = next(line for line in lines if line.startswith("SimpleMKKM: "))
    assert f"{column['h_steps']} H-steps" in note


def test_default_protocol_runs_table_2_only_and_names_are_checked(report: tuple[dict, Path],
                                                                  data_dir: Path) -> None:
    entry = report[0]["datasets"][0]
    assert "SimpleMKKM" not in entry and report[0]["methods"] == list(mkrk_dask.protocol.METHODS)
    with pytest.raises(ValueError, match="unknown method.*SimpleMKKM"):
        run_protocol(["usps"], data_dir=data_dir, lams=LAMS, repeats=2, methods=["Simple"])
