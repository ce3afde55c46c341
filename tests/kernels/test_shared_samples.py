"""A lazy view's uniform sample is read once within a fit (kernel_widths.shared_samples):
the plan's and the build's samples are the same rows, and each read decodes every chunk."""

from __future__ import annotations

import dask.array as da
import numpy as np
from dask.callbacks import Callback

from mkrk_dask.kernel_widths import sample_rows, shared_samples


class _Computes(Callback):
    """Counts the computations dask starts (the local scheduler's)."""

    def __init__(self):
        super().__init__()
        self.count = 0

    def _start(self, dsk):
        self.count += 1


def test_a_lazy_sample_is_read_once_within_a_fit():
    X = np.random.default_rng(0).normal(size=(5000, 4))
    lazy = da.from_array(X, chunks=700)
    with _Computes() as computes:
        alone = sample_rows(lazy)
        with shared_samples():
            first = sample_rows(lazy)
            first[:] = 0.0  # a copy: the caller may scale it in place
            second = sample_rows(lazy)
            other = sample_rows(lazy, 100)  # another size: its own read
        after = sample_rows(lazy)
    # outside: a read each; inside: one read a size
    assert computes.count == 4
    np.testing.assert_array_equal(second, alone)
    np.testing.assert_array_equal(after, alone)
    assert other.shape == (100, 4)
    np.testing.assert_array_equal(sample_rows(X), alone)  # numpy: as before, no cache
