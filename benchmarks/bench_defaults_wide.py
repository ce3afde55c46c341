"""The label-free default against the label-free peers on a wide set of data (issue 48).

One run gives, on every data set, the mean NMI and ACC over ``--seeds`` seeds and the mean
seconds of one fit of:

- ``default``: ``MKKMRK(n_clusters=k, random_state=seed)``, nothing else set;
- ``paper``: ``MKKMRK.paper(k, lam=2**-15, random_state=seed)``, the paper's configuration
  (above ``--big`` rows through the Nystrom backend, see :func:`_peers.paper`);
- the peers of :mod:`_peers`: KMeans on raw and on standardised columns, Nystroem(cosine) and
  Nystroem(rbf, median) + KMeans, SpectralClustering(nearest_neighbors) up to 10,000 rows,
  the average kernel of the default's dictionary, AnchorGraphClustering, LSC-K.

Then, per data set, the best label-free peer (every method but the default: none of them sees
a label), and two summary lines: the share of data sets where the default is within 0.5 NMI of
that peer, and the data sets where it is more than 2 NMI below the better of raw and
standardised KMeans.

Data: the seven sets of ``../shared/datasets`` (``mkrk_dask.datasets.load_dataset``),
scikit-learn's bundled iris, wine, breast_cancer and digits (``sklearn:<name>``, read as they
are), and the tabular sets of :mod:`_tabular` (``kernlab:spam``, ``MASS:crabs``...: columns in
different units, counts, categorical features; needs ``apt-get install r-cran-kernlab
r-cran-mass`` and ``pip install -e ".[bench]"``). ``--datasets holdout`` runs instead the
hold-out sets of :data:`_tabular.HOLDOUT` (added after the default's rules were set; not in a
plain run, whose bars they would change after the fact).

Two more parts of the same run:

- the cost (``--cost-repeats R``, 0 skips it): on scikit-learn's digits, ``R`` interleaved
  repeats of the default fit, ``MKKMRK.paper(10)`` and ``SpectralClustering(nearest_neighbors)``;
  median seconds, the default's ratios to both, and whether its ``timings_["fit"]`` is within
  5% of the wall time of ``fit``. The same repeats time the default without its final graph
  and LSC-K, and score every method's NMI: what each bar on digits costs the other;
- the Fashion-MNIST line (70,000 x 784; ``--no-fashion`` leaves it out, it is the slow part):
  the default against ``Nystroem(cosine, 1000) + KMeans`` and LSC-K (1,000 landmarks), NMI and
  seconds, from the same run's Fashion-MNIST rows.

It sits beside ``bench_defaults.py`` (issue 12's comparison, which ``docs/defaults.rst`` and
``bench_label_free_variants.py`` still use) and shares nothing private of the library: the
default may change under it.

Usage::

    python benchmarks/bench_defaults_wide.py                       # everything (hours)
    python benchmarks/bench_defaults_wide.py --datasets sklearn:iris MASS:crabs --seeds 1 \\
        --methods default KMeans LSC-K --cost-repeats 0 --report /tmp/quick.md
"""

from __future__ import annotations

import argparse
import json
import time
import warnings
from functools import partial
from pathlib import Path

import numpy as np
from sklearn.cluster import SpectralClustering

from mkrk_dask import MKKMRK
from mkrk_dask.estimators._base import STAGES
from mkrk_dask.metrics import clustering_accuracy, normalized_mutual_info

from _common import blob_data, dense_views, load_or_skip, now, results_dir, write_report
from _multiview import MULTIVIEW, MV_PEERS, load_multiview, with_noise_view
from _peers import PEERS, SPECTRAL_MAX_N
from _protocol import (
    ABLATIONS,
    CANDIDATES,
    ablation_lines,
    load_folds,
    patched,
    protocol_lines,
    variant_name,
    variant_params,
)
from _tabular import HOLDOUT, TABULAR, describe, load_tabular

