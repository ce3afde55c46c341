"""A fit whose scheduler and workers are on separate network hosts, as far as one machine
allows: three network namespaces that the test creates and removes itself, joined by veth
pairs with private addresses that exist only inside them. The scheduler and the ``mkrk``
client are in one, each worker in its own, routed through the scheduler's. Nothing shares a
loopback interface with the client, so an address that only works on 127.0.0.1 fails here.

The second worker also runs in a mount namespace of its own, where a tmpfs hides one folder:
a store there is one that worker cannot see, and the error must name it.

Skips with one line where network namespaces cannot be made (not root, no ``ip``, refused).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import numpy as np
import pytest
from sklearn.datasets import load_digits

pytestmark = [pytest.mark.slow,  # about 45 s: three clusters of processes and three fits
              pytest.mark.skipif(sys.platform != "linux", reason="network namespaces: Linux")]

ROOT = Path(__file__).resolve().parents[2]
PORT = 8786
SUBNET = "10.77"  # private; exists only inside the namespaces below


def _ip(*args: str) -> None:
    done = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=20)
    if done.returncode:
        raise RuntimeError(f"ip {' '.join(args)}: {done.stderr.strip()}")


class Hosts:
    """Namespaces ``s`` (scheduler, client), ``w1`` and ``w2`` (workers)."""

    def __init__(self) -> None:
        tag = uuid.uuid4().hex[:6]
        self.ns = {role: f"mkrk-{tag}-{role}" for role in ("s", "w1", "w2")}
        self.made: list[str] = []
        self.procs: list[subprocess.Popen] = []

    def up(self) -> None:
        for name in self.ns.values():
            _ip("netns", "add", name)
            self.made.append(name)
            _ip("-n", name, "link", "set", "lo", "up")
        s = self.ns["s"]
        for i, role in ((1, "w1"), (2, "w2")):
            a, b = f"v{i}s-{self.ns['s'][5:11]}", f"v{i}w-{self.ns['s'][5:11]}"
            _ip("link", "add", a, "netns", s, "type", "veth", "peer", "name", b, "netns",
                self.ns[role])
            _ip("-n", s, "addr", "add", f"{SUBNET}.{i}.1/24", "dev", a)
            _ip("-n", s, "link", "set", a, "up")
            _ip("-n", self.ns[role], "addr", "add", f"{SUBNET}.{i}.2/24", "dev", b)
            _ip("-n", self.ns[role], "link", "set", b, "up")
            _ip("-n", self.ns[role], "route", "add", "default", "via", f"{SUBNET}.{i}.1")
        # the workers reach each other through the scheduler's namespace
        self.exec("s", ["sysctl", "-qw", "net.ipv4.ip_forward=1"]).wait(10)

    def exec(self, role: str, command: list[str], **kwargs) -> subprocess.Popen:
        proc = subprocess.Popen(["ip", "netns", "exec", self.ns[role], *command],
                                start_new_session=True, **kwargs)
        self.procs.append(proc)
        return proc

    def down(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
        for proc in self.procs:
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(5)
        for name in self.made:  # removing a namespace removes its veth ends
            subprocess.run(["ip", "netns", "del", name], capture_output=True, timeout=20)


@pytest.fixture
def hosts(tmp_path: Path):
    if os.geteuid() != 0 or shutil.which("ip") is None or shutil.which("unshare") is None:
        pytest.skip("network namespaces need root and iproute2/util-linux (ip, unshare)")
    made = Hosts()
    try:
        made.up()
    except RuntimeError as err:
        made.down()
        pytest.skip(f"network namespaces refused here: {err}")
    yield made
    made.down()


def _env() -> dict[str, str]:
    return dict(os.environ, PYTHONPATH=os.pathsep.join(
        p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p))


def _wait_for_workers(hosts: Hosts, address: str, n: int, seconds: float = 90) -> None:
    probe = ("import sys; from distributed import Client; "
             f"c = Client({address!r}, timeout=30); c.wait_for_workers({n}, timeout={seconds}); "
             "print(sorted(c.scheduler_info()['workers']))")
    proc = hosts.exec("s", [sys.executable, "-c", probe], env=_env(),
                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    out, err = proc.communicate(timeout=seconds + 40)
    assert proc.returncode == 0, err[-2000:]
    assert f"{SUBNET}.1.2" in out and f"{SUBNET}.2.2" in out, out


def test_fit_across_network_namespaces(hosts: Hosts, tmp_path: Path) -> None:
    X, y = load_digits(return_X_y=True)
    data = tmp_path / "digits.npz"
    np.savez(data, X=X[:200], y=y[:200])
    hidden = tmp_path / "hidden"  # an empty tmpfs here for the second worker
    hidden.mkdir()
    env = _env()
    address = f"tcp://{SUBNET}.1.1:{PORT}"
    hosts.exec("s", [sys.executable, "-m", "distributed.cli.dask_scheduler", "--host",
                     f"{SUBNET}.1.1", "--port", str(PORT), "--no-dashboard"], env=env,
               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    worker = [sys.executable, "-m", "distributed.cli.dask_worker", address, "--nthreads", "1",
              "--no-dashboard", "--local-directory", str(tmp_path / "spill"), "--host"]
    hosts.exec("w1", [*worker, f"{SUBNET}.1.2"], env=env, stdout=subprocess.DEVNULL,
               stderr=subprocess.DEVNULL)
    hide = f"mount -t tmpfs tmpfs {hidden} && exec \"$@\""
    hosts.exec("w2", ["unshare", "--mount", "--propagation", "private", "sh", "-c", hide,
                      "sh", *worker, f"{SUBNET}.2.2"], env=env, stdout=subprocess.DEVNULL,
               stderr=subprocess.DEVNULL)
    _wait_for_workers(hosts, address, 2)

    def fit(store: Path, out: Path) -> subprocess.CompletedProcess:
        proc = hosts.exec("s", [sys.executable, "-m", "mkrk_dask.cli", "fit", str(data),
                                "--scheduler", address, "--solver", "blockwise",
                                "--chunk-size", "50", "--seed", "0", "-q", "--store",
                                str(store), "--out", str(out)],
                          env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        stdout, stderr = proc.communicate(timeout=300)
        return subprocess.CompletedProcess(proc.args, proc.returncode, stdout, stderr)

    done = fit(tmp_path / "shared" / "k.zarr", tmp_path / "run")
    assert done.returncode == 0, done.stderr
    # the same fit on the embedded LocalCluster
    local = subprocess.run([sys.executable, "-m", "mkrk_dask.cli", "fit", str(data),
                            "--solver", "blockwise", "--chunk-size", "50", "--seed", "0", "-q",
                            "--store", str(tmp_path / "local.zarr"), "--out",
                            str(tmp_path / "local")], env=env, capture_output=True, text=True,
                           timeout=300)
    assert local.returncode == 0, local.stderr
    np.testing.assert_allclose(np.load(tmp_path / "run" / "weights.npy"),
                               np.load(tmp_path / "local" / "weights.npy"), rtol=0, atol=1e-10)
    np.testing.assert_array_equal(np.load(tmp_path / "run" / "labels.npy"),
                                  np.load(tmp_path / "local" / "labels.npy"))

    start = time.monotonic()
    blind = fit(hidden / "k.zarr", tmp_path / "run-hidden")
    assert blind.returncode == 2, blind.stderr
    assert time.monotonic() - start < 60
    message = blind.stderr.strip()
    assert "\n" not in message, message
    assert f"worker tcp://{SUBNET}.2.2:" in message and "cannot see the store" in message, (
        message)
