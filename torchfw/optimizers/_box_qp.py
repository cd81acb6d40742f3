r"""Pairwise Frank-Wolfe over a box and one equality: the quadratic of LIBSVM's dual solver.

The problem is

.. math::
    \min_{\alpha}\ f(\alpha) = \tfrac12 \alpha^\top Q \alpha + p^\top \alpha
    \quad\text{s.t.}\quad 0 \le \alpha_i \le u_i,\quad y^\top \alpha = \Delta,

with labels :math:`y_i \in \{-1, +1\}`, over the polytope :math:`\mathcal P` of a box cut by one
hyperplane. The entries of row :math:`i` of :math:`Q` are read from a *row source* through
:func:`row_entries` (the entries at the active coordinates): a 2-D array's, or any source a
family registers (the SVM's signed kernel rows, whole or from a cache of rows). The core
imports no family.

**The step.** The feasible directions along which exactly two coordinates move are
:math:`d_{ij} = y_i e_i - y_j e_j` (:math:`y^\top d_{ij} = 0`). :math:`\mathcal P`'s edges are
such directions, so a step along :math:`d_{ij}` is a pairwise Frank-Wolfe step on
:math:`\mathcal P` -- towards the Frank-Wolfe atom of the "up" coordinate :math:`i`, away from
the "low" one :math:`j` -- and the exact line search along it, clipped to the box, is one SMO
step (sequential minimal optimization: LIBSVM's ``Solver``):

.. math::
    t^\star = \frac{-\nabla f(\alpha)^\top d_{ij}}{d_{ij}^\top Q d_{ij}}
            = \frac{-y_i \nabla_i f + y_j \nabla_j f}{Q_{ii} + Q_{jj} - 2 y_i y_j Q_{ij}},
    \qquad t = \min(t^\star, t_{\max}),

with :math:`t_{\max}` the largest step that keeps both coordinates in their boxes (a
non-positive curvature is replaced by :data:`TAU`, as LIBSVM does). The gradient
:math:`G = Q\alpha + p` is kept and updated by :math:`t (y_i Q_{i\cdot} - y_j Q_{j\cdot})`:
two rows an iteration.

**The pair.** With :math:`I_{up} = \{i : y_i = +1, \alpha_i < u_i\} \cup \{i : y_i = -1,
\alpha_i > 0\}` (the coordinates whose :math:`y_i \alpha_i` may grow) and :math:`I_{low}` the
converse, :math:`i = \arg\max_{I_{up}} -y_i G_i` (the maximal violation, the Frank-Wolfe
vertex's coordinate) and :math:`j` the second-order choice of Fan, Chen & Lin (2005, "Working
set selection using second order information for training support vector machines", JMLR 6,
WSS 2): among :math:`j \in I_{low}` with :math:`b_{ij} = -y_i G_i + y_j G_j > 0`, the one that
minimizes the decrease of the step's model, :math:`-b_{ij}^2 / a_{ij}` with
:math:`a_{ij} = Q_{ii} + Q_{jj} - 2 y_i y_j Q_{ij}`. On the simplex (one label, no upper bound)
this is seed 000's SWAP-2o rule (Allende, Frandi, Ñanculef & Sartori, "A novel Frank-Wolfe
algorithm. Analysis and applications to large-scale SVM training", arXiv 1304.1014, Algorithm
5: the first-order atom :math:`i` fixed, the swap partner by second-order gain); ties are broken
as LIBSVM breaks them (the last index).

**The loop's numbers.** The compiled loop keeps :math:`v = -y \circ G` and reads the
unsigned matrix :math:`K = D_y Q D_y` (a family's kernel rows before the labels' signs, or
:math:`Q`'s rows signed as they are read): :math:`I_{up}`'s maximum is that of :math:`v`,
:math:`b_{ij} = v_i - v_j`, :math:`a_{ij} = K_{ii} + K_{jj} - 2 K_{ij}` and the step changes
:math:`v` by :math:`-t (K_{i\cdot} - K_{j\cdot})` -- the same numbers up to exact sign
changes, with no branch on a label in the scans. A step makes two passes over the active
coordinates (the choice of :math:`j`; the update fused with the next :math:`i`) where LIBSVM
makes three, each in four lanes of running extrema merged with ties to the last index.

**Stopping.** The maximal violation :math:`m(\alpha) - M(\alpha)`, with :math:`m = \max_{I_{up}}
-y_i G_i` and :math:`M = \min_{I_{low}} -y_i G_i`, is zero exactly at the KKT points; the solve
stops when it falls below ``tol`` (LIBSVM's ``-e``, default 1e-3). It bounds the pairwise
Frank-Wolfe gap over :math:`\mathcal P`'s edges through any one coordinate pair.

**Equality multiplier.** At the optimum :math:`-y_i G_i = b` for every free coordinate
(:math:`0 < \alpha_i < u_i`); :func:`equality_multiplier` returns LIBSVM's estimate
:math:`\rho = -b`: the mean of :math:`y_i G_i` over the free coordinates, or the midpoint of
the interval the bounded ones leave when none is free (LIBSVM's ``calculate_rho``).

**Shrinking** (optional, LIBSVM's, :func:`solve_box_qp`): the steps run on an active set of
coordinates, those at a bound that the gradient says will stay there left out, with the
upper-bound coordinates' part of the gradient kept to rebuild the rest; the last check is
always over the whole problem.
"""

