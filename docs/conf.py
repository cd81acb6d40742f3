"""Sphinx configuration of the torchfw documentation.

Build (offline, warnings as errors), from the repository root::

    python -m sphinx -W --keep-going -b html docs docs/_build/html

The pages are Markdown (MyST); the API reference is generated from the numpydoc docstrings.
"""

import os
import sys

# Document the checkout this file lives in, installed or not.
sys.path.insert(0, os.path.abspath(os.path.join(os.path.dirname(__file__), "..")))

import torchfw  # noqa: E402

project = "torchfw"
author = "torchfw developers"
copyright = "torchfw developers"
release = torchfw.__version__
version = ".".join(release.split(".")[:2])

extensions = [
    "myst_parser",
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.napoleon",
    "sphinx.ext.mathjax",
    "sphinx.ext.viewcode",
]

source_suffix = {".md": "markdown", ".rst": "restructuredtext"}
root_doc = "index"
exclude_patterns = ["_build", "Thumbs.db", ".DS_Store"]

# --- MyST --------------------------------------------------------------------------------------
# $...$ and $$...$$ math (as GitHub renders it), ```{eval-rst} blocks for autodoc, and anchors
# for the headings so that links such as ``design.md#some-section`` resolve.
myst_enable_extensions = ["dollarmath", "amsmath", "colon_fence"]
myst_heading_anchors = 3

# --- autodoc / autosummary / napoleon ----------------------------------------------------------
autodoc_default_options = {
    "members": True,
    "member-order": "bysource",
    "show-inheritance": True,
}
autodoc_typehints = "signature"
autodoc_preserve_defaults = True
autosummary_generate = False  # the tables in api.md link to the automodule entries below them
napoleon_google_docstring = False
napoleon_numpy_docstring = True
napoleon_use_rtype = False

# --- HTML --------------------------------------------------------------------------------------
html_theme = "alabaster"
html_title = f"torchfw {release}"
html_theme_options = {
    "description": "Frank-Wolfe optimizers for PyTorch",
    "fixed_sidebar": True,
}
html_static_path: list[str] = []
