"""Tabular data sets with a class label from Debian's R packages, for the defaults benchmark.

Columns in different units, counts, ordinal scores and categorical features: kinds of data
the default was not developed on. Benchmark only: the library never reads R files.

Install the data and the reader::

    apt-get install -y r-cran-kernlab r-cran-mass   # the data (Debian, Ubuntu)
    pip install -e ".[bench]"                        # rdata, the R serialization reader

kernlab ships plain ``.rda`` files (``/usr/lib/R/site-library/kernlab/data/``); MASS keeps its
data in a lazy-load database (``/usr/lib/R/library/MASS/data/Rdata.rdx`` and ``.rdb``): the
``.rdx`` file is an RDS file whose ``variables`` entry maps each name to an (offset, length)
of the ``.rdb`` file, where the object is a 4-byte length then a zlib stream of R's
serialization. r-cran-cluster was looked at and left out: its data sets carry no class label.
Base R's own ``datasets`` package (``/usr/lib/R/library/datasets/data/``, always installed with
R) keeps the same kind of database, its objects compressed by xz instead (a type byte ``Z``
after the length, then a raw LZMA2 stream; ``2`` marks bzip2, ``1`` zlib, ``0`` none).

:data:`HOLDOUT` holds sets added after the default's rules were set (stop 58): none of them was
used to choose a rule or a constant. They answer whether the default holds on data it was
never tuned on; ``bench_defaults_wide.py --datasets holdout`` runs them alone.

Every set: factors one-hot encoded (every level, so no level is the reference), rows with a
missing value dropped, the label column (and identifiers, and columns that define the label)
dropped. :data:`TABULAR` documents each one.
"""

from __future__ import annotations

import warnings
import zlib
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

__all__ = ["TABULAR", "HOLDOUT", "TabularSet", "load_tabular", "describe"]

#: where Debian's R packages put their data (site-library: kernlab; library: MASS)
R_ROOTS = (Path("/usr/lib/R/site-library"), Path("/usr/lib/R/library"))


@dataclass(frozen=True)
class TabularSet:
    """One R data set: its package and object, the label, what else to drop, and why it is
    here (the kinds of its columns)."""

    package: str
    obj: str
    label: str | tuple[str, ...]
    drop: tuple[str, ...] = ()
    kinds: str = ""
    extra: tuple[str, ...] = field(default=())  # more objects stacked below (Pima.te)
    categorical: tuple[str, ...] = ()  # integer codes that name categories (birthwt's race)


#: name (``<package>:<set>``) -> the set. Labels are the classes the data were collected for.
TABULAR: dict[str, TabularSet] = {
    "kernlab:spam": TabularSet(
        "kernlab", "spam", "type",
        kinds="48 word and 6 character frequencies (%), 3 capital-run lengths (1 to 15,841)"),
    "kernlab:musk": TabularSet(
        "kernlab", "musk", "Class",
        kinds="166 molecular shape features, integers from about -300 to 400"),
    "kernlab:promotergene": TabularSet(
        "kernlab", "promotergene", "Class",
        kinds="57 DNA bases (factors a/c/g/t), one-hot: 228 binary columns"),
    "MASS:crabs": TabularSet(
        "MASS", "crabs", ("sp", "sex"), drop=("index",),
        kinds="5 body measurements in mm (RW 6-20, CW 17-54); label species x sex (4 groups)"),
    "MASS:Pima": TabularSet(
        "MASS", "Pima.tr", "type", extra=("Pima.te",),
        kinds="7 clinical variables: counts, mmHg, mm, kg/m^2, years, a pedigree score"),
    "MASS:biopsy": TabularSet(
        "MASS", "biopsy", "class", drop=("ID",),
        kinds="9 ordinal cytology scores 1-10"),
    "MASS:fgl": TabularSet(
        "MASS", "fgl", "type",
        kinds="refractive index (~1.52) and 8 oxide weight percents (0 to 75)"),
    "MASS:Cars93": TabularSet(
        "MASS", "Cars93", "Type", drop=("Manufacturer", "Model", "Make"),
        kinds="18 numbers in USD, mpg, hp, rpm, inches, lb, gallons; 5 factors one-hot "
              "(the vans have no luggage room: dropped with the NA rows)"),
    "MASS:birthwt": TabularSet(
        "MASS", "birthwt", "low", drop=("bwt",), categorical=("race",),
        kinds="age, weight (lb), counts; race one-hot; 3 binary (bwt, which defines low, "
              "dropped)"),
    "MASS:survey": TabularSet(
        "MASS", "survey", "Sex",
        kinds="hand spans (cm), height (cm), pulse, age; 6 factors one-hot"),
    "MASS:cats": TabularSet(
        "MASS", "cats", "Sex", kinds="body weight in kg (2-3.9), heart weight in g (6-20.5)"),
}


