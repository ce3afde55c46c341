"""Data scales (mkrk_dask.kernel_widths): the exact pass on Dask equals plain numpy; the estimate
bounds the truth."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.spatial.distance import pdist

from mkrk_dask.kernel_widths import distributed_scales, memory_scales
from mkrk_dask.kernels import KernelSpec
from mkrk_dask.passes import RowSource

SPECS = [KernelSpec("gaussian", c=0.1), KernelSpec("linear", view=1),
         KernelSpec("gaussian", c=1.0, view=2)]


def _views():
    rng = np.random.default_rng(4)
    return [rng.normal(size=(300, 3)), rng.normal(size=(300, 2)),
            sp.random(300, 6, density=0.4, random_state=1, format="csr")]


def test_exact_scales_in_memory_and_on_dask_equal_pdist(client):
    views = _views()
    truth = {0: pdist(views[0]).max(), 2: pdist(views[2].toarray()).max()}
    mem = memory_scales(views, SPECS)
    dist = distributed_scales(client, [RowSource(client, v) for v in views], SPECS)
    assert set(mem) == set(dist) == {0, 2}  # view 1 has no relative Gaussian
    for v, value in truth.items():
        assert mem[v]["method"] == dist[v]["method"] == "exact"
        np.testing.assert_allclose([mem[v]["value"], dist[v]["value"]], value, rtol=1e-10)


def test_estimated_scale_is_a_lower_bound_within_a_factor_two(client):
    views = _views()
    out = distributed_scales(client, [RowSource(client, v) for v in views], SPECS,
                             exact_max_n=100, random_state=0)
    truth = pdist(views[0]).max()
    assert out[0]["method"] == "estimate"
    assert truth / 2 <= out[0]["value"] <= truth * (1 + 1e-9)
    assert out[0]["lower_bound"] <= truth * (1 + 1e-9) <= out[0]["upper_bound"] * (1 + 2e-9)


@pytest.mark.parametrize("n", [2, 3, 4, 5, 64, 65])
def test_median_distance_is_the_median_over_the_pairs(n):
    # Even and odd numbers of pairs: the median of every pair's squared distance, as numpy
    # takes it over the upper triangle (the diagonal and the mirror image left out).
    from mkrk_dask.kernel_widths import _median_distance

    rows = np.random.default_rng(n).normal(size=(n, 3)) * [1.0, 10.0, 0.1]
    assert _median_distance(rows) == pytest.approx(np.sqrt(np.median(pdist(rows) ** 2)),
                                                   rel=1e-12)


def test_median_distance_of_mostly_equal_rows_is_that_of_the_distinct_pairs():
    from mkrk_dask.kernel_widths import _median_distance

    base = np.random.default_rng(0).normal(size=(2, 4))
    rows = np.vstack([np.repeat(base[:1], 30, axis=0), base[1:]])  # 435 of 465 pairs equal
    sq = pdist(rows) ** 2
    assert np.median(sq) == 0.0
    assert _median_distance(rows) == pytest.approx(np.sqrt(np.median(sq[sq > 0])), rel=1e-12)
    with pytest.raises(ValueError, match="at least 2 samples"):
        _median_distance(rows[:1])
