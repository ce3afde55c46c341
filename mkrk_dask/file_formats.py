"""Reading data files by format: a file's raw arrays, before row selection and conversion.

The readers of each data file format (.npz, .npy, .csv, .mat up to v7 through scipy, v7.3
through h5py), of labels files, of the labels under another key of a file, and of Zarr arrays
(opened lazily; a damaged chunk found and named). :mod:`mkrk_dask.data_file` turns what they
read into a :class:`~mkrk_dask.data_file.Dataset`; :mod:`mkrk_dask.io` is the public face of
both.
"""

from __future__ import annotations

import os
import re
import zipfile
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import scipy.io
import scipy.sparse as sp

from .csv_input import CsvColumns, read_csv
from .metrics import check_labels_present

__all__ = ["RawData", "read_file", "read_labels", "labels_from_key", "is_zarr_array",
           "open_zarr_array", "undecodable_chunk", "FILE_FORMATS", "CSV_ONLY"]

#: the data file extensions :func:`mkrk_dask.io.load_array_file` reads
FILE_FORMATS = (".npz", ".npy", ".csv", ".mat")

_VIEW_KEY = re.compile(r"^view(\d+)$")


class RawData(NamedTuple):
    """What a file reader returns, before row selection and conversion to float64."""

    X: Any
    y: np.ndarray | None
    view_names: tuple[str, ...] | None
    extra: dict[str, Any]
    ids: np.ndarray | None = None


def read_labels(path: str | os.PathLike[str]) -> np.ndarray:
    """Read a labels file: ``.npy``, or text with one label per line (``.csv``: comma
    separated). Numeric text labels become numbers (int64 when all are integral); others
    stay strings. A first text line that is not a number above numeric labels is a header
    and skipped (``mkrk fit --out`` and ``mkrk predict --out`` write ``label``).

    Raises
    ------
    FileNotFoundError
        If the file does not exist.
    ValueError
        If it cannot be read or holds more than one column.
    """
    p = Path(path).expanduser()
    if not p.is_file():
        raise FileNotFoundError(f"labels file {p} does not exist")
    try:
        if p.suffix == ".npy":
            y = np.load(p, allow_pickle=False)
        else:
            y = np.loadtxt(p, delimiter="," if p.suffix == ".csv" else None, dtype=str, ndmin=1)
    except (*_READ_ERRORS, UnicodeDecodeError) as err:
        raise ValueError(f"cannot read labels from {p}: {' '.join(str(err).split())}") from None
    y = np.asarray(y)
    if sum(size > 1 for size in y.shape) > 1:
        raise ValueError(f"labels file {p} holds an array of shape {y.shape}; expected one "
                         "label per line")
    y = y.ravel()
    if y.dtype.kind in "US":
        numbers = _as_numbers(y)
        if numbers is None and p.suffix != ".npy" and y.size > 1:
            numbers = _as_numbers(y[1:])  # numbers under a header line
        if numbers is not None:
            y = numbers.astype(np.int64) if np.all(numbers == np.round(numbers)) else numbers
        # otherwise text labels: kept as strings, the metrics compare them as they are
    check_labels_present(y, f"labels file {p}")
    return y


def _as_numbers(text: np.ndarray) -> np.ndarray | None:
    """Strings as float64, or None if one is not a number."""
    try:
        return text.astype(np.float64)
    except ValueError:
        return None


def is_zarr_array(path: str | os.PathLike[str]) -> bool:
    """True if ``path`` is a directory holding a Zarr array (format 2 or 3)."""
    path = Path(path)
    return path.is_dir() and ((path / "zarr.json").is_file() or (path / ".zarray").is_file())


def open_zarr_array(path: Path) -> Any:
    """The 2-D Zarr array at ``path``, opened read-only (read lazily)."""
    import zarr

    try:
        array = zarr.open_array(str(path), mode="r")
    except Exception as err:  # zarr raises several types for a broken array
        raise ValueError(f"cannot open the Zarr array {path}: {err}") from None
    if array.ndim != 2:
        raise ValueError(f"the Zarr array {path} has shape {array.shape}; expected 2-D")
    return array


#: words of the errors Zarr's codecs raise for a chunk they cannot decode
_DECODE_WORDS = ("decompress", "decod", "checksum", "codec", "corrupt", "invalid input data")


