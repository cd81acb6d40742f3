r"""The binary problems of one :class:`~torchfw.SVC` fit on the compiled whole solve, on threads.

:func:`torchfw._svc_dense.fit_problems` hands the problems here. One matrix :math:`K + 1`
(:mod:`torchfw._svc_matrix`) serves them all: each one-vs-rest problem and one-vs-one pair reads
its signed rows from it and writes only its own vectors, so the problems are independent solves
and the compiled code releases the GIL. They are prepared on the calling thread in problem order
(labels, the random start subsets -- numba's generator is per thread), started and solved on a
small thread pool (:func:`torchfw._threads.parallel_map`, when the work pays for the hand-off:
:data:`PARALLEL_WORK`), and finished on the calling thread in problem order: the fallbacks that
go through torch (a start of many atoms, a non-finite solve), the results and the warnings. The
fit is therefore the one-thread fit bit for bit, whatever the number of threads
(``tests/test_svc_threads.py``).

One-vs-one pairs that each get their own matrix (the matrix of all examples over
``cache_size``) build it, start and solve on the pool too, as many at a time as their matrices
fit ``cache_size`` together (:func:`_fit_one_by_one`); fits whose operator has no host storage
take the lazy path, one problem after the other.
"""

from __future__ import annotations

import functools
import math
import time
import warnings

import torch

from ._svc_dense import (
    _CONVERGED,
    _NO_ROWS,
    _NONFINITE,
    COUNTERS,
    VARIANTS,
    Start,
    _fits,
    solve,
    start_from,
)
from ._svc_matrix import full_source, plain_kernel_matrix, plain_operator, plain_problem
from ._threads import parallel_map, workers
from .result import History

__all__ = ["fit_all", "PARALLEL_WORK"]


def fit_all(model, X, problems, C_examples, kdtype, previous, rule, gram=None):
    """:func:`torchfw._svc_dense.fit_problems` (which calls it on one torch thread); ``rule``
    is the lazy path's ``(tol, rtol, check_every)`` (:func:`~torchfw._svc_dense.stopping_rule`)."""
    from ._svc_multiclass import restrict, scatter
    from .kernels import ORDERED_MATVEC_MAX

    variant = VARIANTS[model.solver]
    m = X.shape[0]
    C_all = C_examples if isinstance(C_examples, float) else C_examples.to(X.device)
    # One-vs-one pairs whose matrices fit when all examples' does not: one matrix per pair.
    per_problem = gram is None and not _fits(model, m) and \
        all(p.rows is not None for p in problems)
    max_atoms = ORDERED_MATVEC_MAX
    if per_problem:
        src = diag_np = inv_c_all = None
    elif gram is None:
        # One operator over all examples, labels 1: its matrix K + 1 serves every problem (rows
        # and signs per problem), its diagonal K_ii + 1 + 1/C_i too (labels square away). The
        # rows come from the full matrix or, over cache_size (or for one large binary
        # problem: ROWS_FROM), from a cache of them.
        src, diag_np, inv_c_all = plain_problem(model, X, C_all, kdtype, len(problems) == 1)
    else:  # a precomputed or callable kernel: its Gram matrix is all there is
        from ._svc_custom import custom_matrix

        P, diag_np, inv_c_all = custom_matrix(gram, C_all, kdtype)
        src = full_source(P)
        # No operator to build a large warm start from: sum it from the rows of P.
        max_atoms = m
    if per_problem or src is None:
        return _fit_one_by_one(model, X, problems, C_examples, kdtype, previous, variant, rule,
                               per_problem)
    # Every problem reads the shared rows: prepared here in problem order (the random start
    # subsets drawn as on one thread), started and solved on the pool (_start_and_solve: only
    # compiled code and private vectors), finished here in problem order (fallbacks through
    # torch, results, warnings), so the fit is the one-thread fit bit for bit.
    jobs = []
    for k, problem in enumerate(problems):
        rows = problem.rows
        prev = None if previous is None else previous[k]
        alpha0 = prev if rows is None or prev is None else prev[torch.from_numpy(rows)]
        y = problem.y.astype(src[0].dtype)
        seed = model._problem_seed(k)
        jobs.append(_Job(
            k, problem, alpha0, _NO_ROWS if rows is None else rows, y,
            inv_c_all if rows is None else inv_c_all[rows],
            diag_np if rows is None else diag_np[rows],
            # The lazy path's budget: 100 iterations per example of the problem (a pair's).
            model.max_iter if model.max_iter is not None else 100 * y.shape[0], model.n_init,
            seed))
    # A cache of rows is written as rows arrive: its problems run one after the other (and
    # share the rows they have in common, labels aside).
    threads = 1 if src[1] is not None else \
        workers(len(jobs), sum(float(j.y.shape[0]) ** 2 for j in jobs), PARALLEL_WORK)
    solved = parallel_map(functools.partial(_start_and_solve, src, variant, rule, max_atoms),
                          jobs, threads)
    alphas, results = [], []
    for job, (start, outcome, elapsed) in zip(jobs, solved, strict=True):
        problem, rows, k = job.problem, job.problem.rows, job.k
        sub = functools.partial(restrict, X, C_examples, None, rows)
        if start is None:  # a start of many atoms: through an operator, as the lazy path
            t0 = time.perf_counter()
            start = _operator_start(model, X, sub, job, kdtype, variant)
            outcome = _solve_job(src, variant, rule, job, start)
            elapsed = time.perf_counter() - t0
        if outcome[1] == _NONFINITE and gram is not None:
            raise ValueError(f"SVC: the solve on the given kernel matrix reached non-finite "
                             f"values (problem {k}); check that the kernel's values are of "
                             f"a reasonable scale")
        if outcome[1] == _NONFINITE:  # the lazy path restores the last finite iterate: use it
            Xk, Ck, _ = sub()
            alpha, result = model._fit_binary(Xk, problem.y, Ck, kdtype, job.alpha0, k)
        else:
            alpha, result = _result(model, start, outcome, elapsed, _matrix_info(src))
        alphas.append(scatter(alpha, rows, m))
        results.append(result)
    return alphas, results


