"""Faults on a real cluster (a scheduler and nanny worker processes on 127.0.0.1): a worker
killed during every distributed pass, a build or fit interrupted and resumed (also by a real
SIGKILL of the client process), and a lost scheduler."""

from __future__ import annotations

import io
import os
import signal
import subprocess
import sys
import textwrap
import time
import warnings

import numpy as np
import psutil
import pytest
import zarr
from distributed import Client, LocalCluster

from mkrk_dask import MKKMRK, SimpleMKKM, progress
from mkrk_dask.exceptions import SchedulerLostError
from mkrk_dask.store import checkpoints
from mkrk_dask.store.checkpoints import LoopCheckpoint, PassCheckpoint

rng = np.random.default_rng(11)
X = np.vstack([rng.normal(c, 0.6, size=(110, 5)) for c in (0.0, 2.0, 4.0)])
KERNELS = ["cosine", "polynomial(a=1,b=2)", "gaussian(c=0.2)", "gaussian(c=1)"]


@pytest.fixture
def nanny_cluster():
    # a fresh cluster per test: a test kills a worker, and whether (and when) the nanny brings
    # it back is distributed's business, not the fit's (once in a loaded CI run it had not
    # after 300 s, and the next test would have inherited one worker)
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                      dashboard_address="127.0.0.1:0", worker_dashboard_address="127.0.0.1:0"
                      ) as lc, Client(lc, set_as_default=False) as c:
        yield c


def _fit(client, solver, data=X, method="MKKM-RK", **extra):
    params = dict(kernels=KERNELS, solver=solver, scheduler=client, random_state=0,
                  backend_options={"chunk_size": 60}, tol=1e-7, tol_mode="relative")
    if method == "SimpleMKKM":
        # the scaled steps: a few iterations, each with its line search's H-steps
        params.update(direction="scaled", gap_tol=1e-6)
        cls = SimpleMKKM
    else:
        params["lam"] = 2.0**-8
        cls = MKKMRK
    if solver == "nystrom":
        params["backend_options"]["n_landmarks"] = 40
    params["backend_options"].update(extra.pop("backend_options", {}))
    params.update(extra)
    return cls.paper(3, **params).fit(data)


def _kill_during(monkeypatch, client, label):
    """SIGKILL one worker process as soon as the first task of the pass ``label`` is in."""
    killed = []
    original = progress.Reporter.task_pass

    def task_pass(self, name, total, level=1):
        bar = original(self, name, total, level)
        if name == label and not killed:
            advance = bar.advance

            def advance_and_kill(count=1):
                if not killed:
                    pid = sorted(client.run(os.getpid).values())[0]
                    psutil.Process(pid).kill()
                    killed.append(pid)
                advance(count)

            bar.advance = advance_and_kill
        return bar

    monkeypatch.setattr(progress.Reporter, "task_pass", task_pass)
    return killed


PASSES = [("blockwise", "largest distance", {}),
          ("blockwise", "kernel build", {}),
          ("blockwise", "eigensolver product", {}),
          ("nystrom", "largest distance", {}),
          ("nystrom", "Nystrom factors + Gram", {}),
          # more than one 1024-row block, so that the pass has several tasks
          ("nystrom", "exact C and local part",
           {"data": np.vstack([X] * 4) + rng.normal(0, 0.01, size=(4 * len(X), 5))}),
          ("nystrom", "embedding H = F B", {"backend_options": {"local_threshold": 0}}),
          # SimpleMKKM's line search makes H-steps of its own: a kill in one changes nothing
          ("blockwise", "eigensolver product", {"method": "SimpleMKKM"}),
          ("nystrom", "Nystrom factors + Gram", {"method": "SimpleMKKM"})]


@pytest.mark.parametrize("solver, label, extra", PASSES,
                         ids=[f"{s}-{p}" + (f"-{e['method']}" if "method" in e else "")
                              for s, p, e in PASSES])
def test_a_worker_killed_during_a_pass_changes_nothing(nanny_cluster, monkeypatch, solver,
                                                       label, extra):
    reference = _fit(nanny_cluster, solver, **extra)
    nanny_cluster.wait_for_workers(2, timeout=120)
    killed = _kill_during(monkeypatch, nanny_cluster, label)
    disturbed = _fit(nanny_cluster, solver, **extra)
    assert killed, f"the pass {label!r} never ran"
    assert not psutil.pid_exists(killed[0]) or psutil.Process(killed[0]).status() == "zombie"
    np.testing.assert_array_equal(disturbed.weights_, reference.weights_)
    np.testing.assert_array_equal(disturbed.labels_, reference.labels_)


