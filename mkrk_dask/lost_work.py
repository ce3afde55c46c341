"""Lost work and a lost cluster, told apart from a bug and from a slow cluster.

What every distributed pass (:mod:`mkrk_dask.passes`) asks when a task fails or waits:
:func:`is_lost_work` (a worker, or data it held, was lost: worth running the task again),
:func:`check_client` (the scheduler is gone: the fit ends with one line) and
:class:`WorkerWatch` (the cluster has had no worker for too long, or no nanny is left to
restart one). :func:`remember_nannies` notes a cluster's nannies before the first pass.
"""

from __future__ import annotations

import time
import weakref
from concurrent.futures import CancelledError
from typing import Any

from .exceptions import SchedulerLostError, WorkersLostError

__all__ = ["NO_WORKERS_TIMEOUT", "is_lost_work", "check_client", "remember_nannies",
           "WorkerWatch"]

#: Dask configuration key: seconds a pass waits while the cluster has no worker at all (a
#: nanny restarts a killed worker within a few seconds; a cluster that scales up slowly, e.g.
#: batch jobs, may need more)
NO_WORKERS_TIMEOUT = "mkrk-dask.no-workers-timeout"
_NO_WORKERS_DEFAULT = 20.0


def is_lost_work(error: BaseException) -> bool:
    """True for failures that mean a worker (or data it held) was lost, not a bug in the task:
    worth running the task again."""
    from distributed import KilledWorker
    from distributed.comm.core import CommClosedError
    from tornado.iostream import StreamClosedError

    if isinstance(error, SchedulerLostError | WorkersLostError):
        return False  # final: running the work again cannot help
    # Not every OSError: a task that cannot read a file fails the same way every time.
    return isinstance(error, CancelledError | KilledWorker | CommClosedError | ConnectionError
                      | StreamClosedError)


def check_client(client: Any, reconnect_wait: float = 120.0) -> None:
    """Raise :class:`SchedulerLostError` when the client has lost its scheduler.

    A client that is reconnecting is given the time it takes (it gives up by itself after its
    connect timeout, at most ``reconnect_wait`` seconds here): a scheduler that comes back is
    used again, one that does not ends the fit with one line.
    """
    deadline = time.monotonic() + reconnect_wait
    while getattr(client, "status", "running") == "connecting" and time.monotonic() < deadline:
        time.sleep(0.2)
    status = getattr(client, "status", "running")
    if status not in ("running", "newly-created"):
        raise SchedulerLostError(
            f"lost the connection to the Dask scheduler (client status {status!r}); the fit "
            "cannot go on. Restart the scheduler and run the same command again (a store "
            "given with --store resumes where the fit stopped)")


#: per client, the nanny address of every worker a pass has seen (None: no nanny): whether
#: anything is left to bring a lost worker back
_NANNIES: weakref.WeakKeyDictionary[Any, dict[str, str | None]] = weakref.WeakKeyDictionary()


def _listening(address: str | None) -> bool:
    """Whether something accepts connections at a nanny's ``tcp://`` or ``tls://`` address
    (no nanny, or an address of another kind, cannot be probed: taken as alive)."""
    import socket

    from distributed.comm.addressing import parse_address, parse_host_port

    if address is None:
        # A worker without a nanny: none restarts it, but whatever started it (a cluster
        # manager scaling up, a user) may start another: not concluded.
        return True
    try:
        scheme, location = parse_address(address)
        if scheme not in ("tcp", "tls"):
            return True
        host, port = parse_host_port(location)
        socket.create_connection((host, port), timeout=1.0).close()
    except OSError:
        return False
    except Exception:  # noqa: BLE001 - an address not understood: do not conclude
        return True
    return True


def remember_nannies(client: Any) -> None:
    """Note the nannies of the workers ``client``'s cluster has now, so that losing them all
    before any pass has watched them is still recognised at once (:class:`WorkerWatch`)."""
    try:
        WorkerWatch(client)._learn(client.nthreads())
    except Exception:  # noqa: BLE001 - only an early diagnosis is lost
        pass


class WorkerWatch:
    """Raises :class:`WorkersLostError` once the cluster has had no worker for
    ``mkrk-dask.no-workers-timeout`` seconds (Dask configuration, default 20): tasks submitted
    to a cluster whose every worker (and nanny) died wait for a worker forever. When no
    nanny of the workers seen is left to restart one (they were killed too), at once: the
    wait is for nannies that restart their workers."""

    def __init__(self, client: Any):
        import dask.config

        self.client = client
        self.timeout = float(dask.config.get(NO_WORKERS_TIMEOUT, default=_NO_WORKERS_DEFAULT))
        self._since: float | None = None

    def _nannies(self) -> dict[str, str | None]:
        try:
            return _NANNIES.setdefault(self.client, {})
        except TypeError:  # a client that cannot be weakly referenced: nothing remembered
            return {}

    def _learn(self, workers: Any) -> None:
        known = self._nannies()
        if all(address in known for address in workers):
            return
        try:
            info = self.client.scheduler_info(n_workers=-1).get("workers", {})
        except Exception:  # noqa: BLE001 - only an early answer is lost
            return
        for address, worker in info.items():
            known[address] = worker.get("nanny")

    def check(self) -> None:
        try:
            workers = self.client.nthreads()
        except Exception:  # noqa: BLE001 - a lost scheduler is check_client's to report
            return
        if workers:
            self._since = None
            self._learn(workers)
            return
        now = time.monotonic()
        if self._since is None:
            self._since = now
        known = self._nannies()
        hopeless = bool(known) and not any(_listening(n) for n in set(known.values()))
        if hopeless or now - self._since > self.timeout:
            why = ("and no nanny is left to restart one" if hopeless else
                   f"none for {self.timeout:.0f} s")
            raise WorkersLostError(
                f"every Dask worker of the cluster is gone ({why}); "
                "the fit cannot go on. Restart the workers (or the cluster) and run the same "
                "command again with the same --store to resume where it stopped")
