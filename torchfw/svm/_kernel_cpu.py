"""Compiled CPU kernels for kernel-matrix columns (numba), used by :mod:`torchfw.svm.kernels`.

The data matrix is stored *feature-major* (``d x m``, each feature's values over all examples
contiguous). The inner products ``X x_i`` of one column are then a sum over the nonzero features
``f`` of ``x_i`` of ``x_i[f] * X[f, :]``: contiguous, vectorizable multiply-adds, and for sparse
data only ``nnz(x_i)`` passes over ``m`` floats instead of a gather over all ``nnz(X)`` entries
(on a9a: 14 of 123 features, 4x fewer bytes than a CSR product and much better locality).
Exponentials run through NumPy's vectorized ``exp``; everything else is fused here.
"""

from __future__ import annotations

import numpy as np

from ..utils import kernel_formulas as _formulas
from ..utils import jit as _jit
from ..utils.jit import HAVE_NUMBA as _NUMBA
from ..utils.jit import njit

__all__ = ["HAVE_NUMBA", "all_in_uint8", "column_into", "combine_rows"]



def __getattr__(name: str):
    # Read at run time: whether the compiled kernels run now (torchfw.utils.cold_start).
    if name == "HAVE_NUMBA":
        return _jit.compiled_kernels()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# Kernel codes: those of the one table of formulas (torchfw.utils.kernel_formulas), which these
# fused loops implement a second time (tests/test_kernel_formulas.py checks them against it).
LINEAR, RBF, POLY, SIGMOID = _formulas.LINEAR, _formulas.RBF, _formulas.POLY, _formulas.SIGMOID


def _feature_major_dots(xfm, nz_features, nz_values, out):
    """``out[r] = sum_q nz_values[q] * xfm[nz_features[q], r]`` for all examples ``r``."""
    m = out.shape[0]
    for r in range(m):
        out[r] = 0.0
    for q in range(nz_features.shape[0]):
        row = xfm[nz_features[q]]
        v = nz_values[q]
        for r in range(m):
            out[r] += v * row[r]


def _feature_major_dots_prefix(xfm, count, nz_features, nz_values, out):
    """Like :func:`_feature_major_dots` over the first ``count`` columns of ``xfm`` only."""
    for r in range(count):
        out[r] = 0.0
    for q in range(nz_features.shape[0]):
        row = xfm[nz_features[q]]
        v = nz_values[q]
        for r in range(count):
            out[r] += v * row[r]


def _feature_major_dots_rows(xfm, rows, nz_features, nz_values, out):
    """Same as above restricted to the examples ``rows`` (a working set)."""
    n = rows.shape[0]
    for r in range(n):
        out[r] = 0.0
    for q in range(nz_features.shape[0]):
        row = xfm[nz_features[q]]
        v = nz_values[q]
        for r in range(n):
            out[r] += v * row[rows[r]]


def _kernel_argument(code, dots, sq_rows, sq_i, gamma, coef0, out):
    """Turn inner products into the argument of the kernel's outer function (before exp)."""
    if code == 1:  # rbf: -gamma ||x_r - x_i||^2, clamped: rounding can make d2 negative
        for r in range(dots.shape[0]):
            d2 = sq_rows[r] + sq_i - 2.0 * dots[r]
            out[r] = -gamma * (d2 if d2 > 0.0 else 0.0)
    elif code == 0:
        for r in range(dots.shape[0]):
            out[r] = dots[r]
    else:
        for r in range(dots.shape[0]):
            out[r] = gamma * dots[r] + coef0


def _int_power_py(t, n):
    """``t ** n`` for an integer ``n >= 0`` by repeated squaring, right to left over ``n``'s
    bits (``t^5 = t * (t^2)^2``): ``log2 n`` squarings, no libm ``pow`` call."""
    p = 1.0
    while n > 0:
        if n & 1:
            p = p * t
        n >>= 1
        if n > 0:
            t = t * t
    return p


