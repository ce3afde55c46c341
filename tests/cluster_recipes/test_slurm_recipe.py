"""The SLURM recipe's files (cluster/slurm): the configuration parses, and the workers' job
logs go outside the folder the jobs are submitted from, as the local recipe's run folder does
(``$XDG_CACHE_HOME/mkrk-dask/...``). dask-jobqueue and SLURM are not needed: the folder is
resolved before any job is submitted. And ``mkrk fit --cluster slurm`` where no SLURM runs:
without SLURM's commands, or with SLURM installed but its controller stopped."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

RECIPE = Path(__file__).resolve().parents[2] / "cluster" / "slurm"


@pytest.fixture
def submit_fit():
    spec = importlib.util.spec_from_file_location("submit_fit", RECIPE / "submit_fit.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_jobqueue_yaml_writes_no_logs_into_the_working_folder() -> None:
    slurm = yaml.safe_load((RECIPE / "jobqueue.yaml").read_text())["jobqueue"]["slurm"]
    logs = slurm["log-directory"]
    # unset (submit_fit.py chooses the cache folder) or a folder that does not depend on
    # where sbatch runs
    assert logs is None or Path(os.path.expandvars(logs)).expanduser().is_absolute(), logs


def test_submit_fit_puts_the_logs_in_the_cache_folder(submit_fit, tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    slurm = yaml.safe_load((RECIPE / "jobqueue.yaml").read_text())["jobqueue"]["slurm"]
    logs = submit_fit.resolve_log_directory(slurm["log-directory"])
    assert logs == tmp_path / "cache" / "mkrk-dask" / "slurm-logs"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert submit_fit.resolve_log_directory(None) == (
        tmp_path / "home" / ".cache" / "mkrk-dask" / "slurm-logs")
    # a folder given: ~ and $VARS expanded (#SBATCH -e/-o expand neither), made absolute
    monkeypatch.setenv("SCRATCH", str(tmp_path / "scratch"))
    assert submit_fit.resolve_log_directory("$SCRATCH/logs") == tmp_path / "scratch" / "logs"
    assert submit_fit.resolve_log_directory("~/logs") == tmp_path / "home" / "logs"
    assert submit_fit.resolve_log_directory("logs") == tmp_path / "logs"
    assert not any(tmp_path.iterdir())  # nothing created by resolving


# ``mkrk fit --cluster slurm`` where SLURM cannot start a cluster (issue 80): exit 3 and one
# line that says why, within seconds, never the whole --cluster-wait in silence.

def _tiny_fit(tmp_path: Path, env: dict[str, str]) -> tuple[subprocess.CompletedProcess, float]:
    """``mkrk fit ... --cluster slurm --cluster-wait 120`` on 60 rows, with the recipe's
    jobqueue.yaml given one core and 1 GiB a job; its outcome and its seconds."""
    import numpy as np

    data = tmp_path / "x.npz"
    np.savez(data, X=np.random.default_rng(0).normal(size=(60, 4)))
    config = yaml.safe_load((RECIPE / "jobqueue.yaml").read_text())
    config["jobqueue"]["slurm"].update({"cores": 1, "processes": 1, "memory": "1GiB",
                                        "log-directory": str(tmp_path / "logs")})
    (tmp_path / "jobqueue.yaml").write_text(yaml.safe_dump(config))
    start = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "mkrk_dask.cli", "fit", str(data), "-k", "2", "--solver",
         "nystrom", "--out", str(tmp_path / "run"), "--cluster", "slurm", "--jobs", "1",
         "--cluster-config", str(tmp_path / "jobqueue.yaml"), "--cluster-wait", "120"],
        env=env, capture_output=True, text=True, timeout=150, cwd=tmp_path)
    return done, time.monotonic() - start


def _one_error_line(done: subprocess.CompletedProcess) -> str:
    errors = [line for line in done.stderr.splitlines() if "error" in line]
    assert len(errors) == 1 and errors[0].startswith("mkrk fit: error: "), done.stderr
    assert "Traceback" not in done.stderr
    return errors[0]


@pytest.mark.timeout(180)
def test_mkrk_cluster_slurm_without_slurm_commands_exits_3(tmp_path: Path) -> None:
    """No sbatch, squeue or scancel on PATH (an empty folder): exit 3, one line naming them."""
    pytest.importorskip("dask_jobqueue")
    (tmp_path / "bin").mkdir()
    done, seconds = _tiny_fit(tmp_path, dict(os.environ, PATH=str(tmp_path / "bin")))
    line = _one_error_line(done)
    assert done.returncode == 3, done.stderr
    assert all(f"{c}" in line for c in ("sbatch", "squeue", "scancel")), line
    assert seconds < 30, seconds
    assert not (tmp_path / "run").exists()


@pytest.mark.timeout(180)
def test_mkrk_cluster_slurm_with_no_controller_exits_3_at_once(tmp_path: Path) -> None:
    """SLURM installed and configured, slurmctld not running: exit 3 within 30 s (not the
    120 s of --cluster-wait), one line saying the controller does not answer."""
    pytest.importorskip("dask_jobqueue")
    import _slurm

    try:
        env = _slurm.stopped(tmp_path)
    except _slurm.SlurmUnavailable as err:
        pytest.skip(str(err))
    done, seconds = _tiny_fit(tmp_path, env)
    line = _one_error_line(done)
    assert done.returncode == 3, done.stderr
    assert "controller" in line and "slurmctld" in line, line
    assert seconds < 30, seconds
