r"""The start of every :class:`~torchfw.SVC` solve: an exact solution on a random subset.

Seeds 000-002 start Frank-Wolfe from the problem restricted to a few random examples (``n_init``,
default 20), drawn from both classes so that the restricted problem has a margin, and solved
exactly (:func:`torchfw.optimizers.active_set.simplex_qp`; a pairwise FW solve to 1e-12 took ~240
interpreted iterations, ~40% of a 3,000-example fit). The start gradient is then
:math:`s = \tilde K \alpha_0`, from the few columns of the subset.

Two storages compute it: the lazy path from an operator's columns (:func:`initial_alpha`, then
the engine's ``matvec``), and the compiled whole solve of :mod:`torchfw.svm._dense` from the rows
of its matrix (:func:`start_engine`). Both read the same values (the host's compiled columns,
:meth:`~torchfw.svm.kernels.SVMDualOperator.start_block`) and sum :math:`s` in the same order
(:func:`torchfw.svm._kernel_cpu.combine_rows`), so both start from the same bits.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import Tensor

from ..optimizers import _kernels
from ..optimizers import active_set as _active_set
from ..optimizers.active_set import simplex_qp
from ..utils.jit import njit
from . import _dense as _svc_dense
from . import _kernel_cpu

__all__ = ["initial_subset", "draw_positions", "initial_alpha", "subset_weights", "start_state",
           "start"]


def initial_subset(y_pm: np.ndarray, n_init: int, seed) -> np.ndarray:
    """The sorted random subset of ``min(n_init, m)`` examples, both classes in proportion.

    ``seed`` (an int, or None for fresh entropy) seeds the draw (:func:`draw_positions`).
    """
    if _subset_compiled is not None and _kernels.HAVE_NUMBA:  # one compiled call (three NumPy passes cost ~12 us)
        return _subset_compiled(y_pm, n_init, -1 if seed is None else int(seed) % 2**32)
    pos, neg = np.flatnonzero(y_pm > 0), np.flatnonzero(y_pm < 0)
    at_pos, at_neg = draw_positions(pos.size, neg.size, n_init, seed)
    subset = np.concatenate((pos[at_pos], neg[at_neg]))
    subset.sort()
    return subset


def _subset_numba(y_pm, n_init, seed):
    """:func:`initial_subset` in compiled code: the same draw (:func:`_draw_numba`)."""
    n_pos = 0
    n_neg = 0
    for r in range(y_pm.shape[0]):
        if y_pm[r] > 0:
            n_pos += 1
        elif y_pm[r] < 0:
            n_neg += 1
    pos = np.empty(n_pos, dtype=np.int64)
    neg = np.empty(n_neg, dtype=np.int64)
    a = 0
    b = 0
    for r in range(y_pm.shape[0]):
        if y_pm[r] > 0:
            pos[a] = r
            a += 1
        elif y_pm[r] < 0:
            neg[b] = r
            b += 1
    at_pos, at_neg = _draw_numba_in(n_pos, n_neg, n_init, seed)
    subset = np.concatenate((pos[at_pos], neg[at_neg]))
    subset.sort()
    return subset


def draw_positions(n_pos: int, n_neg: int, n_init: int, seed) -> tuple[np.ndarray, np.ndarray]:
    """Which positives and which negatives (positions among each) start the solve.

    ``min(n_init, m)`` in all, the classes in proportion (at least one positive): a prefix of
    a random permutation of each class. A sharded run draws positions among all ranks'
    examples with it and finds the same subset (:mod:`torchfw.distributed.svc`). With numba
    the draw runs in compiled code on numba's own Mersenne Twister (a NumPy ``Generator``
    costs 15 us to create, a tenth of a 100-example problem's whole start); without, on
    NumPy's ``default_rng``: the two draw different subsets for the same seed.
    """
    if _draw_compiled is None or not _kernels.HAVE_NUMBA:
        return _draw(n_pos, n_neg, n_init, np.random.default_rng(seed))
    return _draw_compiled(n_pos, n_neg, n_init, -1 if seed is None else int(seed) % 2**32)


def _draw(n_pos, n_neg, n_init, rng):
    """The draw on NumPy's generator."""
    p = min(n_init, n_pos + n_neg)
    take = min(n_pos, max(1, int(np.round(p * n_pos / (n_pos + n_neg)))))
    return rng.permutation(n_pos)[:take], rng.permutation(n_neg)[:min(n_neg, p - take)]


def _draw_numba(n_pos, n_neg, n_init, seed):
    """:func:`_draw` on numba's generator, seeded unless ``seed`` is -1."""
    # numba's np.random is its own generator (not NumPy's global state): the legacy calls are
    # the only interface it compiles.
    if seed >= 0:
        np.random.seed(seed)  # noqa: NPY002
    p = min(n_init, n_pos + n_neg)
    take = min(n_pos, max(1, int(np.round(p * n_pos / (n_pos + n_neg)))))
    return (np.random.permutation(n_pos)[:take],  # noqa: NPY002
            np.random.permutation(n_neg)[:min(n_neg, p - take)])  # noqa: NPY002


