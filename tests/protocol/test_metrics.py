"""Tests of mkrk_dask.metrics against hand-computed values and a brute-force ACC."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from mkrk_dask.metrics import (
    clustering_accuracy,
    clustering_scores,
    contingency_table,
    normalized_mutual_info,
    purity,
)


def _labels_from_table(table: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Expand a (class x cluster) count table into label vectors with that contingency."""
    y_true, y_pred = [], []
    for (i, j), count in np.ndenumerate(table):
        y_true += [i] * int(count)
        y_pred += [j] * int(count)
    return np.array(y_true), np.array(y_pred)


def _brute_force_acc(y_true: np.ndarray, y_pred: np.ndarray) -> float:
    """ACC by trying every injective map from clusters to classes (small k only)."""
    classes, clusters = np.unique(y_true), np.unique(y_pred)
    # Pad the class list with dummies so clusters beyond the class count can stay unmatched.
    targets = list(classes) + [None] * max(0, clusters.size - classes.size)
    best = 0
    for perm in itertools.permutations(targets, clusters.size):
        mapping = dict(zip(clusters, perm, strict=True))
        hits = sum(mapping[p] is not None and mapping[p] == t for t, p in zip(y_true, y_pred,
                                                                                 strict=True))
        best = max(best, hits)
    return best / y_true.size


def test_permuted_labels_score_one():
    y_true = np.array([0, 0, 1, 1, 2, 2, 2])
    y_pred = np.array([5, 5, 3, 3, 9, 9, 9])
    assert clustering_scores(y_true, y_pred) == pytest.approx({"acc": 1, "nmi": 1, "purity": 1})


def test_string_labels_and_int_clusters():
    y_true = ["cat", "cat", "dog", "dog", "eel"]
    y_pred = [2, 2, 0, 0, 1]
    assert clustering_accuracy(y_true, y_pred) == 1.0
    assert purity(y_true, y_pred) == 1.0


def test_known_contingency_table():
    # Classes (rows) x clusters (columns). Best matching: c0->k0 (5), c1->k1 (4), c2->k2 (3)
    # = 12 of 20. Purity takes each column's max: 5 + 4 + 5 = 14 of 20, since column k2's
    # majority class (c0) is already used by k0 in the matching.
    table = np.array([[5, 1, 5],
                      [0, 4, 0],
                      [2, 0, 3]])
    y_true, y_pred = _labels_from_table(table)
    np.testing.assert_array_equal(contingency_table(y_true, y_pred), table)
    assert clustering_accuracy(y_true, y_pred) == pytest.approx(12 / 20)
    assert purity(y_true, y_pred) == pytest.approx(14 / 20)


def test_more_clusters_than_classes():
    # Two classes split over four clusters: only two clusters can be matched.
    y_true = [0, 0, 0, 0, 1, 1, 1, 1]
    y_pred = [0, 0, 1, 1, 2, 2, 3, 3]
    assert clustering_accuracy(y_true, y_pred) == pytest.approx(0.5)
    assert purity(y_true, y_pred) == 1.0


def test_fewer_clusters_than_classes():
    y_true = [0, 0, 1, 1, 2, 2]
    y_pred = [7, 7, 7, 7, 8, 8]
    assert clustering_accuracy(y_true, y_pred) == pytest.approx(4 / 6)
    assert purity(y_true, y_pred) == pytest.approx(4 / 6)


def test_nmi_hand_computed():
    # Independent labelings carry no information; the 2x2 table [[2, 0], [1, 1]] has
    # I = H(T) + H(P) - H(T, P) with H(T) = ln 2, H(P) = H(3/4, 1/4), H(T, P) = H(1/2, 1/4, 1/4).
    assert normalized_mutual_info([0, 0, 1, 1], [0, 1, 0, 1]) == pytest.approx(0.0, abs=1e-12)

    def entropy(p):
        p = np.asarray(p, dtype=float)
        return float(-(p * np.log(p)).sum())

    h_t, h_p = entropy([0.5, 0.5]), entropy([0.75, 0.25])
    mi = h_t + h_p - entropy([0.5, 0.25, 0.25])
    expected = mi / ((h_t + h_p) / 2)
    assert normalized_mutual_info([0, 0, 1, 1], [0, 0, 0, 1]) == pytest.approx(expected)


@pytest.mark.parametrize("seed", range(8))
def test_acc_matches_brute_force(seed):
    rng = np.random.default_rng(seed)
    n_classes, n_clusters = rng.integers(1, 5, size=2)
    y_true = rng.integers(0, n_classes, size=30)
    y_pred = rng.integers(0, n_clusters, size=30)
    assert clustering_accuracy(y_true, y_pred) == pytest.approx(_brute_force_acc(y_true, y_pred))


@pytest.mark.parametrize("seed", range(4))
def test_scores_invariant_to_relabelling(seed):
    rng = np.random.default_rng(100 + seed)
    y_true = rng.integers(0, 4, size=50)
    y_pred = rng.integers(0, 5, size=50)
    reference = clustering_scores(y_true, y_pred)
    # Relabel the clusters by a random injective map to new, non-contiguous labels, and the
    # classes by a map to strings: no score may notice.
    new_clusters = rng.permutation(100)[:5] * 3 - 50
    relabelled_pred = new_clusters[y_pred]
    relabelled_true = np.array([f"class-{c}" for c in rng.permutation(4)])[y_true]
    scores = clustering_scores(relabelled_true, relabelled_pred)
    assert scores == pytest.approx(reference)
    # Swapping the roles does not change NMI (it is symmetric).
    assert normalized_mutual_info(y_pred, y_true) == pytest.approx(reference["nmi"])


def test_scores_dict_keys_and_range():
    rng = np.random.default_rng(7)
    scores = clustering_scores(rng.integers(0, 3, 40), rng.integers(0, 3, 40))
    assert set(scores) == {"acc", "nmi", "purity"}
    assert all(isinstance(v, float) and 0.0 <= v <= 1.0 for v in scores.values())
    assert scores["acc"] <= scores["purity"]


@pytest.mark.parametrize("func", [clustering_accuracy, normalized_mutual_info, purity,
                                  clustering_scores])
@pytest.mark.parametrize(
    ("y_true", "y_pred", "message"),
    [
        ([0, 1, 1], [0, 1], "differ in length"),
        ([], [], "empty"),
        ([[0, 1], [1, 0]], [0, 1], "1-D"),
        ([0, 1], [[0], [1]], "1-D"),
        # a NaN or blank label was one more class
        ([0.0, np.nan, 1.0], [0, 1, 1], "y_true: 1 of 3 labels are missing"),
        (["a", " ", "b"], [0, 1, 1], "the first at index 1"),
    ],
)
def test_invalid_inputs(func, y_true, y_pred, message):
    with pytest.raises(ValueError, match=message):
        func(y_true, y_pred)
