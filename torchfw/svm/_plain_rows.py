r"""The host arrays from which the compiled path computes the rows of :math:`K + 1`.

The compiled whole solve (:mod:`torchfw.svm._dense`) reads one matrix :math:`K + 1` of the
plan's kernel on all examples (labels 1: they only flip signs), or a cache of its rows, and the
diagonal :math:`K_{ii} + 1 + 1/C_i`. Its rows are computed in compiled code
(:func:`torchfw.svm._matrix.plain_kernel_matrix`, :func:`torchfw.svm._matrix.cached_source`)
from a few arrays of the examples: their feature-major copy (``d x m``, one byte a value when
every value is an integer in ``[0, 255]``), their CSR arrays when sparse, their squared norms
and :math:`1/C_i`. :class:`PlainRows` holds those and nothing else -- the arrays of
:class:`~torchfw.svm.kernels.SVMDualOperator` of the same examples, bit for bit, without its
labels, column cache, tensor copies and checks of a user's arguments: on a fit of 160 examples
(glass) the operator took 45 us of a 1.8 ms fit, this 15 us.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch

from . import _kernel_cpu
from .kernels import (
    SVMDualOperator,
    _row_norms_sq,
    check_cache_slots,
    inverse_c,
)

__all__ = ["PlainRows", "plain_rows"]

_DEFAULT_BUDGET = 1024.0 * 2**20  # SVMDualOperator's memory_budget, in bytes


class PlainRows:
    """The examples' host arrays that compiled code computes rows of :math:`K + 1` from.

    Attributes (the names of :class:`~torchfw.svm.kernels.SVMDualOperator`'s, which the row
    code reads from either): ``shape`` ``(m, m)``, ``dtype`` (torch) and ``_np_dtype`` of the
    kernel values, ``kernel``, ``X`` (the examples in ``dtype``: their layout), ``_xfm_np``
    the feature-major copy, ``_sq_np`` the squared norms, ``_inv_c_np`` :math:`1/C_i`, and for
    CSR examples ``_crow``, ``_col``, ``_val``; :meth:`diagonal64` the diagonal
    :math:`K_{ii} + 1 + 1/C_i` as the operator's, widened to float64.
    """

    __slots__ = ("shape", "dtype", "_np_dtype", "kernel", "X", "_xfm_np", "_sq_np",
                 "_inv_c_np", "_crow", "_col", "_val", "_diag64")
    shape: tuple[int, int]
    dtype: torch.dtype
    _np_dtype: type
    kernel: Any
    X: torch.Tensor
    _xfm_np: np.ndarray
    _sq_np: np.ndarray
    _inv_c_np: np.ndarray
    _crow: np.ndarray
    _col: np.ndarray
    _val: np.ndarray
    _diag64: np.ndarray

    def diagonal64(self) -> np.ndarray:
        """:math:`K_{ii} + 1 + 1/C_i` in the kernel's precision, as float64."""
        return self._diag64

    @classmethod
    def of_operator(cls, op: SVMDualOperator) -> PlainRows:
        """The arrays of an operator with host storage (``op._host_ok``)."""
        self = cls.__new__(cls)
        self.shape, self.dtype, self._np_dtype = op.shape, op.dtype, op._np_dtype
        self.kernel, self.X, self._xfm_np, self._sq_np = op.kernel, op.X, op._xfm_np, op._sq_np
        self._inv_c_np = op._inv_c_np
        if op.X.layout == torch.sparse_csr:
            self._crow, self._col, self._val = op._crow, op._col, op._val
        self._diag64 = op.diagonal().to(torch.float64).numpy()
        return self


def _exact_in_uint8_np(values: np.ndarray) -> bool:
    """:func:`~torchfw.svm.kernels._exact_in_uint8` of a contiguous host array, with numba:
    the same test (the first value, then the compiled scan) without a tensor's reshape and
    conversion, a few microseconds of a fit of 160 examples."""
    flat = values.reshape(-1)
    if flat.shape[0] == 0:
        return False
    first = float(flat[0])
    if not (0.0 <= first <= 255.0 and first == math.floor(first)):
        return False  # real-valued data fail at their first value, without the compiled scan
    return bool(_kernel_cpu.all_in_uint8(flat))


def plain_rows(X: torch.Tensor, kernel, C, dtype: torch.dtype,
               cache_size: float) -> PlainRows | None:
    """:class:`PlainRows` of the examples ``X`` (validated: 2-d, finite, on their device) for
    ``kernel`` and ``C`` (a float, ``inf`` allowed, or a tensor of one positive value an
    example), or None where :class:`~torchfw.svm.kernels.SVMDualOperator` has no host storage
    (off the CPU, no numba, a feature-major copy over its memory budget).

    Dense CPU examples are copied once, by NumPy; everything else goes through the operator
    (:meth:`PlainRows.of_operator`), whose arrays these are in every case.
    ``cache_size`` must hold two rows, as the operator requires.
    """
    m, d = X.shape
    if m == 0 or d == 0:
        raise ValueError(f"X is empty (shape {tuple(X.shape)})")
    if dtype not in (torch.float32, torch.float64):
        raise ValueError(f"dtype must be torch.float32 or torch.float64, got {dtype}")
    np_dtype = np.float64 if dtype == torch.float64 else np.float32
    itemsize = np.dtype(np_dtype).itemsize
    if X.layout == torch.sparse_csr or X.device.type != "cpu" or \
            not _kernel_cpu.HAVE_NUMBA or isinstance(C, torch.Tensor):
        op = SVMDualOperator(X, torch.ones(m, dtype=torch.float64), kernel, C, dtype=dtype,
                             cache_size=cache_size)
        return PlainRows.of_operator(op) if op._host_ok else None
    check_cache_slots(cache_size, m, itemsize)
    if m * d * itemsize > _DEFAULT_BUDGET:  # no feature-major copy: no host storage
        return None
    self = PlainRows.__new__(PlainRows)
    self.shape, self.dtype, self._np_dtype, self.kernel = (m, m), dtype, np_dtype, kernel
    self.X = X.to(dtype).contiguous()
    values = self.X.numpy()
    xfm = np.ascontiguousarray(values.T)  # (d, m): each feature contiguous over examples
    if _exact_in_uint8_np(xfm):
        xfm = xfm.astype(np.uint8)  # exactly (integers in [0, 255]), as the operator stores it
    self._xfm_np = xfm
    self._sq_np = _row_norms_sq(self.X).to(dtype).contiguous().numpy()
    self._inv_c_np = inverse_c(C, m, np_dtype)
    if kernel.name == "rbf":  # k(x, x) = 1: (1 + 1) + 1/C in the kernel's precision
        self._diag64 = (np.full(m, 2.0, dtype=np_dtype) + self._inv_c_np).astype(np.float64)
    else:
        sq = torch.from_numpy(self._sq_np)
        self._diag64 = (kernel.diagonal(sq) + 1.0 + torch.from_numpy(self._inv_c_np)) \
            .to(torch.float64).numpy()
    return self
