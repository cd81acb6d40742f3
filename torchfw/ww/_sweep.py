r"""The compiled BCD sweep of the Weston-Watkins SVM (Algorithm 1) and its objectives.

One epoch of block-coordinate descent over CSR rows (:func:`ww_epoch`), with the shrinking
mechanics (slot lists, skipped blocks) whose policy :class:`torchfw.ww._problem.WWDualProblem`
decides, and the primal/dual objectives (:func:`ww_objectives`). The block solvers they call
live in :mod:`torchfw.ww._blocks`; like them, these are plain Python over NumPy arrays compiled
with numba when it is available (see ``docs/design.md``, "Weston–Watkins BCD: why numba").

References
----------
Y. Wang and C. Scott, "An Exact Solver for the Weston-Watkins SVM Subproblem", ICML 2021.
"""

from __future__ import annotations

import math

import numpy as np

from ..utils.jit import njit
from ._blocks import (
    PREFETCH_AHEAD,
    PREFETCH_MIN_WEIGHTS,
    _jit,
    _prefetch,
    _prefetch1,
    _prefetch_cols,
    _prefetch_row,
    fw_single,
    iterative_single,
    walrus_single,
)

__all__ = ["ww_epoch", "ww_objectives", "ww_objectives_screened", "skip_smallest", "visit_set",
           "CHECK_SCREEN_MIN"]


# --------------------------------------------------------------------------------------------
# The BCD sweep (Algorithm 1) over CSR rows, and the primal/dual objectives.
# --------------------------------------------------------------------------------------------

def _hinge_sum_py(scores, yi):
    """``sum_{c != y} max(0, 1 - (s_y - s_c))`` for one example's scores."""
    sy = scores[yi]
    total = 0.0
    for c in range(scores.shape[0]):
        if c != yi:
            h = 1.0 - sy + scores[c]
            if h > 0.0:
                total += h
    return total


_hinge_sum = _jit(_hinge_sum_py)


#: Positions in the CSR arrays and feature numbers are cast to unsigned integers in the loops
#: over a row's nonzeros: numba indexes with a signed integer by first testing it for a
#: negative value (Python's wrap-around), one compare and select per array access that the
#: compiler cannot drop when a loop starts at a row pointer it cannot prove non-negative.
#: Unsigned, the accesses are plain loads: on dna (2,000 x 180, k = 3) the scores of every
#: row took 0.53x the time and the weight updates 0.70x. The values are the same, so are the
#: sums (the arrays hold non-negative numbers, checked when the CSR arrays are built).
_U = np.uint64
#: ``PREFETCH_AHEAD`` as an unsigned number, for the unsigned positions (a signed one would
#: make numba add the two as floats).
_AHEAD = np.uint64(PREFETCH_AHEAD)


# The scores of k <= 8 classes, each class summed in a register, in the order of the general
# loop (nonzero by nonzero): the same numbers, bit for bit. Summing into scores[c] instead would
# store and reload it at every nonzero (scores might alias W). One helper per count of sums,
# inlined (a compiled call passes its arrays with their reference counts raised and lowered
# around it: atomic instructions that wait for the stores of a block's W update to drain), and
# each a single loop: a helper whose loops sit in branches on k left its array arguments'
# reference counts in the caller's loop (numba's pruning cannot pair them across the branches'
# merge), which made dna's gap check 1.45x slower. Five to eight classes share one loop of
# eight sums, whose slots past class k-1 read class k-1's weights again (those sums are
# dropped): :func:`_register_scores_py` writes the k scores.

def _sums2_py(data, indices, W, start, stop):
    f0 = 0.0
    f1 = 0.0
    for p in range(_U(start), _U(stop)):
        xv = data[p]
        f = _U(indices[p])
        f0 += xv * W[f, 0]
        f1 += xv * W[f, 1]
    return f0, f1


def _sums3_py(data, indices, W, start, stop):
    f0 = 0.0
    f1 = 0.0
    f2 = 0.0
    for p in range(_U(start), _U(stop)):
        xv = data[p]
        f = _U(indices[p])
        f0 += xv * W[f, 0]
        f1 += xv * W[f, 1]
        f2 += xv * W[f, 2]
    return f0, f1, f2


def _sums4_py(data, indices, W, start, stop):
    f0 = 0.0
    f1 = 0.0
    f2 = 0.0
    f3 = 0.0
    for p in range(_U(start), _U(stop)):
        xv = data[p]
        f = _U(indices[p])
        f0 += xv * W[f, 0]
        f1 += xv * W[f, 1]
        f2 += xv * W[f, 2]
        f3 += xv * W[f, 3]
    return f0, f1, f2, f3


