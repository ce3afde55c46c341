"""The TLS recipe (issue 14): cluster/tls/make-certs.sh makes a CA and certificates with
openssl; cluster/local/start-cluster.sh --tls-dir starts a scheduler and nanny workers on
tls://127.0.0.1; ``mkrk fit`` with the client certificate runs a fit over tls://, and a client
without a certificate, with one from another CA, or speaking plain tcp:// is refused with
exit code 2 within a bounded time."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from _loopback import free_port
from sklearn.datasets import load_digits

ROOT = Path(__file__).resolve().parents[2]
LOCAL = ROOT / "cluster" / "local"
MAKE_CERTS = ROOT / "cluster" / "tls" / "make-certs.sh"

pytestmark = pytest.mark.skipif(sys.platform == "win32" or shutil.which("openssl") is None,
                                reason="bash and openssl")


def _make_certs(folder: Path) -> Path:
    proc = subprocess.run(["bash", str(MAKE_CERTS), str(folder)], capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return folder


def _mkrk(*argv: str, timeout: float = 300) -> tuple[subprocess.CompletedProcess, float]:
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "mkrk_dask.cli", *argv], capture_output=True,
                          text=True, timeout=timeout)
    return proc, time.perf_counter() - start


def _tls(certs: Path) -> list[str]:
    return ["--tls-ca", str(certs / "ca.pem"), "--tls-cert", str(certs / "client.pem"),
            "--tls-key", str(certs / "client-key.pem")]


def test_make_certs_writes_a_ca_and_three_certificates(tmp_path: Path) -> None:
    certs = _make_certs(tmp_path / "certs")
    names = sorted(p.name for p in certs.iterdir())
    assert names == ["ca-key.pem", "ca.pem", "client-key.pem", "client.pem",
                     "scheduler-key.pem", "scheduler.pem", "worker-key.pem", "worker.pem"]
    for key in certs.glob("*-key.pem"):
        assert key.stat().st_mode & 0o077 == 0, key  # private keys: owner only
    verify = subprocess.run(["openssl", "verify", "-CAfile", str(certs / "ca.pem"),
                             str(certs / "client.pem"), str(certs / "scheduler.pem")],
                            capture_output=True, text=True)
    assert verify.returncode == 0, verify.stderr
    again = subprocess.run(["bash", str(MAKE_CERTS), str(certs)], capture_output=True,
                           text=True)
    assert again.returncode == 2 and "already holds a CA" in again.stderr


def test_fit_over_tls_and_clients_without_the_certificate_are_refused(tmp_path: Path) -> None:
    certs = _make_certs(tmp_path / "certs")
    foreign = _make_certs(tmp_path / "other-ca")
    X, y = load_digits(return_X_y=True)
    data = tmp_path / "digits.npz"
    np.savez(data, X=X[:200], y=y[:200])
    port = free_port()
    env = dict(os.environ, MKRK_PYTHON=sys.executable, XDG_CACHE_HOME=str(tmp_path / "cache"))
    try:
        start = subprocess.run(
            ["bash", str(LOCAL / "start-cluster.sh"), "--port", str(port), "--workers", "2",
             "--dashboard-port", "0", "--tls-dir", str(certs)],
            env=env, capture_output=True, text=True, timeout=180, cwd=tmp_path)
        assert start.returncode == 0, start.stderr
        address = start.stdout.strip().splitlines()[-1]
        assert address == f"tls://127.0.0.1:{port}"

        out = tmp_path / "run"
        fit, _ = _mkrk("fit", str(data), "--scheduler", address, *_tls(certs), "--solver",
                       "blockwise", "--chunk-size", "100", "--store", str(tmp_path / "k.zarr"),
                       "--n-init", "3", "--out", str(out))
        assert fit.returncode == 0, fit.stderr
        result = json.loads((out / "result.json").read_text())
        assert result["solver"] == "blockwise" and result["scheduler"] == address
        assert result["metrics"]["acc"] > 0.6

        refused = {
            "no certificate": [],
            "another CA": _tls(foreign),
        }
        for case, options in refused.items():
            proc, seconds = _mkrk("fit", str(data), "--scheduler", address, *options,
                                  "--connect-timeout", "5", "--out", str(tmp_path / case))
            assert proc.returncode == 2, (case, proc.stderr)
            last = proc.stderr.strip().splitlines()[-1]
            assert last.startswith("mkrk fit: error: ") and address in last, (case, last)
            assert "Traceback" not in proc.stderr
            assert seconds < 5 + 1 + 15, (case, seconds)
            assert not (tmp_path / case).exists()
        plain, seconds = _mkrk("fit", str(data), "--scheduler", f"tcp://127.0.0.1:{port}",
                               "--solver", "blockwise", "--connect-timeout", "5")
        assert plain.returncode == 2 and seconds < 5 + 1 + 15, plain.stderr
    finally:
        subprocess.run(["bash", str(LOCAL / "stop-cluster.sh"), "--port", str(port)],
                       env=env, capture_output=True, timeout=120)
