"""Input validation shared by the estimator, the grid search and the command line.

Every function raises a ValueError (or TypeError) whose message names the problem.
"""

from __future__ import annotations

import functools
import inspect
import re
from collections.abc import Callable
from numbers import Integral, Real
from typing import Any

import numpy as np
import scipy.sparse as sp
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.validation import check_array, validate_data

from ._compute import compute_here
from .choices import LAM_SCALINGS, TOL_MODES  # noqa: F401 - re-exported

__all__ = ["check_views", "check_lazy_views", "check_magnitude", "check_n_clusters",
           "check_lambda", "check_choice", "check_int", "is_multiview", "is_lazy",
           "materialize", "validate_matrix", "check_feature_views", "LAM_SCALINGS",
           "TOL_MODES", "check_chunks_written", "ALLOW_MISSING_CHUNKS",
           "check_numeric_columns", "check_constraints", "Phrased", "ListOf",
           "constrained", "LAM", "N_CLUSTERS", "DTypes"]



#: the trade-off lambda of MKKM-RK and MKKM-MR (their ``lam``, the loop's and the QP's): a
#: finite number >= 0
LAM = [Interval(Real, 0, None, closed="left")]


def check_choice(name: str, value: Any, allowed: tuple[str, ...]) -> str:
    """``value`` if it is one of ``allowed``, else a ValueError naming both
    (:func:`check_constraints`, for a value that is no declared parameter)."""
    check_constraints({name: value}, {name: [StrOptions(set(allowed))]})
    return value


def check_int(name: str, value: Any, minimum: int) -> int:
    """``value`` if it is an integer >= ``minimum`` (bools are not):
    :func:`check_constraints`, for a value that is no declared parameter."""
    check_constraints({name: value}, {name: [Interval(Integral, minimum, None, closed="left")]})
    return int(value)


def is_multiview(X: Any) -> bool:
    """True for a list or tuple of 2-D inputs (one per view)."""
    return isinstance(X, list | tuple) and len(X) > 0 and all(
        sp.issparse(v) or np.ndim(v) == 2 for v in X)


def is_lazy(X: Any) -> bool:
    """True for arrays read block by block: dask arrays and Zarr arrays."""
    if isinstance(X, np.ndarray) or sp.issparse(X):
        return False
    is_dask = hasattr(X, "dask") and hasattr(X, "compute")
    is_zarr = hasattr(X, "get_orthogonal_selection") and hasattr(X, "chunks")
    return bool(is_dask or is_zarr)


def check_lazy_views(X: Any) -> list[Any]:
    """Validate input with dask or Zarr views without reading their data.

    Shape and dtype are checked at once (2-D, numeric, the same number of rows); NaN and
    infinity are found during the first pass over the data (an error names the view and the
    rows). Views in memory are checked as by :func:`check_views`.
    """
    views = list(X) if is_multiview(X) else [X]
    checked = []
    for index, view in enumerate(views):
        prefix = f"view {index}: " if len(views) > 1 else ""
        if not is_lazy(view):
            try:
                checked.append(check_views([view])[0])
            except ValueError as err:
                raise ValueError(f"{prefix}{err}") from None
            continue
        if view.ndim != 2:
            raise ValueError(f"{prefix}expected a 2D array, got a {view.ndim}-D "
                             f"{type(view).__name__} of shape {tuple(view.shape)}")
        if any(np.isnan(size) for size in view.shape):
            raise ValueError(f"{prefix}the dask array's shape {tuple(view.shape)} is not known "
                             "(chunk sizes unknown, as after boolean indexing); call "
                             "X.compute_chunk_sizes() first")
        if np.dtype(view.dtype).kind not in "biuf":
            raise ValueError(f"{prefix}expected numbers, got dtype {view.dtype}")
        if view.shape[0] < 1 or view.shape[1] < 1:
            raise ValueError(f"{prefix}empty array of shape {tuple(view.shape)}")
        check_chunks_written(view, prefix)
        checked.append(view)
    lengths = {int(v.shape[0]) for v in checked}
    if len(lengths) > 1:
        raise ValueError(f"all views must have the same number of rows, got {sorted(lengths)}")
    return checked


