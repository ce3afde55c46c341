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

__all__ = ["MASK", "mask_options", "mask_url", "mask_argv", "url_credentials",
           "secrets_of_argv", "mask_text"]

MASK = "***"

#: ``scheme://user:password@host``: the user information of a URL
_USERINFO = re.compile(r"^(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*://)(?P<user>[^/@]*)@")
#: the same anywhere in a text (an error message quoting a URL)
_USERINFO_ANYWHERE = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*://)(?P<user>[^/@\s]*)@")
#: storage option keys whose values are credentials (s3fs' key/secret/token, gcsfs' token,
#: adlfs' account_key/sas_token/client_secret, passwords, sessions)
_CREDENTIAL_KEY = re.compile(r"key|secret|token|pass|credential|session|auth|signature",
                             re.IGNORECASE)
#: a secret shorter than this is not searched for in a text (it would mask ordinary words)
_SHORTEST_SECRET = 4
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


def url_credentials(url: str) -> str | None:
    """The user information of ``url`` (``user:password`` of ``s3://user:password@bucket``),
    or None."""
    match = _USERINFO.match(str(url))
    return match["user"] if match and match["user"] else None


def secrets_of_argv(argv: Sequence[str]) -> list[str]:
    """The secret words of a command line: the values of ``--storage-option KEY=VALUE`` whose
    key names a credential (``key``, ``secret``, ``token``, ``password``, ...: an endpoint or a
    region helps a message and is kept) and the user information of every URL (with its
    parts, which a library may quote alone)."""
    found: list[str] = []
    follows = False
    for word in argv:
        flag, sep, value = word.partition("=")
        if follows or (flag in _OPTION_FLAGS and sep):
            key, _, secret = (word if follows else value).partition("=")
            if _CREDENTIAL_KEY.search(key):
                found.append(secret)
        follows = word in _OPTION_FLAGS
        for match in _USERINFO_ANYWHERE.finditer(word):
            user = match["user"]
            found += [user, *user.split(":", 1)] if user else []
    return [s for s in found if len(s) >= _SHORTEST_SECRET]


def mask_text(text: str, secrets: Sequence[str] = ()) -> str:
    """``text`` with the user information of any URL in it masked, and every one of
    ``secrets`` (longest first, so that a part never unmasks the whole) replaced by
    :data:`MASK`: for messages that quote what a library said about a URL or its options."""
    text = _USERINFO_ANYWHERE.sub(lambda m: f"{m['scheme']}{MASK}@", str(text))
    for secret in sorted(set(secrets), key=len, reverse=True):
        if len(secret) >= _SHORTEST_SECRET:
            text = text.replace(secret, MASK)
    return text
