"""The command line's streams, help and outputs (issue 15): results on stdout and only those,
logs on stderr at three verbosities, every option explained with its default once, ``--out``
checked before the fit and never overwriting an earlier run without ``--force``, and the
files of a fit (version, kernel names). Real runs on small data, real subprocesses."""

from __future__ import annotations

import argparse
import csv
import json
import os
import pickle
import re
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import mkrk_dask
import mkrk_dask.cli.commands
from mkrk_dask.cli import build_parser, main
from mkrk_dask.cli.parser import COMMANDS, help_text

NYSTROM = ["--solver", "nystrom", "--n-landmarks", "60", "--chunk-size", "75",
           "--landmarks", "uniform", "--n-init", "3"]


def _mkrk(*argv: str, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mkrk_dask.cli", *argv], text=True,
                          timeout=300, **kwargs)


def _trust(out: Path) -> list[str]:
    """--trust where the fit saved a pickle (until the library's model_io exists)."""
    return ["--trust"] if (out / "model.joblib").is_file() else []


# --------------------------------------------------------------------------- streams


def test_predict_to_stdout_is_a_file_loadtxt_reads(digits_npz: Path, tmp_path: Path) -> None:
    out = tmp_path / "run"
    assert main(["fit", str(digits_npz), *NYSTROM, "--out", str(out), "-q"]) == 0
    with np.load(digits_npz) as archive:
        np.save(tmp_path / "X.npy", archive["X"])
    labels_txt = tmp_path / "labels.txt"
    with open(labels_txt, "w") as handle:  # mkrk predict run X.npy > labels.txt
        proc = _mkrk("predict", str(out), str(tmp_path / "X.npy"), *_trust(out),
                     stdout=handle, stderr=subprocess.PIPE)
    assert proc.returncode == 0, proc.stderr
    labels = np.loadtxt(labels_txt, dtype=int)
    np.testing.assert_array_equal(labels, np.load(out / "labels.npy"))
    assert "predicted 150 samples" in proc.stderr  # the log went to stderr


def test_fit_stdout_holds_results_and_stderr_the_log(digits_npz: Path, tmp_path: Path,
                                                     capsys: pytest.CaptureFixture) -> None:
    argv = ["fit", str(digits_npz), "--lam", "2^-15", "--n-init", "2"]
    assert main([*argv, "-q"]) == 0
    quiet = capsys.readouterr()
    assert quiet.out.startswith("ACC") and "weights:" in quiet.out  # -q keeps the results
    assert quiet.err == ""
    assert main(argv) == 0
    default = capsys.readouterr()
    assert default.out.startswith("ACC")  # then the weights
    assert "fitting MKKM-RK" not in default.out and "fitted in" not in default.out
    assert "fitting MKKM-RK" in default.err and "iter   1" in default.err
    assert main([*argv, "-v"]) == 0
    verbose = capsys.readouterr()
    # the same results, -v with the solver's diagnostics besides; the memory and disk free
    # at each run (in the solver's reason) and the plan's expected seconds (a calibration)
    # vary, and so where their long lines wrap
    machine = re.compile(r"[\d.]+ GiB (memory available|free disk)|about [\d.,]+ (s|min)\b")
    diagnostics = re.compile(r"^max QP relative gap .*\n", re.MULTILINE)

    def same(text: str) -> str:
        return machine.sub("", " ".join(text.split()))

    assert "max QP relative gap" in verbose.out and "QP relative gap" not in default.out
    assert same(diagnostics.sub("", verbose.out)) == same(default.out)
    assert same(quiet.out) == same(default.out)
    # the mask hides a figure, not the whole line
    assert machine.search(" ".join(default.out.split()))
    assert len(verbose.err.splitlines()) > len(default.err.splitlines())


def test_search_and_figures_write_only_results_on_stdout(digits_npz: Path, tmp_path: Path,
                                                         capsys: pytest.CaptureFixture) -> None:
    results = tmp_path / "s.json"
    assert main(["search", str(digits_npz), "--lams", "2^-15,2^0", "--repeats", "2",
                 "--n-init", "2", "--out", str(results)]) == 0
    printed = capsys.readouterr()
    assert printed.out.startswith("best lambda 2^") and len(printed.out.splitlines()) == 1
    assert "lambda 2^-15" in printed.err and "results in" in printed.err
    assert main(["figures", str(results), "--out", str(tmp_path / "f")]) == 0
    printed = capsys.readouterr()
    assert all(Path(line).is_file() for line in printed.out.splitlines())  # a list of files
    assert "figure(s) in" in printed.err


