"""Where a store lives: a local path or any URL that Zarr and fsspec accept.

``s3://bucket/run.zarr`` (or ``gs://``, ``abfs://``, ``memory://`` for tests) is the way to run
on a cluster whose workers share no disk with the client: the client and every worker open the
same URL. Credentials and endpoints come from the usual environment variables (for S3:
``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``, ``AWS_ENDPOINT_URL``) or from
``storage_options``; they are never written into a store's metadata.

:func:`check_workers_see` makes sure of it before any work: the client writes a marker into
the store and every worker must read it back.
"""

from __future__ import annotations

import os
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..exceptions import StoreError
from ..secrets import mask_url

__all__ = ["StoreLocation", "check_workers_see", "check_workers_read", "nearest_existing"]


def nearest_existing(path: str | Path) -> Path:
    """``path`` itself if it exists, else its nearest existing parent (where its free disk
    space can be asked before it is created)."""
    path = Path(os.path.abspath(path))
    for candidate in (path, *path.parents):
        if candidate.exists():
            return candidate
    return Path("/")  # pragma: no cover


def _is_url(text: str) -> bool:
    return "://" in text and not text.startswith("file://")


@dataclass(frozen=True)
class StoreLocation:
    """A store's address: ``url`` (an absolute local path, or a URL) and the fsspec
    ``storage_options`` needed to open it. Picklable, so tasks can open it on the workers."""

    url: str
    storage_options: dict[str, Any] | None = None
    _fs: Any = field(default=None, compare=False, repr=False)

    @classmethod
    def parse(cls, store: Any, storage_options: dict[str, Any] | None = None) -> StoreLocation:
        """From a path, a URL or a :class:`StoreLocation`."""
        if isinstance(store, StoreLocation):
            return store
        if not isinstance(store, str | os.PathLike):
            raise TypeError(f"store must be a path or a URL, got {type(store).__name__}")
        text = os.fspath(store)
        if text.startswith("file://"):
            text = text[len("file://"):]
        if _is_url(text):
            _refuse_credentials(text)
            return cls(text.rstrip("/"), dict(storage_options or {}))
        if storage_options:
            raise ValueError("storage_options apply to URL stores (s3://..., gs://...), not "
                             f"to the local path {text!r}")
        return cls(str(Path(text).expanduser().resolve()), None)

    def __getstate__(self) -> dict:
        return {"url": self.url, "storage_options": self.storage_options, "_fs": None}

    def __setstate__(self, state: dict) -> None:
        for key, value in state.items():
            object.__setattr__(self, key, value)

    @property
    def is_local(self) -> bool:
        return not _is_url(self.url)

    @property
    def fs(self) -> Any:
        """The fsspec filesystem (cached) and the path within it: ``(fs, path)``."""
        if self._fs is None:
            import fsspec

            fs, path = fsspec.core.url_to_fs(self.url, **(self.storage_options or {}))
            object.__setattr__(self, "_fs", (fs, path))
        return self._fs

    def child(self, name: str) -> str:
        """The URL (or path) of ``name`` inside the store."""
        return f"{self.url}/{name}"

    def zarr_kwargs(self) -> dict[str, Any]:
        """Keyword arguments for ``zarr.open_group`` / ``zarr.open_array`` besides the
        store itself (fsspec options for URLs only; Zarr refuses them for local paths)."""
        return {} if self.is_local else {"storage_options": dict(self.storage_options or {})}

    def open_group(self, mode: str) -> Any:
        import zarr

        return zarr.open_group(self.url, mode=mode, **self.zarr_kwargs())

    def open_array(self, name: str, mode: str = "r") -> Any:
        import zarr

        return zarr.open_array(self.child(name), mode=mode, **self.zarr_kwargs())

    # -- file-system operations --------------------------------------------------------------

    def exists(self) -> bool:
        fs, path = self.fs
        return bool(fs.exists(path))

    def is_empty(self) -> bool:
        """True when nothing is there, or an empty directory."""
        fs, path = self.fs
        if not fs.exists(path):
            return True
        return fs.isdir(path) and not fs.ls(path, detail=False)

    def is_dir(self) -> bool:
        fs, path = self.fs
        return bool(fs.isdir(path))

    def looks_like_zarr(self) -> bool:
        fs, path = self.fs
        return bool(fs.exists(f"{path}/zarr.json") or fs.exists(f"{path}/.zgroup"))

    def makedirs(self) -> None:
        """Create the store's directory; an object store's bucket must exist already."""
        self.check_bucket()
        fs, path = self.fs
        fs.makedirs(path, exist_ok=True)

    def check_bucket(self, timeout: float = 10.0) -> None:
        """An object store (a filesystem of buckets: s3, gcs, azure) is reachable within
        ``timeout`` seconds and its bucket exists and may be read, else one line saying
        which, with no credentials in it. A bucket is never created: a typo in its name would
        otherwise create a new one. Nothing to check for local paths."""
        if self.is_local or getattr(self, "_bucket_checked", False):
            return
        fs, path = self.fs
        if not hasattr(fs, "split_path"):  # no buckets (memory://, ...)
            return
        bucket = path.split("/", 1)[0]
        probe = _bounded_twin(fs, self.storage_options, timeout)
        endpoint = _endpoint(fs)
        where = f"{self} (endpoint {mask_url(endpoint)})" if endpoint else str(self)
        try:
            info = probe.info(bucket)
        except FileNotFoundError:
            raise StoreError(f"the bucket {bucket!r} of {where} does not exist; mkrk never "
                             "creates a bucket (a typo would make a new one): create it "
                             "first, or correct the URL") from None
        except PermissionError:
            raise StoreError(f"access to the bucket {bucket!r} of {where} is denied; check "
                             "the credentials (AWS_ACCESS_KEY_ID, --storage-option key=...) "
                             "and the bucket's policy") from None
        except Exception as err:  # noqa: BLE001 - endpoint, network, region: the user's to fix
            why = _masked_error(err, self.storage_options)
            raise StoreError(f"the object store of {where} cannot be used: {why}. Check the "
                             "endpoint (AWS_ENDPOINT_URL, --storage-option endpoint_url=...), "
                             "the region and the network") from None
        if info.get("type") not in (None, "directory"):
            raise StoreError(f"{bucket!r} of {where} is not a bucket")
        object.__setattr__(self, "_bucket_checked", True)

    def check_writable(self) -> None:
        """A local store's path can take a store: no file where a folder must be, a file
        system that is not read-only; else one line saying which, before anything is written
        (the lock beside the store is the first write). Object stores are checked by
        :meth:`check_bucket`."""
        if not self.is_local:
            return
        path = Path(self.url)
        base = nearest_existing(path)
        if base != path and not base.is_dir():
            raise StoreError(f"cannot create the store {path}: {base} is a file, not a folder")
        if base == path and not base.is_dir():
            raise StoreError(f"the store {path} is a file, not a Zarr store (a folder); "
                             "choose another path")
        if not os.access(base, os.W_OK):
            why = ("its file system is read-only"
                   if os.statvfs(base).f_flag & os.ST_RDONLY else "permission denied")
            raise StoreError(f"cannot write the store {path}: {why} ({base}); give --store "
                             "(store= in Python) a writable path")

    def remove(self) -> None:
        fs, path = self.fs
        if fs.exists(path):
            fs.rm(path, recursive=True)

    def remove_child(self, name: str) -> None:
        fs, path = self.fs
        if fs.exists(f"{path}/{name}"):
            fs.rm(f"{path}/{name}", recursive=True)

    def list_keys(self, prefix: str) -> set[str]:
        """Keys (relative to the store) of every file under ``prefix``."""
        fs, path = self.fs
        root = f"{path}/{prefix}".rstrip("/")
        if not fs.exists(root):
            return set()
        start = len(path.rstrip("/")) + 1
        return {name[start:] for name in fs.find(root)}

    def nbytes(self) -> int:
        fs, path = self.fs
        return int(fs.du(path)) if fs.exists(path) else 0

    def __str__(self) -> str:
        from ..secrets import mask_url

        return mask_url(self.url)

    def __repr__(self) -> str:
        from ..secrets import mask_options, mask_url

        return (f"StoreLocation(url={mask_url(self.url)!r}, "
                f"storage_options={mask_options(self.storage_options)!r})")


