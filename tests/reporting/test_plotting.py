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


def test_all_five_figures(tmp_path: Path) -> None:
    path = tmp_path / "r.json"
    path.write_text(json.dumps(_results()))
    written = make_figures(path, tmp_path / "figs", heatmap_lams=[2.0**-6, 1.0])
    names = sorted(p.name for p in written)
    assert names == ["toy_fig1_sensitivity.png", "toy_fig2_representation.png",
                     "toy_fig3_selected.png", "toy_fig4_objective.png", "toy_fig5_weights.png"]
    for p in written:
        assert p.read_bytes()[:8] == PNG


def test_unknown_dataset_and_bad_file(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="not in the results"):
        make_figures(_results(), tmp_path, datasets=["orl"])
    with pytest.raises(ValueError, match="not a results file"):
        make_figures({"something": 1}, tmp_path)


# --------------------------------------------------------------------------- what they show (#15)


@pytest.fixture
def drawn(monkeypatch: pytest.MonkeyPatch) -> dict:
    """The matplotlib figures make_figures draws, by file name (kept open for inspection)."""
    import mkrk_dask.plotting as plotting

    figures = {}

    def keep(fig, path, dpi):
        figures[Path(path).name] = fig
        return Path(path)

    monkeypatch.setattr(plotting, "_save", keep)
    yield figures
    plotting._pyplot().close("all")


