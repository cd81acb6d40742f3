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

from ..utils.threads import one_thread

__all__ = ["check_kernel_range", "checked_norms", "finite_margins", "finite_scores", "kernel_dtype",
           "max_row_norm_sq", "needs_float64"]

_MARGIN = 16.0
_BLOCK = 1 << 22  # entries per float64 block of a dense X (32 MB): bounds the temporary copy


def max_row_norm_sq(X: Tensor) -> float:
    """:math:`\\max_i \\|x_i\\|^2` in float64 (dense or CSR ``X``; 0 for an empty ``X``)."""
    if X.shape[0] == 0:
        return 0.0
    if X.layout == torch.sparse_csr:
        # One torch thread on the CPU: a few passes over the stored values, which the intra-op
        # pool slows down (w8a's first 10,000 rows, 120,000 values, the other core busy: 23 ms
        # of CPU on two threads, 1.3 ms on one). The same operations: the same sums.
        with one_thread(X.device.type == "cpu"):
            values = X.values().double()
            counts = X.crow_indices().diff()
            rows = torch.repeat_interleave(torch.arange(X.shape[0], device=X.device), counts)
            out = torch.zeros(X.shape[0], dtype=torch.float64, device=X.device)
            return float(out.index_add_(0, rows, values * values).max())
    best = 0.0
    step = max(1, _BLOCK // max(1, X.shape[1]))
    if X.device.type == "cpu":  # in NumPy: a small X's torch steps cost more than the sums
        host = X.detach().numpy()
        for start in range(0, X.shape[0], step):
            part = host[start:start + step].astype(np.float64)
            best = max(best, float(np.einsum("ij,ij->i", part, part).max()))
        return best
    for start in range(0, X.shape[0], step):
        block = X[start:start + step].double()
        best = max(best, float((block * block).sum(1).max()))
    return best


#: The dual's :math:`1/C` must be at least this many units in the last place of the largest
#: entry :math:`k_{\max} + 1` of :math:`K + 1` in the kernel's dtype (see :func:`needs_float64`).
RESOLVE_ULPS = 16.0


def _ulp(x: float, dtype: torch.dtype) -> float:
    """The spacing of ``dtype``'s numbers at ``x`` (finite in ``dtype``)."""
    return float(np.spacing(np.float32(x) if dtype == torch.float32 else np.float64(x)))


def _log_kernel_max(model, s: float) -> float | None:
    r"""The natural log of a bound on :math:`|k(x, z)|` over the data (``s`` the largest squared
    row norm), or None for a kernel given as values (precomputed, callable)."""
    kernel = model.kernel
    if kernel in ("rbf", "sigmoid"):  # e^{-gamma d} <= 1, |tanh| <= 1
        return 0.0
    if kernel == "linear":
        return math.log(s) if s > 0 else -math.inf
    if kernel == "poly":
        base = model._gamma * s + abs(model.coef0)
        return model.degree * math.log(base) if base > 0 else -math.inf
    return None


def needs_float64(model, X: Tensor, c_max: float, max_sq: float | None = None) -> bool:
    r"""Whether the fit needs float64 kernel values: float32 holds them but rounds the dual's
    :math:`1/C` away.

    The L2-SVM dual's matrix is :math:`Y(K + 1)Y + I/C`, its diagonal stored as
    :math:`k(x_i, x_i) + 1 + 1/C_i` in the kernel's dtype. With
    :math:`k_{\max} = \max |k(x, z)|` (bounded as :func:`check_kernel_range` does: 1 for
    ``rbf`` and ``sigmoid``, :math:`s` for ``linear``, :math:`(\gamma s + |c_0|)^d` for
    ``poly``, :math:`s = \max_i \|x_i\|^2`), the regularization :math:`1/C_{\max}` survives the
    rounding only where it is at least :data:`RESOLVE_ULPS` units in the last place of
    :math:`k_{\max} + 1`. Below, float32 loses the term that makes the dual strongly convex:
    the rounded matrix of a polynomial kernel on raw features (a low-rank :math:`K` of entries
    up to :math:`10^5`) is singular or indefinite, and every solver crawls or fails (iris'
    versicolor/virginica pair, degree 4 to 8). Then float64 is taken: its rounding is
    :math:`2^{29}` times finer, which resolves :math:`1/C` or at least the kernel's small
    eigenvalues (at degree 8 on that pair, :math:`k_{\max} \approx 6 \cdot 10^{16}`, float64
    converges in about 200 iterations where float32 stops on the iteration budget). For
    ``rbf`` float32 holds to :math:`C \approx 2.6 \cdot 10^5` (:math:`1/C \ge 16 \cdot
    2^{-22}`).

    Where the kernel's values overflow float32 itself the dtype is not switched: those
    features want scaling, and :func:`check_kernel_range`'s error says so (and names
    ``dtype=torch.float64`` for whoever means it); a fit does not silently double its memory.

    A precomputed or callable kernel is never switched (its values are given, not bounded).
    ``max_sq``: :math:`s` when the caller has it (:func:`max_row_norm_sq` of ``X``).
    """
    # rbf and sigmoid are bounded by 1 whatever the data: no pass over X for them.
    s = 0.0 if model.kernel not in ("linear", "poly") else \
        max_row_norm_sq(X) if max_sq is None else max_sq
    log_k = _log_kernel_max(model, s)
    if log_k is None or not c_max > 0 or not math.isfinite(c_max):
        return False
    if not log_k <= math.log(torch.finfo(torch.float32).max / _MARGIN):
        return False  # overflows float32: its range error says what to do
    top = math.exp(log_k) + 1.0
    return 1.0 / c_max < RESOLVE_ULPS * _ulp(top, torch.float32)


def kernel_dtype(model, X: Tensor, C_examples, max_sq: float | None = None) -> torch.dtype:
    """The dtype of the fit's kernel values: the model's ``dtype`` when given, else float32,
    or float64 where float32 would round the dual's :math:`1/C` away (:func:`needs_float64`;
    ``C_examples`` the per-example C, a tensor or one number; ``max_sq`` as there)."""
    if model.dtype is not None:
        return model.dtype
    c_max = float(C_examples.max()) if isinstance(C_examples, Tensor) else float(C_examples)
    return torch.float64 if needs_float64(model, X, c_max, max_sq) else torch.float32


def checked_norms(model, X: Tensor) -> float | None:
    """:func:`max_row_norm_sq` of ``X`` where :func:`check_kernel_range` reads it (the four
    kernels given by name), else None: computed once for it and :func:`kernel_dtype`.

    The number is the same for ``X`` and for ``X`` widened to float64 (exactly), the only
    conversion a fit makes between the two calls: the row norms are summed in float64 from
    the same values."""
    kernel = model.kernel
    if not isinstance(kernel, str) or kernel not in ("rbf", "linear", "poly", "sigmoid"):
        return None
    return max_row_norm_sq(X)


def check_kernel_range(model, X: Tensor, dtype: torch.dtype,
                       max_sq: float | None = None) -> float | None:
    """Raise ValueError if the kernel of the SVC ``model`` (``kernel``, the resolved ``gamma``,
    ``degree``, ``coef0``) may overflow ``dtype`` on ``X``; precomputed and callable kernels
    pass (their values are checked as given). See the module docstring for the bounds.

    Returns the largest squared row norm :math:`\\max_i \\|x_i\\|^2` it computed
    (:func:`max_row_norm_sq`), or None for a kernel it does not check: the isolation probe
    bounds its rounding with the same number (:func:`torchfw.svm._isolation.neighbour_weights`'
    ``max_sq``) instead of another pass over ``X``. ``max_sq``: that number when the caller
    has it (:func:`checked_norms`).
    """
    kernel = model.kernel
    if not isinstance(kernel, str) or kernel not in ("rbf", "linear", "poly", "sigmoid"):
        return None
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
    s = max_row_norm_sq(X) if max_sq is None else max_sq
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
    return s


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
