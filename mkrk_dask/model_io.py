"""Saving a fitted estimator as arrays plus JSON, and loading it back: no code in the files.

A pickle runs whatever code it names when it is loaded, so a model received from elsewhere
cannot be opened safely that way. :func:`save_model` writes a folder with

- ``model.json``: the estimator's class and parameters, its fitted scalars and lists, the
  kind of its row map (for ``predict``) and the library version;
- ``arrays.npz``: every fitted array, read back with ``allow_pickle=False``.

:func:`load_model` rebuilds the estimator from them; it predicts and transforms as the
original. Credentials are never saved: ``storage_options`` and a ``scheduler`` Client are left
out (a scheduler address is kept).
"""

from __future__ import annotations

import json
import os
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp

from .estimators._moved import saved_params
from .kernels import KernelSpec
from .results import atomic_path
from .store import json_normalize

__all__ = ["save_model", "load_model", "FORMAT"]

FORMAT = "mkrk-dask-model"
#: 2: the features step's centres are means of unit rows (a version-1 model's are not, so its
#: ``predict`` would be wrong under this version's nearest-centre rule: refused instead)
_VERSION = 2
_NOT_SAVED = ("storage_options",)


def _estimator_classes() -> dict[str, type]:
    from . import estimators

    return {name: getattr(estimators, name) for name in estimators.__all__
            if isinstance(getattr(estimators, name), type)}


class _Arrays:
    """Named arrays for ``arrays.npz``; sparse matrices as their CSR parts."""

    def __init__(self, data: dict[str, np.ndarray] | None = None):
        self.data = {} if data is None else dict(data)

    def put(self, name: str, value: Any) -> dict:
        if sp.issparse(value):
            csr = sp.csr_matrix(value)
            for part in ("data", "indices", "indptr"):
                self.data[f"{name}.{part}"] = getattr(csr, part)
            return {"sparse": name, "shape": list(csr.shape)}
        array = np.asarray(value)
        if array.dtype == object:
            raise TypeError(f"{name} is not a numeric array")
        self.data[name] = array
        return {"array": name}

    def get(self, ref: dict) -> Any:
        if "sparse" in ref:
            name = ref["sparse"]
            return sp.csr_matrix((self.data[f"{name}.data"], self.data[f"{name}.indices"],
                                  self.data[f"{name}.indptr"]), shape=tuple(ref["shape"]))
        return self.data[ref["array"]]


def _jsonable(value: Any) -> bool:
    try:
        json.dumps(json_normalize(value))
    except (TypeError, ValueError):
        return False
    return True


def _params(estimator: Any) -> dict[str, Any]:
    params = {}
    for name, value in estimator.get_params(deep=False).items():
        if name in _NOT_SAVED:
            value = None
        elif name == "scheduler" and value is not None and not isinstance(value, str):
            value = value.scheduler.address  # a Client: keep where it was
        elif name == "kernels" and isinstance(value, list | tuple):
            value = [v.to_dict() if isinstance(v, KernelSpec) else v for v in value]
        elif name == "random_state" and not isinstance(value, int | type(None)):
            value = None
        elif name == "dtype" and not isinstance(value, str):
            value = np.dtype(value).name
        elif name == "backend_options" and value and not isinstance(value.get("dtype"), str | None):
            value = {**value, "dtype": np.dtype(value["dtype"]).name}
        elif isinstance(value, os.PathLike):
            value = os.fspath(value)
        if not _jsonable(value):
            raise TypeError(f"parameter {name}={value!r} cannot be saved as JSON")
        params[name] = json_normalize(value)
    return params


def _save_row_map(row_map: Any, arrays: _Arrays) -> dict[str, Any]:
    from .backends.nystrom import NystromModel
    from .backends.row_map import KernelRowMap

    if isinstance(row_map, KernelRowMap):
        return {"kind": "kernel_row_map", "specs": [s.to_dict() for s in row_map.specs],
                "normalize": row_map.normalize,
                "views": [None if v is None else arrays.put(f"map.view{i}", v)
                          for i, v in enumerate(row_map.views)],
                "weights2": arrays.put("map.weights2", row_map.weights2),
                "scaled_embedding": arrays.put("map.scaled_embedding",
                                               row_map.scaled_embedding)}
    if isinstance(row_map, NystromModel):
        local = None
        if row_map.local is not None:
            loc = row_map.local
            local = {"threshold": float(loc["threshold"]),
                     "views": [None if v is None else arrays.put(f"local.view{i}", v)
                               for i, v in enumerate(loc["views"])],
                     "weights2": arrays.put("local.weights2", loc["weights2"]),
                     "scaled_embedding": arrays.put("local.scaled_embedding",
                                                    loc["scaled_embedding"])}
        return {"kind": "nystrom", "specs": [s.to_dict() for s in row_map.specs],
                "normalize": row_map.normalize,
                "landmarks": {str(v): arrays.put(f"nys.landmarks{v}", L)
                              for v, L in row_map.landmarks.items()},
                "kernel_landmarks": [int(r) for r in row_map.kernel_landmarks],
                "transforms": [arrays.put(f"nys.transform{p}", T)
                               for p, T in enumerate(row_map.transforms)],
                "dtype": np.dtype(row_map.dtype).name,
                "coefficients": arrays.put("nys.coefficients", row_map.coefficients),
                # None where a final graph partitions (the estimator predicts through it)
                "centres": (None if row_map.centres is None
                            else arrays.put("nys.centres", row_map.centres)),
                "feature_scale": (None if row_map.feature_scale is None
                                  else arrays.put("nys.feature_scale", row_map.feature_scale)),
                "n_features": row_map.n_features, "chunk_rows": int(row_map.chunk_rows),
                "n_labels_polished": int(row_map.n_labels_polished),
                "factor_layout": row_map.factor_layout, "local": local}
    raise TypeError(f"cannot save a row map of type {type(row_map).__name__}")