def _poly_finish_py(kvals, degree, y_rows, y_i, out):
    r"""``out[r] = y_rows[r] * y_i * (kvals[r] ** degree + 1)``: the polynomial kernel's outer
    function :math:`t^d` for an integer degree ``d >= 1``, in float64 whatever ``kvals``'
    dtype (the float32 matrix then holds :math:`t^d + 1` rounded once).

    ``t ** d`` with a float ``d`` is a libm ``pow`` call per entry (about 16 ns: on a 398 x 398
    matrix, more than the rest of a small fit). Degrees 1 to 5 (scikit-learn's default 3, a
    grid's 2 to 5) each get a loop of :func:`_int_power_py`'s multiplications written out, which
    vectorizes; higher degrees run :func:`_int_power_py` per entry. Every compiled path (the
    lazy columns, the matrix rows, the row cache) computes its entries here, so they agree to
    the bit; the relative error of the products is a few float64 units, far below float32's.
    """
    n = kvals.shape[0]
    if degree == 1:
        for r in range(n):
            out[r] = y_rows[r] * y_i * (np.float64(kvals[r]) + 1.0)
    elif degree == 2:
        for r in range(n):
            t = np.float64(kvals[r])
            out[r] = y_rows[r] * y_i * (t * t + 1.0)
    elif degree == 3:
        for r in range(n):
            t = np.float64(kvals[r])
            out[r] = y_rows[r] * y_i * (t * (t * t) + 1.0)
    elif degree == 4:
        for r in range(n):
            t = np.float64(kvals[r])
            t2 = t * t
            out[r] = y_rows[r] * y_i * (t2 * t2 + 1.0)
    elif degree == 5:
        for r in range(n):
            t = np.float64(kvals[r])
            t2 = t * t
            out[r] = y_rows[r] * y_i * (t * (t2 * t2) + 1.0)
    else:
        for r in range(n):
            out[r] = y_rows[r] * y_i * (_int_power(np.float64(kvals[r]), degree) + 1.0)


def _finish_column(code, kvals, degree, y_rows, y_i, diag_add, diag_pos, out):
    """``out = y_rows * y_i * (k + 1)`` plus ``diag_add`` at ``diag_pos`` (or -1 for none);
    ``degree`` an integer (:func:`_poly_finish_py`)."""
    if code == 2:
        _poly_finish(kvals, degree, y_rows, y_i, out)
    elif code == 3:
        for r in range(kvals.shape[0]):
            out[r] = y_rows[r] * y_i * (np.tanh(kvals[r]) + 1.0)
    else:
        for r in range(kvals.shape[0]):
            out[r] = y_rows[r] * y_i * (kvals[r] + 1.0)
    if diag_pos >= 0:
        out[diag_pos] += diag_add


# Cody-Waite reduction exp(x) = 2^k exp(f), f in [-ln2/2, ln2/2], then a degree-7 Taylor
# polynomial (relative error < 1e-7 on [-87, 0], i.e. float32 round-off) and 2^k written into
# the exponent bits. Unlike libm's exp it vectorizes: NumPy's float32 exp costs as much as the
# whole inner-product pass on a machine without AVX-512.
_LOG2E = np.float32(1.4426950408889634)
_LN2_HI = np.float32(0.693359375)
_LN2_LO = np.float32(-2.12194440e-4)


def _rbf_finish_f32(dots, sq_rows, sq_i, gamma, y_rows, y_i, out, bits):
    """RBF column in float32: ``out = y_rows y_i (exp(-gamma d2) + 1)`` (no diagonal term)."""
    n = dots.shape[0]
    sq_i = np.float32(sq_i)
    g = np.float32(gamma)
    yi = np.float32(y_i)
    for r in range(n):
        d2 = sq_rows[r] + sq_i - np.float32(2.0) * dots[r]
        v = -g * (d2 if d2 > np.float32(0.0) else np.float32(0.0))
        v = v if v > np.float32(-87.0) else np.float32(-87.0)
        k = np.floor(v * _LOG2E + np.float32(0.5))
        f = v - k * _LN2_HI - k * _LN2_LO
        p = np.float32(1.0 / 5040.0)
        p = p * f + np.float32(1.0 / 720.0)
        p = p * f + np.float32(1.0 / 120.0)
        p = p * f + np.float32(1.0 / 24.0)
        p = p * f + np.float32(1.0 / 6.0)
        p = p * f + np.float32(0.5)
        p = p * f + np.float32(1.0)
        p = p * f + np.float32(1.0)
        out[r] = p
        bits[r] = (np.int32(k) + np.int32(127)) << np.int32(23)
    scale = bits.view(np.float32)
    for r in range(n):
        out[r] = y_rows[r] * yi * (out[r] * scale[r] + np.float32(1.0))


