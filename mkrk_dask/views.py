"""The names of the views of multi-view data, and the one check of new data against the
views a model was fitted on (its error names every view and its columns).

Views are named by the keys of a dict given to ``fit`` (``{"pixels": A, "hog": B}``), else
``view0``, ``view1``, ... in order: the names the ``@v`` of a kernel specification counts
through.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import scipy.sparse as sp

__all__ = ["default_view_names", "check_view_names", "split_named_views", "describe_views",
           "check_new_views", "kernel_views", "load_view_files", "named_views"]


def default_view_names(n_views: int) -> list[str]:
    """``view0``, ``view1``, ...: the names of views given without names."""
    return [f"view{v}" for v in range(n_views)]


def check_view_names(names: Sequence[Any], n_views: int | None = None) -> list[str]:
    """The names as strings: non-empty, distinct, one per view (``n_views``, if given).

    Raises
    ------
    ValueError
        Naming the problem: a count that does not match, an empty or repeated name.
    """
    names = [str(name).strip() for name in names]
    if n_views is not None and len(names) != n_views:
        raise ValueError(f"{len(names)} view names ({', '.join(names)}) for {n_views} "
                         f"view{'s' if n_views != 1 else ''}")
    if any(not name for name in names):
        raise ValueError(f"a view name is empty: {names}")
    repeated = sorted({name for name in names if names.count(name) > 1})
    if repeated:
        raise ValueError(f"the view name {repeated[0]!r} is given twice")
    return names


def split_named_views(X: Any) -> tuple[Any, list[str] | None]:
    """A dict of views (``{name: matrix}``) as ``(list of matrices, names)``; any other
    input as ``(X, None)``."""
    if sp.issparse(X) or not isinstance(X, Mapping):  # a DOK matrix is a dict: one view
        return X, None
    if not X:
        raise ValueError("X is an empty dict; give one matrix per view, by name")
    return list(X.values()), check_view_names(list(X))


def _columns(view: Any) -> int | None:
    """A view's columns, or None where it has no readable 2-D shape (left to the checks
    of its values)."""
    try:
        shape = view.shape if sp.issparse(view) or hasattr(view, "shape") else np.shape(view)
    except (TypeError, ValueError):
        return None
    return int(shape[1]) if len(shape) == 2 else None


def describe_views(names: Sequence[str], dims: Sequence[int | None]) -> str:
    """``pixels: 64 columns, hog: 36 columns``."""
    return ", ".join(f"{name}: {dim} columns" if dim is not None else name
                     for name, dim in zip(names, dims, strict=True))


def check_new_views(X: Any, names: Sequence[str], dims: Sequence[int | None], *,
                    hint: str | None = None) -> list[Any]:
    """New data for a model fitted on the views ``names`` with ``dims`` columns each: as a
    list of views in the model's order (a dict is put in that order by name).

    Checks the count and the columns of every view before any other check, so that one
    matrix given to a multi-view model is not reported as a matrix of the wrong width.

    Parameters
    ----------
    X : matrix, list of matrices or dict of matrices by view name
    names, dims : sequence
        The model's view names and the columns of every view (None: not recorded).
    hint : str, optional
        How to give the views, for the error (default: as a list or a dict by name).

    Raises
    ------
    ValueError
        In one line naming the model's views and their columns, and what was given.
    """
    fitted = f"the model was fitted on {_count(len(names))} ({describe_views(names, dims)})"
    hint = hint or (f"give {_count(len(names))} as a list of matrices in this order, or as a "
                    "dict by view name" if len(names) > 1 else "give one matrix")
    views, given = split_named_views(X)
    if given is not None:
        unknown = [name for name in given if name not in names]
        missing = [name for name in names if name not in given]
        if unknown or missing:
            raise ValueError(f"{fitted}; got views named {', '.join(given)}"
                             + (f" (no view {', '.join(missing)})" if missing else "")
                             + (f" (unknown: {', '.join(unknown)})" if unknown else ""))
        views = [X[_key(X, name)] for name in names]
    from .validation import is_multiview

    views = list(views) if is_multiview(views) else [views]
    if len(views) == len(names) == 1:
        return views  # one matrix's width is scikit-learn's to check (the estimator checks')
    widths = [_columns(v) for v in views]
    if len(views) != len(names):
        got = (f"{_count(len(views))} of {' and '.join(str(w) for w in widths)} columns"
               if len(views) > 1 else f"1 view of {widths[0]} columns")
        raise ValueError(f"{fitted}; got {got}: {hint}")
    for name, dim, width in zip(names, dims, widths, strict=True):
        if dim is not None and width is not None and width != dim:
            raise ValueError(f"{fitted}; view {name} has {width} columns, not {dim}")
    return views


def _count(n: int) -> str:
    return f"{n} view{'s' if n != 1 else ''}"


def _key(X: Mapping, name: str) -> Any:
    """The key of ``X`` whose text is ``name`` (keys may be other than str)."""
    return next(key for key in X if str(key).strip() == name)


def kernel_views(specs: Sequence[Any] | None, n_kernels: int) -> list[int]:
    """The view every kernel reads (its spec's ``view``; 0 without specs)."""
    if specs is None:
        return [0] * n_kernels
    return [int(getattr(spec, "view", 0) or 0) for spec in specs]


def load_view_files(paths: Sequence[Any], *, labels: Any = None, y_key: str | None = None,
                    columns: Any = None, data_dir: Any = None) -> Any:
    """Several data files, one view each in this order, as one multi-view
    :class:`~mkrk_dask.io.Dataset` (what ``mkrk fit a.npy b.npy`` reads).

    Every file is read by :func:`~mkrk_dask.io.load_input` with the CSV ``columns``; the
    labels (``labels``, ``y_key``, a label column) and the rows' IDs are the first file's.
    The views are named by the file names (``a``, ``b``) where those differ.

    Raises
    ------
    ValueError
        If a file holds more than one view, or the files differ in their number of rows.
    """
    from pathlib import Path

    from .io import Dataset, load_input

    parts = [load_input(path, columns=columns, data_dir=data_dir,
                        **({"labels": labels, "y_key": y_key} if index == 0 else {}))
             for index, path in enumerate(paths)]
    for path, part in zip(paths, parts, strict=True):
        if len(part.views) != 1:
            raise ValueError(f"{path} holds {len(part.views)} views; with several files each "
                             "holds one view (or give that file alone)")
    if len({part.n_samples for part in parts}) > 1:
        raise ValueError("the views' files differ in their number of rows: " + ", ".join(
            f"{path} {part.n_samples}" for path, part in zip(paths, parts, strict=True)))
    stems = [Path(str(path)).stem for path in paths]
    names = tuple(stems) if len(set(stems)) == len(stems) else None
    first = parts[0]
    return Dataset("+".join(stems), [part.X for part in parts], first.y, names,
                   extra=dict(first.extra), ids=first.ids)


def named_views(X: Any, names: Sequence[str] | None) -> Any:
    """The views of multi-view data as a dict by name (what ``fit`` records as
    ``view_names_`` and ``predict`` matches by name), where ``names`` are given; else
    ``X`` as it is."""
    if names is None or not isinstance(X, list):
        return X
    return dict(zip(check_view_names(names, len(X)), X, strict=True))
