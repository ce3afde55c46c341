"""Draw the paper's figures 1-4 and the learned weights for ORL and tr11 from the saved
paper-table results.

Nothing is re-run: the figures come from ``benchmarks/results/paper/paper_table.json``
(written by ``bench_paper_table.py``: every lambda's weights, Y, objective history and scores).

    python benchmarks/make_figures.py [--results benchmarks/results/paper/paper_table.json]
        [--datasets orl tr11] [--out benchmarks/results/paper/figures]

Equivalent to ``mkrk figures benchmarks/results/paper/paper_table.json --datasets orl tr11
--out benchmarks/results/paper/figures``.
"""

from __future__ import annotations

import argparse

from mkrk_dask.plotting import make_figures

from _common import results_dir


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--results", default=str(results_dir("paper") / "paper_table.json"))
    parser.add_argument("--datasets", nargs="+", default=["orl", "tr11"])
    parser.add_argument("--out", default=str(results_dir("paper") / "figures"))
    args = parser.parse_args(argv)
    for path in make_figures(args.results, args.out, datasets=args.datasets):
        print(path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
