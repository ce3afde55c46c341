"""Blockwise backend: base kernels in a Zarr store, every heavy product on Dask workers.

Layout of a kernel store (kind ``"kernels"``, see :mod:`mkrk_dask.store`)::

    kernels            (m, n, n) array, chunks (1, c, c), uncompressed, dtype float64/float32
    results_gram       (m, m) tr(K_i K_j), added when computed (-> fip and sfn)
    results_traces     (m,)   tr(K_p)
    attrs              format, format_version, kind, complete, kernel_request (as asked),
                       kernel_specs (resolved: Gaussian sigmas filled in), max_distances, n, m,
                       chunk_size, normalize, dtype, fingerprint, source

Work is split by row blocks of ``c`` rows (the chunk size). Every pass over the store is one
task per row block ``i``; the task reads the ``(m, c_i, c_j)`` slabs of its row block one column
block at a time (memory ``~ m c^2`` per task, whatever n), so the kernels never leave the disk.

- Build: one task per block pair ``(i, j)``, ``i <= j``, evaluates every kernel with
  :func:`mkrk_dask.kernels.kernel_blocks` and writes the block and its transpose (the kernels are
  exactly symmetric). The same tasks return the pair's contribution to the Gram matrix
  ``tr(K_i K_j)`` and the traces, so a fresh store needs no separate pass for C.
- Gram pass (reopened stores without saved results): one read of the store.
- H-step: :func:`mkrk_dask.eigen.block_krylov_top_k`, whose ``apply(V)`` scatters ``V`` once and
  runs one task per row block returning the per-kernel images ``K_p V`` (kept on the workers)
  and ``K_w V`` (gathered). The final eigenbasis ``U`` lies in the span of the last restart's
  blocks, ``U = Q S``, so ``K_p U = sum_l (K_p V_l) S_l`` and ``tr(U^T K_p U)`` follow from the
  images already on the workers, without another pass (the fused quad forms).
"""

from __future__ import annotations

import math
import shutil
import tempfile
import time
import uuid
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp

from ..cluster import DaskSession
from ..dissimilarity import GRAM_MEASURES, check_measure, from_gram
from ..eigen import block_krylov_top_k
from ..kernels import (
    KernelSpec,
    block_max_sq_distance,
    kernel_blocks,
    normalize_kernels,
    resolve_kernels,
    row_sq_norms,
    views_needing_scale,
)
from ..store import (
    StoreError,
    create_store,
    data_fingerprint,
    load_result,
    mark_complete,
    open_complete_store,
    save_result,
)
from .base import KernelBackend, TopK

__all__ = ["BlockwiseBackend", "default_chunk_size", "STORE_KIND"]

STORE_KIND = "kernels"
PRODUCTS = ("fused", "combined")
_ARRAY = "kernels"
#: target bytes of one (m, c, c) float64 slab, the unit of work of every pass
_SLAB_BYTES = 2**26


def default_chunk_size(n: int, m: int) -> int:
    """Rows per block: an ``(m, c, c)`` float64 slab of about 64 MiB, a multiple of 128."""
    c = int(math.sqrt(_SLAB_BYTES / (8.0 * max(m, 1)))) // 128 * 128
    return int(min(n, max(256, min(c, 4096))))


def _bounds(n: int, c: int) -> list[tuple[int, int]]:
    return [(s, min(s + c, n)) for s in range(0, n, c)]


# -- tasks (module level: they run on the workers) --------------------------------------------

_OPEN: dict[tuple[str, str], Any] = {}
_OPEN_MAX = 8


def _kernel_array(store: tuple[str, str], mode: str = "r") -> Any:
    """The store's kernel array, opened once per worker process.

    ``store`` is ``(path, build_id)``: a store rebuilt at the same path gets a new build id, so
    a worker never uses the metadata (shape, chunks) of the array it replaced.
    """
    return _scratch_array(store, _ARRAY, mode)


def _read_slab(arr: Any, rows: tuple[int, int], cols: tuple[int, int]) -> np.ndarray:
    return np.asarray(arr[:, rows[0]:rows[1], cols[0]:cols[1]], dtype=np.float64)


