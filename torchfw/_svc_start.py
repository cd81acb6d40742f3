r"""The start of every :class:`~torchfw.SVC` solve: an exact solution on a random subset.

Seeds 000-002 start Frank-Wolfe from the problem restricted to a few random examples (``n_init``,
default 20), drawn from both classes so that the restricted problem has a margin, and solved
exactly (:func:`torchfw.optimizers.active_set.simplex_qp`; a pairwise FW solve to 1e-12 took ~240
interpreted iterations, ~40% of a 3,000-example fit). The start gradient is then
:math:`s = \tilde K \alpha_0`, from the few columns of the subset.

Two storages compute it: the lazy path from an operator's columns (:func:`initial_alpha`, then
the engine's ``matvec``), and the compiled whole solve of :mod:`torchfw._svc_dense` from the rows
of its matrix (:func:`start_engine`). Both read the same values (the host's compiled columns,
:meth:`~torchfw.kernels.SVMDualOperator.start_block`) and sum :math:`s` in the same order
(:func:`torchfw._kernel_cpu.combine_rows`), so both start from the same bits.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import Tensor

from . import _kernel_cpu
from ._numba import njit
from .optimizers import _kernels
from .optimizers import active_set as _active_set
from .optimizers.active_set import simplex_qp

__all__ = ["initial_subset", "initial_alpha", "subset_weights", "start_state"]


def initial_subset(y_pm: np.ndarray, n_init: int, seed) -> np.ndarray:
    """The sorted random subset of ``min(n_init, m)`` examples, both classes in proportion.

    ``seed`` (an int, or None for fresh entropy) seeds the draw. With numba the draw runs in
    compiled code on numba's own Mersenne Twister (a NumPy ``Generator`` costs 15 us to
    create, a tenth of a 100-example problem's whole start); without, on NumPy's
    ``default_rng``: the two draw different subsets for the same seed.
    """
    if _draw_compiled is None:
        return _draw(y_pm, n_init, np.random.default_rng(seed))
    return _draw_compiled(y_pm, n_init, -1 if seed is None else int(seed) % 2**32)


def _draw(y_pm, n_init, rng):
    """The draw: a prefix of a random permutation of each class (NumPy's generator)."""
    m = y_pm.shape[0]
    p = min(n_init, m)
    pos, neg = np.flatnonzero(y_pm > 0), np.flatnonzero(y_pm < 0)
    n_pos = min(len(pos), max(1, int(np.round(p * len(pos) / m))))
    subset = np.concatenate([rng.permutation(pos)[:n_pos],
                             rng.permutation(neg)[:min(len(neg), p - n_pos)]])
    subset.sort()
    return subset


def _draw_numba(y_pm, n_init, seed):
    """:func:`_draw` on numba's generator, seeded unless ``seed`` is -1."""
    if seed >= 0:
        np.random.seed(seed)
    m = y_pm.shape[0]
    p = min(n_init, m)
    pos = np.flatnonzero(y_pm > 0)
    neg = np.flatnonzero(y_pm < 0)
    n_pos = min(len(pos), max(1, int(np.round(p * len(pos) / m))))
    n_neg = min(len(neg), p - n_pos)
    subset = np.concatenate((np.random.permutation(pos)[:n_pos],
                             np.random.permutation(neg)[:n_neg]))
    subset.sort()
    return subset


_draw_compiled = njit(_draw_numba)


def initial_alpha(operator, y_pm: np.ndarray, n_init: int, seed) -> Tensor:
    """The exact solution on the initial subset, as a dual vector over all examples."""
    idx = initial_subset(y_pm, n_init, seed)
    w, _ = simplex_qp(operator.start_block(idx))
    alpha = torch.zeros(operator.shape[0], dtype=torch.float64, device=operator.device)
    alpha[torch.from_numpy(idx).to(operator.device)] = torch.from_numpy(w).to(operator.device)
    return alpha


def _subset_weights(H, idx, w):
    """Solve the start subset ``idx`` exactly from the rows of ``H``; its weights into ``w``.

    ``B = H[idx][:, idx]`` in float64 is what :meth:`~torchfw.kernels.SVMDualOperator.start_block`
    gives the lazy path, and the solve is :func:`~torchfw.optimizers.active_set.simplex_qp`'s
    own compiled loop with its defaults (``c = 0``, ``10 p + 10`` support changes, rtol 1e-13).
    """
    p = idx.shape[0]
    B = np.empty((p, p), dtype=np.float64)
    for a in range(p):
        for b in range(p):
            B[a, b] = np.float64(H[idx[a], idx[b]])
    weights, _ = _qp_loop(B, np.zeros(p, dtype=np.float64), 10 * p + 10, 1e-13)
    for r in range(w.shape[0]):
        w[r] = 0.0
    for a in range(p):
        w[idx[a]] = weights[a]


def _start_state(H, w, s, max_atoms, keep_previous, wp, sp, support, state):
    r"""The engine's start from the weights ``w``: ``s``, the selections, PARTAN's copies.

    ``s = \tilde K w`` is summed over the nonzero atoms in ascending order
    (:func:`torchfw._kernel_cpu.combine_rows`, the lazy path's ordered matvec) and the
    reductions are the host engine's selection (:func:`torchfw.optimizers._kernels.select`),
    so the state is the one :meth:`~torchfw.optimizers._engine.QuadraticEngine.__init__` builds.
    ``state`` receives ``[p, t, s_min, i_min, s_max, j_max, W, p_prev, t_prev, n_support]``.
    Returns the number of nonzero atoms, or -1 (nothing written) above ``max_atoms``.
    """
    n = w.shape[0]
    count = 0
    for r in range(n):
        if w[r] != 0.0:
            count += 1
    if count > max_atoms:
        return -1
    nz = np.empty(count, dtype=np.int64)
    q = 0
    for r in range(n):
        if w[r] != 0.0:
            nz[q] = r
            q += 1
    rows = np.empty((count, n), dtype=H.dtype)
    weights = np.empty(count, dtype=np.float64)
    for a in range(count):
        rows[a] = H[nz[a]]
        weights[a] = w[nz[a]]
    _combine(rows, weights, s)
    imin, smin, jmax, smax, p, t = _select(w, s, s, False)
    n_support = 0
    if keep_previous:  # at the start the previous iterate is the iterate: W = w' K w = p - t
        wp[:] = w
        sp[:] = s
        for r in range(n):
            if w[r] > 0.0:
                support[n_support] = r
                n_support += 1
    state[0] = p
    state[1] = t
    state[2] = smin
    state[3] = imin
    state[4] = smax
    state[5] = jmax
    state[6] = p - t if keep_previous else 0.0
    state[7] = p if keep_previous else 0.0
    state[8] = t if keep_previous else 0.0
    state[9] = n_support
    return count


_qp_loop = _active_set._simplex_qp_loop
_combine = _kernel_cpu.combine_rows
_select = _kernels._select_kernel
subset_weights = njit(_subset_weights, fallback=True)
start_state = njit(_start_state, fallback=True)
