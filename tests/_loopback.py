"""Ports on 127.0.0.1 for the tests that start schedulers and workers in subprocesses."""

import socket
import time


def free_port() -> int:
    """A port nothing listens on at the moment, on the loopback interface."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for_port(port: int, seconds: float = 60.0) -> None:
    """Return once something accepts connections on 127.0.0.1:port; TimeoutError after
    ``seconds``."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.2)
    raise TimeoutError(f"nothing listens on 127.0.0.1:{port}")
