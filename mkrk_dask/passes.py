"""Distributed passes over row blocks: the Dask plumbing every scaled backend uses.

One place decides how work reaches the workers and what happens when some of it is lost:

- :class:`Shared`: an in-memory object held by ONE worker, which the tasks fetch it from. It is
  never broadcast: a worker dying while the scheduler replicates a broadcast can hang the
  scatter for good (dask/distributed#5704). When its holder dies the object is shared again.
- :class:`RowSource`: the rows of one input view as task arguments. Numpy and scipy.sparse rows
  are shared block by block (a task fetches only its block); Zarr arrays are read by the tasks
  themselves; dask arrays are computed block by block on the workers, never whole, except a
  persisted one: its tasks take the chunks already in the workers' memory (no slicing tasks).
- :func:`run_pass`: submit tasks with at most ``max_in_flight`` running and combine each result
  on the client as it arrives (bounded memory whatever n). A task whose work was lost (a
  worker died, a shared input went with it) is submitted again after its inputs are shared
  again, at most ``attempts`` times; then the pass fails with one line
  (:class:`~mkrk_dask.exceptions.PassFailedError`). A lost scheduler ends the pass at once
  (:class:`~mkrk_dask.exceptions.SchedulerLostError`); nothing waits forever.
- :func:`with_retries`: run a whole step again (an eigensolver product) when its work was lost.
- :func:`block_pairs`: the pairs ``i <= j`` of row blocks of a pairwise pass.

What counts as lost work, a lost scheduler or a cluster left without workers is told in
:mod:`mkrk_dask.lost_work` (:func:`is_lost_work`, :func:`check_client` and
:func:`remember_nannies` are re-exported here).
"""

from __future__ import annotations

import bisect
import contextlib
import heapq
import numbers
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from concurrent.futures import CancelledError
from typing import Any

import numpy as np
import scipy.sparse as sp

from ._compute import compute_here
from ._malloc import malloc_trim
from .exceptions import PassFailedError, WorkersLostError
from .lost_work import WorkerWatch, check_client, is_lost_work, remember_nannies
from .progress import reporter
from .validation import check_magnitude

__all__ = ["TASK_INPUT_BYTES", "ALIGNED_TASK_BYTES", "input_row_starts", "aligned_tasks",
           "row_tasks", "uniform_row_mask",
           "is_dask", "rows_per_task", "Shared", "RowSource", "read_rows", "raw_rows",
           "run_pass",
           "with_retries", "block_pairs", "row_bounds", "is_lost_work", "check_client",
           "client_threads", "blas_threads", "task_blas_threads", "remember_nannies"]

#: seconds between checks of the scheduler connection while a pass waits for its tasks
_POLL_SECONDS = 2.0
#: submissions of one task before its pass gives up
ATTEMPTS = 4
def client_threads(client: Any) -> int:
    """Worker threads of the cluster (at least 1)."""
    return max(1, sum(client.nthreads().values()))


_LIMITS: list[Any] = []


def _limit_blas(threads: int | None) -> None:
    """On a worker: hold BLAS at ``threads`` (None: give back the original limits).

    The limit is entered and left as a context (not only set and restored): from
    threadpoolctl 3.8, the thread that sets OpenBLAS's process-wide limit controls it until
    it leaves its last limit's context, and every other thread's limits are silently ignored.
    An in-process worker (the embedded cluster's) shares this process's OpenBLAS, so a limit
    only restored kept its event-loop thread in control for the rest of the fit: the final
    stage's one BLAS thread (:func:`~mkrk_dask._threads.single_blas_thread`) stayed at two,
    and the graph's thousands of small products waited on the second thread (10x slower on a
    loaded machine)."""
    from threadpoolctl import threadpool_limits

    while _LIMITS:
        _LIMITS.pop().close()
    if threads is not None:
        stack = contextlib.ExitStack()
        stack.enter_context(threadpool_limits(limits=threads))
        _LIMITS.append(stack)


def task_blas_threads(client: Any, requested: int | None) -> int | None:
    """BLAS threads per task: as requested, else 1 when a worker runs several task threads
    (more would oversubscribe its cores), else BLAS's own setting."""
    if requested is None and max(client.nthreads().values(), default=1) > 1:
        return 1
    return requested


