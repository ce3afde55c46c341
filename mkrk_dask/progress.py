"""Progress of long work, through the ecosystem's tools: messages go to the ``mkrk_dask``
:mod:`logging` logger, progress bars are :mod:`tqdm`'s.

A :class:`Reporter` is active for a block of code (:func:`reporting`); the Dask plumbing
(:mod:`mkrk_dask.passes`) and the loop report to whichever is active, so that nothing below the
estimator needs to know about verbosity or streams. Levels: 0 silent; 1 one line per pass, per
iteration and per long stage; 2 also every eigensolver pass and the cluster. Standard output
stays clean for results.

Routing: messages are records of the ``mkrk_dask`` logger (INFO for level 1, DEBUG for level
2). While a report is active and that logger has no handler of its own, they are written to
the report's stream (default stderr); give the logger a handler to route them elsewhere, or
``logging.getLogger("mkrk_dask").setLevel(logging.WARNING)`` to silence them.

Progress: on a terminal, tqdm bars (a pass's tasks; a long stage's elapsed time); elsewhere
(a file, a notebook's captured stream) a line when no other has come for
:data:`HEARTBEAT` seconds, so that a long stage is never silent. ``progress=False`` (the
command line on a pipe) shows none of them, only the messages.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import threading
import time
from collections.abc import Iterator
from contextvars import ContextVar
from typing import Any, TextIO

__all__ = ["Reporter", "PassProgress", "reporting", "reporter", "is_active", "stage", "LOGGER",
           "HEARTBEAT"]

#: the library's logger: every message of a report is one of its records
LOGGER = logging.getLogger("mkrk_dask")
#: at most this many seconds between two updates of an active report with progress (less
#: than the 5 s a user waits before wondering whether anything is happening)
HEARTBEAT = 3.0


def _is_terminal(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):  # no isatty, or a closed stream
        return False


def _bar_options(stream: Any) -> dict:
    """tqdm's options for a bar on ``stream``: the terminal's width, or 80 columns where the
    terminal says 0 (a pseudo-terminal nobody sized, where tqdm would draw nothing)."""
    try:
        width = os.get_terminal_size(stream.fileno()).columns
    except (AttributeError, ValueError, OSError):
        width = 0
    return {"file": stream, "leave": False, "dynamic_ncols": width > 0,
            "ncols": None if width > 0 else 80}


class _StreamHandler(logging.Handler):
    """The report's stream (stderr looked up at each record, so a replaced sys.stderr is
    honoured); on a terminal through ``tqdm.write``, which keeps the bars below the text."""

    def __init__(self, report: Reporter):
        super().__init__(logging.DEBUG)
        self.report = report
        self.setFormatter(logging.Formatter("%(message)s"))

    def emit(self, record: logging.LogRecord) -> None:
        try:
            text = self.format(record)
            stream = self.report.stream
            if self.report.bars:
                from tqdm import tqdm

                tqdm.write(text, file=stream)
            else:
                stream.write(text + "\n")
                stream.flush()
        except Exception:  # noqa: BLE001 - logging's contract: a handler never raises
            self.handleError(record)


class PassProgress:
    """The progress of one pass of ``total`` tasks: a tqdm bar on a terminal, else a line
    when the report has been quiet for :data:`HEARTBEAT` seconds, and one at the end."""

    def __init__(self, label: str, total: int, report: Reporter | None):
        self.label, self.total, self.report = label, total, report
        self.done = 0
        self.start = time.perf_counter()
        self._lock = threading.Lock()
        self._bar = None
        if report is not None and report.bars:
            from tqdm import tqdm

            self._bar = tqdm(total=total, desc=f"[dask] {label}", unit="task",
                             **_bar_options(report.stream))

    def advance(self, count: int = 1) -> None:
        if self.report is None:
            return
        with self._lock:
            self.done += count
            if self._bar is not None:
                self._bar.update(count)
                self.report.touch()
            elif self.report.quiet_for() > HEARTBEAT and self.done < self.total:
                self.report.note(f"[dask] {self.label}: {self.done}/{self.total} tasks so far, "
                                 f"{time.perf_counter() - self.start:.1f}s")

    def finish(self, state: str = "done") -> None:
        if self.report is None:
            return
        with self._lock:
            if self._bar is not None:
                self._bar.close()
                self._bar = None
            self.report.log(f"[dask] {self.label:<26s} {self.done}/{self.total} tasks "
                            f"{state} in {time.perf_counter() - self.start:.1f}s")


class Reporter:
    """Where progress goes: ``verbose`` (0, 1, 2), a text stream (default stderr) and whether
    to show progress (bars, heartbeats) besides the messages (default: yes)."""

    def __init__(self, verbose: int = 1, stream: TextIO | None = None,
                 progress: bool = True):
        self.verbose = int(verbose)
        self._stream = stream
        self.progress = bool(progress) and self.verbose > 0
        self._last = time.monotonic()
        self._stages: list[tuple[str, float]] = []
        self._stage_bar = None
        self._lock = threading.RLock()

    @property
    def stream(self) -> TextIO:
        return self._stream if self._stream is not None else sys.stderr

    @property
    def bars(self) -> bool:
        """tqdm bars: progress on a terminal."""
        return self.progress and _is_terminal(self.stream)

    def wants(self, level: int) -> bool:
        return self.verbose >= level > 0

    def touch(self) -> None:
        """Something was shown now."""
        self._last = time.monotonic()

    def quiet_for(self) -> float:
        """Seconds since anything was shown."""
        return time.monotonic() - self._last

    def log(self, message: str, level: int = 1) -> None:
        """One message (a record of the ``mkrk_dask`` logger), if the verbosity reaches
        ``level``."""
        if self.wants(level):
            LOGGER.log(logging.INFO if level <= 1 else logging.DEBUG, message)
            self.touch()

    def note(self, message: str) -> None:
        """A progress line (not on a terminal, where the bars say it; not without progress)."""
        if self.progress and not self.bars:
            self.log(message)

    def task_pass(self, label: str, total: int, level: int = 1) -> PassProgress:
        """The progress of a pass; silent below ``level`` or for a single task."""
        shown = self.wants(level) and total >= 2
        return PassProgress(label, total, self if shown else None)

    # -- long stages ----------------------------------------------------------------------

    @contextlib.contextmanager
    def stage(self, name: str) -> Iterator[None]:
        """A long client-side stage (embedding, k-means, graph): while it runs, a bar with
        its elapsed time on a terminal, else a line whenever the report has been quiet for
        :data:`HEARTBEAT` seconds; at the end, its time."""
        if not self.wants(1):
            yield
            return
        start = time.perf_counter()
        with self._lock:
            self._stages.append((name, start))
            self._show_stage()
        try:
            yield
        finally:
            with self._lock:
                self._stages.remove((name, start))
                self._show_stage()
            seconds = time.perf_counter() - start
            if seconds >= 1.0:  # a quick stage needs no line of its own
                self.log(f"{name}: done in {seconds:.1f}s")

    def _show_stage(self) -> None:
        """The bar of the innermost running stage (terminal only)."""
        if self._stage_bar is not None:
            self._stage_bar.close()
            self._stage_bar = None
        if self._stages and self.bars:
            from tqdm import tqdm

            self._stage_bar = tqdm(total=None, desc=self._stage_text(), bar_format="{desc}",
                                   **_bar_options(self.stream))

    def _stage_text(self) -> str:
        name, start = self._stages[-1]
        return f"{name}: {time.perf_counter() - start:.0f}s"

    def _beat(self) -> None:
        """Called every second by the heartbeat thread."""
        with self._lock:
            if not self._stages:
                return
            if self._stage_bar is not None:
                self._stage_bar.set_description_str(self._stage_text())  # redraws it
                self.touch()
            elif self.quiet_for() >= HEARTBEAT:
                self.log(f"{self._stage_text()} so far")

    def _close(self) -> None:
        with self._lock:
            self._stages.clear()
            self._show_stage()


_SILENT = Reporter(verbose=0)
_CURRENT: ContextVar[Reporter | None] = ContextVar("mkrk_dask_reporter", default=None)


def reporter() -> Reporter:
    """The active reporter (a silent one outside :func:`reporting`)."""
    return _CURRENT.get() or _SILENT


def is_active() -> bool:
    """True inside a :func:`reporting` block."""
    return _CURRENT.get() is not None


def stage(name: str) -> contextlib.AbstractContextManager:
    """:meth:`Reporter.stage` of the active reporter."""
    return reporter().stage(name)


@contextlib.contextmanager
def _heartbeat(report: Reporter) -> Iterator[None]:
    """A daemon thread that keeps a running stage visible (see :meth:`Reporter.stage`)."""
    stop = threading.Event()

    def beat() -> None:
        while not stop.wait(1.0):
            report._beat()

    thread = threading.Thread(target=beat, name="mkrk-progress", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(timeout=5)
        report._close()


@contextlib.contextmanager
def reporting(verbose: int = 1, stream: TextIO | None = None,
              progress: bool = True) -> Iterator[Reporter]:
    """Report at ``verbose`` on ``stream`` (default stderr) within the block: messages through
    the ``mkrk_dask`` logger, and with ``progress`` bars or heartbeat lines too."""
    active = Reporter(verbose, stream, progress)
    token = _CURRENT.set(active)
    handler = None
    level = LOGGER.level
    if active.verbose > 0 and not LOGGER.handlers:
        # The user routed nothing: the messages go to the report's stream (and not also to
        # the root logger's handlers, which would print them twice).
        handler = _StreamHandler(active)
        LOGGER.addHandler(handler)
        LOGGER.propagate = False
    if active.verbose > 0 and level == logging.NOTSET:
        LOGGER.setLevel(logging.DEBUG)  # the verbosity decides; a level the user set stays
    try:
        with _heartbeat(active) if active.progress else contextlib.nullcontext():
            yield active
    finally:
        _CURRENT.reset(token)
        if handler is not None:
            LOGGER.removeHandler(handler)
            LOGGER.propagate = True
        LOGGER.setLevel(level)
