"""One backend for many fits (mkrk_dask.search): lambda grids and kernel stores built ahead."""

from __future__ import annotations

import numpy as np
import pytest

from mkrk_dask import MKKMRK, build_store, lambda_search

#: how many rows of scikit-learn's digits the shared ``digits`` fixture gives (conftest.py)
DIGITS_ROWS = 200


def test_build_store_then_fit_reuses_it(client, digits, tmp_path):
    X, _ = digits
    est = MKKMRK.paper(10, kernels=["cosine", "gaussian(c=0.5)"], solver="blockwise",
                 store=tmp_path / "k.zarr", scheduler=client, random_state=0)
    first = build_store(est, X)
    again = build_store(est, X)
    assert not first.reused and again.reused and first.nbytes > 2 * 200 * 200 * 8
    fitted = est.fit(X)
    exact = MKKMRK.paper(10, kernels=["cosine", "gaussian(c=0.5)"], random_state=0).fit(X)
    np.testing.assert_allclose(fitted.weights_, exact.weights_, atol=1e-8)
    with pytest.raises(ValueError, match="needs solver='blockwise' or 'nystrom'"):
        build_store(MKKMRK.paper(10, store=tmp_path / "x.zarr"), X)


def test_lambda_search_reports_the_approximation_of_nystrom(client, digits):
    X, y = digits
    est = MKKMRK.paper(10, kernels=["cosine", "gaussian(c=0.2)"], solver="nystrom",
                 scheduler=client, random_state=0,
                 backend_options={"n_landmarks": 40, "local_threshold": 0})
    results = lambda_search(est, X, [2.0**-10, 1.0], y, n_repeats=2)
    assert [r.lam for r in results] == [2.0**-10, 1.0]
    for r in results:
        assert 0.0 <= r.nystrom_missed_fraction <= 1.0
        assert len(r.labels) == len(r.scores) == 2
    exact = lambda_search(MKKMRK.paper(10, kernels=["cosine"]), X, [1.0])
    assert exact[0].nystrom_missed_fraction is None and exact[0].scores == []
    with pytest.raises(ValueError, match="y has 3 labels for 200 samples"):
        lambda_search(MKKMRK.paper(10), X, [1.0], y[:3])
