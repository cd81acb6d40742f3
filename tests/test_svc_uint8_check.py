"""The one-byte storage test of the SVC's data: same answer with and without the compiled scan,
and real-valued data decided without loading it (a first fit's kernel loads are its cost)."""

from __future__ import annotations

import pytest
import torch

from torchfw.svm import _kernel_cpu, kernels


@pytest.mark.parametrize("values, expected", [
    ([0.0, 1.0, 255.0, 17.0], True),
    ([0.5, 1.0, 2.0], False),      # the first value decides
    ([3.0, 2.5, 1.0], False),      # a later value decides
    ([3.0, 256.0], False),
    ([-1.0, 2.0], False),
    ([float("nan"), 1.0], False),
    ([2.0, float("inf")], False),
])
def test_exact_in_uint8(values, expected):
    tensor = torch.tensor(values, dtype=torch.float64)
    assert kernels._exact_in_uint8(tensor) is expected
    reference = bool(((tensor >= 0) & (tensor <= 255) & (tensor == torch.round(tensor))).all())
    assert reference is expected


@pytest.mark.skipif(not _kernel_cpu.HAVE_NUMBA, reason="needs numba")
def test_real_valued_data_skip_the_compiled_scan(monkeypatch):
    calls = []

    def scan(flat):
        calls.append(flat.size)
        return True

    monkeypatch.setattr(_kernel_cpu, "all_in_uint8", scan)
    assert kernels._exact_in_uint8(torch.tensor([[0.25, 1.0], [2.0, 3.0]])) is False
    assert calls == []
    assert kernels._exact_in_uint8(torch.tensor([[4.0, 1.0], [2.0, 3.0]])) is True
    assert calls == [4]
