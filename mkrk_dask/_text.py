"""Text for a terminal: lines of at most :data:`LINE_WIDTH` characters, a long one wrapped
onto continuation lines indented under it (``summary()``, the plan, the command line)."""

from __future__ import annotations

import math
import textwrap
from collections.abc import Iterable

__all__ = ["LINE_WIDTH", "wrap_lines", "plural", "format_number"]

#: the widest line the library prints for a person to read (issue 79: a plan line of 400+
#: characters is one no terminal shows whole)
LINE_WIDTH = 100
#: continuation lines sit this much deeper than the line they continue
_INDENT = "  "


def wrap_lines(lines: Iterable[str], width: int = LINE_WIDTH) -> list[str]:
    """``lines`` with every line longer than ``width`` wrapped at spaces, its continuation
    lines indented two spaces more than it; shorter lines (tables of weights) unchanged."""
    out: list[str] = []
    for line in lines:
        if len(line) <= width:
            out.append(line)
            continue
        lead = line[: len(line) - len(line.lstrip(" "))]
        # break_on_hyphens off: names such as MKKM-RK and k-means stay whole
        out += textwrap.wrap(line.strip(" "), width=width, initial_indent=lead,
                             subsequent_indent=lead + _INDENT, break_long_words=False,
                             break_on_hyphens=False)
    return out


def format_number(value: float) -> str:
    """A number as a person reads it: a power of two beyond 2^3 either way as ``2^e`` (the
    paper's lambdas: ``2^-15``, not ``3.05176e-05``), anything else as ``%g``."""
    if value > 0 and math.isfinite(value) and math.log2(value).is_integer() \
            and abs(math.log2(value)) >= 4:
        return f"2^{int(math.log2(value))}"
    return f"{value:g}"


def plural(count: int, noun: str) -> str:
    """``"1 iteration"``, ``"3 iterations"``."""
    return f"{count} {noun}{'' if count == 1 else 's'}"
