"""Connecting to a Dask cluster, using the current one, or starting the embedded local one.

- A :class:`distributed.Client` given: used, and left open.
- An address (``"tcp://host:8786"``, ``"tls://..."``): connected to, within a bounded time.
- Nothing given: the current client, if one is active (``with Client(...):``, or the last
  one made); otherwise a :class:`distributed.LocalCluster` starts inside this process (the
  embedded default) and is shut down by :meth:`DaskSession.close`. Everything it starts listens
  on 127.0.0.1 only, its dashboard included.
"""

from __future__ import annotations

import os
import time
from typing import Any

from .exceptions import ClusterStartError, SchedulerUnreachableError

__all__ = ["DaskSession", "SchedulerUnreachableError", "start_local_cluster", "current_client",
           "is_client", "LOOPBACK", "start_slurm_cluster", "slurm_log_directory",
           "slurm_job_states"]

LOOPBACK = "127.0.0.1"


def is_client(value: Any) -> bool:
    """True for a :class:`distributed.Client` (without importing distributed otherwise)."""
    try:
        from distributed import Client
    except ImportError:  # pragma: no cover - distributed is a dependency
        return False
    return isinstance(value, Client)


def current_client() -> Any:
    """The active :class:`distributed.Client`, or None."""
    from distributed import Client

    try:
        client = Client.current(allow_global=True)
    except ValueError:
        return None
    return client if client.status == "running" else None


def start_local_cluster(n_workers: int | None = None, threads_per_worker: int | None = None,
                        processes: bool = False, memory_limit: str | int = "auto") -> Any:
    """The embedded local cluster, on 127.0.0.1 only. Defaults: one in-process worker with a
    thread per core (it shares memory with the client and needs no serialisation); with
    ``processes``, one single-threaded worker process per core. The dashboard (if bokeh is
    installed) goes to a free port on 127.0.0.1."""
    from distributed import LocalCluster

    cores = os.cpu_count() or 1
    if processes:
        n_workers, threads_per_worker = n_workers or cores, threads_per_worker or 1
    else:
        n_workers, threads_per_worker = n_workers or 1, threads_per_worker or cores
    # In-process workers talk over inproc:// (no socket); worker processes over TCP, which
    # is bound to the loopback interface.
    network = {"host": LOOPBACK} if processes else {}
    return LocalCluster(n_workers=n_workers, threads_per_worker=threads_per_worker,
                        processes=processes, dashboard_address=f"{LOOPBACK}:0",
                        worker_dashboard_address=f"{LOOPBACK}:0", memory_limit=memory_limit,
                        **network)


def _forget_dashboard(scheduler: Any) -> None:
    """Let a closed in-process scheduler be freed.

    distributed memoizes its dashboard's page variables per Scheduler (``tlz.memoize`` on
    ``distributed.dashboard.scheduler.template_variables``), so every embedded cluster that
    served a dashboard stayed alive after it was closed, its task history and its worker's
    state with it: the RSS of repeated fits in one process grew by megabytes per fit. The
    memo's only handle is its closure, so the entry is dropped there; if distributed changes
    its shape, nothing is dropped (and nothing breaks).
    """
    if scheduler is None:
        return
    # Likewise distributed.core memoizes, without bound, whether each handler (a bound
    # method of a Scheduler or Worker) expects a comm: it is only a memo, so it is emptied.
    from distributed import core

    expects_comm = getattr(core, "_expects_comm", None)
    if hasattr(expects_comm, "cache_clear"):
        expects_comm.cache_clear()
    try:
        from distributed.dashboard import scheduler as dashboard
    except ImportError:  # no bokeh: no dashboard, no memo
        return
    for cell in getattr(dashboard.template_variables, "__closure__", None) or ():
        try:
            memo = cell.cell_contents
        except ValueError:  # an empty cell
            continue
        if isinstance(memo, dict):
            for key in [k for k in memo if k is scheduler
                        or (isinstance(k, tuple) and any(a is scheduler for a in k))]:
                memo.pop(key, None)


