r"""The Weston-Watkins epochs, compiled: the sweep with its shrinking and screening decisions, and
the loop of epochs between two duality-gap checks.

One concern: what :class:`torchfw.ww._problem.WWDualProblem` does from one sweep to the next,
as compiled code over its arrays, so that a fit's epochs run in one call
(:func:`ww_run`) instead of one interpreted round trip each (on dna, about 70 us of Python per
epoch against a shrunk sweep of 125 us). The policy itself -- when to shrink, un-shrink,
skip, screen -- is documented where its constants live (:mod:`torchfw.ww._problem`); this
module carries it out, in the same operations and the same order, so the iterates are the
ones the interpreted policy gave, bit for bit: sums over blocks are NumPy's pairwise sums
(:func:`pairwise_sum`), the orders come from the same generator draws
(:mod:`torchfw.utils.bitgen`).

The policy's scalars live in two small arrays, ``pi`` (integers and flags, indices ``I_*``)
and ``pf`` (floats, ``F_*``), and its tunable constants arrive in ``consts`` (indices ``K_*``,
read from :mod:`torchfw.ww._problem` at each call, so that changing them there takes effect).

References
----------
Y. Wang and C. Scott, "An Exact Solver for the Weston-Watkins SVM Subproblem", ICML 2021.
C.-J. Lin et al., LIBLINEAR (shrinking with un-shrink and re-check in its dual solvers).
"""

from __future__ import annotations

import math

import numpy as np

from ..utils.bitgen import shuffle_prefix
from ._blocks import _jit
from ._sweep import _positive_shares, _skip_sorted, _visit_set, ww_epoch

__all__ = ["pairwise_sum", "gap_estimate", "ww_sweep", "ww_run", "N_INT", "N_FLOAT", "N_CONST"]

# pi: the policy's integers
I_EPOCHS = 0  # sweeps run so far
I_FULL_NEXT = 1  # the next sweep is a full one (every slot listed, every block visited)
I_LAST_FULL = 2  # the epoch count at the last full sweep
I_SLOW = 3  # shrinking found wrong after a capped phase: full sweeps from then on
I_CAPPED = 4  # the last shrunk phase hit MAX_SHRUNK_SWEEPS: the re-check judges it
I_BY_TARGET = 5  # the last full sweep was brought by the target
I_PHASE = 6  # screening sweeps in a row so far (0: the next one starts a phase)
I_RETRY_AT = 7  # no screening before this sweep (after a futile phase)
I_RETRY_WAIT = 8  # the wait after the next futile phase
I_SCREENED = 9  # visits passed over by the screening, in all
I_PENDING = 10  # visit_set has passed over the blocks the next sweep leaves out
I_SHRINKING = 11  # heuristic shrinking (a mode, fixed at construction)
I_SCREENING = 12  # safe screening (a mode)
N_INT = 13
# pf: the policy's floats
F_GAMMA_REF = 0  # the predicted gap at the last full sweep
F_TARGET = 1  # the stopping rule's target gap, once known
F_ELIGIBLE = 2  # share of the blocks the next sweep could screen
N_FLOAT = 3
# consts: the tunable constants of torchfw.ww._problem
K_SHRINK_THRESHOLD = 0
K_UNSHRINK_FACTOR = 1
K_SKIP_FRACTION = 2
K_MAX_SHRUNK_SWEEPS = 3
K_SLOW_WRONG_FRACTION = 4
K_TARGET_MARGIN = 5
K_TARGET_RECHECK_FACTOR = 6
K_SNAPSHOT_EVERY = 7
K_SCREEN_MIN_ELIGIBLE = 8
K_SCREEN_MIN_SCREENED = 9
K_SCREEN_RETRY = 10
N_CONST = 11


