"""The float32 RBF matrix computed as its upper triangle and a copy is the matrix of its rows.

From SYMMETRIC_FROM nonzeros per example, torchfw.svm._matrix.plain_kernel_matrix computes
row i from its diagonal entry on and copies each band of rows into the lower triangle. Each entry
must be the bits the row code computes (torchfw.svm._matrix.source_row, the rows a cache hands
the compiled solve, and SVMDualOperator.column on the lazy path), whatever the threads.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from torchfw.svm import _dense as D
from torchfw.svm import _matrix as M
from torchfw.svm.kernels import SVMDualOperator, make_kernel
from torchfw.utils import threads as _threads

pytestmark = pytest.mark.skipif(not D.K.HAVE_NUMBA, reason="the compiled path needs numba")


def _op(m, d, sparse, seed=0, kernel=None, dtype=torch.float32):
    """The operator of an m x d problem with some zero features (``sparse``: as CSR); the RBF
    kernel of width 0.02 unless ``kernel`` is given."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(m, d)) * rng.uniform(0.1, 3.0, size=d)
    X[rng.random(X.shape) < 0.4] = 0
    Xt = torch.tensor(X)
    if sparse:
        Xt = Xt.to_sparse_csr()
    return SVMDualOperator(Xt, torch.ones(m, dtype=torch.float64),
                           kernel or make_kernel("rbf", 0.02), 1.0, dtype=dtype)


def _rows(op):
    src = M.cached_source(op, op.shape[0])
    return np.stack([M.source_row(src[0], src[1], r).copy() for r in range(op.shape[0])])


@pytest.mark.parametrize("sparse", [False, True])
@pytest.mark.parametrize("threads", [1, 3])
def test_symmetric_matrix_is_its_rows_bit_for_bit(monkeypatch, sparse, threads):
    monkeypatch.setattr(_threads, "allowed_threads", lambda: threads)
    monkeypatch.setattr(M, "PARALLEL_ENTRIES", 0.0)
    # 80 features, 60 % nonzero: above SYMMETRIC_FROM; 203 rows: two bands on one thread
    op = _op(203, 80, sparse)
    assert 48 >= M.SYMMETRIC_FROM and 203 > M.MIRROR_BAND
    P = M.plain_kernel_matrix(op)
    assert np.array_equal(P, _rows(op))
    assert np.array_equal(P, P.T)
    # the lazy path's column: the row times the labels, plus 1/C on the diagonal
    col = op.column(117).numpy().copy()
    col[117] -= np.float32(1.0)
    assert np.array_equal(col, P[117])


def test_few_features_compute_every_row(monkeypatch):
    calls = []
    monkeypatch.setattr(M, "upper_mirror_rbf_f32", lambda *a: calls.append(a))
    op = _op(50, 6, False)
    P = M.plain_kernel_matrix(op)
    assert not calls and np.array_equal(P, _rows(op))


def test_dense_examples_of_few_features_take_the_triangle(monkeypatch):
    # 20 dense features (SYMMETRIC_FROM is 16): the triangle and its copy, the rows' bits
    calls = []
    triangle = M.upper_mirror_rbf_f32
    monkeypatch.setattr(M, "upper_mirror_rbf_f32",
                        lambda *a: calls.append(a) or triangle(*a))
    op = _op(300, 20, False, seed=1)
    P = M.plain_kernel_matrix(op, threads=1)
    assert calls and np.array_equal(P, _rows(op))


def _other_op(kernel, m, d, sparse, dtype, seed=0):
    return _op(m, d, sparse, seed, make_kernel(kernel, 0.3, degree=5, coef0=0.5), dtype)


@pytest.mark.parametrize("kernel", ["poly", "linear", "sigmoid"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("sparse", [False, True])
@pytest.mark.parametrize("threads", [1, 3])
def test_other_kernels_take_the_triangle_bit_for_bit(monkeypatch, kernel, dtype, sparse, threads):
    # every kernel but the RBF one, whatever its features: the triangle and its copy hold the
    # bits of the rows (the cache's row code) and of the lazy path's columns
    monkeypatch.setattr(_threads, "allowed_threads", lambda: threads)
    monkeypatch.setattr(M, "PARALLEL_ENTRIES", 0.0)
    calls = []
    triangle = M.upper_mirror_argument
    monkeypatch.setattr(M, "upper_mirror_argument",
                        lambda *a: calls.append(a) or triangle(*a))
    op = _other_op(kernel, 203, 7, sparse, dtype)
    P = M.plain_kernel_matrix(op)
    assert calls and 203 > M.MIRROR_BAND
    assert np.array_equal(P, _rows(op))
    assert np.array_equal(P, P.T)
    col = op.column(150).numpy().copy()
    col[150] -= col.dtype.type(1.0)
    if kernel == "sigmoid" and dtype == torch.float64:
        # the lazy column's float64 tanh differs from the row code's by one unit at one entry
        # here, whether the matrix is built as rows or as the triangle
        np.testing.assert_array_max_ulp(col, P[150], 1)
    else:
        assert np.array_equal(col, P[150])
