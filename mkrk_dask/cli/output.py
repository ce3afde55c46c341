"""``--out`` of the commands: checked before the work starts, written whole or not at all.

- :meth:`Output.check` runs before a fit: ``--out`` must not be a file where a folder is
  expected (or the reverse), must not hold an earlier run unless ``--force`` is given, must not
  hold anything else (the results replace the folder whole) nor be the current folder, and its
  file system must take a small probe file (writable, with room for a small result). The
  probe is removed: a failed check writes nothing.
- :meth:`Output.folder` writes a result folder under a temporary name beside ``--out`` and
  renames it into place at the end (replacing an earlier run only with ``--force``): an
  interrupted or failed write (a full disk, say) never leaves a half result, and whatever the
  write created (the temporary folder, missing parent folders) is removed. The folder's
  :data:`MANIFEST` lists the files the run wrote: ``--force`` refuses a run folder that holds
  any other file, since replacing the folder would delete it.

A file system error becomes a one-line :class:`~mkrk_dask.cli.errors.UserError` (exit 2).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

from ..results import plain_mode
from ..store.locations import nearest_existing
from .errors import UserError

__all__ = ["Output", "SMALL_RESULT", "MANIFEST"]

#: the file of a result folder that lists the files the run wrote (``--force`` removes those)
MANIFEST = "manifest.json"
#: bytes a small result needs at least (the probe writes this much)
SMALL_RESULT = 256 * 1024


def _size(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GiB"  # pragma: no cover


def _files(folder: Path) -> set[str]:
    """The files below ``folder``, as paths relative to it with "/" separators."""
    return {f.relative_to(folder).as_posix() for f in folder.rglob("*")
            if f.is_file() or f.is_symlink()}


def _read_manifest(folder: Path) -> set[str] | None:
    """The files a run folder's manifest lists, or None (no manifest, or unreadable)."""
    try:
        return {str(name) for name in json.loads((folder / MANIFEST).read_text())["files"]}
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _write_manifest(folder: Path, files: set[str]) -> None:
    (folder / MANIFEST).write_text(json.dumps({"files": sorted(files)}, indent=1))


def _strerror(err: OSError) -> str:
    return err.strerror or " ".join(str(err).split())