def _three_verbosities(argv: list[str], capfd: pytest.CaptureFixture,
                       vary: str | None = None) -> dict[str, pytest.CaptureResult]:
    """``main(argv)`` at -q, the default and -v, the streams of each (file descriptors, so
    that a stray write of Dask or a library shows too). ``vary``: an argument holding
    ``{v}``, made different for each run (an output that must not exist yet)."""
    printed = {}
    for flag in ("-q", "", "-v"):
        args = [a.format(v=flag.strip("-") or "default") if a == vary else a for a in argv]
        assert main([*args, *([flag] if flag else [])]) == 0
        printed[flag] = capfd.readouterr()
    return printed


def test_build_is_silent_quiet_informative_by_default_detailed_verbose(
        digits_npz: Path, tmp_path: Path, capfd: pytest.CaptureFixture) -> None:
    store = str(tmp_path / "store-{v}.zarr")
    printed = _three_verbosities(["build", str(digits_npz), "--store", store, "--chunk-size",
                                  "64"], capfd, vary=store)
    quiet, default, verbose = printed["-q"], printed[""], printed["-v"]
    assert quiet.err == "" and quiet.out.startswith("store ") and "built in" in quiet.out
    assert len(quiet.out.splitlines()) == 1
    assert "building a blockwise store" in default.err and "use it with" in default.err
    assert len(default.out.splitlines()) == 1 and "building" not in default.out
    assert len(verbose.err.splitlines()) > len(default.err.splitlines())


def test_figures_are_silent_quiet_informative_by_default_detailed_verbose(
        digits_npz: Path, tmp_path: Path, capfd: pytest.CaptureFixture) -> None:
    run = tmp_path / "run"
    assert main(["fit", str(digits_npz), "--n-init", "2", "--out", str(run), "-q"]) == 0
    capfd.readouterr()
    out = str(tmp_path / "figures-{v}")
    printed = _three_verbosities(["figures", str(run / "result.json"), "--out", out], capfd,
                                 vary=out)
    quiet, default, verbose = printed["-q"], printed[""], printed["-v"]
    assert quiet.err == "" and quiet.out.strip()
    assert all(Path(line).suffix == ".png" and Path(line).is_file()
               for line in quiet.out.splitlines())  # only the files written
    assert "figure(s) in" in default.err
    assert len(default.out.splitlines()) == len(quiet.out.splitlines())
    assert len(verbose.err.splitlines()) > len(default.err.splitlines())
    assert "120 dpi" in verbose.err


def test_reproduce_is_silent_quiet_informative_by_default_detailed_verbose(
        digits_npz: Path, tmp_path: Path, capfd: pytest.CaptureFixture) -> None:
    from mkrk_dask.datasets import PAPER_DATASETS

    data_dir = tmp_path / "datasets"
    data_dir.mkdir()
    (data_dir / PAPER_DATASETS["usps"]).write_bytes(digits_npz.read_bytes())  # a stand-in
    out = str(tmp_path / "rep-{v}")
    printed = _three_verbosities(["reproduce", "--datasets", "usps", "--data-dir",
                                  str(data_dir), "--lams", "2^0", "--repeats", "2",
                                  "--threads", "1", "--out", out, "--figures"], capfd,
                                 vary=out)
    quiet, default, verbose = printed["-q"], printed[""], printed["-v"]
    assert quiet.err == ""
    assert quiet.out.startswith("# The paper's Table 2") and "## usps" in quiet.out
    assert (tmp_path / "rep-q" / "figures").is_dir()  # --figures worked, silently
    assert "== usps" in default.err and "results in" in default.err
    assert "== usps" not in default.out and "results in" not in default.out
    assert len(verbose.err.splitlines()) > len(default.err.splitlines())
    assert f"data folder {data_dir}: usps" in verbose.err


# --------------------------------------------------------------------------- help


def _subparsers() -> dict[str, argparse.ArgumentParser]:
    return build_parser()._subparsers._group_actions[0].choices


