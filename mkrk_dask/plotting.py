"""The paper's figures and the learned weights, drawn from saved results (nothing is re-run).

Input: the JSON written by ``mkrk search`` or the paper's protocol (``mkrk reproduce``,
:mod:`mkrk_dask.protocol`): a list ``datasets``, each with ``kernel_names`` and
``["MKKM-RK"]["per_lambda"]``; or the ``result.json`` of ``mkrk fit`` (one lambda); or a
fitted estimator itself (``plot_weights(model, "w.png")``), read through the same record
(:func:`mkrk_dask.results.model_record`). The layout is documented in
:mod:`mkrk_dask.results`. A multi-view fit's kernels are named with their view
(``kernel_views``) and grouped and coloured by it in the weights figure.

Figures, one PNG each, per dataset; each title says what to read off it:

1. ``<name>_fig1_sensitivity.png``: ACC, NMI and purity against log2 lambda (best of the
   repeats, and the mean +- std band), the best lambda marked, the key beside the plot;
2. ``<name>_fig2_representation.png``: the representation matrix Y as heat maps at several
   lambdas, the kernels named on the axes;
3. ``<name>_fig3_selected.png``: against log2 lambda, the kernels selected (weight at least
   the library's :data:`~mkrk_dask.loop.SELECTION_THRESHOLD`, as ``selected_kernels_``
   counts them), the effective number of kernels ``1 / sum w^2``, and the share of the weight
   the two heaviest kernels carry;
4. ``<name>_fig4_objective.png``: the objective minus its final value, relative to the final
   value, per iteration (log axis): how fast each lambda's loop converges (a fit that
   converged at once, in one iteration, is its objective as one point);
5. ``<name>_fig5_weights.png``: the learned weight of every kernel: a heat map kernels x
   log2 lambda for a search, bars for a single fit.

Matplotlib is imported here only, with the non-interactive Agg backend.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from .loop import SELECTION_THRESHOLD
from .results import (
    dataset_entries,
    mkkmrk_summary,
    model_record,
    read_results,
    search_record,
    search_report,
    weight_stats,
)

__all__ = ["make_figures", "search_figures", "plot_sensitivity", "plot_representation",
           "plot_selected", "plot_objective", "plot_weights", "short_kernel_name"]


_METRICS = (("acc", "ACC"), ("nmi", "NMI"), ("purity", "Purity"))
_FONT = 9  # the smallest text of a figure (tick labels, keys)


def _pyplot() -> Any:
    import matplotlib

    if "MPLBACKEND" not in os.environ:
        matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _log2(lams: Sequence[float]) -> np.ndarray:
    lams = np.asarray(lams, dtype=np.float64)
    with np.errstate(divide="ignore"):
        return np.log2(lams)


def _per_lambda(entry: dict[str, Any]) -> list[dict[str, Any]]:
    items = entry.get("MKKM-RK", {}).get("per_lambda", [])
    return sorted(items, key=lambda item: item["lam"] if item["lam"] is not None else 0.0)


def _entries(source: Any) -> list[dict[str, Any]]:
    """The dataset entries of a results file (path or dict) or of a fitted estimator: the
    one adapter, so that every figure reads a fitted estimator as it reads its saved fit."""
    if hasattr(source, "weights_"):
        return dataset_entries({**model_record(source), "data": type(source).__name__})
    if hasattr(source, "get_params"):  # an estimator, but no fitted weights to draw
        raise ValueError(f"the figures draw the kernel weights of a fitted multiple kernel "
                         f"k-means estimator; this {type(source).__name__} has none (fit it "
                         "first)")
    return dataset_entries(read_results(source))


def _entry(source: Any) -> dict[str, Any]:
    """One dataset entry: as given (an entry of :func:`~mkrk_dask.results.dataset_entries`),
    or the first of a results file or a fitted estimator (:func:`_entries`)."""
    if isinstance(source, dict) and "MKKM-RK" in source:
        return source
    return _entries(source)[0]


def _views(entry: dict[str, Any], m: int) -> list[str] | None:
    """The view of every kernel where there are several views, else None."""
    views = entry.get("kernel_views")
    return list(views) if views and len(views) == m and len(set(views)) > 1 else None


def _names(entry: dict[str, Any], m: int) -> list[str]:
    names = entry.get("kernel_names") or [f"K{p + 1}" for p in range(m)]
    views = _views(entry, m) or [None] * m
    return [short_kernel_name(n, v) for n, v in zip(names, views, strict=True)]


_FAMILY = re.compile(r"(\w+)(?:\((.*)\))?(?:@(\d+))?")
_SHORT = {"polynomial": "poly", "gaussian": "gauss"}


def short_kernel_name(name: str, view: str | None = None) -> str:
    """A kernel's name for an axis, whole: ``polynomial(a=0,b=2)`` -> ``poly a=0 b=2``,
    ``gaussian(c=0.01)`` -> ``gauss c=0.01``, ``angular(m=2)@1`` -> ``angular m=2 @1``;
    ``view``: the name of its view in place of the index (``angular m=2 @hog``)."""
    match = _FAMILY.fullmatch(str(name))
    if match is None:
        return str(name)
    family, params, index = match.groups()
    text = " ".join(part for part in (_SHORT.get(family, family),
                                      (params or "").replace(",", " ")) if part)
    where = view if view is not None else index
    return f"{text} @{where}" if where is not None else text


def _lam_text(lam: float | None) -> str:
    if lam is None:  # a method without lambda (MKKM, SimpleMKKM)
        return "no λ"
    if lam > 0 and float(np.log2(lam)).is_integer():
        return rf"$\lambda = 2^{{{int(np.log2(lam))}}}$"
    return rf"$\lambda = {lam:g}$"


def _integer_log2_axis(ax: Any, x: np.ndarray) -> None:
    """Ticks of a log2 lambda axis on integers: every integer for a short grid, else every
    5th (every integer keeps a minor tick)."""
    from matplotlib.ticker import MultipleLocator

    finite = x[np.isfinite(x)]
    span = float(finite.max() - finite.min()) if finite.size else 0.0
    ax.xaxis.set_major_locator(MultipleLocator(1 if span <= 8 else 5))
    ax.xaxis.set_minor_locator(MultipleLocator(1))
    ax.set_xlabel(r"$\log_2 \lambda$")


def _save(fig: Any, path: Path, dpi: int) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=dpi, bbox_inches="tight")
    _pyplot().close(fig)
    return path


def _no_results(entry: dict[str, Any]) -> ValueError:
    return ValueError(f"{entry.get('dataset', '?')}: no lambda results")


# --------------------------------------------------------------------------- figure 1


def plot_sensitivity(entry: Any, path: str | os.PathLike, *, dpi: int = 120) -> Path:
    """Figure 1: ACC / NMI / purity (percent) against log2 lambda.

    Solid lines: the best over the repeats (the paper's figure); dashed with a band: mean
    +- std. The lambda with the best best-of-R ACC is marked; the key sits beside the axes,
    where it hides no point.
    """
    entry = _entry(entry)
    plt = _pyplot()
    items = [it for it in _per_lambda(entry) if it.get("summary")]
    if not items:
        raise ValueError(f"{entry.get('dataset', '?')}: no scores to plot (a search without "
                         "labels has none)")
    x = _log2([it["lam"] for it in items])
    fig, ax = plt.subplots(figsize=(7.6, 4.0))
    spread = {}
    for (key, label), colour in zip(_METRICS, ("C0", "C1", "C2"), strict=True):
        best = np.array([100 * it["summary"][key]["best"] for it in items])
        mean = np.array([100 * it["summary"][key]["mean"] for it in items])
        std = np.array([100 * it["summary"][key]["std"] for it in items])
        ax.plot(x, best, "o-", color=colour, label=f"{label}, best", markersize=4)
        ax.plot(x, mean, "--", color=colour, linewidth=1, label=f"{label}, mean ± std")
        ax.fill_between(x, mean - std, mean + std, color=colour, alpha=0.15, linewidth=0)
        spread[label] = float(best.max() - best.min())
    top = int(np.argmax([it["summary"]["acc"]["best"] for it in items]))
    ax.axvline(x[top], color="0.4", linewidth=1, linestyle=":")
    ax.annotate(f"best ACC {100 * items[top]['summary']['acc']['best']:.1f}",
                (x[top], ax.get_ylim()[0]), xytext=(3, 4), textcoords="offset points",
                fontsize=_FONT, color="0.3")
    _integer_log2_axis(ax, x)
    ax.set_ylabel("percent")
    repeats = len(items[0].get("scores") or []) or None
    ax.set_title(f"{entry.get('dataset', '')}: best-of-{repeats or 'R'} scores move by at most "
                 f"{max(spread.values()):.1f} points over the λ grid; best ACC at "
                 f"{_lam_text(items[top]['lam'])}", fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=_FONT, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    return _save(fig, Path(path), dpi)


# --------------------------------------------------------------------------- figure 2


def _pick_lambdas(items: list[dict[str, Any]], wanted: Sequence[float] | None,
                  count: int = 4) -> list[dict[str, Any]]:
    if wanted:
        chosen = []
        for lam in wanted:
            nearest = min(items, key=lambda it: abs(np.log2(max(it["lam"], 1e-300))
                                                    - np.log2(max(lam, 1e-300))))
            if nearest not in chosen:
                chosen.append(nearest)
        return chosen
    if len(items) <= count:
        return items
    index = np.unique(np.round(np.linspace(0, len(items) - 1, count)).astype(int))
    return [items[i] for i in index]


def plot_representation(entry: Any, path: str | os.PathLike, *,
                        lams: Sequence[float] | None = None, dpi: int = 120) -> Path:
    """Figure 2: heat maps of Y (rows: the representing kernel, columns: represented) for
    several lambdas (``lams``; default four spread over the grid), the kernels named on the
    axes; each panel's title counts the selected kernels and the effective number."""
    entry = _entry(entry)
    plt = _pyplot()
    items = _pick_lambdas(_per_lambda(entry), lams)
    if not items:
        raise _no_results(entry)
    if items[0].get("Y") is None:
        raise ValueError(f"{entry.get('dataset', '?')}: no representation matrix Y to draw "
                         "(MKKM-RK's and MKKM-MR's alone)")
    m = len(items[0]["Y"])
    names = _names(entry, m)
    fig, axes = plt.subplots(1, len(items), figsize=(2.9 * len(items) + 2.4, 4.4),
                             squeeze=False, constrained_layout=True)
    image = None
    for index, (ax, item) in enumerate(zip(axes[0], items, strict=True)):
        Y = np.asarray(item["Y"], dtype=np.float64)
        stats = weight_stats(item["weights"])
        image = ax.imshow(Y, cmap="viridis", vmin=0.0, vmax=1.0, interpolation="nearest")
        ax.set_title(f"{_lam_text(item['lam'])}\n{stats['n_selected']} selected, "
                     f"effective {stats['effective']:.1f}", fontsize=10)
        ticks = np.arange(m)
        ax.set_xticks(ticks, labels=names, fontsize=_FONT - 1, rotation=90)
        ax.set_yticks(ticks, labels=names if index == 0 else [], fontsize=_FONT - 1)
        ax.set_xlabel("represented kernel j", fontsize=_FONT)
    axes[0][0].set_ylabel("representative kernel i", fontsize=_FONT)
    fig.colorbar(image, ax=list(axes[0]), shrink=0.7, label="Y[i, j]")
    fig.suptitle(f"{entry.get('dataset', '')}: representation matrix Y: each column's "
                 "weight goes to the rows that represent it; a kernel's weight is its row mean",
                 fontsize=10)
    return _save(fig, Path(path), dpi)


# --------------------------------------------------------------------------- figure 3


def plot_selected(entry: Any, path: str | os.PathLike, *, dpi: int = 120) -> Path:
    """Figure 3: against log2 lambda, the kernels selected (weight at least
    :data:`~mkrk_dask.loop.SELECTION_THRESHOLD`, recounted from the saved weights), the
    effective number of kernels ``1 / sum w^2``, and the share of the weight of the two
    heaviest kernels (right axis)."""
    entry = _entry(entry)
    plt = _pyplot()
    items = _per_lambda(entry)
    if not items:
        raise _no_results(entry)
    x = _log2([it["lam"] for it in items])
    stats = [weight_stats(it["weights"], top=2) for it in items]
    m = stats[0]["n_kernels"]
    fig, ax = plt.subplots(figsize=(7.6, 4.0))
    ax.plot(x, [s["n_selected"] for s in stats], "o-", markersize=4, color="C0",
            label=f"selected: weight ≥ {SELECTION_THRESHOLD:g}")
    ax.plot(x, [s["effective"] for s in stats], "s-", markersize=4, color="C3",
            label="effective number 1/Σ w²")
    ax.set_ylim(0, m + 0.5)
    ax.set_yticks(range(0, m + 1, max(1, m // 6)))
    ax.set_ylabel(f"kernels (of {m})")
    share = ax.twinx()
    share.plot(x, [100 * s["top_share"] for s in stats], "^--", markersize=4, color="C2",
               linewidth=1, label="weight of the top 2 kernels (right)")
    share.set_ylim(0, 105)
    share.set_ylabel("percent of the weight", color="C2")
    _integer_log2_axis(ax, x)
    ax.grid(alpha=0.3)
    lines = ax.get_legend_handles_labels()
    more = share.get_legend_handles_labels()
    ax.legend(lines[0] + more[0], lines[1] + more[1], fontsize=_FONT, loc="upper left",
              bbox_to_anchor=(1.1, 1.0), frameon=False)
    first = stats[0]
    ax.set_title(f"{entry.get('dataset', '')}: at {_lam_text(items[0]['lam'])} "
                 f"{first['n_selected']} of {m} kernels are selected and the effective "
                 f"number is {first['effective']:.1f}", fontsize=10)
    return _save(fig, Path(path), dpi)


# --------------------------------------------------------------------------- figure 4


def plot_objective(entry: Any, path: str | os.PathLike, *,
                   lams: Sequence[float] | None = None, dpi: int = 120) -> Path:
    """Figure 4: per iteration, the objective minus its final value relative to the final
    value, ``(f_t - f_final) / |f_final|``, on a log axis (the last iteration, zero, is left
    out): one line per lambda (default four lambdas); the key gives each final value."""
    entry = _entry(entry)
    plt = _pyplot()
    items = _pick_lambdas(_per_lambda(entry), lams)
    if not items:
        raise _no_results(entry)
    fig, ax = plt.subplots(figsize=(7.6, 4.0))
    if all(len(item["objective_history"]) == 1 for item in items):
        return _save(_converged_at_once(ax, entry, items), Path(path), dpi)
    floor = 1e-16
    longest = 1
    for item in items:
        f = np.asarray(item["objective_history"], dtype=np.float64)
        longest = max(longest, f.size)
        gap = np.abs(f[:-1] - f[-1]) / max(abs(f[-1]), 1e-300)
        label = f"{_lam_text(item['lam'])}: final {f[-1]:.6g}, {f.size} iterations"
        ax.plot(np.arange(1, gap.size + 1), np.maximum(gap, floor), "o-", markersize=4,
                label=label)
    ax.set_yscale("log")
    ax.set_xlim(0.5, max(longest - 0.5, 1.5))
    ax.set_xlabel("iteration (the last one, where the difference is 0, is not drawn)")
    ax.set_ylabel(r"$(f_t - f_{final}) / |f_{final}|$")
    ax.xaxis.get_major_locator().set_params(integer=True)
    ax.set_title(f"{entry.get('dataset', '')}: the objective settles within {longest} "
                 "iterations at every λ shown", fontsize=10)
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=_FONT, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    return _save(fig, Path(path), dpi)


def _converged_at_once(ax: Any, entry: dict[str, Any], items: list[dict[str, Any]]) -> Any:
    """Figure 4 of fits that converged in one iteration: no change to draw on a log axis,
    so each objective is one point, and the title says so."""
    for item in items:
        f = float(item["objective_history"][0])
        ax.plot([1], [f], "o", markersize=6, label=f"{_lam_text(item['lam'])}: {f:.6g}")
    ax.set_xlim(0.5, 1.5)
    ax.set_xticks([1])
    ax.set_xlabel("iteration")
    ax.set_ylabel("objective")
    ax.set_title(f"{entry.get('dataset', '')}: converged at once: the first iteration's "
                 "objective is final (the weights did not move)", fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=_FONT, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    return ax.figure


# --------------------------------------------------------------------------- figure 5


def plot_weights(entry: Any, path: str | os.PathLike, *, dpi: int = 120) -> Path:
    """The learned weight of every kernel: a heat map (kernels x log2 lambda) for a search,
    with the best lambda marked; horizontal bars for a single fit, with the threshold."""
    entry = _entry(entry)
    plt = _pyplot()
    items = _per_lambda(entry)
    if not items:
        raise _no_results(entry)
    W = np.array([it["weights"] for it in items], dtype=np.float64)  # lambdas x kernels
    names = _names(entry, W.shape[1])
    views = _views(entry, W.shape[1])
    if len(items) == 1:
        w = W[0]
        stats = weight_stats(w, top=2)
        fig, ax = plt.subplots(figsize=(6.4, 0.32 * len(w) + 1.4))
        if views is None:
            order = np.argsort(w)
            colours = ["C0" if w[p] >= SELECTION_THRESHOLD else "0.6" for p in order]
            ax.barh(np.arange(len(w)), w[order], color=colours)
            ax.set_yticks(np.arange(len(w)), labels=[names[p] for p in order], fontsize=_FONT)
            ax.set_xlabel("weight (grey: below the selection threshold "
                          f"{SELECTION_THRESHOLD:g})")
        else:
            _bars_by_view(ax, w, names, views)
        ax.set_title(f"{entry.get('dataset', '')}, {_lam_text(items[0]['lam'])}: "
                     f"{stats['n_selected']} of {stats['n_kernels']} selected, effective "
                     f"{stats['effective']:.1f}; the top 2 carry "
                     f"{100 * stats['top_share']:.0f}%", fontsize=10)
        ax.grid(alpha=0.3, axis="x")
        return _save(fig, Path(path), dpi)
    if views is not None:  # the kernels of a view together, in the views' order
        rows = sorted(range(len(names)), key=lambda p: (list(dict.fromkeys(views)).index(
            views[p]), p))
        W, names, views = W[:, rows], [names[p] for p in rows], [views[p] for p in rows]
    x = _log2([it["lam"] for it in items])
    fig, ax = plt.subplots(figsize=(8.0, 0.3 * len(names) + 2.0))
    step = float(np.median(np.diff(x))) if x.size > 1 else 1.0
    image = ax.imshow(W.T, aspect="auto", cmap="magma_r", vmin=0.0, vmax=max(W.max(), 1e-12),
                      interpolation="nearest",
                      extent=(x[0] - step / 2, x[-1] + step / 2, len(names) - 0.5, -0.5))
    ax.set_yticks(np.arange(len(names)), labels=names, fontsize=_FONT)
    if views is not None:
        _colour_views(ax, views)
    _integer_log2_axis(ax, x)
    best = entry.get("MKKM-RK", {}).get("best_index")
    if best is not None:
        lam = entry["MKKM-RK"]["per_lambda"][best]["lam"]
        ax.axvline(np.log2(lam), color="C0", linewidth=1.2, linestyle="--")
        ax.annotate("best ACC", (np.log2(lam), len(names) - 0.5), xytext=(3, 4),
                    textcoords="offset points", fontsize=_FONT, color="C0",
                    bbox={"facecolor": "white", "alpha": 0.8, "edgecolor": "none", "pad": 1})
    fig.colorbar(image, ax=ax, label="weight", shrink=0.9)
    heavy = [int(np.argmax(row)) for row in W]
    ax.set_title(f"{entry.get('dataset', '')}: learned weight of every kernel; the heaviest "
                 f"moves from {names[heavy[0]]} (small λ) to {names[heavy[-1]]} (large λ)",
                 fontsize=10)
    return _save(fig, Path(path), dpi)


def _view_colours(views: list[str]) -> dict[str, str]:
    return {view: f"C{index % 10}" for index, view in enumerate(dict.fromkeys(views))}


def _bars_by_view(ax: Any, w: np.ndarray, names: list[str], views: list[str]) -> None:
    """Horizontal bars of a multi-view fit's weights: the kernels of a view together (the
    first view at the top, each view's heaviest first), coloured by view; a kernel below the
    selection threshold pale."""
    colours = _view_colours(views)
    order = sorted(range(len(w)), key=lambda p: (list(colours).index(views[p]), -w[p]))[::-1]
    for row, p in enumerate(order):
        ax.barh(row, w[p], color=colours[views[p]],
                alpha=1.0 if w[p] >= SELECTION_THRESHOLD else 0.35)
    ax.set_yticks(np.arange(len(w)), labels=[names[p] for p in order], fontsize=_FONT)
    _colour_views(ax, [views[p] for p in order], colours)
    from matplotlib.patches import Patch

    totals = {view: float(sum(w[p] for p in range(len(w)) if views[p] == view))
              for view in colours}
    ax.legend(handles=[Patch(color=c, label=f"{view}: {totals[view]:.3f}")
                       for view, c in colours.items()], title="view: total weight",
              fontsize=_FONT, title_fontsize=_FONT, loc="upper left",
              bbox_to_anchor=(1.01, 1.0), frameon=False)
    ax.set_xlabel(f"weight (pale: below the selection threshold {SELECTION_THRESHOLD:g})")


def _colour_views(ax: Any, views: list[str], colours: dict[str, str] | None = None) -> None:
    """Tick labels coloured by view (``colours``, default in the views' order), a line
    between the views' groups."""
    colours = colours or _view_colours(views)
    for label, view in zip(ax.get_yticklabels(), views, strict=True):
        label.set_color(colours[view])
    for row in range(1, len(views)):
        if views[row] != views[row - 1]:
            ax.axhline(row - 0.5, color="0.3", linewidth=0.8)


# --------------------------------------------------------------------------- all of them


def make_figures(results: str | os.PathLike | dict[str, Any], out_dir: str | os.PathLike, *,
                 datasets: Sequence[str] | None = None,
                 heatmap_lams: Sequence[float] | None = None, dpi: int = 120) -> list[Path]:
    """Draw figures 1-5 for every dataset of a results file.

    Parameters
    ----------
    results : path, dict or fitted estimator
        A JSON results file (or its parsed content), or a fitted estimator (drawn as its
        saved fit would be); see the module docstring.
    out_dir : path
        Folder for the PNGs (created).
    datasets : sequence of str, optional
        Only these datasets (case-insensitive).
    heatmap_lams : sequence of float, optional
        Lambdas of figures 2 and 4 (the nearest in the grid); default four across the grid.
    dpi : int

    Returns
    -------
    list of pathlib.Path
        The PNG files written. A single fit gives figures 2, 4 and 5 only (no lambda axis;
        no figure 2 for a method without Y).

    Raises
    ------
    FileNotFoundError
        If the file does not exist.
    ValueError
        If the file is not a results file, or none of ``datasets`` is in it.
    """
    entries = _entries(results)
    if datasets:
        wanted = {d.lower() for d in datasets}
        missing = wanted - {str(e.get("dataset", "")).lower() for e in entries}
        if missing:
            raise ValueError(f"dataset(s) {sorted(missing)} not in the results (it has "
                             f"{[e.get('dataset') for e in entries]})")
        entries = [e for e in entries if str(e.get("dataset", "")).lower() in wanted]
    out = Path(out_dir)
    written: list[Path] = []
    for entry in entries:
        name = str(entry.get("dataset", "results")).lower()
        if not _per_lambda(entry):
            continue
        grid = not entry.get("single_fit")
        if grid and any(it.get("summary") for it in _per_lambda(entry)):
            written.append(plot_sensitivity(entry, out / f"{name}_fig1_sensitivity.png",
                                            dpi=dpi))
        if _per_lambda(entry)[0].get("Y") is not None:  # MKKM-RK's Y (MKKM has none)
            written.append(plot_representation(entry, out / f"{name}_fig2_representation.png",
                                               lams=heatmap_lams, dpi=dpi))
        if grid:
            written.append(plot_selected(entry, out / f"{name}_fig3_selected.png", dpi=dpi))
        written.append(plot_objective(entry, out / f"{name}_fig4_objective.png",
                                      lams=heatmap_lams, dpi=dpi))
        written.append(plot_weights(entry, out / f"{name}_fig5_weights.png", dpi=dpi))
    return written


def search_figures(found: Sequence[Any], out_dir: str | os.PathLike, *, dataset: str = "data",
                   kernel_names: Sequence[str] | None = None, dpi: int = 120) -> list[Path]:
    """Figures 1-5 of the results of :func:`~mkrk_dask.lambda_search` (what ``mkrk search``
    followed by ``mkrk figures`` draws).

    Parameters
    ----------
    found : list of LambdaResult
        One per lambda, as :func:`~mkrk_dask.lambda_search` returns them.
    out_dir : path
        Folder for the PNGs (created).
    dataset : str, default="data"
        The name in the figures' titles and file names.
    kernel_names : list of str, optional
        The kernels' names (default K0, K1, ...).
    dpi : int, default=120

    Returns
    -------
    list of Path
        The PNGs written.
    """
    if not found:
        raise ValueError("no lambda results to draw")
    m = len(found[0].weights)
    names = list(kernel_names) if kernel_names is not None else [f"K{p}" for p in range(m)]
    entry = {"dataset": dataset, "kernel_names": names,
             "MKKM-RK": mkkmrk_summary([search_record(res) for res in found])}
    report = search_report("mkrk-search", command=None, repeats=0, seed=None,
                           lams=[res.lam for res in found], datasets=[entry])
    return make_figures(report, out_dir, dpi=dpi)
