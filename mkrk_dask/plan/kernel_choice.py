"""The default kernels (``kernels="auto"``): each view's geometry, read from a sample of its
rows (:func:`view_geometry`), and the kernels of that geometry (:func:`auto_kernels`): the
cosine and Gaussians at :data:`WIDTHS` times the median pairwise distance, Euclidean or of the
angle between rows (only the cosine where most pairs of rows share no non-zero column).
Also whether kernels are as
smooth as the default's (:func:`smooth_kernels`, which the solver choice and the Nystrom
warning read), and the refusal of a width relative to a median distance of zero."""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.sparse as sp

from ..kernel_evaluation import WIDTHED_FAMILIES
from ..kernels import KernelSpec, row_sq_norms

#: the default kernels' geometries (:func:`auto_kernels`)
GEOMETRIES = ("signed", "euclidean", "measurements", "angular", "mixed", "column", "disjoint")
#: share of zero entries from which non-negative data count as intensities or counts (an
#: image's dark pixels, a document's absent words)
ANGULAR_MIN_ZEROS = 0.1
#: Gaussian widths of the default kernels, in multiples of the median pairwise distance
WIDTHS = (0.5, 1.0, 2.0)
#: the share of the learned kernel's trace the Nystrom factors may miss before the fit warns,
#: for the default kernels (Gaussians at least half the median distance wide): their factors
#: at 500 landmarks miss 10-15% on Fashion-MNIST and on Gaussian blobs, where the default's
#: Nystrom fits gave the exact fits' NMI within 1 point (6,441 to 12,000 rows of Fashion-MNIST,
#: ``benchmarks/results/defaults/default_sizes.md``); a warning there would be one a user
#: cannot act on. Kernels the user gives: :data:`~mkrk_dask.backends.base.APPROXIMATION_WARNING`
DEFAULT_KERNELS_MISSED_WARNING = 0.25


def view_geometry(rows: Any) -> tuple[str, str]:
    """``"angular"`` (the cosine kernel and Gaussians of the angle between rows) for
    intensities and counts: non-negative rows with many zeros (dark pixels, absent words),
    whose length is mostly their overall level, and whose directions differ;
    ``"measurements"`` (Euclidean Gaussians, the cosine and one Gaussian of the angle) for
    other non-negative rows of different directions: lengths, weights, concentrations rarely
    read zero, and both their size and their proportions are information; ``"euclidean"``
    (the cosine kernel and Euclidean Gaussians) otherwise; ``"disjoint"`` (the cosine kernel
    alone) for non-negative rows of which at least half the pairs share no non-zero column
    (:func:`disjoint_share`: links, rare words), where the median angle is a right angle;
    ``"column"`` (Euclidean Gaussians
    alone) for a view of one column, where the cosine kernel only tells signs apart (data
    with negative values: it cut a group at the origin, ``blobs:1`` of
    ``benchmarks/results/defaults/graph_lanczos_18b1997.md``) or zeros from the rest. With
    the reason."""
    from ..kernel_widths import directions_differ

    if rows.shape[1] == 1:
        return "column", ("one column (the angle of a single number is its sign, or nothing "
                          "where all share it): Euclidean Gaussians only")
    low = float(rows.min()) if not sp.issparse(rows) else min(0.0, float(rows.data.min(
        initial=0.0)))
    # The plain cosine, not one of rows lifted off the origin: the lift (half the median
    # length) kept a blob around the origin whole on synthetic data, but failed both folds
    # of the protocol (-0.32 and -0.31 NMI on average, mv:Prokaryotic -3.73: the
    # "lifted cosine" row of benchmarks/results/defaults/defaults_folds.md, git fd7af7a)
    if low < 0:
        return "signed", ("negative values: the cosine kernel and Euclidean Gaussians")
    size = rows.shape[0] * rows.shape[1]
    zeros = 1.0 - (rows.nnz if sp.issparse(rows) else np.count_nonzero(rows)) / max(size, 1)
    if not directions_differ(rows):
        return "euclidean", "the rows all point the same way: cosine and Euclidean Gaussians"
    if np.allclose(row_sq_norms(rows), 1.0, atol=2e-6):
        return "euclidean", ("unit-length rows (angular and Euclidean Gaussians coincide): "
                             "cosine and Euclidean Gaussians")
    # read only where most entries are zero, where the share can be large: on a dense
    # sample the pattern's product costs as much as its Gram matrix (0.26 s at 1,024 columns)
    disjoint = disjoint_share(rows) if zeros >= 0.5 else 0.0
    if disjoint >= DISJOINT_MIN_SHARE:
        return "disjoint", (f"{disjoint:.0%} of the pairs of sampled rows share no non-zero "
                            "column (links, rare items): the median angle is a right angle, "
                            "so a Gaussian of the angle at a multiple of it tells little but "
                            "whether two rows share a column: the cosine kernel alone")
    if zeros < ANGULAR_MIN_ZEROS:
        return "measurements", (f"non-negative measurements ({zeros:.0%} zero entries, fewer "
                                f"than {ANGULAR_MIN_ZEROS:.0%}): Euclidean Gaussians for their "
                                "sizes, cosine and a Gaussian of the angle for their "
                                "proportions")
    return "angular", (f"intensities or counts (non-negative, {zeros:.0%} zero entries: a row's "
                       "length is mostly its overall level): cosine and Gaussians of the angle "
                       "between rows")