#: Sets added after the default's rules were set (stop 58): labelled data frames of MASS,
#: kernlab and base R's ``datasets`` whose label names groups the rows were collected in,
#: picked for the kinds of their columns before they were run. Every set run is here (none
#: left out for its result), and none was used to choose a rule or a constant.
HOLDOUT: dict[str, TabularSet] = {
    "datasets:mtcars": TabularSet(
        "datasets", "mtcars", "cyl",
        kinds="32 cars: mpg, displacement, hp, axle ratio, weight (1000 lb), seconds, gears, "
              "carburettors, 2 binary; label cylinders (4/6/8)"),
    "datasets:airquality": TabularSet(
        "datasets", "airquality", "Month", drop=("Day",),
        kinds="ozone (ppb), solar radiation (lang), wind (mph), temperature (F); label month"),
    "datasets:rock": TabularSet(
        "datasets", "rock", "perm",
        kinds="pore area (pixels, 1,016-12,212), perimeter, shape (0.09-0.46); label "
              "permeability (12 values, 4 samples each)"),
    "datasets:CO2": TabularSet(
        "datasets", "CO2", "Type", drop=("Plant",),
        kinds="CO2 concentration (mL/L, 95-1,000), uptake; chilled or not (binary); label "
              "origin (Quebec/Mississippi; the plant id, which names it, dropped)"),
    "datasets:ToothGrowth": TabularSet(
        "datasets", "ToothGrowth", "supp",
        kinds="tooth length, vitamin C dose (0.5/1/2 mg); label supplement (2)"),
    "datasets:warpbreaks": TabularSet(
        "datasets", "warpbreaks", "tension",
        kinds="breaks (a count), wool (binary); label tension (3)"),
    "datasets:InsectSprays": TabularSet(
        "datasets", "InsectSprays", "spray", kinds="one count column; label spray (6)"),
    "datasets:chickwts": TabularSet(
        "datasets", "chickwts", "feed", kinds="one weight column (g); label feed (6)"),
    "datasets:PlantGrowth": TabularSet(
        "datasets", "PlantGrowth", "group", kinds="one weight column; label treatment (3)"),
    "datasets:Puromycin": TabularSet(
        "datasets", "Puromycin", "state",
        kinds="substrate concentration (ppm, 0.02-1.1), reaction rate (47-207); label "
              "treated or not"),
    "MASS:UScrime": TabularSet(
        "MASS", "UScrime", "So",
        kinds="15 state statistics in rates, dollars, years, per-mille (0.007 to 1,993); label "
              "southern state or not"),
    "MASS:synth.te": TabularSet(
        "MASS", "synth.te", "yc", kinds="2 coordinates of Ripley's two-class mixture"),
    "MASS:VA": TabularSet(
        "MASS", "VA", "cell",
        kinds="survival (days), status, age, Karnofsky score, months from diagnosis; 2 "
              "factors; label cell type (4)"),
    "MASS:painters": TabularSet(
        "MASS", "painters", "School", kinds="4 ordinal scores 0-18; label school (8)"),
    "MASS:UScereal": TabularSet(
        "MASS", "UScereal", "mfr",
        kinds="calories, g, mg per portion (0 to 970), shelf, vitamins factor; label "
              "manufacturer (6)"),
    "MASS:shuttle": TabularSet(
        "MASS", "shuttle", "use",
        kinds="6 factors only (16 binary columns); label auto or manual landing"),
    "MASS:whiteside": TabularSet(
        "MASS", "whiteside", "Insul",
        kinds="outside temperature (C), gas use; label before or after insulation"),
    "MASS:cabbages": TabularSet(
        "MASS", "cabbages", "Cult",
        kinds="head weight (kg, 1-4.3), vitamin C (41-84), planting date factor; label "
              "cultivar (2)"),
    "MASS:Cushings": TabularSet(
        "MASS", "Cushings", "Type",
        kinds="2 urinary excretion rates (mg/24h); 27 rows; label type (4, one unknown)"),
    "MASS:Melanoma": TabularSet(
        "MASS", "Melanoma", "status",
        kinds="survival (days, 10-5,565), sex, age, year, thickness (mm), ulcer; label "
              "outcome (3)"),
    "MASS:anorexia": TabularSet(
        "MASS", "anorexia", "Treat",
        kinds="weight before and after (lb); label treatment (3)"),
    "kernlab:ticdata": TabularSet(
        "kernlab", "ticdata", "CARAVAN",
        kinds="85 socio-demographic factors and counts (insurance customers); label caravan "
              "policy or not"),
}