SHARED = ("jaffe", "orl", "tr11", "coil20", "uci_mfeat", "usps", "fashion_mnist")
SKLEARN = ("sklearn:iris", "sklearn:wine", "sklearn:breast_cancer", "sklearn:digits")
DATASETS = (*SHARED, *SKLEARN, *TABULAR, *MULTIVIEW)
#: ``--datasets holdout``: every hold-out set
HOLDOUT_GROUP = "holdout"
#: ``--datasets folds``: every set of ``folds.json`` (issue 76's protocol)
FOLDS_GROUP = "folds"
#: the classic method: equal weights on the default's kernels, the paper's spectral step
CLASSIC = "average kernel, spectral step"
#: the best view alone under the default, chosen with the labels: for information only
ORACLE_VIEW = "best single view (oracle)"
VARIANTS = tuple(variant_name(r) for r in (*ABLATIONS, *CANDIDATES))
METHODS = ("default", *PEERS, CLASSIC, *MV_PEERS, ORACLE_VIEW, *VARIANTS)
#: the paper's configuration (12 kernels a view) runs up to this many views
PAPER_MAX_VIEWS = 2
#: rules that apply to three or more views only (their variants run on those sets alone)
MULTI_VIEW_RULES = ("view weights by agreement",)
#: rules that act on the plan alone (its preprocessing and kernels): where switching one off
#: leaves the plan's data decisions as they are, its variant is the default itself, not refitted
PLAN_RULES = ("mostly-zero views kept as given", "cosine alone on disjoint views",
              "column standardisation (spread > 10x)", "centring far-off columns",
              "angular geometry (counts, intensities)")
#: not label-free peers: the default's own variants and the oracle
NOT_PEERS = ("default", ORACLE_VIEW, *VARIANTS)
FASHION = "fashion_mnist"
#: the bars of issue 48
WITHIN_BEST = 0.5
BELOW_KMEANS = 2.0
TIMINGS_TOLERANCE = 0.05
#: the cost run's default without its final graph
NO_GRAPH = "default, no graph"


# --------------------------------------------------------------------------- data


def load(name: str, data_dir: str | None) -> tuple[list[np.ndarray], np.ndarray, dict] | None:
    """``(views, y, info)`` of a data set by name, or None when it is not on this machine.
    ``blobs:d`` and ``blobs:d:n`` are synthetic (:func:`_common.blob_data`)."""
    if name.startswith("blobs:"):
        views, y = blob_data(name)
        return views, y, {"kinds": f"three Gaussian blobs ({name})"}
    if name.startswith("sklearn:"):
        import sklearn.datasets

        X, y = getattr(sklearn.datasets, f"load_{name.split(':', 1)[1]}")(return_X_y=True)
        X = np.asarray(X, dtype=np.float64)
        return [X], np.asarray(y), {"kinds": "scikit-learn's bundled copy, as it is"}
    if name in MULTIVIEW:
        return load_multiview(name, data_dir)
    if name in TABULAR or name in HOLDOUT:
        try:
            X, y, info = load_tabular(name)
        except (FileNotFoundError, ImportError) as exc:
            print(f"skipped {name}: {exc}")
            return None
        return [X], y, info
    data = load_or_skip(name, data_dir)
    if data is None:
        return None
    views, y = dense_views(data)
    return views, y, {"kinds": f"{len(views)} view(s) from ../shared/datasets"}


# --------------------------------------------------------------------------- fits


def _score(y, labels) -> tuple[float, float]:
    return 100 * normalized_mutual_info(y, labels), 100 * clustering_accuracy(y, labels)


def _record(runs: list[tuple[float, float, float]], **extra) -> dict:
    nmi, acc, sec = (np.array(col) for col in zip(*runs, strict=True))
    return {"nmi_mean": float(nmi.mean()), "nmi_best": float(nmi.max()),
            "acc_mean": float(acc.mean()), "seconds": float(sec.mean()),
            "n_seeds": len(runs), "nmi": nmi.round(4).tolist(), **extra}


def fit_default(views, y, k, seeds, params=None, patch=None) -> tuple[dict, MKKMRK]:
    """The default (or the default with ``params`` and the library constants ``patch``) over
    the seeds; the last model (its dictionary serves the average kernel), and how far its
    ``timings_["fit"]`` is from the wall time of ``fit``."""
    runs, gaps = [], []
    for seed in range(seeds):
        start = time.perf_counter()
        with patched(patch or {}), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model = MKKMRK(k, random_state=seed, **(params or {})).fit(views)
        wall = time.perf_counter() - start
        runs.append((*_score(y, model.labels_), wall))
        gaps.append(model.timings_.get("fit", float("nan")) / wall - 1)
    plan = getattr(model, "plan_", None)  # the fit's decisions (issue 48), where it has them
    notes = {"solver": getattr(model, "solver_", None),
             "final_step": getattr(model, "final_step_", None),
             "kernels": len(model.kernels_), "timings_fit_gap": float(np.max(np.abs(gaps))),
             "plan": None if plan is None else str(plan)}
    return _record(runs, **notes), model


