"""The final step (mkrk_dask.assignment)."""

from __future__ import annotations

import numpy as np

from mkrk_dask.assignment import (
    assign_clusters,
    lloyd_centres,
    nearest_centre,
    repeated_assignments,
    unit_rows,
)


def test_unit_rows_keeps_zero_rows():
    U = unit_rows(np.array([[3.0, 4.0], [0.0, 0.0]]))
    np.testing.assert_allclose(U, [[0.6, 0.8], [0.0, 0.0]])


def test_lloyd_centres_reach_a_fixed_point_that_predicts_the_labels():
    rng = np.random.default_rng(0)
    U = np.vstack([rng.normal(loc, 0.3, size=(40, 2)) for loc in ((0, 0), (3, 0), (0, 3))])
    labels = assign_clusters(U, 3, random_state=0)
    noisy = labels.copy()
    noisy[:3] = (noisy[:3] + 1) % 3  # a few wrong labels: Lloyd steps move them back
    centres, fixed, changed = lloyd_centres(unit_rows(U), noisy, 3)
    np.testing.assert_array_equal(nearest_centre(unit_rows(U), centres), fixed)
    assert changed >= 3


def test_repeated_assignments_are_seeded():
    H = np.random.default_rng(1).normal(size=(50, 3))
    a = repeated_assignments(H, 3, 4, random_state=7)
    b = repeated_assignments(H, 3, 4, random_state=7)
    assert len(a) == 4 and all(np.array_equal(x, y) for x, y in zip(a, b, strict=True))
