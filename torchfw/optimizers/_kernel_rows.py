"""Row access to the L2-SVM dual matrix from ``X``: the data side of the sampled storage.

:class:`KernelRows` computes rows and blocks of :math:`\tilde K_{ij} = y_iy_j(k(x_i,x_j)+1) +
\\delta_{ij}/C_i` from dense or CSR ``X`` on demand, holding nothing of size ``m`` but references
(:mod:`torchfw.optimizers._sampled` runs seed 002's randomized FW on it).
"""

from __future__ import annotations

import torch
from torch import Tensor

from ..utils.data import take_rows

__all__ = ["KernelRows"]

#: Tiles of :meth:`KernelRows.matvec`: at most this many rows of ``A``, and about this many
#: kernel values (512 KB in float32: temporaries that stay in a core's cache). Measured on the
#: 2-core Intel Xeon, one thread, 194 sampled a9a rows against 10,000 slots: tiles of 50k-130k
#: values all run in 6.3-6.5 ms; 400k values 8.1 ms, 800k 9.3 ms, the whole block 11.9 ms.
TILE_ROWS = 256
TILE_VALUES = 2**17


class KernelRows:
    r"""Row access to the SVM dual matrix :math:`\tilde K` from ``X`` (dense or CSR).

    Holds references to ``X``, ``y`` and ``1/C`` only (no copy of ``X`` and nothing else of
    size ``m``); kernel values are computed in ``dtype`` from dense blocks of rows.

    Parameters
    ----------
    X : Tensor
        ``(m, d)`` dense or sparse CSR.
    y : Tensor
        Labels in ``{-1, +1}``, shape ``(m,)``.
    kernel : torchfw.svm.kernels.Kernel
    C : float or Tensor
        Regularization, scalar or per example ``(m,)``.
    dtype : torch.dtype
        Precision of kernel values (float32 or float64); accumulations are float64.
    """

    def __init__(self, X: Tensor, y: Tensor, kernel, C, dtype=torch.float32):
        if X.dim() != 2 or X.shape[0] == 0 or X.shape[1] == 0:
            raise ValueError(f"X must be a non-empty 2-d matrix, got shape {tuple(X.shape)}")
        m = X.shape[0]
        if y.shape != (m,):
            raise ValueError(f"y must have shape ({m},), got {tuple(y.shape)}")
        if dtype not in (torch.float32, torch.float64):
            raise ValueError(f"dtype must be torch.float32 or torch.float64, got {dtype}")
        self.X, self.kernel, self.dtype = X, kernel, dtype
        self.m, self.d = X.shape
        self.device = X.device
        self.csr = X.layout == torch.sparse_csr
        self.y = y.to(device=X.device)
        self.C: Tensor | float
        if isinstance(C, Tensor):
            if C.shape != (m,) or bool((C <= 0).any()):
                raise ValueError("a per-example C must have shape (m,) and positive entries")
            self.C = C.to(device=X.device)
        else:
            if not C > 0:
                raise ValueError(f"C must be positive, got {C!r}")
            self.C = float(C)

    def rows(self, idx: Tensor):
        """Dense rows ``X[idx]`` in ``dtype``, their squared norms, labels and ``1/C`` (float64)."""
        rows = take_rows(self.X, idx)
        rows = (rows.to_dense() if self.csr else rows).to(self.dtype)
        sq = (rows * rows).sum(1)
        y = self.y.index_select(0, idx).to(self.dtype)
        if isinstance(self.C, Tensor):
            inv_c = 1.0 / self.C.index_select(0, idx).to(torch.float64)
        else:
            inv_c = torch.full((idx.numel(),), 1.0 / self.C, dtype=torch.float64,
                               device=self.device)
        return rows, sq, y, inv_c

    def block(self, A: Tensor, sq_a: Tensor, B: Tensor, sq_b: Tensor) -> Tensor:
        """Plain kernel values ``k(A_r, B_c)`` as an ``(len(A), len(B))`` matrix."""
        return self.kernel.from_dots(A @ B.T, sq_a.unsqueeze(1), sq_b.unsqueeze(0))

    def matvec(self, A: Tensor, sq_a: Tensor, B: Tensor, sq_b: Tensor, u: Tensor) -> Tensor:
        r"""Kernel block times a vector, :math:`\sum_c k(A_r, B_c)\,u_c` (float64).

        The same values as ``block(A, sq_a, B, sq_b).double() @ u`` (up to the float64 order
        of summation), computed tile by tile: tiles of at most :data:`TILE_ROWS` rows of ``A``
        and about :data:`TILE_VALUES` kernel values, each reduced into the float64 result at
        once. The kernel's elementwise formula makes several temporaries the size of the
        block; at the sampled storage's size (194 x 10,000 values: 7.8 MB each) every one is
        a fresh allocation whose pages are faulted in on first touch, and the formula cost
        four times the matrix product (a9a's 123 features, one thread, Intel Xeon: 11.9 ms
        for the whole block against 6.3 ms in tiles of 194 x 512). A tile's temporaries stay
        in cache and are reused by the allocator.

        Parameters
        ----------
        A, B : Tensor
            Dense rows in ``dtype``, shapes ``(r, d)`` and ``(c, d)``.
        sq_a, sq_b : Tensor
            Their squared norms, ``(r,)`` and ``(c,)``.
        u : Tensor
            ``(c,)``, float64.

        Returns
        -------
        Tensor
            ``(r,)``, float64.
        """
        r, c = A.shape[0], B.shape[0]
        out = torch.zeros(r, dtype=torch.float64, device=A.device)
        if r == 0 or c == 0:
            return out
        if A.device.type != "cpu":  # one kernel launch per block beats many small ones
            return self.block(A, sq_a, B, sq_b).to(torch.float64) @ u
        rows = min(r, TILE_ROWS)
        cols = max(1, TILE_VALUES // rows)
        for lo in range(0, r, rows):
            hi = min(r, lo + rows)
            a, sa = A[lo:hi], sq_a[lo:hi]
            for clo in range(0, c, cols):
                chi = min(c, clo + cols)
                k = self.block(a, sa, B[clo:chi], sq_b[clo:chi])
                out[lo:hi] += k.to(torch.float64) @ u[clo:chi]
        return out
