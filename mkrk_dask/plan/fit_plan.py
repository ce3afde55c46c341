"""The fit plan as a record: a :class:`Decision` for each choice (what, the value, why, and
whether ``"auto"`` made it) and the frozen :class:`FitPlan` that holds them with what the fit
will cost, as text (:meth:`FitPlan.lines`) and as JSON (:meth:`FitPlan.to_dict`,
:meth:`FitPlan.from_dict`). The choices are made by :func:`mkrk_dask.plan.make_plan`
(``plan/make.py``)."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, fields
from typing import Any

import numpy as np

from .._text import LINE_WIDTH, wrap_lines
from ..kernels import KernelSpec
from ..preprocessing import ColumnScaling

#: the plan's cost keys as :meth:`FitPlan.lines` names them
_COST_LABELS = {"kmeans": "k-means runs", "graph": "anchor graphs",
                "passes": "passes over the data"}


@dataclass(frozen=True)
class Decision:
    """One choice of the plan: what, the value, why, and whether ``"auto"`` made it."""

    what: str
    value: str
    reason: str
    auto: bool = True


@dataclass(frozen=True)
class FitPlan:
    """What a fit will do, decided before any kernel is computed.

    Attributes
    ----------
    method : str
    n_samples, n_views : int
        ``n_views`` is 0 for precomputed kernels.
    scaling : tuple of ColumnScaling
        One per view.
    kernels : tuple of KernelSpec or None
        None for precomputed kernels.
    solver, dtype : str
    options : dict
        The backend's options, every ``"auto"`` resolved.
    final_step : {"features", "spectral"}
    n_components : int
        Eigenpairs of the final step.
    final_clustering : {"graph", "kmeans"}
    graph_anchors : int
        Anchors of the final graph (0 without one).
    graph_rows : int
        Rows the final graph is built on (all, or a uniform sample; 0 without a graph).
    missed_warning : float
        Share of the learned kernel's trace an approximate backend may miss before the fit
        warns.
    decisions : tuple of Decision
    cost : dict
        What the fit will run: ``fits`` (loops over the data: 1), ``eigendecompositions``
        (one per iteration, at most ``max_iter``, and the final one; SimpleMKKM's one per
        line-search point), ``kmeans`` (k-means runs
        of ``n_init`` restarts each), ``graph`` (anchor graphs) and ``passes`` (over the rows
        of the data, where the data are read block by block).
    view_weights : {"equal", "agreement"}
        The kernels' weights where the method leaves them equal: ``"agreement"`` weighs
        each view by how far its own partition agrees with the other views'
        (:mod:`mkrk_dask.view_agreement`).
    expected_seconds : float or None
        The fit's expected wall time on this machine, from a short calibration on the
        plan's sample (:mod:`mkrk_dask.plan_time`); None where not estimated.
    """

    method: str
    n_samples: int
    n_views: int
    scaling: tuple[ColumnScaling, ...]
    kernels: tuple[KernelSpec, ...] | None
    solver: str
    dtype: str
    options: dict
    final_step: str
    n_components: int
    final_clustering: str
    graph_anchors: int
    graph_rows: int
    missed_warning: float
    decisions: tuple[Decision, ...]
    cost: dict = field(default_factory=dict)
    view_weights: str = "equal"
    # measured, so two plans of the same choices differ in it: left out of ==
    expected_seconds: float | None = field(default=None, compare=False)

    def decision(self, what: str) -> Decision:
        """The decision about ``what`` (e.g. ``"solver"``)."""
        for d in self.decisions:
            if d.what == what:
                return d
        raise KeyError(what)

    def backend_options(self) -> Any:
        """The typed options of :attr:`solver`."""
        from ..backends import make_options

        return make_options(self.solver, **self.options)

    def apply_scaling(self, views: list) -> list:
        """``views`` with every view's column transform applied."""
        if len(views) != len(self.scaling):
            raise ValueError(f"the plan has {len(self.scaling)} view(s), got {len(views)}")
        return [s.apply(v) for s, v in zip(self.scaling, views, strict=True)]

    def lines(self, width: int | None = LINE_WIDTH) -> list[str]:
        """The plan as text for a terminal: a line per decision, then the cost.

        Parameters
        ----------
        width : int or None, default=100
            The widest line; a longer decision is wrapped onto indented continuation lines
            (:func:`~mkrk_dask._text.wrap_lines`). None: one line per decision, however long.
            :meth:`to_dict` keeps every reason whole.
        """
        out = [f"plan: {self.method}, n={self.n_samples:,}"
               + (f", {self.n_views} view(s)" if self.n_views else ", precomputed kernels")]
        for d in self.decisions:
            out.append(f"  {d.what}: {d.value}" + (f" ({'auto: ' if d.auto else ''}{d.reason})"
                                                   if d.reason else ""))
        from ..plan_time import expected_time_text

        # counts of the steps the fit will run, then their expected seconds
        cost = ", ".join(f"{_COST_LABELS.get(k, k)} {v}" for k, v in self.cost.items())
        out.append(f"  expected cost, in steps: {cost}")
        out.append("  " + expected_time_text(self))
        return out if width is None else wrap_lines(out, width)

    def __str__(self) -> str:
        return "\n".join(self.lines())

    def to_dict(self) -> dict:
        """JSON-able form (for ``result.json`` and saved models)."""
        data = asdict(self)
        data["kernels"] = (None if self.kernels is None
                           else [s.to_dict() for s in self.kernels])
        data["options"] = {k: _jsonable(v) for k, v in self.options.items()}
        return data

    @classmethod
    def from_dict(cls, data: dict) -> FitPlan:
        """The plan :meth:`to_dict` wrote."""
        known = {f.name for f in fields(cls)}
        values = {k: v for k, v in data.items() if k in known}
        values["scaling"] = tuple(
            ColumnScaling(s["method"],
                          None if s.get("center") is None else tuple(s["center"]),
                          None if s.get("scale") is None else tuple(s["scale"]))
            for s in data["scaling"])
        values["kernels"] = (None if data.get("kernels") is None
                             else tuple(KernelSpec(**d) for d in data["kernels"]))
        values["decisions"] = tuple(Decision(**d) for d in data["decisions"])
        return cls(**values)


def _jsonable(value: Any) -> Any:
    if isinstance(value, tuple):
        return list(value)
    if isinstance(value, np.dtype | type):
        return np.dtype(value).name
    try:
        json.dumps(value)
    except TypeError:
        return str(value)
    return value


def is_auto(value: Any) -> bool:
    """Whether a parameter is left to the plan (the string ``"auto"``)."""
    return isinstance(value, str) and value == "auto"
