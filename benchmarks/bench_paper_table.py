"""Reproduce the paper's Table 2 for MKKM-RK, SB-KKM and A-MKKM (Yao & Chen, AAAI 2019).

The paper's protocol, on every dataset found in the data folder (``../shared/datasets`` or
``--data-dir``): the 12 paper kernels; MKKM-RK over lambda in 2^-15 .. 2^5 with 20 repeats of
the final k-means per lambda; SB-KKM (kernel k-means on each single kernel, 20 repeats) and
A-MKKM (equal weights, 20 repeats). Reported per dataset and method: best-of-20 ACC / NMI /
purity (each metric's maximum over the 20 repeats, as the paper), the mean +- std over the same
20, the lambda used (chosen by best-of-20 ACC, like the paper), iterations, the paper's figure
and our best minus the paper's. Wall times per dataset and method.

Writes ``benchmarks/results/paper_table.md`` and ``paper_table.json`` (every lambda: weights,
Y, objective history, iterations, scores, QP gaps; enough to redraw the paper's figures 1-4).

    python benchmarks/bench_paper_table.py [--datasets jaffe orl tr11 coil20]
        [--data-dir DIR] [--repeats 20] [--lambdas=-15:5] [--threads N] [--out benchmarks/results]

(write ``--lambdas=-15,-10,0`` with "=": a leading minus would read as an option.)
"""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path

from mkrk_dask import progress
from mkrk_dask.protocol import DATASETS, render_markdown, run_protocol

RESULTS = Path(__file__).resolve().parent / "results"


def library_state() -> str:
    """Git commit of the library and which of its files differ from it (with a short hash)."""
    import hashlib
    import subprocess

    import mkrk_dask

    root = Path(mkrk_dask.__file__).resolve().parent.parent
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=root,
                              capture_output=True, text=True, check=True).stdout.strip()
        status = subprocess.run(["git", "status", "--porcelain", "--", "mkrk_dask"], cwd=root,
                                capture_output=True, text=True, check=True).stdout.split("\n")
    except (OSError, subprocess.CalledProcessError):
        return "unknown (not a git checkout)"
    dirty = []
    for line in status:
        if line.strip() and line[3:].endswith(".py"):
            digest = hashlib.sha256((root / line[3:]).read_bytes()).hexdigest()[:10]
            dirty.append(f"{line[3:]} ({line[:2].strip()}, sha256 {digest})")
    return f"git {head}" + (f"; uncommitted: {', '.join(dirty)}" if dirty else "; clean")


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
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=None,
                        help="limit BLAS/OpenMP threads (threadpoolctl); default: no limit")
    parser.add_argument("--out", default=str(RESULTS),
                        help="folder for paper_table.md and paper_table.json")
    args = parser.parse_args(argv)
    command = "python " + " ".join(shlex.quote(a) for a in [sys.argv[0], *(argv or sys.argv[1:])])
    lams = parse_lambdas(args.lambdas)
    with progress.reporting(1, sys.stdout):
        try:
            report = run_protocol(args.datasets, data_dir=args.data_dir, lams=lams,
                                  repeats=args.repeats, seed=args.seed, out=args.out,
                                  threads=args.threads, command=command,
                                  library=library_state())
        except (FileNotFoundError, ValueError) as err:
            print(f"nothing to do: {err}")
            return 0
    print(render_markdown(report))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
