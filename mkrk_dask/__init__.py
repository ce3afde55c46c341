"""mkrk-dask: multiple kernel k-means by selecting representative kernels (MKKM-RK).

Exact and faithful to Yao & Chen (AAAI 2019) on small data; scalable on Dask.
"""

import importlib
from typing import Any

#: where each public name lives: imported on first use (PEP 562), so that importing the
#: package, and the command line's --help, do not load scikit-learn, SciPy and Dask
_EXPORTS = {
    "average_kernel_clustering": "baselines", "single_kernel_clustering": "baselines",
    "kernel_backend": "baselines",
    "MKKM": "estimators", "MKKMMR": "estimators", "MKKMRK": "estimators",
    "SimpleMKKM": "estimators",
    "AnchorGraphClustering": "estimators",
    "DisconnectedGraphWarning": "exceptions", "NystromApproximationWarning": "exceptions",
    "StoreError": "exceptions", "UncertifiedSolutionWarning": "exceptions",
    "PrecisionWarning": "exceptions",
    "KernelSpec": "kernels", "paper_kernels": "kernels", "parse_kernel": "kernels",
    "clustering_accuracy": "metrics", "clustering_scores": "metrics",
    "normalized_mutual_info": "metrics", "purity": "metrics",
    "FitPlan": "plan", "QPSolution": "qp", "RepresentativeQP": "qp",
    "LambdaResult": "search", "build_store": "search", "lambda_search": "search",
    "paper_lambda_grid": "search",
    "search_figures": "plotting", "make_figures": "plotting",
    "load_dataset": "datasets", "make_multiview_blobs": "synthetic",
}


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'mkrk_dask' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value  # once: later look-ups do not come here
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))


__version__ = "0.1.0"

__all__ = [
    "MKKMRK",
    "MKKM",
    "MKKMMR",
    "SimpleMKKM",
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
    "kernel_backend",
    "search_figures",
    "make_figures",
    "load_dataset",
    "make_multiview_blobs",
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