def _load_row_map(record: dict[str, Any], arrays: _Arrays) -> Any:
    from .backends.nystrom import NystromModel
    from .backends.row_map import KernelRowMap

    specs = [KernelSpec(**d) for d in record["specs"]]
    if record["kind"] == "kernel_row_map":
        return KernelRowMap(specs, bool(record["normalize"]),
                            [None if v is None else arrays.get(v) for v in record["views"]],
                            arrays.get(record["weights2"]),
                            arrays.get(record["scaled_embedding"]))
    if record["kind"] == "nystrom":
        local = record["local"]
        if local is not None:
            local = {"threshold": local["threshold"],
                     "views": [None if v is None else arrays.get(v) for v in local["views"]],
                     "weights2": arrays.get(local["weights2"]),
                     "scaled_embedding": arrays.get(local["scaled_embedding"])}
        return NystromModel(
            specs=specs, normalize=bool(record["normalize"]),
            landmarks={int(v): arrays.get(ref) for v, ref in record["landmarks"].items()},
            kernel_landmarks=list(record["kernel_landmarks"]),
            transforms=[arrays.get(ref) for ref in record["transforms"]],
            dtype=record["dtype"], coefficients=arrays.get(record["coefficients"]),
            centres=None if record["centres"] is None else arrays.get(record["centres"]),
            feature_scale=(None if record.get("feature_scale") is None
                           else arrays.get(record["feature_scale"])),
            n_features=record["n_features"],
            chunk_rows=record["chunk_rows"], n_labels_polished=record["n_labels_polished"],
            # saved before the layout was recorded: the factors its coefficients were fitted to
            factor_layout=record.get("factor_layout", "plain"), local=local)
    raise ValueError(f"unknown row map kind {record['kind']!r}")


def _save_view_graph(graph: Any, name: str, arrays: _Arrays) -> dict[str, Any]:
    """An :class:`~mkrk_dask.anchor_graph.ViewGraph` (``AnchorGraphClustering``'s per view)."""
    return {"anchors": arrays.put(f"{name}.anchors", graph.anchors),
            "column_scale": arrays.put(f"{name}.column_scale", graph.column_scale),
            "angular": bool(graph.angular), "width": float(graph.width),
            "n_neighbors": int(graph.n_neighbors)}


def _load_view_graph(record: dict[str, Any], arrays: _Arrays) -> Any:
    from .anchor_graph import ViewGraph

    return ViewGraph(anchors=arrays.get(record["anchors"]), angular=bool(record["angular"]),
                     width=float(record["width"]),
                     column_scale=arrays.get(record["column_scale"]),
                     n_neighbors=int(record["n_neighbors"]))


def _save_fitted(estimator: Any, arrays: _Arrays, prefix: str) -> dict[str, Any]:
    """The fitted attributes of ``estimator`` as JSON, their arrays put in ``arrays`` under
    ``prefix`` (an estimator inside another, such as ``final_graph_``, gets its own)."""
    fitted: dict[str, Any] = {}
    for name, value in vars(estimator).items():
        if not name.endswith("_") or name.startswith("_") or name in ("row_map_",
                                                                       "nystrom_model_"):
            continue
        if name == "kernels_":
            fitted[name] = None if value is None else [s.to_dict() for s in value]
        elif name == "view_graphs_":
            fitted[name] = {"view_graphs": [_save_view_graph(g, f"{prefix}graph{v}", arrays)
                                            for v, g in enumerate(value)]}
        elif name == "plan_":
            fitted[name] = {"plan": json_normalize(value.to_dict())}
        elif name == "final_graph_" and value is not None:
            fitted[name] = {"estimator": {
                "class": type(value).__name__, "params": _params(value),
                "fitted": _save_fitted(value, arrays, f"{prefix}{name}.")}}
        elif isinstance(value, np.ndarray) and value.dtype.kind in "OUS":
            fitted[name] = {"strings": [str(v) for v in value]}  # feature names
        elif isinstance(value, np.ndarray) or sp.issparse(value):
            fitted[name] = arrays.put(f"{prefix}fitted.{name}", value)
        elif _jsonable(value):
            fitted[name] = {"json": json_normalize(value)}
        else:
            raise TypeError(f"fitted attribute {name} of type {type(value).__name__} cannot be "
                            "saved")
    return fitted


