"""Conversion and validation of estimator inputs.

Estimators accept NumPy arrays, SciPy sparse matrices, and torch tensors (dense or sparse CSR).
Everything becomes a torch tensor on the requested device; a tensor input keeps its device unless
``device=`` says otherwise. Invalid inputs raise early with a message naming the argument.
"""

from __future__ import annotations

import math
import numbers
import warnings

import numpy as np
import torch
from torch import Tensor

from .threads import one_thread
from .validation import check_finite

__all__ = ["as_matrix", "as_labels", "as_target", "as_sample_weight", "feature_names_of",
           "n_features_of", "csr_tensor", "to_csr"]

#: The phrases below are scikit-learn's own (``sklearn.utils.validation``), kept word for word
#: where its estimator checks look for them, so that a user moving between the two libraries
#: reads the same message for the same mistake.
_COMPLEX = "Complex data not supported"
_Y_NONE = ("{estimator} requires y to be passed, but the target y is None (fit needs one label "
           "or target per sample)")
_RESHAPE = ("{name} must be 2-d (n_samples, n_features), got shape {shape}. Reshape your data "
            "either using array.reshape(-1, 1) if your data has a single feature or "
            "array.reshape(1, -1) if it contains a single sample.")
_COLUMN_Y = ("A column-vector y was passed when a 1d array was expected. Please change the shape "
             "of y to (n_samples,), for example using ravel().")


def csr_tensor(crow: Tensor, col: Tensor, values: Tensor, size, *,
               check_invariants: bool = False) -> Tensor:
    """``torch.sparse_csr_tensor`` without torch's notices to the user.

    torch warns once per process that sparse CSR support is "in beta", and warns when invariant
    checks are left implicit; neither is actionable for a torchfw user, whose data torchfw
    validates itself (:func:`as_matrix`). Pass ``check_invariants=True`` for untrusted
    structure (a file), as the model loaders do.
    """
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Sparse CSR tensor support is in beta")
        return torch.sparse_csr_tensor(crow, col, values, size=size,
                                       check_invariants=check_invariants)


