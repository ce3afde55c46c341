"""The ``mkrk`` command line: help, outputs, errors and exit codes (real runs, small data)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from sklearn.datasets import load_digits

from mkrk_dask.cli import build_parser, main

COMMANDS = ("build", "fit", "search", "predict", "reproduce", "figures", "demo")
PNG = b"\x89PNG\r\n\x1a\n"


def run(*argv: str, timeout: float = 300) -> subprocess.CompletedProcess:
    """``mkrk ARGV`` in a subprocess (the console script's module)."""
    return subprocess.run([sys.executable, "-m", "mkrk_dask.cli", *argv], capture_output=True,
                          text=True, timeout=timeout)


@pytest.fixture(scope="module")
def digits(tmp_path_factory: pytest.TempPathFactory) -> Path:
    X, y = load_digits(return_X_y=True)
    path = tmp_path_factory.mktemp("data") / "digits.npz"
    np.savez(path, X=X[:150], y=y[:150])
    return path


def test_every_command_has_help_with_examples(capsys: pytest.CaptureFixture) -> None:
    assert main(["--help"]) == 0
    assert "examples" in capsys.readouterr().out
    for command in COMMANDS:
        assert main([command, "--help"]) == 0, command
        out = capsys.readouterr().out
        assert "examples:" in out and f"mkrk {command}" in out, command
    sub = build_parser()._subparsers._group_actions[0].choices
    assert set(COMMANDS) <= set(sub)


def test_fit_writes_every_output(digits: Path, tmp_path: Path,
                                 capsys: pytest.CaptureFixture) -> None:
    out = tmp_path / "run"
    assert main(["fit", str(digits), "--lam", "2^-15", "--out", str(out), "--n-init", "3"]) == 0
    printed = capsys.readouterr()
    assert "ACC" in printed.out and "iter   1" in printed.err  # per-iteration lines (a log)
    for name in ("labels.npy", "labels.csv", "weights.npy", "weights.csv", "Y.npy", "Y.csv",
                 "objective.npy", "objective.csv", "result.json", "metrics.json",
                 "model.joblib"):
        assert (out / name).is_file(), name
    result = json.loads((out / "result.json").read_text())
    assert result["n_clusters"] == 10 and result["solver"] == "exact"
    assert np.load(out / "labels.npy").shape == (150,)
    assert np.isclose(np.load(out / "weights.npy").sum(), 1.0)
    assert np.load(out / "Y.npy").shape == (12, 12)
    assert result["objective_history"] == np.load(out / "objective.npy").tolist()
    assert (out / "labels.csv").read_text().splitlines()[0] == "label"
    assert set(json.loads((out / "metrics.json").read_text())) == {"acc", "nmi", "purity"}
    # -q prints only the results
    assert main(["fit", str(digits), "-q", "--lam", "2^-15", "--n-init", "2"]) == 0
    assert capsys.readouterr().out.strip().startswith("ACC")


def test_config_file_sets_defaults(digits: Path, tmp_path: Path) -> None:
    config = tmp_path / "mkrk.toml"
    config.write_text('[fit]\nlam = 0.001\nmax-iter = 2\nn_init = 2\n')
    out = tmp_path / "run"
    assert main(["fit", str(digits), "--config", str(config), "-q", "--out", str(out)]) == 0
    result = json.loads((out / "result.json").read_text())
    assert result["lam"] == 0.001 and result["n_iter"] <= 2
    config.write_text("[fit]\nno_such_option = 1\n")
    assert main(["fit", str(digits), "--config", str(config)]) == 2


@pytest.mark.parametrize("argv, message", [
    (["fit", "/nonexistent/data.npz"], "neither a known dataset"),
    (["fit", "{digits}", "--lam=-1"], ">= 0"),
    (["fit", "{digits}", "--lam", "abc"], "cannot read lambda 'abc'"),
    (["fit", "{bad}"], "expected"),
    (["fit", "{digits}", "--solver", "magic"], "invalid choice"),
    (["search", "{digits}", "--lams", "2^x"], "cannot read lambda"),
    (["fit", "{digits}", "--scheduler", "tcp://127.0.0.1:1", "--solver", "blockwise",
      "--connect-timeout", "2"],
     "cannot reach the Dask scheduler"),
])
def test_user_errors_exit_2_with_one_line(argv: list[str], message: str, digits: Path,
                                          tmp_path: Path) -> None:
    bad = tmp_path / "bad.npz"
    np.savez(bad, A=np.zeros(3), B=np.ones(3))
    argv = [a.format(digits=digits, bad=bad) for a in argv]
    proc = run(*argv)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert message in lines[0] and "Traceback" not in proc.stderr


def test_exit_codes(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    assert main([]) == 2  # no command
    assert main(["fit"]) == 2  # missing DATA
    assert main(["no-such-command"]) == 2
    # An unexpected failure (here a results file with a missing field) is an internal error:
    # exit 1, one line, and --debug shows the traceback.
    broken = tmp_path / "broken.json"
    broken.write_text(json.dumps({"datasets": [{"dataset": "x", "MKKM-RK": {
        "per_lambda": [{"lam": 1.0}]}}]}))
    proc = run("figures", str(broken), "--out", str(tmp_path / "f"))
    assert proc.returncode == 1
    assert len(proc.stderr.strip().splitlines()) == 1 and "--debug" in proc.stderr
    proc = run("figures", str(broken), "--out", str(tmp_path / "f"), "--debug")
    assert proc.returncode == 1 and "Traceback" in proc.stderr


def test_search_then_figures(digits: Path, tmp_path: Path) -> None:
    results = tmp_path / "search.json"
    assert main(["search", str(digits), "--lams", "2^-15,2^-10,2^0", "--repeats", "2",
                 "--n-init", "2", "--out", str(results), "-q"]) == 0
    report = json.loads(results.read_text())
    per_lambda = report["datasets"][0]["MKKM-RK"]["per_lambda"]
    assert [p["lam"] for p in per_lambda] == [2.0**-15, 2.0**-10, 1.0]
    assert all(len(p["scores"]) == 2 and p["summary"]["acc"]["best"] > 0 for p in per_lambda)
    figures = tmp_path / "figs"
    assert main(["figures", str(results), "--out", str(figures), "-q"]) == 0
    pngs = sorted(figures.glob("*.png"))
    assert [p.name for p in pngs] == ["digits_fig1_sensitivity.png",
                                      "digits_fig2_representation.png",
                                      "digits_fig3_selected.png", "digits_fig4_objective.png"]
    assert all(p.read_bytes()[:8] == PNG for p in pngs)


def test_build_then_fit_reuses_store_and_nystrom_predict(digits: Path, tmp_path: Path,
                                                          capsys: pytest.CaptureFixture) -> None:
    pytest.importorskip("mkrk_dask.backends.nystrom",
                        reason="the Nystrom backend is not in this tree yet")
    store = tmp_path / "factors.zarr"
    common = ["--solver", "nystrom", "--n-landmarks", "60", "--chunk-size", "75",
              "--landmarks", "uniform"]
    assert main(["build", str(digits), "--store", str(store), *common]) == 0
    assert "built" in capsys.readouterr().out
    assert main(["build", str(digits), "--store", str(store), *common]) == 0
    assert "reused" in capsys.readouterr().out
    # fit opens the store only if every setting matches (the landmark scheme included);
    # a mismatch would be a StoreError and exit 1.
    out = tmp_path / "run"
    assert main(["fit", str(digits), "--store", str(store), *common, "--lam", "2^-15",
                 "--n-init", "3", "--out", str(out), "-q"]) == 0
    fitted = np.load(out / "labels.npy")
    labels = tmp_path / "pred.csv"
    assert main(["predict", str(out), str(digits), "--out", str(labels), "-q"]) == 0
    predicted = np.loadtxt(labels, skiprows=1, dtype=int)
    np.testing.assert_array_equal(predicted, fitted)  # predict on the training data
    # an exact model cannot predict new data: a user error
    exact = tmp_path / "exact"
    assert main(["fit", str(digits), "--lam", "2^-15", "--n-init", "2", "--out", str(exact),
                 "-q"]) == 0
    assert main(["predict", str(exact), str(digits)]) == 2
    assert "--solver nystrom" in capsys.readouterr().err


def test_ctrl_c_exits_130(digits: Path, tmp_path: Path) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "mkrk_dask.cli", "search", str(digits), "--repeats", "20",
         "--out", str(tmp_path / "s.json")],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env=dict(os.environ, PYTHONUNBUFFERED="1"))
    try:
        assert proc.stdout.readline().startswith("lambda search")  # it is running
        time.sleep(1.0)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 130, err
        assert "interrupted" in err
    finally:
        if proc.poll() is None:
            proc.kill()


def test_demo_runs_on_the_embedded_dask_cluster_and_matches_exact() -> None:
    blockwise = run("demo", "--n-samples", "300")
    exact = run("demo", "--n-samples", "300", "--solver", "exact")
    assert blockwise.returncode == 0, blockwise.stderr
    assert exact.returncode == 0, exact.stderr
    assert "backend blockwise" in blockwise.stdout and "backend exact" in exact.stdout

    def scores_and_weights(out: str) -> list[str]:
        # The ACC/NMI/purity line and the weight lines must agree between the two backends.
        return [line for line in out.splitlines()
                if line.startswith("ACC") or line.startswith("  ")]

    assert scores_and_weights(blockwise.stdout) == scores_and_weights(exact.stdout)
    assert scores_and_weights(exact.stdout)[0].startswith("ACC")
