"""Reading user data: data files, labels files and Zarr arrays, into one :class:`Dataset`.

Everything that reads a user's data lives here, for the library and the command line alike:

- :func:`load_array_file` reads one data file (.npz, .npy, .csv, .mat);
- :func:`load_input` reads what a command line names: a data file, a Zarr array (a directory,
  read lazily) or the short name of a benchmark dataset (looked up by
  :func:`mkrk_dask.datasets.load_dataset`), with labels from a separate file or another key;
- :func:`read_labels` reads a labels file (.npy, .csv, .txt).

Errors a user can make (a missing file, an unknown extension, a missing key, inconsistent
shapes) raise FileNotFoundError or ValueError with a one-line message that names the file.
"""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path

from .csv_input import CsvColumns
from .data_file import Dataset, load_array_file
from .datasets import locate_dataset
from .file_formats import (
    CSV_ONLY,
    FILE_FORMATS,
    is_zarr_array,
    labels_from_key,
    open_zarr_array,
    read_labels,
    undecodable_chunk,
)

__all__ = ["Dataset", "load_array_file", "load_input", "read_labels", "is_zarr_array",
           "undecodable_chunk",
           "FILE_FORMATS"]


def load_input(source: str | os.PathLike[str], *, labels: str | os.PathLike[str] | None = None,
               y_key: str | None = None,
               data_dir: str | os.PathLike[str] | None = None,
               columns: CsvColumns | None = None) -> Dataset:
    """Load what a command line names: a data file, a Zarr array, or a benchmark dataset.

    Parameters
    ----------
    source : str or path-like
        A data file (.npz, .mat, .npy, .csv; see :func:`load_array_file`), a Zarr array (a
        directory, opened read-only and read lazily), or the short name of a benchmark
        dataset (``orl``, ``jaffe``, ...; see :func:`mkrk_dask.datasets.load_dataset`).
    labels : str or path-like, optional
        A labels file (:func:`read_labels`); replaces the labels of the data file.
    y_key : str, optional
        The name of the labels inside a .npz or .mat file (without it ``y``, used when
        present). An error if the file has no such array, for the formats that hold no labels
        (.npy, .csv, a Zarr array: give ``labels``), and together with ``labels``.
    data_dir : str or path-like, optional
        Folder of the benchmark files (default :func:`mkrk_dask.datasets.default_data_dir`).
    columns : CsvColumns, optional
        The feature, label and ID columns of a .csv file (see :func:`load_array_file`).

    Returns
    -------
    Dataset

    Raises
    ------
    FileNotFoundError
        If ``source`` is neither a file, a Zarr array nor a known dataset, or ``labels`` does
        not exist.
    ValueError
        If a file cannot be read, ``y_key`` cannot be honoured, or the labels do not match
        the rows.
    """
    # an optional label column (a fit's, applied by mkrk predict) gives way to the others
    column = None if columns is None or columns.optional_label else columns.label_column
    given = [flag for flag, value in (("--labels", labels), ("--y-key", y_key),
             ("--label-column", column)) if value is not None]
    if len(given) > 1:
        raise ValueError(f"give the labels with {' or with '.join(given)}, "
                         f"not {'both' if len(given) == 2 else 'several'}")
    path = Path(source).expanduser()
    if is_zarr_array(path):
        if columns is not None and columns.chosen:
            raise ValueError(f"{CSV_ONLY} .csv files, not to a Zarr array")
        data = Dataset(path.stem, open_zarr_array(path), None)
    else:
        if path.is_dir():
            raise ValueError(f"{path} is a directory but not a Zarr array")
        # The file itself (a benchmark's, or one in the data folder): --y-key reads it again.
        path, name = locate_dataset(source, data_dir)
        data = load_array_file(path, name=name, columns=columns)
    if y_key is not None and (y_key != "y" or data.y is None):
        data = replace(data, y=labels_from_key(path, y_key))
    if labels is not None:
        data = replace(data, y=read_labels(labels))
    if data.y is not None and data.y.shape[0] != data.n_samples:
        raise ValueError(f"{data.y.shape[0]} labels for {data.n_samples} samples")
    return data