def _sums8_py(data, indices, W, start, stop, g5, g6, g7):
    f0 = 0.0
    f1 = 0.0
    f2 = 0.0
    f3 = 0.0
    f4 = 0.0
    f5 = 0.0
    f6 = 0.0
    f7 = 0.0
    for p in range(_U(start), _U(stop)):
        xv = data[p]
        f = _U(indices[p])
        f0 += xv * W[f, 0]
        f1 += xv * W[f, 1]
        f2 += xv * W[f, 2]
        f3 += xv * W[f, 3]
        f4 += xv * W[f, 4]
        f5 += xv * W[f, g5]
        f6 += xv * W[f, g6]
        f7 += xv * W[f, g7]
    return f0, f1, f2, f3, f4, f5, f6, f7


_sums2 = njit(_sums2_py, fallback=True, inline=True)
_sums3 = njit(_sums3_py, fallback=True, inline=True)
_sums4 = njit(_sums4_py, fallback=True, inline=True)
_sums8 = njit(_sums8_py, fallback=True, inline=True)


#: Visits ahead whose per-block numbers (skip, norms, list length, sum, row start, label) are
#: prefetched; the next visit's rows (``beta``, the slot list, the nonzeros) are prefetched one
#: visit ahead, once those numbers say it will be worked.
PREFETCH_BLOCKS_AHEAD = 4


def _prefetch_lines_py(arr, lo, hi):
    """Prefetch ``arr[lo:hi]`` (1-d), one hint per 64-byte line."""
    for p in range(lo, hi, 8):
        _prefetch1(arr, p)
    if hi > lo:
        _prefetch1(arr, hi - 1)


_prefetch_lines = _jit(_prefetch_lines_py)


def _prefetch_numbers_py(j, skip, sqnorm, n_act, bsum, indptr, y):
    """Prefetch block ``j``'s entries of the per-block arrays."""
    _prefetch1(skip, j)
    _prefetch1(sqnorm, j)
    _prefetch1(n_act, j)
    _prefetch1(bsum, j)
    _prefetch1(indptr, j)
    _prefetch1(y, j)


_prefetch_numbers = _jit(_prefetch_numbers_py)


def _prefetch_block_py(j, beta, active, indptr, indices, data):
    """Prefetch block ``j``'s row of ``beta`` and of the slot lists, and its nonzeros."""
    m = beta.shape[1]
    for s in range(0, m, 8):
        _prefetch(beta, j, s)
        _prefetch(active, j, s)
    lo = indptr[j]
    hi = indptr[j + 1]
    _prefetch_lines(data, lo, hi)
    _prefetch_lines(indices, lo, hi)


_prefetch_block = _jit(_prefetch_block_py)


def _screen_norm_py(dn2, off, bnd, c, cross, square):
    """Add ``cross + square`` to the running ``||D_c||^2`` (``dn2[0, c]``) and its magnitude to
    ``dn2[1, c]``; ``bnd[c]`` is the norm with room for the running sum's rounding (the sum can
    cancel to far below the terms it added), plus ``off[c]``."""
    dn2[0, c] += cross + square
    dn2[1, c] += abs(cross) + square
    bnd[c] = math.sqrt(max(dn2[0, c], 0.0) + 1e-12 * dn2[1, c]) + off[c]


_screen_norm = _jit(_screen_norm_py)


def _screen_record_py(scores, yi, i, k, bnd, off, rb, gmin):
    """Record block ``i`` (at 0 after its visit) for safe screening: its smallest margin
    gradient ``min_c G_ic`` at ``scores`` (the weights it ends its visit with), less a rounding
    allowance, and ``rb[i, c] = ||D_c|| - off[c]`` (``bnd[c] - 2 off[c]``; see
    :func:`ww_epoch`)."""
    sy = scores[yi]
    g = math.inf
    big = abs(sy)
    for c in range(k):
        if c != yi:
            G = sy - scores[c] - 1.0
            if G < g:
                g = G
            if abs(scores[c]) > big:
                big = abs(scores[c])
    # scores are sums in floating point: leave room for their rounding (relative 1e-16 per
    # term, far below this allowance) so that a screened G is > 0 in the sums plain BCD forms
    gmin[i] = g - 1e-9 * (1.0 + big)
    for c in range(k):
        rb[i, c] = bnd[c] - 2.0 * off[c]  # ||D_c|| (with its rounding room) - off[c]


_screen_record = _jit(_screen_record_py)


