r"""The Gram matrix of a design, :math:`X^\top X / n`, as a lazy column operator.

Frank-Wolfe over the L1 ball (the constrained Lasso, Jaggi 2013) touches one coordinate per
iteration, so the solver's incremental engine needs one column of the Hessian

.. math:: Q = \tfrac1n X_c^\top X_c, \qquad X_c = X - \mathbf 1 \bar x^\top ,

per iteration (:math:`\bar x` the column means when an intercept is fitted, else zero). Column
``i`` is one matrix-vector product, :math:`Q e_i = X_c^\top (X_c e_i) / n`, in
O(nnz(X)) operations; the ``p x p`` matrix is never formed, so ``p = 100,000`` features cost
memory linear in ``p``. Frequently used columns are kept under a byte budget (away, pairwise and
SWAP steps revisit the active features, and a regularization path revisits them at every grid
point).

Centering is implicit for sparse ``X`` (which stays sparse):
:math:`X_c^\top X_c e_i = X^\top X e_i - n \bar x_i \bar x`. Dense ``X`` is centered once, in a
copy, which is more accurate when the means are large.
"""

from __future__ import annotations

import torch
from torch import Tensor

from ..objectives import ColumnOperator
from ..utils.column_cache import CachedColumnsMixin, ColumnCache
from ..utils.data import csr_tensor, to_csr
from ..utils.data import take_rows as _take_rows
from ..utils.validation import check_nonnegative, check_positive

__all__ = ["GramOperator"]

_CSR = torch.sparse_csr


