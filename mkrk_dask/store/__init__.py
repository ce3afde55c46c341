"""The scaled backends' stores: Zarr groups at a local path or any fsspec URL.

- :mod:`~mkrk_dask.store.zarr_store`: a store's life cycle, integrity and results (the names
  this package exports, with :func:`~mkrk_dask.store.fingerprints.data_fingerprint`);
- :mod:`~mkrk_dask.store.fingerprints`: the fingerprint of the input data a store records;
- :mod:`~mkrk_dask.store.locations`: where a store lives, and the check that every worker sees
  it;
- :mod:`~mkrk_dask.store.lock`: one writer per store, or per fit in a store;
- :mod:`~mkrk_dask.store.chunk_digests`: a digest of every chunk, checked on reuse;
- :mod:`~mkrk_dask.store.checkpoints`: an interrupted build or fit continues where it stopped.

The names of :mod:`~mkrk_dask.store.zarr_store` (and the fingerprint) are imported on first
use (PEP 562), so that importing :mod:`~mkrk_dask.store.locations` alone (as the command line
does) loads no Zarr.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # what __getattr__ gives, for type checkers and the import-layer test
    from .fingerprints import data_fingerprint  # noqa: F401
    from .zarr_store import (  # noqa: F401
        FORMAT_NAME,
        FORMAT_VERSION,
        StoreError,
        StoreIntegrityError,
        StoreLocation,
        create_data_array,
        create_store,
        json_normalize,
        load_result,
        mark_complete,
        open_complete_store,
        open_store,
        read_checked,
        save_result,
        verify_chunks,
        verify_store,
    )

__all__ = [
    "FORMAT_NAME",
    "FORMAT_VERSION",
    "StoreError",
    "StoreIntegrityError",
    "StoreLocation",
    "data_fingerprint",
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


def __getattr__(name: str) -> Any:
    if name not in __all__:
        raise AttributeError(f"module 'mkrk_dask.store' has no attribute {name!r}")
    module = ".fingerprints" if name == "data_fingerprint" else ".zarr_store"
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
