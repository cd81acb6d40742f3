r"""Small one-vs-one pairs solved in batches, and the pairs' solutions kept compact.

One-vs-one trains :math:`k(k-1)/2` binary problems; with many small classes most are tiny
(1,000 classes of 2 examples: 499,500 pairs of 4). Solved one at a time, each pays a fixed
Python cost (its job, its start and solve arrays, its :class:`~torchfw.result.Result`: 0.23 ms
a pair in a profile of 100 classes, against microseconds of compiled work) and keeps its
objects to the end of the fit: over 100 s at 1,000 classes.

:func:`solve_small_pairs` runs the pairs that read the rows of one shared matrix in blocks, one
compiled call per block: for each pair the same calls as the one-by-one path -- the random start
subset (:func:`torchfw.svm._start.initial_subset`), the start (its exact solve on the subset), the
solve loop up to the end of its first chunk (:func:`torchfw.svm._dense.solve`) -- on the same
shared rows, so the same iterates bit for bit. A pair whose start needs an operator, whose
solve reaches non-finite values or is still running at the end of its first chunk (a pause, where
the one-by-one path reads a Ctrl-C) is left to the one-by-one path, which solves it again from its
start. Most pairs end well within their first chunk: the one-vs-one pairs of ``SVC()`` on segment
(pairs of ~495) stop after 10-680 iterations, their first chunk being 2,000. Solved one by one,
pairs of tens to hundreds of examples spent as much in their Python set-up (job, start and solve
arrays, result, the thread hand-off) as in their compiled solves.

:class:`PairAlphas` and :class:`PairResults` hold all pairs' dual vectors (each on its own
rows, one flat array) and the scalars of their results (arrays), and build a pair's
:class:`~torchfw.svm._multiclass.OverRows` or :class:`~torchfw.result.Result` when one is read.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Iterator, Sequence

import numpy as np
import torch

from .. import exceptions
from ..optimizers import _compiled_loop as _loop
from ..optimizers import _face, _rows
from ..utils.jit import compiled_kernels, njit
from ..utils.threads import parallel_map, workers
from . import _dense as _svc_dense
from . import _start as _svc_start
from ._multiclass import OverRows, PairProblems

__all__ = ["solve_small_pairs", "SmallPairs", "PairAlphas", "PairResults", "BLOCK_WORK"]

#: Work of one compiled call, as the sum over its pairs of (examples + 8)^2: about 1 ms, so
#: that a Ctrl-C between blocks is honoured at once and blocks spread over the threads.
BLOCK_WORK = 50_000

# Columns of the per-pair scalars a block writes.
_VALUE, _GAP, _BEST_GAP, _N_ITER, _STATUS, _OK = range(6)
_FALLBACK = -1.0  # _OK of a pair left to the one-by-one path


def _solve_block(P, cache, rows, offsets, y, y_pm, inv_c, diag, seeds, budgets, pairs, n_init,
                 max_atoms, keep_previous, variant, tol, rtol, check_every, zero_tol, chunks,
                 n_counters, w_out, out):
    """The pairs ``pairs`` (indices into ``offsets``), each as :func:`torchfw.svm._fit`'s
    ``start_from`` and ``_solve_job`` solve it: subset, start, one chunk of the loop.

    Pair ``p`` is ``rows[offsets[p]:offsets[p + 1]]`` with its labels ``y`` (the matrix's
    dtype) and ``y_pm`` (float64, for the subset's draw); its weights go to the same slice of
    ``w_out`` and its scalars to ``out[p]``.
    """
    for q in range(pairs.shape[0]):
        p = pairs[q]
        a = offsets[p]
        b = offsets[p + 1]
        n = b - a
        r = rows[a:b]
        yp = y[a:b]
        ic = inv_c[a:b]
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
        state = np.zeros(18)
        if _start_in(P, cache, r, yp, ic, subset, w, s, max_atoms, keep_previous, wp, sp,
                     support, state) < 0:
            out[p, 5] = -1.0
            continue
        this = budgets[p]
        pause_at = chunks[p]
        # the checks of the first chunk (as torchfw.optimizers._compiled_loop.run_chunked
        # counts them): a pair still running at pause_at is left to the one-by-one path
        within = min(this, pause_at)
        n_checks = min(within // check_every + within // _MIN_WINDOW + 3, _MAX_CHECKS)
        hist = np.empty((n_checks, 3))
        hist_counts = np.empty((n_checks, n_counters), dtype=np.int64)
        counts = np.zeros(n_counters, dtype=np.int64)
        # The one compiled loop over the pair's signed rows (torchfw.svm._dense.row_source);
        # no linear term, so the diagonal stands in for it (read only with has_ct).
        bufs = np.empty((2, n), dtype=P.dtype)
        k, status, n_hist = _solve_in(
            variant, (P, cache, r, yp, ic), bufs, diag[a:b], diag[a:b], False, 0.0, w, s, wp,
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
_MIN_WINDOW, _MAX_CHECKS = _face.MIN_WINDOW, _loop.MAX_CHECKS
_CONVERGED, _MAX_ITER = _loop.CONVERGED, _loop.MAX_ITER
_subset_in = _svc_start._subset_compiled
_start_in = _svc_start.start
_solve_in = _loop.run_loop
_solve_block_compiled = njit(_solve_block) if _subset_in is not None else None


def _first_chunk(n: int, check_every: int) -> int:
    """The iterations of :func:`torchfw.svm._dense.solve`'s first chunk on ``n`` examples."""
    first = _rows.first_chunk(n)
    return max(check_every, first // check_every * check_every)


class SmallPairs:
    """What :func:`solve_small_pairs` solved: ``done[k]`` for problem ``k``, the weights of
    every problem on its rows (``w``, at ``offsets``) and the scalars of the done ones."""

    def __init__(self, problems, w, offsets, out, done, elapsed, matrix_bytes):
        self.problems, self.w, self.offsets, self.out = problems, w, offsets, out
        self.done, self.elapsed, self.matrix_bytes = done, elapsed, matrix_bytes

    def merged(self, others: dict, m: int) -> tuple[PairAlphas, PairResults]:
        """All problems' dual vectors and results: the batch's, and ``others`` (``{k: (alpha
        over the pair's rows, result)}``) from the one-by-one path."""
        for k, (alpha, _) in others.items():
            a, b = self.offsets[k], self.offsets[k + 1]
            self.w[a:b] = alpha.detach().to(torch.float64).cpu().numpy()
        results = PairResults(self.out, self.done, {k: r for k, (_, r) in others.items()},
                              self.w, self.offsets, self.elapsed, self.matrix_bytes)
        return PairAlphas(self.w, self.offsets, self.problems, m), results


def solve_small_pairs(plan, src, problems, previous, inv_c_all, diag_np, variant, rule,
                      max_atoms, stop, parallel_work: float) -> SmallPairs | None:
    """Solve the one-vs-one ``problems`` on the shared row source ``src``, in compiled blocks.

    ``src`` is the row source shared by all problems (:mod:`torchfw.svm._matrix`),
    ``inv_c_all`` and ``diag_np`` its examples' :math:`1/C_i` and :math:`K_{ii} + 1 + 1/C_i`,
    ``rule`` the stopping rule ``(tol, rtol, check_every)``, ``stop`` an event that ends the
    blocks (a cancelled fit), ``parallel_work`` the work from which the blocks run on threads
    (:data:`torchfw.svm._fit.PARALLEL_WORK`). None when there are no pairs (or without numba,
    or with a warm start: those pairs are started from their previous solution one by one).
    Each pair runs up to the end of its first chunk (:func:`torchfw.svm._dense.solve`), the
    one compiled call the one-by-one path would make first; a pair not done by then is marked
    not ``done`` and left to the one-by-one path, which solves it again (the waste is bounded
    by that first chunk, on a pair that needs more than it anyway).
    """
    if _solve_block_compiled is None or not compiled_kernels() or previous is not None or \
            not problems or \
            not isinstance(problems, PairProblems) and any(p.rows is None for p in problems):
        return None
    tol, rtol, check_every = rule
    sizes = problems.sizes if isinstance(problems, PairProblems) else \
        np.fromiter((p.rows.shape[0] for p in problems), dtype=np.int64, count=len(problems))
    distinct, which = np.unique(sizes, return_inverse=True)
    budgets = np.array([plan.budget(int(n)) for n in distinct],
                       dtype=np.int64)[which]
    chunks = np.array([_first_chunk(int(n), check_every) for n in distinct],
                      dtype=np.int64)[which]
    small = np.arange(len(problems))
    if isinstance(problems, PairProblems):  # the pairs' arrays as they are
        offsets, rows, y_pm = problems.offsets, problems.rows, problems.y
    else:
        offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
        rows = np.concatenate([p.rows for p in problems]).astype(np.int64)
        y_pm = np.concatenate([p.y for p in problems]).astype(np.float64)
    y = y_pm.astype(src[0].dtype)
    # problem k's seed is the fit's plus k (FitPlan.problem_seed)
    seeds = (plan.problem_seed(0) + np.arange(len(problems), dtype=np.int64)) % 2**32
    # Blocks of about BLOCK_WORK, each a compiled call; on threads over a full matrix (a
    # cache of rows is written as rows arrive: one thread).
    work = (sizes[small] + 8.0) ** 2
    ends = np.searchsorted(np.cumsum(work), np.arange(BLOCK_WORK, work.sum() + BLOCK_WORK,
                                                      BLOCK_WORK), side="right")
    blocks = [b for b in np.split(small, np.unique(np.clip(ends, 1, small.size))[:-1])
              if b.size]
    threads = 1 if src[1] is not None else \
        workers(len(blocks), float((sizes[small].astype(np.float64) ** 2).sum()),
                parallel_work)
    w = np.zeros(int(offsets[-1]))
    out = np.zeros((len(problems), 6))
    inv_c, diag = inv_c_all[rows], diag_np[rows]
    keep_previous = variant == 5

    def run(block):
        if stop is not None and stop.is_set():
            raise _svc_dense.SolveCancelled
        t0 = time.perf_counter()
        _solve_block_compiled(src[0], src[1], rows, offsets, y, y_pm, inv_c, diag, seeds,
                              budgets, block, plan.n_init, max_atoms, keep_previous, variant,
                              tol, rtol, check_every, _loop.ZERO_TOL, chunks,
                              len(_svc_dense.COUNTERS), w, out)
        return (time.perf_counter() - t0) / block.size

    per_pair = parallel_map(run, blocks, threads)
    elapsed = np.zeros(len(problems))
    for block, seconds in zip(blocks, per_pair, strict=True):
        elapsed[block] = seconds
    done = out[:, _OK] > 0
    _warn_max_iter(plan, out[done])
    return SmallPairs(problems, w, offsets, out, done, elapsed, int(src[0].nbytes))


def _warn_max_iter(plan, out: np.ndarray) -> None:
    """The ConvergenceWarning of pairs that stopped at ``max_iter`` (one per fit, naming the
    count and the worst relative gap)."""
    stopped = out[out[:, _STATUS] == 1]
    if stopped.shape[0] == 0:
        return
    rel = stopped[:, _GAP] / np.maximum(2 * stopped[:, _VALUE], 1e-300)
    warnings.warn(f"{plan.estimator} solver {plan.solver!r} stopped on max_iter in {stopped.shape[0]} "
                  f"one-vs-one pairs, after {int(stopped[:, _N_ITER].max())} iterations at "
                  f"most, with relative gap up to {float(rel.max()):.3g} > "
                  f"tol={plan.tol}", exceptions.ConvergenceWarning, stacklevel=6)


class PairAlphas(Sequence):
    """The one-vs-one pairs' dual vectors, each on its own rows, in one flat array.

    ``alphas[k]`` is pair ``k``'s :class:`~torchfw.svm._multiclass.OverRows` (a view, no
    copy); :attr:`flat` all of them in problem order (what the model is built from).
    """

    def __init__(self, flat: np.ndarray, offsets: np.ndarray, problems, m: int):
        self.flat, self.offsets, self.problems, self.m = flat, offsets, problems, m

    def __len__(self) -> int:
        return len(self.problems)

    def __getitem__(self, k):
        if isinstance(k, slice):
            return [self[i] for i in range(*k.indices(len(self)))]
        a, b = self.offsets[k], self.offsets[k + 1]
        return OverRows(torch.from_numpy(self.flat[a:b]), self.problems[k].rows, self.m)


class PairResults(Sequence):
    """The results of one-vs-one pairs, as arrays of their scalars.

    ``results[k]`` is pair ``k``'s :class:`~torchfw.result.Result`: the one-by-one path's
    object, or for a pair solved in a block one built on read, whose history holds the last
    check only (its ``time``: the block's seconds per pair). :meth:`margins`,
    :meth:`n_iters` and :meth:`all_converged` read the arrays without building any.
    """

    def __init__(self, out, done, objects: dict, w, offsets, elapsed, matrix_bytes):
        self.out, self.done, self.objects, self.w = out, done, objects, w
        self.offsets, self.elapsed, self.matrix_bytes = offsets, elapsed, matrix_bytes

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
                            "batched pairs": True, "matrix_bytes": self.matrix_bytes})

    def __iter__(self) -> Iterator:
        return (self[k] for k in range(len(self)))

    def margins(self) -> np.ndarray:
        r""":math:`\rho = 2 f` of every pair (at the tail average if any)."""
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
