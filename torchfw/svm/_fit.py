r"""The binary problems of one :class:`~torchfw.SVC` fit on the compiled whole solve, on threads.

:func:`torchfw.svm._fit.fit_problems` hands the problems here. One matrix :math:`K + 1`
(:mod:`torchfw.svm._matrix`) serves them all: each one-vs-rest problem and one-vs-one pair reads
its signed rows from it and writes only its own vectors, so the problems are independent solves
and the compiled code releases the GIL. They are prepared on the calling thread in problem order
(labels, the random start subsets -- numba's generator is per thread), started and solved on a
small thread pool (:func:`torchfw.utils.threads.parallel_map`, when the work pays for the hand-off:
:data:`PARALLEL_WORK`), and finished on the calling thread in problem order: the fallbacks that
go through torch (a start of many atoms, a non-finite solve), the results and the warnings. The
fit is therefore the one-thread fit bit for bit, whatever the number of threads
(``tests/test_svc_threads.py``).

One-vs-one pairs that each get their own rows (the matrix of all examples over ``cache_size``,
or pairs of :data:`~torchfw.svm._matrix.ROWS_FROM` examples and more:
:func:`~torchfw.svm._matrix.pairs_read_rows`) build their matrix or cache of rows, start and
solve on the pool too, largest first, as many at a time as their matrices fit ``cache_size``
together (:func:`_fit_one_by_one`); fits whose operator has no host storage take the lazy path,
one problem after the other.
"""

from __future__ import annotations

import collections
import contextlib
import functools
import threading
import time

import numpy as np
import torch

from ..optimizers import _kernels as K
from ..utils.threads import one_thread, parallel_map, workers
from ._binary import fit_binary
from ._dense import _CONVERGED, _NONFINITE, VARIANTS, Start, solve
from ._matrix import (
    ROWS_FROM,
    cache_slots,
    full_source,
    own_source,
    own_source_ok,
    pairs_read_rows,
    plain_operator,
    plain_problem,
)
from ._multiclass import OverRows, pair_sizes
from ._pairs import solve_in_blocks
from ._plan import FitPlan
from ._start import initial_subset
from ._start import start as start_compiled

__all__ = ["fit_problems", "dense_budget_ok", "takes_compiled", "fit_all", "shared_problem",
           "full_matrix", "PARALLEL_WORK"]


def shared_problem(plan: FitPlan, X, problems, C_examples):
    """``(row source, diagonal, 1/C)`` of the one matrix :math:`K + 1` that every problem of a
    compiled fit reads (:func:`~torchfw.svm._matrix.plain_problem`; Nones without host
    storage), or None where one-vs-one pairs read their own rows: when the matrix of all
    examples does not fit, or when the pairs are large enough to read few of their rows.

    One operator over all examples, labels 1: its matrix :math:`K + 1` serves every problem
    (rows and signs per problem), its diagonal :math:`K_{ii} + 1 + 1/C_i` too (labels square
    away). The rows come from the full matrix or, over ``cache_size`` (or for one large binary
    problem: :data:`~torchfw.svm._matrix.ROWS_FROM`), from a cache of them. Built before the
    plan's ``tol`` is final, which it does not read: the isolation probe of ``tol="auto"``
    reads the full matrix (:func:`full_matrix`).
    """
    sizes = pair_sizes(problems)
    if sizes is not None and (not _fits(plan, X.shape[0]) or pairs_read_rows(sizes)):
        return None
    C_all = C_examples if isinstance(C_examples, float) else C_examples.to(X.device)
    with one_thread():  # as inside fit_problems: the operator's torch work, on one thread
        return plain_problem(plan, X, C_all, len(problems) == 1)


def full_matrix(shared) -> np.ndarray | None:
    """The whole matrix :math:`K + 1` of a :func:`shared_problem`, or None (no shared rows, or
    a cache of them)."""
    if shared is None or shared[0] is None or shared[0][1] is not None:
        return None
    return shared[0][0]