#: most k-means restarts a fit takes: past a few dozen none gains anything measurable, and a
#: count such as 10^12 (a typo) would run without end instead of being refused
MAX_N_INIT = 1000
#: most row blocks a store may be cut into: a chunk size of a few rows makes a blockwise fit
#: of n/c blocks run (n/c)^2 / 2 tasks a pass, work that does not end
MAX_ROW_BLOCKS = 4096

#: the dask configuration key that lets Zarr input have unwritten chunks (read as the fill value)
ALLOW_MISSING_CHUNKS = "mkrk-dask.allow-missing-chunks"


def _zarr_arrays(view: Any) -> list[Any]:
    """The Zarr arrays behind ``view``: itself, or those a dask array reads (from_zarr)."""
    if hasattr(view, "nchunks_initialized"):
        return [view]
    graph = getattr(view, "__dask_graph__", None)
    if graph is None:
        return []
    found = {}
    for task in dict(graph()).values():
        task = getattr(task, "value", task)  # a dask DataNode wraps its value
        if hasattr(task, "nchunks_initialized") and hasattr(task, "get_orthogonal_selection"):
            found[id(task)] = task
    return list(found.values())


def check_chunks_written(view: Any, prefix: str = "") -> None:
    """A Zarr input (or a dask array read from Zarr) has every chunk written.

    Zarr reads an unwritten chunk as the array's fill value, so a chunk lost from the input
    would be clustered as rows of that value. Arrays meant to be sparse by fill value are
    accepted with ``dask.config.set({"mkrk-dask.allow-missing-chunks": True})`` (or the
    environment variable ``DASK_MKRK_DASK__ALLOW_MISSING_CHUNKS=true``).
    """
    import dask.config

    if dask.config.get(ALLOW_MISSING_CHUNKS, default=False):
        return
    for array in _zarr_arrays(view):
        total, written = int(array.nchunks), int(array.nchunks_initialized)
        if written < total:
            where = str(getattr(array, "store_path", None) or array.store)
            fill = array.fill_value
            fill = fill.item() if hasattr(fill, "item") else fill
            raise ValueError(
                f"{prefix}the Zarr input {where} has {total - written} of {total} chunks "
                f"missing (unwritten or deleted); Zarr would read them as the fill value "
                f"{fill!r} and cluster them as data. Write them, or, for an array "
                f"meant to be sparse by fill value, allow it with dask.config.set("
                f"{{{ALLOW_MISSING_CHUNKS!r}: True}}) or DASK_MKRK_DASK__ALLOW_MISSING_CHUNKS=true")


def materialize(views: list[Any]) -> list[Any]:
    """Lazy views read into memory and validated (for the exact backend, whose kernels are
    in memory anyway)."""
    return check_views([np.asarray(compute_here(v) if hasattr(v, "compute") else v[...])
                        if is_lazy(v) else v for v in views])


def check_views(X: Any) -> list[Any]:
    """Validate feature input: one matrix or a list of views with the same number of rows.

    Dense views become float64 arrays, sparse ones CSR float64 (never densified), without
    explicitly stored zeros or duplicate entries. NaN or inf,
    a wrong number of dimensions, or views of different lengths raise a ValueError.
    """
    views = list(X) if is_multiview(X) else [X]
    checked = []
    for index, view in enumerate(views):
        prefix = f"view {index}: " if len(views) > 1 else ""
        try:
            check_numeric_columns(view)
            checked.append(canonical_sparse(check_array(view, accept_sparse="csr",
                                                  dtype=np.float64, ensure_min_samples=1)))
        except ValueError as err:
            raise ValueError(f"{prefix}{_one_line(err)}") from None
    lengths = {v.shape[0] for v in checked}
    if len(lengths) > 1:
        raise ValueError(f"all views must have the same number of rows, got {sorted(lengths)}")
    for index, view in enumerate(checked):
        check_magnitude(view, index if len(checked) > 1 else None)
    return checked


