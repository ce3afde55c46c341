"""CSV through a real parser (issue 80) and the ID column (issue 79): quoted fields as RFC 4180
has them, a row with the wrong number of fields or a header naming a column twice refused in
one line, through the Python reader and through ``mkrk fit``; ``--id-column`` giving
``id,label`` labels files, and ``mkrk predict`` applying the columns of its fit."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from mkrk_dask.cli import main
from mkrk_dask.csv_input import CsvColumns, read_csv
from mkrk_dask.io import load_input

#: a fast fit of small data (the exact solver, no cluster)
FIT = ["-k", "2", "--solver", "exact", "-q"]


def _two_groups(n: int = 60, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Two groups of rows apart on the 'weight' column; 'height' is noise."""
    rng = np.random.default_rng(seed)
    y = np.arange(n) % 2
    weight = 10.0 * y + rng.normal(0, 0.5, n)
    height = rng.normal(170, 5, n)
    return np.column_stack([height, weight]).round(3), y


def _write(path: Path, lines: list[str]) -> Path:
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _fit_error(path: Path, capsys: pytest.CaptureFixture, *argv: str) -> str:
    """``mkrk fit`` on ``path`` refused: exit 2 and its one line of error."""
    assert main(["fit", str(path), *FIT, *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("mkrk fit: error: ") and "\n" not in err, err
    return err


# --------------------------------------------------------------------------- the bugs


def test_a_quoted_header_field_holding_a_comma(tmp_path: Path,
                                               capsys: pytest.CaptureFixture) -> None:
    """``"height, cm"`` was split at its comma: every name after it pointed one column too
    far, and ``--columns weight`` read past the rows."""
    X, y = _two_groups()
    path = _write(tmp_path / "h.csv", ['id,"height, cm",weight,group'] + [
        f"{i},{h},{w},{g}" for i, ((h, w), g) in enumerate(zip(X, y, strict=True))])
    data = read_csv(path, CsvColumns(columns=("weight",), label_column="group"))
    np.testing.assert_array_equal(data.X, X[:, 1:])
    np.testing.assert_array_equal(data.y, y)
    # the header's name, with its comma, picks its column too
    both = load_input(path, columns=CsvColumns(drop_columns=("id",), label_column="group"))
    np.testing.assert_array_equal(both.X, X)
    out = tmp_path / "fit"
    assert main(["fit", str(path), *FIT, "--columns", "weight", "--label-column", "group",
                 "--out", str(out)]) == 0
    result = json.loads((out / "result.json").read_text())
    assert result["n_features"] == [1] and result["metrics"]["acc"] == 1.0


@pytest.mark.parametrize("bad, fields", [
    ("7,170.5,1,234.5", 4),  # a thousands separator, unquoted
    ("7,170.5", 2),
], ids=["more fields", "fewer fields"])
@pytest.mark.parametrize("argv", [[], ["--drop-columns", "id"]], ids=["all", "drop id"])
def test_a_row_with_the_wrong_number_of_fields(tmp_path: Path, capsys: pytest.CaptureFixture,
                                               bad: str, fields: int, argv: list[str]) -> None:
    """A row with more fields than the header lost its extra field where columns were picked
    (the values after it shifted); now any row of another width is refused, by its line."""
    X, _ = _two_groups()
    lines = ["id,height,weight"] + [f"{i},{h},{w}" for i, (h, w) in enumerate(X)]
    lines[5] = bad  # line 6 of the file
    path = _write(tmp_path / "ragged.csv", lines)
    message = f"line 6 of the file (1-based) has {fields} fields, the header 3"
    columns = CsvColumns(drop_columns=("id",)) if argv else None
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        read_csv(path, columns)
    assert message in _fit_error(path, capsys, *argv)


def test_a_quoted_value_holding_the_separator_is_one_field(tmp_path: Path) -> None:
    """The same row with its comma inside quotes is one field: an ID, read as written."""
    path = _write(tmp_path / "q.csv", ["id,height,weight", '"7,1",170.5,"1234.5"',
                                       '"a ""b""",160,"70"'])
    data = read_csv(path, CsvColumns(id_column="id"))
    np.testing.assert_array_equal(data.X, [[170.5, 1234.5], [160, 70]])
    assert data.ids.tolist() == ["7,1", 'a "b"']


@pytest.mark.parametrize("header, argv, name", [
    ("a,b,a", [], "a"),  # every column a feature: one of them pasted twice?
    ("a,b,a", ["--drop-columns", "a"], "a"),  # only the first a was dropped
    ("label,b,label", ["--label-column", "label"], "label"),  # the second was a feature
    ("id,b,b", ["--drop-columns", "id"], "b"),  # any name used: the header is in question
])
def test_a_header_naming_a_column_twice(tmp_path: Path, capsys: pytest.CaptureFixture,
                                        header: str, argv: list[str], name: str) -> None:
    path = _write(tmp_path / "dup.csv", [header] + [f"{i % 2},{i}.5,{i % 2}" for i in range(60)])
    message = f"the header names column {name!r} 2 times (0-based indices"
    drop = tuple(argv[1].split(",")) if argv and argv[0] == "--drop-columns" else ()
    label = argv[1] if argv and argv[0] == "--label-column" else None
    with pytest.raises(ValueError, match=message.replace("(", r"\(")):
        read_csv(path, CsvColumns(drop_columns=drop, label_column=label))
    assert message in _fit_error(path, capsys, *argv)


def test_a_duplicated_name_is_read_when_columns_go_by_index(tmp_path: Path,
                                                            capsys: pytest.CaptureFixture
                                                            ) -> None:
    """Indices are unambiguous: such a file is read (the error says so) with 0-based indices
    only, the ID column's among them."""
    path = _write(tmp_path / "dup.csv", ["x,label,label"] + [f"r{i},{i % 2},{i}.5"
                                                              for i in range(60)])
    data = read_csv(path, CsvColumns(columns=(2,), label_column=1, id_column=0))
    np.testing.assert_array_equal(data.X[:, 0], np.arange(60) + 0.5)
    np.testing.assert_array_equal(data.y, np.arange(60) % 2)
    assert data.ids[-1] == "r59"
    out = tmp_path / "fit"
    assert main(["fit", str(path), *FIT, "--columns", "2", "--label-column", "1",
                 "--id-column", "0", "--out", str(out)]) == 0
    assert (out / "labels.csv").read_text().splitlines()[:2][0] == "id,label"


@pytest.mark.parametrize("columns, message", [
    (CsvColumns(label_column="b", id_column="b"),
     "column 'b', 0-based index 1 is both the label column and the ID column"),
    (CsvColumns(columns=("a", "b"), id_column="b"),
     "column 'b', 0-based index 1 is both a feature and the ID column"),
    (CsvColumns(id_column="nope"), r"no column 'nope' \(its header names \['a', 'b', 'c'\]\)"),
])
def test_an_id_column_in_two_roles_or_absent(tmp_path: Path, columns: CsvColumns,
                                             message: str) -> None:
    path = _write(tmp_path / "t.csv", ["a,b,c", "1,2,3", "4,5,6"])
    with pytest.raises(ValueError, match=message):
        read_csv(path, columns)


def test_a_cell_that_is_no_number_is_named_by_row_column_and_value(tmp_path: Path) -> None:
    path = _write(tmp_path / "t.csv", ['a,"b, c",d', "1,2,3", "4,n/a,6"])
    with pytest.raises(ValueError) as caught:
        read_csv(path)
    assert ("(got 'n/a' at row 1 of the data, 0-based: line 3 of the file; column 'b, c', "
            "0-based index 1)") in str(caught.value)


# --------------------------------------------------------------------------- random files


def _field(text: str, sep: str, rng: np.random.Generator) -> str:
    """A field as a CSV writer may put it: in quotes where it must be, else at random."""
    if any(c in text for c in (sep, '"', "\n")) or rng.random() < 0.3:
        return '"' + text.replace('"', '""') + '"'
    return text


def _random_csv(rng: np.random.Generator) -> tuple[str, str, bool, tuple[int, ...] | None]:
    """A random CSV file, its separator, whether it breaks a rule (a duplicated name used, a
    row of another width, an empty cell) and the columns to pick (by index, or None)."""
    width = int(rng.integers(1, 5))
    # one column has no separator to tell a semicolon file (with its decimal commas) by
    sep = str(rng.choice([",", ",", ";", "\t"])) if width > 1 else ","
    names = [str(rng.choice(["a", "b", "c", "h, cm", 'say "x"', "d;e", "two\nlines",
                             "tab\there"])) for _ in range(width)]
    by_index = rng.random() < 0.5
    broken = len(set(names)) < width and not by_index
    lines = [sep.join(_field(n, sep, rng) for n in names)]
    for _ in range(int(rng.integers(1, 7))):
        values = [repr(float(v)) for v in rng.normal(0, 10.0 ** rng.integers(-3, 4), width)]
        if sep != ",":
            values = [v.replace(".", ",") for v in values]  # decimal commas there
        if width > 1 and rng.random() < 0.05:  # (a blank line is skipped, as pandas does)
            values[int(rng.integers(width))] = ""
            broken = True
        fields = [_field(v, sep, rng) for v in values]
        if rng.random() < 0.1:
            fields.append(_field("1", sep, rng))
            broken = True
        elif width > 1 and rng.random() < 0.1:
            fields.pop()
            broken = True
        lines.append(sep.join(fields))
    return "\n".join(lines) + "\n", sep, broken, tuple(range(width)) if by_index else None


def test_random_files_read_as_pandas_reads_them_or_are_refused_in_one_line(
        tmp_path: Path) -> None:
    """200 random CSV files (quoted fields holding separators, quotes and line breaks,
    duplicated names, missing and extra fields, empty cells): each is read as pandas reads
    it, or, where it breaks a rule, refused in one line."""
    rng = np.random.default_rng(80)
    path = tmp_path / "random.csv"
    read = refused = 0
    for case in range(200):
        text, sep, broken, picked = _random_csv(rng)
        path.write_text(text, encoding="utf-8")
        columns = None if picked is None else CsvColumns(columns=picked)
        if broken:
            with pytest.raises(ValueError) as caught:
                read_csv(path, columns)
            message = str(caught.value)
            assert message.startswith(f"{path}: ") and "\n" not in message, (case, text)
            refused += 1
            continue
        data = read_csv(path, columns)
        frame = pd.read_csv(path, sep=sep, decimal="," if sep != "," else ".")
        np.testing.assert_array_equal(data.X, frame.to_numpy(dtype=np.float64),
                                      err_msg=f"case {case}: {text!r}")
        read += 1
    assert read > 50 and refused > 50  # both kinds were drawn


# --------------------------------------------------------------------------- IDs, predict


def _with_ids(path: Path, X: np.ndarray, y: np.ndarray,
              label: str | None = "species") -> list[str]:
    """A CSV of ``X`` with an ID column between its features and a column of text labels
    named ``label`` (none: no labels); its IDs."""
    ids = [f"sample {i}, batch {i // 10}" for i in range(X.shape[0])]  # commas: quoted
    header = "weight,name,height" + (f",{label}" if label else "")
    _write(path, [header] + [
        f'{w},"{i}",{h}' + (f",{'ab'[g]}" if label else "")
        for i, (h, w), g in zip(ids, X, y, strict=True)])
    return ids


def test_fit_and_predict_write_the_ids(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """``mkrk fit --id-column --label-column`` writes ``id,label``; ``mkrk predict RUN
    new.csv`` applies the fit's columns (no flags given again) and writes ``id,label`` too;
    a flag given to predict replaces the recorded one."""
    X, y = _two_groups()
    train = tmp_path / "train.csv"
    ids = _with_ids(train, X, y)
    run = tmp_path / "run"
    assert main(["fit", str(train), *FIT, "--id-column", "name", "--label-column", "species",
                 "--out", str(run)]) == 0
    fitted = np.load(run / "labels.npy")
    table = pd.read_csv(run / "labels.csv", dtype={"id": str})
    assert list(table.columns) == ["id", "label"] and table["id"].tolist() == ids
    np.testing.assert_array_equal(table["label"], fitted)
    assert json.loads((run / "input.json").read_text())["csv_columns"] == {
        "columns": None, "drop_columns": [], "label_column": "species", "id_column": "name"}
    capsys.readouterr()

    out = tmp_path / "x.csv"
    assert main(["predict", str(run), str(train), "--out", str(out), "-q"]) == 0
    predicted = pd.read_csv(out, dtype={"id": str})
    assert list(predicted.columns) == ["id", "label"] and predicted["id"].tolist() == ids
    np.testing.assert_array_equal(predicted["label"], fitted)
    # the species were read as the labels (not a feature): the scores
    assert capsys.readouterr().out.startswith("ACC 100.00")

    # new data without the label column: the fit's is read where present
    new = tmp_path / "new.csv"
    new_ids = _with_ids(new, X[:5], y[:5], label=None)
    assert main(["predict", str(run), str(new), "-q"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "id,label" and len(lines) == 6
    assert lines[1] == f'"{new_ids[0]}",{fitted[0]}'
    # an option given replaces the fit's: the labels in another column
    _with_ids(new, X, y, label="kind")
    assert main(["predict", str(run), str(new), "--label-column", "kind", "--out",
                 str(tmp_path / "k.csv"), "--force", "-q"]) == 0
    assert capsys.readouterr().out.startswith("ACC 100.00")
    np.testing.assert_array_equal(pd.read_csv(tmp_path / "k.csv")["label"], fitted)


def test_graph_writes_the_ids_and_records_the_columns(tmp_path: Path,
                                                      capsys: pytest.CaptureFixture) -> None:
    """``mkrk graph`` writes ``id,label`` too, and predict takes its recorded columns."""
    X, y = _two_groups()
    data = tmp_path / "d.csv"
    ids = _with_ids(data, X, y)
    run = tmp_path / "graph"
    assert main(["graph", str(data), "-k", "2", "--n-anchors", "20", "--id-column", "name",
                 "--label-column", "species", "--out", str(run), "-q"]) == 0
    table = pd.read_csv(run / "labels.csv", dtype={"id": str})
    assert list(table.columns) == ["id", "label"] and table["id"].tolist() == ids
    capsys.readouterr()
    assert main(["predict", str(run), str(data), "-q"]) == 0
    assert capsys.readouterr().out.splitlines()[1] == f'"{ids[0]}",{table["label"][0]}'


def test_a_stray_quote_is_refused_by_its_line(tmp_path: Path) -> None:
    """Text after a closing quote: no silent guess at what the field was."""
    path = _write(tmp_path / "q.csv", ["a,b", "1,2", '3,"4"5'])
    with pytest.raises(ValueError, match=r"line 3 of the file \(1-based\) is no valid CSV"):
        read_csv(path)
