"""Progress reports for long work: Dask passes over the data and iterations of the loop.

The backends talk to Dask through a :class:`distributed.Client` they are given (see
:class:`mkrk_dask.cluster.DaskSession`). :func:`progress_client` returns a client whose
``gather`` first shows Dask's own text progress bar
(:class:`distributed.diagnostics.progressbar.TextProgressBar`) over the futures it waits for,
and whose ``submit`` counts streamed tasks (the Nystrom factor pass hands its futures to
``as_completed`` rather than to ``gather``). Reports go to standard error, one line per pass,
so standard output stays clean for results.
The per-iteration lines (objective, change, time) come from the estimator's own solver
callback (``MKKMRK(verbose=1)``).
"""

from __future__ import annotations

import sys
import threading
import time
from typing import Any, TextIO

from distributed import Client
from distributed.diagnostics.progressbar import TextProgressBar
from distributed.utils import key_split

__all__ = ["ProgressClient", "progress_client", "MAIN_PASSES"]

#: Task names of the passes shown at the default verbosity (building a store and reading it
#: whole); every other pass (the products of the H-step, ...) is shown with ``verbose >= 2``.
#: (Names as :func:`distributed.utils.key_split` gives them: without the leading underscore.)
MAIN_PASSES = frozenset({"build_pair", "gram_rows", "pair_max_sq_distance", "factor_task",
                         "embed_task", "farthest_task", "pair_max_task"})

#: Passes with fewer tasks than this are not worth a bar.
MIN_TASKS = 2


class _LabelledBar(TextProgressBar):
    """Dask's text progress bar, on a stream of our choice, with the pass named, kept on screen
    when it completes (a final line per pass rather than an erased line)."""

    def __init__(self, keys: Any, *, label: str, stream: TextIO, **kwargs: Any):
        self._label = label
        self._stream = stream
        self._tty = bool(getattr(stream, "isatty", lambda: False)())
        super().__init__(keys, **kwargs)

    def _draw_bar(self, remaining: int, all: int, **kwargs: Any) -> None:  # noqa: A002
        if not self._tty:  # a log file gets the final line only
            return
        frac = (1 - remaining / all) if all else 1.0
        bar = "#" * int(self.width * frac)
        self._stream.write(f"\r[dask] {self._label:<22s} [{bar:<{self.width}}] "
                           f"{all - remaining}/{all} tasks {self.elapsed:6.1f}s")
        self._stream.flush()

    def _draw_stop(self, remaining: int = 0, all: int = 0, status: str = "finished",  # noqa: A002
                   **kwargs: Any) -> None:
        if self._tty:
            self._stream.write("\r\33[2K")
        state = "done" if status == "finished" else status
        self._stream.write(f"[dask] {self._label:<22s} {all - remaining}/{all} tasks {state} "
                           f"in {self.elapsed:.1f}s\n")
        self._stream.flush()


class ProgressClient(Client):
    """A :class:`distributed.Client` that reports the passes it runs.

    Behaves exactly as a Client; ``gather`` of a list of futures shows Dask's progress bar
    first, ``submit`` counts streamed tasks per task name. Set the attributes
    ``progress_verbose`` (0 silent, 1 main passes, 2 every pass) and ``progress_stream``.
    """

    progress_verbose = 1
    progress_stream: TextIO | None = None

    def _wants(self, name: str, count: int) -> bool:
        if self.progress_verbose <= 0 or count < MIN_TASKS:
            return False
        return self.progress_verbose >= 2 or name in MAIN_PASSES

    def gather(self, futures: Any, *args: Any, **kwargs: Any) -> Any:
        """``Client.gather``, after Dask's progress bar over a list of futures."""
        if (isinstance(futures, list) and futures and not kwargs.get("asynchronous")
                and all(hasattr(f, "key") for f in futures)):
            name = key_split(futures[0].key)
            if self._wants(name, len(futures)):
                try:
                    _LabelledBar(futures, label=name, scheduler=self.scheduler.address,
                                 stream=self.progress_stream or sys.stderr, interval="200ms")
                except (OSError, TimeoutError):  # the bar is a nicety; never fail the work
                    pass
        return super().gather(futures, *args, **kwargs)

    def submit(self, func: Any, *args: Any, **kwargs: Any) -> Any:
        """``Client.submit``, counting the tasks of streamed passes."""
        future = super().submit(func, *args, **kwargs)
        name = key_split(future.key)
        if self.progress_verbose > 0 and name in _STREAMED:
            self._streamed_counter(name).add(future)
        return future

    def _streamed_counter(self, name: str) -> _Counter:
        counters = self.__dict__.setdefault("_counters", {})
        counter = counters.get(name)
        if counter is None or counter.idle():
            counter = counters[name] = _Counter(name, self.progress_stream or sys.stderr)
        return counter


#: Tasks streamed through ``as_completed`` (no gather of the whole list): counted on submit.
_STREAMED = frozenset({"factor_task"})


class _Counter:
    """Counts the tasks of a streamed pass; a line every few seconds and one at the end."""

    def __init__(self, name: str, stream: TextIO):
        self.name, self.stream = name, stream
        self.submitted = self.done = 0
        self.start = time.perf_counter()
        self.last = self.start
        self.lock = threading.Lock()

    def idle(self) -> bool:
        with self.lock:
            return self.submitted > 0 and self.done == self.submitted

    def add(self, future: Any) -> None:
        with self.lock:
            self.submitted += 1
        future.add_done_callback(self._finished)

    def _finished(self, future: Any) -> None:
        with self.lock:
            self.done += 1
            now = time.perf_counter()
            final = self.done == self.submitted
            if final or now - self.last > 5.0:
                self.last = now
                state = "so far" if not final else "done"
                self.stream.write(f"[dask] {self.name:<22s} {self.done} tasks {state} "
                                  f"in {now - self.start:.1f}s\n")
                self.stream.flush()


def progress_client(address: Any, *, verbose: int = 1, stream: TextIO | None = None,
                    timeout: float = 30.0) -> ProgressClient:
    """A :class:`ProgressClient` connected to ``address`` (a scheduler address or a cluster).

    Raises
    ------
    mkrk_dask.cluster.SchedulerUnreachableError
        If a scheduler address cannot be reached within ``timeout`` seconds.
    """
    from .cluster import SchedulerUnreachableError

    try:
        client = ProgressClient(address, timeout=timeout)
    except (OSError, TimeoutError) as err:
        raise SchedulerUnreachableError(
            f"cannot reach the Dask scheduler at {address!r} within {timeout:g}s: {err}"
        ) from None
    client.progress_verbose = verbose
    client.progress_stream = stream
    return client
