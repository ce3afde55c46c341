"""Bad input across the API and the command line (issues 14 and 15): every case gets a one-line
message (no traceback, no newline) naming the problem, and the command line exits with code 2
and writes nothing. Real files in tmp_path; the CLI in-process (``main``) and, for what only a
real process shows (a traceback on stderr, a hang), in subprocesses."""

from __future__ import annotations

import http.server
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import dask.array as da
import numpy as np
import pandas as pd
import pytest
import scipy.io
import zarr

from mkrk_dask import MKKMRK, AnchorGraphClustering, SimpleMKKM, lambda_search
from mkrk_dask.cli import main
from mkrk_dask.io import load_array_file, load_input, read_labels

RNG = np.random.default_rng(0)
X = RNG.random((40, 3))
_DASK_X = da.from_array(X, chunks=(20, 3))
_UNKNOWN_ROWS = _DASK_X[_DASK_X[:, 0] >= 0]


def _one_line(err: BaseException, message: str) -> None:
    text = str(err)
    assert message in text, text
    assert "\n" not in text and "Traceback" not in text, text


# --------------------------------------------------------------------------- the estimator


@pytest.mark.parametrize("params, data, error, message", [
    ({"n_clusters": 0}, X, ValueError, "n_clusters must be a positive integer"),
    ({"n_clusters": 50}, X, ValueError, "larger than n_samples=40"),
    ({"n_clusters": 1.5}, X, TypeError, "n_clusters must be a positive integer"),
    ({"lam": -1}, X, ValueError, "lam must be a finite number >= 0"),
    ({"lam": float("nan")}, X, ValueError, "finite"),
    ({"lam": float("inf")}, X, ValueError, "finite"),
    ({"kernels": ["polynomial(a=1,b=2.5)"]}, X, ValueError, "positive integer, got 2.5"),
    ({"kernels": ["polynomial(a=1,b=inf)"]}, X, ValueError, "positive integer, got inf"),
    ({"kernels": ["gaussian(c=1e-300)", "cosine"]}, X, ValueError, "gaussian c must be in"),
    ({"kernels": ["gaussian(sigma=1e300)", "cosine"]}, X, ValueError, "sigma must be in"),
    ({"kernels": ["nonsense"]}, X, ValueError, "cannot parse kernel 'nonsense'"),
    ({"kernels": []}, X, ValueError, "the kernel list is empty"),
    ({"kernels": ["cosine@3"]}, X, ValueError, "reads view 3 but only 1 view"),
    ({"dissimilarity": "xyz"}, X, ValueError, "dissimilarity must be one of"),
    ({"solver": "magic"}, X, ValueError, "solver must be one of"),
    ({"tol_mode": "loud"}, X, ValueError, "tol_mode must be one of"),
    ({"max_iter": 0}, X, ValueError, "max_iter must be a positive integer"),
    ({"tol": -1}, X, ValueError, "tol must be a positive number"),
    ({"n_init": 0}, X, ValueError, "n_init must be an integer from 1 to 1000"),
    ({"kernels": "precomputed"}, RNG.random((2, 5, 4)), ValueError, "must be square"),
    ({}, [X, X[:30]], ValueError, "same number of rows"),
    ({}, np.zeros((0, 3)), ValueError, "0 sample(s)"),
    ({"solver": "nystrom", "backend_options": {"n_landmarks": 0}}, X, ValueError,
     "n_landmarks must be"),
    ({"solver": "blockwise", "backend_options": {"chunk_size": 0}}, X, ValueError,
     "chunk_size must be"),
    ({"solver": "blockwise", "backend_options": {"dtype": "int8"}}, X, ValueError,
     "dtype must be one of"),
    ({"backend_options": {"dtype": "float16"}}, X, ValueError, "dtype must be one of ('auto'"),
    ({"store": "kernels.zarr"}, X, ValueError, "store applies to solver='blockwise'"),
    ({}, np.where(np.eye(40, 3) > 0, np.nan, X), ValueError, "Input X contains NaN"),
    ({}, np.where(np.eye(40, 3) > 0, np.inf, X), ValueError, "Input X contains infinity"),
    ({}, [np.where(np.eye(40, 3) > 0, np.nan, X), X], ValueError, "contains NaN"),
    # scikit-learn prints a 1-D or complex X whole, over several lines
    ({}, np.arange(3000.0), ValueError, "got 1D array instead. Reshape your data"),
    ({}, [], ValueError, "got 1D array instead. Reshape your data"),
    ({}, X + 1j, ValueError, "Complex data not supported"),
    # rows wider than a printed line wrap onto lines that start with a number
    ({}, np.tile(X, 4) + 1j, ValueError, "Complex data not supported"),
    ({}, [X, X + 1j], ValueError, "view 1: Complex data not supported"),
    ({}, X * 1e200, ValueError, "overflow float64 when squared"),
    # a dask array after boolean indexing: "cannot convert float NaN to integer" before
    ({}, _UNKNOWN_ROWS, ValueError, "shape (nan, 3) is not known (chunk sizes unknown"),
    ({}, [X, _UNKNOWN_ROWS], ValueError, "view 1: the dask array's shape (nan, 3)"),
    ({}, X * 1e-200, ValueError, "underflow float64 when squared"),
    ({"kernels": "precomputed"}, np.diag([1.0, 1.0, -1.0, 1.0]), ValueError,
     "positive semi-definite"),
])
def test_estimator_fit(params: dict, data, error: type, message: str) -> None:
    with pytest.raises(error) as caught:
        MKKMRK.paper(**{"n_clusters": 2, **params}).fit(data)
    _one_line(caught.value, message)


