"""The local cluster recipe (cluster/local): a scheduler and two workers on 127.0.0.1 started by
its script, ``mkrk fit --scheduler`` submitted through the CLI in a subprocess, the outputs
checked against an in-process exact fit, and the cluster stopped in ``finally``."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from _loopback import free_port
from sklearn.datasets import load_digits

from mkrk_dask import MKKMRK

ROOT = Path(__file__).resolve().parents[2]
RECIPE = ROOT / "cluster" / "local"

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="the recipe is a bash script")


def test_local_recipe_runs_mkrk_fit(tmp_path: Path) -> None:
    X, y = load_digits(return_X_y=True)
    X, y = X[:240], y[:240]
    data = tmp_path / "digits.npz"
    np.savez(data, X=X, y=y)
    lam = 2.0**-15
    # No run folder given: it goes under the cache folder, never into the current folder.
    env = {k: v for k, v in os.environ.items() if k != "MKRK_RUN_DIR"}
    env.update(MKRK_PYTHON=sys.executable, XDG_CACHE_HOME=str(tmp_path / "cache"))
    repo = tmp_path / "repo"
    repo.mkdir()
    port = free_port()
    try:
        start = subprocess.run(
            ["bash", str(RECIPE / "start-cluster.sh"), "--port", str(port), "--workers", "2",
             "--threads", "1", "--dashboard-port", "0"],
            env=env, capture_output=True, text=True, timeout=180, cwd=repo)
        assert start.returncode == 0, start.stderr + start.stdout
        address = start.stdout.strip().splitlines()[-1]
        assert address == f"tcp://127.0.0.1:{port}"
        assert list(repo.iterdir()) == []  # no dask-run/ in the current folder
        run_dir = tmp_path / "cache" / "mkrk-dask" / f"cluster-{port}"
        assert (run_dir / "scheduler.pid").is_file()
        # Everything it started listens on the loopback interface only (the workers' HTTP
        # servers included).
        listening = _listening(run_dir)
        assert len(listening) >= 4, listening  # scheduler, dashboard, 2 workers (+ nannies)
        assert {ip for ip, _ in listening} == {"127.0.0.1"}, listening

        out = tmp_path / "run"
        fit = subprocess.run(
            [sys.executable, "-m", "mkrk_dask.cli", "fit", str(data), "--scheduler", address,
             "--solver", "blockwise", "--chunk-size", "80", "--store",
             str(tmp_path / "kernels.zarr"), "--paper", "--lam", str(lam), "--out", str(out)],
            env=env, capture_output=True, text=True, timeout=300, cwd=tmp_path)
        assert fit.returncode == 0, fit.stderr
        assert "[dask] kernel build" in fit.stderr  # progress of the build pass
        for name in ("labels.npy", "labels.csv", "weights.npy", "weights.csv", "Y.npy",
                     "objective.npy", "result.json", "metrics.json", "model/model.json"):
            assert (out / name).is_file(), name  # the model without pickle (model_io)
        result = json.loads((out / "result.json").read_text())
        assert result["solver"] == "blockwise" and result["scheduler"] == address
        metrics = json.loads((out / "metrics.json").read_text())
        assert set(metrics) == {"acc", "nmi", "purity"}

        exact = MKKMRK.paper(n_clusters=10, lam=lam, random_state=0).fit(X)
        weights = np.load(out / "weights.npy")
        # Y (and so w) is not unique at the optimum (DESIGN.md); the objective is.
        np.testing.assert_allclose(weights, exact.weights_, atol=0.02)
        np.testing.assert_allclose(result["objective_history"][-1],
                                   exact.objective_history_[-1], rtol=1e-6)
        assert metrics["acc"] > 0.7
    finally:
        subprocess.run(["bash", str(RECIPE / "stop-cluster.sh"), "--port", str(port)],
                       env=env, capture_output=True, timeout=120)


def _listening(run_dir: Path) -> set[tuple[str, int]]:
    """The (address, port) pairs the recipe's processes (and their children) listen on."""
    import psutil

    found = set()
    for pid_file in run_dir.glob("*.pid"):
        parent = psutil.Process(int(pid_file.read_text()))
        for proc in [parent, *parent.children(recursive=True)]:
            for conn in proc.net_connections(kind="inet"):
                if conn.status == psutil.CONN_LISTEN:
                    found.add((conn.laddr.ip, conn.laddr.port))
    return found


def test_a_taken_port_is_an_error_not_a_hang(tmp_path: Path) -> None:
    env = dict(os.environ, MKRK_PYTHON=sys.executable, XDG_CACHE_HOME=str(tmp_path / "cache"))
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        start = time.monotonic()
        proc = subprocess.run(["bash", str(RECIPE / "start-cluster.sh"), "--port", str(port)],
                              env=env, capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert time.monotonic() - start < 15
    assert proc.returncode != 0 and proc.stdout == ""
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and f"127.0.0.1:{port}" in lines[0] and "in use" in lines[0], lines
    assert list(tmp_path.iterdir()) in ([], [tmp_path / "cache"])
    assert not list((tmp_path / "cache").rglob("*.pid"))