def fit_all(plan: FitPlan, X, problems, C_examples, previous, gram=None, first=0, shared=None):
    """:func:`torchfw.svm._fit.fit_problems` (which calls it on one torch thread); ``first``
    is the index of ``problems[0]`` in the fit (its seed: one pair solved alone), ``shared``
    the fit's :func:`shared_problem` when already built."""
    from ._multiclass import restrict, scatter
    from .kernels import ORDERED_MATVEC_MAX

    variant = VARIANTS[plan.solver]
    rule = plan.stopping()
    kdtype = plan.dtype
    m = X.shape[0]
    C_all = C_examples if isinstance(C_examples, float) else C_examples.to(X.device)
    per_problem = False
    max_atoms = ORDERED_MATVEC_MAX
    if gram is None:
        if shared is None:
            shared = shared_problem(plan, X, problems, C_examples)
        # One-vs-one pairs on their own rows (a matrix or a cache each): shared_problem's None.
        per_problem = shared is None
        src, diag_np, inv_c_all = (None, None, None) if per_problem else shared
    else:  # a precomputed or callable kernel: its Gram matrix is all there is
        from ._custom import custom_matrix

        P, diag_np, inv_c_all = custom_matrix(gram, C_all, kdtype)
        src = full_source(P)
        # No operator to build a large warm start from: sum it from the rows of P.
        max_atoms = m
    if per_problem or src is None:
        return _fit_one_by_one(plan, X, problems, C_examples, previous, variant, rule,
                               per_problem)
    assert diag_np is not None and inv_c_all is not None  # a row source comes with both
    # One-vs-one pairs and small one-vs-rest problems on the shared matrix: in compiled blocks
    # to the end of their first chunk (svm/_pairs.py); those not done by then, one by one below.
    small = None
    # One binary problem over all examples keeps its one-by-one solve (solve_in_blocks' None).
    if len(problems) > 1 or problems[0].rows is not None:
        with _cancelled_on_error() as stop:
            small = solve_in_blocks(plan, src, problems, previous, inv_c_all, diag_np, variant,
                                    rule, max_atoms, stop, PARALLEL_WORK)
    # Every problem reads the shared rows: prepared here in problem order (the random start
    # subsets drawn as on one thread), started and solved on the pool (_start_and_solve: only
    # compiled code and private vectors), finished here in problem order (fallbacks through
    # torch, results, warnings), so the fit is the one-thread fit bit for bit.
    jobs = []
    for k in range(len(problems)) if small is None else np.flatnonzero(~small.done).tolist():
        problem = problems[k]
        rows = problem.rows
        prev = None if previous is None else previous[k]
        alpha0 = prev if rows is None or prev is None else prev[torch.from_numpy(rows)]
        y = problem.y.astype(src[0].dtype)
        jobs.append(_Job(
            k, problem, alpha0, _NO_ROWS if rows is None else rows, y,
            inv_c_all if rows is None else inv_c_all[rows],
            diag_np if rows is None else diag_np[rows],
            # The lazy path's budget, over the problem's examples (a pair's).
            plan.budget(y.shape[0]), plan.n_init, plan.problem_seed(first + k)))
    if gram is None and len(problems) == 1 and len(jobs) == 1 and src[1] is None and \
            jobs[0].rows.shape[0] == 0:
        # One binary problem on the whole matrix, built by this fit for it (a given kernel
        # matrix excepted): read after the problem's start by its solve alone.
        jobs[0].private = True
    # A cache of rows is written as rows arrive: its problems run one after the other (and
    # share the rows they have in common, labels aside).
    threads = 1 if src[1] is not None else \
        workers(len(jobs), sum(float(j.y.shape[0]) ** 2 for j in jobs), PARALLEL_WORK)
    if threads == 1:  # on this thread alone: no solve on another to stop (_cancelled_on_error)
        solved = [_start_and_solve(src, variant, rule, max_atoms, job) for job in jobs]
    else:
        with _cancelled_on_error() as stop:
            solved = parallel_map(functools.partial(_start_and_solve, src, variant, rule,
                                                    max_atoms), _stoppable(jobs, stop), threads)
    alphas, results = [], []
    # One-vs-rest problems solved in blocks that stopped at max_iter: warned for in problem
    # order among those solved one by one (warned for in _result), as the one-by-one path does.
    stopped = collections.deque([] if small is None else small.stopped())
    for job, (start, outcome, elapsed) in zip(jobs, solved, strict=True):
        problem, rows, k = job.problem, job.problem.rows, job.k
        while stopped and stopped[0][0] < k:
            _warn_stopped(plan, *stopped.popleft())
        sub = functools.partial(restrict, X, C_examples, None, rows)
        if start is None:  # a start of many atoms: through an operator, as the lazy path
            t0 = time.perf_counter()
            start = _operator_start(plan, X, sub, job, variant)
            outcome = _solve_job(src, variant, rule, job, start)
            elapsed = time.perf_counter() - t0
        if outcome[1] == _NONFINITE and gram is not None:
            raise ValueError(f"SVC: the solve on the given kernel matrix reached non-finite "
                             f"values (problem {k}); check that the kernel's values are of "
                             f"a reasonable scale")
        if outcome[1] == _NONFINITE:  # the lazy path restores the last finite iterate: use it
            Xk, Ck, _ = sub()
            alpha, result = fit_binary(plan, Xk, problem.y, Ck, job.alpha0, k)
        else:
            alpha, result = _result(plan, start, outcome, elapsed, _matrix_info(src))
        alphas.append(scatter(alpha, rows, m))
        results.append(result)
    while stopped:
        _warn_stopped(plan, *stopped.popleft())
    if small is not None:
        return small.merged({job.k: (a.values if isinstance(a, OverRows) else a, r)
                             for job, a, r in zip(jobs, alphas, results, strict=True)}, m,
                            _matrix_info(src))
    return alphas, results


