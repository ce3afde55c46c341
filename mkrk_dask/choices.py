"""The allowed values of the options, in a module that imports nothing: the command line
builds its help from them without loading the numerical stack (``mkrk --help`` answers in
a fraction of a second). The modules that use them import them from here."""

from __future__ import annotations

__all__ = ["BACKENDS", "SOLVERS",
           "METHOD_NAMES", "MEASURES", "LANDMARK_METHODS", "STORE_DTYPES", "DTYPE_CHOICES",
           "FINAL_STEPS", "FINAL_STEP_CHOICES", "FINAL_CLUSTERINGS", "GRAPH_GEOMETRIES",
           "PREPROCESSING_CHOICES", "LAM_SCALINGS", "TOL_MODES", "DATASETS", "METHODS",
           "EXTRA_METHODS", "PROTOCOL_METHODS", "LABEL_FREE_DEFAULTS", "PAPER_COMMON",
           "MKKMRK_PAPER"]

#: the backends a fit runs on (:mod:`mkrk_dask.backends`)
BACKENDS = ("exact", "blockwise", "nystrom")
#: the estimators' ``solver`` (``mkrk --solver``): a backend, or ``"auto"`` (the plan chooses)
SOLVERS = (*BACKENDS, "auto")
#: the multiple kernel k-means methods of the estimators (``mkrk --method``)
METHOD_NAMES = ("MKKM-RK", "MKKM-MR", "MKKM", "SimpleMKKM")
#: the kernel dissimilarities of MKKM-RK
MEASURES = ("fip", "sfn", "vn", "ld")
#: Nystrom landmark selections
LANDMARK_METHODS = ("kmeans++", "uniform")
#: storage precisions of a store
STORE_DTYPES = ("float64", "float32")
#: the estimators' ``dtype``: "auto" resolves to one of STORE_DTYPES when the solver is chosen
DTYPE_CHOICES = ("auto", *STORE_DTYPES)
#: the final steps: the paper's spectral one, or k-means on the features of the top eigenpairs
FINAL_STEPS = ("features", "spectral")
#: the estimators' ``final_step``: one of the steps, or ``"auto"`` (every candidate of both
#: kinds, the partition that agrees most with the others kept)
FINAL_STEP_CHOICES = ("auto", *FINAL_STEPS)
#: how the final rows are partitioned (:class:`mkrk_dask.estimators._final.FinalPartition`)
FINAL_CLUSTERINGS = ("auto", "graph", "kmeans")
#: the anchor graph's distances between rows
GRAPH_GEOMETRIES = ("auto", "angular", "euclidean")
#: the column transform before the kernels
PREPROCESSING_CHOICES = ("auto", "none", "standardize")
#: how lambda is scaled
LAM_SCALINGS = ("none", "normalized")
#: how the stopping tolerance compares the change of the objective
TOL_MODES = ("absolute", "relative")
#: the paper's benchmark datasets
DATASETS = ("jaffe", "orl", "tr11", "coil20", "uci_mfeat")
#: the columns of the paper's Table 2, in its order
METHODS = ("SB-KKM", "A-MKKM", "MKKM", "LMKKM", "RMKKM", "MKKM-MR", "MKKM-RK")
#: columns ``mkrk reproduce`` can add after Table 2's: methods the paper does not compare
#: (SimpleMKKM: Liu et al., TPAMI 2023), run under the same protocol on the same kernels
EXTRA_METHODS = ("SimpleMKKM",)
#: every column of the protocol, in the order of its report
PROTOCOL_METHODS = (*METHODS, *EXTRA_METHODS)

#: MKKMRK's label-free defaults of the options ``mkrk fit --help`` states (here, where the
#: help can read them without loading the estimator; tests/test_readme.py checks them
#: against the signature)
LABEL_FREE_DEFAULTS = {"lam": 1.0, "kernels": "auto", "dissimilarity": "sfn",
                       "lam_scaling": "normalized", "final_step": "auto",
                       "final_clustering": "auto", "preprocessing": "auto",
                       "n_components": "auto", "solver": "auto"}
#: the paper's configuration (Table 2) common to every method: its 12 kernels on the columns
#: as given, the spectral final step partitioned by k-means, exact kernels
PAPER_COMMON = {"kernels": "paper", "preprocessing": "none", "final_step": "spectral",
                "final_clustering": "kmeans", "solver": "exact"}
#: MKKM-RK's: ``MKKMRK.paper``, ``mkrk fit --paper`` and ``mkrk search`` fit it
MKKMRK_PAPER = {**PAPER_COMMON, "dissimilarity": "fip", "lam_scaling": "none", "lam": 2.0**-15}
