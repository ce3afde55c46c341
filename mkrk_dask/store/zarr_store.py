"""Zarr stores of the scaled backends: life cycle, integrity, results (the input
data's fingerprint: :mod:`~mkrk_dask.store.fingerprints`).

A store is a Zarr (v3) group, at a local path or any fsspec URL
(:class:`~mkrk_dask.store.locations.StoreLocation`), whose attributes say who wrote it and from
what::

    {"format": "mkrk-dask", "format_version": FORMAT_VERSION, "kind": "kernels",
     "complete": False, ...metadata}

The life of a store:

1. :func:`create_store` writes the attributes with ``complete: False``;
2. the backend writes its arrays (on the workers), recording its progress
   (:mod:`mkrk_dask.store.checkpoints`) so that an interrupted build continues where it stopped;
3. :func:`mark_complete` sets ``complete: True`` LAST, after every array is flushed.

:func:`open_store` reopens a store only when it is an mkrk-dask store of the right kind and
format version and every expected metadata key (kernel specifications, data fingerprint, n,
chunking, ...) matches; otherwise it raises :class:`StoreError` saying which check failed. A
store interrupted in step 2 is never mistaken for a finished one: it is resumed.

Integrity: every data array is written with a CRC32C checksum per chunk and NaN as its fill
value, and every chunk is written. A chunk that is damaged (truncated, altered) fails its
checksum; a chunk that is missing reads as NaN, and :func:`verify_chunks` finds it by listing
the store. Either way :class:`~mkrk_dask.exceptions.StoreIntegrityError` names the array and
the chunk: never zeros, never a reshape traceback.

Small results computed later from a complete store (e.g. the kernels' Gram matrix and traces)
are added with :func:`save_result` and read back with :func:`load_result`; each one has its own
completion flag, written after its array.
"""

from __future__ import annotations

import itertools
import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import zarr

from ..exceptions import StoreError, StoreIntegrityError
from .chunk_digests import record_digests
from .chunk_digests import verify_store as verify_digests
from .locations import StoreLocation
from .lock import acquire_build_lock, release_build_lock

__all__ = [
    "FORMAT_NAME",
    "FORMAT_VERSION",
    "StoreError",
    "StoreIntegrityError",
    "StoreLocation",
    "create_store",
    "open_store",
    "open_complete_store",
    "create_data_array",
    "verify_chunks",
    "verify_store",
    "read_checked",
    "mark_complete",
    "save_result",
    "load_result",
    "json_normalize",
]

FORMAT_NAME = "mkrk-dask"
FORMAT_VERSION = 1


def json_normalize(value: Any) -> Any:
    """``value`` as it reads back from JSON attributes (tuples -> lists, numpy -> Python).

    Expected and stored metadata are compared in this form, so that ``(1, 2)`` equals the
    ``[1, 2]`` a store returns. Floats round-trip exactly through JSON.
    """
    return json.loads(json.dumps(value, default=_json_default))


def _json_default(value: Any) -> Any:
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, Path):
        return str(value)
    raise TypeError(f"metadata value {value!r} of type {type(value).__name__} is not "
                    "JSON-serialisable")


# -- the store life cycle ----------------------------------------------------------------------


def _location(path: Any) -> StoreLocation:
    return StoreLocation.parse(path)


def create_store(path: str | os.PathLike | StoreLocation, *, kind: str,
                 metadata: Mapping[str, Any], overwrite: bool = False) -> zarr.Group:
    """Create a new, empty, not-yet-complete store at ``path``.

    Parameters
    ----------
    path : str, path-like or StoreLocation
        A directory every worker can see, or a URL (``s3://bucket/run.zarr``).
    kind : str
        What the store holds (``"kernels"``, ``"nystrom"``, ...).
    metadata : mapping
        JSON-serialisable description of the contents (kernel specifications, n, chunking,
        data fingerprint, ...); :func:`open_store` compares it on reopening.
    overwrite : bool
        Replace an existing store at ``path``. Only a Zarr store (ours or not) or an empty
        directory is ever deleted; any other non-empty path is refused, so a typo cannot wipe
        unrelated files.

    Raises
    ------
    StoreError
        ``path`` exists and is not empty, and ``overwrite`` is false (or it is not a Zarr store).
    """
    location = _location(path)
    reserved = {"format", "format_version", "kind", "complete"} & set(metadata)
    if reserved:
        raise ValueError(f"metadata may not set the reserved keys {sorted(reserved)}")
    location.check_bucket()
    location.check_writable()
    acquire_build_lock(location)  # before anything is deleted or written
    if not location.is_empty():
        if not overwrite:
            raise StoreError(f"{location} already exists and is not empty; pass overwrite=True "
                             "to replace it, or choose another path")
        if not (location.is_dir() and location.looks_like_zarr()):
            raise StoreError(f"{location} exists and is not a Zarr store; refusing to delete it "
                             "even with overwrite=True")
        location.remove()
    location.makedirs()
    group = location.open_group("w")
    attrs = {"format": FORMAT_NAME, "format_version": FORMAT_VERSION, "kind": kind,
             "complete": False}
    attrs.update(json_normalize(dict(metadata)))
    group.attrs.update(attrs)
    return group


