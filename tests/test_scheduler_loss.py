"""A scheduler lost during ``mkrk fit`` (issue 14): a real scheduler and a nanny worker on
127.0.0.1, the scheduler SIGKILLed once the fit's passes run; the command ends within 60 s
with exit code 3 and one line of error."""

from __future__ import annotations

import signal
import sys
import time
from pathlib import Path

import pytest
from _loopback import blockwise_fit_on_a_cluster

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")


def test_scheduler_killed_mid_fit_exits_3(tmp_path: Path) -> None:
    with blockwise_fit_on_a_cluster(tmp_path, 1) as (scheduler, _, fit):
        # Once a pass over the cluster has finished, the fit depends on the scheduler.
        for line in fit.stderr:
            if line.startswith("[dask]") and "done" in line:
                break
        else:
            pytest.fail("the fit ended before any Dask pass: " + fit.communicate()[1])
        scheduler.send_signal(signal.SIGKILL)
        killed = time.monotonic()
        _, err = fit.communicate(timeout=90)
        seconds = time.monotonic() - killed
        assert fit.returncode == 3, err
        last = err.strip().splitlines()[-1]
        assert last.startswith("mkrk fit: error: ") and "scheduler" in last, err
        assert "Traceback" not in err
        assert seconds < 60, seconds
        assert not (tmp_path / "run").exists()
