"""The ``mkrk`` command line.

Commands: ``build`` (a kernel store), ``fit``, ``search`` (a lambda grid), ``predict`` (new data
with a saved Nystrom model), ``reproduce`` (the paper's protocol), ``figures`` (PNGs from saved
results) and ``demo``. Run ``mkrk COMMAND --help`` for the options and examples of each.

Exit codes: 0 success; 2 a user error (bad arguments, an unreadable or invalid input file, an
invalid parameter, an unreachable scheduler), reported in one line on standard error (``--debug``
shows the traceback); 1 an unexpected internal error; 130 interrupted (Ctrl-C).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import shlex
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from . import progress
from .io import Dataset, load_input
from .results import MODEL_FILE

__all__ = ["main", "build_parser", "UserError", "EXIT_OK", "EXIT_INTERNAL", "EXIT_USER",
           "EXIT_INTERRUPTED"]

EXIT_OK = 0
EXIT_INTERNAL = 1
EXIT_USER = 2
EXIT_INTERRUPTED = 130

SOLVER_CHOICES = ("exact", "blockwise", "nystrom", "auto")


class UserError(Exception):
    """A mistake in the command line or the input: reported in one line, exit code 2."""


# --------------------------------------------------------------------------- small helpers


def _say(args: argparse.Namespace, message: str, level: int = 1) -> None:
    """Print to stdout when the verbosity is at least ``level`` (1: default, 2: -v)."""
    if args.verbosity >= level:
        print(message, flush=True)


def _command_line(argv: Sequence[str] | None) -> str:
    words = list(sys.argv[1:] if argv is None else argv)
    return "mkrk " + " ".join(shlex.quote(w) for w in words)


def parse_lams(text: str) -> list[float]:
    """Parse a lambda list: comma-separated numbers or powers ``2^e``, and ranges ``2^a..2^b``
    (every integer exponent from a to b). Example: ``"2^-15..2^5"``, ``"0.001,0.01,2^-3"``."""
    values: list[float] = []
    for item in str(text).replace(" ", "").split(","):
        if not item:
            continue
        try:
            if ".." in item:
                lo, hi = item.split("..")
                if not (lo.startswith("2^") and hi.startswith("2^")):
                    raise ValueError
                a, b = int(lo[2:]), int(hi[2:])
                if b < a:
                    raise ValueError
                values.extend(2.0**e for e in range(a, b + 1))
            elif item.startswith("2^"):
                values.append(2.0 ** float(item[2:]))
            else:
                values.append(float(item))
        except ValueError:
            raise UserError(f"cannot read lambda {item!r}: give numbers, powers like 2^-10, or "
                            "a range like 2^-15..2^5, separated by commas") from None
    if not values:
        raise UserError("the lambda list is empty")
    if any(not np.isfinite(v) or v < 0 for v in values):
        raise UserError(f"lambdas must be finite and >= 0, got {text!r}")
    return values


def _lam_type(text: str) -> float:
    """argparse type of ``--lam``: a number or a power ``2^e``."""
    try:
        values = parse_lams(text)
    except UserError as err:
        raise argparse.ArgumentTypeError(str(err)) from None
    if len(values) != 1:
        raise argparse.ArgumentTypeError(f"one lambda expected, got {text!r}")
    return values[0]


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


@contextlib.contextmanager
def dask_client(args: argparse.Namespace, solver: str) -> Iterator[Any]:
    """The Dask client the command runs on, or None for the exact solver without a scheduler.

    ``--scheduler ADDRESS`` connects to an existing scheduler (left running afterwards);
    without it the embedded local cluster starts in this process and stops at the end.
    Progress of the passes goes to stderr (:mod:`mkrk_dask.progress`).
    """
    from . import progress
    from .cluster import DaskSession

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


def _estimator(args: argparse.Namespace, n_clusters: int, solver: str, client: Any) -> Any:
    from .estimator import MKKMRK

    return MKKMRK(
        n_clusters=n_clusters, lam=args.lam, kernels=_kernels_arg(args.kernels),
        dissimilarity=args.dissimilarity, lam_scaling=args.lam_scaling, solver=solver,
        tol=args.tol, tol_mode=args.tol_mode, max_iter=args.max_iter, n_init=args.n_init,
        store=args.store, scheduler=client, chunk_size=args.chunk_size,
        n_landmarks=args.n_landmarks, landmarks=args.landmarks, dtype=args.dtype,
        random_state=args.seed, verbose=1 if args.verbosity >= 1 else 0)


def _solver_of(args: argparse.Namespace) -> str:
    if args.solver is not None:
        return args.solver
    return "blockwise" if getattr(args, "scheduler", None) else "exact"


def _pct(scores: dict[str, float]) -> str:
    return (f"ACC {100 * scores['acc']:.2f}   NMI {100 * scores['nmi']:.2f}   "
            f"purity {100 * scores['purity']:.2f}")


# --------------------------------------------------------------------------- commands


def _cmd_demo(args: argparse.Namespace) -> int:
    from sklearn.datasets import load_digits

    from .estimator import MKKMRK
    from .metrics import clustering_scores

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
    scores = clustering_scores(y, model.labels_)
    print(f"fitted in {seconds:.1f} s ({model.n_iter_} iterations, backend {model.solver_})")
    print(_pct(scores))
    print(model.summary())
    return EXIT_OK


def _cmd_build(args: argparse.Namespace) -> int:
    from .estimator import MKKMRK
    from .search import build_store

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
        from .results import write_fit

        result = write_fit(args.out, model, data, source=args.data, command=args.command_line,
                           seconds=seconds, scheduler=args.scheduler, store=args.store)
    _say(args, f"fitted in {seconds:.1f} s: {model.n_iter_} iterations "
               f"({'converged' if model.converged_ else 'max_iter reached'}), "
               f"{len(model.selected_kernels_)} of {len(model.weights_)} kernels selected")
    if data.y is not None:
        from .metrics import clustering_scores

        scores = result["metrics"] if result else clustering_scores(data.y, model.labels_)
        print(_pct(scores))
    if args.verbosity >= 1:
        print(model.summary())
    if args.out:
        _say(args, f"results in {args.out}/ (labels, weights, Y, objective: .npy/.csv; "
                   f"result.json; {MODEL_FILE})")
    return EXIT_OK


def run_search(args: argparse.Namespace, data: Dataset, lams: list[float], client: Any,
               n_clusters: int) -> dict[str, Any]:
    """One dataset's lambda grid through :func:`mkrk_dask.lambda_search`, as a JSON-ready dict
    in the layout of ``benchmarks/results/paper_table.json`` (``datasets[i]["MKKM-RK"]``)."""
    from .results import mkkmrk_summary, search_record
    from .search import lambda_search

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
    entry: dict[str, Any] = {
        "dataset": data.name, "n_samples": data.n_samples, "n_features": data.n_features,
        "n_clusters": n_clusters, "solver": solver,
        "seconds": {"MKKM-RK": time.perf_counter() - start},
        "kernel_names": _kernel_names(estimator, data),
        "MKKM-RK": mkkmrk_summary(per_lambda)}
    return entry


def _kernel_names(estimator: Any, data: Dataset) -> list[str]:
    from .kernels import as_kernel_specs

    return [s.name for s in as_kernel_specs(estimator.kernels, n_views=len(data.views))]


def _cmd_search(args: argparse.Namespace) -> int:
    from .search import paper_lambda_grid

    lams = parse_lams(args.lams) if args.lams else [float(v) for v in paper_lambda_grid()]
    if args.repeats < 1:
        raise UserError(f"--repeats must be >= 1, got {args.repeats}")
    data = load_input(args.data, labels=args.labels, y_key=args.y_key,
                      data_dir=args.data_dir)
    k = _n_clusters(args, data)
    solver = _solver_of(args)
    _say(args, f"lambda search on {data.name}: {data.n_samples} samples, k = {k}, "
               f"{len(lams)} lambdas, {args.repeats} repeats, solver = {solver}")
    with dask_client(args, solver) as client:
        entry = run_search(args, data, lams, client, k)
    from .results import search_report, write_json

    out = write_json(args.out, search_report("mkrk-search", command=args.command_line,
                                             repeats=args.repeats, seed=args.seed, lams=lams,
                                             datasets=[entry]))
    if "summary" in entry["MKKM-RK"]:
        best = entry["MKKM-RK"]
        print(f"best lambda {best['lam']:g} (by best-of-{args.repeats} ACC): "
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
        from .results import write_labels

        _say(args, f"labels written to {write_labels(args.out, labels)}")
    else:
        np.savetxt(sys.stdout, labels, fmt="%d")
    if data.y is not None:
        from .metrics import clustering_scores

        print(_pct(clustering_scores(data.y, labels)), file=sys.stderr if not args.out
              else sys.stdout)
    return EXIT_OK


def _cmd_reproduce(args: argparse.Namespace) -> int:
    from .protocol import render_markdown, run_protocol

    if args.library_only:
        print("mkrk reproduce: --library-only is deprecated and has no effect (the protocol "
              "is always the library's)", file=sys.stderr)
    if args.repeats < 1:
        raise UserError(f"--repeats must be >= 1, got {args.repeats}")
    out = Path(args.out)
    lams = parse_lams(args.lams) if args.lams else None
    with progress.reporting(max(args.verbosity, 0)):
        report = run_protocol(args.datasets, data_dir=args.data_dir, lams=lams,
                              repeats=args.repeats, seed=args.seed, out=out,
                              threads=args.threads, command=args.command_line)
    if args.verbosity >= 1:
        print(render_markdown(report))
    _say(args, f"results in {out / 'paper_table.md'} and {out / 'paper_table.json'}")
    if args.figures:
        from .plotting import make_figures

        written = make_figures(out / "paper_table.json", out / "figures")
        _say(args, f"{len(written)} figures in {out / 'figures'}")
    return EXIT_OK


def _cmd_figures(args: argparse.Namespace) -> int:
    from .plotting import make_figures
    from .results import read_results

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


# --------------------------------------------------------------------------- the parser


class _Parser(argparse.ArgumentParser):
    """argparse with errors in one line (and exit code 2)."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(EXIT_USER, f"{self.prog}: error: {message} (see '{self.prog} --help')\n")