def test_every_option_is_explained_with_its_default_once() -> None:
    for name, sub in _subparsers().items():
        for action in sub._actions:
            if action.help == argparse.SUPPRESS:
                continue
            text = help_text(action)
            assert text and len(text) > 10, (name, action.dest)
            assert text.lower().count("default") <= 1, (name, action.dest, text)
    lam = next(a for a in _subparsers()["fit"]._actions if a.dest == "lam")
    assert "default: 1;" in help_text(lam) and "--paper: 2^-15" in help_text(lam)


def test_rendered_help_shows_no_default_twice(capsys: pytest.CaptureFixture) -> None:
    for command in COMMANDS:
        assert main([command, "--help"]) == 0
        out = capsys.readouterr().out
        assert "(default: 3.0517578125e-05)" not in out
        for option in ("--tol-mode", "--max-iter", "--dpi"):
            if option in out:
                block = out.split(option, 1)[1].split("\n  -", 1)[0]
                assert len(block.split()) > 3, (command, option, block)


def test_epilog_documents_exit_code_3(capsys: pytest.CaptureFixture) -> None:
    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    assert "3 the Dask scheduler was lost" in " ".join(out.split())


# --------------------------------------------------------------------------- --out


def test_out_refuses_an_earlier_run_without_force(digits_npz: Path, tmp_path: Path,
                                                  capsys: pytest.CaptureFixture) -> None:
    out = tmp_path / "run"
    argv = ["fit", str(digits_npz), "--n-init", "2", "--out", str(out), "-q"]
    assert main(argv) == 0
    before = (out / "result.json").read_bytes()
    capsys.readouterr()
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "earlier run" in err and "--force" in err and len(err.splitlines()) == 1
    assert (out / "result.json").read_bytes() == before
    assert main([*argv, "--max-iter", "1", "--force"]) == 0
    assert json.loads((out / "result.json").read_text())["n_iter"] == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run"]  # no temporary left


def test_force_replaces_only_what_a_run_wrote(digits_npz: Path, tmp_path: Path,
                                              capsys: pytest.CaptureFixture) -> None:
    # Round 4: --force over an earlier run folder deleted a note the user had put there.
    out = tmp_path / "run"
    argv = ["fit", str(digits_npz), "--n-init", "2", "--max-iter", "2", "--out", str(out),
            "-q"]
    assert main(argv) == 0
    written = json.loads((out / "manifest.json").read_text())["files"]
    assert "result.json" in written and "labels.csv" in written
    (out / "user_note.txt").write_text("mine")
    before = (out / "result.json").read_bytes()
    capsys.readouterr()
    assert main([*argv, "--force"]) == 2
    err = capsys.readouterr().err
    assert "user_note.txt" in err and "no run wrote" in err and len(err.splitlines()) == 1
    assert (out / "user_note.txt").read_text() == "mine"
    assert (out / "result.json").read_bytes() == before
    # without the note --force replaces the run, and a run whose manifest is gone is refused
    (out / "user_note.txt").unlink()
    assert main([*argv, "--force"]) == 0
    (out / "manifest.json").unlink()
    assert main([*argv, "--force"]) == 2
    assert "manifest.json" in capsys.readouterr().err
    assert (out / "result.json").exists()


def test_out_never_replaces_a_folder_of_other_files(digits_npz: Path, tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch,
                                                    capsys: pytest.CaptureFixture) -> None:
    # The results replace --out whole: a folder that is not an earlier run (here the one the
    # data are in) was wiped, the data with it, and the fit exited 0.
    data = tmp_path / "data"
    data.mkdir()
    (data / "digits.npz").write_bytes(digits_npz.read_bytes())
    (data / "notes.txt").write_text("precious")
    for extra in ([], ["--force"]):
        assert main(["fit", str(data / "digits.npz"), "--out", str(data), *extra]) == 2
        err = capsys.readouterr().err
        assert "other files, not an earlier run" in err and len(err.splitlines()) == 1
        assert "iter" not in err  # refused before the fit
    assert sorted(p.name for p in data.iterdir()) == ["digits.npz", "notes.txt"]
    assert (data / "notes.txt").read_text() == "precious"
    # the current folder (or one holding it) is refused too: it cannot be renamed away
    monkeypatch.chdir(data)
    for out in (".", str(tmp_path)):
        assert main(["fit", "digits.npz", "--out", out, "--force"]) == 2
        assert "current folder" in capsys.readouterr().err
    # an empty --out (an unset $OUT) is an error, not a fit whose results go nowhere
    assert main(["fit", "digits.npz", "--out", ""]) == 2
    assert "--out is empty" in capsys.readouterr().err
    # an empty folder takes the results
    (tmp_path / "empty").mkdir()
    assert main(["fit", "digits.npz", "--n-init", "2", "--out", str(tmp_path / "empty"),
                 "-q"]) == 0
    assert (tmp_path / "empty" / "result.json").is_file()


