r"""Kernel functions and the lazy, chunked, cached operator of the L2-SVM dual.

The L2-SVM dual in Core Vector Machine form (Tsang, Kwok & Cheung 2005; seeds 000-002) is a
quadratic over the unit simplex,

.. math::
    \min_{\alpha \in \Delta_m} \tfrac12 \alpha^\top \tilde K \alpha, \qquad
    \tilde K_{ij} = y_i y_j \big(k(x_i, x_j) + 1\big) + \delta_{ij} / C_i .

:class:`SVMDualOperator` is that :math:`\tilde K` as a :class:`~torchfw.ColumnOperator`: columns
(and blocks of columns) are computed on demand, products with vectors are computed in row chunks
sized from a memory budget, and frequently used columns are kept in a cache under a byte budget
(:mod:`torchfw.utils.column_cache`). The full ``m x m`` matrix is never formed: memory grows
linearly with ``m``. In :class:`~torchfw.Quadratic`, every core optimizer trains SVMs unchanged.

Storage. ``X`` is kept *feature-major* and dense (``d x m``) when that fits the memory budget:
one column then costs ``nnz(x_i)`` contiguous passes over ``m`` values (compiled on the CPU;
one matrix-vector product on a GPU). Otherwise ``X`` stays a CSR matrix and columns are sparse
matrix-vector products.
"""

from __future__ import annotations

import math

import numpy as np
import torch
from torch import Tensor

from ..objectives import ColumnOperator
from ..utils import kernel_formulas as _kernel_formulas
from ..utils.column_cache import CachedColumnsMixin, ColumnCache
from ..utils.data import csr_tensor
from ..utils.data import take_rows as _take_rows
from ..utils.validation import check_nonnegative, check_positive
from . import _kernel_cpu

__all__ = ["Kernel", "RBFKernel", "LinearKernel", "PolynomialKernel", "SigmoidKernel",
           "make_kernel", "CallableKernel", "SVMDualOperator", "OneVsRestOperator", "KERNELS",
           "check_cache_slots", "inverse_c"]

_CSR = torch.sparse_csr

#: Nonzeros up to which the host :meth:`SVMDualOperator.matvec` sums columns in one fixed order
#: (start points); above, kernel blocks through BLAS are much faster.
ORDERED_MATVEC_MAX = 256


def _is_csr(X: Tensor) -> bool:
    return X.layout == _CSR


def _row_norms_sq(X: Tensor) -> Tensor:
    if _is_csr(X):
        values = X.values()
        counts = X.crow_indices().diff()
        rows = torch.repeat_interleave(torch.arange(X.shape[0], device=X.device), counts)
        out = torch.zeros(X.shape[0], dtype=values.dtype, device=X.device)
        return out.index_add_(0, rows, values * values)
    return (X * X).sum(dim=1)


def _exact_in_uint8(values: Tensor) -> bool:
    """Whether every value is an integer in ``[0, 255]`` (stored exactly in one byte)."""
    if values.numel() == 0:
        return False
    if _kernel_cpu.HAVE_NUMBA and values.device.type == "cpu":
        flat = values.reshape(-1).numpy()
        # Real-valued data fail at their first value: decided here, without the compiled
        # kernel (whose load from numba's cache is 30 ms of a process's first fit).
        first = float(flat[0])
        if not (0.0 <= first <= 255.0 and first == math.floor(first)):
            return False
        # Compiled, stopping at the first value that is not (the tensor expression reads
        # everything four times, 40 us at 100 x 4).
        return bool(_kernel_cpu.all_in_uint8(flat))
    return bool(((values >= 0) & (values <= 255) & (values == torch.round(values))).all())


def _csr_feature_major(crow: np.ndarray, col: np.ndarray, val: np.ndarray, m: int, d: int,
                       dtype) -> Tensor | None:
    """The ``(d, m)`` feature-major copy of a CPU CSR matrix in ``dtype`` (float, or uint8 for
    values exact in it), scattered from its stored values; None when a row's columns are not
    strictly increasing (duplicates, which ``to_dense`` sums), left to torch.

    The values of ``X.to_dense().T.contiguous()`` (then ``.to(torch.uint8)``), each stored
    value copied to its place: w8a's first 10,000 rows (300 features, 120,000 values), one
    thread, 2 ms against 17-23 ms for the dense copy and its transpose, which write and read
    every one of the 3,000,000 entries twice.
    """
    rows = np.repeat(np.arange(m, dtype=np.int64), np.diff(crow))
    if col.shape[0] > 1:
        same_row = rows[1:] == rows[:-1]
        if bool((same_row & (col[1:] <= col[:-1])).any()):
            return None
    out = np.zeros((d, m), dtype=dtype)
    out[col, rows] = val
    return torch.from_numpy(out)


