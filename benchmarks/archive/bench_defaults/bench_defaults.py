"""The label-free default against the one-kernel pipelines, on the seven data sets (issue 12).

Every method on every data set in one run, NMI and ACC as the mean (and best) over the seeds,
and the seconds of one fit (mean over the seeds):

- ``default``: ``MKKMRK(n_clusters=k, random_state=seed)``, nothing else set (the geometry
  chosen on a sample of at most 4,000 rows, the final step's embedding and rank by
  consensus);
- ``default, features step``: the same with ``final_step="features"`` (the default before the
  spectral embeddings joined the consensus; information, not one of the alternatives);
- ``faithful 2^-15`` and ``faithful oracle lambda``: ``MKKMRK.paper`` (the paper's 12 kernels,
  fip, spectral final step) at lambda = 2^-15 and at the lambda of the grid with the best mean
  NMI (labels used: information only); one build per data set (:func:`lambda_search`), the
  seeds are the repeats of the final k-means;
- ``sklearn Nystroem(cosine)`` / ``Nystroem(rbf)`` + KMeans (n_components = min(n, 1000);
  rbf gamma = 1 / median squared distance of a 2000-row sample) and plain ``KMeans``, on the
  views side by side;
- ``average kernel``: the default's kernels of both geometries (cosine, Gaussians and angular
  Gaussians at 0.5, 1, 2 x the median distance, per view), each distinct kernel once (on a
  view of unit-length rows the angular Gaussians are the Euclidean ones), equal weights, same
  final step;
- ``oracle single kernel``: the best of those kernels alone, same final step (labels used:
  information only).

Above ``--big`` samples the faithful and oracle rows use ``--big-seeds`` seeds, the faithful
rows the Nystrom backend (300 landmarks per kernel, float32, as the Fashion-MNIST report) and
the coarse grid 2^-15, 2^-10, 2^-5, 2^0, 2^5.

Data sets named ``sklearn:iris``, ``sklearn:wine``, ``sklearn:breast_cancer`` and
``sklearn:digits`` are the ones that ship with scikit-learn, read as they are (no scaling):
held-out data that chose nothing in the defaults.

Usage::

    python benchmarks/archive/bench_defaults/bench_defaults.py \
        [--datasets jaffe orl ... sklearn:wine] [--seeds 5]
"""

from __future__ import annotations

import sys
from pathlib import Path

# An archived study (benchmarks/README.md, "Archive"): benchmarks/ and the other studies importable
sys.path.insert(1, str(Path(__file__).resolve().parents[2]))
sys.path.extend(str(p) for p in sorted(Path(__file__).resolve().parents[1].glob("bench_*")))

import argparse
import json
import time
import warnings

import numpy as np
from mkrk_dask.estimators._dictionary import GEOMETRIES, auto_dictionary
from sklearn.cluster import KMeans
from sklearn.kernel_approximation import Nystroem

from mkrk_dask import MKKMRK, lambda_search
from mkrk_dask.datasets import load_dataset
from mkrk_dask.kernels import row_sq_norms
from mkrk_dask.metrics import clustering_accuracy, normalized_mutual_info

from _common import dense_views, median_rbf_gamma, now, results_dir, write_report

DATASETS = ("jaffe", "orl", "tr11", "coil20", "uci_mfeat", "usps", "fashion_mnist")
HELD_OUT = ("sklearn:iris", "sklearn:wine", "sklearn:breast_cancer", "sklearn:digits")
LABEL_FREE = ("default", "KMeans", "Nystroem(cosine)+KMeans", "Nystroem(rbf)+KMeans",
              "average kernel")
#: the default with the features final step alone (the default before ``final_step="auto"``):
#: information, not one of the issue's alternatives
FEATURES_ONLY = "default, features step"


def _score(y: np.ndarray, labels: np.ndarray) -> tuple[float, float]:
    return 100 * normalized_mutual_info(y, labels), 100 * clustering_accuracy(y, labels)


def _record(runs: list[tuple[float, float, float]], **extra) -> dict:
    nmi, acc, sec = (np.array(col) for col in zip(*runs, strict=True))
    return {"nmi_mean": float(nmi.mean()), "nmi_best": float(nmi.max()),
            "acc_mean": float(acc.mean()), "acc_best": float(acc.max()),
            "seconds": float(sec.mean()), "n_seeds": len(runs), **extra}


def _timed_fit(make, views, y) -> tuple[float, float, float, object]:
    start = time.perf_counter()
    model = make().fit(views)
    seconds = time.perf_counter() - start
    return (*_score(y, model.labels_), seconds, model)


def _seeded_fits(make, views, y, seeds: int) -> tuple[list, object]:
    """``(NMI, ACC, seconds)`` of ``make(seed).fit`` for every seed, and the last model."""
    runs = []
    for seed in range(seeds):
        *row, model = _timed_fit(lambda s=seed: make(s), views, y)
        runs.append(row)
    return runs, model


