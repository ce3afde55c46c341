"""The blockwise backend against the exact one, on real Zarr stores and real Dask clusters."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from functools import partial
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
import zarr
from _data import gaussian_blobs
from distributed import Client, get_task_stream

import mkrk_dask
from mkrk_dask import MKKMRK
from mkrk_dask.backends.blockwise import BlockwiseBackend
from mkrk_dask.backends.exact import ExactBackend
from mkrk_dask.kernels import KernelSpec, paper_kernels
from mkrk_dask.loop import solve
from mkrk_dask.store import StoreError, create_store

REPO_ROOT = Path(mkrk_dask.__file__).resolve().parent.parent


#: ``blobs(n=...)``: X, y of Gaussian blobs, by default 150 rows in 6 columns around 3 centres
blobs = partial(gaussian_blobs, n=150, d=6, k=3, seed=0, spread=4.0)


def rel(a, b):
    return np.abs(np.asarray(a) - np.asarray(b)).max() / np.abs(np.asarray(b)).max()


def task_names(stream):
    return [t["key"][0] if isinstance(t["key"], tuple) else t["key"] for t in stream]


def count(stream, prefix):
    return sum(1 for key in task_names(stream) if str(key).startswith(prefix))


# -- kernels, traces, C, top-k ------------------------------------------------------------------


def test_quantities_match_exact_multiview(client, tmp_path):
    X, _ = blobs(n=170)
    S = sp.random(170, 40, density=0.2, random_state=1, format="csr") + sp.eye(170, 40)
    specs = paper_kernels(0) + [KernelSpec("linear", view=1), KernelSpec("gaussian", c=1.0,
                                                                         view=1)]
    exact = ExactBackend.from_views([X, sp.csr_matrix(S)], specs)
    with BlockwiseBackend.from_views([X, S], specs, scheduler=client, chunk_size=64,
                                     store=tmp_path / "k.zarr") as bw:
        assert bw.n_kernels == 14 and bw.n_samples == 170 and bw.chunk_size == 64
        assert [s.sigma for s in bw.kernel_specs] == [s.sigma for s in exact.kernel_specs]
        for p in (0, 4, 5, 11, 12, 13):
            np.testing.assert_allclose(bw.kernel(p), exact.kernels[p], rtol=0, atol=1e-12)
        assert rel(bw.traces(), exact.traces()) < 1e-10
        for measure in ("fip", "sfn"):
            assert rel(bw.dissimilarity(measure), exact.dissimilarity(measure)) < 1e-10
        with pytest.raises(ValueError, match="unsupported dissimilarity"):
            bw.dissimilarity("vn")
        w = np.linspace(0.5, 1.5, 14)
        w /= w.sum()
        top = bw.top_k(w, 3)
        ref = exact.top_k(w, 3)
        assert bw.eigen_info["converged"]
        np.testing.assert_allclose(top.eigenvalues, ref.eigenvalues, rtol=1e-10)
        # same subspace
        H, R = top.basis, ref.basis
        assert np.linalg.norm(H @ (H.T @ R) - R) < 1e-8
        # the fused quad forms equal a separate pass, and the exact ones
        assert top.quad_forms is not None
        before = dict(bw.passes)
        separate = bw.quad_forms(type(top)(top.eigenvalues, top.basis))
        assert bw.passes["quad"] == before["quad"] + 1
        np.testing.assert_allclose(top.quad_forms, separate, rtol=1e-11)
        np.testing.assert_allclose(top.quad_forms, exact.quad_forms(ref), rtol=1e-9)
        # warm start from the previous basis converges in fewer products
        products = bw.eigen_info["products"]
        bw.top_k(w * np.linspace(0.99, 1.01, 14), 3, warm_start=top)
        assert bw.eigen_info["products"] < products


def test_input_containers_give_one_store(client, tmp_path):
    """numpy, dask and Zarr inputs of the same values: same fingerprint, so the store is reused;
    a scipy sparse input builds the same kernels."""
    import dask.array as da

    X, _ = blobs(n=90)
    specs = paper_kernels()
    path = tmp_path / "k.zarr"
    with BlockwiseBackend.from_views([X], specs, scheduler=client, store=path,
                                     chunk_size=40) as bw:
        ref = np.stack([bw.kernel(p) for p in range(12)])
        assert bw.built
    with BlockwiseBackend.from_views([da.from_array(X, chunks=(25, 6))], specs,
                                     scheduler=client, store=path) as bw:
        assert not bw.built
    z = zarr.create_array(str(tmp_path / "x.zarr"), shape=X.shape, chunks=(30, 6),
                          dtype="float64")
    z[...] = X
    with BlockwiseBackend.from_views([z], specs, scheduler=client, store=path) as bw:
        assert not bw.built
    # built from dask and zarr inputs directly (fresh stores)
    for view in (da.from_array(X, chunks=(25, 6)), z, sp.csr_matrix(X)):
        with BlockwiseBackend.from_views([view], specs, scheduler=client,
                                         chunk_size=40) as bw:
            assert bw.built
            got = np.stack([bw.kernel(p) for p in range(12)])
            np.testing.assert_allclose(got, ref, rtol=0, atol=1e-12)


def test_precomputed_matches_exact(client):
    X, _ = blobs(n=80)
    K = ExactBackend.from_views([X], paper_kernels()).kernels[[0, 3, 6, 9]] * 2.5
    exact = ExactBackend.from_precomputed(K)
    with BlockwiseBackend.from_precomputed(K, scheduler=client, chunk_size=32) as bw:
        assert bw.kernel_specs is None
        assert rel(bw.traces(), exact.traces()) < 1e-10
        assert rel(bw.dissimilarity("fip"), exact.dissimilarity("fip")) < 1e-10
        np.testing.assert_allclose(bw.kernel(2), exact.kernels[2], atol=1e-13)


# -- stores: reuse, refusals, no recomputation --------------------------------------------------


def test_reopen_reuses_store_without_any_pass(client, tmp_path):
    X, _ = blobs(n=120)
    path = tmp_path / "k.zarr"
    specs = paper_kernels()
    with get_task_stream(client) as first:
        with BlockwiseBackend.from_views([X], specs, scheduler=client, store=path,
                                         chunk_size=50) as bw:
            C, tr = bw.dissimilarity("fip"), bw.traces()
            assert bw.built and bw.passes["gram"] == 0  # Gram matrix came with the build
    n_pairs = 3 * 4 // 2
    assert count(first.data, "build_pair") == n_pairs
    assert count(first.data, "gram_rows") == 0
    chunk_files = sorted(p for p in (path / "kernels").rglob("*") if p.is_file())
    mtimes = [p.stat().st_mtime_ns for p in chunk_files]
    with get_task_stream(client) as second:
        with BlockwiseBackend.from_views([X], specs, scheduler=client, store=path) as bw:
            assert not bw.built and bw.chunk_size == 50
            np.testing.assert_array_equal(bw.dissimilarity("fip"), C)
            np.testing.assert_array_equal(bw.traces(), tr)
            assert set(bw.passes.values()) == {0}
    assert count(second.data, "build_pair") == 0 and count(second.data, "gram_rows") == 0
    assert [p.stat().st_mtime_ns for p in chunk_files] == mtimes
    # Results lost (e.g. an older store): exactly one Gram pass, then persisted.
    group = zarr.open_group(str(path), mode="r+")
    group.attrs.update({"results": {}})
    with BlockwiseBackend.from_views([X], specs, scheduler=client, store=path) as bw:
        assert rel(bw.dissimilarity("sfn"), ExactBackend.from_views([X], specs)
                   .dissimilarity("sfn")) < 1e-10
        bw.traces()
        bw.dissimilarity("fip")
        assert bw.passes["gram"] == 1
    with BlockwiseBackend.from_views([X], specs, scheduler=client, store=path) as bw:
        bw.traces()
        assert bw.passes["gram"] == 0


def test_store_built_from_other_inputs_is_refused(client, tmp_path):
    X, _ = blobs(n=60)
    path = tmp_path / "k.zarr"
    BlockwiseBackend.from_views([X], paper_kernels(), scheduler=client, store=path).close()
    X2 = X.copy()
    X2[3, 1] += 1e-9
    with pytest.raises(StoreError, match="'fingerprint' differs"):
        BlockwiseBackend.from_views([X2], paper_kernels(), scheduler=client, store=path)
    with pytest.raises(StoreError, match="'kernel_request' differs"):
        BlockwiseBackend.from_views([X], paper_kernels()[:5], scheduler=client, store=path)
    with pytest.raises(StoreError, match="'normalize' differs"):
        BlockwiseBackend.from_views([X], paper_kernels(), scheduler=client, store=path,
                                    normalize=False)
    with pytest.raises(StoreError, match="'chunk_size' differs"):
        BlockwiseBackend.from_views([X], paper_kernels(), scheduler=client, store=path,
                                    chunk_size=17)
    # overwrite rebuilds it for the new data
    with BlockwiseBackend.from_views([X2], paper_kernels(), scheduler=client, store=path,
                                     overwrite=True, chunk_size=17) as bw:
        assert bw.built and bw.chunk_size == 17
        assert rel(bw.traces(), ExactBackend.from_views([X2], paper_kernels()).traces()) < 1e-10


def test_foreign_and_half_written_stores_are_refused(client, tmp_path):
    X, _ = blobs(n=60)
    foreign = tmp_path / "foreign.zarr"
    zarr.open_group(str(foreign), mode="w").create_array("kernels", shape=(2, 2),
                                                         dtype="float64")
    with pytest.raises(StoreError, match="not written by mkrk-dask"):
        BlockwiseBackend.from_views([X], paper_kernels(), scheduler=client, store=foreign)
    # A build that dies half-way (a kernel task fails on the last row block) leaves an
    # incomplete store on disk: it is never read as complete; the next run resumes its build
    # (and meets the same bad row).
    bad = X.copy()
    bad[-1, 0] = np.nan  # the backend itself does not check its input: the task meets it
    directions = [KernelSpec("linear"), KernelSpec("polynomial", a=0, b=2)]
    half = tmp_path / "half.zarr"
    with pytest.raises(ValueError, match="self-similarity is negative or not a number"):
        BlockwiseBackend.from_views([bad], directions, scheduler=client, store=half,
                                    chunk_size=20)
    assert (half / "zarr.json").exists()
    assert zarr.open_group(str(half)).attrs["complete"] is False
    with pytest.raises(ValueError, match="self-similarity is negative or not a number"):
        BlockwiseBackend.from_views([bad], directions, scheduler=client, store=half,
                                    chunk_size=20)
    # and one written by hand without the completion marker (nor the build's metadata)
    manual = tmp_path / "manual.zarr"
    group = create_store(manual, kind="kernels", metadata={"n": 60})
    group.create_array("kernels", shape=(12, 60, 60), chunks=(1, 20, 20), dtype="float64")
    with pytest.raises(StoreError, match="does not match"):
        BlockwiseBackend.from_views([X], paper_kernels(), scheduler=client, store=manual)


def test_fit_runs_each_pass_once(client, tmp_path):
    """A fused fit: one build (with the Gram matrix), no Gram pass, no separate quad-form pass,
    and exactly one task per row block per product."""
    X, y = blobs(n=160)
    with get_task_stream(client) as stream:
        backend = BlockwiseBackend.from_views([X], paper_kernels(), scheduler=client,
                                              chunk_size=64, products="fused")
        try:
            result = solve(backend, 3, 2.0**-10)
            passes = dict(backend.passes)
        finally:
            backend.close()
    assert count(stream.data, "build_pair") == 6
    assert count(stream.data, "gram_rows") == 0
    assert count(stream.data, "row_quad") == 0 and passes["quad"] == 0
    assert count(stream.data, "row_images") == 3 * passes["apply"]
    assert passes["apply"] >= result.n_iter
    assert not Path(backend.store_path).exists()  # temporary store deleted by close()


def test_combined_products_match_fused_and_clean_up(client, tmp_path):
    """products="combined": K_w in a scratch array, same results, scratch removed by close()."""
    X, _ = blobs(n=150)
    path = tmp_path / "k.zarr"
    with BlockwiseBackend.from_views([X], paper_kernels(), scheduler=client, store=path,
                                     chunk_size=64, products="fused") as fused:
        ref = solve(fused, 3, 2.0**-10)
        assert fused.passes["combine"] == 0 and fused.passes["quad"] == 0
    combined = BlockwiseBackend.from_views([X], paper_kernels(), scheduler=client, store=path,
                                           products="combined")
    try:
        assert not combined.built
        got = solve(combined, 3, 2.0**-10)
        passes = dict(combined.passes)
        scratch = Path(combined.store_path) / combined._scratch
        assert scratch.exists()
    finally:
        combined.close()
    assert not scratch.exists() and (path / "kernels").exists()
    assert passes["apply"] == 0 and passes["combine"] == got.n_iter == passes["quad"]
    assert passes["apply_combined"] >= got.n_iter
    np.testing.assert_allclose(got.objective_history, ref.objective_history, rtol=1e-9)
    np.testing.assert_allclose(got.weights, ref.weights, atol=1e-6)
    with pytest.raises(ValueError, match="products must be one of"):
        BlockwiseBackend.from_views([X], paper_kernels(), scheduler=client, store=path,
                                    products="magic")


# -- the estimator: blockwise == exact ----------------------------------------------------------


def assert_same_fit(blockwise, exact):
    assert blockwise.solver_ == "blockwise"
    assert rel(blockwise.traces_, exact.traces_) < 1e-10
    assert rel(blockwise.dissimilarity_, exact.dissimilarity_) < 1e-10
    assert len(blockwise.objective_history_) == len(exact.objective_history_)
    np.testing.assert_allclose(blockwise.objective_history_, exact.objective_history_,
                               rtol=1e-6)
    # The Y-step's optimum is not unique (DESIGN.md): weights may drift where the objective
    # does not; on the paper's datasets they agree to ~1e-10, on the sfn toy to ~1e-5.
    np.testing.assert_allclose(blockwise.weights_, exact.weights_, atol=1e-4)
    np.testing.assert_array_equal(blockwise.labels_, exact.labels_)


def test_estimator_matches_exact_synthetic(client, tmp_path):
    X, _ = blobs(n=200, k=4)
    for dissimilarity in ("fip", "sfn"):
        exact = MKKMRK.paper(n_clusters=4, solver="exact", dissimilarity=dissimilarity,
                       random_state=0).fit(X)
        blockwise = MKKMRK.paper(n_clusters=4, solver="blockwise", dissimilarity=dissimilarity,
                           scheduler=client, store=tmp_path / "k.zarr", random_state=0,
                           backend_options={"chunk_size": 64}).fit(X)
        assert_same_fit(blockwise, exact)


def test_default_scheduler_starts_and_stops_a_local_cluster():
    X, _ = blobs(n=80)
    backend = BlockwiseBackend.from_views([X], paper_kernels()[:3])
    try:
        assert backend.session.started_locally
        cluster = backend.session.cluster
        assert backend.traces().shape == (3,)
    finally:
        backend.close()
    assert cluster.status.name == "closed"
    backend.close()  # idempotent


def dataset_or_skip(name):
    from mkrk_dask.datasets import default_data_dir, load_dataset

    data_dir = default_data_dir()
    if data_dir is None or not data_dir.is_dir():
        pytest.skip("../shared/datasets not found")
    try:
        return load_dataset(name, data_dir)
    except FileNotFoundError:
        pytest.skip(f"dataset {name} not found in {data_dir}")


@pytest.mark.datasets
@pytest.mark.parametrize("name", ["jaffe", "orl", pytest.param("coil20", marks=pytest.mark.slow)])
def test_estimator_matches_exact_on_paper_datasets(client, tmp_path, name):
    data = dataset_or_skip(name)
    k = len(np.unique(data.y))
    exact = MKKMRK.paper(n_clusters=k, solver="exact", random_state=0).fit(data.X)
    blockwise = MKKMRK.paper(n_clusters=k, solver="blockwise", scheduler=client,
                       store=tmp_path / f"{name}.zarr", random_state=0).fit(data.X)
    assert_same_fit(blockwise, exact)


# -- a cluster of processes: scheduler + two nanny-managed workers on 127.0.0.1 ----------------


@pytest.fixture
def process_cluster(tmp_path):
    """``dask scheduler`` and two ``dask worker`` processes started as subprocesses."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(REPO_ROOT)] + ([os.environ["PYTHONPATH"]] if os.environ.get("PYTHONPATH") else [])))
    scheduler_file = tmp_path / "scheduler.json"
    cli = [sys.executable, "-m", "distributed.cli"]
    logs = []
    procs = []

    def start(args, name):
        log = open(tmp_path / f"{name}.log", "w")  # noqa: SIM115 - closed in finally
        logs.append(log)
        procs.append(subprocess.Popen(args, env=env, stdout=log, stderr=subprocess.STDOUT,
                                      start_new_session=True))

    client = None
    try:
        start(cli[:-1] + ["distributed.cli.dask_scheduler", "--host", "127.0.0.1", "--port",
                          "0", "--no-dashboard", "--scheduler-file", str(scheduler_file)],
              "scheduler")
        deadline = time.monotonic() + 60
        while not scheduler_file.exists():
            if time.monotonic() > deadline or procs[0].poll() is not None:
                raise RuntimeError("scheduler did not start: "
                                   + (tmp_path / "scheduler.log").read_text())
            time.sleep(0.2)
        for i in range(2):
            start(cli[:-1] + ["distributed.cli.dask_worker", "--scheduler-file",
                              str(scheduler_file), "--nworkers", "1", "--nthreads", "1",
                              "--host", "127.0.0.1", "--no-dashboard",
                              "--memory-limit", "2GB"], f"worker{i}")
        client = Client(scheduler_file=str(scheduler_file), timeout=60)
        client.wait_for_workers(2, timeout=60)
        yield client
    finally:
        if client is not None:
            client.close()
        for proc in reversed(procs):
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
        for proc in reversed(procs):
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=10)
        for log in logs:
            log.close()


