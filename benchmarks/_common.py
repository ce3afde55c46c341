"""What every benchmark shares: where reports go and the one header they start with, the state
of the library, peak memory of a process tree, disk read rates, the clustering scores of an
embedding, and the plain reference implementation (kept with the tests).

Not part of the library; imported by the scripts beside it (``python benchmarks/bench_x.py``
puts this folder on ``sys.path``). Reports are grouped by topic under ``benchmarks/results/``
(``results/README.md`` is the index); set ``MKRK_BENCH_RESULTS`` to write them elsewhere, e.g.
for a quick check that a benchmark still runs.
"""

from __future__ import annotations

import argparse
import datetime as dt
import hashlib
import importlib.util
import os
import shlex
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import psutil

import mkrk_dask
from mkrk_dask.assignment import repeated_assignments
from mkrk_dask.kernel_widths import sample_rows
from mkrk_dask.metrics import clustering_accuracy, normalized_mutual_info
from mkrk_dask.results import machine_line, report_header, write_text

__all__ = ["RESULTS", "TOPICS", "results_dir", "command_line", "library_state", "now",
           "write_report", "PeakRSS", "measured_child", "fmt_bytes", "dir_nbytes",
           "evict_from_page_cache", "read_rate", "scores", "median_rbf_gamma",
           "reference_implementation", "load_or_skip", "dense_views", "blob_data", "BLOB_ROWS",
           "dataset_seed_parser", "positive_args"]

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
#: the topic folders of ``results/`` (see ``results/README.md``)
TOPICS = ("paper", "exact", "blockwise", "nystrom", "scale", "datasets", "defaults", "cli")
_RESULTS_ENV = "MKRK_BENCH_RESULTS"
# The one place that knows where the tests live (see reference_implementation).
_TESTS = HERE.parent / "tests"


# --------------------------------------------------------------------------- reports


def results_dir(topic: str) -> Path:
    """The folder of a topic's reports (``$MKRK_BENCH_RESULTS/<topic>`` when that is set)."""
    if topic not in TOPICS:
        raise ValueError(f"unknown report topic {topic!r}; one of {TOPICS}")
    root = os.environ.get(_RESULTS_ENV)
    return (Path(root) if root else RESULTS) / topic


def command_line() -> str:
    """The command that is running, as it could be typed again."""
    return " ".join(shlex.quote(a) for a in ["python", *sys.argv])


def now() -> dt.datetime:
    """The local time, with its zone (a report's start and finish)."""
    return dt.datetime.now().astimezone()


def library_state() -> str:
    """The library's version and git commit, and which of its files differ from that commit
    (each with a short hash), so that a report says exactly what code measured it."""
    root = Path(mkrk_dask.__file__).resolve().parent.parent
    version = f"mkrk-dask {mkrk_dask.__version__}"
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=root,
                              capture_output=True, text=True, check=True).stdout.strip()
        status = subprocess.run(["git", "status", "--porcelain", "--", "mkrk_dask"], cwd=root,
                                capture_output=True, text=True, check=True).stdout.split("\n")
    except (OSError, subprocess.CalledProcessError):
        return f"{version}, not a git checkout"
    dirty = []
    for line in status:
        if line.strip() and line[3:].endswith(".py"):
            digest = hashlib.sha256((root / line[3:]).read_bytes()).hexdigest()[:10]
            dirty.append(f"{line[3:]} ({line[:2].strip()}, sha256 {digest})")
    return (f"{version}, git {head}"
            + (f"; uncommitted: {', '.join(dirty)}" if dirty else "; clean"))


def write_report(topic: str, name: str, title: str, body: str, *, started: dt.datetime,
                 path: str | os.PathLike[str] | None = None) -> Path:
    """Write ``results/<topic>/<name>.md`` (or ``path``): the common header, then ``body``."""
    target = Path(path) if path is not None else results_dir(topic) / f"{name}.md"
    header = report_header(title, command=command_line(), directory=os.getcwd(),
                           started=started.isoformat(timespec="seconds"),
                           finished=now().isoformat(timespec="seconds"),
                           machine=machine_line(), library=library_state())
    return write_text(target, header + body.rstrip() + "\n")


# --------------------------------------------------------------------------- measuring


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


def measured_child(cmd: list[str], *, env: dict | None = None,
                   timeout: float | None = None) -> dict:
    """Run ``cmd`` as a fresh process (in its own session) and sample its tree's peak RSS.

    Returns ``code`` (None when stopped), ``wall`` seconds, ``peak_rss`` bytes and
    ``timed_out``. After ``timeout`` seconds the whole process group is killed, so that a
    method that runs too long is reported as such instead of holding up the run.
    """
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, env=env, start_new_session=True)
    timed_out = False
    with PeakRSS(proc.pid) as peak:
        try:
            code = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            timed_out, code = True, None
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    return dict(code=code, wall=time.perf_counter() - t0, peak_rss=peak.peak,
                timed_out=timed_out)


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


# --------------------------------------------------------------------------- scoring


