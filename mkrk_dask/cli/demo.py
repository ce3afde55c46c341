"""``mkrk demo``: MKKM-RK on scikit-learn's digits, its output explained in a few lines.

First the product's default, ``MKKMRK(10, random_state=0).fit(X)`` exactly as the README's
quick start runs it, with its :meth:`summary` (what it chose and why); then the paper's
configuration, the faithful mode, on an embedded Dask cluster (by default the Nystrom
backend: every pass over the data is a Dask pass, reported on stderr as it goes), with what
the scores mean and which kernels carry the weight.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from .._text import plural
from ..estimators import MKKMRK
from ..metrics import clustering_scores
from ..results import weight_stats
from .parser import format_default

__all__ = ["run_demo", "explain", "explain_scores"]

_BAR = 30  # characters of the heaviest weight's bar
#: 300 landmarks per kernel drawn uniformly: on the digits as accurate as the default 500
#: chosen by k-means++ (same labels), and the demo stays at a few seconds
_DEMO_OPTIONS = {"nystrom": {"n_landmarks": 300, "landmarks": "uniform"}}


def explain_scores(scores: dict[str, float]) -> list[str]:
    """The lines that explain a fit's scores."""
    return [
        "scores against the true digits (percent, 100 = perfect):",
        f"  ACC    {100 * scores['acc']:6.2f}  accuracy: share of images in the right cluster, "
        "each cluster matched to one digit",
        f"  NMI    {100 * scores['nmi']:6.2f}  normalized mutual information: what the cluster "
        "tells of the digit (0 nothing)",
        f"  purity {100 * scores['purity']:6.2f}  share of images whose cluster's most common "
        "digit is their own",
    ]


def explain(scores: dict[str, float], weights: np.ndarray, names: list[str],
            lam: float) -> list[str]:
    """The lines that explain a fit's scores and weights."""
    stats = weight_stats(weights, top=3)
    order = np.argsort(-weights)
    lines = [
        *explain_scores(scores),
        "",
        "kernel weights (each kernel's weight is the share of the kernels it represents; the "
        "clustering",
        "uses the combined kernel sum_p w_p^2 K_p):",
    ]
    top = order[0]
    for p in order:
        bar = "#" * max(1 if weights[p] > 0 else 0,
                        int(round(_BAR * weights[p] / max(weights[top], 1e-300))))
        mark = "" if weights[p] >= stats["threshold"] else "  (below the threshold)"
        lines.append(f"  {names[p]:<22s} {weights[p]:.4f}  {bar}{mark}")
    share = 100 * stats["top_share"]
    # equal weights select nothing: "N of N selected" would claim a choice no one made
    equal = stats["effective"] >= stats["n_kernels"] * (1 - 1e-9)
    lines += [
        "",
        f"the {stats['n_kernels']} kernels keep equal weights: none was selected over "
        "another;" if equal else
        f"{stats['n_selected']} of {stats['n_kernels']} kernels have a weight >= "
        f"{stats['threshold']:g} (selected); the top {stats['top']} carry {share:.0f}% of "
        f"the weight;",
        f"effective number of kernels 1/sum(w^2) = {stats['effective']:.1f} "
        f"(1 = one kernel, {stats['n_kernels']} = equal weights).",
    ]
    if stats["effective"] > stats["n_kernels"] / 2:
        lines += [f"At lambda = {format_default(lam)} the weight stays spread; a larger lambda "
                  "(try --lam 2^-5)", "concentrates it on fewer, representative kernels."]
    else:
        lines.append(f"At lambda = {format_default(lam)} a few representative kernels carry "
                     "most of the weight.")
    return lines


def run_demo(args: argparse.Namespace, dask_client: Callable[..., Any],
             log: Callable[..., None], result: Callable[[str], None]) -> int:
    """Fit, then print the scores and the explained weights on stdout."""
    from sklearn.datasets import load_digits

    X, y = load_digits(return_X_y=True)
    if args.n_samples:
        X, y = X[: args.n_samples], y[: args.n_samples]
    result(f"MKKM-RK demo: scikit-learn's digits, {X.shape[0]} images of 8x8 pixels "
           f"(64 features), 10 digits.")
    log(args, "progress of every stage follows on stderr (-q: none, -v: more)")
    _default_part(args, X, y, dask_client, result)
    result("")
    _paper_part(args, X, y, dask_client, log, result)
    return 0


def _default_part(args: argparse.Namespace, X: np.ndarray, y: np.ndarray,
                  dask_client: Callable[..., Any], result: Callable[[str], None]) -> None:
    """The product's default, as the README's quick start fits it: the same figures."""
    result("")
    result(f"1. The default: MKKMRK(n_clusters=10, random_state={args.seed}).fit(X), as in the "
           "README's quick start.")
    result("   Label-free: it chooses its kernels, lambda's scale, the solver and the final step "
           "from X;")
    result("   its summary says what and why.")
    start = time.perf_counter()
    # the digits fit in memory: no Dask cluster unless the user named a scheduler
    with dask_client(args, "exact") as client:
        model = MKKMRK(n_clusters=10, random_state=args.seed, scheduler=client,
                       verbose=1 if args.verbosity >= 1 else 0).fit(X)
    result(f"fitted in {time.perf_counter() - start:.1f} s.")
    result("")
    for line in explain_scores(clustering_scores(y, model.labels_)):
        result(line)
    result("")
    result(model.summary())


def _paper_part(args: argparse.Namespace, X: np.ndarray, y: np.ndarray,
                dask_client: Callable[..., Any], log: Callable[..., None],
                result: Callable[[str], None]) -> None:
    """The paper's configuration, the faithful mode: how lambda selects representatives."""
    solver = args.solver
    where = (f"the Dask scheduler at {args.scheduler}" if args.scheduler
             else "an embedded Dask cluster" if solver != "exact" else "memory (no Dask)")
    if solver == "nystrom":
        where += ",\n   300 landmarks per kernel"
    result(f"2. The paper's configuration, the faithful mode: MKKMRK.paper(10, lam="
           f"{format_default(args.lam)}):")
    result(f"   the paper's 12 base kernels, lambda = {format_default(args.lam)}, solver "
           f"{solver} on {where}.")
    start = time.perf_counter()
    with dask_client(args, solver) as client:
        model = MKKMRK.paper(n_clusters=10, lam=args.lam, solver=solver, random_state=args.seed,
                             scheduler=client, verbose=1 if args.verbosity >= 1 else 0,
                             backend_options=_DEMO_OPTIONS.get(solver)).fit(X)
    seconds = time.perf_counter() - start
    result(f"fitted in {seconds:.1f} s: {plural(model.n_iter_, 'iteration')} "
           f"({'converged' if model.converged_ else 'max_iter reached'}), backend "
           f"{model.solver_}.")
    result("")
    scores = clustering_scores(y, model.labels_)
    for line in explain(scores, np.asarray(model.weights_), list(model.kernel_names_),
                        args.lam):
        result(line)
