r"""The one compiled quadratic loop: every variant's iterations and checks over a row source.

One concern: running :class:`~torchfw.optimizers._engine.QuadraticEngine`'s iterations -- FW,
away, pairwise, SWAP, SWAP-2o and PARTAN (seed 000, seed 002), with
:class:`~torchfw.ExactLineSearch` -- inside one compiled call, together with the checks every
``check_every`` iterations, the stopping test, the active-set corrective step
(:mod:`torchfw.optimizers._face`) and a pause at a given iteration that a later call resumes
exactly. On a problem of a few hundred to a few thousand atoms the host engine's interpreter work
per iteration (building the move, the line search, the update call) costs more than the
arithmetic; here an iteration is the arithmetic.

**Row sources.** The loop reads the vertex gradient :math:`h_k = \tilde Q e_k + \tilde c` of an
atom as row ``k`` of a *row source*, through :func:`vertex_row`, which numba resolves by the
source's type when it compiles the loop (``numba.extending.overload``):

* a 2-D array: its rows are the vertex gradients, read in place (the dense storage's matrix
  :math:`H`, :class:`~torchfw.optimizers._dense.DenseStorage`);
* any other type a family registers an ``overload`` of :func:`vertex_row` for -- the SVM's signed
  rows of :math:`K + 1`, whole or from a cache of rows (:mod:`torchfw.svm._dense`), which
  computes the row into the buffer it is given.

The core imports nothing of the families: a family links its source in by registering the
overload when it is imported. The loop's caller is the row-source storage
(:class:`~torchfw.optimizers._rows.RowStorage`: blocks for the run loop, the whole solve in
chunks), which the engine holds; SVC's small one-vs-one pairs call it from compiled code, a
block of pairs per call (:mod:`torchfw.svm._pairs`). Each source compiles its own specialisation of
the loop, with the row read a direct call (a function passed as a first-class value would be an
indirect call per row). A source that is a tuple of arrays is best unpacked inside its row
function, one that calls nothing: unpacked in the loop, each array's reference count is raised
and lowered around every row read (:mod:`torchfw.svm._dense`).

**The moves** are the host engine's, through the shared kernels: selection, update and exact step
(:mod:`torchfw.optimizers._kernels`), the curvatures and PARTAN's line (:mod:`torchfw.optimizers.
_moves`, compiled), the SWAP-2o partner. ``tests/test_compiled_loop.py`` checks the loop against
the host engine for every variant on every row source at every check.
"""

from __future__ import annotations

import math
import time

import numpy as np

from ..utils.jit import HAVE_NUMBA
from ..utils.jit import njit as _njit  # None without numba
from . import _face, _face_cg
from . import _kernels as K
from ._moves import ZERO_TOL, cross_after_scalars, partan_scalars

__all__ = ["VARIANTS", "COUNTERS", "FW", "AWAY", "PAIRWISE", "SWAP", "SWAP2", "PARTAN",
           "CONVERGED", "MAX_ITER", "NONFINITE", "PAUSED", "NEVER", "vertex_row", "run_loop",
           "correct", "store_state", "LoopState", "SolveCancelled", "run_chunked",
           "MAX_CHECKS", "checks_for", "checks_for_compiled", "first_pause"]

#: Variant codes of the loop.
FW, AWAY, PAIRWISE, SWAP, SWAP2, PARTAN = 0, 1, 2, 3, 4, 5
#: Solver name -> variant code.
VARIANTS = {"fw": FW, "away": AWAY, "pairwise": PAIRWISE, "swap": SWAP, "swap2": SWAP2,
            "partan": PARTAN}
#: Step counters, in the order of the ``counts`` array.
COUNTERS = ("fw", "away", "drop", "pairwise", "swap_add", "swap_drop", "partan", "correct")
#: Status codes returned by the loop; ``PAUSED``: a call ended at a check at or past its
#: ``pause_at`` (:func:`run_chunked` resumes it).
CONVERGED, MAX_ITER, NONFINITE, PAUSED = 0, 1, 2, 3
#: ``tol`` and ``rtol`` that never converge (NaN compares false): a caller whose run loop
#: decides at its own checks (the dense engine's blocks) runs exactly ``max_iter`` iterations.
NEVER = math.nan
#: Most checks one call records (the first ones and the last): a budget of many millions of
#: iterations does not size the history by it.
MAX_CHECKS = 100_000