def _warn_stopped(plan: FitPlan, k: int, n_iter: int, gap: float, value: float) -> None:
    """The warning of :func:`_result` for problem ``k``, solved in a block, stopped at
    ``max_iter`` (the same text and caller's frame)."""
    from ..result import Status

    plan.warn_unconverged(Status.MAX_ITER, n_iter, gap, value, stacklevel=5)


#: Sum over the problems of (examples)^2 -- their solves' work, roughly -- from which they are
#: solved on several threads: below, the hand-off costs about what it saves. Fits measured on a
#: 2-core Xeon, one thread vs two (one-vs-rest): iris (3e4) 0.90 vs 1.10 ms, 3 classes of 400
#: (2.4e5) 2.23 vs 2.16 ms, of 800 (9.4e5) 6.1 vs 4.7 ms, of 1,500 (3.3e6) 10.5 vs 7.6 ms.
PARALLEL_WORK = 3e5


@contextlib.contextmanager
def _cancelled_on_error():
    """An event set when the block raises (a ``KeyboardInterrupt`` while waiting on the pool):
    the solves still running on worker threads read it between chunks and stop, instead of
    running to the end while the process waits for its threads
    (:data:`torchfw.optimizers._rows.CHUNK_SECONDS`)."""
    stop = threading.Event()
    try:
        yield stop
    except BaseException:
        stop.set()
        raise


def _stoppable(jobs, stop):
    """The jobs, each carrying ``stop`` to its solve."""
    for job in jobs:
        job.stop = stop
        yield job


class _Job:
    """One problem's inputs to :func:`_start_and_solve`, prepared on the calling thread.

    ``w0`` is the warm start as a float64 array, else ``subset`` the random start subset
    (drawn here, in problem order: numba's generator is per thread); ``y`` None marks a problem
    for the lazy path; ``private``: the problem owns its full matrix, which its solve may sign
    in place (:func:`_solve_job`).
    """

    __slots__ = ("k", "problem", "alpha0", "rows", "y", "inv_c", "diag", "max_iter", "w0",
                 "subset", "op", "stop", "private")

    def __init__(self, k, problem, alpha0, rows, y, inv_c, diag, max_iter, n_init, seed):
        self.k, self.problem, self.alpha0, self.rows = k, problem, alpha0, rows
        self.y, self.inv_c, self.diag, self.max_iter = y, inv_c, diag, max_iter
        self.op = None  # a problem's own operator (_fit_one_by_one)
        self.stop = None  # set when the fit is interrupted (_cancelled_on_error)
        self.private = False
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


def _operator_start(plan: FitPlan, X, sub, job, variant) -> Start:
    """The start of a job built by the host engine on an operator of the problem's examples
    (``sub()``: their rows and C), as the lazy path builds it (a warm start of many atoms)."""
    from ..objectives import Quadratic
    from ..optimizers._engine import QuadraticEngine
    from ..sets.oracles import Simplex
    from ..utils.scalars import HOST
    from .kernels import SVMDualOperator

    Xk, Ck, _ = sub()
    op = SVMDualOperator(Xk, torch.from_numpy(job.problem.y), plan.kernel,
                         Ck if isinstance(Ck, float) else Ck.to(X.device),
                         dtype=plan.dtype, cache_size=plan.cache_size)
    engine = QuadraticEngine(Quadratic(op), Simplex(), job.alpha0.detach(), ops=HOST,
                             keep_previous=variant == 5, pair_columns=variant in (2, 3, 4))
    return Start.of_engine(engine)


