"""The four other multiple kernel methods of the paper's Table 2 under its protocol, and
the extra column SimpleMKKM.

:mod:`mkrk_dask.protocol` runs SB-KKM, A-MKKM and MKKM-RK; this module runs MKKM, LMKKM,
RMKKM and MKKM-MR on the same kernels, each with the parameter grid its own paper gives, and
SimpleMKKM (not in the paper's table; no parameter) with its authors' settings, and returns
each method's entry of the report (best-of-R and mean +- std, chosen parameter,
iterations). The choices the papers leave open are written next to each function and in
``docs/methods.rst``.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable, Sequence
from concurrent.futures import Executor, Future
from typing import Any

import numpy as np

from ..assignment import repeated_assignments
from ..backends.base import KernelBackend
from ..dense_methods import lmkkm, rmkkm
from ..estimators import MKKMMR, SimpleMKKM
from ..exceptions import UncertifiedSolutionWarning
from ..kernels import normalize_kernels
from ..loop import alternate
from ..metrics import clustering_scores
from ..results import search_record
from ..search import lambda_search, summarize_scores
from ..weight_steps import AverageResidualStep

__all__ = ["MKKM_MR_LAMBDAS", "RMKKM_GAMMAS", "run_mkkm", "run_mkkm_mr", "run_rmkkm",
           "run_lmkkm", "run_simple_mkkm", "centred_kernels"]

#: MKKM-MR's grid as its paper searches it: lambda in 2^-15, 2^-14, ..., 2^15
MKKM_MR_LAMBDAS = tuple(2.0 ** np.arange(-15, 16))
#: RMKKM's grid as its authors' code and the MKKM-RK authors' driver search it
RMKKM_GAMMAS = tuple(np.round(np.arange(1, 10) / 10, 1))


def _summary(y: np.ndarray, labels: Sequence[np.ndarray]) -> dict[str, dict[str, float]]:
    return summarize_scores([clustering_scores(y, lab) for lab in labels])


def _best(entries: list[dict[str, Any]]) -> int:
    """The entry with the best best-of-R ACC (the paper's choice; ties: the first)."""
    return int(np.argmax([item["summary"]["acc"]["best"] for item in entries]))


def run_mkkm(backend: KernelBackend, y: np.ndarray, k: int, repeats: int,
             seed: int) -> dict[str, Any]:
    """MKKM on the protocol's kernels: the alternating loop with the closed-form weights, then
    ``repeats`` runs of the final k-means on the unit rows of H (no parameter to search)."""
    result = alternate(backend, k, AverageResidualStep())
    H = backend.embedding(result.top)
    labels = repeated_assignments(H, k, repeats, random_state=seed)
    return {"summary": _summary(y, labels), "weights": result.weights.tolist(),
            "n_iter": int(result.n_iter), "converged": bool(result.converged),
            "objective_history": result.objective_history.tolist()}


def centred_kernels(kernels: np.ndarray) -> np.ndarray:
    """``J K J`` (``J = I - 11^T/n``) of every kernel, then unit diagonal: the preprocessing
    of the MKKM-MR authors' code (their ``kcenter`` then ``knorm``). A copy."""
    K = np.array(kernels, dtype=np.float64)
    for p in range(K.shape[0]):
        rows = K[p].mean(axis=1)
        K[p] -= rows[:, None]
        K[p] -= rows[None, :]
        K[p] += rows.mean()
    return normalize_kernels(K)


def run_mkkm_mr(kernels: np.ndarray, y: np.ndarray, k: int, repeats: int, seed: int,
                lams: Sequence[float] = MKKM_MR_LAMBDAS) -> dict[str, Any]:
    """MKKM-MR over its grid on the centred, normalised kernels (one backend, M once)."""
    estimator = MKKMMR.paper(k, kernels="precomputed", normalize=False, random_state=seed)
    per_lambda: list[dict[str, Any]] = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", UncertifiedSolutionWarning)
        lambda_search(estimator, centred_kernels(kernels), lams, y, n_repeats=repeats,
                      random_state=seed, callback=lambda res: per_lambda.append(
                          search_record(res)))
    best = _best(per_lambda)
    chosen = per_lambda[best]
    return {"per_lambda": per_lambda, "lam": chosen["lam"], "n_iter": chosen["n_iter"],
            "summary": chosen["summary"], "weights": chosen["weights"],
            "max_qp_relative_gap": max(item["max_qp_relative_gap"] for item in per_lambda),
            "uncertified_qp_warnings": int(sum(issubclass(w.category,
                                                          UncertifiedSolutionWarning)
                                               for w in caught))}


def run_rmkkm(kernels: np.ndarray, y: np.ndarray, k: int, repeats: int, seed: int,
              gammas: Sequence[float] = RMKKM_GAMMAS,
              executor: Executor | None = None) -> dict[str, Any]:
    """RMKKM over its grid of gamma. Its output is discrete labels, so each of the
    ``repeats`` runs is a whole fit from its own random start (as the authors' driver does,
    one replicate per repeat, at most 50 iterations).

    The fits are independent and single-threaded: with an ``executor`` (threads; the caller
    limits BLAS to one thread each) they run side by side, with the same seeds and results.
    """
    def fit(gamma: float, seed_sequence: np.random.SeedSequence) -> Any:
        # the protocol's kernels were validated when they were built: no check per fit
        return rmkkm(kernels, k, gamma=gamma, max_iter=50, check_input=False,
                     random_state=int(seed_sequence.generate_state(1)[0]))

    submit = executor.submit if executor is not None else _run_now
    start = time.perf_counter()
    pending = [[submit(fit, float(gamma), s) for s in np.random.SeedSequence(seed).spawn(repeats)]
               for gamma in gammas]
    per_gamma = []
    for gamma, futures in zip(gammas, pending, strict=True):
        fits = [f.result() for f in futures]
        per_gamma.append({"gamma": float(gamma),
                          "summary": _summary(y, [f.labels for f in fits]),
                          "n_iter": int(np.median([f.n_iter for f in fits])),
                          "weights": np.mean([f.weights for f in fits], axis=0).tolist(),
                          # side by side, a gamma's own time is not separable: the
                          # time until its last fit is in
                          "seconds": time.perf_counter() - start})
    best = _best(per_gamma)
    chosen = per_gamma[best]
    return {"per_gamma": per_gamma, "gamma": chosen["gamma"], "n_iter": chosen["n_iter"],
            "summary": chosen["summary"], "weights": chosen["weights"]}


def _run_now(function: Callable[..., Any], *args: Any) -> Future:
    """A finished future of ``function(*args)``: the executor-less path of the runners."""
    future: Future = Future()
    future.set_result(function(*args))
    return future


def run_lmkkm(kernels: np.ndarray, y: np.ndarray, k: int, repeats: int,
              seed: int) -> dict[str, Any]:
    """LMKKM (no parameter): one fit of the gating (it is deterministic from equal weights),
    then ``repeats`` runs of the final k-means on the unit rows of its H."""
    result = lmkkm(kernels, k, max_iter=100, random_state=seed, check_input=False)
    labels = repeated_assignments(np.asarray(result.embedding), k, repeats, random_state=seed)
    return {"summary": _summary(y, labels), "n_iter": int(result.n_iter),
            "converged": bool(result.converged),
            "mean_gating": np.asarray(result.gating).mean(axis=0).tolist(),
            "max_qp_relative_gap": float(np.max(result.qp_relative_gaps))
            if len(result.qp_relative_gaps) else 0.0,
            "objective_history": np.asarray(result.objective_history).tolist()}


def run_simple_mkkm(kernels: np.ndarray, y: np.ndarray, k: int, repeats: int,
                    seed: int) -> dict[str, Any]:
    """SimpleMKKM (no parameter): one fit with its authors' settings
    (:meth:`SimpleMKKM.paper <mkrk_dask.SimpleMKKM.paper>`: their reduced-gradient step and
    line search, equal starting weights) on the kernels centred and then normalised as their
    demo does (:func:`centred_kernels`), then ``repeats`` runs of the final k-means on the
    unit rows of its H, as for MKKM.

    The fit is deterministic: its weights are those of
    ``SimpleMKKM.paper(k, kernels="precomputed", normalize=False).fit(centred_kernels(K))``.
    """
    estimator = SimpleMKKM.paper(k, kernels="precomputed", normalize=False, random_state=seed)
    with warnings.catch_warnings():
        # centred and normalised PSD kernels: the sampled PSD check's notice says nothing here
        warnings.filterwarnings("ignore", message="precomputed kernels of .* rows are checked",
                                category=UserWarning)
        backend, _ = estimator.build_backend(centred_kernels(kernels))
    with backend:
        result = estimator.solve(backend)
        H = backend.embedding(result.top)
    labels = repeated_assignments(H, k, repeats, random_state=seed)
    gaps = np.asarray(result.qp_relative_gaps, dtype=np.float64)
    return {"summary": _summary(y, labels), "weights": result.weights.tolist(),
            "n_iter": int(result.n_iter), "converged": bool(result.converged),
            "h_steps": int(result.h_steps),
            "optimality_gap": float(gaps[-1]) if gaps.size else None,
            "objective_history": result.objective_history.tolist()}
