r"""``SVC(loss="hinge")``: LIBSVM's L1-SVM, trained by pairwise Frank-Wolfe over its polytope.

The model is LIBSVM's C-SVC (Chang & Lin; the hinge loss, an unregularized bias):

.. math::
    \min_{w, b, \xi}\ \tfrac12 \|w\|^2 + \sum_i C_i \xi_i
    \quad\text{s.t.}\quad y_i (w^\top\phi(x_i) + b) \ge 1 - \xi_i,\ \xi_i \ge 0,

with :math:`C_i = C` times the class weight of :math:`y_i` times the example's sample weight
(scikit-learn's ``SVC``), whose dual is

.. math::
    \min_{\alpha}\ \tfrac12 \alpha^\top Q \alpha - e^\top\alpha
    \quad\text{s.t.}\quad 0 \le \alpha_i \le C_i,\ y^\top\alpha = 0,
    \qquad Q_{ij} = y_i y_j k(x_i, x_j).

It is solved by :func:`torchfw.optimizers._box_qp.solve_box_qp` (pairwise Frank-Wolfe steps
with LIBSVM's second-order pair selection and exact clipped steps: SMO), stopping when LIBSVM's
maximal violation falls below ``tol`` (default 1e-3, LIBSVM's ``-e``). The decision function is
LIBSVM's, :math:`f(x) = \sum_i \alpha_i y_i k(x_i, x) - \rho`, :math:`\rho` from the free
variables' KKT conditions (:func:`~torchfw.optimizers._box_qp.equality_multiplier`).

**Rows.** The rows are those of :math:`K` itself, computed in float64 and rounded once to
the kernel precision as LIBSVM's float rows are (:mod:`torchfw.svm._hinge_matrix`), when the
whole matrix fits ``cache_size``; else a cache of the SVC's rows of :math:`K + 1`
(:mod:`torchfw.svm._matrix`), read restricted to a one-vs-one pair's examples by
:func:`torchfw.svm._dense.row_source`. The solver reads them unsigned (labels 1: the steps run
on :math:`K_{ij} = y_i y_j Q_{ij}`). :math:`K + 1` is :math:`Q + y y^\top` up to the signs:
on the hyperplane :math:`y^\top\alpha = 0` the two quadratics are the same function
(:math:`\alpha^\top y y^\top \alpha = 0`), with the same gradient (:math:`y y^\top \alpha = 0`)
and the same curvature along every feasible direction (:math:`y^\top d = 0`), so in exact
arithmetic the solver takes the same steps; the gradient update :math:`t (K_{i\cdot} -
K_{j\cdot})` cancels the added ones. In float32 it does not quite: :math:`K + 1` holds small
entries to an absolute half unit of numbers near 2, which at large C (steps of size C) adds
noise to the gradient and steps to the solve.

**Multiclass.** One-vs-one, LIBSVM's scheme (``multi_class="auto"``), each pair on its two
classes' examples, reading its entries of the one matrix of all examples; ``multi_class="ovr"``
trains one problem per class against the rest.
"""

from __future__ import annotations

import math
import time
import warnings

import numpy as np
import torch

from .. import exceptions
from ..optimizers._box_qp import (
    CONVERGED,
    box_qp_value,
    equality_multiplier,
    row_entries,
    solve_box_qp,
)
from ..result import History, Result, Status
from ..utils.jit import HAVE_NUMBA
from ..utils.jit import njit as _njit  # None without numba
from ..utils.threads import one_thread, parallel_map, workers
from ._dense import row_source
from ._hinge_matrix import exact_kernel_matrix
from ._matrix import full_source, plain_problem, source_row

__all__ = ["fit_hinge", "HINGE_TOL", "hinge_budget", "check_hinge_options"]

#: ``tol="auto"`` of ``loss="hinge"``: LIBSVM's default ``-e 0.001``.
HINGE_TOL = 1e-3

#: Sum over the problems of (examples)^2 from which the problems on the whole matrix are solved
#: on several threads (as :data:`torchfw.svm._fit.PARALLEL_WORK`).
PARALLEL_WORK = 3e5


def hinge_budget(max_iter, m: int) -> int | None:
    """The step budget of one problem of ``m`` examples: LIBSVM's ``max(10^7, 100 m)`` for
    ``max_iter`` None, no limit (None) for -1, else ``max_iter``."""
    if max_iter is None:
        return max(10_000_000, 100 * m)
    if int(max_iter) == -1:
        return None
    return int(max_iter)