def canonical_sparse(view: Any) -> Any:
    """A sparse view with its zeros stored explicitly or its entries duplicated, as the same
    matrix stored plainly (a copy; the user's is left as given): what the plan reads of it
    (its share of zeros) is then the values', not the storage's."""
    if not sp.issparse(view) or (view.has_canonical_format and view.data.all()):
        return view
    view = view.copy()
    view.sum_duplicates()
    view.eliminate_zeros()
    return view


def check_magnitude(view: Any, index: int | None = None, *, underflow: bool = True) -> None:
    """Values whose squares overflow (or all underflow) float64 make every kernel meaningless
    (infinite or zero distances): name it instead of failing later. ``underflow=False`` for
    new rows: a few rows near the origin are points like others, data that are all so small
    are not."""
    values = view.data if sp.issparse(view) else view
    if values.size == 0:
        return
    largest = float(np.max(np.abs(values)))
    prefix = f"view {index}: " if index is not None else ""
    with np.errstate(over="ignore"):
        sq = float(np.max(np.einsum("ij,ij->i", values, values, dtype=np.float64))) \
            if not sp.issparse(view) \
            else float(view.multiply(view).sum(axis=1).max())
    if not np.isfinite(sq):
        raise ValueError(f"{prefix}values up to {largest:.3g} overflow float64 when squared "
                         "(the kernels need squared norms); rescale the data, e.g. divide it "
                         "by its largest absolute value")
    if underflow and 0 < largest < 1e-150:
        raise ValueError(f"{prefix}values of at most {largest:.3g} underflow float64 when "
                         "squared; rescale the data")


def validate_matrix(estimator: Any, X: Any, **kwargs: Any) -> Any:
    """scikit-learn's ``validate_data`` for one matrix, with its errors in one line: for
    missing values, the first line and what to do (scikit-learn's runs on for a paragraph
    about supervised learners); otherwise its sentences without the data it prints (a 1-D or
    complex X is printed whole), so the phrases its estimator checks match remain."""
    check_numeric_columns(X)
    try:
        return validate_data(estimator, X, **kwargs)
    except ValueError as err:
        if len(str(err).strip().splitlines()) <= 1:
            raise
        raise ValueError(_one_line(err)) from None


#: the start of a line of an array scikit-learn prints in an error (``array=[...``, a row
#: ``[ 1.5 ...``, or a wrapped row that goes on with numbers)
_ARRAY_LINE = re.compile(r"^(array=|\[|[-+.\d]|nan|inf)")


def _one_line(err: ValueError) -> str:
    """A scikit-learn validation error in one line: for missing values, the first line and
    what to do (scikit-learn's runs on for a paragraph about supervised learners); otherwise
    its sentences without the data it prints (a 1-D or complex X is printed whole, over as
    many lines as it takes), so the phrases its estimator checks match remain."""
    lines = [line.strip() for line in str(err).splitlines() if line.strip()]
    if len(lines) <= 1:
        return " ".join(lines)
    if "NaN" in lines[0]:
        return f"{lines[0]} Impute or drop the samples with missing values first."
    sentences = [lines[0].removesuffix(":") + "."] if lines[0].endswith(":") else lines[:1]
    return " ".join(sentences + [line for line in lines[1:] if not _ARRAY_LINE.match(line)])


def check_numeric_columns(X: Any) -> None:
    """Name the columns of a data frame that hold no numbers (categories, text, dates):
    scikit-learn's own error names only a cast that failed ("could not convert string to
    float"), not the column. Booleans and numbers of any kind (nullable ones too) pass;
    anything else than a data frame is left to scikit-learn's checks."""
    dtypes = getattr(X, "dtypes", None)
    if dtypes is None or not hasattr(X, "columns") or not hasattr(dtypes, "items"):
        return
    bad = []
    for name, dtype in dtypes.items():
        if dtype.kind in "biuf":  # numpy's and pandas' numeric and boolean kinds
            continue
        if dtype.kind == "O":
            try:
                np.asarray(X[name], dtype=np.float64)
                continue
            except (TypeError, ValueError):
                pass
        bad.append(f"{name!r} ({dtype})")
    if bad:
        which = "column " if len(bad) == 1 else "columns "
        it = "it" if len(bad) == 1 else "them"
        raise ValueError(f"{which}{', '.join(bad[:5])}{' ...' if len(bad) > 5 else ''} "
                         f"{'holds' if len(bad) == 1 else 'hold'} no numbers; encode {it} "
                         "as numbers first (a category as one 0/1 column per value, e.g. "
                         f"pandas.get_dummies; a date as a number) or leave {it} out")