def test_results_follow_the_umask(digits_npz: Path, tmp_path: Path) -> None:
    # Written under temporary names (0600 files, 0700 folders) and renamed into place: they
    # were private to their owner whatever the umask.
    previous = os.umask(0o022)
    try:
        out, labels = tmp_path / "run", tmp_path / "labels.csv"
        assert main(["fit", str(digits_npz), "--n-init", "2", "--out", str(out), "-q"]) == 0
        assert main(["predict", str(out), str(digits_npz), "--out", str(labels), "-q",
                     *_trust(out)]) == 0
    finally:
        os.umask(previous)
    modes = {p: p.stat().st_mode & 0o777 for p in [out, labels, *out.rglob("*")]}
    for path, mode in modes.items():
        assert mode == (0o755 if path.is_dir() else 0o644), (path, oct(mode))
    assert {"result.json", "labels.csv", "model.json"} <= {p.name for p in modes}


def test_out_is_checked_before_the_fit(digits_npz: Path, tmp_path: Path,
                                       capsys: pytest.CaptureFixture) -> None:
    a_file = tmp_path / "taken"
    a_file.write_text("x")
    assert main(["fit", str(digits_npz), "--out", str(a_file)]) == 2
    err = capsys.readouterr().err
    assert "is a file" in err and "iter" not in err and len(err.splitlines()) == 1
    assert main(["search", str(digits_npz), "--out", str(tmp_path)]) == 2
    assert "is a folder" in capsys.readouterr().err
    assert main(["predict", str(tmp_path), str(digits_npz), "--out", str(a_file)]) == 2
    assert "--force" in capsys.readouterr().err
    assert a_file.read_text() == "x"


def test_a_failed_write_leaves_no_half_result(digits_npz: Path, tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch,
                                              capsys: pytest.CaptureFixture) -> None:
    import mkrk_dask.results as results

    def full_disk(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(results, "write_json", full_disk)
    out = tmp_path / "deep" / "run"
    assert main(["fit", str(digits_npz), "--n-init", "2", "--out", str(out), "-q"]) == 2
    err = capsys.readouterr().err
    assert "No space left on device" in err and len(err.splitlines()) == 1
    assert list(tmp_path.iterdir()) == []  # neither the folder nor its parent stays


def _in_mount_namespace(mount: str, argv: list[str], target: Path) -> subprocess.CompletedProcess:
    """Run mkrk in a private mount namespace where ``target`` is a fresh tmpfs mounted with
    ``mount`` options (root only: root writes through permission bits)."""
    script = (f"mount -t tmpfs -o {mount} tmpfs {target} && exec {sys.executable} -m "
              "mkrk_dask.cli " + " ".join(argv))
    return subprocess.run(["unshare", "-m", "sh", "-c", script], capture_output=True,
                          text=True, timeout=300)


needs_root = pytest.mark.skipif(
    os.geteuid() != 0 or subprocess.run(["unshare", "-m", "true"],
                                        capture_output=True).returncode != 0,
    reason="needs root and unshare for a read-only / full file system")


@needs_root
@pytest.mark.parametrize("mount, message", [
    ("ro", "cannot write to"),
    ("size=8k", "No space left on device"),
])
def test_out_on_a_read_only_or_full_disk(mount: str, message: str, digits_npz: Path,
                                         tmp_path: Path) -> None:
    target = tmp_path / "mnt"
    target.mkdir()
    proc = _in_mount_namespace(mount, ["fit", str(digits_npz), "--out", str(target / "run")],
                               target)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0] and "iter" not in proc.stderr, lines
    assert list(target.iterdir()) == []  # outside the namespace: the plain empty folder


