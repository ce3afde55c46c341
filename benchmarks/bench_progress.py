"""The longest silence of a default fit with progress on (issue 46: never more than 5 s): a
``MKKMRK(10, verbose=1).fit(X)`` in Python with stderr on a pipe, and ``mkrk fit`` with stderr
on a pseudo-terminal, on ``make_blobs`` data of N rows (10 centres, 20 features).

    python benchmarks/bench_progress.py --n 100000

Writes ``results/cli/progress.md``: for each run, when the first output came (Python's start
and the imports), the longest gap between two outputs after it, and the run's length.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from sklearn.datasets import make_blobs

from _common import now, write_report

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from test_progress_streams import _run_in_terminal  # noqa: E402 - the tests' pseudo-terminal

FIT = ("import sys, numpy as np; from mkrk_dask import MKKMRK; d = np.load(sys.argv[1]); "
       "MKKMRK(10, verbose=1).fit(d['X'])")


def python_on_a_pipe(path: Path) -> list[float]:
    """Times of the stderr lines of the Python fit (the first: the start)."""
    stamps = [time.monotonic()]
    child = subprocess.Popen([sys.executable, "-c", FIT, str(path)], stderr=subprocess.PIPE,
                             stdout=subprocess.DEVNULL, text=True)
    for _ in child.stderr:
        stamps.append(time.monotonic())
    if child.wait() != 0:
        raise SystemExit("the Python fit failed")
    return stamps


def row(label: str, stamps: list[float]) -> str:
    gaps = np.diff(stamps[1:])
    return (f"| {label} | {stamps[1] - stamps[0]:.1f} | {gaps.max():.2f} | "
            f"{stamps[-1] - stamps[0]:.1f} | {len(stamps) - 1} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=100_000, help="rows (default 100,000)")
    args = parser.parse_args()
    started = now()
    X, y = make_blobs(n_samples=args.n, centers=10, n_features=20, random_state=0)
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "blobs.npz"
        np.savez(path, X=X, y=y)
        python = python_on_a_pipe(path)
        print(row("python", python), flush=True)
        code, _, terminal = _run_in_terminal("fit", str(path), "-k", "10", timeout=1800)
        if code != 0:
            raise SystemExit("mkrk fit failed")
        print(row("terminal", terminal), flush=True)
    body = (f"`make_blobs(n_samples={args.n}, centers=10, n_features=20, random_state=0)`, "
            "each run once in this run.\n\n"
            "| run | first output (s) | longest gap after it (s) | total (s) | outputs |\n"
            "|---|---:|---:|---:|---:|\n"
            + row("`MKKMRK(10, verbose=1).fit(X)`, stderr on a pipe", python) + "\n"
            + row("`mkrk fit blobs.npz -k 10`, stderr on a pseudo-terminal (100 columns)",
                  terminal) + "\n\n"
            "Off a terminal a line comes whenever the report has been quiet for "
            "`mkrk_dask.progress.HEARTBEAT` seconds (checked every second by a thread, which "
            "needs the GIL: a busy machine can stretch a gap); on a terminal the bars of the "
            "running stage and of each Dask pass are redrawn every second.\n")
    path = write_report("cli", "progress", "Progress of a default fit", body, started=started)
    print(f"report: {path}")


if __name__ == "__main__":
    main()