def dashboard_link(client: Any) -> str | None:
    """The dashboard's address, when the scheduler serves one."""
    try:
        info = client.scheduler_info()
    except Exception:  # noqa: BLE001 - a nicety; never fail a fit for it
        return None
    port = info.get("services", {}).get("dashboard")
    if not port:
        return None
    link = client.dashboard_link
    if str(info.get("address", "")).startswith("inproc://"):
        # An in-process scheduler serves its dashboard on 127.0.0.1 whatever host the link
        # template fills in.
        link = f"http://{LOOPBACK}:{port}/status"
    return link


class DaskSession:
    """A distributed client, and the local cluster behind it if this object started one.

    Parameters
    ----------
    scheduler : None, str or distributed.Client
        None: the current client, else a LocalCluster started in-process. str: a scheduler
        address. Client: use it (it is not closed by :meth:`close`).
    n_workers, threads_per_worker : int, optional
        For the local cluster.
    processes : bool
        Local cluster with worker processes (each with a nanny) instead of threads.
    timeout : float
        Seconds to wait for a remote scheduler.
    security : distributed.security.Security, optional
        TLS settings for a ``tls://`` address.
    """

    def __init__(self, scheduler: Any = None, *, n_workers: int | None = None,
                 threads_per_worker: int | None = None, processes: bool = False,
                 timeout: float = 30.0, memory_limit: str | int = "auto",
                 security: Any = None):
        from distributed import Client

        self.cluster = None
        self._owns_client = True
        if is_client(scheduler):
            self.client = scheduler
            self._owns_client = False
        elif scheduler is None:
            current = current_client()
            if current is not None:
                self.client = current
                self._owns_client = False
            else:
                self.cluster = start_local_cluster(n_workers, threads_per_worker, processes,
                                                   memory_limit)
                self.client = Client(self.cluster)
        elif isinstance(scheduler, str):
            self.client = connect(scheduler, timeout=timeout, security=security)
        else:
            raise TypeError("scheduler must be None, an address string or a distributed.Client,"
                            f" got {type(scheduler).__name__}")
        from .progress import reporter

        if reporter().wants(1):
            link = dashboard_link(self.client)
            if link:
                reporter().log(f"[dask] dashboard: {link}")

    @property
    def started_locally(self) -> bool:
        """True when this session started (and will stop) its own cluster."""
        return self.cluster is not None

    def close(self) -> None:
        """Close the client and any cluster this session started. Idempotent."""
        if self._owns_client and self.client is not None:
            self.client.close()
        self.client = None
        if self.cluster is not None:
            scheduler = getattr(self.cluster, "scheduler", None)
            self.cluster.close()
            self.cluster = None
            _forget_dashboard(scheduler)

    def __enter__(self) -> DaskSession:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


#: seconds granted beyond the timeout before a connection attempt is abandoned
_GRACE = 1.0


def connect(address: str, *, timeout: float = 30.0, security: Any = None,
            client_class: Any = None) -> Any:
    """A client connected to ``address`` within ``timeout`` seconds, whatever answers there.

    distributed's own timeout does not bound every case: a listener that accepts the
    connection but never speaks Dask's protocol can keep the attempt waiting for good. The
    attempt therefore runs in a thread that is abandoned ``timeout`` (+1) seconds later.

    Raises
    ------
    SchedulerUnreachableError
        Nothing answers there in time, or what answers is not a Dask scheduler.
    """
    import threading

    from distributed import Client

    if not timeout > 0:
        raise ValueError(f"the connect timeout must be > 0, got {timeout:g}")
    client_class = client_class or Client
    outcome: dict[str, Any] = {}

    def attempt() -> None:
        try:
            outcome["client"] = client_class(address, timeout=timeout, security=security)
        except BaseException as err:  # noqa: BLE001 - handed to the caller's thread
            outcome["error"] = err
        if outcome.get("abandoned") and "client" in outcome:
            outcome["client"].close()  # too late: nobody waits for it any more

    thread = threading.Thread(target=attempt, name="mkrk-connect", daemon=True)
    thread.start()
    thread.join(timeout + _GRACE)
    if "client" in outcome:
        return outcome["client"]
    outcome["abandoned"] = True
    hint = ("; a tls:// scheduler needs TLS certificates (security=, or the CLI's --tls-*)"
            if address.startswith("tls://") and security is None else "")
    error = outcome.get("error")
    if error is not None:
        detail = " ".join(str(error).split()) or type(error).__name__
        raise SchedulerUnreachableError(
            f"cannot reach the Dask scheduler at {address!r} within {timeout:g}s: "
            f"{detail}{hint}") from None
    raise SchedulerUnreachableError(
        f"cannot reach the Dask scheduler at {address!r}: nothing answered within {timeout:g}s "
        f"(something may listen there without speaking Dask's protocol){hint}")