@needs_root
@pytest.mark.parametrize("solver", ["blockwise", "nystrom"])
@pytest.mark.parametrize("mount, message", [
    ("ro", "its file system is read-only"),
    ("size=64k", "nothing was written"),
])
def test_store_on_a_read_only_or_full_disk(mount: str, message: str, solver: str,
                                           digits_npz: Path, tmp_path: Path) -> None:
    # Round 4: both ended in exit 1 and a Python error name, for either backend; a store
    # larger than the disk is refused by the plan, before the first byte (issue 77).
    target = tmp_path / "mnt"
    target.mkdir()
    proc = _in_mount_namespace(mount, ["fit", str(digits_npz), "-q", "--solver", solver,
                                       "--store", str(target / "s.zarr"),
                                       "--out", str(tmp_path / "run")], target)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], lines
    assert "s.zarr" in lines[0] or "the store takes" in lines[0], lines
    assert not (tmp_path / "run").exists()


def test_store_under_a_file_or_at_a_file(digits_npz: Path, tmp_path: Path,
                                         capsys: pytest.CaptureFixture) -> None:
    # Round 4: a store whose parent is a file ended in exit 1 (FileExistsError).
    a_file = tmp_path / "afile"
    a_file.write_text("mine")
    for store, message in ((a_file / "s.zarr", "is a file, not a folder"),
                           (a_file, "is a file, not a Zarr store")):
        assert main(["fit", str(digits_npz), "-q", "--solver", "blockwise", "--store",
                     str(store), "--out", str(tmp_path / "run")]) == 2
        lines = capsys.readouterr().err.strip().splitlines()
        assert len(lines) == 1 and message in lines[0], lines
    assert a_file.read_text() == "mine" and not (tmp_path / "run").exists()


# --------------------------------------------------------------------------- files of a fit


def test_result_records_version_and_y_csv_names_kernels(digits_npz: Path,
                                                        tmp_path: Path) -> None:
    out = tmp_path / "run"
    assert main(["fit", str(digits_npz), "--n-init", "2", "--out", str(out), "-q",
                 "--kernels", "cosine", "polynomial(a=1,b=2)", "gaussian(c=0.5)"]) == 0
    result = json.loads((out / "result.json").read_text())
    assert result["version"] == mkrk_dask.__version__
    with open(out / "Y.csv", newline="") as handle:
        rows = list(csv.reader(handle))
    names = ["cosine", "polynomial(a=1,b=2)", "gaussian(c=0.5)"]
    assert rows[0] == ["kernel", *names] and [r[0] for r in rows[1:]] == names
    np.testing.assert_allclose(np.array([r[1:] for r in rows[1:]], dtype=float),
                               np.load(out / "Y.npy"))


# --------------------------------------------------------------------------- models


def test_predict_refuses_a_pickle_without_trust(digits_npz: Path, tmp_path: Path) -> None:
    marker = tmp_path / "ran"

    class Evil:
        def __reduce__(self):
            return (os.system, (f"touch {marker}",))

    evil = tmp_path / "model.joblib"
    evil.write_bytes(pickle.dumps(Evil()))
    proc = _mkrk("predict", str(evil), str(digits_npz), capture_output=True)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "--trust" in lines[0] and "pickle" in lines[0]
    assert not marker.exists() and proc.stdout == ""


# --------------------------------------------------------------------------- reproduce


def test_reproduce_without_data_names_the_folder(tmp_path: Path) -> None:
    empty = tmp_path / "nothing-here"
    proc = _mkrk("reproduce", "--out", str(tmp_path / "rep"), capture_output=True,
                 env=dict(os.environ, MKRK_DATASETS=str(empty)))
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and str(empty) in lines[0] and "None" not in lines[0]
    assert "--data-dir" in lines[0] and "MKRK_DATASETS" in lines[0]
    assert not (tmp_path / "rep").exists()


def test_reproduce_with_no_data_folder_at_all(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                              capsys: pytest.CaptureFixture) -> None:
    import mkrk_dask.datasets as datasets

    monkeypatch.delenv("MKRK_DATASETS", raising=False)
    monkeypatch.setattr(datasets, "data_dir_candidates",
                        lambda: [tmp_path / "a" / "shared" / "datasets"])
    assert main(["reproduce", "--out", str(tmp_path / "rep")]) == 2
    err = capsys.readouterr().err
    assert str(tmp_path / "a" / "shared" / "datasets") in err and "None" not in err


def test_a_closed_pipe_ends_quietly(monkeypatch: pytest.MonkeyPatch,
                                    capsys: pytest.CaptureFixture) -> None:
    """mkrk ... | head: the reader closes the pipe early; no 'internal error' follows."""
    import mkrk_dask.cli

    def command(args):
        raise BrokenPipeError(32, "Broken pipe")

    monkeypatch.setitem(mkrk_dask.cli.commands.COMMANDS, "demo", command)
    assert main(["demo"]) == 0
    assert capsys.readouterr().err == ""


