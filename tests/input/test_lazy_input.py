"""Dask and Zarr input through the public API: never read whole, validated lazily, the same
result as numpy input; on a real LocalCluster."""

from __future__ import annotations

import contextlib

import dask.array as da
import numpy as np
import pytest
import zarr
from distributed import get_task_stream

from mkrk_dask import MKKMRK

rng = np.random.default_rng(7)
X = np.vstack([rng.normal(c, 0.5, size=(100, 6)) for c in (0.0, 2.5, 5.0)])
KERNELS = ["cosine", "gaussian(c=0.2)", "polynomial(a=1,b=2)"]


@pytest.fixture
def zarr_x(tmp_path):
    array = zarr.create_array(str(tmp_path / "x.zarr"), shape=X.shape, chunks=(64, 6),
                              dtype="float32")
    array[...] = X
    return array


@pytest.mark.parametrize("solver", ["blockwise", "nystrom"])
def test_zarr_and_dask_input_give_the_numpy_result(client, zarr_x, solver):
    common = dict(kernels=KERNELS, solver=solver, scheduler=client, random_state=0)
    if solver == "nystrom":
        common["backend_options"] = {"n_landmarks": 50}
    reference = MKKMRK.paper(3, **common).fit(np.asarray(zarr_x[...], dtype=np.float64))
    def persisted() -> da.Array:
        # The dask-ml idiom: X.persist() under the user's client; its chunks are already in
        # the workers' memory (the workers' read check used to fail on it).
        with client.as_current():
            return da.from_zarr(zarr_x, chunks=(40, 6)).persist()

    # A persisted array is also fitted when its client is not the current one (its sample
    # of rows was computed on dask's local scheduler: "Missing dependency").
    cases = [(zarr_x, False), (da.from_zarr(zarr_x, chunks=(40, 6)), False),
             (persisted, True), (persisted, False)]
    for data, current in cases:
        with client.as_current() if current else contextlib.nullcontext():
            model = MKKMRK.paper(3, **common).fit(data() if callable(data) else data)
        np.testing.assert_allclose(model.weights_, reference.weights_, atol=1e-12)
        np.testing.assert_array_equal(model.labels_, reference.labels_)
        assert model.n_features_in_ == 6
    if solver == "nystrom":
        np.testing.assert_array_equal(model.predict(da.from_zarr(zarr_x)), model.labels_)
        # dask in, dask out (issue 46): a persisted array's labels are computed where its
        # chunks are, under its client
        lazy = model.predict(persisted())
        assert isinstance(lazy, da.Array)
        with client.as_current():
            np.testing.assert_array_equal(lazy.compute(), model.labels_)
        np.testing.assert_allclose(model.transform(zarr_x), model.embedding_, atol=1e-10)


def test_an_array_persisted_by_another_client_is_refused_in_one_line(client):
    from distributed import Client, LocalCluster

    with LocalCluster(n_workers=1, threads_per_worker=1, processes=False,
                      dashboard_address="127.0.0.1:0",
                      worker_dashboard_address="127.0.0.1:0") as cluster, \
            Client(cluster, set_as_default=False) as other:
        elsewhere = other.persist(da.from_array(X, chunks=(50, 6)))
        with pytest.raises(ValueError, match=r"^the dask array was persisted with another "
                                             r"client \(of inproc://[^\n]*$"):
            MKKMRK(3, solver="nystrom", scheduler=client,
                   backend_options={"n_landmarks": 40}).fit(elsewhere)


def test_multiview_lazy_input(client, zarr_x):
    views = [zarr_x, da.from_array(X[:, :2], chunks=(50, 2))]
    model = MKKMRK.paper(3, kernels=["cosine", "gaussian(c=0.3)@1"], solver="nystrom",
                   scheduler=client, random_state=0, backend_options={"n_landmarks": 40}).fit(views)
    assert model.labels_.shape == (300,)


def test_exact_solver_reads_lazy_input_into_memory(zarr_x):
    a = MKKMRK.paper(3, kernels=KERNELS, random_state=0).fit(zarr_x)
    b = MKKMRK.paper(3, kernels=KERNELS, random_state=0).fit(np.asarray(zarr_x[...], np.float64))
    np.testing.assert_array_equal(a.weights_, b.weights_)


@pytest.mark.parametrize("solver", ["blockwise", "nystrom"])
def test_nan_in_lazy_input_is_named_by_the_first_pass(client, solver):
    bad = X.copy()
    bad[205, 3] = np.nan
    with pytest.raises(ValueError, match=r"view 0, rows \d+\.\.\d+: the data contain NaN") as e:
        options = {"n_landmarks": 30} if solver == "nystrom" else None
        MKKMRK.paper(3, kernels=KERNELS, solver=solver, scheduler=client,
                     backend_options=options).fit(da.from_array(bad, chunks=(50, 6)))
    assert "\n" not in str(e.value)
    first, last = (int(v) for v in str(e.value).split("rows ")[1].split(":")[0].split(".."))
    assert first <= 205 <= last