def undecodable_chunk(path: str | os.PathLike[str], err: BaseException) -> ValueError | None:
    """For ``err`` raised while reading the Zarr array at ``path`` (e.g. zstd's "invalid input
    data"): a one-line error naming the array and its first chunk that cannot be decoded, or
    None if ``err`` is no decoding error or every chunk decodes. Reads the chunks one by one,
    so it is only for the error path."""
    import itertools

    text = " ".join(str(err).split())
    if not (isinstance(err, RuntimeError | ValueError | OSError)
            and any(word in text.lower() for word in _DECODE_WORDS)
            and is_zarr_array(path)):
        return None
    array = open_zarr_array(Path(path))
    grid = [range(-(-s // c)) for s, c in zip(array.shape, array.chunks, strict=True)]
    for key in itertools.product(*grid):
        try:
            array.blocks[key]
        except Exception as bad:  # noqa: BLE001 - any codec's failure
            why = " ".join(str(bad).split())[:120]
            return ValueError(f"the Zarr input {path}: chunk {key} cannot be decoded ({why}); "
                              "the array is damaged: restore or rewrite it")
    return None


def labels_from_key(path: Path, key: str) -> np.ndarray:
    """The labels stored under ``key`` in a .npz or .mat file (``--y-key``)."""
    if path.suffix == ".npz":
        with np.load(path, allow_pickle=False) as archive:
            if key not in archive.files:
                raise ValueError(f"{path} has no array {key!r} (found {archive.files})")
            y = archive[key]
    elif path.suffix == ".mat":
        if _is_hdf5(path):
            with _h5py().File(path, "r") as handle:
                if key not in handle:
                    raise ValueError(f"{path} has no variable {key!r}")
                y = np.asarray(handle[key])
        else:
            contents = scipy.io.loadmat(path)
            if key not in contents:
                raise ValueError(f"{path} has no variable {key!r}")
            y = contents[key]
    else:
        kind = "a Zarr array" if is_zarr_array(path) else f"a {path.suffix} file"
        raise ValueError(f"--y-key applies to .npz and .mat files; {kind} holds no labels: "
                         "give them with --labels FILE")
    y = np.asarray(y).ravel()
    check_labels_present(y, f"{key!r} of {path}")
    return y


# --------------------------------------------------------------------------- file readers


def read_file(path: Path, columns: CsvColumns | None = None) -> RawData:
    """The raw arrays of a data file, by the reader of its extension."""
    readers = {".npz": _read_npz, ".npy": _read_npy, ".csv": _read_csv, ".mat": _read_mat}
    reader = readers.get(path.suffix.lower())
    if reader is None:
        raise ValueError(f"cannot read {path}: unknown extension {path.suffix!r} (expected "
                         f"{', '.join(FILE_FORMATS)})")
    if path.suffix.lower() == ".csv":
        return reader(path, columns)
    if columns is not None and columns.chosen:
        raise ValueError(f"{CSV_ONLY} .csv files, not to {path.name}")
    return reader(path)


#: the start of the error for columns named for a file that has none
CSV_ONLY = "columns (--columns, --drop-columns, --label-column, --id-column) apply to"


def _view_keys(keys: list[str]) -> list[str]:
    """The ``view<i>`` keys of an archive, in view order."""
    matches = [(int(m.group(1)), k) for k in keys if (m := _VIEW_KEY.match(k))]
    return [k for _, k in sorted(matches)]


def _unreadable(path: Path, kind: str, err: BaseException) -> ValueError:
    detail = " ".join(str(err).split()) or type(err).__name__
    return ValueError(f"{path}: not a readable {kind} file ({detail})")


# What numpy, zipfile and h5py raise for a damaged or foreign file.
_READ_ERRORS = (zipfile.BadZipFile, OSError, EOFError, ValueError, KeyError)


def _read_npz(path: Path) -> RawData:
    # numpy reads a file that is no zip archive as a pickle, and its error then invites the
    # user to load an unknown file unsafely: say what the file is not instead.
    if path.is_file() and not zipfile.is_zipfile(path):
        raise ValueError(f"{path}: not a readable .npz file (it is not a zip archive, as "
                         "every .npz file is)")
    try:
        # The file is opened here so that it is closed even when numpy fails on it.
        with open(path, "rb") as handle, np.load(handle, allow_pickle=False) as archive:
            if _is_sparse_npz(archive.files):
                return RawData(sp.load_npz(path), None, None, {})
            return _read_archive(path, archive)
    except _READ_ERRORS as err:
        if isinstance(err, ValueError) and str(err).startswith(f"{path}:"):
            raise  # already names the problem
        raise _unreadable(path, ".npz", err) from None


def _is_sparse_npz(keys: list[str]) -> bool:
    """True for an archive written by :func:`scipy.sparse.save_npz`."""
    return {"format", "shape", "data"} <= set(keys) and ("indices" in keys or "row" in keys
                                                          or "offsets" in keys)


def _read_archive(path: Path, archive: Any) -> RawData:
    keys = list(archive.files)
    view_keys = _view_keys(keys)
    # other 2-D arrays are views named by their keys (pixels, hog), in the file's order
    named = ([] if "X" in keys or view_keys or len(keys) == 1 else
             [k for k in keys if k not in ("y", "view_names") and archive[k].ndim == 2])
    view_names = None
    if "X" in keys:
        X, used = archive["X"], {"X"}
    elif view_keys:
        X, used = [archive[k] for k in view_keys], {*view_keys, "view_names"}
    elif len(keys) == 1:
        X, used = archive[keys[0]], set(keys)
    elif len(named) > 1:
        X, used, view_names = [archive[k] for k in named], set(named), tuple(named)
    else:
        raise ValueError(
            f"{path}: expected an array 'X' (and optional 'y'), views 'view0', 'view1', ..., "
            "two or more 2-D arrays (views named by their keys), a sparse matrix saved by "
            f"scipy.sparse.save_npz, or a single array; found {keys}"
        )
    if isinstance(X, list) and "view_names" in keys:
        view_names = tuple(str(name) for name in archive["view_names"])
    y = archive["y"] if "y" in keys else None
    # Scalars such as Fashion-MNIST's n_train describe the data; keep them.
    extra = {k: archive[k].item() for k in keys
             if k not in used and k != "y" and archive[k].ndim == 0}
    return RawData(X, y, view_names, extra)


def _read_npy(path: Path) -> RawData:
    with open(path, "rb") as handle:
        if handle.read(6) != b"\x93NUMPY":
            raise ValueError(f"{path}: not a readable .npy file (it does not start with "
                             "the .npy magic bytes)")
    try:
        X = np.load(path, allow_pickle=False)
    except _READ_ERRORS as err:
        raise _unreadable(path, ".npy", err) from None
    return RawData(X, None, None, {})


def _read_csv(path: Path, columns: CsvColumns | None = None) -> RawData:
    try:
        data = read_csv(path, columns)
    except UnicodeDecodeError as err:
        raise _unreadable(path, ".csv (UTF-8 text)", err) from None
    return RawData(data.X, data.y, None, {} if data.read is None else {"read": data.read},
                    data.ids)


def _read_mat(path: Path) -> RawData:
    if _is_hdf5(path):
        return _read_mat73(path)
    try:
        contents = scipy.io.loadmat(path)
    except (*_READ_ERRORS, scipy.io.matlab.MatReadError, NotImplementedError, TypeError) as err:
        # NotImplementedError: scipy's word for a header that claims v7.3, but a v7.3 file is
        # HDF5 with its signature where _is_hdf5 looks (MATLAB writes it there), and this one
        # has none: a damaged file (the test's random bytes after "MATLAB 5.0" sometimes
        # claim it), not one for h5py. TypeError: scipy's "Expecting miMATRIX type here"
        # for a damaged element tag.
        raise _unreadable(path, ".mat", err) from None
    if "X" not in contents:
        found = sorted(k for k in contents if not k.startswith("__"))
        raise ValueError(f"{path}: no variable 'X' (found {found})")
    return RawData(contents["X"], contents.get("y"), None, {})


def _is_hdf5(path: Path) -> bool:
    """True for an HDF5 file (MATLAB v7.3), found by its signature at offset 0 or at the
    512-byte user block MATLAB writes before it."""
    with open(path, "rb") as handle:
        head = handle.read(1024)
    signature = b"\x89HDF\r\n\x1a\n"
    return head[:8] == signature or head[512:520] == signature


def _h5py() -> Any:
    try:
        import h5py
    except ImportError:
        raise ValueError("MATLAB v7.3 files are HDF5 files and need h5py: pip install "
                         "'mkrk-dask[io]' (or pip install h5py), or re-save the file with "
                         "save(..., '-v7')") from None
    return h5py


def _mat73_variable(path: Path, item: Any) -> Any:
    """One MATLAB v7.3 variable: a dense array (MATLAB stores it column-major, so h5py sees
    the transpose) or a sparse matrix (a group with data, ir and jc)."""
    h5py = _h5py()
    if isinstance(item, h5py.Group):
        if not {"data", "ir", "jc"} <= set(item.keys()):
            raise ValueError(f"{path}: variable {item.name!r} is a MATLAB struct or cell, "
                             "not a matrix")
        jc = np.asarray(item["jc"], dtype=np.int64)
        ir = np.asarray(item["ir"], dtype=np.int64)
        n_rows = int(item.attrs.get("MATLAB_sparse", ir.max(initial=-1) + 1))
        return sp.csc_matrix((np.asarray(item["data"]), ir, jc),
                             shape=(n_rows, jc.size - 1)).tocsr()
    return np.asarray(item).T


def _read_mat73(path: Path) -> RawData:
    h5py = _h5py()
    try:
        with h5py.File(path, "r") as handle:
            if "X" not in handle:
                found = sorted(k for k in handle.keys() if not k.startswith("#"))
                raise ValueError(f"{path}: no variable 'X' (found {found})")
            X = _mat73_variable(path, handle["X"])
            y = np.asarray(handle["y"]).ravel() if "y" in handle else None
    except ValueError:
        raise
    except _READ_ERRORS as err:
        raise _unreadable(path, "MATLAB v7.3 (HDF5)", err) from None
    return RawData(X, y, None, {})