def _sklearn(X, y, k, seed, kind, gamma) -> tuple[float, float, float]:
    start = time.perf_counter()
    if kind == "KMeans":
        Z = X
    else:
        kw = dict(kernel="cosine") if "cosine" in kind else dict(kernel="rbf", gamma=gamma)
        Z = Nystroem(n_components=min(X.shape[0], 1000), random_state=seed, **kw).fit_transform(X)
    labels = KMeans(n_clusters=k, n_init=10, random_state=seed).fit_predict(Z)
    return (*_score(y, labels), time.perf_counter() - start)


def _load(name: str, data_dir: str | None) -> tuple[list[np.ndarray], np.ndarray]:
    if name.startswith("sklearn:"):
        import sklearn.datasets

        X, y = getattr(sklearn.datasets, f"load_{name.split(':', 1)[1]}")(return_X_y=True)
        return [np.asarray(X, dtype=np.float64)], np.asarray(y)
    return dense_views(load_dataset(name, data_dir))


def distinct_kernels(views: list) -> list:
    """The default's kernels of both geometries, each distinct kernel once: the cosine kernel
    once per view, and no angular Gaussians on a view whose rows all have unit length (there
    they are the Euclidean ones: counting them twice would weight those Gaussians double)."""
    union = [spec for g in GEOMETRIES for spec in auto_dictionary(g, len(views))]
    unit = {v for v, X in enumerate(views)
            if np.allclose(row_sq_norms(X), 1.0, atol=2e-6)}
    return list({spec: None for spec in union
                 if not (spec.family == "angular" and spec.view in unit)})


def run_dataset(name: str, data_dir: str | None, seeds: int, big: int, big_seeds: int) -> dict:
    views, y = _load(name, data_dir)
    k, n = int(np.unique(y).size), views[0].shape[0]
    few = seeds if n <= big else big_seeds
    out: dict = {"n": n, "k": k, "views": len(views), "methods": {}}
    methods = out["methods"]

    runs, model = _seeded_fits(lambda s: MKKMRK(k, random_state=s), views, y, seeds)
    methods["default"] = _record(
        runs, solver=model.solver_, dictionary=model.dictionary_,
        n_components=model.n_components_, final_step=model.final_step_,
        scores={g: round(v, 4) for g, v in model.dictionary_scores_.items()},
        kernels=model.kernel_names_)
    print(name, "default", methods["default"], flush=True)

    runs, model = _seeded_fits(lambda s: MKKMRK(k, final_step="features", random_state=s),
                               views, y, seeds)
    methods[FEATURES_ONLY] = _record(runs, n_components=model.n_components_)
    print(name, FEATURES_ONLY, methods[FEATURES_ONLY], flush=True)

    X = np.hstack(views)
    gamma = median_rbf_gamma(X)
    for kind in ("KMeans", "Nystroem(cosine)+KMeans", "Nystroem(rbf)+KMeans"):
        methods[kind] = _record([_sklearn(X, y, k, s, kind, gamma) for s in range(seeds)])
        print(name, kind, methods[kind], flush=True)

    union = distinct_kernels(views)
    runs, model = _seeded_fits(lambda s: MKKMRK(k, kernels=union, lam=2.0**10, random_state=s),
                               views, y, seeds)
    spread = float(np.ptp(model.weights_))
    methods["average kernel"] = _record(runs, kernels=model.kernel_names_, weight_spread=spread)
    print(name, "average kernel", methods["average kernel"], flush=True)

    singles = {}
    for spec in union:
        runs = [_timed_fit(lambda s=seed, sp_=spec: MKKMRK(k, kernels=[sp_], random_state=s),
                           views, y)[:3] for seed in range(few)]
        singles[spec.name] = _record(runs)
    best = max(singles, key=lambda nm: singles[nm]["nmi_mean"])
    methods["oracle single kernel"] = dict(singles[best], kernel=best)
    out["single_kernels"] = singles
    print(name, "oracle single", best, singles[best], flush=True)

    if n <= big:
        paper = MKKMRK.paper(k, random_state=0)
        grid = [2.0**e for e in range(-15, 6)]
    else:
        paper = MKKMRK.paper(k, solver="nystrom", tol=1e-6, tol_mode="relative", random_state=0,
                             backend_options={"n_landmarks": 300, "dtype": "float32"})
        grid = [2.0**e for e in (-15, -10, -5, 0, 5)]
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the Nystrom warnings of the narrow paper kernels
        found = lambda_search(paper, views, grid, y=y, n_repeats=few, random_state=0)
    total = time.perf_counter() - start
    per_lam = {}
    for item in found:
        nmi = [100 * s["nmi"] for s in item.scores]
        acc = [100 * s["acc"] for s in item.scores]
        per_lam[item.lam] = {"nmi_mean": float(np.mean(nmi)), "nmi_best": float(np.max(nmi)),
                             "acc_mean": float(np.mean(acc)), "acc_best": float(np.max(acc)),
                             "seconds": item.seconds, "n_seeds": few}
    methods["faithful 2^-15"] = dict(per_lam[2.0**-15], lam=2.0**-15,
                                     note=f"grid search of {len(grid)} lambdas: {total:.0f} s")
    oracle = max(per_lam, key=lambda lam: per_lam[lam]["nmi_mean"])
    methods["faithful oracle lambda"] = dict(per_lam[oracle], lam=oracle)
    print(name, "faithful", methods["faithful 2^-15"], methods["faithful oracle lambda"],
          flush=True)
    return out


