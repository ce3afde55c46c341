"""Chunk identity: a digest of every chunk of a store, keyed by its coordinates.

A chunk's CRC32C proves its bytes, not its place: two valid chunks swapped, a chunk copied in
from another build, or a chunk deleted from an array whose fill value is a plausible number
(a cached result) would all read back without an error. So when a store is marked complete
(and when a result is added later), the digest of every chunk of every array it keeps is
recorded under its coordinates in ``mkrk_chunk_digests.json``, whose own SHA-256 goes into
the store's attributes; :func:`verify_store` compares them on reuse.

A digest is the chunk's size and its CRC32C (the last four bytes the checksum codec wrote, so
that verifying reads 4 bytes per chunk, not the kernels) or, for an array written without
that codec, a BLAKE2b hash of its bytes. This is meant against accidents (damaged, misplaced,
stale, missing chunks), not against someone who can write the store: they could rewrite the
manifest and the attribute too.

Arrays that change after completion (the progress and loop checkpoints, scratch space) are
not recorded.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from typing import Any

from ..exceptions import StoreIntegrityError

__all__ = ["MANIFEST_KEY", "record_digests", "verify_store"]

MANIFEST_KEY = "mkrk_chunk_digests.json"
#: the attribute holding the manifest's SHA-256
_ATTR = "chunk_digests_sha256"
#: arrays rewritten after completion (checkpoints, scratch): never recorded
_MUTABLE_PREFIXES = ("progress_", "fit_", "scratch_")
#: chunk reads in flight at once (an object store answers them concurrently)
_CONCURRENCY = 64


def _sync(coroutine: Any) -> Any:
    from zarr.core.sync import sync

    return sync(coroutine)


def _has_crc_tail(array: Any) -> bool:
    from zarr.codecs import Crc32cCodec

    compressors = tuple(getattr(array, "compressors", ()) or ())
    return bool(compressors) and isinstance(compressors[-1], Crc32cCodec)


async def _digests(store: Any, name: str, crc_tail: bool) -> dict[str, str]:
    """``{"i/j/k": digest}`` of every chunk file of array ``name`` present in ``store``."""
    from zarr.abc.store import SuffixByteRequest
    from zarr.core.buffer import default_buffer_prototype

    prefix = f"{name}/c"  # then "/i/j/k", or nothing for a 0-d array
    keys = [key async for key in store.list_prefix(prefix)
            if key == prefix or key.startswith(prefix + "/")]
    limit = asyncio.Semaphore(_CONCURRENCY)
    prototype = default_buffer_prototype()

    async def one(key: str) -> tuple[str, str | None]:
        async with limit:
            if crc_tail:
                size = await store.getsize(key)
                tail = await store.get(key, prototype, SuffixByteRequest(4))
                value = None if tail is None else f"{size}:crc32c:{tail.to_bytes().hex()}"
            else:
                data = await store.get(key, prototype)
                value = None if data is None else (
                    f"{len(data)}:blake2b:"
                    + hashlib.blake2b(data.to_bytes(), digest_size=16).hexdigest())
            return key[len(prefix) + 1:], value

    found = await asyncio.gather(*(one(key) for key in keys))
    return {key: value for key, value in found if value is not None}


def _recorded_arrays(group: Any) -> list[str]:
    return sorted(name for name in group.array_keys()
                  if not name.startswith(_MUTABLE_PREFIXES))


def _expected_keys(array: Any) -> list[str]:
    import itertools

    grid = [range(-(-s // max(c, 1))) for s, c in zip(array.shape, array.chunks, strict=True)]
    return ["/".join(map(str, key)) for key in itertools.product(*grid)]


def _read_manifest(group: Any) -> dict[str, dict[str, str]] | None:
    """The manifest, None for a store recorded without one; checked against its SHA-256."""
    from zarr.core.buffer import default_buffer_prototype

    expected = group.attrs.get(_ATTR)
    if expected is None:
        return None
    raw = _sync(group.store.get(MANIFEST_KEY, default_buffer_prototype()))
    where = _where(group)
    if raw is None:
        raise StoreIntegrityError(f"store {where}: its chunk manifest {MANIFEST_KEY} is "
                                  "missing; the store was damaged after it was built. Rebuild "
                                  "it (delete it, or pass overwrite=True)")
    data = raw.to_bytes()
    if hashlib.sha256(data).hexdigest() != expected:
        raise StoreIntegrityError(f"store {where}: its chunk manifest {MANIFEST_KEY} does not "
                                  "match the store's attributes; the store was damaged or "
                                  "mixed with another. Rebuild it (delete it, or pass "
                                  "overwrite=True)")
    return json.loads(data)


def _write_manifest(group: Any, manifest: dict[str, dict[str, str]]) -> None:
    from zarr.core.buffer import default_buffer_prototype

    data = json.dumps(manifest, sort_keys=True, separators=(",", ":")).encode()
    buffer = default_buffer_prototype().buffer.from_bytes(data)
    _sync(group.store.set(MANIFEST_KEY, buffer))
    group.attrs.update({_ATTR: hashlib.sha256(data).hexdigest()})


def record_digests(group: Any, names: list[str] | None = None) -> None:
    """Record the digest of every chunk of ``names`` (default: every array the store keeps),
    adding to the manifest already there (if any: a store completed without one is left
    without). Call it after the arrays are written, before the
    flag that says they are (``complete``, a result's flag)."""
    manifest: dict | None = _read_manifest(group) if names is not None else {}
    if manifest is None:
        return  # a store completed without a manifest (an older build): nothing to add to
    for name in names if names is not None else _recorded_arrays(group):
        array = group[name]
        digests = _sync(_digests(group.store, _path(group, name), _has_crc_tail(array)))
        manifest[name] = digests
    _write_manifest(group, manifest)


def _path(group: Any, name: str) -> str:
    return f"{group.path}/{name}".lstrip("/")


def _where(group: Any) -> str:
    return str(group.store).removeprefix("file://").rstrip("/")


def verify_store(group: Any, names: list[str] | None = None) -> bool:
    """Every recorded chunk of ``names`` (default: all recorded) is present and is the chunk
    written there. Returns False for a store built without a manifest (nothing to compare).

    Raises
    ------
    StoreIntegrityError
        One line naming the store, the array and the first chunk that is missing, damaged (its
        size differs), or not the one recorded (moved, replaced or stale).
    """
    manifest = _read_manifest(group)
    if manifest is None:
        return False
    where = _where(group)
    for name in sorted(manifest) if names is None else names:
        recorded = manifest.get(name)
        if recorded is None or name not in group:
            raise StoreIntegrityError(f"store {where}: array {name!r} is missing (the chunk "
                                      "manifest records it). Rebuild the store")
        array = group[name]
        found = _sync(_digests(group.store, _path(group, name), _has_crc_tail(array)))
        expected = _expected_keys(array)
        missing = [key for key in expected if key in recorded and key not in found]
        if missing:
            raise StoreIntegrityError(
                f"store {where}: array {name!r} is missing chunk {_coords(missing[0])} "
                f"({len(missing)} of {len(expected)} chunks missing); the store was damaged "
                "after it was built. Rebuild it (delete it, or pass overwrite=True)")
        for key in sorted(set(recorded) | set(found)):
            if found.get(key) == recorded.get(key):
                continue
            size_then = str(recorded.get(key, "")).split(":")[0]
            size_now = str(found.get(key, "")).split(":")[0]
            why = (f"is damaged (its size is {size_now} bytes, {size_then} when built)"
                   if key in recorded and size_then != size_now else
                   "was not written there by this store's build" if key not in recorded else
                   "is not the chunk written there (moved, replaced or stale)")
            raise StoreIntegrityError(f"store {where}: array {name!r}, chunk {_coords(key)} "
                                      f"{why}. Rebuild the store (delete it, or pass "
                                      "overwrite=True)")
    return True


def _coords(key: str) -> tuple[int, ...]:
    return tuple(int(part) for part in key.split("/") if part)