from __future__ import annotations

import math
import threading

import numpy as np

from ..utils.jit import HAVE_NUMBA
from ..utils.jit import njit as _njit  # None without numba

__all__ = ["solve_box_qp", "row_entries", "equality_multiplier", "box_qp_value", "TAU",
           "CONVERGED",
           "MAX_ITER", "CANCELLED", "CHUNK_WORK", "BoxQPSolution"]

#: The curvature put in place of a non-positive :math:`a_{ij}` (LIBSVM's ``TAU``).
TAU = 1e-12

#: Status codes of :func:`solve_box_qp`.
CONVERGED, MAX_ITER, CANCELLED = 0, 1, 2

#: Most active coordinates whose rows over one another :func:`solve_box_qp` keeps in one
#: contiguous block (8 MB in float64), each row copied there on its first use since the
#: positions last changed: contiguous reads against two gathers of ``n`` scattered entries a step.
BLOCK_MAX = 1024

#: Entries touched (about ``iterations x coordinates``) per compiled call of
#: :func:`solve_box_qp`: between calls a Ctrl-C or a ``stop`` event is honoured. 2e7: about
#: 20 ms of work per call on one core.
CHUNK_WORK = 20_000_000


def row_entries(src, i, idx, count, buf):
    """``buf[t] = Q[i, idx[t]]`` for ``t < count`` (float64): the entries of row ``i`` of the
    row source ``src`` at the coordinates ``idx[:count]``.

    A 2-D array's entries are read in place. Families register their own sources with
    ``numba.extending.overload(row_entries)`` (this Python body serves the 2-D array only).
    Reading the entries of the active coordinates only is what makes shrinking pay: a row of
    the whole problem is read only when a coordinate enters or leaves its upper bound.
    """
    row = src[i]
    for t in range(count):
        buf[t] = row[idx[t]]
    return buf


if HAVE_NUMBA:
    from numba import types
    from numba.extending import overload

    @overload(row_entries)
    def _row_entries_of_matrix(src, i, idx, count, buf):
        """The compiled :func:`row_entries` of a 2-D array."""
        if isinstance(src, types.Array) and src.ndim == 2:
            def impl(src, i, idx, count, buf):
                row = src[i]
                for t in range(count):
                    buf[t] = row[idx[t]]
                return buf
            return impl
        return None


def _unsigned_entries_py(src, signed, c, idx, count, ycoord, buf):
    """``buf[t] = K[c, idx[t]]`` for ``t < count``: the entries of row ``c`` of the unsigned
    matrix :math:`K = D_y Q D_y` (:math:`K_{ck} = y_c y_k Q_{ck}`), from a source of
    :math:`Q`'s rows (``signed``) or of :math:`K`'s (the SVM's kernel rows). The signs are
    exact, so either source gives the same bits."""
    row_entries(src, c, idx, count, buf)
    if signed:
        yc = ycoord[c]
        for t in range(count):
            buf[t] = yc * ycoord[idx[t]] * buf[t]
    return buf


def _marks_py(y_t, u_t, a_t):
    """``(upoff, lowoff)`` of a coordinate: 0 when it is in :math:`I_{up}` (:math:`I_{low}`),
    else :math:`-\\infty` -- added to a value, it takes the coordinate out of a maximum without
    a branch on its label."""
    if y_t > 0:
        return (0.0 if a_t < u_t else -math.inf), (0.0 if a_t > 0.0 else -math.inf)
    return (0.0 if a_t > 0.0 else -math.inf), (0.0 if a_t < u_t else -math.inf)


