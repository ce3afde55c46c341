"""Reading a CSV data file, with the columns a user picks: the features (``columns`` or
all but ``drop_columns``), the labels (``label_column``) and the rows' IDs (``id_column``),
each by header name or by 0-based index.

The file is parsed by Python's :mod:`csv` module (RFC 4180: a field in double quotes may hold
the separator, a line break or a doubled quote), and every row must have one field per
column: a row with more or fewer fields is refused, never shifted or cut.
"""

from __future__ import annotations

import array
import csv
import itertools
import re
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

__all__ = ["CsvColumns", "CsvData", "read_csv", "parse_column_list"]


@dataclass(frozen=True)
class CsvColumns:
    """The columns to read from a CSV file.

    Attributes
    ----------
    columns : tuple of str or int, optional
        The feature columns, in this order (default: all but the others named here).
    drop_columns : tuple of str or int
        Columns that are not features (notes, other ids); not with ``columns``.
    label_column : str or int, optional
        The column of the true labels: read as labels, never as a feature.
    id_column : str or int, optional
        The column of the rows' IDs: read as strings, never as a feature.
    optional_label : bool, default False
        A ``label_column`` given by a name the file's header does not have is no error: the
        file has no labels (``mkrk predict`` applies the label column of a fit so, to new
        data that may have none).
    """

    columns: tuple[str | int, ...] | None = None
    drop_columns: tuple[str | int, ...] = ()
    label_column: str | int | None = None
    id_column: str | int | None = None
    optional_label: bool = False

    def __post_init__(self) -> None:
        if self.columns is not None and self.drop_columns:
            raise ValueError("give the feature columns with --columns or --drop-columns, "
                             "not both")

    @property
    def chosen(self) -> bool:
        """True when any column is named (else every column is a feature)."""
        return bool(self.keys())

    def keys(self) -> list[str | int]:
        """Every column named, in any role."""
        return [*(self.columns or ()), *self.drop_columns,
                *(k for k in (self.label_column, self.id_column) if k is not None)]

    def to_json(self) -> dict[str, Any]:
        """The selection as JSON-able values (names stay strings, indices integers)."""
        return {"columns": None if self.columns is None else list(self.columns),
                "drop_columns": list(self.drop_columns), "label_column": self.label_column,
                "id_column": self.id_column}

    @classmethod
    def from_json(cls, record: dict[str, Any], **changes: Any) -> CsvColumns:
        """The selection :meth:`to_json` wrote, with ``changes`` over it."""
        values = {"columns": None if record.get("columns") is None
                  else tuple(record["columns"]),
                  "drop_columns": tuple(record.get("drop_columns") or ()),
                  "label_column": record.get("label_column"),
                  "id_column": record.get("id_column")}
        return cls(**{**values, **changes})


class CsvData(NamedTuple):
    """What :func:`read_csv` read.

    Attributes
    ----------
    X : ndarray of shape (n_rows, n_features)
        The features, float64.
    y : ndarray or None
        The labels of the label column: int64 where all are whole numbers, float64 where all
        are numbers, else strings; None without a label column.
    ids : ndarray of str or None
        The IDs of the ID column, as written (blanks around them taken off); None without.
    read : str or None
        How the file was read other than plain commas and every column (the separator, a
        column of row names left out), in words for the user, or None.
    """

    X: np.ndarray
    y: np.ndarray | None
    ids: np.ndarray | None
    read: str | None


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
#: a double-quoted field (quotes inside doubled), or one left open at the end of the line
_QUOTED = re.compile(r'"(?:[^"]|"")*("|$)')


def _reader(handle: Any, sep: str) -> Any:
    """The csv module's reader of the file from its start, fields split at ``sep``."""
    handle.seek(0)
    return csv.reader(handle, delimiter=sep, quotechar='"', doublequote=True,
                      skipinitialspace=True, strict=True)


def _blank(row: list[str]) -> bool:
    """A blank line (skipped, as pandas does)."""
    return not row or (len(row) == 1 and not row[0].strip())


def _separator(handle: Any) -> str:
    """The values' separator: semicolons (Excel's CSV where the decimal mark is a comma),
    tabs or commas, the first that splits the first two rows into the same number of fields,
    more than one; else commas where they split both into one (one column); else (a ragged
    second row) semicolons or tabs where the first line has them outside its quoted fields,
    else commas. A tab or a semicolon in an unquoted header name of a comma-separated file
    is no separator so."""
    widths = {}
    for sep in (";", "\t", ","):
        try:
            widths[sep] = {len(row) for row in itertools.islice(
                (row for row in _reader(handle, sep) if not _blank(row)), 2)}
        except csv.Error:
            widths[sep] = set()  # not this separator's quoting: the parse says what is wrong
    for sep, found in widths.items():
        if len(found) == 1 and min(found) > 1:
            return sep
    if widths[","] == {1}:
        return ","
    handle.seek(0)
    first = next((line for line in handle if line.strip()), "")
    return next((sep for sep in (";", "\t") if sep in _QUOTED.sub("", first)), ",")


