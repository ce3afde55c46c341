"""Does MKKM-RK select one representative among redundant kernels? (issue 48)

Dictionaries with redundancy built from the default's kernels of scikit-learn's digits (the
first 600 rows, k = 10, exact backend):

- ``tripled``: every default kernel three times (identical copies);
- ``near``: every default kernel and two near-duplicates, its Gaussian at 1.05x and 1.1x the
  width (the cosine kernel with the polynomial ``(x.y)^1`` and ``(1 + x.y)``, its nearest
  relatives).

For each lambda of a grid and both dissimilarities (the default ``sfn`` with its normalised
lambda, and the paper's ``fip`` with lambda as given), the report gives the share of each
group's weight its largest member carries (the mean and the smallest over the groups: 1/3
when the members share equally, 1 when one member carries it all), the effective number of
kernels, and the NMI. The clean dictionary's NMI at each lambda is beside it.

    python benchmarks/archive/bench_selection/bench_selection.py
"""

from __future__ import annotations

import sys
from pathlib import Path

# An archived study (benchmarks/README.md, "Archive"): benchmarks/ and the other studies importable
sys.path.insert(1, str(Path(__file__).resolve().parents[2]))
sys.path.extend(str(p) for p in sorted(Path(__file__).resolve().parents[1].glob("bench_*")))

import argparse

import numpy as np
from sklearn.datasets import load_digits

from mkrk_dask import MKKMRK
from mkrk_dask.metrics import normalized_mutual_info
from mkrk_dask.plan import auto_kernels

from _common import now, write_report

CONFIGS = {"sfn (default)": dict(dissimilarity="sfn", lam_scaling="normalized"),
           "fip (paper's C)": dict(dissimilarity="fip", lam_scaling="none")}
LAMS = {"sfn (default)": [2.0**e for e in (-12, -8, -4, -2, 0, 2)],
        "fip (paper's C)": [2.0**e for e in (-15, -10, -5, 0, 5)]}


def dictionaries() -> dict[str, list[list[str]]]:
    """Groups of kernel specifications: each group one kernel and its redundant relatives."""
    base = [s.name for s in auto_kernels(["angular"])]  # digits: intensities
    tripled = [[name] * 3 for name in base]
    near = [["linear", "polynomial(a=0,b=1)", "polynomial(a=1,b=1)"]]
    for name in base[1:]:
        family, width = name.split("(m=")
        m = float(width.rstrip(")"))
        near.append([name, f"{family}(m={1.05 * m:g})", f"{family}(m={1.1 * m:g})"])
    return {"clean": [[name] for name in base], "tripled": tripled, "near": near}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=600)
    args = parser.parse_args()
    started = now()
    X, y = load_digits(return_X_y=True)
    X, y = X[: args.rows], y[: args.rows]
    rows = ["| C | lambda | dictionary | largest member's share (mean / min over groups) | "
            "effective kernels | NMI |", "|---|---|---|---|---|---|"]
    for config, params in CONFIGS.items():
        for lam in LAMS[config]:
            for name, groups in dictionaries().items():
                kernels = [spec for group in groups for spec in group]
                model = MKKMRK(10, kernels=kernels, lam=lam, solver="exact",
                               final_clustering="kmeans", random_state=0, **params).fit(X)
                w = model.weights_
                sizes = [len(g) for g in groups]
                parts = np.split(w, np.cumsum(sizes)[:-1])
                share = [p.max() / p.sum() if p.sum() > 0 else np.nan for p in parts]
                effective = 1.0 / np.sum(w**2)
                nmi = 100 * normalized_mutual_info(y, model.labels_)
                shown = ("-" if name == "clean" else
                         f"{np.nanmean(share):.3f} / {np.nanmin(share):.3f}")
                rows.append(f"| {config} | 2^{np.log2(lam):g} | {name} ({len(w)}) | {shown} | "
                            f"{effective:.2f} | {nmi:.2f} |")
                print(rows[-1], flush=True)
    body = "\n".join([
        f"Data: scikit-learn's digits, the first {args.rows} rows, k = 10, exact backend, "
        "`final_clustering=\"kmeans\"`, seed 0. Groups: each default kernel (cosine and "
        "angular Gaussians at 0.5, 1, 2 x the median distance) with two copies (`tripled`) "
        "or two near-duplicates (`near`: 1.05x and 1.1x the width; the cosine with "
        "`polynomial(a=0,b=1)` and `polynomial(a=1,b=1)`).", "", *rows, ""])
    write_report("defaults", "selection", "Redundant kernels: does MKKM-RK pick one?", body,
                 started=started)


if __name__ == "__main__":
    main()
