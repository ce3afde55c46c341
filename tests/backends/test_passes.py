"""The shared Dask plumbing (mkrk_dask.passes) on a real LocalCluster and real Zarr arrays."""

from __future__ import annotations

import threading
import time
from concurrent.futures import CancelledError

import dask.array as da
import numpy as np
import pytest
import scipy.sparse as sp
import zarr
from distributed import Client, LocalCluster, get_task_stream

from mkrk_dask.exceptions import PassFailedError, SchedulerLostError
from mkrk_dask.passes import (
    ALIGNED_TASK_BYTES,
    RowSource,
    Shared,
    aligned_tasks,
    block_pairs,
    check_client,
    input_row_starts,
    read_rows,
    row_bounds,
    row_tasks,
    run_pass,
    with_retries,
)

_LOCK = threading.Lock()
_STATE = {"running": 0, "peak": 0, "calls": {}}


def _square(i):
    with _LOCK:
        _STATE["running"] += 1
        _STATE["peak"] = max(_STATE["peak"], _STATE["running"])
    time.sleep(0.02)
    with _LOCK:
        _STATE["running"] -= 1
    return i * i


def _flaky(key, failures):
    """Fails with a lost-work error ``failures`` times for ``key``, then succeeds."""
    with _LOCK:
        seen = _STATE["calls"].get(key, 0)
        _STATE["calls"][key] = seen + 1
    if seen < failures:
        raise CancelledError(f"simulated loss {seen}")
    return key


def _broken(_):
    raise ValueError("a real bug in the task")


def test_run_pass_combines_every_result_once_with_bounded_concurrency(client):
    results = {}
    run_pass(client, 20, lambda i: client.submit(_square, i, pure=False),
             lambda i, v: results.setdefault(i, v), label="squares", max_in_flight=2)
    assert results == {i: i * i for i in range(20)}
    assert 1 <= _STATE["peak"] <= 2


def test_lost_work_is_resubmitted_then_the_pass_fails_in_one_line(client):
    got = []
    run_pass(client, 3, lambda i: client.submit(_flaky, f"a{i}", 2, pure=False),
             lambda i, v: got.append(v), label="flaky", max_in_flight=3, attempts=3)
    assert sorted(got) == ["a0", "a1", "a2"]
    assert all(_STATE["calls"][f"a{i}"] == 3 for i in range(3))
    with pytest.raises(PassFailedError, match="flaky: task 0 lost its worker") as caught:
        run_pass(client, 1, lambda i: client.submit(_flaky, "b", 5, pure=False),
                 lambda i, v: None, label="flaky", max_in_flight=1, attempts=2)
    assert "\n" not in str(caught.value)
    assert _STATE["calls"]["b"] == 2


def test_a_real_error_in_a_task_is_raised_at_once(client):
    with pytest.raises(ValueError, match="a real bug"):
        run_pass(client, 5, lambda i: client.submit(_broken, i, pure=False),
                 lambda i, v: None, label="broken", max_in_flight=5)


def test_with_retries_reruns_a_step_that_lost_work(client):
    calls = []

    def step():
        calls.append(1)
        if len(calls) < 3:
            raise CancelledError("lost")
        return "done"

    assert with_retries(client, step, label="step") == "done" and len(calls) == 3
    with pytest.raises(ValueError):
        with_retries(client, lambda: (_ for _ in ()).throw(ValueError("bug")), label="step")


def test_shared_object_is_shared_again_when_lost(client):
    shared = Shared(client, np.arange(5.0))
    first = shared.ref
    assert first.status == "finished" and shared.ref is first
    first.cancel()
    second = shared.ref
    assert second is not first and second.status == "finished"
    assert np.array_equal(client.submit(np.sum, second).result(), 10.0)
    shared.release()


@pytest.mark.parametrize("kind", ["numpy", "sparse", "zarr", "dask", "persisted",
                                  "persisted columns", "persisted sparse"])
def test_row_source_gives_the_rows_of_every_input_kind(client, tmp_path, kind):
    X = np.random.default_rng(1).normal(size=(37, 4))
    data = {"numpy": X, "sparse": sp.csr_matrix(X), "dask": da.from_array(X, chunks=(10, 4))}
    if kind.startswith("persisted"):
        # chunks of 10 rows (of 2 columns): a block of 12 rows spans two or three of them
        chunks = (10, 2) if kind == "persisted columns" else (10, 4)
        source_array = sp.csr_matrix(X) if kind == "persisted sparse" else X
        data[kind] = client.persist(da.from_array(source_array, chunks=chunks,
                                                  asarray=False))
    if kind == "zarr":
        data["zarr"] = zarr.create_array(str(tmp_path / "x.zarr"), shape=X.shape, chunks=(8, 4),
                                         dtype="float64")
        data["zarr"][...] = X
    source = RowSource(client, data[kind])
    assert source.n_rows == 37
    for hold in (False, True):
        for start, stop in row_bounds(37, 12):
            rows = client.submit(read_rows, *source.block(start, stop, hold=hold)).result()
            rows = rows.toarray() if sp.issparse(rows) else rows
            np.testing.assert_array_equal(rows, X[start:stop])
    source.release()
    if kind.startswith("persisted"):
        # its tasks take the chunks in memory: nothing computes slices of them
        with get_task_stream(client) as stream:
            client.submit(read_rows, *source.block(5, 30)).result()
        assert [str(t["key"]) for t in stream.data if "read_rows" not in str(t["key"])] == []


