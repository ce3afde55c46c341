"""Shared fixtures: a real in-process Dask cluster, and access to the benchmark datasets
(skipping cleanly where they are absent)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from mkrk_dask.datasets import PAPER_DATASETS, default_data_dir


@pytest.fixture(scope="module")
def client():
    """A distributed client on a real LocalCluster (one worker, two threads), per test module."""
    from distributed import Client, LocalCluster

    cluster = LocalCluster(n_workers=1, threads_per_worker=2, processes=False,
                           dashboard_address="127.0.0.1:0",
                           worker_dashboard_address="127.0.0.1:0")
    # Not the default client: a fit given no scheduler must not find it (tests that want
    # the current client make their own).
    with Client(cluster, set_as_default=False) as c:
        yield c
    cluster.close()


@pytest.fixture
def data_dir() -> Path:
    """The benchmark data folder (see ``default_data_dir``); skips the test where there is none."""
    directory = default_data_dir()
    if directory is None or not directory.is_dir():
        pytest.skip("no datasets folder: set MKRK_DATASETS or provide ../shared/datasets")
    return directory


@pytest.fixture
def require_dataset(data_dir: Path) -> Callable[[str], Path]:
    """A function ``require_dataset(name) -> path`` that skips the test if the file is absent.

    ``name`` is a key of ``PAPER_DATASETS``; pass the data folder on as
    ``load_dataset(name, data_dir)``.
    """

    def require(name: str) -> Path:
        path = data_dir / PAPER_DATASETS[name]
        if not path.is_file():
            pytest.skip(f"dataset {name!r} is absent: {path}")
        return path

    return require
