"""The protocol that keeps the data that chooses a default's rule apart from the data that
judges it (issue 76), for ``bench_defaults_wide.py``.

- ``folds.json`` (``make_folds.py``) splits the wide benchmark's sets into folds A and B, at
  random, stratified by kind, before any rule is chosen.
- Every rule of the default has a variant of the default with that rule switched off
  (:data:`ABLATIONS`); a candidate rule the default does not have yet has a variant with it
  switched on (:data:`CANDIDATES`). The wide run fits each variant on every set.
- A rule is *chosen* on a fold where, against the default without it (or, for a candidate,
  against the default), it raises the mean NMI over the fold's sets and costs no set more than
  :data:`MAX_LOSS` NMI. Chosen on one fold, it is *judged* on the other by the same test. It
  stays in (or enters) the default only where it passes the fold that did not choose it, in
  both directions (chosen on A and judged on B, chosen on B and judged on A).

The variants set the estimator's public parameters, except where a rule has none (the final
graph's two keep thresholds): there the variant sets the library's constant for the length of
the fit (:func:`patched`), and the report says so.
"""

from __future__ import annotations

import contextlib
import json
from pathlib import Path

import numpy as np

from mkrk_dask import KernelSpec

__all__ = ["ABLATIONS", "CANDIDATES", "FOLDS_PATH", "MAX_LOSS", "judge", "load_folds",
           "variant_params", "patched", "protocol_lines", "ablation_lines"]

FOLDS_PATH = Path(__file__).with_name("folds.json")
#: a rule may cost no set of the judging fold more than this many NMI points
MAX_LOSS = 2.0
#: the plain dictionary (the "kernel geometry" rule off): per view, the cosine and Euclidean
#: Gaussians at 0.5, 1 and 2 times the median distance, whatever the data
PLAIN_WIDTHS = (0.5, 1.0, 2.0)

