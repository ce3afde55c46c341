"""The commands of ``mkrk``: each takes the parsed arguments and returns an exit code.

They read data through :mod:`mkrk_dask.io`, fit through the estimator and
:func:`mkrk_dask.lambda_search` (the CLI builds no backend itself: ``mkrk build`` goes
through :func:`mkrk_dask.build_store`), run on the Dask session of
:func:`~.session.dask_client`, and write results through :mod:`mkrk_dask.results` into an
``--out`` checked before the work (:mod:`.output`).

Standard output carries the results a user would pipe (:func:`result`), and only those; logs
go to standard error (:func:`log`): silent with ``-q``, one line per step, pass and iteration
by default, more with ``-v``.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from .._text import plural, wrap_lines
from ..choices import LABEL_FREE_DEFAULTS, MKKMRK_PAPER, PROTOCOL_METHODS
from ..csv_input import CsvColumns
from ..estimators import ESTIMATORS, MKKMRK, AnchorGraphClustering
from ..io import Dataset
from ..kernels import as_kernel_specs, parse_kernel
from ..loop import selection_words
from ..metrics import clustering_scores
from ..plotting import make_figures  # matplotlib itself is imported when drawing
from ..protocol import find_datasets, render_markdown, run_protocol
from ..results import (
    dataset_entries,
    labels_table,
    library_version,
    mkkmrk_summary,
    read_results,
    search_record,
    search_report,
    weights_by_view,
    write_fit,
    write_json,
    write_labels,
)
from ..search import build_store, lambda_search, paper_lambda_grid
from ..views import default_view_names, named_views
from . import models
from .demo import run_demo
from .errors import EXIT_OK, UserError
from .inputs import load_data, source_of, views_for
from .output import Output
from .parser import format_default, parse_lams
from .session import dask_client, reporting, storage_options

__all__ = ["COMMANDS", "dask_client", "run_search", "log", "result", "scores_line"]


# --------------------------------------------------------------------------- helpers


def log(args: argparse.Namespace, message: str, level: int = 1) -> None:
    """A line of the log, on stderr, when the verbosity is at least ``level`` (1: default,
    2: -v)."""
    if args.verbosity >= level:
        print(message, file=sys.stderr, flush=True)


def result(message: str) -> None:
    """A line of the results, on stdout (printed whatever the verbosity)."""
    print(message, flush=True)


def scores_line(scores: dict[str, float]) -> str:
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
    """--kernels for the estimator, each specification checked before any work."""
    if not values:
        return None
    if values in (["paper"], ["auto"]):
        return values[0]
    for text in values:
        try:
            parse_kernel(text)
        except ValueError as err:
            raise UserError(f"--kernels {text!r}: {err}") from None
    return list(values)


def _solver_of(args: argparse.Namespace) -> str:
    # with or without a scheduler, the plan chooses as in Python (a scheduler made it
    # blockwise: its m n^2 kernels on disk at any n)
    if args.solver is not None:
        return args.solver
    return (MKKMRK_PAPER if getattr(args, "paper", False) else LABEL_FREE_DEFAULTS)["solver"]


def _method(args: argparse.Namespace) -> type:
    """The estimator class of --method (MKKM-RK without one)."""
    return ESTIMATORS[getattr(args, "method", None) or "MKKM-RK"]


def _model_settings(args: argparse.Namespace) -> dict[str, Any]:
    """The model options given, over --paper's configuration or the estimator's defaults."""
    cls = _method(args)
    settings = {key: value for key, value in cls.PAPER_SETTINGS.items()
                if getattr(args, "paper", False) and key != "solver"}
    given = {"lam": getattr(args, "lam", None), "kernels": _kernels_arg(args.kernels),
             "dissimilarity": args.dissimilarity, "lam_scaling": args.lam_scaling,
             "final_step": args.final_step, "final_clustering": args.final_clustering,
             "preprocessing": getattr(args, "preprocessing", None),
             "n_components": getattr(args, "n_components", None)}
    known = cls().get_params()
    for key, value in given.items():
        if value is not None and key not in known:
            raise UserError(f"--{key.replace('_', '-')} does not apply to --method "
                            f"{cls.method}")
    settings.update({key: value for key, value in given.items() if value is not None})
    return settings


def _repeats(args: argparse.Namespace) -> int:
    if args.repeats < 1:
        raise UserError(f"--repeats must be >= 1, got {args.repeats}")
    return int(args.repeats)


def _backend_options(args: argparse.Namespace, solver: str, **given: Any) -> dict[str, Any]:
    """``backend_options`` from the backend options of the command line: --dtype for every
    solver, --chunk-size, --n-landmarks, --landmarks, --max-store-bytes and --overwrite where
    ``solver`` has them
    (``"auto"``: all; the plan keeps those of the backend it chooses), --max-components,
    --gram-rows and --final-rows as given."""
    from ..backends import option_names

    names = option_names("nystrom" if solver == "auto" else solver)
    given = {"dtype": args.dtype, **{
        name: getattr(args, name) for name in ("chunk_size", "n_landmarks", "landmarks",
                                               "max_store_bytes")
        if name in names and getattr(args, name, None) is not None}, **given}
    if getattr(args, "overwrite", False) and "overwrite" in names:
        given["overwrite"] = True
    for flag in ("max_components", "gram_rows", "final_rows"):
        text = getattr(args, flag, None)
        if text is None:
            continue
        if text in ("auto", "none"):
            given[flag] = None if text == "none" else "auto"
        elif text.isdigit() and int(text) >= 1:
            given[flag] = int(text)
        else:
            raise UserError(f"--{flag.replace('_', '-')} must be 'auto', 'none' or an "
                            f"integer >= 1, got {text!r}")
    return given


def _store(args: argparse.Namespace) -> str | Path | None:
    """--store as the library takes it: a URL as written, a path expanded."""
    if args.store is None or "://" in args.store:
        return args.store
    return Path(args.store).expanduser()


def _estimator(args: argparse.Namespace, n_clusters: int, solver: str, client: Any) -> Any:
    # --tol and --tol-mode when given, else the method's own (SimpleMKKM's leave the stop to
    # its certified optimality gap)
    stop = {name: value for name, value in (("tol", args.tol), ("tol_mode", args.tol_mode))
            if value is not None}
    return _method(args)(
        n_clusters=n_clusters, **_model_settings(args), solver=solver, **stop,
        max_iter=args.max_iter, n_init=args.n_init,
        store=_store(args), storage_options=storage_options(args), scheduler=client,
        random_state=args.seed, verbose=1 if args.verbosity >= 1 else 0,
        backend_options=_backend_options(args, solver))


def _result_size(data: Dataset) -> int:
    """Bytes a fit's folder needs, roughly: labels, the model's rows, Y and the rest."""
    return 1024 * 1024 + 200 * data.n_samples


# --------------------------------------------------------------------------- commands


#: the file of a fit's --out that records the CSV columns it read (mkrk predict applies them)
INPUT_FILE = "input.json"


def _columns(args: argparse.Namespace, recorded: dict[str, Any] | None = None) -> CsvColumns:
    """The CSV columns the options pick (none: every column a feature), over those a fit
    recorded (``recorded``, for mkrk predict): an option given replaces the recorded one,
    --columns and --drop-columns as one choice."""
    given = {key: value for key, value in (("label_column", getattr(args, "label_column", None)),
                                           ("id_column", args.id_column)) if value is not None}
    if args.columns is not None or args.drop_columns:
        given.update(columns=args.columns, drop_columns=args.drop_columns)
    if recorded is None:
        return CsvColumns(**given)
    # the fit's label column is read where the new data has it: new data may have no labels
    return CsvColumns.from_json(recorded, optional_label="label_column" not in given, **given)


def _load(args: argparse.Namespace, recorded: dict[str, Any] | None = None,
          **kwargs: Any) -> Dataset:
    """The command's data (:func:`~mkrk_dask.io.load_input` with the CSV columns the options
    pick, over ``recorded``), and a line saying how a CSV file was read where the reader
    chose something (its separator, a column of row names left out), before any work on
    it."""
    data = load_data(args, columns=_columns(args, recorded), **kwargs)
    if "read" in data.extra:
        log(args, f"read {args.data[0]}: {data.extra['read']}")
    return data


def _write_input(folder: Path, args: argparse.Namespace) -> None:
    """Record the CSV columns the fit read in its --out (``input.json``), for mkrk predict."""
    write_json(folder / INPUT_FILE, {"kind": "mkrk-input", "version": library_version(),
                                     "data": source_of(args),
                                     "csv_columns": _columns(args).to_json()})


def _recorded_columns(args: argparse.Namespace) -> dict[str, Any] | None:
    """The CSV columns of the fit whose model predict reads (its ``input.json``), where the
    new data is a CSV file too; else None."""
    if Path(args.data[0]).suffix.lower() != ".csv":
        return None
    model = Path(args.model).expanduser()
    # MODEL is the fit's --out, or the model inside it
    folder = model if (model / "result.json").is_file() else model.parent
    path = folder / INPUT_FILE
    if not path.is_file():
        return None  # a fit made before the columns were recorded, or of another format
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        raise UserError(f"cannot read the fit's columns {path}: {err}") from None
    columns = record.get("csv_columns") if isinstance(record, dict) else None
    if not isinstance(columns, dict):
        raise UserError(f"{path} records no CSV columns (csv_columns)")
    log(args, f"the CSV columns of the fit ({path}): " + ", ".join(
        f"{key} {value}" for key, value in columns.items() if value not in (None, [])), 2)
    return columns


def _cmd_build(args: argparse.Namespace) -> int:
    data = _load(args)
    store = _store(args)
    estimator = MKKMRK(kernels=_kernels_arg(args.kernels) or "paper", solver=args.solver,
                       store=store,
                       storage_options=storage_options(args), random_state=args.seed,
                       backend_options=_backend_options(
                           args, args.solver, **({"overwrite": True} if args.overwrite else {})))
    log(args, f"building a {args.solver} store at {store}: {data.n_samples} samples")
    with dask_client(args, args.solver) as client:
        info = build_store(estimator.set_params(scheduler=client), data.X)
    state = "reused (already complete)" if info.reused else "built"
    result(f"store {store} {state} in {info.seconds:.1f} s ({info.nbytes / 2**20:.1f} MiB)")
    log(args, f"use it with: mkrk fit {' '.join(args.data)} --solver {args.solver} --store {store}")
    return EXIT_OK


def _fit_inputs(args: argparse.Namespace) -> tuple[Output | None, Dataset, int]:
    """A fitting command's --out (checked before anything is read, then against the data's
    size), its data and k."""
    out = Output(args.out, force=args.force) if args.out is not None else None
    if out is not None:
        out.check()
    data = _load(args, labels=args.labels, y_key=args.y_key)
    if out is not None:
        out.check(_result_size(data))
    return out, data, _n_clusters(args, data)


def _cmd_fit(args: argparse.Namespace) -> int:
    out, data, k = _fit_inputs(args)
    solver = _solver_of(args)
    cls = _method(args)
    lam = _model_settings(args).get("lam", cls().get_params().get("lam"))
    planning = getattr(args, "plan", False)
    log(args, f"{'plan for' if planning else 'fitting'} {cls.method} on {data.name}: "
              f"{data.n_samples} samples, k = {k}, "
              + (f"lambda = {format_default(lam)}, " if lam is not None else "")
              + f"solver = {solver}"
              + (f", scheduler {args.scheduler}" if args.scheduler else ""))
    if planning:
        result(str(_estimator(args, k, solver, None).plan(named_views(data.X, data.view_names))))
        return EXIT_OK
    start = time.perf_counter()
    with dask_client(args, solver) as client:
        model = _estimator(args, k, solver, client).fit(named_views(data.X,
                                                                    data.view_names))
    seconds = time.perf_counter() - start
    record = None
    if out is not None:
        with out.folder() as folder:
            record = write_fit(folder, model, data, save_model=models.save, source=source_of(args),
                               command=args.command_line, seconds=seconds,
                               scheduler=args.scheduler, store=args.store)
            _write_input(folder, args)
    log(args, f"fitted in {seconds:.1f} s: {plural(model.n_iter_, 'iteration')} "
              f"({'converged' if model.converged_ else '--max-iter reached'}); "
              f"{selection_words(model.weights_)}")
    if args.verbosity >= 2:
        log(args, "timings: " + ", ".join(f"{k} {v:.2f}s" for k, v in model.timings_.items()),
            2)
    if data.y is not None:
        result(scores_line(record["metrics"] if record else
                           clustering_scores(data.y, model.labels_)))
    # the weights are results: -q silences stderr only; -v adds the solver's diagnostics
    result(model.summary(detail=args.verbosity >= 2))
    for line in weights_by_view(model):  # a multi-view fit's kernels, by view
        result(line)
    if out is not None:
        for line in wrap_lines([f"results in {out.path}/ (labels, weights, Y, objective: "
                                f".npy/.csv; metrics.json, result.json; the model: "
                                f"{record['model']})"]):
            log(args, line)
    return EXIT_OK


def _cmd_graph(args: argparse.Namespace) -> int:
    out, data, k = _fit_inputs(args)
    model = AnchorGraphClustering(k, n_anchors=args.n_anchors, n_neighbors=args.n_neighbors,
                                  geometry=args.geometry, random_state=args.seed)
    log(args, f"clustering {data.name} on its anchor graph: {data.n_samples} samples, k = {k}"
              + (f", scheduler {args.scheduler}" if args.scheduler else ""))
    start = time.perf_counter()
    # no cluster unless --scheduler: the graph of data in memory needs none
    with dask_client(args, "exact") as client:
        with client.as_current() if client is not None else contextlib.nullcontext():
            model.fit(named_views(data.X, data.view_names))
    seconds = time.perf_counter() - start
    summary = (f"anchor graph: {', '.join(str(g.anchors.shape[0]) for g in model.view_graphs_)}"
               f" anchors ({', '.join(model.geometry_)}), {args.n_neighbors} nearest; "
               f"eigenvalues {k} and {k + 1}: {model.eigenvalues_[k - 1]:.6f}, "
               f"{model.eigenvalues_[k]:.6f}")
    record: dict[str, Any] = {
        "kind": "mkrk-graph", "version": library_version(), "command": args.command_line,
        "data": source_of(args), "n_samples": data.n_samples, "n_features": data.n_features,
        "method": "anchor graph", "n_clusters": k, "params": model.get_params(),
        "view_names": list(model.view_names_), "inertia": float(model.inertia_),
        "geometry": model.geometry_, "eigenvalues": model.eigenvalues_.tolist(),
        "seconds": seconds, "model": None}
    if data.y is not None:
        record["metrics"] = clustering_scores(data.y, model.labels_)
    if out is not None:
        with out.folder() as folder:
            labels = np.asarray(model.labels_)
            np.save(folder / "labels.npy", labels)
            write_labels(folder / "labels.csv", labels, data.ids)
            if "metrics" in record:
                write_json(folder / "metrics.json", record["metrics"])
            record["model"] = models.save(model, folder)
            _write_input(folder, args)
            write_json(folder / "result.json", record)  # last: the folder is complete
    log(args, f"clustered in {seconds:.1f} s")
    if "metrics" in record:
        result(scores_line(record["metrics"]))
    result(summary)
    if out is not None:
        log(args, f"results in {out.path}/ (labels .npy/.csv, metrics.json, result.json; the "
                  f"model: {record['model']})")
    return EXIT_OK


def run_search(args: argparse.Namespace, data: Dataset, lams: list[float], client: Any,
               n_clusters: int) -> dict[str, Any]:
    """One dataset's lambda grid through :func:`mkrk_dask.lambda_search`, as a dataset entry
    of a search report (:mod:`mkrk_dask.results`)."""
    solver = _solver_of(args)
    estimator = _estimator(args, n_clusters, solver, client)
    if "lam" not in estimator.get_params():
        raise UserError(f"--method {estimator.method} has no lambda to search; mkrk search "
                        "takes MKKM-RK or MKKM-MR")
    estimator.set_params(verbose=0)
    per_lambda: list[dict[str, Any]] = []

    def record(res: Any) -> None:
        item = search_record(res)
        per_lambda.append(item)
        line = (f"  lambda {format_default(float(res.lam)):<8s} iter {res.n_iter:3d}  kernels "
                f"{res.n_selected:2d}  objective {item['objective_history'][-1]:.6g}  "
                f"{res.seconds:.1f}s")
        if item["summary"]:
            s = item["summary"]
            line += (f"  ACC best {100 * s['acc']['best']:.2f} "
                     f"mean {100 * s['acc']['mean']:.2f}")
        log(args, line)

    start = time.perf_counter()
    lambda_search(estimator, data.X, lams, data.y, n_repeats=args.repeats,
                  random_state=args.seed, callback=record)
    specs = as_kernel_specs(estimator.kernels, n_views=len(data.views))
    return {"dataset": data.name, "n_samples": data.n_samples, "n_features": data.n_features,
            "n_clusters": n_clusters, "solver": solver,
            "method": estimator.method,
            "seconds": {estimator.method: time.perf_counter() - start},
            "kernel_names": [s.name for s in specs],
            # the view of every kernel, by name (the figures group the kernels by it)
            "kernel_views": [(data.view_names or default_view_names(len(data.views)))[s.view]
                             for s in specs],
            estimator.method: mkkmrk_summary(per_lambda)}


def _cmd_search(args: argparse.Namespace) -> int:
    out = Output(args.out, force=args.force, kind="file")
    out.check()
    lams = (parse_lams(args.lams) if args.lams is not None
            else [float(v) for v in paper_lambda_grid()])
    repeats = _repeats(args)
    data = _load(args, labels=args.labels, y_key=args.y_key, data_dir=args.data_dir)
    k = _n_clusters(args, data)
    solver = _solver_of(args)
    log(args, f"lambda search on {data.name}: {data.n_samples} samples, k = {k}, "
              f"{len(lams)} lambdas, {repeats} repeats, solver = {solver}")
    with dask_client(args, solver) as client:
        entry = run_search(args, data, lams, client, k)
    report = search_report("mkrk-search", command=args.command_line, repeats=repeats,
                           seed=args.seed, lams=lams, datasets=[entry])
    try:
        path = write_json(out.path, report)
    except OSError as err:
        raise UserError(f"cannot write the results to {out.path}: {err.strerror or err}") \
            from None
    if "summary" in entry[entry["method"]]:
        best = entry[entry["method"]]
        result(f"best lambda {format_default(float(best['lam']))} (by best-of-{repeats} ACC): "
               f"{scores_line({m: best['summary'][m]['best'] for m in ('acc', 'nmi', 'purity')})}")
    log(args, f"results in {path}; draw them with: mkrk figures {path}")
    return EXIT_OK


def _cmd_predict(args: argparse.Namespace) -> int:
    out = Output(args.out, force=args.force, kind="file") if args.out is not None else None
    if out is not None:
        out.check()
    model = models.load(args.model, trust=args.trust)
    if not hasattr(model, "predict"):
        raise UserError(f"the model {args.model} cannot label new data: it was fitted on "
                        "precomputed kernels (no kernel between new points and the training "
                        "points); fit it on the features")
    data = _load(args, _recorded_columns(args), labels=args.labels, y_key=args.y_key)
    start = time.perf_counter()
    labels = np.asarray(model.predict(views_for(args, model, data)))
    log(args, f"predicted {labels.shape[0]} samples in {time.perf_counter() - start:.2f} s")
    if out is not None:
        try:
            log(args, f"labels written to {write_labels(out.path, labels, data.ids)}")
        except OSError as err:
            raise UserError(f"cannot write the labels to {out.path}: "
                            f"{err.strerror or err}") from None
    elif data.ids is not None:
        header, rows = labels_table(labels, data.ids)  # id,label as in a labels file
        writer = csv.writer(sys.stdout, lineterminator="\n")
        writer.writerow(header)
        writer.writerows(rows)
        sys.stdout.flush()
    else:
        np.savetxt(sys.stdout, labels, fmt="%d")
        sys.stdout.flush()
    if data.y is not None:
        # Without --out the labels are the output: the scores are a log line then.
        line = scores_line(clustering_scores(data.y, labels))
        if out is not None:
            result(line)
        else:
            log(args, line)
    return EXIT_OK


def _check_data_folder(args: argparse.Namespace) -> None:
    """Fail early, naming the folder looked in, when no benchmark file is there."""
    from ..datasets import DATA_DIR_ENV, PAPER_DATASETS, data_dir_candidates, default_data_dir

    found, _ = find_datasets(args.datasets, args.data_dir)
    if found:
        return
    how = (f"give --data-dir DIR or set {DATA_DIR_ENV} to the folder with the benchmark files "
           f"(such as {PAPER_DATASETS[args.datasets[0].lower()]})")
    directory = args.data_dir or default_data_dir()
    if directory is None:
        looked = " and ".join(str(c) for c in data_dir_candidates())
        raise UserError(f"no data folder: looked in {looked} (none exists); {how}")
    raise UserError(f"none of {', '.join(args.datasets)} found in {Path(directory)}; {how}")


def _log_protocol_settings(args: argparse.Namespace, repeats: int) -> None:
    """-v: where the data come from and what the protocol will run."""
    from ..datasets import default_data_dir

    found, missing = find_datasets(args.datasets, args.data_dir)
    folder = Path(args.data_dir).expanduser() if args.data_dir else default_data_dir()
    log(args, f"data folder {folder}: {', '.join(found)}"
              + (f" (absent, skipped: {', '.join(missing)})" if missing else ""), level=2)
    grid = args.lams or "2^-15..2^5 (the paper's grid)"
    log(args, f"lambdas {grid}; {repeats} repeats of the final k-means, seed {args.seed}; "
              f"BLAS/OpenMP threads {args.threads or 'default'}", level=2)


def _cmd_reproduce(args: argparse.Namespace) -> int:
    if args.library_only:
        log(args, "mkrk reproduce: --library-only is deprecated and has no effect (the "
                  "protocol always runs from the library)")
    repeats = _repeats(args)
    # the protocol writes its files into the folder and deletes none
    out = Output(args.out, force=args.force, marker="paper_table.json", whole=False)
    out.check()
    lams = parse_lams(args.lams) if args.lams is not None else None
    _check_data_folder(args)
    _log_protocol_settings(args, repeats)
    with reporting(args):
        report = run_protocol(args.datasets, data_dir=args.data_dir, lams=lams,
                              repeats=repeats, seed=args.seed, out=out.path,
                              threads=args.threads, command=args.command_line,
                              methods=(PROTOCOL_METHODS if "all" in args.methods
                                       else args.methods))
    result(render_markdown(report))
    log(args, f"results in {out.path / 'paper_table.md'} and {out.path / 'paper_table.json'}")
    if args.figures:
        written = make_figures(out.path / "paper_table.json", out.path / "figures")
        log(args, f"{len(written)} figures in {out.path / 'figures'}")
    return EXIT_OK


def _cmd_figures(args: argparse.Namespace) -> int:
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise UserError("mkrk figures needs matplotlib: pip install 'mkrk-dask[plot]'") \
            from None
    path = Path(args.results).expanduser()
    if path.is_dir():  # a fit's --out folder: its result.json
        if not (path / "result.json").is_file():
            raise UserError(f"{path} is a folder without result.json: give a results file or "
                            "the --out folder of mkrk fit")
        path = path / "result.json"
    report = read_results(path)
    out = Output.named(args.out) if args.out is not None else path.parent / "figures"
    if out.exists() and not out.is_dir():
        raise UserError(f"--out {out} is a file; give a folder for the figures")
    heatmap_lams = parse_lams(args.heatmap_lams) if args.heatmap_lams is not None else None
    names = [str(entry.get("dataset", "results")) for entry in dataset_entries(report)]
    log(args, f"{path}: {len(names)} dataset(s) ({', '.join(names)}); drawing "
              f"{', '.join(args.datasets) if args.datasets else 'all'} at {args.dpi} dpi",
        level=2)
    written = make_figures(report, out, datasets=args.datasets, heatmap_lams=heatmap_lams,
                           dpi=args.dpi)
    Output.add_to_manifest(path.parent, written)  # --force over a run replaces them too
    for file in written:
        result(str(file))
    log(args, f"{len(written)} figure(s) in {out}")
    return EXIT_OK


def _cmd_demo(args: argparse.Namespace) -> int:
    return run_demo(args, dask_client, log, result)


#: command name -> the function that runs it
COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {
    "build": _cmd_build, "fit": _cmd_fit, "graph": _cmd_graph, "search": _cmd_search,
    "predict": _cmd_predict,
    "reproduce": _cmd_reproduce, "figures": _cmd_figures, "demo": _cmd_demo}
