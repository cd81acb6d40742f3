"""One binary problem off the compiled path: the sampled storage or the lazy host path.

:func:`fit_binary` is where :class:`~torchfw.SVC` sends a problem the compiled whole solve does
not take (:func:`torchfw.svm._fit.takes_compiled`), and where the compiled path hands back a
problem it cannot finish (no host storage, a non-finite solve): the sampled storage of seed
002 when the plan says so (:meth:`FitPlan.sampled <torchfw.svm._plan.FitPlan.sampled>`: large
problems, ``sample_size``), else the lazy host path. The lazy path's module is imported here,
when a problem takes it, so that a fit on the compiled path does not load it
(``tests/test_cold_start.py``).
"""

from __future__ import annotations

import numpy as np
from torch import Tensor

from ._large import fit_binary_sampled
from ._plan import FitPlan

__all__ = ["fit_binary"]


def fit_binary(plan: FitPlan, X: Tensor, y_pm: np.ndarray, C_examples, alpha0, k: int):
    """Solve binary problem ``k`` of the fit ``plan`` on ``X`` (labels ``y_pm`` in {-1, +1},
    per-example C ``C_examples``, warm start ``alpha0`` or None); ``(alpha, result)``."""
    if plan.custom_kernel:  # its X is not features: only the compiled solve applies
        raise ValueError("SVC with a precomputed or callable kernel has no lazy column "
                         "path (see torchfw.svm._custom)")
    if plan.sampled(X.shape[0]):  # seed 002's randomized FW, O(|S||I|)
        return fit_binary_sampled(plan, X, y_pm, C_examples, alpha0, k)
    from ._lazy import fit_binary as fit_lazy

    return fit_lazy(plan, X, y_pm, C_examples, alpha0, k)
