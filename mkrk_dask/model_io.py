"""Saving a fitted estimator as arrays plus JSON, and loading it back: no code in the files.

A pickle runs whatever code it names when it is loaded, so a model received from elsewhere
cannot be opened safely that way. :func:`save_model` writes a folder with

- ``model.json``: the estimator's class and parameters, its fitted scalars and lists, the
  kind of its row map (for ``predict``) and the library version;
- ``arrays.npz``: every fitted array, read back with ``allow_pickle=False``; ``model.json``
  records the SHA-256 digest of each (of its dtype, shape and bytes).

:func:`load_model` rebuilds the estimator from them; it predicts and transforms as the
original. Before that it refuses, in one line naming the array, a damaged model that would
predict garbage: an array that does not match its digest, is missing or was added; a
non-finite value where a fitted model holds none (even with the digests rewritten to match);
an array whose shape disagrees with model.json or with the other arrays.

Credentials are never saved: ``storage_options`` and a ``scheduler`` Client are left out (a
scheduler address is kept).
"""

from __future__ import annotations

import hashlib
import json
import os
import zipfile
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp

from .kernels import KernelSpec
from .results import atomic_path
from .store.zarr_store import json_normalize

__all__ = ["save_model", "load_model", "FORMAT"]

FORMAT = "mkrk-dask-model"
#: 2: the features step's centres are means of unit rows (a version-1 model's are not, so its
#: ``predict`` would be wrong under this version's nearest-centre rule: refused instead).
#: 3: model.json records a digest of every array (a version-2 model has none to check its
#: arrays against: refused too).
#: 4: the storage knobs (chunk_size, n_landmarks, landmarks, dtype) are in backend_options
#: only (a version-3 model names them as parameters, which the estimators no longer take)
_VERSION = 4
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

    def _part(self, name: str) -> np.ndarray:
        if name not in self.data:
            raise ValueError(f"{_ARRAYS}: model.json names an array {name!r} it does not hold")
        return self.data[name]

    def get(self, ref: dict) -> Any:
        if "sparse" in ref:
            name = ref["sparse"]
            try:
                matrix = sp.csr_matrix(tuple(self._part(f"{name}.{part}")
                                             for part in ("data", "indices", "indptr")),
                                       shape=tuple(ref["shape"]))
                # the bounds of every index too: a bad one would read outside the matrix
                matrix.check_format(full_check=True)
            except (TypeError, ValueError) as err:
                if str(err).startswith(_ARRAYS):
                    raise
                raise ValueError(f"{_ARRAYS}: sparse array {name!r} (its .data, .indices and "
                                 ".indptr) is not a valid CSR matrix of shape "
                                 f"{tuple(ref['shape'])}: "
                                 f"{' '.join(str(err).split())}") from None
            return matrix
        return self._part(ref["array"])

    def shape(self, ref: dict) -> tuple[int, ...]:
        """The shape of the array ``ref`` names (a sparse one's as model.json gives it)."""
        if "sparse" in ref:
            return tuple(int(n) for n in ref["shape"])
        return tuple(self._part(ref["array"]).shape)


_ARRAYS = "arrays.npz"
#: Fitted arrays that may hold inf or NaN: the fit's per-iteration records (an objective that
#: overflowed, a gap the QP could not certify), kept as the fit computed them for summary()
#: and the results; predict and transform never read them. Every other floating array of a
#: fitted model is finite (the fits of every estimator kind give finite ones).
_MAY_BE_NON_FINITE = frozenset({"objective_history_", "qp_relative_gaps_", "relative_gaps_"})


def _digest(array: np.ndarray) -> str:
    """SHA-256 of an array's dtype, shape and bytes (C order): a change to any of them is
    seen (and, as model.json keys the digests by name, two arrays swapped)."""
    digest = hashlib.sha256(f"{array.dtype.str} {array.shape} ".encode())
    # the bytes in place (no copy of a large array), as a flat view the hash can read
    digest.update(np.ascontiguousarray(array).reshape(-1).view(np.uint8))
    return digest.hexdigest()


