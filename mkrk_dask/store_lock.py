"""One builder per store: a lock beside the store while it is built (or its build resumed).

Two processes given the same new ``--store`` at once would otherwise both build it (the
second "resuming" the first's build) and delete each other's checkpoints. The lock is a small
file ``<store>.mkrk-lock`` beside the store, created atomically on local disk (``O_EXCL``; on
an object store, written and read back: best effort, as object stores have no exclusive
create that fsspec offers everywhere). It names its holder (host, process, start), so the
second builder fails at once with one line saying who builds the store; a lock whose process
is gone (same host) is stale and taken over. It is released when the store is marked complete,
and at the holder's exit.
"""

from __future__ import annotations

import atexit
import json
import os
import socket
import time
import uuid
from typing import Any

from .exceptions import StoreError

__all__ = ["StoreBusyError", "acquire_build_lock", "release_build_lock"]

_SUFFIX = ".mkrk-lock"
#: locks this process holds: store root -> (location, token)
_HELD: dict[str, tuple[Any, str]] = {}


class StoreBusyError(StoreError):
    """Another process is building the store at this moment."""


def _root(location: Any) -> str:
    return location.url if location.is_local else location.fs[1].rstrip("/")


def _root_of_group(group: Any) -> str:
    store = group.store
    root = getattr(store, "root", None)
    return str(root if root is not None else store.path).rstrip("/")


def _lock_path(location: Any) -> tuple[Any, str]:
    fs, path = location.fs
    return fs, path.rstrip("/") + _SUFFIX


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


def acquire_build_lock(location: Any) -> None:
    """Take the build lock of the store at ``location`` (again, if this process holds it).

    Raises
    ------
    StoreBusyError
        One line naming the process that builds the store.
    """
    root = _root(location)
    if root in _HELD:
        return
    fs, path = _lock_path(location)
    token = uuid.uuid4().hex
    record = {"host": socket.gethostname(), "pid": os.getpid(), "token": token,
              "since": time.strftime("%Y-%m-%d %H:%M:%S")}
    data = json.dumps(record).encode()
    for _ in range(3):
        if _create(location, fs, path, data):
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
                f"{holder.get('since')}) is building the store {location} at this moment; "
                "run again once it has finished (the store is then reused), or choose "
                f"another store. If no process builds it, delete {path}")
        fs.rm_file(path)
    else:
        raise StoreBusyError(f"could not take the build lock {path} of the store {location}")
    _HELD[root] = (location, token)


def _create(location: Any, fs: Any, path: str, data: bytes) -> bool:
    """Create the lock file if there is none; True if this call created it."""
    if location.is_local:
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


def release_build_lock(group_or_location: Any) -> None:
    """Release the lock this process holds on a store (given as its group or location)."""
    root = (_root_of_group(group_or_location) if hasattr(group_or_location, "store")
            else _root(group_or_location))
    held = _HELD.pop(root, None)
    if held is None:
        return
    location, token = held
    fs, path = _lock_path(location)
    try:
        if (_read(fs, path) or {}).get("token") == token:
            fs.rm_file(path)
    except OSError:
        pass


@atexit.register
def _release_all() -> None:
    for location, _ in list(_HELD.values()):
        release_build_lock(location)
