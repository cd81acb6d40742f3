"""The one table of kernel formulas (torchfw.utils.kernel_formulas) and every implementation of it.

Each implementation (Kernel.from_dots, KernelSVMHead, the sharded operator's float64 scalar, the
compiled CPU column kernels) is compared with the table's scalar float64 formulas on random
inputs, so a formula changed in one place only fails here.
"""

import math

import numpy as np
import pytest
import torch

from torchfw.heads import KernelSVMHead
from torchfw.svm import _kernel_cpu
from torchfw.svm.kernels import KERNELS, make_kernel
from torchfw.utils import kernel_formulas as F

PARAMS = {"linear": {}, "rbf": {"gamma": 0.7}, "poly": {"gamma": 0.4, "degree": 3, "coef0": 0.5},
          "sigmoid": {"gamma": 0.3, "coef0": -0.2}}


def _data(seed=0, n=7, m=5, d=4):
    rng = np.random.default_rng(seed)
    return rng.normal(size=(n, d)), rng.normal(size=(m, d))


def _table(kernel, A, B):
    """k(A_i, B_j) by the table's scalar formulas, in float64."""
    return np.array([[F.value(kernel.code, float(a @ b), float(a @ a), float(b @ b),
                              kernel.gamma, kernel.coef0, kernel.degree) for b in B] for a in A])


def test_table_formulas_are_the_textbook_kernels():
    a, b = np.array([0.5, -1.0, 2.0]), np.array([1.5, 0.25, -0.5])
    g, c0, deg = 0.3, 0.7, 3
    args = (a @ b, a @ a, b @ b, g, c0)
    assert F.value(F.LINEAR, *args, deg) == pytest.approx(a @ b)
    assert F.value(F.RBF, *args, deg) == pytest.approx(math.exp(-g * ((a - b) ** 2).sum()))
    assert F.value(F.POLY, *args, deg) == pytest.approx((g * (a @ b) + c0) ** deg)
    assert F.value(F.SIGMOID, *args, deg) == pytest.approx(math.tanh(g * (a @ b) + c0))
    # Rounding may make ||a||^2 + ||a||^2 - 2<a, a> negative: the RBF argument is clamped at 0.
    assert F.argument(F.RBF, 1.0 + 1e-15, 1.0, 1.0, g, c0) == 0.0
    assert set(F.CODES) == set(KERNELS)
    # from_dots and KernelSVMHead spell the codes as literals (TorchScript reads no globals).
    assert (F.LINEAR, F.RBF, F.POLY, F.SIGMOID) == (0, 1, 2, 3)
    assert {name: cls.code for name, cls in KERNELS.items()} == F.CODES


