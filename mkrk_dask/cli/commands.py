"""The commands of ``mkrk``: each takes the parsed arguments and returns an exit code.

They read data through :mod:`mkrk_dask.io`, fit through the estimator and
:func:`mkrk_dask.lambda_search` (the CLI builds no backend itself: ``mkrk build`` goes
through :func:`mkrk_dask.build_store`), run on the Dask session of :func:`dask_client`, and
write results through :mod:`mkrk_dask.results`. Standard output carries results; progress
goes to standard error (:mod:`mkrk_dask.progress`).
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

from .. import progress
from ..cluster import DaskSession
from ..estimators import MKKMRK
from ..io import Dataset, load_input
from ..kernels import as_kernel_specs
from ..metrics import clustering_scores
from ..plotting import make_figures  # matplotlib itself is imported when drawing
from ..protocol import render_markdown, run_protocol
from ..results import (
    MODEL_FILE,
    mkkmrk_summary,
    read_results,
    search_record,
    search_report,
    write_fit,
    write_json,
    write_labels,
)
from ..search import build_store, lambda_search, paper_lambda_grid
from .errors import EXIT_OK, UserError
from .parser import parse_lams

__all__ = ["COMMANDS", "dask_client", "run_search"]


# --------------------------------------------------------------------------- helpers


def _say(args: argparse.Namespace, message: str, level: int = 1) -> None:
    """Print to stdout when the verbosity is at least ``level`` (1: default, 2: -v)."""
    if args.verbosity >= level:
        print(message, flush=True)


def _pct(scores: dict[str, float]) -> str:
    return (f"ACC {100 * scores['acc']:.2f}   NMI {100 * scores['nmi']:.2f}   "
            f"purity {100 * scores['purity']:.2f}")


def _n_clusters(args: argparse.Namespace, data: Dataset) -> int:
    if args.n_clusters is not None:
        return int(args.n_clusters)
    if data.y is None:
        raise UserError("--n-clusters is required when the data has no labels "
                        "(give --n-clusters K, or labels with --labels FILE)")
    return int(np.unique(data.y).size)


def _kernels_arg(values: list[str] | None) -> Any:
    if not values or values == ["paper"]:
        return "paper"
    return list(values)


def _solver_of(args: argparse.Namespace) -> str:
    if args.solver is not None:
        return args.solver
    return "blockwise" if getattr(args, "scheduler", None) else "exact"


def _repeats(args: argparse.Namespace) -> int:
    if args.repeats < 1:
        raise UserError(f"--repeats must be >= 1, got {args.repeats}")
    return int(args.repeats)


@contextlib.contextmanager
def dask_client(args: argparse.Namespace, solver: str) -> Iterator[Any]:
    """The Dask client the command runs on, or None for the exact solver without a scheduler.

    ``--scheduler ADDRESS`` connects to an existing scheduler (left running afterwards);
    without it the embedded local cluster starts in this process and stops at the end
    (:class:`mkrk_dask.cluster.DaskSession`). Progress of the passes goes to stderr.
    """
    address = getattr(args, "scheduler", None)
    with progress.reporting(max(args.verbosity, 0)):
        if solver == "exact" and not address:
            yield None
            return
        if address:
            progress.reporter().log(f"connecting to the Dask scheduler at {address}", 2)
        session = DaskSession(address or None, n_workers=getattr(args, "workers", None),
                              timeout=getattr(args, "connect_timeout", 30.0))
        try:
            if args.verbosity >= 2:
                info = session.client.scheduler_info()
                progress.reporter().log(f"Dask scheduler {info.get('address')}: "
                                        f"{len(info.get('workers', {}))} worker(s)", 2)
            yield session.client
        finally:
            session.close()


def _estimator(args: argparse.Namespace, n_clusters: int, solver: str, client: Any) -> MKKMRK:
    return MKKMRK(
        n_clusters=n_clusters, lam=args.lam, kernels=_kernels_arg(args.kernels),
        dissimilarity=args.dissimilarity, lam_scaling=args.lam_scaling, solver=solver,
        tol=args.tol, tol_mode=args.tol_mode, max_iter=args.max_iter, n_init=args.n_init,
        store=args.store, scheduler=client, chunk_size=args.chunk_size,
        n_landmarks=args.n_landmarks, landmarks=args.landmarks, dtype=args.dtype,
        random_state=args.seed, verbose=1 if args.verbosity >= 1 else 0)


# --------------------------------------------------------------------------- commands


def _cmd_demo(args: argparse.Namespace) -> int:
    from sklearn.datasets import load_digits

    X, y = load_digits(return_X_y=True)
    if args.n_samples:
        X, y = X[: args.n_samples], y[: args.n_samples]
    solver = args.solver or "blockwise"
    _say(args, f"MKKM-RK demo: scikit-learn digits, {X.shape[0]} samples x {X.shape[1]} "
               f"features, 10 classes, the paper's 12 kernels, lambda = 2^{np.log2(args.lam):g},"
               f" solver = {solver}")
    start = time.perf_counter()
    with dask_client(args, solver) as client:
        model = MKKMRK(n_clusters=10, lam=args.lam, solver=solver, random_state=args.seed,
                       scheduler=client, verbose=1 if args.verbosity >= 2 else 0).fit(X)
    seconds = time.perf_counter() - start
    print(f"fitted in {seconds:.1f} s ({model.n_iter_} iterations, backend {model.solver_})")
    print(_pct(clustering_scores(y, model.labels_)))
    print(model.summary())
    return EXIT_OK


def _cmd_build(args: argparse.Namespace) -> int:
    data = load_input(args.data)
    store = Path(args.store).expanduser()
    estimator = MKKMRK(kernels=_kernels_arg(args.kernels), solver=args.solver, store=store,
                       chunk_size=args.chunk_size, dtype=args.dtype,
                       n_landmarks=args.n_landmarks, landmarks=args.landmarks,
                       random_state=args.seed,
                       backend_options={"overwrite": True} if args.overwrite else None)
    _say(args, f"building a {args.solver} store at {store}: {data.n_samples} samples")
    with dask_client(args, args.solver) as client:
        info = build_store(estimator.set_params(scheduler=client), data.X)
    state = "reused (already complete)" if info.reused else "built"
    print(f"store {store} {state} in {info.seconds:.1f} s ({info.nbytes / 2**20:.1f} MiB); use "
          f"it with mkrk fit {args.data} --solver {args.solver} --store {store}")
    return EXIT_OK


def _cmd_fit(args: argparse.Namespace) -> int:
    data = load_input(args.data, labels=args.labels, y_key=args.y_key)
    k = _n_clusters(args, data)
    solver = _solver_of(args)
    _say(args, f"fitting MKKM-RK on {data.name}: {data.n_samples} samples, k = {k}, "
               f"lambda = {args.lam:g}, solver = {solver}"
               + (f", scheduler {args.scheduler}" if args.scheduler else ""))
    start = time.perf_counter()
    with dask_client(args, solver) as client:
        model = _estimator(args, k, solver, client).fit(data.X)
    seconds = time.perf_counter() - start
    result = None
    if args.out:
        result = write_fit(args.out, model, data, source=args.data, command=args.command_line,
                           seconds=seconds, scheduler=args.scheduler, store=args.store)
    _say(args, f"fitted in {seconds:.1f} s: {model.n_iter_} iterations "
               f"({'converged' if model.converged_ else 'max_iter reached'}), "
               f"{len(model.selected_kernels_)} of {len(model.weights_)} kernels selected")
    if data.y is not None:
        print(_pct(result["metrics"] if result else clustering_scores(data.y, model.labels_)))
    if args.verbosity >= 1:
        print(model.summary())
    if args.out:
        _say(args, f"results in {args.out}/ (labels, weights, Y, objective: .npy/.csv; "
                   f"result.json; {MODEL_FILE})")
    return EXIT_OK


def run_search(args: argparse.Namespace, data: Dataset, lams: list[float], client: Any,
               n_clusters: int) -> dict[str, Any]:
    """One dataset's lambda grid through :func:`mkrk_dask.lambda_search`, as a dataset entry
    of a search report (:mod:`mkrk_dask.results`)."""
    solver = _solver_of(args)
    estimator = _estimator(args, n_clusters, solver, client)
    estimator.set_params(verbose=0)
    per_lambda: list[dict[str, Any]] = []

    def record(res: Any) -> None:
        item = search_record(res)
        per_lambda.append(item)
        line = (f"  lambda {res.lam:<12.6g} iter {res.n_iter:3d}  kernels {res.n_selected:2d}  "
                f"objective {item['objective_history'][-1]:.6g}  {res.seconds:.1f}s")
        if item["summary"]:
            s = item["summary"]
            line += (f"  ACC best {100 * s['acc']['best']:.2f} "
                     f"mean {100 * s['acc']['mean']:.2f}")
        _say(args, line)

    start = time.perf_counter()
    lambda_search(estimator, data.X, lams, data.y, n_repeats=args.repeats,
                  random_state=args.seed, callback=record)
    specs = as_kernel_specs(estimator.kernels, n_views=len(data.views))
    return {"dataset": data.name, "n_samples": data.n_samples, "n_features": data.n_features,
            "n_clusters": n_clusters, "solver": solver,
            "seconds": {"MKKM-RK": time.perf_counter() - start},
            "kernel_names": [s.name for s in specs], "MKKM-RK": mkkmrk_summary(per_lambda)}


def _cmd_search(args: argparse.Namespace) -> int:
    lams = parse_lams(args.lams) if args.lams else [float(v) for v in paper_lambda_grid()]
    repeats = _repeats(args)
    data = load_input(args.data, labels=args.labels, y_key=args.y_key,
                      data_dir=args.data_dir)
    k = _n_clusters(args, data)
    solver = _solver_of(args)
    _say(args, f"lambda search on {data.name}: {data.n_samples} samples, k = {k}, "
               f"{len(lams)} lambdas, {repeats} repeats, solver = {solver}")
    with dask_client(args, solver) as client:
        entry = run_search(args, data, lams, client, k)
    out = write_json(args.out, search_report("mkrk-search", command=args.command_line,
                                             repeats=repeats, seed=args.seed, lams=lams,
                                             datasets=[entry]))
    if "summary" in entry["MKKM-RK"]:
        best = entry["MKKM-RK"]
        print(f"best lambda {best['lam']:g} (by best-of-{repeats} ACC): "
              f"{_pct({m: best['summary'][m]['best'] for m in ('acc', 'nmi', 'purity')})}")
    print(f"results in {out}; draw them with: mkrk figures {out}")
    return EXIT_OK


def _cmd_predict(args: argparse.Namespace) -> int:
    import joblib

    model_path = Path(args.model).expanduser()
    if model_path.is_dir():
        model_path = model_path / MODEL_FILE
    if not model_path.is_file():
        raise UserError(f"model file {model_path} does not exist (mkrk fit --out DIR writes "
                        f"DIR/{MODEL_FILE})")
    try:
        model = joblib.load(model_path)
    except Exception as err:  # unpickling raises many types for a foreign file
        raise UserError(f"cannot load the model {model_path}: {err}") from None
    if not hasattr(model, "nystrom_model_"):
        raise UserError(f"the model in {model_path} was fitted with solver="
                        f"{getattr(model, 'solver_', '?')!r}; predicting new data needs a model "
                        "fitted with --solver nystrom")
    data = load_input(args.data, labels=args.labels, y_key=args.y_key)
    start = time.perf_counter()
    labels = np.asarray(model.predict(data.X))
    seconds = time.perf_counter() - start
    _say(args, f"predicted {labels.shape[0]} samples in {seconds:.2f} s")
    if args.out:
        _say(args, f"labels written to {write_labels(args.out, labels)}")
    else:
        np.savetxt(sys.stdout, labels, fmt="%d")
    if data.y is not None:
        # Without --out the labels are the output: the scores go to stderr.
        print(_pct(clustering_scores(data.y, labels)),
              file=sys.stdout if args.out else sys.stderr)
    return EXIT_OK


def _cmd_reproduce(args: argparse.Namespace) -> int:
    if args.library_only:
        print("mkrk reproduce: --library-only is deprecated and has no effect (the protocol "
              "always runs from the library)", file=sys.stderr)
    repeats = _repeats(args)
    out = Path(args.out)
    lams = parse_lams(args.lams) if args.lams else None
    with progress.reporting(max(args.verbosity, 0)):
        report = run_protocol(args.datasets, data_dir=args.data_dir, lams=lams,
                              repeats=repeats, seed=args.seed, out=out,
                              threads=args.threads, command=args.command_line)
    if args.verbosity >= 1:
        print(render_markdown(report))
    _say(args, f"results in {out / 'paper_table.md'} and {out / 'paper_table.json'}")
    if args.figures:
        written = make_figures(out / "paper_table.json", out / "figures")
        _say(args, f"{len(written)} figures in {out / 'figures'}")
    return EXIT_OK


def _cmd_figures(args: argparse.Namespace) -> int:
    path = Path(args.results).expanduser()
    report = read_results(path)
    out = Path(args.out) if args.out else path.parent / "figures"
    heatmap_lams = parse_lams(args.heatmap_lams) if args.heatmap_lams else None
    written = make_figures(report, out, datasets=args.datasets, heatmap_lams=heatmap_lams,
                           dpi=args.dpi)
    for file in written:
        _say(args, str(file))
    _say(args, f"{len(written)} figure(s) in {out}")
    return EXIT_OK


#: command name -> the function that runs it
COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {
    "build": _cmd_build, "fit": _cmd_fit, "search": _cmd_search, "predict": _cmd_predict,
    "reproduce": _cmd_reproduce, "figures": _cmd_figures, "demo": _cmd_demo}
