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