def _ww_epoch_py(indptr, indices, data, sqnorm, y, order, W, beta, bsum, C, method, fw_steps,
                 eps, active, n_act, shrink_thr, skip, gblk, scores, v, bnew, heap, hidx, sv, si,
                 prefix, grad, changed, u, cls, sc, est, screen, D, dn2, off, bnd, rb, gmin):
    r"""One outer iteration: an inner iteration for every example ``order[t]``, in that order.

    ``W`` is ``(d, k)`` (feature-major: row ``f`` holds the ``k`` class weights of feature ``f``,
    contiguous for the sparse row updates), ``beta`` is ``(n, k-1)``, ``bsum[i] = 1^T beta_i``.
    Returns the number of blocks that changed.

    The gradient of the dual objective ``g`` (minimized) in coordinate ``(i, s)`` is

    .. math:: G_{is} = (w_{y_i} - w_{c(s)})^\top x_i - 1 ,

    the margin minus one, and the duality gap splits over coordinates (``||W||^2 =
    \sum_{is} \beta_{is} (G_{is} + 1)``, since ``W = \sum_i x_i u_i^T``):

    .. math:: P - D = \sum_{i,s} \beta_{is} G_{is} + C \max(0, -G_{is}) ,

    every term ``>= 0`` on the box (``(C - beta) (-G)`` where ``G < 0``). ``gblk[i]`` receives
    block ``i``'s share at the scores of its visit, before its update (what the solve then
    reduces).

    Shrinking (the caller decides; ``shrink_thr = inf`` and full lists turn it off):

    - ``active[i, :n_act[i]]`` lists, in increasing order, the slots of block ``i`` the sweep
      visits; the others must hold ``beta_is = 0`` (the block sum is taken as the listed
      slots' sum). A listed slot with ``beta_is = 0`` and
      ``G_is > shrink_thr`` is dropped from the list on its visit (with ``shrink_thr >= 0`` its
      gap term is 0, and it would stay at 0 in the block solve unless the block's sum falls).
      The block is then minimized exactly over the slots kept, the others held at 0: an exact
      block step on a sub-block, still a descent step on the full dual. Only the scores of the
      listed classes and ``y_i`` are computed (a gather when few are listed).
    - ``skip[i] > 0``: block ``i`` is not visited this epoch (the counter is decremented).

    Safe screening (``screen`` true; the caller keeps full lists and ``shrink_thr = inf``): a
    block with ``beta_i = 0`` whose margins, at its last computed visit ``t_i``, all exceeded 1
    by ``gmin[i] > 0`` is passed over while that slack provably holds. Since
    ``|Delta (w_y - w_c)^T x_i| <= ||x_i|| (||Delta w_y|| + ||Delta w_c||)``, every margin is
    still above 1 if ``gmin[i] > ||x_i|| (B_y + max_{c != y} B_c)``, ``B_c`` bounding
    ``||w_c - w_c(t_i)||``; the block's exact solve would then return 0 again, so skipping it
    changes nothing: the iterates are plain BCD's, bit for bit. The bounds run through a
    snapshot ``S`` of ``W`` taken by the caller: ``D = W - S`` (same layout as ``W``) and
    ``dn2[0, c] = ||D_c||^2`` are updated with ``W`` (``dn2[1, c]`` holds the magnitude of the
    running sum, for its rounding); ``off[c]`` adds up the norms ``||S_c - S_c'||`` of the
    snapshots' moves so far; ``bnd[c] = ||D_c|| + off[c]``; and
    ``rb[i, c] = ||D_c(t_i)|| - off_c(t_i)``, so that ``B_c = bnd[c] + rb[i, c]`` (the triangle
    inequality through every snapshot since ``t_i``). ``gmin[i] <= 0`` marks a block that is
    not eligible.

    ``est`` (length 6) carries by-products of the sweep. ``est[0]`` receives the hinge sum of
    every listed slot at the scores computed on its visit (the weights move during the epoch,
    so this is not the primal, only a predictor of it: on sector it overestimates the primal's
    hinge part by ~1.2-1.6x, steadily); ``est[1]``, the caller's ``||W||^2``, is kept current by
    ``||W + x u^T||^2 = ||W||^2 + 2 u^T W^T x + q ||u||^2``; ``est[2]`` and ``est[3]`` receive
    the largest and smallest projected gradient (``min(G, 0)`` at 0, ``max(G, 0)`` at ``C``,
    ``G`` between) over the listed slots at their visit; ``est[4]``, the number of visits
    screened; ``est[5]``, the number of visits that found ``b = 0`` optimal in place (all
    ``G_is >= 0``: the blocks screening could pass over).
    """
    k = W.shape[1]
    m = k - 1
    n_changed = 0
    n_screened = 0
    n_idle = 0
    loss_est = 0.0
    wn = est[1]
    pg_max = -math.inf
    pg_min = math.inf
    T = order.shape[0]
    pf = W.shape[0] * W.shape[1] >= PREFETCH_MIN_WEIGHTS
    for t in range(T):
        i = order[t]
        # Blocks are visited in random order: each visit's first touches of its arrays miss
        # the caches, one after the other. Ask for them a few visits ahead.
        if t + PREFETCH_BLOCKS_AHEAD < T:
            _prefetch_numbers(order[t + PREFETCH_BLOCKS_AHEAD], skip, sqnorm, n_act, bsum,
                              indptr, y)
        if t + 1 < T:
            j = order[t + 1]
            if skip[j] == 0 and (n_act[j] > 0 or bsum[j] != 0.0):
                _prefetch_block(j, beta, active, indptr, indices, data)
        q = sqnorm[i]
        if q <= 0.0:
            continue  # an all-zero row takes no part (the estimator drops them anyway)
        if skip[i] > 0:
            skip[i] -= 1
            continue
        a = n_act[i]
        bsum_i = bsum[i]
        if screen and bsum_i == 0.0 and gmin[i] > 0.0:
            yi = y[i]
            by = bnd[yi] + rb[i, yi]
            bmax = 0.0
            for c in range(k):
                if c != yi:
                    bc = bnd[c] + rb[i, c]
                    if bc > bmax:
                        bmax = bc
            if gmin[i] > math.sqrt(q) * (by + bmax):
                # every G_is is still > 0: plain BCD's visit would find b = 0 optimal (its
                # projected gradients 0, its gap share 0) and move nothing
                if pg_max < 0.0:
                    pg_max = 0.0
                if pg_min > 0.0:
                    pg_min = 0.0
                gblk[i] = 0.0
                n_screened += 1
                continue
        if a == 0 and bsum_i == 0.0:
            gblk[i] = 0.0
            continue  # every slot shrunk at 0: nothing to compute
        yi = y[i]
        start = indptr[i]
        stop = indptr[i + 1]
        ustart = _U(start)  # unsigned positions and features: see _U
        ustop = _U(stop)
        if 2 * a >= m:
            # many slots listed: all k scores, a contiguous vectorized loop over each row, is
            # cheaper than gathering (sector: sweeps gathering ~72 of 104 classes took 1.4x longer)
            if k <= 8 and not pf:
                if k == 2:
                    scores[0], scores[1] = _sums2(data, indices, W, start, stop)
                elif k == 3:
                    scores[0], scores[1], scores[2] = _sums3(data, indices, W, start, stop)
                elif k == 4:
                    scores[0], scores[1], scores[2], scores[3] = _sums4(data, indices, W, start,
                                                                        stop)
                else:
                    f0, f1, f2, f3, f4, f5, f6, f7 = _sums8(data, indices, W, start, stop,
                                                            5 if k > 5 else k - 1,
                                                            6 if k > 6 else k - 1,
                                                            7 if k > 7 else k - 1)
                    scores[0] = f0
                    scores[1] = f1
                    scores[2] = f2
                    scores[3] = f3
                    scores[4] = f4
                    if k > 5:
                        scores[5] = f5
                    if k > 6:
                        scores[6] = f6
                    if k > 7:
                        scores[7] = f7
            else:
                for c in range(k):
                    scores[c] = 0.0
                for p in range(ustart, ustop):
                    if pf and p + _AHEAD < ustop:
                        _prefetch_row(W, indices[p + _AHEAD])
                    xv = data[p]
                    row = W[_U(indices[p])]
                    for c in range(k):
                        scores[c] += xv * row[c]
            if a == m:  # every slot listed: the list is 0..m-1 (kept sorted), no need to read it
                for j in range(m):
                    cls[j] = j if j < yi else j + 1
            else:
                for j in range(a):
                    s = active[i, j]
                    cls[j] = s if s < yi else s + 1
        else:  # only the listed classes and y_i: a gather, but fewer cache lines
            for j in range(a):
                s = active[i, j]
                cls[j] = s if s < yi else s + 1
                sc[j] = 0.0
            sy_acc = 0.0
            for p in range(ustart, ustop):
                if pf and p + _AHEAD < ustop:
                    _prefetch_cols(W, indices[p + _AHEAD], cls, a, yi)
                xv = data[p]
                row = W[_U(indices[p])]
                sy_acc += xv * row[yi]
                for j in range(a):
                    sc[j] += xv * row[cls[j]]
            scores[yi] = sy_acc
            for j in range(a):
                scores[cls[j]] = sc[j]
        if pf and t + 1 < T:  # the next example's first rows load during this solve
            nxt = order[t + 1]
            for p in range(indptr[nxt], min(indptr[nxt + 1], indptr[nxt] + PREFETCH_AHEAD)):
                _prefetch_row(W, indices[p])
        sy = scores[yi]
        # v over the slots kept, shrinking as we go (the list stays in increasing order)
        na = 0
        any_pos = False
        gi = 0.0
        for j in range(a):
            c = cls[j]
            s = c if c < yi else c - 1
            G = sy - scores[c] - 1.0
            b = beta[i, s]
            if b <= 0.0:
                if G > shrink_thr:
                    continue
                pg = G if G < 0.0 else 0.0
            elif b >= C:
                pg = G if G > 0.0 else 0.0
            else:
                pg = G
            if pg > pg_max:
                pg_max = pg
            if pg < pg_min:
                pg_min = pg
            if G < 0.0:
                loss_est -= G  # the hinge term max(0, 1 - (s_y - s_c)) at this visit
                gi -= (C - b) * G
            else:
                gi += b * G
            if na != j:  # compact the list (untouched while nothing was dropped)
                active[i, na] = s
            cls[na] = c
            vs = -G / q + b + bsum_i
            v[na] = vs
            if vs > 0.0:
                any_pos = True
            na += 1
        n_act[i] = na
        gblk[i] = gi
        if not any_pos and bsum_i == 0.0:
            # b = 0 is optimal and already in place (the common well-classified case)
            n_idle += 1
            if screen:
                _screen_record(scores, yi, i, k, bnd, off, rb, gmin)
            continue
        if screen:
            gmin[i] = 0.0  # recorded below if the block ends at 0
        if method == 0:
            new_sum = walrus_single(v, na, C, bnew, heap, hidx, sv, si, prefix, bsum_i)
        else:
            for j in range(na):
                bnew[j] = beta[i, active[i, j]]
            if method == 1:
                new_sum = iterative_single(v, na, C, bnew, q, eps, grad)
            else:
                new_sum = fw_single(v, na, C, bnew, fw_steps, grad)
        # W += x_i u^T with u = sigma pi^T Delta: u_{y} = 1^T Delta, u_{c(s)} = -Delta_s.
        n_c = 0
        for j in range(na):
            s = active[i, j]
            delta = bnew[j] - beta[i, s]
            if delta != 0.0:
                changed[n_c] = cls[j]
                u[n_c] = -delta
                n_c += 1
                beta[i, s] = bnew[j]
        if n_c == 0:
            if screen and new_sum == 0.0:
                _screen_record(scores, yi, i, k, bnd, off, rb, gmin)
            continue
        n_changed += 1
        uy = new_sum - bsum_i
        bsum[i] = new_sum
        # ||W||^2 after this example's update (W^T x_i moves by q u)
        wn += 2.0 * uy * sy + q * uy * uy
        for r in range(n_c):
            wn += 2.0 * u[r] * scores[changed[r]] + q * u[r] * u[r]
        if screen:
            # D moves with W; ||D_c + u_c x||^2 = ||D_c||^2 + 2 u_c D_c^T x + q u_c^2, with
            # D_c^T x read before the row's own update (a CSR row names each feature once)
            dy = 0.0
            for r in range(n_c):
                grad[r] = 0.0
            for p in range(ustart, ustop):
                xv = data[p]
                f = _U(indices[p])
                row = W[f]
                drow = D[f]
                dy += xv * drow[yi]
                row[yi] += xv * uy
                drow[yi] += xv * uy
                for r in range(n_c):
                    cr = changed[r]
                    grad[r] += xv * drow[cr]
                    row[cr] += xv * u[r]
                    drow[cr] += xv * u[r]
            _screen_norm(dn2, off, bnd, yi, 2.0 * uy * dy, q * uy * uy)
            for r in range(n_c):
                _screen_norm(dn2, off, bnd, changed[r], 2.0 * u[r] * grad[r], q * u[r] * u[r])
            if new_sum == 0.0:  # the block ends at 0: its margins at the updated W
                for c in range(k):
                    scores[c] = 0.0
                for p in range(ustart, ustop):
                    xv = data[p]
                    row = W[_U(indices[p])]
                    for c in range(k):
                        scores[c] += xv * row[c]
                _screen_record(scores, yi, i, k, bnd, off, rb, gmin)
            continue
        # W += x_i u^T. With one to three classes changed (every block of dna, most late ones
        # elsewhere) their indices and steps stay in registers; the general loop reloads
        # changed[r] and u[r] after every store into W (the arrays might overlap). Each weight
        # gets the same single addition either way.
        if n_c == 1:
            c0 = changed[0]
            u0 = u[0]
            for p in range(ustart, ustop):
                xv = data[p]
                f = _U(indices[p])
                W[f, yi] += xv * uy
                W[f, c0] += xv * u0
        elif n_c == 2:
            c0 = changed[0]
            u0 = u[0]
            c1 = changed[1]
            u1 = u[1]
            for p in range(ustart, ustop):
                xv = data[p]
                f = _U(indices[p])
                W[f, yi] += xv * uy
                W[f, c0] += xv * u0
                W[f, c1] += xv * u1
        elif n_c == 3:
            c0 = changed[0]
            u0 = u[0]
            c1 = changed[1]
            u1 = u[1]
            c2 = changed[2]
            u2 = u[2]
            for p in range(ustart, ustop):
                xv = data[p]
                f = _U(indices[p])
                W[f, yi] += xv * uy
                W[f, c0] += xv * u0
                W[f, c1] += xv * u1
                W[f, c2] += xv * u2
        else:
            for p in range(ustart, ustop):
                xv = data[p]
                row = W[_U(indices[p])]
                row[yi] += xv * uy
                for r in range(n_c):
                    row[changed[r]] += xv * u[r]
    est[0] = loss_est
    est[1] = wn
    est[2] = pg_max
    est[3] = pg_min
    est[4] = n_screened
    est[5] = n_idle
    return n_changed


