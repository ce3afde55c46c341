"""The scikit-learn estimators: one per multiple kernel k-means method, sharing
:class:`~mkrk_dask.estimators._base.MultipleKernelKMeans` (input, backends, final step,
``predict``)."""

from ..choices import METHOD_NAMES
from ._anchor_graph import AnchorGraphClustering
from ._base import SOLVERS, MultipleKernelKMeans
from ._mkkm import MKKM, MKKMMR
from ._mkkmrk import MKKMRK
from ._simple import SimpleMKKM

#: the estimator of every method that runs on all backends, by its name in the paper's Table 2
ESTIMATORS = dict(zip(METHOD_NAMES, (MKKMRK, MKKMMR, MKKM, SimpleMKKM), strict=True))

__all__ = ["AnchorGraphClustering", "ESTIMATORS", "MKKM", "MKKMMR", "MKKMRK",
           "MultipleKernelKMeans", "SOLVERS", "SimpleMKKM"]