def test_a_constant_view_is_named_as_such() -> None:
    """The default's widths are relative to a view's median distance: on a constant view (or,
    for the angle, one whose rows all point one way) that is 0, and the error says why and
    what to do, in one line."""
    with pytest.raises(ValueError) as caught:
        MKKMRK(2).fit([X, np.ones((40, 3))])
    _one_line(caught.value, "view 1: the median pairwise distance of the sampled rows is 0.0 "
                            "(every row of the sample is the same)")
    assert "leave such a view out" in str(caught.value)
    with pytest.raises(ValueError) as caught:
        MKKMRK(2, kernels=["angular(m=1)"]).fit(X[:, :1] + 1.0)
    _one_line(caught.value, "(every row of the sample points the same way)")


@pytest.mark.parametrize("column, shown", [
    (lambda n: pd.Categorical(np.resize(["a", "b"], n)), "'c' (category)"),
    (lambda n: np.resize(["a", "b"], n).astype(object), "'c' ("),  # object or str
    (lambda n: pd.date_range("2020-01-01", periods=n), "'c' (datetime64"),
], ids=["category", "text", "date"])
def test_a_data_frame_column_without_numbers_is_named(column: Callable, shown: str) -> None:
    """scikit-learn's own error names a cast that failed, not the column; the error names the
    column and what to do, for one frame and for a frame among views. Numbers of any kind
    (nullable integers, booleans, numbers stored as objects) pass."""
    frame = pd.DataFrame(X, columns=["x", "y", "z"]).assign(c=column(len(X)))
    for data, prefix in ((frame, ""), ([X, frame], "view 1: ")):
        with pytest.raises(ValueError) as caught:
            MKKMRK(2, random_state=0).fit(data)
        _one_line(caught.value, f"{prefix}column {shown}")
        assert "holds no numbers; encode it as numbers first" in str(caught.value)
    numbers = pd.DataFrame(X, columns=["x", "y", "z"]).assign(
        n=pd.array(np.arange(len(X)) % 3, dtype="Int64"), b=np.arange(len(X)) % 2 == 0,
        o=(np.arange(len(X)) % 4).astype(object))
    plain = np.c_[X, np.arange(len(X)) % 3, np.arange(len(X)) % 2 == 0, np.arange(len(X)) % 4]
    fitted = MKKMRK(2, random_state=0).fit(numbers)
    assert fitted.feature_names_in_.tolist() == ["x", "y", "z", "n", "b", "o"]
    np.testing.assert_array_equal(fitted.labels_, MKKMRK(2, random_state=0).fit(plain).labels_)


def test_predict_on_missing_values_is_one_line() -> None:
    model = MKKMRK(2, random_state=0).fit(X)
    for method in (model.predict, model.transform):
        with pytest.raises(ValueError) as caught:
            method(np.where(np.eye(5, 3) > 0, np.nan, X[:5]))
        _one_line(caught.value, "Input X contains NaN")


