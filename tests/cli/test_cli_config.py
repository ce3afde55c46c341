"""mkrk_dask.cli.config: config files (TOML, JSON, YAML) as defaults of a command's options."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mkrk_dask.cli import UserError, build_parser, main
from mkrk_dask.cli.config import config_defaults, load_config
from mkrk_dask.cli.parser import COMMANDS as PARSER_COMMANDS

COMMANDS = list(PARSER_COMMANDS)


def _sub(name: str):
    return build_parser()._subparsers._group_actions[0].choices[name]


def test_config_file_sets_defaults(digits_npz: Path, tmp_path: Path) -> None:
    config = tmp_path / "mkrk.toml"
    config.write_text('[fit]\nlam = 0.001\nmax-iter = 2\nn_init = 2\n')
    out = tmp_path / "run"
    assert main(["fit", str(digits_npz), "--config", str(config), "-q", "--out", str(out)]) == 0
    result = json.loads((out / "result.json").read_text())
    assert result["lam"] == 0.001 and result["n_iter"] <= 2
    config.write_text("[fit]\nno_such_option = 1\n")
    assert main(["fit", str(digits_npz), "--config", str(config)]) == 2


@pytest.mark.parametrize("name, text", [
    ("c.toml", 'scheduler = "tcp://h:1"\n[fit]\nmax-iter = 7\n'),
    ("c.json", '{"scheduler": "tcp://h:1", "fit": {"max-iter": 7}}'),
])
def test_load_config_formats(tmp_path: Path, name: str, text: str) -> None:
    path = tmp_path / name
    path.write_text(text)
    assert load_config(str(path)) == {"scheduler": "tcp://h:1", "fit": {"max-iter": 7}}


def test_load_config_yaml(tmp_path: Path) -> None:
    pytest.importorskip("yaml")
    path = tmp_path / "c.yaml"
    path.write_text("fit:\n  max-iter: 7\n")
    assert load_config(str(path)) == {"fit": {"max-iter": 7}}


@pytest.mark.parametrize("name, text, message", [
    ("absent.toml", None, "does not exist"),
    ("c.ini", "a = 1", "use a .toml"),
    ("c.toml", "not = [toml", "cannot read config file"),
    ("c.json", "[1, 2]", "expected a table"),
])
def test_load_config_errors(tmp_path: Path, name: str, text: str | None, message: str) -> None:
    path = tmp_path / name
    if text is not None:
        path.write_text(text)
    with pytest.raises(UserError, match=message):
        load_config(str(path))


def test_config_defaults_top_level_and_section() -> None:
    config = {"scheduler": "tcp://h:1", "dpi": 300, "fit": {"max-iter": 7, "lam": 0.5},
              "figures": {"dpi": 90}}
    fit = config_defaults(config, "fit", _sub("fit"), COMMANDS)
    # dpi is a top-level setting meant for another command: ignored by fit.
    assert fit == {"scheduler": "tcp://h:1", "max_iter": 7, "lam": 0.5}
    assert config_defaults(config, "figures", _sub("figures"), COMMANDS) == {"dpi": 90}
    with pytest.raises(UserError, match="unknown setting 'data'"):
        config_defaults({"fit": {"data": "x.npz"}}, "fit", _sub("fit"), COMMANDS)
    with pytest.raises(UserError, match="must be a table"):
        config_defaults({"fit": 3}, "fit", _sub("fit"), COMMANDS)