@pytest.mark.parametrize("name", list(PARAMS))
def test_torch_forms_equal_the_table(name):
    kernel = make_kernel(name, **PARAMS[name])
    A, B = _data()
    expected = _table(kernel, A, B)
    At, Bt = torch.from_numpy(A), torch.from_numpy(B)
    # Kernel.from_dots (through pairwise) and the table's tensor form
    np.testing.assert_allclose(kernel.pairwise(At, Bt).numpy(), expected, rtol=1e-12,
                               atol=1e-12)
    dots = At @ Bt.T
    got = F.from_dots(kernel.code, dots, (At * At).sum(1, keepdim=True),
                      (Bt * Bt).sum(1).unsqueeze(0), kernel.gamma, kernel.coef0, kernel.degree)
    np.testing.assert_allclose(got.numpy(), expected, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("name", list(PARAMS))
def test_head_equals_the_table(name):
    kernel = make_kernel(name, **PARAMS[name])
    X, sv = _data(1)
    coef = np.random.default_rng(2).normal(size=(1, sv.shape[0]))
    head = KernelSVMHead(torch.from_numpy(sv), torch.from_numpy(coef), torch.tensor([0.25]),
                         kernel=name, gamma=kernel.gamma, degree=kernel.degree,
                         coef0=kernel.coef0).double()
    expected = _table(kernel, X, sv) @ coef[0] + 0.25
    np.testing.assert_allclose(head(torch.from_numpy(X)).detach().numpy(), expected,
                               rtol=1e-10, atol=1e-12)
    scripted = torch.jit.script(head)
    np.testing.assert_allclose(scripted(torch.from_numpy(X)).detach().numpy(), expected,
                               rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("name", list(PARAMS))
def test_sharded_scalar_equals_the_table(name):
    from torchfw.distributed.operator import _kernel_scalar

    kernel = make_kernel(name, **PARAMS[name])
    A, B = _data(3)
    got = np.array([[_kernel_scalar(kernel, float(a @ b), float(a @ a), float(b @ b))
                     for b in B] for a in A])
    assert got.tobytes() == _table(kernel, A, B).tobytes()


@pytest.mark.skipif(not _kernel_cpu.HAVE_NUMBA, reason="the compiled kernels need numba")
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("name", list(PARAMS))
def test_compiled_column_kernel_equals_the_table(name, dtype):
    kernel = make_kernel(name, **PARAMS[name])
    X, _ = _data(4, n=40, d=6)
    X = X.astype(dtype)
    m = X.shape[0]
    y = np.where(np.arange(m) % 3 == 0, -1.0, 1.0).astype(dtype)
    sq = (X.astype(np.float64) ** 2).sum(1).astype(dtype)
    xfm = np.ascontiguousarray(X.T)
    i = 5
    nzf = np.flatnonzero(X[i]).astype(np.int64)
    out = np.empty(m, dtype=dtype)
    _kernel_cpu.column_into(kernel.code, xfm, nzf, X[i, nzf], sq, float(sq[i]), kernel.gamma,
                            kernel.coef0, kernel.degree, y, float(y[i]), 0.5, i,
                            np.empty(m, dtype=dtype), np.empty(m, dtype=np.int32), out)
    X64 = X.astype(np.float64)
    kvals = _table(kernel, X64, X64[i:i + 1])[:, 0]
    expected = y.astype(np.float64) * float(y[i]) * (kvals + 1.0)
    expected[i] += 0.5
    tol = 1e-12 if dtype == np.float64 else 2e-5
    np.testing.assert_allclose(out.astype(np.float64), expected, rtol=tol, atol=tol)


@pytest.mark.skipif(not _kernel_cpu.HAVE_NUMBA, reason="the compiled kernels need numba")
@pytest.mark.parametrize("name", list(PARAMS))
def test_compiled_small_problem_matrix_equals_the_table(name):
    from torchfw.svm._dense import plain_kernel_matrix
    from torchfw.svm.kernels import SVMDualOperator

    kernel = make_kernel(name, **PARAMS[name])
    X, _ = _data(5, n=12, d=3)
    y = torch.where(torch.arange(12) % 2 == 0, 1.0, -1.0).double()
    op = SVMDualOperator(torch.from_numpy(X), y, kernel, 1.0, dtype=torch.float64)
    np.testing.assert_allclose(plain_kernel_matrix(op), _table(kernel, X, X) + 1.0, rtol=1e-12,
                               atol=1e-12)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_rbf_diagonal_shortcut_is_the_formula(dtype):
    # RBFKernel.diagonal returns ones: the formula's exp(-gamma (s + s - 2 s)) is exp(-0) = 1
    # exactly, for any finite squared norm s; the shortcut must give the same bits.
    from torchfw.svm.kernels import Kernel

    sq = torch.tensor(np.random.default_rng(1).random(500) * 10.0 ** np.arange(-250, 250),
                      dtype=torch.float64).clamp(max=torch.finfo(dtype).max / 4).to(dtype)
    kernel = make_kernel("rbf", 0.37)
    assert torch.equal(kernel.diagonal(sq), Kernel.diagonal(kernel, sq))


@pytest.mark.skipif(not _kernel_cpu.HAVE_NUMBA, reason="the compiled kernels need numba")
@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.uint8])
@pytest.mark.parametrize("name", list(PARAMS))
def test_numpy_forms_of_the_column_loops_equal_the_compiled_loops(name, dtype):
    # While the cold start defers the compiled kernels, columns run the loops' NumPy forms
    # (njit's interpreted_form): every kernel, full columns, columns on index rows and on a
    # compact copy's first columns, dense and sparse rows, count features stored as uint8.
    from torchfw.utils import jit

    for fn in _kernel_cpu._FORMS:
        assert jit.interpreted(getattr(_kernel_cpu, fn.__name__[1:])) is _kernel_cpu._FORMS[fn]
    kernel = make_kernel(name, **PARAMS[name])
    rng = np.random.default_rng(7)
    m, d = 50, 6
    X = rng.normal(size=(m, d)) if dtype != np.uint8 else rng.integers(0, 4, size=(m, d))
    X[rng.random((m, d)) < 0.3] = 0.0  # rows with few nonzeros, one with none
    X[11] = 0.0
    X = X.astype(dtype)
    value = np.float32 if dtype == np.uint8 else dtype
    y = np.where(np.arange(m) % 3 == 0, -1.0, 1.0).astype(value)
    sq = (X.astype(np.float64) ** 2).sum(1).astype(value)
    xfm = np.ascontiguousarray(X.T)
    rows = np.array([3, 0, 11, 7, 7, 40, 5], dtype=np.int64)
    tol = 1e-12 if value == np.float64 else 3e-6
    for i in (5, 11, 40):
        nzf = np.flatnonzero(X[i]).astype(np.int64)
        nzv = X[i, nzf].astype(value)
        for target, diag in ((None, i), (rows, -1), (20, -1)):
            n = m if target is None else (target if isinstance(target, int) else len(target))
            got, want = (np.full(n, 9.0, dtype=value) for _ in range(2))  # all written
            for out, compiled in ((got, False), (want, True)):
                _kernel_cpu.column_into(kernel.code, xfm, nzf, nzv, sq, float(sq[i]),
                                        kernel.gamma, kernel.coef0, kernel.degree, y,
                                        float(y[i]), 0.5, diag, np.empty(n, dtype=value),
                                        np.empty(n, dtype=np.int32), out, target,
                                        compiled=compiled)
            np.testing.assert_allclose(got, want, rtol=tol, atol=tol)