class _Formatter(argparse.RawDescriptionHelpFormatter, argparse.ArgumentDefaultsHelpFormatter):
    pass


def _common_options() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    group = common.add_argument_group("output and diagnostics")
    group.add_argument("-q", "--quiet", action="store_true",
                       help="print only the results (no progress, no iterations)")
    group.add_argument("-v", "--verbose", action="count", default=0,
                       help="more detail: every Dask pass, the cluster, timings")
    group.add_argument("--debug", action="store_true",
                       help="show the full traceback of an error")
    group.add_argument("--config", metavar="FILE", default=None,
                       help="a TOML, JSON or YAML file with settings: 'scheduler' and any "
                            "option's long name (dashes or underscores), at the top level or "
                            "in a table named after the command")
    return common


def _add_data(p: argparse.ArgumentParser, labels: bool = True) -> None:
    p.add_argument("data", metavar="DATA",
                   help="data file (.npz with X [and y], .mat with X [and y], .npy, .csv), a "
                        "Zarr array directory, or a benchmark name (orl, jaffe, tr11, ...)")
    if labels:
        p.add_argument("--labels", metavar="FILE", default=None,
                       help="true labels (.npy, .csv or .txt) for the metrics")
        p.add_argument("--y-key", default=None,
                       help="name of the labels inside a .npz/.mat file (default: y, if any)")