def fit_peer(name, views, y, k, seeds, **bind) -> dict:
    n = views[0].shape[0]
    if name == "SpectralClustering(nn)" and n > SPECTRAL_MAX_N:
        return {"skipped": f"n > {SPECTRAL_MAX_N:,}"}
    method = partial({**PEERS, **MV_PEERS}[name], **bind)
    runs = []
    for seed in range(seeds):
        start = time.perf_counter()
        with warnings.catch_warnings():
            # the narrow paper kernels' Nystrom warnings, a disconnected kNN graph: the scores
            # say what they cost
            warnings.simplefilter("ignore")
            try:
                labels = method(views, k, seed)
            except ValueError as exc:  # a peer that cannot fit these data: reported as such
                return {"skipped": f"failed (seed {seed}): {exc}"}
        runs.append((*_score(y, labels), time.perf_counter() - start))
    return _record(runs)


def fit_oracle_view(views, y, k, seeds) -> dict:
    """The default on each view alone; the view with the best mean NMI (chosen with the
    labels: for information only)."""
    per_view = [fit_default([v], y, k, seeds)[0] for v in views]
    best = int(np.argmax([r["nmi_mean"] for r in per_view]))
    return {**per_view[best], "view": best,
            "views_nmi": [round(r["nmi_mean"], 2) for r in per_view]}


def subsample(loaded, max_rows: int | None):
    """At most ``max_rows`` rows, a uniform sample (fixed seed), where a set has more."""
    views, y, info = loaded
    n = views[0].shape[0]
    if not max_rows or n <= max_rows:
        return loaded
    rows = np.sort(np.random.default_rng(0).choice(n, max_rows, replace=False))
    return ([v[rows] for v in views], y[rows],
            {**info, "kinds": f"{info['kinds']}; a uniform sample of {max_rows:,} of {n:,} rows"})


def _data_decisions(views, k, patch=None) -> list:
    """The plan's preprocessing and kernel decisions (with the library constants ``patch``)."""
    with patched(patch or {}):
        plan = MKKMRK(k).plan(views)
    return [(d.what, d.value) for d in plan.decisions
            if d.what.startswith(("preprocessing", "kernels"))]


def fit_variants(name, views, y, k, methods, seeds, res) -> None:
    """The default's variants in ``methods`` not yet in ``res`` (a set's methods), fitted."""
    default_clustering = MKKMRK(k).plan(views).final_clustering
    for method in [m for m in methods if m in VARIANTS and m not in res]:
        rule = method.split(" ", 1)[1]
        if rule in MULTI_VIEW_RULES and len(views) < 3:
            continue  # the rule does not apply: the variant is the default itself
        params, patch = variant_params(rule, len(views), default_clustering)
        if rule in PLAN_RULES and _data_decisions(views, k, patch) == _data_decisions(views, k):
            res[method] = {**res["default"], "same_plan": True}
            continue
        res[method] = fit_default(views, y, k, seeds, params, patch)[0]
        print(name, method, res[method]["nmi_mean"], flush=True)


def run_dataset(name, loaded, methods, seeds, big) -> dict:
    views, y, info = loaded
    k, n = int(np.unique(y).size), views[0].shape[0]
    out = {"n": n, "d": int(sum(v.shape[1] for v in views)), "k": k, "views": len(views),
           "info": info, "methods": {}}
    res = out["methods"]
    model = None
    if "default" in methods:
        res["default"], model = fit_default(views, y, k, seeds)
        print(name, "default", res["default"]["nmi_mean"], flush=True)
    fit_variants(name, views, y, k, methods, seeds, res)
    if CLASSIC in methods:
        res[CLASSIC] = fit_default(views, y, k, seeds, {"final_step": "spectral"})[0]
    if len(views) > 1:
        if ORACLE_VIEW in methods:
            res[ORACLE_VIEW] = fit_oracle_view(views, y, k, seeds)
        for peer in [m for m in methods if m in MV_PEERS]:
            res[peer] = fit_peer(peer, views, y, k, seeds)
            print(name, peer, res[peer].get("nmi_mean"), flush=True)
    for peer in [m for m in methods if m in PEERS]:
        bind = {}
        if peer == "average kernel":
            if model is None:  # only its dictionary is used: one fit, not timed
                model = MKKMRK(k, random_state=0).fit(views)
            bind["kernels"] = list(model.kernels_)
            # the dictionary's widths are those of the columns the default transformed
            bind["transform"] = getattr(getattr(model, "plan_", None), "apply_scaling", None)
        elif peer == "paper":
            if len(views) > PAPER_MAX_VIEWS:
                res[peer] = {"skipped": f"{12 * len(views)} kernels (12 a view): left out of "
                                        f"the peers above {PAPER_MAX_VIEWS} views, for time"}
                continue
            bind["big"] = n > big
        res[peer] = fit_peer(peer, views, y, k, seeds, **bind)
        print(name, peer, res[peer].get("nmi_mean"), flush=True)
    return out


