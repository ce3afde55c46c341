"""The docs' example gallery (issue 15): sphinx-gallery runs docs/examples when the docs are
built (CI: sphinx-build -W); here, that the gallery is wired in, covers the promised topics,
and that the multi-view example builds without the datasets folder (synthetic fallback)."""

from __future__ import annotations

import runpy
from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parent.parent / "docs"


def test_gallery_is_built_with_the_docs() -> None:
    conf = (DOCS / "conf.py").read_text()
    assert '"sphinx_gallery.gen_gallery"' in conf and '"abort_on_example_error": True' in conf
    assert "auto_examples/index" in (DOCS / "index.rst").read_text()
    examples = sorted(p.name for p in (DOCS / "examples").glob("plot_*.py"))
    assert examples == ["plot_01_multiview.py", "plot_02_choosing_a_backend.py",
                        "plot_03_cluster_run.py", "plot_04_comparing_methods.py",
                        "plot_05_reading_the_figures.py"]


def test_multiview_example_runs_without_the_datasets_folder(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    monkeypatch.setenv("MKRK_DATASETS", str(tmp_path / "absent"))
    runpy.run_path(str(DOCS / "examples" / "plot_01_multiview.py"), run_name="__main__")
    printed = capsys.readouterr().out
    assert printed.startswith("synthetic multi-view blobs - 6 views")
    plt.close("all")


def test_the_docs_say_every_backend_with_features_predicts() -> None:
    """exact and blockwise predict through the spectral out-of-sample extension
    (backends/row_map.py), Nystrom through its landmarks: no page may say only Nystrom can."""
    import re

    pages = [*DOCS.glob("*.rst"), *(DOCS / "examples").glob("*.py"), DOCS.parent / "README.md"]
    only = re.compile(r"only (backend|one) that (can )?(``)?(predict|maps new points)")
    for page in pages:
        text = " ".join(page.read_text().split())
        assert not only.search(text), page.name
    backends = " ".join((DOCS / "backends.rst").read_text().split())
    assert "Every backend fitted on features can ``predict``" in backends
    assert "out-of-sample extension" in backends
    example = " ".join((DOCS / "examples" / "plot_02_choosing_a_backend.py").read_text().split())
    assert "All three label new points with ``predict``" in example


def test_examples_use_only_the_public_api() -> None:
    """A user copies the examples: they import from ``mkrk_dask`` itself, names it exports
    (issue 46), and every figure has a title naming its data set."""
    import ast

    import mkrk_dask

    for path in sorted((DOCS / "examples").glob("plot_*.py")):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module and \
                    node.module.startswith("mkrk_dask"):
                assert node.module == "mkrk_dask", (path.name, node.module)
                for alias in node.names:
                    assert alias.name in mkrk_dask.__all__, (path.name, alias.name)
            if isinstance(node, ast.Import):
                assert not any(a.name.startswith("mkrk_dask.") for a in node.names), path.name
        text = path.read_text()
        if "plt.subplots" in text:  # the figures drawn in the example itself
            assert "set_title(" in text and ("digits" in text or "source" in text), path.name
            assert "bbox_to_anchor" in text, path.name  # the legend beside the bars


def test_search_figures_and_kernel_backend(tmp_path: Path) -> None:
    """The public helpers the examples use: the kernels in memory for the baselines, and the
    figures of a lambda search."""
    from sklearn.datasets import load_digits

    from mkrk_dask import (
        MKKMRK,
        average_kernel_clustering,
        kernel_backend,
        lambda_search,
        search_figures,
    )

    X, y = load_digits(return_X_y=True)
    X, y = X[:120], y[:120]
    with kernel_backend(X, kernels=["cosine", "gaussian(m=1)"]) as backend:
        assert backend.n_kernels == 2
        assert len(average_kernel_clustering(backend, 10)[0]) == 120
    found = lambda_search(MKKMRK.paper(n_clusters=10, kernels=["cosine", "gaussian(m=1)"],
                                       random_state=0), X, [2.0**-5, 1.0], y=y, n_repeats=1)
    written = search_figures(found, tmp_path, dataset="digits120")
    assert written and all(p.read_bytes()[:4] == b"\x89PNG" for p in written)
    assert all("digits120" in p.name for p in written)
    with pytest.raises(ValueError, match="no lambda results"):
        search_figures([], tmp_path)
