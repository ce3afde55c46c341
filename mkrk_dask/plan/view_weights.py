"""The kernels' weights where the method leaves them equal (``view_weights="auto"``): three
or more views weighed by how far each view's own partition agrees with the others'
(:mod:`mkrk_dask.view_agreement`), or equal."""

from __future__ import annotations

from .fit_plan import is_auto


def choose_view_weights(method: str, params: dict, n_views: int, solver: str) -> tuple[str, str]:
    """``("agreement" or "equal", the reason)``: where MKKM-RK's weights stay equal (the
    default: lambda 1, ``sfn``, normalised; every kernel represents itself), three or more
    views are weighed by their agreement (:mod:`mkrk_dask.view_agreement`), on the exact
    backend (one eigendecomposition and one k-means per view)."""
    from ..view_agreement import MIN_VIEWS

    given = params.get("view_weights", "auto")
    if not is_auto(given):
        if given == "agreement" and n_views < 2:
            # refused before any work: there are no views to agree (precomputed kernels)
            raise ValueError("view_weights='agreement' needs two or more views of features; "
                             f"got {'precomputed kernels' if not n_views else 'one view'}")
        return given, "given"
    if n_views < MIN_VIEWS:
        return "equal", (f"{n_views} view(s): the views' agreement needs {MIN_VIEWS} or more "
                         "(with two it is one number for both)" if n_views else
                         "precomputed kernels")
    equal = (method == "MKKM-RK" and float(params.get("lam", 0.0)) == 1.0
             and params.get("dissimilarity") == "sfn"
             and params.get("lam_scaling") == "normalized")
    if not equal:
        return "equal", "the method learns the weights"
    if solver != "exact":
        return "equal", (f"the {solver} backend (the views' own partitions are made where the "
                         "kernels are in memory)")
    return "agreement", (f"{n_views} views, each kernel weighted by the adjusted mutual "
                         "information of its view's own partition with the other views' (a "
                         "view that agrees with no other, such as noise, drops out)")
