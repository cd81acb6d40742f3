r"""Precomputed and callable kernels of :class:`~torchfw.SVC` (``kernel="precomputed"`` or a
function), as in scikit-learn.

Such a kernel is given by its values, not by a formula the package evaluates column by column:
the training Gram matrix :math:`K` is all there is. Its fit is therefore the compiled whole
solve of :mod:`torchfw.svm._dense` on

.. math::
    \tilde K = D_y (K + 1) D_y + \operatorname{diag}(1/C),

read from :math:`P = K + 1` and the diagonal :math:`K_{ii} + 1 + 1/C_i` as for the built-in
kernels (:func:`custom_matrix`), one-vs-rest and one-vs-one alike (a pair reads its sub-block).
There is deliberately no lazy path: where the compiled solve cannot run, or the ``m x m``
matrix exceeds ``cache_size``, :func:`check_custom_kernel` says so and how to fix it.

A precomputed model predicts from ``K_test[:, support_]`` (:func:`precomputed_scores`); a
callable one evaluates the function on the test rows against its support vectors
(:class:`torchfw.svm.kernels.CallableKernel`).
"""

from __future__ import annotations

import math

import numpy as np
import torch
from torch import Tensor

from ..optimizers._kernels import HAVE_NUMBA
from ._dense import VARIANTS
from ._plan import FitPlan

__all__ = ["check_custom_kernel", "custom_matrix", "train_gram", "precomputed_scores", "numeric",
           "object_scores"]

#: Relative asymmetry above which a training Gram matrix is refused: float32 rounding of a
#: symmetric formula stays orders of magnitude below it.
SYMMETRY_RTOL = 1e-4


def check_custom_kernel(plan: FitPlan, m: int, device) -> None:
    """Raise ValueError unless a precomputed or callable kernel's fit of ``m`` examples with
    the plan ``plan`` can run.

    Those kernels have no columns on demand: their fit is the compiled whole solve on the
    given ``m x m`` Gram matrix, so it needs what that path needs (numba, the CPU, a solver it
    runs, no sampling, clock or progress bar) and the matrix within ``cache_size`` MB (the
    same budget as :func:`torchfw.svm._fit.dense_budget_ok`). The message says which is
    missing, and for the budget the ``cache_size`` that would do.
    """
    what = "kernel='precomputed'" if isinstance(plan.kernel_param, str) else "a callable kernel"
    missing = []
    if not HAVE_NUMBA:
        missing.append("numba is not installed")
    if device.type != "cpu":
        missing.append(f"the data is on {device}, not the CPU")
    if plan.solver not in VARIANTS:
        missing.append(f"solver={plan.solver!r} is not one of {tuple(VARIANTS)}")
    for name in ("sample_size", "time_limit"):
        if getattr(plan, name) is not None:
            missing.append(f"{name} is set")
    if plan.progress:
        missing.append("verbose=True on a terminal (the compiled solve has no progress bar)")
    if plan.dense is False or plan.dense is np.False_:
        missing.append("dense=False")
    if missing:
        raise ValueError(f"SVC with {what} trains on the m x m kernel matrix by the compiled "
                         f"CPU solve, which cannot run here: {'; '.join(missing)}")
    itemsize = 8 if plan.dtype == torch.float64 else 4
    need = m * m * itemsize / 2**20
    if need > float(plan.cache_size):
        raise ValueError(f"SVC with {what} needs the {m} x {m} kernel matrix in memory: "
                         f"{need:.1f} MB in {'float64' if itemsize == 8 else 'float32'}, more "
                         f"than cache_size={plan.cache_size} MB; set cache_size >= "
                         f"{math.ceil(need)} (precomputed and callable kernels have no lazy "
                         f"column path)")


def custom_matrix(gram: np.ndarray, C_all, kdtype) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    r"""``(P, diag, inv_c)`` of a given Gram matrix: :math:`K + 1`, :math:`K_{ii} + 1 + 1/C_i`.

    The same quantities :func:`torchfw.svm._fit.fit_problems` takes from an
    :class:`~torchfw.svm.kernels.SVMDualOperator` for the built-in kernels, rounded the same way:
    ``P`` and ``1/C`` in the kernel precision, the diagonal summed in it and then widened to
    float64.
    """
    np_dtype: type = np.float64 if kdtype == torch.float64 else np.float32
    P: np.ndarray = np.array(gram, dtype=np_dtype)
    np.add(P, 1.0, out=P)  # in the kernel precision, as the built-in kernels' K + 1
    m = P.shape[0]
    if isinstance(C_all, float):
        inv_c = torch.full((m,), 1.0 / C_all, dtype=kdtype)
    else:
        inv_c = 1.0 / C_all.to(dtype=kdtype)
    diag = (torch.from_numpy(np.ascontiguousarray(np.diagonal(P))) + inv_c).to(torch.float64)
    return P, diag.numpy(), inv_c.numpy()


