"""Conversion and validation of estimator inputs.

Estimators accept NumPy arrays, SciPy sparse matrices, and torch tensors (dense or sparse CSR).
Everything becomes a torch tensor on the requested device; a tensor input keeps its device unless
``device=`` says otherwise. Invalid inputs raise early with a message naming the argument.
"""

from __future__ import annotations

import numbers

import numpy as np
import torch
from torch import Tensor

from ._validation import check_finite

__all__ = ["as_matrix", "as_labels", "n_features_of"]


def _is_scipy_sparse(X) -> bool:
    return hasattr(X, "tocsr") and hasattr(X, "nnz") and not isinstance(X, Tensor)


def as_matrix(X, *, name: str = "X", device=None, dtype: torch.dtype | None = None,
              allow_sparse: bool = True) -> Tensor:
    """Return ``X`` as a 2-d float tensor (dense or sparse CSR), validated.

    Parameters
    ----------
    X : array-like, scipy.sparse matrix or Tensor
    device : torch.device, optional
        Target device; default: the tensor's own device, or CPU for other inputs.
    dtype : torch.dtype, optional
        Target floating dtype; default: keep a floating tensor's dtype, else float32.
    allow_sparse : bool
        If False, sparse inputs are densified.
    """
    if isinstance(X, Tensor):
        tensor = X.detach()
        if tensor.layout not in (torch.strided, torch.sparse_csr):
            if tensor.layout in (torch.sparse_coo, torch.sparse_csc):
                tensor = tensor.to_sparse_csr()
            else:
                raise TypeError(f"{name}: unsupported tensor layout {tensor.layout}")
    elif _is_scipy_sparse(X):
        csr = X.tocsr()
        csr.sum_duplicates()
        if csr.indices.size and (csr.indices.min() < 0 or csr.indices.max() >= csr.shape[1]):
            raise ValueError(f"{name}: sparse matrix has column indices outside "
                             f"[0, {csr.shape[1]})")
        tensor = torch.sparse_csr_tensor(
            torch.from_numpy(np.asarray(csr.indptr, dtype=np.int64)),
            torch.from_numpy(np.asarray(csr.indices, dtype=np.int64)),
            torch.from_numpy(np.asarray(csr.data)), size=csr.shape,
            check_invariants=False)  # checked below by _check_csr, with a clearer message
    else:
        try:
            array = np.asarray(X)
        except Exception as exc:  # noqa: BLE001 - report any conversion failure clearly
            raise TypeError(f"{name} could not be converted to an array: {exc}") from None
        if array.dtype == object or not (np.issubdtype(array.dtype, np.number)
                                         or array.dtype == bool):
            raise TypeError(f"{name} must be numeric, got an array of dtype {array.dtype}")
        tensor = torch.from_numpy(np.ascontiguousarray(array))
    if tensor.dim() != 2:
        raise ValueError(f"{name} must be 2-d (n_samples, n_features), got shape "
                         f"{tuple(tensor.shape)}")
    if tensor.shape[0] == 0 or tensor.shape[1] == 0:
        raise ValueError(f"{name} is empty (shape {tuple(tensor.shape)})")
    if dtype is None:
        values_dtype = tensor.values().dtype if tensor.layout == torch.sparse_csr else \
            tensor.dtype
        dtype = values_dtype if values_dtype in (torch.float32, torch.float64) else torch.float32
    if tensor.layout == torch.sparse_csr:
        _check_csr(tensor, name)
        tensor = torch.sparse_csr_tensor(tensor.crow_indices().to(torch.int64),
                                         tensor.col_indices().to(torch.int64),
                                         tensor.values().to(dtype), size=tensor.shape,
                                         check_invariants=False)  # _check_csr just ran
        if not allow_sparse:
            tensor = tensor.to_dense()
    else:
        tensor = tensor.to(dtype)
    if device is not None:
        tensor = tensor.to(device)
    check_finite(name, tensor)
    return tensor


def _check_csr(X: Tensor, name: str) -> None:
    crow = X.crow_indices()
    col = X.col_indices()
    m, d = X.shape
    if crow.numel() != m + 1 or int(crow[0]) != 0 or int(crow[-1]) != col.numel() or \
            bool((crow.diff() < 0).any()):
        raise ValueError(f"{name}: malformed CSR row pointers")
    if col.numel() and (int(col.min()) < 0 or int(col.max()) >= d):
        raise ValueError(f"{name}: sparse matrix has column indices outside [0, {d})")


def as_labels(y, n_samples: int, *, name: str = "y") -> np.ndarray:
    """Return labels as a 1-d NumPy array of length ``n_samples`` (any hashable values)."""
    if isinstance(y, Tensor):
        y = y.detach().cpu().numpy()
    array = np.asarray(y)
    if array.ndim == 2 and array.shape[1] == 1:
        array = array.ravel()
    if array.ndim != 1:
        raise ValueError(f"{name} must be 1-d, got shape {array.shape}")
    if array.shape[0] != n_samples:
        raise ValueError(f"X has {n_samples} samples but {name} has {array.shape[0]}")
    if np.issubdtype(array.dtype, np.floating) and not np.isfinite(array).all():
        raise ValueError(f"{name} contains NaN or infinite values")
    return array


def n_features_of(X) -> int:
    """Number of columns of a validated matrix."""
    return int(X.shape[1])


def as_positive_float(name: str, value) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not value > 0 or \
            not np.isfinite(value):
        raise ValueError(f"{name} must be a positive finite number, got {value!r}")
    return float(value)


def take_rows(X: Tensor, rows: Tensor) -> Tensor:
    """Rows ``rows`` of a dense or CSR matrix (CSR stays CSR; torch has no CSR index_select)."""
    if X.layout != torch.sparse_csr:
        return X.index_select(0, rows)
    crow = X.crow_indices()
    starts = crow.index_select(0, rows)
    counts = crow.index_select(0, rows + 1) - starts
    new_crow = torch.zeros(rows.numel() + 1, dtype=crow.dtype, device=X.device)
    torch.cumsum(counts, 0, out=new_crow[1:])
    total = int(new_crow[-1])
    offsets = torch.arange(total, device=X.device) - torch.repeat_interleave(new_crow[:-1],
                                                                            counts)
    positions = torch.repeat_interleave(starts, counts) + offsets
    return torch.sparse_csr_tensor(new_crow, X.col_indices().index_select(0, positions),
                                   X.values().index_select(0, positions),
                                   size=(rows.numel(), X.shape[1]),
                                   check_invariants=False)  # rows of a valid matrix
