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
from typing import Any

import numpy as np

from .store import create_data_array, read_checked

__all__ = ["PassCheckpoint", "LoopCheckpoint"]

#: bytes per second a checkpoint may cost, at most: state is saved when the time since the
#: last save exceeds its size over this (and 2 s). A Nystrom Gram matrix of R = 2,048 (32 MiB)
#: took 0.12 s to save on local disk, client CPU that a local cluster's workers share: so
#: every 6.4 s, about 2% of a core (at 20 MiB/s, 6%)
_SAVE_RATE = 5 * 2**20
#: sums up to this size are saved after every task
_SMALL = 2**20


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


def _commit(group: Any, attr: str, key: str, base: str, arrays: dict[str, np.ndarray],
            record: dict[str, Any]) -> None:
    """Write ``arrays`` under a new generation's names, point ``attrs[attr][key]`` at them
    (the commit), then delete the previous generation: a process killed at any moment leaves
    the last committed checkpoint whole."""
    table = dict(group.attrs.get(attr, {}))
    previous = table.get(key)
    generation = 1 + (previous or {}).get("generation", 0)
    _save_arrays(group, f"{base}{generation}_", arrays)
    table[key] = {**record, "arrays": sorted(arrays), "generation": generation}
    group.attrs.update({attr: table})
    if previous:
        _delete_arrays(group, f"{base}{previous['generation']}_", previous["arrays"])


def _drop(group: Any, attr: str, key: str, base: str) -> None:
    table = dict(group.attrs.get(attr, {}))
    previous = table.pop(key, None)
    group.attrs.update({attr: table})
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

    def load(self) -> tuple[int, dict[str, np.ndarray]] | None:
        record = self.group.attrs.get("progress", {}).get(self.name)
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
        _commit(self.group, "progress", self.name, self._prefix, sums, {"done": int(done)})
        self._last = time.perf_counter()
        return True

    def clear(self) -> None:
        _drop(self.group, "progress", self.name, self._prefix)


class LoopCheckpoint:
    """The alternating loop's state after each iteration, under ``fits/<key>`` in ``group``.

    ``key`` identifies the fit (its settings: lambda, measure, tolerance, method, ...), so a
    fit with other settings never resumes from it.
    """

    _SCALARS = ("iteration", "certified", "converged")

    def __init__(self, group: Any, key: str):
        self.group = group
        self.key = key
        self._prefix = f"fit_{key}_"

    def load(self) -> dict[str, Any] | None:
        record = self.group.attrs.get("fits", {}).get(self.key)
        if not record:
            return None
        state = _load_arrays(self.group, f"{self._prefix}{record['generation']}_",
                             record["arrays"])
        state.update({k: record[k] for k in self._SCALARS})
        state["basis_kind"] = record["basis_kind"]
        return state

    def save(self, state: dict[str, Any]) -> None:
        arrays = {k: v for k, v in state.items()
                  if k not in self._SCALARS and k != "basis_kind" and v is not None}
        _commit(self.group, "fits", self.key, self._prefix, arrays,
                {"basis_kind": state["basis_kind"], **{k: state[k] for k in self._SCALARS}})

    def clear(self) -> None:
        """Forget the state (the fit finished: a new run starts afresh)."""
        _drop(self.group, "fits", self.key, self._prefix)