def _matmul_t(A: Tensor, B: Tensor) -> Tensor:
    """``A @ B.T`` for dense or CSR ``A`` and ``B`` (``B`` densified: it is a small block)."""
    if _is_csr(B):
        B = B.to_dense()
    if _is_csr(A):
        return torch.sparse.mm(A, B.T.contiguous())
    return A @ B.T


class Kernel:
    """A positive semi-definite kernel :math:`k(x, z)` evaluated through inner products."""

    name = "kernel"
    code = -1

    def __init__(self, gamma: float = 1.0, degree: int = 3, coef0: float = 0.0):
        self.gamma = check_positive("gamma", gamma)
        if isinstance(degree, bool) or not float(degree).is_integer() or degree < 1:
            raise ValueError(f"degree must be a positive integer, got {degree!r}")
        self.degree = int(degree)
        self.coef0 = float(coef0)
        if not math.isfinite(self.coef0):
            raise ValueError(f"coef0 must be finite, got {coef0!r}")

    def from_dots(self, dots: Tensor, sq_a: Tensor, sq_b: Tensor) -> Tensor:
        """Kernel values from inner products and squared norms, broadcast elementwise.

        For a matrix ``dots[i, j] = <a_i, b_j>`` pass ``sq_a[:, None]`` and ``sq_b[None, :]``.
        The formulas are the package's one table, :func:`torchfw.utils.kernel_formulas.from_dots`.
        """
        return _kernel_formulas.from_dots(self.code, dots, sq_a, sq_b, self.gamma, self.coef0,
                                          self.degree)

    def pairwise(self, A: Tensor, B: Tensor) -> Tensor:
        """Dense kernel matrix ``k(A_i, B_j)`` (``A``, ``B`` dense or CSR, same device)."""
        dots = _matmul_t(A, B)
        return self.from_dots(dots, _row_norms_sq(A).to(dots.dtype).unsqueeze(1),
                              _row_norms_sq(B).to(dots.dtype).unsqueeze(0))

    def diagonal(self, sq: Tensor) -> Tensor:
        """``k(x_i, x_i)`` from the squared norms ``sq[i] = ||x_i||^2``."""
        return self.from_dots(sq, sq, sq)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(gamma={self.gamma:g}, degree={self.degree}, " \
               f"coef0={self.coef0:g})"


class RBFKernel(Kernel):
    r"""Gaussian kernel :math:`k(x, z) = \exp(-\gamma \|x - z\|^2)`."""

    name, code = "rbf", _kernel_cpu.RBF

    def diagonal(self, sq: Tensor) -> Tensor:  # exp(-g (2s - 2s)) = exp(-0) = 1, exactly
        return torch.ones_like(sq)  # as from_dots gives it, without its five tensor ops


class LinearKernel(Kernel):
    r"""Linear kernel :math:`k(x, z) = x^\top z`."""

    name, code = "linear", _kernel_cpu.LINEAR


class PolynomialKernel(Kernel):
    r"""Polynomial kernel :math:`k(x, z) = (\gamma x^\top z + c_0)^{d}`."""

    name, code = "poly", _kernel_cpu.POLY


class SigmoidKernel(Kernel):
    r"""Sigmoid kernel :math:`k(x, z) = \tanh(\gamma x^\top z + c_0)` (not PSD in general)."""

    name, code = "sigmoid", _kernel_cpu.SIGMOID


KERNELS = {cls.name: cls for cls in (RBFKernel, LinearKernel, PolynomialKernel, SigmoidKernel)}


def make_kernel(name: str, gamma: float = 1.0, degree: int = 3, coef0: float = 0.0) -> Kernel:
    """Kernel by name: ``"rbf"``, ``"linear"``, ``"poly"`` or ``"sigmoid"``."""
    if name not in KERNELS:
        raise ValueError(f"unknown kernel {name!r}; expected one of {sorted(KERNELS)}")
    return KERNELS[name](gamma=gamma, degree=degree, coef0=coef0)