class Phrased:
    """A parameter's constraints with the words its error gives, where those
    :func:`_describe` makes of them would read worse or differ from the documented ones
    (``Phrased("an integer >= 1 or None", None, Interval(Integral, 1, None, closed="left"))``).
    """

    def __init__(self, words: str, *constraints: Any) -> None:
        self.words, self.constraints = words, list(constraints)

    def __repr__(self) -> str:
        return f"Phrased({self.words!r}, {', '.join(map(repr, self.constraints))})"


class ListOf:
    """A constraint: a non-empty list, tuple or array whose every entry satisfies
    ``constraint`` (bools are no numbers here either)."""

    def __init__(self, constraint: Any) -> None:
        self.constraint = constraint

    def is_satisfied_by(self, value: Any) -> bool:
        from sklearn.utils._param_validation import make_constraint

        if not isinstance(value, list | tuple | np.ndarray) or (
                isinstance(value, np.ndarray) and value.ndim == 0) or len(value) == 0:
            return False
        made = make_constraint(self.constraint)
        return all(not isinstance(v, bool | np.bool_) and made.is_satisfied_by(v)
                   for v in value)

    def __repr__(self) -> str:
        return f"ListOf({self.constraint!r})"


class DTypes:
    """A constraint: what :func:`numpy.dtype` reads as one of the dtypes ``names`` (a name, a
    numpy type or a dtype)."""

    def __init__(self, *names: str) -> None:
        self.names = names

    def is_satisfied_by(self, value: Any) -> bool:
        if isinstance(value, bool):
            return False
        try:
            return np.dtype(value).name in self.names
        except TypeError:
            return False

    def __repr__(self) -> str:
        return f"DTypes{self.names!r}"


def _describe(constraint: Any) -> str:
    """A constraint of ``_parameter_constraints`` in words."""
    from sklearn.utils._param_validation import HasMethods

    if constraint is None:
        return "None"
    if constraint is callable:
        return "a callable"
    if isinstance(constraint, ListOf):
        return f"a non-empty list of {_describe(constraint.constraint)}"
    if isinstance(constraint, DTypes):
        return " or ".join(constraint.names)
    if isinstance(constraint, StrOptions):
        return f"one of {tuple(sorted(constraint.options, key=lambda o: (o != 'auto', o)))}"
    if isinstance(constraint, Interval):
        kind = "integer" if constraint.type is Integral else "finite number"
        low, high = constraint.left, constraint.right
        if high is None and low == (1 if kind == "integer" else 0) and (
                kind == "integer" or constraint.closed in ("neither", "right")):
            return f"a positive {kind.split()[-1]}"
        words = [f"a{'n' if kind == 'integer' else ''} {kind}"]  # "a finite number >= 0"
        if low is not None and high is not None and constraint.closed == "both":
            return f"{words[0]} from {low} to {high}"
        if low is not None:
            words.append(f"{'>=' if constraint.closed in ('left', 'both') else '>'} {low}")
        if high is not None:
            words.append(f"{'<=' if constraint.closed in ('right', 'both') else '<'} {high}")
        return " ".join(words)
    if isinstance(constraint, HasMethods):
        return "a Client"
    if isinstance(constraint, type):
        return {str: "a string", list: "a list", tuple: "a tuple", dict: "a dict",
                bool: "True or False"}.get(constraint, f"a {constraint.__name__}")
    return {"boolean": "True or False", "random_state": "an int, a RandomState or None",
            "verbose": "an int >= 0", "array-like": "an array"}.get(constraint, str(constraint))