class GramOperator(CachedColumnsMixin, ColumnOperator):
    r""":math:`Q = X_c^\top X_c / n` for dense or sparse ``X``, columns on demand.

    Parameters
    ----------
    X : Tensor
        Design matrix ``(n_samples, n_features)``, dense or sparse CSR, on the device the solver
        will use. It is not modified.
    center : bool, default False
        Center the columns (the Hessian of a least-squares fit with an intercept).
    dtype : torch.dtype, default float64
        Precision of the stored design and of the columns.
    cache_size : float, default 256
        Column cache budget in MB (host execution; CUDA runs recompute columns, which is one
        matrix-vector product on the device). ``0`` disables the cache.
    scale : float, optional
        The operator is ``scale * X_c^T X_c``; default ``1 / n_samples``.

    Attributes
    ----------
    means : Tensor
        Column means :math:`\bar x` (zeros without centering), shape ``(n_features,)``.
    n_samples, n_features : int

    Notes
    -----
    Dense ``X`` is used in its own layout (copied only to centre it or change its dtype):
    :math:`X^\top u` is one transposed BLAS gemv. Sparse ``X`` is kept as CSR next to a CSR
    copy of :math:`X^\top`, so that column ``i`` of ``X`` is a contiguous row and both
    :math:`X^\top u` and :math:`X w` are single sparse matrix-vector products. No Python loop
    runs over features.
    """

    def __init__(self, X: Tensor, *, center: bool = False, dtype: torch.dtype = torch.float64,
                 cache_size: float = 256.0, scale: float | None = None):
        if not isinstance(X, Tensor):
            raise TypeError(f"X must be a tensor, got {type(X).__name__}")
        if X.dim() != 2:
            raise ValueError(f"X must be 2-d, got shape {tuple(X.shape)}")
        n, p = X.shape
        if n == 0 or p == 0:
            raise ValueError(f"X is empty (shape {tuple(X.shape)})")
        if dtype not in (torch.float32, torch.float64):
            raise ValueError(f"dtype must be torch.float32 or torch.float64, got {dtype}")
        self.n_samples, self.n_features = n, p
        self.shape = (p, p)
        self.dtype = dtype
        self.device = X.device
        self.sparse = X.layout == _CSR
        self.center = bool(center)
        if self.sparse:
            values = X.values().to(dtype)
            X = csr_tensor(X.crow_indices(), X.col_indices(), values,
                                        size=X.shape, check_invariants=False)  # same structure
            # Both orientations are kept: products by X^T u and by X w each read CSR rows
            # (torch's product by a transposed CSR matrix is ~30x slower).
            self.X = X
            # X^T as CSR = X as CSC: rows of XT are the columns of X, contiguous.
            csc = X.to_sparse_csc()
            self._ccol = csc.ccol_indices()
            self._rows = csc.row_indices()
            self._vals = csc.values()
            self.XT = csr_tensor(self._ccol, self._rows, self._vals, size=(p, n))
            if self.center:
                ones = torch.ones(n, dtype=dtype, device=self.device)
                self.means = (self.XT @ ones) / n
            else:
                self.means = torch.zeros(p, dtype=dtype, device=self.device)
            sq = torch.zeros(p, dtype=dtype, device=self.device)
            counts = self._ccol.diff()
            owner = torch.repeat_interleave(torch.arange(p, device=self.device), counts)
            sq.index_add_(0, owner, self._vals * self._vals)
            self._diag = sq - n * self.means * self.means
            self._ccol_list = self._ccol.tolist() if self.device.type == "cpu" else None
        else:
            # Dense X is used as it is (no copy unless a dtype change or centring needs one):
            # X^T u is a transposed BLAS gemv, as fast as on a feature-major copy, and a
            # transposing copy of a large X costs more than a dozen columns.
            X = X.to(dtype)
            if self.center:
                self.means = X.mean(dim=0)
                X = X - self.means  # one copy, in X's own layout
            else:
                self.means = torch.zeros(p, dtype=dtype, device=self.device)
            self.X = X
            self.XT = X.T  # a view
            self._diag = torch.linalg.vector_norm(X, dim=0) ** 2
        self.scale = 1.0 / n if scale is None else check_positive("scale", scale)
        # Centering can leave -1e-17 on a constant column; the diagonal of a PSD matrix is >= 0.
        self._diag = (self._diag * self.scale).clamp_min_(0)
        cache_bytes = check_nonnegative("cache_size", cache_size) * 2**20
        self.cache_bytes = cache_bytes
        column_bytes = p * torch.finfo(dtype).bits // 8
        slots = int(cache_bytes // column_bytes)
        # Two slots at least when caching at all: a pairwise step holds two columns at once.
        self.cache_slots = min(p, slots) if slots >= 2 else 0
        self._cache = ColumnCache(self.cache_slots, p, n_keys=p, dtype=dtype, device=self.device)

    # -- products with X_c ---------------------------------------------------------------------

    def feature(self, i: int) -> Tensor:
        r"""Column ``i`` of the centered design, :math:`X_c e_i`, as a dense ``(n,)`` tensor."""
        if not self.sparse:
            return self.X[:, i]
        if self._ccol_list is not None:
            lo, hi = self._ccol_list[i], self._ccol_list[i + 1]
        else:  # a device tensor: two host reads (host execution on CUDA only)
            lo, hi = int(self._ccol[i]), int(self._ccol[i + 1])
        u = torch.zeros(self.n_samples, dtype=self.dtype, device=self.device)
        u[self._rows[lo:hi]] = self._vals[lo:hi]
        if self.center:
            u -= self.means[i]
        return u

    def rmatvec(self, u: Tensor) -> Tensor:
        r""":math:`X_c^\top u` for ``u`` of shape ``(n,)`` (or ``(n, k)``)."""
        out = self.XT @ u.to(self.dtype)
        if self.sparse and self.center:
            total = u.to(self.dtype).sum(dim=0)
            out = out - (self.means.unsqueeze(1) * total if out.dim() == 2
                         else self.means * total)
        return out

    def design_matvec(self, w: Tensor) -> Tensor:
        r""":math:`X_c w` for ``w`` of shape ``(p,)``.

        A sparse ``w`` (a Lasso solution) only reads the columns of its support.
        """
        w = w.to(self.dtype)
        support = torch.nonzero(w).squeeze(1)
        if 4 * support.numel() < self.n_features:
            if self.sparse:
                part = _take_rows(self.XT, support)  # (k, n): the support's columns of X
                out = part.to_dense().T @ w.index_select(0, support)
            else:
                out = self.X.index_select(1, support) @ w.index_select(0, support)
        else:
            out = self.X @ w
        if self.sparse and self.center:
            out = out - (self.means * w).sum()
        return out

    def restrict(self, index: Tensor, *, cache_size: float | None = None) -> GramOperator:
        r"""The Gram operator of the columns ``index`` of ``X`` (same centring and scale).

        A copy of those columns is made (``n x k``), so that a column of the restricted operator
        costs ``n k`` operations instead of ``n p``: the working sets of :class:`torchfw.Lasso`.
        """
        index = index.reshape(-1).to(self.device)
        budget = self.cache_bytes / 2**20 if cache_size is None else cache_size
        if self.sparse:
            part = _take_rows(self.XT, index)  # X_sub^T as CSR = X_sub as CSC
            # Rows of a valid CSR matrix: checking the invariants again would only cost time
            # (and leaving the choice implicit makes torch warn the user).
            sub = torch.sparse_csc_tensor(part.crow_indices(), part.col_indices(),
                                          part.values(), size=(self.n_samples, index.numel()),
                                          check_invariants=False)
            op = GramOperator(to_csr(sub), center=self.center, dtype=self.dtype,
                              cache_size=budget, scale=self.scale)
        else:
            # Dense X is stored centred already: the restricted copy needs no centring.
            op = GramOperator(self.X.index_select(1, index), center=False, dtype=self.dtype,
                              cache_size=budget, scale=self.scale)
            op.means = self.means.index_select(0, index)
            op.center = self.center
        return op

    # -- ColumnOperator ------------------------------------------------------------------------

    def diagonal(self) -> Tensor:
        r""":math:`Q_{ii} = \|X_c e_i\|^2 / n` (zero for an all-zero column)."""
        return self._diag

    def _compute(self, i: int, out: Tensor) -> None:
        if self.sparse:
            out.copy_(self.rmatvec(self.feature(i)))
        else:
            # One BLAS gemv straight into the cache slot (no temporary of size p).
            torch.mv(self.XT, self.X[:, i], out=out)
        out.mul_(self.scale)

    def column(self, i) -> Tensor:
        """Column ``i`` of :math:`Q` (cached for Python-int indices on the host)."""
        if isinstance(i, Tensor):
            if self.device.type == "cpu" and i.numel() == 1:
                i = int(i)
            else:
                return self.columns(i.reshape(1))[:, 0]
        i = int(i)
        cache = self._cache
        if self.cache_slots == 0:  # no caching: a fresh column each time
            out = torch.empty(self.n_features, dtype=self.dtype, device=self.device)
            cache.misses += 1
            self._compute(i, out)
            return out
        row = cache.lookup(i)
        if row is None:
            row, _ = cache.insert(i)
            self._compute(i, cache.buffer[row])
        return cache.buffer[row]

    def columns(self, index: Tensor) -> Tensor:
        """Columns ``index`` as a ``(p, k)`` tensor, without host reads (CUDA-graph safe)."""
        index = index.reshape(-1)
        if self.sparse:
            # torch has no row gather for CSR: build the k dense columns of X_c by a one-hot
            # product, X_c E_index = X E, still one sparse product and no host read.
            onehot = torch.zeros(self.n_features, index.numel(), dtype=self.dtype,
                                 device=self.device)
            onehot.scatter_(0, index.unsqueeze(0), 1.0)
            U = self.X @ onehot
            if self.center:
                U = U - self.means.index_select(0, index).unsqueeze(0)
        else:
            U = self.X.index_select(1, index)  # (n, k)
        return self.rmatvec(U) * self.scale

    def matvec(self, v: Tensor, block: int = 256) -> Tensor:
        r""":math:`Q v = X_c^\top (X_c v) / n`: two (sparse) matrix-vector products."""
        return (self.rmatvec(self.design_matvec(v)) * self.scale).to(v.dtype)

