"""The SLURM recipe's files (cluster/slurm): the configuration parses, and the workers' job
logs go outside the folder the jobs are submitted from, as the local recipe's run folder does
(``$XDG_CACHE_HOME/mkrk-dask/...``). dask-jobqueue and SLURM are not needed: the folder is
resolved before any job is submitted."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import pytest
import yaml

RECIPE = Path(__file__).resolve().parent.parent / "cluster" / "slurm"


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
