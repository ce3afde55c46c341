"""Checkpoints in a store, so that an interrupted build or fit continues where it stopped.

- :class:`PassCheckpoint`: the progress of one pass of a build whose results are combined in
  task order (:func:`mkrk_dask.passes.run_pass` with ``ordered=True``): how many tasks are
  done, and the running sums up to them. Resuming from it gives the same sums, to the bit, as
  an uninterrupted pass (the same additions in the same order).
- :class:`LoopCheckpoint`: the state of the alternating loop after an iteration (weights, Y,
  the eigensolver's warm start, the objective history), so that the iterations already done are
  not run again and the resumed fit ends with the same weights and labels.

Arrays are written before the attribute that refers to them, and the attribute write is the
commit: a checkpoint interrupted halfway is the previous one.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np

from .lock import acquire_fit_lock, release_fit_lock
from .zarr_store import create_data_array, read_checked

__all__ = ["PassCheckpoint", "LoopCheckpoint"]

#: bytes per second a checkpoint may cost, at most: state is saved when the time since the
#: last save exceeds its size over this (and 2 s). A Nystrom Gram matrix of R = 2,048 (32 MiB)
#: took 0.12 s to save on local disk, client CPU that a local cluster's workers share: so
#: every 6.4 s, about 2% of a core (at 20 MiB/s, 6%)
_SAVE_RATE = 5 * 2**20
#: sums up to this size are saved after every task
_SMALL = 2**20
#: the loop's state is saved after its first iteration, then after the first iteration that
#: ends this many seconds after the last save: short iterations (SimpleMKKM's, a fraction of a
#: second) spend no more on saving than on working, and a resumed fit repeats at most this
_LOOP_SAVE_INTERVAL = 2.0


def _save_arrays(group: Any, prefix: str, arrays: dict[str, np.ndarray]) -> None:
    for name, value in arrays.items():
        value = np.ascontiguousarray(value, dtype=np.float64)
        array = create_data_array(group, f"{prefix}{name}", shape=value.shape,
                                  chunks=value.shape or (1,), dtype="float64", overwrite=True)
        array[...] = value


def _load_arrays(group: Any, prefix: str, names: list[str]) -> dict[str, np.ndarray]:
    return {name: read_checked(group[f"{prefix}{name}"], (Ellipsis,)) for name in names}


def _delete_arrays(group: Any, prefix: str, names: list[str]) -> None:
    for name in names:
        if f"{prefix}{name}" in group:
            del group[f"{prefix}{name}"]


def _commit(group: Any, base: str, arrays: dict[str, np.ndarray], record: dict[str, Any],
            previous: dict[str, Any] | None, write: Callable[[dict | None], None]) -> None:
    """Write ``arrays`` under a new generation's names, ``write`` the record pointing at them
    (the commit), then delete the previous generation: a process killed at any moment leaves
    the last committed checkpoint whole."""
    generation = 1 + (previous or {}).get("generation", 0)
    _save_arrays(group, f"{base}{generation}_", arrays)
    write({**record, "arrays": sorted(arrays), "generation": generation})
    if previous:
        _delete_arrays(group, f"{base}{previous['generation']}_", previous["arrays"])


def _drop(group: Any, base: str, previous: dict[str, Any] | None,
          write: Callable[[dict | None], None]) -> None:
    write(None)
    if previous:
        _delete_arrays(group, f"{base}{previous['generation']}_", previous["arrays"])


class PassCheckpoint:
    """Progress of the pass ``name`` of a build, kept in ``group``.

    Call :meth:`load` before the pass (``(done, sums)`` or None) and :meth:`save` as results
    are combined; it writes at most every few seconds (more rarely for large sums) unless
    forced. :meth:`clear` once the pass's results are stored for good.
    """

    def __init__(self, group: Any, name: str):
        self.group = group
        self.name = name
        self._prefix = f"progress_{name}_"
        self._last = time.perf_counter()

    def _record(self) -> dict[str, Any] | None:
        return self.group.attrs.get("progress", {}).get(self.name)

    def _write(self, record: dict | None) -> None:
        table = dict(self.group.attrs.get("progress", {}))
        table.pop(self.name, None)
        if record is not None:
            table[self.name] = record
        self.group.attrs.update({"progress": table})

    def load(self) -> tuple[int, dict[str, np.ndarray]] | None:
        record = self._record()
        if not record:
            return None
        arrays = _load_arrays(self.group, f"{self._prefix}{record['generation']}_",
                              record["arrays"])
        return int(record["done"]), arrays

    def save(self, done: int, sums: dict[str, np.ndarray], *, force: bool = False) -> bool:
        nbytes = sum(np.asarray(v).nbytes for v in sums.values())
        now = time.perf_counter()
        # Small sums (the blockwise build's m x m) are saved after every task; large ones
        # (the Nystrom Gram matrix) as often as their size allows.
        if (not force and nbytes > _SMALL and now - self._last < max(2.0, nbytes / _SAVE_RATE)):
            return False
        _commit(self.group, self._prefix, sums, {"done": int(done)}, self._record(),
                self._write)
        self._last = time.perf_counter()
        return True

    def clear(self) -> None:
        _drop(self.group, self._prefix, self._record(), self._write)


class LoopCheckpoint:
    """The alternating loop's state after each iteration, in ``group``'s arrays ``fit_<key>_*``.

    ``key`` identifies the fit (its settings: lambda, measure, tolerance, method, ...), so a
    fit with other settings never resumes from it. The record that points at the current
    arrays is the attribute of its own small array, so that fits with other settings on the
    same store never rewrite each other's records; a fit holds the lock of its key from its
    first load or save until :meth:`release` (another process running the same fit on the
    store fails with one line: see :mod:`mkrk_dask.store.lock`).
    """

    _SCALARS = ("iteration", "certified", "converged")

    def __init__(self, group: Any, key: str):
        self.group = group
        self.key = key
        self._prefix = f"fit_{key}_"
        self._holder = f"fit_{key}_record"
        self._last: float | None = None
        self._locked = False

    def _record(self) -> dict[str, Any] | None:
        if not self._locked:  # once per fit: the lock file is on the store's filesystem
            acquire_fit_lock(self.group, self.key)
            self._locked = True
        if self._holder not in self.group:
            return None
        return self.group[self._holder].attrs.get("state") or None

    def _write(self, record: dict | None) -> None:
        if record is None:  # forgotten: the holder goes with its record
            if self._holder in self.group:
                del self.group[self._holder]
            return
        if self._holder not in self.group:
            self.group.create_array(self._holder, shape=(1,), dtype="u1")
        self.group[self._holder].attrs.update({"state": record})

    def load(self) -> dict[str, Any] | None:
        record = self._record()
        if not record:
            return None
        try:
            state = _load_arrays(self.group, f"{self._prefix}{record['generation']}_",
                                 record["arrays"])
        except KeyError:
            # arrays deleted under the record (by an older version's concurrent fit): the
            # iterations are run again, nothing else depends on them
            warnings.warn(f"the fit state saved in the store under {self.key!r} is incomplete; "
                          "the fit starts afresh", RuntimeWarning, stacklevel=2)
            return None
        state.update({k: record[k] for k in self._SCALARS})
        state["basis_kind"] = record["basis_kind"]
        return state

    def save(self, state: dict[str, Any], *, force: bool = False) -> bool:
        """Save the state after an iteration (see ``_LOOP_SAVE_INTERVAL``); True if saved."""
        now = time.perf_counter()
        if not force and self._last is not None and now - self._last < _LOOP_SAVE_INTERVAL:
            return False
        arrays = {k: v for k, v in state.items()
                  if k not in self._SCALARS and k != "basis_kind" and v is not None}
        _commit(self.group, self._prefix, arrays,
                {"basis_kind": state["basis_kind"], **{k: state[k] for k in self._SCALARS}},
                self._record(), self._write)
        self._last = time.perf_counter()
        return True

    def clear(self) -> None:
        """Forget the state (the fit finished: a new run starts afresh)."""
        _drop(self.group, self._prefix, self._record(), self._write)

    def release(self) -> None:
        """Release the lock of this fit's state (the loop ended, or stopped with an error)."""
        if self._locked:
            release_fit_lock(self.group, self.key)
            self._locked = False