def _names(names: Any) -> str:
    """Sorted names, quoted, for a message."""
    return ", ".join(repr(n) for n in sorted(names))


def _check_digests(document: dict[str, Any], data: dict[str, np.ndarray]) -> None:
    """Every array of ``arrays.npz`` is the one :func:`save_model` wrote: the same names as
    model.json's ``digests``, each with its digest."""
    digests = document.get("digests")
    if not isinstance(digests, dict):
        raise ValueError("model.json records no digests of its arrays (damaged or edited)")
    missing, extra = set(digests) - set(data), set(data) - set(digests)
    if missing:
        raise ValueError(f"{_ARRAYS} lacks array(s) {_names(missing)} that model.json lists "
                         "(damaged or edited)")
    if extra:
        raise ValueError(f"{_ARRAYS} holds array(s) {_names(extra)} that model.json does not "
                         "list (damaged or edited)")
    for name in sorted(data):
        if _digest(data[name]) != digests[name]:
            raise ValueError(f"{_ARRAYS}: array {name!r} does not match its digest in "
                             "model.json (damaged or edited)")


def _check_finite(data: dict[str, np.ndarray]) -> None:
    """Every floating array is finite, but the fit's records (:data:`_MAY_BE_NON_FINITE`)."""
    for name in sorted(data):
        array = data[name]
        prefix, _, attribute = name.rpartition(".")
        if (array.dtype.kind not in "fc"
                or (prefix.rpartition(".")[2] == "fitted" and attribute in _MAY_BE_NON_FINITE)):
            continue
        if not np.isfinite(array).all():
            raise ValueError(f"{_ARRAYS}: array {name!r} holds NaN or infinite values, which "
                             "no fitted model holds (damaged or edited)")


class _Sizes:
    """The sizes that several arrays of one estimator share (its training rows, clusters,
    kernels, embedding columns, ...): a size model.json records is fixed by it, any other
    is the one most of the arrays that carry it agree on (the first listed of a tie). An
    array whose shape disagrees is refused naming it, its shape and the expected one."""

    def __init__(self, arrays: _Arrays):
        self.arrays = arrays
        self.fixed: dict[str, tuple[int, str]] = {}
        self.claims: list[tuple[str, tuple[int, ...], tuple]] = []

    def fix(self, size: str, value: Any, source: str) -> None:
        """``size`` is ``value``, as ``source`` (in model.json) gives it; None: not known."""
        if isinstance(value, int | np.integer) and not isinstance(value, bool):
            self.fixed[size] = (int(value), f"{value} by {source} in model.json")

    def claim(self, ref: dict | None, *pattern: str | None) -> None:
        """The array ``ref`` names has one axis per entry of ``pattern``: a named size, or None
        for an axis no other array shares (nothing claimed where ``ref`` is None)."""
        if ref is not None:
            name = ref.get("sparse", ref.get("array"))
            self.claims.append((name, self.arrays.shape(ref), pattern))

    def check(self) -> dict[str, int]:
        """The agreed sizes; raises on the first array that disagrees."""
        for name, shape, pattern in self.claims:
            if len(shape) != len(pattern):
                raise ValueError(f"{_ARRAYS}: array {name!r} has shape {shape}; the model needs "
                                 f"{len(pattern)} dimension(s) (damaged or edited)")
        seen: dict[str, Counter] = {}
        first: dict[tuple[str, int], str] = {}
        for name, shape, pattern in self.claims:
            for n, size in zip(shape, pattern, strict=True):
                if size is not None and size not in self.fixed:
                    seen.setdefault(size, Counter())[n] += 1
                    first.setdefault((size, n), name)
        agreed = dict(self.fixed)
        for size, counts in seen.items():
            n = max(counts, key=counts.__getitem__)  # the first of a tie: Counter keeps order
            agreed[size] = (n, f"{n} in {first[size, n]!r}")
        for name, shape, pattern in self.claims:
            expected = tuple(n if size is None else agreed[size][0]
                             for n, size in zip(shape, pattern, strict=True))
            if shape != expected:
                size = next(s for n, e, s in zip(shape, expected, pattern, strict=True) if n != e)
                raise ValueError(f"{_ARRAYS}: array {name!r} has shape {shape}, not {expected} "
                                 f"(its {size}: {agreed[size][1]}; damaged or edited)")
        return {size: n for size, (n, _) in agreed.items()}


