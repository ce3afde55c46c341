"""The argument parser of ``mkrk``: one subparser per command, with examples in every
``--help``, and the values options take (lambdas as numbers, powers ``2^e`` or ranges).

Each subparser records its command's name (``args.command``); :mod:`.commands` maps it to the
function that runs it. Choices come from the library (the dissimilarities, scalings, store
dtypes, landmark methods), so that the parser cannot drift from what the library accepts.
"""

from __future__ import annotations

import argparse

import numpy as np

from ..backends.options import STORE_DTYPES
from ..dissimilarity import MEASURES
from ..landmarks import LANDMARK_METHODS
from ..protocol import DATASETS
from ..results import MODEL_FILE
from ..validation import LAM_SCALINGS, TOL_MODES
from .errors import EXIT_USER, UserError

__all__ = ["build_parser", "parse_lams", "SOLVER_CHOICES", "COMMANDS"]

SOLVER_CHOICES = ("exact", "blockwise", "nystrom", "auto")
#: every command, in the order of ``mkrk --help``
COMMANDS = ("build", "fit", "search", "predict", "reproduce", "figures", "demo")


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


class _Parser(argparse.ArgumentParser):
    """argparse with errors in one line (and exit code 2)."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(EXIT_USER, f"{self.prog}: error: {message} (see '{self.prog} --help')\n")


class _Formatter(argparse.RawDescriptionHelpFormatter, argparse.ArgumentDefaultsHelpFormatter):
    pass


def _common_options() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    group = common.add_argument_group("output and diagnostics")
    group.add_argument("-q", "--quiet", action="store_true",
                       help="print only the results (no progress, no iterations)")
    group.add_argument("-v", "--verbose", action="count", default=0,
                       help="more detail: every Dask pass, the cluster, timings")
    group.add_argument("--debug", action="store_true",
                       help="show the full traceback of an error")
    group.add_argument("--config", metavar="FILE", default=None,
                       help="a TOML, JSON or YAML file with settings: 'scheduler' and any "
                            "option's long name (dashes or underscores), at the top level or "
                            "in a table named after the command")
    return common


def _add_data(p: argparse.ArgumentParser, labels: bool = True) -> None:
    p.add_argument("data", metavar="DATA",
                   help="data file (.npz with X [and y], .mat with X [and y], .npy, .csv), a "
                        "Zarr array directory, or a benchmark name (orl, jaffe, tr11, ...)")
    if labels:
        p.add_argument("--labels", metavar="FILE", default=None,
                       help="true labels (.npy, .csv or .txt) for the metrics")
        p.add_argument("--y-key", default=None,
                       help="name of the labels inside a .npz/.mat file (default: y, if any)")


def _add_model_options(p: argparse.ArgumentParser, lam: bool = True) -> None:
    g = p.add_argument_group("model")
    g.add_argument("--n-clusters", "-k", type=int, default=None,
                   help="number of clusters (default: the number of classes of the labels)")
    if lam:
        g.add_argument("--lam", type=_lam_type, default=2.0**-15,
                       help="lambda >= 0: a number or a power such as 2^-10")
    g.add_argument("--kernels", nargs="+", metavar="SPEC", default=["paper"],
                   help="'paper' (the 12 kernels of the paper) or kernel specifications such "
                        "as cosine 'polynomial(a=1,b=2)' 'gaussian(c=0.1)' 'gaussian(sigma=3)@1'")
    g.add_argument("--dissimilarity", choices=MEASURES, default="fip",
                   help="the dissimilarity C between kernels")
    g.add_argument("--lam-scaling", choices=LAM_SCALINGS, default="none",
                   help="'normalized' makes lambda independent of the scales of C and d")
    g.add_argument("--tol", type=float, default=1e-5, help="stopping tolerance")
    g.add_argument("--tol-mode", choices=TOL_MODES, default="absolute")
    g.add_argument("--max-iter", type=int, default=100)
    g.add_argument("--n-init", type=int, default=10, help="restarts of the final k-means")
    g.add_argument("--seed", type=int, default=0, help="random seed")


def _add_backend_options(p: argparse.ArgumentParser, build: bool = False) -> None:
    g = p.add_argument_group("backend and cluster")
    if build:
        g.add_argument("--solver", choices=("blockwise", "nystrom"), default="blockwise",
                       help="which store to build")
        g.add_argument("--store", required=True, metavar="PATH",
                       help="where the Zarr store goes (a path every worker can read)")
        g.add_argument("--overwrite", action="store_true",
                       help="rebuild over an existing store")
        g.add_argument("--seed", type=int, default=0, help="seed of the Nystrom landmarks")
    else:
        g.add_argument("--solver", choices=SOLVER_CHOICES, default=None,
                       help="backend (default: exact; blockwise when --scheduler is given)")
        g.add_argument("--store", metavar="PATH", default=None,
                       help="Zarr store of the blockwise kernels / Nystrom factors; reused "
                            "when it matches (see mkrk build); default: a temporary store")
    g.add_argument("--scheduler", metavar="ADDRESS", default=None,
                   help="address of a running Dask scheduler, e.g. tcp://10.0.0.5:8786; "
                        "default: an embedded local cluster in this process")
    g.add_argument("--connect-timeout", type=float, default=30.0, metavar="SECONDS",
                   help="how long to wait for --scheduler")
    g.add_argument("--workers", type=int, default=None,
                   help="workers of the embedded local cluster (default 1, threads = cores)")
    g.add_argument("--chunk-size", type=int, default=None, help="rows per block of the store")
    g.add_argument("--dtype", choices=STORE_DTYPES, default="float64",
                   help="storage precision of the store")
    g.add_argument("--n-landmarks", type=int, default=500, help="Nystrom landmarks per kernel")
    g.add_argument("--landmarks", choices=LANDMARK_METHODS, default="kmeans++",
                   help="Nystrom landmark selection (a store is reused only with the same one)")


_EXAMPLES = {
    "build": """examples:
  mkrk build data.npz --store kernels.zarr
  mkrk build big.npz --solver nystrom --n-landmarks 300 --store factors.zarr
  mkrk build data.npz --store /shared/k.zarr --scheduler tcp://10.0.0.5:8786
  mkrk fit data.npz --solver blockwise --store kernels.zarr --out run1   # reuses the store""",
    "fit": """examples:
  mkrk fit data.npz --out run1                      # exact; k = number of classes in y
  mkrk fit data.csv -k 5 --lam 0.001 --out run2
  mkrk fit data.npz --solver blockwise --store k.zarr --out run3
  mkrk fit data.npz --scheduler tcp://127.0.0.1:8786 --out run4   # on a running cluster
  mkrk fit data.npz --solver nystrom --n-landmarks 300 --out run5  # then: mkrk predict

outputs in --out DIR: labels.npy/.csv, weights.npy/.csv, Y.npy/.csv, objective.npy/.csv,
result.json (everything, with the metrics when labels are known), metrics.json, and
model.joblib (the fitted MKKMRK estimator, pickled with joblib; load it only from sources
you trust).""",
    "search": """examples:
  mkrk search data.npz --out search.json                 # the paper's grid 2^-15..2^5
  mkrk search orl --repeats 20 --out orl.json            # a benchmark from the data folder
  mkrk search data.npz --lams 2^-15..2^-5 --repeats 5 --out s.json
  mkrk search data.npz --lams 0.001,0.01,0.1 --out s.json
  mkrk figures s.json                                    # draw it""",
    "predict": """examples:
  mkrk fit train.npz --solver nystrom --out run5
  mkrk predict run5/model.joblib new.npz --out new_labels.csv
  mkrk predict run5 new.npy > labels.txt""",
    "reproduce": """examples:
  mkrk reproduce                                   # jaffe orl tr11 coil20, 21 lambdas, 20 repeats
  mkrk reproduce --datasets orl tr11 --figures --out results
  mkrk reproduce --datasets jaffe --repeats 3 --lams 2^-15,2^-10,2^0
  mkrk reproduce --data-dir /data/mkrk --threads 1""",
    "figures": """examples:
  mkrk figures search.json                                  # PNGs in ./figures next to it
  mkrk figures benchmarks/results/paper/paper_table.json --datasets orl tr11
  mkrk figures run1/result.json                             # Y and objective of one fit

figures: <dataset>_fig1_sensitivity.png (ACC/NMI/purity vs log2 lambda),
<dataset>_fig2_representation.png (Y for several lambdas), <dataset>_fig3_selected.png
(kernels selected vs lambda), <dataset>_fig4_objective.png (objective per iteration).""",
    "demo": """examples:
  mkrk demo
  mkrk demo --lam 0.01 --seed 3 -v
  mkrk demo --solver exact --n-samples 600""",
}


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of ``mkrk`` (one subparser per command)."""
    parser = _Parser(
        prog="mkrk", formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Multiple kernel k-means by selecting representative kernels (MKKM-RK).",
        epilog="exit codes: 0 ok, 2 user error (one line on stderr), 1 internal error, "
               "130 interrupted\n\nexamples:\n  mkrk demo\n  mkrk fit data.npz --out run1\n"
               "  mkrk search data.npz --out s.json && mkrk figures s.json\n"
               "  mkrk COMMAND --help")
    parser.add_argument("--version", action="version", version=_version())
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    common = _common_options()

    def add(name: str, help_text: str, description: str) -> argparse.ArgumentParser:
        return sub.add_parser(name, help=help_text, description=description,
                              parents=[common], formatter_class=_Formatter,
                              epilog=_EXAMPLES[name])

    p = add("build", "build a kernel store (blockwise) or Nystrom factors from a data file",
            "Compute the base kernels of DATA into a Zarr store on Dask (blockwise: all m "
            "kernels, n x n each; nystrom: per-kernel factors and their Gram matrix). Later "
            "fits and searches with the same --store reuse it instead of recomputing.")
    _add_data(p, labels=False)
    g = p.add_argument_group("kernels")
    g.add_argument("--kernels", nargs="+", metavar="SPEC", default=["paper"],
                   help="'paper' or kernel specifications (see mkrk fit --help)")
    _add_backend_options(p, build=True)

    p = add("fit", "fit MKKM-RK and write labels, weights, Y, objective, metrics, a model",
            "Fit MKKM-RK on DATA with any backend and write the results to --out.")
    _add_data(p)
    _add_model_options(p)
    _add_backend_options(p)
    p.add_argument("--out", metavar="DIR", default=None, help="folder for the results")

    p = add("search", "fit a lambda grid (kernels built once) and save every lambda's result",
            "Run MKKM-RK for every lambda of a grid with the kernels and C built once, repeat "
            "the final k-means --repeats times per lambda, and write a JSON file with, per "
            "lambda: weights, Y, objective history, iterations and (with labels) best / mean "
            "/ std of ACC, NMI and purity. 'mkrk figures' draws it.")
    _add_data(p)
    p.add_argument("--data-dir", default=None,
                   help="folder of the benchmark files (for names like orl)")
    _add_model_options(p, lam=False)
    p.add_argument("--lams", default=None, metavar="LIST",
                   help="lambdas: numbers, 2^e, or ranges 2^a..2^b, comma-separated "
                        "(default: the paper's grid 2^-15..2^5)")
    p.add_argument("--repeats", type=int, default=20,
                   help="repeats of the final k-means per lambda (the paper: 20)")
    _add_backend_options(p)
    p.add_argument("--out", metavar="FILE", default="search.json", help="the JSON results")
    p.set_defaults(lam=2.0**-10)  # the estimator needs one; the search sets every lambda

    p = add("predict", "cluster new data with a saved model (fitted with --solver nystrom)",
            "Assign new samples to the clusters of a model saved by 'mkrk fit --solver "
            "nystrom --out DIR' (the nearest learned centre in the learned embedding).")
    p.add_argument("model", metavar="MODEL", help=f"DIR/{MODEL_FILE} or the DIR")
    _add_data(p)
    p.add_argument("--out", metavar="FILE", default=None,
                   help="labels file (.csv or .npy); default: one label per line on stdout")

    p = add("reproduce", "run the paper's protocol (Table 2) on the benchmark datasets",
            "The paper's protocol (mkrk_dask.protocol): the 12 kernels, lambda in 2^-15..2^5, "
            "20 repeats of the final k-means, best-of-20 and mean +- std, with the baselines "
            "SB-KKM and A-MKKM, on the exact backend. Writes paper_table.md and "
            "paper_table.json to --out after every dataset (and the figures with --figures); "
            "datasets absent from the data folder are skipped.")
    p.add_argument("--datasets", nargs="+", default=list(DATASETS), help="benchmark names")
    p.add_argument("--data-dir", default=None,
                   help="folder of the dataset files (default ../shared/datasets or "
                        "$MKRK_DATASETS)")
    p.add_argument("--repeats", type=int, default=20)
    p.add_argument("--lams", default=None, metavar="LIST",
                   help="lambdas as for mkrk search (default 2^-15..2^5)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=None, help="limit BLAS/OpenMP threads")
    p.add_argument("--out", default="reproduce", metavar="DIR", help="folder for the results")
    p.add_argument("--figures", action="store_true", help="draw the figures afterwards")
    p.add_argument("--library-only", action="store_true",
                   help="deprecated, no effect: the protocol always runs from the library")

    p = add("figures", "draw the paper's figures 1-4 (PNG) from saved results",
            "Draw PNG figures from a JSON file written by 'mkrk search', 'mkrk reproduce' / "
            "benchmarks/bench_paper_table.py, or 'mkrk fit' (result.json), without re-running "
            "anything.")
    p.add_argument("results", metavar="RESULTS", help="the JSON results file")
    p.add_argument("--out", metavar="DIR", default=None,
                   help="folder for the PNGs (default: 'figures' beside RESULTS)")
    p.add_argument("--datasets", nargs="+", default=None, help="only these datasets")
    p.add_argument("--heatmap-lams", default=None, metavar="LIST",
                   help="lambdas of the Y heat maps (default: four across the grid)")
    p.add_argument("--dpi", type=int, default=120)

    p = add("demo", "cluster scikit-learn's digits and print ACC/NMI/purity and the weights",
            "Run MKKM-RK on scikit-learn's bundled digits data (1797 x 64, 10 classes).")
    p.add_argument("--lam", type=_lam_type, default=2.0**-15, help="lambda (default 2^-15)")
    p.add_argument("--solver", choices=SOLVER_CHOICES, default="blockwise",
                   help="backend (default blockwise: kernels in a temporary Zarr store, "
                        "computed on the embedded local Dask cluster)")
    p.add_argument("--scheduler", metavar="ADDRESS", default=None,
                   help="a running Dask scheduler (for blockwise/nystrom)")
    p.add_argument("--workers", type=int, default=None, help=argparse.SUPPRESS)
    p.add_argument("--seed", type=int, default=0, help="random seed")
    p.add_argument("--n-samples", type=int, default=None, help="use the first N samples")
    return parser


def _version() -> str:
    from ..results import library_version

    return f"mkrk {library_version()}"


