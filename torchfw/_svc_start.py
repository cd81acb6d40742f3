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
from .optimizers.active_set import simplex_qp

__all__ = ["initial_subset", "initial_alpha", "start_engine"]


def initial_subset(y_pm: np.ndarray, n_init: int, seed) -> np.ndarray:
    """The sorted random subset of ``min(n_init, m)`` examples, both classes in proportion."""
    m = y_pm.shape[0]
    rng = np.random.default_rng(seed)
    p = min(n_init, m)
    pos, neg = np.flatnonzero(y_pm > 0), np.flatnonzero(y_pm < 0)
    n_pos = min(len(pos), max(1, round(p * len(pos) / m)))
    subset = np.concatenate([rng.choice(pos, n_pos, replace=False),
                             rng.choice(neg, min(len(neg), p - n_pos), replace=False)])
    return np.sort(subset)


def initial_alpha(operator, y_pm: np.ndarray, n_init: int, seed) -> Tensor:
    """The exact solution on the initial subset, as a dual vector over all examples."""
    idx = initial_subset(y_pm, n_init, seed)
    w, _ = simplex_qp(operator.start_block(idx))
    alpha = torch.zeros(operator.shape[0], dtype=torch.float64, device=operator.device)
    alpha[torch.from_numpy(idx).to(operator.device)] = torch.from_numpy(w).to(operator.device)
    return alpha


def start_engine(H: np.ndarray, y_pm: np.ndarray, diag: Tensor, alpha0, n_init: int, seed, *,
                 keep_previous: bool, pair_columns: bool):
    r"""The host engine at the start of the problem whose signed matrix is ``H``, or None.

    ``alpha0`` is a warm start (or None: the initial subset's solution, read from ``H``).
    ``None`` is returned when the start has more nonzeros than the ordered sum takes
    (:data:`torchfw.kernels.ORDERED_MATVEC_MAX`, a large warm start): the caller then builds
    the engine from an operator, as the lazy path does.
    """
    from .kernels import ORDERED_MATVEC_MAX
    from .optimizers._engine import QuadraticEngine

    n = H.shape[0]
    if alpha0 is None:
        idx = initial_subset(y_pm, n_init, seed)
        weights, _ = simplex_qp(H[np.ix_(idx, idx)].astype(np.float64))
        w = torch.zeros(n, dtype=torch.float64)
        w[torch.from_numpy(idx)] = torch.from_numpy(weights)
    else:
        w = alpha0.detach().to(torch.float64).clone().contiguous()
    nz = torch.nonzero(w).squeeze(1)
    if nz.numel() > ORDERED_MATVEC_MAX:
        return None
    s = torch.zeros(n, dtype=torch.float64)
    if nz.numel():
        _kernel_cpu.combine_rows(H[nz.numpy()], w.index_select(0, nz).numpy(), s.numpy())
    return QuadraticEngine.from_start(w, s, diag, keep_previous=keep_previous,
                                      pair_columns=pair_columns)
