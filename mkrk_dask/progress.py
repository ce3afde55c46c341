"""Progress of long work: distributed passes and iterations of the loop, on standard error.

A :class:`Reporter` is active for a block of code (:func:`reporting`); the Dask plumbing
(:mod:`mkrk_dask.passes`) and the loop report to whichever is active, so that nothing below the
estimator needs to know about verbosity or streams. Levels: 0 silent; 1 one line per pass and
per iteration; 2 also every eigensolver pass and the cluster. Standard output stays clean for
results.
"""

from __future__ import annotations

import contextlib
import sys
import threading
import time
from collections.abc import Iterator
from contextvars import ContextVar
from typing import TextIO

__all__ = ["Reporter", "PassProgress", "reporting", "reporter"]


class PassProgress:
    """The progress of one pass of ``total`` tasks: a bar on a terminal, else a line every
    few seconds and one at the end."""

    _EVERY = 5.0

    def __init__(self, label: str, total: int, stream: TextIO | None):
        self.label, self.total, self.stream = label, total, stream
        self.done = 0
        self.start = self._last = time.perf_counter()
        self._tty = bool(stream is not None and getattr(stream, "isatty", lambda: False)())
        self._lock = threading.Lock()

    def advance(self, count: int = 1) -> None:
        if self.stream is None:
            return
        with self._lock:
            self.done += count
            now = time.perf_counter()
            if self._tty:
                width = 30
                filled = int(width * self.done / max(self.total, 1))
                self.stream.write(f"\r[dask] {self.label:<26s} [{'#' * filled:<{width}}] "
                                  f"{self.done}/{self.total} {now - self.start:6.1f}s")
                self.stream.flush()
            elif now - self._last > self._EVERY and self.done < self.total:
                self._last = now
                self.stream.write(f"[dask] {self.label:<26s} {self.done}/{self.total} tasks "
                                  f"so far, {now - self.start:.1f}s\n")
                self.stream.flush()

    def finish(self, state: str = "done") -> None:
        if self.stream is None:
            return
        with self._lock:
            erase = "\r\33[2K" if self._tty else ""
            self.stream.write(f"{erase}[dask] {self.label:<26s} {self.done}/{self.total} tasks "
                              f"{state} in {time.perf_counter() - self.start:.1f}s\n")
            self.stream.flush()


class Reporter:
    """Where progress goes: ``verbose`` (0, 1, 2) and a text stream (default stderr)."""

    def __init__(self, verbose: int = 1, stream: TextIO | None = None):
        self.verbose = int(verbose)
        self._stream = stream

    @property
    def stream(self) -> TextIO:
        return self._stream if self._stream is not None else sys.stderr

    def wants(self, level: int) -> bool:
        return self.verbose >= level > 0

    def log(self, message: str, level: int = 1) -> None:
        """One line, if the verbosity reaches ``level``."""
        if self.wants(level):
            self.stream.write(message + "\n")
            self.stream.flush()

    def task_pass(self, label: str, total: int, level: int = 1) -> PassProgress:
        """The progress of a pass; silent below ``level`` or for a single task."""
        shown = self.wants(level) and total >= 2
        return PassProgress(label, total, self.stream if shown else None)


_SILENT = Reporter(verbose=0)
_CURRENT: ContextVar[Reporter | None] = ContextVar("mkrk_dask_reporter", default=None)


def reporter() -> Reporter:
    """The active reporter (a silent one outside :func:`reporting`)."""
    return _CURRENT.get() or _SILENT


def is_active() -> bool:
    """True inside a :func:`reporting` block."""
    return _CURRENT.get() is not None


@contextlib.contextmanager
def reporting(verbose: int = 1, stream: TextIO | None = None) -> Iterator[Reporter]:
    """Report progress at ``verbose`` on ``stream`` (default stderr) within the block."""
    active = Reporter(verbose, stream)
    token = _CURRENT.set(active)
    try:
        yield active
    finally:
        _CURRENT.reset(token)
