"""CSV columns (issue 46): the features by name or index (``--columns`` / ``--drop-columns``)
and the labels' column (``--label-column``), so a label or id column is never clustered as a
feature unasked."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from sklearn.datasets import load_iris

from mkrk_dask.cli import main
from mkrk_dask.csv_input import CsvColumns
from mkrk_dask.io import load_input

IRIS, IRIS_Y = load_iris(return_X_y=True)
SPECIES = np.array(["setosa", "versicolor", "virginica"])[IRIS_Y]
HEADER = "id,sepal_length,sepal_width,petal_length,petal_width,species"


def _write(path: Path, header: bool = True) -> Path:
    lines = [HEADER] if header else []
    lines += [f"{i}," + ",".join(map(str, row)) + f",{name}"
              for i, (row, name) in enumerate(zip(IRIS, SPECIES, strict=True))]
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.fixture
def iris_csv(tmp_path: Path) -> Path:
    return _write(tmp_path / "iris.csv")


@pytest.mark.parametrize("columns", [
    CsvColumns(drop_columns=("id",), label_column="species"),
    CsvColumns(drop_columns=(0,), label_column=-1),
    CsvColumns(columns=("sepal_length", 2, "petal_length", "petal_width"),
               label_column="species"),
])
def test_features_and_labels_by_name_or_index(iris_csv: Path, columns: CsvColumns) -> None:
    data = load_input(iris_csv, columns=columns)
    np.testing.assert_array_equal(data.X, IRIS)
    # text labels are coded 0..c-1 in sorted order: here the iris targets themselves
    np.testing.assert_array_equal(data.y, IRIS_Y)


def test_columns_keep_the_order_given_and_numeric_labels(tmp_path: Path) -> None:
    path = tmp_path / "num.csv"
    path.write_text("a,b,c\n1,2,7\n3,4,8\n5,6,7\n")
    data = load_input(path, columns=CsvColumns(columns=("b", "a"), label_column="c"))
    np.testing.assert_array_equal(data.X, [[2, 1], [4, 3], [6, 5]])
    assert data.y.dtype == np.int64 and list(data.y) == [7, 8, 7]


def test_without_a_header_columns_are_indices(tmp_path: Path) -> None:
    data = load_input(_write(tmp_path / "bare.csv", header=False),
                      columns=CsvColumns(columns=(1, 2, 3, 4), label_column=5))
    np.testing.assert_array_equal(data.X, IRIS)
    np.testing.assert_array_equal(data.y, IRIS_Y)


@pytest.mark.parametrize("columns, message", [
    (CsvColumns(columns=("nope",)), "no column 'nope'"),
    (CsvColumns(columns=(9,)), "column index 9 out of range"),
    (CsvColumns(columns=("id", "species"), label_column="species"),
     "both a feature and the label column"),
    (CsvColumns(columns=("species",)), "expected numbers separated by commas"),
])
def test_bad_columns(iris_csv: Path, columns: CsvColumns, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        load_input(iris_csv, columns=columns)


def test_columns_with_another_format_or_both_choices(tmp_path: Path) -> None:
    np.save(tmp_path / "x.npy", IRIS)
    with pytest.raises(ValueError, match="apply to .csv files"):
        load_input(tmp_path / "x.npy", columns=CsvColumns(label_column=0))
    with pytest.raises(ValueError, match="--columns or --drop-columns"):
        CsvColumns(columns=("a",), drop_columns=("b",))


@pytest.mark.parametrize("argv, message", [
    (["--columns", "1,nope"], "no column 'nope'"),
    (["--label-column", "species", "--labels", "y.csv"], "--labels or with --label-column"),
    (["--columns", "1", "--drop-columns", "0"], "not allowed with argument"),
    (["--label-column", "a,b"], "one column"),
])
def test_cli_column_errors_are_one_line(iris_csv: Path, capsys: pytest.CaptureFixture,
                                        argv: list[str], message: str) -> None:
    assert main(["fit", str(iris_csv), "-k", "3", *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and (err.count("\n") == 0 or err.startswith("usage:"))


def test_cli_fit_reads_the_label_column(iris_csv: Path, run_mkrk) -> None:
    run = run_mkrk("fit", str(iris_csv), "--drop-columns", "id", "--label-column", "species",
                   "-k", "3", "--out", str(iris_csv.parent / "fit"))
    assert run.returncode == 0, run.stderr
    # the species were read as labels for the metrics (iris clusters well on its 4 features)
    metrics = json.loads((iris_csv.parent / "fit" / "metrics.json").read_text())
    assert metrics["nmi"] > 0.7


@pytest.mark.parametrize("text, message", [
    # numpy named this column 3 (1-based) and the row 0-based: both are 0-based now
    ("a,b,color\n1,2,red\n3,4,blue\n",
     r"got 'red' at row 0 of the data, 0-based: line 2 of the file; column 'color', 0-based "
     r"index 2\); if the column holds text, leave it out \(--drop-columns NAME"),
    ("a,b\n1,2\n3,\n", r"got '' at row 1 of the data, 0-based: line 3 of the file; column "
                       r"'b', 0-based index 1\); the cell is empty: fill in or drop the rows"),
    ("1,2,3\n4,5\n", r"line 2 of the file \(1-based\) has 2 fields, the first row 3; every "
                     r"row needs one field per column"),
])
def test_a_cell_that_is_no_number_says_what_to_do(tmp_path: Path, text: str,
                                                  message: str) -> None:
    """Text, an empty cell or a short row: where it is, then what the user can do (not
    numpy's advice to use ``usecols``, which the command does not have), in one line."""
    path = tmp_path / "bad.csv"
    path.write_text(text)
    with pytest.raises(ValueError, match=message) as caught:
        load_input(path)
    assert "\n" not in str(caught.value) and "usecols" not in str(caught.value)


@pytest.mark.parametrize("text", [
    "a;b\n1,5;2\n3;4,25\n",  # Excel where the decimal mark is a comma
    "a\tb\n1.5\t2\n3\t4.25\n",
    '"a","b"\n"1.5","2"\n3,4.25\n',  # quoted fields
], ids=["semicolons", "tabs", "quotes"])
def test_other_separators_and_quotes(tmp_path: Path, text: str) -> None:
    """Semicolons (with decimal commas) or tabs, found from the first line, and double quotes
    around fields: the same numbers as a plain CSV (semicolon files were refused before, with
    a whole row taken for one field of text)."""
    path = tmp_path / "other.csv"
    path.write_text(text)
    data = load_input(path)
    np.testing.assert_array_equal(data.X, [[1.5, 2.0], [3.0, 4.25]])
    # what the reader chose is said (the command line prints it before the fit)
    expected = {"a;b": "values separated by semicolons, decimal commas read",
                "a\tb": "values separated by tabs, decimal commas read"}.get(text.split("\n")[0])
    assert data.extra.get("read") == expected


@pytest.mark.parametrize("first", ["0,1,2", '"1","2","3"', '"car a","car b","car c"'],
                         ids=["pandas index", "R row numbers", "R row names"])
def test_a_first_column_of_row_names_is_no_feature(tmp_path: Path, first: str) -> None:
    """A header whose first field alone is blank (pandas' ``to_csv``, R's ``write.csv``) names
    the columns after the rows' names or numbers: that column was read as a feature (the row
    numbers, silently) or refused as text. It is left out, unless ``columns`` names it."""
    rows = [[1.5, 2.0], [3.0, 4.25], [0.5, 1.0]]
    names = first.split(",")
    path = tmp_path / "frame.csv"
    path.write_text(',"a","b"\n' if '"' in first else ",a,b\n")
    path.write_text(path.read_text() + "".join(
        f"{name},{a},{b}\n" for name, (a, b) in zip(names, rows, strict=True)))
    data = load_input(path)
    np.testing.assert_array_equal(data.X, rows)
    assert data.extra["read"] == ("its first column (blank in the header: row names or "
                                  "numbers) left out")
    if "car" not in first:
        kept = load_input(path, columns=CsvColumns(columns=(0, "a")))
        np.testing.assert_array_equal(kept.X[:, 1], [1.5, 3.0, 0.5])
        assert "read" not in kept.extra


def test_the_command_line_says_how_it_read_a_csv(tmp_path: Path,
                                                 capsys: pytest.CaptureFixture) -> None:
    """A column left out, or another separator, is said before the fit: no silent choice."""
    path = tmp_path / "frame.csv"
    path.write_text(",a,b\n" + "".join(f"{i},{i % 3}.5,{i % 2}\n" for i in range(12)))
    assert main(["fit", str(path), "-k", "2", "--out", str(tmp_path / "fit")]) == 0
    captured = capsys.readouterr()
    assert (f"read {path}: its first column (blank in the header: row names or numbers) "
            "left out") in captured.out + captured.err
