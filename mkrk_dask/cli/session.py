"""The Dask client a command runs on: the embedded local cluster, or a running scheduler
reached within ``--connect-timeout`` (over ``tls://`` with ``--tls-ca/--tls-cert/--tls-key``).

Connecting is bounded here as well as in the library: an address where something listens but
never completes Dask's handshake (an HTTP server, a silent TCP listener, a TLS scheduler
reached without a certificate) gives :class:`~mkrk_dask.exceptions.SchedulerUnreachableError`
(exit code 2) when the timeout has passed, whatever the connection attempt does. A scheduler
lost while a command runs gives :class:`~mkrk_dask.exceptions.SchedulerLostError` (exit 3).
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from .. import progress
from ..dask_session import DaskSession, connect, slurm_job_states, start_slurm_cluster
from ..exceptions import SchedulerLostError, WorkersLostError
from ..passes import remember_nannies
from .errors import UserError

__all__ = ["dask_client", "bounded_connect", "security_from_args", "storage_options"]



def security_from_args(args: argparse.Namespace) -> Any:
    """A :class:`distributed.security.Security` from ``--tls-ca/--tls-cert/--tls-key``, or
    None when none is given.

    Raises
    ------
    UserError
        If only some are given, or a file does not exist.
    """
    files = {"--tls-ca": getattr(args, "tls_ca", None),
             "--tls-cert": getattr(args, "tls_cert", None),
             "--tls-key": getattr(args, "tls_key", None)}
    given = {k: v for k, v in files.items() if v}
    if not given:
        return None
    if len(given) != len(files):
        missing = ", ".join(k for k in files if k not in given)
        raise UserError(f"TLS needs --tls-ca, --tls-cert and --tls-key together; missing "
                        f"{missing}")
    for option, name in files.items():
        if not Path(name).expanduser().is_file():
            raise UserError(f"{option} {name} does not exist")
    address = getattr(args, "scheduler", None) or ""
    if address and not address.startswith("tls://"):
        raise UserError(f"--tls-* options need a tls:// scheduler address, got {address!r}")
    from distributed.security import Security

    return Security(tls_ca_file=str(Path(files["--tls-ca"]).expanduser()),
                    tls_client_cert=str(Path(files["--tls-cert"]).expanduser()),
                    tls_client_key=str(Path(files["--tls-key"]).expanduser()),
                    require_encryption=True)


def storage_options(args: argparse.Namespace) -> dict[str, Any] | None:
    """``--storage-option KEY=VALUE`` (repeated) as a dict; values that read as JSON
    (numbers, true/false) are converted."""
    import json

    items = getattr(args, "storage_options", None)
    if not items:
        return None
    options: dict[str, Any] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise UserError(f"--storage-option expects KEY=VALUE, got {item!r}")
        try:
            options[key.strip()] = json.loads(value)
        except ValueError:
            options[key.strip()] = value
    return options


def bounded_connect(address: str, timeout: float, security: Any = None) -> Any:
    """:func:`mkrk_dask.dask_session.connect` (bounded by ``timeout`` whatever answers), with the
    option's name in the error for a bad timeout."""
    if not timeout > 0:
        raise UserError(f"--connect-timeout must be > 0, got {timeout:g}")
    return connect(address, timeout=timeout, security=security)


def _lost(client: Any, wait: float = 0.0) -> bool:
    """True when ``client`` no longer has a working connection to its scheduler, waiting up
    to ``wait`` seconds for the client to notice (a call to a killed scheduler can fail
    before the client's own connection does)."""
    import time

    if client is None:
        return False
    deadline = time.monotonic() + wait
    while True:
        if getattr(client, "status", "running") != "running":
            return True
        comm = getattr(client, "scheduler_comm", None)
        if comm is None or bool(getattr(comm, "closed", lambda: False)()):
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.1)


def _no_workers(client: Any) -> bool:
    """True when the scheduler answers and has no worker at all: whatever error a step
    raised then (a check that no worker answered, a task that could not run), its cause is
    the lost workers, not the input."""
    try:
        return not client.nthreads()
    except Exception:  # noqa: BLE001 - a scheduler that does not answer is not this case
        return False


def _workers_lost(args: argparse.Namespace, err: BaseException) -> WorkersLostError:
    # Name --store only where the command has one given: resuming needs it.
    again = ("run the same command again with the same --store to resume where it stopped"
             if getattr(args, "store", None) else "run the command again")
    return WorkersLostError(
        f"every Dask worker of the cluster is gone ({type(err).__name__} meanwhile); the run "
        f"cannot go on. Restart the workers (or the cluster) and {again}")


