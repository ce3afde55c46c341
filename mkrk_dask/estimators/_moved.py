"""The engineering knobs that moved from the estimators' signature into ``backend_options``.

``chunk_size``, ``n_landmarks``, ``landmarks`` and ``dtype`` are fields of the typed backend
options (:mod:`mkrk_dask.backends.options`), set as ``backend_options={"n_landmarks": 300}``
and validated there, once. The keywords of the same names stay in the estimators' signature for
one release with the default ``"deprecated"`` (scikit-learn's convention): set, they give one
:class:`FutureWarning` per ``fit`` or ``plan`` and are routed into the options, so a fit does
what it did before. They will be removed in 0.3.
"""

from __future__ import annotations

import warnings
from typing import Any

__all__ = ["MOVED", "DEPRECATED", "plan_params", "saved_params"]

#: the keywords that moved into ``backend_options``
MOVED = ("chunk_size", "n_landmarks", "landmarks", "dtype")
#: their default in the signature: not set
DEPRECATED = "deprecated"
#: their defaults before they moved, as a model saved then records them
_OLD_DEFAULTS = {"chunk_size": None, "n_landmarks": 500, "landmarks": "kmeans++",
                 "dtype": "auto"}


def _is_set(value: Any) -> bool:
    return not (isinstance(value, str) and value == DEPRECATED)


def _applies(name: str, solver: Any) -> bool:
    """Whether option ``name`` applies to ``solver``: as a keyword it was ignored by a
    backend without it (``dtype`` is the plan's, for every solver)."""
    from ..backends import SOLVER_OPTIONS, option_names

    return name == "dtype" or solver not in SOLVER_OPTIONS or name in option_names(solver)


def _route(params: dict, moved: dict) -> dict:
    """``params`` without the moved keywords, those of ``moved`` that apply to its solver
    added to its ``backend_options``."""
    out = {k: v for k, v in params.items() if k not in MOVED}
    given = {k: v for k, v in moved.items() if _applies(k, params.get("solver"))}
    if given:
        out["backend_options"] = {**(params.get("backend_options") or {}), **given}
    return out


def plan_params(params: dict, stacklevel: int = 2) -> dict:
    """An estimator's ``get_params()`` as the plan reads it: every option in
    ``backend_options``. A moved keyword that is set gives one :class:`FutureWarning` (naming
    all that are) and is routed into the options.

    Raises
    ------
    ValueError
        A keyword set and the same option in ``backend_options``.
    """
    moved = {k: params[k] for k in MOVED if k in params and _is_set(params[k])}
    if not moved:
        return _route(params, {})
    options = params.get("backend_options") or {}
    for name in moved:
        if name in options:
            raise ValueError(f"{name} given both as a parameter and in backend_options; give "
                             f"it once, in backend_options (the parameter is deprecated)")
    solver = params.get("solver")
    spelled = ", ".join(f"{k!r}: {v!r}" for k, v in moved.items() if _applies(k, solver))
    ignored = ", ".join(k for k in moved if not _applies(k, solver))
    warnings.warn(
        f"{', '.join(moved)} {'is' if len(moved) == 1 else 'are'} deprecated as "
        f"{'a parameter' if len(moved) == 1 else 'parameters'} and will be removed in 0.3"
        + (f": pass backend_options={{{spelled}}} instead" if spelled else "")
        + (f"; {ignored} does nothing with solver={solver!r}: leave it out" if ignored else ""),
        FutureWarning, stacklevel=stacklevel + 1)
    return _route(params, moved)


def saved_params(params: dict) -> dict:
    """The parameters of a model saved before the knobs moved, as the estimator now takes
    them: a keyword at its old default left out, another value moved into
    ``backend_options`` (where it is not already)."""
    moved = {k: params[k] for k in MOVED if k in params and _is_set(params[k])
             and params[k] != _OLD_DEFAULTS[k]}
    options = params.get("backend_options") or {}
    return _route(params, {k: v for k, v in moved.items() if k not in options})
