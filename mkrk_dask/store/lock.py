"""One writer per store, or per fit in a store: lock files beside the store.

Two processes given the same new ``--store`` at once would otherwise both build it (the
second "resuming" the first's build) and delete each other's checkpoints; two fits with the
same settings on one complete store would commit and delete each other's loop checkpoints.
A lock is a small file beside the store, ``<store>.mkrk-lock`` for its build and
``<store>.mkrk-lock-fit_<key>`` for the loop checkpoint of the fit ``key``, created atomically
on local disk (``O_EXCL``; on an object store, written and read back: best effort, as object
stores have no exclusive create that fsspec offers everywhere). It names its holder (host,
process, start), so the second writer fails at once with one line saying who holds it; a lock
whose process is gone (same host) is stale and taken over. A build lock is released when the
store is marked complete, a fit's when its loop ends (or stops with an error), and both at
the holder's exit.
"""

from __future__ import annotations

import atexit
import json
import os
import socket
import time
import uuid
from typing import Any

from ..exceptions import StoreError

__all__ = ["StoreBusyError", "acquire_build_lock", "release_build_lock", "acquire_fit_lock",
           "release_fit_lock"]

_SUFFIX = ".mkrk-lock"
#: locks this process holds: lock file path -> (fs, token)
_HELD: dict[str, tuple[Any, str]] = {}


class StoreBusyError(StoreError):
    """Another process is building the store, or running the same fit on it, at this moment."""


def _group_fs(group: Any) -> tuple[Any, str, bool]:
    """The filesystem of a group's store, the store's root in it, and whether it is local."""
    store = group.store
    fs = getattr(store, "fs", None)
    if fs is None:  # a LocalStore
        import fsspec

        return fsspec.filesystem("file"), os.path.abspath(str(store.root)), True
    return _synchronous(fs), str(store.path).rstrip("/"), False


def _synchronous(fs: Any) -> Any:
    """A blocking twin of a Zarr store's filesystem (Zarr opens them asynchronous)."""
    if getattr(fs, "sync_fs", None) is not None:  # fsspec's wrapper of a blocking one
        return fs.sync_fs
    if getattr(fs, "asynchronous", False):
        return type(fs)(**{**fs.storage_options, "asynchronous": False})
    return fs


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _read(fs: Any, path: str) -> dict | None:
    try:
        return json.loads(fs.cat_file(path))
    except FileNotFoundError:
        return None
    except ValueError:  # half-written by a holder killed at that moment: stale
        return {}


def _acquire(fs: Any, path: str, local: bool, busy: str) -> None:
    """Take the lock file ``path`` (again, if this process holds it); ``busy`` says what the
    holder does, for the one-line error."""
    if path in _HELD:
        return
    token = uuid.uuid4().hex
    record = {"host": socket.gethostname(), "pid": os.getpid(), "token": token,
              "since": time.strftime("%Y-%m-%d %H:%M:%S")}
    data = json.dumps(record).encode()
    for _ in range(3):
        if _create(fs, path, local, data):
            break
        holder = _read(fs, path)
        if holder is None:
            continue  # released meanwhile
        stale = (not holder or (holder.get("host") == record["host"]
                                and (holder.get("pid") == record["pid"]
                                     or not _alive(int(holder.get("pid", 0))))))
        if not stale:
            raise StoreBusyError(
                f"another process (pid {holder.get('pid')} on {holder.get('host')}, since "
                f"{holder.get('since')}) {busy} at this moment; run again once it has "
                f"finished, or choose another store. If no such process runs, delete {path}")
        fs.rm_file(path)
    else:
        raise StoreBusyError(f"could not take the lock {path}")
    _HELD[path] = (fs, token)


def _create(fs: Any, path: str, local: bool, data: bytes) -> bool:
    """Create the lock file if there is none; True if this call created it."""
    if local:
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        try:
            handle = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            return False
        with os.fdopen(handle, "wb") as file:
            file.write(data)
        return True
    if fs.exists(path):
        return False
    fs.pipe_file(path, data)
    return _read(fs, path) == json.loads(data)  # a concurrent writer's record: not ours


def _release(path: str) -> None:
    held = _HELD.pop(path, None)
    if held is None:
        return
    fs, token = held
    try:
        if (_read(fs, path) or {}).get("token") == token:
            fs.rm_file(path)
    except OSError:
        pass


def _build_lock_path(group_or_location: Any) -> tuple[Any, str, bool]:
    if hasattr(group_or_location, "store"):
        fs, root, local = _group_fs(group_or_location)
    else:
        fs, root = group_or_location.fs
        local = group_or_location.is_local
        root = os.path.abspath(root) if local else root
    return fs, root.rstrip("/") + _SUFFIX, local


def acquire_build_lock(location: Any) -> None:
    """Take the build lock of the store at ``location`` (again, if this process holds it).

    Raises
    ------
    StoreBusyError
        One line naming the process that builds the store.
    """
    fs, path, local = _build_lock_path(location)
    _acquire(fs, path, local, f"is building the store {location}")


def release_build_lock(group_or_location: Any) -> None:
    """Release the build lock this process holds on a store (given as its group or location)."""
    _release(_build_lock_path(group_or_location)[1])


def _fit_lock_path(root: str, key: str) -> str:
    return f"{root}{_SUFFIX}-fit_{key}"


def acquire_fit_lock(group: Any, key: str) -> None:
    """Take the lock of the fit ``key``'s loop checkpoint in the store ``group``.

    Raises
    ------
    StoreBusyError
        One line naming the process that runs the same fit on the store.
    """
    fs, root, local = _group_fs(group)
    _acquire(fs, _fit_lock_path(root, key), local,
             f"runs a fit with the same settings on the store {root}")


def release_fit_lock(group: Any, key: str) -> None:
    _release(_fit_lock_path(_group_fs(group)[1], key))


@atexit.register
def _release_all() -> None:
    for path in list(_HELD):
        _release(path)