def _solve_job(src, variant, rule, job, start):
    """:func:`solve` of a job from ``start`` under the stopping ``rule`` ``(tol, rtol,
    check_every)``: the engine's :class:`~torchfw.optimizers._rows.LoopRun`. A job that owns
    its matrix (``job.private``) has its rows signed in place (:func:`torchfw.svm._dense.
    signed_matrix`)."""
    tol, rtol, check_every = rule
    return solve(variant, src, job.rows, job.y, job.inv_c, job.diag, start,
                 max_iter=job.max_iter, tol=tol, rtol=rtol, check_every=check_every,
                 stop=job.stop, private=job.private)


def _result(plan: FitPlan, start, outcome, elapsed, matrix_info):
    """The dual vector and :class:`~torchfw.result.Result` of a finite compiled solve (the
    engine's, :meth:`~torchfw.optimizers._rows.LoopRun.result`); warns
    (:meth:`~torchfw.svm._plan.FitPlan.warn_unconverged`) when it stopped at ``max_iter``."""
    result = outcome.result(start, elapsed, {"engine": "compiled whole solve",
                                             "execution": "dense", **matrix_info})
    if outcome.status != _CONVERGED:
        plan.warn_unconverged(result.status, result.n_iter, result.gap, result.value,
                              stacklevel=5)
    return result.x, result