#: rule of the default -> (what it does, the parameters that switch it off)
ABLATIONS: dict[str, tuple[str, dict]] = {
    "view weights by agreement": ("three or more views weighed by the agreement of their own "
                                  "partitions (off: view_weights='equal'); single-view sets "
                                  "are unaffected and not refitted",
                                  {"view_weights": "equal"}),
    "mostly-zero views kept as given": ("dense non-negative views of at least 90% zero "
                                        "entries kept as given, as sparse ones are (off: "
                                        "such views follow the dense rules)",
                                        {"_patch": {"SPARSE_MIN_ZEROS": 2.0}}),
    "column preprocessing": ("columns standardised, scaled or centred by the plan's rules "
                             "(off: preprocessing='none')", {"preprocessing": "none"}),
    "column standardisation (spread > 10x)": ("dense columns whose scales spread over 10x "
                                              "standardised, binary ones of such rates scaled "
                                              "(off: never)",
                                              {"_patch": {"SCALE_SPREAD_LIMIT": 1e300}}),
    "centring far-off columns": ("columns of one unit far from zero beside their spread "
                                 "centred (off: never)", {"_patch": {"OFFSET_LIMIT": 1e300}}),
    "kernel geometry": ("the dictionary chosen by the kind of data: Gaussians of the angle for "
                        "counts and intensities, the cosine alone on disjoint views, one column "
                        "without the cosine (off: cosine and Euclidean Gaussians on every view)",
                        {"kernels": "plain"}),
    "angular geometry (counts, intensities)": ("non-negative views of 10% zeros or more get "
                                               "Gaussians of the angle (off: they get the "
                                               "measurements' dictionary)",
                                               {"_patch": {"ANGULAR_MIN_ZEROS": 2.0}}),
    "cosine alone on disjoint views": ("non-negative views where half the pairs of rows share "
                                       "no non-zero column get the cosine kernel alone (off: "
                                       "the Gaussians of the angle beside it)",
                                       {"_patch": {"DISJOINT_MIN_SHARE": 2.0}}),
    "features step (2k)": ("k-means on the features of the top 2k eigenpairs (off: the paper's "
                           "spectral step, the top k eigenvectors, with the same final "
                           "partition)", {"final_step": "spectral", "final_clustering": "same"}),
    "final graph": ("the k-means partition refined on an anchor graph of the final rows (off: "
                    "k-means alone)", {"final_clustering": "kmeans"}),
    "graph agreement threshold": ("the graph kept only where its NMI with k-means reaches 0.5 "
                                  "(off: threshold 0)", {"_patch": {"GRAPH_MIN_AGREEMENT": 0.0}}),
    "graph clear-gap rule": ("the graph kept where its eigengap shows k clear parts, whatever "
                             "its agreement (off: never clear)",
                             {"_patch": {"GRAPH_CLEAR_GAP": -1.0}}),
}
#: candidate rule -> (what it does, the parameters that switch it on)
CANDIDATES: dict[str, tuple[str, dict]] = {
    "learned weights (lambda 2^-6)": ("MKKM-RK's weights learned at lambda 2^-6 (sfn, "
                                      "normalised) in place of equal weights at lambda 1",
                                      {"lam": 2.0**-6}),
    # issue 76, a session's candidates for the final step (benchmarks/results/defaults/
    # candidates_76_session.md): the features step's rank, 3k or 4k in place of 2k
    "features rank 3k": ("k-means (and the graph) on the features of the top 3k eigenpairs "
                         "in place of 2k", {"_patch": {"FEATURES_RANK": 3}}),
    "features rank 4k": ("k-means (and the graph) on the features of the top 4k eigenpairs "
                         "in place of 2k", {"_patch": {"FEATURES_RANK": 4}}),
    # ... and the final graph kept only where its NMI with k-means reaches 0.6, not 0.5
    "graph agreement threshold 0.6": ("the final graph kept only where its NMI with the "
                                      "k-means partition reaches 0.6 in place of 0.5",
                                      {"_patch": {"GRAPH_MIN_AGREEMENT": 0.6}}),
}


def variant_name(rule: str) -> str:
    return f"without {rule}" if rule in ABLATIONS else f"with {rule}"


def load_folds() -> dict:
    return json.loads(FOLDS_PATH.read_text())


def _plain_kernels(n_views: int) -> list[KernelSpec]:
    return [spec for view in range(n_views) for spec in (
        KernelSpec("linear", view=view),
        *(KernelSpec("gaussian", m=m, view=view) for m in PLAIN_WIDTHS))]


def variant_params(rule: str, n_views: int, default_clustering: str) -> tuple[dict, dict]:
    """``(estimator parameters, library constants to patch)`` of the variant of ``rule``."""
    params = dict((ABLATIONS.get(rule) or CANDIDATES[rule])[1])
    patch = params.pop("_patch", {})
    if params.get("kernels") == "plain":
        params["kernels"] = _plain_kernels(n_views)
    if params.get("final_clustering") == "same":
        params["final_clustering"] = default_clustering
    return params, patch


@contextlib.contextmanager
def patched(constants: dict):
    """The library's constants set for the length of a fit (rules with no parameter): the
    final stage's, the kernel choice's, the column preprocessing's or the final step's plan
    (``plan/final_choice.py``), by name."""
    from mkrk_dask import preprocessing
    from mkrk_dask.estimators import _final
    from mkrk_dask.plan import final_choice, kernel_choice

    homes = {name: next(module for module in (_final, kernel_choice, preprocessing,
                                              final_choice)
                        if hasattr(module, name)) for name in constants}
    old = {name: getattr(homes[name], name) for name in constants}
    for name, value in constants.items():
        setattr(homes[name], name, value)
    try:
        yield
    finally:
        for name, value in old.items():
            setattr(homes[name], name, value)


# --------------------------------------------------------------------------- analysis


