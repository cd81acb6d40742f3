"""torchfw.svm._plain_rows: the compiled path's host arrays are the operator's, bit for bit.

The compiled solve reads its rows of K + 1 from PlainRows where it read them from an
SVMDualOperator with labels 1; every array the row code reads must hold the same bits (the
matrix, and so every fit, is then unchanged), for every kernel, precision, storage (float and
one-byte features, CSR) and C (a float, inf, one per example).
"""

import math

import numpy as np
import pytest
import torch

from torchfw.svm import _matrix
from torchfw.svm._plain_rows import PlainRows, plain_rows
from torchfw.svm.kernels import SVMDualOperator, make_kernel


def _operator(X, kernel, C, dtype, cache_size=200.0):
    return SVMDualOperator(X, torch.ones(X.shape[0], dtype=torch.float64), kernel, C,
                           dtype=dtype, cache_size=cache_size)


def _same(a, b):
    assert a.dtype == b.dtype and a.shape == b.shape
    assert np.array_equal(a.view(np.uint8), b.view(np.uint8))  # bits, not values


def _check(X, kernel, C, dtype):
    op = _operator(X, kernel, C, dtype)
    rows = plain_rows(X, kernel, C, dtype, 200.0)
    assert isinstance(rows, PlainRows)
    assert rows.shape == op.shape and rows.dtype == op.dtype and rows._np_dtype == op._np_dtype
    assert rows.X.layout == op.X.layout
    for name in ("_xfm_np", "_sq_np", "_inv_c_np"):
        _same(getattr(rows, name), getattr(op, name))
    _same(rows.diagonal64(), op.diagonal().to(torch.float64).numpy())
    if X.layout == torch.sparse_csr:
        for name in ("_crow", "_col", "_val"):
            _same(getattr(rows, name), getattr(op, name))
    # the row code gives the same matrix from either
    _same(_matrix.plain_kernel_matrix(rows, threads=1), _matrix.plain_kernel_matrix(op, threads=1))


@pytest.mark.parametrize("kernel", ["rbf", "linear", "poly", "sigmoid"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("C", [2.0, 0.3, math.inf, 1e-7])
def test_dense_arrays_are_the_operators(kernel, dtype, C):
    gen = torch.Generator().manual_seed(0)
    X = (torch.randn(37, 5, generator=gen) * 3.1).to(dtype)
    _check(X, make_kernel(kernel, gamma=0.37, degree=3, coef0=0.5), C, dtype)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_byte_features_are_stored_as_the_operator_stores_them(dtype):
    gen = torch.Generator().manual_seed(1)
    X = torch.randint(0, 256, (29, 7), generator=gen).to(dtype)
    rows = plain_rows(X, make_kernel("rbf", gamma=1e-4), 2.0, dtype, 200.0)
    assert rows._xfm_np.dtype == np.uint8
    _check(X, make_kernel("rbf", gamma=1e-4), 2.0, dtype)


def test_per_example_C_and_csr_go_through_the_operator():
    gen = torch.Generator().manual_seed(2)
    X = torch.randn(23, 6, generator=gen)
    C = torch.rand(23, generator=gen) + 0.1
    _check(X, make_kernel("rbf", gamma=0.2), C, torch.float32)
    dense = X * (torch.rand(23, 6, generator=gen) < 0.4)
    _check(dense.to_sparse_csr(), make_kernel("rbf", gamma=0.2), 2.0, torch.float32)


def test_bad_arguments_are_refused_as_by_the_operator():
    X = torch.randn(10, 3)
    kernel = make_kernel("rbf")
    with pytest.raises(ValueError, match="cache_size=.*holds 0 column"):
        plain_rows(X, kernel, 1.0, torch.float32, 1e-7)
    with pytest.raises(ValueError, match="C"):
        plain_rows(X, kernel, -1.0, torch.float32, 200.0)
    with pytest.raises(ValueError, match="empty"):
        plain_rows(torch.zeros(0, 3), kernel, 1.0, torch.float32, 200.0)
