"""The ``mkrk`` command line.

Commands: ``build`` (a kernel store), ``fit``, ``search`` (a lambda grid), ``predict`` (new data
with a saved Nystrom model), ``reproduce`` (the paper's protocol), ``figures`` (PNGs from saved
results) and ``demo``. Run ``mkrk COMMAND --help`` for the options and examples of each.

Results a user would pipe go to standard output and only those; progress and messages go
to standard error (``-q`` silences them, ``-v`` adds detail).

Exit codes: 0 success; 2 a user error (bad arguments, an unreadable or invalid input file, an
invalid parameter, an output that cannot be written, an unreachable scheduler), reported in
one line on standard error (``--debug`` shows the traceback); 3 the Dask scheduler was lost
during the run; 1 an unexpected internal error; 130 interrupted (Ctrl-C).

The package: :mod:`.parser` (the argument parser) and :mod:`.examples` (its help texts),
:mod:`.config` (config files), :mod:`.commands` and :mod:`.demo` (what each command does, over
the library), :mod:`.session` (the Dask client), :mod:`.output` (checked, atomic output),
:mod:`.models` (saved models), :mod:`.errors` (exit codes).
"""

from __future__ import annotations

import logging
import os
import shlex
import sys
from collections.abc import Sequence

from .config import config_defaults, load_config
from .errors import (
    EXIT_INTERNAL,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_SCHEDULER_LOST,
    EXIT_USER,
    UserError,
    exit_code,
)
from .parser import build_parser, parse_lams

__all__ = ["main", "build_parser", "parse_lams", "UserError", "EXIT_OK", "EXIT_INTERNAL",
           "EXIT_USER", "EXIT_SCHEDULER_LOST", "EXIT_INTERRUPTED"]


def _command_line(argv: Sequence[str]) -> str:
    """The command as typed, for the records, with storage options' values masked."""
    from ..secrets import mask_argv

    return "mkrk " + " ".join(shlex.quote(w) for w in mask_argv(argv))


#: the loggers of Dask and its event loop, with their own levels in distributed's defaults
_LIBRARY_LOGGERS = ("distributed", "distributed.client", "distributed.gc", "tornado",
                    "tornado.application", "asyncio", "bokeh")


def _quiet_logs(verbosity: int) -> None:
    """Dask's own log lines, tracebacks included, only from -vvv: the command reports every
    fault it sees as a one-line error (a killed scheduler made distributed log a traceback
    first). Set on the loggers, for a distributed already imported, and in Dask's config,
    which distributed reads when it is imported later (it resets the levels then)."""
    import dask.config

    level = "info" if verbosity >= 3 else "critical"
    for name in _LIBRARY_LOGGERS:
        logging.getLogger(name).setLevel(level.upper())
    dask.config.set({"distributed.logging": dict.fromkeys(_LIBRARY_LOGGERS, level)})


def _silence_stdout() -> None:
    """Point stdout at /dev/null, so that flushing it at exit raises nothing."""
    import os

    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):  # not a real file (a test's capture)
        pass


def _explain_damaged_input(err: Exception, args: object) -> Exception:
    """A codec's error on a damaged Zarr input, as a user error naming the array and chunk."""
    data = getattr(args, "data", None)
    if data is None:
        return err
    from ..io import undecodable_chunk

    # DATA is one path, or one a view
    for path in ([data] if isinstance(data, str | os.PathLike) else data):
        try:
            found = undecodable_chunk(path, err)
        except Exception:  # noqa: BLE001 - the diagnosis must not hide the original error
            found = None
        if found is not None:
            return found
    return err


def _explain_full_disk(err: Exception, args: object) -> Exception:
    """A file system that filled up (or turned read-only) while the store was written, as a
    user error naming the store: the user's to fix, with free space or another path."""
    import errno

    if not isinstance(err, OSError) or err.errno not in (errno.ENOSPC, errno.EDQUOT,
                                                         errno.EROFS, errno.EFBIG):
        return err
    store = getattr(args, "store", None)
    where = f"the store {store}" if store else "the results"
    resume = ("; the blocks written so far are kept: a re-run with the same --store resumes"
              if store else "")
    return UserError(f"cannot write {where}: {os.strerror(err.errno)}; free space there or "
                     f"give another path{resume}")


def _format_warning(message: Warning | str, category: type[Warning], filename: str,
                    lineno: int, line: str | None = None) -> str:
    """A warning as the command line shows it: its kind and message, wrapped at 100
    characters; the library's file and line, which a user cannot act on, left out."""
    from .._text import wrap_lines

    return "\n".join(wrap_lines([f"{category.__name__}: {' '.join(str(message).split())}"])) \
        + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``mkrk`` console script. Returns the exit code."""
    parser = build_parser()
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        args = parser.parse_args(argv)
    except SystemExit as stop:  # --help, --version, or a usage error (already printed)
        return int(stop.code or 0) if not isinstance(stop.code, str) else EXIT_USER
    if args.command is None:
        parser.print_help(sys.stderr)
        return EXIT_USER
    debug = args.debug
    try:
        if args.config:
            choices = parser._subparsers._group_actions[0].choices
            sub = choices[args.command]
            sub.set_defaults(**config_defaults(load_config(args.config), args.command, sub,
                                               list(choices)))
            try:
                args = parser.parse_args(argv)
            except SystemExit as stop:
                return int(stop.code or 0)
        args.verbosity = 0 if args.quiet else 1 + args.verbose
        args.command_line = _command_line(argv)
        _quiet_logs(args.verbosity)
        import warnings

        if args.verbosity <= 0:
            warnings.simplefilter("ignore")
        from .commands import COMMANDS  # the numerical stack: only once the arguments parse

        shown = warnings.formatwarning
        warnings.formatwarning = _format_warning
        try:
            return int(COMMANDS[args.command](args) or 0)
        finally:
            warnings.formatwarning = shown
    except KeyboardInterrupt:
        print(f"mkrk {args.command}: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        # The reader of stdout went away (mkrk ... | head): nothing more to say to anyone.
        _silence_stdout()
        return EXIT_OK
    except Exception as err:
        if debug:
            import traceback

            traceback.print_exc()
        from ..secrets import mask_text, secrets_of_argv

        err = _explain_full_disk(_explain_damaged_input(err, args), args)
        # Whatever a library quoted (a URL, an option's value), no credential is printed.
        message = mask_text(" ".join(str(err).split()) or type(err).__name__,
                            secrets_of_argv(argv))
        if hasattr(args, "overwrite"):  # the library's advice, in the command's words
            message = message.replace("overwrite=True", "--overwrite")
        code = exit_code(err)
        if code != EXIT_INTERNAL:
            print(f"mkrk {args.command}: error: {message}", file=sys.stderr)
            return code
        print(f"mkrk {args.command}: internal error ({type(err).__name__}): {message}"
              + ("" if debug else "; run with --debug for the traceback"), file=sys.stderr)
        return EXIT_INTERNAL
