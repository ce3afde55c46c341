"""Zarr stores of the scaled backends: layout metadata, data fingerprints, completion marker.

A store is a Zarr (v3) group whose attributes say who wrote it and from what::

    {"format": "mkrk-dask", "format_version": FORMAT_VERSION, "kind": "kernels",
     "complete": False, ...metadata}

The life of a store:

1. :func:`create_store` writes the attributes with ``complete: False``;
2. the backend writes its arrays (on the workers);
3. :func:`mark_complete` sets ``complete: True`` LAST, after every array is flushed.

:func:`open_complete_store` reopens a store only when it is an mkrk-dask store of the right
kind and format version, is complete, and every expected metadata key (kernel specifications,
data fingerprint, n, chunking, ...) matches; otherwise it raises :class:`StoreError` saying
which check failed. A store interrupted in step 2 therefore can never be mistaken for a
finished one.

Small results computed later from a complete store (e.g. the kernels' Gram matrix and traces)
are added with :func:`save_result` and read back with :func:`load_result`; each one has its own
completion flag, written after its array.

Stores are paths on a filesystem every worker can see (a local disk for a local cluster, a
shared filesystem for a real one).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp
import zarr

from .exceptions import StoreError

__all__ = [
    "FORMAT_NAME",
    "FORMAT_VERSION",
    "StoreError",
    "data_fingerprint",
    "create_store",
    "open_complete_store",
    "mark_complete",
    "save_result",
    "load_result",
    "json_normalize",
]

FORMAT_NAME = "mkrk-dask"
FORMAT_VERSION = 1

#: bytes hashed per slab of a dense view (bounds the memory of fingerprinting)
_HASH_SLAB_BYTES = 64 * 2**20



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


# -- fingerprints ------------------------------------------------------------------------------


def _hash_dense_rows(digest: Any, X: Any) -> None:
    """Feed the C-order bytes of ``X`` row slab by row slab (numpy, dask, zarr, ...).

    Bytes are fed in row order whatever the input's chunking, so the same values give the same
    digest whether they come as a numpy array, a dask array (one slab computed at a time) or a
    Zarr array (one slab read at a time).
    """
    n = int(X.shape[0])
    row_bytes = max(1, int(np.prod(X.shape[1:], dtype=np.int64)) * np.dtype(X.dtype).itemsize)
    step = max(1, _HASH_SLAB_BYTES // row_bytes)
    for start in range(0, n, step):
        slab = X[start:start + step]
        if hasattr(slab, "compute"):  # dask
            slab = slab.compute()
        digest.update(np.ascontiguousarray(np.asarray(slab)).tobytes())


def data_fingerprint(views: list) -> str:
    """SHA-256 of the shapes, dtypes and every byte of the input views.

    Parameters
    ----------
    views : list
        Each a numpy array, a scipy sparse matrix, a dask array or a Zarr array (any array with
        ``shape``, ``dtype`` and row slicing). Dense inputs are hashed row slab by row slab
        (64 MiB at a time; a dask array is computed one slab at a time, i.e. a full pass over
        its data), so a dense view gives the same fingerprint in all these containers. Sparse
        matrices are hashed in canonical CSR form (indptr, indices, data), so a sparse matrix
        and its dense copy have different fingerprints.

    Returns
    -------
    str
        ``"sha256:<hex>"``; deterministic across processes and machines (little-endian bytes).
    """
    digest = hashlib.sha256()
    digest.update(f"{FORMAT_NAME}-fingerprint-v1;views={len(views)};".encode())
    for view in views:
        dtype = np.dtype(view.dtype)
        if dtype.byteorder == ">":
            raise ValueError("big-endian inputs are not supported; convert with .astype('<f8')")
        if sp.issparse(view):
            csr = sp.csr_matrix(view, copy=True)
            csr.sum_duplicates()
            csr.sort_indices()
            digest.update(f"sparse;{csr.shape};{csr.dtype.str};".encode())
            for part in (csr.indptr.astype(np.int64), csr.indices.astype(np.int64), csr.data):
                digest.update(np.ascontiguousarray(part).tobytes())
        else:
            digest.update(f"dense;{tuple(int(s) for s in view.shape)};{dtype.str};".encode())
            _hash_dense_rows(digest, view)
    return "sha256:" + digest.hexdigest()


# -- the store life cycle ----------------------------------------------------------------------


def _is_empty_dir(path: Path) -> bool:
    return path.is_dir() and not any(path.iterdir())


def _looks_like_zarr(path: Path) -> bool:
    return (path / "zarr.json").is_file() or (path / ".zgroup").is_file()


def create_store(path: str | os.PathLike, *, kind: str, metadata: Mapping[str, Any],
                 overwrite: bool = False) -> zarr.Group:
    """Create a new, empty, not-yet-complete store at ``path``.

    Parameters
    ----------
    path : str or path-like
        A directory on a filesystem every worker can see.
    kind : str
        What the store holds (``"kernels"``, ``"nystrom"``, ...).
    metadata : mapping
        JSON-serialisable description of the contents (kernel specifications, n, chunking,
        data fingerprint, ...); :func:`open_complete_store` compares it on reopening.
    overwrite : bool
        Replace an existing store at ``path``. Only a Zarr store (ours or not) or an empty
        directory is ever deleted; any other non-empty path is refused, so a typo cannot wipe
        unrelated files.

    Raises
    ------
    StoreError
        ``path`` exists and is not empty, and ``overwrite`` is false (or it is not a Zarr store).
    """
    path = Path(path)
    reserved = {"format", "format_version", "kind", "complete"} & set(metadata)
    if reserved:
        raise ValueError(f"metadata may not set the reserved keys {sorted(reserved)}")
    if path.exists() and not _is_empty_dir(path):
        if not overwrite:
            raise StoreError(f"{path} already exists and is not empty; pass overwrite=True to "
                             "replace it, or choose another path")
        if not (path.is_dir() and _looks_like_zarr(path)):
            raise StoreError(f"{path} exists and is not a Zarr store; refusing to delete it "
                             "even with overwrite=True")
        shutil.rmtree(path)
    path.mkdir(parents=True, exist_ok=True)
    group = zarr.open_group(str(path), mode="w")
    attrs = {"format": FORMAT_NAME, "format_version": FORMAT_VERSION, "kind": kind,
             "complete": False}
    attrs.update(json_normalize(dict(metadata)))
    group.attrs.update(attrs)
    return group


def open_complete_store(path: str | os.PathLike, *, kind: str,
                        expected: Mapping[str, Any]) -> zarr.Group | None:
    """Reopen a complete store whose metadata matches ``expected``.

    Returns
    -------
    zarr.Group or None
        The group (opened read-write, so that results can be added), or None when ``path``
        does not exist or is an empty directory (nothing to reuse).

    Raises
    ------
    StoreError
        Naming the problem: not an mkrk-dask store (written by something else), a store of
        another kind or format version, a half-written store, or a metadata key that differs
        (with the stored and the expected value).
    """
    path = Path(path)
    if not path.exists() or _is_empty_dir(path):
        return None
    if not path.is_dir() or not _looks_like_zarr(path):
        raise StoreError(f"{path} exists but is not a Zarr store (no zarr.json); it was not "
                         "written by mkrk-dask. Choose another path.")
    try:
        group = zarr.open_group(str(path), mode="r+")
    except Exception as err:  # a zarr.json of an array, a corrupt file, ...
        raise StoreError(f"{path} cannot be opened as a Zarr group ({err}); it was not "
                         "written by mkrk-dask. Choose another path.") from None
    attrs = group.attrs.asdict()
    if attrs.get("format") != FORMAT_NAME:
        raise StoreError(f"{path} is a Zarr store not written by mkrk-dask (no "
                         f"format={FORMAT_NAME!r} attribute); refusing to use it. Choose "
                         "another path, or delete it.")
    if attrs.get("format_version") != FORMAT_VERSION:
        raise StoreError(f"{path} has store format version {attrs.get('format_version')!r}, "
                         f"this mkrk-dask reads version {FORMAT_VERSION}; rebuild it "
                         "(delete it or pass overwrite=True)")
    if attrs.get("kind") != kind:
        raise StoreError(f"{path} is an mkrk-dask store of kind {attrs.get('kind')!r}, not "
                         f"{kind!r}; choose another path")
    if attrs.get("complete") is not True:
        raise StoreError(f"{path} is incomplete: it was never marked complete, so its build "
                         "was probably interrupted. Delete it, or pass overwrite=True to "
                         "rebuild it.")
    for key, value in json_normalize(dict(expected)).items():
        if key not in attrs:
            raise StoreError(f"{path} was built without metadata key {key!r} (expected "
                             f"{value!r}); it does not match this request. Delete it, pass "
                             "overwrite=True, or choose another path.")
        if attrs[key] != value:
            raise StoreError(f"{path} was built for other inputs: {key!r} differs (stored "
                             f"{_short(attrs[key])}, expected {_short(value)}). Delete it, "
                             "pass overwrite=True, or choose another path.")
    return group


def _short(value: Any, limit: int = 300) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + "...]"


def mark_complete(group: zarr.Group) -> None:
    """Write the completion marker. Call it LAST, once every array has been written.

    Zarr writes each chunk synchronously to the store (and the backends wait for every writing
    task before calling this), so when ``complete`` becomes true every array is on disk.
    """
    group.attrs.update({"complete": True})


def save_result(group: zarr.Group, name: str, value: np.ndarray) -> None:
    """Add a small array to a store, then flag it as written (``attrs["results"][name]``).

    Used for quantities computed from a complete store (Gram matrix, traces), so that reopening
    the store skips their pass; an interrupted write leaves no flag and is recomputed.
    """
    value = np.asarray(value)
    array = group.create_array(f"results_{name}", shape=value.shape, dtype=value.dtype,
                               chunks=value.shape or None, overwrite=True, compressors=None)
    array[...] = value
    results = dict(group.attrs.get("results", {}))
    results[name] = True
    group.attrs.update({"results": results})


def load_result(group: zarr.Group, name: str) -> np.ndarray | None:
    """An array saved by :func:`save_result`, or None if it was never (completely) written."""
    if not group.attrs.get("results", {}).get(name):
        return None
    return np.asarray(group[f"results_{name}"][...])