def max_asymmetry(gram: np.ndarray, block: int = 256) -> tuple[float, float]:
    """``(max |K_ij - K_ji|, max |K_ij|)`` over a square matrix.

    By square blocks: a transpose in one pass over a large matrix reads it against the cache
    (3-5x slower at m = 1,257, float32).
    """
    m = gram.shape[0]
    asym = scale = 0.0
    for i in range(0, m, block):
        for j in range(i, m, block):
            upper = gram[i:i + block, j:j + block]
            asym = max(asym, float(np.abs(upper - gram[j:j + block, i:i + block].T).max()))
            scale = max(scale, float(np.abs(upper).max()))
    return asym, scale


def train_gram(kernel, X: Tensor, kdtype) -> np.ndarray:
    """The ``(m, m)`` training Gram matrix in the kernel precision, checked symmetric.

    ``kernel`` is None for a precomputed kernel (``X`` is the matrix, already checked square
    and finite) or a :class:`~torchfw.svm.kernels.CallableKernel` (its output checked for shape
    and finiteness). The solver takes :math:`K` as symmetric; a matrix that is not (beyond
    rounding, :data:`SYMMETRY_RTOL`) would be solved as something else without a word.
    """
    if kernel is None:
        gram = (X.to_dense() if X.layout == torch.sparse_csr else X).cpu().numpy()
    else:
        gram = kernel.matrix(X, X)
    gram = gram.astype(np.float64 if kdtype == torch.float64 else np.float32, copy=False)
    if gram.size:
        asym, scale = max_asymmetry(gram)
        if asym > SYMMETRY_RTOL * max(scale, 1e-30):
            what = "the precomputed Gram matrix" if kernel is None else \
                "the kernel function's matrix on the training data"
            raise ValueError(f"{what} is not symmetric (max |K - K^T| = {asym:.3g} for "
                             f"max |K| = {scale:.3g}); a kernel matrix K_ij = k(x_i, x_j) is")
    return gram


def precomputed_scores(model, X) -> np.ndarray:
    """Decision values of a precomputed-kernel ``model`` from ``X[:, support_]``.

    ``X`` holds the kernel values between the samples and the ``n_features_in_`` training
    examples; a wrong number of columns is refused with a message saying what ``X`` must be.
    """
    shape = getattr(X, "shape", None)
    m = model.n_features_in_
    if shape is not None and len(shape) == 2 and shape[1] != m:
        raise ValueError(f"kernel='precomputed': X must be the (n_samples, {m}) matrix of "
                         f"kernel values between the samples and the {m} training "
                         f"examples; got {shape[1]} columns")
    K = model._check_predict_input(X)
    if K.layout == torch.sparse_csr:
        K = K.to_dense()
    index = torch.from_numpy(np.asarray(model.support_, dtype=np.int64)).to(K.device)
    scores = model._scores_from_kernel(K[:, index]).cpu().numpy()
    return scores[:, 0] if scores.shape[1] == 1 else scores


def numeric(X) -> bool:
    """Whether ``X`` is numbers (a tensor, a SciPy matrix, or array-like of numbers).

    A callable kernel accepts anything else too (strings, graphs), as in scikit-learn.
    """
    if isinstance(X, Tensor) or hasattr(X, "tocsr"):
        return True
    if isinstance(X, np.ndarray):
        return X.dtype.kind in "biuf"
    if hasattr(X, "dtypes") or hasattr(X, "__array__"):  # DataFrames and array-likes
        return True
    try:
        np.asarray(X, dtype=np.float64)
    except (TypeError, ValueError):
        return False
    return True


def object_scores(model, X) -> np.ndarray:
    """Decision values of a callable-kernel ``model`` fitted on non-numeric rows."""
    K = torch.from_numpy(model._kernel.matrix(X, model._sv_objects))
    scores = model._scores_from_kernel(K).cpu().numpy()
    return scores[:, 0] if scores.shape[1] == 1 else scores