def _package_data(package: str) -> Path:
    for root in R_ROOTS:
        if (root / package / "data").is_dir():
            return root / package / "data"
    raise FileNotFoundError(f"R package {package!r} not found under "
                            f"{' or '.join(map(str, R_ROOTS))}: apt-get install -y "
                            f"r-cran-{package.lower()}")


def _decompress(blob: bytes) -> bytes:
    """One object of an R lazy-load database: 4 bytes of uncompressed length, then either a
    zlib stream (R's ``compress = TRUE``, MASS) or a type byte and its stream (base R)."""
    import bz2
    import lzma

    kind, body = blob[4:5], blob[5:]
    if kind == b"Z":
        return lzma.decompress(body, format=lzma.FORMAT_RAW,
                               filters=[{"id": lzma.FILTER_LZMA2, "preset": 9}])
    if kind == b"2":
        return bz2.decompress(body)
    if kind == b"1":
        return zlib.decompress(body)
    if kind == b"0":
        return body
    return zlib.decompress(blob[4:])


def _read_object(package: str, obj: str):
    """One R object as rdata converts it (a data frame becomes a pandas DataFrame)."""
    import rdata

    folder = _package_data(package)
    single = folder / f"{obj}.rda"
    with warnings.catch_warnings():
        # R classes rdata has no constructor for (a formula attribute, nlme's grouped
        # frames) come back as their base data frame, which is all that is read here
        warnings.simplefilter("ignore", UserWarning)
        if single.exists():
            return rdata.read_rda(single)[obj]
        index = rdata.read_rds(folder / "Rdata.rdx")
        offset, length = (int(v) for v in index["variables"][obj])
        with open(folder / "Rdata.rdb", "rb") as handle:
            handle.seek(offset)
            blob = handle.read(length)
        parsed = rdata.parser.parse_data(_decompress(blob), extension=".rds")
        return rdata.conversion.convert(parsed)


def _frame(spec: TabularSet):
    import pandas as pd

    frames = [_read_object(spec.package, o) for o in (spec.obj, *spec.extra)]
    return pd.concat(frames, ignore_index=True) if len(frames) > 1 else frames[0]


def load_tabular(name: str) -> tuple[np.ndarray, np.ndarray, dict]:
    """``(X, y, info)`` of a :data:`TABULAR` set: X float64 (factors one-hot, NA rows
    dropped), y integer codes of the label, info its shape and column kinds."""
    import pandas as pd

    known = {**TABULAR, **HOLDOUT}
    if name not in known:
        raise ValueError(f"unknown tabular set {name!r}; one of {', '.join(known)}")
    spec = known[name]
    df = _frame(spec)
    labels = (spec.label,) if isinstance(spec.label, str) else spec.label
    df = df.drop(columns=list(spec.drop)).dropna().reset_index(drop=True)
    y_text = df[list(labels)].astype(str).agg(":".join, axis=1)
    features = df.drop(columns=list(labels))
    features[list(spec.categorical)] = features[list(spec.categorical)].astype(str)
    factors = [c for c in features.columns
               if isinstance(features[c].dtype, pd.CategoricalDtype)
               or pd.api.types.is_string_dtype(features[c].dtype)]
    numeric = features.drop(columns=factors).astype(np.float64)
    parts = [numeric.to_numpy()]
    if factors:
        parts.append(pd.get_dummies(features[factors].astype(str), dtype=np.float64).to_numpy())
    X = np.hstack(parts)
    keep = np.ptp(X, axis=0) > 0  # a level absent after dropping NA rows
    _, y = np.unique(y_text.to_numpy(), return_inverse=True)
    info = {"n": int(X.shape[0]), "d": int(keep.sum()), "k": int(y.max() + 1),
            "numeric": int(numeric.shape[1]), "factors": len(factors),
            "binary": int(np.isin(X[:, keep], (0.0, 1.0)).all(axis=0).sum()),
            "label": " x ".join(labels), "kinds": spec.kinds}
    return X[:, keep], y, info


def describe(name: str, info: dict) -> str:
    """One line of the report's data table."""
    return (f"| {name} | {info['n']} | {info['d']} | {info['k']} | {info['numeric']} numeric, "
            f"{info['factors']} factors; {info['binary']} binary columns | {info['label']} | "
            f"{info['kinds']} |")
