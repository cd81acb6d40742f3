r"""Whole-solve compiled path of :class:`~torchfw.SVC` for problems whose kernel fits in memory.

On a few hundred to a few thousand examples, the lazy host path (one cached kernel column per
atom touched, one interpreted iteration per step) spends most of its time in the interpreter:
tens of microseconds of Python per iteration around a few microseconds of arithmetic. When the
``m x m`` matrix :math:`\tilde K` fits a byte budget, this module computes it once and runs the
whole solve -- every iteration, the checks every ``check_every`` iterations and the stopping test
-- in one compiled call.

**Same iterates.** The matrix rows are computed (:mod:`torchfw.svm._matrix`) by the very
kernels that compute the lazy path's columns (:mod:`torchfw.svm._kernel_cpu`, same summation order,
same float32 exponential), so row ``i`` equals ``SVMDualOperator.column(i)`` bit for bit; the
moves go through the host engine's update, selection and step kernels
(:mod:`torchfw.optimizers._kernels`) with the arithmetic of
:class:`~torchfw.optimizers._engine.QuadraticEngine` written out expression for expression; the
start is the host engine's own (it is constructed, then handed over). The lazy path and this
one therefore produce the same iterates, step counts and stopping iteration
(``tests/test_svc_dense.py`` compares them check by check for every solver).

**Multiclass.** The problems of one-vs-rest share the data: :math:`\tilde K^{(k)} = D_k (K + 1)
D_k + \operatorname{diag}(1/C)` with :math:`D_k = \operatorname{diag}(y^{(k)})`. The matrix
:math:`K + 1` is computed once; each problem reads its rows from it with its signs applied
(exact; :func:`_row_py`). One-vs-one problems read their pair's entries of the same matrix.
"""

from __future__ import annotations

import math
import time

import numpy as np

from ..optimizers import _face
from ..optimizers import _kernels as K
from ..optimizers._engine import ZERO_TOL
from ..utils.jit import njit as _njit  # None without numba
from ._matrix import full_source, plain_kernel_matrix, source_row

__all__ = ["VARIANTS", "plain_kernel_matrix", "full_source", "solve", "signed_row", "COUNTERS"]

#: Solver name -> code of the compiled loop.
VARIANTS = {"fw": 0, "away": 1, "pairwise": 2, "swap": 3, "swap2": 4, "partan": 5}
#: Step counters, in the order of the ``counts`` array.
COUNTERS = ("fw", "away", "drop", "pairwise", "swap_add", "swap_drop", "partan", "correct")

#: Most checks a compiled solve records (the first ones and the last): a budget of many
#: millions of iterations (``max_iter=-1``) does not size the history by it.
MAX_CHECKS = 100_000

# Status codes returned by the compiled loop.
_CONVERGED, _MAX_ITER, _NONFINITE = 0, 1, 2
#: A chunk of a solve ended at a check at or past its ``pause_at`` (:func:`solve` resumes it).
_PAUSED = 3


# ---------------------------------------------------------------------------------------------
# The solve
# ---------------------------------------------------------------------------------------------

