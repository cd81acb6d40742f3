"""The documentation: its Python examples run, its API page is complete, and Sphinx builds it.

Every fenced ``python`` block of ``docs/*.md`` and ``README.md`` runs, the blocks of a page in
order in one namespace (a fresh subprocess per page, from the repository root, so relative paths
such as ``../shared/data`` mean what they mean to a reader). A block preceded by the line
``<!-- skip-test -->`` is not run: that is for examples that need a GPU or several processes.
Examples that read ``../shared/data`` run when that folder is there (as in CI) and skip
otherwise.

The Sphinx build (warnings as errors) is one build per session, into a temporary folder. It
skips when Sphinx or myst-parser is not installed (``pip install -e ".[docs]"``), and when
``TORCHFW_DOCS_BUILT=1`` says that the caller has just built the docs with the same command
(``.ci/run`` does, before pytest).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
SKIP_MARK = "<!-- skip-test -->"

_OPEN = re.compile(r"^```python\s*$")
_CLOSE = re.compile(r"^```\s*$")


def python_blocks(path: Path) -> list[tuple[int, str, bool]]:
    """The fenced ``python`` blocks of a Markdown file: (first code line, code, skipped)."""
    lines = path.read_text(encoding="utf-8").splitlines()
    blocks = []
    i = 0
    while i < len(lines):
        if _OPEN.match(lines[i]):
            skipped = i > 0 and lines[i - 1].strip() == SKIP_MARK
            start = i + 1
            j = start
            while j < len(lines) and not _CLOSE.match(lines[j]):
                j += 1
            if j == len(lines):
                raise AssertionError(f"{path.name}:{i + 1}: unclosed ```python block")
            blocks.append((start + 1, "\n".join(lines[start:j]) + "\n", skipped))
            i = j
        i += 1
    return blocks


# Runs in the subprocess: reads [(label, first line, code), ...] from stdin and executes the
# blocks in one namespace; a traceback names the page and the line of the Markdown file.
_RUNNER = r"""
import json, sys, time
ns = {"__name__": "__main__"}
for label, line, code in json.load(sys.stdin):
    start = time.perf_counter()
    exec(compile("\n" * (line - 1) + code, label, "exec"), ns)
    print(f"[test_docs] {label}:{line}: {time.perf_counter() - start:.1f} s", file=sys.stderr)
"""


def _page_id(path: Path) -> str:
    return str(path.relative_to(ROOT))


# The pages with python blocks (the others have nothing to run).
PAGES = [page for page in sorted(DOCS.glob("*.md")) + [ROOT / "README.md"]
         if page.is_file() and python_blocks(page)]


@pytest.mark.parametrize("page", PAGES, ids=_page_id)
def test_python_blocks_run(page):
    blocks = python_blocks(page)
    runnable = [(_page_id(page), line, code) for line, code, skipped in blocks if not skipped]
    if not runnable:
        pytest.skip(f"every python block is marked {SKIP_MARK}")
    if any("../shared/data" in code for _, _, code in runnable) and \
            not (ROOT.parent / "shared" / "data").is_dir():
        pytest.skip("the page's examples read ../shared/data, which is absent")
    env = dict(os.environ, MPLBACKEND="Agg")
    proc = subprocess.run([sys.executable, "-c", _RUNNER], input=json.dumps(runnable),
                          capture_output=True, text=True, cwd=ROOT, env=env, timeout=600)
    assert proc.returncode == 0, (
        f"a python block of {_page_id(page)} failed:\n{proc.stdout[-3000:]}\n"
        f"{proc.stderr[-6000:]}")


def test_block_parser(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("# t\n\n```python\nx = 1\n```\n\n<!-- skip-test -->\n```python\nraise\n```\n"
                    "```bash\nls\n```\n    ```python\n    indented = 1\n    ```\n")
    assert python_blocks(page) == [(4, "x = 1\n", False), (9, "raise\n", True)]


def test_api_page_lists_every_public_name():
    import torchfw

    api = (DOCS / "api.md").read_text(encoding="utf-8")
    # An autodoc directive or an autosummary line for each name.
    missing = [name for name in torchfw.__all__
               if not re.search(rf"^\s*(\.\. auto\w+:: )?~?(torchfw\.)?(walrus\.)?"
                                rf"{re.escape(name)}\s*$", api, re.MULTILINE)]
    assert not missing, f"docs/api.md does not document {missing}"


@pytest.fixture(scope="session")
def sphinx_build(tmp_path_factory):
    """Build the HTML docs once per session with warnings as errors."""
    if os.environ.get("TORCHFW_DOCS_BUILT") == "1":
        pytest.skip("the docs were built with -W by the caller (TORCHFW_DOCS_BUILT=1)")
    pytest.importorskip("sphinx")
    pytest.importorskip("myst_parser")
    out = tmp_path_factory.mktemp("docs_html")
    cmd = [sys.executable, "-m", "sphinx", "-W", "--keep-going", "-q", "-b", "html",
           "-d", str(out / ".doctrees"), str(DOCS), str(out)]
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, timeout=1200)
    return proc, out


def test_sphinx_build_without_warnings(sphinx_build):
    proc, out = sphinx_build
    assert proc.returncode == 0, f"sphinx -W failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-6000:]}"
    for page in ["index", "getting_started", "api", "changelog"]:
        assert (out / f"{page}.html").is_file()
    api = (out / "api.html").read_text(encoding="utf-8")
    assert 'id="torchfw.SVC"' in api and 'id="torchfw.optim.StochasticFrankWolfe"' in api
