"""Reproduce the paper's Table 2, all seven methods (Yao & Chen, AAAI 2019).

The protocol itself is library code (:mod:`mkrk_dask.protocol`, also run by ``mkrk
reproduce``): on every dataset found in the data folder (``../shared/datasets`` or
``--data-dir``), the 12 paper kernels (a cosine and a Gaussian per view on a multi-view set);
MKKM-RK over lambda in 2^-15 .. 2^5 with 20 repeats of the final k-means per lambda; SB-KKM,
A-MKKM, MKKM, LMKKM, RMKKM (gamma 0.1 .. 0.9) and MKKM-MR (lambda 2^-15 .. 2^15) with 20
repeats each. This script
adds the benchmark's command line and records the library's git state in the report.

Writes ``benchmarks/results/paper/paper_table.md`` and ``paper_table.json`` (every lambda:
weights, Y, objective history, iterations, scores, QP gaps; enough to redraw the paper's
figures 1-4).

    python benchmarks/bench_paper_table.py [--datasets jaffe orl tr11 coil20]
        [--data-dir DIR] [--repeats 20] [--lambdas=-15:5] [--methods ...] [--threads N]
        [--out benchmarks/results/paper]

(write ``--lambdas=-15,-10,0`` with "=": a leading minus would read as an option.)
"""

from __future__ import annotations

import argparse
import sys

from mkrk_dask import progress
from mkrk_dask.protocol import DATASETS, METHODS, PROTOCOL_METHODS, render_markdown, run_protocol

from _common import command_line, library_state, results_dir


def parse_lambdas(text: str) -> list[float]:
    """``"-15:5"`` (exponents of 2, inclusive) or a comma list of exponents ``"-15,-10,0"``."""
    if ":" in text:
        lo, hi = (int(v) for v in text.split(":"))
        exps = list(range(lo, hi + 1))
    else:
        exps = [int(v) for v in text.split(",")]
    return [2.0**e for e in exps]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--datasets", nargs="+", default=list(DATASETS),
                        help=f"datasets (default {' '.join(DATASETS)})")
    parser.add_argument("--data-dir", default=None, help="folder with the dataset files")
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--lambdas", default="-15:5",
                        help="log2 lambdas: 'lo:hi' inclusive or a comma list")
    parser.add_argument("--methods", nargs="+", default=list(METHODS),
                        choices=PROTOCOL_METHODS,
                        help="the columns to run (default Table 2's seven; SimpleMKKM, not in "
                             "the paper, when named; SB-KKM and A-MKKM always run)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=None,
                        help="limit BLAS/OpenMP threads (threadpoolctl); default: no limit")
    parser.add_argument("--out", default=str(results_dir("paper")),
                        help="folder for paper_table.md and paper_table.json")
    args = parser.parse_args(argv)
    lams = parse_lambdas(args.lambdas)
    with progress.reporting(1, sys.stdout):
        try:
            report = run_protocol(args.datasets, data_dir=args.data_dir, lams=lams,
                                  repeats=args.repeats, seed=args.seed, out=args.out,
                                  methods=args.methods,
                                  threads=args.threads, command=command_line(),
                                  library=library_state())
        except (FileNotFoundError, ValueError) as err:
            print(f"nothing to do: {err}")
            return 0
    print(render_markdown(report))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