@pytest.mark.parametrize("make", [lambda: MKKMRK(2, random_state=0),
                                  lambda: SimpleMKKM(2, random_state=0),
                                  lambda: AnchorGraphClustering(2, random_state=0)],
                         ids=["MKKMRK", "SimpleMKKM", "AnchorGraphClustering"])
def test_new_rows_whose_squares_overflow_are_one_line(make: Callable) -> None:
    """New rows are checked as the training rows are: values whose squares overflow would
    give infinite distances (AnchorGraphClustering's transform was NaN). Rows near the
    origin among others are points like any, and are embedded."""
    model = make().fit(X)
    for method in (model.predict, model.transform, model.score):
        with pytest.raises(ValueError) as caught:
            method(X[:5] * 1e200)
        _one_line(caught.value, "values up to 9.35e+199 overflow float64 when squared")
    tiny = model.transform(X[:5] * 1e-200)
    assert np.isfinite(tiny).all() and model.predict(X[:5] * 1e-200).shape == (5,)


@pytest.mark.parametrize("lams, kwargs, message", [
    ([], {}, "lams is empty"),
    ([-1.0], {}, "lam must be a finite number >= 0"),
    ([1.0], {"y": np.zeros(40), "n_repeats": 0}, "n_repeats must be an integer >= 1"),
    ([1.0], {"y": np.zeros(10)}, "y has 10 labels for 40 samples"),
    ([1.0], {"y": np.r_[np.nan, np.zeros(39)]}, "y: 1 of 40 labels are missing"),
])
def test_lambda_search(lams: list, kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError) as caught:
        lambda_search(MKKMRK.paper(n_clusters=2), X, lams, **kwargs)
    _one_line(caught.value, message)


# --------------------------------------------------------------------------- readers


@pytest.fixture
def bad_files(tmp_path: Path, write_mat73: Callable[..., Path]) -> dict[str, Path]:
    """Damaged, foreign and inconsistent data files, written for real."""
    files = {}

    def put(name: str, content: bytes) -> None:
        files[name] = tmp_path / name
        files[name].write_bytes(content)

    put("corrupt.npz", b"PK\x03\x04" + os.urandom(200))
    put("corrupt.npy", b"\x93NUMPY" + os.urandom(50))
    put("corrupt.mat", b"MATLAB 5.0" + os.urandom(300))
    # Fixed damage that scipy reports with each of its exceptions (found by trying seeds):
    # ValueError, NotImplementedError (a header claiming v7.3), TypeError (a bad element tag)
    for seed in (0, 410, 567):
        put(f"corrupt{seed}.mat", b"MATLAB 5.0" + np.random.default_rng(seed).bytes(300))
    put("binary.csv", b"\xff\xfe\x00\x81" * 20)
    put("text.csv", b"1,2,3\n4,five,6\n")
    put("empty.csv", b"")
    put("data.txt", b"1 2 3\n")
    good73 = write_mat73(tmp_path / "good73.mat", X=X, y=np.arange(40) % 2)
    put("truncated73.mat", good73.read_bytes()[:1500])
    np.savez(tmp_path / "two.npz", A=np.zeros(3), B=np.ones(3))
    files["two.npz"] = tmp_path / "two.npz"
    np.savez(tmp_path / "cube.npz", X=np.zeros((2, 3, 4)))
    files["cube.npz"] = tmp_path / "cube.npz"
    np.savez(tmp_path / "views.npz", view0=np.zeros((4, 2)), view1=np.zeros((5, 2)))
    files["views.npz"] = tmp_path / "views.npz"
    np.savez(tmp_path / "labels.npz", X=X, y=np.zeros(40))
    files["labels.npz"] = tmp_path / "labels.npz"
    np.savez(tmp_path / "nan_labels.npz", X=X, y=np.r_[0.0, 1.0, np.nan, np.ones(37)])
    files["nan_labels.npz"] = tmp_path / "nan_labels.npz"
    scipy.io.savemat(tmp_path / "noX.mat", {"A": X})
    files["noX.mat"] = tmp_path / "noX.mat"
    (tmp_path / "short_labels.csv").write_text("0\n1\n")
    files["short_labels.csv"] = tmp_path / "short_labels.csv"
    return files


