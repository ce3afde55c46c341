"""The argument parser of ``mkrk``: one subparser per command, with examples in every
``--help``, and the values options take (lambdas as numbers, powers ``2^e`` or ranges).

Each subparser records its command's name (``args.command``); :mod:`.commands` maps it to the
function that runs it. Choices come from the library (the dissimilarities, scalings, store
dtypes, landmark methods), so that the parser cannot drift from what the library accepts.
"""

from __future__ import annotations

import argparse
import re
from typing import Any

import numpy as np

# Only the light modules: --help and argument errors answer without loading the numerical
# stack (benchmarks/bench_startup.py).
from .._text import format_number
from ..choices import (
    DATASETS,
    DTYPE_CHOICES,
    FINAL_CLUSTERINGS,
    FINAL_STEP_CHOICES,
    LABEL_FREE_DEFAULTS,
    LAM_SCALINGS,
    LANDMARK_METHODS,
    MEASURES,
    METHOD_NAMES,
    METHODS,
    MKKMRK_PAPER,
    PREPROCESSING_CHOICES,
    PROTOCOL_METHODS,
    SOLVERS,
    TOL_MODES,
)
from ..choices import GRAPH_GEOMETRIES as ANCHOR_GEOMETRIES
from ..csv_input import parse_column_list
from .errors import EXIT_USER, UserError
from .examples import EXAMPLES, EXIT_CODES

__all__ = ["build_parser", "parse_lams", "help_text", "format_default", "COMMANDS"]

#: every command, in the order of ``mkrk --help``
COMMANDS = ("build", "fit", "graph", "search", "predict", "reproduce", "figures", "demo")


#: a lambda written as zero (any other text that reads as 0 underflowed)
_ZERO = re.compile(r"[+-]?(0+\.?0*|\.0+)(e[+-]?\d+)?", re.IGNORECASE)


def parse_lams(text: str) -> list[float]:
    """Parse a lambda list: comma-separated numbers or powers ``2^e``, and ranges ``2^a..2^b``
    (every integer exponent from a to b). Example: ``"2^-15..2^5"``, ``"0.001,0.01,2^-3"``."""
    values: list[float] = []
    for item in str(text).replace(" ", "").split(","):
        if not item:
            continue
        try:
            if ".." in item:
                lo, hi = item.split("..")
                if not (lo.startswith("2^") and hi.startswith("2^")):
                    raise ValueError
                a, b = int(lo[2:]), int(hi[2:])
                if b < a:
                    raise ValueError
                values.extend(2.0**e for e in range(a, b + 1))
            elif item.startswith("2^"):
                values.append(2.0 ** float(item[2:]))
            else:
                values.append(float(item))
            if values[-1] == 0 and not _ZERO.fullmatch(item):
                raise UserError(f"lambda {item!r} underflows to 0 in float64 (the smallest "
                                "is about 2^-1074); give 0 if no dissimilarity term is meant")
        except OverflowError:
            raise UserError(f"lambda {item!r} is too large for a float (at most about "
                            "1.8e308 = 2^1023)") from None
        except ValueError:
            raise UserError(f"cannot read lambda {item!r}: give numbers, powers like 2^-10, or "
                            "a range like 2^-15..2^5, separated by commas") from None
    if not values:
        raise UserError("the lambda list is empty")
    if any(not np.isfinite(v) or v < 0 for v in values):
        raise UserError(f"lambdas must be finite and >= 0, got {text!r}")
    return values


def _lam_type(text: str) -> float:
    """argparse type of ``--lam``: a number or a power ``2^e``."""
    try:
        values = parse_lams(text)
    except UserError as err:
        raise argparse.ArgumentTypeError(str(err)) from None
    if len(values) != 1:
        raise argparse.ArgumentTypeError(f"one lambda expected, got {text!r}")
    return values[0]


