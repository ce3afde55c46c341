"""Every warning and error class of mkrk-dask, in one place.

Errors a user can fix (bad input, a store that does not match, an unreachable scheduler) derive
from :class:`ValueError` or :class:`ConnectionError`, so that the command line reports them in
one line with exit code 2; the others mean the work could not be finished.
"""

from __future__ import annotations

from sklearn.exceptions import ConvergenceWarning

__all__ = [
    "ProblemTooLargeError",
    "StoreError",
    "StoreIntegrityError",
    "SchedulerUnreachableError",
    "SchedulerLostError",
    "WorkersLostError",
    "ClusterStartError",
    "PassFailedError",
    "QPCertificationError",
    "UncertifiedSolutionWarning",
    "NystromApproximationWarning",
    "KernelDictionaryWarning",
    "DisconnectedGraphWarning",
    "PrecisionWarning",
]


class StoreError(ValueError):
    """A store that cannot be used: foreign, incompatible, or half-written."""


class StoreIntegrityError(StoreError):
    """A store whose data is missing or damaged (a chunk deleted, truncated or altered)."""


class SchedulerUnreachableError(ConnectionError):
    """The scheduler address given could not be reached (or what answers is no scheduler)."""


class SchedulerLostError(ConnectionError):
    """The connection to the Dask scheduler was lost during a fit."""


class WorkersLostError(ConnectionError):
    """Every worker of the cluster was gone for longer than the fit waits for one to come
    back (``mkrk-dask.no-workers-timeout`` in Dask's configuration, 20 s by default)."""


class ClusterStartError(ConnectionError):
    """A cluster of batch jobs (``--cluster slurm``) could not start: its scheduler, its job
    submission, or its workers within the wait. The jobs submitted are cancelled."""


class ProblemTooLargeError(MemoryError):
    """No backend fits the problem on this machine; the message says what would."""


class PassFailedError(RuntimeError):
    """A distributed pass could not finish: its tasks kept failing after every retry."""


class QPCertificationError(RuntimeError):
    """Raised instead of :class:`UncertifiedSolutionWarning` when ``strict=True``."""


class UncertifiedSolutionWarning(ConvergenceWarning):
    """The returned weight-step solution's relative duality gap exceeds ``gap_tol``."""


class NystromApproximationWarning(UserWarning):
    """The Nystrom factors leave out a large share of the learned combined kernel."""


class KernelDictionaryWarning(UserWarning):
    """Kernels of the dictionary were dropped (near-identity at this n, or not representable)."""


class PrecisionWarning(UserWarning):
    """The data as given lose most of float64's digits in the kernels: columns whose values
    lie far from zero beside their spread, kept uncentred by ``preprocessing="none"``."""


class DisconnectedGraphWarning(UserWarning):
    """An anchor graph with more disconnected parts than clusters: the partition of its
    parts into clusters is arbitrary."""
