"""What the repository holds: source, docs and small result files, never caches or data.

A submission is refused whole when its commits pack too large, and one committed tool cache
(mypy's holds tens of MB of JSON) is enough for that; data sets live in ``../shared/data`` and
must never be copied in. The check reads git's index, so it runs on any clone.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
#: Largest tracked file: the biggest legitimate ones (docs pages, plots) are well below it.
MAX_BYTES = 1_000_000
#: Folders that only tools write; none of them is ever part of the project.
CACHE_PARTS = {".mypy_cache", "__pycache__", ".pytest_cache", ".ruff_cache", ".hypothesis",
               ".venv", ".venv-ci", "_build", ".ipynb_checkpoints"}
#: Suffixes of generated or data files (numba's caches, bytecode, LIBSVM data dumps).
DATA_SUFFIXES = {".pyc", ".nbi", ".nbc", ".xz", ".bz2", ".npz", ".npy", ".pt", ".pkl"}


def _tracked() -> list[str]:
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    out = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True)
    return [p for p in out.stdout.decode().split("\0") if p]


def test_no_tool_cache_or_data_is_tracked():
    bad = [p for p in _tracked()
           if CACHE_PARTS & set(Path(p).parts) or Path(p).suffix in DATA_SUFFIXES]
    assert not bad, f"caches or data files are tracked (add them to .gitignore): {bad[:10]}"


def test_tracked_files_are_small():
    big = []
    for p in _tracked():
        path = ROOT / p
        if path.is_file() and path.stat().st_size > MAX_BYTES:
            big.append((p, path.stat().st_size))
    assert not big, f"files over {MAX_BYTES} bytes are tracked: {big}"


def test_gitignore_covers_tool_caches():
    ignored = (ROOT / ".gitignore").read_text().split()
    for name in (".mypy_cache/", "__pycache__/", ".venv-ci/"):
        assert name in ignored, f".gitignore lacks {name}"