def _positive_int(text: str) -> int:
    """argparse type of a count that must be at least 1 (``--workers``)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"a positive integer expected, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"a positive integer expected, got {value}")
    return value


def _address(text: str) -> str:
    """argparse type of ``--scheduler``: a non-empty address (an empty one is a mistake, not
    a request for the local cluster: leave the option out for that)."""
    if not text.strip():
        raise argparse.ArgumentTypeError("the address is empty; give one like "
                                         "tcp://10.0.0.5:8786, or leave --scheduler out for "
                                         "the embedded local cluster")
    return text.strip()


def _components(text: str) -> int | str:
    """argparse type of ``--n-components``: ``auto`` or a positive integer."""
    if text == "auto":
        return text
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"'auto' or a positive integer expected, got {text!r}")
    return int(text)


class _Parser(argparse.ArgumentParser):
    """argparse with errors in one line (and exit code 2)."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(EXIT_USER, f"{self.prog}: error: {message} (see '{self.prog} --help')\n")


def format_default(value: Any) -> str:
    """A default as the help shows it: powers of two as ``2^e``, lists space-separated."""
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, float):
        return format_number(value)
    if isinstance(value, (list, tuple)):
        return " ".join(map(str, value))
    return str(value)


def help_text(action: argparse.Action) -> str:
    """The help of an option with its default, shown once: appended as ``(default: X)``
    unless the text already says what the default is (the word "default")."""
    text = (action.help or "").strip()
    if "default" in text.lower() or not action.option_strings or action.nargs == 0:
        return text
    if action.default in (None, argparse.SUPPRESS):
        return text
    return f"{text} (default: {format_default(action.default)})"


class _Formatter(argparse.RawDescriptionHelpFormatter):
    """Examples kept as written; every option's default shown once (:func:`help_text`)."""

    def _get_help_string(self, action: argparse.Action) -> str:
        return help_text(action).replace("%", "%%")

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        # A description (one paragraph) is wrapped; the examples keep their lines.
        if "\n" not in text:
            return argparse.HelpFormatter._fill_text(self, text, width, indent)
        return super()._fill_text(text, width, indent)


def _common_options() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    group = common.add_argument_group("output and diagnostics")
    group.add_argument("-q", "--quiet", action="store_true",
                       help="print only the results on stdout: no progress, no log on stderr")
    group.add_argument("-v", "--verbose", action="count", default=0,
                       help="more detail on stderr: the cluster, every eigensolver pass, "
                            "timings (-vv: also Dask's own log)")
    group.add_argument("--debug", action="store_true",
                       help="show the full traceback of an error")
    group.add_argument("--config", metavar="FILE", default=None,
                       help="a TOML, JSON or YAML file with settings: 'scheduler' and any "
                            "option's long name (dashes or underscores), at the top level or "
                            "in a table named after the command")
    return common