def test_a_worker_killed_during_a_pass_over_persisted_input_changes_nothing(nanny_cluster,
                                                                          monkeypatch):
    """A persisted dask array's tasks take its chunks from the workers' memory: a worker
    killed in the factor pass takes some of them along, the scheduler computes them again
    from their graph, and the fit ends as on numpy input.

    "Changes nothing" here means the same labels and weights equal within round-off (1e-12
    relative, 1e-15 absolute), not bit for bit: the chunks computed again live at other
    addresses, and BLAS (OpenBLAS, MKL) may split a product differently for differently
    aligned buffers, so the factors can differ in the last bit (1.9e-16 on a weight was seen
    in a fresh-clone run). The sums of the pass are added in a fixed order (run_pass
    ordered), so nothing larger than that can arise from the kill."""
    import dask.array as da

    reference = _fit(nanny_cluster, "nystrom")
    nanny_cluster.wait_for_workers(2, timeout=120)
    persisted = nanny_cluster.persist(da.from_array(X, chunks=(60, 5)))
    killed = _kill_during(monkeypatch, nanny_cluster, "Nystrom factors + Gram")
    disturbed = _fit(nanny_cluster, "nystrom", data=persisted)
    assert killed, "the factor pass never ran"
    np.testing.assert_allclose(disturbed.weights_, reference.weights_, rtol=1e-12, atol=1e-15)
    np.testing.assert_array_equal(disturbed.labels_, reference.labels_)


class _Stop(BaseException):
    """Stands for the client dying right after a checkpoint was written."""


@pytest.mark.parametrize("solver, method", [("blockwise", "MKKM-RK"), ("nystrom", "MKKM-RK"),
                                            ("blockwise", "SimpleMKKM"),
                                            ("nystrom", "SimpleMKKM")])
def test_an_interrupted_fit_resumes_without_recomputing(client, tmp_path, monkeypatch, solver,
                                                        method):
    reference = _fit(client, solver, store=tmp_path / "ref.zarr", method=method)
    saves = []
    original = LoopCheckpoint.save

    def save_then_stop(self, state):
        original(self, state)
        saves.append(state["iteration"])
        if len(saves) == 2:
            raise _Stop

    monkeypatch.setattr(LoopCheckpoint, "save", save_then_stop)
    monkeypatch.setattr(checkpoints, "_LOOP_SAVE_INTERVAL", 0.0)  # a save every iteration
    with pytest.raises(_Stop):
        _fit(client, solver, store=tmp_path / "s.zarr", method=method)
    monkeypatch.undo()
    log = io.StringIO()
    with progress.reporting(1, log):
        resumed = _fit(client, solver, store=tmp_path / "s.zarr", verbose=1, method=method)
    text = log.getvalue()
    assert "resuming the fit saved in the store after iteration 2" in text
    assert "iter   1 " not in text and "iter   2 " not in text and "iter   3 " in text
    np.testing.assert_array_equal(resumed.weights_, reference.weights_)
    np.testing.assert_array_equal(resumed.labels_, reference.labels_)
    np.testing.assert_array_equal(resumed.objective_history_, reference.objective_history_)
    group = zarr.open_group(str(tmp_path / "s.zarr"))
    assert not [name for name in group.array_keys() if name.startswith("fit_")]  # cleared


def _stop_after_saves(monkeypatch, name, count):
    """Make the ``count``-th checkpoint written by the pass ``name`` stop the fit (as a killed
    client would); returns the list of what the saves recorded."""
    original = PassCheckpoint.save
    done = []

    def save_then_stop(self, value, sums, force=False):
        wrote = original(self, value, sums, force=force)
        if wrote and self.name == name:
            done.append(value)
            if len(done) == count:
                raise _Stop
        return wrote

    monkeypatch.setattr(PassCheckpoint, "save", save_then_stop)
    return done