def _score_py(gmax, di, v_t, lowoff_t, diag_t, k_it):
    """``(w, s)`` of a position in the choice of ``j``: ``w`` = :math:`-v_t` on
    :math:`I_{low}` (else :math:`-\\infty`), ``s`` = :math:`-b^2/a` (LIBSVM's
    ``obj_diff``; :data:`TAU` for a non-positive :math:`a`) when :math:`b = \\max_{I_{up}} v
    - v_t > 0`, else 1.0 (never chosen)."""
    w = lowoff_t - v_t
    b = gmax + w
    cv = di + diag_t - 2.0 * k_it
    if cv <= 0.0:
        cv = TAU
    q = -(b * b) / cv
    return w, (q if b > 0.0 else 1.0)


def _last_max(xa, ia, xb, ib, xc, ic, xd, id_):
    """``(max, index)`` of four lanes' running maxima (ties to the last index, as the
    sequential scan; index -1 when every value is :math:`-\\infty`)."""
    x = max(max(xa, xb), max(xc, xd))
    i = -1
    if x > -math.inf:
        if xa == x:
            i = ia
        if xb == x and ib > i:
            i = ib
        if xc == x and ic > i:
            i = ic
        if xd == x and id_ > i:
            i = id_
    return x, i


def _fill_py(src, signed, ycoord, c, na, perm, rows, r):
    """``rows[r, :na]`` = row ``c`` of :math:`K` over the active positions: a copy into the
    block (``r = c``) or a gather into a buffer. Not inlined: an inlined function's array
    arguments are reference-counted at every call (about 20 atomic operations a row), so the
    loop calls it on a block miss or a gather only."""
    _unsigned_entries(src, signed, perm[c], perm, na, ycoord, rows[r])


def _reconstruct_py(src, signed, ycoord, pterm, y, upper, a, v, vbar, perm, na, buf, scratch):
    """The values :math:`v = -y \\circ G` at the shrunk positions ``na:`` from ``vbar`` (the
    upper-bound coordinates' part) and the free active positions (LIBSVM's
    ``reconstruct_gradient``), by the fewer rows: of the free coordinates over the shrunk ones,
    or the converse."""
    n = a.shape[0]
    if na == n:
        return
    for t in range(na, n):
        v[t] = vbar[t] + pterm[t]
    free = scratch  # the free active positions
    nf = 0
    for t in range(na):
        if 0.0 < a[t] < upper[t]:
            free[nf] = t
            nf += 1
    if nf == 0:
        return
    rest = perm[na:]
    if nf <= n - na:
        for f in range(nf):
            row = _unsigned_entries(src, signed, perm[free[f]], rest, n - na, ycoord, buf)
            w = y[free[f]] * a[free[f]]
            for t in range(n - na):
                v[na + t] -= w * row[t]
    else:
        coords = scratch[n:n + nf]
        for f in range(nf):
            coords[f] = perm[free[f]]
        for t in range(na, n):
            row = _unsigned_entries(src, signed, perm[t], coords, nf, ycoord, buf)
            acc = 0.0
            for f in range(nf):
                acc += (y[free[f]] * a[free[f]]) * row[f]
            v[t] -= acc


def _permute(order, k, x, tmp):
    """``x[:k] = x[order[:k]]`` (through ``tmp``)."""
    for t in range(k):
        tmp[t] = x[order[t]]
    for t in range(k):
        x[t] = tmp[t]


def _stays_at_bound(v_t, up_t, low_t, g1, g2):
    """LIBSVM's ``be_shrunk`` on :math:`v = -y \\circ G`: a coordinate at a bound (in one of
    :math:`I_{up}`, :math:`I_{low}` only) whose value lies beyond the largest violation on
    the other side stays there, so it can leave the active set. ``up_t``, ``low_t``: its
    marks (:func:`_marks_py`)."""
    if up_t < 0.0:  # in I_low only: y = +1 at its upper bound, or y = -1 at 0
        return v_t > g1
    if low_t < 0.0:  # in I_up only
        return -v_t > g2
    return False


