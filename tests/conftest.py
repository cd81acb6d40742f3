"""Shared fixtures: float64 by default, the shared datasets, CUDA availability."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch

DATA_DIR = Path(os.environ.get("TORCHFW_DATA", Path(__file__).resolve().parents[2] / "shared"
                               / "data"))

# The suite tests the compiled kernels: compile them on first use even in a cache that is cold,
# rather than deferring small fits to the PyTorch paths (torchfw.utils.cold_start; its own
# tests set the policy they test). Child processes inherit it.
os.environ.setdefault("TORCHFW_COLD_START", "compile")

requires_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


def data_path(name: str) -> Path:
    """Path of a dataset in ../shared/data; skips the test when it is absent."""
    path = DATA_DIR / name
    if not path.exists():
        pytest.skip(f"dataset {name} not found in {DATA_DIR}")
    return path


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)
    yield
