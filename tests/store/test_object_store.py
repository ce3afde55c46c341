"""Object stores as a user meets them (issue 45), on moto's S3 server on 127.0.0.1: credentials
given with --storage-option never reach a file under --out, a saved model, the store's
metadata or the log; a mistyped bucket is refused, never created; an unreachable endpoint or
denied access is one line with exit code 2, within the connect timeout."""

from __future__ import annotations

import io
import os
import subprocess
import sys
import time

import numpy as np
import pytest
from _loopback import free_port, wait_for_port

from mkrk_dask.cli import main

pytest.importorskip("s3fs")
pytest.importorskip("moto")

KEY, SECRET = "AKIAMKRKKEY45TEST", "mkrk/secret+45+do-not-write"
rng = np.random.default_rng(45)
X = np.vstack([rng.normal(c, 0.5, size=(40, 4)) for c in (0.0, 3.0, 6.0)])
KERNELS = ["--kernels", "cosine", "gaussian(c=1)"]


def _moto(port: int, **env: str) -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p",
                             str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            env=dict(os.environ, **env))
    wait_for_port(port)
    return proc


@pytest.fixture(scope="module")
def endpoint(tmp_path_factory):
    """moto's S3 server with one bucket; no AWS variables in this process, so only the
    --storage-option values can be the credentials."""
    saved = {k: os.environ.pop(k) for k in list(os.environ) if k.startswith("AWS_")}
    port = free_port()
    proc = _moto(port)
    url = f"http://127.0.0.1:{port}"
    try:
        import s3fs

        s3fs.S3FileSystem(key=KEY, secret=SECRET, endpoint_url=url).mkdir("mkrk-bucket")
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        os.environ.update(saved)


def _options(endpoint: str) -> list[str]:
    return ["--storage-option", f"key={KEY}", f"--storage-option=secret={SECRET}",
            "--storage-option", f"endpoint_url={endpoint}"]


def _fs(endpoint: str):
    import s3fs

    return s3fs.S3FileSystem(key=KEY, secret=SECRET, endpoint_url=endpoint,
                             skip_instance_cache=True)


def _no_secret_in(data: bytes, where: str) -> None:
    for secret in (KEY, SECRET):
        assert secret.encode() not in data, f"{secret} written to {where}"


@pytest.mark.parametrize("solver", ["blockwise", "nystrom"])
def test_no_credential_reaches_out_the_model_the_store_or_the_log(endpoint, tmp_path, capsys,
                                                                  solver):
    np.savez(tmp_path / "data.npz", X=X)
    out = tmp_path / "run"
    store = f"s3://mkrk-bucket/{solver}.zarr"
    extra = ["--n-landmarks", "30"] if solver == "nystrom" else []
    code = main(["fit", str(tmp_path / "data.npz"), "--n-clusters", "3", "--solver", solver,
                 "--store", store, *_options(endpoint), "--out", str(out), "--workers", "1",
                 "-vv", *KERNELS, *extra])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    files = [p for p in out.rglob("*") if p.is_file()]
    assert any(p.name == "result.json" for p in files) and len(files) > 5
    for path in files:
        _no_secret_in(path.read_bytes(), str(path))
    _no_secret_in((captured.out + captured.err).encode(), "the log")
    assert "key=***" in (out / "result.json").read_text()  # the keys are kept
    fs = _fs(endpoint)
    for name in fs.find(store):
        if name.endswith(".json"):
            _no_secret_in(fs.cat_file(name), name)


def test_a_model_fitted_with_storage_options_keeps_no_credential(endpoint):
    import joblib

    from mkrk_dask import MKKMRK

    model = MKKMRK.paper(3, kernels=["cosine", "gaussian(c=1)"], solver="blockwise",
                         store="s3://mkrk-bucket/python.zarr",
                         storage_options={"key": KEY, "secret": SECRET,
                                          "endpoint_url": endpoint}).fit(X)
    buffer = io.BytesIO()
    joblib.dump(model, buffer)
    _no_secret_in(buffer.getvalue(), "the joblib dump")
    loaded = joblib.load(io.BytesIO(buffer.getvalue()))
    assert sorted(loaded.storage_options) == ["endpoint_url", "key", "secret"]
    assert SECRET not in repr(loaded.get_params())
    np.testing.assert_array_equal(loaded.labels_, model.labels_)