ww_epoch = _jit(_ww_epoch_py)


def _ww_loss_py(indptr, indices, data, y, W, lo, hi, scores, mode, passed, slack):
    """Sum of the hinge terms of rows ``lo..hi-1``:
    ``sum_i sum_{j != y_i} max(0, 1 - (w_{y_i} - w_j)^T x_i)``.

    ``mode`` 0: every row. 1: every row, and ``slack[i]`` receives row ``i``'s smallest
    ``(w_{y_i} - w_j)^T x_i - 1`` over ``j != y_i``. 2: the rows with ``passed[i]`` are left
    out (the caller has proved that each of their terms is 0, so the sum is the same, bit for
    bit). ``passed`` and ``slack`` may be 1-element stand-ins in the modes that do not read
    them.
    """
    k = W.shape[1]
    loss = 0.0
    last = _U(indptr[hi])
    pf = W.shape[0] * W.shape[1] >= PREFETCH_MIN_WEIGHTS
    for i in range(lo, hi):
        if mode == 2 and passed[i]:
            continue
        if k <= 8 and not pf:  # as in ww_epoch
            if k == 2:
                scores[0], scores[1] = _sums2(data, indices, W, indptr[i], indptr[i + 1])
            elif k == 3:
                scores[0], scores[1], scores[2] = _sums3(data, indices, W, indptr[i], indptr[i + 1])
            elif k == 4:
                scores[0], scores[1], scores[2], scores[3] = _sums4(data, indices, W, indptr[i],
                                                                    indptr[i + 1])
            else:
                f0, f1, f2, f3, f4, f5, f6, f7 = _sums8(data, indices, W, indptr[i], indptr[i + 1],
                                                        5 if k > 5 else k - 1,
                                                        6 if k > 6 else k - 1,
                                                        7 if k > 7 else k - 1)
                scores[0] = f0
                scores[1] = f1
                scores[2] = f2
                scores[3] = f3
                scores[4] = f4
                if k > 5:
                    scores[5] = f5
                if k > 6:
                    scores[6] = f6
                if k > 7:
                    scores[7] = f7
        else:
            for c in range(k):
                scores[c] = 0.0
            for p in range(_U(indptr[i]), _U(indptr[i + 1])):
                if pf and p + _AHEAD < last:  # CSR order: runs into the next rows too
                    _prefetch_row(W, indices[p + _AHEAD])
                xv = data[p]
                row = W[_U(indices[p])]
                for c in range(k):
                    scores[c] += xv * row[c]
        sy = scores[y[i]]
        for c in range(k):
            if c != y[i]:
                h = 1.0 - sy + scores[c]
                if h > 0.0:
                    loss += h
        if mode == 1:
            g = math.inf
            for c in range(k):
                if c != y[i] and sy - scores[c] < g:
                    g = sy - scores[c]
            slack[i] = g - 1.0
    return loss


