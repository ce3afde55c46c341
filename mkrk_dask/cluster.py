"""Connecting to a Dask cluster, or starting the embedded local one.

With no address, a :class:`distributed.LocalCluster` starts inside this process (the embedded
default) and is shut down by :meth:`DaskSession.close`: the library never leaves a cluster it
started running. With an address (``"tcp://host:8786"``) or a :class:`distributed.Client`, the
same code runs there and the remote cluster is left as it was.
"""

from __future__ import annotations

import os
from typing import Any

__all__ = ["DaskSession", "SchedulerUnreachableError", "start_local_cluster"]


from .exceptions import SchedulerUnreachableError


def start_local_cluster(n_workers: int | None = None, threads_per_worker: int | None = None,
                        processes: bool = False, memory_limit: str | int = "auto") -> Any:
    """The embedded local cluster. Defaults: one in-process worker with a thread per core
    (it shares memory with the client and needs no serialisation); with ``processes``, one
    single-threaded worker process per core. The dashboard goes to a free port."""
    from distributed import LocalCluster

    cores = os.cpu_count() or 1
    if processes:
        n_workers, threads_per_worker = n_workers or cores, threads_per_worker or 1
    else:
        n_workers, threads_per_worker = n_workers or 1, threads_per_worker or cores
    return LocalCluster(n_workers=n_workers, threads_per_worker=threads_per_worker,
                        processes=processes, dashboard_address=":0", memory_limit=memory_limit)


class DaskSession:
    """A distributed client, and the local cluster behind it if this object started one.

    Parameters
    ----------
    scheduler : None, str or distributed.Client
        None: start a LocalCluster in-process. str: a scheduler address. Client: use it
        (it is not closed by :meth:`close`).
    n_workers, threads_per_worker : int, optional
        For the local cluster. Defaults: one worker process-free (threads) with one thread per
        core, which shares memory with the client and needs no serialisation.
    processes : bool
        Local cluster with worker processes (each with a nanny) instead of threads.
    timeout : float
        Seconds to wait for a remote scheduler.
    """

    def __init__(self, scheduler: Any = None, *, n_workers: int | None = None,
                 threads_per_worker: int | None = None, processes: bool = False,
                 timeout: float = 30.0, memory_limit: str | int = "auto"):
        from distributed import Client

        self.cluster = None
        self._owns_client = True
        if isinstance(scheduler, Client):
            self.client = scheduler
            self._owns_client = False
        elif scheduler is None:
            self.cluster = start_local_cluster(n_workers, threads_per_worker, processes,
                                               memory_limit)
            self.client = Client(self.cluster)
        elif isinstance(scheduler, str):
            try:
                self.client = Client(scheduler, timeout=timeout)
            except (OSError, TimeoutError) as err:
                raise SchedulerUnreachableError(
                    f"cannot reach the Dask scheduler at {scheduler!r} within {timeout:g}s: "
                    f"{err}") from None
        else:
            raise TypeError("scheduler must be None, an address string or a distributed.Client,"
                            f" got {type(scheduler).__name__}")

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
            self.cluster.close()
            self.cluster = None

    def __enter__(self) -> DaskSession:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