@pytest.mark.slow
def test_fit_on_a_scheduler_with_two_worker_processes(process_cluster, tmp_path):
    X, _ = blobs(n=240, k=4)
    address = process_cluster.scheduler.address
    exact = MKKMRK.paper(n_clusters=4, solver="exact", random_state=0).fit(X)
    blockwise = MKKMRK.paper(n_clusters=4, solver="blockwise", scheduler=address,
                             store=tmp_path / "k.zarr", random_state=0,
                             backend_options={"chunk_size": 64}).fit(X)
    assert_same_fit(blockwise, exact)
    # both workers took part, and the cluster we did not start is still up
    assert len(process_cluster.scheduler_info()["workers"]) == 2
    processing = process_cluster.run(lambda: 1)
    assert len(processing) == 2


@pytest.mark.slow
def test_worker_killed_mid_fit(process_cluster, tmp_path):
    """A nanny-managed worker process dies during the second H-step; the fit still finishes,
    with the same weights as an undisturbed fit."""
    import psutil

    X, _ = blobs(n=512, k=4, seed=3)
    specs = paper_kernels()
    store = tmp_path / "k.zarr"
    with BlockwiseBackend.from_views([X], specs, scheduler=process_cluster, store=store,
                                     chunk_size=128) as backend:
        reference = solve(backend, 4, 2.0**-10)
    pids = process_cluster.run(os.getpid)
    victim_address, victim = sorted(pids.items())[0]
    killed = {}

    def kill_soon():
        time.sleep(0.3)
        psutil.Process(victim).kill()
        killed["at"] = time.monotonic()

    threads = []

    def callback(info):
        if info.iteration == 1:
            threads.append(threading.Thread(target=kill_soon, daemon=True))
            threads[0].start()

    backend = BlockwiseBackend.from_views([X], specs, scheduler=process_cluster, store=store)
    assert not backend.built
    try:
        result = solve(backend, 4, 2.0**-10, callback=callback)
        finished = time.monotonic()
    finally:
        backend.close()
    threads[0].join()
    assert "at" in killed and killed["at"] < finished, "the worker was not killed mid-fit"
    assert not psutil.pid_exists(victim) or psutil.Process(victim).status() == "zombie"
    assert result.n_iter == len(reference.objective_history) and result.n_iter >= 2
    # Every product sums its blocks in a fixed order, whichever worker runs it: a re-run task
    # gives the same bits, so the disturbed fit equals the undisturbed one.
    np.testing.assert_allclose(result.weights, reference.weights, rtol=0, atol=1e-12)
    np.testing.assert_allclose(result.objective_history, reference.objective_history,
                               rtol=1e-12)
    # The nanny restarted the worker: the cluster is back to two workers.
    process_cluster.wait_for_workers(2, timeout=60)
    assert victim not in process_cluster.run(os.getpid).values()
