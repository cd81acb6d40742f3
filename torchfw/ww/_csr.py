"""CSR arrays on the host: the input format of the Weston-Watkins solver, and two operations on it.

:class:`~torchfw.WestonWatkinsSVC` and :func:`torchfw.ww.estimator.ww_problem` convert every input
(NumPy, SciPy sparse, torch dense/COO/CSR tensors, array-likes) to one format, :class:`CSR`:
int64 row pointers and column indices and float64 values, checked once (:func:`as_csr`). The
compiled BCD solver (:mod:`torchfw.ww._blocks`, :mod:`torchfw.ww._problem`) reads these arrays
directly. :func:`take_csr_rows` keeps a subset of rows (the nonzero ones) and
:func:`csr_matmul` multiplies by a dense matrix (the decision function :math:`XW^\\top`) in
compiled code.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import Tensor

from ..utils.data import _is_scipy_sparse, to_csr
from ..utils.jit import njit

__all__ = ["CSR", "as_csr", "csr_of_checked", "dense_to_csr", "sum_duplicates", "take_csr_rows",
           "csr_matmul", "row_sqnorms"]


class CSR:
    """A CSR matrix as contiguous NumPy arrays: ``indptr``, ``indices`` (int64), ``data``."""

    __slots__ = ("indptr", "indices", "data", "shape")

    def __init__(self, indptr, indices, data, shape):
        self.indptr = np.ascontiguousarray(indptr, dtype=np.int64)
        self.indices = np.ascontiguousarray(indices, dtype=np.int64)
        self.data = np.ascontiguousarray(data, dtype=np.float64)
        self.shape = (int(shape[0]), int(shape[1]))


def dense_to_csr(a: np.ndarray) -> CSR:
    """The nonzeros of a dense 2-d array, row by row."""
    mask = a != 0
    indptr = np.zeros(a.shape[0] + 1, dtype=np.int64)
    np.cumsum(mask.sum(axis=1), out=indptr[1:])
    rows, cols = np.nonzero(mask)
    return CSR(indptr, cols, a[rows, cols], a.shape)


def _rows_canonical_py(indptr, indices):
    """Whether every row's column indices strictly increase (sorted, each column once)."""
    for i in range(indptr.shape[0] - 1):
        for p in range(indptr[i] + 1, indptr[i + 1]):
            if indices[p] <= indices[p - 1]:
                return False
    return True


def _row_sqnorms_py(indptr, data, out):
    """``out[i] = ||x_i||^2`` over the stored values of each row."""
    for i in range(indptr.shape[0] - 1):
        s = 0.0
        for p in range(indptr[i], indptr[i + 1]):
            s += data[p] * data[p]
        out[i] = s


# one pass each, compiled: every fit runs them, and their NumPy forms (a repeated row index per
# nonzero, then comparisons or a bincount) took ~1 ms of a ~10 ms fit on dna
_rows_canonical = njit(_rows_canonical_py, fallback=True)
_row_sqnorms = njit(_row_sqnorms_py, fallback=True)


def row_sqnorms(csr: CSR) -> np.ndarray:
    """The squared Euclidean norm of every row, ``(n,)`` float64."""
    out = np.empty(csr.shape[0])
    _row_sqnorms(csr.indptr, csr.data, out)
    return out


def sum_duplicates(csr: CSR) -> CSR:
    """``csr`` with each row's columns sorted and repeated columns summed (``csr`` itself when
    that holds already)."""
    n = csr.shape[0]
    if _rows_canonical(csr.indptr, csr.indices):
        return csr
    rows = np.repeat(np.arange(n), np.diff(csr.indptr))
    order = np.lexsort((csr.indices, rows))
    r, c, v = rows[order], csr.indices[order], csr.data[order]
    first = np.ones(r.size, dtype=bool)
    first[1:] = (r[1:] != r[:-1]) | (c[1:] != c[:-1])
    starts = np.flatnonzero(first)
    indptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(r[starts], minlength=n), out=indptr[1:])
    return CSR(indptr, c[starts], np.add.reduceat(v, starts), csr.shape)


