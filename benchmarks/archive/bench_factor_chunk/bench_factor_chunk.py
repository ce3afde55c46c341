"""One factor chunk of the Nystrom Gram pass, piece by piece (issue #17).

The model is the one the default fit builds on ``bench_scale.py``'s synthetic data (n = 10^5,
4 views of 64 features, the library's default dictionary of 16 kernels, 500 landmarks per
view, float32 factors, R capped at 2,048). On one chunk of 4,096 new rows, one BLAS thread,
median of ``--repeats``, in one run:

- the factors as before git 47915c5 (``factor_layout="plain"``: the strong columns not
  rotated, float64 kernel values), with the strong columns rotated to a triangle, with both
  that and float32 kernel values, and with the linear kernels' factors from their features
  as well (``NystromModel._feature_parts``, git fa82a38: the default); the first three take
  every kernel through its kernel block, and the float32 values keep the landmarks' side of
  the distances (git 33c3a5e);
- the chunk's Gram product ``F^T F`` (``syrk``);
- two threads side by side, each evaluating the factors of 3 chunks and their Gram
  products in turn, once through scipy's f2py ``ssyrk`` (which holds the GIL) and once
  through :func:`mkrk_dask._lapack.syrk_upper` (which releases it): the wall time and the
  factor time of a chunk in each case.

Writes ``benchmarks/results/scale/factor_chunk.md``.

    python benchmarks/archive/bench_factor_chunk/bench_factor_chunk.py [--repeats 7]
"""

from __future__ import annotations

import sys
from pathlib import Path

# An archived study (benchmarks/README.md, "Archive"): benchmarks/ and the other studies importable
sys.path.insert(1, str(Path(__file__).resolve().parents[2]))
sys.path.extend(str(p) for p in sorted(Path(__file__).resolve().parents[1].glob("bench_*")))

import argparse
import dataclasses
import tempfile
import threading
import time

import numpy as np
import scipy.linalg.blas
from threadpoolctl import threadpool_limits

from mkrk_dask._lapack import syrk_upper
from mkrk_dask.backends.nystrom import NystromBackend
from mkrk_dask.dask_session import DaskSession
from mkrk_dask.plan import auto_kernels
from mkrk_dask.synthetic import make_multiview_blobs

from _common import now, write_report

VIEWS = dict(n_informative=2, n_noise=1, n_redundant=1, n_features=64)
CHUNK = 4096


def default_model(n: int, seed: int):
    views = make_multiview_blobs(n, 10, random_state=seed, **VIEWS)[0]
    session = DaskSession()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            backend = NystromBackend.from_views(
                views, auto_kernels(["euclidean"] * 4), store=f"{tmp}/f.zarr",
                scheduler=session.client, n_landmarks=500, dtype="float32",
                random_state=seed, overwrite=True)
            model = backend.model
            backend.close()
    finally:
        session.close()
    return model


def median_seconds(run, repeats: int) -> float:
    run()  # warm: caches, pages
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        run()
        times.append(time.perf_counter() - t0)
    return float(np.median(times))


def two_threads(model, rows, gram, chunks: int = 3) -> tuple[float, float]:
    """Two threads, each evaluating the factors of ``chunks`` chunks and their Gram products
    in turn (as the pass's tasks do): the wall time, and the factors' mean seconds a chunk."""
    factor_seconds = []
    lock = threading.Lock()

    def work() -> None:
        mine = 0.0
        for _ in range(chunks):
            t0 = time.perf_counter()
            model.factors(rows)
            mine += time.perf_counter() - t0
            gram()
        with lock:
            factor_seconds.append(mine / chunks)

    workers = [threading.Thread(target=work) for _ in range(2)]
    t0 = time.perf_counter()
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    return time.perf_counter() - t0, float(np.mean(factor_seconds))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    started = now()
    model = default_model(100_000, args.seed)
    rows = [np.ascontiguousarray(v, dtype=np.float64) for v in make_multiview_blobs(
        CHUNK, 10, random_state=args.seed + 1, **VIEWS)[0]]
    fresh = {"_products": None, "_single": None, "_train_factors": None}
    variants = {
        "plain (before 47915c5)": dataclasses.replace(model, factor_layout="plain", **fresh),
        "strong columns rotated": dataclasses.replace(model, **fresh),
        "rotated + float32 values": dataclasses.replace(model, **fresh),
        "+ linear kernels by their features (default)": dataclasses.replace(model, **fresh),
    }
    variants["strong columns rotated"]._single = set()  # float64 kernel values
    for name in ("plain (before 47915c5)", "strong columns rotated", "rotated + float32 values"):
        variants[name]._features = {}  # every kernel through its kernel block
    R = model.n_components
    F = model.factors(rows)
    scratch = np.zeros((R, R), dtype=F.dtype, order="F")

    def wrapped_syrk(out: np.ndarray) -> None:
        scipy.linalg.blas.ssyrk(1.0, F.T, beta=0.0, c=out, trans=0, lower=0, overwrite_c=1)

    def per_thread(product):
        buffers = {}

        def gram() -> None:  # one output buffer per thread
            out = buffers.setdefault(threading.get_ident(), np.zeros_like(scratch))
            product(out)
        return gram

    with threadpool_limits(1):
        seconds = {name: median_seconds(lambda m=m: m.factors(rows), args.repeats)
                   for name, m in variants.items()}
        gram = median_seconds(lambda: syrk_upper(F, scratch), args.repeats)
        two_threads(model, rows, per_thread(lambda out: syrk_upper(F, out)), 1)  # warm
        beside = {"scipy's ssyrk (GIL held)": two_threads(model, rows,
                                                          per_thread(wrapped_syrk)),
                  "syrk_upper (GIL released)": two_threads(
                      model, rows, per_thread(lambda out: syrk_upper(F, out)))}
    base = seconds["plain (before 47915c5)"]
    lines = [f"| {name} | {1e3 * s:.1f} | {base / s:.2f}x | {s / gram:.2f} |"
             for name, s in seconds.items()]
    lines.append(f"| the chunk's Gram product `F^T F` (syrk) | {1e3 * gram:.1f} | | 1.00 |")
    alone = seconds["+ linear kernels by their features (default)"]
    side = [f"| {name} | {wall:.2f} | {1e3 * f:.1f} | {f / alone:.2f} |"
            for name, (wall, f) in beside.items()]
    body = (
        f"Synthetic data as `bench_scale.py` (4 views of 64 features), the model of the default "
        f"fit at n = 100,000 ({len(model.specs)} kernels, R = {R}, ranks "
        f"{model.ranks.tolist()}, views in float32: {sorted(model.single_views())}); one "
        f"chunk of {CHUNK:,} new rows, one BLAS thread, median of {args.repeats}.\n\n"
        "| step | ms | speed-up | / Gram product |\n|---|---|---|---|\n"
        + "\n".join(lines) + "\n\n"
        "Two threads, each evaluating the default factors of 3 chunks and their Gram products "
        "in turn (as the pass's tasks do):\n\n"
        "| Gram product | wall s | factors ms a chunk | / one thread alone |\n"
        "|---|---|---|---|\n"
        + "\n".join(side) + "\n")
    path = write_report("scale", "factor_chunk", "One factor chunk of the Nystrom Gram pass",
                        body, started=started)
    print(body)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
