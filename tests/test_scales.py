"""Data scales (mkrk_dask.scales): the exact pass on Dask equals plain numpy; the estimate
bounds the truth."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from scipy.spatial.distance import pdist

from mkrk_dask.kernels import KernelSpec
from mkrk_dask.passes import RowSource
from mkrk_dask.scales import distributed_scales, memory_scales

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