def check_constraints(params: dict[str, Any], constraints: dict[str, Any]) -> None:
    """Every parameter against its constraints: the one place a parameter's type and range
    are checked, for the estimators (``_parameter_constraints``, as scikit-learn's), the
    backends' options, the dense methods and the functions declared with
    :func:`constrained`. ``constraints`` maps a parameter to a list of the values it may take
    (any one will do: scikit-learn's constraints, :class:`ListOf`, :class:`DTypes`), or to a
    :class:`Phrased` list. The error names the parameter, what it must be and what it got,
    in one line (an ``InvalidParameterError``: a ValueError and a TypeError)."""
    from sklearn.utils._param_validation import InvalidParameterError, make_constraint

    for name, allowed in constraints.items():
        if name not in params or allowed == "no_validation":
            continue
        value = params[name]
        words = allowed.words if isinstance(allowed, Phrased) else None
        allowed = allowed.constraints if isinstance(allowed, Phrased) else allowed
        made = [c if isinstance(c, ListOf | DTypes) else make_constraint(c) for c in allowed]
        # a bool is no number here (scikit-learn's Interval takes True for 1)
        if any(c.is_satisfied_by(value) and not (isinstance(value, bool)
                                                 and isinstance(c, Interval)) for c in made):
            continue
        if words is None:
            shown = [_describe(c) for c in allowed if c not in (np.dtype,)]
            words = " or ".join(dict.fromkeys(shown))
        raise InvalidParameterError(f"{name} must be {words}, got {_shown(value)}")


def constrained(constraints: dict[str, Any]) -> Callable[[Callable], Callable]:
    """A function's parameters declared once, as an estimator's ``_parameter_constraints``:
    the decorated function checks its arguments (given or default) by
    :func:`check_constraints` before it runs, and keeps the constraints as its
    ``_parameter_constraints``."""
    def decorate(func: Callable) -> Callable:
        signature = inspect.signature(func)

        @functools.wraps(func)
        def checked(*args: Any, **kwargs: Any) -> Any:
            bound = signature.bind(*args, **kwargs)
            bound.apply_defaults()
            check_constraints(bound.arguments, constraints)
            return func(*args, **kwargs)

        checked._parameter_constraints = constraints  # type: ignore[attr-defined]
        return checked
    return decorate


def _shown(value: Any) -> str:
    """A value as an error quotes it: its repr, cut to one short line."""
    text = " ".join(repr(value).split())
    return text if len(text) <= 80 else f"{text[:77]}..."


#: ``n_clusters`` where it is checked with the number of samples (:func:`check_n_clusters`)
N_CLUSTERS = Phrased(">= 1 (an integer, at most n_samples)",
                     Interval(Integral, 1, None, closed="left"))


def check_n_clusters(n_clusters: Any, n_samples: int) -> int:
    """``n_clusters`` must be an integer in [1, n_samples]: :data:`N_CLUSTERS`, and what
    depends on the data."""
    check_constraints({"n_clusters": n_clusters}, {"n_clusters": N_CLUSTERS})
    if n_clusters > n_samples:
        raise ValueError(f"n_clusters={n_clusters} is larger than n_samples={n_samples}")
    return int(n_clusters)


def check_lambda(lam: Any) -> float:
    """lambda as a float, if it is a finite number >= 0 (:data:`LAM`): for the values the loop
    and the QP are given (a search's grid), not only an estimator's ``lam``."""
    check_constraints({"lam": lam}, {"lam": LAM})
    return float(lam)


def check_feature_views(estimator: Any, X: Any, *, reset: bool) -> list[Any]:
    """An estimator's feature input as a list of views: dask and Zarr views checked without
    reading them (:func:`check_lazy_views`), lists of views by :func:`check_views`, one matrix
    by scikit-learn (which records ``n_features_in_`` and ``feature_names_in_`` when ``reset``
    and words the errors), with :func:`check_magnitude` (for new rows, of their overflow only:
    rows whose squares overflow would get infinite distances, and the embedding NaN)."""
    if any(is_lazy(v) for v in (X if is_multiview(X) else [X])):
        return check_lazy_views(X)
    if is_multiview(X):
        return check_views(X)
    view = validate_matrix(estimator, X, reset=reset, accept_sparse="csr", dtype=np.float64,
                           ensure_min_samples=1)
    check_magnitude(view, underflow=reset)
    return [view]