def as_csr(X, name: str = "X") -> CSR:
    """Convert X (NumPy, SciPy sparse, torch dense/COO/CSR, array-like) to checked CSR arrays."""
    if isinstance(X, Tensor):
        if X.layout == torch.sparse_coo:
            X = to_csr(X.coalesce())
        if X.layout == torch.sparse_csr:
            if X.dim() != 2:
                raise ValueError(f"{name} must be 2-d, got shape {tuple(X.shape)}")
            # torch's CSR tensors may name a column twice in a row (SciPy's path sums them):
            # kernels that update and read a row in one pass assume each column once
            csr = sum_duplicates(CSR(X.crow_indices().cpu().numpy(),
                                     X.col_indices().cpu().numpy(),
                                     X.values().detach().cpu().to(torch.float64).numpy(),
                                     X.shape))
        elif X.layout == torch.strided:
            if X.is_complex():
                raise TypeError(f"{name} must be real, got {X.dtype}")
            a = X.detach().cpu().to(torch.float64).numpy()
            if a.ndim != 2:
                raise ValueError(f"{name} must be 2-d (n_samples, n_features), got shape "
                                 f"{a.shape}")
            _check_finite_array(name, a)
            csr = dense_to_csr(a)
        else:
            raise TypeError(f"{name}: unsupported tensor layout {X.layout}; pass a dense, COO "
                            f"or CSR tensor")
    elif _is_scipy_sparse(X):
        S = X.tocsr(copy=True) if hasattr(X, "tocsr") else X
        if S.ndim != 2:
            raise ValueError(f"{name} must be 2-d, got shape {S.shape}")
        S.sum_duplicates()
        if not np.issubdtype(S.dtype, np.number) or np.issubdtype(S.dtype, np.complexfloating):
            raise TypeError(f"{name} must hold real numbers, got dtype {S.dtype}")
        csr = CSR(S.indptr, S.indices, S.data, S.shape)
    else:
        try:
            a = np.asarray(X, dtype=np.float64)
        except (TypeError, ValueError) as exc:
            raise TypeError(f"{name} must be a 2-d array of real numbers: {exc}") from None
        if a.ndim != 2:
            raise ValueError(f"{name} must be 2-d (n_samples, n_features), got shape {a.shape}")
        _check_finite_array(name, a)
        csr = dense_to_csr(a)
    n, d = csr.shape
    if n == 0 or d == 0:
        raise ValueError(f"{name} is empty (shape {csr.shape}); need at least one sample and "
                         f"one feature")
    _check_finite_array(name, csr.data)
    if csr.indptr.shape[0] != n + 1 or csr.indptr[0] != 0 or csr.indptr[-1] != csr.data.shape[0] \
            or (np.diff(csr.indptr) < 0).any():
        raise ValueError(f"{name} is not a valid CSR matrix (bad row pointers)")
    if csr.indices.size and (csr.indices.min() < 0 or csr.indices.max() >= d):
        raise ValueError(f"{name} has column indices outside [0, {d}) ")
    return csr


def csr_of_checked(X: Tensor, *, canonical: bool = False) -> CSR:
    """The CSR arrays of a matrix that :func:`torchfw.utils.data.as_matrix` returned.

    ``as_matrix`` has checked what :func:`as_csr` checks (finite values, row pointers, column
    indices in range), so no second pass runs over them here: on dna (91,233 nonzeros) those
    passes and the duplicate scan took ~0.17 ms of a ~10 ms fit. Each row must still name a
    column once (the sweep updates and reads a row in one pass): ``canonical=True`` says its
    columns are known sorted and unique (``as_matrix`` sums a SciPy matrix's duplicates, and
    a dense matrix has none); otherwise they are checked and summed (:func:`sum_duplicates`),
    as for a torch CSR tensor, which may name a column twice.
    """
    if X.layout == torch.sparse_csr:
        csr = CSR(X.crow_indices().cpu().numpy(), X.col_indices().cpu().numpy(),
                  X.values().detach().cpu().to(torch.float64).numpy(), X.shape)
        return csr if canonical else sum_duplicates(csr)
    if X.layout != torch.strided:
        raise TypeError(f"csr_of_checked takes as_matrix's output (dense or CSR), got "
                        f"{X.layout}")
    return dense_to_csr(X.detach().cpu().to(torch.float64).numpy())


def _check_finite_array(name: str, a: np.ndarray) -> None:
    if a.size and not np.isfinite(a).all():
        bad = int((~np.isfinite(a)).sum())
        raise ValueError(f"{name} contains {bad} NaN or infinite value(s); expected finite values")


def take_csr_rows(csr: CSR, keep: np.ndarray) -> CSR:
    """The rows of ``csr`` where the boolean mask ``keep`` is True, in order."""
    lengths = np.diff(csr.indptr)
    nnz_keep = np.repeat(keep, lengths)
    indptr = np.zeros(int(keep.sum()) + 1, dtype=np.int64)
    np.cumsum(lengths[keep], out=indptr[1:])
    return CSR(indptr, csr.indices[nnz_keep], csr.data[nnz_keep],
               (indptr.shape[0] - 1, csr.shape[1]))


def _csr_matmul_py(indptr, indices, data, W, out):
    """``out += X @ W`` row by row over the nonzeros of ``X`` (``indptr, indices, data``)."""
    for i in range(indptr.shape[0] - 1):
        for p in range(indptr[i], indptr[i + 1]):
            xv = data[p]
            row = W[indices[p]]
            for c in range(W.shape[1]):
                out[i, c] += xv * row[c]


# Compiled where numba is (else the loop runs in the interpreter, as the WW solver does).
_csr_matmul_kernel = njit(_csr_matmul_py, fallback=True)


def csr_matmul(csr: CSR, W: np.ndarray) -> np.ndarray:
    """``X @ W`` for ``X`` in CSR and a dense ``W`` ``(d, k)``: a dense ``(n, k)`` float64 array."""
    out = np.zeros((csr.shape[0], W.shape[1]))
    _csr_matmul_kernel(csr.indptr, csr.indices, csr.data, W, out)
    return out
