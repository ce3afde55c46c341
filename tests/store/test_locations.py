"""Stores at any URL and the visibility checks (mkrk_dask.store.locations), with real parts: an
S3-compatible server on 127.0.0.1 (moto's server mode), worker processes, and a worker that
really cannot see the client's disk (its own mount namespace)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import zarr
from _loopback import free_port, wait_for_port
from distributed import Client, LocalCluster

from mkrk_dask import MKKMRK, StoreError
from mkrk_dask.store.locations import StoreLocation

X = np.random.default_rng(5).normal(size=(150, 4))
KERNELS = ["cosine", "polynomial(a=1,b=2)", "gaussian(c=0.3)"]


def test_locations_parse_paths_and_urls(tmp_path):
    local = StoreLocation.parse(tmp_path / "a.zarr")
    assert local.is_local and local.url == str((tmp_path / "a.zarr").resolve())
    assert StoreLocation.parse(f"file://{tmp_path}/b.zarr").is_local
    url = StoreLocation.parse("s3://bucket/run.zarr/", {"anon": True})
    assert not url.is_local and url.url == "s3://bucket/run.zarr"
    with pytest.raises(ValueError, match="apply to URL stores"):
        StoreLocation.parse(tmp_path, {"anon": True})
    with pytest.raises(TypeError, match="path or a URL"):
        StoreLocation.parse(3)


def test_memory_url_store_gives_the_local_disk_result(client, tmp_path, monkeypatch):
    common = dict(kernels=KERNELS, scheduler=client, random_state=0)
    for solver in ("blockwise", "nystrom"):
        extra = ({"backend_options": {"n_landmarks": 40}} if solver == "nystrom"
                     else {})
        disk = MKKMRK.paper(3, solver=solver, store=tmp_path / f"{solver}.zarr", **common,
                      **extra).fit(X)
        memory = MKKMRK.paper(3, solver=solver, store=f"memory://mkrk-test/{solver}.zarr", **common,
                        **extra).fit(X)
        np.testing.assert_array_equal(memory.weights_, disk.weights_)
        np.testing.assert_array_equal(memory.labels_, disk.labels_)
    # Above the local part, store_factors="auto" stores the factors on local disk only (here
    # as for wide data, where computing them again would cost more): the memory:// store gets
    # none, and the final pass computes F B again from the data.
    from mkrk_dask.backends.nystrom import build

    monkeypatch.setattr(build, "STORE_FLOPS_PER_BYTE", 0)
    plain = dict(common, solver="nystrom",
                 backend_options={"n_landmarks": 40, "exact_dissimilarity_max_n": 0})
    disk = MKKMRK.paper(3, store=tmp_path / "plain.zarr", **plain).fit(X)
    memory = MKKMRK.paper(3, store="memory://mkrk-test/plain.zarr", **plain).fit(X)
    assert disk.nystrom_model_.info["factors_storage"].startswith("stored")
    assert memory.nystrom_model_.info["factors_storage"] == ("not stored: the store is not on "
                                                             "local disk")
    np.testing.assert_allclose(memory.embedding_, disk.embedding_, atol=1e-6)
    np.testing.assert_array_equal(memory.labels_, disk.labels_)


@pytest.fixture(scope="module")
def s3_server():
    """moto's S3 server on 127.0.0.1, credentials and endpoint in the environment (as a user
    would set them; inherited by worker processes)."""
    pytest.importorskip("s3fs")
    pytest.importorskip("moto")
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p",
                             str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    saved = {k: os.environ.get(k) for k in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY",
                                            "AWS_DEFAULT_REGION", "AWS_ENDPOINT_URL")}
    os.environ.update(AWS_ACCESS_KEY_ID="mkrk-test-key-id",
                      AWS_SECRET_ACCESS_KEY="mkrk-test-secret", AWS_DEFAULT_REGION="us-east-1",
                      AWS_ENDPOINT_URL=f"http://127.0.0.1:{port}")
    try:
        wait_for_port(port)
        import s3fs

        s3fs.S3FileSystem().mkdir("mkrk-bucket")
        yield "s3://mkrk-bucket"
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def test_s3_store_with_worker_processes_gives_the_local_disk_result(s3_server, tmp_path):
    import s3fs

    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                      dashboard_address="127.0.0.1:0") as lc, Client(lc, set_as_default=False) as c:
        for solver in ("blockwise", "nystrom"):
            extra = ({"backend_options": {"n_landmarks": 40}} if solver == "nystrom"
                     else {})
            common = dict(kernels=KERNELS, solver=solver, scheduler=c, random_state=0,
                          **extra)
            disk = MKKMRK.paper(3, store=tmp_path / f"{solver}.zarr", **common).fit(X)
            url = f"{s3_server}/{solver}.zarr"
            s3 = MKKMRK.paper(3, store=url, **common).fit(X)
            np.testing.assert_array_equal(s3.weights_, disk.weights_)
            np.testing.assert_array_equal(s3.labels_, disk.labels_)
            again = MKKMRK.paper(3, store=url, **common).fit(X)  # reopened, not rebuilt
            np.testing.assert_array_equal(again.weights_, disk.weights_)
            metadata = s3fs.S3FileSystem().cat_file(f"{url}/zarr.json").decode()
            assert json.loads(metadata)["attributes"]["complete"] is True
            assert "mkrk-test-key-id" not in metadata and "mkrk-test-secret" not in metadata


def test_the_documented_object_store_command(s3_server, tmp_path):
    # docs/cluster.rst and cluster/kubernetes/README.md show this command: `mkrk fit` submitted
    # to a scheduler whose worker processes share no disk with it, the store on an S3 server
    # given by --storage-option, the credentials from the AWS variables only.
    data = tmp_path / "mydata.npz"
    np.savez(data, X=X)
    env = {k: v for k, v in os.environ.items() if k != "AWS_ENDPOINT_URL"}
    endpoint = os.environ["AWS_ENDPOINT_URL"]
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                      dashboard_address="127.0.0.1:0") as lc:
        outs = {}
        for name, store in (("s3", f"{s3_server}/mydata.zarr"),
                            ("disk", str(tmp_path / "mydata.zarr"))):
            outs[name] = tmp_path / f"run-{name}"
            options = ["--storage-option", f"endpoint_url={endpoint}"] if name == "s3" else []
            fit = subprocess.run(
                [sys.executable, "-m", "mkrk_dask.cli", "fit", str(data), "--n-clusters", "3",
                 "--scheduler", lc.scheduler_address, "--solver", "blockwise", "--store",
                 store, *options, "--out", str(outs[name])], env=env, capture_output=True,
                text=True, timeout=300, cwd=tmp_path)
            assert fit.returncode == 0, fit.stderr
    import s3fs

    listed = s3fs.S3FileSystem().find(f"{s3_server}/mydata.zarr")
    assert any(path.endswith("zarr.json") for path in listed)  # the store is on S3
    assert not (tmp_path / "s3:").exists()  # and not on a local path named like the URL
    for name in ("weights.npy", "labels.npy"):
        np.testing.assert_array_equal(np.load(outs["s3"] / name), np.load(outs["disk"] / name))


def _blind_worker(address: str, hidden: Path) -> subprocess.Popen:
    """A worker process that sees an empty directory where the client has ``hidden``: its
    own mount namespace with a tmpfs over it (as a cluster node with another disk)."""
    worker = [sys.executable, "-m", "distributed.cli.dask_worker", address, "--nthreads", "1",
              "--no-dashboard", "--host", "127.0.0.1", "--no-nanny"]
    script = f"mount -t tmpfs mkrk-hidden {hidden} && exec " + " ".join(worker)
    if shutil.which("unshare") is None:
        pytest.skip("unshare (util-linux) is needed for a worker with its own mount namespace")
    probe = subprocess.run(["unshare", "--mount", "--propagation", "private", "true"],
                           capture_output=True)
    if probe.returncode != 0:
        pytest.skip(f"cannot make a mount namespace here: {probe.stderr.decode().strip()}")
    return subprocess.Popen(["unshare", "--mount", "--propagation", "private", "sh", "-c",
                             script], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def test_a_worker_that_cannot_see_the_store_gets_a_clear_error(tmp_path, monkeypatch):
    hidden = tmp_path / "client-only"
    hidden.mkdir()
    with LocalCluster(n_workers=0, processes=True, host="127.0.0.1",
                      dashboard_address="127.0.0.1:0") as lc, Client(lc, set_as_default=False) as c:
        proc = _blind_worker(lc.scheduler_address, hidden)
        try:
            c.wait_for_workers(1, timeout=60)
            for solver in ("blockwise", "nystrom"):
                store = hidden / f"{solver}.zarr"
                model = MKKMRK.paper(3, kernels=KERNELS, solver=solver, store=store, scheduler=c)
                with pytest.raises(StoreError, match="cannot see the store") as caught:
                    model.fit(X)
                assert "\n" not in str(caught.value) and str(store) in str(caught.value)
                assert not hasattr(model, "labels_")
            # No store given: the temporary one is on the client's disk, which this worker
            # does not share.
            import tempfile

            monkeypatch.setattr(tempfile, "tempdir", str(hidden))
            with pytest.raises(StoreError, match="cannot see the store"):
                MKKMRK.paper(3, kernels=KERNELS, solver="blockwise", scheduler=c).fit(X)
            monkeypatch.undo()
            # Input in a Zarr array only the client can read: named, never read as zeros.
            array = zarr.create_array(str(hidden / "x.zarr"), shape=X.shape, chunks=(50, 4),
                                      dtype="float64")
            array[...] = X
            with pytest.raises(StoreError, match="cannot read input view 0"):
                MKKMRK.paper(3, kernels=KERNELS, solver="nystrom", scheduler=c,
                       store=tmp_path / "visible.zarr").fit(array)
        finally:
            proc.terminate()
            proc.wait(timeout=30)


def test_the_visibility_check_asks_a_worker_that_failed_again(tmp_path):
    # A worker killed just before the check (its nanny restarting it) resets the connection;
    # the check asks again instead of failing the fit, and fails in one line if none answers.
    from mkrk_dask.store.locations import _ask_every_worker

    def fails_once(flag: str) -> str:
        if not os.path.exists(flag):
            Path(flag).touch()
            raise OSError("connection reset by peer (stand-in)")
        return "ok"

    def always_fails(_: object) -> str:
        raise OSError("gone")

    with LocalCluster(n_workers=2, threads_per_worker=1, processes=False,
                      dashboard_address="127.0.0.1:0",
                      worker_dashboard_address="127.0.0.1:0") as lc, \
            Client(lc, set_as_default=False) as c:
        answers = _ask_every_worker(c, fails_once, str(tmp_path / "failed"))
        assert set(answers) == set(c.nthreads()) and set(answers.values()) == {"ok"}
        with pytest.raises(StoreError, match="no worker answered") as caught:
            _ask_every_worker(c, always_fails, None)
        assert "\n" not in str(caught.value)


def test_credentials_in_a_store_url_are_refused_and_never_printed(tmp_path, capsys):
    """Round 4: ``s3://KEY:SECRET@bucket`` failed with exit 2 and printed the key and the
    secret (the filesystem took them for the bucket's name and quoted it)."""
    url = "s3://AKIAEXAMPLEKEY:VerySecretValue42@bucket/run.zarr"
    with pytest.raises(ValueError, match="carries credentials") as caught:
        StoreLocation.parse(url)
    assert "AKIAEXAMPLEKEY" not in str(caught.value)
    assert "VerySecretValue42" not in str(caught.value)
    data = tmp_path / "d.npz"
    np.savez(data, X=X)
    from mkrk_dask.cli import main

    code = main(["fit", str(data), "-k", "3", "--solver", "blockwise", "--store", url,
                 "--out", str(tmp_path / "run")])
    err = capsys.readouterr().err
    assert code == 2
    assert "AKIAEXAMPLEKEY" not in err and "VerySecretValue42" not in err
    assert err.strip().splitlines()[-1].startswith("mkrk fit: error: the store URL s3://***@")
    assert not (tmp_path / "run").exists()


def test_a_message_quoting_a_secret_is_masked_on_the_command_line():
    """Whatever a library says about a URL or an option's value, the command line's error
    masks it: the user information of any URL in it, and the secret words of the command."""
    from mkrk_dask.secrets import mask_text, secrets_of_argv

    argv = ["fit", "x.npz", "--store", "gs://me:hunter2pass@b/x.zarr",
            "--storage-option", "secret=s3cr3tvalue", "--storage-option=token=abcdef123",
            "--storage-option", "endpoint_url=http://127.0.0.1:9000"]
    secrets = secrets_of_argv(argv)
    said = ('Invalid bucket name "me:hunter2pass@b"; s3cr3tvalue refused; token abcdef123; '
            "see ftp://u:pw99@host/x")
    masked = mask_text(said, secrets)
    for word in ("hunter2pass", "s3cr3tvalue", "abcdef123", "pw99"):
        assert word not in masked
    assert "Invalid bucket name" in masked and "ftp://***@host/x" in masked
    # an endpoint is no credential: a message naming it keeps it
    assert mask_text("endpoint http://127.0.0.1:9000", secrets) == \
        "endpoint http://127.0.0.1:9000"
