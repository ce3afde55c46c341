"""A weaker second view beside a strong one (issue 76): scikit-learn's digits (the pixels) and a
histogram of their gradients' orientations, computed here from the same images.

A user adds a view and expects the fit not to get worse than the better view alone. With two
views the default keeps equal weights (the views' agreement, its weighting rule, is one number
for both); MKKM-RK's learned weights at smaller lambda tilt towards the pixels. This measures the
default, the learned weights at two lambdas and each view alone, and the weight each fit puts
on each view (the sum of its kernels' weights).

    python benchmarks/bench_weak_view.py --seeds 3
"""

from __future__ import annotations

import argparse
import warnings

import numpy as np
from sklearn.datasets import load_digits

from mkrk_dask import MKKMRK
from mkrk_dask.metrics import normalized_mutual_info

from _common import now, write_report

#: the gradient view: orientation histograms of this many bins in each of cells x cells cells
BINS, CELLS = 9, 2
#: (name, views used: "pixels", "gradients" or both, estimator parameters)
METHODS = (
    ("default, pixels alone", ("pixels",), {}),
    ("default, gradients alone", ("gradients",), {}),
    ("default, both views", ("pixels", "gradients"), {}),
    ("views weighted by agreement, both views", ("pixels", "gradients"),
     {"view_weights": "agreement"}),
    ("learned weights, lambda 2^-6, both views", ("pixels", "gradients"), {"lam": 2.0**-6}),
    ("learned weights, lambda 2^-10, both views", ("pixels", "gradients"), {"lam": 2.0**-10}),
)


def gradient_histograms(pixels: np.ndarray, side: int = 8) -> np.ndarray:
    """Per image, the gradient magnitudes summed by orientation (BINS bins over 180 degrees)
    in each of CELLS x CELLS cells: a small histogram of oriented gradients."""
    images = pixels.reshape(-1, side, side)
    gy, gx = np.gradient(images, axis=(1, 2))
    magnitude = np.hypot(gx, gy)
    orientation = np.minimum((np.mod(np.arctan2(gy, gx), np.pi) / np.pi * BINS).astype(int),
                             BINS - 1)
    step = side // CELLS
    cells = []
    for i in range(CELLS):
        for j in range(CELLS):
            block = (slice(None), slice(i * step, (i + 1) * step), slice(j * step, (j + 1) * step))
            cells.append(np.stack([np.where(orientation[block] == b, magnitude[block], 0.0)
                                   .sum(axis=(1, 2)) for b in range(BINS)], axis=1))
    return np.hstack(cells)


def view_shares(model: MKKMRK, n_views: int) -> list[float]:
    """The weight each view's kernels carry together."""
    shares = np.zeros(n_views)
    for spec, weight in zip(model.kernels_, np.asarray(model.weights_), strict=True):
        shares[spec.view] += weight
    return [float(s) for s in shares / shares.sum()]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=3)
    args = parser.parse_args()
    started = now()
    pixels, y = load_digits(return_X_y=True)
    data = {"pixels": pixels.astype(np.float64), "gradients": gradient_histograms(pixels)}
    rows = []
    for name, used, params in METHODS:
        views = [data[v] for v in used]
        nmis, shares = [], []
        for seed in range(args.seeds):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                model = MKKMRK(10, random_state=seed, **params).fit(views)
            nmis.append(100 * normalized_mutual_info(y, model.labels_))
            shares.append(view_shares(model, len(views)))
        share = np.mean(shares, axis=0)
        rows.append((name, float(np.mean(nmis)), float(np.min(nmis)), float(np.max(nmis)),
                     " / ".join(f"{100 * s:.0f}%" for s in share) if len(views) > 1 else "-"))
        print(rows[-1], flush=True)
    best_alone = max(r[1] for r in rows if "alone" in r[0])
    body = [f"Data: scikit-learn's digits (1,797 images, k = 10): the 64 pixels, and a histogram "
            f"of gradient orientations ({BINS} bins in each of {CELLS}x{CELLS} cells, "
            f"{BINS * CELLS * CELLS} columns) computed from the same images. NMI in percent over "
            f"{args.seeds} seeds. No fit sees the labels.", "",
            "| fit | NMI mean | min | max | weight on pixels / gradients |",
            "|---|---|---|---|---|"]
    body += [f"| {n} | {m:.2f} | {lo:.2f} | {hi:.2f} | {s} |" for n, m, lo, hi, s in rows]
    both = next(r[1] for r in rows if r[0] == "default, both views")
    body += ["", f"- The default on both views against the better view alone: {both:.2f} against "
             f"{best_alone:.2f} ({both - best_alone:+.2f})."]
    write_report("defaults", "weak_view", "A weaker second view beside a strong one (issue 76)",
                 "\n".join(body), started=started)


if __name__ == "__main__":
    main()
