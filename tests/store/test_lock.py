"""Concurrent builders of one store (issue 45): the second fails at once with one line naming
the builder, never resumes (and damages) a build in progress; a lock left by a dead process
is taken over."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from mkrk_dask.store import create_store, mark_complete, open_store
from mkrk_dask.store.lock import StoreBusyError

META = {"n": 10}

HOLDER = textwrap.dedent("""
    import sys, time
    from mkrk_dask.store import create_store
    create_store(sys.argv[1], kind="kernels", metadata={"n": 10})
    print("building", flush=True)
    time.sleep(120)
""")


@pytest.fixture
def builder(tmp_path):
    """Another process that has created the store and is building it."""
    proc = subprocess.Popen([sys.executable, "-c", HOLDER, str(tmp_path / "s.zarr")],
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "building"
    yield proc
    proc.kill()
    proc.wait(timeout=30)


def test_a_second_builder_fails_in_one_line_and_changes_nothing(tmp_path, builder):
    path = tmp_path / "s.zarr"
    before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
    # it would resume the incomplete store, or create it anew (even deleting it: overwrite)
    for attempt in (lambda: open_store(path, kind="kernels", expected=META),
                    lambda: create_store(path, kind="kernels", metadata=META),
                    lambda: create_store(path, kind="kernels", metadata=META,
                                         overwrite=True)):
        with pytest.raises(StoreBusyError, match=f"pid {builder.pid} .* is building the store"
                           ) as caught:
            attempt()
        assert "\n" not in str(caught.value)
    assert sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*")) == before


def test_the_lock_of_a_dead_builder_is_taken_over(tmp_path, builder):
    path = tmp_path / "s.zarr"
    builder.kill()
    builder.wait(timeout=30)
    group, complete = open_store(path, kind="kernels", expected=META)  # resumed
    assert group is not None and not complete
    group.create_array("x", shape=(2,), dtype="f8")[...] = np.ones(2)
    mark_complete(group)
    assert not os.path.exists(f"{path}.mkrk-lock")  # released once complete
    assert open_store(path, kind="kernels", expected=META)[1] is True


def test_the_command_line_says_another_process_builds_the_store(tmp_path, builder):
    from sklearn.datasets import load_digits

    X, _ = load_digits(return_X_y=True)
    np.savez(tmp_path / "d.npz", X=X[:300])
    fit = subprocess.run([sys.executable, "-m", "mkrk_dask.cli", "fit", str(tmp_path / "d.npz"),
                          "--n-clusters", "3", "--solver", "blockwise", "--workers", "1", "-q",
                          "--kernels", "cosine", "gaussian(c=1)",
                          "--store", str(tmp_path / "s.zarr")],
                         capture_output=True, text=True, timeout=300)
    assert fit.returncode == 2, fit.stderr
    assert len(fit.stderr.strip().splitlines()) == 1
    assert "is building the store" in fit.stderr


# -- the loop checkpoint of a fit on a complete store -------------------------------------------

SAVER = textwrap.dedent("""
    import sys, time
    import numpy as np, zarr
    from mkrk_dask.store.checkpoints import LoopCheckpoint
    checkpoint = LoopCheckpoint(zarr.open_group(sys.argv[1]), sys.argv[2])
    checkpoint.save({{"iteration": 1, "certified": True, "converged": False,
                     "basis_kind": "dense", "weights": np.full(3, 1 / 3)}})
    print("saved", flush=True)
    {then}
""")


def _state(iteration):
    return {"iteration": iteration, "certified": True, "converged": False,
            "basis_kind": "dense", "weights": np.arange(3.0) + iteration}


def test_a_second_process_running_the_same_fit_fails_in_one_line(tmp_path):
    import zarr

    from mkrk_dask.store.checkpoints import LoopCheckpoint

    path = tmp_path / "s.zarr"
    zarr.open_group(str(path), mode="w")
    proc = subprocess.Popen([sys.executable, "-c", SAVER.format(then="time.sleep(120)"),
                             str(path), "same"], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "saved"
        group = zarr.open_group(str(path))
        for attempt in (lambda: LoopCheckpoint(group, "same").load(),
                        lambda: LoopCheckpoint(group, "same").save(_state(1))):
            with pytest.raises(StoreBusyError, match=f"pid {proc.pid} .* runs a fit with the "
                               "same settings") as caught:
                attempt()
            assert "\n" not in str(caught.value)
        # the holder's state is untouched, and a fit with other settings goes on beside it
        other = LoopCheckpoint(group, "other")
        other.save(_state(4))
        assert other.load()["iteration"] == 4
        other.release()
    finally:
        proc.kill()
        proc.wait(timeout=30)
    # the holder is gone: its lock is stale, its state is resumed
    state = LoopCheckpoint(zarr.open_group(str(path)), "same").load()
    assert state["iteration"] == 1
    np.testing.assert_array_equal(state["weights"], np.full(3, 1 / 3))


def test_fits_with_other_settings_never_drop_each_others_state(tmp_path):
    """A group opened before another process saved its fit's state, then saved through:
    both states stay (one shared attribute table would be rewritten from stale metadata)."""
    import zarr

    from mkrk_dask.store.checkpoints import LoopCheckpoint

    path = tmp_path / "s.zarr"
    zarr.open_group(str(path), mode="w")
    group = zarr.open_group(str(path))  # opened before the other process writes
    subprocess.run([sys.executable, "-c", SAVER.format(then="pass"), str(path), "first"],
                   check=True, timeout=120, capture_output=True)
    mine = LoopCheckpoint(group, "second")
    mine.save(_state(2))
    assert mine.save(_state(3), force=True)
    mine.release()
    reopened = zarr.open_group(str(path))
    assert LoopCheckpoint(reopened, "first").load()["iteration"] == 1
    assert LoopCheckpoint(reopened, "second").load()["iteration"] == 3


def test_the_loop_state_is_saved_after_the_first_iteration_then_at_most_every_interval(
        tmp_path, monkeypatch):
    import zarr

    from mkrk_dask.store import checkpoints
    from mkrk_dask.store.checkpoints import LoopCheckpoint

    group = zarr.open_group(str(tmp_path / "s.zarr"), mode="w")
    monkeypatch.setattr(checkpoints, "_LOOP_SAVE_INTERVAL", 3600.0)
    saver = LoopCheckpoint(group, "k")
    assert saver.save(_state(1))  # the first iteration's, always
    assert not saver.save(_state(2))  # too soon: the saved state stays the first
    assert LoopCheckpoint(group, "k").load()["iteration"] == 1
    monkeypatch.setattr(checkpoints, "_LOOP_SAVE_INTERVAL", 0.0)
    assert saver.save(_state(3))
    assert LoopCheckpoint(group, "k").load()["iteration"] == 3
    saver.release()
