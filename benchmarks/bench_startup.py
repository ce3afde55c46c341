"""Start-up of the command line: CPU and wall seconds of ``mkrk --help``, ``mkrk fit --help``,
an argument error and ``import mkrk_dask``, each run once beside ``python -c pass`` (the
interpreter's own start), in one run of this script (issue 46: under 1 s of CPU).

    python benchmarks/bench_startup.py

Writes ``results/cli/startup.md``. CPU is user + system time of the child process (from
``os.wait4``), which a loaded machine inflates less than the wall time.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time

from _common import now, write_report

#: what is timed: a label and the arguments after the interpreter
CASES = (
    ("python -c pass", ["-c", "pass"]),
    ("import mkrk_dask", ["-c", "import mkrk_dask"]),
    ("mkrk --help", ["-m", "mkrk_dask.cli", "--help"]),
    ("mkrk fit --help", ["-m", "mkrk_dask.cli", "fit", "--help"]),
    ("mkrk fit (no DATA: an argument error)", ["-m", "mkrk_dask.cli", "fit"]),
    ("mkrk fit --n-clusters x data.npz (a bad value)",
     ["-m", "mkrk_dask.cli", "fit", "--n-clusters", "x", "data.npz"]),
)
#: the goal for the command line's answers
LIMIT_CPU = 1.0


def run_once(args: list[str]) -> tuple[float, float, int]:
    """CPU seconds (user + system), wall seconds and exit code of ``python ARGS``."""
    start = time.perf_counter()
    child = subprocess.Popen([sys.executable, *args], stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(child.pid, 0)
    wall = time.perf_counter() - start
    child.returncode = os.waitstatus_to_exitcode(status)
    return usage.ru_utime + usage.ru_stime, wall, child.returncode


def main() -> None:
    argparse.ArgumentParser(description=__doc__.split("\n\n")[0]).parse_args()
    started = now()
    rows = []
    for label, args in CASES:
        cpu, wall, code = run_once(args)
        rows.append((label, cpu, wall, code))
        print(f"{label:<48s} cpu {cpu:5.2f} s  wall {wall:5.2f} s  exit {code}", flush=True)
    base = rows[0][1]
    lines = ["| command | CPU (s) | CPU beyond `python -c pass` (s) | wall (s) | exit |",
             "|---|---:|---:|---:|---:|"]
    lines += [f"| `{label}` | {cpu:.2f} | {cpu - base:.2f} | {wall:.2f} | {code} |"
              for label, cpu, wall, code in rows]
    worst = max(cpu for label, cpu, _, _ in rows if label.startswith("mkrk"))
    verdict = "under" if worst < LIMIT_CPU else "OVER"
    body = ("Each command ran once, one after the other, in this run.\n\n" + "\n".join(lines)
            + f"\n\nThe slowest `mkrk` answer took {worst:.2f} s of CPU: {verdict} the "
            f"{LIMIT_CPU:g} s goal. The parser reads its choices from `mkrk_dask.choices` and "
            "the package imports its public names on first use, so none of these loads "
            "scikit-learn, SciPy or Dask.\n")
    path = write_report("cli", "startup", "Start-up of the command line", body,
                        started=started)
    print(f"report: {path}")


if __name__ == "__main__":
    main()