def _slice_rows(X: Any, start: int, stop: int) -> Any:
    """Rows of a numpy / scipy sparse / Zarr array as an in-memory block."""
    if sp.issparse(X):
        return sp.csr_matrix(X[start:stop])
    return np.asarray(X[start:stop], dtype=np.float64)


def _build_pair(store: tuple[str, str], groups: list[tuple[list[int], list[KernelSpec]]],
                blocks_i: list[Any], blocks_j: list[Any], sq_i: list[np.ndarray],
                sq_j: list[np.ndarray], rows: tuple[int, int], cols: tuple[int, int],
                m: int, normalize: bool, dtype: str) -> tuple[np.ndarray, np.ndarray]:
    """Evaluate all kernels on block pair (rows, cols), write it and its transpose.

    Returns this pair's contribution to the Gram matrix ``tr(K_i K_j)`` (counted twice for an
    off-diagonal pair, which stands for both blocks) and to the traces, computed from the values
    as stored (after the cast to the store's dtype).
    """
    arr = _kernel_array(store, "r+")
    block = np.empty((m, rows[1] - rows[0], cols[1] - cols[0]), dtype=np.float64)
    for (idx, specs), Xa, Xb, sa, sb in zip(groups, blocks_i, blocks_j, sq_i, sq_j,
                                             strict=True):
        block[idx] = kernel_blocks(specs, Xa, Xb, sa, sb, normalize=normalize)
    diagonal = rows == cols
    if diagonal:
        # As the exact backend does: exactly symmetric, and a diagonal of exactly 1.
        block += block.transpose(0, 2, 1).copy()
        block *= 0.5
        if normalize:
            i = np.arange(block.shape[1])
            block[:, i, i] = 1.0
    stored = block.astype(dtype, copy=False)
    arr[:, rows[0]:rows[1], cols[0]:cols[1]] = stored
    if not diagonal:
        arr[:, cols[0]:cols[1], rows[0]:rows[1]] = stored.transpose(0, 2, 1)
    flat = stored.reshape(m, -1).astype(np.float64, copy=False)
    gram = flat @ flat.T
    traces = np.zeros(m)
    if diagonal:
        traces = np.einsum("pii->p", stored, dtype=np.float64)
    else:
        gram *= 2.0
    return gram, traces


def _gram_rows(store: tuple[str, str], rows: tuple[int, int], col_bounds: list[tuple[int, int]]
               ) -> tuple[np.ndarray, np.ndarray]:
    """Row block's contribution to ``tr(K_i K_j)`` and the traces: one read of its slabs."""
    arr = _kernel_array(store)
    m = arr.shape[0]
    gram = np.zeros((m, m))
    traces = np.zeros(m)
    for cols in col_bounds:
        slab = _read_slab(arr, rows, cols)
        flat = slab.reshape(m, -1)
        gram += flat @ flat.T
        if cols == rows:
            traces += np.einsum("pii->p", slab)
    return gram, traces


def _row_images(store: tuple[str, str], rows: tuple[int, int], col_bounds: list[tuple[int, int]],
                V: np.ndarray) -> np.ndarray:
    """Per-kernel images ``(K_p V)[rows]`` for every p, shape (m, rows, b)."""
    arr = _kernel_array(store)
    m, r, b = arr.shape[0], rows[1] - rows[0], V.shape[1]
    out = np.zeros((m * r, b))
    for cols in col_bounds:
        # one GEMM over the stacked slab (much faster than a batched matmul)
        out += _read_slab(arr, rows, cols).reshape(m * r, -1) @ V[cols[0]:cols[1]]
    return out.reshape(m, r, b)


def _scratch_array(store: tuple[str, str], name: str, mode: str = "r") -> Any:
    """An array of the store (the kernels, or a scratch array such as the combined kernel),
    opened once per worker process and kept in a small cache."""
    import zarr

    key = (f"{store[0]}|{store[1]}|{name}", mode)
    if key not in _OPEN:
        while len(_OPEN) >= _OPEN_MAX:
            _OPEN.pop(next(iter(_OPEN)))
        _OPEN[key] = zarr.open_array(str(Path(store[0]) / name), mode=mode)
    return _OPEN[key]


