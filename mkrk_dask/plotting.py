"""The paper's figures, drawn from saved results (nothing is re-run).

Input: the JSON written by ``mkrk search`` or the paper's protocol (``mkrk reproduce``,
:mod:`mkrk_dask.protocol`): a list ``datasets``, each with ``kernel_names`` and
``["MKKM-RK"]["per_lambda"]``; or the ``result.json`` of ``mkrk fit`` (one lambda). The
layout is documented in :mod:`mkrk_dask.results`.

Figures, one PNG each, per dataset:

1. ``<name>_fig1_sensitivity.png``: ACC, NMI and purity against log2 lambda (best of the
   repeats, and the mean +- std band);
2. ``<name>_fig2_representation.png``: the representation matrix Y as heat maps, several
   lambdas;
3. ``<name>_fig3_selected.png``: the number of selected kernels (non-zero weight) against
   log2 lambda;
4. ``<name>_fig4_objective.png``: the objective per iteration, one line per lambda.

Matplotlib is imported here only, with the non-interactive Agg backend.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from .results import dataset_entries, read_results
from .solver import selected_kernels

__all__ = ["make_figures", "plot_sensitivity", "plot_representation", "plot_selected",
           "plot_objective"]


_METRICS = (("acc", "ACC"), ("nmi", "NMI"), ("purity", "Purity"))


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
    return sorted(items, key=lambda item: item["lam"])


def _n_selected(item: dict[str, Any]) -> int:
    if "n_selected" in item:
        return int(item["n_selected"])
    return int(selected_kernels(np.asarray(item["weights"])).size)


def _save(fig: Any, path: Path, dpi: int) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=dpi, bbox_inches="tight")
    _pyplot().close(fig)
    return path


def plot_sensitivity(entry: dict[str, Any], path: str | os.PathLike, *, dpi: int = 120) -> Path:
    """Figure 1: ACC / NMI / purity (percent) against log2 lambda.

    Solid lines: the best over the repeats (the paper's figure); shaded: mean +- std.
    """
    plt = _pyplot()
    items = [it for it in _per_lambda(entry) if it.get("summary")]
    if not items:
        raise ValueError(f"{entry.get('dataset', '?')}: no scores to plot (a search without "
                         "labels has none)")
    x = _log2([it["lam"] for it in items])
    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    for (key, label), colour in zip(_METRICS, ("C0", "C1", "C2"), strict=True):
        best = np.array([100 * it["summary"][key]["best"] for it in items])
        mean = np.array([100 * it["summary"][key]["mean"] for it in items])
        std = np.array([100 * it["summary"][key]["std"] for it in items])
        ax.plot(x, best, "o-", color=colour, label=f"{label} (best)", markersize=4)
        ax.plot(x, mean, "--", color=colour, linewidth=1, label=f"{label} (mean ± std)")
        ax.fill_between(x, mean - std, mean + std, color=colour, alpha=0.15, linewidth=0)
    repeats = len(items[0].get("scores") or []) or None
    ax.set_xlabel(r"$\log_2 \lambda$")
    ax.set_ylabel("percent")
    ax.set_title(f"{entry.get('dataset', '')}: sensitivity to lambda"
                 + (f" ({repeats} repeats)" if repeats else ""))
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, ncol=3, loc="lower left")
    return _save(fig, Path(path), dpi)


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


def _lam_label(lam: float) -> str:
    if lam > 0 and float(np.log2(lam)).is_integer():
        return rf"$\lambda = 2^{{{int(np.log2(lam))}}}$"
    return rf"$\lambda = {lam:g}$"


def plot_representation(entry: dict[str, Any], path: str | os.PathLike, *,
                        lams: Sequence[float] | None = None, dpi: int = 120) -> Path:
    """Figure 2: heat maps of Y (rows: the representing kernel, columns: represented) for
    several lambdas (``lams``; default four spread over the grid)."""
    plt = _pyplot()
    items = _pick_lambdas(_per_lambda(entry), lams)
    if not items:
        raise ValueError(f"{entry.get('dataset', '?')}: no lambda results")
    names = entry.get("kernel_names") or [f"K{p}" for p in range(len(items[0]["Y"]))]
    fig, axes = plt.subplots(1, len(items), figsize=(3.4 * len(items) + 0.8, 3.8),
                             squeeze=False)
    image = None
    for ax, item in zip(axes[0], items, strict=True):
        Y = np.asarray(item["Y"], dtype=np.float64)
        image = ax.imshow(Y, cmap="viridis", vmin=0.0, vmax=1.0, interpolation="nearest")
        ax.set_title(f"{_lam_label(item['lam'])}\n{_n_selected(item)} kernels selected",
                     fontsize=9)
        ticks = np.arange(len(names))
        ax.set_xticks(ticks, labels=[str(p + 1) for p in ticks], fontsize=6)
        ax.set_yticks(ticks, labels=[str(p + 1) for p in ticks], fontsize=6)
        ax.set_xlabel("kernel j (represented)", fontsize=8)
    axes[0][0].set_ylabel("kernel i (representative)", fontsize=8)
    fig.colorbar(image, ax=list(axes[0]), shrink=0.8, label="Y[i, j]")
    legend = "  ".join(f"{p + 1}: {name}" for p, name in enumerate(names))
    fig.suptitle(f"{entry.get('dataset', '')}: representation matrix Y", y=1.02)
    fig.text(0.02, -0.06, legend, fontsize=6, wrap=True)
    return _save(fig, Path(path), dpi)


def plot_selected(entry: dict[str, Any], path: str | os.PathLike, *, dpi: int = 120) -> Path:
    """Figure 3: the number of kernels with a non-zero weight against log2 lambda."""
    plt = _pyplot()
    items = _per_lambda(entry)
    if not items:
        raise ValueError(f"{entry.get('dataset', '?')}: no lambda results")
    x = _log2([it["lam"] for it in items])
    counts = [_n_selected(it) for it in items]
    fig, ax = plt.subplots(figsize=(6.4, 3.6))
    ax.plot(x, counts, "o-", markersize=4)
    ax.set_xlabel(r"$\log_2 \lambda$")
    ax.set_ylabel("kernels selected")
    m = len(items[0]["weights"])
    ax.set_ylim(0, m + 0.5)
    ax.set_yticks(range(0, m + 1, max(1, m // 6)))
    ax.set_title(f"{entry.get('dataset', '')}: number of selected kernels (of {m})")
    ax.grid(alpha=0.3)
    return _save(fig, Path(path), dpi)


def plot_objective(entry: dict[str, Any], path: str | os.PathLike, *,
                   lams: Sequence[float] | None = None, dpi: int = 120) -> Path:
    """Figure 4: the objective per iteration, one line per lambda (default four lambdas)."""
    plt = _pyplot()
    items = _pick_lambdas(_per_lambda(entry), lams)
    if not items:
        raise ValueError(f"{entry.get('dataset', '?')}: no lambda results")
    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    for item in items:
        f = np.asarray(item["objective_history"], dtype=np.float64)
        ax.plot(np.arange(1, f.size + 1), f, "o-", markersize=4, label=_lam_label(item["lam"]))
    positive = all(np.all(np.asarray(it["objective_history"]) > 0) for it in items)
    if positive and len(items) > 1:
        ax.set_yscale("log")
    ax.set_xlabel("iteration")
    ax.set_ylabel("objective")
    ax.xaxis.get_major_locator().set_params(integer=True)
    ax.set_title(f"{entry.get('dataset', '')}: objective per iteration")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    return _save(fig, Path(path), dpi)


def make_figures(results: str | os.PathLike | dict[str, Any], out_dir: str | os.PathLike, *,
                 datasets: Sequence[str] | None = None,
                 heatmap_lams: Sequence[float] | None = None, dpi: int = 120) -> list[Path]:
    """Draw figures 1-4 for every dataset of a results file.

    Parameters
    ----------
    results : path or dict
        A JSON results file (or its parsed content); see the module docstring.
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
        The PNG files written. A single fit gives figures 2 and 4 only (no lambda axis).

    Raises
    ------
    FileNotFoundError
        If the file does not exist.
    ValueError
        If the file is not a results file, or none of ``datasets`` is in it.
    """
    entries = dataset_entries(read_results(results))
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
        items = _per_lambda(entry)
        if not items:
            continue
        if not entry.get("single_fit"):
            if any(it.get("summary") for it in items):
                written.append(plot_sensitivity(entry, out / f"{name}_fig1_sensitivity.png",
                                                dpi=dpi))
        written.append(plot_representation(entry, out / f"{name}_fig2_representation.png",
                                           lams=heatmap_lams, dpi=dpi))
        if not entry.get("single_fit"):
            written.append(plot_selected(entry, out / f"{name}_fig3_selected.png", dpi=dpi))
        written.append(plot_objective(entry, out / f"{name}_fig4_objective.png",
                                      lams=heatmap_lams, dpi=dpi))
    return written
