"""Backends: where the base kernels live and how the loop's five quantities are computed."""

from .base import KernelBackend, TopK
from .exact import ExactBackend

__all__ = ["KernelBackend", "TopK", "ExactBackend"]