def _add_model_options(p: argparse.ArgumentParser, lam: bool = True) -> None:
    g = p.add_argument_group("model")
    g.add_argument("--n-clusters", "-k", type=int, default=None,
                   help="number of clusters (default: the number of classes of the labels)")
    if lam:
        g.add_argument("--lam", type=_lam_type, default=2.0**-15,
                       help="lambda >= 0: a number or a power such as 2^-10")
    g.add_argument("--kernels", nargs="+", metavar="SPEC", default=["paper"],
                   help="'paper' (the 12 kernels of the paper) or kernel specifications such "
                        "as cosine 'polynomial(a=1,b=2)' 'gaussian(c=0.1)' 'gaussian(sigma=3)@1'")
    g.add_argument("--dissimilarity", choices=("fip", "sfn", "vn", "ld"), default="fip",
                   help="the dissimilarity C between kernels")
    g.add_argument("--lam-scaling", choices=("none", "normalized"), default="none",
                   help="'normalized' makes lambda independent of the scales of C and d")
    g.add_argument("--tol", type=float, default=1e-5, help="stopping tolerance")
    g.add_argument("--tol-mode", choices=("absolute", "relative"), default="absolute")
    g.add_argument("--max-iter", type=int, default=100)
    g.add_argument("--n-init", type=int, default=10, help="restarts of the final k-means")
    g.add_argument("--seed", type=int, default=0, help="random seed")


