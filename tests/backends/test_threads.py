"""Threads of the process (mkrk_dask._threads) and LAPACK and BLAS without the GIL
(mkrk_dask._lapack)."""

from __future__ import annotations

import contextlib
import ctypes
import threading
import time

import numpy as np
import pytest
import scipy.linalg
from threadpoolctl import threadpool_info

from mkrk_dask import _lapack, _threads


def _blas_threads() -> list[int]:
    return sorted(i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas")


def test_map_threads_runs_every_item_once_with_a_state_per_thread_and_one_blas_thread(
        monkeypatch):
    monkeypatch.setattr(_threads, "usable_cores", lambda: 3)
    before = _blas_threads()
    seen, states, blas = [], set(), set()
    lock = threading.Lock()

    def task(i, state):
        state.append(i)  # a list per thread: no other thread appends to it
        time.sleep(0.01)
        with lock:
            seen.append(i)
            states.add(id(state))
            blas.update(_blas_threads())

    _threads.map_threads(task, 12, list)
    assert sorted(seen) == list(range(12))
    assert 1 < len(states) <= 3
    assert blas == {1}
    assert _blas_threads() == before


def test_map_threads_raises_for_the_lowest_failing_item_and_cancels_the_rest(monkeypatch):
    monkeypatch.setattr(_threads, "usable_cores", lambda: 2)
    started = []

    def task(i, _):
        started.append(i)
        if i == 3:
            raise ValueError("item 3")
        if i == 1:
            time.sleep(0.2)  # fails after item 3 has failed
            raise ValueError("item 1")
        time.sleep(0.02)

    with pytest.raises(ValueError, match="item 1"):
        _threads.map_threads(task, 40, lambda: None)
    assert len(started) < 40  # items not started when the error arrived never run


def test_one_core_is_a_plain_loop(monkeypatch):
    monkeypatch.setattr(_threads, "usable_cores", lambda: 1)
    caller = threading.get_ident()
    ran = []
    _threads.map_threads(lambda i, s: ran.append((i, threading.get_ident(), s)), 3,
                         lambda: "state")
    assert ran == [(0, caller, "state"), (1, caller, "state"), (2, caller, "state")]


def test_local_threads_inside_the_same_limit_does_not_set_it_again(monkeypatch):
    calls = []
    real = _threads._controller()

    class Counting:
        def limit(self, *, limits, user_api=None):
            calls.append(limits)
            return real.limit(limits=limits, user_api=user_api)

    monkeypatch.setattr(_threads, "_controller", Counting)
    before = _blas_threads()
    with _threads.local_threads(1):
        with _threads.local_threads(1), _threads.local_threads(None):
            assert _blas_threads() == [1] * len(before)
        with _threads.local_threads(2):
            assert _blas_threads() == [2] * len(before)
        assert _blas_threads() == [1] * len(before)  # the inner limit gave back the outer one
    assert _blas_threads() == before
    assert calls == [1, 2]


def test_held_threads_is_this_threads_innermost_limit():
    seen = []
    assert _threads.held_threads() is None
    with _threads.local_threads(1):
        with _threads.local_threads(2):
            assert _threads.held_threads() == 2
        assert _threads.held_threads() == 1
        # another thread holds nothing, whatever this one holds
        other = threading.Thread(target=lambda: seen.append(_threads.held_threads()))
        other.start()
        other.join()
    assert seen == [None] and _threads.held_threads() is None


def _spd(n: int, dtype, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    A = rng.normal(size=(n, n))
    return np.ascontiguousarray(A @ A.T + n * np.eye(n), dtype=dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_cholesky_info_factorises_like_scipy(dtype):
    A = _spd(300, dtype)
    work = A.copy()
    assert _lapack.cholesky_info(work) == 0
    upper = np.triu(work)  # the upper triangle of the C-ordered array holds the factor
    expected = scipy.linalg.cholesky(A.astype(np.float64))
    tol = 1e-3 if dtype == np.float32 else 1e-10
    np.testing.assert_allclose(upper, expected, rtol=tol, atol=tol * np.abs(expected).max())
    np.testing.assert_array_equal(np.tril(work, -1), np.tril(A, -1))  # left as it was


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_cholesky_info_reports_the_failing_minor_as_lapack_does(dtype):
    from scipy.linalg import lapack

    A = _spd(200, dtype)
    A[150, 150] = -1e6  # the leading minor of order 151 is the first not positive definite
    info = _lapack.cholesky_info(A.copy())
    reference = getattr(lapack, ("s" if dtype == np.float32 else "d") + "potrf")(
        A.copy().T, lower=1)[1]
    assert info == reference == 151


def test_cholesky_info_is_the_raw_lapack_routine_called_without_the_gil():
    for prefix in "sd":
        routine = _lapack._raw_potrf(prefix)
        assert routine is not None  # not the f2py fallback, which holds the GIL
        assert not routine._flags_ & ctypes._FUNCFLAG_PYTHONAPI  # ctypes releases the GIL


@pytest.mark.parametrize("bad", [np.ones((3, 4)), np.ones((4, 4), dtype=np.int64),
                                 np.ones((4, 4))[:, ::-1], np.ones((4, 4), dtype=np.float16)])
def test_cholesky_info_refuses_what_lapack_cannot_take(bad):
    with pytest.raises(ValueError, match="square C-contiguous float32 or float64"):
        _lapack.cholesky_info(bad)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_cholesky_info_without_the_raw_routine_falls_back_to_scipys_wrapper(monkeypatch, dtype):
    A = _spd(120, dtype)
    A[60, 60] = -1.0
    raw = _lapack.cholesky_info(A.copy())
    good = _spd(120, dtype, seed=1)
    raw_factor = good.copy()
    assert _lapack.cholesky_info(raw_factor) == 0
    monkeypatch.setattr(_lapack, "_raw_potrf", lambda prefix: None)
    assert _lapack.cholesky_info(A.copy()) == raw == 61
    wrapped = good.copy()
    assert _lapack.cholesky_info(wrapped) == 0
    np.testing.assert_array_equal(np.triu(wrapped), np.triu(raw_factor))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("raw", [True, False])
def test_syrk_upper_is_the_upper_triangle_of_the_plain_product(monkeypatch, dtype, raw):
    """F^T F into the upper triangle (and added to it with accumulate), the lower triangle
    never written; the same through the raw routine and through scipy's wrapper."""
    if not raw:
        monkeypatch.setattr(_lapack, "_raw_syrk", lambda prefix: None)
    rng = np.random.default_rng(3)
    F, G = (rng.standard_normal((rows, 70)).astype(dtype) for rows in (130, 9))
    out = np.full((70, 70), 7.0, dtype=dtype, order="F")
    assert _lapack.syrk_upper(F, out) is out
    plain = F.astype(np.float64).T @ F.astype(np.float64)
    tol = 1e-4 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(np.triu(out), np.triu(plain), rtol=tol, atol=tol * 100)
    assert np.all(out[np.tril_indices(70, -1)] == 7.0)
    _lapack.syrk_upper(G, out, accumulate=True)
    plain += G.astype(np.float64).T @ G.astype(np.float64)
    np.testing.assert_allclose(np.triu(out), np.triu(plain), rtol=tol, atol=tol * 100)
    assert np.all(out[np.tril_indices(70, -1)] == 7.0)
    empty = np.ones((70, 70), dtype=dtype, order="F")
    np.testing.assert_array_equal(np.triu(_lapack.syrk_upper(F[:0], empty)), 0.0)


def test_syrk_upper_is_the_raw_blas_routine_called_without_the_gil():
    for prefix in "sd":
        routine = _lapack._raw_syrk(prefix)
        assert routine is not None  # not the f2py wrapper, which holds the GIL
        assert not routine._flags_ & ctypes._FUNCFLAG_PYTHONAPI


@pytest.mark.parametrize("F, out", [
    (np.ones((5, 4)), np.ones((4, 8), order="F")[:, ::2]),
    (np.ones((5, 4))[:, ::-1], np.ones((4, 4), order="F")),
    (np.ones((5, 4), dtype=np.float32), np.ones((4, 4), order="F")),
    (np.ones((5, 4)), np.ones((3, 3), order="F")),
    (np.ones((5, 4), dtype=np.int64), np.ones((4, 4), dtype=np.int64, order="F")),
])
def test_syrk_upper_refuses_what_blas_cannot_take(F, out):
    with pytest.raises(ValueError, match="syrk_upper needs a C-contiguous"):
        _lapack.syrk_upper(F, out)


def test_single_blas_thread_limits_blas_and_leaves_openmp():
    def openmp() -> list[int]:
        return sorted(i["num_threads"] for i in threadpool_info() if i["user_api"] == "openmp")

    before_blas, before_openmp = _blas_threads(), openmp()
    with _threads.single_blas_thread():
        assert set(_blas_threads()) == {1}
        assert openmp() == before_openmp
    assert _blas_threads() == before_blas
    with _threads.local_threads(1):  # every library on one thread already: nothing to do
        assert isinstance(_threads.single_blas_thread(), contextlib.nullcontext)


def test_a_pass_on_an_in_process_worker_leaves_this_thread_its_blas_limits(client):
    # A pass holds the workers' BLAS threads (passes.blas_threads); an in-process worker
    # shares this process's OpenBLAS. From threadpoolctl 3.8 the thread that set the limit
    # controls it until it leaves the limit's context, and every other thread's limits are
    # silently ignored: a limit only restored left the worker's event-loop thread in control,
    # and the final stage's one BLAS thread (single_blas_thread) stayed at two (issue 77).
    from mkrk_dask.passes import blas_threads

    before = _blas_threads()
    with blas_threads(client, 1):
        client.submit(lambda: float(np.ones((300, 300)) @ np.ones(300) @ np.ones(300)),
                      pure=False).result()
    assert _blas_threads() == before
    with _threads.single_blas_thread():
        assert _blas_threads() == [1] * len(before)
    with _threads.local_threads(1):
        assert _blas_threads() == [1] * len(before)
    assert _blas_threads() == before
