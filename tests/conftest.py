"""Shared fixtures: float64 by default, the shared datasets, CUDA availability."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch

DATA_DIR = Path(os.environ.get("TORCHFW_DATA", Path(__file__).resolve().parents[2] / "shared"
                               / "data"))

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
