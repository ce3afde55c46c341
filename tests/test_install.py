"""The install a user runs (issue 79): the README's ``pip install -e .`` resolves without any
package of the test extra, and the library and its command line work where none of them can be
imported; the test extra resolves boto3 without backtracking.

The resolutions ask the package index (``pip install --dry-run``): where pip cannot reach it
within :data:`INDEX_SECONDS`, those tests skip with the reason."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

try:
    import tomllib
except ImportError:  # Python 3.10
    tomllib = pytest.importorskip("tomli")

from test_readme import readme_commands

ROOT = Path(__file__).resolve().parents[1]
#: how long pip may take to resolve against the index before the test skips
INDEX_SECONDS = 120
#: packages of the test extra that the library's own dependencies need too (dask reads its
#: configuration with PyYAML)
CORE_NEEDS = {"pyyaml"}
#: what the test extra's packages bring that the library never needs
TRANSITIVE_TEST_ONLY = {"boto3", "botocore", "aiobotocore", "kubernetes", "kubernetes-asyncio"}
#: import names of the test-only packages
TEST_ONLY_MODULES = {"pytest", "_pytest", "pytest_timeout", "moto", "boto3", "botocore", "s3fs",
                     "aiobotocore", "bokeh", "dask_kubernetes", "dask_jobqueue", "pandas", "h5py",
                     "matplotlib", "jsonschema", "kubernetes", "ruff"}


def _name(requirement: str) -> str:
    """The normalised project name of a requirement string."""
    return re.split(r"[\s<>=!~\[;]", requirement.strip(), maxsplit=1)[0].lower().replace("_", "-")


def _test_extra() -> set[str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    return {_name(r) for r in project["optional-dependencies"]["test"]}


def _resolve(command: str, tmp_path: Path) -> tuple[set[str], str]:
    """The projects ``command`` (a pip install) would install, resolved with ``--dry-run`` in
    the checkout, and pip's log; skips where the index does not answer in time."""
    report = tmp_path / "report.json"
    argv = [sys.executable, "-m", *command.split()[:2], "--dry-run", "--ignore-installed",
            "--report", str(report), *[a.strip('"') for a in command.split()[2:]]]
    try:
        proc = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True,
                              timeout=INDEX_SECONDS)
    except subprocess.TimeoutExpired:
        pytest.skip(f"pip did not resolve {command!r} within {INDEX_SECONDS} s (index slow or "
                    "unreachable)")
    if proc.returncode != 0:
        if re.search(r"connection|network|resolve host|timed out|No matching distribution",
                     proc.stderr, re.IGNORECASE):
            pytest.skip(f"pip cannot reach the package index: {proc.stderr.strip()[-300:]}")
        pytest.fail(f"{command}: {proc.stderr[-2000:]}")
    installed = json.loads(report.read_text())["install"]
    return {i["metadata"]["name"].lower().replace("_", "-") for i in installed}, \
        proc.stdout + proc.stderr


@pytest.mark.slow
def test_the_readmes_install_pulls_no_test_package(tmp_path: Path) -> None:
    command = "pip install -e ."
    assert command in readme_commands()  # the users' install, in the README
    installed, _ = _resolve(command, tmp_path)
    assert {"mkrk-dask", "numpy", "dask", "distributed", "zarr"} <= installed
    test_only = (_test_extra() - CORE_NEEDS) | TRANSITIVE_TEST_ONLY
    assert "pytest" in test_only and "moto" in test_only
    assert not installed & test_only, sorted(installed & test_only)


@pytest.mark.slow
def test_the_test_extra_resolves_boto3_without_backtracking(tmp_path: Path) -> None:
    """aiobotocore pins botocore and every boto3 release needs its own: without bounds pip
    tried every newer boto3 first."""
    installed, log = _resolve('pip install -e ".[test]"', tmp_path)
    assert {"moto", "s3fs", "boto3", "pytest"} <= installed
    assert "looking at multiple versions of boto3" not in log


#: makes the test-only packages unimportable, as in an install without the test extra
_BLOCK = f"""
import importlib.abc, sys
BLOCKED = {sorted(TEST_ONLY_MODULES)!r}
class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in BLOCKED:
            raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
sys.meta_path.insert(0, Block())
"""


def test_importing_the_library_loads_no_test_package() -> None:
    code = ("import sys, mkrk_dask, mkrk_dask.cli\n"
            "from mkrk_dask.cli.parser import build_parser\n"
            "build_parser()\n"
            f"print(sorted(m for m in sys.modules if m.split('.')[0] in {TEST_ONLY_MODULES!r}))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"


def test_fit_and_predict_work_without_the_test_packages(tmp_path: Path) -> None:
    """The library and ``mkrk fit`` / ``predict`` where no test-only package can be
    imported (dask and scikit-learn use pandas only where it is installed)."""
    code = _BLOCK + f"""
import numpy as np
from sklearn.datasets import load_wine
X, y = load_wine(return_X_y=True)
np.savez({str(tmp_path / 'wine.npz')!r}, X=X, y=y)
np.save({str(tmp_path / 'new.npy')!r}, X[:5])
from mkrk_dask import MKKMRK
MKKMRK(3, random_state=0).fit(X).summary()
from mkrk_dask.cli import main
assert main(["fit", {str(tmp_path / 'wine.npz')!r}, "-q", "--out", {str(tmp_path / 'run')!r}]) == 0
assert main(["predict", {str(tmp_path / 'run')!r}, {str(tmp_path / 'new.npy')!r}, "-q"]) == 0
print(sorted(m for m in sys.modules if m.split('.')[0] in BLOCKED))
"""
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip().splitlines()[-1] == "[]"
