"""mkrk_dask.cli.parser: every command's help and examples, the lambda syntax, and choices
that follow the library's own lists."""

from __future__ import annotations

import argparse

import pytest

from mkrk_dask.backends.options import DTYPE_CHOICES
from mkrk_dask.cli import UserError, build_parser, main, parse_lams
from mkrk_dask.cli.parser import COMMANDS
from mkrk_dask.dissimilarity import MEASURES
from mkrk_dask.landmarks import LANDMARK_METHODS
from mkrk_dask.protocol import DATASETS
from mkrk_dask.validation import LAM_SCALINGS, TOL_MODES


def _sub(name: str) -> argparse.ArgumentParser:
    return build_parser()._subparsers._group_actions[0].choices[name]


def _choices(name: str, dest: str) -> tuple:
    (action,) = [a for a in _sub(name)._actions if a.dest == dest]
    return tuple(action.choices)


def test_every_command_has_help_with_examples(capsys: pytest.CaptureFixture) -> None:
    assert main(["--help"]) == 0
    assert "examples" in capsys.readouterr().out
    for command in COMMANDS:
        assert main([command, "--help"]) == 0, command
        out = capsys.readouterr().out
        assert "examples:" in out and f"mkrk {command}" in out, command
    sub = build_parser()._subparsers._group_actions[0].choices
    assert list(sub) == list(COMMANDS)


@pytest.mark.parametrize("text, expected", [
    ("0.5", [0.5]),
    ("2^-3", [0.125]),
    ("2^-2..2^0, 3", [0.25, 0.5, 1.0, 3.0]),
    ("0,,1e-3", [0.0, 0.001]),
])
def test_parse_lams(text: str, expected: list[float]) -> None:
    assert parse_lams(text) == expected


@pytest.mark.parametrize("text, message", [
    ("abc", "cannot read lambda 'abc'"),
    ("1..2", "cannot read lambda"),
    ("2^3..2^1", "cannot read lambda"),
    (",", "empty"),
    ("-1", ">= 0"),
    ("inf", "finite"),
])
def test_parse_lams_errors(text: str, message: str) -> None:
    with pytest.raises(UserError, match=message):
        parse_lams(text)


def test_lam_option_takes_one_value() -> None:
    parser = build_parser()
    assert parser.parse_args(["fit", "d.npz", "--lam", "2^-4"]).lam == 2.0**-4
    with pytest.raises(SystemExit) as stop:
        parser.parse_args(["fit", "d.npz", "--lam", "1,2"])
    assert stop.value.code == 2


def test_choices_follow_the_library() -> None:
    assert _choices("fit", "dissimilarity") == tuple(MEASURES)
    assert _choices("fit", "lam_scaling") == tuple(LAM_SCALINGS)
    assert _choices("fit", "tol_mode") == tuple(TOL_MODES)
    assert _choices("build", "dtype") == tuple(DTYPE_CHOICES)
    assert _choices("fit", "landmarks") == tuple(LANDMARK_METHODS)
    assert _sub("reproduce").get_default("datasets") == list(DATASETS)


def test_usage_error_is_one_line(capsys: pytest.CaptureFixture) -> None:
    assert main(["fit", "d.npz", "--max-iter", "x"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "invalid int value" in err[0] and "--help" in err[0]


def test_search_help_says_it_fits_the_papers_configuration(capsys: pytest.CaptureFixture
                                                           ) -> None:
    """``mkrk search`` fits the paper's configuration (issue 46): its help says so, and not
    that its defaults are MKKMRK's label-free ones, which 'mkrk fit' keeps."""
    assert main(["search", "--help"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "defaults: the paper's configuration" in text
    assert "label-free ones of MKKMRK" not in text
    assert build_parser().parse_args(["search", "x.npz"]).paper
    assert main(["fit", "--help"]) == 0
    assert "label-free ones of MKKMRK" in " ".join(capsys.readouterr().out.split())


def test_help_and_argument_errors_do_not_load_the_numerical_stack() -> None:
    """``mkrk --help`` and argument errors answer fast (issue 46; the time is measured by
    benchmarks/bench_startup.py): neither scikit-learn, SciPy nor Dask is imported."""
    import subprocess
    import sys

    probe = ("import sys, runpy\n"
             "sys.argv = ['mkrk'] + sys.argv[1:]\n"
             "try:\n    runpy.run_module('mkrk_dask.cli', run_name='__main__')\n"
             "except SystemExit:\n    pass\n"
             "heavy = sorted(m for m in ('sklearn', 'scipy', 'dask', 'distributed', 'zarr')\n"
             "               if m in sys.modules)\n"
             "print('LOADED', heavy, file=sys.stderr)\n")
    for argv in (["--help"], ["fit", "--help"], ["fit"], ["fit", "-k", "x", "d.npz"]):
        run = subprocess.run([sys.executable, "-c", probe, *argv], capture_output=True,
                             text=True, timeout=60)
        assert "LOADED []" in run.stderr, (argv, run.stderr[-500:])
    import mkrk_dask

    assert set(mkrk_dask.__all__) - {"__version__"} == set(dir(mkrk_dask)) & set(
        mkrk_dask.__all__) - {"__version__"}
    for name in mkrk_dask.__all__:  # every public name resolves
        assert getattr(mkrk_dask, name) is not None