@pytest.mark.parametrize("solver, name", [("blockwise", "build"), ("nystrom", "factor_rows")])
def test_an_interrupted_build_resumes_from_its_progress(client, tmp_path, monkeypatch, solver,
                                                        name):
    reference = _fit(client, solver, store=tmp_path / "ref.zarr")
    done = _stop_after_saves(monkeypatch, name, 2)
    with pytest.raises(_Stop):
        _fit(client, solver, store=tmp_path / "s.zarr")
    monkeypatch.undo()
    assert zarr.open_group(str(tmp_path / "s.zarr")).attrs["complete"] is False
    log = io.StringIO()
    with progress.reporting(1, log):
        resumed = _fit(client, solver, store=tmp_path / "s.zarr")
    assert "resuming the interrupted build" in log.getvalue()
    assert f"{done[-1]:,} of " in log.getvalue()
    np.testing.assert_array_equal(resumed.weights_, reference.weights_)
    np.testing.assert_array_equal(resumed.labels_, reference.labels_)


def test_a_build_resumes_on_a_cluster_with_other_threads(client, tmp_path, monkeypatch):
    # The Nystrom pass's tasks depend on the threads; its checkpoint counts rows, so a build
    # interrupted on two threads continues on one with the rows that were left.
    from distributed import Client, LocalCluster

    reference = _fit(client, "nystrom", store=tmp_path / "ref.zarr")
    done = _stop_after_saves(monkeypatch, "factor_rows", 3)
    with pytest.raises(_Stop):
        _fit(client, "nystrom", store=tmp_path / "s.zarr")
    monkeypatch.undo()
    log = io.StringIO()
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=False,
                      dashboard_address="127.0.0.1:0",
                      worker_dashboard_address="127.0.0.1:0") as cluster, \
            Client(cluster) as one_thread:
        with progress.reporting(1, log):
            resumed = _fit(one_thread, "nystrom", store=tmp_path / "s.zarr")
    assert f"the factors of {done[-1]:,} of {X.shape[0]:,} rows were done before" in log.getvalue()
    # the same sums, added in another grouping
    np.testing.assert_allclose(resumed.weights_, reference.weights_, rtol=1e-10, atol=1e-12)
    np.testing.assert_array_equal(resumed.labels_, reference.labels_)


DRIVER = textwrap.dedent("""
    import sys
    import numpy as np
    from mkrk_dask import MKKMRK
    rng = np.random.default_rng(11)
    X = np.vstack([rng.normal(c, 0.6, size=(200, 8)) for c in (0.0, 2.0, 4.0)])
    model = MKKMRK.paper(3, kernels={kernels!r}, solver="blockwise", store=sys.argv[1],
                   backend_options={{"chunk_size": 50}}, lam=2.0**-8, tol=1e-9,
                   tol_mode="relative",
                   random_state=0, verbose=1).fit(X)
    np.save(sys.argv[2], np.concatenate([model.weights_, model.labels_]))
""").format(kernels=KERNELS + ["gaussian(c=0.05)", "polynomial(a=0,b=4)"])