def _bounded_twin(fs: Any, options: dict[str, Any] | None, timeout: float) -> Any:
    """A fresh instance of ``fs`` that fails within ``timeout`` seconds instead of retrying
    (botocore retries a refused connection for ~10 s, more with s3fs's own retries)."""
    extra: dict[str, Any] = {}
    if type(fs).__module__.startswith("s3fs"):
        config = dict((options or {}).get("config_kwargs") or {})
        config.setdefault("connect_timeout", timeout)
        config.setdefault("read_timeout", timeout)
        config.setdefault("retries", {"max_attempts": 1, "mode": "standard"})
        extra = {"config_kwargs": config}
    try:
        twin = type(fs)(**{**(options or {}), **extra, "skip_instance_cache": True})
    except TypeError:  # a filesystem without these settings: the cached one will do
        return fs
    if hasattr(twin, "retries"):
        twin.retries = 1  # s3fs's own retry loop, around botocore's
    return twin


def _endpoint(fs: Any) -> str | None:
    client_kwargs = getattr(fs, "client_kwargs", None) or {}
    return (getattr(fs, "endpoint_url", None) or client_kwargs.get("endpoint_url")
            or os.environ.get("AWS_ENDPOINT_URL") if type(fs).__module__.startswith("s3fs")
            else None)


