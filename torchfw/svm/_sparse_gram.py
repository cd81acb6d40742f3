r"""The matrix :math:`K + 1` of sparse examples too wide for a dense copy of their features.

The compiled SVC path computes its matrix from a dense feature-major copy of the examples
(:mod:`torchfw.svm._matrix`); that copy must fit the operator's ``memory_budget`` (1 GB). Sparse
sets with many features do not: sector (6,412 tf-idf documents of 55,197 features, 1.6 % of
the values nonzero) would need 1.4 GB, so its 5,460 one-vs-one pairs each took the lazy path
(405 s against scikit-learn's 241 s). Their matrix of all examples itself is small (164 MB in
float32).

Here the dots :math:`x_i^\top x_j` are the product of the CSR matrix with its transpose, taken
row by row into a dense row: each nonzero :math:`x_{if}` adds :math:`x_{if} x_{jf}` over the
examples :math:`j` holding feature :math:`f` (the CSC copy's column :math:`f`). The work is
:math:`\sum_f \mathrm{nnz}_f^2` (sector: 1.2e9 multiply-adds), no dense feature is ever
materialized, and the kernel is then applied to the dots as at prediction
(:meth:`torchfw.svm.kernels.Kernel.from_dots`). Blocks of rows are computed on the thread pool,
small enough (:data:`BLOCK_ROWS`) that a thread that loses its core holds up one block, not half
the matrix.
"""

from __future__ import annotations

import numpy as np
import torch

from ..utils.data import csr_tensor
from ..utils.jit import njit as _njit  # None without numba
from ..utils.threads import parallel_map, workers
from .kernels import _row_norms_sq

__all__ = ["sparse_plain_problem", "BLOCK_ROWS"]

#: Rows per block of the product handed to a thread: the blocks are taken in turn by the free
#: threads, so a thread slowed by another job on its core delays the matrix by about one block.
BLOCK_ROWS = 128


def _dots_rows(indptr, indices, data, cptr, crow, cval, lo, hi, out):
    """Rows ``lo:hi`` of ``X X^T`` into ``out[0:hi-lo]`` (zeroed here), from CSR and CSC."""
    for i in range(lo, hi):
        row = out[i - lo]
        row[:] = 0
        for p in range(indptr[i], indptr[i + 1]):
            f = indices[p]
            v = data[p]
            for q in range(cptr[f], cptr[f + 1]):
                row[crow[q]] += v * cval[q]


_dots_rows_nb = _njit(_dots_rows)


def sparse_plain_problem(plan, X, C_examples):
    """``(row source, diagonal, 1/C)`` of :func:`torchfw.svm._matrix.plain_problem` for a CPU
    CSR ``X``: the full matrix :math:`K + 1` of the fit ``plan``'s kernel, its diagonal
    :math:`K_{ii} + 1 + 1/C_i` (float64) and :math:`1/C_i` in the plan's dtype.

    Raises
    ------
    RuntimeError
        Without numba (the caller takes this path only with it).
    """
    if _dots_rows_nb is None:
        raise RuntimeError("the sparse kernel matrix needs numba")
    import scipy.sparse as sp

    m = X.shape[0]
    kdtype = plan.dtype
    np_dtype = np.float64 if kdtype == torch.float64 else np.float32
    values = X.values().detach().cpu().to(kdtype)
    csr = sp.csr_matrix((values.numpy(), X.col_indices().cpu().numpy(),
                         X.crow_indices().cpu().numpy()), shape=tuple(X.shape))
    csc = csr.tocsc()
    args = (csr.indptr.astype(np.int64), csr.indices.astype(np.int64), csr.data,
            csc.indptr.astype(np.int64), csc.indices.astype(np.int64), csc.data)
    out = np.empty((m, m), dtype=np_dtype)
    sq = _row_norms_sq(csr_tensor(X.crow_indices().cpu(), X.col_indices().cpu(), values,
                                  size=X.shape, check_invariants=False)).to(kdtype)
    kernel = plan.kernel
    sq_np = sq.numpy()

    def block(lo):  # rows lo:hi: the dots, then K + 1 in place (torch on a view: no copy)
        hi = min(m, lo + BLOCK_ROWS)
        _dots_rows_nb(*args, lo, hi, out[lo:hi])
        rows = torch.from_numpy(out[lo:hi])
        rows.copy_(kernel.from_dots(rows, torch.from_numpy(sq_np[lo:hi]).unsqueeze(1),
                                    sq.unsqueeze(0)))
        rows.add_(1.0)

    starts = range(0, m, BLOCK_ROWS)
    parallel_map(block, starts, workers(len(starts), float(csc.nnz) * m, 1e7))
    C_t = C_examples if isinstance(C_examples, float) else C_examples.cpu()
    inv_c = (1.0 / torch.as_tensor(C_t, dtype=kdtype)).expand(m).contiguous()
    diag = (kernel.diagonal(sq) + 1.0 + inv_c).to(torch.float64).numpy()
    return (out, None), diag, inv_c.numpy()  # _matrix.full_source's row source of a matrix
