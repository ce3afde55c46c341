"""Reading a CSV data file, with the columns a user picks: the features (``columns`` or
all but ``drop_columns``) and the labels (``label_column``), each by header name or by
0-based index."""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np

__all__ = ["CsvColumns", "read_csv", "parse_column_list"]


@dataclass(frozen=True)
class CsvColumns:
    """The columns to read from a CSV file.

    Attributes
    ----------
    columns : tuple of str or int, optional
        The feature columns, in this order (default: all but the others named here).
    drop_columns : tuple of str or int
        Columns that are not features (ids, notes); not with ``columns``.
    label_column : str or int, optional
        The column of the true labels: read as labels, never as a feature.
    """

    columns: tuple[str | int, ...] | None = None
    drop_columns: tuple[str | int, ...] = ()
    label_column: str | int | None = None

    def __post_init__(self) -> None:
        if self.columns is not None and self.drop_columns:
            raise ValueError("give the feature columns with --columns or --drop-columns, "
                             "not both")

    @property
    def chosen(self) -> bool:
        return self.columns is not None or bool(self.drop_columns) or self.label_column is not None


def parse_column_list(text: str) -> tuple[str | int, ...]:
    """``"a,b,3"`` as ``("a", "b", 3)``: whole numbers are indices unless a header names them
    (see :func:`read_csv`)."""
    items = tuple(_column_key(t) for t in text.split(",") if t.strip())
    if not items:
        raise ValueError(f"no column in {text!r}")
    return items


def _column_key(text: str) -> str | int:
    text = text.strip()
    try:
        return int(text)
    except ValueError:
        return text


#: what separates the values, in words
_SEPARATORS = {",": "commas", ";": "semicolons", "\t": "tabs"}


def _separator(line: str) -> str:
    """The values' separator, from the first line: semicolons (Excel's CSV where the decimal
    mark is a comma) or tabs where the line has them, else commas."""
    return next((sep for sep in (";", "\t") if sep in line), ",")


def _fields(line: str, sep: str) -> list[str]:
    """A line's fields, blanks and the double quotes around them (R's ``write.csv``) taken
    off."""
    return [f.strip().strip('"').strip() for f in line.rstrip("\r\n").split(sep)]


def _decimal_comma(value: str) -> float:
    """A number whose decimal mark may be a comma (``3,25``), in a file separated otherwise."""
    return float(value.replace(",", "."))


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _is_header(fields: list[str]) -> bool:
    """A header names columns: no field is a number and some are not blank. A row with some
    numbers (and a missing or non-numeric cell) is data, left to fail as such."""
    return not any(_is_number(f) for f in fields) and any(f.strip() for f in fields)


def _index(key: str | int, names: list[str] | None, width: int, path: Path) -> int:
    """The 0-based index of a column given by header name or index (a name first: a header
    may name a column "3")."""
    if names is not None and str(key) in names:
        return names.index(str(key))
    if isinstance(key, int) and -width <= key < width:
        return key % width
    if isinstance(key, int):
        raise ValueError(f"{path}: column index {key} out of range ({width} columns)")
    known = f"its header names {names}" if names is not None else "it has no header"
    raise ValueError(f"{path}: no column {key!r} ({known})")


def _csv_problem(message: str) -> str:
    """numpy's reason a CSV is no table of numbers, in parentheses, and what to do about it:
    an empty cell is a missing value; text is a column of names or categories, to leave out
    or take as the labels (numpy's own advice, ``usecols``, is no option of the command)."""
    reason = message.split("; use `usecols`")[0].rstrip(".")
    if "could not convert string ''" in message:
        hint = "; the cell is empty: fill in or drop the rows with missing values"
    elif "could not convert string" in message:
        hint = ("; a column of text: leave it out (--drop-columns NAME, or --columns; "
                "drop_columns= or columns= in Python) or take it as the labels "
                "(--label-column NAME)")
    elif "number of columns changed" in message:
        hint = "; every row needs the same number of fields"
    else:
        hint = ""
    return f"({reason}){hint}"


def read_csv(path: Path, columns: CsvColumns | None = None
             ) -> tuple[np.ndarray, np.ndarray | None, str | None]:
    """Numbers separated by commas (or by semicolons or tabs, as the first line shows; there a
    decimal comma is read too) as float64 rows, and the labels of ``columns.label_column``
    (numbers where all are, else strings), or None.

    UTF-8; a byte order mark is ignored, and so are double quotes around a field. A first row
    in which no field is a number is a header and skipped. A header whose first field alone
    is blank names the columns after a first column of row names or numbers (what pandas'
    ``to_csv`` and R's ``write.csv`` write): that column is no feature, unless ``columns``
    names it.

    The third value says, in words, what was read other than plain commas and every column
    (the separator, a column of row names left out), or is None: the caller shows it.
    """
    columns = columns or CsvColumns()
    # utf-8-sig: Excel's "CSV UTF-8" starts with a byte order mark, which is no data.
    with open(path, encoding="utf-8-sig") as handle:
        first = handle.readline()
        sep = _separator(first)
        names = _fields(first, sep)
        header = _is_header(names)
        if not header:
            handle.seek(0)
        width = len(names)
        row_names = header and width > 1 and not names[0] and all(names[1:])
        names = names if header else None
        label = (None if columns.label_column is None
                 else _index(columns.label_column, names, width, path))
        if columns.columns is not None:
            use = [_index(c, names, width, path) for c in columns.columns]
        else:
            dropped = {_index(c, names, width, path) for c in columns.drop_columns}
            dropped |= {0} if row_names else set()
            use = [c for c in range(width) if c not in dropped]
        if label is not None:
            if label in use and columns.columns is not None:
                raise ValueError(f"{path}: column {columns.label_column!r} is both a feature "
                                 "and the label column")
            use = [c for c in use if c != label]
        if not use:
            raise ValueError(f"{path}: no feature column left")
        start = handle.tell()
        with warnings.catch_warnings():
            # An empty file is reported below, in one line, not as numpy's warning.
            warnings.filterwarnings("ignore", "loadtxt: input contained no data")
            # numpy's own parser where commas separate; a converter (slower) elsewhere
            convert = {} if sep == "," else {"converters": _decimal_comma}
            try:
                X = np.loadtxt(handle, delimiter=sep, ndmin=2, dtype=np.float64,
                               quotechar='"', **convert,
                               usecols=None if use == list(range(width)) else use)
            except ValueError as err:
                raise ValueError(f"{path}: expected numbers separated by {_SEPARATORS[sep]} "
                                 f"{_csv_problem(str(err))}") from err
            y = None
            if label is not None:
                handle.seek(start)
                y = np.loadtxt(handle, delimiter=sep, ndmin=1, dtype=str, usecols=label,
                               quotechar='"')
                y = np.char.strip(y)
    if X.size == 0:
        raise ValueError(f"{path}: no data rows (the file is empty or holds only a header)")
    read = [] if sep == "," else [f"values separated by {_SEPARATORS[sep]}, decimal commas read"]
    if row_names and 0 not in use:
        read.append("its first column (blank in the header: row names or numbers) left out")
    if y is not None:
        try:
            numbers = y.astype(np.float64)
        except ValueError:
            numbers = None  # text labels: coded 0..c-1 in sorted order with the others
        if numbers is not None:
            y = numbers.astype(np.int64) if np.all(numbers == np.round(numbers)) else numbers
    return X, y, "; ".join(read) or None