class Output:
    """The ``--out`` of a command.

    Parameters
    ----------
    path : str
        As given on the command line.
    force : bool
        Replace an earlier run.
    kind : {"folder", "file"}
        What ``--out`` names.
    marker : str
        For a folder: the file whose presence means it holds an earlier run.
    whole : bool
        For a folder: the results replace it whole (through :meth:`folder`), so ``--force``
        must find none but a run's own files there. False where a command writes its files
        into the folder one by one and removes nothing.
    """

    def __init__(self, path: str, *, force: bool, kind: str = "folder",
                 marker: str = "result.json", whole: bool = True):
        self.path = self.named(path)
        self.force, self.kind, self.marker, self.whole = force, kind, marker, whole

    @staticmethod
    def named(path: str) -> Path:
        """``--out`` as a path; an empty one (an unset shell variable, say) is an error, not
        "no output"."""
        if not str(path).strip():
            raise UserError("--out is empty; give a path for the results")
        return Path(path).expanduser()

    def check(self, need: int = SMALL_RESULT) -> None:
        """Refuse an ``--out`` that cannot take the result; nothing is left on disk.

        Raises
        ------
        UserError
            A file where a folder is expected (or the reverse), an earlier run without
            ``--force``, a folder of other files (even with ``--force``), the current folder
            or one holding it, a parent that is a file, a read-only or full file system.
        """
        p = self.path
        if self.kind == "folder":
            if p.exists() and not p.is_dir():
                raise UserError(f"--out {p} is a file; give a folder for the results")
            if p.resolve() in (Path.cwd(), *Path.cwd().parents):
                raise UserError(f"--out {p} is the current folder (or holds it); give a new "
                                "folder for the results")
            earlier = (p / self.marker).exists()
            if earlier and not self.force:
                raise UserError(f"--out {p} holds an earlier run ({self.marker}); give --force "
                                "to replace it, or another folder")
            if earlier and self.whole:
                self._refuse_foreign_files(p)
            if not earlier and p.is_dir() and any(p.iterdir()):
                # The results replace the folder whole: never a folder of the user's files,
                # even with --force.
                raise UserError(f"--out {p} is a folder with other files, not an earlier run; "
                                "give a new or empty folder")
        else:
            if p.is_dir():
                raise UserError(f"--out {p} is a folder; give a file name")
            if p.exists() and not self.force:
                raise UserError(f"--out {p} exists (an earlier run?); give --force to replace "
                                "it, or another file name")
        base = nearest_existing(p.parent if self.kind == "file" else p)
        if not base.is_dir():
            raise UserError(f"cannot create --out {p}: {base} is a file")
        self._probe(base, need)

    def _probe(self, base: Path, need: int) -> None:
        """Write and remove ``need`` bytes in ``base``."""
        free = shutil.disk_usage(base).free
        if free < need:
            raise UserError(f"cannot write to --out {self.path}: No space left on device "
                            f"({_size(free)} free in {base}, about {_size(need)} needed)")
        try:
            handle = tempfile.NamedTemporaryFile(dir=base, prefix=".mkrk-probe-", delete=False)
        except OSError as err:
            raise UserError(f"cannot write to --out {self.path}: {_strerror(err)}") from None
        try:
            with handle:
                handle.write(b"\0" * need)
                handle.flush()
                os.fsync(handle.fileno())
        except OSError as err:
            raise UserError(f"cannot write to --out {self.path}: {_strerror(err)}") from None
        finally:
            Path(handle.name).unlink(missing_ok=True)

    @contextlib.contextmanager
    def folder(self) -> Iterator[Path]:
        """A temporary folder beside ``--out`` to write the results into; renamed to ``--out``
        when the block ends without error, removed (with any parent folder it needed)
        otherwise."""
        target = self.path
        created = []
        for parent in reversed(target.parents):
            if not parent.exists():
                created.append(parent)
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            staging = Path(tempfile.mkdtemp(dir=target.parent, prefix=f".{target.name}.partial-"))
            plain_mode(staging)
        except OSError as err:
            self._remove(created)
            raise UserError(f"cannot write to --out {target}: {_strerror(err)}") from None
        try:
            yield staging
            self._commit(staging, target)
        except BaseException as err:
            shutil.rmtree(staging, ignore_errors=True)
            self._remove(created)
            if isinstance(err, OSError):
                raise UserError(f"cannot write the results to {target}: "
                                f"{_strerror(err)}") from None
            raise

    @staticmethod
    def _refuse_foreign_files(folder: Path) -> None:
        """``--force`` replaces a run's own files only: those its manifest lists. Any other
        file (a note the user put beside the results) makes it refuse, naming the file."""
        written = _read_manifest(folder)
        if written is None:
            raise UserError(f"--out {folder} holds a run without a readable {MANIFEST} (the "
                            "list of the files it wrote), so --force cannot tell its files "
                            "from yours; remove the folder yourself or give another")
        present = _files(folder) - {MANIFEST}
        foreign = sorted(present - written)
        if foreign:
            more = f" and {len(foreign) - 1} more" if len(foreign) > 1 else ""
            raise UserError(f"--out {folder} holds {foreign[0]}{more}, which no run wrote; "
                            "--force replaces only a run's own files: move it, or give "
                            "another folder")

    @staticmethod
    def add_to_manifest(folder: Path, files: list[Path]) -> None:
        """Record ``files``, written later into the run folder ``folder`` (figures), in its
        manifest, so that ``--force`` replaces them with the run; nothing where ``folder``
        holds no run."""
        listed = _read_manifest(folder)
        if listed is None:
            return  # no run there, or an unreadable manifest: --force refuses it anyway
        root = folder.resolve()
        for file in files:
            with contextlib.suppress(ValueError):  # a file outside the folder: not the run's
                listed.add(Path(file).resolve().relative_to(root).as_posix())
        _write_manifest(folder, listed)

    def _commit(self, staging: Path, target: Path) -> None:
        _write_manifest(staging, _files(staging))
        if not target.exists():
            os.rename(staging, target)
            return
        # again at the last moment: a file put there since the check is kept too
        if any(target.iterdir()):
            self._refuse_foreign_files(target)
        old = Path(tempfile.mkdtemp(dir=target.parent, prefix=f".{target.name}.old-"))
        os.rename(target, old / target.name)
        try:
            os.rename(staging, target)
        except OSError:
            os.rename(old / target.name, target)
            raise
        finally:
            shutil.rmtree(old, ignore_errors=True)

    @staticmethod
    def _remove(created: list[Path]) -> None:
        for folder in reversed(created):
            with contextlib.suppress(OSError):
                folder.rmdir()