def test_models_go_through_the_library_model_io_when_it_exists(
        digits_npz: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture) -> None:
    """The CLI saves and loads models through mkrk_dask.model_io (arrays + JSON, no pickle)
    where the library has it: no --trust needed, no model.joblib written. A stand-in module
    with the library's interface plays its part here."""
    import types

    import mkrk_dask.cli.models as models

    saved = {}

    def save_model(estimator, directory):
        Path(directory).mkdir()
        (Path(directory) / "model.json").write_text("{}")
        saved["model"] = estimator

    def load_model(directory):
        assert (Path(directory) / "model.json").is_file()
        return saved["model"]

    fake = types.SimpleNamespace(save_model=save_model, load_model=load_model)
    monkeypatch.setattr(models, "_model_io", lambda: fake)
    out = tmp_path / "run"
    assert main(["fit", str(digits_npz), *NYSTROM, "--out", str(out), "-q"]) == 0
    assert (out / "model" / "model.json").is_file() and not (out / "model.joblib").exists()
    assert json.loads((out / "result.json").read_text())["model"] == "model"
    capsys.readouterr()
    assert main(["predict", str(out), str(digits_npz), "-q"]) == 0  # no --trust
    labels = np.array(capsys.readouterr().out.split(), dtype=int)
    np.testing.assert_array_equal(labels, np.load(out / "labels.npy"))


