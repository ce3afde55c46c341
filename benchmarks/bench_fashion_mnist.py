"""Fashion-MNIST (70,000 x 784) end to end: MKKM-RK with the Nystrom backend and the paper's
12 kernels, next to scikit-learn ``Nystroem`` + ``KMeans`` on the single best kernel and plain
``KMeans`` on X, all measured in the same run.

    python benchmarks/bench_fashion_mnist.py

``--zarr`` writes X once into a Zarr array in a temporary folder and fits every method on
``da.from_zarr`` of it (the public API on lazy input, as a user with data on disk would).
"""

from __future__ import annotations

import argparse
import tempfile
import time

from sklearn.cluster import KMeans
from sklearn.kernel_approximation import Nystroem
from sklearn.preprocessing import normalize

from mkrk_dask.datasets import load_dataset
from mkrk_dask.estimators import ESTIMATORS
from mkrk_dask.metrics import clustering_accuracy, normalized_mutual_info

from _common import PeakRSS, fmt_bytes, now, write_report


def sklearn_kernel(spec):
    """scikit-learn's own kernel for one of the paper's kernels (resolved widths).

    Gaussian: ``rbf`` with ``gamma = 1 / (2 sigma^2)`` (identical). Cosine: ``cosine``
    (identical). Polynomial ``(a + x.y)^b`` normalised: computed on unit-length rows, which is
    identical for a = 0 (``cos^b``) and close for a = 1.
    """
    if spec.family == "gaussian":
        return dict(kernel="rbf", gamma=1.0 / (2.0 * spec.sigma**2)), False
    if spec.family == "linear":
        return dict(kernel="cosine"), False
    return dict(kernel="polynomial", gamma=1.0, coef0=spec.a, degree=int(spec.b)), True


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--landmarks", type=int, default=300)
    parser.add_argument("--lam", type=float, default=2.0**-10)
    parser.add_argument("--dtype", default="float32")
    parser.add_argument("--n-init", type=int, default=10)
    parser.add_argument("--subset", type=int, default=None)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--report", default="fashion_mnist")
    parser.add_argument("--methods", nargs="+", default=["MKKM-RK"], choices=list(ESTIMATORS),
                        help="the multiple kernel methods to fit, each with the same Nystrom "
                             "settings and the paper's 12 kernels (MKKM-RK at --lam)")
    parser.add_argument("--zarr", action="store_true",
                        help="fit the methods on X written into Zarr (da.from_zarr), not numpy")
    parser.add_argument("--no-baselines", action="store_true",
                        help="skip the scikit-learn rows (Nystroem per kernel, plain KMeans)")
    args = parser.parse_args()
    started = now()
    data = load_dataset("fashion_mnist", subset=args.subset)
    X, y = data.X, data.y
    k = 10
    rows = []

    def score(labels):
        return 100 * normalized_mutual_info(y, labels), 100 * clustering_accuracy(y, labels)

    fitted = {}
    scratch = tempfile.TemporaryDirectory()
    X_fit = X
    if args.zarr:
        import dask.array as da
        import zarr

        store = zarr.create_array(f"{scratch.name}/X.zarr", shape=X.shape, dtype=X.dtype,
                                  chunks=(8192, X.shape[1]))
        store[...] = X
        X_fit = da.from_zarr(store)
    for method in args.methods:
        extra = {"lam": args.lam} if method == "MKKM-RK" else {}
        with PeakRSS() as peak:
            t0 = time.perf_counter()
            fitted[method] = ESTIMATORS[method](
                k, kernels="paper", solver="nystrom", n_init=args.n_init, random_state=args.seed,
                tol=1e-6, tol_mode="relative", **extra,
                backend_options={"n_landmarks": args.landmarks, "dtype": args.dtype}).fit(X_fit)
            seconds = time.perf_counter() - t0
        nmi, acc = score(fitted[method].labels_)
        setting = ", ".join(f"{key}={value:g}" for key, value in
                            fitted[method].get_params().items() if key == "lam")
        rows.append(f"| {method}, Nystrom backend (12 kernels{', ' if setting else ''}"
                    f"{setting}) | {seconds:.0f} | {fmt_bytes(peak.peak)} | {nmi:.2f} | "
                    f"{acc:.2f} |")
        print(rows[-1], flush=True)
    model = next(iter(fitted.values()))
    info = model.nystrom_model_.info

    # scikit-learn Nystroem + KMeans on every paper kernel (widths resolved as in the fit).
    single = []
    for spec in ([] if args.no_baselines else model.kernels_):
        params, unit = sklearn_kernel(spec)
        with PeakRSS() as p:
            t0 = time.perf_counter()
            Z = Nystroem(n_components=args.landmarks, random_state=args.seed,
                         **params).fit_transform(normalize(X) if unit else X)
            labels = KMeans(k, n_init=args.n_init, random_state=args.seed).fit_predict(Z)
            seconds = time.perf_counter() - t0
        single.append((score(labels), seconds, p.peak, spec.name))
        print(spec.name, single[-1][0], f"{seconds:.0f}s", flush=True)
    if single:
        (nmi, acc), seconds, rss, name = max(single, key=lambda s: s[0][0])
        rows.append(f"| scikit-learn Nystroem({args.landmarks}) + KMeans, best single kernel "
                    f"by NMI ({name}) | {seconds:.0f} | {fmt_bytes(rss)} | {nmi:.2f} | "
                    f"{acc:.2f} |")
        with PeakRSS() as p:
            t0 = time.perf_counter()
            labels = KMeans(k, n_init=args.n_init, random_state=args.seed).fit_predict(X)
            seconds = time.perf_counter() - t0
        nmi, acc = score(labels)
        rows.append(f"| plain KMeans on X | {seconds:.0f} | {fmt_bytes(p.peak)} | {nmi:.2f} | "
                    f"{acc:.2f} |")
    singles = "\n".join(f"| {s[3]} | {s[0][0]:.2f} | {s[0][1]:.2f} | {s[1]:.0f} |"
                        for s in single)
    scratch.cleanup()
    weights = "; ".join(
        f"{method} ({fit.n_iter_} iterations"
        + (f", {fit.n_h_steps_} H-steps" if hasattr(fit, "n_h_steps_") else "") + "): " + ", ".join(
            f"{n}: {w:.3f}" for n, w in zip(fit.kernel_names_, fit.weights_, strict=True)
            if w > 1e-8) for method, fit in fitted.items())
    body = (
        f"Fashion-MNIST, n = {X.shape[0]}, d = {X.shape[1]} (pixels scaled to [0, 1]), k = 10"
        + (", fitted from a Zarr array on local disk (`da.from_zarr`). " if args.zarr else ". ") +
        f"Methods {', '.join(args.methods)}: the estimator with `kernels='paper', "
        f"solver='nystrom', n_landmarks={args.landmarks}, dtype='{args.dtype}', tol=1e-6, "
        f"tol_mode='relative', n_init={args.n_init}` (MKKM-RK: lam={args.lam:g}; the others "
        "at their defaults), embedded LocalCluster (threads, 2 cores), "
        "temporary factor store. Time and peak RSS (process tree, sampled every 0.1 s) of the "
        "whole fit (kernel scales, landmarks, factor + Gram pass, iterations, H pass, final "
        "k-means). The scikit-learn rows are measured in the same run (peak RSS of the process "
        "is never below what it already held, so it includes the loaded data).\n\n"
        "| method | seconds | peak RSS | NMI | ACC |\n|---|---|---|---|---|\n"
        + "\n".join(rows) +
        f"\n\nWeights: {weights}. First fit's phases "
        f"{info.get('seconds')}; largest distance {info.get('scales')}; Nystrom components "
        f"R = {info.get('n_components')}.\n\n"
        + ("scikit-learn Nystroem + KMeans on each paper kernel (the best by NMI is in the "
           "table above):\n\n| kernel | NMI | ACC | seconds |\n|---|---|---|---|\n" + singles
           if single else "The scikit-learn rows were not run (--no-baselines)."))
    path = write_report("datasets", args.report, "Fashion-MNIST with the Nystrom backend", body,
                        started=started)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