def _host_array(X: Tensor):
    """``X`` as the host array a user's kernel function receives (dense NumPy or SciPy CSR)."""
    X = X.detach().cpu()
    if _is_csr(X):
        import scipy.sparse

        return scipy.sparse.csr_matrix((X.values().numpy(), X.col_indices().numpy(),
                                        X.crow_indices().numpy()), shape=tuple(X.shape))
    return X.numpy()


class CallableKernel:
    r"""A user's kernel function :math:`k(X, Z) \mapsto (k(x_i, z_j))_{ij}`, as in scikit-learn.

    ``fn(A, B)`` receives host arrays (NumPy, or a SciPy CSR matrix for sparse data) of ``n_A``
    and ``n_B`` rows and must return an array-like of shape ``(n_A, n_B)`` with finite values;
    anything else is refused with a ValueError naming the function and what it returned. It
    is evaluated in full (no columns on demand): :class:`~torchfw.SVC` calls it once on the
    training data for the ``m x m`` Gram matrix and on blocks of test rows against the support
    vectors at prediction.
    """

    name = "callable"
    code = -1

    def __init__(self, fn):
        if not callable(fn):
            raise ValueError(f"a callable kernel must be a function, got {fn!r}")
        self.fn = fn

    def matrix(self, A: Tensor, B: Tensor) -> np.ndarray:
        """``fn(A, B)`` as a float64 NumPy array, its shape and finiteness checked."""
        label = getattr(self.fn, "__name__", repr(self.fn))
        out = self.fn(*(_host_array(Z) if isinstance(Z, Tensor) else Z for Z in (A, B)))
        if hasattr(out, "toarray"):  # a SciPy sparse result
            out = out.toarray()
        if isinstance(out, Tensor):
            out = out.detach().cpu().numpy()
        try:
            values = np.asarray(out, dtype=np.float64)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"kernel function {label} returned {type(out).__name__}, which is "
                             f"not an array of numbers ({exc})") from None
        expected = tuple(int(Z.shape[0]) if hasattr(Z, "shape") else len(Z) for Z in (A, B))
        if values.shape != expected:
            raise ValueError(f"kernel function {label} returned an array of shape "
                             f"{values.shape} for inputs of {expected[0]} and {expected[1]} rows;"
                             f" it must return the {expected[0]} x {expected[1]} matrix "
                             f"k(A_i, B_j)")
        if not np.isfinite(values).all():
            raise ValueError(f"kernel function {label} returned NaN or infinite values")
        return values

    def pairwise(self, A: Tensor, B: Tensor) -> Tensor:
        """``fn(A, B)`` as a tensor on ``A``'s device, in ``A``'s precision."""
        dtype = A.values().dtype if _is_csr(A) else A.dtype
        return torch.from_numpy(self.matrix(A, B)).to(device=A.device, dtype=dtype)

    def __repr__(self) -> str:
        return f"CallableKernel({getattr(self.fn, '__name__', repr(self.fn))})"


