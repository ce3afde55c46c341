"""Benchmark datasets, user data files, and a synthetic multi-view generator.

The benchmark files are never part of the project: they are read from a data folder, by
default ``../shared/datasets`` (see :func:`default_data_dir`), or from the folder named by the
environment variable ``MKRK_DATASETS`` or the ``data_dir`` argument.

:func:`make_multiview_blobs` makes multi-view data with known clusters at any size. Its rows
are generated in fixed blocks of :data:`BLOCK_ROWS` rows, each from its own random stream, so
any range of rows can be generated alone (on a Dask worker, say) and equals the same rows of
the full array.
"""

from __future__ import annotations

import math
import numbers
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import MappingProxyType
from typing import Any, NamedTuple

import numpy as np
import scipy.io
import scipy.sparse as sp
from numpy.typing import DTypeLike

__all__ = [
    "DATA_DIR_ENV",
    "PAPER_DATASETS",
    "BLOCK_ROWS",
    "Dataset",
    "default_data_dir",
    "load_dataset",
    "load_array_file",
    "make_multiview_blobs",
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

_READERS_DOC = ".npz, .npy, .csv, .mat"
_VIEW_KEY = re.compile(r"^view(\d+)$")


@dataclass(frozen=True, eq=False)
class Dataset:
    """A loaded dataset.

    Attributes
    ----------
    name : str
        The short name (``"jaffe"``) or, for a user file, the file name without extension.
    X : ndarray, scipy.sparse.csr_matrix or list of ndarray
        The data, float64: a dense (n_samples, n_features) array, a CSR matrix for sparse
        files (e.g. tr11), or one array per view for multi-view data (e.g. uci_mfeat).
    y : ndarray of shape (n_samples,), int64, or None
        Class labels as stored in the file (not renumbered when they are integral); None for a
        user file without labels.
    view_names : tuple of str or None
        Names of the views of multi-view data, when the file gives them.
    extra : dict
        Further scalars the file holds, e.g. ``n_train`` for Fashion-MNIST (the rows before
        it are the training set), and ``subset_rows`` when a subset was drawn.
    """

    name: str
    X: np.ndarray | sp.csr_matrix | list[np.ndarray]
    y: np.ndarray | None
    view_names: tuple[str, ...] | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def views(self) -> list[np.ndarray | sp.csr_matrix]:
        """The data as a list of views (a single-view dataset gives a list of one)."""
        return list(self.X) if isinstance(self.X, list) else [self.X]

    @property
    def n_samples(self) -> int:
        """Number of rows."""
        return int(self.views[0].shape[0])

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
    repo_root = Path(__file__).resolve().parent.parent
    for candidate in (Path.cwd().parent / "shared" / "datasets",
                      repo_root.parent / "shared" / "datasets"):
        if candidate.is_dir():
            return candidate.resolve()
    return None


def _how_to_point() -> str:
    return (f"set the environment variable {DATA_DIR_ENV} to the folder that holds it, "
            "or pass data_dir=...")


def _resolve_path(name_or_path: str | os.PathLike[str],
                  data_dir: str | os.PathLike[str] | None) -> tuple[Path, str]:
    """Map a short name or a file path to an existing file and the dataset's name."""
    directory = Path(data_dir).expanduser() if data_dir is not None else default_data_dir()
    key = str(name_or_path).lower()
    if isinstance(name_or_path, str) and key in PAPER_DATASETS:
        file_name = PAPER_DATASETS[key]
        if directory is None:
            raise FileNotFoundError(
                f"dataset {key!r} ({file_name}): no data folder found "
                f"(looked for ../shared/datasets); {_how_to_point()}"
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
        raise FileNotFoundError(
            f"{str(name_or_path)!r} is neither a known dataset ({', '.join(PAPER_DATASETS)}) "
            f"nor an existing file (data folder: {directory}); {_how_to_point()}"
        )
    return path, path.stem


# --------------------------------------------------------------------------- public loaders


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
        :func:`load_array_file` reads. A relative path that does not exist is also looked up
        in the data folder.
    data_dir : str or path-like, optional
        Folder holding the benchmark files; defaults to :func:`default_data_dir`.
    subset : int, optional
        Keep only this many rows, drawn uniformly without replacement (seeded by
        ``random_state``) and kept in file order. Drawn rather than taken from the top because
        some files are sorted by class (usps, uci_mfeat). The rows are selected before the
        conversion to float64, so a subset of Fashion-MNIST never builds the full float array.
        ``extra["subset_rows"]`` holds the chosen row indices, and ``extra["n_train"]`` (if
        present) is recomputed so that it still splits training from test rows.
    random_state : int, default 0
        Seed of the subset draw.

    Returns
    -------
    Dataset
        Dense data as float64 (uint8 images scaled to [0, 1]), sparse data as CSR float64,
        multi-view data as a list of float64 arrays with ``view_names``.

    Raises
    ------
    FileNotFoundError
        If the file is missing; the message names the path and how to point at the data.
    ValueError
        If the file cannot be read as a dataset, or ``subset`` is out of range.
    """
    path, name = _resolve_path(name_or_path, data_dir)
    return _to_dataset(name, _read_file(path), subset, random_state)


def load_array_file(path: str | os.PathLike[str]) -> Dataset:
    """Read a user's data file.

    Supported formats, chosen by extension:

    - ``.npz`` (read with ``allow_pickle=False``): array ``X`` and optional labels ``y``; or
      views ``view0``, ``view1``, ... (optional ``y`` and ``view_names``); or a single array of
      any name. Other scalar entries go to ``Dataset.extra``.
    - ``.npy``: one 2-D array, no labels.
    - ``.csv``: comma-separated numbers, no labels; a first row that is not numeric is taken
      as a header and skipped.
    - ``.mat`` (MATLAB up to v7): variable ``X`` (dense or sparse) and optional ``y``.

    Parameters
    ----------
    path : str or path-like
        The file.

    Returns
    -------
    Dataset
        Named after the file; data converted as in :func:`load_dataset`. Integral labels are
        kept as they are; other labels (strings, say) are coded 0..c-1 in sorted order.

    Raises
    ------
    FileNotFoundError
        If the file does not exist.
    ValueError
        For an unknown extension, a missing key, non-numeric data, or inconsistent shapes.
    """
    path = Path(path).expanduser()
    if not path.is_file():
        raise FileNotFoundError(f"{path} does not exist")
    return _to_dataset(path.stem, _read_file(path), None, 0)


# --------------------------------------------------------------------------- file readers


def _read_file(path: Path) -> _RawData:
    readers = {".npz": _read_npz, ".npy": _read_npy, ".csv": _read_csv, ".mat": _read_mat}
    reader = readers.get(path.suffix.lower())
    if reader is None:
        raise ValueError(
            f"cannot read {path}: unknown extension {path.suffix!r} (expected {_READERS_DOC})"
        )
    return reader(path)


def _view_keys(keys: list[str]) -> list[str]:
    """The ``view<i>`` keys of an archive, in view order."""
    matches = [(int(m.group(1)), k) for k in keys if (m := _VIEW_KEY.match(k))]
    return [k for _, k in sorted(matches)]


def _read_npz(path: Path) -> _RawData:
    with np.load(path, allow_pickle=False) as archive:
        keys = list(archive.files)
        view_keys = _view_keys(keys)
        if "X" in keys:
            X, used = archive["X"], {"X"}
        elif view_keys:
            X, used = [archive[k] for k in view_keys], {*view_keys, "view_names"}
        elif len(keys) == 1:
            X, used = archive[keys[0]], set(keys)
        else:
            raise ValueError(
                f"{path}: expected an array 'X' (and optional 'y'), views 'view0', 'view1', ..., "
                f"or a single array; found {keys}"
            )
        view_names = None
        if isinstance(X, list) and "view_names" in keys:
            view_names = tuple(str(name) for name in archive["view_names"])
        y = archive["y"] if "y" in keys else None
        # Scalars such as Fashion-MNIST's n_train describe the data; keep them.
        extra = {k: archive[k].item() for k in keys
                 if k not in used and k != "y" and archive[k].ndim == 0}
    return _RawData(X, y, view_names, extra)


def _read_npy(path: Path) -> _RawData:
    return _RawData(np.load(path, allow_pickle=False), None, None, {})


def _is_numeric_row(line: str) -> bool:
    try:
        [float(field) for field in line.split(",")]
    except ValueError:
        return False
    return True


def _read_csv(path: Path) -> _RawData:
    with open(path, encoding="utf-8") as handle:
        first = handle.readline()
    skip = 0 if _is_numeric_row(first) else 1
    try:
        X = np.loadtxt(path, delimiter=",", skiprows=skip, ndmin=2, dtype=np.float64)
    except ValueError as err:
        raise ValueError(f"{path}: expected comma-separated numbers ({err})") from err
    return _RawData(X, None, None, {})


def _read_mat(path: Path) -> _RawData:
    try:
        contents = scipy.io.loadmat(path)
    except NotImplementedError as err:
        # scipy raises this for v7.3 files, which are HDF5 underneath.
        raise ValueError(f"{path}: MATLAB v7.3 files are not supported; "
                         "re-save it with save(..., '-v7')") from err
    if "X" not in contents:
        found = sorted(k for k in contents if not k.startswith("__"))
        raise ValueError(f"{path}: no variable 'X' (found {found})")
    return _RawData(contents["X"], contents.get("y"), None, {})


# --------------------------------------------------------------------------- conversion


def _to_dataset(name: str, raw: _RawData, subset: int | None, random_state: int) -> Dataset:
    """Check shapes, select rows, convert to float64 and int64 labels."""
    views = raw.X if isinstance(raw.X, list) else [raw.X]
    n_samples = _check_views(name, views)
    if raw.view_names is not None and len(raw.view_names) != len(views):
        raise ValueError(f"{name}: {len(raw.view_names)} view names for {len(views)} views")
    y = None if raw.y is None else np.asarray(raw.y).ravel()
    if y is not None and y.shape[0] != n_samples:
        raise ValueError(f"{name}: {y.shape[0]} labels for {n_samples} rows")
    extra = dict(raw.extra)
    if subset is not None:
        rows = _subset_rows(n_samples, subset, random_state)
        views = [v[rows] for v in views]
        y = None if y is None else y[rows]
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
    )


def _check_views(name: str, views: list[Any]) -> int:
    """Every view must be a non-empty 2-D matrix with the same number of rows."""
    n_rows = set()
    for i, view in enumerate(views):
        if view.ndim != 2 or view.shape[0] == 0:
            raise ValueError(f"{name}: data must be a non-empty 2-D array; view {i} has shape "
                             f"{view.shape}")
        n_rows.add(view.shape[0])
    if len(n_rows) != 1:
        raise ValueError(f"{name}: the views differ in their number of rows: {sorted(n_rows)}")
    return n_rows.pop()


def _subset_rows(n_samples: int, subset: int, random_state: int) -> np.ndarray:
    _check_int("subset", subset, 1)
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


# --------------------------------------------------------------------------- synthetic data

#: Rows per random block of :func:`make_multiview_blobs`. Changing it changes the data.
BLOCK_ROWS = 65536

# spawn_key prefixes that keep the parameter stream and the row-block streams apart.
_PARAMS_STREAM = 0
_BLOCK_STREAM = 1


@dataclass(frozen=True)
class _ViewPlan:
    """The parameters of one view, drawn once from the parameter stream."""

    kind: str
    transform: np.ndarray  # (F, F) linear map; rows are multiplied by it on the right
    scale: float  # the map's overall scale
    centres: np.ndarray | None = None  # (k, F) after the map; informative views only
    source: int | None = None  # index of the view a redundant one copies

    def cast(self, dtype: np.dtype) -> _ViewPlan:
        """The same plan with its arrays in ``dtype`` (done once, not per block)."""
        centres = None if self.centres is None else self.centres.astype(dtype)
        return replace(self, transform=self.transform.astype(dtype), centres=centres)


@dataclass(frozen=True)
class _BlobModel:
    """Everything the row blocks are generated from."""

    entropy: int
    n_clusters: int
    cluster_std: float
    redundant_std: float
    dtype: np.dtype
    plans: tuple[_ViewPlan, ...]

    def _rng(self, block: int, stream: int) -> np.random.Generator:
        """Stream 0 of a block draws its labels, stream ``1 + v`` the normals of view v."""
        seed = np.random.SeedSequence(self.entropy, spawn_key=(_BLOCK_STREAM, block, stream))
        return np.random.default_rng(seed)

    def fill_block(self, block: int, n_block: int, wanted: tuple[int, ...], y: np.ndarray,
                   views: list[np.ndarray], out: slice, part: slice,
                   scratch: np.ndarray) -> None:
        """Generate the ``wanted`` views of one block and copy its rows ``part`` to ``out``.

        The block (``n_block`` rows) is always drawn whole, so its rows are the same whichever
        of them a call asks for. ``scratch`` holds at least ``n_block`` rows.
        """
        labels = self._rng(block, 0).integers(0, self.n_clusters, size=n_block)
        y[out] = labels[part]
        whole = part.start == 0 and part.stop == n_block
        sources = {self.plans[v].source for v in wanted} - {None}
        made: dict[int, np.ndarray] = {}
        # Sources (informative) come before the redundant views that copy them.
        for index in sorted(set(wanted) | sources):
            position = wanted.index(index) if index in wanted else None
            # Write straight into the output when it takes the whole block: no copy.
            if position is not None and whole:
                target = views[position][out]
            else:
                target = np.empty((n_block, scratch.shape[1]), dtype=self.dtype)
            self._make_view(block, index, labels, scratch[:n_block], target, made)
            if position is not None and not whole:
                views[position][out] = target[part]
            if index in sources:
                made[index] = target

    def _make_view(self, block: int, index: int, labels: np.ndarray, scratch: np.ndarray,
                   target: np.ndarray, made: dict[int, np.ndarray]) -> None:
        """Write view ``index`` of the block into ``target``, using ``scratch`` for normals."""
        plan = self.plans[index]
        self._rng(block, 1 + index).standard_normal(dtype=self.dtype, out=scratch)
        if plan.kind == "redundant":
            scratch *= self.dtype.type(self.redundant_std * plan.scale)
            np.add(made[plan.source], scratch, out=target)
            return
        np.matmul(scratch, plan.transform, out=target)
        if plan.kind == "informative":
            target *= self.dtype.type(self.cluster_std)
            target += np.take(plan.centres, labels, axis=0, out=scratch)


def make_multiview_blobs(
    n_samples: int,
    n_clusters: int = 10,
    *,
    n_informative: int = 3,
    n_noise: int = 2,
    n_redundant: int = 1,
    n_features: int = 64,
    cluster_std: float = 1.0,
    separation: float = 7.0,
    redundant_noise: float = 0.5,
    random_state: int | None = None,
    dtype: DTypeLike = np.float64,
    row_slice: tuple[int, int] | slice | None = None,
    select_views: Sequence[int] | None = None,
) -> tuple[list[np.ndarray], np.ndarray, list[str]]:
    """Synthetic multi-view data with known clusters, generated block by block.

    Every sample gets a cluster label drawn uniformly from ``range(n_clusters)``. The views are
    numbered in the order informative, noise, redundant:

    - informative: isotropic Gaussian blobs (std ``cluster_std``) around cluster centres that
      are ``separation * cluster_std`` apart (exactly, as the vertices of a regular simplex,
      when ``n_clusters <= n_features``; on average otherwise), then mapped by the view's own
      random linear map: per-feature scales in [0.8, 1.25], a random rotation, and an overall
      scale in [0.2, 5] (both log-uniform). A linear map keeps the clusters exactly as
      separable as before it, so ``separation`` alone sets how hard a view is.
    - noise: the same kind of random linear map applied to standard normal rows; no cluster
      signal at all.
    - redundant: redundant view ``j`` is informative view ``j % n_informative`` plus isotropic
      Gaussian noise of std ``redundant_noise * cluster_std`` times that view's overall scale.

    Parameters
    ----------
    n_samples : int
        Total number of rows (>= 1).
    n_clusters : int, default 10
        Number of clusters (>= 1).
    n_informative, n_noise, n_redundant : int
        Numbers of views of each kind (>= 0, at least one view; a redundant view needs an
        informative one).
    n_features : int, default 64
        Columns of every view (>= 1).
    cluster_std : float, default 1.0
        Within-cluster standard deviation, before the view's linear map (> 0).
    separation : float, default 7.0
        Distance between cluster centres in units of ``cluster_std`` (>= 0). At 7 the Bayes
        error between two clusters is about 0.02%, and k-means on one informative view with
        the other defaults reaches an NMI of about 0.99.
    redundant_noise : float, default 0.5
        Noise of the redundant views relative to ``cluster_std`` (>= 0).
    random_state : int, optional
        Seed (>= 0). Pass one whenever rows are generated in pieces: with None, each call
        draws fresh entropy and the pieces would not fit together.
    dtype : {numpy.float64, numpy.float32}
        Dtype of the views. float32 draws float32 normals directly (half the memory, faster),
        so its values differ from the float64 ones; the labels are the same.
    row_slice : (start, stop) or slice, optional
        Generate only rows ``start:stop`` of the ``n_samples`` rows (step 1).
    select_views : sequence of int, optional
        Generate only these views (indices in the numbering above), in this order; the others
        are not computed (except the source of a selected redundant view, internally). The
        rows are those of the full output.

    Returns
    -------
    views : list of ndarray, each (n_rows, n_features)
        The views, ``n_rows = stop - start`` (``n_samples`` without ``row_slice``).
    y : ndarray of shape (n_rows,), int64
        Cluster labels.
    view_kinds : list of str
        ``"informative"``, ``"noise"`` or ``"redundant"`` for each returned view.

    Raises
    ------
    TypeError
        If a count, the seed or a slice bound is not an int.
    ValueError
        If a parameter is out of range.

    Notes
    -----
    Determinism and chunking. The view parameters (centres, linear maps) come from the stream
    ``SeedSequence(random_state, spawn_key=(0,))``, whatever ``n_samples`` is. The rows are
    cut into fixed blocks of :data:`BLOCK_ROWS` rows; block ``b`` (rows ``b * BLOCK_ROWS`` up
    to the next block or ``n_samples``) draws its labels from the stream
    ``SeedSequence(random_state, spawn_key=(1, b, 0))`` and the normals of view ``v`` from
    ``SeedSequence(random_state, spawn_key=(1, b, 1 + v))``, always for the whole block. A
    call with ``row_slice=(a, b)`` therefore generates only the blocks that overlap
    ``[a, b)`` and returns exactly rows ``a:b`` of the full call with the same arguments,
    whatever the chunking. A Dask graph can make each chunk of one view on a worker without
    materialising the rest::

        def chunk(a, b, view):
            views, _, _ = make_multiview_blobs(n, row_slice=(a, b), select_views=[view],
                                               random_state=0)
            return views[0]

    Chunks aligned to multiples of :data:`BLOCK_ROWS` waste no work. Per row and view the
    cost is one row of normal draws and one (F x F) product; memory beyond the output is one
    block of normals, plus one block per view when a chunk cuts a block, plus one per source
    of a selected redundant view. A million rows of one 64-feature view take roughly 1-2 s
    on one core in float32, most of it drawing normals (256 MB of output).

    Examples
    --------
    >>> views, y, kinds = make_multiview_blobs(1000, 5, random_state=0)
    >>> [v.shape for v in views][:2], kinds[:2]
    ([(1000, 64), (1000, 64)], ['informative', 'informative'])
    """
    _check_counts(n_samples, n_clusters, n_informative, n_noise, n_redundant, n_features)
    _check_scales(cluster_std, separation, redundant_noise)
    dtype = _check_dtype(dtype)
    entropy = _seed_entropy(random_state)
    start, stop = _resolve_row_slice(row_slice, n_samples)
    plans = _plan_views(entropy, n_clusters, n_informative, n_noise, n_redundant, n_features,
                        cluster_std * separation)
    wanted = _check_select_views(select_views, len(plans))
    model = _BlobModel(
        entropy=entropy,
        n_clusters=n_clusters,
        cluster_std=float(cluster_std),
        redundant_std=float(cluster_std * redundant_noise),
        dtype=dtype,
        plans=tuple(plan.cast(dtype) for plan in plans),
    )
    views = [np.empty((stop - start, n_features), dtype=dtype) for _ in wanted]
    y = np.empty(stop - start, dtype=np.int64)
    scratch = np.empty((min(BLOCK_ROWS, n_samples), n_features), dtype=dtype)
    for block in range(start // BLOCK_ROWS, -(-stop // BLOCK_ROWS)):
        block_start = block * BLOCK_ROWS
        block_stop = min(block_start + BLOCK_ROWS, n_samples)
        lo, hi = max(start, block_start), min(stop, block_stop)
        model.fill_block(block, block_stop - block_start, wanted, y, views,
                         out=slice(lo - start, hi - start),
                         part=slice(lo - block_start, hi - block_start), scratch=scratch)
    return views, y, [plans[v].kind for v in wanted]


def _check_select_views(select_views: Sequence[int] | None, n_views: int) -> tuple[int, ...]:
    if select_views is None:
        return tuple(range(n_views))
    wanted = tuple(select_views)
    for v in wanted:
        _check_int("select_views entry", v, 0)
        if v >= n_views:
            raise ValueError(f"select_views: view {v} does not exist (there are {n_views})")
    if len(set(wanted)) != len(wanted):
        raise ValueError(f"select_views has repeated views: {list(wanted)}")
    return tuple(int(v) for v in wanted)


def _check_int(name: str, value: Any, minimum: int) -> None:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an int, got {type(value).__name__}")
    if value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value}")


def _check_counts(n_samples: int, n_clusters: int, n_informative: int, n_noise: int,
                  n_redundant: int, n_features: int) -> None:
    for name, value, minimum in (("n_samples", n_samples, 1), ("n_clusters", n_clusters, 1),
                                 ("n_informative", n_informative, 0), ("n_noise", n_noise, 0),
                                 ("n_redundant", n_redundant, 0), ("n_features", n_features, 1)):
        _check_int(name, value, minimum)
    if n_informative + n_noise + n_redundant == 0:
        raise ValueError("at least one view is needed: n_informative + n_noise + n_redundant = 0")
    if n_redundant > 0 and n_informative == 0:
        raise ValueError("redundant views copy informative ones: n_redundant > 0 needs "
                         "n_informative >= 1")


def _check_scales(cluster_std: float, separation: float, redundant_noise: float) -> None:
    if not (math.isfinite(cluster_std) and cluster_std > 0):
        raise ValueError(f"cluster_std must be a finite number > 0, got {cluster_std}")
    for name, value in (("separation", separation), ("redundant_noise", redundant_noise)):
        if not (math.isfinite(value) and value >= 0):
            raise ValueError(f"{name} must be a finite number >= 0, got {value}")


def _check_dtype(dtype: DTypeLike) -> np.dtype:
    dtype = np.dtype(dtype)
    if dtype not in (np.dtype(np.float32), np.dtype(np.float64)):
        raise ValueError(f"dtype must be float32 or float64, got {dtype}")
    return dtype


def _seed_entropy(random_state: int | None) -> int:
    if random_state is None:
        return int(np.random.SeedSequence().entropy)
    _check_int("random_state", random_state, 0)
    return int(random_state)


def _resolve_row_slice(row_slice: tuple[int, int] | slice | None,
                       n_samples: int) -> tuple[int, int]:
    if row_slice is None:
        return 0, n_samples
    if isinstance(row_slice, slice):
        if row_slice.step not in (None, 1):
            raise ValueError(f"row_slice must have step 1, got {row_slice.step}")
        start = 0 if row_slice.start is None else row_slice.start
        stop = n_samples if row_slice.stop is None else row_slice.stop
    else:
        try:
            start, stop = row_slice
        except (TypeError, ValueError) as err:
            raise ValueError(f"row_slice must be (start, stop) or a slice, got {row_slice!r}"
                             ) from err
    _check_int("row_slice start", start, 0)
    _check_int("row_slice stop", stop, 0)
    if not start <= stop <= n_samples:
        raise ValueError(f"row_slice must satisfy 0 <= start <= stop <= n_samples = "
                         f"{n_samples}, got ({start}, {stop})")
    return int(start), int(stop)


def _plan_views(entropy: int, n_clusters: int, n_informative: int, n_noise: int,
                n_redundant: int, n_features: int,
                centre_distance: float) -> tuple[_ViewPlan, ...]:
    """Draw every view's parameters from the parameter stream (independent of n_samples)."""
    rng = np.random.default_rng(np.random.SeedSequence(entropy, spawn_key=(_PARAMS_STREAM,)))
    plans = []
    for _ in range(n_informative):
        transform, scale = _random_linear_map(rng, n_features)
        centres = _cluster_centres(rng, n_clusters, n_features, centre_distance)
        plans.append(_ViewPlan("informative", transform, scale, centres=centres @ transform))
    for _ in range(n_noise):
        plans.append(_ViewPlan("noise", *_random_linear_map(rng, n_features)))
    for j in range(n_redundant):
        source = plans[j % n_informative]
        plans.append(_ViewPlan("redundant", source.transform, source.scale,
                               source=j % n_informative))
    return tuple(plans)


def _random_linear_map(rng: np.random.Generator, n_features: int) -> tuple[np.ndarray, float]:
    """Per-feature scales in [0.8, 1.25], a random rotation, and an overall scale in [0.2, 5].

    Both scales are log-uniform. Returns the map and its overall scale.
    """
    q, r = np.linalg.qr(rng.standard_normal((n_features, n_features)))
    rotation = q * np.sign(np.diag(r))  # the sign fix makes the rotation uniform (Haar)
    feature_scales = np.exp(rng.uniform(np.log(0.8), np.log(1.25), size=n_features))
    overall = float(np.exp(rng.uniform(np.log(0.2), np.log(5.0))))
    return overall * feature_scales[:, None] * rotation, overall


def _cluster_centres(rng: np.random.Generator, n_clusters: int, n_features: int,
                     distance: float) -> np.ndarray:
    """Cluster centres ``distance`` apart: a randomly oriented regular simplex when it fits."""
    if n_clusters <= n_features:
        # Rows of I - 1/k are pairwise sqrt(2) apart; an orthonormal k x F basis keeps that.
        simplex = np.eye(n_clusters) - 1.0 / n_clusters
        basis, _ = np.linalg.qr(rng.standard_normal((n_features, n_clusters)))
        return simplex @ basis.T * (distance / math.sqrt(2.0))
    # Too many clusters for a simplex: random centres whose expected squared distance fits.
    return rng.standard_normal((n_clusters, n_features)) * (distance / math.sqrt(2 * n_features))
