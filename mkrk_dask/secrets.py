"""Credentials never reach a results file, a model, a log or an error message.

``storage_options`` carry object-store keys and secrets (and a URL may carry a password):
wherever they are recorded or shown, their keys are kept and their values replaced by
:data:`MASK`. The live values stay where they are needed: the fsspec filesystem and the tasks
that open the store.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["MASK", "mask_options", "mask_url", "mask_argv"]

MASK = "***"

#: ``scheme://user:password@host``: the user information of a URL
_USERINFO = re.compile(r"^(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*://)(?P<user>[^/@]*)@")
#: command-line options whose values are storage options (``KEY=VALUE``)
_OPTION_FLAGS = ("--storage-option",)


def mask_options(options: Mapping[str, Any] | None) -> dict[str, str] | None:
    """``options`` with every value masked (nested mappings too); None stays None."""
    if options is None:
        return None
    return {str(key): mask_options(value) if isinstance(value, Mapping) else MASK
            for key, value in options.items()}


def mask_url(url: str) -> str:
    """``url`` without the password (or token) of its user information, if it has one."""
    return _USERINFO.sub(lambda m: f"{m['scheme']}{MASK}@", str(url), count=1)


def mask_argv(argv: Sequence[str]) -> list[str]:
    """A command line with the values of ``--storage-option KEY=VALUE`` masked (both
    ``--storage-option K=V`` and ``--storage-option=K=V``) and passwords taken out of URLs."""
    masked: list[str] = []
    follows = False
    for word in argv:
        if follows:
            key, sep, _ = word.partition("=")
            masked.append(f"{key}={MASK}" if sep else word)
            follows = False
            continue
        flag, sep, value = word.partition("=")
        if flag in _OPTION_FLAGS and sep:
            key, inner, _ = value.partition("=")
            masked.append(f"{flag}={key}={MASK}" if inner else word)
            continue
        follows = word in _OPTION_FLAGS
        masked.append(mask_url(word))
    return masked
