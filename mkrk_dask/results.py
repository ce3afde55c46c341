"""Results on disk: the JSON layout that ``mkrk`` and the paper's protocol write and that
:mod:`mkrk_dask.plotting` reads, with its writers and its reader.

Every result dict carries ``"kind"`` (``mkrk-fit``, ``mkrk-search``, ``mkrk-protocol``) and
``"version"`` (the library's ``__version__``). Two layouts:

- a fit (``result.json`` of ``mkrk fit``; :func:`fit_record`): the settings, ``kernel_names``,
  ``view_names`` and ``kernel_views`` (the view every kernel reads), ``weights``,
  ``inertia``, ``Y``, ``objective_history``, ``n_iter``, ``converged``, the QP gaps,
  timings and, with labels, ``metrics`` (``acc``, ``nmi``, ``purity``);
- a search or the protocol (:func:`search_report`): ``repeats``, ``seed``, ``lams`` and a list
  ``datasets``; each entry has ``dataset``, ``n_samples``, ``n_clusters``, ``kernel_names``,
  ``seconds`` and ``"MKKM-RK": {"per_lambda": [...]}``, one :func:`search_record` per lambda
  (``lam``, ``weights``, ``Y``, ``objective_history``, ``n_iter``, with labels ``summary``
  = best / mean / std of every metric over the repeats and ``scores`` per repeat) and, with
  labels, the lambda of the best best-of-R ACC (:func:`mkkmrk_summary`).

Files are written atomically (:func:`write_text`, :func:`write_json`): a reader never sees
half a file. Markdown reports start with :func:`report_header` (title, command, times,
machine, library), the one header of every report, the benchmarks' included.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["write_text", "write_json", "read_results", "dataset_entries", "fit_record", "write_fit",
           "model_record", "kernel_view_names", "weights_by_view",
           "search_record", "mkkmrk_summary", "search_report", "write_labels", "labels_table",
           "atomic_path",
           "plain_mode", "weight_stats",
           "library_version", "machine_line", "report_header"]

def library_version() -> str:
    """``mkrk_dask.__version__`` (read at call time: this module may be imported while the
    package itself is still being imported)."""
    import mkrk_dask

    return str(mkrk_dask.__version__)


# --------------------------------------------------------------------------- files


def write_text(path: str | os.PathLike[str], text: str) -> Path:
    """Write ``text`` to ``path`` atomically.

    The text goes to a temporary file in the same folder, which then replaces ``path``
    (``os.replace``): an interrupted run leaves the previous file or the new one, never a
    truncated one. The folder is created if needed.
    """
    path = Path(path)
    with atomic_path(path) as temporary, open(temporary, "w", encoding="utf-8") as handle:
        handle.write(text)
        handle.flush()
        os.fsync(handle.fileno())
    return path


def write_json(path: str | os.PathLike[str], data: Any) -> Path:
    """Write ``data`` as indented JSON, atomically (:func:`write_text`)."""
    # Serialised before the file is opened: a value JSON cannot hold leaves no trace.
    return write_text(path, json.dumps(data, indent=1) + "\n")


def read_results(source: str | os.PathLike[str] | dict[str, Any]) -> dict[str, Any]:
    """A results file (or its parsed content, returned as is).

    Raises
    ------
    FileNotFoundError
        If the file does not exist.
    ValueError
        If it is not JSON, or not a JSON object.
    """
    if isinstance(source, dict):
        return source
    path = Path(source).expanduser()
    if not path.is_file():
        raise FileNotFoundError(f"results file {path} does not exist")
    try:
        report = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise ValueError(f"{path} is not a JSON results file: {err}") from None
    if not isinstance(report, dict):
        raise ValueError(f"{path} is not a results file of mkrk (a JSON object expected)")
    return report


def dataset_entries(report: dict[str, Any]) -> list[dict[str, Any]]:
    """The ``datasets`` of a search or protocol report; a fit's result becomes one entry
    (one lambda, ``"single_fit": True``; its metrics become a summary with zero spread).

    Raises
    ------
    ValueError
        If ``report`` is neither layout.
    """
    if "datasets" in report:
        return list(report["datasets"])
    if "objective_history" in report and "weights" in report:
        # Y is None for the methods without one (MKKM, SimpleMKKM): no figure of Y then
        item = {k: report.get(k) for k in ("lam", "weights", "Y", "objective_history",
                                           "n_iter")}
        if report.get("metrics"):
            item["summary"] = {k: {"best": v, "mean": v, "std": 0.0}
                               for k, v in report["metrics"].items()}
        data = report.get("data", "fit")
        # several files, one view each: named after all of them
        name = "+".join(Path(str(d)).stem for d in (data if isinstance(data, list) else [data]))
        return [{"dataset": name, "kernel_names": report.get("kernel_names"),
                 "kernel_views": report.get("kernel_views"),
                 "MKKM-RK": {"per_lambda": [item]}, "single_fit": True}]
    raise ValueError("not a results file of mkrk search / reproduce / fit "
                     "(no 'datasets' list and no single fit)")


def labels_table(labels: Any, ids: Any = None) -> tuple[list[str], list[list[Any]]]:
    """The header and rows of a labels CSV: ``label``, or ``id,label`` with the rows' IDs.

    Raises
    ------
    ValueError
        If ``ids`` and ``labels`` differ in length.
    """
    labels = np.asarray(labels)
    if ids is None:
        return ["label"], [[int(v)] for v in labels]
    ids = np.asarray(ids)
    if ids.shape[0] != labels.shape[0]:
        raise ValueError(f"{ids.shape[0]} IDs for {labels.shape[0]} labels")
    return ["id", "label"], [[str(i), int(v)] for i, v in zip(ids, labels, strict=True)]


def write_labels(path: str | os.PathLike[str], labels: Any, ids: Any = None) -> Path:
    """Labels to ``.npy``, or to CSV text (any other extension) with a header line: ``label``
    and one label a line, or ``id,label`` and a row's ID beside its label when ``ids`` are
    given (an ID column's); atomically (:func:`atomic_path`).

    A ``.npy`` file holds the labels only (an array of one type).
    """
    path = Path(path)
    labels = np.asarray(labels)
    header, rows = labels_table(labels, ids)  # checked before anything is written
    with atomic_path(path) as temporary:
        if path.suffix == ".npy":
            with open(temporary, "wb") as handle:
                np.save(handle, labels)
        else:
            _write_csv(temporary, header, rows)
    return path


def plain_mode(path: str | os.PathLike[str]) -> None:
    """Give ``path`` the permissions a plain ``open()`` or ``mkdir`` would (0666 or 0777 less
    the umask): ``tempfile`` makes its files 0600 and folders 0700, and a result renamed
    into place would otherwise be private to its owner."""
    mask = os.umask(0)
    os.umask(mask)
    os.chmod(path, (0o777 if os.path.isdir(path) else 0o666) & ~mask)


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike[str]) -> Iterator[Path]:
    """A temporary file name beside ``path`` to write to; it replaces ``path`` when the block
    ends without error and is removed otherwise. The folder is created if needed."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(fd)
    plain_mode(name)
    try:
        yield Path(name)
        os.replace(name, path)
    except BaseException:
        Path(name).unlink(missing_ok=True)
        raise


def _write_csv(path: Path, header: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
    """CSV with a header row; fields holding commas (kernel names) are quoted."""
    import csv

    with open(path, "w", encoding="utf-8", newline="") as handle:
        writer = csv.writer(handle, lineterminator="\n")
        writer.writerow(header)
        writer.writerows(rows)


# --------------------------------------------------------------------------- a fit


def fit_record(model: Any, data: Any, *, source: str, command: str | None = None,
               seconds: float | None = None, scheduler: str | None = None,
               store: str | None = None) -> dict[str, Any]:
    """The JSON record of a fitted :class:`~mkrk_dask.MKKMRK` (``result.json``).

    Parameters
    ----------
    model : MKKMRK
        Fitted.
    data : mkrk_dask.io.Dataset
        What it was fitted on; with labels, the record holds the ``metrics``.
    source : str or list of str
        The data as the user named it (a path or a benchmark name; several files, one view
        each, as a list).
    command, seconds, scheduler, store
        The command line, the wall time, and where it ran (recorded as given).
    """
    from .metrics import clustering_scores

    result: dict[str, Any] = {
        "kind": "mkrk-fit", "version": library_version(), "command": command,
        # several files (one view each) as a list
        "data": [str(s) for s in source] if isinstance(source, list) else str(source),
        "n_samples": data.n_samples, "n_features": data.n_features,
        **model_record(model), "scheduler": scheduler, "store": store, "seconds": seconds,
        "model": None}
    if data.y is not None:
        result["metrics"] = clustering_scores(data.y, model.labels_)
    return result


def model_record(model: Any) -> dict[str, Any]:
    """What a fitted estimator's record holds of the estimator alone (:func:`fit_record`
    adds the data and the run): also what :mod:`mkrk_dask.plotting` draws a fitted estimator
    from."""
    record: dict[str, Any] = {
        "method": model.method, "n_clusters": int(model.n_clusters), "solver": model.solver_,
        # the method's own settings and results (MKKM has no lambda, only MKKM-RK a Y)
        "lam": _number(getattr(model, "lam", None)),
        "lam_effective": _number(getattr(model, "lam_effective_", None)),
        "dissimilarity": getattr(model, "dissimilarity", None),
        "kernel_names": list(model.kernel_names_), "weights": model.weights_.tolist(),
        "selected_kernels": [int(p) for p in model.selected_kernels_],
        "Y": _array(getattr(model, "representation_", None)),
        "objective_history": np.asarray(model.objective_history_).tolist(),
        "n_iter": int(model.n_iter_), "converged": bool(model.converged_),
        "qp_relative_gaps": _array(getattr(model, "qp_relative_gaps_", None)),
        "timings": {k: float(v) for k, v in model.timings_.items()},
        "final_step": getattr(model, "final_step_", None),
        "final_clustering": getattr(model, "final_clustering_", None),
        "final_graph_agreement": _number(getattr(model, "final_graph_agreement_", None)),
        "final_graph_clear": getattr(model, "final_graph_clear_", None),
        "plan": model.plan_.to_dict() if hasattr(model, "plan_") else None,
        "inertia": _number(getattr(model, "inertia_", None)),
        "view_names": _list(getattr(model, "view_names_", None)),
        "kernel_views": kernel_view_names(model)}
    gaps = getattr(model, "relative_gaps_", None)
    if gaps is not None:  # SimpleMKKM: the certified optimality gap of every step
        record["optimality_gaps"] = np.asarray(gaps).tolist()
        record["h_steps"] = int(model.n_h_steps_)
    missed = getattr(model, "nystrom_missed_fraction_", None)
    if missed is not None:
        record["nystrom_residual"] = model.nystrom_residual_.tolist()
        record["nystrom_missed_fraction"] = float(missed)
    return record


def kernel_view_names(model: Any) -> list[str] | None:
    """The name of the view every kernel of a fitted model reads (None for precomputed
    kernels)."""
    from .views import kernel_views

    names = getattr(model, "view_names_", None)
    if names is None:
        return None
    return [names[v] for v in kernel_views(model.kernels_, len(model.weights_))]


def weights_by_view(model: Any) -> list[str]:
    """The weight of every kernel grouped by the view it reads, each view's total first
    (the terminal's listing of a multi-view fit); no lines for one view."""
    views = kernel_view_names(model)
    if views is None or len(set(views)) < 2:
        return []
    lines = ["weights by view:"]
    for name in model.view_names_:
        members = [p for p, view in enumerate(views) if view == name]
        lines.append(f"  {name}: {float(np.sum(model.weights_[members])):.4f}")
        lines += [f"    {model.kernel_names_[p]:<28s} {model.weights_[p]:.4f}"
                  for p in sorted(members, key=lambda p: -model.weights_[p])]
    return lines


def _list(value: Any) -> list | None:
    return None if value is None else [str(v) for v in value]


def _number(value: Any) -> float | None:
    return None if value is None else float(value)


def _array(value: Any) -> list | None:
    return None if value is None else np.asarray(value).tolist()


def write_fit(out: str | os.PathLike[str], model: Any, data: Any, *,
              save_model: Callable[[Any, Path], str] | None = None,
              **record: Any) -> dict[str, Any]:
    """Write everything about a fit to the folder ``out`` and return its record.

    Files: ``labels``, ``weights``, ``Y`` and ``objective`` as ``.npy`` and ``.csv``
    (``labels.csv`` is ``id,label`` where ``data.ids`` holds the rows' IDs; the other
    CSV files name the kernels: ``Y.csv`` has a header row and a first column of kernel
    names; ``weights.csv`` of a multi-view fit is ``kernel,view,weight``, the view named);
    ``metrics.json`` (with labels); the model, when ``save_model(model, out)`` is given
    (it returns the name it wrote, recorded as ``"model"``); and ``result.json``
    (:func:`fit_record`, written last, so its presence means the folder is complete).

    ``record`` is passed on to :func:`fit_record` (``source`` is required).
    """
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    result = fit_record(model, data, **record)
    names = list(model.kernel_names_)
    labels = np.asarray(model.labels_)
    np.save(out / "labels.npy", labels)
    write_labels(out / "labels.csv", labels, getattr(data, "ids", None))
    np.save(out / "weights.npy", model.weights_)
    views = result["kernel_views"]
    if views is not None and len(set(views)) > 1:  # multi-view: the view of every kernel
        _write_csv(out / "weights.csv", ["kernel", "view", "weight"],
                   [[name, view, repr(float(w))]
                    for name, view, w in zip(names, views, model.weights_, strict=True)])
    else:
        _write_csv(out / "weights.csv", ["kernel", "weight"],
                   [[name, repr(float(w))] for name, w in zip(names, model.weights_,
                                                               strict=True)])
    Y = getattr(model, "representation_", None)
    if Y is not None:  # MKKM-RK's representation (the other methods have none)
        Y = np.asarray(Y)
        np.save(out / "Y.npy", Y)
        _write_csv(out / "Y.csv", ["kernel", *names],
                   [[name, *(repr(float(v)) for v in row)] for name, row in zip(names, Y,
                                                                              strict=True)])
    np.save(out / "objective.npy", model.objective_history_)
    _write_csv(out / "objective.csv", ["iteration", "objective"],
               [[i + 1, repr(float(f))] for i, f in enumerate(model.objective_history_)])
    if "metrics" in result:
        write_json(out / "metrics.json", result["metrics"])
    if save_model is not None:
        result["model"] = save_model(model, out)
    write_json(out / "result.json", result)
    return result


def weight_stats(weights: Any, top: int = 2) -> dict[str, Any]:
    """How the weight of a fit is spread over its kernels.

    Returns ``n_kernels``; ``n_selected``, the kernels whose weight reaches the library's
    :data:`~mkrk_dask.loop.SELECTION_THRESHOLD` (what ``selected_kernels_`` counts);
    ``effective``, the effective number of kernels ``(sum w)^2 / sum w^2`` (``1/sum w^2`` for
    weights summing to 1: m for equal weights, 1 for a single kernel); ``top`` and
    ``top_share``, the share of the total weight the ``top`` heaviest kernels carry; and
    ``threshold``.
    """
    from .loop import SELECTION_THRESHOLD, selected_kernels

    w = np.asarray(weights, dtype=np.float64).ravel()
    total = float(w.sum())
    top = max(1, min(int(top), w.size))
    return {"n_kernels": int(w.size), "n_selected": int(selected_kernels(w).size),
            "effective": total**2 / float(np.sum(w**2)) if total > 0 else 0.0,
            "top": top, "top_share": float(np.sort(w)[::-1][:top].sum() / total) if total > 0
            else 0.0, "threshold": SELECTION_THRESHOLD}


# --------------------------------------------------------------------------- a search


def search_record(res: Any) -> dict[str, Any]:
    """The JSON record of one lambda of a search (a :class:`~mkrk_dask.LambdaResult`)."""
    from .search import summarize_scores

    return {"lam": float(res.lam), "log2_lam": float(np.log2(res.lam)) if res.lam > 0 else None,
            "weights": res.weights.tolist(), "Y": np.asarray(res.representation).tolist(),
            "objective_history": np.asarray(res.objective_history).tolist(),
            "n_iter": int(res.n_iter), "converged": bool(res.converged),
            "max_qp_relative_gap": float(res.max_qp_relative_gap),
            "n_selected": int(res.n_selected), "seconds": float(res.seconds),
            "nystrom_missed_fraction": res.nystrom_missed_fraction,
            "summary": summarize_scores(res.scores) if res.scores else None,
            "scores": res.scores}


def mkkmrk_summary(per_lambda: list[dict[str, Any]]) -> dict[str, Any]:
    """The ``"MKKM-RK"`` entry of a dataset: every lambda and, when they were scored, the
    lambda with the best best-of-R ACC (the paper's choice; ties: the first in the grid)."""
    entry: dict[str, Any] = {"per_lambda": per_lambda}
    if per_lambda and all(item.get("summary") for item in per_lambda):
        best = int(np.argmax([item["summary"]["acc"]["best"] for item in per_lambda]))
        entry.update(best_index=best, lam=per_lambda[best]["lam"],
                     n_iter=per_lambda[best]["n_iter"], summary=per_lambda[best]["summary"],
                     weights=per_lambda[best]["weights"])
    return entry


def search_report(kind: str, *, command: str | None, repeats: int, seed: int | None,
                  lams: Sequence[float], datasets: list[dict[str, Any]],
                  **extra: Any) -> dict[str, Any]:
    """The top level of a search (``kind="mkrk-search"``) or protocol report; ``extra``
    holds further fields (machine, timings, ...)."""
    return {"kind": kind, "version": library_version(), "command": command,
            "repeats": int(repeats), "seed": seed, "lams": [float(v) for v in lams],
            **extra, "datasets": datasets}


# --------------------------------------------------------------------------- Markdown reports


def machine_line() -> str:
    """The machine a report was measured on: host, cores, RAM, Python, numpy, platform."""
    import platform

    import psutil

    memory = psutil.virtual_memory().total / 2**30
    return (f"{platform.node()}: {os.cpu_count()} cores, {memory:.2f} GiB RAM, Python "
            f"{platform.python_version()}, numpy {np.__version__}, {platform.platform()}")


def report_header(title: str, *, command: str | None, started: str | None,
                  finished: str | None, machine: str | None, library: str | None,
                  directory: str | None = None) -> str:
    """The header every Markdown report starts with (then its body): the title, the exact
    command (and the folder it ran in), when it started and finished, the machine and the
    library's state."""
    where = f" (run from `{directory}`)" if directory else ""
    return (f"# {title}\n\n"
            f"- command: `{command}`{where}\n"
            f"- started {started}, finished {finished}\n"
            f"- machine: {machine}\n"
            f"- library: {library}\n"
            "- every figure below was measured in this run\n\n")