_ww_loss = _jit(_ww_loss_py)


def _norm_and_dual_py(W, bsum):
    """``||W||_F^2`` and ``sum_i 1^T beta_i`` (from the blocks' sums), in the order the
    objectives have always summed them."""
    wn = 0.0
    for f in range(W.shape[0]):
        for c in range(W.shape[1]):
            wn += W[f, c] * W[f, c]
    dual = 0.0
    for i in range(bsum.shape[0]):
        dual += bsum[i]
    return wn, dual


_norm_and_dual = njit(_norm_and_dual_py, fallback=True, inline=True)


def _ww_objectives_py(indptr, indices, data, y, W, bsum, C, scores):
    """Primal ``P(W)``, dual ``D = sum_i 1^T beta_i - ||W||^2 / 2`` and ``||W||_F^2``.

    ``P(W) = ||W||^2 / 2 + C sum_i sum_{j != y_i} max(0, 1 - (w_{y_i} - w_j)^T x_i)`` (the paper's
    (P)); ``P - D >= 0`` is the duality gap the stopping rule reads.
    """
    wn, dual = _norm_and_dual(W, bsum)
    # serial on purpose: a second thread measured no faster on a loaded 2-core machine, and
    # numba's default threading layer is not safe under concurrent calls from user threads
    loss = _ww_loss(indptr, indices, data, y, W, 0, indptr.shape[0] - 1, scores, 0,
                    np.zeros(1, dtype=np.bool_), np.zeros(1))
    return 0.5 * wn + C * loss, dual - 0.5 * wn, wn


