"""Exit codes of ``mkrk`` and which errors are the user's.

A user error (bad arguments, an unreadable or invalid input file, an invalid parameter, an
unreachable scheduler) is reported in one line and exits with :data:`EXIT_USER`; anything
else is an internal error (:data:`EXIT_INTERNAL`).
"""

from __future__ import annotations

__all__ = ["UserError", "is_user_error", "EXIT_OK", "EXIT_INTERNAL", "EXIT_USER",
           "EXIT_INTERRUPTED"]

EXIT_OK = 0
EXIT_INTERNAL = 1
EXIT_USER = 2
EXIT_INTERRUPTED = 130


class UserError(Exception):
    """A mistake in the command line or the input: reported in one line, exit code 2."""


def is_user_error(err: BaseException) -> bool:
    """True for the errors a user's input causes: the library raises ValueError (and the
    file errors) for those, by its own convention."""
    from ..cluster import SchedulerUnreachableError

    return isinstance(err, (UserError, ValueError, FileNotFoundError, IsADirectoryError,
                            PermissionError, SchedulerUnreachableError, NotImplementedError))