#: the noise views the robustness check adds to a multi-view set
NOISE = ("gaussian", "shuffled")


def run_noise(loaded, seeds: int) -> dict:
    """The default, and the default with learned weights, on a multi-view set with one view
    of pure noise added (:func:`_multiview.with_noise_view`): NMI with and without it."""
    views, y, _ = loaded
    k = int(np.unique(y).size)
    out = {}
    for rule in (None, *CANDIDATES):
        params, patch = ({}, {}) if rule is None else variant_params(rule, len(views) + 1, "")
        label = "default" if rule is None else variant_name(rule)
        out[label] = {kind: fit_default(with_noise_view(views, kind), y, k, seeds, params,
                                        patch)[0]["nmi_mean"] for kind in NOISE}
    return out


def run_cost(repeats: int) -> dict:
    """The default against ``MKKMRK.paper(10)`` and SpectralClustering(nearest_neighbors) on
    scikit-learn's digits, interleaved ``repeats`` times (each repeat sees the same load).

    Two more methods in the same repeats say what the bars cost each other on this set: the
    default without its final graph (``final_clustering="kmeans"``) and LSC-K, the best
    label-free peer on digits in the wide run; every method's NMI is kept beside its time."""
    import sklearn.datasets

    X, y = sklearn.datasets.load_digits(return_X_y=True)
    X = np.asarray(X, dtype=np.float64)
    fits = {
        "default": lambda rep: MKKMRK(10, random_state=rep).fit(X),
        "paper": lambda rep: MKKMRK.paper(10, random_state=rep).fit(X),
        "SpectralClustering(nn)": lambda rep: SpectralClustering(
            10, affinity="nearest_neighbors", random_state=rep).fit(X),
        NO_GRAPH: lambda rep: MKKMRK(10, final_clustering="kmeans", random_state=rep).fit(X),
        "LSC-K": lambda rep: PEERS["LSC-K"]([X], 10, rep),
    }
    secs: dict[str, list[float]] = {m: [] for m in fits}
    nmis: dict[str, list[float]] = {m: [] for m in fits}
    fit_seconds, timings = [], []
    for rep in range(repeats):
        for method, fit in fits.items():
            start = time.perf_counter()
            model = fit(rep)
            secs[method].append(time.perf_counter() - start)
            labels = model if isinstance(model, np.ndarray) else model.labels_
            nmis[method].append(100 * normalized_mutual_info(y, labels))
            if method == "default":
                fit_seconds.append(float(model.timings_.get("fit", float("nan"))))
                timings.append({key: float(v) for key, v in model.timings_.items()})
        print("cost", rep, {m: round(v[-1], 2) for m, v in secs.items()}, flush=True)
    med = {m: float(np.median(v)) for m, v in secs.items()}
    # a method's repeats can split into fast and slow ones (other load, threads waking): the
    # ratio of the fastest repeats is judged beside the ratio of the medians
    fastest = {m: float(np.min(v)) for m, v in secs.items()}
    gaps = [abs(f / w - 1) for f, w in zip(fit_seconds, secs["default"], strict=True)]
    return {"repeats": repeats, "seconds": secs, "median": med, "fastest": fastest,
            "nmi": nmis, "timings_fit": fit_seconds, "timings_gap_max": float(np.max(gaps)),
            "timings": timings}


# --------------------------------------------------------------------------- report


def best_peer(res: dict) -> str | None:
    """The label-free peer with the best mean NMI (none of the methods sees a label; the
    default's variants and the oracle view are not peers)."""
    peers = [m for m, r in res.items() if m not in NOT_PEERS and "nmi_mean" in r]
    return max(peers, key=lambda m: res[m]["nmi_mean"]) if peers else None