def _form_combined_rows(store: tuple[str, str], name: str, rows: tuple[int, int],
                        col_bounds: list[tuple[int, int]], squared_weights: np.ndarray) -> int:
    """Write rows of ``K_w = sum_p w_p^2 K_p`` into the scratch array (one read of the slabs)."""
    arr = _kernel_array(store)
    out = _scratch_array(store, name, "r+")
    for cols in col_bounds:
        out[rows[0]:rows[1], cols[0]:cols[1]] = np.tensordot(
            squared_weights, _read_slab(arr, rows, cols), axes=1)
    return rows[1] - rows[0]


def _combined_rows(store: tuple[str, str], name: str, rows: tuple[int, int],
                   col_bounds: list[tuple[int, int]], V: np.ndarray) -> np.ndarray:
    """``(K_w V)[rows]`` from the scratch combined kernel."""
    arr = _scratch_array(store, name)
    out = np.zeros((rows[1] - rows[0], V.shape[1]))
    for cols in col_bounds:
        out += np.asarray(arr[rows[0]:rows[1], cols[0]:cols[1]], dtype=np.float64) @ V[
            cols[0]:cols[1]]
    return out


def _combine(images: np.ndarray, squared_weights: np.ndarray) -> np.ndarray:
    """``(K_w V)[rows] = sum_p w_p^2 (K_p V)[rows]``."""
    return np.tensordot(squared_weights, images, axes=1)


def _fused_quad(images: list[np.ndarray], coefficients: list[np.ndarray], U: np.ndarray,
                rows: tuple[int, int]) -> np.ndarray:
    """``sum over rows of U * (K_p U)`` with ``K_p U = sum_l (K_p V_l) S_l`` (shape (m,))."""
    m, r, _ = images[0].shape
    KU = sum(img.reshape(m * r, -1) @ S for img, S in zip(images, coefficients, strict=True))
    KU = KU.reshape(m, r, -1)
    return np.einsum("pik,ik->p", KU, U[rows[0]:rows[1]])


def _row_quad(store: tuple[str, str], rows: tuple[int, int], col_bounds: list[tuple[int, int]],
              H: np.ndarray) -> np.ndarray:
    """Row block's contribution to ``tr(H^T K_p H)`` for every p (one read of its slabs)."""
    images = _row_images(store, rows, col_bounds, H)
    return np.einsum("pik,ik->p", images, H[rows[0]:rows[1]])


# -- the backend -------------------------------------------------------------------------------


