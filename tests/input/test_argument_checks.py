"""Arguments and kernel specifications that mean nothing, or contradict themselves, are
refused in one line with exit code 2 (issue 45), instead of running with something else."""

from __future__ import annotations

import numpy as np
import pytest

from mkrk_dask.cli import main
from mkrk_dask.kernels import KernelSpec, parse_kernel


@pytest.mark.parametrize("text, message", [
    ("gaussian(m=1,sigma=2)", "give one width, m or sigma"),
    ("gaussian(c=0.1,m=1)", "give one width, c or m"),
    ("gaussian(m=1,m=2)", "parameter 'm' is given twice"),
    ("gaussian(m=)", "kernel 'gaussian(m=)': parameter 'm' needs a number, got ''"),
    ("gaussian(sigma=abc)", "parameter 'sigma' needs a number, got 'abc'"),
    ("gaussian(a=1,c=0.1)", "the gaussian kernel takes no parameter 'a'"),
    ("cosine(c=1)", "the linear kernel takes no parameter 'c'"),
])
def test_contradictory_or_empty_kernel_parameters(text, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        parse_kernel(text)


def test_a_kernel_spec_with_two_relative_widths_is_refused():
    with pytest.raises(ValueError, match="not both"):
        KernelSpec("gaussian", c=0.1, m=1.0)
    # the name says what is used
    assert parse_kernel("gaussian(m=1)").name == "gaussian(m=1)"
    assert parse_kernel("rbf(sigma=2)").name == "gaussian(sigma=2)"


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    rng = np.random.default_rng(0)
    path = tmp_path_factory.mktemp("d") / "d.npz"
    np.savez(path, X=np.vstack([rng.normal(c, 0.5, size=(30, 3)) for c in (0.0, 4.0)]))
    return str(path)


@pytest.mark.parametrize("argv, message", [
    (["fit", "--workers", "0"], "--workers: a positive integer expected, got 0"),
    (["fit", "--scheduler", ""], "--scheduler: the address is empty"),
    (["fit", "--scheduler", "  "], "--scheduler: the address is empty"),
    (["fit", "--lam", "2^-10000"], "lambda '2^-10000' underflows to 0"),
    (["fit", "--lam", "1e-400"], "lambda '1e-400' underflows to 0"),
    (["search", "--lams", ""], "the lambda list is empty"),
    (["search", "--lams", "2^-2000,1"], "underflows to 0"),
    (["fit", "--kernels", "gaussian(m=1,sigma=2)"], "give one width, m or sigma"),
    (["fit", "--kernels", "cosine", "gaussian(m=)"], "parameter 'm' needs a number"),
])
def test_the_command_line_refuses_them_in_one_line(data, tmp_path, capsys, argv, message):
    code = main([argv[0], data, "--n-clusters", "2", "-q", "--out", str(tmp_path / "o"),
                 *argv[1:]])
    err = capsys.readouterr().err
    assert code == 2, err
    assert len(err.strip().splitlines()) == 1, err
    assert message in err, err
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("text", ["0", "0.0", "-0", "0e5", ".0"])
def test_a_lambda_written_as_zero_is_zero(text):
    from mkrk_dask.cli import parse_lams

    assert parse_lams(text) == [0.0]