def better_kmeans(res: dict) -> str | None:
    pair = [m for m in ("KMeans", "KMeans(standardised)") if "nmi_mean" in res.get(m, {})]
    return max(pair, key=lambda m: res[m]["nmi_mean"]) if pair else None


def _summary(results: dict) -> list[str]:
    rows = ["| data set | n | d | k | default NMI | best label-free peer | within 0.5 | "
            "better KMeans (raw / standardised) | more than 2 below it | seconds default / "
            "best peer |", "|---|---|---|---|---|---|---|---|---|---|"]
    within, judged, below = 0, 0, []
    for name, out in results.items():
        res = out["methods"]
        if "nmi_mean" not in res.get("default", {}):
            continue
        d = res["default"]
        best, km = best_peer(res), better_kmeans(res)
        ok = best is None or d["nmi_mean"] >= res[best]["nmi_mean"] - WITHIN_BEST
        low = km is not None and d["nmi_mean"] < res[km]["nmi_mean"] - BELOW_KMEANS
        judged += best is not None
        within += best is not None and ok
        if low:
            below.append(f"{name} ({d['nmi_mean']:.2f} against {res[km]['nmi_mean']:.2f}, "
                         f"{km})")
        peer = f"{res[best]['nmi_mean']:.2f} ({best})" if best else "-"
        kmeans = f"{res[km]['nmi_mean']:.2f} ({km})" if km else "-"
        secs = f"{d['seconds']:.1f} / {res[best]['seconds']:.1f}" if best else "-"
        rows.append(f"| {name} | {out['n']} | {out['d']} | {out['k']} | {d['nmi_mean']:.2f} | "
                    f"{peer} | {'-' if best is None else 'yes' if ok else 'NO'} | {kmeans} | "
                    f"{'-' if km is None else 'YES' if low else 'no'} | {secs} |")
    share = f"{within} of {judged} ({100 * within / judged:.0f}%)" if judged else "none judged"
    rows += ["", f"- The default is within {WITHIN_BEST} NMI of the best label-free peer on "
             f"{share} data sets (bar: at least 80%).",
             f"- More than {BELOW_KMEANS:g} NMI below the better of raw and standardised "
             f"KMeans on {len(below)} data set(s)" + (": " + "; ".join(below) if below else "")
             + " (bar: none)."]
    return rows


def _bars(results: dict, names: list[str]) -> dict:
    """The issue-76 bars on ``names``: within 0.5 of the best label-free peer; more than 2
    below the classic method or the better KMeans."""
    out = {"within": 0, "judged": 0, "below": []}
    for name in names:
        res = results.get(name, {}).get("methods", {})
        if "nmi_mean" not in res.get("default", {}):
            continue
        d, best, km = res["default"]["nmi_mean"], best_peer(res), better_kmeans(res)
        out["judged"] += best is not None
        out["within"] += best is not None and d >= res[best]["nmi_mean"] - WITHIN_BEST
        for bar in (km, CLASSIC if "nmi_mean" in res.get(CLASSIC, {}) else None):
            if bar is not None and d < res[bar]["nmi_mean"] - BELOW_KMEANS:
                out["below"].append(f"{name} ({d:.2f} against {res[bar]['nmi_mean']:.2f}, "
                                    f"{bar})")
    return out


def _fold_summary(results: dict, folds: dict) -> list[str]:
    rows = ["| fold | kind | sets run | within 0.5 NMI of the best label-free peer (bar: 80%) "
            "| more than 2 NMI below the classic method or the better KMeans (bar: none) |",
            "|---|---|---|---|---|"]
    kinds = sorted(set(folds["kinds"].values()))
    for fold, names in folds["folds"].items():
        for kind in kinds:
            chosen = [n for n in names if folds["kinds"][n] == kind and n in results]
            bars = _bars(results, chosen)
            share = (f"{bars['within']} of {bars['judged']} "
                     f"({100 * bars['within'] / bars['judged']:.0f}%)" if bars["judged"]
                     else "-")
            rows.append(f"| {fold} | {kind} | {len(chosen)} | {share} | "
                        f"{'; '.join(bars['below']) or 'none'} |")
    return rows


