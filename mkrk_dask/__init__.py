"""mkrk-dask: multiple kernel k-means by selecting representative kernels (MKKM-RK).

Exact and faithful to Yao & Chen (AAAI 2019) on small data; scalable on Dask.
"""

from .baselines import average_kernel_clustering, single_kernel_clustering
from .estimators import MKKM, MKKMMR, MKKMRK, AnchorGraphClustering
from .exceptions import (
    DisconnectedGraphWarning,
    NystromApproximationWarning,
    StoreError,
    UncertifiedSolutionWarning,
)
from .kernels import KernelSpec, paper_kernels, parse_kernel
from .metrics import clustering_accuracy, clustering_scores, normalized_mutual_info, purity
from .plan import FitPlan
from .qp import QPSolution, RepresentativeQP
from .search import LambdaResult, build_store, lambda_search, paper_lambda_grid

__version__ = "0.1.0"

__all__ = [
    "MKKMRK",
    "MKKM",
    "MKKMMR",
    "AnchorGraphClustering",
    "KernelSpec",
    "FitPlan",
    "paper_kernels",
    "parse_kernel",
    "lambda_search",
    "build_store",
    "paper_lambda_grid",
    "LambdaResult",
    "single_kernel_clustering",
    "average_kernel_clustering",
    "clustering_accuracy",
    "normalized_mutual_info",
    "purity",
    "clustering_scores",
    "RepresentativeQP",
    "QPSolution",
    "UncertifiedSolutionWarning",
    "NystromApproximationWarning",
    "DisconnectedGraphWarning",
    "StoreError",
    "__version__",
]