def _block_sum_py(a, lo, n):
    """NumPy's sum of a block of ``n <= 128`` values: a plain running sum below 8, else eight
    interleaved partial sums, added in pairs, then the remainder."""
    if n < 8:
        r = 0.0
        for i in range(lo, lo + n):
            r += a[i]
        return r
    r0 = a[lo]
    r1 = a[lo + 1]
    r2 = a[lo + 2]
    r3 = a[lo + 3]
    r4 = a[lo + 4]
    r5 = a[lo + 5]
    r6 = a[lo + 6]
    r7 = a[lo + 7]
    i = 8
    end = n - n % 8
    while i < end:
        r0 += a[lo + i]
        r1 += a[lo + i + 1]
        r2 += a[lo + i + 2]
        r3 += a[lo + i + 3]
        r4 += a[lo + i + 4]
        r5 += a[lo + i + 5]
        r6 += a[lo + i + 6]
        r7 += a[lo + i + 7]
        i += 8
    r = ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7))
    while i < n:
        r += a[lo + i]
        i += 1
    return r


_block_sum = _jit(_block_sum_py)


def _sum_py(a):
    """``float(a.sum())`` of a 1-d contiguous float64 array, as NumPy computes it: pairwise
    summation (a range above 128 values splits at half its length, rounded down to a multiple
    of 8, and its halves' sums are added), blocks of at most 128 by :func:`_block_sum_py`.
    The shrinking decisions compare such sums (``Gamma``) against thresholds, so a plain
    running sum, an ulp off, could decide otherwise than the interpreted policy did.

    The recursion runs on an explicit stack: numba's disk cache cannot reload a function that
    calls itself (the reloaded call crashed).
    """
    n = a.shape[0]
    if n <= 128:
        return _block_sum(a, 0, n)
    los = np.empty(64, dtype=np.int64)  # the ranges still open, and how far each got
    lens = np.empty(64, dtype=np.int64)
    stage = np.empty(64, dtype=np.int64)
    vals = np.empty(64)  # sums of the finished halves, in order
    top = 0
    los[0] = 0
    lens[0] = n
    stage[0] = 0
    nv = 0
    while top >= 0:
        lo = los[top]
        ln = lens[top]
        if ln <= 128:
            vals[nv] = _block_sum(a, lo, ln)
            nv += 1
            top -= 1
            continue
        half = ln // 2
        half -= half % 8
        if stage[top] == 0:  # the first half next
            stage[top] = 1
            top += 1
            los[top] = lo
            lens[top] = half
            stage[top] = 0
        elif stage[top] == 1:  # then the second
            stage[top] = 2
            top += 1
            los[top] = lo + half
            lens[top] = ln - half
            stage[top] = 0
        else:  # both done: their sum
            nv -= 1
            vals[nv - 1] = vals[nv - 1] + vals[nv]
            top -= 1
    return vals[0]


pairwise_sum = _jit(_sum_py)


def _gap_estimate_py(shrinking, gblk, est, bsum, C):
    """The free gap predictor after a sweep (:meth:`WWDualProblem.gap_estimate`)."""
    if shrinking:
        return pairwise_sum(gblk)
    return est[1] + C * est[0] - pairwise_sum(bsum)


gap_estimate = _jit(_gap_estimate_py)


