"""Sessions (mkrk_dask.dask_session): the current Client, loopback listeners, clone and pickle of
an estimator configured with a cluster; on a real LocalCluster."""

from __future__ import annotations

import io
import os
import pickle

import numpy as np
import psutil
import pytest
from distributed import Client, LocalCluster, get_task_stream
from sklearn.base import clone

import mkrk_dask.dask_session as cluster_module
from mkrk_dask import MKKMRK, progress
from mkrk_dask.dask_session import DaskSession, current_client, start_local_cluster

X = np.random.default_rng(0).normal(size=(120, 5))
KERNELS = ["cosine", "gaussian(c=0.3)"]


def _listeners() -> list[tuple[str, int]]:
    procs = [psutil.Process(os.getpid())] + psutil.Process(os.getpid()).children(recursive=True)
    found = []
    for proc in procs:
        try:
            found += [(c.laddr.ip, c.laddr.port) for c in proc.net_connections(kind="inet")
                      if c.status == psutil.CONN_LISTEN]
        except psutil.Error:
            pass
    return found


@pytest.mark.parametrize("processes", [False, True])
def test_embedded_cluster_listens_on_loopback_only(processes):
    before = set(_listeners())
    cluster = start_local_cluster(n_workers=1, processes=processes)
    try:
        with Client(cluster, set_as_default=False) as c:
            c.wait_for_workers(1, timeout=60)
            new = set(_listeners()) - before
            assert new, "the cluster opened no listener at all?"
            assert {ip for ip, _ in new} == {"127.0.0.1"}, new
    finally:
        cluster.close()


def test_a_fit_inside_a_client_block_runs_there_and_starts_no_cluster(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("a LocalCluster was started although a Client is active")

    monkeypatch.setattr(cluster_module, "start_local_cluster", refuse)
    with LocalCluster(n_workers=1, processes=False, dashboard_address="127.0.0.1:0",
                      worker_dashboard_address="127.0.0.1:0") as lc, \
            Client(lc) as c:
        assert current_client() is c
        with get_task_stream(c) as stream:
            model = MKKMRK.paper(3, kernels=KERNELS, solver="blockwise", random_state=0).fit(X)
        names = {t["key"].split("-")[0] for t in stream.data}
        assert "build_pair" in names
        assert model.labels_.shape == (120,)
        session = DaskSession()
        assert session.client is c and not session.started_locally
        session.close()
        assert c.status == "running"  # a session never closes a client it did not make
    assert current_client() is None


def test_estimator_with_a_client_clones_and_pickles():
    with LocalCluster(n_workers=1, processes=False, protocol="tcp://", host="127.0.0.1",
                      dashboard_address="127.0.0.1:0", worker_dashboard_address="127.0.0.1:0"
                      ) as lc, Client(lc, set_as_default=False) as c:
        est = MKKMRK.paper(3, kernels=KERNELS, solver="nystrom", scheduler=c,
                     random_state=0, backend_options={"n_landmarks": 30})
        twin = clone(est)
        assert twin.scheduler is c and twin is not est
        assert twin.get_params()["backend_options"] == {"n_landmarks": 30}
        restored = pickle.loads(pickle.dumps(est))
        assert restored.scheduler == c.scheduler.address
        a, b = est.fit(X), restored.fit(X)
        np.testing.assert_allclose(a.weights_, b.weights_, atol=1e-12)
        fitted = pickle.loads(pickle.dumps(a))  # a fitted model pickles too
        np.testing.assert_array_equal(fitted.predict(X), a.labels_)


def test_verbose_fit_prints_the_dashboard_link():
    pytest.importorskip("bokeh")
    stream = io.StringIO()
    with progress.reporting(1, stream):
        MKKMRK.paper(3, kernels=KERNELS, solver="blockwise", random_state=0).fit(X)
    assert "[dask] dashboard: http://127.0.0.1:" in stream.getvalue()


def test_connect_is_bounded_when_the_listener_is_not_a_scheduler():
    import socket
    import threading
    import time

    from mkrk_dask.dask_session import connect
    from mkrk_dask.exceptions import SchedulerUnreachableError

    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(8)
    accepted = []
    threading.Thread(target=lambda: accepted.append(silent.accept()), daemon=True).start()
    start = time.monotonic()
    with pytest.raises(SchedulerUnreachableError, match="127.0.0.1") as caught:
        connect(f"tcp://127.0.0.1:{silent.getsockname()[1]}", timeout=2)
    assert time.monotonic() - start < 8
    assert "\n" not in str(caught.value)
    silent.close()
