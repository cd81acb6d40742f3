r"""Small binary problems of a multiclass fit solved in compiled blocks, their solutions kept
compact.

One-vs-one trains :math:`k(k-1)/2` binary problems; with many small classes most are tiny
(1,000 classes of 2 examples: 499,500 pairs of 4). Solved one at a time, each pays a fixed
Python cost (its job, its start and solve arrays, its :class:`~torchfw.result.Result`: 0.23 ms
a pair in a profile of 100 classes, against microseconds of compiled work) and keeps its
objects to the end of the fit: over 100 s at 1,000 classes. One-vs-rest's :math:`k` problems on
a few hundred examples pay the same per problem, and on threads more: their Python set-up
holds the GIL, which two threads hand over at the interpreter's switch interval (5 ms), not
when the other asks (vowel, 11 problems of 396 examples, took 1.3 ms of Python set-up a fit
around about 2 ms of compiled solves).

:func:`solve_in_blocks` runs the problems that read the rows of one shared matrix in blocks,
one compiled call per block: for each problem the same calls as the one-by-one path -- the
random start subset (:func:`torchfw.svm._start.initial_subset`), the start (its exact solve on
the subset), the solve loop up to the end of its first chunk (:func:`torchfw.svm._dense.solve`)
-- on the same shared rows (a one-vs-one pair's entries, or for one-vs-rest all rows, read as
the one-by-one path reads them), so the same iterates bit for bit. A problem whose start needs
an operator, whose solve reaches non-finite values or is still running at the end of its first
chunk (a pause, where the one-by-one path reads a Ctrl-C) is left to the one-by-one path, which
solves it again from its start. Most problems end well within their first chunk: the
one-vs-one pairs of ``SVC()`` on segment (pairs of ~495) stop after 10-680 iterations, their
first chunk being 2,000. Solved one by one, pairs of tens to hundreds of examples spent as
much in their Python set-up (job, start and solve arrays, result, the thread hand-off) as in
their compiled solves.

:class:`BlockAlphas` and :class:`BlockResults` hold all problems' dual vectors (each on its own
rows, one flat array) and the scalars of their results (arrays), and build a problem's vector
or :class:`~torchfw.result.Result` when one is read.
"""

from __future__ import annotations

import bisect
import itertools
import time
import warnings
from collections.abc import Iterator, Sequence

import numpy as np
import torch

from .. import exceptions
from ..optimizers import _compiled_loop as _loop
from ..optimizers import _rows
from ..utils.jit import compiled_kernels, njit
from ..utils.threads import parallel_map, workers
from . import _dense as _svc_dense
from . import _start as _svc_start
from ._multiclass import OverRows, PairProblems

__all__ = ["solve_in_blocks", "BlockSolves", "BlockAlphas", "BlockResults", "BLOCK_WORK",
           "ONE_THREAD_BLOCK_WORK", "OVR_BLOCKS_MAX"]

#: Work of one compiled call, as the sum over its problems of (examples + 8)^2: about 1 ms, so
#: that a Ctrl-C between blocks is honoured at once and blocks spread over the threads.
BLOCK_WORK = 50_000
#: The same on one thread, where no block is spread: a few milliseconds, still honoured at
#: once. Each compiled call costs ~9 us to dispatch its 25 arguments; glass (6 one-vs-rest
#: problems of 160 examples, 0.85 ms of solves) went from 4 calls to 1, 0.03 ms of a 1.8 ms fit.
ONE_THREAD_BLOCK_WORK = 4 * BLOCK_WORK

# Columns of the per-problem scalars a block writes.
_VALUE, _GAP, _BEST_GAP, _N_ITER, _STATUS, _OK = range(6)
_FALLBACK = -1.0  # _OK of a problem left to the one-by-one path