def check_hinge_options(model, device) -> None:
    """A ValueError for the options ``loss="hinge"`` has no use for or cannot run."""
    if model.sample_size is not None:
        raise ValueError("sample_size (the randomized Frank-Wolfe vertex) does not apply to "
                         "loss='hinge', whose pairwise steps scan every example")
    if model.time_limit is not None:
        raise ValueError("time_limit is not supported with loss='hinge'; use max_iter")
    if model.dense is False:
        raise ValueError("loss='hinge' trains by the compiled solver on kernel rows; "
                         "dense=False (the lazy Python path) does not apply")
    if device.type != "cpu":
        raise ValueError(f"loss='hinge' trains on the CPU (compiled code); got device "
                         f"{device}. Pass CPU data, or use loss='squared_hinge'")


def fit_hinge(plan, X, problems, C_examples, *, tol: float, max_iter, shrinking: bool = True,
              gram=None):
    r"""Solve the L1-SVM dual of each binary problem; ``(alphas, results, intercepts)``.

    Parameters
    ----------
    plan : FitPlan
        The fit's plan (:mod:`torchfw.svm._plan`): its kernel, dtype and ``cache_size``.
    X : Tensor
        The training examples (CPU).
    problems : sequence of BinaryProblem
        One binary problem per model row (:func:`torchfw.svm._multiclass.binary_problems`).
    C_examples : float or Tensor
        :math:`C_i` per example (float: all equal).
    tol : float
        LIBSVM's stopping tolerance on the maximal violation.
    max_iter : int or None
        ``SVC.max_iter`` (:func:`hinge_budget`).
    shrinking : bool
        LIBSVM's shrinking (:func:`~torchfw.optimizers._box_qp.solve_box_qp`); the last check
        is over all examples either way.
    gram : ndarray, optional
        The ``m x m`` kernel matrix of a precomputed or callable kernel.

    Returns
    -------
    alphas : list
        Each problem's :math:`\alpha` over all examples (an ``OverRows`` for a pair).
    results : list of Result
        ``value`` the dual objective, ``gap`` the maximal violation.
    intercepts : ndarray
        :math:`-\rho` per problem.
    """
    from ._multiclass import scatter

    m = X.shape[0]
    if isinstance(C_examples, float):
        C_all = np.full(m, C_examples)
    else:
        C_all = C_examples.detach().to(torch.float64).cpu().numpy()
    if not np.all(np.isfinite(C_all)):
        raise ValueError("loss='hinge' needs a finite C (the box 0 <= alpha <= C)")
    src, diag = _plain_rows(plan, X, gram)
    dtype = src[0].dtype
    full = src[1] is None  # a cache of rows is written as rows arrive: one solve at a time

    def solve(problem):
        rows = np.zeros(0, dtype=np.int64) if problem.rows is None else problem.rows
        y = np.asarray(problem.y, dtype=np.float64)
        n = y.shape[0]
        upper = C_all if problem.rows is None else C_all[rows]
        d = diag if problem.rows is None else diag[rows]
        p = np.full(n, -1.0)
        t0 = time.perf_counter()
        # the unsigned rows (labels 1): the solver's steps run on them (unsigned_rows)
        sol = solve_box_qp(row_source(src, rows, np.ones(n, dtype=dtype),
                                      np.zeros(n, dtype=dtype)),
                           d, p, y, upper, tol=tol, max_iter=hinge_budget(max_iter, n),
                           shrinking=shrinking, unsigned_rows=True)
        return sol, upper, y, p, time.perf_counter() - t0

    sizes = [float(len(p.y)) for p in problems]
    threads = workers(len(problems), sum(s * s for s in sizes), PARALLEL_WORK) if full else 1
    with one_thread():
        solved = parallel_map(solve, problems, threads)
    alphas, results, intercepts = [], [], []
    for problem, (sol, upper, y, p, elapsed) in zip(problems, solved, strict=True):
        value = box_qp_value(sol.alpha, sol.grad, p)
        status = Status.CONVERGED if sol.status == CONVERGED else Status.MAX_ITER
        if status is Status.MAX_ITER:
            warnings.warn(f"SVC(loss='hinge') stopped after {sol.n_iter} iterations (max_iter) "
                          f"with maximal violation {sol.violation:.3g} > tol={tol:g}",
                          exceptions.ConvergenceWarning, stacklevel=4)
        history = History()
        history.append(sol.n_iter, value, sol.violation, elapsed, {"pairwise": sol.n_iter})
        alpha = torch.from_numpy(sol.alpha)
        results.append(Result(x=alpha, value=value, gap=sol.violation, n_iter=sol.n_iter,
                              status=status, history=history, weights=alpha,
                              best_gap=sol.violation,
                              info={"engine": "pairwise box QP (SMO)", "loss": "hinge",
                                    "matrix_bytes": int(src[0].nbytes)}))
        alphas.append(scatter(alpha, problem.rows, m))
        intercepts.append(-equality_multiplier(sol.alpha, sol.grad, y, upper))
    return alphas, results, np.array(intercepts, dtype=np.float64)


