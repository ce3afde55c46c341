"""Shared fixtures: a real in-process Dask cluster, access to the benchmark datasets
(skipping cleanly where they are absent), the first rows of scikit-learn's digits (``digits``,
as many as the test module's ``DIGITS_ROWS``), and for the command line a small data file and a
way to run ``mkrk`` in a subprocess. The data behind them are the functions of ``_data.py``."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from _data import first_digits

from mkrk_dask.datasets import PAPER_DATASETS, default_data_dir

#: addresses a test may listen on: this machine's loopback only
_LOOPBACK = ("127.0.0.1", "::1", "localhost")


@pytest.fixture(autouse=True, scope="session")
def _listen_on_loopback_only():
    """Every socket the test process binds is on a loopback address: a server bound to all
    interfaces (a Dask dashboard left at its default ``:8787`` or ``:0``, say) fails the test
    that starts it, with the address in the message. Subprocesses (nanny workers, the CLI)
    are started with loopback hosts by the tests themselves."""
    import socket

    original = socket.socket.bind

    def bind(self, address):
        host = address[0] if isinstance(address, tuple) else None
        if self.family in (socket.AF_INET, socket.AF_INET6) and host not in _LOOPBACK:
            raise OSError(f"a test bound a socket to {address!r}: listen on 127.0.0.1 only")
        return original(self, address)

    socket.socket.bind = bind
    yield
    socket.socket.bind = original


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


@pytest.fixture(scope="module")
def digits(request: pytest.FixtureRequest) -> tuple[np.ndarray, np.ndarray]:
    """The first ``DIGITS_ROWS`` rows of scikit-learn's digits, X and y, once per test module;
    the module sets ``DIGITS_ROWS``."""
    rows = getattr(request.module, "DIGITS_ROWS", None)
    if rows is None:
        raise pytest.UsageError(f"{request.module.__name__} uses the digits fixture: "
                                "set DIGITS_ROWS, the number of rows it takes")
    return first_digits(rows)


@pytest.fixture(scope="session")
def digits_npz(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """150 samples of scikit-learn's digits (10 classes) as ``digits.npz`` with X and y."""
    X, y = first_digits(150)
    path = tmp_path_factory.mktemp("data") / "digits.npz"
    np.savez(path, X=X, y=y)
    return path


def _run_mkrk(*argv: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mkrk_dask.cli", *argv], capture_output=True,
                          text=True, timeout=timeout)


@pytest.fixture
def run_mkrk() -> Callable[..., subprocess.CompletedProcess]:
    """``run_mkrk(*argv)``: ``mkrk ARGV`` in a subprocess (``python -m mkrk_dask.cli``)."""
    return _run_mkrk


def _write_mat73(path: Path, **variables) -> Path:
    """Write ``variables`` as MATLAB v7.3 does: an HDF5 file behind a 512-byte user block
    holding MATLAB's text header (which is how scipy and MATLAB recognise the version),
    dense arrays stored column-major (h5py sees the transpose), sparse matrices as groups of
    ``data``, ``ir`` and ``jc`` with the number of rows in ``MATLAB_sparse``."""
    import h5py
    import scipy.sparse as sp

    with h5py.File(path, "w", userblock_size=512) as handle:
        for name, value in variables.items():
            if sp.issparse(value):
                csc = sp.csc_matrix(value)
                group = handle.create_group(name)
                group.create_dataset("data", data=csc.data)
                group.create_dataset("ir", data=csc.indices.astype(np.uint64))
                group.create_dataset("jc", data=csc.indptr.astype(np.uint64))
                group.attrs["MATLAB_class"] = np.bytes_("double")
                group.attrs["MATLAB_sparse"] = np.uint64(csc.shape[0])
            else:
                data = np.atleast_2d(np.asarray(value, dtype=np.float64))
                handle.create_dataset(name, data=data.T)
                handle[name].attrs["MATLAB_class"] = np.bytes_("double")
    text = b"MATLAB 7.3 MAT-file, Platform: GLNXA64, Created on: Mon Jan  1 00:00:00 2024 " \
           b"HDF5 schema 1.00 ."
    header = text.ljust(116, b" ") + b"\0" * 8 + b"\x00\x02" + b"IM"
    with open(path, "r+b") as handle:
        handle.write(header.ljust(512, b"\0"))
    return path


@pytest.fixture
def write_mat73() -> Callable[..., Path]:
    """``write_mat73(path, X=..., y=...)``: a MATLAB v7.3 (HDF5) file, as MATLAB writes it."""
    return _write_mat73


@pytest.fixture(scope="session")
def slurm():
    """A real one-node SLURM on 127.0.0.1 (tests/_slurm.py), for the whole session; skips with
    the reason where it cannot start. At the end every job is cancelled, the daemons stop, and
    the jobs that ran (SLURM's job-completion log) are written to ``$MKRK_SLURM_REPORT`` if
    set (.ci/run prints it into the CI log)."""
    import os

    import _slurm

    try:
        cluster = _slurm.start()
    except _slurm.SlurmUnavailable as err:
        pytest.skip(f"SLURM cannot start here: {err}")
    try:
        yield cluster
    finally:
        report = os.environ.get("MKRK_SLURM_REPORT")
        if report:
            with open(report, "a") as f:
                f.write(f"squeue at the end:\n{cluster.run('squeue')}\n"
                        f"jobs that ran:\n{cluster.accounting()}")
        cluster.stop()
