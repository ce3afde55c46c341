"""The SLURM recipe against a real SLURM: ``cluster/slurm/submit_fit.py`` run as its README
tells a user (with a ``jobqueue.yaml`` edited for this one-node cluster, step 2), its worker
jobs submitted by dask-jobqueue to the one-node SLURM the suite starts (tests/_slurm.py).

Each fit on SLURM worker jobs must give the embedded LocalCluster's result on the same Zarr
data (weights within 1e-10, the same labels); a job cancelled mid-fit, a queue that keeps the
jobs pending and Ctrl-C are survived or reported in one line within a bounded time; after
every test ``squeue`` holds no job of the run.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import yaml
from sklearn.datasets import load_digits

pytestmark = [pytest.mark.slurm, pytest.mark.slow,  # 15-40 s each (jobs start, then fit)
              pytest.mark.skipif(sys.platform != "linux", reason="SLURM runs on Linux only")]

ROOT = Path(__file__).resolve().parents[2]
SUBMIT = ROOT / "cluster" / "slurm" / "submit_fit.py"
N_JOBS = 4


@pytest.fixture(autouse=True)
def _no_job_outlives_the_test(slurm):
    """After every test, whatever it did, the queue is empty within 30 s."""
    yield
    left = slurm.wait_until_no_jobs(30)
    assert left == [], f"jobs outlived the test: {left}"


@pytest.fixture(scope="module")
def zarr_data(tmp_path_factory) -> Path:
    """240 rows of digits as a Zarr array in blocks of 60 rows."""
    import zarr

    X = load_digits().data[:240]
    path = tmp_path_factory.mktemp("slurm-data") / "x.zarr"
    zarr.create_array(str(path), shape=X.shape, chunks=(60, 64), dtype="f8")[:] = X
    return path


def _config(folder: Path, **changes) -> Path:
    """The recipe's jobqueue.yaml with the entries step 2 of its README says to edit, for
    this node: partition, one core and 1 GiB a job, the loopback interface, logs and spill
    space in the test's folder, and no virtualenv (the jobs inherit this environment)."""
    config = yaml.safe_load((SUBMIT.with_name("jobqueue.yaml")).read_text())
    slurm = config["jobqueue"]["slurm"]
    slurm.update({"queue": "debug", "cores": 1, "processes": 1, "memory": "1GiB",
                  "walltime": "00:10:00", "interface": "lo",
                  "local-directory": str(folder / "spill"),
                  "log-directory": str(folder / "logs"), "job-script-prologue": [],
                  "death-timeout": 30,
                  "worker-extra-args": ["--dashboard-address", "127.0.0.1:0"],
                  "scheduler-options": {"dashboard_address": "127.0.0.1:0"}})
    slurm.update(changes)
    path = folder / "jobqueue.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


FIT = {"nystrom": ["--solver", "nystrom", "--n-landmarks", "40"],
       "blockwise": ["--solver", "blockwise"]}


def _fit_args(data: Path, solver: str, folder: Path) -> list[str]:
    return ["fit", str(data), "-k", "10", "--seed", "0", "--chunk-size", "60", "-q",
            *FIT[solver], "--store", str(folder / f"{solver}.zarr"), "--out",
            str(folder / solver)]


def _env(slurm) -> dict[str, str]:
    return dict(slurm.env, PYTHONPATH=os.pathsep.join(
        p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p))


