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

#: Most active coordinates whose rows over one another :func:`solve_box_qp` copies into one
#: contiguous block after a shrinking (8 MB in float64): a copy of ``n^2`` entries every
#: ``min(N, 1000)`` steps, against two gathers of ``n`` scattered entries a step.
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


def _reconstruct_py(src, p, upper, a, G, Gbar, perm, na, buf, scratch):
    """The gradient at the shrunk positions ``na:`` from ``Gbar`` (the upper-bound
    coordinates' part) and the free active positions (LIBSVM's ``reconstruct_gradient``), by
    the fewer rows: of the free coordinates over the shrunk ones, or the converse."""
    n = a.shape[0]
    if na == n:
        return
    for t in range(na, n):
        G[t] = Gbar[t] + p[t]
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
            row = row_entries(src, perm[free[f]], rest, n - na, buf)
            w = a[free[f]]
            for t in range(n - na):
                G[na + t] += w * row[t]
    else:
        coords = scratch[n:n + nf]
        for f in range(nf):
            coords[f] = perm[free[f]]
        for t in range(na, n):
            row = row_entries(src, perm[t], coords, nf, buf)
            acc = 0.0
            for f in range(nf):
                acc += a[free[f]] * row[f]
            G[t] += acc


def _permute(order, k, x, tmp):
    """``x[:k] = x[order[:k]]`` (through ``tmp``)."""
    for t in range(k):
        tmp[t] = x[order[t]]
    for t in range(k):
        x[t] = tmp[t]


def _stays_at_bound(a_t, u_t, y_t, g_t, g1, g2):
    """LIBSVM's ``be_shrunk``: a coordinate at its upper (lower) bound whose gradient points
    out of the box by more than the largest violation on its side stays there, so it can
    leave the active set."""
    if a_t >= u_t:
        return (-g_t > g1) if y_t > 0 else (-g_t > g2)
    if a_t <= 0.0:
        return (g_t > g2) if y_t > 0 else (g_t > g1)
    return False


def _shrink_py(src, p, y, upper, diag, a, G, Gbar, perm, istate, buf, scratch, tmp, tol):
    """LIBSVM's ``do_shrinking``: move to the end of the active positions ``:na`` the bounded
    coordinates that the current violations say will stay at their bound (every array is
    permuted with them: the steps read contiguous positions, as LIBSVM's swaps make them);
    the first time the violation falls below ``10 tol``, the gradient is reconstructed and
    every coordinate made active again."""
    n = a.shape[0]
    na = istate[0]
    g1 = -math.inf  # max over I_up of -y G, and over I_low of y G
    g2 = -math.inf
    for t in range(na):
        if y[t] > 0:
            if a[t] < upper[t] and -G[t] > g1:
                g1 = -G[t]
            if a[t] > 0.0 and G[t] > g2:
                g2 = G[t]
        else:
            if a[t] > 0.0 and G[t] > g1:
                g1 = G[t]
            if a[t] < upper[t] and -G[t] > g2:
                g2 = -G[t]
    if istate[2] == 0 and g1 + g2 <= tol * 10.0:
        istate[2] = 1
        _reconstruct_py(src, p, upper, a, G, Gbar, perm, na, buf, scratch)
        na = n
    order = scratch  # the kept positions, then the dropped ones, each in their order
    keep = 0
    for t in range(na):
        if not _stays_at_bound(a[t], upper[t], y[t], G[t], g1, g2):
            order[keep] = t
            keep += 1
    dropped = keep
    for t in range(na):
        if _stays_at_bound(a[t], upper[t], y[t], G[t], g1, g2):
            order[dropped] = t
            dropped += 1
    if keep < na:
        for x in (p, y, upper, diag, a, G, Gbar):
            _permute(order, na, x, tmp)
        itmp = scratch[n:]
        for t in range(na):
            itmp[t] = perm[order[t]]
        for t in range(na):
            perm[t] = itmp[t]
    istate[0] = keep


