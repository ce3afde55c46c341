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
import re
import zipfile
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import scipy.io
import scipy.sparse as sp

from .csv_input import CsvColumns, read_csv
from .metrics import check_labels_present
from .validation import check_int

__all__ = ["Dataset", "load_array_file", "load_input", "read_labels", "is_zarr_array",
           "undecodable_chunk",
           "FILE_FORMATS"]

#: the data file extensions :func:`load_array_file` reads
FILE_FORMATS = (".npz", ".npy", ".csv", ".mat")

_VIEW_KEY = re.compile(r"^view(\d+)$")


@dataclass(frozen=True, eq=False)
class Dataset:
    """A loaded dataset.

    Attributes
    ----------
    name : str
        The short name (``"jaffe"``) or, for a user file, the file name without extension.
    X : ndarray, scipy.sparse.csr_matrix, zarr.Array or list of ndarray
        The data, float64: a dense (n_samples, n_features) array, a CSR matrix for sparse
        files (e.g. tr11), or one array per view for multi-view data (e.g. uci_mfeat). A
        Zarr array input stays a Zarr array (read lazily, in its own dtype).
    y : ndarray of shape (n_samples,) or None
        Class labels. From a data file: int64, as stored when integral (not renumbered),
        otherwise coded 0..c-1 in sorted order. From a labels file or ``y_key`` (see
        :func:`load_input`): as read. None without labels.
    view_names : tuple of str or None
        Names of the views of multi-view data, when the file gives them.
    extra : dict
        Further scalars the file holds, e.g. ``n_train`` for Fashion-MNIST (the rows before
        it are the training set), ``subset_rows`` when a subset was drawn, and ``read``: how
        a CSV file was read where it was not plain commas and every column (its separator,
        a first column of row names left out).
    ids : ndarray of str or None
        The rows' IDs, from the ID column of a CSV file (``CsvColumns.id_column``); None
        without one.
    """

    name: str
    X: Any
    y: np.ndarray | None
    view_names: tuple[str, ...] | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    ids: np.ndarray | None = None

    @property
    def views(self) -> list[Any]:
        """The data as a list of views (a single-view dataset gives a list of one)."""
        return list(self.X) if isinstance(self.X, list) else [self.X]

    @property
    def n_samples(self) -> int:
        """Number of rows."""
        return int(self.views[0].shape[0])

    @property
    def n_features(self) -> list[int]:
        """Number of columns of every view."""
        return [int(v.shape[1]) for v in self.views]

    @property
    def n_classes(self) -> int | None:
        """Number of distinct labels, or None without labels."""
        return None if self.y is None else int(np.unique(self.y).size)


class _RawData(NamedTuple):
    """What a file reader returns, before row selection and conversion to float64."""

    X: Any
    y: np.ndarray | None
    view_names: tuple[str, ...] | None
    extra: dict[str, Any]
    ids: np.ndarray | None = None


# --------------------------------------------------------------------------- public readers


def load_array_file(path: str | os.PathLike[str], *, name: str | None = None,
                    subset: int | None = None, random_state: int = 0,
                    columns: CsvColumns | None = None) -> Dataset:
    """Read a user's data file.

    Supported formats, chosen by extension:

    - ``.npz`` (read with ``allow_pickle=False``): array ``X`` and optional labels ``y``; or
      views ``view0``, ``view1``, ... (optional ``y`` and ``view_names``); or two or more 2-D
      arrays of other names, the views named by their keys in the file's order (``pixels``,
      ``hog``; optional ``y``); or a single array of any name; or a sparse matrix written
      by :func:`scipy.sparse.save_npz` (no labels). Other scalar entries go to
      ``Dataset.extra``.
    - ``.npy``: one 2-D array, no labels.
    - ``.csv``: comma-separated numbers, UTF-8 (a byte order mark is ignored), parsed as RFC
      4180 has it (see :func:`mkrk_dask.csv_input.read_csv` for every rule). A first row in
      which no field is a number is a header and skipped; a first row with some numbers is
      data (so a missing or non-numeric value in it is an error, as in any row). A row with
      more or fewer fields than the header is an error. Every column is a feature unless
      ``columns`` says otherwise; labels only from its ``label_column``, IDs (``ids``) only
      from its ``id_column``.
    - ``.mat``: variable ``X`` (dense or sparse) and optional ``y``; MATLAB up to v7 through
      scipy, v7.3 (HDF5) through h5py (the ``io`` extra).

    Parameters
    ----------
    path : str or path-like
        The file.
    name : str, optional
        The dataset's name; default the file name without extension.
    subset : int, optional
        Keep only this many rows, drawn uniformly without replacement (seeded by
        ``random_state``) and kept in file order. Drawn rather than taken from the top because
        some files are sorted by class (usps, uci_mfeat). The rows are selected before the
        conversion to float64, so a subset of a large uint8 file never builds the full float
        array. ``extra["subset_rows"]`` holds the chosen row indices, and ``extra["n_train"]``
        (if present) is recomputed so that it still splits training from test rows.
    random_state : int, default 0
        Seed of the subset draw.
    columns : CsvColumns, optional
        The feature, label and ID columns of a .csv file (by header name or 0-based index);
        an error for the other formats.

    Returns
    -------
    Dataset
        Dense data as float64 (uint8 images scaled to [0, 1]), sparse data as CSR float64,
        multi-view data as a list of float64 arrays with ``view_names``. Integral labels are
        kept as they are; other labels (strings, say) are coded 0..c-1 in sorted order.
        ``ids`` holds the IDs of a CSV file's ID column (None otherwise).

    Raises
    ------
    FileNotFoundError
        If the file does not exist.
    ValueError
        For an unknown extension, a damaged or foreign file, a missing key, non-numeric
        data, inconsistent shapes, or ``subset`` out of range.
    TypeError
        If ``subset`` is not an int.
    """
    path = Path(path).expanduser()
    if not path.is_file():
        raise FileNotFoundError(f"{path} does not exist")
    return _to_dataset(name or path.stem, _read_file(path, columns), subset, random_state)


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
    # Imported here: datasets (benchmark lookup) reads its files through this module.
    from .datasets import _resolve_path

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
            raise ValueError(f"{_CSV_ONLY} .csv files, not to a Zarr array")
        data = Dataset(path.stem, _open_zarr_array(path), None)
    else:
        if path.is_dir():
            raise ValueError(f"{path} is a directory but not a Zarr array")
        # The file itself (a benchmark's, or one in the data folder): --y-key reads it again.
        path, name = _resolve_path(source, data_dir)
        data = load_array_file(path, name=name, columns=columns)
    if y_key is not None and (y_key != "y" or data.y is None):
        data = replace(data, y=_labels_from_key(path, y_key))
    if labels is not None:
        data = replace(data, y=read_labels(labels))
    if data.y is not None and data.y.shape[0] != data.n_samples:
        raise ValueError(f"{data.y.shape[0]} labels for {data.n_samples} samples")
    return data


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