def _solve_block(P, cache, rows, shared_rows, offsets, y, y_pm, inv_c, diag, seeds, budgets,
                 pairs, n_init, max_atoms, keep_previous, variant, tol, rtol, check_every,
                 zero_tol, chunks, n_counters, w_out, out):
    """The problems ``pairs`` (indices into ``offsets``), each as :func:`torchfw.svm._fit`'s
    ``start_from`` and ``_solve_job`` solve it: subset, start, one chunk of the loop.

    Problem ``p``'s labels are ``y[offsets[p]:offsets[p + 1]]`` (the matrix's dtype; ``y_pm``
    the same in float64, for the subset's draw); its weights go to the same slice of ``w_out``
    and its scalars to ``out[p]``. A one-vs-one pair's examples are the same slice of ``rows``,
    ``inv_c`` and ``diag``; with ``shared_rows`` (one-vs-rest) every problem holds all
    examples in order: no rows (the empty rows of :func:`torchfw.svm._dense._row_py`, as the
    one-by-one path passes them) and all of ``inv_c`` and ``diag``.
    """
    for q in range(pairs.shape[0]):
        p = pairs[q]
        a = offsets[p]
        b = offsets[p + 1]
        n = b - a
        if shared_rows:
            r = rows[0:0]
            ic = inv_c[0:n]
            dg = diag[0:n]
        else:
            r = rows[a:b]
            ic = inv_c[a:b]
            dg = diag[a:b]
        yp = y[a:b]
        if n <= n_init:
            # the draw takes every example (both classes in full), in order: no generator
            # to seed (numba's Mersenne Twister, 624 words, reseeded for every pair)
            subset = np.arange(n)
        else:
            subset = _subset_in(y_pm[a:b], n_init, seeds[p])
        w = np.zeros(n)
        s = np.empty(n)
        if keep_previous:
            wp = np.empty(n)
            sp = np.empty(n)
            support = np.empty(n, dtype=np.int64)
        else:
            wp = w
            sp = s
            support = np.empty(1, dtype=np.int64)
        state = np.zeros(21)
        if _start_in(P, cache, r, yp, ic, subset, w, s, max_atoms, keep_previous, wp, sp,
                     support, state) < 0:
            out[p, 5] = -1.0
            continue
        this = budgets[p]
        pause_at = chunks[p]
        # the checks of the first chunk (sized as every caller of the loop sizes them): a
        # problem still running at pause_at is left to the one-by-one path
        n_checks = _checks_for(min(this, pause_at), check_every)
        hist = np.empty((n_checks, 3))
        hist_counts = np.empty((n_checks, n_counters), dtype=np.int64)
        counts = np.zeros(n_counters, dtype=np.int64)
        # The one compiled loop over the problem's signed rows (torchfw.svm._dense.row_source);
        # no linear term, so the diagonal stands in for it (read only with has_ct).
        bufs = np.empty((2, n), dtype=P.dtype)
        k, status, n_hist = _solve_in(
            variant, (P, cache, r, yp, ic), bufs, dg, dg, False, 0.0, w, s, wp,
            sp, support, state, this, tol, rtol, check_every, zero_tol, counts, hist,
            hist_counts, True, pause_at)
        if status != _CONVERGED and status != _MAX_ITER:  # paused, non-finite: one by one
            out[p, 5] = -1.0
            continue
        w_out[a:b] = w
        gap = state[0] - state[2]
        best = gap
        for i in range(n_hist):
            if hist[i, 2] < best:
                best = hist[i, 2]
        out[p, 0] = 0.5 * (state[0] + state[1]) + 0.0
        out[p, 1] = gap
        out[p, 2] = best
        out[p, 3] = k
        out[p, 4] = status
        out[p, 5] = 1.0


# The callees and constants, by global name (numba resolves them when it compiles the block).
_checks_for = _loop.checks_for_compiled
_CONVERGED, _MAX_ITER = _loop.CONVERGED, _loop.MAX_ITER
_subset_in = _svc_start._subset_compiled
_start_in = _svc_start.start
_solve_in = _loop.run_loop
_solve_block_compiled = njit(_solve_block) if _subset_in is not None else None


#: The iterations of :func:`torchfw.svm._dense.solve`'s first chunk on ``n`` examples
#: (the row-source storage's, :func:`torchfw.optimizers._rows.first_pause`).
_first_chunk = _rows.first_pause