def _decimal_comma(value: str) -> float:
    """A number whose decimal mark may be a comma (``3,25``), in a file separated otherwise."""
    return float(value.replace(",", "."))


def _converts(convert: Any, text: str) -> bool:
    """True where ``convert`` (float, :func:`_decimal_comma`) reads ``text``."""
    try:
        convert(text)
    except ValueError:
        return False
    return True


def _is_header(fields: list[str]) -> bool:
    """A header names columns: no field is a number and some are not blank. A row with some
    numbers (and a missing or non-numeric cell) is data, left to fail as such."""
    return not any(_converts(float, f) for f in fields) and any(fields)


def _rows(handle: Any, sep: str, path: Path) -> Iterator[tuple[int, list[str]]]:
    """The non-blank rows of the file with the 1-based line of the file each starts on (a
    quoted field may span lines)."""
    reader = _reader(handle, sep)
    while True:
        line = reader.line_num + 1
        try:
            row = next(reader, None)
        except csv.Error as err:
            raise ValueError(f"{path}: line {line} of the file (1-based) is no valid CSV "
                             f'({err}): a field in double quotes ends at a quote ("" inside '
                             "it is a quote)") from None
        if row is None:
            return
        if not _blank(row):
            yield line, row


def _column_name(column: int, names: list[str] | None) -> str:
    """A column for a message: its header name and 0-based index, or the index alone."""
    if names is not None and names[column]:
        return f"column {names[column]!r}, 0-based index {column}"
    return f"column {column} (0-based)"


class _Resolver:
    """The 0-based indices of the columns a user named, by header name or 0-based index (a
    name first: a header may name a column "3")."""

    def __init__(self, names: list[str] | None, width: int, path: Path):
        self.names, self.width, self.path = names, width, path

    def by_name(self, key: str | int) -> bool:
        return self.names is not None and str(key) in self.names

    def index(self, key: str | int) -> int:
        if self.by_name(key):
            return self.names.index(str(key))
        if isinstance(key, int) and -self.width <= key < self.width:
            return key % self.width
        if isinstance(key, int):
            raise ValueError(f"{self.path}: column index {key} out of range ({self.width} "
                             "columns; indices are 0-based)")
        known = (f"its header names {self.names}" if self.names is not None
                 else "it has no header: give 0-based indices")
        raise ValueError(f"{self.path}: no column {key!r} ({known})")

    def check_unique(self, columns: CsvColumns) -> None:
        """Refuse a header naming a column twice where the names are used: to resolve any
        name the user gave, or to take every column as a feature (a pasted column, a second
        label column). A selection by 0-based indices only is unambiguous."""
        if self.names is None:
            return
        counts = Counter(name for name in self.names if name)
        twice = [name for name, count in counts.items() if count > 1]
        keys = columns.keys()
        if twice and (not keys or any(self.by_name(k) for k in keys)):
            where = [i for i, name in enumerate(self.names) if name == twice[0]]
            raise ValueError(f"{self.path}: the header names column {twice[0]!r} "
                             f"{len(where)} times (0-based indices "
                             f"{', '.join(map(str, where))}); rename the columns, or pick "
                             "them all by 0-based index")


def _layout(columns: CsvColumns, names: list[str] | None, width: int, row_names: bool,
            path: Path) -> tuple[list[int], int | None, int | None]:
    """The feature columns, the label column and the ID column (0-based; None: none)."""
    resolve = _Resolver(names, width, path)
    resolve.check_unique(columns)
    label = columns.label_column
    if label is not None and columns.optional_label and isinstance(label, str):
        label = label if resolve.by_name(label) else None  # new data without labels
    label = None if label is None else resolve.index(label)
    ident = None if columns.id_column is None else resolve.index(columns.id_column)
    if label is not None and label == ident:
        raise ValueError(f"{path}: {_column_name(label, names)} is both the label column and "
                         "the ID column")
    if columns.columns is not None:
        use = [resolve.index(c) for c in columns.columns]
        for role, column in (("label", label), ("ID", ident)):
            if column in use:
                raise ValueError(f"{path}: {_column_name(column, names)} is both a feature "
                                 f"and the {role} column")
    else:
        dropped = {resolve.index(c) for c in columns.drop_columns}
        dropped |= {0} if row_names else set()
        dropped |= {c for c in (label, ident) if c is not None}
        use = [c for c in range(width) if c not in dropped]
    if not use:
        raise ValueError(f"{path}: no feature column left")
    return use, label, ident


def _cell_error(path: Path, sep: str, value: str, data_row: int, line: int, column: int,
                names: list[str] | None) -> ValueError:
    """A cell that is no number: where it is, what it holds and what the user can do."""
    if not value.strip():
        hint = "; the cell is empty: fill in or drop the rows with missing values"
    else:
        hint = ("; if the column holds text, leave it out (--drop-columns NAME, or --columns; "
                "drop_columns= or columns= in Python) or take it as the labels "
                "(--label-column NAME) or the IDs (--id-column NAME)")
    return ValueError(f"{path}: expected numbers separated by {_SEPARATORS[sep]} (got "
                      f"{value!r} at row {data_row} of the data, 0-based: line {line} of the "
                      f"file; {_column_name(column, names)}){hint}")