def _shrink_py(src, signed, ycoord, pterm, y, upper, diag, a, v, vbar, upoff, lowoff, perm,
               istate, buf, scratch, tmp, tol):
    """LIBSVM's ``do_shrinking``: move to the end of the active positions ``:na`` the bounded
    coordinates that the current violations say will stay at their bound (every array is
    permuted with them: the steps read contiguous positions, as LIBSVM's swaps make them);
    the first time the violation falls below ``10 tol``, the values are reconstructed and
    every coordinate made active again. Returns whether the positions or their count
    changed (the rows copied over the active positions are then stale)."""
    n = a.shape[0]
    na = istate[0]
    g1 = -math.inf  # max over I_up of v = -y G, and over I_low of -v
    g2 = -math.inf
    for t in range(na):
        x = v[t] + upoff[t]
        if x > g1:
            g1 = x
        w = lowoff[t] - v[t]
        if w > g2:
            g2 = w
    changed = False
    if istate[2] == 0 and g1 + g2 <= tol * 10.0:
        istate[2] = 1
        _reconstruct(src, signed, ycoord, pterm, y, upper, a, v, vbar, perm, na, buf, scratch)
        changed = na < n
        na = n
    order = scratch  # the kept positions, then the dropped ones, each in their order
    keep = 0
    for t in range(na):
        if not _stays_at_bound(v[t], upoff[t], lowoff[t], g1, g2):
            order[keep] = t
            keep += 1
    dropped = keep
    for t in range(na):
        if _stays_at_bound(v[t], upoff[t], lowoff[t], g1, g2):
            order[dropped] = t
            dropped += 1
    if keep < na:
        for x in (pterm, y, upper, diag, a, v, vbar, upoff, lowoff):
            _permute(order, na, x, tmp)
        itmp = scratch[n:]
        for t in range(na):
            itmp[t] = perm[order[t]]
        for t in range(na):
            perm[t] = itmp[t]
        changed = True
    istate[0] = keep
    return changed


def _track_upper_py(src, signed, ycoord, y, upper, a, vbar, perm, c, was, buf):
    """Subtract (add back) :math:`y_c u_c K_{c\\cdot}` from ``vbar`` when position ``c``
    reached (left) its upper bound; ``was``: whether it was there before the step. Returns 1
    when it read the row."""
    now = a[c] >= upper[c]
    if now != was:
        n = a.shape[0]
        row = _unsigned_entries(src, signed, perm[c], perm, n, ycoord, buf)
        w = -(y[c] * upper[c]) if now else y[c] * upper[c]
        for t in range(n):
            vbar[t] += w * row[t]
        return 1
    return 0