@pytest.mark.skipif(not _kernel_cpu.HAVE_NUMBA, reason="the compiled kernels need numba")
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_an_operator_built_while_deferred_computes_the_compiled_columns(dtype):
    # An operator built while the cold start defers the compiled kernels has no compiled host
    # arrays; its columns (full, on a working set's rows) and its compact working set run the
    # NumPy forms over views of its tensors and must give the compiled operator's columns.
    from torchfw.svm.kernels import SVMDualOperator
    from torchfw.utils import jit

    rng = np.random.default_rng(3)
    X = torch.from_numpy(rng.normal(size=(60, 3)))
    y = torch.from_numpy(np.where(rng.random(60) < 0.5, -1.0, 1.0))
    C = torch.from_numpy(rng.random(60) + 0.5)
    kernel = make_kernel("rbf", gamma=0.8)
    ops = {}
    for deferred in (True, False):
        jit.set_deferred(deferred)
        try:
            ops[deferred] = SVMDualOperator(X, y, kernel, C, dtype=dtype)
        finally:
            jit.set_deferred(False)
    cold, hot = ops[True], ops[False]
    assert not cold._host_ok and hot._host_ok
    tol = dict(rtol=1e-12, atol=1e-12) if dtype == torch.float64 else dict(rtol=3e-6, atol=3e-6)
    rows = torch.tensor([4, 17, 9, 33, 59])
    torch_path = cold._columns_torch
    for i in (9, 0, 59):
        torch.testing.assert_close(cold.column(i), hot.column(i), **tol)
        torch.testing.assert_close(cold.column(i), torch_path(torch.tensor([i]), None)[:, 0],
                                   **tol)
        torch.testing.assert_close(cold.column_rows(i, rows), hot.column_rows(i, rows), **tol)
        torch.testing.assert_close(cold.column_rows(i, rows),
                                   torch_path(torch.tensor([i]), rows)[:, 0], **tol)
    subsets = [op.compact_subset(10) for op in (cold, hot)]
    for member in (3, 8, 21):
        for subset in subsets:
            subset.add(member)
    for i in (8, 40):
        np.testing.assert_allclose(subsets[0].column(i), subsets[1].column(i), **tol)


@pytest.mark.skipif(not _kernel_cpu.HAVE_NUMBA, reason="the compiled kernels need numba")
@pytest.mark.parametrize("degree", [1, 2, 3, 4, 5, 6, 7, 11])
def test_polynomial_integer_powers_equal_the_table(degree):
    # The compiled paths take t ** degree by multiplications (a loop written out for degrees 1
    # to 5, squaring beyond): every degree on the columns (compiled and NumPy forms, float64
    # and float32), the matrix's rows, the row cache and the hinge loss's float64 matrix.
    from torchfw.svm import _matrix
    from torchfw.svm.kernels import SVMDualOperator

    kernel = make_kernel("poly", gamma=0.4, degree=degree, coef0=0.5)
    X, _ = _data(8, n=30, d=4)
    m = X.shape[0]
    table = _table(kernel, X, X)
    for dtype, tol in ((np.float64, 1e-12), (np.float32, 3e-6)):
        Xd = X.astype(dtype)
        y = np.where(np.arange(m) % 3 == 0, -1.0, 1.0).astype(dtype)
        sq = (Xd.astype(np.float64) ** 2).sum(1).astype(dtype)
        xfm = np.ascontiguousarray(Xd.T)
        kvals = _table(kernel, Xd.astype(np.float64), Xd.astype(np.float64))
        for i in (0, 7, 29):
            nzf = np.arange(X.shape[1], dtype=np.int64)
            expected = y.astype(np.float64) * float(y[i]) * (kvals[:, i] + 1.0)
            for compiled in (True, False):
                out = np.empty(m, dtype=dtype)
                _kernel_cpu.column_into(kernel.code, xfm, nzf, Xd[i], sq, float(sq[i]),
                                        kernel.gamma, kernel.coef0, degree, y, float(y[i]),
                                        0.0, -1, np.empty(m, dtype=dtype),
                                        np.empty(m, dtype=np.int32), out, compiled=compiled)
                np.testing.assert_allclose(out.astype(np.float64), expected, rtol=tol,
                                           atol=tol * np.abs(expected).max())
    op = SVMDualOperator(torch.from_numpy(X), torch.ones(m, dtype=torch.float64), kernel, 1.0,
                         dtype=torch.float64)
    P = _matrix.plain_kernel_matrix(op, threads=1)
    np.testing.assert_allclose(P, table + 1.0, rtol=1e-12, atol=1e-12 * np.abs(table).max())
    src = _matrix.cached_source(op, 4)
    for r in (3, 0, 29, 3):  # computed on a miss by the row code: the matrix's bits
        assert np.array_equal(_matrix.source_row(src[0], src[1], r), P[r])
    np.testing.assert_allclose(_kernel_cpu._int_power_py(1.1, degree), 1.1 ** degree,
                               rtol=1e-15)