class BlockSolves:
    """What :func:`solve_in_blocks` solved: ``done[k]`` for problem ``k``, the weights of
    every problem on its rows (``w``, at ``offsets``) and the scalars of the done ones;
    ``one_vs_rest`` when the problems are one-vs-rest's."""

    def __init__(self, problems, w, offsets, out, done, elapsed, one_vs_rest=False):
        self.problems, self.w, self.offsets, self.out = problems, w, offsets, out
        self.done, self.elapsed, self.one_vs_rest = done, elapsed, one_vs_rest

    def stopped(self) -> list[tuple[int, int, float, float]]:
        """``(k, n_iter, gap, value)`` of the one-vs-rest problems solved here that stopped at
        ``max_iter``, in problem order: the caller warns for each in turn among the problems
        solved one by one, as the one-by-one path does (one-vs-one pairs are warned for
        together, here)."""
        if not self.one_vs_rest:
            return []
        stopped = np.flatnonzero(self.done & (self.out[:, _STATUS] == 1))
        return [(int(k), int(self.out[k, _N_ITER]), float(self.out[k, _GAP]),
                 float(self.out[k, _VALUE])) for k in stopped]

    def merged(self, others: dict, m: int,
               matrix_info: dict) -> tuple[BlockAlphas, BlockResults]:
        """All problems' dual vectors and results: the blocks', and ``others`` (``{k: (alpha
        over the problem's rows, result)}``) from the one-by-one path; ``matrix_info`` the
        ``info`` entries about the shared rows, once every problem is solved (a cache's hits
        and misses over all of them, as the one-by-one results report them)."""
        for k, (alpha, _) in others.items():
            a, b = self.offsets[k], self.offsets[k + 1]
            self.w[a:b] = alpha.detach().to(torch.float64).cpu().numpy()
        results = BlockResults(self.out, self.done, {k: r for k, (_, r) in others.items()},
                               self.w, self.offsets, self.elapsed, matrix_info)
        return BlockAlphas(self.w, self.offsets, self.problems, m), results


#: One-vs-rest problems of up to this many examples are solved in blocks (each of them to the
#: end of its first chunk, :func:`torchfw.optimizers._rows.first_chunk`: 2,000 iterations up to
#: 1,000 examples, 1,000 at 2,000). They stop well within it: ``SVC()`` on glass (160
#: examples, 6 classes) after 90-450 iterations, vowel (396, 11) 210-400, digits (1,257, 10)
#: 80-300. Larger ones (sector's 6,412 examples, a first chunk of 311 iterations) would mostly
#: run past it and be solved again: one by one, each has its compiled call for hundreds of
#: milliseconds anyway.
OVR_BLOCKS_MAX = 2000


def _layout(problems):
    """``(sizes, offsets, rows, labels ±1 (float64), shared_rows)`` of the ``problems`` for
    :func:`_solve_block`, or None when they do not go to blocks."""
    if isinstance(problems, PairProblems):  # the pairs' arrays as they are
        return problems.sizes, problems.offsets, problems.rows, problems.y, False
    if all(p.rows is None for p in problems):
        # One-vs-rest: every problem over all m examples, its labels one after the other. One
        # binary problem keeps its one-by-one solve (and its history of every check).
        m = problems[0].y.shape[0]
        if len(problems) < 2 or m > OVR_BLOCKS_MAX:
            return None
        sizes = np.full(len(problems), m, dtype=np.int64)
        offsets = np.arange(len(problems) + 1, dtype=np.int64) * m
        return (sizes, offsets, np.zeros(0, dtype=np.int64),
                np.concatenate([p.y for p in problems]).astype(np.float64), True)
    if any(p.rows is None for p in problems):
        return None
    sizes = np.fromiter((p.rows.shape[0] for p in problems), dtype=np.int64,
                        count=len(problems))
    offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    return (sizes, offsets, np.concatenate([p.rows for p in problems]).astype(np.int64),
            np.concatenate([p.y for p in problems]).astype(np.float64), False)