def test_store_takes_a_url_and_storage_options(capsys: pytest.CaptureFixture) -> None:
    from mkrk_dask.cli.commands import _store
    from mkrk_dask.cli.session import storage_options

    args = build_parser().parse_args(
        ["fit", "d.npz", "--store", "s3://bucket/run.zarr", "--storage-option",
         "endpoint_url=http://127.0.0.1:9000", "--storage-option", "anon=false"])
    assert _store(args) == "s3://bucket/run.zarr"  # a URL stays a URL
    assert storage_options(args) == {"endpoint_url": "http://127.0.0.1:9000", "anon": False}
    assert main(["fit", "--help"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "--store PATH_OR_URL" in text and "s3://bucket/run.zarr" in text
    assert "--storage-option KEY=VALUE" in text


def test_work_far_beyond_the_data_is_refused_before_it_starts(tmp_path: Path,
                                                              capsys: pytest.CaptureFixture
                                                              ) -> None:
    # Round 4: --n-init 10^12 and --chunk-size 1 started work that never ended.
    X = np.random.default_rng(0).normal(size=(5000, 3))
    np.savez(tmp_path / "x.npz", X=X)
    for extra, message in ((["--n-init", str(10**12)], "n_init must be an integer from 1 to "),
                           (["--solver", "blockwise", "--chunk-size", "1"],
                            "chunk_size=1 cuts the 5,000 rows into 5,000 blocks")):
        started = time.monotonic()
        code = main(["fit", str(tmp_path / "x.npz"), "-k", "3", "-q", *extra,
                     "--out", str(tmp_path / "run")])
        lines = capsys.readouterr().err.strip().splitlines()
        assert code == 2 and len(lines) == 1 and message in lines[0], lines
        assert time.monotonic() - started < 30 and not (tmp_path / "run").exists()


def test_a_store_of_another_chunk_size_says_how_to_rebuild_it(tmp_path: Path,
                                                              capsys: pytest.CaptureFixture
                                                              ) -> None:
    # Round 4: the refusal advised overwrite=True, which is no option of mkrk fit.
    X = np.random.default_rng(0).normal(size=(300, 3))
    np.savez(tmp_path / "x.npz", X=X)
    argv = ["fit", str(tmp_path / "x.npz"), "-k", "3", "-q", "--solver", "blockwise",
            "--store", str(tmp_path / "s.zarr")]
    assert main([*argv, "--chunk-size", "150", "--out", str(tmp_path / "a")]) == 0
    capsys.readouterr()
    assert main([*argv, "--chunk-size", "100", "--out", str(tmp_path / "b")]) == 2
    err = capsys.readouterr().err
    assert "'chunk_size' differs (stored 150, expected 100)" in err and "--overwrite" in err
    assert "overwrite=True" not in err
    assert main([*argv, "--chunk-size", "100", "--overwrite", "--out", str(tmp_path / "b")]) == 0
    a, b = (np.loadtxt(tmp_path / r / "labels.csv", skiprows=1, delimiter=",")
            for r in ("a", "b"))
    assert np.array_equal(a, b)


def test_a_warning_shows_its_kind_and_message_in_lines_of_100() -> None:
    """Issue 79: a library warning printed its source file and line, which a user cannot act
    on, in one line of 250 characters. (In a fresh process: pytest records warnings.)"""
    code = """
import sys, warnings
from mkrk_dask.cli import commands, main
from mkrk_dask.exceptions import NystromApproximationWarning

def warns(args):
    warnings.warn("the Nystrom residuals " + "of a kernel " * 30, NystromApproximationWarning)
    return 0

commands.COMMANDS["fit"] = warns
before = warnings.formatwarning
assert main(["fit", "data.npz"]) == 0
assert warnings.formatwarning is before  # the process's own formatting is left as it was
"""
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr
    err = proc.stderr.splitlines()
    assert err[0].startswith("NystromApproximationWarning: the Nystrom residuals of a kernel")
    assert len(err) > 2 and max(map(len, err)) <= 100 and ".py" not in proc.stderr


@needs_root
def test_a_store_larger_than_its_disk_is_refused_before_any_write(tmp_path: Path) -> None:
    # Issue 77: the cluster recipe began writing a 1.28 TB store on a disk of 68 GB free.
    # Here 1,000 rows' blockwise kernels (32 MB) and Nystrom factors kept on disk (16 MB) on
    # a 4 MB tmpfs: one line with the size, exit 2, and nothing on the disk.
    X = np.random.default_rng(0).normal(size=(1000, 5))
    np.savez(tmp_path / "x.npz", X=X)
    target = tmp_path / "mnt"
    target.mkdir()
    for solver in ("blockwise", "nystrom"):
        script = ("import sys; from mkrk_dask.cli import main; sys.exit(main(sys.argv[1:]))"
                  if solver == "blockwise" else
                  "import numpy as np, sys; from mkrk_dask import MKKMRK; "
                  "MKKMRK(3, solver='nystrom', store=sys.argv[1], backend_options="
                  "{'store_factors': True, 'n_landmarks': 500}).fit(np.load(sys.argv[2])['X'])")
        argv = (["fit", str(tmp_path / "x.npz"), "-k", "3", "-q", "--solver", solver,
                 "--store", str(target / "s.zarr"), "--out", str(tmp_path / "run")]
                if solver == "blockwise" else [str(target / "s.zarr"), str(tmp_path / "x.npz")])
        command = (f"mount -t tmpfs -o size=4m tmpfs {target} && {sys.executable} -c "
                   f"\"{script}\" " + " ".join(argv) + f"; echo $?; ls -A {target}")
        proc = subprocess.run(["unshare", "-m", "sh", "-c", command], capture_output=True,
                              text=True, timeout=300)
        assert "the store takes" in proc.stderr and "nothing was written" in proc.stderr, \
            proc.stderr
        code, *left = proc.stdout.split()
        assert left == [], left  # the tmpfs stayed empty
        if solver == "blockwise":
            assert code == "2" and len(proc.stderr.strip().splitlines()) == 1, proc.stderr


def test_the_command_line_and_python_choose_the_same_solver(tmp_path: Path,
                                                           capsys: pytest.CaptureFixture
                                                           ) -> None:
    # Issue 77: with --scheduler the command line took blockwise ("given") where Python,
    # with a Client, chose Nystrom ("the dense kernels need 1192.1 GiB").
    from mkrk_dask import MKKMRK

    X = np.random.default_rng(0).normal(size=(8000, 6)).astype(np.float32)
    np.save(tmp_path / "x.npy", X)
    for scheduler in ([], ["--scheduler", "tcp://127.0.0.1:1"]):
        assert main(["fit", str(tmp_path / "x.npy"), "-k", "4", "--plan", *scheduler]) == 0
        out = capsys.readouterr()
        line = next(x for x in (out.out + out.err).splitlines() if x.strip().startswith(
            "solver:"))
        planned = MKKMRK(4, scheduler="tcp://127.0.0.1:1" if scheduler else None).plan(X)
        assert line.split()[1] == planned.decision("solver").value == "nystrom", line
        assert "given" not in line
