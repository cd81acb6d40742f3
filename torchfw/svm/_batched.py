"""One-vs-rest as one batched solve (:class:`~torchfw.SVC` on CUDA).

The ``k`` problems of one-vs-rest share the data: one kernel column product serves all classes
per iteration (:class:`~torchfw.svm.kernels.OneVsRestOperator`,
:func:`~torchfw.optimizers.batched.minimize_batched`), which on a GPU replaces ``k`` launches by
one. On the CPU the compiled per-class loops are faster (measured) and are used instead.
"""

from __future__ import annotations

import warnings

import numpy as np
import torch
from torch import Tensor

from .. import exceptions as _exceptions
from ..optimizers.batched import minimize_batched
from ..result import History, Result, Status
from ._params import iteration_budget
from .kernels import OneVsRestOperator, SVMDualOperator

__all__ = ["fit_ovr_batched"]


def fit_ovr_batched(model, X: Tensor, problems, C_examples, kdtype, previous, factory):
    """Solve the one-vs-rest ``problems`` (label vectors) of ``model`` together.

    ``factory(name)`` builds the solver; returns ``(alphas, results)`` as the per-problem fits.
    """
    Y = torch.from_numpy(np.stack(problems)).to(X.device)
    C = C_examples if isinstance(C_examples, float) else C_examples.to(X.device)
    operator = OneVsRestOperator(X, Y, model._kernel, C, dtype=kdtype)
    m = X.shape[0]
    if previous is not None:
        w0 = torch.stack([p.to(X.device) for p in previous])
    else:
        w0 = torch.stack([model._initial_alpha(
            SVMDualOperator(X, Y[k], model._kernel, C if isinstance(C, float) else C,
                            dtype=kdtype, cache_size=model.cache_size),
            problems[k], model._problem_seed(k))
            for k in range(len(problems))])
    solver = factory(model.solver)(tol=1e-300, rtol=2.0 * model._stop_tol(),
                                           max_iter=iteration_budget(model, m))
    batch = minimize_batched(solver, operator, w0, tol=1e-300, rtol=2.0 * model._stop_tol(),
                             max_iter=iteration_budget(model, m),
                             use_graph=X.is_cuda)
    if model.verbose:
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
            warnings.warn(f"one-vs-rest problem {k} stopped on max_iter with relative gap "
                          f"{float(batch.gap[k]) / float(2 * batch.value[k]):.3g}",
                          _exceptions.ConvergenceWarning, stacklevel=4)
    return alphas, results