def _nmi(results: dict, name: str, method: str) -> float | None:
    rec = results.get(name, {}).get("methods", {}).get(method, {})
    return rec.get("nmi_mean")


def _test(results: dict, names: list[str], rule: str) -> dict | None:
    """The rule's effect on ``names``: NMI with the rule minus without it, per set."""
    with_rule, without = (("default", variant_name(rule)) if rule in ABLATIONS
                          else (variant_name(rule), "default"))
    diffs = {}
    for name in names:
        a, b = _nmi(results, name, with_rule), _nmi(results, name, without)
        if a is not None and b is not None:
            diffs[name] = a - b
    return judge(diffs) if diffs else None


def judge(diffs: dict[str, float]) -> dict:
    """The protocol's test of a rule's gains per set (with it minus without it): its mean,
    its worst set, and whether it passes (mean above 0, no set below ``-MAX_LOSS``)."""
    values = np.array(list(diffs.values()))
    worst = min(diffs, key=diffs.get)
    return {"mean": float(values.mean()), "worst": worst, "worst_diff": diffs[worst],
            "passes": bool(values.mean() > 0 and diffs[worst] >= -MAX_LOSS), "diffs": diffs,
            "n": len(diffs)}


def protocol_lines(results: dict, folds: dict) -> tuple[list[str], dict[str, bool]]:
    """The protocol's table (each rule chosen on one fold, judged on the other) and, per
    rule, whether it stays in (enters) the default."""
    rows = ["| rule | kind | fold A: mean gain, worst set | passes A | fold B: mean gain, "
            "worst set | passes B | chosen on A, judged on B | chosen on B, judged on A | "
            "stays |", "|---|---|---|---|---|---|---|---|---|"]
    verdicts = {}
    for rule in (*ABLATIONS, *CANDIDATES):
        tests = {f: _test(results, folds["folds"][f], rule) for f in ("A", "B")}
        if any(t is None for t in tests.values()):
            rows.append(f"| {rule} | - | not run | | | | | | |")
            continue
        a, b = tests["A"], tests["B"]

        def cell(t: dict) -> str:
            return f"{t['mean']:+.2f} over {t['n']}; {t['worst']} {t['worst_diff']:+.2f}"

        ab = "kept" if a["passes"] and b["passes"] else (
            "not chosen" if not a["passes"] else "chosen, fails B")
        ba = "kept" if a["passes"] and b["passes"] else (
            "not chosen" if not b["passes"] else "chosen, fails A")
        stays = a["passes"] and b["passes"]
        verdicts[rule] = stays
        kind = "rule of the default" if rule in ABLATIONS else "candidate"
        rows.append(f"| {rule} | {kind} | {cell(a)} | {'yes' if a['passes'] else 'no'} | "
                    f"{cell(b)} | {'yes' if b['passes'] else 'no'} | {ab} | {ba} | "
                    f"{'**yes**' if stays else 'no'} |")
    return rows, verdicts


def ablation_lines(results: dict, folds: dict) -> list[str]:
    """NMI per set of the default and of each variant (one rule off, or a candidate on)."""
    variants = [variant_name(r) for r in (*ABLATIONS, *CANDIDATES)]
    shown = [v for v in variants if any(v in out["methods"] for out in results.values())]
    rows = ["| set | kind | fold | default | " + " | ".join(shown) + " |",
            "|---|---|---|---|" + "---|" * len(shown)]
    fold_of = {name: f for f, names in folds["folds"].items() for name in names}
    for name in results:
        d = _nmi(results, name, "default")
        if d is None:
            continue
        cells = []
        for v in shown:
            x = _nmi(results, name, v)
            cells.append("-" if x is None else f"{x:.2f} ({x - d:+.2f})")
        rows.append(f"| {name} | {folds['kinds'].get(name, '-')} | {fold_of.get(name, '-')} | "
                    f"{d:.2f} | " + " | ".join(cells) + " |")
    return rows
