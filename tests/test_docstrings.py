"""The docstrings tell the truth (issue 79): in every public class and function that
``mkrk_dask`` exports (and their public methods), a default the Parameters section states is
the signature's, and a fitted attribute's documented shape is the shape a fit gives it.
Parsed with numpydoc's docscrape, as the docs build reads them."""

from __future__ import annotations

import ast
import inspect
import re
import warnings

import numpy as np
import pytest
from numpydoc.docscrape import ClassDoc, FunctionDoc

import mkrk_dask

#: "int, default=8" (numpydoc's type field), "default: X", "default X"
_TYPE_DEFAULT = re.compile(r"\bdefault\s*[=:]?\s*(.+?)\s*$")
#: "(default=X)", "default: X", "defaults to X", "default X" in a description
_DESC_DEFAULT = re.compile(r"\(default\s*[=:]?\s*([^)]+)\)|\bdefault(?:s to|:|=|\s)\s*([^\s,;)]+)",
                           re.IGNORECASE)


def _exported() -> list[tuple[str, object]]:
    """The public functions and classes of ``mkrk_dask`` (not its exceptions)."""
    out = []
    for name in mkrk_dask.__all__:
        if name.startswith("__"):
            continue
        obj = getattr(mkrk_dask, name)
        if inspect.isclass(obj) and issubclass(obj, BaseException):
            continue
        out.append((name, obj))
    return out


def _documented(obj: object) -> list[tuple[str, object, inspect.Signature]]:
    """``(where, numpydoc doc, signature)`` of ``obj`` and, for a class, of its public
    methods defined in the library."""
    if not inspect.isclass(obj):
        return [(obj.__name__, FunctionDoc(obj), inspect.signature(obj))]
    found = [(obj.__name__, ClassDoc(obj), inspect.signature(obj))]
    for name, method in inspect.getmembers(obj, callable):
        if name.startswith("_") or not getattr(method, "__doc__", None) or \
                not getattr(method, "__module__", "").startswith("mkrk_dask"):
            continue
        found.append((f"{obj.__name__}.{name}", FunctionDoc(method), inspect.signature(method)))
    return found


def _stated_defaults(param) -> list[str]:
    """The defaults a numpydoc parameter states: in its type field, and in its description
    outside nested lists (``backend_options`` lists the defaults of its keys)."""
    stated = []
    found = _TYPE_DEFAULT.search(param.type)
    if found:
        stated.append(found.group(1))
    nested = False
    for line in param.desc:
        nested = (nested or line.lstrip().startswith("- ")) and bool(line.strip())
        if not nested:
            stated += [m.group(1) or m.group(2) for m in _DESC_DEFAULT.finditer(line)]
    return stated


def _literal(text: str) -> tuple[bool, object]:
    """``text`` as a Python literal (``1e-5``, ``"auto"``, ``None``), or not one (prose such
    as "a temporary store", which no test can compare)."""
    try:
        return True, ast.literal_eval(text.strip().rstrip("."))
    except (ValueError, SyntaxError):
        return False, None


@pytest.mark.parametrize("name, obj", _exported(), ids=[n for n, _ in _exported()])
def test_documented_defaults_are_the_signatures(name: str, obj: object) -> None:
    compared = 0
    for where, doc, signature in _documented(obj):
        for param in doc["Parameters"]:
            for pname in (n.strip() for n in param.name.split(",")):
                if pname.startswith("*"):
                    continue
                assert pname in signature.parameters, f"{where}: documents {pname!r}"
                default = signature.parameters[pname].default
                for text in _stated_defaults(param):
                    literal, value = _literal(text)
                    if literal:
                        assert value == default and type(value) is not bool or value is default, \
                            f"{where}({pname}): documented default {text}, signature {default!r}"
                        compared += 1
    if name in ("MKKMRK", "SimpleMKKM", "AnchorGraphClustering"):
        assert compared >= 5  # the parse finds them


@pytest.mark.parametrize("cls", [mkrk_dask.MKKM, mkrk_dask.MKKMMR, mkrk_dask.SimpleMKKM])
def test_same_defaults_as_mkkmrk_where_the_docstring_says_so(cls: type) -> None:
    """"As for MKKMRK (the same meaning and defaults)", but the ones it names as exceptions
    ("except ``tol`` and ``tol_mode``")."""
    reference = inspect.signature(mkrk_dask.MKKMRK).parameters
    signature = inspect.signature(cls).parameters
    for param in ClassDoc(cls)["Parameters"]:
        text = " ".join(param.desc)
        if "the same meaning and defaults" not in text:
            continue
        excepted = set(re.findall(r"``(\w+)``", text.split("except", 1)[1])) \
            if "except" in text else set()
        for pname in (n.strip() for n in param.name.split(",")):
            if pname not in excepted:
                assert signature[pname].default == reference[pname].default, pname


def _fits() -> dict[str, object]:
    from sklearn.datasets import load_digits

    X = load_digits().data[:240]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return {
            "default": mkrk_dask.MKKMRK(10, random_state=0).fit(X),
            "paper": mkrk_dask.MKKMRK.paper(10, random_state=0).fit(X),
            "MKKM-MR": mkrk_dask.MKKMMR(10, random_state=0).fit(X),
            "SimpleMKKM": mkrk_dask.SimpleMKKM(10, random_state=0).fit(X),
            "graph": mkrk_dask.AnchorGraphClustering(10, random_state=0).fit(X),
        }


def test_documented_attribute_shapes_are_the_fitted_ones() -> None:
    """Every ``ndarray of shape (...)`` of an Attributes section, evaluated with the fit's
    sizes, is the attribute's shape (``cluster_centers_`` was documented (n_clusters,
    n_clusters) where it is (n_clusters, n_components_))."""
    checked = set()
    for label, model in _fits().items():
        weights = getattr(model, "weights_", np.empty(0))
        sizes = {"n_samples": model.labels_.size, "n_clusters": model.n_clusters,
                 "n_kernels": weights.size, "n_iter": getattr(model, "n_iter_", None),
                 "n_components_": getattr(model, "n_components_", None)}
        for param in ClassDoc(type(model))["Attributes"]:
            shape = re.search(r"shape \(([^)]*)\)", param.type)
            if not shape:
                continue
            for attr in (n.strip() for n in param.name.split(",")):
                value = getattr(model, attr, None)
                if value is None:
                    continue
                want = tuple(eval(dim, {"__builtins__": {}}, sizes)  # noqa: S307 - a test
                             for dim in shape.group(1).split(",") if dim.strip())
                assert np.shape(value) == want, f"{label}: {attr} {np.shape(value)} != {want}"
                checked.add(attr)
    assert {"cluster_centers_", "embedding_", "representation_", "weights_"} <= checked