def _refused(argv: list[str], capsys) -> tuple[str, float]:
    start = time.monotonic()
    code = main(argv)
    seconds = time.monotonic() - start
    err = capsys.readouterr().err
    assert code == 2, err
    assert len(err.strip().splitlines()) == 1, err
    _no_secret_in(err.encode(), "the error")
    return err, seconds


def test_a_mistyped_bucket_is_refused_never_created(endpoint, tmp_path, capsys):
    np.savez(tmp_path / "data.npz", X=X)
    err, _ = _refused(["fit", str(tmp_path / "data.npz"), "--n-clusters", "3", "--solver",
                       "blockwise", "--store", "s3://mkrk-bucekt/run.zarr", *_options(endpoint),
                       "--workers", "1", "-q"], capsys)
    assert "'mkrk-bucekt'" in err and "does not exist" in err
    assert _fs(endpoint).ls("") == ["mkrk-bucket"]


def test_a_store_over_its_size_limit_is_refused_before_any_write(endpoint, tmp_path, capsys):
    # Issue 77: an object store has no free space to read, so only a size limit can stop a
    # store that would not fit: refused by the plan in one line, exit 2, before the first
    # byte (nothing under the store's name in the bucket, no --out folder); the same limit
    # in Python (backend_options) for stored Nystrom factors.
    from mkrk_dask import MKKMRK
    from mkrk_dask.exceptions import ProblemTooLargeError

    np.savez(tmp_path / "data.npz", X=X)
    store = "s3://mkrk-bucket/limited.zarr"
    err, _ = _refused(["fit", str(tmp_path / "data.npz"), "--n-clusters", "3", "--solver",
                       "blockwise", "--store", store, *_options(endpoint), "--max-store-bytes",
                       "1000", "--out", str(tmp_path / "run"), "--workers", "1", "-q"], capsys)
    assert "max_store_bytes=1,000" in err and "nothing was written" in err, err
    assert not _fs(endpoint).exists(store) and not (tmp_path / "run").exists()
    factors = "s3://mkrk-bucket/limited-factors.zarr"
    model = MKKMRK(3, solver="nystrom", store=factors, backend_options={
        "store_factors": True, "n_landmarks": 30, "max_store_bytes": 1000},
        storage_options={"key": KEY, "secret": SECRET, "endpoint_url": endpoint})
    with pytest.raises(ProblemTooLargeError, match="more than max_store_bytes=1,000"):
        model.fit(X)
    assert not _fs(endpoint).exists(factors)


def test_an_unreachable_endpoint_is_one_line_within_the_timeout(tmp_path, capsys):
    np.savez(tmp_path / "data.npz", X=X)
    nowhere = f"http://127.0.0.1:{free_port()}"
    err, seconds = _refused(["fit", str(tmp_path / "data.npz"), "--n-clusters", "3",
                             "--solver", "blockwise", "--store", "s3://mkrk-bucket/run.zarr",
                             *_options(nowhere), "--workers", "1", "-q"], capsys)
    assert nowhere in err and "cannot be used" in err
    assert seconds < 10, seconds


def test_denied_access_is_one_line(tmp_path, capsys):
    """moto enforcing authentication: the credentials given are unknown to it."""
    np.savez(tmp_path / "data.npz", X=X)
    port = free_port()
    proc = _moto(port, INITIAL_NO_AUTH_ACTION_COUNT="0")
    try:
        err, _ = _refused(["fit", str(tmp_path / "data.npz"), "--n-clusters", "3", "--solver",
                           "blockwise", "--store", "s3://mkrk-bucket/run.zarr",
                           *_options(f"http://127.0.0.1:{port}"), "--workers", "1", "-q"],
                          capsys)
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    assert "mkrk-bucket" in err and ("denied" in err or "cannot be used" in err)