@pytest.mark.parametrize("bad, message", [
    (da.zeros((10,), chunks=5), "2D array"),
    (da.from_array(np.array([["a", "b"]] * 4)), "expected numbers"),
    ([da.zeros((10, 2)), da.zeros((9, 2))], "same number of rows"),
])
def test_bad_lazy_input_is_refused_without_reading(bad, message):
    with pytest.raises(ValueError, match=message):
        MKKMRK.paper(2, solver="nystrom").fit(bad)


def test_dask_input_is_never_computed_whole(client):
    """No task of the fit holds more than one row block of X (the largest range a task
    reads), whatever its name: X's chunks, slices of it, or concatenations. (Uniform
    landmarks and an absolute width: the sampled rows are then the landmarks alone.)"""
    n, d = 2000, 6
    big = np.vstack([rng.normal(c, 0.5, size=(n // 4, d)) for c in range(4)])
    Xd = da.from_array(big, chunks=(100, d), name="mkrk-input-x")
    block_bytes = 0
    with get_task_stream(client) as stream:
        model = MKKMRK.paper(4, kernels=["cosine", "gaussian(sigma=2.0)"], solver="nystrom",
                       scheduler=client, random_state=0,
                       backend_options={"n_landmarks": 60, "landmarks": "uniform",
                                        "chunk_size": 250,
                                        "exact_dissimilarity_max_n": 0}).fit(Xd)
    assert model.labels_.shape == (n,)
    from mkrk_dask.passes import input_row_starts, row_tasks

    # the tasks the fit made: whole input chunks of 100 rows joined up to its step
    block_rows = max(b - a for a, b in row_tasks(n, 250, 2, row_bytes=8 * d,
                                                 starts=input_row_starts([Xd])))
    block_bytes = block_rows * d * 8
    def name(task):
        key = task["key"]
        return str(key[0] if isinstance(key, tuple) else key)

    from_x = [t for t in stream.data
              if name(t).startswith(("mkrk-input-x", "getitem", "concatenate", "rechunk",
                                     "finalize"))]
    assert from_x, "no task of the input was seen"
    biggest = max(t.get("nbytes", 0) for t in from_x)
    assert 0 < biggest <= block_bytes < big.nbytes // 2


def test_precomputed_kernels_in_zarr_are_read_one_kernel_at_a_time(client, tmp_path):
    # They were read whole into the client's memory as float64 (8 m n^2 bytes), even for
    # the blockwise backend, which writes them to its store one kernel at a time.
    import tracemalloc

    from mkrk_dask.precomputed import check_precomputed, kernel_stack

    n, m = 300, 16
    sq = ((X[:, None] - X[None]) ** 2).sum(-1)
    stack = np.stack([np.exp(-sq / s) for s in np.geomspace(0.5, 50, m)])
    stored = zarr.create_array(str(tmp_path / "k.zarr"), shape=stack.shape,
                               chunks=(1, 150, 150), dtype="float64")
    stored[...] = stack
    assert isinstance(kernel_stack(stored), da.Array)
    many = zarr.create_array(str(tmp_path / "many.zarr"), shape=(4 * m, n, n),
                             chunks=(1, 150, 150), dtype="float64")
    many[...] = np.concatenate([stack] * 4)
    tracemalloc.start()
    try:
        checked = check_precomputed(many)  # finite, symmetric, PSD: kernel by kernel
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert isinstance(checked, da.Array)
    # a few kernels' worth (two threads, each a kernel read and its PSD buffer), not 64
    assert peak < 12 * n * n * 8
    common = dict(kernels="precomputed", random_state=0, max_iter=10)
    reference = MKKMRK(3, solver="blockwise", scheduler=client, **common).fit(stack)
    for data in (stored, da.from_zarr(stored)):
        model = MKKMRK(3, solver="blockwise", scheduler=client, **common).fit(data)
        np.testing.assert_array_equal(model.weights_, reference.weights_)
        np.testing.assert_array_equal(model.labels_, reference.labels_)
    exact = MKKMRK(3, **common).fit(stored)  # solver="auto": read whole, prepared in place
    assert exact.solver_ == "exact"
    np.testing.assert_allclose(exact.weights_, reference.weights_, atol=1e-9)
    bad = zarr.create_array(str(tmp_path / "bad.zarr"), shape=(2, n, n), chunks=(1, n, n),
                            dtype="float64")
    bad[...] = np.stack([stack[0], stack[1] + np.triu(np.ones((n, n)), 1)])
    with pytest.raises(ValueError, match="kernel 1 is not symmetric"):
        MKKMRK(3, solver="blockwise", scheduler=client, **common).fit(bad)