def _build_block(src, perm, na, block):
    """``block[t, u] = Q[perm[t], perm[u]]`` for ``t, u < na``: the active coordinates' rows
    over one another, contiguous."""
    for t in range(na):
        row_entries(src, perm[t], perm, na, block[t])


def _track_upper_py(src, upper, a, Gbar, perm, c, was, buf):
    """Add (remove) ``u Q_row`` to ``Gbar`` when position ``c`` reached (left) its upper
    bound; ``was``: whether it was there before the step. Returns 1 when it read the row."""
    now = a[c] >= upper[c]
    if now != was:
        n = a.shape[0]
        row = row_entries(src, perm[c], perm, n, buf)
        w = upper[c] if now else -upper[c]
        for t in range(n):
            Gbar[t] += w * row[t]
        return 1
    return 0


def _pairwise_steps_py(src, bufs, block, diag, p, y, upper, a, G, Gbar, perm, istate, scratch,
                       tmp, tol, n_steps, shrinking, out):
    """Up to ``n_steps`` pairwise steps from ``(a, G)``, updated in place.

    Every array is over *positions*: ``perm[t]`` is the coordinate at position ``t`` and the
    active coordinates are the first ``istate[0]`` (all of them without ``shrinking``).
    ``istate`` is ``[active count, steps to the next shrinking, unshrunk once, rows held in
    block]``: after a shrinking that leaves at most ``len(block)`` coordinates active, their
    rows over one another are copied into ``block`` (:func:`_build_block`) and read from there
    until the active set changes -- LIBSVM's cache holds its rows over the active coordinates
    the same way, contiguous. ``out`` is ``[last violation, full rows read for Gbar, checks of
    the whole problem]``. Returns the steps taken, -1 - steps when the violation over all
    coordinates fell below ``tol`` (converged).
    """
    n = a.shape[0]
    for it in range(n_steps):
        if shrinking:
            istate[1] -= 1
            if istate[1] <= 0:
                istate[1] = min(n, 1000)
                _shrink_py(src, p, y, upper, diag, a, G, Gbar, perm, istate, bufs[2], scratch,
                           tmp, tol)
                istate[3] = 0
                if istate[0] <= block.shape[0]:
                    _build_block(src, perm, istate[0], block)
                    istate[3] = istate[0]
        na = istate[0]
        held = istate[3] == na and na > 0
        # i: the maximal violating "up" coordinate (the last of ties, as LIBSVM)
        gmax = -math.inf
        i = -1
        for t in range(na):
            if y[t] > 0:
                if a[t] < upper[t] and -G[t] >= gmax:
                    gmax = -G[t]
                    i = t
            elif a[t] > 0.0 and G[t] >= gmax:
                gmax = G[t]
                i = t
        qi = bufs[0]
        if held and i >= 0:
            qi = block[i]
        elif i >= 0:
            qi = row_entries(src, perm[i], perm, na, bufs[0])
        yi = y[i] if i >= 0 else 1.0
        di = diag[i] if i >= 0 else 0.0
        # j: the second-order choice among the "low" coordinates (WSS 2)
        gmax2 = -math.inf
        j = -1
        best = math.inf
        for t in range(na):
            if y[t] > 0:
                if a[t] > 0.0:
                    b = gmax + G[t]
                    if G[t] >= gmax2:
                        gmax2 = G[t]
                    if b > 0.0:
                        cv = di + diag[t] - 2.0 * yi * qi[t]
                        v = -(b * b) / (cv if cv > 0.0 else TAU)
                        if v <= best:
                            j = t
                            best = v
            elif a[t] < upper[t]:
                b = gmax - G[t]
                if -G[t] >= gmax2:
                    gmax2 = -G[t]
                if b > 0.0:
                    cv = di + diag[t] + 2.0 * yi * qi[t]
                    v = -(b * b) / (cv if cv > 0.0 else TAU)
                    if v <= best:
                        j = t
                        best = v
        out[0] = gmax + gmax2
        if gmax + gmax2 < tol or j < 0:
            if na == n:
                return -1 - it
            # converged on the active set: check the whole problem (LIBSVM's last check)
            out[2] += 1
            _reconstruct_py(src, p, upper, a, G, Gbar, perm, na, bufs[2], scratch)
            istate[0] = n
            istate[3] = 0
            # select on the whole problem now, shrink again after its step (LIBSVM's order)
            istate[1] = 2
            continue
        qj = block[j] if held else row_entries(src, perm[j], perm, na, bufs[1])
        yj = y[j]
        # the exact step along d = y_i e_i - y_j e_j, clipped to the box
        curv = di + diag[j] - 2.0 * yi * yj * qi[j]
        if curv <= 0.0:
            curv = TAU
        t_star = (-yi * G[i] + yj * G[j]) / curv
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
        si = yi * step
        sj = yj * step
        for t in range(na):
            G[t] += si * qi[t] - sj * qj[t]
        if shrinking:  # Gbar = sum of u_k Q_k over the coordinates at their upper bound
            out[1] += _track_upper(src, upper, a, Gbar, perm, i, ui, bufs[2])
            out[1] += _track_upper(src, upper, a, Gbar, perm, j, uj, bufs[2])
    return n_steps


