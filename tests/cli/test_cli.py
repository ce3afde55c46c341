"""The ``mkrk`` entry point (mkrk_dask.cli.main): exit codes, one-line errors, interruption,
and the console script (real runs, small data)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from importlib.metadata import entry_points
from pathlib import Path

import numpy as np
import pytest

import mkrk_dask.cli.commands
from mkrk_dask.cli import EXIT_INTERNAL, EXIT_USER, main


@pytest.mark.parametrize("argv, message", [
    (["fit", "/nonexistent/data.npz"], "neither a known dataset"),
    (["fit", "{digits}", "--lam=-1"], ">= 0"),
    (["fit", "{digits}", "--lam", "abc"], "cannot read lambda 'abc'"),
    (["fit", "{bad}"], "expected"),
    (["fit", "{digits}", "--solver", "magic"], "invalid choice"),
    (["search", "{digits}", "--lams", "2^x"], "cannot read lambda"),
    (["fit", "{digits}", "--n-components", "0"], "'auto' or a positive integer expected"),
    (["fit", "{digits}", "--final-step", "kmeans"], "invalid choice"),
    (["fit", "{digits}", "--scheduler", "tcp://127.0.0.1:1", "--solver", "blockwise",
      "--connect-timeout", "2"],
     "cannot reach the Dask scheduler"),
])
def test_user_errors_exit_2_with_one_line(argv: list[str], message: str, digits_npz: Path,
                                          tmp_path: Path, run_mkrk) -> None:
    bad = tmp_path / "bad.npz"
    np.savez(bad, A=np.zeros(3), B=np.ones(3))
    argv = [a.format(digits=digits_npz, bad=bad) for a in argv]
    proc = run_mkrk(*argv)
    assert proc.returncode == 2, proc.stderr
    # The log lines before it (stderr at the default verbosity) aside, one line of error.
    lines = proc.stderr.strip().splitlines()
    errors = [line for line in lines if ": error: " in line]
    assert errors == lines[-1:], proc.stderr
    assert message in lines[-1] and "Traceback" not in proc.stderr and proc.stdout == ""


def test_exit_codes(tmp_path: Path, run_mkrk) -> None:
    assert main([]) == 2  # no command
    assert main(["fit"]) == 2  # missing DATA
    assert main(["no-such-command"]) == 2
    # An unexpected failure (here a results file with a missing field) is an internal error:
    # exit 1, one line, and --debug shows the traceback.
    broken = tmp_path / "broken.json"
    broken.write_text(json.dumps({"datasets": [{"dataset": "x", "MKKM-RK": {
        "per_lambda": [{"lam": 1.0}]}}]}))
    proc = run_mkrk("figures", str(broken), "--out", str(tmp_path / "f"))
    assert proc.returncode == 1
    assert len(proc.stderr.strip().splitlines()) == 1 and "--debug" in proc.stderr
    proc = run_mkrk("figures", str(broken), "--out", str(tmp_path / "f"), "--debug")
    assert proc.returncode == 1 and "Traceback" in proc.stderr


def test_error_classes_map_to_exit_codes(monkeypatch: pytest.MonkeyPatch,
                                         capsys: pytest.CaptureFixture) -> None:
    """The command's exception decides the exit code; the message is one line."""
    def raising(error: BaseException):
        def command(args):
            raise error
        return command

    cases = [(ValueError("bad\nvalue"), EXIT_USER, "error: bad value"),
             (FileNotFoundError("gone"), EXIT_USER, "error: gone"),
             (RuntimeError("boom"), EXIT_INTERNAL, "internal error (RuntimeError): boom"),
             (KeyboardInterrupt(), 130, "interrupted")]
    for error, code, message in cases:
        monkeypatch.setitem(mkrk_dask.cli.commands.COMMANDS, "demo", raising(error))
        assert main(["demo"]) == code
        err = capsys.readouterr().err
        assert message in err and len(err.strip().splitlines()) == 1, err


def test_console_script_is_main() -> None:
    (script,) = [e for e in entry_points(group="console_scripts") if e.name == "mkrk"]
    assert script.value == "mkrk_dask.cli:main"
    assert script.load() is main


def test_ctrl_c_exits_130(digits_npz: Path, tmp_path: Path) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "mkrk_dask.cli", "search", str(digits_npz), "--repeats", "20",
         "--out", str(tmp_path / "s.json")],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env=dict(os.environ, PYTHONUNBUFFERED="1"),
        # as from a terminal: a test run started in the background (``cmd &`` in a script)
        # hands its children SIGINT ignored, and Python then installs no handler for it
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        assert proc.stderr.readline().startswith("lambda search")  # it is running
        time.sleep(1.0)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 130, err
        assert "interrupted" in err
    finally:
        if proc.poll() is None:
            proc.kill()


def test_a_missing_data_file_says_what_to_do_and_never_prints_none(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture) -> None:
    """No data folder anywhere (MKRK_DATASETS unset, no ../shared/datasets): the one-line
    error names the variable and the options of both contexts, and no folder "None"."""
    import mkrk_dask.datasets as datasets

    nowhere = tmp_path / "a" / "shared" / "datasets"
    monkeypatch.delenv("MKRK_DATASETS", raising=False)
    monkeypatch.setattr(datasets, "data_dir_candidates", lambda: [nowhere])
    monkeypatch.chdir(tmp_path)
    for data in ("absent.npz", "jaffe"):
        assert main(["fit", data, "-q"]) == EXIT_USER
        lines = capsys.readouterr().err.strip().splitlines()
        assert len(lines) == 1 and "None" not in lines[0], lines
        assert all(hint in lines[0] for hint in ("MKRK_DATASETS", "--data-dir", "data_dir="))
    assert str(nowhere) in lines[0]  # jaffe: where it looked
    # With a data folder, the error names it (and a path that is absolute, only the path).
    folder = tmp_path / "data"
    folder.mkdir()
    monkeypatch.setenv("MKRK_DATASETS", str(folder))
    assert main(["fit", "absent.npz", "-q"]) == EXIT_USER
    line = capsys.readouterr().err.strip()
    assert f"in the data folder {folder}" in line and "None" not in line
    assert main(["fit", str(tmp_path / "absent.npz"), "-q"]) == EXIT_USER
    line = capsys.readouterr().err.strip()
    assert "data folder" not in line and "None" not in line


@pytest.mark.parametrize("verbosity, shown", [(1, False), (3, True)])
def test_dask_log_lines_only_from_vvv_whatever_the_import_order(verbosity: int,
                                                                 shown: bool) -> None:
    """distributed resets its loggers' levels when it is imported, after the command line
    has set them; a log record with a traceback (what a killed scheduler gave) must still
    stay off stderr below -vvv."""
    code = (
        "import logging, sys\n"
        "from mkrk_dask.cli import _quiet_logs\n"
        f"_quiet_logs({verbosity})\n"
        "import distributed\n"
        "try:\n"
        "    raise OSError('stream closed')\n"
        "except OSError:\n"
        "    logging.getLogger('distributed.batched').exception('Error in batched write')\n"
        "logging.getLogger('distributed.client').error('client error')\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert ("Traceback" in proc.stderr and "client error" in proc.stderr) == shown
    assert (proc.stderr == "") == (not shown), proc.stderr