def _sorted_py(g):
    """The values of ``g`` (positive, finite float64) in increasing order: ``np.sort(g)``.

    An LSD radix sort on the bits of the values (positive doubles order as their bit patterns,
    read as unsigned integers), 8 or 11 bits a pass, passing over the digits that every value
    shares.
    Letter's ~10,000 positive shares after epoch 4 (best of 200, thread CPU time): 0.19 ms,
    against 0.67 ms for numba's compiled ``np.sort`` and 0.04 ms for NumPy's vectorized sort,
    which compiled code can reach only by taking the GIL (numba's object mode); a shrunk sweep
    of letter takes ~6 ms. Equal values are indistinguishable, so any correct sort gives
    NumPy's array.
    """
    n = g.shape[0]
    keys = g.view(np.uint64).copy()
    tmp = np.empty(n, dtype=np.uint64)
    # digits of 8 bits below 4,096 values (a pass costs ~2n + 2 * 256), of 11 above (fewer
    # passes; clearing and scanning 2,048 counts no longer dominates)
    width = 8 if n < 4096 else 11
    n_buckets = 1 << width
    mask = np.uint64(n_buckets - 1)
    count = np.empty(n_buckets, dtype=np.int64)
    for shift in range(0, 64, width):
        sh = np.uint64(shift)
        for b in range(n_buckets):
            count[b] = 0
        for i in range(n):
            count[(keys[i] >> sh) & mask] += 1
        if count[(keys[0] >> sh) & mask] == n:
            continue  # every key has this digit: the pass would not move anything
        total = 0
        for b in range(n_buckets):
            c = count[b]
            count[b] = total
            total += c
        for i in range(n):
            d = (keys[i] >> sh) & mask
            tmp[count[d]] = keys[i]
            count[d] += 1
        keys, tmp = tmp, keys
    return keys.view(np.float64)


_sorted = _jit(_sorted_py)


def _skip_smallest_py(shares, visited, fraction, skip):
    """:func:`torchfw.ww._sweep.skip_smallest`, from compiled code: a declared second
    implementation (:mod:`torchfw.utils.twins`), with the radix sort :func:`_sorted_py` in
    place of NumPy's."""
    idx, g = _positive_shares(shares, visited)
    if g.shape[0] == 0:
        return
    _skip_sorted(shares, visited, idx, g, _sorted(g), fraction, skip)


_skip_smallest = _jit(_skip_smallest_py)


def _unshrink_py(active, n_act, skip):
    """Every slot back in the lists (``0..k-2`` in order), no block skipped."""
    m = active.shape[1]
    for i in range(active.shape[0]):
        for s in range(m):
            active[i, s] = s
        n_act[i] = m
        skip[i] = 0


_unshrink = _jit(_unshrink_py)


def _after_screening_py(screen, n, est, gmin, pi, pf, consts):
    """Whether the next sweep screens (see :meth:`WWDualProblem.sweep`)."""
    nb = n if n > 1 else 1
    if not screen:
        pf[F_ELIGIBLE] = est[5] / nb
        return
    pi[I_PHASE] += 1
    n_pos = 0
    for i in range(gmin.shape[0]):
        if gmin[i] > 0.0:
            n_pos += 1
    pf[F_ELIGIBLE] = n_pos / nb
    futile = pi[I_PHASE] >= 2 and est[4] < consts[K_SCREEN_MIN_SCREENED] * nb
    if pf[F_ELIGIBLE] < consts[K_SCREEN_MIN_ELIGIBLE] or futile:
        # stop, forgetting the records: D is not kept meanwhile, so their bounds would not
        # hold when screening starts again (from a new snapshot)
        for i in range(gmin.shape[0]):
            gmin[i] = 0.0
        pi[I_PHASE] = 0
        if futile:  # each futile phase in a row doubles the wait before the next
            pi[I_RETRY_AT] = pi[I_EPOCHS] + pi[I_RETRY_WAIT]
            pi[I_RETRY_WAIT] *= 2
    elif pi[I_PHASE] >= 2:
        pi[I_RETRY_WAIT] = np.int64(consts[K_SCREEN_RETRY])


_after_screening = _jit(_after_screening_py)


