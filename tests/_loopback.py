"""Ports on 127.0.0.1 for the tests that start schedulers and workers in subprocesses."""

import contextlib
import os
import socket
import subprocess
import sys
import time


def free_port() -> int:
    """A port nothing listens on at the moment, on the loopback interface."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for_port(port: int, seconds: float = 60.0) -> None:
    """Return once something accepts connections on 127.0.0.1:port; TimeoutError after
    ``seconds``."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.2)
    raise TimeoutError(f"nothing listens on 127.0.0.1:{port}")


@contextlib.contextmanager
def blockwise_fit_on_a_cluster(tmp_path, n_workers: int, *extra: str):
    """A Dask scheduler and a dask-worker process (``n_workers`` nanny workers, one thread
    each) on 127.0.0.1, and ``mkrk fit`` of 1,797 digits on them with the blockwise backend
    and a store, started in subprocesses: yields ``(scheduler, workers, fit)``, the fit's
    stderr a text pipe. Every process still running is killed on the way out."""
    import numpy as np
    from sklearn.datasets import load_digits

    X, y = load_digits(return_X_y=True)
    data = tmp_path / "digits.npz"
    np.savez(data, X=X, y=y)
    port = free_port()
    address = f"tcp://127.0.0.1:{port}"
    with open(tmp_path / "cluster.log", "w") as logs:
        scheduler = subprocess.Popen(
            [sys.executable, "-m", "distributed.cli.dask_scheduler", "--host", "127.0.0.1",
             "--port", str(port), "--no-dashboard"], stdout=logs, stderr=subprocess.STDOUT)
        workers = fit = None
        try:
            wait_for_port(port)
            workers = subprocess.Popen(
                [sys.executable, "-m", "distributed.cli.dask_worker", address, "--nthreads",
                 "1", "--host", "127.0.0.1", "--no-dashboard", "--nworkers", str(n_workers)],
                stdout=logs, stderr=subprocess.STDOUT)
            fit = subprocess.Popen(
                [sys.executable, "-m", "mkrk_dask.cli", "fit", str(data), "--scheduler",
                 address, "--solver", "blockwise", "--chunk-size", "300", "--connect-timeout",
                 "10", *extra, "--store", str(tmp_path / "k.zarr"), "--out",
                 str(tmp_path / "run")],
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                env=dict(os.environ, PYTHONUNBUFFERED="1"))
            yield scheduler, workers, fit
        finally:
            for proc in (fit, workers, scheduler):
                if proc is not None and proc.poll() is None:
                    proc.kill()
                    proc.wait(timeout=30)
