"""The default's column preprocessing against none and full standardisation, on the tabular
sets (issue 48): is there a rule that holds on the development and the hold-out sets alike?

For every tabular set of :mod:`_tabular` (``TABULAR`` and ``HOLDOUT``; spam and ticdata left
out by default, they are the slow ones), the mean NMI over ``--seeds`` seeds of
``MKKMRK(k, preprocessing=p)`` for ``p`` in:

- ``auto``: the plan's choice (standardise numeric columns whose standard deviations spread
  by more than 10x, binary columns kept 0/1);
- ``none``: the columns as they are;
- ``standardize``: every column, binary ones included, to mean 0 and variance 1.

The report says, per set, which is best, and sums each alternative's gains and losses
against ``auto`` over the development and the hold-out sets separately.

A third group is synthetic, a kind of data the rule cannot tell from columns in different
units: five informative columns (three Gaussian blobs, scikit-learn's ``make_blobs``, 300
rows) beside 20, 200 or 2,000 columns of noise in the same unit with a tenth of the spread
(many measured channels of which a few carry the clusters). Their standard deviations spread
by far more than 10x, so ``auto`` standardises them, and the noise then weighs as much per
column as the signal.

Usage::

    python benchmarks/archive/bench_preprocessing/bench_preprocessing.py  # 34 sets, 3 seeds: ~2 min
"""

from __future__ import annotations

import sys
from pathlib import Path

# An archived study (benchmarks/README.md, "Archive"): benchmarks/ and the other studies importable
sys.path.insert(1, str(Path(__file__).resolve().parents[2]))
sys.path.extend(str(p) for p in sorted(Path(__file__).resolve().parents[1].glob("bench_*")))

import argparse
import warnings

import numpy as np
from sklearn.datasets import make_blobs

from mkrk_dask import MKKMRK
from mkrk_dask.metrics import normalized_mutual_info

from _common import now, write_report
from _tabular import HOLDOUT, TABULAR, load_tabular

CHOICES = ("auto", "none", "standardize")
SLOW = ("kernlab:spam", "kernlab:ticdata")
#: the synthetic group: noise columns beside five informative ones (see the module's text)
NOISE_COLUMNS = (20, 200, 2000)
SYNTHETIC = tuple(f"synthetic:blobs+{c} noise columns" for c in NOISE_COLUMNS)


def load_synthetic(name: str) -> tuple[np.ndarray, np.ndarray, dict]:
    """Three blobs in five columns, then the name's count of noise columns (std 0.1)."""
    columns = int(name.split("+")[1].split()[0])
    X, y = make_blobs(300, centers=3, n_features=5, random_state=0)
    noise = np.random.default_rng(0).normal(scale=0.1, size=(X.shape[0], columns))
    X = np.hstack([X, noise])
    return X, y, {"n": X.shape[0], "d": X.shape[1]}


def run(name: str, seeds: int) -> dict:
    X, y, info = (load_synthetic if name in SYNTHETIC else load_tabular)(name)
    k = int(y.max() + 1)
    out = {"n": info["n"], "d": info["d"], "k": k,
           "plan": MKKMRK(k).plan(X).decision("preprocessing").value}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for choice in CHOICES:
            out[choice] = float(np.mean([
                100 * normalized_mutual_info(y, MKKMRK(k, preprocessing=choice,
                                                       random_state=seed).fit(X).labels_)
                for seed in range(seeds)]))
    return out


def report(results: dict) -> str:
    rows = ["| set | group | n | d | k | plan's choice | auto | none | standardize |",
            "|---|---|---|---|---|---|---|---|---|"]
    for name, r in results.items():
        best = max(r[c] for c in CHOICES)
        cells = [f"**{r[c]:.2f}**" if r[c] == best else f"{r[c]:.2f}" for c in CHOICES]
        rows.append(f"| {name} | {r['group']} | {r['n']} | {r['d']} | {r['k']} | {r['plan']} | "
                    + " | ".join(cells) + " |")
    lines = ["Mean NMI (percent) over the seeds; the best of the three in bold.", "", *rows,
             "", "Against `auto`, per group (sets where the alternative is more than 2 NMI "
             "above / below it; the largest of each):", ""]
    for group in ("development", "hold-out", "synthetic"):
        sets = {n: r for n, r in results.items() if r["group"] == group}
        for choice in CHOICES[1:]:
            diff = {n: r[choice] - r["auto"] for n, r in sets.items()}
            up = [n for n, d in diff.items() if d > 2]
            down = [n for n, d in diff.items() if d < -2]
            top = max(diff, key=diff.get) if diff else None
            low = min(diff, key=diff.get) if diff else None
            lines.append(
                f"- {group}, `{choice}`: above on {len(up)}, below on {len(down)} of "
                f"{len(sets)}" + (f"; most above on {top} ({diff[top]:+.2f}), most below on "
                                  f"{low} ({diff[low]:+.2f})" if diff else "") + ".")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--with-slow", action="store_true", help="also spam and ticdata")
    parser.add_argument("--report", default="preprocessing")
    args = parser.parse_args()
    started = now()
    results = {}
    for group, sets in (("development", TABULAR), ("hold-out", HOLDOUT),
                        ("synthetic", SYNTHETIC)):
        for name in sets:
            if name in SLOW and not args.with_slow:
                continue
            results[name] = {"group": group, **run(name, args.seeds)}
            print(name, results[name], flush=True)
    path = write_report("defaults", args.report, "The default's preprocessing against none "
                        "and full standardisation on the tabular sets (issue 48)",
                        report(results), started=started)
    print(open(path).read())


if __name__ == "__main__":
    main()