def _solve(variant, P, cache, rows, y, inv_c, diag, w, s, wp, sp, support, state, max_iter, tol,
           rtol, check_every, zero_tol, counts, hist, hist_counts, correct, pause_at):
    """Run the whole solve; returns ``(iterations, status, number of history entries)``.

    The vertex gradient of atom ``k`` is the problem's signed row ``k`` of :math:`K + 1` from
    the row source ``(P, cache)`` (see :func:`_row_py`: ``rows`` empty for all examples, a
    one-vs-one pair's examples otherwise; ``y``, ``inv_c`` the problem's labels and ``1/C``).
    ``state`` carries
    ``[p, t, s_min, i_min, s_max, j_max, W, p_prev, t_prev, n_support]`` in and out.

    With ``correct``, a stalled run takes the active-set corrective step
    (:func:`_correct_py`, :mod:`torchfw.optimizers._face`) at a check: it counts as one
    iteration (counter ``correct``). The history's last
    row always holds the final check (a full buffer keeps its first rows and the last).
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
    in_support = np.zeros(n, dtype=np.bool_)
    for q in range(n_support):
        in_support[support[q]] = True
    hi_buf = np.empty(n, dtype=P.dtype)
    hj_buf = np.empty(n, dtype=P.dtype)
    k = 0
    n_hist = 0
    status = _MAX_ITER
    # The window of the corrective step (torchfw.optimizers._face.STALL): where it began, its
    # length, the gap it must halve and its smallest gap so far.
    win_start = 0
    last_correction = 0  # the plain iterations since pay for the next face (_face_budget)
    win_len = _correction_window(_n_positive(w), n)
    win_first = p - s_min
    win_min = win_first
    if state.shape[0] >= 16 and state[10] > 0.0:
        # A resumed solve (solve() runs in chunks): the window goes on where the last call left
        # it, its iterations counted from this call's first, so that a chunked solve is the one
        # call's, bit for bit.
        win_start = int(state[11])
        last_correction = int(state[12])
        win_len = int(state[13])
        win_first = state[14]
        win_min = state[15]
    while True:
        value = 0.5 * (p + t) + 0.0
        gap = p - s_min
        row = n_hist if n_hist < hist.shape[0] else hist.shape[0] - 1
        hist[row, 0] = k
        hist[row, 1] = value
        hist[row, 2] = gap
        for c in range(counts.shape[0]):
            hist_counts[row, c] = counts[c]
        n_hist = row + 1
        if not (math.isfinite(value) and math.isfinite(gap)):
            status = _NONFINITE
            break
        bound = rtol * abs(value)
        if gap <= (tol if tol >= bound else bound):
            status = _CONVERGED
            break
        if k >= max_iter:
            status = _MAX_ITER
            break
        if k >= pause_at:
            # Between two checks of the one-call solve, before this check's corrective
            # decision: the resumed call repeats this check and goes on as one call would.
            status = _PAUSED
            break
        if correct:
            if gap < win_min:
                win_min = gap
            if k - win_start >= win_len:
                corrected = False
                if win_min > _STALL * win_first:
                    if _correct(P, cache, rows, y, inv_c, w, s, hi_buf, p,
                                _face_budget(n, k - last_correction)) > 0:
                        last_correction = k + 1
                        corrected = True
                        counts[7] += 1
                        i_min, s_min, j_max, s_max, p, t = _select(w, s, s, False)
                        if variant == 5:  # PARTAN restarts from the corrected iterate
                            for r in range(n):
                                wp[r] = w[r]
                                sp[r] = s[r]
                            W = p - t
                            p_prev = p
                            t_prev = t
                        k += 1
                win_start = k
                win_len = _correction_window(_n_positive(w), n)
                if not corrected and win_min > _STALL * win_first:
                    win_len *= 2  # a correction refused: try again later
                # The next window is measured against this one's smallest gap (the gap is
                # noisy: its value at one check would make a halving look easy).
                win_first = p - s_min if corrected else win_min
                win_min = p - s_min
                if corrected:
                    continue
        block = max_iter - k
        if check_every < block:
            block = check_every
        for _ in range(block):
            i = i_min
            si = s_min
            hi = _row(P, cache, rows, y, inv_c, i, hi_buf)
            if variant == 5:  # PARTAN (seed 002): FW step, then the extrapolation
                q = p - t
                curvature = diag[i] - 2.0 * (si - 0.0) + q
                value = 0.5 * (p + t) + 0.0
                slope = si - p
                lam = _step(slope, curvature, 1.0)
                f_t = value + lam * slope + 0.5 * lam * lam * curvature - 0.0
                t_t = (1.0 - lam) * t + lam * 0.0
                p_t = 2.0 * f_t - t_t
                u_prev_i = sp[i] - 0.0
                cross = (1.0 - lam) * W + lam * u_prev_i
                q_t = p_t - t_t
                q_prev = p_prev - t_prev
                e_slope = p_t - (cross + t_prev)
                e_curv = q_t - 2.0 * cross + q_prev
                if not in_support[i]:
                    in_support[i] = True
                    support[n_support] = i
                    n_support += 1
                lo, up = _bounds_on(w, wp, lam, i, support, n_support)
                noise = 1e-11 * (abs(q_t) + 2.0 * abs(cross) + abs(q_prev))
                sigma = -1.0 if e_slope > 0.0 else 1.0
                gamma_max = -lo if e_slope > 0.0 else up
                gamma_max = gamma_max if e_curv > noise else 0.0
                gamma = _step(sigma * e_slope, e_curv, gamma_max)
                mu = sigma * gamma
                a = (1.0 + mu) * (1.0 - lam)
                b = (1.0 + mu) * lam
                d = -mu
                # apply(): W' = a q + b u_i + c u_j + d W before the shift (c = 0, j = i).
                u_i = s[i] - 0.0
                W = a * q + b * u_i + 0.0 * u_i + d * W
                p_prev = p
                t_prev = t
                _shift_update_on(w, s, a, b, i, hi, 0.0, i, hi, d, wp, sp, support,
                                 n_support, zero_tol)
                counts[6] += 1
            elif variant == 0 or variant == 1:
                q = p - t
                use_fw = True
                wj = 0.0
                if variant == 1:
                    wj = w[j_max]
                    use_fw = si - p <= p - s_max
                if use_fw:
                    gamma = _step(si - p, diag[i] - 2.0 * (si - 0.0) + q, 1.0)
                    _update(w, s, 1.0 - gamma, gamma, i, hi, 0.0, i, hi, 0.0, w, s, False,
                            zero_tol)
                    counts[0] += 1
                else:
                    j = j_max
                    gamma_max = wj / max(1.0 - wj, 1e-300) if wj < 1.0 else 0.0
                    gamma = _step(p - s_max, diag[j] - 2.0 * (s_max - 0.0) + q, gamma_max)
                    hj = _row(P, cache, rows, y, inv_c, j, hj_buf)
                    _update(w, s, 1.0 + gamma, -gamma, j, hj, 0.0, j, hj, 0.0, w, s, False,
                            zero_tol)
                    counts[1] += 1
                    if gamma >= gamma_max and gamma_max > 0.0:
                        counts[2] += 1
            else:  # pairwise (2), SWAP (3), SWAP-2o (4)
                j = j_max
                sj = s_max
                if variant == 4:
                    partner = _partner(w, s, hi, diag, s, False, i, si, diag[i])
                    if partner >= 0:
                        j = partner
                    sj = s[j]
                q_ij = hi[j] - 0.0
                curvature = diag[i] + diag[j] - 2.0 * q_ij
                gamma_max = w[j]
                slope = si - sj
                gamma = _step(slope, curvature, gamma_max)
                use_pair = True
                if variant != 2:
                    q = p - t
                    fw_slope = si - p
                    fw_curv = diag[i] - 2.0 * (si - 0.0) + q
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
                        hj = _row(P, cache, rows, y, inv_c, j, hj_buf)
                        _update(w, s, 1.0, gamma, i, hi, c, j, hj, 0.0, w, s, False, zero_tol)
                    else:
                        _update(w, s, 1.0, gamma, i, hi, 0.0, j, hi, 0.0, w, s, False,
                                zero_tol)
                    drop = gamma >= gamma_max and gamma > 0.0
                    if variant == 2:
                        counts[3] += 1
                        if drop:
                            counts[2] += 1
                    elif drop:
                        counts[5] += 1
                    else:
                        counts[4] += 1
            i_min, s_min, j_max, s_max, p, t = _select(w, s, s, False)
            k += 1
    _store(state, p, t, s_min, i_min, s_max, j_max, W, p_prev, t_prev, n_support)
    if state.shape[0] >= 16:
        state[10] = 1.0
        state[11] = win_start - k
        state[12] = last_correction - k
        state[13] = win_len
        state[14] = win_first
        state[15] = win_min
    return k, status, n_hist


def _n_positive_py(w):
    """The number of atoms with weight (the face a correction would work on)."""
    count = 0
    for r in range(w.shape[0]):
        if w[r] > 0.0:
            count += 1
    return count


def _correct_py(P, cache, rows, y, inv_c, w, s, buf, p, max_face):
    r"""The active-set corrective step on the face of ``w`` (:mod:`torchfw.optimizers._face`).

    Rounds (at most :data:`~torchfw.optimizers._face.MAX_ROUNDS`): the face -- first the
    support of ``w`` and the atoms that violate optimality most
    (:func:`~torchfw.optimizers._face.face_atoms`), then the kept atoms and the new worst
    violators (:func:`~torchfw.optimizers._face.violators`) -- has its factor of
    :math:`G = \tilde K_{SS}` extended by the new atoms' rows, Wolfe's minor cycle runs on it,
    and the new weights and their gradient :math:`s = \sum_{a \in S} w_a h_a` (the rows of the
    atoms kept; no linear term on the SVM dual) are written into ``w`` and ``s`` if they lower
    the objective ``p / 2`` (``p = w^T s``). The rounds go on while each at least halves the
    gap. Returns the number of atoms of the last face accepted, or -1 when nothing changed.
    """
    n = w.shape[0]
    first, k_support = _face_atoms(w, s, p, max_face)
    k = first.shape[0]
    if k < 2:
        return -1
    cap = max_face
    idx = np.empty(cap, dtype=np.int64)
    x = np.zeros(cap)
    total = 0.0
    for a in range(k):
        idx[a] = first[a]
    for a in range(k_support):
        x[a] = w[idx[a]]
        total += x[a]
    for a in range(k_support):
        x[a] /= total
    L = np.empty((cap, cap))
    no_c = np.zeros(1)
    s_new = np.empty(n)
    p_cur = p
    gap_prev = p - _min(s)
    k0 = 0
    accepted = -1
    for _ in range(_MAX_ROUNDS):
        Gb = np.empty((k - k0, k))
        for a in range(k0, k):
            h = _row(P, cache, rows, y, inv_c, idx[a], buf)
            for b in range(a + 1):
                L[a, b] = h[idx[b]]
                Gb[a - k0, b] = L[a, b]
        lo = k0 if k0 > 0 else k_support
        k = _extend_skipping(L, Gb, k0, lo, k, x, no_c, False, idx)
        if k < 1:
            break
        k = _prune(L, Gb, k0, lo, k, x, no_c, False, idx)
        if k < 1:
            break
        kept = _minor_cycle(L, k, x, no_c, False, idx)
        if kept < 1:
            break
        for r in range(n):
            s_new[r] = 0.0
        _accumulate_rows(P, cache, rows, y, inv_c, idx, x, kept, s_new, buf)
        p_new = 0.0
        for a in range(kept):
            p_new += x[a] * s_new[idx[a]]
        if not p_new < p_cur:
            break
        for r in range(n):
            w[r] = 0.0
            s[r] = s_new[r]
        for a in range(kept):
            w[idx[a]] = x[a]
        p_cur = p_new
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
    return accepted


def _min_py(v):
    """The smallest entry of ``v``."""
    best = v[0]
    for r in range(1, v.shape[0]):
        if v[r] < best:
            best = v[r]
    return best


def _accumulate_rows_py(P, cache, rows, y, inv_c, idx, x, kept, out, buf):
    r""":math:`\text{out} \mathrel{+}= \sum_a x_a h_{idx_a}` over ``a < kept``, atom by atom
    (the order :func:`torchfw.optimizers._face.accumulate` sums the lazy columns in)."""
    for a in range(kept):
        h = _row(P, cache, rows, y, inv_c, idx[a], buf)
        _axpy(out, x[a], h)


def _store_py(state, p, t, s_min, i_min, s_max, j_max, W, p_prev, t_prev, n_support):
    """Write the scalars of a solve into ``state`` (the layout :func:`_solve` reads)."""
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


def _row_py(P, cache, rows, y, inv_c, i, buf):
    r"""Row ``i`` of the problem's matrix :math:`D_y P D_y + \operatorname{diag}(1/C)`, in ``buf``.

    ``P`` is :math:`K + 1` over all examples, read from the row source ``(P, cache)``
    (:mod:`torchfw.svm._matrix`: ``cache`` None for the full matrix -- numba compiles that case
    without the cache branch -- else the store of a cache of rows and its state); ``rows`` are
    the problem's examples (empty: all of them, in order). The signs are applied as the row is
    read, in ``P``'s precision -- exact -- and ``1/C_i`` is added to the diagonal entry, rounded
    as the lazy path's column kernels round it, so the row is ``SVMDualOperator.column(i)`` of
    the problem bit for bit. Reading rows this way costs one pass over a row per row read;
    flipping the matrix's signs in place cost two passes over all of it per one-vs-rest problem
    (a third of a digits fit), and a one-vs-one pair's signed copy one pass over its block.
    """
    yi = y[i]
    k = i if rows.shape[0] == 0 else rows[i]
    if cache is None:
        row = P[k]
    else:
        row = _source_row(P, cache, k)
    if rows.shape[0] == 0:
        for r in range(buf.shape[0]):
            buf[r] = yi * y[r] * row[r]
    else:
        for r in range(buf.shape[0]):
            buf[r] = yi * y[r] * row[rows[r]]
    buf[i] += inv_c[i]
    return buf


_source_row = source_row
_update = K.update
_select = K.select
_step = K._step_kernel
_partner = K.second_order_partner
_shift_update_on = K.shift_update_on
_bounds_on = K.extrapolation_bounds_on
_row = _njit(_row_py)
_store = _njit(_store_py)
_n_positive = _njit(_n_positive_py)
_minor_cycle = _face.minor_cycle
_correction_window = _face.correction_window
_axpy = _face.axpy
_STALL = _face.STALL
_face_budget = _face.face_budget
_accumulate_rows = _njit(_accumulate_rows_py)
_face_atoms = _face.face_atoms
_violators = _face.violators
_extend_skipping = _face.extend_skipping
_face_growth = _face.face_growth
_MAX_ROUNDS = _face.MAX_ROUNDS
_min = _njit(_min_py)
_prune = _face.prune
_correct = _njit(_correct_py)
store_state = _store
signed_row = _row
solve_compiled = _njit(_solve)


class Start:
    """The vectors and scalars a solve starts from and leaves its final iterate in.

    ``w, s`` (float64) are the weights and scores; ``wp, sp`` the previous iterate (PARTAN,
    else aliases of ``w, s``); ``support`` the atoms that ever had weight, in order of arrival
    (PARTAN); ``state`` ``[p, t, s_min, i_min, s_max, j_max, W, p_prev, t_prev, n_support]``,
    then the corrective step's window that a resumed chunk continues (:func:`_solve`).
    """

    __slots__ = ("w", "s", "wp", "sp", "support", "state")

    def __init__(self, n: int, keep_previous: bool):
        self.w = np.zeros(n)
        self.s = np.empty(n)
        self.wp = np.empty(n) if keep_previous else self.w
        self.sp = np.empty(n) if keep_previous else self.s
        self.support = np.empty(n if keep_previous else 1, dtype=np.int64)
        # The scalars of the iterate, then the corrective step's window (carried between chunks).
        self.state = np.zeros(16)

    @classmethod
    def of_engine(cls, engine) -> Start:
        """The start held by a freshly built host engine (a start of many atoms)."""
        self = cls.__new__(cls)
        keep = engine.keep_previous
        self.w, self.s = engine._w_np, engine._s_np
        self.wp, self.sp = engine._wp_np, engine._sp_np
        self.support = engine._support if keep else np.zeros(1, dtype=np.int64)
        self.state = np.array([engine.p, engine.t, engine.s_min, engine.i_min, engine.s_max,
                               engine.j_max, engine.W if keep else 0.0,
                               engine.p_prev if keep else 0.0, engine.t_prev if keep else 0.0,
                               engine._n_support if keep else 0] + [0.0] * 6, dtype=np.float64)
        return self

    def value(self) -> float:
        """``f = (p + t) / 2``, as the host engine's ``value()``."""
        return 0.5 * (float(self.state[0]) + float(self.state[1])) + 0.0

    def gap(self) -> float:
        """``p - s_min``, as the host engine's ``gap()``."""
        return float(self.state[0]) - float(self.state[2])