if HAVE_NUMBA:
    from numba import types
    from numba.extending import overload

    @overload(row_entries)
    def _row_entries_of_svm(src, i, idx, count, buf):
        """:func:`~torchfw.optimizers._box_qp.row_entries` of the SVM's row source tuple
        ``(P, cache, rows, y, inv_c)`` (:func:`torchfw.svm._dense.row_source`)."""
        if isinstance(src, types.BaseTuple) and len(src.types) == 5 and \
                isinstance(src.types[0], types.Array) and src.types[0].ndim == 2:
            if isinstance(src.types[1], types.NoneType):
                def full(src, i, idx, count, buf):
                    P, _, rows, y, inv_c = src
                    k = i if rows.shape[0] == 0 else rows[i]
                    return _signed_entries(P[k], rows, y, inv_c, i, idx, count, buf)
                return full

            def cached(src, i, idx, count, buf):
                P, cache, rows, y, inv_c = src
                k = i if rows.shape[0] == 0 else rows[i]
                return _signed_entries(source_row(P, cache, k), rows, y, inv_c, i, idx, count,
                                       buf)
            return cached
        return None


def _signed_entries_py(row, rows, y, inv_c, i, idx, count, buf):
    """``buf[t] = y_i y_r row[rows[r]]`` (plus ``1/C_i`` at ``r = i``) for ``r = idx[t]``:
    the entries of the problem's row ``i`` of ``D_y P D_y + diag(1/C)`` read from row
    ``rows[i]`` of ``P`` over all examples, widened to float64."""
    yi = y[i]
    if rows.shape[0] == 0:
        for t in range(count):
            r = idx[t]
            buf[t] = yi * y[r] * row[r]
    else:
        for t in range(count):
            r = idx[t]
            buf[t] = yi * y[r] * row[rows[r]]
    if inv_c[i] != 0.0:
        for t in range(count):
            if idx[t] == i:
                buf[t] += inv_c[i]
    return buf


_signed_entries = _njit(_signed_entries_py, inline=True)


def _plain_rows(plan, X, gram):
    r"""``(row source, diagonal)`` over all examples, with no :math:`1/C` term: of :math:`K`
    itself, each entry its float64 value rounded once to the kernel precision (LIBSVM's
    ``Qfloat``; :func:`torchfw.svm._hinge_matrix.exact_kernel_matrix`), when the whole matrix
    fits ``cache_size``; else a cache of the SVC's rows of :math:`K + 1` (diagonal
    :math:`K_{ii} + 1`), which on the hyperplane :math:`y^\top\alpha = 0` is the same
    quadratic in exact arithmetic; or the given Gram matrix.

    The whole matrix rather than a cache of its rows when it fits: the steps read a few
    entries of two rows, where a cache's bookkeeping per row read costs more than the read
    (raw svmguide1 at :math:`C = 2^{15}` took 2.5x as long on a cache of all its rows).
    """
    if gram is not None:
        P = np.array(gram, dtype=np.float64 if plan.dtype == torch.float64 else np.float32)
        return full_source(P), np.diagonal(P).astype(np.float64)
    with one_thread():
        exact = exact_kernel_matrix(plan, X)
        if exact is not None:
            return full_source(exact[0]), exact[1]
        src, diag, _ = plain_problem(plan, X, math.inf)
    if src is None:
        raise ValueError("loss='hinge' reads kernel rows from host memory, which this input "
                         "does not allow (a sparse input over cache_size); raise cache_size")
    return src, diag
