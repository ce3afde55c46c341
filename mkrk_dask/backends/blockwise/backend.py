"""The blockwise backend: base kernels in a Zarr store, every heavy product on Dask workers.

- Gram pass (reopened stores without saved results): one read of the store.
- H-step: :func:`mkrk_dask.eigen.block_krylov_top_k`, whose ``apply(V)`` shares ``V`` once and
  runs one task per row block. ``products="combined"`` (default): one pass writes ``K_w`` to a
  scratch array of the store (1/m of its size), the products read only that, and one more pass
  over the m kernels gives the quadratic forms. ``products="fused"``: every product reads the m
  kernels and returns ``K_w V`` together with every ``K_p V`` (kept on the workers); the final
  eigenbasis ``U`` lies in the span of the last restart's blocks, ``U = Q S``, so
  ``K_p U = sum_l (K_p V_l) S_l`` and ``tr(U^T K_p U)`` follow without another pass.

All distributed work goes through :mod:`mkrk_dask.passes` (bounded streaming, lost work
resubmitted).
"""

from __future__ import annotations

import shutil
import time
import uuid
import warnings
from typing import Any

import numpy as np

from ...dask_session import DaskSession
from ...dissimilarity import GRAM_MEASURES, check_measure, from_gram
from ...eigen import block_krylov_top_k
from ...exceptions import PassFailedError
from ...kernels import KernelSpec
from ...passes import Shared, row_bounds, run_pass
from ...store.locations import StoreLocation
from ...store.zarr_store import create_data_array, load_result, read_checked, save_result
from ..base import KernelBackend, TopK
from ..construction import build_on_dask, check_backend_input
from ..options import BlockwiseOptions, make_options
from . import tasks
from .build import build_from_precomputed, build_from_views, open_or_build

__all__ = ["BlockwiseBackend", "open_blockwise"]