def _noise(results: dict) -> list[str]:
    rows = ["| set | method | NMI | + Gaussian view | drop | + shuffled view | drop |",
            "|---|---|---|---|---|---|---|"]
    for name, out in results.items():
        for label, noisy in out.get("noise", {}).items():
            base = out["methods"].get(label, {}).get("nmi_mean")
            if base is None:
                continue
            cells = " | ".join(f"{noisy[kind]:.2f} | {base - noisy[kind]:+.2f}"
                               for kind in NOISE)
            rows.append(f"| {name} | {label} | {base:.2f} | {cells} |")
    return rows if len(rows) > 2 else ["Not in this run (`--noise`)."]


def _fashion(results: dict) -> list[str]:
    res = results.get(FASHION, {}).get("methods", {})
    need = ("default", "Nystroem(cosine)+KMeans", "LSC-K")
    if not all("nmi_mean" in res.get(m, {}) for m in need):
        return ["Not in this run (`--no-fashion`, not in `--datasets`, or a method left out "
                "by `--methods`)."]
    d, ny, lsc = (res[m] for m in need)
    return ["| method | NMI | seconds |", "|---|---|---|",
            *(f"| {m} | {res[m]['nmi_mean']:.2f} | {res[m]['seconds']:.1f} |" for m in need),
            "", f"- NMI at least 66: {'yes' if d['nmi_mean'] >= 66 else 'NO'}; at most 1x the "
            f"time of Nystroem(cosine, 1000)+KMeans: {d['seconds'] / ny['seconds']:.2f}x "
            f"({'yes' if d['seconds'] <= ny['seconds'] else 'NO'}); at least LSC-K's NMI: "
            f"{'yes' if d['nmi_mean'] >= lsc['nmi_mean'] else 'NO'}."]


def _cost(cost: dict | None) -> list[str]:
    if not cost:
        return ["Not in this run (`--cost-repeats 0`)."]
    med, fastest = cost["median"], _fastest(cost)
    nmis = {m: f"{np.mean(v):.2f}" for m, v in cost.get("nmi", {}).items()}

    def ratio(peer: str, bar: float) -> str:
        by_median, by_fastest = _ratios(cost, "default", peer)
        met = "met" if max(by_median, by_fastest) <= bar else "NOT met"
        return (f"{by_median:.2f}x of the medians, {by_fastest:.2f}x of the fastest repeats "
                f"(bar: at most {bar:g}x; {met} where both are within)")

    stages = ", ".join(
        f"{key} {1000 * np.median([t.get(key, 0.0) for t in cost['timings']]):.0f}"
        for key in (*STAGES, "fit"))
    return [f"scikit-learn's digits (1,797 x 64), {cost['repeats']} interleaved repeats, "
            "seconds of one fit and its NMI (mean over the repeats, each seeded by its "
            "number):", "",
            "| method | median s | fastest s | NMI | every repeat |", "|---|---|---|---|---|",
            *(f"| {m} | {med[m]:.3f} | {fastest[m]:.3f} | {nmis.get(m, '-')} | "
              f"{', '.join(f'{s:.2f}' for s in cost['seconds'][m])} |" for m in med), "",
            f"- default / paper: {ratio('paper', 2)}.",
            f"- default / SpectralClustering(nn): {ratio('SpectralClustering(nn)', 3)}.",
            f"- the default's stages (`timings_`, median ms over the repeats): {stages}.",
            f"- `timings_[\"fit\"]` against the wall time of `fit`: largest gap "
            f"{100 * cost['timings_gap_max']:.1f}% (bar: 5%); "
            f"{'within' if cost['timings_gap_max'] <= TIMINGS_TOLERANCE else 'NOT within'}.",
            *_bars_on_digits(cost)]


def _fastest(cost: dict) -> dict[str, float]:
    """Each method's fastest repeat (runs saved before it was kept: from their seconds)."""
    return cost.get("fastest") or {m: min(v) for m, v in cost["seconds"].items()}


def _ratios(cost: dict, method: str, peer: str) -> tuple[float, float]:
    """``method``'s time over ``peer``'s: of their medians, and of their fastest repeats."""
    fastest = _fastest(cost)
    return (cost["median"][method] / cost["median"][peer],
            fastest[method] / fastest[peer])


