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
import signal
import sys
from pathlib import Path

# The jobs' log folder as `mkrk --cluster slurm` resolves it (the tests import it from here).
from mkrk_dask.dask_session import slurm_log_directory as resolve_log_directory

__all__ = ["main", "resolve_log_directory"]


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

    from mkrk_dask.cli import main as mkrk
    from mkrk_dask.dask_session import slurm_job_states, start_slurm_cluster
    from mkrk_dask.exceptions import ClusterStartError

    config = Path(args.config) if Path(args.config).is_file() else None
    # Ctrl-C and SIGTERM (a job's own time limit, a kill from the shell) unwind the same way,
    # so that the cluster below still cancels its worker jobs; SIGINT is set too because a
    # process started in the background inherits it ignored.
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, _interrupt)
    cluster = client = None
    try:
        cluster, client = start_slurm_cluster(args.jobs, config=config, wait=args.wait)
        print(cluster.job_script(), flush=True)
        print(f"{len(client.scheduler_info()['workers'])} workers at "
              f"{cluster.scheduler_address}; SLURM jobs {slurm_job_states(cluster)}; "
              f"dashboard {cluster.dashboard_link}", flush=True)
        return mkrk([*mkrk_args, "--scheduler", cluster.scheduler_address])
    except ClusterStartError as err:
        print(f"error: {err}", file=sys.stderr, flush=True)
        return 3
    except KeyboardInterrupt:
        print("interrupted: the worker jobs are cancelled", file=sys.stderr, flush=True)
        return 130
    finally:
        if client is not None:
            client.close()
        if cluster is not None:
            cluster.close()  # cancels the worker jobs


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


if __name__ == "__main__":
    raise SystemExit(main())