#: Sum over the problems of (examples)^2 -- their solves' work, roughly -- from which they are
#: solved on several threads: below, the hand-off costs about what it saves. Fits measured on a
#: 2-core Xeon, one thread vs two (one-vs-rest): iris (3e4) 0.90 vs 1.10 ms, 3 classes of 400
#: (2.4e5) 2.23 vs 2.16 ms, of 800 (9.4e5) 6.1 vs 4.7 ms, of 1,500 (3.3e6) 10.5 vs 7.6 ms.
PARALLEL_WORK = 3e5


class _Job:
    """One problem's inputs to :func:`_start_and_solve`, prepared on the calling thread.

    ``w0`` is the warm start as a float64 array, else ``subset`` the random start subset
    (drawn here, in problem order: numba's generator is per thread); ``y`` None marks a problem
    for the lazy path.
    """

    __slots__ = ("k", "problem", "alpha0", "rows", "y", "inv_c", "diag", "max_iter", "w0",
                 "subset", "op")

    def __init__(self, k, problem, alpha0, rows, y, inv_c, diag, max_iter, n_init, seed):
        from ._svc_start import initial_subset

        self.k, self.problem, self.alpha0, self.rows = k, problem, alpha0, rows
        self.y, self.inv_c, self.diag, self.max_iter = y, inv_c, diag, max_iter
        self.op = None  # a problem's own operator (_fit_one_by_one)
        # Nothing drawn for a problem left to the lazy path (y None): it draws its own.
        self.w0 = None if alpha0 is None or y is None else \
            alpha0.detach().to(torch.float64).numpy()
        self.subset = initial_subset(problem.y, n_init, seed) \
            if alpha0 is None and y is not None else None


def _start_and_solve(src, variant, rule, max_atoms, job):
    """``(start, (n_iter, status, hist, hist_counts), seconds)`` of a job; ``(None, None, _)``
    when its start needs an operator (:func:`_start`).

    Safe on a worker thread when ``src`` is a full matrix: it reads the shared matrix and
    writes only the job's own vectors, in compiled code (and small NumPy allocations).
    """
    t0 = time.perf_counter()
    start = start_from(src, job.rows, job.y, job.inv_c, job.w0, job.subset,
                       keep_previous=variant == 5, max_atoms=max_atoms)
    if start is None:
        return None, None, 0.0
    outcome = _solve_job(src, variant, rule, job, start)
    return start, outcome, time.perf_counter() - t0