def _bars_on_digits(cost: dict) -> list[str]:
    """What the cost bar and the quality bar ask of each other on digits: the default with
    and without its final graph, against SpectralClustering's time and LSC-K's NMI in the
    same repeats (runs made before these methods were added have neither)."""
    nmis = cost.get("nmi", {})
    if NO_GRAPH not in nmis or "LSC-K" not in nmis:
        return []
    mean = {m: float(np.mean(v)) for m, v in nmis.items()}
    med, sc = cost["median"], "SpectralClustering(nn)"

    def against(method: str, peer: str) -> str:
        by_median, by_fastest = _ratios(cost, method, peer)
        return f"{by_median:.2f}x / {by_fastest:.2f}x {peer} (medians / fastest)"

    return [f"- the default: {against('default', sc)}, NMI {mean['default']:.2f} against "
            f"LSC-K's {mean['LSC-K']:.2f} ({mean['default'] - mean['LSC-K']:+.2f});",
            f"- the default without its final graph: {against(NO_GRAPH, sc)}, NMI "
            f"{mean[NO_GRAPH]:.2f} ({mean[NO_GRAPH] - mean['LSC-K']:+.2f} against LSC-K), "
            f"{med['default'] - med[NO_GRAPH]:.3f} s less than the default (medians)."]


def _per_dataset(results: dict) -> list[str]:
    lines, plans = [], []
    for name, out in results.items():
        lines += [f"### {name} (n = {out['n']}, d = {out['d']}, k = {out['k']}, "
                  f"{out['views']} view(s))", "",
                  "| method | NMI mean (best) | ACC mean | seconds per fit | seeds | notes |",
                  "|---|---|---|---|---|---|"]
        for meth, rec in out["methods"].items():
            if "skipped" in rec:
                lines.append(f"| {meth} | - | - | - | - | skipped: {rec['skipped']} |")
                continue
            note = ""
            if meth == "default":
                note = (f"solver {rec['solver']}, final step {rec['final_step']}, "
                        f"{rec['kernels']} kernels (last seed); timings_['fit'] off the wall "
                        f"time by at most {100 * rec['timings_fit_gap']:.1f}%")
                if rec.get("plan"):
                    plans.append(f"{name}:\n\n```\n{rec['plan']}\n```\n")
            lines.append(f"| {meth} | {rec['nmi_mean']:.2f} ({rec['nmi_best']:.2f}) | "
                         f"{rec['acc_mean']:.2f} | {rec['seconds']:.2f} | {rec['n_seeds']} | "
                         f"{note} |")
        lines.append("")
    if plans:
        lines += ["## The default's plans (last seed)", "", *plans]
    return lines


