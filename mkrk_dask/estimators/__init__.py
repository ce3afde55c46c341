"""The scikit-learn estimators: one per multiple kernel k-means method, sharing
:class:`~mkrk_dask.estimators._base.MultipleKernelKMeans` (input, backends, final step,
``predict``)."""

from ._base import SOLVERS, MultipleKernelKMeans
from ._mkkmrk import MKKMRK

__all__ = ["MKKMRK", "MultipleKernelKMeans", "SOLVERS"]