def checks_for(iterations: int, check_every: int) -> int:
    """Rows of history one call of the loop records in at most ``iterations`` iterations: a
    check per ``check_every`` iterations, one more after each corrective step (at most one per
    window of :data:`torchfw.optimizers._face.MIN_WINDOW`), the first and the last, at most
    :data:`MAX_CHECKS`. Every caller of the loop sizes its history by it (:func:`run_chunked`;
    SVC's compiled blocks of problems, :mod:`torchfw.svm._pairs`, through
    :data:`checks_for_compiled`)."""
    return min(iterations // check_every + iterations // _face.MIN_WINDOW + 3, MAX_CHECKS)


def first_pause(first_chunk: int, check_every: int) -> int:
    """The iteration at which a chunked run's first call pauses (:func:`run_chunked`):
    ``first_chunk`` rounded down to a multiple of ``check_every``, at least one block, so
    that the checks fall where one call makes them."""
    return max(check_every, first_chunk // check_every * check_every)


def vertex_row(src, i, buf):
    r"""Row ``i`` of the row source ``src``: :math:`h_i`, the vertex gradient of atom ``i``.

    A 2-D array's row is returned in place (``buf`` unused). Families register their own
    sources with ``numba.extending.overload(vertex_row)`` (the loop is compiled code; this
    Python body serves the 2-D array only). The row returned stays valid until the next call
    with the same ``buf``.
    """
    return src[i]


if HAVE_NUMBA:
    from numba import types
    from numba.extending import overload

    @overload(vertex_row)
    def _vertex_row_of_matrix(src, i, buf):
        """The compiled :func:`vertex_row` of a 2-D array (rows read in place)."""
        if isinstance(src, types.Array) and src.ndim == 2:
            def impl(src, i, buf):
                return src[i]
            return impl
        return None


def _run_loop(variant, src, bufs, diag, ct, has_ct, constant, w, s, wp, sp, support, state,
              max_iter, tol, rtol, check_every, zero_tol, counts, hist, hist_counts, correct,
              pause_at):
    r"""Run ``variant`` from the state given; returns ``(iterations, status, history rows)``.

    The problem is :math:`F(w) = \tfrac12 w^\top \tilde Q w + \tilde c^\top w` plus
    ``constant`` over the unit simplex of atoms, with :math:`h_k` row ``k`` of ``src``
    (:func:`vertex_row`, into ``bufs[0]`` or ``bufs[1]``), ``diag`` :math:`\tilde Q_{kk}` and
    ``ct`` :math:`\tilde c` (read only with ``has_ct``). ``w, s`` are the weights and gradient;
    ``wp, sp, support`` PARTAN's previous iterate and the atoms that ever had weight (else
    aliases and unused). ``state`` carries ``[p, t, s_min, i_min, s_max, j_max, W, p_prev,
    t_prev, n_support]`` in and out, then the corrective step's window that a resumed call
    continues (:class:`LoopState`).

    At each check (iteration 0, then every ``check_every`` iterations and after a corrective
    step) the value :math:`(p + t)/2 + \text{constant}` and the gap :math:`p - \min s` are
    recorded in ``hist`` (``[k, value, gap]``; a full buffer keeps its first rows and the last)
    with the step counts so far in ``hist_counts``; then the run stops on a non-finite check,
    on :math:`g \le \max(\text{tol}, \text{rtol}\,|f|)` (:class:`~torchfw.optimizers.
    StoppingRule`'s test), at ``max_iter``, or pauses at or past ``pause_at``. With ``correct``,
    a stalled run takes the corrective step (:func:`correct`) at a check: it counts as one
    iteration (counter ``correct``), under the rule of :class:`torchfw.optimizers._correction.
    FaceCorrection` -- the conjugate-gradient step (:func:`_conjugate_py`) where
    :func:`~torchfw.optimizers._face_cg.conjugate_plan` affords a face larger than the dense
    step's and that one would leave violators out, until it fails once in the run.
    """
    n = w.shape[0]
    p = state[0]
    t = state[1]
    s_min = state[2]
    i_min = int(state[3])
    s_max = state[4]
    j_max = int(state[5])
    W = state[6]
    p_prev = state[7]
    t_prev = state[8]
    n_support = int(state[9])
    in_support = np.zeros(n if variant == PARTAN else 1, dtype=np.bool_)
    if variant == PARTAN:
        for q in range(n_support):
            in_support[support[q]] = True
    hi_buf = bufs[0]
    hj_buf = bufs[1]
    ct_i = 0.0
    ct_j = 0.0
    k = 0
    n_hist = 0
    status = MAX_ITER
    # The window of the corrective step (torchfw.optimizers._face.STALL): where it began, its
    # length, the distance to the stopping target it must halve and its smallest distance so
    # far (_face.distance: the gap over its check's target; a negative reference is taken at
    # the next check); the stalled windows in a row before it (a repeated stall affords a
    # larger face, _face_budget).
    win_start = 0
    last_correction = 0  # the plain iterations since pay for the next face (_face_budget)
    stalls = 0
    # (A pass over the weights: only when the step may be taken -- the dense engine's blocks
    # of a few hundred atoms call the loop every check.)
    win_face = _n_positive(w) if correct else 0
    win_len = _correction_window(win_face, n, 0) if correct else 0
    # What the plain iterations of a window of no stall on that face cost, in corrections
    # (_face.stalled_scaled: a shortened window's rate counts for its own cost).
    win_full = win_len
    # The conjugate-gradient step (_face_cg): ALLOWED until it fails once in the run, LAST
    # after it was the last correction (the windows then cost its steps, not factors).
    conjugate = _CG_ALLOWED
    win_first = -1.0
    win_min = math.inf
    # Every window is also measured on gaps (_face.STALL): the gap it must halve (negative:
    # the next check's) and its smallest; the run's first window (opening) on gaps alone.
    gap_first = p - s_min
    gap_min = gap_first
    opening = 1
    if state.shape[0] >= 17 and state[10] > 0.0:
        # A resumed call (run_chunked): the window goes on where the last call left it, its
        # iterations counted from this call's first, so that a chunked run is the one call's,
        # bit for bit.
        win_start = int(state[11])
        last_correction = int(state[12])
        win_len = int(state[13])
        win_first = state[14]
        win_min = state[15]
        stalls = int(state[16])
        if state.shape[0] >= 18:
            conjugate = int(state[17])
        win_full = int(state[18]) if state.shape[0] >= 19 else win_len
        if state.shape[0] >= 23:
            gap_first = state[19]
            gap_min = state[20]
            win_face = int(state[21])
            opening = int(state[22])
        else:
            opening = 0
    while True:
        value = 0.5 * (p + t) + constant
        gap = p - s_min
        row = n_hist if n_hist < hist.shape[0] else hist.shape[0] - 1
        hist[row, 0] = k
        hist[row, 1] = value
        hist[row, 2] = gap
        for c in range(counts.shape[0]):
            hist_counts[row, c] = counts[c]
        n_hist = row + 1
        if not (math.isfinite(value) and math.isfinite(gap)):
            status = NONFINITE
            break
        bound = rtol * abs(value)
        target = tol if tol >= bound else bound
        if gap <= target:
            status = CONVERGED
            break
        if k >= max_iter:
            status = MAX_ITER
            break
        if k >= pause_at:
            # Between two checks of the one-call run, before this check's corrective
            # decision: the resumed call repeats this check and goes on as one call would.
            status = PAUSED
            break
        if correct:
            dist = _distance(gap, target)
            if win_first < 0.0:
                win_first = dist
            if dist < win_min:
                win_min = dist
            if gap_first < 0.0:
                gap_first = gap
            if gap < gap_min:
                gap_min = gap
            if k - win_start >= win_len:
                corrected = False
                scale = (k - win_start) / max(win_full, 1)
                if opening:  # the run's first window: its gaps against the target
                    stalled = _stalled_scaled(gap_min, gap_first, target, scale)
                    opening = 0
                else:
                    # Stalled on gaps, or on distances where the face did not fill in
                    # (_face.filling: the target falls with the value, not the crawl).
                    stalled = _stalled_scaled(gap_min, gap_first, target, 1.0) or (
                        _stalled_scaled(win_min, win_first, 1.0, scale)
                        and not _filling(_n_positive(w), win_face))
                if stalled:
                    k_dense = _face_budget(n, k - last_correction, stalls)
                    kept = -1
                    if conjugate != _CG_DISABLED:  # a larger face by conjugate gradients
                        size, products = _conjugate_plan(n, k - last_correction, stalls,
                                                         k_dense)
                        if size > 0 and _wants_more(w, s, p, k_dense):
                            kept = _conjugate(src, ct, has_ct, w, s, hi_buf, p, t, size,
                                              products)
                            if kept == _CG_FAILED:  # not for this problem: the dense step
                                conjugate = _CG_DISABLED
                            elif kept > 0:
                                conjugate = _CG_LAST
                    if kept <= 0:
                        kept = _correct(src, ct, has_ct, w, s, hi_buf, p, t, k_dense)
                        if kept > 0 and conjugate == _CG_LAST:
                            conjugate = _CG_ALLOWED
                    if kept > 0:
                        last_correction = k + 1
                        corrected = True
                        counts[7] += 1
                        i_min, s_min, j_max, s_max, p, t = _select(w, s, ct, has_ct)
                        if variant == PARTAN:  # PARTAN restarts from the corrected iterate
                            for r in range(n):
                                wp[r] = w[r]
                                sp[r] = s[r]
                                # The face's new atoms have weight: the support list must
                                # hold them (its moves and bounds read only its atoms).
                                if w[r] > 0.0 and not in_support[r]:
                                    in_support[r] = True
                                    support[n_support] = r
                                    n_support += 1
                            W = p - t
                            p_prev = p
                            t_prev = t
                        k += 1
                    stalls += 1
                else:
                    stalls = 0
                win_start = k
                n_face = _n_positive(w)
                win_face = n_face
                if conjugate == _CG_LAST:
                    win_len = _conjugate_window(n_face, n, stalls)
                    win_full = _conjugate_window(n_face, n, 0)
                else:
                    win_len = _correction_window(n_face, n, stalls)
                    win_full = _correction_window(n_face, n, 0)
                if not corrected and stalled:
                    win_len *= 2  # a correction refused: try again later
                # The next window is measured against this one's smallest distance (the gap
                # is noisy: its value at one check would make a halving look easy), or the
                # distance at the check after the correction.
                if corrected:
                    win_first = -1.0
                    win_min = math.inf
                    gap_first = -1.0
                    gap_min = math.inf
                    continue
                win_first = win_min
                win_min = dist
                gap_first = gap_min
                gap_min = gap
        block = max_iter - k
        if check_every < block:
            block = check_every
        for _ in range(block):
            i = i_min
            si = s_min
            if has_ct:
                ct_i = ct[i]
            hi = vertex_row(src, i, hi_buf)
            if variant == PARTAN:  # the FW step, then the extrapolation (seed 002)
                q = p - t
                curvature = _toward_curvature(diag[i], si - ct_i, q)
                value = 0.5 * (p + t) + constant
                slope = si - p
                lam = _step(slope, curvature, 1.0)
                f_t, e_slope, e_curv, noise = _partan_scalars(
                    value, slope, curvature, lam, constant, t, ct_i, W, sp[i] - ct_i, p_prev,
                    t_prev)
                if not in_support[i]:
                    in_support[i] = True
                    support[n_support] = i
                    n_support += 1
                lo, up = _bounds_on(w, wp, lam, i, support, n_support)
                # partan_move: the line oriented to descend, skipped below its rounding noise.
                sigma = -1.0 if e_slope > 0.0 else 1.0
                gamma_max = -lo if e_slope > 0.0 else up
                gamma_max = gamma_max if e_curv > noise else 0.0
                gamma = _step(sigma * e_slope, e_curv, gamma_max)
                mu = sigma * gamma
                a = (1.0 + mu) * (1.0 - lam)
                b = (1.0 + mu) * lam
                d = -mu
                u_i = s[i] - ct_i
                W = _cross_after(a, b, 0.0, d, q, u_i, u_i, W)
                p_prev = p
                t_prev = t
                _shift_update_on(w, s, a, b, i, hi, 0.0, i, hi, d, wp, sp, support,
                                 n_support, zero_tol)
                counts[6] += 1
            elif variant == FW or variant == AWAY:
                q = p - t
                use_fw = True
                wj = 0.0
                if variant == AWAY:
                    wj = w[j_max]
                    use_fw = si - p <= p - s_max
                if use_fw:
                    gamma = _step(si - p, _toward_curvature(diag[i], si - ct_i, q), 1.0)
                    _update(w, s, 1.0 - gamma, gamma, i, hi, 0.0, i, hi, 0.0, w, s, False,
                            zero_tol)
                    counts[0] += 1
                else:
                    j = j_max
                    if has_ct:
                        ct_j = ct[j]
                    gamma_max = _away_max(wj)
                    gamma = _step(p - s_max, _toward_curvature(diag[j], s_max - ct_j, q),
                                  gamma_max)
                    hj = vertex_row(src, j, hj_buf)
                    _update(w, s, 1.0 + gamma, -gamma, j, hj, 0.0, j, hj, 0.0, w, s, False,
                            zero_tol)
                    counts[1] += 1
                    if gamma >= gamma_max and gamma_max > 0.0:
                        counts[2] += 1
            else:  # pairwise, SWAP, SWAP-2o: mass from the away atom j to the FW atom i
                j = j_max
                sj = s_max
                if variant == SWAP2:
                    partner = _partner(w, s, hi, diag, ct, has_ct, i, si, diag[i])
                    if partner >= 0:
                        j = partner
                    sj = s[j]
                if j < 0:  # no active atom (not on the simplex): the null move
                    j = i
                    sj = si
                if has_ct:
                    ct_j = ct[j]
                curvature = _pair_curvature(diag[i], diag[j], hi[j] - ct_j)
                gamma_max = w[j]
                slope = si - sj
                gamma = _step(slope, curvature, gamma_max)
                use_pair = True
                if variant != PAIRWISE:
                    # SWAP: the FW step or the swap, whichever gains more (the swap's gain
                    # unconstrained, seed 000's footnote 6; ties to the swap).
                    q = p - t
                    fw_slope = si - p
                    fw_curv = _toward_curvature(diag[i], si - ct_i, q)
                    gamma_fw = _step(fw_slope, fw_curv, 1.0)
                    gain_fw = -(gamma_fw * fw_slope + 0.5 * gamma_fw * gamma_fw * fw_curv)
                    inner = curvature if curvature > 1e-300 else 1e-300
                    unc = -slope / inner
                    unc = unc if unc > 0.0 else 0.0
                    gain_sw = -(unc * slope + 0.5 * unc * unc * curvature)
                    use_pair = slope < 0.0 and gain_sw >= gain_fw
                    if not use_pair:
                        _update(w, s, 1.0 - gamma_fw, gamma_fw, i, hi, 0.0, i, hi, 0.0, w, s,
                                False, zero_tol)
                        counts[0] += 1
                if use_pair:
                    c = -gamma
                    if c != 0.0:
                        hj = vertex_row(src, j, hj_buf)
                        _update(w, s, 1.0, gamma, i, hi, c, j, hj, 0.0, w, s, False, zero_tol)
                    else:
                        _update(w, s, 1.0, gamma, i, hi, 0.0, j, hi, 0.0, w, s, False,
                                zero_tol)
                    drop = gamma >= gamma_max and gamma > 0.0
                    if variant == PAIRWISE:
                        counts[3] += 1
                        if drop:
                            counts[2] += 1
                    elif drop:
                        counts[5] += 1
                    else:
                        counts[4] += 1
            i_min, s_min, j_max, s_max, p, t = _select(w, s, ct, has_ct)
            k += 1
    _store(state, p, t, s_min, i_min, s_max, j_max, W, p_prev, t_prev, n_support)
    if state.shape[0] >= 17:
        state[10] = 1.0
        state[11] = win_start - k
        state[12] = last_correction - k
        state[13] = win_len
        state[14] = win_first
        state[15] = win_min
        state[16] = stalls
    if state.shape[0] >= 18:
        state[17] = conjugate
    if state.shape[0] >= 19:
        state[18] = win_full
    if state.shape[0] >= 23:
        state[19] = gap_first
        state[20] = gap_min
        state[21] = win_face
        state[22] = opening
    return k, status, n_hist


def _n_positive_py(w):
    """The number of atoms with weight (the face a correction would work on)."""
    count = 0
    for r in range(w.shape[0]):
        if w[r] > 0.0:
            count += 1
    return count


def _correct_py(src, ct, has_ct, w, s, buf, p, t, max_face):
    r"""The active-set corrective step on the face of ``w`` (:mod:`torchfw.optimizers._face`).

    :func:`torchfw.optimizers._correction.correct_face` on the rows of ``src``: rounds (at most
    :data:`~torchfw.optimizers._face.MAX_ROUNDS`); the face -- first the support of ``w`` and
    the atoms that violate optimality most (:func:`~torchfw.optimizers._face.face_atoms`), then
    the kept atoms and the new worst violators (:func:`~torchfw.optimizers._face.violators`) --
    has its factor of :math:`G_{ab} = h_a[b] - \tilde c_b` extended by the new atoms' rows,
    Wolfe's minor cycle runs on it, and the new weights and their gradient
    :math:`s = \sum_{a \in S} x_a h_a` (the weights sum to one) are written into ``w`` and
    ``s`` if they lower the objective :math:`(p + t)/2`. The rounds go on while each lowers
    the gap. Returns the number of atoms of the last face accepted, or -1 when nothing changed.
    """
    n = w.shape[0]
    first, k_support = _face_atoms(w, s, p, max_face)
    k = first.shape[0]
    if k < 2:
        return -1
    cap = max_face
    idx = np.empty(cap, dtype=np.int64)
    x = np.zeros(cap)
    c = np.zeros(cap if has_ct else 1)
    total = 0.0
    for a in range(k):
        idx[a] = first[a]
        if has_ct:
            c[a] = ct[first[a]]
    for a in range(k_support):
        x[a] = w[idx[a]]
        total += x[a]
    for a in range(k_support):
        x[a] /= total
    L = np.empty((cap, cap))
    Y = np.zeros((2, cap))  # the face's forward vectors, kept between the rounds' solves
    z = np.empty(cap)
    solved = np.zeros(2, dtype=np.int64)
    s_new = np.empty(n)
    value = 0.5 * (p + t)
    gap_prev = p - _min(s)
    k0 = 0
    accepted = -1
    for _ in range(_MAX_ROUNDS):
        Gb = np.empty((k - k0, k))
        for a in range(k0, k):
            h = vertex_row(src, idx[a], buf)
            for b in range(a + 1):
                if has_ct:
                    L[a, b] = h[idx[b]] - ct[idx[b]]
                else:
                    L[a, b] = h[idx[b]]
                Gb[a - k0, b] = L[a, b]
        lo = k0 if k0 > 0 else k_support
        k = _extend_skipping(L, Gb, k0, lo, k, x, c, has_ct, idx)
        if k < 1:
            break
        if solved[0] > k0:  # the rows from k0 on are new
            solved[0] = k0
        k = _prune_kept(L, Gb, k0, lo, k, x, c, has_ct, idx, Y, z, solved)
        if k < 1:
            break
        kept = _minor_cycle_kept(L, k, x, c, has_ct, idx, Y, z, solved)
        if kept < 1:
            break
        for r in range(n):
            s_new[r] = 0.0
        for a in range(kept):  # atom by atom, the order correct_face sums the columns in
            _axpy(s_new, x[a], vertex_row(src, idx[a], buf))
        p_new = 0.0
        t_new = 0.0
        for a in range(kept):
            p_new += x[a] * s_new[idx[a]]
            if has_ct:
                t_new += x[a] * ct[idx[a]]
        if not 0.5 * (p_new + t_new) < value:
            break
        for r in range(n):
            w[r] = 0.0
            s[r] = s_new[r]
        for a in range(kept):
            w[idx[a]] = x[a]
        value = 0.5 * (p_new + t_new)
        accepted = kept
        gap = p_new - _min(s_new)
        if not gap < gap_prev:
            break
        gap_prev = gap
        n_add = _face_growth(kept)
        if n_add > cap - kept:
            n_add = cap - kept
        new = _violators(w, s, p_new, n_add)
        if new.shape[0] == 0:
            break
        k0 = kept
        k = kept + new.shape[0]
        for a in range(new.shape[0]):
            idx[k0 + a] = new[a]
            x[k0 + a] = 0.0
            if has_ct:
                c[k0 + a] = ct[new[a]]
    return accepted


def _conjugate_py(src, ct, has_ct, w, s, buf, p, t, size, max_mv):
    r"""The corrective step by conjugate gradients (:mod:`torchfw.optimizers._face_cg`) on the
    face of the support of ``w`` and the worst violators, ``size`` atoms at most.

    :func:`torchfw.optimizers._correction.conjugate_face` on the rows of ``src``, in rounds as
    the dense step's (:func:`_correct_py`): the face's lower triangle :math:`G_{ab} = h_a[b] -
    \tilde c_b` (:math:`b \le a`) is read from its atoms' rows,
    :func:`~torchfw.optimizers._face_cg.conjugate_minimize` solves the face's problem, and the
    new weights and their gradient :math:`s = \sum_a x_a h_a` (the weights sum to one) are
    written into ``w`` and ``s`` if they lower the objective :math:`(p + t)/2`; while the gap
    falls, the next round's face is the new support and the worst violators of the new
    gradient, up to ``size`` atoms. All rounds share ``max_mv`` products. Returns the atoms of
    the last face accepted, -1 when nothing changed, or
    :data:`~torchfw.optimizers._face_cg.FAILED` when the first round's solve failed.
    """
    n = w.shape[0]
    k_support = _n_positive(w)
    if k_support > size:
        return -1
    value = 0.5 * (p + t)
    gap_prev = p - _min(s)
    p_now = p
    used = 0
    accepted = -1
    s_new = np.empty(n)
    for _ in range(_MAX_ROUNDS):
        extra = _violators(w, s, p_now, size - k_support)
        k = k_support + extra.shape[0]
        if k < 2 or extra.shape[0] == 0 and accepted > 0:
            break
        idx = np.empty(k, dtype=np.int64)
        x = np.zeros(k)
        c = np.zeros(k if has_ct else 1)
        q = 0
        for r in range(n):
            if w[r] > 0.0:
                idx[q] = r
                q += 1
        for a in range(extra.shape[0]):
            idx[k_support + a] = extra[a]
        total = 0.0
        for a in range(k_support):
            x[a] = w[idx[a]]
            total += x[a]
        for a in range(k_support):
            x[a] /= total
        if has_ct:
            for a in range(k):
                c[a] = ct[idx[a]]
        G = np.empty((k, k), dtype=buf.dtype)  # the rows' precision: float32 rows, half the
        for a in range(k):                     # memory each product reads
            h = vertex_row(src, idx[a], buf)
            for b in range(a + 1):
                if has_ct:
                    G[a, b] = h[idx[b]] - ct[idx[b]]
                else:
                    G[a, b] = h[idx[b]]
        products = _conjugate_minimize(G, k, x, c, has_ct, max_mv - used, _CG_RTOL)
        if products < 0:
            return _CG_FAILED if accepted < 0 else accepted
        used += products
        for r in range(n):
            s_new[r] = 0.0
        kept = 0
        for a in range(k):  # atom by atom, in face order (conjugate_face sums the columns so)
            if x[a] > 0.0:
                _axpy(s_new, x[a], vertex_row(src, idx[a], buf))
                kept += 1
        p_new = 0.0
        t_new = 0.0
        for a in range(k):
            if x[a] > 0.0:
                p_new += x[a] * s_new[idx[a]]
                if has_ct:
                    t_new += x[a] * ct[idx[a]]
        if not 0.5 * (p_new + t_new) < value:
            break
        for r in range(n):
            w[r] = 0.0
            s[r] = s_new[r]
        for a in range(k):
            if x[a] > 0.0:
                w[idx[a]] = x[a]
        value = 0.5 * (p_new + t_new)
        accepted = kept
        k_support = kept
        p_now = p_new
        gap = p_new - _min(s)
        if not gap < gap_prev or kept >= size:
            break
        gap_prev = gap
    return accepted


def _min_py(v):
    """The smallest entry of ``v``."""
    best = v[0]
    for r in range(1, v.shape[0]):
        if v[r] < best:
            best = v[r]
    return best


def _store_py(state, p, t, s_min, i_min, s_max, j_max, W, p_prev, t_prev, n_support):
    """Write the scalars of a run into ``state`` (the layout :func:`_run_loop` reads)."""
    state[0] = p
    state[1] = t
    state[2] = s_min
    state[3] = i_min
    state[4] = s_max
    state[5] = j_max
    state[6] = W
    state[7] = p_prev
    state[8] = t_prev
    state[9] = n_support


# Callees by their global names (numba resolves them when it compiles the caller).
_update = K.update
_select = K.select
_step = K._step_kernel
_away_max = K._away_max_kernel
_partner = K.second_order_partner
_shift_update_on = K.shift_update_on
_bounds_on = K.extrapolation_bounds_on
_toward_curvature = K._toward_curvature_kernel
_pair_curvature = K._pair_curvature_kernel
_partan_scalars = _njit(partan_scalars) if HAVE_NUMBA else partan_scalars
_cross_after = _njit(cross_after_scalars) if HAVE_NUMBA else cross_after_scalars
_minor_cycle_kept = _face.minor_cycle_kept
_correction_window = _face.correction_window
_axpy = _face.axpy
_stalled_scaled = _face.stalled_scaled
_distance = _face.distance
_filling = _face.filling
_face_budget = _face.face_budget
_face_atoms = _face.face_atoms
_violators = _face.violators
_extend_skipping = _face.extend_skipping
_face_growth = _face.face_growth
_MAX_ROUNDS = _face.MAX_ROUNDS
_prune_kept = _face.prune_kept
_conjugate_minimize = _face_cg.conjugate_minimize
_conjugate_plan = _face_cg.conjugate_plan
_wants_more = _face_cg.wants_more
_CG_FAILED = _face_cg.FAILED
_CG_RTOL = _face_cg.CG_RTOL
_CG_ALLOWED = _face_cg.ALLOWED
_CG_DISABLED = _face_cg.DISABLED
_CG_LAST = _face_cg.LAST
_conjugate_window = _face_cg.conjugate_window
_min = _njit(_min_py)
_store = _njit(_store_py)
_n_positive = _njit(_n_positive_py)
_correct = _njit(_correct_py)
_conjugate = _njit(_conjugate_py)
#: :func:`_correct_py`, compiled (None without numba).
correct = _correct
#: :func:`_store_py`, compiled (None without numba).
store_state = _store
#: :func:`_run_loop`, compiled (None without numba).
run_loop = _njit(_run_loop)
#: :func:`checks_for`, compiled for loops' callers in compiled code (None without numba).
checks_for_compiled = _njit(checks_for)


class LoopState:
    """The vectors and scalars a run starts from and leaves its final iterate in.

    ``w, s`` (float64) are the weights and scores; ``wp, sp`` the previous iterate (PARTAN,
    else aliases of ``w, s``); ``support`` the atoms that ever had weight, in order of arrival
    (PARTAN); ``state`` ``[p, t, s_min, i_min, s_max, j_max, W, p_prev, t_prev, n_support]``,
    then the corrective step's window that a resumed call continues, the run's
    conjugate-step state (:data:`torchfw.optimizers._face_cg.ALLOWED`, ``DISABLED``, ``LAST``)
    the window's length at no stall, the window's reference and smallest gaps, the face's
    atoms at its start and whether it is the run's first (:func:`_run_loop`).
    """

    __slots__ = ("w", "s", "wp", "sp", "support", "state")

    def __init__(self, n: int, keep_previous: bool):
        self.w = np.zeros(n)
        self.s = np.empty(n)
        self.wp = np.empty(n) if keep_previous else self.w
        self.sp = np.empty(n) if keep_previous else self.s
        self.support = np.empty(n if keep_previous else 1, dtype=np.int64)
        # The scalars of the iterate, then the corrective step's window (carried between calls).
        self.state = np.zeros(23)

    @classmethod
    def of_engine(cls, engine) -> LoopState:
        """The state held by a host engine (its vectors, shared; its scalars, copied)."""
        self = cls.__new__(cls)
        keep = engine.keep_previous
        self.w, self.s = engine._w_np, engine._s_np
        self.wp, self.sp = engine._wp_np, engine._sp_np
        self.support = engine._support if keep else np.zeros(1, dtype=np.int64)
        self.state = np.array([engine.p, engine.t, engine.s_min, engine.i_min, engine.s_max,
                               engine.j_max, engine.W if keep else 0.0,
                               engine.p_prev if keep else 0.0, engine.t_prev if keep else 0.0,
                               engine._n_support if keep else 0] + [0.0] * 13, dtype=np.float64)
        return self

    def value(self) -> float:
        """``f = (p + t) / 2`` without the objective's constant, as the host engine's."""
        return 0.5 * (float(self.state[0]) + float(self.state[1])) + 0.0

    def gap(self) -> float:
        """``p - s_min``, as the host engine's ``gap()``."""
        return float(self.state[0]) - float(self.state[2])


class SolveCancelled(Exception):
    """A run stopped between two chunks because it was interrupted (``stop`` set)."""


def run_chunked(variant: int, src, bufs: np.ndarray, diag: np.ndarray, ct: np.ndarray,
                has_ct: bool, constant: float, start: LoopState, *, max_iter: int, tol: float,
                rtol: float, check_every: int, stop=None, correct: bool = True,
                chunk_seconds: float | None, first_chunk: int):
    """Run the loop from ``start`` (which holds the final iterate afterwards) in chunks.

    Each chunk is one compiled call of about ``chunk_seconds`` (None: one call for the whole
    run), a multiple of ``check_every`` iterations (the first ``first_chunk``), so that the
    checks fall where one call makes them; a chunk starts from the state the last one stored
    and its first check repeats the last one's, which is dropped: the iterates, checks and
    stopping iteration are those of one call, bit for bit. Between two chunks the interpreter
    runs, so that a Ctrl-C stops a run within about ``chunk_seconds``; ``stop`` (a
    :class:`threading.Event`, optional) is read there: once set, :class:`SolveCancelled` is
    raised. ``max_iter`` may be huge: each chunk keeps at most :data:`MAX_CHECKS` checks.

    Returns ``(n_iter, status_code, history array (n, 3), counts per check (n, 8))``.
    """
    counts = np.zeros(len(COUNTERS), dtype=np.int64)
    hists: list[np.ndarray] = []
    hist_counts_list: list[np.ndarray] = []
    done = 0
    chunk = first_pause(first_chunk, check_every)
    while True:
        if stop is not None and stop.is_set():
            raise SolveCancelled
        # The chunk pauses at its first check at or past ``chunk`` iterations: checks fall
        # where one call makes them (a corrective step moves them off the multiples of
        # check_every), and the budget stays the whole run's.
        this = max_iter - done if chunk_seconds is None else min(max_iter - done, chunk)
        pause_at = max_iter - done if chunk_seconds is None else chunk
        n_checks = checks_for(this, check_every)
        hist = np.empty((n_checks, 3), dtype=np.float64)
        hist_counts = np.empty((n_checks, len(COUNTERS)), dtype=np.int64)
        t0 = time.perf_counter()
        k, status, n_hist = run_loop(
            variant, src, bufs, diag, ct, has_ct, constant, start.w, start.s, start.wp,
            start.sp, start.support, start.state, max_iter - done, tol, rtol, check_every,
            ZERO_TOL, counts, hist, hist_counts, bool(correct), pause_at)
        elapsed = time.perf_counter() - t0
        first = 1 if hists else 0  # a resumed chunk's first check is the last chunk's last
        hist = hist[first:n_hist]
        hist[:, 0] += done
        hists.append(hist)
        hist_counts_list.append(hist_counts[first:n_hist])
        done += int(k)
        if status != PAUSED:
            break
        # The next chunk: as many iterations as chunk_seconds at this chunk's pace, a multiple
        # of check_every, growing at most 8-fold at a time (the pace of the first iterations,
        # cache misses included, need not last).
        assert chunk_seconds is not None
        pace = chunk_seconds * k / max(elapsed, 1e-6)
        chunk = int(min(pace, 8 * chunk)) // check_every * check_every
        chunk = max(check_every, chunk)
    if len(hists) == 1:
        return done, int(status), hists[0], hist_counts_list[0]
    return done, int(status), np.concatenate(hists), np.concatenate(hist_counts_list)
