"""``kernels="auto"``: the default dictionary and the label-free choice of its geometry.

Per view, one cosine kernel and three Gaussians whose widths are 0.5, 1 and 2 times the median
pairwise distance of a sample of rows, so that the dictionary means the same kernels at every n
and needs no O(n^2 d) pass. The Gaussians measure either the Euclidean distance or the distance
between the unit-length rows (``angular``: the geometry of the cosine kernel, which suits
intensities, counts and histograms, where the norm of a row is mostly its overall level).

The angular geometry is a candidate only for non-negative data (there the origin means
"nothing", so an angle means something; with negative values the origin is arbitrary) whose
rows do not all have unit length already (then the two geometries coincide). For such data
there are three candidate dictionaries: Euclidean, angular, and ``mixed`` (the cosine kernel
and the Gaussians of both geometries, for data where neither geometry alone tells the whole
story). Each is fitted on a uniform sample of at most ``GEOMETRY_SAMPLE_ROWS`` rows (in memory
where its kernels fit, so that the choice costs the same at every n) and the one whose final
clusters leave the smallest share of the scatter of their features within clusters (the
normalised kernel k-means objective at rank 2k, computed without labels) is kept and fitted on
all rows. A ``store`` given holds the store of the geometry kept (``<store>/euclidean``,
``<store>/angular`` or ``<store>/mixed``; on data no larger than the sample, one per
candidate).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp
from sklearn.base import clone

from ..consensus import candidate_components
from ..kernels import KernelSpec, row_sq_norms
from ..scales import ROUND_OFF, sample_rows, unit_rows
from ..validation import is_multiview

__all__ = ["GEOMETRIES", "GEOMETRY_SAMPLE_ROWS", "WIDTHS", "auto_dictionary",
           "candidate_geometries", "fit_auto_dictionary"]

#: the candidate dictionaries, in the order they are fitted
GEOMETRIES = ("euclidean", "angular", "mixed")
#: Gaussian widths, in multiples of the median pairwise distance of the view
WIDTHS = (0.5, 1.0, 2.0)
#: most rows the candidate geometries are compared on (a uniform sample of larger data)
GEOMETRY_SAMPLE_ROWS = 4000


def auto_dictionary(geometry: str, n_views: int) -> list[KernelSpec]:
    """The default kernels of every view: cosine and three Gaussians of the geometry (of
    both geometries for ``"mixed"``)."""
    families = {"euclidean": ["gaussian"], "angular": ["angular"],
                "mixed": ["gaussian", "angular"]}[geometry]
    return [spec for view in range(n_views) for spec in
            [KernelSpec("linear", view=view)]
            + [KernelSpec(family, m=m, view=view) for family in families for m in WIDTHS]]


def candidate_geometries(views: list) -> tuple[list[str], str]:
    """The geometries worth fitting for these views, and why (from a sample of rows)."""
    samples = [sample_rows(view) for view in views]  # sparse rows stay sparse
    if any(float(s.min()) < 0 for s in samples):
        return ["euclidean"], ("the data have negative values (an arbitrary origin, so angles "
                               "carry no meaning): Euclidean Gaussians")
    if any(_same_direction(unit_rows(s, zero_rows="keep")) for s in samples):
        return ["euclidean"], "the rows of a view all point the same way (no angles to tell apart)"
    if all(np.allclose(row_sq_norms(s), 1.0, atol=2e-6) for s in samples):
        return ["euclidean"], ("every row has unit length, where the angular and Euclidean "
                               "Gaussians coincide")
    return list(GEOMETRIES), ("non-negative data: the Euclidean, angular and mixed "
                              "dictionaries fitted, the one with the smallest within-cluster "
                              "share of the scatter of its features kept")


def _same_direction(units: Any) -> bool:
    """Whether all (unit or zero) rows are equal: no column varies by more than the round-off
    of scaling a row to unit length (one-column positive data: 1 - 1e-16 and 1)."""
    if sp.issparse(units):
        spread = units.max(axis=0).toarray() - units.min(axis=0).toarray()
    else:
        spread = np.ptp(units, axis=0)
    return float(spread.max()) <= ROUND_OFF


def _substore(store: Any, name: str) -> Any:
    """``store/name`` for a path or a URL."""
    if isinstance(store, str) and "://" in store:
        return f"{store.rstrip('/')}/{name}"
    return Path(store) / name


def _geometry_twin(estimator: Any, geometry: str, n_views: int, sampled: bool) -> Any:
    """A copy of ``estimator`` with the dictionary of ``geometry``; on a sample of rows it
    chooses its own backend (``solver="auto"``: in memory unless the sample's kernels would not
    fit, as with many views), without the store and backend options meant for all rows."""
    twin = clone(estimator).set_params(kernels=auto_dictionary(geometry, n_views))
    if sampled:
        twin.set_params(solver="auto", store=None, backend_options=None, verbose=0)
        if estimator.final_step != "spectral":
            # the comparison is made on the features at the smallest rank: no other step or
            # rank need be tried
            twin.set_params(final_step="features")
            if estimator.n_components == "auto":
                twin.set_params(n_components=candidate_components(
                    estimator.n_clusters, GEOMETRY_SAMPLE_ROWS)[0])
    elif estimator.store is not None:
        # One store per geometry, side by side under the one given, each reused later.
        twin.set_params(store=_substore(estimator.store, geometry))
    return twin


def fit_auto_dictionary(estimator: Any, X: Any) -> Any:
    """Fit ``estimator`` (``kernels="auto"``) on ``X``: every candidate geometry is fitted
    on a uniform sample of at most :data:`GEOMETRY_SAMPLE_ROWS` rows (all rows of a smaller
    data set), the one whose clusters leave the smallest within-cluster share of the scatter
    is kept, and only it is fitted on all rows (when the sample was all rows, its fit is the
    result). The choice and its reasons go on the estimator (``dictionary_``,
    ``dictionary_scores_``, ``dictionary_reason_``)."""
    estimator._check_params()
    # Validate X once (the estimator records n_features_in_ / feature_names_in_); every
    # candidate then fits the validated views instead of converting X again.
    views, _, _ = estimator._prepare_input(X)
    multiview = is_multiview(X)
    geometries, reason = candidate_geometries(views)
    n_samples = views[0].shape[0]
    sampled = len(geometries) > 1 and n_samples > GEOMETRY_SAMPLE_ROWS
    if sampled:
        rows = [sample_rows(view, GEOMETRY_SAMPLE_ROWS) for view in views]
        reason += (f" (compared on a uniform sample of {GEOMETRY_SAMPLE_ROWS:,} of the "
                   f"{n_samples:,} rows)")
    else:
        rows = views
    fits: dict[str, Any] = {}
    scores: dict[str, float] = {}
    for geometry in geometries:
        twin = _geometry_twin(estimator, geometry, len(views), sampled)
        fits[geometry] = twin.fit(rows if multiview else rows[0])
        # Compared at one step and rank for every geometry (the features at the smallest
        # rank tried: 2k), whatever each fit then keeps.
        tried = twin.component_scores_
        ranks = tried.get("features") or tried["spectral"]
        scores[geometry] = ranks[min(ranks)]["within_share"]
    chosen = min(scores, key=scores.get)
    result = fits[chosen]
    if sampled:
        twin = _geometry_twin(estimator, chosen, len(views), False)
        result = twin.fit(views if multiview else views[0])
    params = estimator.get_params(deep=False)
    for name, value in vars(result).items():
        if name not in params:
            setattr(estimator, name, value)
    estimator.dictionary_ = chosen
    estimator.dictionary_scores_ = scores
    estimator.dictionary_reason_ = reason
    return estimator
