"""The C heap helpers: tasks that trim the heap stay ordinary, picklable tasks."""

from __future__ import annotations

import pickle
import platform

import numpy as np
import pytest

from mkrk_dask._malloc import malloc_trim, trims_heap
from mkrk_dask.backends.nystrom.tasks import factor_task
from mkrk_dask.kernel_widths import _farthest_task

glibc = pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="glibc only")


@trims_heap
def _square(x, *, power=2):
    if x is None:
        raise ValueError("no x")
    return np.asarray(x) ** power


def test_a_trimming_task_returns_and_raises_as_the_task():
    np.testing.assert_array_equal(_square([1, 2], power=3), [1, 8])
    with pytest.raises(ValueError, match="no x"):
        _square(None)
    assert _square.__name__ == "_square" and _square.__wrapped__(3) == 9


def test_trimming_tasks_pickle_by_reference():
    for task in (_farthest_task, factor_task):
        assert pickle.loads(pickle.dumps(task)) is task


@glibc
def test_malloc_trim_runs_on_glibc():
    big = [np.ones(2**13) for _ in range(2048)]  # 128 MiB in blocks the heap keeps when freed
    del big
    assert malloc_trim()