def _operator_start(model, X, sub, job, kdtype, variant) -> Start:
    """The start of a job built by the host engine on an operator of the problem's examples
    (``sub()``: their rows and C), as the lazy path builds it (a warm start of many atoms)."""
    from ._scalars import HOST
    from .kernels import SVMDualOperator
    from .objectives import Quadratic
    from .optimizers._engine import QuadraticEngine
    from .oracles import Simplex

    Xk, Ck, _ = sub()
    op = SVMDualOperator(Xk, torch.from_numpy(job.problem.y), model._kernel,
                         Ck if isinstance(Ck, float) else Ck.to(X.device),
                         dtype=kdtype, cache_size=model.cache_size)
    engine = QuadraticEngine(Quadratic(op), Simplex(), job.alpha0.detach(), ops=HOST,
                             keep_previous=variant == 5, pair_columns=variant in (2, 3, 4))
    return Start.of_engine(engine)


def _solve_job(src, variant, rule, job, start):
    """:func:`solve` of a job from ``start`` under the stopping ``rule`` ``(tol, rtol,
    check_every)``; its history arrays copied (the buffers sized for ``max_iter`` are let
    go)."""
    tol, rtol, check_every = rule
    n_iter, status, hist, hist_counts = solve(
        variant, src, job.rows, job.y, job.inv_c, job.diag, start, max_iter=job.max_iter,
        tol=tol, rtol=rtol, check_every=check_every)
    return n_iter, status, hist.copy(), hist_counts.copy()


def _result(model, start, outcome, elapsed, matrix_info):
    """The dual vector and :class:`~torchfw.result.Result` of a finite compiled solve; warns
    (:class:`~torchfw.svm.ConvergenceWarning`) when it stopped at ``max_iter``."""
    from .result import Result, Status

    n_iter, status, hist, hist_counts = outcome
    value, gap = start.value(), start.gap()
    w = torch.from_numpy(start.w)
    result = Result(x=w, value=value, gap=gap, n_iter=n_iter,
                    status=Status.CONVERGED if status == _CONVERGED else Status.MAX_ITER,
                    history=_ChecksHistory(hist, hist_counts, elapsed),
                    weights=w.clone(), best_gap=min(float(hist[:, 2].min()), gap),
                    info={"engine": "compiled whole solve", "execution": "dense",
                          **matrix_info})
    if result.status == Status.MAX_ITER:
        from .svm import ConvergenceWarning

        warnings.warn(f"SVC solver {model.solver!r} stopped on {result.status} after "
                      f"{n_iter} iterations with relative gap "
                      f"{gap / max(2 * value, 1e-300):.3g} > tol={model._stop_tol()}",
                      ConvergenceWarning, stacklevel=5)
    return result.x, result