_draw_compiled = njit(_draw_numba)
_draw_numba_in = _draw_compiled  # as the compiled subset's callee (numba resolves it by name)
_subset_compiled = njit(_subset_numba)


def initial_alpha(operator, y_pm: np.ndarray, n_init: int, seed) -> Tensor:
    """The exact solution on the initial subset, as a dual vector over all examples."""
    idx = initial_subset(y_pm, n_init, seed)
    w, _ = simplex_qp(operator.start_block(idx))
    alpha = torch.zeros(operator.shape[0], dtype=torch.float64, device=operator.device)
    alpha[torch.from_numpy(idx).to(operator.device)] = torch.from_numpy(w).to(operator.device)
    return alpha


def _subset_weights(P, cache, rows, y, inv_c, idx, w):
    """Solve the start subset ``idx`` exactly; its weights into ``w``.

    ``B`` holds the problem's matrix on ``idx`` in float64, read from the row source
    ``(P, cache)`` as the compiled solve reads it (:func:`torchfw.svm._dense._row_py`); the lazy
    path's :meth:`~torchfw.svm.kernels.SVMDualOperator.start_block` gives the same values. The solve is
    :func:`~torchfw.optimizers.active_set.simplex_qp`'s own compiled loop with its defaults
    (``c = 0``, ``10 p + 10`` support changes, rtol 1e-13).
    """
    p = idx.shape[0]
    B = np.empty((p, p), dtype=np.float64)
    buf = np.empty(y.shape[0], dtype=P.dtype)
    for a in range(p):
        row = _row(P, cache, rows, y, inv_c, idx[a], buf)
        for b in range(p):
            B[a, b] = np.float64(row[idx[b]])
    weights, _ = _qp_loop(B, np.zeros(p, dtype=np.float64), 10 * p + 10, 1e-13)
    for r in range(w.shape[0]):
        w[r] = 0.0
    for a in range(p):
        w[idx[a]] = weights[a]


def _start_state(P, cache, rows, y, inv_c, w, s, max_atoms, keep_previous, wp, sp, support, state):
    r"""The engine's start from the weights ``w``: ``s``, the selections, PARTAN's copies.

    ``s = \tilde K w`` is summed over the nonzero atoms in ascending order
    (:func:`torchfw.svm._kernel_cpu.combine_rows`, the lazy path's ordered matvec) from the rows
    the compiled solve reads (:func:`torchfw.svm._dense._row_py`), and the reductions are the
    host engine's selection (:func:`torchfw.optimizers._kernels.select`), so the state is the
    one :meth:`~torchfw.optimizers._engine.QuadraticEngine.__init__` builds. ``state``
    receives ``[p, t, s_min, i_min, s_max, j_max, W, p_prev, t_prev, n_support]``. Returns
    the number of nonzero atoms, or -1 (nothing written) above ``max_atoms``.
    """
    n = w.shape[0]
    count = 0
    for r in range(n):
        if w[r] != 0.0:
            count += 1
    if count > max_atoms:
        return -1
    rows_nz = np.empty((count, n), dtype=P.dtype)
    weights = np.empty(count, dtype=np.float64)
    q = 0
    for r in range(n):
        if w[r] != 0.0:
            _row(P, cache, rows, y, inv_c, r, rows_nz[q])
            weights[q] = w[r]
            q += 1
    _combine(rows_nz, weights, s)
    imin, smin, jmax, smax, p, t = _select(w, s, s, False)
    n_support = 0
    if keep_previous:  # at the start the previous iterate is the iterate: W = w' K w = p - t
        # Element loops, not wp[:] = w: numba compiles an array-to-slice assignment together
        # with its shape-mismatch error message (string formatting), tens of seconds of
        # compilation on the first fit.
        for r in range(n):
            wp[r] = w[r]
            sp[r] = s[r]
        for r in range(n):
            if w[r] > 0.0:
                support[n_support] = r
                n_support += 1
    if keep_previous:
        _store(state, p, t, smin, imin, smax, jmax, p - t, p, t, n_support)
    else:
        _store(state, p, t, smin, imin, smax, jmax, 0.0, 0.0, 0.0, n_support)
    return count


_qp_loop = _active_set._simplex_qp_loop
_row = _svc_dense.signed_row
_store = _svc_dense.store_state
_combine = _kernel_cpu.combine_rows
_select = _kernels._select_kernel
subset_weights = njit(_subset_weights, fallback=True)
start_state = njit(_start_state, fallback=True)


def _start(P, cache, rows, y, inv_c, subset, w, s, max_atoms, keep_previous, wp, sp, support,
           state):
    """:func:`_subset_weights` on ``subset`` (unless it is empty: ``w`` then holds a warm
    start), then :func:`_start_state`: the whole start in one compiled call, so that a fresh
    process loads one kernel from numba's cache for it, not two (each load ~10 ms)."""
    if subset.shape[0] > 0:
        _subset_weights_in(P, cache, rows, y, inv_c, subset, w)
    return _start_state_in(P, cache, rows, y, inv_c, w, s, max_atoms, keep_previous, wp, sp,
                           support, state)


_subset_weights_in, _start_state_in = subset_weights, start_state  # callees, by global name
start = njit(_start, fallback=True)