def slurm_log_directory(value: str | os.PathLike[str] | None) -> Any:
    """The folder of the SLURM worker jobs' logs (``#SBATCH -e/-o``) as SLURM needs it:
    absolute, ``~`` and ``$VARS`` expanded (SLURM expands neither); unset, the cache folder
    ``$XDG_CACHE_HOME/mkrk-dask/slurm-logs`` (``~/.cache/...``), never the folder the jobs
    are submitted from."""
    from pathlib import Path

    if value is None or not str(value).strip():
        cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"),
                                                                 ".cache")
        return Path(cache) / "mkrk-dask" / "slurm-logs"
    return Path(os.path.expandvars(str(value))).expanduser().resolve()


def slurm_job_states(cluster: Any) -> str:
    """``ID STATE(reason)`` of a dask-jobqueue cluster's jobs as squeue reports them (``ID
    gone`` once a job has ended), for messages."""
    import subprocess

    ids = [str(job.job_id) for job in cluster.workers.values() if getattr(job, "job_id", None)]
    if not ids:
        return "no job submitted"
    try:
        out = subprocess.run(["squeue", "-h", "-j", ",".join(ids), "-o", "%i %T(%r)"],
                             capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.TimeoutExpired):
        out = ""
    states = dict(line.split(" ", 1) for line in out.splitlines() if " " in line)
    return ", ".join(f"{i} {states.get(i, 'gone')}" for i in ids)


#: seconds between the reports of the worker jobs' states while they are awaited
SLURM_REPORT_SECONDS = 10.0
#: seconds SLURM's controller is given to answer ``scontrol ping`` before a cluster starts
_PING_SECONDS = 20.0


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


def _check_slurm_controller() -> None:
    """Raise :class:`ClusterStartError` when SLURM's controller does not answer: sbatch and
    squeue would retry for long and dask-jobqueue only logs their failures, so the jobs would
    be awaited in silence for the whole wait."""
    import shutil
    import subprocess

    if shutil.which("scontrol") is None:
        return  # nothing to ask; a failing sbatch is reported by the wait
    try:
        done = subprocess.run(["scontrol", "ping"], capture_output=True, text=True,
                              timeout=_PING_SECONDS)
    except subprocess.TimeoutExpired:
        raise ClusterStartError(f"SLURM's controller did not answer `scontrol ping` within "
                                f"{_PING_SECONDS:g}s; is slurmctld running?") from None
    except OSError:
        return
    text = done.stdout + "\n" + done.stderr
    # Any controller up will do (a site's backup controller may be down).
    if done.returncode == 0 or " is UP" in text:
        return
    said = next((line.strip() for line in text.splitlines()
                 if line.strip() and not line.lstrip().startswith("*")), "no answer")
    raise ClusterStartError(f"SLURM is installed but its controller does not answer "
                            f"(`scontrol ping`: {_one_line(said)}); start slurmctld, or run "
                            "on a login node of the cluster")


