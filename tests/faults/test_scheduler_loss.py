"""A scheduler lost during ``mkrk fit`` (issue 14): a real scheduler and a nanny worker on
127.0.0.1, the scheduler SIGKILLed once the fit's passes run; the command ends within 60 s
with exit code 3 and one line of error."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
from _loopback import blockwise_fit_on_a_cluster, free_port, wait_for_port

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")


def test_scheduler_killed_mid_fit_exits_3(tmp_path: Path) -> None:
    with blockwise_fit_on_a_cluster(tmp_path, 1) as (scheduler, _, fit):
        # Once a pass over the cluster has finished, the fit depends on the scheduler.
        for line in fit.stderr:
            if line.startswith("[dask]") and "done" in line:
                break
        else:
            pytest.fail("the fit ended before any Dask pass: " + fit.communicate()[1])
        scheduler.send_signal(signal.SIGKILL)
        killed = time.monotonic()
        _, err = fit.communicate(timeout=90)
        seconds = time.monotonic() - killed
        assert fit.returncode == 3, err
        last = err.strip().splitlines()[-1]
        assert last.startswith("mkrk fit: error: ") and "scheduler" in last, err
        assert "Traceback" not in err
        assert seconds < 60, seconds
        assert not (tmp_path / "run").exists()


@contextlib.contextmanager
def _cluster(log: Path):
    """A scheduler and a dask-worker process of one nanny worker on 127.0.0.1: yields the
    scheduler's address and process. Both are killed on the way out."""
    port = free_port()
    procs = []
    with open(log, "a") as logs:
        try:
            procs.append(subprocess.Popen(
                [sys.executable, "-m", "distributed.cli.dask_scheduler", "--host", "127.0.0.1",
                 "--port", str(port), "--no-dashboard"], stdout=logs, stderr=subprocess.STDOUT))
            wait_for_port(port)
            address = f"tcp://127.0.0.1:{port}"
            procs.append(subprocess.Popen(
                [sys.executable, "-m", "distributed.cli.dask_worker", address, "--nthreads",
                 "1", "--host", "127.0.0.1", "--no-dashboard"],
                stdout=logs, stderr=subprocess.STDOUT))
            yield address, procs[0], procs[1]
        finally:
            for proc in reversed(procs):
                if proc.poll() is None:
                    proc.kill()
                    proc.wait(timeout=30)


def _tree(pid: int) -> list:
    parent = psutil.Process(pid)
    return [parent, *parent.children(recursive=True)]


@pytest.mark.timeout(300)
@pytest.mark.parametrize("solver", ["nystrom", "blockwise"])
def test_a_rerun_on_a_new_scheduler_resumes_from_the_store(tmp_path: Path, solver: str) -> None:
    """Issue 80: the scheduler killed just after the fit created its store (its workers held
    still meanwhile, so that the kill lands there: the first thing the new store needs from
    them is to see it), then the same ``mkrk fit`` with the same --store on a NEW scheduler:
    it resumes from the store (exit 0) as a re-run on the same scheduler does, and no message
    advises an option mkrk fit does not have."""
    import numpy as np
    from sklearn.datasets import load_digits

    X, y = load_digits(return_X_y=True)
    data = tmp_path / "digits.npz"
    np.savez(data, X=X, y=y)
    store = tmp_path / "k.zarr"

    def fit(address: str) -> subprocess.Popen:
        return subprocess.Popen(
            [sys.executable, "-m", "mkrk_dask.cli", "fit", str(data), "--scheduler", address,
             "--solver", solver, "--chunk-size", "300", "--connect-timeout", "10", "-v",
             "--store", str(store), "--out", str(tmp_path / "run")],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            env=dict(os.environ, PYTHONUNBUFFERED="1"))

    with _cluster(tmp_path / "cluster.log") as (address, scheduler, workers):
        first = fit(address)
        deadline = time.monotonic() + 120
        while not (store / "zarr.json").exists():
            assert first.poll() is None and time.monotonic() < deadline, first.communicate()
            time.sleep(0.01)
        for proc in _tree(workers.pid):
            proc.suspend()
        time.sleep(1.0)
        scheduler.send_signal(signal.SIGKILL)
        _, err = first.communicate(timeout=90)
        assert first.returncode == 3, err
        for proc in _tree(workers.pid):
            proc.kill()
    with _cluster(tmp_path / "cluster.log") as (address, _, _):
        second = fit(address)
        _, err = second.communicate(timeout=200)
    assert "overwrite=True" not in err, err
    assert second.returncode == 0, err
    assert (tmp_path / "run" / "labels.npy").is_file()
