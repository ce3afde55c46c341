"""Every worker and nanny of the cluster SIGKILLed during a fit (issue 45): the fit ends within
60 s with exit code 3 and one line naming the fault, never a hang."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import psutil
import pytest
from _loopback import blockwise_fit_on_a_cluster

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")


def test_every_worker_killed_after_an_iteration_exits_3(tmp_path: Path) -> None:
    """Blockwise: its iterations run on the workers (a Nystrom fit's run on the client). At
    a lambda where the weights move, so that the fit still needs the workers after its first
    iteration: at the default lambda the loop ends there, and the embedding is its H-step."""
    with blockwise_fit_on_a_cluster(tmp_path, 2, "-v", "--lam", "0.0625") as (_, nanny, fit):
        lines = []
        for line in fit.stderr:
            lines.append(line)
            if "iter   1 " in line:
                break
        else:
            pytest.fail("the fit ended before its first iteration: " + "".join(lines))
        parent = psutil.Process(nanny.pid)
        doomed = [*parent.children(recursive=True), parent]
        assert len(doomed) >= 3  # the dask-worker process, its nannies and their workers
        for proc in doomed:
            proc.kill()
        killed = time.monotonic()
        _, err = fit.communicate(timeout=120)
        seconds = time.monotonic() - killed
        err = "".join(lines) + err
        last = err.strip().splitlines()[-1]
        assert fit.returncode == 3, err
        assert last.startswith("mkrk fit: error: ") and "worker" in last, err
        assert "same --store" in last
        assert "Traceback" not in err
        assert seconds < 60, seconds
