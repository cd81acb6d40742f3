r"""The lazy host path of :class:`~torchfw.SVC`: one binary problem, columns on demand.

Where the problem's matrix does not fit ``cache_size`` (or ``dense=False``, a clock, a progress
bar, candidate sampling, the streaming solvers, CUDA data), a binary problem is solved by a core
optimizer over the dual's simplex. The problem is the public one of
:func:`torchfw.svm.problem.svm_dual_problem` (built from validated input by
:func:`~torchfw.svm.problem.build_dual`): :class:`~torchfw.svm.kernels.SVMDualOperator` computes a
column of :math:`\tilde K = D_y (K + 1) D_y + \operatorname{diag}(1/C)` when a step asks for it
and keeps it in its cache, and the optimizer never learns that a kernel exists. The start is the
exact solution on ``n_init`` random examples (seeds 000-002; :mod:`torchfw.svm._start`), or for
the streaming solvers (seed 001) one random vertex.
"""

from __future__ import annotations

import warnings

import numpy as np
from torch import Tensor

from .. import exceptions as _exceptions
from ..result import Status
from ._params import iteration_budget
from .problem import build_dual

__all__ = ["fit_binary", "average_from"]


def fit_binary(svc, X: Tensor, y_pm: np.ndarray, C_examples, kdtype, alpha0, k, factory):
    """Solve binary problem ``k`` of ``svc`` on ``X`` (labels ``y_pm`` in {-1, +1}).

    ``factory(name)(**options)`` builds the optimizer (``svm._solver_factory``, which
    ``benchmarks/reproduce.py`` swaps); ``alpha0`` is a warm start or None. Returns
    ``(alpha, result)``: the dual vector the model uses (the tail average of a streaming run
    when there is one) and the optimizer's result, with the cache statistics in its ``info``.
    """
    m = X.shape[0]
    seed = svc._problem_seed(k)
    streaming = svc.solver in ("sfw", "msfw")
    # The problem as svm_dual_problem builds it; the streaming solvers (seed 001) start from
    # one random vertex, the others from the exact solution on n_init examples.
    problem = build_dual(X, y_pm, svc._kernel, C_examples, dtype=kdtype,
                         cache_size=svc.cache_size, alpha0=alpha0,
                         start="vertex" if streaming else "subset", n_init=svc.n_init,
                         seed=seed)
    # One epoch by default for the streaming solvers (seed 001's setting); -1: no limit.
    max_iter = iteration_budget(svc, m)
    options = {"average_from": average_from(svc.average, max_iter)} if streaming else {}
    solver = factory(svc.solver)(
        tol=1e-300, rtol=0.0 if streaming else 2.0 * svc._stop_tol(m), max_iter=max_iter,
        sample_size=svc.sample_size, random_state=seed, verbose=bool(svc.verbose),
        time_limit=svc.time_limit, **options)
    result = solver.minimize(problem.objective, problem.x0)
    if result.status in (Status.MAX_ITER, Status.TIME_LIMIT) and not streaming:
        warnings.warn(f"SVC solver {svc.solver!r} stopped on {result.status} after "
                      f"{result.n_iter} iterations with relative gap "
                      f"{result.gap / max(2 * result.value, 1e-300):.3g} > "
                      f"tol={svc._stop_tol(m)}",
                      _exceptions.ConvergenceWarning, stacklevel=4)
    result.info["cache"] = problem.operator.cache_info()
    # A run stopped (time_limit) before averaging began has only its last iterate.
    return (result.x if result.average is None else result.average), result


def average_from(average, max_iter: int) -> int | None:
    """The first averaged iteration of a streaming run for ``SVC(average=...)``, or None."""
    if isinstance(average, (bool, np.bool_)):
        return max_iter // 2 if average else None
    if average >= max_iter:
        raise ValueError(f"average={average} starts averaging after the run's last "
                         f"iteration (max_iter={max_iter}); use a smaller value, True "
                         f"(from max_iter // 2) or False (last iterate)")
    return int(average)
