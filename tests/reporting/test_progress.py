"""Progress reports (mkrk_dask.progress): levels, streams, and the pass lines."""

from __future__ import annotations

import io

from mkrk_dask import progress


def test_reporting_levels_and_streams():
    assert not progress.is_active() and not progress.reporter().wants(1)
    stream = io.StringIO()
    with progress.reporting(1, stream) as rep:
        assert progress.reporter() is rep and progress.is_active()
        rep.log("shown")
        rep.log("hidden", level=2)
        bar = rep.task_pass("kernel build", 3)
        for _ in range(3):
            bar.advance()
        bar.finish()
        rep.task_pass("eigensolver product", 3, level=2).finish()
        rep.task_pass("single task", 1).finish()
    assert not progress.is_active()
    lines = stream.getvalue().splitlines()
    assert lines[0] == "shown"
    assert lines[1].startswith("[dask] kernel build") and "3/3 tasks done" in lines[1]
    assert len(lines) == 2