def reporting(args: argparse.Namespace) -> contextlib.AbstractContextManager:
    """The command's report on stderr at its verbosity: its messages always, progress (bars)
    only on a terminal, never on a pipe or a file, where it would be noise in a log."""
    try:
        terminal = sys.stderr.isatty()
    except (AttributeError, ValueError):
        terminal = False
    return progress.reporting(max(args.verbosity, 0), progress=terminal)


@contextlib.contextmanager
def dask_client(args: argparse.Namespace, solver: str) -> Iterator[Any]:
    """The Dask client the command runs on, or None for the exact solver without a scheduler,
    with progress reported on stderr at the command's verbosity.

    ``--scheduler ADDRESS`` connects to an existing scheduler (left running afterwards);
    without it the embedded local cluster starts in this process and stops at the end
    (:class:`mkrk_dask.dask_session.DaskSession`).
    """
    address = getattr(args, "scheduler", None)
    with reporting(args):
        security = security_from_args(args)
        if solver == "exact" and not address:
            yield None
            return
        client = jobs = None
        if getattr(args, "cluster", None):
            if address:
                raise UserError("--cluster starts its own scheduler: give --cluster or "
                                "--scheduler, not both")
            restore = _term_interrupts()
            try:
                jobs, client = _submit_jobs(args)
            except BaseException:
                restore()
                raise
        elif address:
            progress.reporter().log(f"connecting to the Dask scheduler at {address}", 2)
            client = bounded_connect(address, getattr(args, "connect_timeout", 30.0), security)
        with progress.reporting(0):  # the estimator's session names the dashboard, once
            session = DaskSession(client, n_workers=getattr(args, "workers", None))
        if client is not None:
            remember_nannies(client)  # every worker lost before the first pass: seen at once
        try:
            if args.verbosity >= 2:
                info = session.client.scheduler_info()
                progress.reporter().log(f"[dask] scheduler {info.get('address')}: "
                                        f"{len(info.get('workers', {}))} worker(s)", 2)
            yield session.client
        except Exception as err:
            if isinstance(err, SchedulerLostError | WorkersLostError) or client is None:
                raise
            # A connection error may be the scheduler's death seen first: a few seconds for
            # the client to notice it.
            if address and _lost(client, 5.0 if isinstance(err, OSError) else 0.0):
                raise SchedulerLostError(
                    f"lost the Dask scheduler at {address} during the run "
                    f"({type(err).__name__}); restart it and run the command again") from err
            if _no_workers(client):
                raise _workers_lost(args, err) from err
            raise
        finally:
            session.close()
            if client is not None:
                with contextlib.suppress(Exception):
                    client.close(timeout=5)
            if jobs is not None:
                jobs.close()  # cancels the worker jobs, whatever happened (Ctrl-C included)
                restore()
                progress.reporter().log(f"[{args.cluster}] worker jobs cancelled", 2)


def _term_interrupts() -> Callable[[], None]:
    """Make SIGTERM (a kill, the submitting job's own time limit) unwind like Ctrl-C while
    worker jobs are held, so that they are cancelled; returns what restores the handler."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        return lambda: None

    def interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, interrupt)
    return lambda: signal.signal(signal.SIGTERM, previous)


def _submit_jobs(args: argparse.Namespace) -> tuple[Any, Any]:
    """The batch-job cluster of ``--cluster`` (dask-jobqueue) with its workers up, and its
    client; the dashboard link and the job ids are printed on stderr."""
    if args.jobs < 1:
        raise UserError(f"--jobs must be >= 1, got {args.jobs}")
    if not args.cluster_wait > 0:
        raise UserError(f"--cluster-wait must be > 0, got {args.cluster_wait:g}")
    if args.cluster_config and not Path(args.cluster_config).expanduser().is_file():
        raise UserError(f"--cluster-config {args.cluster_config} does not exist")
    progress.reporter().log(f"[{args.cluster}] submitting {args.jobs} worker job(s)")
    config = Path(args.cluster_config).expanduser() if args.cluster_config else None
    cluster, client = start_slurm_cluster(args.jobs, config=config, wait=args.cluster_wait)
    progress.reporter().log(f"[{args.cluster}] jobs {slurm_job_states(cluster)}; scheduler "
                            f"{cluster.scheduler_address}; dashboard {cluster.dashboard_link}")
    return cluster, client