#: Seconds one compiled call runs before it returns to Python: :func:`solve` runs the loop in
#: chunks of iterations sized to about this long, each resuming exactly where the last stopped.
#: Between two chunks the interpreter runs, so that a Ctrl-C (``KeyboardInterrupt``) stops a
#: fit within about this long, and a cancelled fit's solves on worker threads stop too. None:
#: one call for the whole solve (signals wait until it returns: 40 s on a9a at tol=1e-3).
CHUNK_SECONDS: float | None = 0.2

#: Iterations of the first chunk (rounded to a multiple of ``check_every``), timed to size the
#: next ones: small problems converge within it, in one call as before. An iteration reads one
#: or two rows of ``n`` entries, computed on first use from a cache of rows (a9a: ~2 ms per row
#: early on, 2,000 iterations took 3.5 s), so the first chunk has at most
#: ``FIRST_CHUNK_WORK / n`` iterations.
FIRST_CHUNK = 2000
FIRST_CHUNK_WORK = 2_000_000


class SolveCancelled(Exception):
    """A solve stopped between two chunks because its fit was interrupted (``stop`` set)."""


def solve(variant: int, src: tuple, rows: np.ndarray, y: np.ndarray, inv_c: np.ndarray,
          diag: np.ndarray, start: Start, *, max_iter: int, tol: float, rtol: float,
          check_every: int, stop=None, correct: bool = True):
    """Run the compiled solve from ``start``, which holds the final iterate afterwards.

    The problem's matrix is read from the row source ``src`` (:func:`full_source` of a matrix,
    or :func:`torchfw.svm._matrix.cached_source`) by :func:`_row_py` (``rows``, ``y``,
    ``inv_c``).

    The loop runs in chunks of iterations (:data:`CHUNK_SECONDS`), each a multiple of
    ``check_every`` so that the checks fall where one call makes them; a chunk starts from the
    state the last one stored (``start``'s vectors and scalars) and its first check repeats the
    last one's, which is dropped: the iterates, checks and stopping iteration are those of one
    call, bit for bit. ``stop`` (a :class:`threading.Event`, optional) is read between chunks:
    once set, :class:`SolveCancelled` is raised.

    ``correct``: take the active-set corrective step where plain steps stall (see
    :func:`_solve`); its stall window starts anew with each chunk. ``max_iter`` may be huge (no
    limit): each chunk keeps at most :data:`MAX_CHECKS` checks, the first ones and the last.

    Returns ``(n_iter, status_code, history array (n, 3), counts per check (n, 8))``.
    """
    counts = np.zeros(len(COUNTERS), dtype=np.int64)
    hists: list[np.ndarray] = []
    hist_counts_list: list[np.ndarray] = []
    done = 0
    first = min(FIRST_CHUNK, FIRST_CHUNK_WORK // max(1, y.shape[0]))
    chunk = max(check_every, first // check_every * check_every)
    while True:
        if stop is not None and stop.is_set():
            raise SolveCancelled
        # The chunk pauses at its first check at or past ``chunk`` iterations: checks fall
        # where one call makes them (a corrective step moves them off the multiples of
        # check_every), and the budget stays the whole solve's.
        this = max_iter - done if CHUNK_SECONDS is None else min(max_iter - done, chunk)
        pause_at = max_iter - done if CHUNK_SECONDS is None else chunk
        # A check per block, one more after each corrective step (at most one per window).
        n_checks = min(this // check_every + this // _face.MIN_WINDOW + 3, MAX_CHECKS)
        hist = np.empty((n_checks, 3), dtype=np.float64)
        hist_counts = np.empty((n_checks, len(COUNTERS)), dtype=np.int64)
        t0 = time.perf_counter()
        k, status, n_hist = solve_compiled(
            variant, src[0], src[1], rows, y, inv_c, diag, start.w, start.s, start.wp,
            start.sp, start.support, start.state, max_iter - done, tol, rtol, check_every,
            ZERO_TOL, counts, hist, hist_counts, bool(correct), pause_at)
        elapsed = time.perf_counter() - t0
        first = 1 if hists else 0  # a resumed chunk's first check is the last chunk's last
        hist = hist[first:n_hist]
        hist[:, 0] += done
        hists.append(hist)
        hist_counts_list.append(hist_counts[first:n_hist])
        done += int(k)
        if status != _PAUSED:
            break
        # The next chunk: as many iterations as CHUNK_SECONDS at this chunk's pace, a multiple
        # of check_every, growing at most 8-fold at a time (the pace of the first iterations,
        # cache misses included, need not last).
        pace = CHUNK_SECONDS * k / max(elapsed, 1e-6)
        chunk = int(min(pace, 8 * chunk)) // check_every * check_every
        chunk = max(check_every, chunk)
    if len(hists) == 1:
        return done, int(status), hists[0], hist_counts_list[0]
    return done, int(status), np.concatenate(hists), np.concatenate(hist_counts_list)
