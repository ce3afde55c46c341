"""Sphinx configuration of the mkrk-dask documentation (``sphinx-build -W -b html docs
docs/_build/html``)."""

from __future__ import annotations

import re
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "_ext"))
sys.path.insert(0, str(HERE.parent))

import mkrk_dask  # noqa: E402

project = "mkrk-dask"
author = "the mkrk-dask developers"
copyright = "the mkrk-dask developers"  # noqa: A001
version = release = mkrk_dask.__version__

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.mathjax",
    "sphinx.ext.viewcode",
    "numpydoc",
    "mkrk_cli",  # docs/_ext/mkrk_cli.py: the CLI reference from the argparse parser
    "sphinx_gallery.gen_gallery",  # docs/examples -> auto_examples, executed at build time
]

# The example gallery: every docs/examples/plot_*.py runs when the docs are built (a failing
# example fails the build); figures and printed output are captured.
sphinx_gallery_conf = {
    "examples_dirs": "examples",
    "gallery_dirs": "auto_examples",
    "filename_pattern": r"/plot_",
    "abort_on_example_error": True,
    "download_all_examples": False,
    "show_memory": False,
    "min_reported_time": 1,
}

autosummary_generate = True
autodoc_default_options = {"members": True, "inherited-members": False}
autodoc_typehints = "none"
numpydoc_show_class_members = False
numpydoc_class_members_toctree = False
numpydoc_xref_param_type = False

exclude_patterns = ["_build", "examples"]
templates_path = ["_templates"]
html_theme = "alabaster"
html_static_path = []
html_title = f"mkrk-dask {release}"
suppress_warnings = []


_TRAILING_UNDERSCORE = re.compile(r"\b([A-Za-z]\w*_)(?=[,)\]])")


def _escape_shapes(app, what, name, obj, options, lines):  # noqa: ANN001, ANN201
    """Shapes such as ``(n_iter_,)`` in numpydoc types read as reST references (``name_``);
    escape the trailing underscore so they render as text."""
    for i, line in enumerate(lines):
        if "shape (" in line:
            lines[i] = _TRAILING_UNDERSCORE.sub(lambda m: m.group(1)[:-1] + "\\_", line)


def setup(app):  # noqa: ANN001, ANN201
    app.connect("autodoc-process-docstring", _escape_shapes, priority=400)
