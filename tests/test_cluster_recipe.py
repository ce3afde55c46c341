"""The local cluster recipe (cluster/local): a scheduler and two workers on 127.0.0.1 started by
its script, ``mkrk fit --scheduler`` submitted through the CLI in a subprocess, the outputs
checked against an in-process exact fit, and the cluster stopped in ``finally``."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from sklearn.datasets import load_digits

from mkrk_dask import MKKMRK

ROOT = Path(__file__).resolve().parent.parent
RECIPE = ROOT / "cluster" / "local"

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="the recipe is a bash script")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_local_recipe_runs_mkrk_fit(tmp_path: Path) -> None:
    X, y = load_digits(return_X_y=True)
    X, y = X[:240], y[:240]
    data = tmp_path / "digits.npz"
    np.savez(data, X=X, y=y)
    lam = 2.0**-15
    run_dir = tmp_path / "dask-run"
    env = dict(os.environ, MKRK_RUN_DIR=str(run_dir), MKRK_PYTHON=sys.executable)
    port = _free_port()
    try:
        start = subprocess.run(
            ["bash", str(RECIPE / "start-cluster.sh"), "--host", "127.0.0.1", "--port",
             str(port), "--workers", "2", "--threads", "1", "--dashboard-port", "0"],
            env=env, capture_output=True, text=True, timeout=180, cwd=tmp_path)
        assert start.returncode == 0, start.stderr + start.stdout
        address = start.stdout.strip().splitlines()[-1]
        assert address == f"tcp://127.0.0.1:{port}"

        out = tmp_path / "run"
        fit = subprocess.run(
            [sys.executable, "-m", "mkrk_dask.cli", "fit", str(data), "--scheduler", address,
             "--solver", "blockwise", "--chunk-size", "80", "--store",
             str(tmp_path / "kernels.zarr"), "--lam", str(lam), "--out", str(out)],
            env=env, capture_output=True, text=True, timeout=300, cwd=tmp_path)
        assert fit.returncode == 0, fit.stderr
        assert "[dask] kernel build" in fit.stderr  # progress of the build pass
        for name in ("labels.npy", "labels.csv", "weights.npy", "weights.csv", "Y.npy",
                     "objective.npy", "result.json", "metrics.json", "model.joblib"):
            assert (out / name).is_file(), name
        result = json.loads((out / "result.json").read_text())
        assert result["solver"] == "blockwise" and result["scheduler"] == address
        metrics = json.loads((out / "metrics.json").read_text())
        assert set(metrics) == {"acc", "nmi", "purity"}

        exact = MKKMRK(n_clusters=10, lam=lam, random_state=0).fit(X)
        weights = np.load(out / "weights.npy")
        # Y (and so w) is not unique at the optimum (DESIGN.md); the objective is.
        np.testing.assert_allclose(weights, exact.weights_, atol=0.02)
        np.testing.assert_allclose(result["objective_history"][-1],
                                   exact.objective_history_[-1], rtol=1e-6)
        assert metrics["acc"] > 0.7
    finally:
        subprocess.run(["bash", str(RECIPE / "stop-cluster.sh"), "--run-dir", str(run_dir)],
                       env=env, capture_output=True, timeout=120)