def _add_backend_options(p: argparse.ArgumentParser, build: bool = False) -> None:
    g = p.add_argument_group("backend and cluster")
    if build:
        g.add_argument("--solver", choices=("blockwise", "nystrom"), default="blockwise",
                       help="which store to build")
        g.add_argument("--store", required=True, metavar="PATH",
                       help="where the Zarr store goes (a path every worker can read)")
        g.add_argument("--overwrite", action="store_true",
                       help="rebuild over an existing store")
        g.add_argument("--seed", type=int, default=0, help="seed of the Nystrom landmarks")
    else:
        g.add_argument("--solver", choices=SOLVER_CHOICES, default=None,
                       help="backend (default: exact; blockwise when --scheduler is given)")
        g.add_argument("--store", metavar="PATH", default=None,
                       help="Zarr store of the blockwise kernels / Nystrom factors; reused "
                            "when it matches (see mkrk build); default: a temporary store")
    g.add_argument("--scheduler", metavar="ADDRESS", default=None,
                   help="address of a running Dask scheduler, e.g. tcp://10.0.0.5:8786; "
                        "default: an embedded local cluster in this process")
    g.add_argument("--connect-timeout", type=float, default=30.0, metavar="SECONDS",
                   help="how long to wait for --scheduler")
    g.add_argument("--workers", type=int, default=None,
                   help="workers of the embedded local cluster (default 1, threads = cores)")
    g.add_argument("--chunk-size", type=int, default=None, help="rows per block of the store")
    g.add_argument("--dtype", choices=("float64", "float32"), default="float64",
                   help="storage precision of the store")
    g.add_argument("--n-landmarks", type=int, default=500, help="Nystrom landmarks per kernel")
    g.add_argument("--landmarks", choices=("kmeans++", "uniform"), default="kmeans++",
                   help="Nystrom landmark selection (a store is reused only with the same one)")


