"""A plain reference implementation of MKKM-RK, written the way a straightforward port works.

This is deliberately *not* how :mod:`mkrk_dask` does it. It mirrors what a direct port of the
authors' MATLAB code does (the paper's Algorithm 1), so that the library can be checked
against it (``tests/backends/test_reference.py``) and timed against it
(``benchmarks/bench_iteration.py``, which imports it from here through
``benchmarks/_common.reference_implementation``):

- the base kernels are a Python list of dense ``n x n`` arrays;
- ``K_w = sum_p w_p^2 K_p`` is accumulated by a Python loop;
- the H-step is a FULL eigendecomposition (``np.linalg.eigh``) of ``K_w`` every iteration,
  of which only the ``k`` leading eigenvectors are kept;
- ``d_p = tr(K_p (I - H H^T))`` with explicit ``n x n`` matrix products, as the MATLAB code;
- the Y-step QP is solved by ``scipy.optimize.minimize(method="SLSQP")`` over ``vec(Y)``
  with the analytic gradient, bounds ``Y >= 0`` and the column-sum equality constraints (with
  their constant Jacobian), warm-started from the previous Y, at a tight ``ftol``;
- the objective ``f = sum_p w_p^2 d_p + lam <C, Y>`` is recorded every iteration; the loop stops
  when ``|f_t - f_{t-1}| < tol`` (absolute, 1e-5) or after 100 iterations.

Nothing here imports the library's solver, eigensolver or QP; only plain numpy / scipy.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np
from scipy.optimize import minimize

__all__ = [
    "ReferenceResult",
    "fip_dissimilarity",
    "combined_kernel",
    "full_eig_top_k",
    "residuals",
    "slsqp_y_step",
    "reference_iteration",
    "reference_mkkmrk",
]


@dataclass
class ReferenceResult:
    """What :func:`reference_mkkmrk` returns."""

    weights: np.ndarray
    Y: np.ndarray
    H: np.ndarray
    objective_history: np.ndarray
    n_iter: int
    converged: bool
    C: np.ndarray
    slsqp_status: list[int] = field(default_factory=list)
    timings: dict[str, float] = field(default_factory=dict)


def fip_dissimilarity(kernels: list[np.ndarray]) -> np.ndarray:
    """``C_ij = tr(K_i^T K_j)`` (the paper's "fip"), entry by entry.

    ``tr(A^T B) = sum(A * B)``; the elementwise form is used so that setting up C does not
    dominate a benchmark whose subject is the iteration.
    """
    m = len(kernels)
    C = np.zeros((m, m))
    for i in range(m):
        for j in range(i, m):
            C[i, j] = C[j, i] = float(np.sum(kernels[i] * kernels[j]))
    return C


def combined_kernel(kernels: list[np.ndarray], weights: np.ndarray) -> np.ndarray:
    """``K_w = sum_p w_p^2 K_p`` by a Python loop over the kernels."""
    Kw = np.zeros_like(kernels[0])
    for p, K in enumerate(kernels):
        Kw += weights[p] ** 2 * K
    return Kw


def full_eig_top_k(Kw: np.ndarray, k: int) -> np.ndarray:
    """The ``k`` leading eigenvectors of ``K_w`` from a full eigendecomposition."""
    Kw = 0.5 * (Kw + Kw.T)
    _, vectors = np.linalg.eigh(Kw)  # ascending eigenvalues
    return vectors[:, ::-1][:, :k].copy()


def residuals(kernels: list[np.ndarray], H: np.ndarray) -> np.ndarray:
    """``d_p = tr(K_p (I - H H^T))`` with explicit ``n x n`` products, as the MATLAB code."""
    n = H.shape[0]
    P = np.eye(n) - H @ H.T
    return np.array([np.trace(K @ P) for K in kernels])


def qp_objective(Y: np.ndarray, d: np.ndarray, C: np.ndarray, lam: float) -> float:
    """``(1/m^2) sum_i d_i s_i^2 + lam <C, Y>``, ``s = Y 1`` (= ``sum_p w_p^2 d_p + ...``)."""
    m = C.shape[0]
    s = Y.sum(axis=1)
    return float(np.dot(d, s * s) / m**2 + lam * np.sum(C * Y))


def slsqp_y_step(d: np.ndarray, C: np.ndarray, lam: float, Y0: np.ndarray, *,
                 ftol: float = 1e-12, maxiter: int = 1000) -> tuple[np.ndarray, int]:
    """The Y-step QP by SLSQP over ``vec(Y)`` (row-major), warm-started at ``Y0``.

    minimize ``(1/m^2) s^T diag(d) s + lam <C, Y>`` s.t. every column of Y sums to 1, Y >= 0.

    SLSQP's ``ftol`` is an absolute precision on the objective; it is applied to the objective
    divided by its value at ``Y0`` (a plain rescaling, so that "tight" means the same on every
    data set). Returns ``(Y, status)`` with SLSQP's exit status (0: converged).
    """
    m = C.shape[0]
    scale = max(abs(qp_objective(Y0, d, C, lam)), 1e-300)
    linear = (lam * C).ravel()

    def fun(x: np.ndarray) -> float:
        Y = x.reshape(m, m)
        s = Y.sum(axis=1)
        return (float(np.dot(d, s * s)) / m**2 + float(np.dot(linear, x))) / scale

    def jac(x: np.ndarray) -> np.ndarray:
        Y = x.reshape(m, m)
        s = Y.sum(axis=1)
        G = (2.0 / m**2) * (d * s)[:, None] + lam * C
        return G.ravel() / scale

    # Column j of Y is x[j::m]: A[j, i*m + j] = 1.
    A = np.zeros((m, m * m))
    for j in range(m):
        A[j, j::m] = 1.0
    constraint = {"type": "eq", "fun": lambda x: A @ x - 1.0, "jac": lambda x: A}
    res = minimize(fun, Y0.ravel(), jac=jac, method="SLSQP", bounds=[(0.0, None)] * (m * m),
                   constraints=[constraint], options={"ftol": ftol, "maxiter": maxiter})
    Y = np.maximum(res.x.reshape(m, m), 0.0)
    return Y, int(res.status)


def reference_iteration(kernels: list[np.ndarray], C: np.ndarray, weights: np.ndarray,
                        Y_prev: np.ndarray, k: int, lam: float,
                        timings: dict[str, float] | None = None):
    """One alternating iteration: H-step, residuals, Y-step.

    Returns ``(weights, Y, H, objective, slsqp_status)``; adds seconds per phase
    (``combine``, ``eigh``, ``residuals``, ``qp``) to ``timings`` when given.
    """
    m = len(kernels)
    t0 = time.perf_counter()
    Kw = combined_kernel(kernels, weights)
    t1 = time.perf_counter()
    H = full_eig_top_k(Kw, k)
    t2 = time.perf_counter()
    d = residuals(kernels, H)
    t3 = time.perf_counter()
    Y, status = slsqp_y_step(d, C, lam, Y_prev)
    t4 = time.perf_counter()
    if timings is not None:
        for key, dt in (("combine", t1 - t0), ("eigh", t2 - t1), ("residuals", t3 - t2),
                        ("qp", t4 - t3)):
            timings[key] = timings.get(key, 0.0) + dt
    new_weights = Y.sum(axis=1) / m
    return new_weights, Y, H, qp_objective(Y, d, C, lam), status


def reference_mkkmrk(kernels: list[np.ndarray], k: int, lam: float, *, tol: float = 1e-5,
                     max_iter: int = 100, C: np.ndarray | None = None) -> ReferenceResult:
    """Plain MKKM-RK: start at ``w = 1/m`` (``Y = I``), alternate until ``|df| < tol``.

    Parameters
    ----------
    kernels : list of (n, n) arrays
        The (normalised) base kernels.
    k : int
        Number of clusters.
    lam : float
        Trade-off lambda.
    tol : float
        Absolute tolerance on the change of the objective (the paper's 1e-5).
    max_iter : int
    C : (m, m) array, optional
        The dissimilarity; "fip" computed here when omitted.
    """
    kernels = [np.asarray(K, dtype=np.float64) for K in kernels]
    m = len(kernels)
    timings: dict[str, float] = {}
    t = time.perf_counter()
    if C is None:
        C = fip_dissimilarity(kernels)
    timings["dissimilarity"] = time.perf_counter() - t
    weights = np.full(m, 1.0 / m)
    Y = np.eye(m)  # one-hot Y whose row means are all 1/m
    history: list[float] = []
    statuses: list[int] = []
    converged = False
    H = None
    for _ in range(max_iter):
        weights, Y, H, f, status = reference_iteration(kernels, C, weights, Y, k, lam, timings)
        history.append(f)
        statuses.append(status)
        if len(history) > 1 and abs(history[-1] - history[-2]) < tol:
            converged = True
            break
    return ReferenceResult(weights=weights, Y=Y, H=H, objective_history=np.asarray(history),
                           n_iter=len(history), converged=converged, C=C,
                           slsqp_status=statuses, timings=timings)
