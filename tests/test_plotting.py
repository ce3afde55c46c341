"""Figures from saved results (no re-run): a synthetic results file in the layout of
``mkrk search`` / ``bench_paper_table.py``."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from mkrk_dask.plotting import make_figures

PNG = b"\x89PNG\r\n\x1a\n"


def _results(m: int = 4) -> dict:
    rng = np.random.default_rng(0)
    per_lambda = []
    for e in range(-6, 1):
        Y = np.zeros((m, m))
        Y[rng.integers(0, m, size=m), np.arange(m)] = 1.0
        score = {"best": 0.8, "mean": 0.7, "std": 0.05}
        per_lambda.append({"lam": 2.0**e, "weights": (Y.sum(axis=1) / m).tolist(),
                           "Y": Y.tolist(), "objective_history": [3.0, 2.5, 2.4],
                           "n_iter": 3, "summary": {k: score for k in ("acc", "nmi", "purity")},
                           "scores": [{"acc": 0.8, "nmi": 0.8, "purity": 0.8}] * 3})
    return {"datasets": [{"dataset": "toy", "kernel_names": [f"k{p}" for p in range(m)],
                          "MKKM-RK": {"per_lambda": per_lambda}}]}


def test_all_four_figures(tmp_path: Path) -> None:
    path = tmp_path / "r.json"
    path.write_text(json.dumps(_results()))
    written = make_figures(path, tmp_path / "figs", heatmap_lams=[2.0**-6, 1.0])
    names = sorted(p.name for p in written)
    assert names == ["toy_fig1_sensitivity.png", "toy_fig2_representation.png",
                     "toy_fig3_selected.png", "toy_fig4_objective.png"]
    for p in written:
        assert p.read_bytes()[:8] == PNG


def test_unknown_dataset_and_bad_file(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="not in the results"):
        make_figures(_results(), tmp_path, datasets=["orl"])
    with pytest.raises(ValueError, match="not a results file"):
        make_figures({"something": 1}, tmp_path)
