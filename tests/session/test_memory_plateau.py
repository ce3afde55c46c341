"""Repeated fits in one process reach a memory plateau (issue 45): every fit starts and
closes its embedded cluster, and a closed cluster must be freed (distributed memoized its
scheduler's dashboard and every server's handlers, which kept each one alive)."""

from __future__ import annotations

import gc

import numpy as np
import psutil
import pytest

from mkrk_dask import MKKMRK

rng = np.random.default_rng(7)
X = np.vstack([rng.normal(c, 0.6, size=(40, 5)) for c in (0.0, 2.0, 4.0)])


@pytest.mark.slow
def test_thirty_blockwise_fits_reach_a_plateau():
    from distributed import Scheduler, Worker

    def servers() -> list:
        return [o for o in gc.get_objects() if isinstance(o, Scheduler | Worker)]

    # a cluster the rest of the suite keeps open (the session's client) is not this test's
    before = {id(o) for o in servers()}
    process = psutil.Process()
    rss = []
    for _ in range(30):
        model = MKKMRK.paper(3, kernels=["cosine", "gaussian(c=1)"], solver="blockwise",
                             random_state=0, backend_options={"chunk_size": 60}).fit(X)
        del model
        gc.collect()
        rss.append(process.memory_info().rss / 2**20)
    alive = [o for o in servers() if id(o) not in before]
    assert not alive, f"{len(alive)} closed schedulers and workers are still in memory"
    # the second half of the fits: allocator noise, no steady growth (before: 1.2 to 5 MiB
    # per fit, 18 to 75 MiB over these 15)
    growth = rss[-1] - rss[14]
    assert growth < 8, f"RSS grew by {growth:.1f} MiB over the last 15 fits: {rss}"
