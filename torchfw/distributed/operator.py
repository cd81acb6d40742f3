"""The sharded kernel operator: this rank's rows of the SVM dual matrix.

One concern: computing slices of kernel columns :math:`\tilde K_{\text{shard}, i}` on this
rank for atoms whose features arrive from any rank (:class:`ShardedSVMDualOperator`), and the
float64 entries :math:`\tilde K_{ij}` that every rank must compute identically.
"""

from __future__ import annotations

import numpy as np
import torch
from numpy.typing import DTypeLike
from torch import Tensor

from ..svm import _kernel_cpu
from ..svm.kernels import Kernel, SVMDualOperator
from ..utils import kernel_formulas as _kernel_formulas
from .comm import Communicator


def _kernel_scalar(kernel: Kernel, dot: float, sq_a: float, sq_b: float) -> float:
    """``k(a, b)`` from an inner product and squared norms, in float64 scalar arithmetic.

    Every rank evaluates the same expression on the same inputs, so the value is the same on all
    of them (the ranks' decisions depend on it). The formulas: :mod:`torchfw.utils.kernel_formulas`.
    """
    if kernel.name not in _kernel_formulas.CODES:  # pragma: no cover - make_kernel checks
        raise ValueError(f"unsupported kernel {kernel!r}")
    return _kernel_formulas.value(kernel.code, float(dot), float(sq_a), float(sq_b),
                                  float(kernel.gamma), float(kernel.coef0), kernel.degree)


class _Atom:
    """An atom's broadcast data: features (kernel dtype), label, squared norm, ``1/C``."""

    __slots__ = ("x", "x64", "nzf", "nzv", "y", "sq", "inv_c", "_x_t")

    def __init__(self, record: np.ndarray, dtype: DTypeLike):
        self.y, self.sq, self.inv_c = float(record[0]), float(record[1]), float(record[2])
        self.x64 = np.array(record[3:], dtype=np.float64)
        self.x = self.x64.astype(dtype)  # exact: the owner sent kernel-dtype values
        self.nzf = np.flatnonzero(self.x)
        self.nzv = self.x[self.nzf]
        self._x_t: Tensor | None = None

    def x_tensor(self, device, dtype) -> Tensor:
        x_t = self._x_t
        if x_t is None:
            x_t = self._x_t = torch.from_numpy(self.x).to(device=device, dtype=dtype)
        return x_t


