"""Benchmark datasets: where they are found and how they are loaded by name.

The benchmark files are never part of the project: they are read from a data folder, by
default ``../shared/datasets`` (see :func:`default_data_dir`), or from the folder named by the
environment variable ``MKRK_DATASETS`` or the ``data_dir`` argument. The files themselves are
read by :mod:`mkrk_dask.data_file`, as a user's own files are; :func:`mkrk_dask.io.load_input`
finds a benchmark's file by its name through :func:`locate_dataset`. The synthetic generator
is in :mod:`mkrk_dask.synthetic`.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType

from .data_file import Dataset, load_array_file

__all__ = [
    "DATA_DIR_ENV",
    "PAPER_DATASETS",
    "default_data_dir",
    "data_dir_candidates",
    "load_dataset",
    "locate_dataset",
]

#: Environment variable that names the folder holding the benchmark files.
DATA_DIR_ENV = "MKRK_DATASETS"

#: Short name -> file name of every benchmark dataset the project knows.
PAPER_DATASETS: Mapping[str, str] = MappingProxyType(
    {
        "jaffe": "jaffe_213n_676d_10c_uni.mat",
        "orl": "ORL_400n_1024d_40c_zscore_uni.mat",
        "tr11": "tr11_414n_6429d_9c_tfidf_uni.mat",
        "coil20": "COIL20_1440n_1024d_20c.mat",
        "usps": "usps.npz",
        "fashion_mnist": "fashion_mnist.npz",
        "uci_mfeat": "uci_mfeat.npz",
    }
)


# --------------------------------------------------------------------------- locating data


def default_data_dir() -> Path | None:
    """The folder the benchmark datasets are read from by default.

    Returns
    -------
    pathlib.Path or None
        The folder named by the environment variable ``MKRK_DATASETS`` if it is set and not
        empty (whether or not it exists, so that a wrong setting shows up as a missing file
        rather than being silently ignored); else the first existing of
        ``<cwd>/../shared/datasets`` and ``<repo root>/../shared/datasets``, the repo root
        being the folder that contains the ``mkrk_dask`` package; else None.
    """
    env = os.environ.get(DATA_DIR_ENV)
    if env:
        return Path(env).expanduser()
    for candidate in data_dir_candidates():
        if candidate.is_dir():
            return candidate.resolve()
    return None


def data_dir_candidates() -> list[Path]:
    """The folders :func:`default_data_dir` looks in when ``MKRK_DATASETS`` is not set:
    ``<cwd>/../shared/datasets``, then ``<repo root>/../shared/datasets``."""
    repo_root = Path(__file__).resolve().parent.parent
    return [Path.cwd().parent / "shared" / "datasets", repo_root.parent / "shared" / "datasets"]


def _how_to_point() -> str:
    """What to do about a missing benchmark file, in Python and on the command line."""
    return (f"set the environment variable {DATA_DIR_ENV} to the folder of the benchmark "
            "files, or name it: data_dir=... in Python, --data-dir DIR for mkrk search and "
            "reproduce")


def locate_dataset(name_or_path: str | os.PathLike[str],
                   data_dir: str | os.PathLike[str] | None) -> tuple[Path, str]:
    """Map a short name or a file path to an existing file and the dataset's name (for
    :func:`load_dataset` and :func:`mkrk_dask.io.load_input`).

    Raises
    ------
    FileNotFoundError
        If there is no such file; the message names where it looked and how to point at the
        data.
    """
    directory = Path(data_dir).expanduser() if data_dir is not None else default_data_dir()
    key = str(name_or_path).lower()
    if isinstance(name_or_path, str) and key in PAPER_DATASETS:
        file_name = PAPER_DATASETS[key]
        if directory is None:
            looked = " and ".join(str(c) for c in data_dir_candidates())
            raise FileNotFoundError(
                f"dataset {key!r} ({file_name}): no data folder found (looked in {looked}); "
                f"{_how_to_point()}"
            )
        path = directory / file_name
        if not path.is_file():
            raise FileNotFoundError(f"dataset {key!r}: {path} does not exist; {_how_to_point()}")
        return path, key
    path = Path(name_or_path).expanduser()
    # A relative name that is not here may live in the data folder (the paper's other sets).
    if (not path.is_file() and not path.is_absolute() and directory is not None
            and (directory / path).is_file()):
        path = directory / path
    if not path.is_file():
        # The data folder only where one was looked in (never "None").
        where = ("" if directory is None or path.is_absolute()
                 else f" here or in the data folder {directory}")
        raise FileNotFoundError(
            f"{str(name_or_path)!r} is neither a known dataset ({', '.join(PAPER_DATASETS)}) "
            f"nor an existing file{where}; give the path of a data file, or for a benchmark "
            f"name {_how_to_point()}"
        )
    return path, path.stem


def load_dataset(
    name_or_path: str | os.PathLike[str],
    data_dir: str | os.PathLike[str] | None = None,
    *,
    subset: int | None = None,
    random_state: int = 0,
) -> Dataset:
    """Load a benchmark dataset by short name, or a data file by path.

    Parameters
    ----------
    name_or_path : str or path-like
        A key of :data:`PAPER_DATASETS` (case-insensitive), or the path of a file that
        :func:`mkrk_dask.io.load_array_file` reads. A relative path that does not exist is
        also looked up in the data folder.
    data_dir : str or path-like, optional
        Folder holding the benchmark files; defaults to :func:`default_data_dir`.
    subset : int, optional
        Keep only this many rows, drawn uniformly (seeded by ``random_state``) and kept in
        file order, before the conversion to float64: a subset of Fashion-MNIST never builds
        the full float array. See :func:`mkrk_dask.io.load_array_file`.
    random_state : int, default 0
        Seed of the subset draw.

    Returns
    -------
    Dataset
        As :func:`mkrk_dask.io.load_array_file` reads it (float64 data, int64 labels), named
        by the short name for a benchmark.

    Raises
    ------
    FileNotFoundError
        If the file is missing; the message names the path and how to point at the data.
    ValueError
        If the file cannot be read as a dataset, or ``subset`` is out of range.
    """
    path, name = locate_dataset(name_or_path, data_dir)
    return load_array_file(path, name=name, subset=subset, random_state=random_state)