def _pairwise_steps_py(src, signed, ycoord, bufs, block, stamp, diag, pterm, y, upper, a, v,
                       vbar, upoff, lowoff, perm, istate, scratch, tmp, tol, n_steps,
                       shrinking, out):
    """Up to ``n_steps`` pairwise steps from ``(a, v)``, updated in place.

    The loop runs on :math:`v = -y \\circ G` and the unsigned matrix :math:`K = D_y Q D_y`:
    :math:`I_{up}`'s maximum is that of :math:`v` (``upoff`` takes the other coordinates
    out), :math:`b_{ij} = v_i - v_j`, :math:`a_{ij} = K_{ii} + K_{jj} - 2 K_{ij}` and the
    step along :math:`d_{ij}` changes :math:`v` by :math:`-t (K_{i\\cdot} - K_{j\\cdot})`: no
    label enters a scan, so no branch on one (labels alternate unpredictably along the
    active set). These are the signed form's numbers up to exact sign changes, so the
    iterates have the same bits. Each step makes two passes over the active positions: the
    choice of ``j`` with row ``i``, then the update of ``v`` fused with the choice of the
    next ``i``.

    Every array is over *positions*: ``perm[t]`` is the coordinate at position ``t`` and the
    active coordinates are the first ``istate[0]`` (all of them without ``shrinking``).
    ``istate`` is ``[active count, steps to the next shrinking, unshrunk once, epoch of the
    positions]``. Rows over the active positions are copied into ``block`` on first use since
    the positions last changed (``stamp``; :func:`_fill_py`) while the active set fits it --
    LIBSVM's cache holds its rows over the active coordinates the same way, contiguous --
    else gathered into ``bufs`` at every step. ``out`` is ``[last violation, full rows
    read for vbar, checks of the whole problem]``. Returns the steps taken, -1 - steps when
    the violation over all coordinates fell below ``tol`` (converged).
    """
    n = a.shape[0]
    side = block.shape[0]
    gmax = -math.inf
    i = -1
    have_i = False
    for it in range(n_steps):
        if shrinking:
            istate[1] -= 1
            if istate[1] <= 0:
                istate[1] = min(n, 1000)
                if _shrink(src, signed, ycoord, pterm, y, upper, diag, a, v, vbar, upoff,
                           lowoff, perm, istate, bufs[2], scratch, tmp, tol):
                    istate[3] += 1
                have_i = False
        na = istate[0]
        epoch = istate[3]
        if not have_i:
            # i: the maximal violating "up" coordinate (the last of ties, as LIBSVM)
            xa = xb = xc = xd = -math.inf
            ia = ib = ic = id_ = -1
            t = 0
            while t + 4 <= na:
                x = v[t] + upoff[t]
                if x >= xa:
                    xa = x
                    ia = t
                x = v[t + 1] + upoff[t + 1]
                if x >= xb:
                    xb = x
                    ib = t + 1
                x = v[t + 2] + upoff[t + 2]
                if x >= xc:
                    xc = x
                    ic = t + 2
                x = v[t + 3] + upoff[t + 3]
                if x >= xd:
                    xd = x
                    id_ = t + 3
                t += 4
            while t < na:
                x = v[t] + upoff[t]
                if x >= xa:
                    xa = x
                    ia = t
                t += 1
            gmax, i = _last_max(xa, ia, xb, ib, xc, ic, xd, id_)
        # the rows i and j over the active positions: block[i] and block[j] while the
        # active set fits the block (copied on their first use since the positions last
        # changed), else gathered into bufs[0] and bufs[1]
        held = na <= side
        Ri = block if held else bufs
        ri = i if held else 0
        di = 0.0
        if i >= 0:
            if not held or stamp[i] != epoch:
                _fill(src, signed, ycoord, i, na, perm, Ri, ri)
                if held:
                    stamp[i] = epoch
            di = diag[i]
        else:  # no "up" coordinate: every b below is -inf, no j; row i is never used
            ri = 0
        # j: the second-order choice among the "low" coordinates (WSS 2); every valid
        # -b^2 / a is <= 0, so the start 0.5 and the 1.0 of the others never win. Four
        # lanes (positions t mod 4), each with its own running minimum, merged below: one
        # comparison chain would hold every position for its latency.
        g2a = g2b = g2c = g2d = -math.inf
        ba = bb = bc = bd = 0.5
        ja = jb = jc = jd = -1
        t = 0
        while t + 4 <= na:
            w, sc = _score(gmax, di, v[t], lowoff[t], diag[t], Ri[ri, t])
            g2a = w if w >= g2a else g2a
            if sc <= ba:
                ba = sc
                ja = t
            w, sc = _score(gmax, di, v[t + 1], lowoff[t + 1], diag[t + 1], Ri[ri, t + 1])
            g2b = w if w >= g2b else g2b
            if sc <= bb:
                bb = sc
                jb = t + 1
            w, sc = _score(gmax, di, v[t + 2], lowoff[t + 2], diag[t + 2], Ri[ri, t + 2])
            g2c = w if w >= g2c else g2c
            if sc <= bc:
                bc = sc
                jc = t + 2
            w, sc = _score(gmax, di, v[t + 3], lowoff[t + 3], diag[t + 3], Ri[ri, t + 3])
            g2d = w if w >= g2d else g2d
            if sc <= bd:
                bd = sc
                jd = t + 3
            t += 4
        while t < na:
            w, sc = _score(gmax, di, v[t], lowoff[t], diag[t], Ri[ri, t])
            g2a = w if w >= g2a else g2a
            if sc <= ba:
                ba = sc
                ja = t
            t += 1
        gmax2 = max(max(g2a, g2b), max(g2c, g2d))
        # the last position of the smallest value: the sequential scan's choice (ties to
        # the last index, as LIBSVM)
        best = min(min(ba, bb), min(bc, bd))
        j = -1
        if ba == best:
            j = ja
        if bb == best and jb > j:
            j = jb
        if bc == best and jc > j:
            j = jc
        if bd == best and jd > j:
            j = jd
        out[0] = gmax + gmax2
        if gmax + gmax2 < tol or j < 0:
            if na == n:
                return -1 - it
            # converged on the active set: check the whole problem (LIBSVM's last check)
            out[2] += 1
            _reconstruct(src, signed, ycoord, pterm, y, upper, a, v, vbar, perm, na, bufs[2],
                         scratch)
            istate[0] = n
            istate[3] += 1
            # select on the whole problem now, shrink again after its step (LIBSVM's order)
            istate[1] = 2
            have_i = False
            continue
        Rj = block if held else bufs
        rj = j if held else 1
        if not held or stamp[j] != epoch:
            _fill(src, signed, ycoord, j, na, perm, Rj, rj)
            if held:
                stamp[j] = epoch
        yi = y[i]
        yj = y[j]
        # the exact step along d = y_i e_i - y_j e_j, clipped to the box
        curv = di + diag[j] - 2.0 * Ri[ri, j]
        if curv <= 0.0:
            curv = TAU
        t_star = (v[i] - v[j]) / curv
        room_i = upper[i] - a[i] if yi > 0 else a[i]
        room_j = a[j] if yj > 0 else upper[j] - a[j]
        step = t_star
        if room_i <= step:
            step = room_i
        if room_j <= step:
            step = room_j
        ui = a[i] >= upper[i]
        uj = a[j] >= upper[j]
        # a coordinate the step takes to its bound is set to the bound exactly
        if step == room_i:
            a[i] = upper[i] if yi > 0 else 0.0
        else:
            a[i] += yi * step
        if step == room_j:
            a[j] = 0.0 if yj > 0 else upper[j]
        else:
            a[j] -= yj * step
        upoff[i], lowoff[i] = _marks(yi, upper[i], a[i])
        upoff[j], lowoff[j] = _marks(yj, upper[j], a[j])
        if shrinking:  # vbar = -sum of y_k u_k K_k over the coordinates at their upper bound
            if (a[i] >= upper[i]) != ui:
                out[1] += _track_upper(src, signed, ycoord, y, upper, a, vbar, perm, i, ui,
                                       bufs[2])
            if (a[j] >= upper[j]) != uj:
                out[1] += _track_upper(src, signed, ycoord, y, upper, a, vbar, perm, j, uj,
                                       bufs[2])
        # the update of v, and the next i on the way (four lanes, as j's scan)
        xa = xb = xc = xd = -math.inf
        ia = ib = ic = id_ = -1
        t = 0
        while t + 4 <= na:
            vt = v[t] - (step * Ri[ri, t] - step * Rj[rj, t])
            v[t] = vt
            x = vt + upoff[t]
            if x >= xa:
                xa = x
                ia = t
            vt = v[t + 1] - (step * Ri[ri, t + 1] - step * Rj[rj, t + 1])
            v[t + 1] = vt
            x = vt + upoff[t + 1]
            if x >= xb:
                xb = x
                ib = t + 1
            vt = v[t + 2] - (step * Ri[ri, t + 2] - step * Rj[rj, t + 2])
            v[t + 2] = vt
            x = vt + upoff[t + 2]
            if x >= xc:
                xc = x
                ic = t + 2
            vt = v[t + 3] - (step * Ri[ri, t + 3] - step * Rj[rj, t + 3])
            v[t + 3] = vt
            x = vt + upoff[t + 3]
            if x >= xd:
                xd = x
                id_ = t + 3
            t += 4
        while t < na:
            vt = v[t] - (step * Ri[ri, t] - step * Rj[rj, t])
            v[t] = vt
            x = vt + upoff[t]
            if x >= xa:
                xa = x
                ia = t
            t += 1
        gmax, i = _last_max(xa, ia, xb, ib, xc, ic, xd, id_)
        have_i = True
    return n_steps


