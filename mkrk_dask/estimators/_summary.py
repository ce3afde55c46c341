"""``summary()``, a fitted estimator's account of itself in plain words: the weights, what
an approximate backend's factors miss (the share of the trace, their ranks and landmark
prefixes, where they are kept, the kernels they represent badly), what the plan chose and
why, and what the final partition kept."""

from __future__ import annotations

from typing import Any

import numpy as np
from sklearn.utils.validation import check_is_fitted

from .._text import format_number, plural, wrap_lines
from ..loop import SELECTION_THRESHOLD
from ..plan import GRAPH_CLEAR_ROWS, GRAPH_MIN_AGREEMENT
from ._final import more_parts

__all__ = ["SummaryMixin", "approximation_lines"]


class SummaryMixin:
    """:meth:`summary` of :class:`~mkrk_dask.estimators._base.MultipleKernelKMeans`; a
    method may add lines through the ``_summary_head`` and ``_summary_choices`` hooks."""

    def _summary_head(self, detail: bool = False) -> list[str]:
        """The first lines of :meth:`summary`; ``detail``: with the weight steps' certified
        duality gaps (methods with a QP weight step)."""
        lam = f"lambda={format_number(self.lam)}, " if "lam" in self.get_params() else ""
        lines = [f"{self.method}: {len(self.weights_)} kernels, {lam}"
                 f"{self._iterations_words()}, objective {self.objective_history_[-1]:.10g}"]
        gaps = getattr(self, "qp_relative_gaps_", None)
        if detail and gaps is not None:
            lines.append(f"max QP relative gap {np.max(gaps):.1e} (every weight step is "
                         "certified by its duality gap)")
        return lines

    def _iterations_words(self) -> str:
        """``"converged in 1 iteration"`` or ``"stopped at max_iter = 100"``."""
        return (f"converged in {plural(self.n_iter_, 'iteration')}" if self.converged_ else
                f"stopped at max_iter = {self.n_iter_} before converging")

    def summary(self, detail: bool = False) -> str:
        """A short account of the fit in plain words: the weights, what the plan chose and
        why, and what the final partition kept; no line over 100 characters.

        Parameters
        ----------
        detail : bool, default=False
            Also the solver's diagnostics: the weight steps' certified duality gaps and how
            the Nystrom factors were kept (the command line's ``-v``).

        Returns
        -------
        str
        """
        check_is_fitted(self)
        lines = self._summary_head(detail) + ["weights:"]
        for p in np.argsort(-self.weights_):
            if self.weights_[p] >= SELECTION_THRESHOLD:
                lines.append(f"  {self.kernel_names_[p]:<28s} {self.weights_[p]:.4f}")
        lines += approximation_lines(self, detail)
        lines += self._summary_choices()
        return "\n".join(wrap_lines(lines))

    def _summary_choices(self) -> list[str]:
        """What the plan chose, and why, then what the final partition kept."""
        lines = list(self.plan_.lines(None)) if hasattr(self, "plan_") else []
        agreement = getattr(self, "final_graph_agreement_", None)
        graph = getattr(self, "final_graph_", None)
        if graph is not None and getattr(self, "final_graph_clear_", False):
            k = int(self.n_clusters)
            gaps = 1.0 - graph.eigenvalues_
            apart = (f"{k} parts with no edge between them, beside a few stray rows"
                     if more_parts(graph.eigenvalues_, k) else f"{k} parts")
            lines.append(f"partition kept: the anchor graph's, which clearly has {apart} "
                         f"(1 - eigenvalue {k}: {gaps[k - 1]:.3g}, {k + 1}: {gaps[k]:.3g}; "
                         f"NMI {agreement:.4f} with the k-means partition)")
        elif graph is not None:
            lines.append(f"partition kept: the anchor graph's (NMI {agreement:.4f} with the "
                         f"k-means partition, kept from {GRAPH_MIN_AGREEMENT})")
            smallest = int(np.bincount(self.labels_, minlength=int(self.n_clusters)).min())
            if smallest < GRAPH_CLEAR_ROWS:
                # heavy tails: a few outlying rows as a cluster, two real ones merged; or a
                # true small cluster, which no rule tried could tell apart (docs/defaults.rst)
                lines.append(f"  its smallest cluster holds {smallest} rows (fewer than "
                             f"{GRAPH_CLEAR_ROWS}): if they are outlying rows, not a group, "
                             "final_clustering='kmeans' gives the k-means partition")
        elif getattr(self, "final_graph_extra_parts_", None):
            lines.append(f"partition kept: k-means (the anchor graph has more parts with no "
                         f"edge between them than clusters, so which it joined is arbitrary; "
                         f"NMI {agreement:.4f} with the k-means partition)")
        elif agreement is not None:
            lines.append(f"partition kept: k-means (the anchor graph's partition agreed with it "
                         f"at NMI {agreement:.4f}, below {GRAPH_MIN_AGREEMENT}: a different "
                         "answer, not a refinement)")
        return lines




def approximation_lines(estimator: Any, detail: bool = False) -> list[str]:
    """The lines of ``summary()`` on the Nystrom factors of a fitted estimator (none for
    the exact and blockwise backends); ``detail``: also whether the factors were stored,
    and the cost that decided it."""
    if not hasattr(estimator, "nystrom_missed_fraction_"):
        return []
    names = estimator.kernel_names_
    lines = [f"Nystrom factors miss {estimator.nystrom_missed_fraction_:.1%} of the trace of "
             "the combined kernel"]
    if estimator.nystrom_ranks_ is not None:
        limit = getattr(estimator, "nystrom_max_components_", None)
        storage = getattr(estimator, "nystrom_factors_storage_", None)
        lines.append(
            f"Nystrom components: R = {int(np.sum(estimator.nystrom_ranks_))}"
            + ("" if limit is None else f" (max_components = {limit})") + ": "
            + ", ".join(f"{name} {rank}{_landmark_note(estimator, p)}" for p, (name, rank)
                        in enumerate(zip(names, estimator.nystrom_ranks_, strict=True))))
        if storage is not None and detail:
            lines.append(f"Nystrom factors: {storage}")
    flagged = [f"{name} ({miss:.0%})" for name, miss in
               zip(names, estimator.nystrom_residual_, strict=True) if miss > 0.5]
    if flagged:
        lines.append("flagged (the factors miss more than half of their trace): "
                     + ", ".join(flagged))
    return lines


def _landmark_note(estimator: Any, p: int) -> str:
    """`` (first c landmarks)`` where kernel p's factor uses a prefix of its view's landmarks
    (``landmark_oversampling``), else nothing."""
    model = getattr(estimator, "nystrom_model_", None)
    if model is None:
        return ""
    count = model.kernel_landmarks[p]
    available = model.landmarks[model.specs[p].view].shape[0]
    return f" (first {count} landmarks)" if count < available else ""