def _run_driver(tmp_path, store, out, kill_when=None):
    script = tmp_path / "driver.py"
    script.write_text(DRIVER)
    proc = subprocess.Popen([sys.executable, str(script), str(store), str(out)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if kill_when is None:
        stdout, stderr = proc.communicate(timeout=600)
        assert proc.returncode == 0, stderr
        return stderr
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            with warnings.catch_warnings():  # listing a store while it is written
                warnings.simplefilter("ignore")
                group = zarr.open_group(str(store), mode="r")
                attrs = group.attrs.asdict()
                # each fit's loop state is recorded on its own array (LoopCheckpoint)
                attrs["fits"] = {name: dict(group[name].attrs.get("state") or {})
                                 for name in group.array_keys() if name.endswith("_record")}
        except Exception:  # noqa: BLE001 - not written yet
            attrs = {}
        if kill_when(attrs):
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(timeout=60)
            return None
        time.sleep(0.05)
    proc.kill()
    pytest.fail("the fit ended before the moment to kill it came")


@pytest.fixture(scope="module")
def driver_reference(tmp_path_factory) -> np.ndarray:
    """The uninterrupted run's weights and labels: one run for both moments."""
    tmp_path = tmp_path_factory.mktemp("driver_reference")
    _run_driver(tmp_path, tmp_path / "ref.zarr", tmp_path / "ref.npy")
    return np.load(tmp_path / "ref.npy")


@pytest.mark.slow
@pytest.mark.parametrize("moment", ["build", "iterations"])
def test_client_sigkilled_then_rerun_gives_the_same_bits(tmp_path, moment, driver_reference):
    if moment == "build":
        def when(attrs):
            return attrs.get("progress", {}).get("build", {}).get("done", 0) >= 5
    else:
        def when(attrs):
            return any(f.get("iteration", 0) >= 1 for f in attrs.get("fits", {}).values())
    _run_driver(tmp_path, tmp_path / "s.zarr", tmp_path / "out.npy", kill_when=when)
    log = _run_driver(tmp_path, tmp_path / "s.zarr", tmp_path / "out.npy")
    expected = "resuming the interrupted build" if moment == "build" else "resuming the fit"
    assert expected in log
    if moment == "iterations":
        assert "iter   1 " not in log
    np.testing.assert_array_equal(np.load(tmp_path / "out.npy"), driver_reference)


def test_a_lost_scheduler_ends_the_fit_in_one_line_within_a_minute(tmp_path, monkeypatch):
    """The minute is counted from the scheduler's death (as in test_scheduler_loss.py and
    docs/reliability.rst), not from the start of the fit. The error comes 30 s after the
    kill (distributed's reconnect timeout: 30.2 s in three runs on a loaded 2-core machine),
    but starting the scheduler and worker processes, connecting and the first pass took
    another 17-24 s there, and about 31 s in a run that failed at 61 s when this was
    timed from the start."""
    port_probe = __import__("socket").socket()
    port_probe.bind(("127.0.0.1", 0))
    port = port_probe.getsockname()[1]
    port_probe.close()
    cli = [sys.executable, "-m", "distributed.cli"]
    scheduler = subprocess.Popen(cli[:2] + ["distributed.cli.dask_scheduler", "--host",
                                            "127.0.0.1", "--port", str(port), "--no-dashboard"],
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    worker = subprocess.Popen(cli[:2] + ["distributed.cli.dask_worker", f"tcp://127.0.0.1:{port}",
                                         "--nthreads", "1", "--no-dashboard", "--host",
                                         "127.0.0.1"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        original = progress.Reporter.task_pass
        killed = []

        def task_pass(self, name, total, level=1):
            bar = original(self, name, total, level)
            if name == "kernel build" and not killed:
                scheduler.kill()
                killed.append(time.monotonic())
            return bar

        monkeypatch.setattr(progress.Reporter, "task_pass", task_pass)
        with pytest.raises(SchedulerLostError, match="lost the connection") as caught:
            MKKMRK.paper(3, kernels=KERNELS, solver="blockwise",
                         scheduler=f"tcp://127.0.0.1:{port}",
                         backend_options={"chunk_size": 30}).fit(X)
        assert killed, "the kernel build never started"
        seconds = time.monotonic() - killed[0]
        assert seconds < 60, seconds
        assert "\n" not in str(caught.value)
    finally:
        for proc in (scheduler, worker):
            proc.kill()
            proc.wait(timeout=30)


def test_a_worker_killed_during_the_anchor_graph_pass_changes_nothing(nanny_cluster,
                                                                     monkeypatch, tmp_path):
    """AnchorGraphClustering on a Zarr view: its nearest-anchor pass runs through run_pass,
    so a worker killed in it costs a resubmission, not a different graph."""
    from mkrk_dask import AnchorGraphClustering, anchor_graph

    monkeypatch.setattr(anchor_graph, "BLOCK_ROWS", 60)  # several tasks on 330 rows
    store = zarr.create_array(str(tmp_path / "x.zarr"), shape=X.shape, chunks=(50, 5),
                              dtype="f8")
    store[...] = X
    reference = AnchorGraphClustering(3, n_anchors=30, random_state=0).fit(X)
    killed = _kill_during(monkeypatch, nanny_cluster, "nearest anchors")
    with nanny_cluster.as_current():
        disturbed = AnchorGraphClustering(3, n_anchors=30, random_state=0).fit(store)
    assert killed, "the nearest-anchor pass never ran"
    np.testing.assert_array_equal(disturbed.labels_, reference.labels_)
    np.testing.assert_allclose(disturbed.embedding_, reference.embedding_, atol=1e-12)