@pytest.mark.parametrize("name, message", [
    ("corrupt.npz", "not a readable .npz file"),
    ("corrupt.npy", "not a readable .npy file"),
    ("corrupt.mat", "not a readable .mat file"),
    ("corrupt0.mat", "not a readable .mat file"),
    ("corrupt410.mat", "not a readable .mat file"),
    ("corrupt567.mat", "not a readable .mat file"),
    ("truncated73.mat", "not a readable MATLAB v7.3 (HDF5) file"),
    ("binary.csv", "not a readable .csv"),
    ("text.csv", "expected numbers separated by commas"),
    ("empty.csv", "no data rows"),
    ("data.txt", "unknown extension '.txt'"),
    ("two.npz", "expected an array 'X'"),
    ("cube.npz", "non-empty 2-D array"),
    ("views.npz", "differ in their number of rows"),
    ("noX.mat", "no variable 'X'"),
    ("absent.npz", "does not exist"),
])
def test_load_array_file(name: str, message: str, bad_files: dict[str, Path],
                         tmp_path: Path) -> None:
    with pytest.raises((ValueError, FileNotFoundError)) as caught:
        load_array_file(bad_files.get(name, tmp_path / name))
    _one_line(caught.value, message)


def test_labels_readers(bad_files: dict[str, Path]) -> None:
    with pytest.raises(ValueError) as caught:
        read_labels(bad_files["corrupt.npy"])
    _one_line(caught.value, "cannot read labels from")
    with pytest.raises(ValueError) as caught:
        load_input(str(bad_files["labels.npz"]), labels=str(bad_files["short_labels.csv"]))
    _one_line(caught.value, "2 labels for 40 samples")
    with pytest.raises(ValueError) as caught:
        load_input(str(bad_files["labels.npz"]), y_key="classes")
    _one_line(caught.value, "has no array 'classes'")


# --------------------------------------------------------------------------- the command line


def _entries(root: Path) -> set[Path]:
    return set(root.rglob("*"))


@pytest.mark.parametrize("argv, message", [
    (["fit", "{digits}", "--lam", "2^5000"], "too large for a float"),
    (["fit", "{digits}", "--lam", "nan"], "finite"),
    (["fit", "{corrupt.npz}"], "not a readable .npz file"),
    (["fit", "{corrupt.mat}"], "not a readable .mat file"),
    (["fit", "{truncated73.mat}"], "not a readable MATLAB v7.3"),
    (["fit", "{digits}", "--kernels", "polynomial(a=1,b=2.5)"], "positive integer, got 2.5"),
    (["fit", "{digits}", "--kernels", "gaussian(c=1e-300)"], "gaussian c must be in"),
    (["fit", "{digits}", "--kernels", "gaussian(c=abc)"], "--kernels 'gaussian(c=abc)'"),
    (["fit", "{digits}", "-k", "0"], "n_clusters must be a positive integer"),
    (["fit", "{digits}", "--max-iter", "0"], "max_iter must be a positive integer"),
    (["fit", "{nan.npy}", "-k", "2"], "NaN"),
    (["fit", "{digits}", "--labels", "{short_labels.csv}"], "2 labels for 150 samples"),
    (["fit", "{nan_labels.npz}"], "y of nan_labels: 1 of 40 labels are missing"),
    (["fit", "{x.zarr}", "--y-key", "foo", "-k", "3"], "a Zarr array holds no labels"),
    (["fit", "{digits}", "--out", "{a_file}"], "is a file"),
    (["fit", "{digits}", "--tls-ca", "{a_file}"], "--tls-ca, --tls-cert and --tls-key"),
    (["fit", "{digits}", "--solver", "blockwise", "--storage-option", "novalue"],
     "KEY=VALUE"),
    (["fit", "{digits}", "--scheduler", "tcp://127.0.0.1:1", "--connect-timeout", "0"],
     "--connect-timeout must be > 0"),
    (["fit", "{digits}", "--max-components", "0"],
     "--max-components must be 'auto', 'none' or an integer >= 1, got '0'"),
    (["search", "{digits}", "--repeats", "0"], "--repeats must be >= 1"),
    (["search", "{digits}", "--lams", "2^1..2^0"], "cannot read lambda"),
    (["predict", "{evil.joblib}", "{digits}"], "--trust"),
    (["figures", "{a_file}"], "not a JSON results file"),
    (["reproduce", "--datasets", "no_such_set"], "unknown dataset"),
    (["fit", "{digits}", "--config", "{bad.toml}"], "cannot read config file"),
])
def test_cli_in_process(argv: list[str], message: str, bad_files: dict[str, Path],
                        digits_npz: Path, tmp_path: Path,
                        capsys: pytest.CaptureFixture) -> None:
    np.save(tmp_path / "nan.npy", np.where(np.eye(4) > 0, np.nan, 1.0))
    (tmp_path / "a_file").write_text("not json")
    (tmp_path / "evil.joblib").write_bytes(b"\x80\x04K\x01.")
    (tmp_path / "bad.toml").write_text("not = [toml")
    zarr.create_array(str(tmp_path / "x.zarr"), shape=X.shape, dtype="f8")[:] = X
    names = {**{k: str(v) for k, v in bad_files.items()}, "digits": str(digits_npz),
             "nan.npy": str(tmp_path / "nan.npy"), "a_file": str(tmp_path / "a_file"),
             "evil.joblib": str(tmp_path / "evil.joblib"),
             "bad.toml": str(tmp_path / "bad.toml"), "x.zarr": str(tmp_path / "x.zarr")}
    argv = [names[a[1:-1]] if a.startswith("{") and a.endswith("}") else a for a in argv]
    out = tmp_path / "out"
    if argv[0] in ("fit", "reproduce") and "--out" not in argv:
        argv += ["--out", str(out)]
    elif argv[0] in ("search", "predict"):
        argv += ["--out", str(out / "result.txt")]
    before = _entries(tmp_path)
    assert main([*argv, "-q"]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1, err
    assert err.startswith(f"mkrk {argv[0]}: error: ") and message in err, err
    assert "Traceback" not in err and "internal error" not in err
    assert _entries(tmp_path) == before  # no output written


# --------------------------------------------------------------------------- real processes


def _mkrk(*argv: str, timeout: float = 120) -> tuple[subprocess.CompletedProcess, float]:
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "mkrk_dask.cli", *argv], capture_output=True,
                          text=True, timeout=timeout)
    return proc, time.perf_counter() - start


