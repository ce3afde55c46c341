"""The fit plan: every ``"auto"`` of an estimator resolved in one place, before any kernel is
computed, with the reason of each choice and what the fit will cost.

:func:`make_plan` reads the estimator's parameters (a dict, never the estimator) and a sample
of the data, and returns a frozen :class:`FitPlan`. ``MKKMRK(k).plan(X)`` returns it without
fitting; ``fit`` carries it out and keeps it as ``plan_``; ``summary()`` and ``mkrk plan``
print it. What the plan decides:

- **preprocessing** (per view): columns in different units are standardised, from the spread of
  the columns' standard deviations on a sample of rows, binary columns of very different rates
  are scaled, and columns far from zero beside their spread are centred
  (:func:`column_scaling`);
- **kernels** (``kernels="auto"``): per view, the cosine kernel and Gaussians at 0.5, 1 and 2
  times the median pairwise distance, of the Euclidean distance or, for intensities and counts
  (non-negative with many zeros), of the angle between rows; other non-negative data
  (measurements) add one Gaussian of the angle at the median (:func:`auto_kernels`). No
  candidate dictionaries are fitted;
- **solver, dtype and backend options**: the backend from n, m and the machine's memory and
  disk (:mod:`mkrk_dask.auto`), the storage precision, and every ``"auto"`` of the Nystrom
  options as a number (:func:`resolve_options`);
- **view weights** (``view_weights="auto"``): where the method leaves the kernels' weights
  equal, three or more views weighed by their agreement;
- **the final step**: ``"auto"`` is the features of the top 2k eigenpairs of the learned kernel
  (one eigendecomposition, one k-means) and, for the default, their partition refined on an
  anchor graph of those rows (kept where it agrees with the k-means partition).

The decisions are kept by topic, each module with the constants that set it (and their
comments, which cite the measurement that set them):

- ``fit_plan.py``: the record, :class:`Decision` and :class:`FitPlan`;
- ``make.py``: :func:`make_plan`, which takes each choice in turn and counts the cost;
- ``kernel_choice.py``: the geometry of a view and its default kernels (:data:`WIDTHS`);
- ``backend_choice.py``: the solver, the storage precision and the backend options;
- ``view_weights.py``: the kernels' weights where the method leaves them equal;
- ``final_choice.py``: the final step, its rank and the final partition (the ``GRAPH_*``
  constants).

A constant is read where it is defined: to change one for a run (a benchmark, a test), set it
on that module (``mkrk_dask.plan.final_choice.GRAPH_SAMPLE_ROWS``), not on this package.
"""

from __future__ import annotations

from ..choices import PREPROCESSING_CHOICES
from ..preprocessing import (  # noqa: F401 - re-exported
    OFFSET_LIMIT,
    SAMPLE_ROWS,
    SCALE_SPREAD_LIMIT,
    ColumnScaling,
    column_scaling,
    preprocess,
    two_valued,
    view_sample,
)
from .backend_choice import backend_settings, requested_dtype, resolve_options
from .final_choice import (  # noqa: F401 - re-exported
    GRAPH_ALL_ROWS,
    GRAPH_ANCHOR_ITERATIONS,
    GRAPH_ANCHORS,
    GRAPH_CLEAR_GAP,
    GRAPH_CLEAR_ROWS,
    GRAPH_MIN_AGREEMENT,
    GRAPH_NEIGHBORS,
    GRAPH_REFERENCE_INITS,
    GRAPH_ROWS_PER_ANCHOR,
    GRAPH_SAMPLE_ANCHORS,
    GRAPH_SAMPLE_ROWS,
    final_rank,
    reference_inits,
)
from .fit_plan import Decision, FitPlan
from .kernel_choice import (  # noqa: F401 - re-exported
    ANGULAR_MIN_ZEROS,
    DEFAULT_KERNELS_MISSED_WARNING,
    GEOMETRIES,
    WIDTHS,
    auto_kernels,
    smooth_kernels,
)
from .make import make_plan

__all__ = ["FitPlan", "Decision", "ColumnScaling", "make_plan", "auto_kernels",
           "column_scaling", "SCALE_SPREAD_LIMIT", "OFFSET_LIMIT", "PREPROCESSING_CHOICES",
           "WIDTHS", "SAMPLE_ROWS",
           "GRAPH_NEIGHBORS", "GRAPH_MIN_AGREEMENT", "GRAPH_CLEAR_GAP", "GRAPH_CLEAR_ROWS",
           "GEOMETRIES", "GRAPH_ALL_ROWS", "GRAPH_SAMPLE_ANCHORS",
           "GRAPH_SAMPLE_ROWS",
           "GRAPH_ANCHORS", "GRAPH_ANCHOR_ITERATIONS", "GRAPH_REFERENCE_INITS",
           "reference_inits", "smooth_kernels", "backend_settings",
           "resolve_options", "requested_dtype"]
