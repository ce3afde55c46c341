"""Baselines of the paper's Table 2 that run on dense in-memory kernels only.

- :func:`rmkkm`: robust multiple kernel k-means (Du et al., IJCAI 2015);
- :func:`lmkkm`: localized multiple kernel k-means (Gonen & Margolin, NIPS 2014).

Neither fits the backend interface of :mod:`mkrk_dask.loop` (five reductions of the kernels
per iteration): RMKKM's distances of every sample to its cluster centre in every kernel, and
LMKKM's sample-specific weights, which enter the combined kernel as ``diag(theta_m) K_m
diag(theta_m)`` and its QP as ``K_m * (I - H H^T)``, need all n x n entries of every kernel
at every iteration. They take an ``(m, n, n)`` array and are meant for the paper's data sizes.
"""

from .lmkkm import LMKKMResult, lmkkm
from .rmkkm import RMKKMResult, rmkkm

__all__ = ["rmkkm", "RMKKMResult", "lmkkm", "LMKKMResult"]