def _open_zarr_array(path: Path) -> Any:
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
    array = _open_zarr_array(Path(path))
    grid = [range(-(-s // c)) for s, c in zip(array.shape, array.chunks, strict=True)]
    for key in itertools.product(*grid):
        try:
            array.blocks[key]
        except Exception as bad:  # noqa: BLE001 - any codec's failure
            why = " ".join(str(bad).split())[:120]
            return ValueError(f"the Zarr input {path}: chunk {key} cannot be decoded ({why}); "
                              "the array is damaged: restore or rewrite it")
    return None


def _labels_from_key(path: Path, key: str) -> np.ndarray:
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


def _read_file(path: Path, columns: CsvColumns | None = None) -> _RawData:
    readers = {".npz": _read_npz, ".npy": _read_npy, ".csv": _read_csv, ".mat": _read_mat}
    reader = readers.get(path.suffix.lower())
    if reader is None:
        raise ValueError(f"cannot read {path}: unknown extension {path.suffix!r} (expected "
                         f"{', '.join(FILE_FORMATS)})")
    if path.suffix.lower() == ".csv":
        return reader(path, columns)
    if columns is not None and columns.chosen:
        raise ValueError(f"{_CSV_ONLY} .csv files, not to {path.name}")
    return reader(path)


#: the start of the error for columns named for a file that has none
_CSV_ONLY = "columns (--columns, --drop-columns, --label-column, --id-column) apply to"


def _view_keys(keys: list[str]) -> list[str]:
    """The ``view<i>`` keys of an archive, in view order."""
    matches = [(int(m.group(1)), k) for k in keys if (m := _VIEW_KEY.match(k))]
    return [k for _, k in sorted(matches)]


def _unreadable(path: Path, kind: str, err: BaseException) -> ValueError:
    detail = " ".join(str(err).split()) or type(err).__name__
    return ValueError(f"{path}: not a readable {kind} file ({detail})")


# What numpy, zipfile and h5py raise for a damaged or foreign file.
_READ_ERRORS = (zipfile.BadZipFile, OSError, EOFError, ValueError, KeyError)


def _read_npz(path: Path) -> _RawData:
    # numpy reads a file that is no zip archive as a pickle, and its error then invites the
    # user to load an unknown file unsafely: say what the file is not instead.
    if path.is_file() and not zipfile.is_zipfile(path):
        raise ValueError(f"{path}: not a readable .npz file (it is not a zip archive, as "
                         "every .npz file is)")
    try:
        # The file is opened here so that it is closed even when numpy fails on it.
        with open(path, "rb") as handle, np.load(handle, allow_pickle=False) as archive:
            if _is_sparse_npz(archive.files):
                return _RawData(sp.load_npz(path), None, None, {})
            return _read_archive(path, archive)
    except _READ_ERRORS as err:
        if isinstance(err, ValueError) and str(err).startswith(f"{path}:"):
            raise  # already names the problem
        raise _unreadable(path, ".npz", err) from None


def _is_sparse_npz(keys: list[str]) -> bool:
    """True for an archive written by :func:`scipy.sparse.save_npz`."""
    return {"format", "shape", "data"} <= set(keys) and ("indices" in keys or "row" in keys
                                                          or "offsets" in keys)


def _read_archive(path: Path, archive: Any) -> _RawData:
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
    return _RawData(X, y, view_names, extra)


def _read_npy(path: Path) -> _RawData:
    with open(path, "rb") as handle:
        if handle.read(6) != b"\x93NUMPY":
            raise ValueError(f"{path}: not a readable .npy file (it does not start with "
                             "the .npy magic bytes)")
    try:
        X = np.load(path, allow_pickle=False)
    except _READ_ERRORS as err:
        raise _unreadable(path, ".npy", err) from None
    return _RawData(X, None, None, {})


def _read_csv(path: Path, columns: CsvColumns | None = None) -> _RawData:
    try:
        data = read_csv(path, columns)
    except UnicodeDecodeError as err:
        raise _unreadable(path, ".csv (UTF-8 text)", err) from None
    return _RawData(data.X, data.y, None, {} if data.read is None else {"read": data.read},
                    data.ids)


def _read_mat(path: Path) -> _RawData:
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
    return _RawData(contents["X"], contents.get("y"), None, {})


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


def _read_mat73(path: Path) -> _RawData:
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
    return _RawData(X, y, None, {})


# --------------------------------------------------------------------------- conversion


def _to_dataset(name: str, raw: _RawData, subset: int | None, random_state: int) -> Dataset:
    """Check shapes, select rows, convert to float64 and int64 labels."""
    views = raw.X if isinstance(raw.X, list) else [raw.X]
    n_samples = _check_views(name, views)
    if raw.view_names is not None and len(raw.view_names) != len(views):
        raise ValueError(f"{name}: {len(raw.view_names)} view names for {len(views)} views")
    y = None if raw.y is None else np.asarray(raw.y).ravel()
    if y is not None:
        if y.shape[0] != n_samples:
            raise ValueError(f"{name}: {y.shape[0]} labels for {n_samples} rows")
        check_labels_present(y, f"y of {name}")
    extra = dict(raw.extra)
    ids = raw.ids
    if subset is not None:
        rows = _subset_rows(n_samples, subset, random_state)
        views = [v[rows] for v in views]
        y = None if y is None else y[rows]
        ids = None if ids is None else ids[rows]
        if "n_train" in extra:
            extra["n_train"] = int(np.count_nonzero(rows < extra["n_train"]))
        extra["subset_rows"] = rows
    views = [_as_float(v) for v in views]
    return Dataset(
        name=name,
        X=views if isinstance(raw.X, list) else views[0],
        y=None if y is None else _as_int_labels(y),
        view_names=raw.view_names,
        extra=extra,
        ids=ids,
    )


def _check_views(name: str, views: list[Any]) -> int:
    """Every view must be a non-empty 2-D matrix of real numbers with the same number of
    rows."""
    n_rows = set()
    for i, view in enumerate(views):
        if view.ndim != 2 or view.shape[0] == 0:
            raise ValueError(f"{name}: data must be a non-empty 2-D array; view {i} has shape "
                             f"{view.shape}")
        if np.dtype(view.dtype).kind == "c":
            # float64 would drop the imaginary part with a mere warning, as the API refuses it
            raise ValueError(f"{name}: view {i} holds complex numbers ({view.dtype}); the "
                             "kernels take real values: save the real and imaginary parts (or "
                             "the modulus) as real columns or as two views")
        n_rows.add(view.shape[0])
    if len(n_rows) != 1:
        raise ValueError(f"{name}: the views differ in their number of rows: {sorted(n_rows)}")
    return n_rows.pop()


def _subset_rows(n_samples: int, subset: int, random_state: int) -> np.ndarray:
    check_int("subset", subset, 1)
    if subset > n_samples:
        raise ValueError(f"subset must be in [1, {n_samples}], got {subset}")
    rng = np.random.default_rng(random_state)
    return np.sort(rng.choice(n_samples, size=subset, replace=False))


def _as_float(view: Any) -> np.ndarray | sp.csr_matrix:
    if sp.issparse(view):
        return sp.csr_matrix(view, dtype=np.float64)
    view = np.asarray(view)
    if view.dtype == np.uint8:
        # 8-bit images: scale to [0, 1] so kernels see the same range for every image set.
        return view.astype(np.float64) / 255.0
    return np.asarray(view, dtype=np.float64)


def _as_int_labels(y: np.ndarray) -> np.ndarray:
    if np.issubdtype(y.dtype, np.integer) or y.dtype == np.bool_:
        return y.astype(np.int64)
    if np.issubdtype(y.dtype, np.floating) and np.all(np.isfinite(y)) and np.all(y == np.round(y)):
        return y.astype(np.int64)
    _, codes = np.unique(y, return_inverse=True)
    return codes.astype(np.int64).ravel()