def open_store(path: str | os.PathLike | StoreLocation, *, kind: str,
               expected: Mapping[str, Any]) -> tuple[zarr.Group | None, bool]:
    """Reopen the store at ``path`` if it matches ``expected``, complete or not.

    Returns
    -------
    group : zarr.Group or None
        Opened read-write; None when nothing is there (an empty directory counts as nothing).
    complete : bool
        False for a store whose build was interrupted: the caller resumes it.

    Raises
    ------
    StoreError
        Naming the problem: not an mkrk-dask store (written by something else), a store of
        another kind or format version, or a metadata key that differs (with the stored and
        the expected value).
    """
    location = _location(path)
    location.check_bucket()
    location.check_writable()  # a fit writes its checkpoints and results into the store
    if location.is_empty():
        return None, False
    if not location.is_dir() or not location.looks_like_zarr():
        raise StoreError(f"{location} exists but is not a Zarr store (no zarr.json); it was "
                         "not written by mkrk-dask. Choose another path.")
    try:
        group = location.open_group("r+")
    except Exception as err:  # a zarr.json of an array, a corrupt file, ...
        bad = _damaged_metadata(location) if isinstance(err, ValueError) else None
        if bad is not None:
            raise StoreError(f"store {location}: its metadata file {bad} cannot be read "
                             f"({' '.join(str(err).split())[:120]}); it is damaged. Delete "
                             "the store, or pass overwrite=True to rebuild it") from None
        raise StoreError(f"{location} cannot be opened as a Zarr group "
                         f"({' '.join(str(err).split())}); it was not written by mkrk-dask. "
                         "Choose another path.") from None
    attrs = group.attrs.asdict()
    if attrs.get("format") != FORMAT_NAME:
        raise StoreError(f"{location} is a Zarr store not written by mkrk-dask (no "
                         f"format={FORMAT_NAME!r} attribute); refusing to use it. Choose "
                         "another path, or delete it.")
    if attrs.get("format_version") != FORMAT_VERSION:
        raise StoreError(f"{location} has store format version "
                         f"{attrs.get('format_version')!r}, this mkrk-dask reads version "
                         f"{FORMAT_VERSION}; rebuild it (delete it or pass overwrite=True)")
    if attrs.get("kind") != kind:
        raise StoreError(f"{location} is an mkrk-dask store of kind {attrs.get('kind')!r}, "
                         f"not {kind!r}; choose another path")
    if attrs.get("complete") is not True:
        # being built by another process, or to be resumed here: one builder at a time
        acquire_build_lock(location)
        group = location.open_group("r+")  # as it is now: it may have been finished since
        attrs = group.attrs.asdict()
    for key, value in json_normalize(dict(expected)).items():
        if key not in attrs:
            raise StoreError(f"{location} was built without metadata key {key!r} (expected "
                             f"{_short(value)}); it does not match this request. Delete it, "
                             "pass overwrite=True, or choose another path.")
        if attrs[key] != value:
            raise StoreError(f"{location} was built for other inputs: {key!r} differs (stored "
                             f"{_short(attrs[key])}, expected {_short(value)}). Delete it, "
                             "pass overwrite=True, or choose another path.")
    return group, attrs.get("complete") is True


