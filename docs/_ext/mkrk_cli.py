"""A Sphinx directive that documents the ``mkrk`` command line from its argparse parser.

``.. mkrk-cli::`` renders, for every command of :func:`mkrk_dask.cli.build_parser`, its
description, its usage line and its options, and the examples of its ``--help`` epilog, so
that the CLI reference is generated from the code at build time and never goes stale.
"""

from __future__ import annotations

import argparse

from docutils import nodes
from docutils.statemachine import StringList
from sphinx.util.docutils import SphinxDirective


def _option_rows(parser: argparse.ArgumentParser) -> list[tuple[str, str]]:
    from mkrk_dask.cli.parser import help_text

    rows = []
    for action in parser._actions:
        if action.help == argparse.SUPPRESS or isinstance(action, argparse._HelpAction):
            continue
        if isinstance(action, argparse._SubParsersAction):
            continue
        if action.option_strings:
            name = ", ".join(action.option_strings)
            if action.nargs != 0:
                name += " " + (action.metavar or action.dest.upper())
        else:
            name = action.metavar or action.dest
        text = help_text(action)  # the same text as --help: the default shown once
        if action.choices and not isinstance(action.choices, dict):
            text += " Choices: " + ", ".join(map(str, action.choices)) + "."
        rows.append((name, text))
    return rows


class MkrkCliDirective(SphinxDirective):
    """Insert the generated reference of every ``mkrk`` command."""

    has_content = False

    def run(self) -> list[nodes.Node]:
        from mkrk_dask.cli import build_parser

        parser = build_parser()
        sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        lines = [".. code-block:: text", ""]
        lines += ["   " + line for line in parser.format_usage().strip().splitlines()]
        lines += [""]
        lines += [".. code-block:: text", ""]
        lines += ["   " + line for line in parser.epilog.split("\n\n")[0].splitlines()]
        lines += [""]
        for name, child in sub.choices.items():
            title = f"mkrk {name}"
            lines += [title, "-" * len(title), "", child.description or "", ""]
            lines += [".. code-block:: text", ""]
            lines += ["   " + line for line in child.format_usage().strip().splitlines()]
            lines += [""]
            for option, text in _option_rows(child):
                lines += [f"``{option}``", f"   {text.strip() or '(no description)'}", ""]
            if child.epilog:
                lines += [".. code-block:: text", ""]
                lines += ["   " + line for line in child.epilog.splitlines()]
                lines += [""]
        container = nodes.section()
        container.document = self.state.document
        self.state.nested_parse(StringList(lines, source="mkrk-cli"), self.content_offset,
                                container, match_titles=True)
        return container.children


def setup(app):  # noqa: ANN001, ANN201
    app.add_directive("mkrk-cli", MkrkCliDirective)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
