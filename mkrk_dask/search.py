"""Reusing one backend: a lambda grid search (kernels and C built once, then the loop for every
lambda), and building a kernel store ahead of fits (:func:`build_store`)."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from numbers import Integral
from typing import Any

import numpy as np
from sklearn.utils._param_validation import HasMethods, Interval

from .assignment import repeated_assignments
from .loop import selected_kernels
from .metrics import check_labels_present, clustering_scores
from .validation import Phrased, check_lambda, constrained

__all__ = ["LambdaResult", "lambda_search", "paper_lambda_grid", "summarize_scores",
           "build_store", "StoreInfo"]


def paper_lambda_grid() -> np.ndarray:
    """The paper's grid of lambdas: 2^-15, 2^-14, ..., 2^5 (21 values)."""
    return 2.0 ** np.arange(-15, 6)


@dataclass
class LambdaResult:
    """One lambda of a grid search."""

    lam: float
    weights: np.ndarray
    representation: np.ndarray | None
    objective_history: np.ndarray
    n_iter: int
    converged: bool
    max_qp_relative_gap: float
    labels: list[np.ndarray]
    scores: list[dict[str, float]] = field(default_factory=list)
    seconds: float = 0.0
    #: Nystrom only: the share of the trace of K_w its factors miss (see ``MKKMRK``)
    nystrom_missed_fraction: float | None = None

    @property
    def n_selected(self) -> int:
        """Number of selected kernels (weight >= ``SELECTION_THRESHOLD``)."""
        return int(selected_kernels(self.weights).size)


def summarize_scores(scores: Sequence[dict[str, float]]) -> dict[str, dict[str, float]]:
    """Best, mean and standard deviation of every metric over repeats."""
    out = {}
    for key in scores[0]:
        values = np.array([s[key] for s in scores])
        out[key] = {"best": float(values.max()), "mean": float(values.mean()),
                    "std": float(values.std())}
    return out


@constrained({
    "estimator": Phrased("an estimator of mkrk_dask", HasMethods(["get_params",
                                                                  "build_backend"])),
    "X": "no_validation",  # the estimator's
    "lams": [None, "array-like"],
    "y": [None, "array-like"],
    "n_repeats": Phrased("an integer >= 1", Interval(Integral, 1, None, closed="left")),
    "random_state": Phrased("an int >= 0 or None", None,
                            Interval(Integral, 0, None, closed="left")),
    "callback": [None, callable],
})
def lambda_search(
    estimator: Any,
    X: Any,
    lams: Sequence[float] | None = None,
    y: Any = None,
    *,
    n_repeats: int = 1,
    random_state: int | None = 0,
    callback: Callable[[LambdaResult], None] | None = None,
) -> list[LambdaResult]:
    """Fit a method with a lambda (MKKM-RK, MKKM-MR) for every lambda of a grid, paying for
    the kernels and C (or M) once.

    Parameters
    ----------
    estimator : MKKMRK or MKKMMR
        Supplies every setting but ``lam`` (its backend is built once from ``X``); the final
        step is the paper's (unit rows of H), as in the paper's protocol.
    X : input accepted by ``estimator.fit``
    lams : sequence of float, optional
        Defaults to the paper's grid :func:`paper_lambda_grid`.
    y : array-like, optional
        True labels; when given, every repeat is scored (ACC, NMI, purity).
    n_repeats : int
        Repeats of the final k-means per lambda (the paper: 20).
    random_state : int or None
        Seeds the repeats (the same seeds for every lambda).
    callback : callable, optional
        Called with each :class:`LambdaResult` as it completes.

    Returns
    -------
    list of LambdaResult, in the order of ``lams``
    """
    lams = paper_lambda_grid() if lams is None else [check_lambda(float(v)) for v in lams]
    if not len(lams):
        raise ValueError("lams is empty: give at least one lambda")
    if "lam" not in estimator.get_params():
        raise ValueError(f"{estimator.method} has no lambda to search; lambda_search takes "
                         "MKKMRK or MKKMMR")
    if isinstance(estimator.kernels, str) and estimator.kernels == "auto":
        raise ValueError("lambda_search needs the kernels given ('paper' or a list): "
                         "kernels='auto' chooses a dictionary per fit; e.g. MKKMRK.paper(k)")
    if y is not None:
        y = np.asarray(y).ravel()
        check_labels_present(y, "y")  # here, not in the scores after the whole search
    backend, n_samples = estimator.build_backend(X)
    if y is not None and y.shape[0] != n_samples:
        backend.close()
        raise ValueError(f"y has {y.shape[0]} labels for {n_samples} samples")
    results = []
    with backend:
        inputs = estimator.loop_inputs(backend)
        for lam in lams:
            start = time.perf_counter()
            res = estimator.solve_lambda(backend, inputs, lam)
            H = backend.embedding(res.top)
            labels = repeated_assignments(H, estimator.n_clusters, n_repeats,
                                          n_init=estimator.n_init, random_state=random_state)
            report = backend.approximation(res.weights)
            scores = [clustering_scores(y, lab) for lab in labels] if y is not None else []
            item = LambdaResult(
                lam=lam, weights=res.weights, representation=res.representation,
                objective_history=res.objective_history, n_iter=res.n_iter,
                converged=res.converged, max_qp_relative_gap=float(res.qp_relative_gaps.max()),
                labels=labels, scores=scores, seconds=time.perf_counter() - start,
                nystrom_missed_fraction=None if report is None else report.missed_fraction)
            results.append(item)
            if callback is not None:
                callback(item)
    return results


@dataclass
class StoreInfo:
    """What :func:`build_store` did."""

    path: str
    solver: str
    reused: bool
    seconds: float
    nbytes: int


def build_store(estimator: Any, X: Any) -> StoreInfo:
    """Build the kernel store of ``X`` with ``estimator``'s settings (``solver`` blockwise or
    nystrom, and ``store``), or find the complete one already there; later fits and searches
    with the same settings reuse it instead of recomputing."""
    from pathlib import Path

    if estimator.solver not in ("blockwise", "nystrom") or estimator.store is None:
        raise ValueError("building a store needs solver='blockwise' or 'nystrom' and a store "
                         "path")
    start = time.perf_counter()
    backend, _ = estimator.build_backend(X)
    reused = backend.reused_store
    backend.close()
    path = Path(estimator.store).expanduser()
    size = sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) if path.is_dir() else 0
    return StoreInfo(path=str(path), solver=estimator.solver, reused=reused,
                     seconds=time.perf_counter() - start, nbytes=size)