def test_row_source_of_an_array_persisted_by_another_client_is_refused(client):
    X = np.arange(40.0).reshape(20, 2)
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=False,
                      dashboard_address="127.0.0.1:0",
                      worker_dashboard_address="127.0.0.1:0") as cluster, \
            Client(cluster, set_as_default=False) as other, \
            Client(client.scheduler.address, set_as_default=False) as same:
        # another cluster, or another client of this one: its tasks failed on "lost
        # dependencies"; now one line says what to do
        for owner in (other, same):
            persisted = owner.persist(da.from_array(X, chunks=(5, 2)))
            with pytest.raises(ValueError, match=r"^the dask array was persisted with another "
                                                 r"client \(of inproc://[^\n]*$"):
                RowSource(client, persisted)


def test_block_helpers():
    assert row_bounds(10, 4) == [(0, 4), (4, 8), (8, 10)]
    assert block_pairs(3) == [(0, 0), (0, 1), (0, 2), (1, 1), (1, 2), (2, 2)]


def test_input_row_starts_are_the_chunks_every_lazy_view_shares(tmp_path):
    z = zarr.open(str(tmp_path / "x.zarr"), mode="w", shape=(1000, 3), chunks=(300, 3),
                  dtype="f4")
    assert input_row_starts([z]) == [0, 300, 600, 900]
    d = da.zeros((1000, 2), chunks=((200, 400, 400), 2))
    assert input_row_starts([d]) == [0, 200, 600]
    assert input_row_starts([z, d]) == [0, 600]  # only the starts both views share
    assert input_row_starts([z, np.zeros((1000, 3))]) is None  # in memory: nothing to decode
    assert input_row_starts([d[d[:, 0] >= 0]]) is None  # row chunks of unknown size


def _check_cover(tasks, first, n, starts):
    assert tasks[0][0] == first and tasks[-1][1] == n
    assert all(a < b for a, b in tasks)
    assert all(tasks[i][1] == tasks[i + 1][0] for i in range(len(tasks) - 1))
    assert all(b in starts or b == n for _, b in tasks)


def test_aligned_tasks_read_whole_chunks():
    starts = list(range(0, 10_000, 300))
    # chunks smaller than the step are joined up to it
    tasks = aligned_tasks(0, 10_000, starts, 1000, 8, 2)
    _check_cover(tasks, 0, 10_000, starts)
    assert all(b - a >= 1000 for a, b in tasks[:-1]) and max(b - a for a, b in tasks) == 1200
    # chunks larger than the step: one a task (from a resumed pass's first row: a part)
    tasks = aligned_tasks(450, 10_000, starts, 100, 8, 2)
    _check_cover(tasks, 450, 10_000, starts)
    assert tasks[:2] == [(450, 600), (600, 900)]
    # a chunk of more than ALIGNED_TASK_BYTES, or too few tasks for the threads: not aligned
    row_bytes = ALIGNED_TASK_BYTES // 250
    assert aligned_tasks(0, 10_000, starts, 100, row_bytes, 2) is None
    assert aligned_tasks(0, 10_000, starts, 6_000, 8, 4) is None
    # joined chunks stop before they pass the bytes allowed
    row_bytes = ALIGNED_TASK_BYTES // 700
    tasks = aligned_tasks(0, 10_000, starts, 5_000, row_bytes, 2)
    assert max(b - a for a, b in tasks) == 600


def test_row_tasks_align_only_lazy_input_that_is_read():
    starts = list(range(0, 100_000, 3_000))
    plain = row_tasks(100_000, 500, 2, row_bytes=64)
    assert plain == [(a, min(a + 12_500, 100_000)) for a in range(0, 100_000, 12_500)]
    aligned = row_tasks(100_000, 500, 2, row_bytes=64, starts=starts)
    _check_cover(aligned, 0, 100_000, starts)
    assert len(aligned) == 7 and aligned != plain  # chunks of 3,000 joined to 15,000 rows
    # stored factors (row_bytes 0: nothing read) keep whole factor chunks
    assert row_tasks(100_000, 500, 2, starts=starts) == plain
    # a resumed pass: from the row where it stopped
    assert row_tasks(100_000, 500, 2, row_bytes=64, first=30_000)[0][0] == 30_000


def test_a_closed_client_is_reported_as_a_lost_scheduler():
    from distributed import Client, LocalCluster

    with LocalCluster(n_workers=1, processes=False, dashboard_address="127.0.0.1:0",
                      worker_dashboard_address="127.0.0.1:0") as cluster:
        other = Client(cluster)
        check_client(other)
        other.close()
        with pytest.raises(SchedulerLostError, match="lost the connection"):
            check_client(other)