def _fit_one_by_one(model, X, problems, C_examples, kdtype, previous, variant, rule,
                    own_matrix):
    """The problems each with its own matrix (``own_matrix``: one-vs-one pairs whose matrices
    fit ``cache_size`` when all examples' does not), else -- or where an operator has no host
    storage (``memory_budget``) -- on the lazy path, one after the other.

    A pair's operator is built here (torch), its matrix, start and solve run on the pool
    (:func:`_own_matrix_solve`); at most ``threads + 1`` pairs are in flight, and as many
    matrices as threads fit ``cache_size`` together (the budget each pair's alone fits).
    """
    from ._svc_multiclass import restrict, scatter

    m = X.shape[0]
    threads = 1
    if own_matrix:
        sizes = [float(p.rows.shape[0]) for p in problems]
        matrix_bytes = max(sizes) ** 2 * (8 if kdtype == torch.float64 else 4)
        threads = min(workers(len(problems), sum(n * n for n in sizes), PARALLEL_WORK),
                      max(1, int(float(model.cache_size) * 2**20 // matrix_bytes)))

    def prepared():  # on the calling thread, in problem order
        for k, problem in enumerate(problems):
            rows = problem.rows
            prev = None if previous is None else previous[k]
            alpha0 = prev if rows is None or prev is None else prev[torch.from_numpy(rows)]
            op = None
            if own_matrix:
                Xk, Ck, _ = restrict(X, C_examples, None, rows)
                op = plain_operator(model, Xk, Ck, kdtype)
            if op is None:  # the lazy path, below
                yield _Job(k, problem, alpha0, None, None, None, None, None, None, None)
                continue
            y = problem.y.astype(op._np_dtype)
            seed = model._problem_seed(k)
            job = _Job(k, problem, alpha0, _NO_ROWS, y, op._inv_c_np,
                       op.diagonal().to(torch.float64).numpy(),
                       model.max_iter if model.max_iter is not None else 100 * y.shape[0],
                       model.n_init, seed)
            job.op = op
            yield job

    solved = parallel_map(functools.partial(_own_matrix_solve, variant, rule, threads > 1),
                          prepared(), threads, ahead=threads + 1)
    alphas, results = [], []
    for job, start, outcome, elapsed, src, matrix_info in solved:
        problem, rows, k = job.problem, job.problem.rows, job.k
        sub = functools.partial(restrict, X, C_examples, None, rows)
        if job.y is None:  # no host storage: the lazy path
            Xk, Ck, _ = sub()
            alpha, result = model._fit_binary(Xk, problem.y, Ck, kdtype, job.alpha0, k)
        else:
            if start is None:  # a start of many atoms: through an operator, as the lazy path
                t0 = time.perf_counter()
                start = _operator_start(model, X, sub, job, kdtype, variant)
                outcome = _solve_job(src, variant, rule, job, start)
                elapsed += time.perf_counter() - t0
            if outcome[1] == _NONFINITE:  # the lazy path restores the last finite iterate
                Xk, Ck, _ = sub()
                alpha, result = model._fit_binary(Xk, problem.y, Ck, kdtype, job.alpha0, k)
            else:
                alpha, result = _result(model, start, outcome, elapsed, matrix_info)
        alphas.append(scatter(alpha, rows, m))
        results.append(result)
    return alphas, results


def _own_matrix_solve(variant, rule, on_pool, job):
    """``(job, start, outcome, seconds, row source, matrix info)`` of a problem with its own
    matrix.

    The matrix of ``job.op`` (on this thread alone when ``on_pool``: no pool inside the pool),
    then :func:`torchfw._svc_dense.start_from` and the solve; the operator and the matrix are
    let go as soon as done, except the row source when the start must come from an operator
    (``start`` None). A job without operator (``y`` None) is returned as is, for the lazy path.
    """
    if job.y is None:
        return job, None, None, 0.0, None, {}
    t0 = time.perf_counter()
    src = full_source(plain_kernel_matrix(job.op, threads=1 if on_pool else None))
    job.op = None
    start = start_from(src, job.rows, job.y, job.inv_c, job.w0, job.subset,
                       keep_previous=variant == 5)
    if start is None:
        return job, None, None, time.perf_counter() - t0, src, _matrix_info(src)
    outcome = _solve_job(src, variant, rule, job, start)
    return job, start, outcome, time.perf_counter() - t0, None, _matrix_info(src)


def _matrix_info(src) -> dict:
    """``result_.info`` entries about the rows a compiled solve read: the matrix's bytes, and
    for a cache its rows, hits and misses (rows computed; over all problems of the fit that
    shared it)."""
    from ._svc_matrix import cache_stats

    return {"matrix_bytes": int(src[0].nbytes), **cache_stats(src)}


class _ChecksHistory(History):
    """A :class:`~torchfw.result.History` kept as a compiled solve's check arrays and turned
    into its lists on first read: most fits never read it, and the lists cost as much as the
    solve on small problems (9 us a problem, against ~20 us for each of iris' solves).

    The compiled loop has no clock: the last check carries the solve's total time.
    """

    def __init__(self, hist, hist_counts, elapsed):  # the fields come on first read
        self.__dict__["_checks"] = (hist, hist_counts, elapsed)

    def __getattr__(self, name):
        checks = self.__dict__.pop("_checks", None)
        if checks is None:
            raise AttributeError(name)
        hist, hist_counts, elapsed = checks
        n = hist.shape[0]
        times = [math.nan] * n
        times[-1] = elapsed
        iteration, value, gap = hist.T.tolist()
        # The counts only grow: a counter that is 0 at the last check is 0 at every check.
        used = [(k, counter) for k, counter in enumerate(COUNTERS) if hist_counts[-1, k]]
        steps = [{counter: row[k] for k, counter in used if row[k]}
                 for row in hist_counts.tolist()]
        self.__dict__.update(iteration=[int(i) for i in iteration], value=value, gap=gap,
                             time=times, steps=steps)
        return getattr(self, name)