def _load_fitted(estimator: Any, fitted: dict[str, Any], arrays: _Arrays) -> None:
    """Set the fitted attributes :func:`_save_fitted` recorded on ``estimator``."""
    classes = _estimator_classes()
    for name, ref in fitted.items():
        if name == "kernels_":
            value = None if ref is None else [KernelSpec(**d) for d in ref]
        elif "plan" in ref:
            from .plan import FitPlan

            value = FitPlan.from_dict(ref["plan"])
        elif "view_graphs" in ref:
            value = [_load_view_graph(g, arrays) for g in ref["view_graphs"]]
        elif "estimator" in ref:
            inner = ref["estimator"]
            if inner.get("class") not in classes:
                raise ValueError(f"{name} names an unknown estimator {inner.get('class')!r}")
            value = classes[inner["class"]](**inner["params"])
            _load_fitted(value, inner["fitted"], arrays)
        elif "json" in ref:
            value = ref["json"]
        elif "strings" in ref:
            value = np.asarray(ref["strings"], dtype=object)
        else:
            value = arrays.get(ref)
        setattr(estimator, name, value)


def save_model(estimator: Any, directory: str | os.PathLike) -> Path:
    """Write a fitted estimator into ``directory`` (created; its two files replaced whole).

    Returns
    -------
    pathlib.Path
        The folder.
    """
    from sklearn.utils.validation import check_is_fitted

    from . import __version__

    check_is_fitted(estimator)
    arrays = _Arrays()
    fitted = _save_fitted(estimator, arrays, "")
    row_map = getattr(estimator, "row_map_", None)
    document = {"format": FORMAT, "format_version": _VERSION, "library_version": __version__,
                "class": type(estimator).__name__, "params": _params(estimator),
                "fitted": fitted,
                "row_map": None if row_map is None else _save_row_map(row_map, arrays)}
    folder = Path(directory)
    folder.mkdir(parents=True, exist_ok=True)
    # Each file under a temporary name, then renamed: never a half-written model.
    for name, write in (("arrays.npz", lambda f: np.savez(f, **arrays.data)),
                        ("model.json", lambda f: f.write(json.dumps(document, indent=1)
                                                         .encode()))):
        with atomic_path(folder / name) as temporary, open(temporary, "wb") as f:
            write(f)
    return folder


def load_model(directory: str | os.PathLike) -> Any:
    """The estimator saved by :func:`save_model` in ``directory`` (no code is run).

    Raises
    ------
    ValueError
        The folder holds no model of this format, or a damaged one.
    """
    folder = Path(directory)
    document_path, arrays_path = folder / "model.json", folder / "arrays.npz"
    if not document_path.is_file() or not arrays_path.is_file():
        raise ValueError(f"{folder} holds no saved model (model.json and arrays.npz)")
    try:
        document = json.loads(document_path.read_text())
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise ValueError(f"{document_path} is not a model description: {err}") from None
    except RecursionError:
        raise ValueError(f"{document_path} is not a model description: it is nested too "
                         "deeply to be one") from None
    if not isinstance(document, dict) or document.get("format") != FORMAT:
        raise ValueError(f"{document_path} is not an mkrk-dask model")
    if document.get("format_version") != _VERSION:
        raise ValueError(f"{document_path} has model format version "
                         f"{document.get('format_version')!r}; this version reads {_VERSION} "
                         "(fit and save the model again with it)")
    classes = _estimator_classes()
    if document.get("class") not in classes:
        raise ValueError(f"{document_path} names an unknown estimator {document.get('class')!r}")
    if not zipfile.is_zipfile(arrays_path):
        raise ValueError(f"{arrays_path} cannot be read: it is not a .npz (zip) archive")
    try:
        with np.load(arrays_path, allow_pickle=False) as npz:
            arrays = _Arrays({k: npz[k] for k in npz.files})
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as err:
        raise ValueError(f"{arrays_path} cannot be read: {' '.join(str(err).split())}") from None
    # a model saved before the storage knobs moved into backend_options gives them as
    # parameters: moved there, so that it refits without a FutureWarning
    estimator = classes[document["class"]](**saved_params(document["params"]))
    _load_fitted(estimator, document["fitted"], arrays)
    if document["row_map"] is not None:
        estimator.row_map_ = _load_row_map(document["row_map"], arrays)
        if document["row_map"]["kind"] == "nystrom":
            estimator.nystrom_model_ = estimator.row_map_
    return estimator
