"""Row access to the L2-SVM dual matrix from ``X``: the data side of the sampled storage.

:class:`KernelRows` computes rows and blocks of :math:`\tilde K_{ij} = y_iy_j(k(x_i,x_j)+1) +
\\delta_{ij}/C_i` from dense or CSR ``X`` on demand, holding nothing of size ``m`` but references
(:mod:`torchfw.optimizers._sampled` runs seed 002's randomized FW on it).
"""

from __future__ import annotations

import torch
from torch import Tensor

from .._data import take_rows

__all__ = ["KernelRows"]


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
    kernel : torchfw.kernels.Kernel
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
