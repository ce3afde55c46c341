"""Exit codes of ``mkrk`` and which errors are the user's.

A user error (bad arguments, an unreadable or invalid input file, an invalid parameter, an
output that cannot be written, an unreachable scheduler) is reported in one line and exits
with :data:`EXIT_USER`; a scheduler lost during the run, every worker lost, or batch jobs of
workers that cannot start (``--cluster slurm``), exit with :data:`EXIT_SCHEDULER_LOST`;
anything else is an internal error (:data:`EXIT_INTERNAL`).
"""

from __future__ import annotations

__all__ = ["UserError", "is_user_error", "exit_code", "EXIT_OK", "EXIT_INTERNAL", "EXIT_USER",
           "EXIT_SCHEDULER_LOST", "EXIT_INTERRUPTED"]

EXIT_OK = 0
EXIT_INTERNAL = 1
EXIT_USER = 2
EXIT_SCHEDULER_LOST = 3
EXIT_INTERRUPTED = 130


class UserError(Exception):
    """A mistake in the command line or the input: reported in one line, exit code 2."""


def is_user_error(err: BaseException) -> bool:
    """True for the errors a user's input causes: the library raises ValueError (its
    StoreError and StoreIntegrityError among them) and the file errors for those, by its own
    convention, SchedulerUnreachableError for an address where no scheduler answers, and
    ProblemTooLargeError when no backend fits."""
    from ..exceptions import ProblemTooLargeError, SchedulerUnreachableError

    return isinstance(err, (UserError, ValueError, FileNotFoundError, IsADirectoryError,
                            NotADirectoryError, PermissionError, SchedulerUnreachableError,
                            NotImplementedError, ProblemTooLargeError))


def exit_code(err: BaseException) -> int:
    """The exit code of a command that raised ``err``."""
    from ..exceptions import ClusterStartError, SchedulerLostError, WorkersLostError

    if isinstance(err, SchedulerLostError | WorkersLostError | ClusterStartError):
        return EXIT_SCHEDULER_LOST
    return EXIT_USER if is_user_error(err) else EXIT_INTERNAL
