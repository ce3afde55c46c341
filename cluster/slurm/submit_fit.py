"""Start Dask workers as SLURM jobs (dask-jobqueue) and run ``mkrk`` against them.

Run it on the login node (or in a small SLURM job of its own): it starts a scheduler in this
process, asks SLURM for ``--jobs`` worker jobs, waits for the workers, runs the ``mkrk``
command given after ``--`` with ``--scheduler`` pointing at this cluster, then releases the
jobs.

    pip install dask-jobqueue
    python cluster/slurm/submit_fit.py --jobs 4 -- \
        fit /shared/data.npz --solver blockwise --store /shared/data.zarr --out run1

Options: --jobs N (worker jobs), --config FILE (a jobqueue.yaml; default: ./jobqueue.yaml
beside this script, else Dask's configuration), --wait SECONDS (for the workers).

The workers' job logs go to the configuration's ``log-directory``, by default
``$XDG_CACHE_HOME/mkrk-dask/slurm-logs`` (``~/.cache/mkrk-dask/slurm-logs``), as the local
recipe keeps its run folder: never into the folder you submit from.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
from pathlib import Path


def default_log_directory() -> Path:
    """``$XDG_CACHE_HOME/mkrk-dask/slurm-logs``, ``~/.cache/mkrk-dask/slurm-logs`` without it
    (the local recipe's ``$XDG_CACHE_HOME/mkrk-dask/cluster-PORT`` likewise)."""
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(cache) / "mkrk-dask" / "slurm-logs"


def resolve_log_directory(value: str | os.PathLike[str] | None) -> Path:
    """The jobqueue ``log-directory`` as SLURM needs it: absolute, with ``~`` and ``$VARS``
    expanded (dask-jobqueue writes it as given into ``#SBATCH -e/-o``, which expand neither,
    and would create a folder literally named ``~``); :func:`default_log_directory` if unset."""
    if value is None or not str(value).strip():
        return default_log_directory()
    return Path(os.path.expandvars(str(value))).expanduser().resolve()


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if "--" not in argv:
        print("usage: submit_fit.py [--jobs N] [--config FILE] -- MKRK_COMMAND ...",
              file=sys.stderr)
        return 2
    split = argv.index("--")
    parser = argparse.ArgumentParser(description="mkrk on SLURM workers (dask-jobqueue)")
    parser.add_argument("--jobs", type=int, default=2, help="SLURM jobs of workers")
    parser.add_argument("--config", default=str(Path(__file__).with_name("jobqueue.yaml")))
    parser.add_argument("--wait", type=float, default=600, help="seconds to wait for workers")
    args = parser.parse_args(argv[:split])
    mkrk_args = argv[split + 1:]

    import dask.config
    import yaml
    from dask_jobqueue import SLURMCluster

    config = Path(args.config)
    if config.is_file():
        dask.config.update(dask.config.config, yaml.safe_load(config.read_text()), priority="new")
    logs = resolve_log_directory(dask.config.get("jobqueue.slurm.log-directory", None))
    logs.mkdir(parents=True, exist_ok=True)
    dask.config.set({"jobqueue.slurm.log-directory": str(logs)})
    print(f"worker job logs in {logs}", file=sys.stderr, flush=True)
    # Ctrl-C and SIGTERM (a job's own time limit, a kill from the shell) unwind the same way,
    # so that the cluster below still cancels its worker jobs; SIGINT is set too because a
    # process started in the background inherits it ignored.
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, _interrupt)
    with SLURMCluster() as cluster:
        # Caught here, inside the block: the cluster's own exit would swallow it (and exit 0),
        # and leaving the block normally is what cancels the worker jobs.
        try:
            return _run(cluster, args, mkrk_args)
        except KeyboardInterrupt:
            print("interrupted: the worker jobs are cancelled", file=sys.stderr, flush=True)
            return 130


def _run(cluster, args: argparse.Namespace, mkrk_args: list[str]) -> int:
    """Submit the jobs, wait for their workers, run the mkrk command on them."""
    import dask.config
    from distributed import Client

    from mkrk_dask.cli import main as mkrk

    print(cluster.job_script(), flush=True)
    cluster.scale(jobs=args.jobs)
    with Client(cluster) as client:
        processes = int(dask.config.get("jobqueue.slurm.processes") or 1)
        try:
            client.wait_for_workers(args.jobs * processes, timeout=args.wait)
        except TimeoutError:
            print(f"error: {args.jobs} SLURM job(s) of workers did not start within "
                  f"{args.wait:g}s ({_job_states(cluster)}); they are cancelled",
                  file=sys.stderr, flush=True)
            return 3
        print(f"{len(client.scheduler_info()['workers'])} workers at "
              f"{cluster.scheduler_address}; SLURM jobs {_job_states(cluster)}; "
              f"dashboard {cluster.dashboard_link}", flush=True)
        return mkrk([*mkrk_args, "--scheduler", cluster.scheduler_address])

def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def _job_states(cluster) -> str:
    """``ID STATE`` of the cluster's jobs, as squeue reports them (``ID gone`` once ended)."""
    import subprocess

    ids = [str(job.job_id) for job in cluster.workers.values() if getattr(job, "job_id", None)]
    if not ids:
        return "none submitted"
    try:
        out = subprocess.run(["squeue", "-h", "-j", ",".join(ids), "-o", "%i %T(%r)"],
                             capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.TimeoutExpired):
        out = ""
    states = dict(line.split(" ", 1) for line in out.splitlines() if " " in line)
    return ", ".join(f"{i} {states.get(i, 'gone')}" for i in ids)

if __name__ == "__main__":
    raise SystemExit(main())