class ShardedSVMDualOperator:
    r"""This rank's rows of the L2-SVM dual matrix :math:`\tilde K`, for a sharded data set.

    The rank holds the examples ``[offset, offset + n_local)`` of the global order (rank 0's
    shard first). Columns :math:`\tilde K_{\text{shard}, i}` are computed for any global atom
    ``i`` from its broadcast features (:class:`DistributedQuadraticEngine` moves them), with the
    same compiled kernel and the same storage as :class:`~torchfw.svm.kernels.SVMDualOperator`
    (which holds the shard). Creating the operator is a collective (the ranks exchange their
    shard sizes).

    Parameters
    ----------
    X : Tensor
        This rank's examples, dense ``(n_local, d)`` or sparse CSR; the same ``d`` on all ranks.
    y : Tensor
        Labels in ``{-1, +1}``, shape ``(n_local,)``.
    kernel : Kernel
    C : float or Tensor
        Regularization, or one value per local example.
    comm : Communicator, optional
        Default: a :class:`Communicator` on the world group.
    dtype : torch.dtype, default float32
        Precision of kernel values.
    memory_budget : float, default 1024
        MB for the shard's dense feature-major copy (see :class:`SVMDualOperator`).
    """

    def __init__(self, X: Tensor, y: Tensor, kernel: Kernel, C: float | Tensor = 1.0, *,
                 comm: Communicator | None = None, dtype: torch.dtype = torch.float32,
                 memory_budget: float = 1024.0):
        self.comm = comm or Communicator()
        n_local = int(X.shape[0]) if X.dim() == 2 else 0
        d = int(X.shape[1]) if X.dim() == 2 else 0
        sizes = self.comm.all_gather(np.array([n_local, d], dtype=np.int64), op="setup")
        if (sizes[:, 0] == 0).any():
            raise ValueError(f"every rank needs at least one example; shard sizes are "
                             f"{sizes[:, 0].tolist()}")
        if (sizes[:, 1] != sizes[0, 1]).any():
            raise ValueError(f"the shards have different numbers of features: "
                             f"{sizes[:, 1].tolist()}")
        itemsize = torch.finfo(dtype).bits // 8
        # The shard operator's own column cache is never used (columns are computed here from
        # broadcast features); it only has to pass the operator's two-column check.
        cache_mb = 2.5 * n_local * itemsize / 2**20
        self.local = SVMDualOperator(X, y, kernel, C, dtype=dtype, cache_size=cache_mb,
                                     memory_budget=memory_budget)
        self.kernel = kernel
        self.dtype = dtype
        self.device = self.local.device
        self.n_local = n_local
        self.n_features = d
        self.sizes = sizes[:, 0].copy()
        self.offsets = np.concatenate([[0], np.cumsum(self.sizes)])
        self.offset = int(self.offsets[self.comm.rank])
        self.shape = (int(self.offsets[-1]),) * 2
        self.max_local = int(self.sizes.max())
        xfm = self.local.xfm
        self.host = (self.device.type == "cpu" and xfm is not None and _kernel_cpu.HAVE_NUMBA)
        self._np_dtype = np.float64 if dtype == torch.float64 else np.float32
        if self.host:
            assert xfm is not None  # host implies the feature-major copy
            self._xfm_np = xfm.numpy()
            self._sq_np = self.local.sq.numpy()
            self._y_np = self.local.y.numpy()
            self._scratch = np.empty(n_local, dtype=self._np_dtype)
            self._bits = np.empty(n_local, dtype=np.int32)
        self._sq_host = self.local.sq.cpu().numpy()
        self._y_host = self.local.y.cpu().numpy()
        self._inv_c_host = self.local.inv_C.cpu().numpy()
        self._diag_host = self.local.diagonal().double().cpu().numpy()

    # -- ownership -----------------------------------------------------------------------------

    def owns(self, k: int) -> bool:
        """Whether global atom ``k`` is on this rank."""
        return self.offset <= k < self.offset + self.n_local

    def diagonal_local(self) -> np.ndarray:
        """:math:`\\tilde K_{kk}` for the local atoms (float64)."""
        return self._diag_host

    def write_features(self, local: int, out: np.ndarray) -> None:
        """Write ``[y, ||x||^2, 1/C, x...]`` of local example ``local`` into ``out``."""
        out[0] = self._y_host[local]
        out[1] = self._sq_host[local]
        out[2] = self._inv_c_host[local]
        xfm = self.local.xfm
        if self.host:
            out[3:] = self._xfm_np[:, local]
        elif xfm is not None:
            out[3:] = xfm[:, local].double().cpu().numpy()
        else:
            out[3:] = self.local.X[local].to_dense().double().cpu().numpy()

    def atom(self, record: np.ndarray) -> _Atom:
        return _Atom(record, self._np_dtype)

    # -- columns -------------------------------------------------------------------------------

    def column_into(self, atom: _Atom, k: int, out) -> None:
        r"""Write :math:`\tilde K_{\text{shard}, k}` into ``out`` (NumPy on the host path)."""
        diag_pos = k - self.offset if self.owns(k) else -1
        if self.host:
            kern = self.kernel
            _kernel_cpu.column_into(kern.code, self._xfm_np, atom.nzf, atom.nzv, self._sq_np,
                                    atom.sq, kern.gamma, kern.coef0, kern.degree, self._y_np,
                                    atom.y, atom.inv_c, diag_pos, self._scratch, self._bits, out)
            return
        x = atom.x_tensor(self.device, self.dtype)
        dots = self._dots(x.reshape(1, -1))[:, 0]
        sq_i = torch.tensor(atom.sq, dtype=self.dtype, device=self.device)
        kvals = self.kernel.from_dots(dots, self.local.sq, sq_i)
        out.copy_(self.local.y * atom.y * (kvals + 1.0))
        if diag_pos >= 0:
            out[diag_pos] += atom.inv_c

    def _dots(self, block: Tensor) -> Tensor:
        """Inner products of the local examples with the rows of ``block``: ``(n_local, k)``."""
        if self.local.xfm is not None:
            return (block @ self.local.feature_major()).T
        return torch.sparse.mm(self.local.X, block.T.contiguous())

    def columns_from(self, rows: np.ndarray) -> Tensor:
        r"""Columns for atoms given as rows ``[k, y, ||x||^2, 1/C, x...]``: ``(n_local, len)``.

        Mirrors :meth:`SVMDualOperator.columns` (PyTorch ops, kernel dtype), for full products.
        """
        t = torch.from_numpy(rows).to(self.device)
        idx = t[:, 0].to(torch.int64)
        block = t[:, 4:].to(self.dtype)
        dots = self._dots(block)
        sq_b = t[:, 2].to(self.dtype)
        kvals = self.kernel.from_dots(dots, self.local.sq.unsqueeze(1), sq_b.unsqueeze(0))
        out = self.local.y.unsqueeze(1) * t[:, 1].to(self.dtype).unsqueeze(0) * (kvals + 1.0)
        local_ids = torch.arange(self.n_local, device=self.device) + self.offset
        on_diag = local_ids.unsqueeze(1) == idx.unsqueeze(0)
        return out + on_diag * t[:, 3].to(self.dtype).unsqueeze(0)

    def entry(self, a: _Atom, b: _Atom, same: bool) -> float:
        r""":math:`\tilde K_{ab}` from two atoms' features (float64, identical on all ranks)."""
        kval = _kernel_scalar(self.kernel, float(np.dot(a.x64, b.x64)), a.sq, b.sq)
        return a.y * b.y * (kval + 1.0) + (a.inv_c if same else 0.0)

    def __repr__(self) -> str:
        return (f"{type(self).__name__}(shape={self.shape}, shard=[{self.offset}, "
                f"{self.offset + self.n_local}), rank={self.comm.rank}/{self.comm.size})")
