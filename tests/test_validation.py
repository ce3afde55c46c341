"""Input and parameter checks (mkrk_dask.validation): one-line errors that name the problem."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from mkrk_dask.validation import (
    check_choice,
    check_lambda,
    check_n_clusters,
    check_precomputed,
    check_views,
    is_multiview,
)


def test_views_are_float64_and_sparse_stays_sparse():
    X = np.arange(12).reshape(4, 3)
    views = check_views([X, sp.csr_matrix(X)])
    assert views[0].dtype == np.float64 and sp.issparse(views[1])
    assert is_multiview([X, X]) and not is_multiview(X)


@pytest.mark.parametrize("call, message", [
    (lambda: check_views([np.ones((3, 2)), np.ones((4, 2))]), "same number of rows"),
    (lambda: check_views([np.ones((3, 2)), np.full((3, 2), np.inf)]), "view 1: .*infinity"),
    (lambda: check_precomputed(np.ones((2, 3, 4))), "square"),
    (lambda: check_precomputed([np.eye(2), np.eye(3)]), "different shapes"),
    (lambda: check_precomputed(np.triu(np.ones((3, 3)))), "not symmetric"),
    (lambda: check_precomputed(sp.eye(3)), "dense"),
    (lambda: check_n_clusters(0, 10), ">= 1"),
    (lambda: check_n_clusters(2.0, 10), "integer"),
    (lambda: check_n_clusters(11, 10), "larger than n_samples"),
    (lambda: check_lambda(float("inf")), "finite"),
    (lambda: check_lambda(True), "finite real"),
    (lambda: check_lambda(-0.5), ">= 0"),
    (lambda: check_choice("mode", "x", ("a", "b")), r"mode must be one of \('a', 'b'\)"),
])
def test_bad_input_is_named_in_one_line(call, message):
    with pytest.raises((ValueError, TypeError), match=message) as caught:
        call()
    assert "\n" not in str(caught.value)


def test_good_values_pass_through():
    assert check_lambda(np.float32(0.25)) == 0.25
    assert check_n_clusters(np.int64(3), 5) == 3
    assert check_choice("mode", "a", ("a",)) == "a"
    K = check_precomputed(np.eye(3))
    assert K.shape == (1, 3, 3) and K.dtype == np.float64