#: share of the pairs of rows that share no non-zero column from which a non-negative view gets
#: the cosine kernel alone: one half, where the median angle, the Gaussians' unit, is a right
#: angle (a Gaussian of the angle then mostly tells whether two rows share a column at all;
#: on mv:Cora's link views such Gaussians took the default from 17.18 NMI to 1.47:
#: ``benchmarks/results/defaults/defaults_folds.md``, its ablation table)
DISJOINT_MIN_SHARE = 0.5
#: rows of the sample :func:`disjoint_share` reads (their pairs: about 125,000)
DISJOINT_SAMPLE_ROWS = 500


def disjoint_share(rows: Any) -> float:
    """The share of the pairs of (the first :data:`DISJOINT_SAMPLE_ROWS` of) the sampled rows
    that share no non-zero column: the pairs at a right angle, for non-negative rows. Where it
    reaches one half, so does the median angle. Read from the rows' patterns of non-zeros
    as a sparse product, cheap for the sparse rows it can be large for."""
    head = rows[:DISJOINT_SAMPLE_ROWS]
    pattern = sp.csr_matrix(head != 0, dtype=np.float64)
    s = pattern.shape[0]
    if s < 2:
        return 0.0
    shared = (pattern @ pattern.T).tocsr()
    shared.setdiag(0)
    shared.eliminate_zeros()
    return 1.0 - shared.nnz / (s * (s - 1))


#: the default's Gaussians per geometry: (family, widths in multiples of the median distance).
#: Measurements get one angular Gaussian beside the cosine: their rows nearly all point one
#: way (every cosine close to 1, so the cosine kernel is nearly constant), and a Gaussian at
#: the median angle reads their proportions at the data's own scale, as the Euclidean ones
#: read their sizes
_GAUSSIANS = {"signed": (("gaussian", WIDTHS),),
              "euclidean": (("gaussian", WIDTHS),),
              "measurements": (("gaussian", WIDTHS), ("angular", (1.0,))),
              "angular": (("angular", WIDTHS),),
              "mixed": (("gaussian", WIDTHS), ("angular", WIDTHS)),
              "column": (("gaussian", WIDTHS),),
              "disjoint": ()}
#: geometries without the cosine kernel
_NO_COSINE = ("column",)


def auto_kernels(geometries: list[str]) -> list[KernelSpec]:
    """The default kernels, per view: cosine and Gaussians at :data:`WIDTHS` times the median
    distance (Euclidean; ``"angular"``: of the angle; ``"measurements"``: Euclidean and one
    of the angle at the median; ``"mixed"``: both at every width; ``"column"``: Euclidean, no
    cosine; ``"signed"``: Euclidean, as ``"euclidean"``)."""
    specs = []
    for view, geometry in enumerate(geometries):
        if geometry not in _NO_COSINE:
            specs.append(KernelSpec("linear", view=view))
        specs += [KernelSpec(family, m=m, view=view) for family, widths in _GAUSSIANS[geometry]
                  for m in widths]
    return specs


def smooth_kernels(specs: Any) -> bool:
    """Whether no kernel is narrower than the default's: every Gaussian at least half the
    median distance wide. The Nystrom factors represent those well; a width given by ``c`` or
    ``sigma`` has no known relation to the median."""
    return specs is not None and all(
        spec.family not in WIDTHED_FAMILIES or (spec.m is not None and spec.m >= min(WIDTHS))
        for spec in specs)


def refuse_zero_widths(specs: Any, rows: list) -> None:
    """A plan for data the fit refuses is refused: a width relative to the median distance
    of a view whose sampled rows are one point (the fit reads the same sample)."""
    from ..kernel_widths import one_point
    from ..kernels import medians_needed, zero_median_error

    needed = medians_needed(specs)
    for spec in specs:
        if (spec.view, spec.family) in needed and one_point(rows[spec.view], spec.family):
            raise zero_median_error(spec)