def _combine_rows(rows, weights, out):
    r"""``out[r] = sum_a weights[a] * rows[a, r]`` in float64, ``a`` ascending.

    The start gradient :math:`\tilde K \alpha_0` of an SVM from a few columns (the initial
    subset): one fixed summation order, so that the lazy path (columns from the cache) and the
    compiled whole solve (rows of the matrix) compute the same bits.
    """
    for r in range(out.shape[0]):
        out[r] = 0.0
    for a in range(rows.shape[0]):
        row = rows[a]
        v = weights[a]
        for r in range(out.shape[0]):
            out[r] += v * np.float64(row[r])


def _all_in_uint8(values):
    """Whether every value is an integer in ``[0, 255]``; stops at the first that is not."""
    for r in range(values.shape[0]):
        v = values[r]
        if not (v >= 0 and v <= 255 and v == np.floor(v)):
            return False
    return True


# NumPy forms of the column loops: what runs while the cold start defers the compiled kernels
# (:mod:`torchfw.utils.cold_start`) or without numba. Interpreted, each loop above costs about a
# microsecond per entry; these are a few whole-array operations each (one gather and one BLAS
# product for the inner products), the same values up to the summation order and, for
# :func:`_rbf_finish_f32`, NumPy's exponential in place of the polynomial (both within float32
# round-off of the true value). ``tests/test_kernel_formulas.py`` checks each against its loop.


def _feature_major_dots_np(xfm, nz_features, nz_values, out):
    """:func:`_feature_major_dots` as one product of ``x_i``'s nonzeros with their rows."""
    _assign(out, nz_values @ xfm[nz_features])


def _feature_major_dots_prefix_np(xfm, count, nz_features, nz_values, out):
    """:func:`_feature_major_dots_prefix`: the product over the first ``count`` columns."""
    _assign(out[:count], nz_values @ xfm[nz_features, :count])


def _feature_major_dots_rows_np(xfm, rows, nz_features, nz_values, out):
    """:func:`_feature_major_dots_rows`: the product over the gathered columns ``rows``."""
    _assign(out[:rows.shape[0]], nz_values @ xfm[np.ix_(nz_features, rows)])


def _assign(out, values):
    """``out[:] = values`` (a product of no nonzero feature is a zero column)."""
    out[:] = values


def _kernel_argument_np(code, dots, sq_rows, sq_i, gamma, coef0, out):
    """:func:`_kernel_argument` in whole-array operations (``out`` may be ``dots``)."""
    if code == 1:
        np.subtract(sq_rows + sq_i, 2.0 * dots, out=out)
        np.maximum(out, 0.0, out=out)
        np.multiply(out, -gamma, out=out)
    elif code == 0:
        if out is not dots:
            out[:] = dots
    else:
        np.multiply(dots, gamma, out=out)
        np.add(out, coef0, out=out)


def _finish_column_np(code, kvals, degree, y_rows, y_i, diag_add, diag_pos, out):
    """:func:`_finish_column` in whole-array operations."""
    if code == 2:
        k = _int_power_np(kvals.astype(np.float64), int(degree))
    elif code == 3:
        k = np.tanh(kvals)
    else:
        k = kvals
    np.add(k, 1.0, out=out)
    np.multiply(out, y_rows, out=out)
    np.multiply(out, y_i, out=out)
    if diag_pos >= 0:
        out[diag_pos] += diag_add


def _int_power_np(t, n):
    """:func:`_int_power_py` on a whole array (``t`` is overwritten): the same products."""
    p = None
    while n > 0:
        if n & 1:
            p = t.copy() if p is None else np.multiply(p, t, out=p)
        n >>= 1
        if n > 0:
            t = np.multiply(t, t, out=t)
    return np.ones_like(t) if p is None else p