def _check_shapes(document: dict[str, Any], arrays: _Arrays,
                  outer: dict[str, int] | None = None) -> None:
    """The arrays of one saved estimator (``document``: its ``params``, ``fitted`` and
    ``row_map``) have shapes consistent with each other and with model.json; ``outer``: the
    agreed sizes of the estimator a final graph belongs to."""
    params, fitted = document.get("params", {}), document.get("fitted", {})
    row_map = document.get("row_map")

    def ref(name: str) -> dict | None:
        value = fitted.get(name)
        return value if isinstance(value, dict) and ("array" in value or "sparse" in value) \
            else None

    def json_value(name: str) -> Any:
        value = fitted.get(name)
        return value.get("json") if isinstance(value, dict) else None

    sizes = _Sizes(arrays)
    sizes.fix("clusters", params.get("n_clusters"), "n_clusters")
    sizes.fix("iterations", json_value("n_iter_"), "n_iter_")
    graphs = (fitted.get("view_graphs_") or {}).get("view_graphs")
    if graphs is not None:  # an AnchorGraphClustering: its embedding is one column a cluster
        per_view = json_value("n_features_per_view_") or []
        for v, dim in enumerate(per_view):
            sizes.fix(f"features of view {v}", dim, f"n_features_per_view_[{v}]")
        if outer is not None and len(per_view) == 1:  # the final graph of the final rows
            sizes.fix("features of view 0", outer.get("embedding columns"),
                      "n_components_ of the model it partitions")
        for v, graph in enumerate(graphs):
            sizes.claim(graph["anchors"], f"anchors of view {v}", f"features of view {v}")
            sizes.claim(graph["column_scale"], f"anchors of view {v}")
        # rows of the projection: the anchors of every view, one after another
        if len(graphs) > 1:
            total = sum((arrays.shape(g["column_scale"]) or (0,))[0] for g in graphs)
            sizes.fixed["anchors of the views"] = (total, f"{total} in the views' column scales")
        sizes.claim(ref("projection_"),
                    "anchors of view 0" if len(graphs) == 1 else "anchors of the views",
                    "clusters")
        sizes.claim(ref("embedding_"), "training rows", "clusters")
        sizes.claim(ref("cluster_centers_"), "clusters", "clusters")
        sizes.claim(ref("eigenvalues_"), None)
    else:
        sizes.fix("embedding columns", json_value("n_components_"), "n_components_")
        kernels = fitted.get("kernels_")
        sizes.fix("kernels", len(kernels) if isinstance(kernels, list) else None, "kernels_")
        sizes.claim(ref("embedding_"), "training rows", "embedding columns")
        sizes.claim(ref("cluster_centers_"), "clusters", "embedding columns")
        sizes.claim(ref("feature_scale_"), "embedding columns")
        for name in ("weights_", "traces_", "nystrom_residual_", "nystrom_ranks_"):
            sizes.claim(ref(name), "kernels")
        for name in ("representation_", "dissimilarity_", "kernel_products_"):
            sizes.claim(ref(name), "kernels", "kernels")
        sizes.claim(ref("selected_kernels_"), None)
        for name in _MAY_BE_NON_FINITE:
            sizes.claim(ref(name), "iterations")
    sizes.claim(ref("labels_"), "training rows")
    if row_map is not None:
        _claim_row_map(row_map, sizes, json_value("n_features_in_"), ref("nystrom_ranks_"))
    agreed = sizes.check()
    inner = (fitted.get("final_graph_") or {}).get("estimator")
    if isinstance(inner, dict):
        _check_shapes(inner, arrays, agreed)


