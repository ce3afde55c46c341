"""What ``summary()`` says of an approximate backend's fit: the share of the trace the
Nystrom factors miss, their ranks (and landmark prefixes), where they are kept, and the
kernels they represent badly."""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["approximation_lines"]


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
