"""The feature-major copy of CSR examples, scattered from their stored values, is the dense one.

:class:`~torchfw.svm.kernels.SVMDualOperator` keeps ``X`` feature-major (``d x m``) when that
fits its memory budget. For CSR examples on the CPU it writes each stored value to its place
in a zeroed array (:func:`torchfw.svm.kernels._csr_feature_major`) instead of densifying ``X``
and transposing it; rows whose columns are not strictly increasing (duplicates, which
``to_dense`` sums) keep the dense copy. Either way the copy must be the one the dense copy
gives, entry for entry, in the same dtype (``uint8`` for values exact in it).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from torchfw.svm import kernels as K
from torchfw.svm.kernels import SVMDualOperator, make_kernel


def _reference(X: torch.Tensor, dtype: torch.dtype, compact: bool) -> np.ndarray:
    xfm = X.to(dtype).to_dense().T.contiguous()
    return (xfm.to(torch.uint8) if compact else xfm).numpy()


def _operator(X: torch.Tensor, dtype=torch.float32) -> SVMDualOperator:
    return SVMDualOperator(X, torch.ones(X.shape[0], dtype=torch.float64),
                           make_kernel("rbf", gamma=0.1), 1.0, dtype=dtype)


def _random_csr(values: str, seed: int) -> torch.Tensor:
    rng = np.random.default_rng(seed)
    m, d = 120, 37
    dense = rng.standard_normal((m, d)) if values == "real" else \
        rng.integers(0, 256, (m, d)).astype(np.float64)
    dense[rng.random((m, d)) >= 0.15] = 0.0
    dense[7] = 0.0  # an empty row
    dense[8, -1] = -0.0 if values == "real" else 0.0
    dense[9, 0] = 3.0  # the first feature
    return torch.from_numpy(dense.astype(np.float32)).to_sparse_csr()


@pytest.mark.parametrize("values", ["real", "counts"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_scattered_copy_is_the_dense_copy(values, dtype, monkeypatch):
    X = _random_csr(values, 0)
    calls = []
    scatter = K._csr_feature_major
    monkeypatch.setattr(K, "_csr_feature_major", lambda *a: calls.append(1) or scatter(*a))
    op = _operator(X, dtype)
    assert calls, "CSR examples on the CPU take the scattered copy"
    compact = values == "counts" and op._host_ok
    expected = _reference(X, dtype, compact)
    assert op.xfm.dtype == (torch.uint8 if compact else dtype)
    assert op.xfm.is_contiguous() and op.xfm.shape == (X.shape[1], X.shape[0])
    assert np.array_equal(op.xfm.numpy(), expected)
    # bit for bit: the signs of zeros too
    assert op.xfm.numpy().tobytes() == expected.tobytes()
    if op._host_ok:
        assert np.shares_memory(op._xfm_np, op.xfm.numpy())


def test_duplicate_or_unsorted_columns_keep_the_dense_copy():
    # Row 0 lists column 2 twice (to_dense sums the two), row 1 its columns out of order.
    crow = torch.tensor([0, 3, 5, 5])
    col = torch.tensor([2, 2, 0, 4, 1])
    val = torch.tensor([1.0, 2.0, 5.0, 7.0, 9.0])
    X = torch.sparse_csr_tensor(crow, col, val, size=(3, 5))
    assert K._csr_feature_major(crow.numpy(), col.numpy(), val.numpy(), 3, 5,
                                np.float32) is None
    op = _operator(X)
    expected = _reference(X, torch.float32, op._host_ok)
    assert np.array_equal(op.xfm.numpy(), expected)
    assert op.xfm.numpy()[2, 0] == 3  # the sum of the duplicates
    ordered = torch.sparse_csr_tensor(torch.tensor([0, 2, 3]), torch.tensor([1, 3, 0]),
                                      torch.tensor([0.5, 2.0, 4.0]), size=(2, 4))
    copy = K._csr_feature_major(ordered.crow_indices().numpy(), ordered.col_indices().numpy(),
                                ordered.values().numpy(), 2, 4, np.float32)
    assert copy is not None and np.array_equal(copy.numpy(), _reference(ordered, torch.float32,
                                                                         False))


@pytest.mark.parametrize("values", ["real", "counts"])
def test_columns_match_the_densified_copy(values, monkeypatch):
    # The operator's columns, and a compiled fit on its examples, are those of the operator
    # whose copy is made by densifying (the scatter refused: the path it replaced).
    X = _random_csr(values, 3)
    y = np.where(np.arange(X.shape[0]) % 3 == 0, 1, -1)
    scattered = _operator(X)
    from torchfw.svm import SVC

    fit = SVC(random_state=0).fit(X, y)
    monkeypatch.setattr(K, "_csr_feature_major", lambda *a: None)
    densified = _operator(X)
    assert densified.xfm.dtype == scattered.xfm.dtype
    for i in (0, 7, 8, 9, 50, 119):
        assert torch.equal(scattered.column(i), densified.column(i))
    again = SVC(random_state=0).fit(X, y)
    assert np.array_equal(fit.problem_dual_coef_, again.problem_dual_coef_)
    assert np.array_equal(fit.problem_intercept_, again.problem_intercept_)
    assert np.array_equal(fit.n_iter_, again.n_iter_)