def scores(y: np.ndarray, H: np.ndarray, k: int, repeats: int,
           seed: int) -> tuple[float, float]:
    """Mean NMI and ACC (percent) of ``repeats`` final k-means runs on the embedding ``H``,
    seeded as the library's protocol seeds them (the same seeds for every backend)."""
    labels = repeated_assignments(H, k, repeats, random_state=seed)
    nmi = [normalized_mutual_info(y, lab) for lab in labels]
    acc = [clustering_accuracy(y, lab) for lab in labels]
    return 100 * np.mean(nmi), 100 * np.mean(acc)


def median_rbf_gamma(X: Any) -> float:
    """The peers' rbf width: 1 / the median squared distance between the rows of a uniform
    sample of X (``mkrk_dask.kernel_widths.sample_rows``: numpy, dask or Zarr)."""
    sample = sample_rows(X)
    sample = sample.toarray() if hasattr(sample, "toarray") else sample  # CSR for sparse X
    sq = np.sum(sample**2, axis=1)
    d2 = np.maximum(sq[:, None] + sq[None, :] - 2 * sample @ sample.T, 0)
    return 1.0 / float(np.median(d2[np.triu_indices(len(sample), 1)]))


def reference_implementation() -> ModuleType:
    """The plain dense reference implementation, ``tests/reference_mkkmrk.py``.

    It lives with the tests, which check the library against it; the iteration benchmark
    times the library against the same code, imported from there (not copied).
    """
    name = "reference_mkkmrk"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, _TESTS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # its dataclasses look their module up while being made
    spec.loader.exec_module(module)
    return module


#: idle time before each timed side of an exact-backend benchmark: OpenBLAS's worker threads
#: busy-wait for a while after a threaded call, and on 2 cores one side's would otherwise take
#: the core of the other side's next call
SETTLE_SECONDS = 0.5


def exact_benchmark_parser(description: str, *, lam: float, repeats: int,
                           report: str) -> argparse.ArgumentParser:
    """The arguments every exact-backend benchmark on a paper dataset takes (its own are
    added by the caller): the dataset, lambda, repeats, the BLAS thread limits to measure in
    turn and the report's path (``exact/<report>.md``)."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--data-dir", default=None, help="folder with the datasets")
    parser.add_argument("--dataset", default="coil20")
    parser.add_argument("--lam", type=float, default=lam)
    parser.add_argument("--repeats", type=int, default=repeats)
    parser.add_argument("--threads", default="default",
                        help="comma list of BLAS/OpenMP thread limits to measure in turn, "
                             "e.g. 'default,1' (threadpoolctl)")
    parser.add_argument("--out", default=str(results_dir("exact") / f"{report}.md"))
    return parser


def dataset_seed_parser(description: str, datasets: Sequence[str],
                        seeds: int) -> argparse.ArgumentParser:
    """The arguments of a benchmark run per data set and seed (its own are added by the
    caller): ``--datasets`` and ``--seeds``; :func:`positive_args` parses them."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--datasets", nargs="+", default=list(datasets))
    parser.add_argument("--seeds", type=int, default=seeds)
    return parser


def positive_args(parser: argparse.ArgumentParser, *names: str) -> argparse.Namespace:
    """The parsed arguments, with a one-line usage error where one of ``names`` (an integer
    or a list of them) is below 1."""
    args = parser.parse_args()
    values = [v for name in names for v in np.atleast_1d(getattr(args, name))]
    if min(values) < 1:
        flags = " and ".join(f"--{name}" for name in names)
        parser.error(f"{flags} take positive integers" if len(names) > 1
                     else f"{flags} takes a positive integer")
    return args


def thread_limits(spec: str) -> list[tuple[str, int | None]]:
    """``"default,1"`` -> ``[("default", None), ("1", 1)]``: threadpoolctl limits."""
    return [(s, None if s == "default" else int(s)) for s in spec.split(",")]


def dense_views(data: Any) -> tuple[list[np.ndarray], np.ndarray]:
    """A loaded dataset's views as dense float64 arrays, and its labels."""
    return ([v.toarray() if hasattr(v, "toarray") else np.asarray(v, dtype=np.float64)
             for v in data.views], np.asarray(data.y))


def load_or_skip(name: str, data_dir: str | None) -> Any:
    """The dataset, or None (with a line saying why) when it is not on this machine."""
    from mkrk_dask.datasets import load_dataset

    try:
        return load_dataset(name, data_dir)
    except FileNotFoundError as exc:
        print(f"skipped: {exc}")
        return None


#: rows of ``blobs:d`` (``blobs:d:n`` names another count)
BLOB_ROWS = 5000


def blob_data(name: str) -> tuple[list[np.ndarray], np.ndarray]:
    """``blobs:d`` or ``blobs:d:n``: ``([X], y)``, n rows (default :data:`BLOB_ROWS`) of three
    unit Gaussian blobs in d columns, their centres 4 apart on the diagonal (fixed seed)."""
    parts = name.split(":")
    if parts[0] != "blobs" or len(parts) not in (2, 3):
        raise ValueError(f"{name!r}: blobs:d or blobs:d:n")
    d, n = int(parts[1]), int(parts[2]) if len(parts) == 3 else BLOB_ROWS
    rng = np.random.default_rng(0)
    y = np.repeat(np.arange(3), n // 3 + 1)[:n]
    return [rng.normal(size=(n, d)) + 4.0 * y[:, None]], y
