"""DATA on the command line: one file, or several files with one view each, the views'
names (``--view-names``), and new data for ``mkrk predict`` checked against the views of its
model (the error names them and says how to give them)."""

from __future__ import annotations

import argparse
from dataclasses import replace
from typing import Any

from ..io import Dataset, load_input
from ..views import (
    check_new_views,
    check_view_names,
    default_view_names,
    load_view_files,
    named_views,
)
from .errors import UserError

__all__ = ["load_data", "source_of", "views_for"]


def load_data(args: argparse.Namespace, **kwargs: Any) -> Dataset:
    """The files of DATA (``load_input``'s keywords as given), named by --view-names."""
    if len(args.data) > 1:  # several files, one view each
        data = load_view_files(args.data, **kwargs)
    else:
        data = load_input(args.data[0], **kwargs)
    if getattr(args, "view_names", None) is not None:
        try:
            names = check_view_names(args.view_names, len(data.views))
        except ValueError as err:
            raise UserError(f"--view-names: {err}") from None
        data = replace(data, view_names=tuple(names))
    return data


def source_of(args: argparse.Namespace) -> str | list[str]:
    """DATA as the user named it: one path, or the list of several files' paths."""
    return args.data[0] if len(args.data) == 1 else list(args.data)


def _hint(names: list[str]) -> str:
    """How to give a multi-view model's views on the command line."""
    plain = default_view_names(len(names))
    keys = names if names == plain else [*names[:-1], f"{names[-1]} (or {', '.join(plain)})"]
    return (f"give the views as arrays {', '.join(keys)} of one .npz, or as {len(names)} "
            "files in this order")


def views_for(args: argparse.Namespace, model: Any, data: Dataset) -> Any:
    """New data for ``model.predict``: by name where its views' names are the model's (an
    .npz with the fit's keys, --view-names), else in order (several files); checked against
    the model's views first."""
    names = getattr(model, "view_names_", None)
    dims = getattr(model, "n_features_per_view_", None)
    given = data.view_names
    by_name = given is not None and (args.view_names is not None
                                     or names is None or set(given) == set(names))
    X = named_views(data.X, given) if by_name else data.X
    if names and dims:
        check_new_views(X, names, dims, hint=_hint(list(names)))
    return X
