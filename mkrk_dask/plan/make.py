"""The plan of a fit, made in one place: :func:`make_plan` reads the estimator's parameters
and a sample of the data, takes each choice from the module that holds its rules (the column
transform from :mod:`mkrk_dask.preprocessing`, the kernels from ``kernel_choice``, the solver,
dtype and options from ``backend_choice``, the views' weights from ``view_weights``, the final
step from ``final_choice``), counts what the fit will run, and returns the
:class:`~mkrk_dask.plan.FitPlan` with its expected seconds."""

from __future__ import annotations

from typing import Any

from ..backends.base import APPROXIMATION_WARNING
from ..preprocessing import ColumnScaling, preprocess, two_valued, view_sample
from .backend_choice import (
    final_rows_decision,
    gram_rows_decision,
    requested_dtype,
    resolve_eigen_method,
    resolve_options,
    solver_and_dtype,
    store_factors_decision,
)
from .final_choice import (
    GRAPH_ANCHOR_ITERATIONS,
    GRAPH_NEIGHBORS,
    final_decisions,
    final_graph_rows,
    kmeans_cost,
    reference_inits,
)
from .fit_plan import Decision, FitPlan, is_auto
from .kernel_choice import (
    DEFAULT_KERNELS_MISSED_WARNING,
    auto_kernels,
    refuse_zero_widths,
    view_geometry,
)
from .view_weights import choose_view_weights


def make_plan(method: str, params: dict, data: Any, *, precomputed: bool) -> FitPlan:
    """The plan of a fit of ``params`` (an estimator's ``get_params()``, validated, every
    backend option in ``backend_options``) on ``data``: the validated views, or the
    ``(m, n, n)`` precomputed kernels.

    Reads a uniform sample of at most :data:`~mkrk_dask.preprocessing.SAMPLE_ROWS` rows of each
    view (the column scales and the geometry), nothing else of the data.
    """
    from ..backends import make_options
    from ..kernels import as_kernel_specs
    from ..validation import is_lazy

    k = int(params["n_clusters"])
    decisions: list[Decision] = []
    if precomputed:
        n, m, n_views = int(data.shape[1]), int(data.shape[0]), 0
        scaling: tuple[ColumnScaling, ...] = ()
        specs = None
        decisions.append(Decision("kernels", f"{m} precomputed", "given", auto=False))
        lazy = is_lazy(data)
    else:
        n, n_views = int(data[0].shape[0]), len(data)
        lazy = any(is_lazy(v) for v in data)
        samples = [view_sample(v) for v in data]
        chosen = [preprocess(params.get("preprocessing", "none"), v, s)
                  for v, s in zip(data, samples, strict=True)]
        scaling = tuple(c for c, _ in chosen)
        for v, (c, why) in enumerate(chosen):
            decisions.append(Decision("preprocessing" + (f" (view {v})" if n_views > 1 else ""),
                                      c.method, why,
                                      auto=is_auto(params.get("preprocessing", "none"))))
        rows = [s if c.method == "none" else c.apply(s)
                for s, c in zip(samples, scaling, strict=True)]
        if is_auto(params["kernels"]):
            geometries = [view_geometry(r) for r in rows]
            specs = auto_kernels([g for g, _ in geometries])
            why = "; ".join(dict.fromkeys(r for _, r in geometries))
            decisions.append(Decision("kernels", ", ".join(s.name for s in specs), why))
        else:
            specs = as_kernel_specs(params["kernels"], n_views=n_views)
            decisions.append(Decision("kernels", ", ".join(s.name for s in specs), "given",
                                      auto=False))
        refuse_zero_widths(specs, rows)
        m = len(specs)
    solver, solver_reason, dtype, dtype_reason = solver_and_dtype(params, n, m, specs,
                                                                  precomputed, lazy)
    decisions.append(Decision("solver", solver, solver_reason, auto=is_auto(params["solver"])))
    decisions.append(Decision("dtype", dtype, dtype_reason, auto=is_auto(requested_dtype(params))))
    options = resolve_options(solver, params, n, m, dtype,
                              strict=not is_auto(params["solver"]))
    view_weights, why = choose_view_weights(method, params, n_views, solver)
    decisions.append(Decision("view weights", view_weights, why,
                              auto=is_auto(params.get("view_weights", "auto"))))
    line = n_views == 1 and int(data[0].shape[1]) == 1
    # read only where the partition is the plan's to choose
    corners = (not precomputed and is_auto(params["final_clustering"])
               and all(two_valued(s) for s in samples))
    # plain Nystrom may give fewer eigenpairs than the rank (its factors' columns)
    capped = solver == "nystrom" and not make_options("nystrom", **options).local_part(n, m)
    final, step, rank, clustering, anchors = final_decisions(params, n, k, line=line,
                                                             corners=corners, capped=capped)
    decisions += final
    if solver == "exact":  # the eigenpairs the fit asks: the loop's k, the final rank
        options = resolve_eigen_method(options, n, (k, rank))
    elif solver == "nystrom":
        decisions.append(store_factors_decision(options, params, n, m, specs,
                                                [int(v.shape[1]) for v in data]))
        decisions.append(gram_rows_decision(options, params, n))
        decisions.append(final_rows_decision(options, params, n, k))
    iterations = int(params.get("max_iter", 100))
    # SimpleMKKM's line search makes an H-step per trial point (docs/methods.rst measures
    # 1.8-2.2 a step with direction="scaled", 18.5-18.9 with the authors' "reduced")
    per_step = ({"scaled": "about 2", "reduced": "about 19"}[params["direction"]]
                if method == "SimpleMKKM" else None)
    # the first H-step is made at the final rank, and serves as the final one where the
    # weights end where they started (MKKM-RK's default: every kernel represents itself)
    shared = ("" if step == "spectral" and rank == k else
              f" (none where the weights stay: the first is made at rank {rank})")
    cost = {"fits": 1, "eigendecompositions":
            f"<= {iterations} (one per iteration) + 1 final{shared}" if per_step is None else
            f"<= {iterations} iterations x {per_step} (one per line-search point) + 1 final"
            f"{shared}",
            "kmeans": kmeans_cost(clustering, int(params["n_init"])),
            "graph": 1 if clustering == "graph" else 0,
            "passes": ("none (in memory)" if solver == "exact" else
                       "3 per iteration (blockwise)" if solver == "blockwise" else
                       "3 + 2 final (Nystrom: scales, factors, exact C or Gram; " + (
                           "the sampled rows' embedding, then every row's embedding, label "
                           "and cluster sums)" if options.get("final_rows") else
                           "the embedding, then the cluster sums for inertia_)"))}
    plan = FitPlan(method=method, n_samples=n, n_views=n_views, scaling=scaling,
                   kernels=None if specs is None else tuple(specs), solver=solver,
                   dtype=dtype, options=options, final_step=step, n_components=rank,
                   final_clustering=clustering, graph_anchors=anchors,
                   graph_rows=final_graph_rows(n, anchors),
                   missed_warning=(DEFAULT_KERNELS_MISSED_WARNING if is_auto(params["kernels"])
                                   else APPROXIMATION_WARNING),
                   decisions=tuple(decisions), cost=cost, view_weights=view_weights)
    # its expected seconds: a short calibration on the same sample (plan_time.py)
    from ..plan_time import FinalCounts, with_expected_time

    return with_expected_time(plan, None if precomputed else rows, params, n_kernels=m,
                              counts=FinalCounts(reference_inits(clustering,
                                                                 int(params["n_init"])),
                                                 GRAPH_ANCHOR_ITERATIONS, GRAPH_NEIGHBORS))