def check_cache_slots(cache_size: float, m: int, itemsize: int) -> int:
    """The columns of ``m`` values of ``itemsize`` bytes that ``cache_size`` MB hold; a
    ValueError below 2 (the solvers need two)."""
    column_bytes = m * itemsize
    slots = int(check_nonnegative("cache_size", cache_size) * 2**20 // column_bytes)
    if slots < 2:
        raise ValueError(
            f"cache_size={cache_size} MB holds {slots} column(s) of "
            f"{column_bytes / 2**20:.3f} MB; the solvers need at least 2 "
            f"(cache_size >= {2 * column_bytes / 2**20:.3f})")
    return slots


def inverse_c(C: float, m: int, np_dtype) -> np.ndarray:
    """:math:`1/C` for ``m`` examples of one float ``C`` (``inf``, the hard margin: 0), as
    :class:`SVMDualOperator`'s ``inv_C`` holds it: the float64 quotient rounded once to
    ``np_dtype``."""
    return np.full(m, 1 / check_positive("C", C, allow_inf=True), dtype=np_dtype)


class SVMDualOperator(CachedColumnsMixin, ColumnOperator):
    r"""The L2-SVM dual matrix :math:`\tilde K` as a lazy column operator.

    Parameters
    ----------
    X : Tensor
        Training data, dense ``(m, d)`` or sparse CSR, on the device the solver will use.
    y : Tensor
        Labels in ``{-1, +1}``, shape ``(m,)``.
    kernel : Kernel
    C : float or Tensor
        Regularization; a tensor of shape ``(m,)`` gives one value per example (class weights).
    dtype : torch.dtype, default float32
        Precision of kernel values (columns). Solvers accumulate in their own (float64) state.
    cache_size : float, default 200
        Column cache budget in MB (host execution). Must hold at least two columns.
    memory_budget : float, default 1024
        Working-memory budget in MB for dense feature-major storage and for chunked products.
    """

    def __init__(self, X: Tensor, y: Tensor, kernel: Kernel, C: float | Tensor = 1.0, *,
                 dtype: torch.dtype = torch.float32, cache_size: float = 200.0,
                 memory_budget: float = 1024.0):
        if X.dim() != 2:
            raise ValueError(f"X must be 2-d, got shape {tuple(X.shape)}")
        m, d = X.shape
        if m == 0 or d == 0:
            raise ValueError(f"X is empty (shape {tuple(X.shape)})")
        if y.shape != (m,):
            raise ValueError(f"y must have shape ({m},), got {tuple(y.shape)}")
        if dtype not in (torch.float32, torch.float64):
            raise ValueError(f"dtype must be torch.float32 or torch.float64, got {dtype}")
        self.kernel = kernel
        self.shape = (m, m)
        self.dtype = dtype
        self.device = X.device
        self.memory_budget = check_positive("memory_budget", memory_budget) * 2**20
        self.cache_slots = check_cache_slots(cache_size, m, torch.finfo(dtype).bits // 8)
        self.y = y.to(device=X.device, dtype=dtype).contiguous()
        if isinstance(C, Tensor):  # C = inf (the hard margin): 1/C = 0
            if C.shape != (m,) or bool(torch.isnan(C).any() | (C <= 0).any()):
                raise ValueError("a per-example C must have shape (m,) and positive entries")
            self.inv_C = (1.0 / C.to(device=X.device, dtype=dtype)).contiguous()
        else:
            self.inv_C = torch.full((m,), 1 / check_positive("C", C, allow_inf=True), dtype=dtype,
                                    device=X.device)
        self._store_data(X)
        self.sq = _row_norms_sq(self.X).to(dtype).contiguous()
        if self._host_ok:
            self._sq_np, self._y_np = self.sq.numpy(), self.y.numpy()
            self._inv_c_np = self.inv_C.numpy()
        self._diag = (self.kernel.diagonal(self.sq) + 1.0 + self.inv_C).contiguous()
        self._column_cache: ColumnCache | None = None  # on first use (the compiled path has none)

    @property
    def _cache(self) -> ColumnCache:
        if self._column_cache is None:
            m, dtype = self.shape[0], self.dtype
            self._column_cache = ColumnCache(self.cache_slots, m, n_keys=m, dtype=dtype,
                                             device=self.device)
        return self._column_cache

    @_cache.setter
    def _cache(self, cache: ColumnCache) -> None:
        self._column_cache = cache

    # -- storage -------------------------------------------------------------------------------

    def _store_data(self, X: Tensor) -> None:
        m, d = X.shape
        itemsize = torch.finfo(self.dtype).bits // 8
        dense_fits = m * d * itemsize <= self.memory_budget
        if _is_csr(X):
            self.X = csr_tensor(X.crow_indices(), X.col_indices(),
                                             X.values().to(self.dtype), size=X.shape,
                                             check_invariants=False)  # validated on input
        else:
            self.X = X.to(self.dtype).contiguous()
        self.xfm = None
        xfm = None
        if _is_csr(self.X):
            self._crow = self.X.crow_indices().cpu().numpy()
            self._col = self.X.col_indices().cpu().numpy()
            self._val = self.X.values().cpu().numpy()
        host = self.device.type == "cpu" and _kernel_cpu.HAVE_NUMBA
        compact = None  # whether the CSR values are stored as uint8, when already known
        if dense_fits:
            if _is_csr(self.X) and self.X.device.type == "cpu":
                compact = host and _exact_in_uint8(self.X.values())
                xfm = _csr_feature_major(self._crow, self._col, self._val, m, d,
                                         np.uint8 if compact else self._np_dtype)
            if xfm is None:
                dense = self.X.to_dense() if _is_csr(self.X) else self.X
                xfm = dense.T.contiguous()  # (d, m): each feature contiguous over examples
        self._host_ok = host and xfm is not None
        if xfm is not None and self._host_ok:
            if xfm.dtype != torch.uint8 and (compact if compact is not None else _exact_in_uint8(
                    self.X.values() if _is_csr(self.X) else xfm)):
                # Binary and count features (a9a, w8a, mushrooms, ...): one byte per value
                # instead of four, exactly. The column pass reads the feature rows nnz(x_i)
                # times and is bound by memory traffic: 40% faster on a9a. Torch paths widen on
                # the fly.
                xfm = xfm.to(torch.uint8)
            self._xfm_np = xfm.numpy()
            self._scratch = np.empty(m, dtype=self._np_dtype)
            self._bits = np.empty(m, dtype=np.int32)
        self.xfm = xfm

    def _row_nonzeros(self, i: int) -> tuple[np.ndarray, np.ndarray]:
        if _is_csr(self.X):
            lo, hi = self._crow[i], self._crow[i + 1]
            return self._col[lo:hi], self._val[lo:hi]
        arrays = self._host_arrays()
        row = arrays[0][:, i] if arrays is not None else self._dense_xfm()[:, i].cpu().numpy()
        nz = np.flatnonzero(row)
        return nz, row[nz].astype(self._np_dtype)

    def _host_arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None:
        """``(xfm, sq, y, inv_c)`` as host arrays for :func:`_kernel_cpu.column_into`, or None.

        The compiled path's own arrays (``xfm`` possibly ``uint8``); on the CPU without them
        (the cold start defers the compiled kernels, or numba is absent) zero-copy views of the
        feature-major copy and the norm, label and ``1/C`` tensors, for the kernels' NumPy
        forms; None on other devices or without a feature-major copy (the PyTorch path).
        """
        if self._host_ok:
            return self._xfm_np, self._sq_np, self._y_np, self._inv_c_np
        views = getattr(self, "_numpy_views", None)
        if views is None:
            if self.device.type != "cpu" or self.xfm is None:
                return None
            views = tuple(t.detach().numpy() for t in (self.xfm, self.sq, self.y, self.inv_C))
            self._numpy_views = views
        return views

    def _work_buffers(self) -> tuple[np.ndarray, np.ndarray]:
        """The column kernels' scratch buffers (length ``m``; made on first use off the
        compiled path, whose construction makes them)."""
        if getattr(self, "_scratch", None) is None:
            self._scratch = np.empty(self.shape[0], dtype=self._np_dtype)
            self._bits = np.empty(self.shape[0], dtype=np.int32)
        return self._scratch, self._bits

    @property
    def _np_dtype(self):
        return np.float64 if self.dtype == torch.float64 else np.float32

    def feature_major(self, index: Tensor | None = None) -> Tensor:
        """The ``(d, m)`` feature-major copy of ``X`` (or its columns ``index``) in ``dtype``.

        A temporary widening when the copy is stored compactly as ``uint8``.
        """
        xfm = self._dense_xfm()
        part = xfm if index is None else xfm.index_select(1, index)
        return part.to(self.dtype)

    def _dense_xfm(self) -> Tensor:
        """The feature-major copy, which the paths that read it have (``memory_budget``)."""
        if self.xfm is None:
            raise RuntimeError("no feature-major copy of X: it exceeds memory_budget")
        return self.xfm

    # -- ColumnOperator ------------------------------------------------------------------------

    def diagonal(self) -> Tensor:
        return self._diag

    def column(self, i) -> Tensor:
        """Column ``i`` of :math:`\\tilde K` (cached for Python-int indices)."""
        if isinstance(i, Tensor):
            return self.columns(i.reshape(1))[:, 0]
        i = int(i)
        cache = self._cache
        row = cache.lookup(i)
        if row is None:
            row, _ = cache.insert(i)
            self._compute_column(i, cache.buffer[row])
        return cache.buffer[row]

    def _compute_column(self, i: int, out: Tensor, rows: Tensor | None = None) -> None:
        """Column ``i`` (on ``rows`` only if given) into ``out``.

        On the host, one :func:`_kernel_cpu.column_into`: the compiled loops, or, for an
        operator built while they are deferred, their NumPy forms -- a gather and one BLAS
        product for the inner products, then the kernel formula over the column in a few
        array operations, instead of the dozen small PyTorch operations of
        :meth:`_columns_torch` (about 0.1 ms of CPU time for a working set's column, half of
        the streaming solvers' cold fits, against 15 us). Elsewhere, :meth:`_columns_torch`.
        """
        if self._host_ok:
            xfm, sq, y, inv_c = self._xfm_np, self._sq_np, self._y_np, self._inv_c_np
            scratch, bits = self._scratch, self._bits
        else:
            arrays = self._host_arrays()
            if arrays is None:
                index = torch.tensor([i], device=self.device)
                out.copy_(self._columns_torch(index, rows)[:, 0])
                return
            xfm, sq, y, inv_c = arrays
            scratch, bits = self._work_buffers()
        nzf, nzv = self._row_nonzeros(i)
        n = self.shape[0] if rows is None else rows.shape[0]
        out_np = out.numpy()
        rows_np = None if rows is None else rows.numpy()
        _kernel_cpu.column_into(
            self.kernel.code, xfm, nzf, nzv, sq, float(sq[i]), self.kernel.gamma,
            self.kernel.coef0, self.kernel.degree, y, float(y[i]), float(inv_c[i]),
            -1 if rows is not None else i, scratch[:n], bits[:n], out_np, rows_np,
            compiled=self._host_ok)
        if rows_np is not None:
            hit = np.flatnonzero(rows_np == i)
            if hit.size:
                out_np[hit[0]] += inv_c[i]

    def columns(self, index: Tensor) -> Tensor:
        """Columns ``index`` as an ``(m, k)`` tensor (no host reads: graph-capturable)."""
        return self._columns_torch(index.reshape(-1), None)

    def kernel_block(self, index: Tensor, rows: Tensor | None = None) -> Tensor:
        """Plain kernel values ``k(x_r, x_c)`` for rows ``rows`` (all) and columns ``index``."""
        if self.xfm is not None:
            cols = self.feature_major(index).T  # (k, d)
            dots = cols @ self.feature_major(rows)
            dots = dots.T  # (m, k): one pass over X for all k columns
        else:
            data = self.X if rows is None else _take_rows(self.X, rows)
            dots = _matmul_t(data, _take_rows(self.X, index))
        sq_rows = self.sq if rows is None else self.sq.index_select(0, rows)
        return self.kernel.from_dots(dots, sq_rows.unsqueeze(1),
                                     self.sq.index_select(0, index).unsqueeze(0))

    def _columns_torch(self, index: Tensor, rows: Tensor | None) -> Tensor:
        kvals = self.kernel_block(index, rows)
        y_rows = self.y if rows is None else self.y.index_select(0, rows)
        out = y_rows.unsqueeze(1) * self.y.index_select(0, index).unsqueeze(0) * (kvals + 1.0)
        # + delta_ij / C_j on the diagonal entries inside the block.
        row_ids = (torch.arange(self.shape[0], device=self.device) if rows is None else rows)
        on_diag = row_ids.unsqueeze(1) == index.unsqueeze(0)
        return out + on_diag * self.inv_C.index_select(0, index).unsqueeze(0)

    def entry(self, i: Tensor, j: Tensor) -> Tensor:
        r""":math:`\tilde K_{ij}` for index tensors of shape (1,), in O(d) (no column)."""
        return self._columns_torch(j.reshape(1), i.reshape(1)).reshape(1)

    def block(self, rows: Tensor, cols: Tensor) -> Tensor:
        r""":math:`\tilde K_{\text{rows}, \text{cols}}` as a dense ``(len(rows), len(cols))``."""
        return self._columns_torch(cols.reshape(-1), rows.reshape(-1))

    def column_rows(self, i: int, rows: Tensor, out: Tensor | None = None) -> Tensor:
        r"""Column ``i`` restricted to ``rows`` (a working set), computed without caching."""
        out = torch.empty(rows.shape[0], dtype=self.dtype, device=self.device) if out is None \
            else out
        self._compute_column(int(i), out, rows)
        return out

    def matvec(self, v: Tensor, block: int | None = None) -> Tensor:
        r""":math:`\tilde K v`, as kernel blocks against the nonzeros of ``v`` in row chunks.

        On the host, a float64 ``v`` with at most :data:`ORDERED_MATVEC_MAX` nonzeros (a start
        point: the initial subset) is instead summed column by column from the host's own
        columns in one fixed order (:func:`torchfw.svm._kernel_cpu.combine_rows`), the arithmetic
        the compiled whole solve (:mod:`torchfw.svm._dense`) repeats on the rows of its matrix,
        so that both paths start from the same bits.
        """
        nz = torch.nonzero(v).squeeze(1)
        out = torch.zeros(self.shape[0], dtype=v.dtype, device=v.device)
        if nz.numel() == 0:
            return out
        if self._host_ok and v.dtype == torch.float64 and nz.numel() <= ORDERED_MATVEC_MAX:
            cols = self.host_columns(nz.tolist())
            _kernel_cpu.combine_rows(cols, v.index_select(0, nz).numpy(), out.numpy())
            return out
        itemsize = torch.finfo(self.dtype).bits // 8
        col_chunk = max(1, min(nz.numel(), int(self.memory_budget // (4 * itemsize
                                                                     * self.shape[0]))))
        for start in range(0, nz.numel(), col_chunk):
            idx = nz[start:start + col_chunk]
            out += (self.columns(idx).to(v.dtype) @ v.index_select(0, idx))
        return out

    def host_columns(self, index, rows=None) -> np.ndarray:
        """Host columns ``index`` as a ``(len(index), m)`` array (rows ``rows`` only if given).

        Copied out of the column cache one by one (a later insertion may reuse an earlier
        column's slot).
        """
        index = [int(i) for i in index]
        n = self.shape[0] if rows is None else len(rows)
        out = np.empty((len(index), n), dtype=self._np_dtype)
        for a, i in enumerate(index):
            column = self.column(i).numpy()
            out[a] = column if rows is None else column[rows]
        return out

    def start_block(self, index: np.ndarray) -> np.ndarray:
        r""":math:`\tilde K_{\text{index}, \text{index}}` in float64, for an exact start solve.

        On the host, from the host's own columns (the values the compiled whole solve of
        :mod:`torchfw.svm._dense` reads from its matrix); elsewhere, one kernel block.
        """
        if self._host_ok:
            return self.host_columns(index, index).astype(np.float64)
        idx = torch.from_numpy(np.asarray(index, dtype=np.int64)).to(self.device)
        return self.block(idx, idx).double().cpu().numpy()

    def compact_subset(self, capacity: int) -> CompactSubset | None:
        """A growing working set of examples stored compactly (host execution), or None."""
        return CompactSubset(self, capacity) if self._host_arrays() is not None else None


class CompactSubset:
    r"""A growing subset of the examples with its own contiguous feature-major copy.

    Streaming solvers need columns of :math:`\tilde K` restricted to their working set, which
    grows one example at a time (host execution: compiled, or NumPy while the compiled kernels
    are deferred). Gathering scattered examples for every column costs more than the
    arithmetic, so the subset keeps its members' features, norms, labels and ``1/C`` in compact
    arrays (appending is O(d)) and restricted columns run the same compiled kernel as full ones.
    """

    def __init__(self, op: SVMDualOperator, capacity: int):
        arrays = op._host_arrays()
        if arrays is None:
            raise ValueError("a compact subset needs the operator's host arrays (CPU, with a "
                             "feature-major copy of X)")
        self._xfm_all, self._sq_all, self._y_all = arrays[:3]
        d = self._xfm_all.shape[0]
        self.op = op
        self.size = 0
        dtype = op._np_dtype
        self.xfm = np.zeros((d, capacity), dtype=self._xfm_all.dtype)
        self.sq = np.zeros(capacity, dtype=dtype)
        self.y = np.zeros(capacity, dtype=dtype)
        self.scratch = np.empty(capacity, dtype=dtype)
        self.bits = np.empty(capacity, dtype=np.int32)
        self.buffer = np.empty(capacity, dtype=dtype)

    def add(self, i: int) -> None:
        """Append example ``i``."""
        n = self.size
        self.xfm[:, n] = self._xfm_all[:, i]
        self.sq[n] = self._sq_all[i]
        self.y[n] = self._y_all[i]
        self.size = n + 1

    def column(self, i: int) -> np.ndarray:
        r""":math:`\tilde K_{S, i}` over the current members (a view into a reused buffer).

        The ``delta_ij / C`` term is not included: a member's own diagonal entry is added by the
        caller, which knows where ``i`` sits in the subset. The compiled loops, or their NumPy
        forms for an operator built while those are deferred
        (:meth:`SVMDualOperator._compute_column`).
        """
        n = self.size
        op = self.op
        nzf, nzv = op._row_nonzeros(i)
        _kernel_cpu.column_into(op.kernel.code, self.xfm, nzf, nzv, self.sq,
                                float(self._sq_all[i]), op.kernel.gamma, op.kernel.coef0,
                                op.kernel.degree, self.y, float(self._y_all[i]), 0.0, -1,
                                self.scratch[:n], self.bits[:n], self.buffer[:n], n,
                                compiled=op._host_ok)
        return self.buffer[:n]


class OneVsRestOperator:
    r"""The ``B`` L2-SVM dual matrices of a one-vs-rest problem, as one batched operator.

    Problem ``b`` has labels ``Y[b]`` in :math:`\{-1,+1\}` and
    :math:`\tilde K^{(b)}_{ij} = Y_{bi} Y_{bj} (k(x_i, x_j) + 1) + \delta_{ij} / C_{bi}`. All
    problems share the kernel values, so the ``B`` (or ``2B``) columns an iteration needs come
    from one product with ``X``. Implements the batched-operator protocol of
    :mod:`torchfw.optimizers.batched`.
    """

    def __init__(self, X: Tensor, Y: Tensor, kernel: Kernel, C: float | Tensor = 1.0, *,
                 dtype: torch.dtype = torch.float32, memory_budget: float = 1024.0):
        m = X.shape[0]
        if Y.dim() != 2 or Y.shape[1] != m:
            raise ValueError(f"Y must have shape (B, {m}), got {tuple(Y.shape)}")
        # The storage (feature-major X, norms) of a single-problem operator; its labels are
        # unused here.
        self.base = SVMDualOperator(X, torch.ones(m, device=X.device), kernel, 1.0, dtype=dtype,
                                    cache_size=2 * m * 8 / 2**20 + 1e-3,
                                    memory_budget=memory_budget)
        self.Y = Y.to(device=X.device, dtype=dtype)
        if isinstance(C, Tensor):
            self.inv_C = (1.0 / C.to(device=X.device, dtype=dtype)).expand(Y.shape).contiguous()
        else:
            self.inv_C = torch.full(Y.shape, 1.0 / check_positive("C", C), dtype=dtype,
                                    device=X.device)
        self.shape = (m, m)
        self.dtype = dtype
        self.device = X.device
        self.B = Y.shape[0]
        self._arange = torch.arange(m, device=X.device)

    def columns_batched(self, index: Tensor) -> Tensor:
        """``(B, N)`` columns for ``index`` of shape ``(B,)``, or ``(B, 2, N)`` for ``(B, 2)``."""
        flat = index.reshape(-1)
        kvals = self.base.kernel_block(flat).T.reshape(*index.shape, -1)  # (B[, 2], m)
        y_idx = self.Y.gather(1, index.reshape(self.B, -1)).reshape(index.shape)
        y_rows = self.Y if index.dim() == 1 else self.Y.unsqueeze(1)
        inv_c = self.inv_C.gather(1, index.reshape(self.B, -1)).reshape(index.shape)
        out = y_rows * y_idx.unsqueeze(-1) * (kvals + 1.0)
        on_diag = self._arange == index.unsqueeze(-1)
        return out + on_diag * inv_c.unsqueeze(-1)

    def diagonal_batched(self) -> Tensor:
        return (self.base.kernel.diagonal(self.base.sq) + 1.0).unsqueeze(0) + self.inv_C

    def entry_batched(self, i: Tensor, j: Tensor) -> Tensor:
        xi = self.base.feature_major(i) if self.base.xfm is not None else None
        if xi is not None:
            dots = (xi * self.base.feature_major(j)).sum(0)
        else:
            dots = (_take_rows(self.base.X, i).to_dense() *
                    _take_rows(self.base.X, j).to_dense()).sum(1)
        sq = self.base.sq
        k = self.base.kernel.from_dots(dots, sq.index_select(0, i), sq.index_select(0, j))
        yi = self.Y.gather(1, i[:, None])[:, 0]
        yj = self.Y.gather(1, j[:, None])[:, 0]
        return yi * yj * (k + 1.0) + (i == j) * self.inv_C.gather(1, i[:, None])[:, 0]

    def matvec_batched(self, W: Tensor) -> Tensor:
        """Row ``b`` is :math:`\tilde K^{(b)} W_b`, in kernel blocks over the joint support."""
        support = torch.nonzero((W != 0).any(0)).squeeze(1)
        V = (self.Y.to(W.dtype) * W).index_select(1, support)  # (B, |S|)
        out = torch.zeros_like(W)
        chunk = max(1, int(self.base.memory_budget // (4 * 8 * max(1, self.shape[0]))))
        for start in range(0, support.numel(), chunk):
            idx = support[start:start + chunk]
            kb = self.base.kernel_block(idx).to(W.dtype) + 1.0  # (m, c)
            out += V[:, start:start + chunk] @ kb.T
        return self.Y.to(W.dtype) * out + W * self.inv_C.to(W.dtype)