def _masked_error(err: BaseException, options: dict[str, Any] | None) -> str:
    """``err`` in one line of at most 200 characters, any storage option's value blanked."""
    from ..secrets import mask_text

    text = " ".join(str(err).split()) or type(err).__name__
    secrets = [v for v in (options or {}).values() if isinstance(v, str)]
    return f"{type(err).__name__}: {mask_text(text, secrets)[:200]}"


#: object stores whose fsspec filesystems take credentials from options, never from the URL
_BUCKET_SCHEMES = ("s3", "s3a", "gs", "gcs", "az", "abfs", "abfss", "adl")


def _refuse_credentials(url: str) -> None:
    """An object store's URL with credentials in it (``s3://KEY:SECRET@bucket``) is refused
    in one line that does not repeat them: its filesystem would take them for the bucket's
    name, and a URL is recorded and shown where an option's value is masked."""
    from ..secrets import mask_url, url_credentials

    scheme = url.split("://", 1)[0].lower()
    if scheme in _BUCKET_SCHEMES and url_credentials(url) is not None:
        raise ValueError(f"the store URL {mask_url(url)} carries credentials; an object "
                         "store reads them from its options, never from the URL: give them "
                         "with --storage-option key=... --storage-option secret=... "
                         "(storage_options= in Python) or in the environment "
                         "(AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY)")


def _read_marker(location: StoreLocation, name: str, token: str) -> str | None:
    """Runs on a worker: None if it reads ``token`` back from the store, else why not."""
    try:
        import fsspec

        fs, path = fsspec.core.url_to_fs(location.url, **(location.storage_options or {}))
        found = fs.cat_file(f"{path}/{name}").decode()
    except Exception as err:  # noqa: BLE001 - any failure means the worker cannot see it
        return f"{type(err).__name__}: {' '.join(str(err).split())[:160]}"
    return None if found == token else "it reads a different marker (another store there?)"


