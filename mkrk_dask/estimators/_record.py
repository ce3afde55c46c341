"""The fitted record: everything a fit sets on its estimator, from the loop's result and the
final stage's (:class:`~mkrk_dask.estimators._final.FinalResult`), in one typed place.

:meth:`FittedRecord.attributes` is the written schema of the fitted attributes the estimators
share, in the order a fit sets them; a method adds its own
(``MultipleKernelKMeans._set_method_fitted``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..loop import SolverResult, selected_kernels
from ..plan import FitPlan
from ._final import FinalResult

__all__ = ["FittedRecord"]


@dataclass(frozen=True)
class FittedRecord:
    """What one fit made.

    Attributes
    ----------
    plan : FitPlan
        The fit's plan (``plan_``).
    loop : SolverResult
        The alternating loop's result (with the views' agreement weights where the plan
        says ``view_weights="agreement"``).
    final : FinalResult
        The final stage's: embedding, labels, graph verdict, centres and row map.
    specs : list of KernelSpec or None
        The backend's kernels (None for precomputed kernels).
    inertia : float
        The kernel k-means objective of the final labels.
    view_agreement : object or None
        The views' agreement (:func:`~mkrk_dask.view_agreement.agreement_weights`), where
        it set the weights.
    approximation : object or None
        What an approximate backend misses (:class:`~mkrk_dask.backends.ApproximationReport`).
    timings : dict
        Seconds of the loop's parts and of each stage of the fit.
    """

    plan: FitPlan
    loop: SolverResult
    final: FinalResult
    specs: list | None
    inertia: float
    view_agreement: Any
    approximation: Any
    timings: dict[str, float]

    def attributes(self) -> dict[str, Any]:
        """The fitted attributes, by name, in the order a fit sets them."""
        plan, loop, final, specs = self.plan, self.loop, self.final, self.specs
        verdict = final.verdict
        fitted: dict[str, Any] = {
            "plan_": plan,
            "final_step_": plan.final_step,
            "n_components_": int(final.embedding.shape[1]),
            "feature_scale_": final.feature_scale,
            "final_clustering_": verdict.clustering,
            "final_graph_": verdict.graph,
            "final_graph_agreement_": verdict.agreement,
            "final_graph_clear_": verdict.clear,
            "final_graph_extra_parts_": verdict.extra_parts,
            "weights_": loop.weights,
            "embedding_": final.embedding,
            "objective_history_": loop.objective_history,
            "n_iter_": loop.n_iter,
            "converged_": loop.converged,
            "traces_": loop.traces,
            "timings_": self.timings,
            "selected_kernels_": selected_kernels(loop.weights),
            "kernels_": specs,
            "kernel_names_": ([s.name for s in specs] if specs is not None
                              else [f"K{p}" for p in range(len(loop.weights))]),
            "solver_": plan.solver,
            "dtype_": plan.dtype,
        }
        if plan.decision("solver").auto:
            reason = plan.decision("solver").reason
            if plan.solver == "nystrom" and plan.decision("dtype").auto:
                reason += f"; dtype='auto': {plan.decision('dtype').reason}"
            fitted["solver_reason_"] = reason
        fitted["labels_"] = final.labels
        if final.row_map is not None:  # feature input: predict and transform
            fitted["cluster_centers_"] = final.centres
            fitted["n_labels_polished_"] = final.n_labels_polished
            fitted["row_map_"] = final.row_map
            if plan.solver == "nystrom":
                fitted["nystrom_model_"] = final.row_map
                # for summary(), and kept by a saved model (the row map's info is not)
                fitted["nystrom_max_components_"] = final.row_map.info.get("max_components")
                fitted["nystrom_factors_storage_"] = final.row_map.info.get("factors_storage")
        fitted["inertia_"] = self.inertia
        if self.view_agreement is not None:
            fitted["view_weights_"] = self.view_agreement.view_weights
            fitted["view_agreement_"] = self.view_agreement.agreement
        if self.approximation is not None:
            fitted["nystrom_residual_"] = self.approximation.residual_fractions
            fitted["nystrom_missed_fraction_"] = self.approximation.missed_fraction
            fitted["nystrom_ranks_"] = self.approximation.ranks
        return fitted