def _blocks(work: list[float], size: float = BLOCK_WORK) -> list[np.ndarray]:
    """The problems ``0 .. len(work) - 1`` in consecutive blocks of about ``size`` each
    (``work[k]`` problem ``k``'s): a block ends after the last problem whose cumulative work
    is at most a multiple of ``size``, and holds at least one problem."""
    cumulative = list(itertools.accumulate(work))
    total, n = cumulative[-1], len(work)
    cuts = sorted({min(max(bisect.bisect_right(cumulative, j * size), 1), n)
                   for j in range(1, int(total // size) + 2)
                   if j * size < total + size} | {n})
    starts = [0] + cuts[:-1]
    return [np.arange(a, b) for a, b in zip(starts, cuts, strict=True) if b > a]


def solve_in_blocks(plan, src, problems, previous, inv_c_all, diag_np, variant, rule,
                    max_atoms, stop, parallel_work: float) -> BlockSolves | None:
    """Solve the one-vs-one pairs or one-vs-rest ``problems`` on the shared row source ``src``,
    in compiled blocks.

    ``src`` is the row source shared by all problems (:mod:`torchfw.svm._matrix`),
    ``inv_c_all`` and ``diag_np`` its examples' :math:`1/C_i` and :math:`K_{ii} + 1 + 1/C_i`,
    ``rule`` the stopping rule ``(tol, rtol, check_every)``, ``stop`` an event that ends the
    blocks (a cancelled fit), ``parallel_work`` the work from which the blocks run on threads
    (:data:`torchfw.svm._fit.PARALLEL_WORK`). None when the problems do not go to blocks: one
    binary problem, one-vs-rest over :data:`OVR_BLOCKS_MAX` examples, a warm start (each
    problem starts from its previous solution, one by one), no numba.
    Each problem runs up to the end of its first chunk (:func:`torchfw.svm._dense.solve`), the
    one compiled call the one-by-one path would make first; a problem not done by then is
    marked not ``done`` and left to the one-by-one path, which solves it again (the waste is
    bounded by that first chunk, on a problem that needs more than it anyway).
    """
    if _solve_block_compiled is None or not compiled_kernels() or previous is not None or \
            not problems:
        return None
    layout = _layout(problems)
    if layout is None:
        return None
    sizes, offsets, rows, y_pm, shared_rows = layout
    tol, rtol, check_every = rule
    # A problem's budget and first chunk depend on its size alone: once per distinct size (in
    # Python: a few dozen problems, where NumPy's unique and splits cost more than the loop)
    size_list = sizes.tolist()
    per_size = {n: (plan.budget(n), _first_chunk(n, check_every)) for n in set(size_list)}
    budgets = np.array([per_size[n][0] for n in size_list], dtype=np.int64)
    chunks = np.array([per_size[n][1] for n in size_list], dtype=np.int64)
    y = y_pm.astype(src[0].dtype)
    # problem k's seed is the fit's plus k (FitPlan.problem_seed)
    seeds = (plan.problem_seed(0) + np.arange(len(problems), dtype=np.int64)) % 2**32
    # Blocks of about BLOCK_WORK, each a compiled call; on threads over a full matrix (a
    # cache of rows is written as rows arrive: one thread).
    work = [(n + 8.0) ** 2 for n in size_list]
    blocks = _blocks(work)
    threads = 1 if src[1] is not None else \
        workers(len(blocks), float(sum(float(n) * n for n in size_list)), parallel_work)
    if threads == 1 and len(blocks) > 1:  # nothing to spread: fewer calls, each their cost
        blocks = _blocks(work, ONE_THREAD_BLOCK_WORK)
    w = np.zeros(int(offsets[-1]))
    out = np.zeros((len(problems), 6))
    inv_c, diag = (inv_c_all, diag_np) if shared_rows else (inv_c_all[rows], diag_np[rows])
    keep_previous = variant == 5

    def run(block):
        if stop is not None and stop.is_set():
            raise _svc_dense.SolveCancelled
        t0 = time.perf_counter()
        _solve_block_compiled(src[0], src[1], rows, shared_rows, offsets, y, y_pm, inv_c, diag,
                              seeds, budgets, block, plan.n_init, max_atoms, keep_previous,
                              variant, tol, rtol, check_every, _loop.ZERO_TOL, chunks,
                              len(_svc_dense.COUNTERS), w, out)
        return (time.perf_counter() - t0) / block.size

    per_problem = parallel_map(run, blocks, threads)
    elapsed = np.zeros(len(problems))
    for block, seconds in zip(blocks, per_problem, strict=True):
        elapsed[block] = seconds
    done = out[:, _OK] > 0
    if not shared_rows:  # one-vs-rest: a warning per problem, in order (BlockSolves.stopped)
        _warn_max_iter(plan, out[done])
    return BlockSolves(problems, w, offsets, out, done, elapsed, shared_rows)


def _warn_max_iter(plan, out: np.ndarray) -> None:
    """The ConvergenceWarning of pairs that stopped at ``max_iter`` (one per fit, naming the
    count and the worst relative gap)."""
    stopped = out[out[:, _STATUS] == 1]
    if stopped.shape[0] == 0:
        return
    rel = stopped[:, _GAP] / np.maximum(2 * stopped[:, _VALUE], 1e-300)
    warnings.warn(f"{plan.estimator} solver {plan.solver!r} stopped on max_iter in "
                  f"{stopped.shape[0]} one-vs-one pairs, after "
                  f"{int(stopped[:, _N_ITER].max())} iterations at most, with relative gap up "
                  f"to {float(rel.max()):.3g} > tol={plan.tol}", exceptions.ConvergenceWarning,
                  stacklevel=6)


class BlockAlphas(Sequence):
    """The dual vectors of problems solved in blocks, each on its own rows, in one flat array.

    ``alphas[k]`` is problem ``k``'s vector (a view, no copy): a one-vs-one pair's
    :class:`~torchfw.svm._multiclass.OverRows`, a one-vs-rest problem's tensor over all
    examples; :attr:`flat` all of them in problem order (what the model is built from).
    """

    def __init__(self, flat: np.ndarray, offsets: np.ndarray, problems, m: int):
        self.flat, self.offsets, self.problems, self.m = flat, offsets, problems, m

    def __len__(self) -> int:
        return len(self.problems)

    def __getitem__(self, k):
        if isinstance(k, slice):
            return [self[i] for i in range(*k.indices(len(self)))]
        a, b = self.offsets[k], self.offsets[k + 1]
        rows = self.problems[k].rows
        values = torch.from_numpy(self.flat[a:b])
        return values if rows is None else OverRows(values, rows, self.m)

    def by_problem(self) -> np.ndarray | None:
        """The vectors as rows ``(problems, m)`` (a view) when every problem holds all ``m``
        examples (one-vs-rest), else None."""
        if self.flat.shape[0] != len(self) * self.m or \
                isinstance(self.problems, PairProblems) or self.problems[0].rows is not None:
            return None
        return self.flat.reshape(len(self), self.m)


class BlockResults(Sequence):
    """The results of problems solved in blocks, as arrays of their scalars.

    ``results[k]`` is problem ``k``'s :class:`~torchfw.result.Result`: the one-by-one path's
    object, or for a problem solved in a block one built on read, whose history holds the
    last check only (its ``time``: the block's seconds per problem). :meth:`margins`,
    :meth:`n_iters` and :meth:`all_converged` read the arrays without building any.
    """

    def __init__(self, out, done, objects: dict, w, offsets, elapsed, matrix_info: dict):
        self.out, self.done, self.objects, self.w = out, done, objects, w
        self.offsets, self.elapsed, self.matrix_info = offsets, elapsed, matrix_info

    def __len__(self) -> int:
        return self.out.shape[0]

    def __getitem__(self, k):
        if isinstance(k, slice):
            return [self[i] for i in range(*k.indices(len(self)))]
        k = int(k)
        if k < 0:
            k += len(self)
        if k in self.objects:
            return self.objects[k]
        from ..result import History, Result, Status

        row = self.out[k]
        x = torch.from_numpy(self.w[self.offsets[k]:self.offsets[k + 1]].copy())
        history = History(iteration=[int(row[_N_ITER])], value=[float(row[_VALUE])],
                          gap=[float(row[_GAP])], time=[float(self.elapsed[k])], steps=[{}])
        return Result(x=x, value=float(row[_VALUE]), gap=float(row[_GAP]),
                      n_iter=int(row[_N_ITER]),
                      status=Status.CONVERGED if row[_STATUS] == 0 else Status.MAX_ITER,
                      history=history, weights=x.clone(), best_gap=float(row[_BEST_GAP]),
                      info={"engine": "compiled whole solve", "execution": "dense",
                            "compiled block": True, **self.matrix_info})

    def __iter__(self) -> Iterator:
        return (self[k] for k in range(len(self)))

    def margins(self) -> np.ndarray:
        r""":math:`\rho = 2 f` of every problem (at the tail average if any)."""
        rho = 2.0 * self.out[:, _VALUE]
        for k, r in self.objects.items():
            rho[k] = 2.0 * (r.value if r.average is None else r.average_value)
        return rho

    def n_iters(self) -> np.ndarray:
        n = self.out[:, _N_ITER].astype(np.int64)
        for k, r in self.objects.items():
            n[k] = r.n_iter
        return n

    def all_converged(self) -> bool:
        return bool((self.out[self.done, _STATUS] == 0).all()) and \
            all(r.converged for r in self.objects.values())