@contextlib.contextmanager
def blas_threads(client: Any, threads: int | None) -> Any:
    """BLAS threads of every worker for the duration of a pass.

    Set once per worker, not per task: a limit entered and left by every task (a context
    manager in the task) is process-wide, so tasks running side by side would undo each
    other's and run with a changing number of BLAS threads (and results that differ in the
    last bit from run to run).
    """
    if threads is None:
        yield
        return
    client.run(_limit_blas, threads)
    try:
        yield
    finally:
        try:
            client.run(_limit_blas, None)
        except Exception:  # noqa: BLE001 - a lost worker has nothing to give back
            pass


def release_memory(client: Any) -> None:
    """After a pass, return the memory its tasks freed to the OS, on the workers and here.

    glibc keeps freed blocks below its mmap threshold (which rises to 32 MiB as large arrays
    come and go) in its heaps, so the RSS of a process stays at the pass's high-water mark
    into the next phase. ``malloc_trim`` is what distributed's documentation recommends for
    this; it costs milliseconds.
    """
    try:
        client.run(malloc_trim)
    except Exception:  # noqa: BLE001 - a lost worker frees its memory by itself
        pass
    malloc_trim()


#: input one task of a pass over the rows reads at most (its rows of every view, as float64):
#: with the tasks in flight, what bounds the memory of a pass at any n and width
TASK_INPUT_BYTES = 32 * 2**20