def _column_list(text: str) -> tuple[str | int, ...]:
    try:
        return parse_column_list(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def _name_list(text: str) -> tuple[str, ...]:
    """argparse type of ``--view-names``: distinct non-empty names, comma-separated."""
    from ..views import check_view_names

    try:
        return tuple(check_view_names(text.split(",")))
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def _column_key(text: str) -> str | int:
    keys = _column_list(text)
    if len(keys) != 1:
        raise argparse.ArgumentTypeError(f"one column, got {text!r}")
    return keys[0]


def _add_data(p: argparse.ArgumentParser, labels: bool = True) -> None:
    p.add_argument("data", metavar="DATA", nargs="+",
                   help="data file (.npz with X [and y], or written by scipy.sparse.save_npz; "
                        ".mat with X [and y], MATLAB v7.3 too; .npy; .csv), a Zarr array "
                        "directory, or a benchmark name (orl, jaffe, tr11, ...). Multi-view "
                        "data: an .npz with views view0, view1, ... or with two or more 2-D "
                        "arrays named by their views (pixels, hog) [and y]; or several files, "
                        "one view each, in order (a.npy b.npy)")
    p.add_argument("--view-names", type=_name_list, default=None, metavar="LIST",
                   help="names of the views, comma-separated, in order (default: the keys of "
                        "an .npz, the file names of several files, else view0, view1, ...); "
                        "in result.json, weights.csv and the figures; mkrk predict matches "
                        "the views of an .npz to its model's by name")
    g = p.add_argument_group(
        "CSV columns (by header name or 0-based index)",
        "RFC 4180 CSV: a field in double quotes may hold the separator; every row needs as "
        "many fields as the header; a header naming a column twice is refused unless the "
        "columns are picked by 0-based index only. mkrk predict applies the columns its "
        "fit was given; those given to it replace them.")
    picked = g.add_mutually_exclusive_group()
    picked.add_argument("--columns", type=_column_list, default=None, metavar="LIST",
                        help="the feature columns, comma-separated (default: all but "
                             "--drop-columns, --label-column and --id-column)")
    picked.add_argument("--drop-columns", type=_column_list, default=(), metavar="LIST",
                        help="columns that are not features (notes, ...), comma-separated")
    g.add_argument("--id-column", type=_column_key, default=None, metavar="COLUMN",
                   help="the column of the rows' IDs (never a feature); the labels files "
                        "of fit, graph and predict then have two columns, id,label")
    if labels:
        g.add_argument("--label-column", type=_column_key, default=None, metavar="COLUMN",
                       help="the column of the true labels, for the metrics (never a feature)")
        p.add_argument("--labels", metavar="FILE", default=None,
                       help="true labels (.npy, .csv or .txt) for the metrics")
        p.add_argument("--y-key", default=None, metavar="NAME",
                       help="name of the labels inside a .npz/.mat file (default: y, if "
                            "any); an error if it is absent, with --labels, and for .npy, .csv "
                            "and Zarr inputs, which hold no labels")


def _add_out(p: argparse.ArgumentParser, what: str, default: str | None = None,
             metavar: str = "DIR") -> None:
    p.add_argument("--out", metavar=metavar, default=default, help=what)
    p.add_argument("--force", action="store_true",
                   help="replace the results of an earlier run in --out (refused without it)")


_PAPER = (f"the paper-faithful configuration: its 12 kernels, {MKKMRK_PAPER['dissimilarity']}, "
          f"lambda {format_default(MKKMRK_PAPER['lam'])}, the spectral final step, exact kernels")


def model_default(name: str, paper: bool) -> str:
    """The default of the model option ``name`` as its help states it, read from the
    settings the command fits: the paper's configuration where ``paper`` (``mkrk search``),
    else the estimator's label-free default and, where it differs, ``--paper``'s."""
    if paper:
        value = MKKMRK_PAPER.get(name, LABEL_FREE_DEFAULTS[name])
        return f"default: {format_default(value)}" + (", the paper's" if name in MKKMRK_PAPER
                                                      else "")
    text = f"default: {format_default(LABEL_FREE_DEFAULTS[name])}"
    if name in MKKMRK_PAPER and MKKMRK_PAPER[name] != LABEL_FREE_DEFAULTS[name]:
        text += f"; --paper: {format_default(MKKMRK_PAPER[name])}"
    return text


def _add_model_options(p: argparse.ArgumentParser, lam: bool = True,
                       paper: bool = False) -> None:
    """The model's options; ``paper``: the command fits the paper's configuration (not the
    estimator's label-free defaults), which each option overrides. Each help states its
    default from the settings the command applies (:func:`model_default`)."""
    g = p.add_argument_group(
        "model (defaults: the paper's configuration; each option overrides it)" if paper else
        "model (defaults: the label-free ones of MKKMRK; --paper: the paper's configuration)")
    g.add_argument("--n-clusters", "-k", type=int, default=None, metavar="K",
                   help="number of clusters (default: the number of classes of the labels)")
    g.add_argument("--method", choices=list(METHOD_NAMES), default="MKKM-RK",
                   help="the multiple kernel k-means method: MKKM-RK (representative kernels), "
                        "MKKM-MR (matrix-induced regularisation, lambda weighs tr(K_p K_q)), "
                        "MKKM (no lambda) or SimpleMKKM (min-max kernel alignment, no "
                        "lambda); --dissimilarity is MKKM-RK's only")
    g.add_argument("--paper", action="store_true",
                   help=f"{_PAPER} (always, for this command)" if paper else
                   f"{_PAPER} (each can still be overridden)")
    if lam:
        g.add_argument("--lam", type=_lam_type, default=None,
                       help="lambda >= 0, the weight of the representation cost: a number or "
                            f"a power such as 2^-10 ({model_default('lam', paper)}; "
                            "'normalized' scaling: relative to the scales of C)")
    g.add_argument("--kernels", nargs="+", metavar="SPEC", default=None,
                   help="'auto' (cosine and Gaussians at 0.5, 1, 2 x the median "
                        "distance, of the angle for intensities and counts; measurements add "
                        "one of the angle), 'paper' (the "
                        "12 kernels of the paper) or kernel specifications such as cosine "
                        "'polynomial(a=1,b=2)' 'gaussian(m=1)' 'gaussian(c=0.1)' "
                        "'angular(m=0.5)' 'gaussian(sigma=3)@1' (@v: the kernel reads view v) "
                        f"({model_default('kernels', paper)})")
    g.add_argument("--dissimilarity", choices=MEASURES, default=None,
                   help="the dissimilarity C between kernels (fip: the paper's tr(K_i K_j); "
                        f"{model_default('dissimilarity', paper)})")
    g.add_argument("--lam-scaling", choices=LAM_SCALINGS, default=None,
                   help="'normalized' makes lambda independent of n and of the scales of C; "
                        f"'none' is the paper's ({model_default('lam_scaling', paper)})")
    g.add_argument("--final-step", choices=FINAL_STEP_CHOICES, default=None,
                   help="k-means on the features of the top eigenpairs (features, which auto "
                        "chooses) or on the unit rows of the top k eigenvectors (spectral: the "
                        f"paper's) ({model_default('final_step', paper)})")
    g.add_argument("--preprocessing", choices=PREPROCESSING_CHOICES, default=None,
                   help="the columns of each view: standardised where their scales spread "
                        "over more than 10x (auto: columns in different units), "
                        "always (standardize) or never (none: the paper's) "
                        f"({model_default('preprocessing', paper)})")
    g.add_argument("--final-clustering", choices=FINAL_CLUSTERINGS, default=None,
                   help="how the final rows are partitioned: k-means (kmeans: the paper's), or "
                        "refined by spectral clustering on their anchor graph where it agrees "
                        "with k-means at NMI 0.5 or more (graph); auto: graph "
                        "with --final-step auto, kmeans otherwise "
                        f"({model_default('final_clustering', paper)})")
    g.add_argument("--n-components", type=_components, default=None,
                   help="eigenpairs of the final step: 'auto' (2k for the "
                        "features, k for the spectral step) or a positive integer "
                        f"({model_default('n_components', paper)})")
    g.add_argument("--tol", type=float, default=None,
                   help="stop when the objective changes by less than this between "
                        "iterations (see --tol-mode; default 1e-5, SimpleMKKM's 1e-9: its "
                        "certified optimality gap stops it)")
    g.add_argument("--tol-mode", choices=TOL_MODES, default=None,
                   help="how --tol compares: 'absolute' change of the objective, or "
                        "'relative' to its size (default absolute, SimpleMKKM's relative)")
    g.add_argument("--max-iter", type=int, default=100, metavar="N",
                   help="stop after N alternating iterations even if not converged")
    g.add_argument("--n-init", type=int, default=10, metavar="N",
                   help="restarts of the final k-means on the embedding (the best is kept)")
    g.add_argument("--seed", type=int, default=0, help="random seed of the final k-means and "
                                                       "the Nystrom landmarks")


def _add_scheduler_options(g: argparse._ArgumentGroup) -> None:
    g.add_argument("--scheduler", metavar="ADDRESS", default=None, type=_address,
                   help="address of a running Dask scheduler, e.g. tcp://10.0.0.5:8786 or "
                        "tls://host:8786 (default: an embedded local cluster in this process)")
    g.add_argument("--connect-timeout", type=float, default=30.0, metavar="SECONDS",
                   help="give up on --scheduler if no Dask scheduler answers within this time")
    g.add_argument("--tls-ca", metavar="FILE", default=None,
                   help="CA certificate (PEM) that signed the scheduler's certificate; with "
                        "--tls-cert and --tls-key for a tls:// scheduler "
                        "(see cluster/tls/make-certs.sh)")
    g.add_argument("--tls-cert", metavar="FILE", default=None,
                   help="this client's certificate (PEM) for a tls:// scheduler")
    g.add_argument("--tls-key", metavar="FILE", default=None,
                   help="the private key (PEM) of --tls-cert")
    g.add_argument("--cluster", choices=("slurm",), default=None,
                   help="submit the Dask workers as batch jobs (dask-jobqueue) for this "
                        "command, and cancel them when it ends; see docs/cluster.rst")
    g.add_argument("--jobs", type=int, default=2, metavar="N",
                   help="worker jobs of --cluster (default: 2)")
    g.add_argument("--cluster-config", metavar="FILE", default=None,
                   help="a jobqueue.yaml describing the jobs of --cluster (default: Dask's "
                        "configuration, e.g. ~/.config/dask/jobqueue.yaml)")
    g.add_argument("--cluster-wait", type=float, default=600.0, metavar="SECONDS",
                   help="give up when the --cluster jobs' workers are not all up within this "
                        "time (default: 600)")


def _add_backend_options(p: argparse.ArgumentParser, build: bool = False,
                         paper: bool = False) -> None:
    """The backend's options; ``paper``: the command fits the paper's configuration."""
    g = p.add_argument_group("backend and cluster")
    if build:
        g.add_argument("--solver", choices=("blockwise", "nystrom"), default="blockwise",
                       help="which store to build: all kernels (blockwise) or Nystrom factors")
        g.add_argument("--store", required=True, metavar="PATH_OR_URL",
                       help="where the Zarr store goes: a path every worker can read, or an "
                            "object-store URL such as s3://bucket/run.zarr")
        g.add_argument("--overwrite", action="store_true",
                       help="rebuild over an existing store")
        g.add_argument("--seed", type=int, default=0, help="seed of the Nystrom landmarks")
    else:
        g.add_argument("--solver", choices=SOLVERS, default=None,
                       help="backend: auto chooses from n and the memory "
                            f"({model_default('solver', paper)}, with or without "
                            "--scheduler; the plan shows the store's size)")
        g.add_argument("--store", metavar="PATH_OR_URL", default=None,
                       help="Zarr store of the blockwise kernels / Nystrom factors, a path or "
                            "a URL such as s3://bucket/run.zarr; reused when it matches (see "
                            "mkrk build); default: a temporary store")
        g.add_argument("--overwrite", action="store_true",
                       help="rebuild a --store that was built for other inputs or settings "
                            "(another chunk size, say) instead of refusing it")
    g.add_argument("--max-store-bytes", type=_positive_int, default=None, metavar="BYTES",
                   help="refuse, before writing, a store larger than this (the free disk is "
                        "checked where it can be read; an object store needs this)")
    g.add_argument("--storage-option", action="append", default=None, metavar="KEY=VALUE",
                   dest="storage_options",
                   help="an fsspec option of a --store URL, e.g. "
                        "endpoint_url=http://127.0.0.1:9000 (repeat for several)")
    _add_scheduler_options(g)
    g.add_argument("--workers", type=_positive_int, default=None, metavar="N",
                   help="workers of the embedded local cluster (default 1, threads = cores)")
    g.add_argument("--chunk-size", type=int, default=None, metavar="ROWS",
                   help="rows per block of the store (default: chosen from n and the memory)")
    g.add_argument("--dtype", choices=DTYPE_CHOICES, default="auto",
                   help="storage precision of the store (auto: float32 Nystrom factors above "
                   "the exact-C limit (at most n = 20,000; 6,441 for 4 kernels of 500 "
                   "landmarks, 5,000 for 12 or more) or where only "
                   "those fit the disk, float64 otherwise)")
    g.add_argument("--n-landmarks", type=int, default=500, metavar="R",
                   help="Nystrom landmarks per kernel")
    g.add_argument("--max-components", default=None, metavar="R|auto|none",
                   help="Nystrom: largest total rank of the factors, all kernels together "
                        "(default auto: 2048 above the exact-C limit, no limit below)")
    g.add_argument("--gram-rows", default=None, metavar="N|auto|none",
                   help="Nystrom: rows the factors' Gram matrix is summed over, a uniform "
                        "sample (default auto: every row up to 10^6, a sample of 250,000 above; "
                        "none: every row)")
    g.add_argument("--final-rows", default=None, metavar="N|auto|none",
                   help="Nystrom: rows the final partition is fitted on, a uniform sample "
                        "(default auto: every row up to 10^6, a sample of 200,000 above)")
    g.add_argument("--landmarks", choices=LANDMARK_METHODS, default="kmeans++",
                   help="Nystrom landmark selection (a store is reused only with the same one)")


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of ``mkrk`` (one subparser per command)."""
    parser = _Parser(
        prog="mkrk", formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Multiple kernel k-means by selecting representative kernels (MKKM-RK). "
                    "Results go to stdout (or --out), progress and messages to stderr.",
        epilog=EXIT_CODES + "\n\nexamples:\n  mkrk demo\n  mkrk fit data.npz --out run1\n"
               "  mkrk search data.npz --out s.json && mkrk figures s.json\n"
               "  mkrk COMMAND --help")
    parser.add_argument("--version", action="version", version=_version())
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    common = _common_options()

    def add(name: str, summary: str, description: str) -> argparse.ArgumentParser:
        return sub.add_parser(name, help=summary, description=description,
                              parents=[common], formatter_class=_Formatter,
                              epilog=EXAMPLES[name])

    p = add("build", "build a kernel store (blockwise) or Nystrom factors from a data file",
            "Compute the base kernels of DATA into a Zarr store on Dask (blockwise: all m "
            "kernels, n x n each; nystrom: per-kernel factors and their Gram matrix). Later "
            "fits and searches with the same --store reuse it instead of recomputing.")
    _add_data(p, labels=False)
    g = p.add_argument_group("kernels")
    g.add_argument("--kernels", nargs="+", metavar="SPEC", default=["paper"],
                   help="'paper' or kernel specifications (see mkrk fit --help)")
    _add_backend_options(p, build=True)

    p = add("fit", "fit MKKM-RK (or --method) and write labels, weights, Y, objective, "
            "metrics, a model",
            "Fit MKKM-RK (or MKKM-MR, MKKM: --method) on DATA with any backend. Prints "
            "ACC/NMI/purity (with labels) and the weights on stdout; writes every result to "
            "--out.")
    _add_data(p)
    _add_model_options(p)
    _add_backend_options(p)
    p.add_argument("--plan", action="store_true",
                   help="print what the fit would do (every 'auto' resolved, with its reason "
                        "and cost) and exit without fitting")
    _add_out(p, "folder for the results (checked before the fit)")

    p = add("graph", "cluster with the anchor graph (images with many rows a cluster)",
            "Cluster DATA by spectral clustering on the anchor graph of each view "
            "(mkrk_dask.AnchorGraphClustering; Liu, He & Chang 2010), in time linear in n. "
            "Far better than MKKM-RK's global kernels on images with many rows a cluster, far "
            "worse on text, tables of measurements and few rows a cluster (docs/defaults.rst). "
            "Prints ACC/NMI/purity (with labels) and the graph's summary; writes the labels, "
            "metrics and a model that 'mkrk predict' reads to --out.")
    _add_data(p)
    g = p.add_argument_group("model")
    g.add_argument("--n-clusters", "-k", type=int, default=None, metavar="K",
                   help="number of clusters (default: the number of classes of the labels)")
    g.add_argument("--n-anchors", type=int, default=1000, metavar="M",
                   help="anchors per view (at most half the rows)")
    g.add_argument("--n-neighbors", type=int, default=3, metavar="S",
                   help="nearest anchors each row is joined to")
    g.add_argument("--geometry", choices=ANCHOR_GEOMETRIES, default="auto",
                   help="distances between rows (angular: between unit-length rows; auto: "
                        "angular for a view with no negative value, Euclidean otherwise)")
    g.add_argument("--seed", type=int, default=0, help="random seed")
    _add_scheduler_options(p.add_argument_group("cluster (for Zarr input)"))
    _add_out(p, "folder for the results (checked before the fit)")

    p = add("search", "fit a lambda grid (kernels built once) and save every lambda's result",
            "Run MKKM-RK (or MKKM-MR: --method) in the paper's configuration (its 12 kernels, "
            "fip, the spectral final step, exact kernels; not the label-free defaults of "
            "'mkrk fit') for every lambda of a grid with the kernels and C built once, repeat "
            "the final k-means --repeats times per lambda, and write a JSON file with, per "
            "lambda: weights, Y, objective history, iterations and (with labels) best / mean "
            "/ std of ACC, NMI and purity. 'mkrk figures' draws it.")
    _add_data(p)
    p.add_argument("--data-dir", default=None, metavar="DIR",
                   help="folder of the benchmark files, for names like orl (default: "
                        "$MKRK_DATASETS or ../shared/datasets)")
    _add_model_options(p, lam=False, paper=True)
    p.add_argument("--lams", default=None, metavar="LIST",
                   help="lambdas: numbers, 2^e, or ranges 2^a..2^b, comma-separated "
                        "(default: the paper's grid 2^-15..2^5)")
    p.add_argument("--repeats", type=int, default=20, metavar="R",
                   help="repeats of the final k-means per lambda (the paper: 20)")
    _add_backend_options(p, paper=True)
    _add_out(p, "the JSON results file", default="search.json", metavar="FILE")
    # The search is the paper's protocol: its configuration unless told otherwise.
    p.set_defaults(lam=2.0**-10, paper=True)  # the estimator needs a lambda; the search sets all

    p = add("predict", "cluster new data with a model saved by mkrk fit",
            "Assign new samples to the clusters of a model saved by 'mkrk fit --out DIR'. The "
            "labels go to stdout, one per line (or to --out); the log goes to stderr.")
    p.add_argument("model", metavar="MODEL",
                   help="the --out folder of mkrk fit, or the model inside it")
    _add_data(p)
    _add_out(p, "labels file (.csv or .npy); default: one label per line on stdout",
             metavar="FILE")
    p.add_argument("--trust", action="store_true",
                   help="allow loading a pickled model (model.joblib): a pickle can run any "
                        "code, so only for a file you made yourself or trust")

    p = add("reproduce", "run the paper's protocol (Table 2) on the benchmark datasets",
            "The paper's protocol (mkrk_dask.protocol): the 12 kernels, its seven methods "
            "(SB-KKM, A-MKKM, MKKM, LMKKM, RMKKM, MKKM-MR over 2^-15..2^15, MKKM-RK over "
            "2^-15..2^5), 20 repeats, best-of-20 and mean +- std beside the paper's figures, "
            "on the exact backend; SimpleMKKM, not in the paper, as a column after them when "
            "named in --methods. Writes paper_table.md and "
            "paper_table.json to --out after every dataset (and the figures with --figures); "
            "datasets absent from the data folder are skipped.")
    p.add_argument("--datasets", nargs="+", default=list(DATASETS), metavar="NAME",
                   help="benchmark names")
    p.add_argument("--data-dir", default=None, metavar="DIR",
                   help="folder of the dataset files (default: $MKRK_DATASETS or "
                        "../shared/datasets)")
    p.add_argument("--repeats", type=int, default=20, metavar="R",
                   help="repeats of the final k-means per method and lambda")
    p.add_argument("--lams", default=None, metavar="LIST",
                   help="MKKM-RK's lambdas as for mkrk search (default: 2^-15..2^5)")
    p.add_argument("--methods", nargs="+", choices=[*PROTOCOL_METHODS, "all"],
                   default=list(METHODS), metavar="METHOD",
                   help="the columns to run: " + ", ".join(METHODS) + " (by default these, "
                        "the paper's Table 2), " + ", ".join(m for m in PROTOCOL_METHODS
                                                             if m not in METHODS)
                        + " (a column after them, not in the paper) or 'all'; SB-KKM and "
                          "A-MKKM always run")
    p.add_argument("--seed", type=int, default=0, help="seed of every method's repeats")
    p.add_argument("--threads", type=int, default=None, metavar="N",
                   help="limit BLAS/OpenMP threads (default: the library's own)")
    _add_out(p, "folder for paper_table.md/.json", default="reproduce")
    p.add_argument("--figures", action="store_true", help="draw the figures afterwards")
    p.add_argument("--library-only", action="store_true",
                   help="deprecated, no effect: the protocol always runs from the library")

    p = add("figures", "draw the paper's figures 1-4 and the learned weights (PNG)",
            "Draw PNG figures from a JSON file written by 'mkrk search', 'mkrk reproduce' / "
            "benchmarks/bench_paper_table.py, or 'mkrk fit' (result.json), without re-running "
            "anything. The paths of the PNGs go to stdout; existing PNGs are redrawn.")
    p.add_argument("results", metavar="RESULTS",
                   help="the JSON results file, or the --out folder of mkrk fit (its "
                        "result.json; the figures go to its figures/)")
    p.add_argument("--out", metavar="DIR", default=None,
                   help="folder for the PNGs (default: 'figures' beside RESULTS)")
    p.add_argument("--datasets", nargs="+", default=None, metavar="NAME",
                   help="only these datasets (default: every dataset in RESULTS)")
    p.add_argument("--heatmap-lams", default=None, metavar="LIST",
                   help="lambdas of the Y heat maps (default: four across the grid)")
    p.add_argument("--dpi", type=int, default=120,
                   help="resolution of the PNGs in dots per inch")

    p = add("demo", "cluster scikit-learn's digits: the default, then the paper's "
                    "configuration, each explained",
            "Run MKKM-RK on scikit-learn's bundled digits data (1797 x 64, 10 classes): first "
            "the default MKKMRK(10, random_state=SEED), as the README's quick start does, with "
            "its summary (what it chose and why); then the paper's configuration (its 12 "
            "kernels, --lam) on an embedded Dask cluster, the faithful mode, with the scores "
            "and the learned weights explained. --lam and --solver apply to the second.")
    p.add_argument("--lam", type=_lam_type, default=MKKMRK_PAPER["lam"],
                   help="the paper configuration's lambda, a number or a power such as 2^-10")
    p.add_argument("--solver", choices=SOLVERS, default="nystrom",
                   help="backend: nystrom runs every pass over the data on the Dask cluster "
                        "(a few seconds); blockwise computes all kernels into a temporary "
                        "Zarr store on it (slower); exact keeps them in memory")
    g = p.add_argument_group("cluster")
    _add_scheduler_options(g)
    p.add_argument("--workers", type=_positive_int, default=None, help=argparse.SUPPRESS)
    p.add_argument("--seed", type=int, default=0, help="random seed")
    p.add_argument("--n-samples", type=int, default=None, metavar="N",
                   help="use the first N samples (default: all 1797)")
    return parser


def _version() -> str:
    from ..results import library_version

    return f"mkrk {library_version()}"