class BlockwiseBackend(KernelBackend):
    """Base kernels in a Zarr store, products on Dask workers. Build with the class methods.

    Use :meth:`from_views` (features) or :meth:`from_precomputed` (kernels); the constructor is
    internal. Attributes worth knowing: ``store_path``, ``chunk_size``, ``built`` (True if this
    object built the store, False if it reused a complete one), ``passes`` (how many times each
    kind of pass read or wrote the store: ``build``, ``gram``, ``apply``, ``quad``),
    ``eigen_info`` (the eigensolver's info of the last H-step) and ``kernel_specs``.

    Parameters (of the class methods)
    ---------------------------------
    normalize : bool
        ``K_ij / sqrt(K_ii K_jj)`` (the paper's normalisation).
    store : str or path-like, optional
        Where the kernel store lives (a filesystem path all workers can see). Reused when it is
        complete and matches the data and kernels; refused with :class:`StoreError` when it is
        foreign, half-written, or built from other data/kernels. Default: a temporary
        directory, deleted by :meth:`close`.
    scheduler : None, str or distributed.Client
        See :class:`mkrk_dask.cluster.DaskSession`. A cluster started here is closed by
        :meth:`close`.
    chunk_size : int, optional
        Rows per block (default :func:`default_chunk_size`). A reused store keeps its own
        chunking unless one is given explicitly (then it must match).
    dtype : {"float64", "float32"}
        Storage precision (the arithmetic is float64 either way).
    overwrite : bool
        Rebuild over an existing store at ``store`` instead of refusing it.
    products : {"combined", "fused"}
        How the H-step reads the store. ``"fused"``: every eigensolver product reads the m
        kernels and returns ``K_w V`` together with every ``K_p V``, so the final
        ``tr(U^T K_p U)`` needs no further pass. ``"combined"`` (default): one pass writes
        ``K_w`` to a scratch array of the store (1/m of its size), the products read only that,
        and one more pass over the m kernels gives the quadratic forms. The eigensolver needs
        12-16 products per iteration, so ``combined`` reads about 3 store-equivalents per
        iteration where ``fused`` reads 12-16 (``benchmarks/results/blockwise_usps*.md``).
    eigen_tol, eigen_depth, eigen_oversample, eigen_max_restarts
        Passed to :func:`mkrk_dask.eigen.block_krylov_top_k` (relative residual tolerance of the
        subspace, Krylov blocks per restart, extra columns).
    """

    measures = GRAM_MEASURES

    def __init__(self, session: DaskSession, group: Any, *, temp_dir: str | None,
                 built: bool, products: str = "combined", eigen_tol: float = 1e-10,
                 eigen_depth: int = 4, eigen_oversample: int = 10,
                 eigen_max_restarts: int = 100):
        if products not in PRODUCTS:
            raise ValueError(f"products must be one of {PRODUCTS}, got {products!r}")
        self.products = products
        self._scratch: str | None = None
        self.session = session
        self.client = session.client
        self.group = group
        attrs = group.attrs.asdict()
        self.store_path = str(Path(str(group.store.root)))
        self._store_key = (self.store_path, str(attrs["build_id"]))
        self.n_kernels = int(attrs["m"])
        self.n_samples = int(attrs["n"])
        self.chunk_size = int(attrs["chunk_size"])
        self.dtype = attrs["dtype"]
        specs = attrs.get("kernel_specs")
        self.kernel_specs = None if specs is None else [KernelSpec(**s) for s in specs]
        self.built = built
        self._temp_dir = temp_dir
        self._bounds = _bounds(self.n_samples, self.chunk_size)
        self.eigen_tol = eigen_tol
        self.eigen_depth = eigen_depth
        self.eigen_oversample = eigen_oversample
        self.eigen_max_restarts = eigen_max_restarts
        self.eigen_info: dict[str, Any] = {}
        self.passes = {"build": int(built), "gram": 0, "apply": 0, "quad": 0, "combine": 0,
                       "apply_combined": 0}
        self.timings: dict[str, float] = {}
        self._gram = load_result(group, "gram")
        self._traces = load_result(group, "traces")
        self._closed = False

    # -- construction ---------------------------------------------------------------------

    @classmethod
    def from_views(cls, views: list, specs: list[KernelSpec], *, normalize: bool = True,
                   store: Any = None, scheduler: Any = None, chunk_size: int | None = None,
                   dtype: str = "float64", overwrite: bool = False, **eigen: Any
                   ) -> BlockwiseBackend:
        """Build (or reopen) the kernel store of ``views`` and connect to Dask.

        ``views``: a list of n-row inputs, each a numpy array, scipy sparse matrix, dask array
        or Zarr array. ``specs``: the kernels (relative Gaussian widths are resolved here from
        the exact largest pairwise distance of their view, computed blockwise on the workers).
        """
        views = list(views)
        n = int(views[0].shape[0])
        m = len(specs)
        request = [s.to_dict() for s in specs]
        return cls._open_or_build(
            source="views", n=n, m=m, request=request, fingerprint_of=views,
            normalize=normalize, store=store, scheduler=scheduler, chunk_size=chunk_size,
            dtype=dtype, overwrite=overwrite, eigen=eigen,
            build=lambda backend_parts: _build_from_views(views, specs, normalize=normalize,
                                                          **backend_parts))

    @classmethod
    def from_precomputed(cls, kernels: Any, *, normalize: bool = True, store: Any = None,
                         scheduler: Any = None, chunk_size: int | None = None,
                         dtype: str = "float64", overwrite: bool = False, **eigen: Any
                         ) -> BlockwiseBackend:
        """Store precomputed kernels ``(m, n, n)`` (normalised and symmetrised as the exact
        backend does), or reopen the store made from them before."""
        m, n = int(kernels.shape[0]), int(kernels.shape[1])
        return cls._open_or_build(
            source="precomputed", n=n, m=m, request=None,
            fingerprint_of=[np.asarray(kernels).reshape(m * n, n)], normalize=normalize,
            store=store, scheduler=scheduler, chunk_size=chunk_size, dtype=dtype,
            overwrite=overwrite, eigen=eigen,
            build=lambda parts: _build_from_precomputed(kernels, normalize=normalize, **parts))

    @classmethod
    def _open_or_build(cls, *, source: str, n: int, m: int, request: list | None,
                       fingerprint_of: list, normalize: bool, store: Any, scheduler: Any,
                       chunk_size: int | None, dtype: str, overwrite: bool, eigen: dict,
                       build: Any) -> BlockwiseBackend:
        dtype = np.dtype(dtype).name
        if dtype not in ("float64", "float32"):
            raise ValueError(f"dtype must be 'float64' or 'float32', got {dtype!r}")
        if chunk_size is not None and (int(chunk_size) != chunk_size or chunk_size < 1):
            raise ValueError(f"chunk_size must be a positive integer, got {chunk_size!r}")
        session = DaskSession(scheduler)
        temp_dir = None
        try:
            t0 = time.perf_counter()
            expected = {"source": source, "kernel_request": request, "n": n, "m": m,
                        "normalize": bool(normalize), "dtype": dtype,
                        "fingerprint": data_fingerprint(fingerprint_of)}
            if chunk_size is not None:
                expected["chunk_size"] = int(chunk_size)
            group = None
            if store is None:
                temp_dir = tempfile.mkdtemp(prefix="mkrk-blockwise-")
                path = str(Path(temp_dir) / "kernels.zarr")
            else:
                path = str(Path(store).expanduser().resolve())
                if not overwrite:
                    group = open_complete_store(path, kind=STORE_KIND, expected=expected)
            fingerprint_seconds = time.perf_counter() - t0
            built = group is None
            if built:
                c = int(chunk_size) if chunk_size is not None else default_chunk_size(n, m)
                metadata = dict(expected, chunk_size=c, build_id=uuid.uuid4().hex,
                                layout=f"{_ARRAY}: (m, n, n) chunks (1, c, c)")
                t1 = time.perf_counter()
                group = build(dict(client=session.client, path=path, metadata=metadata,
                                   overwrite=overwrite, n=n, m=m, c=c, dtype=dtype))
                build_seconds = time.perf_counter() - t1
            backend = cls(session, group, temp_dir=temp_dir, built=built, **eigen)
            backend.timings["fingerprint"] = fingerprint_seconds
            if built:
                backend.timings["build"] = build_seconds
            return backend
        except BaseException:
            session.close()
            if temp_dir is not None:
                shutil.rmtree(temp_dir, ignore_errors=True)
            raise

    # -- the five quantities --------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError("this BlockwiseBackend is closed")

    def _gram_pass(self) -> None:
        """One read of the store: the Gram matrix tr(K_i K_j) and the traces; persisted."""
        self._check_open()
        t0 = time.perf_counter()
        futures = [self.client.submit(_gram_rows, self._store_key, rows, self._bounds,
                                      pure=False) for rows in self._bounds]
        parts = self.client.gather(futures)
        gram = sum(p[0] for p in parts)
        traces = sum(p[1] for p in parts)
        self.passes["gram"] += 1
        self._gram, self._traces = np.asarray(gram), np.asarray(traces)
        save_result(self.group, "gram", self._gram)
        save_result(self.group, "traces", self._traces)
        self.timings["gram"] = time.perf_counter() - t0

    def gram(self) -> np.ndarray:
        """The kernels' Gram matrix ``tr(K_i K_j)`` (m x m)."""
        if self._gram is None:
            self._gram_pass()
        return self._gram.copy()

    def traces(self) -> np.ndarray:
        if self._traces is None:
            self._gram_pass()
        return self._traces.copy()

    def dissimilarity(self, measure: str) -> np.ndarray:
        check_measure(measure, self.measures)
        return from_gram(self.gram(), measure)

    def _share(self, array: np.ndarray) -> Any:
        """A future of ``array`` held by one worker, which the tasks fetch it from.

        Not broadcast: a worker dying while the scheduler replicates a broadcast can hang the
        scatter for good (dask/distributed#5704). If the holder dies, the tasks that need it
        are cancelled and :meth:`_with_retries` shares it again.
        """
        [future] = self.client.scatter([np.ascontiguousarray(array, dtype=np.float64)],
                                       hash=False)
        return future

    def _apply_images(self, V: np.ndarray) -> list[Any]:
        """Futures of the per-kernel images ``(K_p V)[rows]``, one per row block."""
        V_future = self._share(V)
        return [self.client.submit(_row_images, self._store_key, rows, self._bounds, V_future,
                                   pure=False) for rows in self._bounds]

    def _with_retries(self, run: Any, attempts: int = 3) -> Any:
        """Run a distributed step again if it failed because workers were lost mid-way."""
        from concurrent.futures import CancelledError

        from distributed import KilledWorker

        for attempt in range(attempts):
            try:
                return run()
            # CancelledError: a single future's or a gather's (FuturesCancelledError).
            except (KilledWorker, CancelledError, OSError):
                if attempt == attempts - 1:
                    raise
                time.sleep(1.0)
        raise AssertionError("unreachable")

    def top_k(self, weights: np.ndarray, k: int, warm_start: TopK | None = None) -> TopK:
        self._check_open()
        n = self.n_samples
        if not 1 <= k <= n:
            raise ValueError(f"k must be in [1, n={n}], got {k}")
        squared = np.asarray(weights, dtype=np.float64) ** 2
        start = None if warm_start is None else np.asarray(warm_start.basis)
        t0 = time.perf_counter()
        if self.products == "combined":
            values, vectors, quad = self._top_k_combined(squared, k, start)
        else:
            values, vectors, quad = self._top_k_fused(squared, k, start)
        self.timings["top_k"] = self.timings.get("top_k", 0.0) + time.perf_counter() - t0
        return TopK(values, vectors, quad_forms=quad)

    def _eigensolve(self, apply: Any, k: int, start: np.ndarray | None
                    ) -> tuple[np.ndarray, np.ndarray]:
        values, vectors, info = block_krylov_top_k(
            apply, self.n_samples, k, start=start, oversample=self.eigen_oversample,
            depth=self.eigen_depth, tol=self.eigen_tol, max_restarts=self.eigen_max_restarts)
        self.eigen_info = info
        if not info["converged"]:
            warnings.warn(f"the blockwise top-{k} eigensolver stopped after {info['restarts']} "
                          f"restarts with a relative residual {info['residual']:.2e} > "
                          f"{self.eigen_tol:g}", RuntimeWarning, stacklevel=3)
        return values, vectors

    def _top_k_fused(self, squared: np.ndarray, k: int, start: np.ndarray | None
                     ) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
        """Every product reads the m kernels once and yields K_w V and all K_p V."""
        # (V, futures of K_p V per row block) of the latest products: the last restart's basis
        # is among them, which is what the fused quad forms need.
        history: list[tuple[np.ndarray, list[Any]]] = []

        def apply(V: np.ndarray) -> np.ndarray:
            def run() -> tuple[np.ndarray, list[Any]]:
                images = self._apply_images(V)
                combined = [self.client.submit(_combine, img, squared, pure=False)
                            for img in images]
                return np.vstack(self.client.gather(combined)), images

            product, images = self._with_retries(run)
            self.passes["apply"] += 1
            history.append((V, images))
            del history[:-self.eigen_depth]
            return product

        values, vectors = self._eigensolve(apply, k, start)
        return values, vectors, self._fused_quad_forms(history, vectors)

    def _top_k_combined(self, squared: np.ndarray, k: int, start: np.ndarray | None
                        ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """One pass over the m kernels writes K_w to a scratch array (1/m of the store); the
        eigensolver's products read only K_w; one more pass gives every tr(U^T K_p U)."""
        name = self._ensure_scratch()

        def form() -> None:
            self.client.gather([self.client.submit(
                _form_combined_rows, self._store_key, name, rows, self._bounds, squared,
                pure=False) for rows in self._bounds])

        self._with_retries(form)
        self.passes["combine"] += 1

        def apply(V: np.ndarray) -> np.ndarray:
            def run() -> np.ndarray:
                V_future = self._share(V)
                return np.vstack(self.client.gather([self.client.submit(
                    _combined_rows, self._store_key, name, rows, self._bounds, V_future,
                    pure=False) for rows in self._bounds]))

            product = self._with_retries(run)
            self.passes["apply_combined"] += 1
            return product

        values, vectors = self._eigensolve(apply, k, start)
        return values, vectors, self.quad_forms(TopK(values, vectors))

    def _ensure_scratch(self) -> str:
        if self._scratch is None:
            name = f"scratch_combined_{uuid.uuid4().hex[:12]}"
            n, c = self.n_samples, self.chunk_size
            self.group.create_array(name, shape=(n, n), chunks=(c, c), dtype="float64",
                                    compressors=None, fill_value=0.0)
            self._scratch = name
        return self._scratch

    def _fused_quad_forms(self, history: list[tuple[np.ndarray, list[Any]]],
                          U: np.ndarray) -> np.ndarray | None:
        """``tr(U^T K_p U)`` from the images of the last products (no pass over the store).

        ``U`` lies in the span of the last restart's blocks (a subset of ``history``), so
        ``U = Q S`` with ``Q`` the stacked blocks; ``K_p U = sum_l (K_p V_l) S_l``.
        Returns None (and the loop then calls :meth:`quad_forms`) if ``U`` were not in the span.
        """
        Q = np.hstack([V for V, _ in history])
        S, *_ = np.linalg.lstsq(Q, U, rcond=None)
        if np.abs(Q @ S - U).max() > 1e-10:
            return None
        split = np.cumsum([V.shape[1] for V, _ in history])[:-1]
        coefficients = np.split(S, split, axis=0)

        def run() -> np.ndarray:
            U_future = self._share(U)
            parts = [self.client.submit(_fused_quad, [imgs[r] for _, imgs in history],
                                        coefficients, U_future, rows, pure=False)
                     for r, rows in enumerate(self._bounds)]
            return np.sum(self.client.gather(parts), axis=0)

        try:
            return self._with_retries(run)
        finally:
            # The images are no longer needed: let the workers free them.
            history.clear()

    def quad_forms(self, top: TopK) -> np.ndarray:
        if top.quad_forms is not None:
            return np.asarray(top.quad_forms)
        self._check_open()
        H = np.ascontiguousarray(top.basis, dtype=np.float64)

        def run() -> np.ndarray:
            H_future = self._share(H)
            parts = [self.client.submit(_row_quad, self._store_key, rows, self._bounds,
                                        H_future, pure=False) for rows in self._bounds]
            return np.sum(self.client.gather(parts), axis=0)

        result = self._with_retries(run)
        self.passes["quad"] += 1
        return result

    def embedding(self, top: TopK) -> np.ndarray:
        return np.asarray(top.basis)

    def kernel(self, p: int) -> np.ndarray:
        """Kernel ``p`` read back from the store (for inspection and tests; n x n in memory)."""
        return np.asarray(self.group[_ARRAY][p], dtype=np.float64)

    @property
    def store_nbytes(self) -> int:
        """Bytes of the store on disk."""
        return sum(f.stat().st_size for f in Path(self.store_path).rglob("*") if f.is_file())

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            if self._scratch is not None and self._temp_dir is None:
                shutil.rmtree(Path(self.store_path) / self._scratch, ignore_errors=True)
            self.session.close()
        finally:
            if self._temp_dir is not None:
                shutil.rmtree(self._temp_dir, ignore_errors=True)
                self._temp_dir = None


# -- building a store --------------------------------------------------------------------------


def _create_kernel_array(group: Any, m: int, n: int, c: int, dtype: str) -> None:
    group.create_array(_ARRAY, shape=(m, n, n), chunks=(1, c, c), dtype=dtype,
                       compressors=None, fill_value=0.0)


def _row_block_futures(client: Any, X: Any, bounds: list[tuple[int, int]]) -> list[Any]:
    """Futures of the row blocks of a view, on the workers (numpy, sparse, dask or Zarr)."""
    if hasattr(X, "dask") and hasattr(X, "rechunk"):  # dask array
        rows = tuple(stop - start for start, stop in bounds)
        blocks = X.rechunk((rows,) + tuple((s,) for s in X.shape[1:])).to_delayed().ravel()
        return client.compute(list(blocks))
    if isinstance(X, np.ndarray) or sp.issparse(X):
        return client.scatter([_slice_rows(X, s, e) for s, e in bounds], hash=False)
    # Zarr (or any array with row slicing): each worker reads its own rows.
    return [client.submit(_slice_rows, X, s, e, pure=False) for s, e in bounds]


def _as_float_block(block: Any) -> Any:
    return sp.csr_matrix(block, dtype=np.float64) if sp.issparse(block) else np.asarray(
        block, dtype=np.float64)


def _build_from_views(views: list, specs: list[KernelSpec], *, normalize: bool, client: Any,
                      path: str, metadata: dict, overwrite: bool, n: int, m: int, c: int,
                      dtype: str) -> Any:
    bounds = _bounds(n, c)
    used = sorted({spec.view for spec in specs})
    blocks = {v: [client.submit(_as_float_block, f, pure=False)
                  for f in _row_block_futures(client, views[v], bounds)] for v in used}
    sq = {v: [client.submit(row_sq_norms, b, pure=False) for b in blocks[v]] for v in used}
    pairs = [(i, j) for i in range(len(bounds)) for j in range(i, len(bounds))]
    # Relative Gaussian widths: the exact largest pairwise distance, blockwise on the workers.
    distances = [0.0] * len(views)
    for v in views_needing_scale(specs):
        parts = [client.submit(block_max_sq_distance, blocks[v][i], blocks[v][j], sq[v][i],
                               sq[v][j], pure=False) for i, j in pairs]
        distances[v] = math.sqrt(max(max(client.gather(parts)), 0.0))
    resolved = resolve_kernels(specs, distances)
    groups = [([p for p, s in enumerate(resolved) if s.view == v],
               [s for s in resolved if s.view == v]) for v in used]
    metadata = dict(metadata, kernel_specs=[s.to_dict() for s in resolved],
                    max_distances=distances)
    group = create_store(path, kind=STORE_KIND, metadata=metadata, overwrite=overwrite)
    _create_kernel_array(group, m, n, c, dtype)
    key = (path, metadata["build_id"])
    futures = [client.submit(_build_pair, key, groups, [blocks[v][i] for v in used],
                             [blocks[v][j] for v in used], [sq[v][i] for v in used],
                             [sq[v][j] for v in used], bounds[i], bounds[j], m, normalize,
                             dtype, pure=False) for i, j in pairs]
    parts = client.gather(futures)
    del futures, blocks, sq
    _finish_store(group, parts)
    return group


def _finish_store(group: Any, parts: list[tuple[np.ndarray, np.ndarray]]) -> None:
    """Persist the Gram matrix and traces gathered from the build, then mark complete."""
    save_result(group, "gram", np.sum([p[0] for p in parts], axis=0))
    save_result(group, "traces", np.sum([p[1] for p in parts], axis=0))
    mark_complete(group)


def _build_from_precomputed(kernels: Any, *, normalize: bool, client: Any, path: str,
                            metadata: dict, overwrite: bool, n: int, m: int, c: int,
                            dtype: str) -> Any:
    """Precomputed kernels are already in the client's memory: write them from here."""
    group = create_store(path, kind=STORE_KIND, metadata=dict(metadata, kernel_specs=None),
                         overwrite=overwrite)
    _create_kernel_array(group, m, n, c, dtype)
    arr = group[_ARRAY]
    gram = np.zeros((m, m))
    traces = np.zeros(m)
    for p in range(m):
        K = np.array(kernels[p], dtype=np.float64)[None]
        if normalize:
            normalize_kernels(K)
        K = 0.5 * (K[0] + K[0].T)
        K = K.astype(dtype, copy=False)
        arr[p] = K
        traces[p] = np.trace(K, dtype=np.float64)
    # Gram matrix from the stored values, one kernel pair at a time (m^2 n^2 flops).
    for p in range(m):
        Kp = np.asarray(arr[p], dtype=np.float64).ravel()
        for q in range(p, m):
            Kq = Kp if q == p else np.asarray(arr[q], dtype=np.float64).ravel()
            gram[p, q] = gram[q, p] = Kp @ Kq
    _finish_store(group, [(gram, traces)])
    return group


__all__ += ["StoreError"]