def rows_per_task(row_bytes: int, most: int) -> int:
    """Rows of a task that reads ``row_bytes`` per row: at most ``most``, and no more than
    :data:`TASK_INPUT_BYTES` in all (at least 256 rows)."""
    return max(256, min(most, TASK_INPUT_BYTES // max(int(row_bytes), 1)))


#: a task may read up to this much input (as float64) where that makes it read whole chunks
#: of lazy input: a chunk read by parts is decoded once per part (Zarr chunks of 65,536 rows
#: read by tasks of 16,384: the embedding pass at 10^7 rows took 131.8 s, 83.8 s in whole
#: chunks; benchmarks/results/scale/scaling_gram_sample.md and scaling_aligned.md)
ALIGNED_TASK_BYTES = 4 * TASK_INPUT_BYTES


def input_row_starts(views: Sequence[Any]) -> list[int] | None:
    """The first rows of the row chunks that every view of lazy input (dask or Zarr arrays)
    shares, or None where one is in memory (nothing to decode)."""
    common: set[int] | None = None
    for X in views:
        chunks = getattr(X, "chunks", None)
        if chunks is None or not (is_dask(X) or hasattr(X, "oindex")):
            return None
        rows = chunks[0]
        if isinstance(rows, numbers.Integral):  # Zarr: one chunk shape
            starts = set(range(0, int(X.shape[0]), int(rows)))
        elif any(size != size for size in rows):  # dask chunks of unknown size (nan)
            return None
        else:  # dask: the size of every row chunk
            starts = {0, *np.cumsum(rows[:-1], dtype=np.int64).tolist()}
        common = starts if common is None else common & starts
    return None if common is None else sorted(common)


def aligned_tasks(first: int, n: int, starts: Sequence[int], step: int, row_bytes: int,
                  min_tasks: int) -> list[tuple[int, int]] | None:
    """Row ranges from ``first`` to ``n`` made of whole input chunks (``starts``: their first
    rows; :func:`input_row_starts`): chunks smaller than ``step`` rows joined up to it, none
    reading more than :data:`ALIGNED_TASK_BYTES` (``row_bytes`` a row, as float64). None
    where one chunk is larger than that, or where fewer than ``min_tasks`` tasks would share
    the work (the threads would wait for the last)."""
    ends = [s for s in starts if first < s < n] + [n]
    most = ALIGNED_TASK_BYTES // max(int(row_bytes), 1)
    tasks: list[tuple[int, int]] = []
    start = previous = first
    for i, end in enumerate(ends):
        if end - previous > most:
            return None
        following = ends[i + 1] if i + 1 < len(ends) else None
        if (end - start >= step or following is None or following - start > most):
            tasks.append((start, end))
            start = end
        previous = end
    return tasks if len(tasks) >= min_tasks else None


def row_tasks(n: int, chunk: int, threads: int, row_bytes: int = 0,
              starts: list[int] | None = None, first: int = 0) -> list[tuple[int, int]]:
    """Row ranges of the tasks from ``first`` to ``n``: whole chunks, about 4 tasks per thread
    (each task returns one R x R Gram matrix, so fewer, larger tasks mean less to add up),
    but no task reads more than :data:`TASK_INPUT_BYTES` of input
    (``row_bytes`` per row, as float64): a task holds its rows, and the tasks in flight bound
    the memory of the pass. Where the tasks read the data (``row_bytes``) and it is lazy, in
    row chunks starting at ``starts``, whole chunks instead where that still gives 2 tasks a
    thread (:func:`aligned_tasks`): each chunk is decoded once."""
    n_chunks = -(-(n - first) // chunk)
    per_task = max(1, -(-n_chunks // (4 * threads)))
    if row_bytes:
        per_task = max(1, min(per_task, TASK_INPUT_BYTES // (row_bytes * chunk)))
    step = per_task * chunk
    if row_bytes and starts is not None:
        aligned = aligned_tasks(first, n, starts, step, row_bytes, 2 * threads)
        if aligned is not None:
            return aligned
    return [(a, min(a + step, n)) for a in range(first, n, step)]


def uniform_row_mask(n: int, rows: int | None, random_state: Any) -> np.ndarray | None:
    """A boolean mask of ``rows`` of ``n`` rows, uniform without replacement (the same for
    the same integer ``random_state``, so a resumed pass goes on with the same sample), or
    None for every row (``rows`` None or at least n): the rows a sampled pass keeps (the
    Nystrom Gram matrix's, the final partition's)."""
    if rows is None or rows >= n:
        return None
    from sklearn.utils import check_random_state

    seed = check_random_state(random_state).randint(2**31 - 1)
    mask = np.zeros(n, dtype=bool)
    mask[np.random.default_rng(seed).choice(n, size=rows, replace=False)] = True
    return mask


def row_bounds(n: int, block: int) -> list[tuple[int, int]]:
    """``[(0, b), (b, 2b), ...]``: row blocks of ``block`` rows covering ``n`` rows."""
    return [(a, min(a + block, n)) for a in range(0, n, block)]


def block_pairs(n_blocks: int) -> list[tuple[int, int]]:
    """Every pair ``(i, j)`` with ``i <= j``, the unit of work of a pairwise pass."""
    return [(i, j) for i in range(n_blocks) for j in range(i, n_blocks)]


def _before_scatter(client: Any) -> None:
    """Raise :class:`WorkersLostError` now if the cluster has no worker and no nanny to
    restart one: a scatter would wait for a worker until distributed's timeout."""
    try:
        if client.nthreads():
            return
    except Exception as err:  # noqa: BLE001 - classified right below
        if is_lost_work(err):
            raise  # as the scatter's own failure would be: the caller's lost-work path
        return
    WorkerWatch(client).check()


class Shared:
    """An object held by one worker; :attr:`ref` is a live future of it (shared again if its
    holder died)."""

    def __init__(self, client: Any, value: Any):
        self.client = client
        self.value = value
        self._future: Any = None

    @property
    def ref(self) -> Any:
        if self._future is None or self._future.status in ("cancelled", "lost", "error"):
            # hash=False: a unique key, never shared with (and released by) other work that
            # scattered the same data on the same client.
            _before_scatter(self.client)
            try:
                [self._future] = self.client.scatter([self.value], hash=False)
            except TimeoutError as err:  # the scheduler found no worker to hold it
                check_client(self.client)
                if self.client.nthreads():
                    raise
                raise WorkersLostError(
                    "every Dask worker of the cluster is gone (none to hold shared data); the "
                    "fit cannot go on. Restart the workers (or the cluster) and run the same "
                    "command again with the same --store to resume where it stopped") from err
        return self._future

    def release(self) -> None:
        if self._future is not None:
            self._future.release()
            self._future = None


def raw_rows(source: Any, start: int | None = None, stop: int | None = None) -> Any:
    """Rows ``start:stop`` of a task argument of :meth:`RowSource.block` (or of an array),
    as stored: no conversion, no check."""
    if isinstance(source, list):
        return _join_row_chunks(source, start, stop)
    block = source if start is None else source[start:stop]
    # rows of a dask array read here (on the client: the local part's rows)
    return compute_here(block) if is_dask(block) else block


def read_rows(source: Any, start: int | None = None, stop: int | None = None,
              where: tuple[int, int, int] | None = None, *, native: bool = False) -> Any:
    """Rows ``start:stop`` of a task argument made by :meth:`RowSource.block`, as float64
    numpy (or CSR for sparse input). Runs on the workers.

    ``where = (view, first row, last row)`` asks for a check that every value is finite (for
    input validated lazily, whose values the client never saw). ``native=True`` keeps dense
    float32 rows in float32 (half the memory; the caller converts smaller pieces).
    """
    block = raw_rows(source, start, stop)
    if sp.issparse(block):
        block = sp.csr_matrix(block, dtype=np.float64)
        values = block.data
    else:
        keep = native and getattr(block, "dtype", None) == np.float32
        block = np.asarray(block, dtype=np.float32 if keep else np.float64)
        values = block
    if where is not None:
        view, first, last = where
        if not np.isfinite(values).all():
            raise ValueError(f"view {view}, rows {first}..{last - 1}: the data contain NaN or "
                             "infinity; clean them first")
        try:
            check_magnitude(block)
        except ValueError as err:
            raise ValueError(f"view {view}, rows {first}..{last - 1}: {err}") from None
    return block


def _join_row_chunks(chunks: list, start: int, stop: int) -> Any:
    """Rows ``start:stop`` of the row chunks ``chunks`` stacked (each a list of its column
    chunks), copying only those rows."""
    parts, offset = [], 0
    for columns in chunks:
        rows = columns[0].shape[0]
        a, b = max(start - offset, 0), min(stop - offset, rows)
        if a < b:
            pieces = [c[a:b] for c in columns]
            sparse = any(sp.issparse(c) for c in pieces)
            parts.append(pieces[0] if len(pieces) == 1 else
                         sp.hstack(pieces, format="csr") if sparse else np.hstack(pieces))
        offset += rows
    if len(parts) == 1:
        return parts[0]
    return (sp.vstack(parts, format="csr") if any(sp.issparse(c) for c in parts)
            else np.concatenate(parts))


def _persisted_chunks(client: Any, X: Any) -> tuple[list[int], list[list[Any]]] | None:
    """``(first row of each row chunk, futures of its column chunks)`` of a 2-D dask array
    whose chunks are all held by ``client``'s cluster (persisted with it), else None.

    Raises
    ------
    ValueError
        ``X`` holds futures of another client.
    """
    from distributed import futures_of

    held = futures_of(X)
    for future in held:
        if future.client is not client:
            # its keys may be unknown to this client's scheduler, or reach it after this
            # client's tasks that need them: "lost dependencies", not the rows
            raise ValueError("the dask array was persisted with another client "
                             f"(of {future.client.scheduler.address}); persist it with the "
                             "client the fit uses, or pass it unpersisted")
    if getattr(X, "ndim", 0) != 2:
        return None
    futures = {f.key: f for f in held}
    rows = [[futures.get(key) for key in row] for row in X.__dask_keys__()]
    if not futures or any(f is None for row in rows for f in row):
        return None
    return [0, *np.cumsum(X.chunks[0][:-1]).tolist()], rows


def is_dask(X: Any) -> bool:
    """Whether X is a dask collection (a dask array, here)."""
    return hasattr(X, "dask") and hasattr(X, "compute")


class RowSource:
    """The rows of one input view, handed to tasks as ``(data, start, stop)`` arguments that
    :func:`read_rows` turns into the rows on the worker.

    Zarr arrays travel as their (small) array object and the task reads its rows; numpy and
    sparse rows are shared with one worker; dask rows are computed on the workers. A range
    asked for with ``hold=True`` is shared (or computed) once and kept for the passes that
    use it many times (pairwise passes); others are shared per task and freed with it.
    """

    def __init__(self, client: Any, X: Any, *, view: int = 0, check_finite: bool | None = None):
        self.client = client
        self.X = X
        self._chunks = None
        if is_dask(X):
            self.kind = "dask"
            # A persisted array's tasks read its chunks as they are: computing a slice of it
            # per task adds slicing tasks that wait for a free thread, and left the threads
            # of a Nystrom pass idle 5% of the time.
            self._chunks = _persisted_chunks(client, X)
        elif hasattr(X, "get_orthogonal_selection") or hasattr(X, "oindex"):
            self.kind = "zarr"
        else:
            self.kind = "memory"
            if not sp.issparse(X):
                self.X = np.asarray(X)
        self.view = view
        # Lazy input is validated block by block, as the tasks read it.
        self.check_finite = self.kind != "memory" if check_finite is None else check_finite
        self._held: dict[tuple[int, int], Any] = {}

    @property
    def n_rows(self) -> int:
        return int(self.X.shape[0])

    def block(self, start: int, stop: int, *, hold: bool = False) -> tuple:
        """A task argument for the rows ``start:stop`` (a live one: call it at submit time)."""
        where = (self.view, start, stop) if self.check_finite else None
        if self.kind == "zarr":
            return (self.X, start, stop, where)
        key = (start, stop)
        if self._chunks is not None:
            firsts, futures = self._chunks
            i = bisect.bisect_right(firsts, start) - 1
            j = bisect.bisect_right(firsts, stop - 1)
            return (futures[i:j], start - firsts[i], stop - firsts[i], where)
        if self.kind == "dask":
            if not hold:
                return (self.client.compute(self.X[start:stop]), None, None, where)
            future = self._held.get(key)
            if future is None or future.status in ("cancelled", "lost", "error"):
                future = self._held[key] = self.client.compute(self.X[start:stop])
            return (future, None, None, where)
        if not hold:
            _before_scatter(self.client)
            [future] = self.client.scatter([self.X[start:stop]], hash=False)
            return (future, None, None, where)
        if key not in self._held:
            self._held[key] = Shared(self.client, self.X[start:stop])
        return (self._held[key].ref, None, None, where)

    def release(self) -> None:
        """Free the ranges held on the workers."""
        for held in self._held.values():
            held.release()
        self._held.clear()


def _wait_first(futures: Sequence[Any], client: Any, ready: threading.Event) -> list[Any]:
    """The futures among ``futures`` that are done (finished, failed or cancelled), waiting
    for at least one; ``ready`` is set by their done-callbacks. Checks the scheduler
    connection while it waits, so a lost scheduler never leaves it waiting."""
    watch = WorkerWatch(client)
    while True:
        check_client(client)
        done = [f for f in futures if f.done()]
        if done:
            return done
        watch.check()
        ready.wait(_POLL_SECONDS)
        ready.clear()


def run_pass(client: Any, n_tasks: int, submit: Callable[[int], Any],
             combine: Callable[[int, Any], None], *, label: str, max_in_flight: int,
             level: int = 1, attempts: int = ATTEMPTS, ordered: bool = False) -> None:
    """Run tasks ``0 .. n_tasks-1``, at most ``max_in_flight`` at a time, combining each
    result on the client as it arrives.

    Parameters
    ----------
    client : distributed.Client
    n_tasks : int
    submit : callable
        ``submit(i)`` submits task ``i`` and returns its future. It is called again for a task
        whose work was lost, so it must build its arguments afresh (``Shared.ref``,
        ``RowSource.block``), never reuse futures of an earlier call.
    combine : callable
        ``combine(i, result)``, called once per task, in completion order.
    label : str
        What the pass is, for progress reports and errors.
    max_in_flight : int
    level : int
        Verbosity at which the pass is reported (:mod:`mkrk_dask.progress`).
    attempts : int
        Submissions of one task before the pass fails.
    ordered : bool
        Combine the results in task order (results that arrive early wait, at most
        ``max_in_flight`` of them): sums then come out the same to the bit whatever the
        order the tasks finish in, and a pass can be checkpointed as a prefix of tasks.

    Raises
    ------
    PassFailedError
        A task's work was lost ``attempts`` times.
    SchedulerLostError
        The scheduler went away.
    Exception
        Whatever a task raised that is not lost work (bad input, a bug): as raised.
    """
    bar = reporter().task_pass(label, n_tasks, level)
    todo = list(range(n_tasks))  # a heap: the lowest pending task goes first
    tries: Counter[int] = Counter()
    running: dict[str, tuple[int, Any]] = {}
    waiting: dict[int, Any] = {}  # ordered: results that arrived before their predecessors
    following = [0]  # ordered: the next task to combine
    cap = max(1, max_in_flight)
    ready = threading.Event()

    def accept(i: int, value: Any) -> None:
        if not ordered:
            combine(i, value)
            bar.advance()
            return
        waiting[i] = value
        while following[0] in waiting:
            combine(following[0], waiting.pop(following[0]))
            following[0] += 1
            bar.advance()

    def lost(i: int, error: BaseException) -> None:
        """Task ``i``'s work (or its submission) was lost: queue it again, or give up."""
        check_client(client)
        if tries[i] >= attempts:
            raise PassFailedError(
                f"{label}: task {i} lost its worker or its input {tries[i]} times (last: "
                f"{type(error).__name__}: {' '.join(str(error).split())[:200]}); the cluster "
                "is losing workers faster than the pass can finish") from None
        time.sleep(min(0.2 * tries[i], 1.0))
        heapq.heappush(todo, i)

    def launch() -> None:
        while todo and len(running) < cap:
            # Ordered: no more early results than ``cap`` wait, but the one that unblocks
            # them always goes.
            if ordered and len(waiting) >= cap and todo[0] != following[0]:
                break
            i = heapq.heappop(todo)
            tries[i] += 1
            check_client(client)
            try:
                future = submit(i)
            except Exception as err:  # noqa: BLE001 - sharing an input with a dying worker
                if not is_lost_work(err):
                    raise
                lost(i, err)
                continue
            future.add_done_callback(lambda _: ready.set())
            running[future.key] = (i, future)

    try:
        while running or todo:
            launch()
            if not running:
                raise RuntimeError(f"{label}: no task can start (internal error)")
            for future in _wait_first([f for _, f in running.values()], client, ready):
                i, _ = running.pop(future.key)
                error = _error_of(future) if future.status != "finished" else None
                if error is None:
                    try:
                        # The holder of a finished result may die before it is fetched.
                        # (No timeout: with one, distributed can mix up event loops when
                        # several clients live in one process.)
                        value = future.result()
                    except Exception as err:  # noqa: BLE001 - classified below
                        error = err
                    else:
                        future.release()
                        accept(i, value)
                        continue
                future.release()
                if not is_lost_work(error):
                    raise error
                lost(i, error)
    except BaseException:
        for _, future in running.values():
            future.release()
        bar.finish("stopped")
        raise
    bar.finish()


def _error_of(future: Any) -> BaseException:
    if future.status == "cancelled":
        return CancelledError(f"task {future.key} was cancelled (lost worker or input)")
    try:
        error = future.exception()
    except CancelledError as err:
        return err
    return error if error is not None else CancelledError(f"task {future.key} has no result")


def with_retries(client: Any, run: Callable[[], Any], *, label: str,
                 attempts: int = ATTEMPTS) -> Any:
    """``run()``, again if it failed because work was lost (a worker died mid-way); the step
    must share its inputs afresh on every call. Fails after ``attempts`` tries."""
    for attempt in range(1, attempts + 1):
        try:
            return run()
        except Exception as err:  # noqa: BLE001 - classified right below
            if not is_lost_work(err):
                raise
            check_client(client)
            if attempt == attempts:
                raise PassFailedError(
                    f"{label}: lost work {attempts} times (last: {type(err).__name__}: "
                    f"{' '.join(str(err).split())[:200]})") from None
            time.sleep(min(0.5 * attempt, 2.0))
    raise AssertionError("unreachable")