def _dominated(m: int = 12) -> dict:
    """Every kernel above the selection threshold, but two carry almost all the weight; the
    saved n_selected (an older count) says 12."""
    per_lambda = []
    for e in range(-15, 6):
        w = np.full(m, 0.002)
        w[:2] = (1 - 0.002 * (m - 2)) / 2
        Y = np.zeros((m, m))
        Y[0, : m // 2] = Y[1, m // 2:] = 1.0
        f = 10.0 * (1 + 2.0 ** -np.arange(5))
        score = {"best": 0.6 + 0.01 * e, "mean": 0.5, "std": 0.05}
        per_lambda.append({"lam": 2.0**e, "weights": w.tolist(), "Y": Y.tolist(),
                           "objective_history": f.tolist(), "n_iter": 5, "n_selected": m,
                           "summary": {k: score for k in ("acc", "nmi", "purity")},
                           "scores": [{"acc": 0.6}] * 20})
    names = ["cosine"] + [f"gaussian(c={c})" for c in range(1, m)]
    return {"datasets": [{"dataset": "toy", "kernel_names": names,
                          "MKKM-RK": {"per_lambda": per_lambda, "best_index": 3}}]}


def test_fig1_key_hides_no_point_and_ticks_are_integers(drawn: dict, tmp_path: Path) -> None:
    make_figures(_dominated(), tmp_path)
    fig = drawn["toy_fig1_sensitivity.png"]
    ax = fig.axes[0]
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    legend = ax.get_legend().get_window_extent(renderer)
    assert not legend.overlaps(ax.get_window_extent(renderer))
    ticks = [t for t in ax.get_xticks() if -15 <= t <= 5]
    assert ticks and all(float(t).is_integer() for t in ticks)
    assert all(float(t).is_integer() for t in ax.xaxis.get_minorticklocs())


def test_fig2_kernel_key_is_readable(drawn: dict, tmp_path: Path) -> None:
    make_figures(_dominated(), tmp_path)
    ax = drawn["toy_fig2_representation.png"].axes[0]
    labels = [t for t in ax.get_yticklabels() if t.get_text()]
    assert [t.get_text() for t in labels][:2] == ["cosine", "gauss c=1"]
    assert min(t.get_fontsize() for t in labels + ax.get_xticklabels()) >= 8


def test_fig3_counts_with_the_library_threshold_and_shows_the_effective_number(
        drawn: dict, tmp_path: Path) -> None:
    make_figures(_dominated(), tmp_path)
    fig = drawn["toy_fig3_selected.png"]
    lines = {line.get_label(): line.get_ydata() for ax in fig.axes for line in ax.get_lines()}
    selected = next(v for k, v in lines.items() if k.startswith("selected: weight ≥ 0.001"))
    effective = next(v for k, v in lines.items() if k.startswith("effective number"))
    top = next(v for k, v in lines.items() if k.startswith("weight of the top 2"))
    w = np.asarray(_dominated()["datasets"][0]["MKKM-RK"]["per_lambda"][0]["weights"])
    assert list(selected) == [12] * 21  # every weight is >= 1e-3 ...
    np.testing.assert_allclose(effective, 1 / np.sum(w**2))  # ... but about two count
    assert effective[0] < 2.2 and top[0] > 95
    assert "effective number is 2.1" in fig.axes[0].get_title()


def test_fig4_draws_no_flat_line_on_a_log_axis(drawn: dict, tmp_path: Path) -> None:
    make_figures(_dominated(), tmp_path)
    ax = drawn["toy_fig4_objective.png"].axes[0]
    assert ax.get_yscale() == "log"
    f = 10.0 * (1 + 2.0 ** -np.arange(5))
    for line in ax.get_lines():
        y = np.asarray(line.get_ydata())
        np.testing.assert_allclose(y, (f[:-1] - f[-1]) / f[-1])
        assert y.max() / y.min() > 10  # spans a decade, not a flat line


def test_fig5_weights_per_kernel(drawn: dict, tmp_path: Path) -> None:
    written = make_figures(_dominated(), tmp_path)
    assert "toy_fig5_weights.png" in [p.name for p in written]
    ax = drawn["toy_fig5_weights.png"].axes[0]
    image = ax.get_images()[0].get_array()
    assert image.shape == (12, 21)
    assert [t.get_text() for t in ax.get_yticklabels()][0] == "cosine"
    # a single fit: bars, heaviest on top
    single = {"kind": "mkrk-fit", "data": "one.npz", "lam": 1.0,
              "kernel_names": ["cosine", "gaussian(c=1)"], "weights": [0.3, 0.7],
              "Y": [[1.0, 0.0], [0.0, 1.0]], "objective_history": [2.0, 1.0], "n_iter": 2}
    assert [p.name for p in make_figures(single, tmp_path)] == [
        "one_fig2_representation.png", "one_fig4_objective.png", "one_fig5_weights.png"]
    bars = drawn["one_fig5_weights.png"].axes[0]
    assert [t.get_text() for t in bars.get_yticklabels()] == ["cosine", "gauss c=1"]
    assert [p.get_width() for p in bars.patches] == [0.3, 0.7]


# --------------------------------------------------------------------- a fitted estimator (#79)


@pytest.fixture(scope="module")
def two_view_fit():
    """MKKM-RK on two views of the digits, by name; the default converges in one
    iteration."""
    from sklearn.datasets import load_digits

    from mkrk_dask import MKKMRK

    X, _ = load_digits(return_X_y=True)
    X = X[:150]
    return MKKMRK(5, kernels=["cosine", "angular(m=0.5)", "angular(m=2)@1", "gaussian(m=1)@1"],
                  random_state=0).fit({"pixels": X[:, :40], "hog": X[:, 40:]})


def test_short_kernel_names_are_whole() -> None:
    from mkrk_dask.plotting import short_kernel_name

    assert short_kernel_name("angular(m=2)@1") == "angular m=2 @1"
    assert short_kernel_name("angular(m=0.5)") == "angular m=0.5"
    assert short_kernel_name("polynomial(a=0,b=2)") == "poly a=0 b=2"
    assert short_kernel_name("cosine@1", "hog") == "cosine @hog"


def test_figures_of_a_fitted_estimator(two_view_fit, tmp_path: Path) -> None:
    from mkrk_dask.plotting import plot_objective, plot_weights

    assert two_view_fit.n_iter_ == 1
    path = plot_weights(two_view_fit, tmp_path / "w.png")
    assert path == tmp_path / "w.png" and path.read_bytes()[:8] == PNG
    assert plot_objective(two_view_fit, tmp_path / "o.png").read_bytes()[:8] == PNG
    with pytest.raises(ValueError, match="this MKKMRK has none"):
        plot_weights(type(two_view_fit)(3), tmp_path / "unfitted.png")
    written = make_figures(two_view_fit, tmp_path / "all")
    assert [p.name for p in written] == ["mkkmrk_fig2_representation.png",
                                         "mkkmrk_fig4_objective.png", "mkkmrk_fig5_weights.png"]
    assert all(p.read_bytes()[:8] == PNG for p in written)


def test_weights_grouped_by_view_with_whole_names(two_view_fit, drawn: dict,
                                                  tmp_path: Path) -> None:
    make_figures(two_view_fit, tmp_path)
    ax = drawn["mkkmrk_fig5_weights.png"].axes[0]
    labels = [t.get_text() for t in ax.get_yticklabels()]
    # from the top: the first view's kernels, then the second's, each named whole
    assert labels[::-1][:2] == ["cosine @pixels", "angular m=0.5 @pixels"]
    assert sorted(labels[::-1][2:]) == ["angular m=2 @hog", "gauss m=1 @hog"]
    assert all(label.count("(") == label.count(")") for label in labels)
    from matplotlib.colors import to_rgb

    colours = {t.get_text().split("@")[1]: to_rgb(t.get_color()) for t in ax.get_yticklabels()}
    bars = {label.split("@")[1]: bar.get_facecolor()[:3]
            for label, bar in zip(labels, ax.patches, strict=True)}
    assert bars["pixels"] != bars["hog"] and colours == bars  # a view's names in its colour
    assert [t.get_text() for t in ax.get_legend().get_texts()][0].startswith("pixels: ")


def test_a_fit_that_converged_at_once_draws_a_point(two_view_fit, drawn: dict,
                                                    tmp_path: Path) -> None:
    make_figures(two_view_fit, tmp_path)
    ax = drawn["mkkmrk_fig4_objective.png"].axes[0]
    assert "converged at once" in ax.get_title() and ax.get_yscale() == "linear"
    (line,) = ax.get_lines()
    assert list(line.get_ydata()) == [two_view_fit.objective_history_[0]]