_EXAMPLES = {
    "build": """examples:
  mkrk build data.npz --store kernels.zarr
  mkrk build big.npz --solver nystrom --n-landmarks 300 --store factors.zarr
  mkrk build data.npz --store /shared/k.zarr --scheduler tcp://10.0.0.5:8786
  mkrk fit data.npz --solver blockwise --store kernels.zarr --out run1   # reuses the store""",
    "fit": """examples:
  mkrk fit data.npz --out run1                      # exact; k = number of classes in y
  mkrk fit data.csv -k 5 --lam 0.001 --out run2
  mkrk fit data.npz --solver blockwise --store k.zarr --out run3
  mkrk fit data.npz --scheduler tcp://127.0.0.1:8786 --out run4   # on a running cluster
  mkrk fit data.npz --solver nystrom --n-landmarks 300 --out run5  # then: mkrk predict

outputs in --out DIR: labels.npy/.csv, weights.npy/.csv, Y.npy/.csv, objective.npy/.csv,
result.json (everything, with the metrics when labels are known), metrics.json, and
model.joblib (the fitted MKKMRK estimator, pickled with joblib; load it only from sources
you trust).""",
    "search": """examples:
  mkrk search data.npz --out search.json                 # the paper's grid 2^-15..2^5
  mkrk search orl --repeats 20 --out orl.json            # a benchmark from the data folder
  mkrk search data.npz --lams 2^-15..2^-5 --repeats 5 --out s.json
  mkrk search data.npz --lams 0.001,0.01,0.1 --out s.json
  mkrk figures s.json                                    # draw it""",
    "predict": """examples:
  mkrk fit train.npz --solver nystrom --out run5
  mkrk predict run5/model.joblib new.npz --out new_labels.csv
  mkrk predict run5 new.npy > labels.txt""",
    "reproduce": """examples:
  mkrk reproduce                                   # jaffe orl tr11 coil20, 21 lambdas, 20 repeats
  mkrk reproduce --datasets orl tr11 --figures --out results
  mkrk reproduce --datasets jaffe --repeats 3 --lams 2^-15,2^-10,2^0
  mkrk reproduce --data-dir /data/mkrk --threads 1""",
    "figures": """examples:
  mkrk figures search.json                                  # PNGs in ./figures next to it
  mkrk figures benchmarks/results/paper_table.json --datasets orl tr11 --out figs
  mkrk figures run1/result.json                             # Y and objective of one fit

figures: <dataset>_fig1_sensitivity.png (ACC/NMI/purity vs log2 lambda),
<dataset>_fig2_representation.png (Y for several lambdas), <dataset>_fig3_selected.png
(kernels selected vs lambda), <dataset>_fig4_objective.png (objective per iteration).""",
    "demo": """examples:
  mkrk demo
  mkrk demo --lam 0.01 --seed 3 -v
  mkrk demo --solver exact --n-samples 600""",
}


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of ``mkrk`` (one subparser per command)."""
    parser = _Parser(
        prog="mkrk", formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Multiple kernel k-means by selecting representative kernels (MKKM-RK).",
        epilog="exit codes: 0 ok, 2 user error (one line on stderr), 1 internal error, "
               "130 interrupted\n\nexamples:\n  mkrk demo\n  mkrk fit data.npz --out run1\n"
               "  mkrk search data.npz --out s.json && mkrk figures s.json\n"
               "  mkrk COMMAND --help")
    parser.add_argument("--version", action="version", version=_version())
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    common = _common_options()

    def add(name: str, help_text: str, description: str) -> argparse.ArgumentParser:
        return sub.add_parser(name, help=help_text, description=description,
                              parents=[common], formatter_class=_Formatter,
                              epilog=_EXAMPLES[name])

    p = add("build", "build a kernel store (blockwise) or Nystrom factors from a data file",
            "Compute the base kernels of DATA into a Zarr store on Dask (blockwise: all m "
            "kernels, n x n each; nystrom: per-kernel factors and their Gram matrix). Later "
            "fits and searches with the same --store reuse it instead of recomputing.")
    _add_data(p, labels=False)
    g = p.add_argument_group("kernels")
    g.add_argument("--kernels", nargs="+", metavar="SPEC", default=["paper"],
                   help="'paper' or kernel specifications (see mkrk fit --help)")
    _add_backend_options(p, build=True)
    p.set_defaults(func=_cmd_build)

    p = add("fit", "fit MKKM-RK and write labels, weights, Y, objective, metrics, a model",
            "Fit MKKM-RK on DATA with any backend and write the results to --out.")
    _add_data(p)
    _add_model_options(p)
    _add_backend_options(p)
    p.add_argument("--out", metavar="DIR", default=None, help="folder for the results")
    p.set_defaults(func=_cmd_fit)

    p = add("search", "fit a lambda grid (kernels built once) and save every lambda's result",
            "Run MKKM-RK for every lambda of a grid with the kernels and C built once, repeat "
            "the final k-means --repeats times per lambda, and write a JSON file with, per "
            "lambda: weights, Y, objective history, iterations and (with labels) best / mean "
            "/ std of ACC, NMI and purity. 'mkrk figures' draws it.")
    _add_data(p)
    p.add_argument("--data-dir", default=None,
                   help="folder of the benchmark files (for names like orl)")
    _add_model_options(p, lam=False)
    p.add_argument("--lams", default=None, metavar="LIST",
                   help="lambdas: numbers, 2^e, or ranges 2^a..2^b, comma-separated "
                        "(default: the paper's grid 2^-15..2^5)")
    p.add_argument("--repeats", type=int, default=20,
                   help="repeats of the final k-means per lambda (the paper: 20)")
    _add_backend_options(p)
    p.add_argument("--out", metavar="FILE", default="search.json", help="the JSON results")
    p.set_defaults(func=_cmd_search, lam=2.0**-10)

    p = add("predict", "cluster new data with a saved model (fitted with --solver nystrom)",
            "Assign new samples to the clusters of a model saved by 'mkrk fit --solver "
            "nystrom --out DIR' (the nearest learned centre in the learned embedding).")
    p.add_argument("model", metavar="MODEL", help=f"DIR/{MODEL_FILE} or the DIR")
    _add_data(p)
    p.add_argument("--out", metavar="FILE", default=None,
                   help="labels file (.csv or .npy); default: one label per line on stdout")
    p.set_defaults(func=_cmd_predict)

    p = add("reproduce", "run the paper's protocol (Table 2) on the benchmark datasets",
            "The paper's protocol (mkrk_dask.protocol): the 12 kernels, lambda in 2^-15..2^5, "
            "20 repeats of the final k-means, best-of-20 and mean +- std, with the baselines "
            "SB-KKM and A-MKKM, on the exact backend. Writes paper_table.md and "
            "paper_table.json to --out after every dataset (and the figures with --figures); "
            "datasets absent from the data folder are skipped.")
    p.add_argument("--datasets", nargs="+", default=["jaffe", "orl", "tr11", "coil20"],
                   help="benchmark names")
    p.add_argument("--data-dir", default=None,
                   help="folder of the dataset files (default ../shared/datasets or "
                        "$MKRK_DATASETS)")
    p.add_argument("--repeats", type=int, default=20)
    p.add_argument("--lams", default=None, metavar="LIST",
                   help="lambdas as for mkrk search (default 2^-15..2^5)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=None, help="limit BLAS/OpenMP threads")
    p.add_argument("--out", default="reproduce", metavar="DIR", help="folder for the results")
    p.add_argument("--figures", action="store_true", help="draw the figures afterwards")
    p.add_argument("--library-only", action="store_true",
                   help="deprecated, no effect: the protocol always runs from the library")
    p.set_defaults(func=_cmd_reproduce, lam=2.0**-10, kernels=["paper"], dissimilarity="fip",
                   lam_scaling="none", tol=1e-5, tol_mode="absolute", max_iter=100, n_init=10,
                   store=None, chunk_size=None, n_landmarks=500, landmarks="kmeans++",
                   dtype="float64", n_clusters=None)

    p = add("figures", "draw the paper's figures 1-4 (PNG) from saved results",
            "Draw PNG figures from a JSON file written by 'mkrk search', 'mkrk reproduce' / "
            "benchmarks/bench_paper_table.py, or 'mkrk fit' (result.json), without re-running "
            "anything.")
    p.add_argument("results", metavar="RESULTS", help="the JSON results file")
    p.add_argument("--out", metavar="DIR", default=None,
                   help="folder for the PNGs (default: 'figures' beside RESULTS)")
    p.add_argument("--datasets", nargs="+", default=None, help="only these datasets")
    p.add_argument("--heatmap-lams", default=None, metavar="LIST",
                   help="lambdas of the Y heat maps (default: four across the grid)")
    p.add_argument("--dpi", type=int, default=120)
    p.set_defaults(func=_cmd_figures)

    p = add("demo", "cluster scikit-learn's digits and print ACC/NMI/purity and the weights",
            "Run MKKM-RK on scikit-learn's bundled digits data (1797 x 64, 10 classes).")
    p.add_argument("--lam", type=_lam_type, default=2.0**-15, help="lambda (default 2^-15)")
    p.add_argument("--solver", choices=SOLVER_CHOICES, default="blockwise",
                   help="backend (default blockwise: kernels in a temporary Zarr store, "
                        "computed on the embedded local Dask cluster)")
    p.add_argument("--scheduler", metavar="ADDRESS", default=None,
                   help="a running Dask scheduler (for blockwise/nystrom)")
    p.add_argument("--workers", type=int, default=None, help=argparse.SUPPRESS)
    p.add_argument("--seed", type=int, default=0, help="random seed")
    p.add_argument("--n-samples", type=int, default=None, help="use the first N samples")
    p.set_defaults(func=_cmd_demo)
    return parser


def _version() -> str:
    from . import __version__

    return f"mkrk {__version__}"


# --------------------------------------------------------------------------- configuration


def _load_config(path: str) -> dict[str, Any]:
    p = Path(path).expanduser()
    if not p.is_file():
        raise UserError(f"config file {p} does not exist")
    text = p.read_text(encoding="utf-8")
    try:
        if p.suffix == ".toml":
            import tomllib

            config = tomllib.loads(text)
        elif p.suffix == ".json":
            config = json.loads(text)
        elif p.suffix in (".yaml", ".yml"):
            try:
                import yaml
            except ImportError:
                raise UserError("YAML config files need PyYAML (pip install pyyaml); "
                                "or use TOML or JSON") from None
            config = yaml.safe_load(text) or {}
        else:
            raise UserError(f"config file {p}: use a .toml, .json, .yaml or .yml file")
    except UserError:
        raise
    except Exception as err:  # each format has its own decode error type
        raise UserError(f"cannot read config file {p}: {' '.join(str(err).split())}") from None
    if not isinstance(config, dict):
        raise UserError(f"config file {p}: expected a table of settings")
    return config


def _config_defaults(config: dict[str, Any], command: str, sub: argparse.ArgumentParser,
                     commands: Sequence[str]) -> dict[str, Any]:
    dests = {a.dest for a in sub._actions if a.dest != "help"}
    merged = {k: v for k, v in config.items() if k not in commands}
    section = config.get(command, {})
    if not isinstance(section, dict):
        raise UserError(f"config: [{command}] must be a table of settings")
    merged.update(section)
    out = {}
    for key, value in merged.items():
        dest = key.replace("-", "_")
        if dest not in dests or dest in ("config", "func", "data", "model", "results"):
            if key in section:
                raise UserError(f"config: unknown setting {key!r} for mkrk {command}")
            continue  # a top-level setting meant for other commands
        out[dest] = value
    return out


# --------------------------------------------------------------------------- entry point


def _quiet_logs(verbosity: int) -> None:
    level = logging.INFO if verbosity >= 3 else logging.ERROR
    for name in ("distributed", "tornado", "asyncio"):
        logging.getLogger(name).setLevel(level)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``mkrk`` console script. Returns the exit code."""
    parser = build_parser()
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        args = parser.parse_args(argv)
    except SystemExit as stop:  # --help, --version, or a usage error (already printed)
        return int(stop.code or 0) if not isinstance(stop.code, str) else EXIT_USER
    if not getattr(args, "func", None):
        parser.print_help(sys.stderr)
        return EXIT_USER
    debug = args.debug
    try:
        if args.config:
            sub = parser._subparsers._group_actions[0].choices[args.command]
            commands = list(parser._subparsers._group_actions[0].choices)
            sub.set_defaults(**_config_defaults(_load_config(args.config), args.command, sub,
                                                commands))
            try:
                args = parser.parse_args(argv)
            except SystemExit as stop:
                return int(stop.code or 0)
        args.verbosity = 0 if args.quiet else 1 + args.verbose
        args.command_line = _command_line(argv)
        _quiet_logs(args.verbosity)
        if args.verbosity <= 0:
            import warnings

            warnings.simplefilter("ignore")
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        print(f"mkrk {args.command}: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except Exception as err:
        user = _is_user_error(err)
        if debug:
            import traceback

            traceback.print_exc()
        message = " ".join(str(err).split()) or type(err).__name__
        if user:
            print(f"mkrk {args.command}: error: {message}", file=sys.stderr)
            return EXIT_USER
        print(f"mkrk {args.command}: internal error ({type(err).__name__}): {message}"
              + ("" if debug else "; run with --debug for the traceback"), file=sys.stderr)
        return EXIT_INTERNAL


def _is_user_error(err: BaseException) -> bool:
    from .cluster import SchedulerUnreachableError

    return isinstance(err, (UserError, ValueError, FileNotFoundError, IsADirectoryError,
                            PermissionError, SchedulerUnreachableError, NotImplementedError))


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())

