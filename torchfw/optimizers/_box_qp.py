r"""Pairwise Frank-Wolfe over a box and one equality: the quadratic of LIBSVM's dual solver.

The problem is

.. math::
    \min_{\alpha}\ f(\alpha) = \tfrac12 \alpha^\top Q \alpha + p^\top \alpha
    \quad\text{s.t.}\quad 0 \le \alpha_i \le u_i,\quad y^\top \alpha = \Delta,

with labels :math:`y_i \in \{-1, +1\}`, over the polytope :math:`\mathcal P` of a box cut by one
hyperplane. Row :math:`i` of :math:`Q` is read from a *row source* through
:func:`~torchfw.optimizers._compiled_loop.vertex_row`, as the compiled quadratic loop reads its
rows: a 2-D array's rows in place, or any source a family registers (the SVM's signed kernel
rows, whole or from a cache of rows). The core imports no family.

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

No shrinking: every iteration scans all coordinates, so the final check is over the whole
problem.
"""

from __future__ import annotations

import math
import threading

import numpy as np

from ..utils.jit import HAVE_NUMBA
from ..utils.jit import njit as _njit  # None without numba
from . import _compiled_loop as L

__all__ = ["solve_box_qp", "equality_multiplier", "box_qp_value", "TAU", "CONVERGED",
           "MAX_ITER", "CANCELLED", "CHUNK_WORK", "BoxQPSolution"]

#: The curvature put in place of a non-positive :math:`a_{ij}` (LIBSVM's ``TAU``).
TAU = 1e-12

#: Status codes of :func:`solve_box_qp`.
CONVERGED, MAX_ITER, CANCELLED = 0, 1, 2

#: Entries touched (about ``iterations x coordinates``) per compiled call of
#: :func:`solve_box_qp`: between calls a Ctrl-C or a ``stop`` event is honoured. 2e7: about
#: 20 ms of work per call on one core.
CHUNK_WORK = 20_000_000


def _pairwise_steps_py(src, bufs, diag, p, y, upper, a, G, tol, n_steps, out):
    """Up to ``n_steps`` pairwise steps from ``(a, G)`` (updated in place); ``out[0]`` the
    last violation. Returns the steps taken, -1 - steps when the violation fell below ``tol``
    (converged before a step)."""
    n = a.shape[0]
    for it in range(n_steps):
        # i: the maximal violating "up" coordinate (the last of ties, as LIBSVM)
        gmax = -math.inf
        i = -1
        for t in range(n):
            if y[t] > 0:
                if a[t] < upper[t] and -G[t] >= gmax:
                    gmax = -G[t]
                    i = t
            elif a[t] > 0.0 and G[t] >= gmax:
                gmax = G[t]
                i = t
        if i < 0:
            out[0] = 0.0
            return -1 - it
        qi = L.vertex_row(src, i, bufs[0])
        yi = y[i]
        # j: the second-order choice among the "low" coordinates (WSS 2)
        gmax2 = -math.inf
        j = -1
        best = math.inf
        for t in range(n):
            if y[t] > 0:
                if a[t] > 0.0:
                    b = gmax + G[t]
                    if G[t] >= gmax2:
                        gmax2 = G[t]
                    if b > 0.0:
                        c = diag[i] + diag[t] - 2.0 * yi * qi[t]
                        v = -(b * b) / (c if c > 0.0 else TAU)
                        if v <= best:
                            j = t
                            best = v
            elif a[t] < upper[t]:
                b = gmax - G[t]
                if -G[t] >= gmax2:
                    gmax2 = -G[t]
                if b > 0.0:
                    c = diag[i] + diag[t] + 2.0 * yi * qi[t]
                    v = -(b * b) / (c if c > 0.0 else TAU)
                    if v <= best:
                        j = t
                        best = v
        out[0] = gmax + gmax2
        if gmax + gmax2 < tol or j < 0:
            return -1 - it
        qj = L.vertex_row(src, j, bufs[1])
        yj = y[j]
        # the exact step along d = y_i e_i - y_j e_j, clipped to the box
        curv = diag[i] + diag[j] - 2.0 * yi * yj * qi[j]
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
        for t in range(n):
            G[t] += si * qi[t] - sj * qj[t]
    return n_steps


def _gradient_py(src, bufs, p, a, G):
    """``G = Q a + p``, row by row over the nonzero coordinates (in index order)."""
    n = a.shape[0]
    for t in range(n):
        G[t] = p[t]
    for k in range(n):
        if a[k] != 0.0:
            row = L.vertex_row(src, k, bufs[0])
            for t in range(n):
                G[t] += a[k] * row[t]


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
                 max_iter: int | None = None, row_dtype=None,
                 stop: threading.Event | None = None) -> BoxQPSolution:
    r"""Minimize :math:`\tfrac12 \alpha^\top Q\alpha + p^\top\alpha` over
    :math:`\{0 \le \alpha \le u,\ y^\top\alpha = y^\top\alpha_0\}` by pairwise Frank-Wolfe steps
    with second-order pair selection and exact clipped steps (SMO; see the module docstring).

    Parameters
    ----------
    src : row source
        Row :math:`i` of :math:`Q` through :func:`~torchfw.optimizers._compiled_loop.vertex_row`:
        a 2-D array (rows read in place), or a family's registered source.
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
        Stop when the maximal violation :math:`m(\alpha) - M(\alpha)` is below ``tol``.
    max_iter : int, optional
        Step budget; None: no limit.
    row_dtype : dtype, optional
        The dtype of the rows a computed source writes into its buffers; None for a 2-D array.
    stop : threading.Event, optional
        Read between compiled chunks (:data:`CHUNK_WORK`); set, the solve returns
        :data:`CANCELLED` with its current iterate.

    Returns
    -------
    BoxQPSolution

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
    bufs = np.empty((2, 0)) if row_dtype is None else np.empty((2, n), dtype=row_dtype)
    G = np.array(p, dtype=np.float64)
    if a.any():
        _gradient(src, bufs, p, a, G)
    budget = math.inf if max_iter is None else int(max_iter)
    chunk = max(1, CHUNK_WORK // max(n, 1))
    out = np.zeros(1)
    done = 0
    while True:
        if stop is not None and stop.is_set():
            return BoxQPSolution(a, G, done, CANCELLED, float(out[0]))
        if done >= budget:
            return BoxQPSolution(a, G, done, MAX_ITER, float(out[0]))
        steps = int(min(chunk, budget - done))
        taken = _pairwise_steps(src, bufs, diag, p, y, upper, a, G, float(tol), steps, out)
        if taken < 0:
            return BoxQPSolution(a, G, done - 1 - taken, CONVERGED, float(out[0]))
        done += taken


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
