"""One base kernel's description: :class:`KernelSpec`, its families and the widths it takes.

The lowest layer of the kernel modules: :mod:`mkrk_dask.kernel_evaluation` evaluates the
kernels a :class:`KernelSpec` describes, and :mod:`mkrk_dask.kernels` (which re-exports
:class:`KernelSpec`) parses, resolves and assembles them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

__all__ = ["KernelSpec", "KERNEL_FAMILIES", "WIDTHED_FAMILIES", "WIDTH_RANGE", "WIDTH_TEXT",
           "in_width_range"]

#: the kernel families a :class:`KernelSpec` takes
KERNEL_FAMILIES = ("linear", "polynomial", "gaussian", "angular")
#: the families with a width (``sigma``): Gaussians of the Euclidean or the angular distance
WIDTHED_FAMILIES = ("gaussian", "angular")


#: widths (and relative widths) a kernel takes: beyond them, the squared distances over
#: the squared width leave float64's range
WIDTH_RANGE = (1e-150, 1e150)
WIDTH_TEXT = "[1e-150, 1e150]"  # as the errors print it


def in_width_range(value: float) -> bool:
    """True for a finite width inside :data:`WIDTH_RANGE`."""
    return math.isfinite(value) and WIDTH_RANGE[0] <= value <= WIDTH_RANGE[1]


@dataclass(frozen=True)
class KernelSpec:
    """One base kernel: a family, its parameters, and the view it reads.

    Parameters
    ----------
    family : {"linear", "polynomial", "gaussian", "angular"}
        ``linear`` is ``x_i . x_j`` (the cosine kernel once normalised); ``polynomial`` is
        ``(a + x_i . x_j) ** b``; ``gaussian`` is ``exp(-||x_i - x_j||^2 / (2 sigma^2))``;
        ``angular`` is the Gaussian of the distance between the unit-length rows,
        ``exp(-||u_i - u_j||^2 / (2 sigma^2))`` with ``u = x / ||x||`` (it depends on the
        angle only, as the cosine kernel does). An all-zero row has no angle: under the
        cosine, the normalised ``polynomial`` with ``a = 0`` and ``angular`` kernels it has
        a direction of its own, shared by all such rows and orthogonal to every other row
        (:mod:`mkrk_dask.kernel_evaluation`).
    a, b : float, int
        Polynomial offset and degree.
    c : float, optional
        Gaussian width relative to the largest pairwise distance ``M`` of the view:
        ``sigma = c * M`` (the paper's convention). Resolved to ``sigma`` by
        :func:`resolve_kernels`.
    m : float, optional
        Width relative to the median pairwise distance ``D`` of the view (of the unit-length
        rows for ``angular``), estimated from a sample of rows: ``sigma = m * D``. Unlike
        ``c``, it means the same kernel at every n (no exact O(n^2 d) pass).
    sigma : float, optional
        Absolute width. Exactly one of ``c``, ``m`` and ``sigma`` is given for a Gaussian
        (``c`` is not defined for ``angular``).
    view : int
        Index of the view (input matrix) the kernel is computed on.
    """

    family: str
    a: float = 0.0
    b: int = 1
    c: float | None = None
    sigma: float | None = None
    view: int = 0
    m: float | None = None

    def __post_init__(self) -> None:
        if self.family not in KERNEL_FAMILIES:
            raise ValueError(f"unknown kernel family {self.family!r}; expected one of "
                             f"{KERNEL_FAMILIES}")
        if self.family == "polynomial":
            if not float(self.b).is_integer() or self.b < 1:  # inf and nan included
                raise ValueError(f"polynomial degree b must be a positive integer, got {self.b}")
            if not math.isfinite(self.a) or self.a < 0:
                raise ValueError(f"polynomial offset a must be finite and >= 0, got {self.a}")
        if self.family in WIDTHED_FAMILIES:
            if self.c is None and self.sigma is None and self.m is None:
                raise ValueError(f"a {self.family} kernel needs m (width relative to the median "
                                 "distance), c (relative to the largest) or sigma")
            if self.c is not None and self.m is not None:
                raise ValueError(f"a {self.family} kernel takes c (relative to the largest "
                                 "distance) or m (relative to the median), not both")
            if self.family == "angular" and self.c is not None:
                raise ValueError("an angular kernel takes m (relative to the median distance "
                                 "of the unit rows) or sigma, not c")
            for label, value in (("c", self.c), ("m", self.m), ("sigma", self.sigma)):
                if value is not None and not in_width_range(value):
                    raise ValueError(f"gaussian {label} must be in {WIDTH_TEXT}, got {value}")
        if int(self.view) != self.view or self.view < 0:
            raise ValueError(f"view must be a non-negative integer, got {self.view}")

    @property
    def name(self) -> str:
        """A short readable name, parseable back by :func:`parse_kernel`."""
        if self.family == "linear":
            base = "cosine"
        elif self.family == "polynomial":
            base = f"polynomial(a={self.a:g},b={int(self.b)})"
        elif self.c is not None:
            base = f"{self.family}(c={self.c:g})"
        elif self.m is not None:
            base = f"{self.family}(m={self.m:g})"
        else:
            base = f"{self.family}(sigma={self.sigma:g})"
        return base if self.view == 0 else f"{base}@{self.view}"

    @property
    def is_resolved(self) -> bool:
        """True when no data-dependent parameter remains (a Gaussian has its sigma)."""
        return self.family not in WIDTHED_FAMILIES or self.sigma is not None

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-serialisable description (for store metadata and saved models)."""
        return {"family": self.family, "a": self.a, "b": int(self.b), "c": self.c,
                "sigma": self.sigma, "view": int(self.view), "m": self.m}