def _ask_every_worker(client: Any, function: Any, *args: Any, attempts: int = 3) -> dict:
    """``client.run(function, *args)``, tolerating workers that leave meanwhile: a worker
    killed just before (its nanny restarting it) resets the connection. Those are asked
    again after a pause; the ones that never answer are left out, as long as one answered."""
    answers: dict = {}
    workers = None
    for attempt in range(attempts):
        replies = client.run(function, *args, workers=workers, on_error="return")
        lost = [w for w, r in replies.items() if isinstance(r, BaseException)]
        answers.update({w: r for w, r in replies.items() if not isinstance(r, BaseException)})
        if not lost:
            break
        time.sleep(0.5 * (attempt + 1))
        present = set(client.nthreads())
        workers = [w for w in lost if w in present] or None
        if workers is None:
            # the lost workers are gone; any that replaced them are asked
            workers = [w for w in present if w not in answers]
            if not workers:
                break
    if not answers:
        raise StoreError("no worker answered the store visibility check; the cluster is "
                         "losing workers (see the scheduler's log)")
    return answers


def check_workers_see(client: Any, location: StoreLocation) -> None:
    """Every worker must read back a marker the client writes into the store.

    Raises
    ------
    StoreError
        One line naming a worker that cannot see the store, and what to do.
    """
    token = uuid.uuid4().hex
    name = f".mkrk-visibility-{token[:12]}"
    location.makedirs()  # never a bucket
    fs, path = location.fs
    fs.pipe_file(f"{path}/{name}", token.encode())
    try:
        answers = _ask_every_worker(client, _read_marker, location, name, token)
    finally:
        try:
            fs.rm_file(f"{path}/{name}")
        except OSError:
            pass
    blind = {worker: why for worker, why in answers.items() if why is not None}
    if blind:
        worker, why = sorted(blind.items())[0]
        where = ("a path on this machine" if location.is_local else "this URL")
        raise StoreError(
            f"worker {worker} cannot see the store {location.url} ({why}); "
            f"{len(blind)} of {len(answers)} worker(s) cannot. The store is {where}: give "
            "store= an object-store URL (s3://bucket/run.zarr, with credentials in the "
            "environment or storage_options) or a path on a filesystem every worker mounts "
            "at the same place")


def _held_by_cluster(X: Any) -> bool:
    """A dask array with persisted chunks (Futures in its graph): its data are already in the
    workers' memory, so there is no path for them to read (and no scheduler here that could
    compute it without the client)."""
    graph = getattr(X, "__dask_graph__", None)
    if graph is None:
        return False
    from distributed import Future

    return any(isinstance(task, Future) for task in dict(graph()).values())


def _first_row(X: Any) -> bytes:
    """The first row of a Zarr or dask array, read where this runs."""
    import numpy as np

    row = X[:1]
    if hasattr(row, "compute"):
        row = row.compute(scheduler="sync")
    return np.ascontiguousarray(np.asarray(row, dtype=np.float64)).tobytes()


def _worker_first_rows(views: list) -> str | list[bytes]:
    try:
        return [_first_row(v) for v in views]
    except Exception as err:  # noqa: BLE001 - any failure means the worker cannot read it
        return f"{type(err).__name__}: {' '.join(str(err).split())[:160]}"


def check_workers_read(client: Any, views: list) -> None:
    """Every worker reads the same first row of every Zarr or dask view as the client.

    Zarr arrays travel to the workers as their address; a worker that cannot reach it would
    otherwise read missing chunks as the fill value.

    Raises
    ------
    StoreError
        One line naming a worker that cannot read an input view, and what to do.
    """
    from ..validation import is_lazy

    lazy = [(i, v) for i, v in enumerate(views) if is_lazy(v) and not _held_by_cluster(v)]
    if not lazy:
        return
    expected = [_first_row(v) for _, v in lazy]
    answers = client.run(_worker_first_rows, [v for _, v in lazy])
    for worker, got in sorted(answers.items()):
        if isinstance(got, str) or got != expected:
            index = 0 if isinstance(got, str) else next(
                j for j, (a, b) in enumerate(zip(got, expected, strict=True)) if a != b)
            view, array = lazy[index]
            why = got if isinstance(got, str) else "it reads other values"
            where = getattr(getattr(array, "store", None), "root", None) or getattr(
                array, "store", type(array).__name__)
            raise StoreError(
                f"worker {worker} cannot read input view {view} ({where}): {why}. The input "
                "must be where every worker can read it: an object-store URL "
                "(zarr.open_array('s3://...')) or a path every worker mounts at the same place")