def _as_labels(texts: list[str]) -> np.ndarray:
    """Labels: int64 where all are whole numbers, float64 where all are numbers, else
    strings (coded 0..c-1 in sorted order later, with the other formats' labels)."""
    y = np.array(texts, dtype=str)
    try:
        numbers = y.astype(np.float64)
    except ValueError:
        return y
    return numbers.astype(np.int64) if np.all(numbers == np.round(numbers)) else numbers


def read_csv(path: Path, columns: CsvColumns | None = None) -> CsvData:
    """Read a CSV file of numbers, with the columns ``columns`` picks.

    The rules, one set for every file:

    - UTF-8; a byte order mark (Excel's "CSV UTF-8") is ignored.
    - The separator is a semicolon, a tab or a comma: the first that splits the first two
      rows into as many fields, more than one; else a comma where the file has one column;
      else a semicolon or a tab where the first line has one outside its quoted fields, else
      a comma. Where it is no comma, a decimal comma (``3,25``) is read too.
    - Fields are parsed as RFC 4180 has them: a field in double quotes may hold the
      separator, a line break or a doubled quote (``""``), and the quotes are no part of its
      value. Blanks around a field and blank lines are ignored.
    - The first row is a header when no field of it is a number; a row with some numbers (and
      a missing or non-numeric cell) is data, and fails as such. A header whose first field
      alone is blank names the columns after a first column of row names or numbers (what
      pandas' ``to_csv`` and R's ``write.csv`` write): that column is no feature, unless
      ``columns`` names it.
    - Every row has as many fields as the header (or, without one, the first row); any
      other row is an error that gives its line in the file and both counts.
    - Columns are named by header name or 0-based index (a name first). A header that names
      a column twice is an error where the names are used: when a column is named by name,
      or when no column is named at all (every column a feature); a selection by indices
      only reads such a file.
    - Features are numbers; a cell that is not is an error naming its row, its column (header
      name and 0-based index) and its value.

    Parameters
    ----------
    path : Path
        The file.
    columns : CsvColumns, optional
        The features, the label column and the ID column (default: every column a feature).

    Returns
    -------
    CsvData
        The features, the labels, the IDs and how the file was read.

    Raises
    ------
    ValueError
        A file breaking a rule above, a column that does not exist or is named in two roles,
        or no data rows; one line naming the file.
    UnicodeDecodeError
        A file that is no UTF-8 text.
    """
    columns = columns or CsvColumns()
    # utf-8-sig: Excel's "CSV UTF-8" starts with a byte order mark, which is no data;
    # newline="": the csv module reads line breaks inside quoted fields itself.
    with open(path, encoding="utf-8-sig", newline="") as handle:
        sep = _separator(handle)
        rows = _rows(handle, sep, path)
        first_line, first = next(rows, (0, []))
        if not first:
            raise ValueError(f"{path}: no data rows (the file is empty or holds only a header)")
        first = [f.strip() for f in first]
        header = _is_header(first)
        width = len(first)
        names = first if header else None
        row_names = header and width > 1 and not first[0] and all(first[1:])
        use, label, ident = _layout(columns, names, width, row_names, path)
        convert = float if sep == "," else _decimal_comma
        # compact float64 storage as the rows come: a list of floats takes 4x the memory
        values = array.array("d")
        labels: list[str] = []
        ids: list[str] = []
        data_rows = [] if header else [(first_line, first)]
        for n_row, (line, row) in enumerate(itertools.chain(data_rows, rows)):
            if len(row) != width:
                raise ValueError(f"{path}: line {line} of the file (1-based) has {len(row)} "
                                 f"fields, the {'header' if header else 'first row'} {width}; "
                                 "every row needs one field per column (a value holding "
                                 "the separator goes in double quotes)")
            try:
                values.extend([convert(row[c]) for c in use])
            except ValueError:
                bad = next(c for c in use if not _converts(convert, row[c]))
                raise _cell_error(path, sep, row[bad], n_row, line, bad, names) from None
            if label is not None:
                labels.append(row[label].strip())
            if ident is not None:
                ids.append(row[ident].strip())
    if not values:
        raise ValueError(f"{path}: no data rows (the file is empty or holds only a header)")
    X = np.frombuffer(values, dtype=np.float64).reshape(-1, len(use))
    read = [] if sep == "," else [f"values separated by {_SEPARATORS[sep]}, decimal commas read"]
    if row_names and 0 not in use:
        read.append("its first column (blank in the header: row names or numbers) left out")
    return CsvData(X, None if label is None else _as_labels(labels),
                   None if ident is None else np.array(ids, dtype=str),
                   "; ".join(read) or None)
