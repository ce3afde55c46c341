"""Config files of ``mkrk --config FILE``: settings as defaults of a command's options.

A TOML, JSON or YAML file holds option names (long names, dashes or underscores) at the top
level, which apply to every command that has the option, or in a table named after a command,
which apply to that command only; an unknown name in a command's table is an error.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .errors import UserError

__all__ = ["load_config", "config_defaults"]

# Positional arguments and internals: never set from a file.
_NOT_SETTABLE = ("config", "data", "model", "results", "command")


def load_config(path: str) -> dict[str, Any]:
    """The settings of a config file (a table).

    Raises
    ------
    UserError
        A missing file, an unknown format, a file that does not parse or is not a table.
    """
    p = Path(path).expanduser()
    if not p.is_file():
        raise UserError(f"config file {p} does not exist")
    text = p.read_text(encoding="utf-8")
    try:
        if p.suffix == ".toml":
            import tomllib

            config = tomllib.loads(text)
        elif p.suffix == ".json":
            config = json.loads(text)
        elif p.suffix in (".yaml", ".yml"):
            try:
                import yaml
            except ImportError:
                raise UserError("YAML config files need PyYAML (pip install pyyaml); "
                                "or use TOML or JSON") from None
            config = yaml.safe_load(text) or {}
        else:
            raise UserError(f"config file {p}: use a .toml, .json, .yaml or .yml file")
    except UserError:
        raise
    except Exception as err:  # each format has its own decode error type
        raise UserError(f"cannot read config file {p}: {' '.join(str(err).split())}") from None
    if not isinstance(config, dict):
        raise UserError(f"config file {p}: expected a table of settings")
    return config


def config_defaults(config: dict[str, Any], command: str, sub: argparse.ArgumentParser,
                    commands: Sequence[str]) -> dict[str, Any]:
    """The defaults ``config`` gives the options of ``command`` (its subparser ``sub``):
    top-level settings the command has, then its own table (which wins)."""
    dests = {a.dest for a in sub._actions if a.dest != "help"}
    merged = {k: v for k, v in config.items() if k not in commands}
    section = config.get(command, {})
    if not isinstance(section, dict):
        raise UserError(f"config: [{command}] must be a table of settings")
    merged.update(section)
    out = {}
    for key, value in merged.items():
        dest = key.replace("-", "_")
        if dest not in dests or dest in _NOT_SETTABLE:
            if key in section:
                raise UserError(f"config: unknown setting {key!r} for mkrk {command}")
            continue  # a top-level setting meant for other commands
        out[dest] = value
    return out