def _values_py(src, signed, ycoord, buf, pterm, y, upper, a, v, vbar, everyone):
    """``v = -y (Q a + p)`` and ``vbar`` (the upper-bound coordinates' part), row by row over
    the nonzero coordinates (in index order)."""
    n = a.shape[0]
    for t in range(n):
        v[t] = pterm[t]
        vbar[t] = 0.0
    for k in range(n):
        if a[k] != 0.0:
            row = _unsigned_entries(src, signed, k, everyone, n, ycoord, buf)
            w = y[k] * a[k]
            for t in range(n):
                v[t] -= w * row[t]
            if a[k] >= upper[k]:
                wu = y[k] * upper[k]
                for t in range(n):
                    vbar[t] -= wu * row[t]


_unsigned_entries = _njit(_unsigned_entries_py)
_marks = _njit(_marks_py, inline=True)
_fill = _njit(_fill_py)
_score = _njit(_score_py, inline=True)
_last_max = _njit(_last_max, inline=True)
_stays_at_bound = _njit(_stays_at_bound, inline=True)
_track_upper = _njit(_track_upper_py)
_permute = _njit(_permute)
_reconstruct = _njit(_reconstruct_py)
_shrink = _njit(_shrink_py)
_pairwise_steps = _njit(_pairwise_steps_py)
_values = _njit(_values_py)


