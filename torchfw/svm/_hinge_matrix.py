r"""The kernel matrix of ``SVC(loss="hinge")``: :math:`K` computed in float64, rounded once.

LIBSVM computes every kernel value in double precision and stores its rows as ``Qfloat``
(float): each entry is the float32 rounding of the exact value. The SVC's shared matrix
(:mod:`torchfw.svm._matrix`) is :math:`K + 1` computed in the kernel precision; in float32 it
misses LIBSVM's entries in two ways that matter at large C, where the dual variables reach
:math:`C` and every step moves the gradient by :math:`C` times a difference of two entries:

* the RBF argument :math:`\|x_i\|^2 + \|x_j\|^2 - 2 x_i^\top x_j` cancels in float32 on raw
  features (raw svmguide1 at :math:`\gamma = 2^{-7}`: entries off by up to 5e-4);
* :math:`K + 1` holds :math:`K` to an absolute 6e-8 (half a unit in the last place of numbers
  near 2), where the float32 :math:`K` holds small entries to their own relative precision.

The L1-SVM's solver reads :math:`K` itself (:func:`~torchfw.optimizers._box_qp.solve_box_qp`
with unsigned rows); this module computes it as LIBSVM does -- the dots, the kernel's argument
and its outer function in float64 by the shared row code's float64 kernels, then one rounding
to the kernel precision. The features are those the fit holds (float32 for a float32 kernel,
as every SVC path holds them; LIBSVM reads them in double): on data of a few digits, as
LIBSVM's files, the same numbers. Raw svmguide1 at :math:`C = 2^{15}, \gamma = 2^{-13}`: 1.73 M steps on
the float32 :math:`K + 1` rounded from float64, 1.19 M on the rounded :math:`K` (LIBSVM 1.33 M).
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import torch

from ..utils.jit import njit as _njit  # None without numba
from ..utils.threads import parallel_map, workers
from . import _kernel_cpu as C
from . import _matrix as M

__all__ = ["exact_kernel_matrix"]


# exp(x) = 2^k exp(f), f in [-ln2/2, ln2/2] (Cody-Waite, fdlibm's split of ln 2), then
# Taylor's polynomial to degree 11 (relative error below 1e-13, so that the float32 rounding
# is the exact value's but for ties within 1e-13) and 2^k written into the exponent bits: the
# loop vectorizes, where libm's exp is a call per entry (5x the whole float32 matrix's time).
_LOG2E = 1.4426950408889634
_LN2_HI = 6.93147180369123816490e-01
_LN2_LO = 1.90821492927058770002e-10


def _exp_rows_py(x, bits, row):
    """``row[r] = exp(x[r])`` for arguments ``x <= 0``, rounded to ``row``'s dtype; the
    arguments below -200 (whose exponential rounds to 0 in float32) as -200."""
    n = x.shape[0]
    for r in range(n):
        v = x[r] if x[r] > -200.0 else -200.0
        k = math.floor(v * _LOG2E + 0.5)
        f = v - k * _LN2_HI - k * _LN2_LO
        p = 1.0 / 39916800.0
        p = p * f + 1.0 / 3628800.0
        p = p * f + 1.0 / 362880.0
        p = p * f + 1.0 / 40320.0
        p = p * f + 1.0 / 5040.0
        p = p * f + 1.0 / 720.0
        p = p * f + 1.0 / 120.0
        p = p * f + 1.0 / 24.0
        p = p * f + 1.0 / 6.0
        p = p * f + 0.5
        p = p * f + 1.0
        p = p * f + 1.0
        x[r] = p
        bits[r] = (np.int64(k) + np.int64(1023)) << np.int64(52)
    scale = bits.view(np.float64)
    for r in range(n):
        row[r] = x[r] * scale[r]


def _exact_rows_py(code, xfm, crow, col, val, sparse, sq, gamma, coef0, degree, fast, out,
                   scratch, bits, nzf, nzv, lo, hi):
    """Rows ``lo:hi`` of :math:`K` into ``out`` (any float dtype): float64 dots and argument
    (the shared row code's kernels), the outer function in float64 (the RBF's exponential by
    :func:`_exp_rows_py` when ``fast``: a float32 ``out``), one rounding on the store."""
    for i in range(lo, hi):
        _dots64(xfm, crow, col, val, sparse, i, scratch, nzf, nzv)
        _argument(code, scratch, sq, sq[i], gamma, coef0, scratch)
        row = out[i]
        if code == 1 and fast:  # rbf: the argument is -gamma d2, clamped at 0
            _exp_rows(scratch, bits, row)
        elif code == 1:
            for r in range(scratch.shape[0]):
                row[r] = math.exp(scratch[r])
        elif code == 2:  # poly: an integer power by squaring, no libm pow per entry
            for r in range(scratch.shape[0]):
                row[r] = _power(scratch[r], degree)
        elif code == 3:  # sigmoid
            for r in range(scratch.shape[0]):
                row[r] = math.tanh(scratch[r])
        else:  # linear
            for r in range(scratch.shape[0]):
                row[r] = scratch[r]


_dots64, _argument, _power = M._example_row_dots, C.kernel_argument, C._int_power
_exp_rows = _njit(_exp_rows_py, inline=True)
_exact_rows = _njit(_exact_rows_py)


def exact_kernel_matrix(plan, X):
    """``(K, diag)``: the ``m x m`` kernel matrix of the examples ``X`` in the plan's precision
    (each entry the rounding of its float64 value) and :math:`K_{ii}` in float64; None when
    the matrix does not fit ``cache_size`` (unless ``dense=True`` asks for it) or the
    examples have no host copy (the caller then reads :math:`K + 1` from the shared
    sources). Blocks of rows run on threads as :func:`torchfw.svm._matrix.plain_kernel_matrix`
    runs them (each row by the same code, so the same bits either way)."""
    np_dtype = np.float64 if plan.dtype == torch.float64 else np.float32
    m = X.shape[0]
    if plan.dense is not True and M.cache_slots(plan, m, np_dtype) < m:
        return None
    op = M.plain_operator(dataclasses.replace(plan, dtype=torch.float64), X, math.inf)
    if op is None:
        return None
    out = np.empty((m, m), dtype=np_dtype)
    xfm = op._xfm_np
    d = xfm.shape[0]
    sparse, crow, col, val = M._csr_arrays(op)
    code = int(op.kernel.code)
    gamma, coef0 = float(op.kernel.gamma), float(op.kernel.coef0)
    degree = int(op.kernel.degree)
    sq = op._sq_np

    def block(bounds):  # rows lo:hi, with this thread's own scratch vectors
        lo, hi = bounds
        _exact_rows(code, xfm, crow, col, val, sparse, sq, gamma, coef0, degree,
                    np_dtype == np.float32, out, np.empty(m), np.empty(m, dtype=np.int64),
                    np.empty(d, dtype=np.int64), np.empty(d), lo, hi)

    threads = workers(m, float(m) * m * (d + 8), M.PARALLEL_ENTRIES)
    blocks = 1 if threads <= 1 else min(m, threads * M.BLOCKS_PER_THREAD)
    edges = [m * b // blocks for b in range(blocks + 1)]
    parallel_map(block, zip(edges[:-1], edges[1:], strict=True), threads)
    diag = op.kernel.diagonal(torch.from_numpy(np.ascontiguousarray(sq))).to(torch.float64)
    return out, diag.numpy()
