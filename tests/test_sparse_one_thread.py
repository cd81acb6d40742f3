"""The per-value work on a CSR matrix runs on one torch thread, with the same results.

:func:`torchfw.svm._kernel_range.max_row_norm_sq` and :func:`torchfw.utils.data.take_rows`
pass over the stored values of a CSR matrix a few times (tens of thousands of values on a
fit of 10,000 sparse examples). Waking torch's intra-op pool for each pass cost more than the
work: on a 2-core machine with the other core busy, 23 and 13 ms of CPU on two threads against
1.3 and 1 ms on one (w8a's first 10,000 rows). Both run their torch operations on one thread
on the CPU, whatever the input's size, and restore the caller's setting after.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from torchfw.svm import _kernel_range as R
from torchfw.utils.data import take_rows


def _csr(m: int, d: int, density: float, seed: int) -> torch.Tensor:
    rng = np.random.default_rng(seed)
    dense = rng.standard_normal((m, d)).astype(np.float32)
    dense[rng.random((m, d)) >= density] = 0.0
    dense[3] = 0.0  # an empty row
    return torch.from_numpy(dense).to_sparse_csr()


@pytest.fixture
def two_threads():
    """torch on two intra-op threads for the test (the pool the functions must not use)."""
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    yield
    torch.set_num_threads(before)


@pytest.fixture
def spy(monkeypatch):
    """The torch thread counts at each ``repeat_interleave`` call (both functions make one)."""
    seen: list[int] = []
    original = torch.repeat_interleave

    def recording(*args, **kwargs):
        seen.append(torch.get_num_threads())
        return original(*args, **kwargs)

    monkeypatch.setattr(torch, "repeat_interleave", recording)
    return seen


def test_max_row_norm_sq_of_csr_on_one_thread(two_threads, spy):
    X = _csr(300, 40, 0.1, 0)
    s = R.max_row_norm_sq(X)
    assert spy and set(spy) == {1}
    assert torch.get_num_threads() == 2  # restored
    # Each row summed in float64 in the order of its stored values, as before.
    crow, values = X.crow_indices().numpy(), X.values().numpy().astype(np.float64)
    sums = []
    for i in range(X.shape[0]):
        total = 0.0
        for v in values[crow[i]:crow[i + 1]]:
            total += v * v
        sums.append(total)
    assert s == max(sums)
    assert s == R.max_row_norm_sq(X.to_dense())  # the dense branch agrees


def test_take_rows_of_csr_on_one_thread(two_threads, spy):
    X = _csr(200, 30, 0.2, 1)
    rows = torch.tensor([5, 3, 3, 0, 199, 17])
    part = take_rows(X, rows)
    assert spy and set(spy) == {1}
    assert torch.get_num_threads() == 2  # restored
    assert part.layout == torch.sparse_csr and part.shape == (6, 30)
    assert torch.equal(part.to_dense(), X.to_dense().index_select(0, rows))
    assert torch.equal(take_rows(X.to_dense(), rows), X.to_dense().index_select(0, rows))