def _submission_error(err: BaseException) -> str:
    """What sbatch said, from dask-jobqueue's error for a failed submission."""
    text = str(err)
    if "stderr:" in text:
        said = [line for line in text.split("stderr:", 1)[1].splitlines() if line.strip()]
        if said:
            return _one_line(said[0])
    return _one_line(text) or type(err).__name__


def _job_class(failures: list[BaseException]) -> Any:
    """dask-jobqueue's SLURM job, recording why a submission failed: dask-jobqueue only logs
    it (the workers would be awaited for nothing), and leaves the job's status such that
    closing the cluster fails an assertion (an internal error instead of the real one)."""
    from dask_jobqueue.slurm import SLURMJob
    from distributed.core import Status

    class RecordedJob(SLURMJob):
        async def start(self) -> None:
            try:
                await super().start()
            except BaseException as err:  # cancelled too: never submitted, nothing to close
                self.status = Status.failed
                if isinstance(err, Exception):
                    failures.append(err)
                raise

    return RecordedJob


def _cancel(cluster: Any, client: Any) -> None:
    """Close the client and the cluster (which cancels the jobs), whatever happened. Closing
    fails when Ctrl-C came while sbatch was submitting (distributed's close meets the
    cancelled submission): then the sbatch still running is stopped (else its job would be
    queued after this process is gone), the jobs known are scancelled here, and distributed
    is told not to close the cluster again at exit (a 10 s wait for nothing)."""
    import contextlib
    import subprocess

    if client is not None:
        with contextlib.suppress(Exception):
            client.close(timeout=5)
    try:
        cluster.close(timeout=30)
        return
    except Exception:  # noqa: BLE001 - cancelled below; the caller's error is the one to tell
        pass
    with contextlib.suppress(Exception):
        import psutil

        for child in psutil.Process().children():
            if child.name() == "sbatch":
                for proc in [*child.children(recursive=True), child]:
                    with contextlib.suppress(psutil.Error):
                        proc.kill()
    ids = [str(job.job_id) for job in list(cluster.workers.values())
           if getattr(job, "job_id", None)]
    if ids:
        with contextlib.suppress(OSError, subprocess.TimeoutExpired):
            subprocess.run(["scancel", *ids], capture_output=True, timeout=30)
    cluster.shutdown_on_close = False


def _await_workers(cluster: Any, client: Any, workers: int, jobs: int, wait: float,
                   failures: list[BaseException]) -> None:
    """Wait up to ``wait`` seconds for ``workers`` workers, reporting the jobs' states every
    :data:`SLURM_REPORT_SECONDS` (a user waits on a queue and must see why); a submission
    that failed ends the wait at once."""
    from .progress import reporter

    start = time.monotonic()
    deadline = start + wait
    report = start + SLURM_REPORT_SECONDS
    while True:
        if failures:
            raise ClusterStartError(f"sbatch could not submit the worker jobs: "
                                    f"{_submission_error(failures[0])}")
        now = time.monotonic()
        if now >= deadline:
            states = slurm_job_states(cluster)
            raise ClusterStartError(f"{jobs} SLURM job(s) of workers did not start within "
                                    f"{wait:g}s ({states}); they are cancelled")
        if now >= report:
            report = now + SLURM_REPORT_SECONDS
            up = len(client.nthreads())
            reporter().log(f"[slurm] waiting for the worker jobs ({up}/{workers} workers up "
                           f"after {now - start:.0f}s): {slurm_job_states(cluster)}")
        try:
            # Short waits, so that failures and reports are seen between them.
            client.wait_for_workers(workers, timeout=min(1.0, max(deadline - now, 0.1)))
            return
        except TimeoutError:
            continue