def _claim_row_map(record: dict[str, Any], sizes: _Sizes, n_features_in: Any,
                   ranks: dict | None) -> None:
    """What a row map's arrays share with the estimator's (:func:`_check_shapes`);
    ``ranks``: ``nystrom_ranks_``, every kernel's factor columns."""
    specs = record.get("specs") or []
    sizes.fix("kernels", len(specs), "the row map's specs")
    views = [s.get("view", 0) for s in specs]
    if len(set(views)) == 1 and views[0] == 0:  # one view: all the features
        sizes.fix("features of view 0", n_features_in, "n_features_in_")

    def training_rows(part: dict[str, Any]) -> None:  # the training rows a map reads again
        for v, view in enumerate(part["views"]):
            sizes.claim(view, "training rows", f"features of view {v}")
        sizes.claim(part["weights2"], "kernels")
        sizes.claim(part["scaled_embedding"], "training rows", "embedding columns")

    if record.get("kind") == "kernel_row_map":
        training_rows(record)
        return
    for v, dim in enumerate(record.get("n_features") or []):
        sizes.fix(f"features of view {v}", dim, f"the row map's n_features[{v}]")
    for v, landmarks in record["landmarks"].items():
        sizes.claim(landmarks, f"landmarks of view {v}", f"features of view {v}")
    # kernel p's transform maps its first kernel_landmarks[p] landmarks to its factor columns,
    # which the coefficients' rows follow, kernel after kernel
    for p, (transform, r) in enumerate(zip(record["transforms"], record["kernel_landmarks"],
                                           strict=True)):
        sizes.fix(f"landmarks of kernel {p}", r, f"kernel_landmarks[{p}]")
        sizes.claim(transform, f"landmarks of kernel {p}", f"columns of kernel {p}")
    if ranks is not None and sizes.arrays.shape(ranks) == (len(record["transforms"]),):
        # the columns of each transform, as the fit reported them: the one that lost a
        # column is named, not the coefficients that then disagree with their sum
        for p, r in enumerate(sizes.arrays.get(ranks).tolist()):
            sizes.fixed[f"columns of kernel {p}"] = (r, f"{r} by {ranks['array']!r}[{p}]")
    for p, (spec, r) in enumerate(zip(specs, record["kernel_landmarks"], strict=True)):
        landmarks = record["landmarks"].get(str(spec.get("view", 0)))
        shape = sizes.arrays.shape(landmarks) if landmarks is not None else (0,)
        if shape[0] < r:
            raise ValueError(f"{_ARRAYS}: array {landmarks and landmarks['array']!r} has shape "
                             f"{shape}, fewer rows than the {r} landmarks kernel {p} reads "
                             "(kernel_landmarks in model.json; damaged or edited)")
    columns = sum(shape[-1] for shape in map(sizes.arrays.shape, record["transforms"])
                  if len(shape) == 2)
    sizes.fixed["factor columns"] = (columns, f"{columns}, the columns of the transforms")
    sizes.claim(record["coefficients"], "factor columns", "embedding columns")
    sizes.claim(record["centres"], "clusters", "embedding columns")
    sizes.claim(record.get("feature_scale"), "embedding columns")
    if record.get("local") is not None:
        training_rows(record["local"])


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
    document["digests"] = {name: _digest(array) for name, array in arrays.data.items()}
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
        The folder holds no model of this format, or a damaged one: an array that does not
        match its digest in model.json, is missing or was added; a non-finite array (but the
        fit's records, :data:`_MAY_BE_NON_FINITE`); an array whose shape disagrees with
        model.json or with the other arrays. The message is one line and names the array.
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
    # before anything is built from them: a damaged array would otherwise predict garbage
    _check_digests(document, arrays.data)
    _check_finite(arrays.data)
    _check_shapes(document, arrays)
    estimator = classes[document["class"]](**document["params"])
    _load_fitted(estimator, document["fitted"], arrays)
    if document["row_map"] is not None:
        estimator.row_map_ = _load_row_map(document["row_map"], arrays)
        if document["row_map"]["kind"] == "nystrom":
            estimator.nystrom_model_ = estimator.row_map_
    return estimator