def test_one_line_errors_in_a_real_process(bad_files: dict[str, Path],
                                           digits_npz: Path) -> None:
    proc, _ = _mkrk("fit", str(bad_files["corrupt.npz"]))
    assert proc.returncode == 2 and "BadZipFile" not in proc.stderr
    assert proc.stderr.strip().splitlines()[-1].startswith("mkrk fit: error: ")
    proc, _ = _mkrk("fit", str(digits_npz), "--lam", "2^5000")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and "too large" in proc.stderr
    # An empty .csv: numpy's two-line warning came before the error.
    proc, _ = _mkrk("fit", str(bad_files["empty.csv"]), "-k", "3")
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
    assert "no data rows" in proc.stderr


class _Silent:
    """A TCP listener on 127.0.0.1 that accepts and never answers."""

    def __enter__(self) -> str:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        return f"tcp://127.0.0.1:{self.sock.getsockname()[1]}"

    def __exit__(self, *exc: object) -> None:
        self.sock.close()


class _Http:
    """An HTTP server on 127.0.0.1 (it waits for a request, as a Dask client never sends)."""

    def __enter__(self) -> str:
        self.server = http.server.HTTPServer(("127.0.0.1", 0), http.server.BaseHTTPRequestHandler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return f"tcp://127.0.0.1:{self.server.server_address[1]}"

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.mark.parametrize("listener", [_Silent, _Http], ids=["silent-tcp", "http"])
def test_a_listener_that_is_no_scheduler_exits_2_within_the_timeout(
        listener: type, digits_npz: Path, tmp_path: Path) -> None:
    with listener() as address:
        proc, seconds = _mkrk("fit", str(digits_npz), "--scheduler", address,
                              "--connect-timeout", "3", "--out", str(tmp_path / "run"))
    assert proc.returncode == 2, proc.stderr
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("mkrk fit: error: ") and address in last and "within 3s" in last
    # 3 s of timeout, the grace second, and the interpreter's start and end
    assert seconds < 3 + 1 + 12, seconds
    assert not (tmp_path / "run").exists()