def open_complete_store(path: str | os.PathLike | StoreLocation, *, kind: str,
                        expected: Mapping[str, Any]) -> zarr.Group | None:
    """:func:`open_store` for callers that cannot resume: an incomplete store is refused."""
    group, complete = open_store(path, kind=kind, expected=expected)
    if group is not None and not complete:
        raise StoreError(f"{_location(path)} is incomplete: it was never marked complete, so "
                         "its build was probably interrupted. Delete it, or pass "
                         "overwrite=True to rebuild it.")
    return group


def _short(value: Any, limit: int = 300) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + "...]"


def mark_complete(group: zarr.Group) -> None:
    """Record every chunk's digest, then write the completion marker. Call it LAST, once
    every array has been written.

    Zarr writes each chunk synchronously to the store (and the backends wait for every writing
    task before calling this), so when ``complete`` becomes true every array is on disk, and
    :func:`verify_store` can tell on reuse whether each chunk is still the one written there.
    """
    record_digests(group)
    group.attrs.update({"complete": True})
    release_build_lock(group)


def verify_store(location: StoreLocation, group: zarr.Group, main: str) -> None:
    """On reuse: every recorded chunk of every array is present and in its place
    (:func:`mkrk_dask.store.chunk_digests.verify_store`); a store recorded without digests is
    checked for missing chunks of its ``main`` array only."""
    try:
        if not verify_digests(group) and main in group:
            verify_chunks(location, group, main)
    except StoreError:
        raise
    except (ValueError, RecursionError) as err:  # an array's zarr.json cannot be read
        bad = _damaged_metadata(location)
        if bad is None:
            raise
        raise StoreIntegrityError(
            f"store {location}: its metadata file {bad} cannot be read ("
            f"{' '.join(str(err).split())[:120]}); the store was damaged after it was built. "
            "Rebuild it (delete it, or pass overwrite=True)") from None


def _damaged_metadata(location: StoreLocation) -> str | None:
    """The first metadata file (``zarr.json``) of the store that is not valid JSON."""
    fs, path = location.fs
    for key in sorted(location.list_keys("")):
        if key.rsplit("/", 1)[-1] not in ("zarr.json", ".zarray", ".zattrs", ".zgroup"):
            continue
        try:
            json.loads(fs.cat_file(f"{path}/{key}"))
        except (ValueError, RecursionError):
            return key
    return None


# -- integrity ---------------------------------------------------------------------------------


def create_data_array(group: zarr.Group, name: str, *, shape: tuple[int, ...],
                      chunks: tuple[int, ...], dtype: Any, overwrite: bool = False) -> Any:
    """A data array whose every chunk is written, checksummed (CRC32C) and NaN-filled, so that
    a damaged chunk fails its checksum and a missing one reads as NaN, never as zeros."""
    from zarr.codecs import BytesCodec, Crc32cCodec

    fill = np.nan if np.issubdtype(np.dtype(dtype), np.floating) else 0
    return group.create_array(name, shape=shape, chunks=chunks, dtype=dtype,
                              serializer=BytesCodec(), compressors=[Crc32cCodec()],
                              fill_value=fill, overwrite=overwrite,
                              config={"write_empty_chunks": True})