def to_csr(tensor: Tensor) -> Tensor:
    """``tensor.to_sparse_csr()`` without torch's beta notice (see :func:`csr_tensor`)."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Sparse CSR tensor support is in beta")
        return tensor.to_sparse_csr()


def _is_scipy_sparse(X) -> bool:
    return hasattr(X, "tocsr") and hasattr(X, "nnz") and not isinstance(X, Tensor)


def _numeric_array(X, name: str) -> np.ndarray:
    """``X`` as a real NumPy array: complex refused, object arrays of numbers converted.

    An object array (a DataFrame of mixed columns, ``X.astype(object)``) is converted with
    ``astype(float64)``, whose TypeError names the offending element.
    """
    try:
        array = np.asarray(X)
    except Exception as exc:  # noqa: BLE001 - report any conversion failure clearly
        raise TypeError(f"{name} could not be converted to an array: {exc}") from None
    if np.iscomplexobj(array):
        raise ValueError(f"{_COMPLEX}: {name} has complex dtype {array.dtype}; pass real "
                         f"numbers")
    if array.dtype == object:
        try:
            array = array.astype(np.float64)
        except TypeError as exc:
            raise TypeError(f"{name} holds a value that is not a number: {exc}") from None
        except ValueError as exc:
            raise ValueError(f"{name} holds a value that is not a number: {exc}") from None
    if not (np.issubdtype(array.dtype, np.number) or array.dtype == bool):
        raise TypeError(f"{name} must be numeric, got an array of dtype {array.dtype}")
    return array


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
    if X is None:
        raise ValueError(f"{name} is None; expected an array of shape (n_samples, n_features)")
    if isinstance(X, Tensor):
        if X.is_complex():
            raise ValueError(f"{_COMPLEX}: {name} has dtype {X.dtype}; pass real numbers")
        tensor = X.detach()
        if tensor.layout not in (torch.strided, torch.sparse_csr):
            if tensor.layout in (torch.sparse_coo, torch.sparse_csc):
                tensor = to_csr(tensor)
            else:
                raise TypeError(f"{name}: unsupported tensor layout {tensor.layout}")
    elif _is_scipy_sparse(X):
        csr = X.tocsr()
        if np.iscomplexobj(csr.data):
            raise ValueError(f"{_COMPLEX}: {name} has complex dtype {csr.dtype}; pass real "
                             f"numbers")
        csr.sum_duplicates()
        if csr.indices.size and (csr.indices.min() < 0 or csr.indices.max() >= csr.shape[1]):
            raise ValueError(f"{name}: sparse matrix has column indices outside "
                             f"[0, {csr.shape[1]})")
        tensor = csr_tensor(
            torch.from_numpy(np.asarray(csr.indptr, dtype=np.int64)),
            torch.from_numpy(np.asarray(csr.indices, dtype=np.int64)),
            torch.from_numpy(np.asarray(csr.data)), size=csr.shape,
            check_invariants=False)  # checked below by _check_csr, with a clearer message
    else:
        array = _numeric_array(X, name)
        if array.dtype == np.float16:  # torch has no float16 matmul on the CPU
            array = array.astype(np.float32)
        tensor = torch.from_numpy(np.ascontiguousarray(array))
    if tensor.dim() != 2:
        raise ValueError(_RESHAPE.format(name=name, shape=tuple(tensor.shape)))
    shape = tuple(tensor.shape)
    if shape[0] == 0:
        raise ValueError(f"{name} is empty: found array with 0 sample(s) (shape={shape}) while "
                         f"a minimum of 1 is required.")
    if shape[1] == 0:
        raise ValueError(f"{name} is empty: found array with 0 feature(s) (shape={shape}) "
                         f"while a minimum of 1 is required.")
    if dtype is None:
        values_dtype = tensor.values().dtype if tensor.layout == torch.sparse_csr else \
            tensor.dtype
        dtype = values_dtype if values_dtype in (torch.float32, torch.float64) else torch.float32
    if tensor.layout == torch.sparse_csr:
        _check_csr(tensor, name)
        tensor = csr_tensor(tensor.crow_indices().to(torch.int64),
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
    crow_t, col_t = X.crow_indices(), X.col_indices()
    m, d = X.shape
    if crow_t.device.type == "cpu":
        # NumPy reductions on the CPU (torch's open an OpenMP region per call, ~8 ms each on a
        # loaded 2-core machine; see check_finite)
        crow, col = crow_t.numpy(), col_t.numpy()
        rows_ok = crow.shape[0] == m + 1 and int(crow[0]) == 0 and \
            int(crow[-1]) == col.shape[0] and not bool((np.diff(crow) < 0).any())
        cols_ok = not col.shape[0] or (int(col.min()) >= 0 and int(col.max()) < d)
    else:
        rows_ok = crow_t.numel() == m + 1 and int(crow_t[0]) == 0 and \
            int(crow_t[-1]) == col_t.numel() and not bool((crow_t.diff() < 0).any())
        cols_ok = not col_t.numel() or (int(col_t.min()) >= 0 and int(col_t.max()) < d)
    if not rows_ok:
        raise ValueError(f"{name}: malformed CSR row pointers")
    if not cols_ok:
        raise ValueError(f"{name}: sparse matrix has column indices outside [0, {d})")


def _target_array(y, n_samples: int, name: str, estimator: str) -> np.ndarray:
    """``y`` as a 1-d NumPy array of length ``n_samples`` (a column vector is raveled, with
    scikit-learn's :class:`~torchfw.exceptions.DataConversionWarning`)."""
    if y is None:
        raise ValueError(_Y_NONE.format(estimator=estimator))
    if isinstance(y, Tensor):
        y = y.detach().cpu().numpy()
    array = np.asarray(y)
    if np.iscomplexobj(array):
        raise ValueError(f"{_COMPLEX}: {name} has complex dtype {array.dtype}")
    if array.ndim == 2 and array.shape[1] == 1:
        from .. import exceptions

        warnings.warn(_COLUMN_Y, exceptions.DataConversionWarning, stacklevel=4)
        array = array.ravel()
    if array.ndim != 1:
        raise ValueError(f"{name} must be 1-d (n_samples,), got shape {array.shape}")
    if array.shape[0] != n_samples:
        raise ValueError(f"X has {n_samples} samples but {name} has {array.shape[0]} entries: "
                         f"labels or targets must be one per sample")
    return array


def as_labels(y, n_samples: int, *, name: str = "y", estimator: str = "this classifier"
              ) -> np.ndarray:
    """Class labels as a 1-d NumPy array of length ``n_samples`` (any hashable values).

    A floating ``y`` must hold whole numbers: a continuous target (say a regression target
    passed to a classifier) would otherwise become one class per distinct value, so it is
    refused with scikit-learn's "Unknown label type" message.
    """
    array = _target_array(y, n_samples, name, estimator)
    if array.dtype.kind == "f":
        if not np.isfinite(array).all():
            raise ValueError(f"{name} contains NaN or infinite values")
        if (array != np.round(array)).any():
            raise ValueError(f"Unknown label type: continuous. {estimator} is a classifier: "
                             f"{name} must hold class labels (integers, strings, ...), got "
                             f"non-integer floats such as {array[array != np.round(array)][0]!r}"
                             f"; for a regression target use a regressor")
    if array.dtype == object and any(v is None for v in array):
        raise ValueError(f"{name} contains missing (None) labels")
    return array


def as_target(y, n_samples: int, *, name: str = "y", estimator: str = "this regressor",
              device=None, dtype: torch.dtype = torch.float64) -> Tensor:
    """A regression target as a 1-d finite float tensor of length ``n_samples``."""
    if isinstance(y, Tensor) and y.dim() == 1 and not y.is_complex():
        if y.shape[0] != n_samples:
            raise ValueError(f"X has {n_samples} samples but {name} has {y.shape[0]}")
        v = y.detach()
    else:
        array = _target_array(y, n_samples, name, estimator)
        if array.dtype == object:
            try:
                array = array.astype(np.float64)
            except (TypeError, ValueError) as exc:
                raise TypeError(f"{name} must be numeric: {exc}") from None
        if not (np.issubdtype(array.dtype, np.number) or array.dtype == bool):
            raise TypeError(f"{name} must be numeric, got an array of dtype {array.dtype}")
        v = torch.from_numpy(np.ascontiguousarray(array))
    v = v.to(device=device, dtype=dtype)
    check_finite(name, v)
    return v


def as_sample_weight(sample_weight, n_samples: int) -> np.ndarray | None:
    """``sample_weight`` as a float64 array of ``n_samples`` finite weights >= 0, or None.

    A scalar means the same weight for every sample; all-zero weights are refused (nothing
    would be fitted).
    """
    if sample_weight is None:
        return None
    if isinstance(sample_weight, Tensor):
        sample_weight = sample_weight.detach().cpu().numpy()
    array = np.asarray(sample_weight)
    if np.iscomplexobj(array) or not (np.issubdtype(array.dtype, np.number)
                                      or array.dtype == bool or array.dtype == object):
        raise TypeError(f"sample_weight must hold real numbers, got dtype {array.dtype}")
    array = array.astype(np.float64)
    if array.ndim == 0:
        array = np.full(n_samples, float(array))
    if array.ndim != 1 or array.shape[0] != n_samples:
        raise ValueError(f"sample_weight.shape == {array.shape}, expected ({n_samples},)")
    if not np.isfinite(array).all():
        raise ValueError("sample_weight contains NaN or infinite values")
    if (array < 0).any():
        raise ValueError(f"sample_weight must be >= 0, got {array.min():g}")
    if not (array > 0).any():
        raise ValueError("sample_weight is zero for every sample: nothing to fit")
    return array


def feature_names_of(X) -> np.ndarray | None:
    """Column names of a DataFrame-like ``X`` (an object array of str), or None.

    As scikit-learn: names are used only when every column name is a string; a mix of string
    and other names is an error (the names could not be checked at predict time).
    """
    columns = getattr(X, "columns", None)
    if columns is None or isinstance(X, Tensor):
        return None
    names = np.asarray(list(columns), dtype=object)
    is_str = np.array([isinstance(c, str) for c in names], dtype=bool)
    if names.size == 0 or not is_str.any():
        return None
    if not is_str.all():
        kinds = sorted({type(c).__name__ for c in names})
        raise TypeError(f"Feature names are only supported if all input features have string "
                        f"names, but your input has {kinds} as feature name / column name "
                        f"types; convert them all to str (X.columns = X.columns.astype(str))")
    return names


def n_features_of(X) -> int:
    """Number of columns of a validated matrix."""
    return int(X.shape[1])


def as_positive_float(name: str, value) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or \
            not (0 < float(value) < math.inf):
        raise ValueError(f"{name} must be a positive finite number, got {value!r}")
    return float(value)


def take_rows(X: Tensor, rows: Tensor) -> Tensor:
    """Rows ``rows`` of a dense or CSR matrix (CSR stays CSR; torch has no CSR index_select).

    A CSR matrix on the CPU is gathered on one torch thread: index arithmetic over its stored
    values, which the intra-op pool slows down (3,147 rows of w8a, the other core busy: 13 ms
    of CPU on two threads, 1 ms on one)."""
    if X.layout != torch.sparse_csr:
        return X.index_select(0, rows)
    with one_thread(X.device.type == "cpu"):
        return _take_csr_rows(X, rows)


def _take_csr_rows(X: Tensor, rows: Tensor) -> Tensor:
    """:func:`take_rows` of a CSR matrix."""
    crow = X.crow_indices()
    starts = crow.index_select(0, rows)
    counts = crow.index_select(0, rows + 1) - starts
    new_crow = torch.zeros(rows.numel() + 1, dtype=crow.dtype, device=X.device)
    torch.cumsum(counts, 0, out=new_crow[1:])
    total = int(new_crow[-1])
    offsets = torch.arange(total, device=X.device) - torch.repeat_interleave(new_crow[:-1],
                                                                            counts)
    positions = torch.repeat_interleave(starts, counts) + offsets
    return csr_tensor(new_crow, X.col_indices().index_select(0, positions),
                                   X.values().index_select(0, positions),
                                   size=(rows.numel(), X.shape[1]),
                                   check_invariants=False)  # rows of a valid matrix


def drop_zero_weight(X: Tensor, y: np.ndarray, sample_weight: np.ndarray | None):
    """Leave out the examples of weight 0: ``(X, y, weights or None, kept row indices or None)``.

    Weights that are all 1 are dropped too (``None``), so that ``sample_weight=ones`` takes the
    same path, and gives the same model, as no weights.
    """
    if sample_weight is None or (sample_weight == 1.0).all():
        return X, y, None, None
    if (sample_weight > 0).all():
        return X, y, sample_weight, None
    kept = np.flatnonzero(sample_weight > 0)
    rows = torch.from_numpy(kept).to(X.device)
    return take_rows(X, rows), y[kept], sample_weight[kept], kept


def accuracy(pred: np.ndarray, y: np.ndarray, sample_weight=None) -> float:
    """Mean of ``pred == y``, weighted by ``sample_weight`` (scikit-learn's ``score``)."""
    weights = as_sample_weight(sample_weight, pred.shape[0])
    hits = (pred == y).astype(np.float64)
    return float(hits.mean() if weights is None else (weights * hits).sum() / weights.sum())


def r2(y: np.ndarray, pred: np.ndarray, sample_weight=None) -> float:
    r""":math:`R^2 = 1 - \sum_i w_i (y_i - \hat y_i)^2 / \sum_i w_i (y_i - \bar y_w)^2`.

    ``sample_weight`` defaults to ones; a constant ``y`` gives 1 for a perfect fit, else 0 (as
    scikit-learn's ``r2_score``).
    """
    weights = as_sample_weight(sample_weight, y.shape[0])
    w = np.ones(y.shape[0]) if weights is None else weights
    mean = float((w * y).sum() / w.sum())
    ss_res = float((w * (y - pred) ** 2).sum())
    ss_tot = float((w * (y - mean) ** 2).sum())
    return 1.0 - ss_res / ss_tot if ss_tot > 0 else (1.0 if ss_res == 0 else 0.0)