def report(results: dict, cost: dict | None) -> str:
    folds = load_folds()
    protocol, verdicts = protocol_lines(results, folds)
    fold_sets = "; ".join(f"{f}: {', '.join(names)}" for f, names in folds["folds"].items())
    tabular = [describe(name, out["info"]) for name, out in results.items()
               if name in TABULAR or name in HOLDOUT]
    data = (["| set | n | d | k | columns | label | kinds |", "|---|---|---|---|---|---|---|",
             *tabular] if tabular else ["No tabular set in this run."])
    return "\n".join([
        "NMI and ACC in percent, mean over the seeds; seconds: one fit (wall time), mean over "
        "the seeds. No method sees the labels.", "",
        "## Summary", "", *_summary(results), "",
        "## The bars of issue 76 per fold and kind", "",
        f"Folds (`benchmarks/folds.json`, {folds['made_by']}, seed {folds['seed']}): "
        f"{fold_sets}.", "", *_fold_summary(results, folds), "",
        "## Protocol: each rule chosen on one fold, judged on the other", "",
        "A rule's gain is the default's NMI with it minus without it (a candidate: with it "
        "minus the default), per set; it passes a fold where the mean gain is positive and no "
        "set loses more than 2. It stays only where it passes both folds: chosen on one and "
        "judged on the other, both ways.", "", *protocol, "",
        "## Ablation: NMI per set with each rule off (or a candidate on)", "",
        "In brackets: the difference to the default. The graph's two thresholds have no "
        "parameter: their variants set the library's constant for the fit.", "",
        *ablation_lines(results, folds), "",
        "## A view of pure noise added to each multi-view set", "", *_noise(results), "",
        "## Cost on digits", "", *_cost(cost), "",
        "## Fashion-MNIST (70,000 x 784)", "", *_fashion(results), "",
        "## Tabular data sets (R packages kernlab, MASS and datasets)", "",
        "Factors one-hot, rows with a missing value dropped, the label column dropped.", "",
        *data, "", "## Per data set", "", *_per_dataset(results)])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--datasets", nargs="+", default=list(DATASETS),
                        help=f"any of {', '.join(DATASETS)}, {', '.join(HOLDOUT)}, or "
                             f"{HOLDOUT_GROUP!r} (all of the hold-out sets) or "
                             f"{FOLDS_GROUP!r} (the 30 sets of folds.json)")
    parser.add_argument("--methods", nargs="+", default=list(METHODS), choices=METHODS)
    parser.add_argument("--no-fashion", action="store_true",
                        help="leave out Fashion-MNIST (70,000 rows: the slow part)")
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--big", type=int, default=5000,
                        help="above this many rows the paper's configuration runs on Nystrom")
    parser.add_argument("--cost-repeats", type=int, default=5,
                        help="repeats of the cost comparison on digits (0: leave it out)")
    parser.add_argument("--max-rows", type=int, default=None,
                        help="fit a uniform sample of this many rows of a larger set")
    parser.add_argument("--noise", action="store_true",
                        help="add the noise-view check on the multi-view sets")
    parser.add_argument("--resume", action="store_true",
                        help="keep the data sets already in the JSON file")
    parser.add_argument("--rerun", nargs="*", default=[],
                        help="with --resume: data sets run again even where the JSON holds "
                             "them (the rest keep their results; variants added since they "
                             "ran are fitted and added)")
    parser.add_argument("--report", default=None,
                        help="the Markdown report's path (default results/defaults/"
                             "defaults_wide.md; the JSON beside it)")
    args = parser.parse_args()
    fold_sets = [n for names in load_folds()["folds"].values() for n in names]
    args.datasets = [d for name in args.datasets
                     for d in (HOLDOUT if name == HOLDOUT_GROUP else
                               fold_sets if name == FOLDS_GROUP else (name,))]
    unknown = sorted(set(args.datasets) - set(DATASETS) - set(HOLDOUT))
    if unknown:
        parser.error(f"unknown data set(s) {', '.join(unknown)}; one of {', '.join(DATASETS)}, "
                     f"{', '.join(HOLDOUT)}, {HOLDOUT_GROUP!r} or {FOLDS_GROUP!r}")
    started = now()
    md = Path(args.report) if args.report else results_dir("defaults") / "defaults_wide.md"
    raw = md.with_suffix(".json")
    raw.parent.mkdir(parents=True, exist_ok=True)
    saved = json.loads(raw.read_text()) if args.resume and raw.exists() else {}
    results, cost = saved.get("datasets", {}), saved.get("cost")
    for kept in results.values():
        # a method or variant gone since the set ran (a rule removed) is no peer of today's
        # default: its kept results go with it
        kept["methods"] = {m: r for m, r in kept["methods"].items() if m in METHODS}
    for name in args.datasets:
        if args.no_fashion and name == FASHION:
            continue
        if name in results and name not in args.rerun:
            if set(VARIANTS) & set(args.methods) - set(results[name]["methods"]):
                # a variant added since the set ran: fitted and added to the kept results
                loaded = load(name, args.data_dir)
                if loaded is None:  # not on this machine: its kept results stand as they are
                    continue
                views, y, _ = subsample(loaded, args.max_rows)
                fit_variants(name, views, y, int(np.unique(y).size), args.methods,
                             results[name]["methods"].get("default", {}).get("n_seeds",
                                                                              args.seeds),
                             results[name]["methods"])
                raw.write_text(json.dumps({"datasets": results, "cost": cost}, indent=1))
            continue
        loaded = load(name, args.data_dir)
        if loaded is not None:
            loaded = subsample(loaded, args.max_rows)
            results[name] = run_dataset(name, loaded, args.methods, args.seeds, args.big)
            if args.noise and len(loaded[0]) > 1:
                results[name]["noise"] = run_noise(loaded, args.seeds)
            raw.write_text(json.dumps({"datasets": results, "cost": cost}, indent=1))
    if args.cost_repeats and cost is None:
        cost = run_cost(args.cost_repeats)
        raw.write_text(json.dumps({"datasets": results, "cost": cost}, indent=1))
    path = write_report("defaults", md.stem, "The default against the label-free peers on a "
                        "wide benchmark (issue 48)", report(results, cost), started=started,
                        path=md)
    print(Path(path).read_text())


if __name__ == "__main__":
    main()