class BoxQPSolution:
    """What :func:`solve_box_qp` returns: ``alpha`` and ``grad`` (:math:`Q\\alpha + p`, float64),
    ``n_iter`` (steps taken), ``status`` (:data:`CONVERGED`, :data:`MAX_ITER` or
    :data:`CANCELLED`) and ``violation`` (the last :math:`m(\\alpha) - M(\\alpha)`)."""

    __slots__ = ("alpha", "grad", "n_iter", "status", "violation")

    def __init__(self, alpha, grad, n_iter, status, violation):
        self.alpha, self.grad, self.n_iter = alpha, grad, n_iter
        self.status, self.violation = status, violation


def solve_box_qp(src, diag: np.ndarray, p: np.ndarray, y: np.ndarray, upper: np.ndarray, *,
                 alpha0: np.ndarray | None = None, tol: float = 1e-3,
                 max_iter: int | None = None, shrinking: bool = True,
                 stop: threading.Event | None = None,
                 unsigned_rows: bool = False) -> BoxQPSolution:
    r"""Minimize :math:`\tfrac12 \alpha^\top Q\alpha + p^\top\alpha` over
    :math:`\{0 \le \alpha \le u,\ y^\top\alpha = y^\top\alpha_0\}` by pairwise Frank-Wolfe steps
    with second-order pair selection and exact clipped steps (SMO; see the module docstring).

    Parameters
    ----------
    src : row source
        The entries of row :math:`i` of :math:`Q` through :func:`row_entries`: a 2-D array,
        or a family's registered source.
    diag : ndarray (N,)
        :math:`Q_{ii}` (float64).
    p : ndarray (N,)
        The linear term (float64).
    y : ndarray (N,)
        Labels :math:`\pm 1` of the equality (float64).
    upper : ndarray (N,)
        Upper bounds :math:`u_i > 0` (float64).
    alpha0 : ndarray (N,), optional
        A feasible start (its :math:`y^\top\alpha_0` is the equality's right-hand side); default
        zero (LIBSVM's start, whose gradient is :math:`p` with no row read).
    tol : float
        Stop when the maximal violation :math:`m(\alpha) - M(\alpha)` over all coordinates is
        below ``tol``.
    max_iter : int, optional
        Step budget; None: no limit.
    shrinking : bool, default True
        LIBSVM's shrinking: every :math:`\min(N, 1000)` steps, the coordinates at a bound whose
        gradient says they will stay there leave the active set (the steps then scan and update
        the active coordinates only); the first time the violation falls below
        :math:`10\,\text{tol}` all come back once; a solve that converges on the active set
        reconstructs the whole gradient and checks every coordinate before it stops, so the
        stopping rule is the un-shrunk problem's either way.
    stop : threading.Event, optional
        Read between compiled chunks (:data:`CHUNK_WORK`); set, the solve returns
        :data:`CANCELLED` with its current iterate.
    unsigned_rows : bool, default False
        Whether ``src`` gives the rows of :math:`K = D_y Q D_y` (:math:`K_{ij} = y_i y_j
        Q_{ij}`, e.g. the SVM's kernel rows before the labels' signs) instead of
        :math:`Q`'s; ``diag`` is the same either way. The steps run on :math:`K` (see
        :func:`_pairwise_steps_py`): a source of it saves the signs' products.

    Returns
    -------
    BoxQPSolution
        Its ``grad`` is the whole gradient (reconstructed if the solve stopped shrunk).

    Raises
    ------
    ValueError
        Without numba, or for inconsistent shapes, labels other than :math:`\pm 1`,
        non-positive bounds, or an infeasible start.
    """
    if not HAVE_NUMBA:
        raise ValueError("solve_box_qp runs compiled code: it needs numba")
    n = diag.shape[0]
    for name, v in (("p", p), ("y", y), ("upper", upper)):
        if v.shape != (n,):
            raise ValueError(f"solve_box_qp: {name} has shape {v.shape}, expected ({n},)")
    if not np.all(np.abs(y) == 1.0):
        raise ValueError("solve_box_qp: the labels y must be -1 or +1")
    if not np.all(upper > 0):
        raise ValueError("solve_box_qp: the upper bounds must be positive")
    a = np.zeros(n) if alpha0 is None else np.array(alpha0, dtype=np.float64)
    if a.shape != (n,) or np.any(a < 0) or np.any(a > upper):
        raise ValueError("solve_box_qp: alpha0 must lie in the box 0 <= alpha <= upper")
    # Copies: the solve permutes them with the active set (LIBSVM's swaps)
    diag = np.array(diag, dtype=np.float64)
    ycoord = np.array(y, dtype=np.float64)
    y = ycoord.copy()
    pterm = -y * np.asarray(p, dtype=np.float64)  # the linear part of v = -y G
    upper = np.array(upper, dtype=np.float64)
    bufs = np.empty((3, n))
    # scratch: the shrinking's and the reconstruction's integer work space (2n)
    scratch = np.zeros(2 * n, dtype=np.int64)
    tmp = np.empty(n)
    perm = np.arange(n, dtype=np.int64)
    istate = np.array([n, min(n, 1000) + 1, 0, 1], dtype=np.int64)
    side = min(n, BLOCK_MAX)
    block = np.empty((side, side))  # pages are touched as rows are copied in
    stamp = np.zeros(side, dtype=np.int64)
    v = pterm.copy()
    vbar = np.zeros(n)
    signed = not unsigned_rows
    if a.any():
        _values(src, signed, ycoord, bufs[2], pterm, y, upper, a, v, vbar, perm.copy())
    upoff = np.where(np.where(y > 0, a < upper, a > 0), 0.0, -math.inf)
    lowoff = np.where(np.where(y > 0, a > 0, a < upper), 0.0, -math.inf)
    budget = math.inf if max_iter is None else int(max_iter)
    chunk = max(1, CHUNK_WORK // max(n, 1))
    out = np.zeros(3)
    done = 0
    status = MAX_ITER
    while True:
        if stop is not None and stop.is_set():
            status = CANCELLED
            break
        if done >= budget:
            break
        steps = int(min(chunk, budget - done))
        taken = _pairwise_steps(src, signed, ycoord, bufs, block, stamp, diag, pterm, y, upper,
                                a, v, vbar, upoff, lowoff, perm, istate, scratch, tmp,
                                float(tol), steps, bool(shrinking), out)
        if taken < 0:
            done += -1 - taken
            status = CONVERGED
            break
        done += taken
    if istate[0] < n:  # stopped shrunk: the whole gradient, for the caller's multiplier
        _reconstruct(src, signed, ycoord, pterm, y, upper, a, v, vbar, perm, int(istate[0]),
                     bufs[2], scratch)
    alpha = np.empty(n)
    grad = np.empty(n)
    alpha[perm] = a
    grad[perm] = -y * v
    return BoxQPSolution(alpha, grad, done, status, float(out[0]))


def equality_multiplier(alpha: np.ndarray, grad: np.ndarray, y: np.ndarray,
                        upper: np.ndarray) -> float:
    r"""LIBSVM's :math:`\rho` of a solution: the mean of :math:`y_i G_i` over the free
    coordinates (:math:`0 < \alpha_i < u_i`), or, when none is free, the midpoint of
    :math:`[\max L, \min U]` with :math:`U` (:math:`L`) the values :math:`y_i G_i` of the
    bounded coordinates that bound it from above (below): :math:`y_i = -1` at :math:`u_i` or
    :math:`y_i = +1` at 0 (the converse). For the SVM dual the decision function is
    :math:`\sum_i \alpha_i y_i k(x_i, x) - \rho`.
    """
    yG = y * grad
    at_upper = alpha >= upper
    at_lower = alpha <= 0.0
    free = ~(at_upper | at_lower)
    if free.any():
        return float(yG[free].mean())
    above = (at_upper & (y < 0)) | (at_lower & (y > 0))
    below = ~free & ~above
    ub = float(yG[above].min()) if above.any() else math.inf
    lb = float(yG[below].max()) if below.any() else -math.inf
    return (ub + lb) / 2.0


def box_qp_value(alpha: np.ndarray, grad: np.ndarray, p: np.ndarray) -> float:
    r""":math:`f(\alpha) = \tfrac12 \alpha^\top(G + p)` from the kept gradient :math:`G = Q\alpha + p`
    (LIBSVM's objective value)."""
    return 0.5 * float(alpha @ (grad + p))