def _fit_one_by_one(plan: FitPlan, X, problems, C_examples, previous, variant, rule,
                    own_matrix):
    """The problems each with its own rows (``own_matrix``: one-vs-one pairs, a matrix or a
    cache of rows each: :func:`~torchfw.svm._matrix.own_source`), else -- or where an operator
    has no host storage (``memory_budget``) -- on the lazy path, one after the other.

    A pair's operator is built here (torch), its rows, start and solve run on the pool
    (:func:`_own_matrix_solve`), the largest pairs first; at most ``threads + 1`` pairs are in
    flight, and as many full matrices as threads fit ``cache_size`` together; a pair's cache
    of rows gets ``cache_size / threads``.
    """
    from ._multiclass import BinaryProblem, restrict, scatter

    m = X.shape[0]
    threads = 1
    order: list[int] = list(range(len(problems)))
    budget = float(plan.cache_size) * 2**20
    if own_matrix:
        sizes = [float(p.rows.shape[0]) for p in problems]
        threads = workers(len(problems), sum(n * n for n in sizes), PARALLEL_WORK)
        # Pairs below ROWS_FROM hold their full matrix: as many in flight as fit cache_size;
        # larger ones a cache of their rows, in their share of it (own_source).
        full = [n * n * (8 if plan.dtype == torch.float64 else 4) for n in sizes
                if n < ROWS_FROM]
        if full:
            threads = min(threads, max(1, int(budget // max(full))))
        # The largest first, so that the last to finish is a small one (the results are
        # taken in problem order below; each problem's start depends on its index only).
        order = sorted(order, key=lambda k: -sizes[k])
    share = budget / threads

    def prepared():  # on the calling thread
        for k in order:
            problem = problems[k]
            rows = problem.rows
            prev = None if previous is None else previous[k]
            alpha0 = prev if rows is None or prev is None else prev[torch.from_numpy(rows)]
            op = None
            # A pair with no row source in its share of cache_size is solved below, by itself.
            if own_matrix:
                Xk, Ck, _ = restrict(X, C_examples, None, rows)
                op = plain_operator(plan, Xk, Ck)
                if op is not None and not own_source_ok(op, share):
                    op = None
            if op is None:  # the lazy path, below
                yield _Job(k, problem, alpha0, None, None, None, None, None, None, None)
                continue
            y = problem.y.astype(op._np_dtype)
            job = _Job(k, problem, alpha0, _NO_ROWS, y, op._inv_c_np, op.diagonal64(),
                       plan.budget(y.shape[0]), plan.n_init, plan.problem_seed(k))
            job.op = op
            yield job

    with _cancelled_on_error() as stop:
        solved = parallel_map(functools.partial(_own_matrix_solve, variant, rule, threads > 1,
                                                share),
                              _stoppable(prepared(), stop), threads, ahead=threads + 1)
    alphas, results = [], []
    for job, start, outcome, elapsed, src, matrix_info in sorted(solved, key=lambda r: r[0].k):
        problem, rows, k = job.problem, job.problem.rows, job.k
        sub = functools.partial(restrict, X, C_examples, None, rows)
        if job.y is None and own_matrix and rows.shape[0] >= ROWS_FROM:
            # A pair over cache_size (shuttle's largest class against another, 10,000
            # examples): one binary problem on a cache of its rows, compiled, as a binary fit
            # of that size; it took the lazy path's interpreted loop (~1 ms an iteration).
            Xk, Ck, _ = sub()
            (alpha,), (result,) = fit_all(
                plan, Xk, [BinaryProblem(None, problem.y)], Ck,
                None if job.alpha0 is None else [job.alpha0], first=k)
        elif job.y is None:  # no host storage: the lazy path
            Xk, Ck, _ = sub()
            alpha, result = fit_binary(plan, Xk, problem.y, Ck, job.alpha0, k)
        else:
            if start is None:  # a start of many atoms: through an operator, as the lazy path
                t0 = time.perf_counter()
                start = _operator_start(plan, X, sub, job, variant)
                outcome = _solve_job(src, variant, rule, job, start)
                elapsed += time.perf_counter() - t0
            if outcome[1] == _NONFINITE:  # the lazy path restores the last finite iterate
                Xk, Ck, _ = sub()
                alpha, result = fit_binary(plan, Xk, problem.y, Ck, job.alpha0, k)
            else:
                alpha, result = _result(plan, start, outcome, elapsed, matrix_info)
        alphas.append(scatter(alpha, rows, m))
        results.append(result)
    return alphas, results


def _own_matrix_solve(variant, rule, on_pool, budget_bytes, job):
    """``(job, start, outcome, seconds, row source, matrix info)`` of a problem with its own
    matrix.

    The row source of ``job.op`` in ``budget_bytes`` (:func:`~torchfw.svm._matrix.own_source`:
    its matrix, on this thread alone when ``on_pool`` -- no pool inside the pool -- or a cache
    of its rows), then :func:`torchfw.svm._fit.start_from` and the solve; the operator and the matrix are
    let go as soon as done, except the row source when the start must come from an operator
    (``start`` None). A job without operator (``y`` None) is returned as is, for the lazy path.
    """
    if job.y is None:
        return job, None, None, 0.0, None, {}
    t0 = time.perf_counter()
    src = own_source(job.op, budget_bytes, threads=1 if on_pool else None)
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
    from ._matrix import cache_stats

    return {"matrix_bytes": int(src[0].nbytes), **cache_stats(src)}


# ---------------------------------------------------------------------------------------------
# When the compiled path applies, and the starts of its problems.
# ---------------------------------------------------------------------------------------------


def takes_compiled(plan: FitPlan, X, problems=None) -> bool:
    """Whether the fit takes the compiled whole-solve path (see :mod:`torchfw.svm._dense`):
    ``dense=False`` never, ``"auto"`` when :func:`dense_budget_ok`, ``True`` always -- or a
    ValueError saying what it lacks."""
    if plan.dense is False or plan.dense is np.False_:
        return False
    if plan.dense == "auto":
        return dense_budget_ok(plan, X, problems)
    if not (K.HAVE_NUMBA and X.device.type == "cpu" and plan.solver in VARIANTS
            and plan.sample_size is None and plan.time_limit is None and not plan.progress):
        raise ValueError(f"dense=True runs the compiled CPU solve: it needs numba, CPU data, "
                         f"a solver among {tuple(VARIANTS)} and no sample_size, "
                         f"time_limit or progress bar (verbose on a terminal)")
    return True


def dense_budget_ok(plan: FitPlan, X, problems=None) -> bool:
    """Whether ``SVC(dense="auto")`` takes the compiled path on ``X``.

    It does on the CPU, with numba, for the solvers above (no candidate sampling, clock or
    progress bar, which the compiled loop does not have: ``verbose`` counts only where a bar
    would be drawn, the plan's ``progress``), below the plan's ``large_m`` examples (the
    sampled storage's domain, :data:`torchfw.svm._plan.LARGE_M`). Its rows of
    :math:`K + 1` come from the full matrix when it fits ``cache_size`` MB -- the memory the
    lazy path's column cache may use anyway (LIBSVM's default, 200 MB: m <= 7,240 in float32,
    5,120 in float64) -- and otherwise from a cache of ``cache_size`` MB of rows (at least two),
    computed on first use (:func:`torchfw.svm._matrix.cached_source`: the lazy path's column
    cache and admission policy, in compiled code; every kernel but the float64 RBF, whose
    exponential is NumPy's). One-vs-one ``problems`` need the largest pair's matrix to fit (10
    classes of 14,000 examples: pairs of 2,800).
    """
    if not K.HAVE_NUMBA or X.device.type != "cpu" or plan.solver not in VARIANTS:
        return False
    if plan.sample_size is not None or plan.time_limit is not None or plan.progress:
        return False
    n = X.shape[0]
    sizes = pair_sizes(problems) if problems else None
    if sizes is not None:
        # One-vs-one: pairs over the budget are solved one by one on a cache of their rows.
        n = int(sizes.max())
    if _fits(plan, n):
        return True
    f64 = plan.dtype == torch.float64
    return n < plan.large_m and not (plan.kernel_param == "rbf" and f64) and \
        cache_slots(plan, n, np.float64 if f64 else np.float32) >= 2


def _fits(plan: FitPlan, n: int) -> bool:
    """Whether an ``n x n`` matrix in the plan's precision fits its ``cache_size``."""
    return cache_slots(plan, n, np.float64 if plan.dtype == torch.float64 else np.float32) >= n


def fit_problems(plan: FitPlan, X, problems, C_examples, previous, gram=None, shared=None):
    """Solve the binary problems of the fit ``plan`` on the compiled path; ``(alphas, results)``.

    The compiled loop stops on the plan's numbers (:meth:`~torchfw.svm._plan.FitPlan.stopping`),
    those the lazy path's optimizer stops on, so that a replaced rule (``benchmarks/
    reproduce.py``'s absolute gap) means the same on both paths.

    ``gram`` is the ``m x m`` kernel matrix of a precomputed or callable kernel (see
    :mod:`torchfw.svm._custom`), else None: the matrix of the plan's kernel on ``X``
    (``shared``, the fit's :func:`shared_problem` when the caller built it).

    One matrix :math:`K + 1` serves every problem, each reading its signed rows from it
    (:func:`_row_py`; a one-vs-one pair its examples' entries) -- or, for one-vs-one when the
    matrix of all examples exceeds ``cache_size`` but the pairs' do not, one matrix per pair.
    Each problem starts from the lazy path's start (:func:`_start`), so that its iterates are
    those of the lazy path. Torch runs on one thread meanwhile (:mod:`torchfw.utils.threads`):
    around the compiled code its thread pool costs more than the tensor work it would share
    (iris 0.47 s -> 0.08 s per fit on a busy 2-core machine); the compiled matrix and solves
    use the cores through Python threads instead (:mod:`torchfw.svm._fit`), with the same
    results bit for bit.
    """
    with one_thread():
        return fit_all(plan, X, problems, C_examples, previous, gram, shared=shared)


_NO_ROWS = np.zeros(0, dtype=np.int64)


def _start(src, rows, y, inv_c, y_pm, alpha0, n_init, seed, *, keep_previous,
           max_atoms=None):
    """The lazy path's start of the problem read from the row source ``src`` (:func:`_row_py`),
    or None.

    ``alpha0`` is a warm start (or None: the exact solution on the initial subset, drawn from
    ``y_pm``, ``n_init`` and ``seed`` by :func:`torchfw.svm._start.initial_subset`); the rest
    is :func:`start_from`'s.
    """
    return start_from(src, rows, y, inv_c,
                      None if alpha0 is None else alpha0.detach().to(torch.float64).numpy(),
                      initial_subset(y_pm, n_init, seed) if alpha0 is None else None,
                      keep_previous=keep_previous, max_atoms=max_atoms)


def start_from(src, rows, y, inv_c, w0, subset, *, keep_previous, max_atoms=None):
    """The lazy path's start from the weights ``w0`` (float64) or, when None, from the exact
    solution on the examples ``subset``; None above ``max_atoms`` nonzeros.

    ``max_atoms`` defaults to as many as the lazy path's ordered sum takes
    (:data:`torchfw.svm.kernels.ORDERED_MATVEC_MAX`); above (a large warm start), the caller builds
    the start from an operator, as the lazy path does. Compiled code on the start's own
    vectors and reads of ``src`` only: on a worker thread when ``src`` is a full matrix.
    """
    from .kernels import ORDERED_MATVEC_MAX

    if max_atoms is None:
        max_atoms = ORDERED_MATVEC_MAX
    start = Start(y.shape[0], keep_previous)
    if w0 is None:
        subset = np.asarray(subset, dtype=np.int64)
    else:
        start.w[:] = w0
        subset = _NO_ROWS  # no subset to solve: the warm start is the weights
    if start_compiled(src[0], src[1], rows, y, inv_c, subset, start.w, start.s, max_atoms,
                      keep_previous, start.wp, start.sp, start.support, start.state) < 0:
        return None
    return start
