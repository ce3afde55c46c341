"""Top-k symmetric eigensolvers. None of them computes a full eigendecomposition."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import scipy.linalg
import scipy.linalg.blas
import scipy.sparse.linalg

from ._threads import local_threads

__all__ = ["top_k_dense", "block_krylov_top_k", "fix_signs", "eigen_method_for",
           "SINGLE_THREAD_MAX_N", "LAPACK_MAX_N"]

#: up to this order a dense symmetric problem is solved on one BLAS thread
SINGLE_THREAD_MAX_N = 4000
#: ``method="auto"``: LAPACK up to this order (and wherever ``3 k >= n``), ARPACK above
LAPACK_MAX_N = 500


def eigen_method_for(method: str, n: int, k: int) -> str:
    """The solver :func:`top_k_dense` uses for the ``k`` largest eigenpairs of an ``n x n``
    matrix: ``method`` itself, or for ``"auto"`` ARPACK (``"lanczos"``) above
    :data:`LAPACK_MAX_N` while ``3 k < n``, else ``"lapack"``. The one rule: the fit's plan
    shows its result (:func:`mkrk_dask.plan.make_plan`), and a backend given ``"auto"``
    resolves it here at each call."""
    if method == "auto":
        return "lanczos" if n > LAPACK_MAX_N and 3 * k < n else "lapack"
    return method


def fix_signs(vectors: np.ndarray) -> np.ndarray:
    """Flip columns so that each column's largest-magnitude entry is positive.

    Eigenvectors are defined up to sign; a fixed convention makes results of different
    backends directly comparable.
    """
    idx = np.argmax(np.abs(vectors), axis=0)
    signs = np.sign(vectors[idx, np.arange(vectors.shape[1])])
    signs[signs == 0] = 1.0
    return vectors * signs


def _symmetric_operator(A: np.ndarray) -> scipy.sparse.linalg.LinearOperator:
    """``x -> A @ x`` by BLAS ``dsymv``, which reads one triangle of the symmetric ``A``.

    The products are memory-bound, so reading half the matrix makes each one faster than
    ``dgemv`` (the eigensolver phase of ``benchmarks/results/exact/iteration.md``).
    """
    if A.dtype != np.float64:
        return scipy.sparse.linalg.aslinearoperator(A)
    # A is symmetric: its transpose is the same matrix, Fortran-ordered without a copy.
    lower = np.asfortranarray(A.T)
    symv = scipy.linalg.blas.dsymv
    return scipy.sparse.linalg.LinearOperator(
        A.shape, matvec=lambda x: symv(1.0, lower, np.ravel(x), lower=1), dtype=np.float64)


def top_k_dense(
    A: np.ndarray, k: int, warm_start: np.ndarray | None = None, method: str = "auto",
    tol: float = 1e-10, triangle: str = "full",
) -> tuple[np.ndarray, np.ndarray]:
    """The ``k`` largest eigenpairs of a dense symmetric matrix.

    Parameters
    ----------
    A : ndarray of shape (n, n)
        Symmetric (C-contiguous float64 with ``triangle="upper"``).
    k : int
    warm_start : ndarray of shape (n, k), optional
        The previous iteration's eigenvectors (the dominant subspace moves little between
        iterations of the alternating loop).
    method : {"auto", "lapack", "krylov", "lanczos"}
        ``lapack``: LAPACK ``syevr`` restricted to the top ``k`` (a tridiagonal reduction, then
        only ``k`` eigenvectors). ``krylov``: :func:`block_krylov_top_k`, warm-started.
        ``lanczos``: ARPACK, started from the sum of the warm-start columns. ``auto``
        (:func:`eigen_method_for`): LAPACK up to n = 500, ARPACK above (measured 4-7x faster
        than LAPACK and than the block Krylov solver on COIL20 by
        ``benchmarks/bench_iteration.py``, with the same accuracy);
        :func:`block_krylov_top_k` serves where the products run on Dask workers. Issue 77
        measured again on the loop's four K_w of COIL20 (n = 1,440, k = 20, one thread): ARPACK
        takes 64 products (53 at tol 1e-10) whatever the start vector or ``ncv`` (41 to 100),
        35 ms CPU per solve of which the products (``dsymv``, 0.45 ms each) are 27; a Lanczos
        with full reorthogonalisation and no restart took 56-60 products and 32 ms; block
        Krylov from the previous H 130-450 ms (the gap lambda_21 / lambda_20 is 0.95-0.97);
        LAPACK ``evr`` 370-450 ms. The eigensolver is bound by its products.
    tol : float
        Relative residual tolerance of the iterative methods.
    triangle : {"full", "upper"}
        ``"upper"``: only the upper triangle of ``A`` (diagonal included) holds the matrix,
        the rest is ignored (LAPACK and ARPACK's products read that triangle alone; the
        block Krylov solver mirrors it into the lower one first, in place).

    Returns
    -------
    eigenvalues : ndarray of shape (k,), descending
    eigenvectors : ndarray of shape (n, k), orthonormal, sign-normalised by :func:`fix_signs`
    """
    n = A.shape[0]
    if not 1 <= k <= n:
        raise ValueError(f"k must be in [1, n={n}], got {k}")
    method = eigen_method_for(method, n, k)
    if triangle not in ("full", "upper"):
        raise ValueError(f"unknown triangle {triangle!r}; expected 'full' or 'upper'")
    if method == "lapack":
        values, vectors = scipy.linalg.eigh(A, subset_by_index=[n - k, n - 1], driver="evr",
                                            check_finite=False, lower=triangle != "upper")
    elif method == "krylov":
        if triangle == "upper":
            from .kernels import mirror_upper

            A = mirror_upper(A)
        values, vectors, info = block_krylov_top_k(A.__matmul__, n, k, start=warm_start,
                                                   depth=4, tol=tol)
        if not info["converged"]:
            # A dense matrix can always afford the direct method; never return a basis that
            # did not meet the tolerance.
            return top_k_dense(A, k, method="lapack")  # A is whole by now
    elif method == "lanczos":
        # A fixed start without a warm one: ARPACK's own random start depends on what ran
        # before in the process, and a resumed fit must repeat the same steps.
        v0 = np.ones(n) if warm_start is None else warm_start.sum(axis=1)
        if triangle == "upper" and not (A.dtype == np.float64 and A.flags.c_contiguous):
            from .kernels import mirror_upper  # a product of the whole matrix follows

            A = mirror_upper(np.array(A, dtype=np.float64))
        # ARPACK's one-vector products are too small for threaded BLAS to pay: on COIL20
        # (n = 1440) one thread takes half the time of two (the threads mostly synchronise).
        with local_threads(1 if n <= SINGLE_THREAD_MAX_N else None):
            values, vectors = scipy.sparse.linalg.eigsh(_symmetric_operator(A), k=k,
                                                        which="LA", v0=v0, tol=tol * 1e-2)
    else:
        raise ValueError(f"unknown eigensolver method {method!r}")
    order = np.argsort(values)[::-1]
    return values[order], fix_signs(vectors[:, order])


def block_krylov_top_k(
    apply: Callable[[np.ndarray], np.ndarray],
    n: int,
    k: int,
    *,
    start: np.ndarray | None = None,
    oversample: int = 10,
    depth: int = 3,
    tol: float = 1e-10,
    max_restarts: int = 100,
    random_state: int = 0,
) -> tuple[np.ndarray, np.ndarray, dict[str, Any]]:
    """Top-k eigenpairs of a symmetric PSD operator, by restarted block Krylov iteration.

    Each restart builds an orthonormal block Krylov basis ``[V, AV, ..., A^(depth-1) V]``
    (``depth`` products of A with a block of ``b = k + oversample`` columns), extracts Ritz
    pairs by Rayleigh-Ritz, and restarts from the top ``b`` Ritz vectors. The products with A
    are the only access to the operator, so A may live on Dask workers. Warm-started from the
    previous H of the alternating loop, it typically converges in one or two restarts.

    Parameters
    ----------
    apply : callable
        ``apply(V)`` returns ``A @ V`` for an ``(n, b)`` block.
    n, k : int
        Order of A and number of eigenpairs wanted.
    start : ndarray of shape (n, j), optional
        Start block (e.g. the previous eigenvectors); padded with random columns to ``b``.
        Random columns guard against a start block blind to an eigenvector that has just
        moved into the top k.
    oversample, depth : int
        Extra columns in the block, and Krylov blocks per restart.
    tol : float
        Convergence test on the subspace: every one of the top-k Ritz pairs has
        ``||A v - theta v|| <= tol * theta_1``.
    max_restarts : int
    random_state : int
        Seeds the random columns (results are repeatable).

    Returns
    -------
    eigenvalues : ndarray (k,), descending
    eigenvectors : ndarray (n, k), sign-normalised
    info : dict with ``restarts``, ``products`` (number of blocks multiplied by A),
        ``residual`` (largest relative residual) and ``converged``.
    """
    b = min(k + oversample, n)
    rng = np.random.default_rng(random_state)
    blocks = [] if start is None else [np.asarray(start, dtype=np.float64)[:, :b]]
    have = 0 if start is None else blocks[0].shape[1]
    if have < b:
        blocks.append(rng.standard_normal((n, b - have)))
    V = np.linalg.qr(np.hstack(blocks))[0]
    info: dict[str, Any] = {"restarts": 0, "products": 0, "residual": np.inf,
                            "converged": False}
    values = vectors = None
    for restart in range(1, max_restarts + 1):
        basis, images = [], []
        current = V
        for level in range(depth):
            image = apply(current)
            info["products"] += 1
            basis.append(current)
            images.append(image)
            if level == depth - 1 or sum(q.shape[1] for q in basis) + b > n:
                break
            # Next Krylov block: A V orthogonalised against the basis so far (twice, for
            # numerical orthogonality), then orthonormalised.
            nxt = image
            for _ in range(2):
                for q in basis:
                    nxt = nxt - q @ (q.T @ nxt)
            nxt, r = np.linalg.qr(nxt)
            keep = np.abs(np.diag(r)) > 1e-12 * max(np.abs(np.diag(r)).max(), 1e-300)
            if not keep.any():
                break
            current = nxt[:, keep]
        Q = np.hstack(basis)
        AQ = np.hstack(images)
        T = Q.T @ AQ
        theta, S = np.linalg.eigh(0.5 * (T + T.T))
        order = np.argsort(theta)[::-1][:b]
        theta, S = theta[order], S[:, order]
        U = Q @ S
        residual = AQ @ S[:, :k] - U[:, :k] * theta[:k]
        scale = max(abs(theta[0]), 1e-300)
        worst = float(np.linalg.norm(residual, axis=0).max() / scale)
        info.update(restarts=restart, residual=worst)
        values, vectors = theta[:k], U[:, :k]
        if worst <= tol:
            info["converged"] = True
            break
        V = np.linalg.qr(U)[0]
    return values, fix_signs(vectors), info