def _after_shrunk_py(full, gblk, visited, skip, pi, pf, consts):
    """The next sweep's shrinking (see :meth:`WWDualProblem.sweep`)."""
    gamma = pairwise_sum(gblk)
    if full:
        pf[F_GAMMA_REF] = gamma
        pi[I_FULL_NEXT] = pi[I_SLOW]  # slow: plain BCD from now on
        pi[I_LAST_FULL] = pi[I_EPOCHS]
        if pi[I_SLOW] != 0:
            return
    elif gamma <= pf[F_GAMMA_REF] / consts[K_UNSHRINK_FACTOR]:
        pi[I_FULL_NEXT] = 1
        pi[I_BY_TARGET] = 0
        return
    elif gamma <= consts[K_TARGET_MARGIN] * pf[F_TARGET] and (
            pi[I_BY_TARGET] == 0 or gamma <= pf[F_GAMMA_REF] / consts[K_TARGET_RECHECK_FACTOR]):
        pi[I_FULL_NEXT] = 1
        pi[I_BY_TARGET] = 1
        return
    elif pi[I_EPOCHS] - pi[I_LAST_FULL] >= consts[K_MAX_SHRUNK_SWEEPS]:
        pi[I_FULL_NEXT] = 1
        pi[I_CAPPED] = 1  # the re-check decides whether the problem is slow
        return
    _skip_smallest(gblk, visited, consts[K_SKIP_FRACTION], skip)


_after_shrunk = _jit(_after_shrunk_py)


def _ww_sweep_py(order, indptr, indices, data, sqnorm, y, W, beta, bsum, C, method, fw_steps,
                 eps, active, n_act, skip, gblk, scores, v, bnew, heap, hidx, sv, si, prefix,
                 grad, changed, u, cls, sc, est, D, dn2, off, bnd, rb, gmin, visited, pi, pf,
                 consts):
    """One epoch over ``order`` with the problem's policy before and after it
    (``WWDualProblem.sweep``): which sweep this is (full or shrunk, screening or not), the
    sweep (:func:`torchfw.ww._sweep.ww_epoch`), and the decisions it feeds. Returns the
    number of blocks changed."""
    n = sqnorm.shape[0]
    m = beta.shape[1]
    shrinking = pi[I_SHRINKING] != 0
    pending = pi[I_PENDING] != 0
    pi[I_PENDING] = 0
    thr = math.inf
    full = True
    epochs = pi[I_EPOCHS]
    listed = np.zeros((1, 1), dtype=np.bool_)
    judge = False
    if shrinking:
        # epoch 1 runs unshrunk (so gap_1, the stopping rule's reference, is the plain BCD
        # one); later a full re-check sweep is due when the shrunk problem has made enough
        # progress (see _after_shrunk)
        full = epochs == 0 or pi[I_FULL_NEXT] != 0
        if full:
            if pi[I_CAPPED] != 0:  # which slots were out of the lists before this re-check
                judge = True
                listed = np.zeros((n, m), dtype=np.bool_)
                for i in range(n):
                    for j in range(n_act[i]):
                        listed[i, active[i, j]] = True
            _unshrink(active, n_act, skip)
        # slow problems run plain BCD: no slot leaves a list
        thr = math.inf if epochs == 0 or pi[I_SLOW] != 0 else consts[K_SHRINK_THRESHOLD]
    screen = (pi[I_SCREENING] != 0 and pf[F_ELIGIBLE] >= consts[K_SCREEN_MIN_ELIGIBLE]
              and epochs >= pi[I_RETRY_AT])
    if screen and (pi[I_PHASE] == 0 or epochs % np.int64(consts[K_SNAPSHOT_EVERY]) == 0):
        # a new snapshot S = W: D restarts at 0, and the old D's norm joins the offsets
        # (off + ||D|| is bnd)
        for c in range(off.shape[0]):
            off[c] = bnd[c]
        for f in range(D.shape[0]):
            for c in range(D.shape[1]):
                D[f, c] = 0.0
        for r in range(dn2.shape[0]):
            for c in range(dn2.shape[1]):
                dn2[r, c] = 0.0
    if shrinking and not (pending and not full):
        for i in range(n):  # visit_set did not pass over the others: the sweep does
            visited[i] = skip[i] == 0
    n_changed = ww_epoch(indptr, indices, data, sqnorm, y, order, W, beta, bsum, C, method,
                         fw_steps, eps, active, n_act, thr, skip, gblk, scores, v, bnew, heap,
                         hidx, sv, si, prefix, grad, changed, u, cls, sc, est, screen, D, dn2,
                         off, bnd, rb, gmin)
    pi[I_EPOCHS] += 1
    pi[I_SCREENED] += np.int64(est[4])
    if pi[I_SCREENING] != 0:
        _after_screening(screen, n, est, gmin, pi, pf, consts)
    if shrinking:
        if judge:
            pi[I_CAPPED] = 0
            # slots left out that the full sweep moved off 0 (out of the lists, beta was 0)
            wrong = 0
            support = 0
            for i in range(n):
                for s in range(m):
                    if beta[i, s] > 0.0:
                        support += 1
                        if not listed[i, s]:
                            wrong += 1
            pi[I_SLOW] = 1 if wrong > consts[K_SLOW_WRONG_FRACTION] * max(support, 1) else 0
        _after_shrunk(full, gblk, visited, skip, pi, pf, consts)
    return n_changed