def _gradient_py(src, buf, p, upper, a, G, Gbar, everyone):
    """``G = Q a + p`` and ``Gbar`` (the upper-bound coordinates' part), row by row over the
    nonzero coordinates (in index order)."""
    n = a.shape[0]
    for t in range(n):
        G[t] = p[t]
        Gbar[t] = 0.0
    for k in range(n):
        if a[k] != 0.0:
            row = row_entries(src, k, everyone, n, buf)
            for t in range(n):
                G[t] += a[k] * row[t]
            if a[k] >= upper[k]:
                for t in range(n):
                    Gbar[t] += upper[k] * row[t]


_stays_at_bound = _njit(_stays_at_bound, inline=True)
_track_upper = _njit(_track_upper_py)
_build_block = _njit(_build_block)
_permute = _njit(_permute)
_reconstruct_py = _njit(_reconstruct_py)
_shrink_py = _njit(_shrink_py)
_pairwise_steps = _njit(_pairwise_steps_py)
_gradient = _njit(_gradient_py)


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
                 stop: threading.Event | None = None) -> BoxQPSolution:
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
    p_pos = np.array(p, dtype=np.float64)
    y = np.array(y, dtype=np.float64)
    upper = np.array(upper, dtype=np.float64)
    bufs = np.empty((3, n))
    # scratch: the shrinking's and the reconstruction's integer work space (2n)
    scratch = np.zeros(2 * n, dtype=np.int64)
    tmp = np.empty(n)
    perm = np.arange(n, dtype=np.int64)
    istate = np.array([n, min(n, 1000) + 1, 0, 0], dtype=np.int64)
    side = min(n, BLOCK_MAX) if shrinking else 0
    block = np.empty((side, side))
    G = p_pos.copy()
    Gbar = np.zeros(n)
    if a.any():
        _gradient(src, bufs[2], p_pos, upper, a, G, Gbar, perm.copy())
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
        taken = _pairwise_steps(src, bufs, block, diag, p_pos, y, upper, a, G, Gbar, perm,
                                istate, scratch, tmp, float(tol), steps, bool(shrinking), out)
        if taken < 0:
            done += -1 - taken
            status = CONVERGED
            break
        done += taken
    if istate[0] < n:  # stopped shrunk: the whole gradient, for the caller's multiplier
        _reconstruct_py(src, p_pos, upper, a, G, Gbar, perm, int(istate[0]), bufs[2], scratch)
    alpha = np.empty(n)
    grad = np.empty(n)
    alpha[perm] = a
    grad[perm] = G
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