def _cell(rec: dict, key: str) -> str:
    return f"{rec[key + '_mean']:.2f} ({rec[key + '_best']:.2f})"


def report(results: dict) -> str:
    order = ["default", FEATURES_ONLY, *LABEL_FREE[1:], "faithful 2^-15",
             "faithful oracle lambda", "oracle single kernel"]
    lines = ["NMI and ACC in percent: mean over the seeds (best in brackets); seconds: one fit,",
             "mean over the seeds. Rows marked * use labels (information only).", ""]
    verdicts = ["| data set | n | default NMI | best label-free alternative | bar (-0.5) met | "
                "oracle single kernel | reaches it | time default / Nystroem(cosine) |",
                "|---|---|---|---|---|---|---|---|"]
    met = reached = 0
    for name, res in results.items():
        m = res["methods"]
        lines += [f"### {name} (n = {res['n']}, k = {res['k']}, {res['views']} view(s))", "",
                  "| method | NMI | ACC | seconds | seeds | notes |", "|---|---|---|---|---|---|"]
        for meth in [meth for meth in order if meth in m]:  # older runs lack a row
            rec = m[meth]
            star = "*" if meth.startswith(("oracle", "faithful oracle")) else ""
            note = {"default": lambda r: f"solver {r['solver']}, kept {r['dictionary']} "
                                         f"(within-cluster shares {r['scores']}), "
                                         f"{r.get('final_step', 'features')} step at rank "
                                         f"{r.get('n_components', '?')} (last seed)",
                    FEATURES_ONLY: lambda r: f"rank {r['n_components']} (last seed)",
                    "oracle single kernel": lambda r: r["kernel"],
                    "faithful 2^-15": lambda r: r["note"],
                    "faithful oracle lambda": lambda r: f"lambda = 2^{np.log2(r['lam']):.0f}",
                    "average kernel": lambda r: f"{len(r['kernels'])} kernels"}.get(
                        meth, lambda r: "")(rec)
            lines.append(f"| {meth}{star} | {_cell(rec, 'nmi')} | {_cell(rec, 'acc')} | "
                         f"{rec['seconds']:.1f} | {rec['n_seeds']} | {note} |")
        lines.append("")
        alt = max(LABEL_FREE[1:], key=lambda meth: m[meth]["nmi_mean"])
        ok = m["default"]["nmi_mean"] >= m[alt]["nmi_mean"] - 0.5
        single = m["oracle single kernel"]
        hit = m["default"]["nmi_mean"] >= single["nmi_mean"] - 0.5
        met += ok
        reached += hit
        verdicts.append(
            f"| {name} | {res['n']} | {m['default']['nmi_mean']:.2f} | "
            f"{m[alt]['nmi_mean']:.2f} ({alt}) | {'yes' if ok else 'NO'} | "
            f"{single['nmi_mean']:.2f} ({single['kernel']}) | {'yes' if hit else 'no'} | "
            f"{m['default']['seconds']:.1f} / {m['Nystroem(cosine)+KMeans']['seconds']:.1f} |")
    summary = ["## Summary", "", *verdicts, "",
               f"The default meets the bar on {met} of {len(results)} data sets and reaches the "
               f"oracle single kernel (within 0.5) on {reached}.", "", "## Per data set", ""]
    return "\n".join(summary + lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--datasets", nargs="+", default=list(DATASETS + HELD_OUT))
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--big", type=int, default=12_000)
    parser.add_argument("--big-seeds", type=int, default=1)
    parser.add_argument("--resume", action="store_true",
                        help="keep the data sets already in the raw JSON file")
    args = parser.parse_args()
    started = now()
    raw = results_dir("defaults") / "defaults.json"
    raw.parent.mkdir(parents=True, exist_ok=True)
    results = json.loads(raw.read_text()) if args.resume and raw.exists() else {}
    for name in args.datasets:
        if name in results:
            continue
        results[name] = run_dataset(name, args.data_dir, args.seeds, args.big, args.big_seeds)
        raw.write_text(json.dumps(results, indent=1, default=str))
    path = write_report("defaults", "defaults", "The label-free default against the "
                        "one-kernel pipelines (issue 12)", report(results), started=started)
    print(Path(path).read_text())


if __name__ == "__main__":
    main()
