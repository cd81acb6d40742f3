r"""Whether a kernel's values stay finite on the data, checked before a fit.

One concern: :func:`check_kernel_range`, which :class:`~torchfw.SVC` runs before it solves.
Kernel values are computed in the fit's ``dtype`` (float32 by default) from inner products and
squared norms, :math:`\|x\|^2 + \|z\|^2 - 2 x^\top z` for the Gaussian kernel. When a feature
is near :math:`10^{20}` its square overflows float32 to ``inf``, ``inf - inf`` is NaN, and
every kernel value that touches it is NaN: the Frank-Wolfe vertex search then picks an
arbitrary coordinate, the solve reports ``converged`` and the model predicts one class.
A ``gamma`` beyond the dtype's range is ``inf`` in the kernel, and ``inf * 0`` (the diagonal's
distance) is NaN too; a polynomial kernel of high degree overflows to ``inf``.

With :math:`s = \max_i \|x_i\|^2` (computed in float64), every inner product is at most
:math:`s` in magnitude (Cauchy-Schwarz) and every squared distance at most :math:`4 s`; the
values are finite when

* ``rbf``: :math:`4 s` and ``gamma`` are below the dtype's largest number (the exponent's
  argument may overflow to ``-inf``: :math:`e^{-\infty} = 0` is right);
* ``linear``, ``sigmoid``: :math:`s` and ``gamma`` are (``tanh`` saturates, it cannot overflow);
* ``poly``: :math:`(\gamma s + |c_0|)^d` is, the largest value on the diagonal
  :math:`k(x_i, x_i)` (exact for :math:`c_0 \ge 0`).

The bounds keep a margin of 16 for the dual's :math:`+1 + \delta_{ij}/C` and the solver's
sums. A failed check raises a ValueError that says which quantity overflows and what to do
(scale the features, take ``dtype=torch.float64``, lower ``gamma`` or ``degree``).
"""

from __future__ import annotations

import math

import numpy as np
import torch
from torch import Tensor

__all__ = ["check_kernel_range", "finite_margins", "finite_scores", "max_row_norm_sq"]

_MARGIN = 16.0
_BLOCK = 1 << 22  # entries per float64 block of a dense X (32 MB): bounds the temporary copy


def max_row_norm_sq(X: Tensor) -> float:
    """:math:`\\max_i \\|x_i\\|^2` in float64 (dense or CSR ``X``; 0 for an empty ``X``)."""
    if X.shape[0] == 0:
        return 0.0
    if X.layout == torch.sparse_csr:
        values = X.values().double()
        counts = X.crow_indices().diff()
        rows = torch.repeat_interleave(torch.arange(X.shape[0], device=X.device), counts)
        out = torch.zeros(X.shape[0], dtype=torch.float64, device=X.device)
        return float(out.index_add_(0, rows, values * values).max())
    best = 0.0
    step = max(1, _BLOCK // max(1, X.shape[1]))
    for start in range(0, X.shape[0], step):
        block = X[start:start + step].double()
        best = max(best, float((block * block).sum(1).max()))
    return best


def check_kernel_range(model, X: Tensor, dtype: torch.dtype) -> None:
    """Raise ValueError if the kernel of the SVC ``model`` (``kernel``, the resolved ``gamma``,
    ``degree``, ``coef0``) may overflow ``dtype`` on ``X``; precomputed and callable kernels
    pass (their values are checked as given). See the module docstring for the bounds.
    """
    kernel = model.kernel
    if not isinstance(kernel, str) or kernel not in ("rbf", "linear", "poly", "sigmoid"):
        return
    gamma, degree, coef0 = model._gamma, model.degree, model.coef0
    fmax = torch.finfo(dtype).max / _MARGIN
    name = str(dtype).replace("torch.", "")
    advice = ("scale the features (e.g. sklearn.preprocessing.StandardScaler or MaxAbsScaler)"
              + (" or fit with dtype=torch.float64" if dtype != torch.float64 else ""))
    if kernel != "linear" and not gamma <= fmax:
        raise ValueError(f"gamma={gamma:g} is beyond the range of {name} (largest "
                         f"{torch.finfo(dtype).max:.3g}): the {kernel} kernel's values would "
                         f"be inf or NaN; take a smaller gamma"
                         + (" or dtype=torch.float64" if dtype != torch.float64 else ""))
    s = max_row_norm_sq(X)
    reach = 4.0 * s if kernel == "rbf" else s
    if not reach <= fmax:
        what = "squared distances" if kernel == "rbf" else "inner products"
        raise ValueError(f"the {kernel} kernel's {what} overflow {name} on this data: the "
                         f"largest squared row norm is {s:.3g} (features up to about "
                         f"{math.sqrt(s):.3g}), beyond {name}'s range ({torch.finfo(dtype).max:.3g}),"
                         f" so kernel values would be inf or NaN and the model meaningless; "
                         f"{advice}")
    if kernel == "poly":
        base = gamma * s + abs(coef0)
        if base > 0 and not degree * math.log(base) <= math.log(fmax):
            raise ValueError(f"the poly kernel's values overflow {name} on this data: "
                             f"(gamma * max ||x||^2 + |coef0|)^degree = ({base:.3g})^{degree} "
                             f"is beyond {name}'s range ({torch.finfo(dtype).max:.3g}); lower "
                             f"the degree or gamma, or {advice}")


def finite_margins(A: np.ndarray, results) -> np.ndarray:
    """The margins :math:`\\rho = 2 f` of the solves' ``results`` (at the tail average if any),
    once checked with the dual vectors ``A``: finite, and :math:`\\rho > 0`.

    Kernel values that overflowed where :func:`check_kernel_range` cannot see (a callable
    kernel, a precomputed matrix) would otherwise give a model of NaN, predicting one class.
    """
    rho = np.array([2.0 * (r.value if r.average is None else r.average_value)
                    for r in results])
    if not (np.isfinite(A).all() and np.isfinite(rho).all() and (rho > 0).all()):
        raise ValueError("the dual solve produced non-finite values (the kernel matrix holds "
                         "inf or NaN, or overflowed its dtype): scale the features or fit with "
                         "dtype=torch.float64")
    return rho


def finite_scores(scores: np.ndarray, model) -> np.ndarray:
    """``scores`` (decision values of ``model``, a row per example), once checked finite.

    NaN compares False, so a prediction would give every such row one class without a word:
    test rows on which the model's kernel overflowed raise a ValueError naming them instead.
    """
    bad = nonfinite_rows(scores)
    if bad.size:
        raise nonfinite_error(bad, scores.shape[0], model)
    return scores


def nonfinite_rows(scores: np.ndarray) -> np.ndarray:
    """The rows of ``scores`` holding inf or NaN."""
    return np.flatnonzero(~np.isfinite(scores.reshape(scores.shape[0], -1)).all(1))


def nonfinite_error(bad: np.ndarray, n_rows: int, model) -> ValueError:
    """The error of :func:`finite_scores` for the rows ``bad`` of ``n_rows``."""
    name = model.kernel if isinstance(model.kernel, str) else "callable"
    return ValueError(f"decision values are inf or NaN for {bad.size} of {n_rows} "
                      f"rows (first: row {int(bad[0])}): the {name} kernel's values overflow "
                      f"on them; scale these rows as the training data were, or refit with "
                      f"dtype=torch.float64")
