"""A scheduler lost during ``mkrk fit`` (issue 14): a real scheduler and a nanny worker on
127.0.0.1, the scheduler SIGKILLed once the fit's passes run; the command ends within 60 s
with exit code 3 and one line of error."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from _loopback import free_port, wait_for_port
from sklearn.datasets import load_digits

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")


def test_scheduler_killed_mid_fit_exits_3(tmp_path: Path) -> None:
    X, y = load_digits(return_X_y=True)
    data = tmp_path / "digits.npz"
    np.savez(data, X=X, y=y)
    port = free_port()
    address = f"tcp://127.0.0.1:{port}"
    logs = open(tmp_path / "cluster.log", "w")  # noqa: SIM115 - closed in finally
    scheduler = subprocess.Popen(
        [sys.executable, "-m", "distributed.cli.dask_scheduler", "--host", "127.0.0.1",
         "--port", str(port), "--no-dashboard"], stdout=logs, stderr=subprocess.STDOUT)
    worker = fit = None
    try:
        wait_for_port(port)
        worker = subprocess.Popen(
            [sys.executable, "-m", "distributed.cli.dask_worker", address, "--nthreads", "1",
             "--host", "127.0.0.1", "--no-dashboard", "--nworkers", "1"],
            stdout=logs, stderr=subprocess.STDOUT)
        fit = subprocess.Popen(
            [sys.executable, "-m", "mkrk_dask.cli", "fit", str(data), "--scheduler", address,
             "--solver", "blockwise", "--chunk-size", "300", "--connect-timeout", "10",
             "--store", str(tmp_path / "k.zarr"), "--out", str(tmp_path / "run")],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            env=dict(os.environ, PYTHONUNBUFFERED="1"))
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
    finally:
        for proc in (fit, worker, scheduler):
            if proc is not None and proc.poll() is None:
                proc.kill()
                proc.wait(timeout=30)
        logs.close()