class BlockwiseBackend(KernelBackend):
    """Base kernels in a Zarr store, products on Dask workers.

    Made by :func:`mkrk_dask.backends.make_backend` (or the :meth:`from_views` /
    :meth:`from_precomputed` shortcuts); the constructor is internal. Attributes worth
    knowing: ``store_path``, ``chunk_size``, ``built`` (True if this object built the store,
    False if it reused a complete one), ``passes`` (how many times each kind of pass read or
    wrote the store: ``build``, ``gram``, ``apply``, ``quad``, ``combine``,
    ``apply_combined``), ``eigen_info`` (the eigensolver's info of the last H-step) and
    ``kernel_specs``. Options: :class:`~mkrk_dask.backends.options.BlockwiseOptions`.
    """

    measures = GRAM_MEASURES

    def __init__(self, session: DaskSession, group: Any, location: StoreLocation, *,
                 temp_dir: str | None, built: bool, options: BlockwiseOptions | None = None):
        options = options or BlockwiseOptions()
        self.options = options
        self.products = options.products
        self._scratch: str | None = None
        self.session = session
        self.client = session.client
        self.group = group
        attrs = group.attrs.asdict()
        self.location = location
        self.store_path = location.url
        self._store_key = (location, str(attrs["build_id"]))
        self.n_kernels = int(attrs["m"])
        self.n_samples = int(attrs["n"])
        self.chunk_size = int(attrs["chunk_size"])
        self.dtype = attrs["dtype"]
        specs = attrs.get("kernel_specs")
        self.kernel_specs = None if specs is None else [KernelSpec(**s) for s in specs]
        self.built = built
        self.reused_store = not built
        self._temp_dir = temp_dir
        self._bounds = row_bounds(self.n_samples, self.chunk_size)
        self.eigen_info: dict[str, Any] = {}
        self.passes = {"build": int(built), "gram": 0, "apply": 0, "quad": 0, "combine": 0,
                       "apply_combined": 0}
        self.timings: dict[str, float] = {}
        self._gram = load_result(group, "gram")
        self._traces = load_result(group, "traces")
        self._closed = False
        #: the training rows (feature input), for the out-of-sample map
        self.train_views: list | None = None

    # -- construction shortcuts -----------------------------------------------------------

    @classmethod
    def from_views(cls, views: list, specs: list[KernelSpec], *, normalize: bool = True,
                   store: Any = None, scheduler: Any = None, **options: Any
                   ) -> BlockwiseBackend:
        """Build (or reopen) the kernel store of ``views`` (numpy, scipy sparse, dask or Zarr
        arrays) on Dask; ``options`` as :class:`BlockwiseOptions`."""
        chosen = make_options("blockwise", **options)
        check_backend_input(views, specs, None)
        return open_blockwise(chosen, views=views, specs=specs, normalize=normalize,
                              store=store, scheduler=scheduler)

    @classmethod
    def from_precomputed(cls, kernels: Any, *, normalize: bool = True, store: Any = None,
                         scheduler: Any = None, **options: Any) -> BlockwiseBackend:
        """Store precomputed kernels ``(m, n, n)`` (normalised and symmetrised as the exact
        backend does), or reopen the store made from them before."""
        chosen = make_options("blockwise", **options)
        check_backend_input(None, None, kernels)
        return open_blockwise(chosen, kernels=kernels, normalize=normalize, store=store,
                              scheduler=scheduler)

    # -- the five quantities --------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError("this BlockwiseBackend is closed")

    def _row_pass(self, task: Any, args: tuple, label: str, level: int) -> list[Any]:
        """One task per row block, ``task(store, rows, col_bounds, *args)``; the results in
        row order. ``args`` may hold :class:`Shared` objects (their live refs are passed)."""
        results: list[Any] = [None] * len(self._bounds)

        def submit(i: int) -> Any:
            live = [a.ref if isinstance(a, Shared) else a for a in args]
            return self.client.submit(task, self._store_key, self._bounds[i], self._bounds,
                                      *live, pure=False)

        def combine(i: int, value: Any) -> None:
            results[i] = value

        run_pass(self.client, len(self._bounds), submit, combine, label=label,
                 max_in_flight=len(self._bounds), level=level)
        return results

    def _gram_pass(self) -> None:
        """One read of the store: the Gram matrix tr(K_i K_j) and the traces; persisted."""
        self._check_open()
        t0 = time.perf_counter()
        parts = self._row_pass(tasks.gram_rows, (), "kernel Gram matrix", 1)
        self.passes["gram"] += 1
        self._gram = np.asarray(sum(p[0] for p in parts))
        self._traces = np.asarray(sum(p[1] for p in parts))
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

    def _share(self, array: np.ndarray) -> Shared:
        return Shared(self.client, np.ascontiguousarray(array, dtype=np.float64))

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
        o = self.options
        # Seeded: the same products give the same basis, so a re-run task or a resumed fit
        # changes nothing.
        values, vectors, info = block_krylov_top_k(
            apply, self.n_samples, k, start=start, oversample=o.eigen_oversample,
            depth=o.eigen_depth, tol=o.eigen_tol, max_restarts=o.eigen_max_restarts,
            random_state=0)
        self.eigen_info = info
        if not info["converged"]:
            warnings.warn(f"the blockwise top-{k} eigensolver stopped after {info['restarts']} "
                          f"restarts with a relative residual {info['residual']:.2e} > "
                          f"{o.eigen_tol:g}", RuntimeWarning, stacklevel=3)
        return values, vectors

    def _top_k_fused(self, squared: np.ndarray, k: int, start: np.ndarray | None
                     ) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
        """Every product reads the m kernels once and yields K_w V and all K_p V."""
        # (V, futures of K_p V per row block) of the latest products: the last restart's basis
        # is among them, which is what the fused quad forms need.
        history: list[tuple[np.ndarray, list[Any]]] = []

        def apply(V: np.ndarray) -> np.ndarray:
            shared = self._share(V)
            images: list[Any] = [None] * len(self._bounds)
            parts: list[Any] = [None] * len(self._bounds)

            def submit(i: int) -> Any:
                images[i] = self.client.submit(tasks.row_images, self._store_key,
                                               self._bounds[i], self._bounds, shared.ref,
                                               pure=False)
                return self.client.submit(tasks.combine_images, images[i], squared, pure=False)

            def combine(i: int, value: np.ndarray) -> None:
                parts[i] = value

            run_pass(self.client, len(self._bounds), submit, combine,
                     label="eigensolver product", max_in_flight=len(self._bounds), level=2)
            self.passes["apply"] += 1
            history.append((V, images))
            del history[:-self.options.eigen_depth]
            return np.vstack(parts)

        values, vectors = self._eigensolve(apply, k, start)
        return values, vectors, self._fused_quad_forms(history, vectors)

    def _top_k_combined(self, squared: np.ndarray, k: int, start: np.ndarray | None
                        ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """One pass over the m kernels writes K_w to a scratch array (1/m of the store); the
        eigensolver's products read only K_w; one more pass gives every tr(U^T K_p U)."""
        name = self._ensure_scratch()
        self._row_pass(tasks.form_combined_rows, (name, squared), "combined kernel", 2)
        self.passes["combine"] += 1

        def apply(V: np.ndarray) -> np.ndarray:
            shared = self._share(V)
            product = np.vstack(self._row_pass(tasks.combined_rows, (name, shared),
                                               "eigensolver product", 2))
            self.passes["apply_combined"] += 1
            return product

        values, vectors = self._eigensolve(apply, k, start)
        return values, vectors, self.quad_forms(TopK(values, vectors))

    def _ensure_scratch(self) -> str:
        if self._scratch is None:
            name = f"scratch_combined_{uuid.uuid4().hex[:12]}"
            n, c = self.n_samples, self.chunk_size
            create_data_array(self.group, name, shape=(n, n), chunks=(c, c), dtype="float64")
            self._scratch = name
        return self._scratch

    def _fused_quad_forms(self, history: list[tuple[np.ndarray, list[Any]]],
                          U: np.ndarray) -> np.ndarray | None:
        """``tr(U^T K_p U)`` from the images of the last products (no pass over the store).

        ``U`` lies in the span of the last restart's blocks (a subset of ``history``), so
        ``U = Q S`` with ``Q`` the stacked blocks; ``K_p U = sum_l (K_p V_l) S_l``.
        Returns None (and the loop then calls :meth:`quad_forms`) if ``U`` were not in the
        span, or if images were lost with a worker.
        """
        Q = np.hstack([V for V, _ in history])
        S, *_ = np.linalg.lstsq(Q, U, rcond=None)
        if np.abs(Q @ S - U).max() > 1e-10:
            return None
        split = np.cumsum([V.shape[1] for V, _ in history])[:-1]
        coefficients = np.split(S, split, axis=0)
        shared = self._share(U)
        total = np.zeros(self.n_kernels)

        def submit(r: int) -> Any:
            return self.client.submit(tasks.fused_quad, [imgs[r] for _, imgs in history],
                                      coefficients, shared.ref, self._bounds[r], pure=False)

        def combine(_: int, value: np.ndarray) -> None:
            total[...] += value

        try:
            run_pass(self.client, len(self._bounds), submit, combine, label="quadratic forms",
                     max_in_flight=len(self._bounds), level=2, attempts=1, ordered=True)
        except PassFailedError:
            return None  # images lost with a worker: one pass over the store gives the same
        finally:
            # The images are no longer needed: let the workers free them.
            history.clear()
        return total

    def quad_forms(self, top: TopK) -> np.ndarray:
        if top.quad_forms is not None:
            return np.asarray(top.quad_forms)
        self._check_open()
        H = np.ascontiguousarray(top.basis, dtype=np.float64)
        result = np.sum(self._row_pass(tasks.row_quad, (self._share(H),), "quadratic forms", 2),
                        axis=0)
        self.passes["quad"] += 1
        return result

    def embedding(self, top: TopK) -> np.ndarray:
        return np.array(top.basis)  # the caller owns (and scales) it

    def row_map(self, top: TopK) -> Any:
        """The spectral out-of-sample map through the training rows (feature input only)."""
        if self.train_views is None or self.kernel_specs is None:
            return None
        from ..row_map import kernel_row_map

        normalize = bool(self.group.attrs["normalize"])
        return kernel_row_map(self.kernel_specs, normalize, self.train_views, top)

    def loop_checkpoint(self, key: str) -> Any:
        from ...store.checkpoints import LoopCheckpoint

        return None if self._temp_dir is not None else LoopCheckpoint(self.group, key)

    def kernel(self, p: int) -> np.ndarray:
        """Kernel ``p`` read back from the store (for inspection and tests; n x n in memory)."""
        return read_checked(self.group[tasks.KERNELS], (p,))

    @property
    def store_nbytes(self) -> int:
        """Bytes of the store."""
        return self.location.nbytes()

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            if self._scratch is not None and self._temp_dir is None:
                try:
                    self.location.remove_child(self._scratch)
                except OSError:
                    pass  # a scratch array left behind costs space, not correctness
            self.session.close()
        finally:
            if self._temp_dir is not None:
                shutil.rmtree(self._temp_dir, ignore_errors=True)
                self._temp_dir = None


def open_blockwise(options: BlockwiseOptions, *, views: list | None = None,
                   specs: list[KernelSpec] | None = None, kernels: Any = None,
                   normalize: bool = True, store: Any = None,
                   storage_options: dict | None = None,
                   scheduler: Any = None) -> BlockwiseBackend:
    """Build (or reopen) the blockwise store of ``views`` (with ``specs``) or of precomputed
    ``kernels`` on Dask: :func:`mkrk_dask.backends.make_backend` for :class:`BlockwiseOptions`
    (the inputs already checked)."""
    def build(location: StoreLocation | None, session: DaskSession) -> BlockwiseBackend:
        return _build(options, views, specs, kernels, normalize, location, session)

    return build_on_dask(build, views=views, store=store, storage_options=storage_options,
                         scheduler=scheduler)


def _build(options: BlockwiseOptions, views: list | None, specs: list | None, kernels: Any,
           normalize: bool, location: StoreLocation | None,
           session: DaskSession) -> BlockwiseBackend:
    """The store opened (or built) in ``session``, and the backend on it."""
    if kernels is not None:
        m, n = int(kernels.shape[0]), int(kernels.shape[1])
        # (dask kernels: the fingerprint reads them slab by slab, as the build kernel by
        # kernel; never all of them at once)
        stacked = kernels.reshape(m * n, n) if hasattr(kernels, "dask") else \
            np.asarray(kernels).reshape(m * n, n)
        common = dict(source="precomputed", n=n, m=m, request=None, fingerprint_of=[stacked])

        def build(parts: dict) -> Any:
            return build_from_precomputed(kernels, normalize=normalize, **parts)
    else:
        views = list(views)
        common = dict(source="views", n=int(views[0].shape[0]), m=len(specs),
                      request=[s.to_dict() for s in specs], fingerprint_of=views)

        def build(parts: dict) -> Any:
            return build_from_views(views, specs, normalize=normalize, **parts)

    group, location, temp_dir, built, timings = open_or_build(
        **common, normalize=normalize, location=location, session=session, options=options,
        build=build)
    backend = BlockwiseBackend(session, group, location, temp_dir=temp_dir, built=built,
                               options=options)
    backend.train_views = None if views is None else list(views)
    backend.timings.update(timings)
    return backend
