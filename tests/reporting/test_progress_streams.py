"""Progress through logging and tqdm (issue 46): a long stage is never silent for 5 s, the
``mkrk_dask`` logger can be silenced or routed, and the command line shows progress on a
terminal (a real pseudo-terminal here) and never on a pipe."""

from __future__ import annotations

import fcntl
import io
import logging
import os
import pty
import re
import select
import struct
import subprocess
import sys
import termios
import time
from pathlib import Path

import numpy as np
import pytest
from sklearn.datasets import make_blobs

from mkrk_dask import progress


def _timed_lines(stream: io.StringIO, stamps: list[float]) -> io.StringIO:
    """A stream that records when each write came."""

    class Stamped(io.StringIO):
        def write(self, text: str) -> int:
            stamps.append(time.monotonic())
            return super().write(text)

    return Stamped()


def test_a_long_stage_is_never_silent_for_5_seconds():
    stamps: list[float] = []
    stream = _timed_lines(io.StringIO(), stamps)
    with progress.reporting(1, stream):
        start = time.monotonic()
        with progress.stage("[X] slow stage"):
            time.sleep(8.0)
        end = time.monotonic()
    text = stream.getvalue()
    assert "[X] slow stage: " in text and "so far" in text and "done in 8." in text
    times = [start, *stamps, end]
    assert max(np.diff(times)) < 5.0, np.diff(times)


def test_messages_are_records_of_the_mkrk_dask_logger(caplog: pytest.LogCaptureFixture):
    stream = io.StringIO()
    with progress.reporting(1, stream):
        progress.reporter().log("to the stream")
    assert stream.getvalue() == "to the stream\n"
    # silenced the usual way
    logger = logging.getLogger("mkrk_dask")
    logger.setLevel(logging.WARNING)
    try:
        with progress.reporting(2, stream):
            progress.reporter().log("not shown")
            progress.reporter().log("nor this", 2)
    finally:
        logger.setLevel(logging.NOTSET)
    assert "not shown" not in stream.getvalue() and "nor this" not in stream.getvalue()
    # routed the usual way: a handler of the user's gets the records, the stream none
    caught = []
    handler = logging.Handler()
    handler.emit = caught.append
    logger.addHandler(handler)
    try:
        with progress.reporting(1, stream):
            progress.reporter().log("routed")
    finally:
        logger.removeHandler(handler)
    assert [r.getMessage() for r in caught] == ["routed"] and caught[0].name == "mkrk_dask"
    assert "routed" not in stream.getvalue()


def test_estimator_progress_goes_through_logging(capsys: pytest.CaptureFixture):
    from mkrk_dask import MKKMRK

    X, _ = make_blobs(n_samples=300, centers=3, random_state=0)
    logging.getLogger("mkrk_dask").setLevel(logging.WARNING)
    try:
        MKKMRK(3, verbose=1, random_state=0).fit(X)
    finally:
        logging.getLogger("mkrk_dask").setLevel(logging.NOTSET)
    assert capsys.readouterr().err == ""
    MKKMRK(3, verbose=1, random_state=0).fit(X)
    err = capsys.readouterr().err
    assert "[MKKMRK] plan:" in err and "iter" in err


@pytest.fixture(scope="module")
def blobs_npz(tmp_path_factory: pytest.TempPathFactory) -> Path:
    X, y = make_blobs(n_samples=3000, centers=5, n_features=8, random_state=0)
    path = tmp_path_factory.mktemp("progress") / "blobs.npz"
    np.savez(path, X=X, y=y)
    return path


def _run_in_terminal(*argv: str, timeout: float = 240,
                     stdout: bool = False) -> tuple[int, bytes, list[float]]:
    """``mkrk ARGV`` with stderr (and with ``stdout``, stdout too) on a pseudo-terminal: the
    exit code, what the terminal showed, and when each piece came."""
    leader, follower = pty.openpty()
    # a terminal of 100 columns, as a user's (an unsized one reports 0)
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 30, 100, 0, 0))
    child = subprocess.Popen([sys.executable, "-m", "mkrk_dask.cli", *argv],
                             stdout=follower if stdout else subprocess.DEVNULL, stderr=follower,
                             stdin=subprocess.DEVNULL)
    os.close(follower)
    shown, stamps = b"", [time.monotonic()]
    deadline = stamps[0] + timeout
    while time.monotonic() < deadline:
        ready, _, _ = select.select([leader], [], [], 1.0)
        if ready:
            try:
                piece = os.read(leader, 65536)
            except OSError:  # the terminal closed: the command ended
                break
            if not piece:
                break
            shown += piece
            stamps.append(time.monotonic())
    else:
        child.kill()
    os.close(leader)
    return child.wait(timeout=30), shown, stamps


def test_cli_shows_progress_on_a_terminal(blobs_npz: Path):
    code, shown, stamps = _run_in_terminal("fit", str(blobs_npz), "-k", "5")
    text = shown.decode(errors="replace")
    assert code == 0, text
    assert "\r" in text and "[MKKMRK] fit: " in text  # tqdm's bar of the running stage
    assert "fitted in" in text
    # from the first line on (before it: Python's start and the imports, which
    # benchmarks/bench_startup.py measures)
    assert max(np.diff(stamps[1:])) < 5.0, np.diff(stamps[1:])


def test_cli_shows_no_progress_on_a_pipe(blobs_npz: Path, run_mkrk):
    run = run_mkrk("fit", str(blobs_npz), "-k", "5")
    assert run.returncode == 0, run.stderr
    assert "\r" not in run.stderr and "so far" not in run.stderr
    assert "fitting MKKM-RK" in run.stderr and "ACC" in run.stdout  # the messages stay


def test_no_line_of_mkrk_fit_on_a_terminal_is_over_100_characters(tmp_path: Path):
    """Issue 79: plan lines of 400+ characters; now every decision wraps onto continuation
    lines, and so do the summary and the command's own lines (stdout and stderr, the
    default verbosity, scikit-learn's digits)."""
    from sklearn.datasets import load_digits

    from mkrk_dask._text import LINE_WIDTH

    X, y = load_digits(return_X_y=True)
    np.savez(tmp_path / "digits.npz", X=X, y=y)
    code, shown, _ = _run_in_terminal("fit", str(tmp_path / "digits.npz"), "--out",
                                      str(tmp_path / "run"), stdout=True)
    text = shown.decode(errors="replace")
    assert code == 0, text
    assert "ACC" in text and "plan: MKKM-RK" in text and "results in" in text
    # what the terminal shows of each write between carriage returns, escapes dropped
    pieces = [re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", piece)
              for line in text.replace("\r\n", "\n").split("\n") for piece in line.split("\r")]
    assert max(len(piece) for piece in pieces) <= LINE_WIDTH, \
        max(pieces, key=len)
