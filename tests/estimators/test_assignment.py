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


def test_final_rows_by_blocks_equal_the_materialised_ones(monkeypatch):
    """lloyd_centres/nearest_centre with ``step`` form the unit rows block by block (no
    n x d copy); blocks of 7 rows give the same bits as unit_rows of all rows at once."""
    import mkrk_dask.assignment as assignment

    monkeypatch.setattr(assignment, "_BLOCK_ROWS", 7)
    rng = np.random.default_rng(3)
    H = np.vstack([rng.normal(loc, 0.4, size=(30, 3)) for loc in ((0, 0, 2), (2, 0, 0), (0, 2, 0))])
    H[5] = 0.0  # a zero row stays zero either way
    U = unit_rows(H)
    norms = np.linalg.norm(H, axis=1, keepdims=True)
    np.testing.assert_array_equal(U, np.divide(H, norms, out=np.zeros_like(H), where=norms > 0))
    labels = assign_clusters(H, 3, random_state=0)
    noisy = labels.copy()
    noisy[:4] = (noisy[:4] + 1) % 3
    blocks = lloyd_centres(H, noisy, 3, step="spectral")
    whole = lloyd_centres(U, noisy, 3)
    np.testing.assert_allclose(blocks[0], whole[0], rtol=0, atol=1e-14)
    np.testing.assert_array_equal(blocks[1], whole[1])
    np.testing.assert_array_equal(nearest_centre(H, blocks[0], step="spectral"), blocks[1])
    # the centres are the cluster means of the unit rows
    for j in range(3):
        np.testing.assert_allclose(blocks[0][j], U[blocks[1] == j].mean(axis=0), atol=1e-14)


def test_float32_kmeans_finds_the_same_clusters():
    rng = np.random.default_rng(4)
    centres = ((0, 0, 3), (3, 0, 0), (0, 3, 0))
    H = np.vstack([rng.normal(loc, 0.3, size=(200, 3)) for loc in centres])
    a = assign_clusters(H, 3, random_state=0)
    b = assign_clusters(H, 3, random_state=0, dtype=np.float32)
    from sklearn.metrics import adjusted_rand_score

    assert adjusted_rand_score(a, b) == 1.0
    assert unit_rows(H, np.float32).dtype == np.float32


def test_features_step_clusters_unit_rows_in_place_and_gives_the_rows_back():
    """The features' k-means sees their unit rows (a row's length is how well the top
    eigenpairs represent it, not its cluster), formed in place so that no second n x d copy
    is held at millions of rows; the caller's rows come back equal to within rounding."""
    from sklearn.cluster import KMeans
    from sklearn.metrics import adjusted_rand_score

    rng = np.random.default_rng(4)
    # two rays 45 degrees apart, rows of lengths 0.1 to 3 unrelated to the ray
    angles = np.r_[np.zeros(40), np.full(40, np.pi / 4)] + rng.normal(0, 0.03, 80)
    lengths = rng.uniform(0.1, 3.0, 80)
    H = np.c_[np.cos(angles) * lengths, np.sin(angles) * lengths]
    truth = np.repeat(np.arange(2), 40)
    before = H.copy()
    labels = assign_clusters(H, 2, random_state=0, step="features")
    np.testing.assert_allclose(H, before, rtol=1e-12, atol=0)
    unit = before / np.linalg.norm(before, axis=1, keepdims=True)
    reference = KMeans(2, n_init=10, random_state=0).fit_predict(unit)
    np.testing.assert_array_equal(labels, reference)
    assert adjusted_rand_score(truth, labels) == 1.0
    # on the rows as they are, k-means splits them by length
    plain = KMeans(2, n_init=10, random_state=0).fit_predict(before)
    assert adjusted_rand_score(truth, plain) < 0.6