ww_objectives = _jit(_ww_objectives_py)

#: A screened gap check (:func:`ww_objectives_screened`) passes over the rows it can prove
#: hinge-free only when at least this share of them qualifies; below, it computes every row
#: and takes a new snapshot (the bounds grow with the distance from it). On dna at the
#: defaults, a run's last checks, one or two epochs apart, pass over 55-70% of the rows; the
#: first checks, many epochs apart, none.
CHECK_SCREEN_MIN = 0.3


def _ww_objectives_screened_py(indptr, indices, data, y, W, bsum, C, scores, sqnorm, S, slack,
                               passed, ck):
    r""":func:`ww_objectives`, passing over the rows whose hinge terms are provably all 0.

    The same three numbers, bit for bit: a row left out would have added nothing. At a check
    that computes every row (the first, and any with fewer than ``CHECK_SCREEN_MIN`` of the
    rows provable), ``S`` receives a snapshot of ``W`` and ``slack[i]`` row ``i``'s smallest
    margin less one, :math:`\min_{j \ne y_i} (s_{y_i} - s_j)(S) - 1`, and ``ck`` holds
    ``[1, 2 max_c ||S_c||]``. At a later check, since
    :math:`|\Delta (w_y - w_j)^\top x_i| \le \|x_i\| (\|W_y - S_y\| + \|W_j - S_j\|)`,
    every margin of row ``i`` still exceeds 1 -- each hinge term is 0 -- when

    .. math:: \text{slack}_i > \|x_i\| (B_{y_i} + \max_{j \ne y_i} B_j)
        + 10^{-9} \bigl(1 + \|x_i\| (2 \max_c \|S_c\| + 2 \max_c \|W_c\|)\bigr) ,

    :math:`B_c \ge \|W_c - S_c\|`; the last term bounds the rounding of the scores at both
    ends (a row of ``m`` nonzeros sums with a relative error of at most ``m`` units of
    roundoff of :math:`\sum_p |x_p w_p| \le \|x\| \|w\|`, under ``1e-9`` below ``9e6``
    nonzeros), so the computed term, not only the exact one, is at most 0. ``passed``
    receives which rows were left out. The bounds are the safe screening's of the sweep
    (:func:`ww_epoch`), applied to the primal's terms; cf. El Ghaoui, Viallon and Rabbani
    (2010).
    """
    k = W.shape[1]
    n = indptr.shape[0] - 1
    mode = 1
    if ck[0] != 0.0:
        wmax = 0.0
        b1 = 0.0  # the largest bound, its class, and the second largest
        c1 = -1
        b2 = 0.0
        B = np.empty(k)
        for c in range(k):
            dd = 0.0
            ww = 0.0
            for f in range(W.shape[0]):
                dlt = W[f, c] - S[f, c]
                dd += dlt * dlt
                ww += W[f, c] * W[f, c]
            # room for the rounding of the two sums (relative d units of roundoff)
            B[c] = math.sqrt(dd) * (1.0 + 1e-9) + 1e-300
            wmax = max(wmax, math.sqrt(ww) * (1.0 + 1e-9))
            if B[c] > b1:
                b2 = b1
                b1 = B[c]
                c1 = c
            elif B[c] > b2:
                b2 = B[c]
        room = 2.0 * wmax + ck[1]
        count = 0
        for i in range(n):
            r = math.sqrt(sqnorm[i]) * (1.0 + 1e-9)
            yi = y[i]
            other = b2 if c1 == yi else b1
            ok = slack[i] > r * (B[yi] + other) + 1e-9 * (1.0 + r * room)
            passed[i] = ok
            if ok:
                count += 1
        if count >= CHECK_SCREEN_MIN * n:
            mode = 2
    wn, dual = _norm_and_dual(W, bsum)
    loss = _ww_loss(indptr, indices, data, y, W, 0, n, scores, mode, passed, slack)
    if mode == 1:
        smax = 0.0
        for c in range(k):
            ss = 0.0
            for f in range(W.shape[0]):
                S[f, c] = W[f, c]
                ss += W[f, c] * W[f, c]
            smax = max(smax, math.sqrt(ss) * (1.0 + 1e-9))
        ck[0] = 1.0
        ck[1] = 2.0 * smax
        for i in range(n):
            passed[i] = False
    return 0.5 * wn + C * loss, dual - 0.5 * wn, wn


