"""Every worker and nanny of the cluster SIGKILLed during a fit (issue 45): the fit ends within
60 s with exit code 3 and one line naming the fault, never a hang."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import psutil
import pytest
from _loopback import free_port, wait_for_port
from sklearn.datasets import load_digits

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")


def test_every_worker_killed_after_an_iteration_exits_3(tmp_path: Path) -> None:
    """Blockwise: its iterations run on the workers (a Nystrom fit's run on the client)."""
    X, y = load_digits(return_X_y=True)
    data = tmp_path / "digits.npz"
    np.savez(data, X=X, y=y)
    port = free_port()
    address = f"tcp://127.0.0.1:{port}"
    logs = open(tmp_path / "cluster.log", "w")  # noqa: SIM115 - closed in finally
    scheduler = subprocess.Popen(
        [sys.executable, "-m", "distributed.cli.dask_scheduler", "--host", "127.0.0.1",
         "--port", str(port), "--no-dashboard"], stdout=logs, stderr=subprocess.STDOUT)
    nanny = fit = None
    try:
        wait_for_port(port)
        nanny = subprocess.Popen(
            [sys.executable, "-m", "distributed.cli.dask_worker", address, "--nthreads", "1",
             "--host", "127.0.0.1", "--no-dashboard", "--nworkers", "2"],
            stdout=logs, stderr=subprocess.STDOUT)
        fit = subprocess.Popen(
            [sys.executable, "-m", "mkrk_dask.cli", "fit", str(data), "--scheduler", address,
             "--solver", "blockwise", "--chunk-size", "300", "--connect-timeout", "10", "-v",
             "--store", str(tmp_path / "k.zarr"), "--out", str(tmp_path / "run")],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            env=dict(os.environ, PYTHONUNBUFFERED="1"))
        lines = []
        for line in fit.stderr:
            lines.append(line)
            if "iter   1 " in line:
                break
        else:
            pytest.fail("the fit ended before its first iteration: " + "".join(lines))
        parent = psutil.Process(nanny.pid)
        doomed = [*parent.children(recursive=True), parent]
        assert len(doomed) >= 3  # the dask-worker process, its nannies and their workers
        for proc in doomed:
            proc.kill()
        killed = time.monotonic()
        _, err = fit.communicate(timeout=120)
        seconds = time.monotonic() - killed
        err = "".join(lines) + err
        last = err.strip().splitlines()[-1]
        assert fit.returncode == 3, err
        assert last.startswith("mkrk fit: error: ") and "worker" in last, err
        assert "same --store" in last
        assert "Traceback" not in err
        assert seconds < 60, seconds
    finally:
        for proc in (fit, nanny, scheduler):
            if proc is not None and proc.poll() is None:
                proc.kill()
                proc.wait(timeout=30)
        logs.close()