ww_sweep = _jit(_ww_sweep_py)


def _ww_run_py(state, next32, next64, first, last, max_iter, use_est, calib, limit,
               last_check, next_check, order, indptr, indices, data, sqnorm, y, W, beta, bsum,
               C, method, fw_steps, eps, active, n_act, skip, gblk, scores, v, bnew, heap,
               hidx, sv, si, prefix, grad, changed, u, cls, sc, est, D, dn2, off, bnd, rb, gmin,
               visited, pi, pf, consts, out):
    r"""Epochs ``first..last`` of block-coordinate descent, until a duality-gap check is due.

    Each epoch draws its order from the generator at ``(state, next32, next64)``
    (:func:`torchfw.utils.bitgen.handle`) as
    :meth:`torchfw.optimizers.bcd.BlockCoordinateDescent.minimize` draws it -- the blocks of
    :meth:`WWDualProblem.visit_set` shuffled, else a permutation of all -- and runs
    :func:`ww_sweep` on it. After each, the check is due as in ``minimize``: at ``max_iter``;
    with ``use_est`` and a finite gap estimate ``e`` (:func:`gap_estimate`) and a calibration
    ``calib`` (NaN: none), once ``e calib <= limit`` or 100 epochs after the last check;
    otherwise from epoch ``next_check`` on. Returns after the epoch at which it is due, or
    after ``last``. ``out`` receives ``[epochs run to, blocks changed, due (0/1)]``.

    A declared second implementation (:mod:`torchfw.utils.twins`) of the epoch loop of
    :meth:`~torchfw.optimizers.bcd.BlockCoordinateDescent.minimize`: the same draws, the same
    check rule, the same iterates bit for bit.
    """
    n = sqnorm.shape[0]
    shrinking = pi[I_SHRINKING] != 0
    total = 0
    epoch = first
    due = False
    while epoch <= last:
        if shrinking and pi[I_EPOCHS] != 0 and pi[I_FULL_NEXT] == 0:
            n_visit = _visit_set(sqnorm, skip, n_act, bsum, gblk, visited, order)
            pi[I_PENDING] = 1
        else:
            for i in range(n):
                order[i] = i
            n_visit = n
        shuffle_prefix(state, next32, next64, order, n_visit)
        total += ww_sweep(order[:n_visit], indptr, indices, data, sqnorm, y, W, beta, bsum, C,
                          method, fw_steps, eps, active, n_act, skip, gblk, scores, v, bnew,
                          heap, hidx, sv, si, prefix, grad, changed, u, cls, sc, est, D, dn2,
                          off, bnd, rb, gmin, visited, pi, pf, consts)
        if epoch >= max_iter:
            due = True
            break
        if use_est:
            e = gap_estimate(shrinking, gblk, est, bsum, C)
            if math.isfinite(e) and not math.isnan(calib):
                due = e * calib <= limit or epoch - last_check >= 100
            else:
                due = epoch >= next_check
        else:
            due = epoch >= next_check
        if due:
            break
        epoch += 1
    out[0] = epoch if epoch <= last else last
    out[1] = total
    out[2] = 1 if due else 0


ww_run = _jit(_ww_run_py)