def _chunk_keys(array: Any) -> list[tuple[int, ...]]:
    grid = [range(-(-s // c)) for s, c in zip(array.shape, array.chunks, strict=True)]
    return list(itertools.product(*grid))


def verify_chunks(location: StoreLocation, group: zarr.Group, name: str) -> None:
    """Every chunk of array ``name`` is in the store (a listing, no data read).

    Raises
    ------
    StoreIntegrityError
        Naming the array and the first missing chunk.
    """
    array = group[name]
    present = location.list_keys(f"{name}/c")
    missing = [key for key in _chunk_keys(array)
               if f"{name}/c/{'/'.join(map(str, key))}" not in present]
    if missing:
        raise StoreIntegrityError(
            f"store {location}: array {name!r} is missing chunk {missing[0]} ({len(missing)} of "
            f"{len(_chunk_keys(array))} chunks missing); the store was damaged after it was "
            "built. Rebuild it (delete it, or pass overwrite=True)")


def read_checked(array: Any, selection: tuple, *, dtype: Any = np.float64) -> np.ndarray:
    """``array[selection]`` as ``dtype``, or :class:`StoreIntegrityError` naming the array and
    the chunk when a chunk is damaged (checksum) or missing (NaN fill)."""
    try:
        block = np.asarray(array[selection], dtype=dtype)
    except ValueError as err:
        chunk = _first_bad_chunk(array, selection)
        where, name = _where(array)
        raise StoreIntegrityError(
            f"store {where}: array {name!r}, chunk {chunk} is damaged "
            f"({' '.join(str(err).split())[:120]}). Rebuild the store") from None
    if np.isnan(block).any():
        chunk = _chunk_of_nan(array, selection, block)
        where, name = _where(array)
        raise StoreIntegrityError(
            f"store {where}: array {name!r}, chunk {chunk} is missing (it reads as the fill "
            "value). Rebuild the store")
    return block


def _where(array: Any) -> tuple[str, str]:
    """The store and the name of an array (opened from its group, or on its own)."""
    root = str(array.store).removeprefix("file://").rstrip("/")
    if array.path:
        return root, array.path
    parent, _, name = root.rpartition("/")
    return parent, name


def _bounds(array: Any, selection: tuple) -> tuple[list[tuple[int, int]], list[bool]]:
    """``(start, stop)`` per dimension of a selection of slices and integers, and which
    dimensions the read keeps (slices)."""
    sel = tuple(s for s in selection if s is not Ellipsis)
    sel = sel + (slice(None),) * (array.ndim - len(sel))
    bounds = [s.indices(n)[:2] if isinstance(s, slice) else (int(s), int(s) + 1)
              for s, n in zip(sel, array.shape, strict=True)]
    return bounds, [isinstance(s, slice) for s in sel]


def _first_bad_chunk(array: Any, selection: tuple) -> tuple[int, ...] | str:
    """The first chunk of the selection that fails to decode (read one by one)."""
    bounds, _ = _bounds(array, selection)
    ranges = [range(a // c, -(-b // c)) for (a, b), c in zip(bounds, array.chunks, strict=True)]
    for key in itertools.product(*ranges):
        try:
            array[tuple(slice(k * c, (k + 1) * c) for k, c in zip(key, array.chunks,
                                                                  strict=True))]
        except ValueError:
            return key
    return "(unknown)"


def _chunk_of_nan(array: Any, selection: tuple, block: np.ndarray) -> tuple[int, ...]:
    """The chunk holding the first NaN of ``block`` (read from ``selection``)."""
    bounds, kept = _bounds(array, selection)
    index = iter(np.unravel_index(int(np.argmax(np.isnan(block))), block.shape))
    full = [a + int(next(index)) if keep else a for (a, _), keep in zip(bounds, kept,
                                                                        strict=True)]
    return tuple(int(i // c) for i, c in zip(full, array.chunks, strict=True))


# -- results -------------------------------------------------------------------------------------


def save_result(group: zarr.Group, name: str, value: np.ndarray) -> None:
    """Add a small array to a store, then flag it as written (``attrs["results"][name]``).

    Used for quantities computed from a complete store (Gram matrix, traces), so that reopening
    the store skips their pass; an interrupted write leaves no flag and is recomputed.
    """
    value = np.asarray(value)
    from zarr.codecs import BytesCodec, Crc32cCodec

    array = group.create_array(f"results_{name}", shape=value.shape, dtype=value.dtype,
                               chunks=value.shape or None, overwrite=True,
                               serializer=BytesCodec(), compressors=[Crc32cCodec()],
                               config={"write_empty_chunks": True})
    array[...] = value
    if group.attrs.get("complete") is True:  # else mark_complete records it
        record_digests(group, [f"results_{name}"])
    results = dict(group.attrs.get("results", {}))
    results[name] = True
    group.attrs.update({"results": results})


def load_result(group: zarr.Group, name: str) -> np.ndarray | None:
    """An array saved by :func:`save_result`, or None if it was never (completely) written."""
    if not group.attrs.get("results", {}).get(name):
        return None
    verify_digests(group, [f"results_{name}"])
    array = group[f"results_{name}"]
    try:
        return np.asarray(array[...])
    except ValueError as err:
        raise StoreIntegrityError(f"store {array.store}: result {name!r} is damaged "
                                  f"({' '.join(str(err).split())[:120]}). Rebuild the store"
                                  ) from None