def start_slurm_cluster(jobs: int, *, config: str | os.PathLike[str] | None = None,
                        wait: float = 600.0) -> tuple[Any, Any]:
    """A :class:`dask_jobqueue.SLURMCluster` with ``jobs`` worker jobs running, and a client.

    The jobs are described by Dask's ``jobqueue.slurm`` configuration (for instance
    ``~/.config/dask/jobqueue.yaml``), overridden by the YAML file ``config`` if given. The
    caller closes the client and the cluster (which cancels the jobs) when done. While the
    jobs are awaited their SLURM states are reported (:mod:`mkrk_dask.progress`) every
    :data:`SLURM_REPORT_SECONDS`.

    Raises
    ------
    ClusterStartError
        dask-jobqueue or SLURM's commands are missing, SLURM's controller does not answer,
        sbatch refuses the job, or the workers are not all up within ``wait`` seconds (the
        jobs are cancelled; the message gives their states).
    ValueError
        ``jobs`` or ``wait`` out of range, or a ``config`` that is no jobqueue YAML file.
    """
    import shutil
    from pathlib import Path

    if jobs < 1:
        raise ValueError(f"the number of SLURM jobs must be >= 1, got {jobs}")
    if not wait > 0:
        raise ValueError(f"the wait for the SLURM jobs must be > 0 s, got {wait:g}")
    import signal
    import threading

    ctrl_c = signal.getsignal(signal.SIGINT)
    try:
        import dask.config
        import yaml
        from dask_jobqueue import SLURMCluster
        from distributed import Client
    except ImportError as err:
        raise ClusterStartError(f"a SLURM cluster needs dask-jobqueue and pyyaml ({err}); "
                                "pip install 'mkrk-dask[slurm]'") from None
    # Importing dask_jobqueue makes Ctrl-C call sys.exit() (its runner module): an exit with
    # status 0 that says nothing. Ctrl-C is the caller's again.
    if threading.current_thread() is threading.main_thread() and ctrl_c is not None:
        signal.signal(signal.SIGINT, ctrl_c)
    # dask-jobqueue submits, watches and cancels the jobs with these three.
    missing = [c for c in ("sbatch", "squeue", "scancel") if shutil.which(c) is None]
    if missing:
        raise ClusterStartError(f"a SLURM cluster needs SLURM's {', '.join(missing)}, which "
                                f"{'is' if len(missing) == 1 else 'are'} not on PATH here "
                                "(run on a login node of the cluster)")
    options: dict[str, Any] = {}
    if config is not None:
        try:
            loaded = yaml.safe_load(Path(config).read_text())
        except (OSError, yaml.YAMLError) as err:
            raise ValueError(f"cannot read the cluster configuration {config}: "
                             f"{' '.join(str(err).split())}") from None
        if not isinstance(loaded, dict) or not isinstance(
                loaded.get("jobqueue", {}).get("slurm"), dict):
            raise ValueError(f"{config} has no jobqueue: slurm: section (see "
                             "cluster/slurm/jobqueue.yaml)")
        # As arguments, not as Dask configuration: dask-jobqueue reads its configuration
        # again for each job it submits later, outside any dask.config.set block.
        # (the configuration's "name" is the argument "job_name").
        options = {{"name": "job_name"}.get(key, key.replace("-", "_")): value
                   for key, value in loaded["jobqueue"]["slurm"].items()}
    logs = options.get("log_directory", dask.config.get("jobqueue.slurm.log-directory", None))
    options["log_directory"] = str(slurm_log_directory(logs))
    Path(options["log_directory"]).mkdir(parents=True, exist_ok=True)
    processes = int(options.get("processes")
                    or dask.config.get("jobqueue.slurm.processes", None) or 1)
    _check_slurm_controller()
    failures: list[BaseException] = []
    try:
        cluster = SLURMCluster(job_cls=_job_class(failures), **options)
    except (TypeError, ValueError) as err:
        raise ValueError(f"the SLURM cluster configuration is invalid: "
                         f"{' '.join(str(err).split())}") from None
    client = None
    try:
        cluster.scale(jobs=jobs)
        client = Client(cluster)
        _await_workers(cluster, client, jobs * processes, jobs, wait, failures)
    except BaseException:
        _cancel(cluster, client)
        raise
    return cluster, client
