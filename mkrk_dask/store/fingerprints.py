"""The fingerprint of a fit's input data, which a store records and is reopened by.

A SHA-256 over the views' shapes and dtypes and every byte of their values. A dense view is
cut into slabs of whole rows (:data:`SLAB_BYTES` each, so the cut depends on the row size
only) and each slab hashed on its own; the fingerprint hashes those digests in row order.
The same values thus give the same fingerprint as a numpy, dask or Zarr array, and the slabs
of a lazy view are hashed where its rows are: on the current client's workers, in parallel,
as every pass over the rows (a slab lost with a worker is hashed again), instead of pulling
the whole data set through the client.
"""

from __future__ import annotations

import hashlib
from typing import Any

import numpy as np
import scipy.sparse as sp

from ..passes import RowSource, client_threads, raw_rows, row_bounds, run_pass

__all__ = ["data_fingerprint", "SLAB_BYTES"]

#: bytes of a dense view hashed per slab (bounds a slab task's memory)
SLAB_BYTES = 64 * 2**20
#: the scheme's name inside the hash: a store of another scheme does not match
_SCHEME = "mkrk-dask-fingerprint-v2"


def _slab_bounds(X: Any) -> list[tuple[int, int]]:
    row_bytes = max(1, int(np.prod(X.shape[1:], dtype=np.int64)) * np.dtype(X.dtype).itemsize)
    return row_bounds(int(X.shape[0]), max(1, SLAB_BYTES // row_bytes))


def _slab_digest(rows: Any) -> bytes:
    """SHA-256 of the C-order bytes of a slab of rows (numpy, or anything ``np.asarray``
    reads)."""
    return hashlib.sha256(np.ascontiguousarray(np.asarray(rows)).tobytes()).digest()


def _slab_task(source: Any, start: Any, stop: Any) -> bytes:
    """On a worker: the digest of the rows a :meth:`RowSource.block` names, as stored."""
    return _slab_digest(raw_rows(source, start, stop))


def _slab_digests(X: Any, client: Any, index: int) -> list[bytes]:
    bounds = _slab_bounds(X)
    lazy = client is not None and (hasattr(X, "dask") or hasattr(X, "oindex"))
    if not lazy:
        return [_slab_digest(raw_rows(X, a, b)) for a, b in bounds]
    digests: list[bytes] = [b""] * len(bounds)
    source = RowSource(client, X, view=index, check_finite=False)

    def submit(i: int) -> Any:
        block = source.block(*bounds[i])[:3]
        return client.submit(_slab_task, *block, pure=False)

    def combine(i: int, value: bytes) -> None:
        digests[i] = value

    try:
        run_pass(client, len(bounds), submit, combine, label="data fingerprint",
                 max_in_flight=2 * client_threads(client))
    finally:
        source.release()
    return digests


def data_fingerprint(views: list, client: Any = None) -> str:
    """SHA-256 of the shapes, dtypes and every byte of the input views.

    Parameters
    ----------
    views : list
        Each a numpy array, a scipy sparse matrix, a dask array or a Zarr array (any array
        with ``shape``, ``dtype`` and row slicing). A dense view gives the same fingerprint
        in all these containers. Sparse matrices are hashed in canonical CSR form (indptr,
        indices, data), so a sparse matrix and its dense copy have different fingerprints.
    client : distributed.Client, optional
        Where given, the slabs of dask and Zarr views are read and hashed on its workers;
        otherwise here, one slab at a time.

    Returns
    -------
    str
        ``"sha256:<hex>"``; deterministic across processes and machines (little-endian
        bytes).
    """
    digest = hashlib.sha256()
    digest.update(f"{_SCHEME};views={len(views)};".encode())
    for index, view in enumerate(views):
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
            for slab in _slab_digests(view, client, index):
                digest.update(slab)
    return "sha256:" + digest.hexdigest()