ww_objectives_screened = _jit(_ww_objectives_screened_py)


def _visit_set_py(sqnorm, skip, n_act, bsum, gblk, visited, out):
    """The blocks a shrunk sweep works on, into ``out``; returns their number.

    Does to every other block what :func:`ww_epoch` would do on its visit: a skipped block
    (``skip > 0``) counts its skip down, a block with every slot shrunk at 0 gets a zero gap
    share (its visit computes nothing), an all-zero row is passed over. ``visited`` receives
    ``skip == 0`` as it was before the sweep (what the skip policy reads after it).
    """
    n_out = 0
    for i in range(skip.shape[0]):
        visited[i] = skip[i] == 0
        if sqnorm[i] <= 0.0:
            continue
        if skip[i] > 0:
            skip[i] -= 1
            continue
        if n_act[i] == 0 and bsum[i] == 0.0:
            gblk[i] = 0.0
            continue
        out[n_out] = i
        n_out += 1
    return n_out


_visit_set = _jit(_visit_set_py)


def visit_set(sqnorm: np.ndarray, skip: np.ndarray, n_act: np.ndarray, bsum: np.ndarray,
              gblk: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(blocks, visited)``: the blocks the next shrunk sweep computes (index order) and the
    mask of blocks not skipped, after passing over the others (:func:`_visit_set_py`).

    A sweep over ``blocks`` alone, in any order, does what a sweep over every block in that
    relative order does: the blocks left out would only have been counted down or zeroed.
    On dna late in a fit about a quarter of the blocks are computed.
    """
    n = skip.shape[0]
    visited = np.empty(n, dtype=np.bool_)
    out = np.empty(n, dtype=np.int64)
    m = _visit_set(sqnorm, skip, n_act, bsum, gblk, visited, out)
    return out[:m], visited


def _positive_shares_py(shares, visited):
    """The visited blocks with a positive share, in index order: ``(idx, shares[idx])``."""
    n_pos = 0
    for i in range(visited.shape[0]):
        if visited[i] and shares[i] != 0.0:
            n_pos += 1
    idx = np.empty(n_pos, dtype=np.int64)
    g = np.empty(n_pos)
    j = 0
    for i in range(visited.shape[0]):
        if visited[i] and shares[i] != 0.0:
            idx[j] = i
            g[j] = shares[i]
            j += 1
    return idx, g


_positive_shares = _jit(_positive_shares_py)


def _skip_sorted_py(shares, visited, idx, g, v, fraction, skip):
    """:func:`skip_smallest` once the positive shares ``g`` (index order) are sorted into ``v``."""
    total = 0.0  # the running sum in sorted order, as a cumulative sum gives it
    for j in range(v.shape[0]):
        total += v[j]
    if not total > 0.0:
        return
    for i in range(visited.shape[0]):
        if visited[i] and shares[i] == 0.0:
            skip[i] = 1
    limit = fraction * total
    cum = 0.0
    n_skip = 0  # the sorted prefix whose running sum stays within the limit
    for j in range(v.shape[0]):
        cum += v[j]
        if cum > limit:
            break
        n_skip = j + 1
    if n_skip == 0:
        return
    tau = v[n_skip - 1]  # the prefix: every share below tau, and the first ties at tau
    n_tied = 0
    j = n_skip - 1
    while j >= 0 and v[j] == tau:
        n_tied += 1
        j -= 1
    for j in range(g.shape[0]):  # g is in index order: the ties a stable sort puts first
        if g[j] < tau:
            skip[idx[j]] = 1
        elif g[j] == tau and n_tied > 0:
            skip[idx[j]] = 1
            n_tied -= 1


_skip_sorted = _jit(_skip_sorted_py)


def skip_smallest(shares: np.ndarray, visited: np.ndarray, fraction: float,
                  skip: np.ndarray) -> None:
    """Set ``skip[i] = 1`` for the visited blocks with the smallest shares, adding up to at most
    ``fraction`` of the visited blocks' total (ties in index order: a stable sort).

    The policy of :meth:`torchfw.ww._problem.WWDualProblem.sweep`. ``shares >=
    0``; the zero shares (blocks whose slots are all shrunk at 0: most of them) come first in a
    stable sort and add nothing, so only the positive ones are sorted. Only their sorted
    *values* are needed (the running sums; the index order of equal shares is restored after),
    so NumPy's vectorized sort does it: on letter's ~11,000 positive shares a compiled stable
    argsort took ~0.95 ms, about a tenth of a shrunk sweep, and NumPy's sort takes ~0.04 ms.
    """
    idx, g = _positive_shares(shares, visited)
    if g.shape[0] == 0:
        return
    _skip_sorted(shares, visited, idx, g, np.sort(g), float(fraction), skip)
