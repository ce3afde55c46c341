"""Views of links and of counts of many items (issue 76): a dense array of mostly zeros is read
as a sparse one would be, and a view where most pairs of rows share no non-zero column gets
the cosine kernel alone. Both rules read properties of the data, not labels."""

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.metrics import normalized_mutual_info_score

from mkrk_dask import MKKMRK
from mkrk_dask.plan.kernel_choice import DISJOINT_MIN_SHARE, disjoint_share, view_geometry
from mkrk_dask.preprocessing import SPARSE_MIN_ZEROS, column_scaling


def _counts(n=300, d=3000, words=12, groups=3, seed=0):
    """Word counts: each group draws its words from its own third of a vocabulary whose
    words have very different rates (their standard deviations spread far beyond 10x)."""
    rng = np.random.default_rng(seed)
    y = np.repeat(np.arange(groups), n // groups)
    X = np.zeros((n, d))
    rates = 1.0 / np.arange(1, d // groups + 1)  # Zipf: a few common words, many rare ones
    for i, g in enumerate(y):
        cols = g * (d // groups) + rng.choice(d // groups, words, p=rates / rates.sum())
        np.add.at(X[i], cols, rng.integers(1, 4, words))
    return X, y


def _links(n=240, groups=4, inside=0.08, outside=0.002, seed=0):
    """Adjacency rows of a planted partition: sparse links, most pairs of rows sharing none."""
    rng = np.random.default_rng(seed)
    y = np.repeat(np.arange(groups), n // groups)
    p = np.where(y[:, None] == y[None, :], inside, outside)
    A = np.triu(rng.random((n, n)) < p, 1)
    return (A | A.T).astype(np.float64), y


def test_disjoint_share_counts_the_pairs_that_share_no_column():
    X, _ = _links()
    pattern = (X[:200] != 0).astype(int)
    shared = pattern @ pattern.T
    reference = (np.sum(shared == 0) - np.sum(np.diag(shared) == 0)) / (200 * 199)
    assert disjoint_share(X[:200]) == pytest.approx(reference, abs=1e-12)
    assert disjoint_share(sp.csr_matrix(X[:200])) == pytest.approx(reference, abs=1e-12)
    assert disjoint_share(np.ones((50, 3))) == 0.0


def test_link_views_get_the_cosine_alone_and_recover_the_partition():
    X, y = _links()
    assert disjoint_share(X) >= DISJOINT_MIN_SHARE
    geometry, why = view_geometry(X)
    assert geometry == "disjoint" and "share no non-zero column" in why
    plan = MKKMRK(4).plan([X, X[:, ::-1].copy()])
    assert plan.decision("kernels").value == "cosine, cosine@1"
    labels = MKKMRK(4, random_state=0).fit(X).labels_
    assert normalized_mutual_info_score(y, labels) > 0.8
    # rows that share columns (dense counts of a few words each) keep the angle's Gaussians
    dense = np.abs(np.random.default_rng(1).normal(size=(100, 6)))
    dense[dense < 0.5] = 0
    assert view_geometry(dense)[0] != "disjoint"


def test_a_dense_array_of_mostly_zero_counts_is_kept_as_given():
    X, y = _counts()
    zeros = 1 - np.count_nonzero(X) / X.size
    assert zeros >= SPARSE_MIN_ZEROS
    # the columns' scales spread far beyond the standardisation limit ...
    std = X.std(axis=0)
    assert std.max() / np.median(std[std > 0]) > 10
    scaling, why = column_scaling(X)
    # ... and still one unit: kept as given, as the sparse matrix is
    assert scaling.method == "none" and "zero entries" in why
    assert column_scaling(sp.csr_matrix(X))[0].method == "none"
    # the same columns with fewer zeros (a row holds more of them) follow the dense rules
    busy = X + np.random.default_rng(2).poisson(5.0, X.shape) * (np.arange(X.shape[1]) % 7 == 0)
    assert 1 - np.count_nonzero(busy) / busy.size < SPARSE_MIN_ZEROS
    assert column_scaling(busy)[0].method == "standardize"
    plan = MKKMRK(3).plan(X)
    assert plan.decision("preprocessing").value == "none"
    assert normalized_mutual_info_score(y, MKKMRK(3, random_state=0).fit(X).labels_) > 0.8
