"""Shared helpers for the benchmarks: peak memory of a process tree, timers, disk read rate,
and Markdown reports that record the exact command that produced them.

Not part of the library; imported by the scripts in ``benchmarks/``.
"""

from __future__ import annotations

import datetime as _dt
import os
import platform
import shlex
import sys
import threading
import time
from contextlib import contextmanager
from pathlib import Path

import psutil

__all__ = ["PeakRSS", "Timer", "timed", "command_line", "write_report", "fmt_bytes",
           "evict_from_page_cache", "read_rate", "dir_nbytes"]

RESULTS = Path(__file__).resolve().parent / "results"


class PeakRSS:
    """Peak resident memory of a process and all its descendants, sampled by a thread.

    The sum of RSS over the tree is sampled every ``interval`` seconds (shared pages are counted
    once per process, so the figure is an upper bound). Use as a context manager, or call
    :meth:`start` / :meth:`stop`. ``peak`` is in bytes.
    """

    def __init__(self, pid: int | None = None, interval: float = 0.1):
        self.pid = os.getpid() if pid is None else pid
        self.interval = interval
        self.peak = 0
        self.samples = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def current(self) -> int:
        try:
            root = psutil.Process(self.pid)
            procs = [root] + root.children(recursive=True)
        except psutil.NoSuchProcess:
            return 0
        total = 0
        for proc in procs:
            try:
                total += proc.memory_info().rss
            except (psutil.NoSuchProcess, psutil.AccessDenied):
                pass
        return total

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, self.current())
            self.samples += 1
            self._stop.wait(self.interval)

    def start(self) -> PeakRSS:
        self._thread = threading.Thread(target=self._run, daemon=True, name="peak-rss")
        self._thread.start()
        return self

    def stop(self) -> int:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self.peak = max(self.peak, self.current())
        return self.peak

    def __enter__(self) -> PeakRSS:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


class Timer:
    """Wall-clock seconds of named phases: ``with timer("build"): ...``; ``timer.seconds``."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}

    @contextmanager
    def __call__(self, name: str):
        start = time.perf_counter()
        try:
            yield
        finally:
            self.seconds[name] = self.seconds.get(name, 0.0) + time.perf_counter() - start


@contextmanager
def timed(out: dict, name: str):
    start = time.perf_counter()
    try:
        yield
    finally:
        out[name] = time.perf_counter() - start


def command_line() -> str:
    """The command that is running, as it could be typed again."""
    return " ".join(shlex.quote(a) for a in ["python"] + sys.argv)


def fmt_bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.2f} {unit}" if unit != "B" else f"{int(n)} B"
        n /= 1024
    return f"{n:.2f} TiB"


def dir_nbytes(path: str | os.PathLike) -> int:
    return sum(f.stat().st_size for f in Path(path).rglob("*") if f.is_file())


def evict_from_page_cache(path: str | os.PathLike) -> None:
    """Ask the kernel to drop the page cache of every file under ``path``
    (``posix_fadvise(DONTNEED)``; needs no privileges, clean pages only)."""
    files = [Path(path)] if Path(path).is_file() else Path(path).rglob("*")
    for f in files:
        if f.is_file():
            fd = os.open(f, os.O_RDONLY)
            try:
                os.fdatasync(fd) if hasattr(os, "fdatasync") else None
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            finally:
                os.close(fd)


def read_rate(path: str | os.PathLike, *, cold: bool, max_bytes: int | None = None,
              block: int = 8 * 2**20) -> tuple[float, int, float]:
    """Read the files under ``path`` sequentially with plain ``read`` calls.

    Returns (bytes per second, bytes read, seconds). ``cold=True`` evicts them from the page
    cache first, so the figure is the disk's; ``cold=False`` measures whatever is cached.
    """
    files = sorted(f for f in Path(path).rglob("*") if f.is_file())
    if cold:
        evict_from_page_cache(path)
    total = 0
    start = time.perf_counter()
    for f in files:
        with open(f, "rb", buffering=0) as handle:
            while chunk := handle.read(block):
                total += len(chunk)
        if max_bytes is not None and total >= max_bytes:
            break
    seconds = time.perf_counter() - start
    return total / seconds, total, seconds


def machine() -> str:
    mem = psutil.virtual_memory().total
    return (f"{platform.node()}: {os.cpu_count()} cores, {fmt_bytes(mem)} RAM, "
            f"Python {platform.python_version()}, {platform.platform()}")


def write_report(name: str, title: str, body: str, *, started: _dt.datetime) -> Path:
    """Write ``benchmarks/results/<name>.md`` with the command line, timestamps and machine."""
    RESULTS.mkdir(parents=True, exist_ok=True)
    finished = _dt.datetime.now().astimezone()
    header = (f"# {title}\n\n"
              f"- command: `{command_line()}` (run from `{os.getcwd()}`)\n"
              f"- started {started.isoformat(timespec='seconds')}, finished "
              f"{finished.isoformat(timespec='seconds')}\n"
              f"- machine: {machine()}\n"
              f"- every figure below was measured in this run\n\n")
    path = RESULTS / f"{name}.md"
    path.write_text(header + body.rstrip() + "\n")
    return path