def _reference(data: Path, solver: str, folder: Path, env: dict[str, str]) -> Path:
    """The same fit on the embedded LocalCluster."""
    done = subprocess.run([sys.executable, "-m", "mkrk_dask.cli", *_fit_args(data, solver,
                                                                              folder)],
                          env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return folder / solver


def _same_result(out: Path, reference: Path) -> None:
    np.testing.assert_allclose(np.load(out / "weights.npy"), np.load(reference / "weights.npy"),
                               rtol=0, atol=1e-10)
    np.testing.assert_array_equal(np.load(out / "labels.npy"), np.load(reference / "labels.npy"))


@pytest.mark.parametrize("solver", ["nystrom", "blockwise"])
def test_recipe_on_four_worker_jobs_gives_the_local_result(slurm, zarr_data: Path,
                                                            tmp_path: Path, solver: str) -> None:
    env = _env(slurm)
    reference = _reference(zarr_data, solver, tmp_path / "local", env)
    run = tmp_path / "slurm"
    run.mkdir()
    config = _config(tmp_path)
    # README: python cluster/slurm/submit_fit.py --jobs 4 -- fit ... --store ... --out run1
    done = subprocess.run([sys.executable, str(SUBMIT), "--jobs", str(N_JOBS), "--config",
                           str(config), "--wait", "120", "--", *_fit_args(zarr_data, solver, run)],
                          env=env, capture_output=True, text=True, timeout=400, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert f"{N_JOBS} workers at tcp://127.0.0.1:" in done.stdout
    assert "dashboard http://127.0.0.1:" in done.stdout
    _same_result(run / solver, reference)
    # the worker jobs ran on SLURM and ended with the run
    ran = [line for line in slurm.accounting().splitlines() if "Name=mkrk-worker" in line]
    assert len(ran) >= N_JOBS, slurm.accounting()
    assert sorted(p.name for p in (tmp_path / "logs").iterdir())  # the jobs' own logs


def _ctrl_c_default() -> None:
    """In the child before it starts: SIGINT back to its default, as from a terminal. A shell
    without job control hands a background job (a CI run started with ``&``) SIGINT ignored,
    and Python then installs no handler for it: the Ctrl-C these tests send would be lost."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _submit(slurm, args: list[str], tmp_path: Path) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, str(SUBMIT), *args], env=_env(slurm),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            cwd=tmp_path, start_new_session=True, preexec_fn=_ctrl_c_default)


def _wait_for_line(stream, text: str, seconds: float) -> str:
    """Read ``stream`` until a line containing ``text`` (the line), or fail after ``seconds``."""
    import selectors

    sel = selectors.DefaultSelector()
    sel.register(stream, selectors.EVENT_READ)
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if sel.select(timeout=1):
            line = stream.readline()
            if text in line:
                return line
            if not line:
                break
    pytest.fail(f"no line with {text!r} within {seconds:g}s")


def test_a_worker_job_cancelled_mid_fit(slurm, zarr_data: Path, tmp_path: Path) -> None:
    """scancel of one of the 4 worker jobs once the fit has started: the other workers finish
    it with the same result, or the run stops with a one-line error within 60 s."""
    reference = _reference(zarr_data, "blockwise", tmp_path / "local", _env(slurm))
    run = tmp_path / "slurm"
    run.mkdir()
    config = _config(tmp_path)
    proc = _submit(slurm, ["--jobs", str(N_JOBS), "--config", str(config), "--wait", "120",
                           "--", *_fit_args(zarr_data, "blockwise", run)], tmp_path)
    try:
        line = _wait_for_line(proc.stdout, "workers at", 150)
        running = [job for job, name, state in slurm.jobs()
                   if name == "mkrk-worker" and state == "RUNNING"]
        assert len(running) == N_JOBS, (line, slurm.jobs())
        slurm.run("scancel", running[0])
        cancelled = time.monotonic()
        out, err = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    if proc.returncode == 0:
        _same_result(run / "blockwise", reference)
    else:
        assert time.monotonic() - cancelled < 60
        assert len(err.strip().splitlines()) == 1, err


def test_jobs_held_pending_are_reported_and_cancelled(slurm, zarr_data: Path,
                                                      tmp_path: Path) -> None:
    """A queue that keeps the jobs pending longer than --wait: one line naming the jobs and
    their state, exit 3, and no job left behind."""
    config = _config(tmp_path, **{"job-extra-directives": ["--begin=now+1hour"]})
    start = time.monotonic()
    proc = _submit(slurm, ["--jobs", "2", "--config", str(config), "--wait", "8", "--",
                           *_fit_args(zarr_data, "nystrom", tmp_path / "run")], tmp_path)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 3, err
    assert time.monotonic() - start < 45
    lines = [line for line in err.splitlines() if line.startswith("error:")]
    assert len(lines) == 1 and "did not start within 8s" in lines[0], err
    assert "PENDING" in lines[0], lines[0]


def test_ctrl_c_cancels_the_worker_jobs(slurm, zarr_data: Path, tmp_path: Path) -> None:
    """Ctrl-C (SIGINT) and a kill (SIGTERM) while the jobs wait in the queue: the jobs are
    cancelled before the script exits."""
    config = _config(tmp_path, **{"job-extra-directives": ["--begin=now+1hour"]})
    for sig in (signal.SIGINT, signal.SIGTERM):
        proc = _submit(slurm, ["--jobs", "2", "--config", str(config), "--wait", "300", "--",
                               *_fit_args(zarr_data, "nystrom", tmp_path / "run")], tmp_path)
        deadline = time.monotonic() + 60
        while len(slurm.jobs()) < 2 and time.monotonic() < deadline:
            time.sleep(0.3)
        assert len(slurm.jobs()) == 2, slurm.jobs()
        proc.send_signal(sig)
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 130, err
        assert "the worker jobs are cancelled" in err
        assert slurm.wait_until_no_jobs(5) == [], (sig, slurm.jobs())


def _mkrk(slurm, args: list[str], tmp_path: Path) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "mkrk_dask.cli", *args], env=_env(slurm),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            cwd=tmp_path, start_new_session=True, preexec_fn=_ctrl_c_default)


def test_mkrk_fit_cluster_slurm(slurm, zarr_data: Path, tmp_path: Path) -> None:
    """``mkrk fit ... --cluster slurm --jobs 4 --cluster-config jobqueue.yaml``: the jobs'
    ids and the dashboard on stderr, the LocalCluster's result, no job left."""
    reference = _reference(zarr_data, "nystrom", tmp_path / "local", _env(slurm))
    run = tmp_path / "slurm"
    run.mkdir()
    args = [a for a in _fit_args(zarr_data, "nystrom", run) if a != "-q"]
    proc = _mkrk(slurm, [*args, "--cluster", "slurm", "--jobs", str(N_JOBS),
                         "--cluster-config", str(_config(tmp_path)), "--cluster-wait", "120"],
                 tmp_path)
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err
    jobs = next(line for line in err.splitlines() if line.startswith("[slurm] jobs "))
    assert jobs.count("RUNNING") == N_JOBS and "dashboard http://127.0.0.1:" in jobs, jobs
    _same_result(run / "nystrom", reference)


def test_mkrk_cluster_slurm_pending_and_killed(slurm, zarr_data: Path, tmp_path: Path) -> None:
    """Jobs the queue holds: one line and exit 3 after --cluster-wait; a SIGTERM (or Ctrl-C)
    while they wait: exit 130; the jobs are cancelled either way (the autouse check)."""
    config = _config(tmp_path, **{"job-extra-directives": ["--begin=now+1hour"]})
    args = [*_fit_args(zarr_data, "nystrom", tmp_path / "run"), "--cluster", "slurm",
            "--jobs", "2", "--cluster-config", str(config)]
    start = time.monotonic()
    proc = _mkrk(slurm, [*args, "--cluster-wait", "8"], tmp_path)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 3, err
    assert time.monotonic() - start < 45
    assert err.strip().count("\n") == 0 and "did not start within 8s" in err, err
    assert "PENDING" in err, err
    assert slurm.wait_until_no_jobs(10) == []

    proc = _mkrk(slurm, [*args, "--cluster-wait", "300"], tmp_path)
    deadline = time.monotonic() + 60
    while len(slurm.jobs()) < 2 and time.monotonic() < deadline:
        time.sleep(0.3)
    assert len(slurm.jobs()) == 2, slurm.jobs()
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert slurm.wait_until_no_jobs(5) == [], slurm.jobs()


def test_mkrk_cluster_slurm_reports_pending_jobs_and_ctrl_c_cancels_them(
        slurm, zarr_data: Path, tmp_path: Path) -> None:
    """Jobs the queue holds (issue 80): their squeue states on stderr every 10 s while they
    are awaited; Ctrl-C (SIGINT to mkrk alone) then: exit 130 within 10 s, the jobs
    cancelled (also checked by the autouse fixture)."""
    config = _config(tmp_path, **{"job-extra-directives": ["--begin=now+1hour"]})
    args = [a for a in _fit_args(zarr_data, "nystrom", tmp_path / "run") if a != "-q"]
    proc = _mkrk(slurm, [*args, "--cluster", "slurm", "--jobs", "2", "--cluster-config",
                         str(config), "--cluster-wait", "300"], tmp_path)
    try:
        started = time.monotonic()
        reports = [_wait_for_line(proc.stderr, "[slurm] waiting for the worker jobs", 30)
                   for _ in range(2)]
        between = time.monotonic() - started
        assert all(r.count("PENDING(BeginTime)") == 2 for r in reports), reports
        assert 10 <= between < 40, between
        assert len(slurm.jobs()) == 2, slurm.jobs()
        _interrupt_within_10_s(proc)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert slurm.wait_until_no_jobs(5) == [], slurm.jobs()


def _interrupt_within_10_s(proc: subprocess.Popen) -> None:
    """SIGINT to mkrk: exit 130 within 10 s, its last line saying it was interrupted."""
    proc.send_signal(signal.SIGINT)
    interrupted = time.monotonic()
    _, err = proc.communicate(timeout=60)
    seconds = time.monotonic() - interrupted
    assert proc.returncode == 130, err
    assert seconds < 10, seconds
    assert err.strip().splitlines()[-1] == "mkrk fit: interrupted", err


def test_mkrk_cluster_slurm_ctrl_c_while_sbatch_submits(slurm, zarr_data: Path,
                                                        tmp_path: Path) -> None:
    """Ctrl-C (SIGINT to mkrk alone) while sbatch is still submitting, as on a busy controller
    (SLURM's sbatch behind a 5 s delay): exit 130 within 10 s, and no job queued then or after
    (issue 80: exit 1 after 12 s, and the jobs submitted afterwards left in the queue)."""
    import shutil

    shim = tmp_path / "bin"
    shim.mkdir()
    (shim / "sbatch").write_text(f"#!/bin/sh\nsleep 5\nexec {shutil.which('sbatch')} \"$@\"\n")
    (shim / "sbatch").chmod(0o755)
    env = dict(_env(slurm), PATH=f"{shim}{os.pathsep}{os.environ['PATH']}")
    config = _config(tmp_path, **{"job-extra-directives": ["--begin=now+1hour"]})
    args = [a for a in _fit_args(zarr_data, "nystrom", tmp_path / "run") if a != "-q"]
    proc = subprocess.Popen([sys.executable, "-m", "mkrk_dask.cli", *args, "--cluster", "slurm",
                             "--jobs", "2", "--cluster-config", str(config), "--cluster-wait",
                             "300"], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, cwd=tmp_path, start_new_session=True,
                            preexec_fn=_ctrl_c_default)
    try:
        _wait_for_line(proc.stderr, "[slurm] submitting", 60)
        time.sleep(2)  # sbatch runs
        _interrupt_within_10_s(proc)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    time.sleep(6)  # past the delayed sbatch, had it been left running
    assert slurm.jobs() == []