def _rbf_finish_f32_np(dots, sq_rows, sq_i, gamma, y_rows, y_i, out, bits):
    """:func:`_rbf_finish_f32` in float32 whole-array operations, NumPy's ``exp``."""
    f32 = np.float32
    np.subtract(sq_rows + f32(sq_i), f32(2.0) * dots, out=out)
    np.maximum(out, f32(0.0), out=out)
    np.multiply(out, -f32(gamma), out=out)
    np.exp(out, out=out)
    np.add(out, f32(1.0), out=out)
    np.multiply(out, y_rows, out=out)
    np.multiply(out, f32(y_i), out=out)


_FORMS = {_feature_major_dots: _feature_major_dots_np,
          _feature_major_dots_rows: _feature_major_dots_rows_np,
          _feature_major_dots_prefix: _feature_major_dots_prefix_np,
          _kernel_argument: _kernel_argument_np, _finish_column: _finish_column_np,
          _rbf_finish_f32: _rbf_finish_f32_np}

if _NUMBA:
    # Inlined: each takes its caller's fastmath (the column loops', the exact matrix's none).
    _int_power = njit(_int_power_py, inline=True)
    _poly_finish = njit(_poly_finish_py, fastmath=True, inline=True)
    all_in_uint8 = njit(_all_in_uint8)
    combine_rows = njit(_combine_rows)  # no fastmath: one summation order on both paths
    # The column loops, compiled with fastmath: LLVM may reassociate their sums.
    (feature_major_dots, feature_major_dots_rows, feature_major_dots_prefix, kernel_argument,
     finish_column, rbf_finish_f32) = (
        njit(fn, fastmath=True, interpreted_form=_FORMS[fn]) for fn in _FORMS)
else:  # pragma: no cover
    feature_major_dots = feature_major_dots_rows = kernel_argument = finish_column = None
    feature_major_dots_prefix = None
    rbf_finish_f32 = None
    combine_rows = all_in_uint8 = _int_power = _poly_finish = None

#: The NumPy forms in :func:`column_into`'s order (runnable with numba or without).
_INTERPRETED = (_feature_major_dots_np, _feature_major_dots_prefix_np, _feature_major_dots_rows_np,
                _kernel_argument_np, _finish_column_np, _rbf_finish_f32_np)


def column_into(code, xfm, nz_features, nz_values, sq, sq_i, gamma, coef0, degree, y, y_i,
                diag_add, diag_pos, scratch, bits, out, rows=None, *, compiled=True):
    """Compute one column of the L2-SVM dual matrix into ``out`` (host, numba + NumPy).

    ``scratch`` (same dtype as ``out``) and ``bits`` (int32) are work buffers of the column's
    length; ``rows`` restricts the column to a subset of examples: an index array, or an
    ``int`` ``n`` for the first ``n`` columns of a compact feature-major copy. ``compiled``:
    run the compiled loops; ``False`` runs their NumPy forms (an operator built while the cold
    start defers the compiled kernels keeps them for its life: no compilation mid-fit).
    """
    if compiled:
        dots, dots_prefix, dots_rows, argument, finish, rbf_f32 = (
            feature_major_dots, feature_major_dots_prefix, feature_major_dots_rows,
            kernel_argument, finish_column, rbf_finish_f32)
    else:
        dots, dots_prefix, dots_rows, argument, finish, rbf_f32 = _INTERPRETED
    if rows is None:
        dots(xfm, nz_features, nz_values, scratch)
        sq_rows, y_rows = sq, y
    elif isinstance(rows, int):  # the first `rows` columns of a compact feature-major copy
        dots_prefix(xfm, rows, nz_features, nz_values, scratch)
        sq_rows, y_rows = sq[:rows], y[:rows]
    else:
        dots_rows(xfm, rows, nz_features, nz_values, scratch)
        sq_rows, y_rows = sq[rows], y[rows]
    if code == RBF and out.dtype == np.float32:
        rbf_f32(scratch, sq_rows, sq_i, gamma, y_rows, y_i, out, bits)
    else:
        argument(code, scratch, sq_rows, sq_i, gamma, coef0, scratch)
        if code == RBF:
            np.exp(scratch, out=scratch)
        finish(code, scratch, int(degree), y_rows, y_i, 0.0, -1, out)
    if diag_pos >= 0:
        out[diag_pos] += diag_add
