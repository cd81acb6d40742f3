"""One-vs-rest as one batched solve (:class:`~torchfw.SVC` on CUDA).

The ``k`` problems of one-vs-rest share the data: one kernel column product serves all classes
per iteration (:class:`~torchfw.svm.kernels.OneVsRestOperator`,
:func:`~torchfw.optimizers.batched.minimize_batched`), which on a GPU replaces ``k`` launches by
one. On the CPU the compiled per-class loops are faster (measured) and are used instead.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import Tensor

from ..optimizers.batched import minimize_batched
from ..result import History, Result, Status
from ._plan import FitPlan
from ._start import initial_alpha
from .kernels import OneVsRestOperator, SVMDualOperator

__all__ = ["fit_ovr_batched"]


def fit_ovr_batched(plan: FitPlan, X: Tensor, problems, C_examples, previous):
    """Solve the one-vs-rest ``problems`` (label vectors) of the fit ``plan`` together.

    Returns ``(alphas, results)`` as the per-problem fits.
    """
    Y = torch.from_numpy(np.stack(problems)).to(X.device)
    C = C_examples if isinstance(C_examples, float) else C_examples.to(X.device)
    operator = OneVsRestOperator(X, Y, plan.kernel, C, dtype=plan.dtype)
    m = X.shape[0]
    if previous is not None:
        w0 = torch.stack([p.to(X.device) for p in previous])
    else:
        w0 = torch.stack([initial_alpha(
            SVMDualOperator(X, Y[k], plan.kernel, C if isinstance(C, float) else C,
                            dtype=plan.dtype, cache_size=plan.cache_size),
            problems[k], plan.n_init, plan.problem_seed(k))
            for k in range(len(problems))])
    max_iter = plan.budget(m)
    solver = plan.optimizer(max_iter=max_iter)
    gap_tol, rtol, _ = plan.stopping()
    batch = minimize_batched(solver, operator, w0, tol=gap_tol, rtol=rtol, max_iter=max_iter,
                             use_graph=X.is_cuda)
    if plan.verbose:
        print(f"one-vs-rest: {len(problems)} problems solved together, "
              f"{int(batch.n_iter.max())} iterations, {int(batch.converged.sum())} converged")
    alphas, results = [], []
    for k in range(len(problems)):
        converged = bool(batch.converged[k])
        status = Status.CONVERGED if converged else Status.MAX_ITER
        results.append(Result(x=batch.x[k].clone(), value=float(batch.value[k]),
                              gap=float(batch.gap[k]), n_iter=int(batch.n_iter[k]),
                              status=status, history=History(),
                              info={"engine": "BatchedQuadraticEngine"}))
        alphas.append(batch.x[k].clone())
        if not converged:
            plan.warn_unconverged(status, int(batch.n_iter[k]), float(batch.gap[k]),
                                  float(batch.value[k]),
                                  where=f" (one-vs-rest problem {k}, batched)", stacklevel=4)
    return alphas, results
