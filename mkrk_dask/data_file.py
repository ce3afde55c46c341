"""A data file read into a :class:`Dataset`: the type, :func:`load_array_file`, and the
checks and conversion every format shares (shapes, a row subset, float64 data, int64 labels).

The formats themselves are read by :mod:`mkrk_dask.file_formats`; :mod:`mkrk_dask.io` is the
public face of both, and :mod:`mkrk_dask.datasets` loads the benchmark files through here.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp

from .csv_input import CsvColumns
from .file_formats import RawData, read_file
from .metrics import check_labels_present
from .validation import check_int

__all__ = ["Dataset", "load_array_file"]


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
    return _to_dataset(name or path.stem, read_file(path, columns), subset, random_state)


# --------------------------------------------------------------------------- conversion


def _to_dataset(name: str, raw: RawData, subset: int | None, random_state: int) -> Dataset:
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
