r"""The vector arithmetic of a move, written once for every storage.

One concern: the two pieces of vector work every storage of
:class:`~torchfw.optimizers._engine.QuadraticEngine` needs, over its own arrays:
:func:`update_vectors` (a move :math:`w \leftarrow a w + b e_i + c e_j + d w_{\text{prev}}`
applied to the weights and the scores) and :func:`feasible_interval` (PARTAN's feasible
extrapolation interval). Each takes NumPy arrays (the compiled kernels of
:mod:`torchfw.optimizers._kernels`), one problem's tensors, or ``B`` problems' ``(B, N)``
tensors.
"""

from __future__ import annotations

import math

import numpy as np
import torch
from torch import Tensor

from . import _kernels as K
from ._moves import ZERO_TOL

__all__ = ["update_vectors", "feasible_interval"]



def _column(v):
    """A ``(B,)`` coefficient as a ``(B, 1)`` column against ``(B, N)`` vectors."""
    return v.unsqueeze(-1) if isinstance(v, Tensor) and v.dim() == 1 else v


def update_vectors(w, s, a, b, i, h_i, c, j, h_j, d, w_prev, s_prev, *, shift: bool,
                   support=None, n_support: int = 0,
                   keep: Tensor | None = None, compiled: bool = True) -> bool:
    r"""Apply a move to a storage's vectors: the one vector update of the engine.

    .. math:: w \leftarrow a w + b e_i + c e_j + d w_{\text{prev}}, \qquad
              s \leftarrow a s + b h_i + c h_j + d s_{\text{prev}}

    (:class:`~torchfw.optimizers._moves.Coefficients`; ``h_k`` the vertex gradients), with the
    weights a move sends to zero up to rounding snapped to zero (``ZERO_TOL``). With ``shift``
    (PARTAN) the old ``w, s`` become ``w_prev, s_prev``.

    Parameters
    ----------
    w, s, w_prev, s_prev
        NumPy arrays (the compiled kernel :func:`torchfw.optimizers._kernels.update`, in place),
        tensors of shape ``(N,)`` (:func:`torchfw.optimizers._kernels.torch_update`, no host
        read), or tensors of shape ``(B, N)`` for ``B`` problems at once (coefficients and
        atoms of shape ``(B,)``). ``w_prev, s_prev`` may be ``w, s`` when not ``shift``.
    a, b, c, d
        The move's coefficients; ``c`` and ``h_j`` are ignored when ``h_j`` is None.
    i, j
        Atoms (positions in the vectors).
    h_i, h_j
        Vertex gradients; ``h_j`` None for a one-atom move. The compiled form needs an array
        in both (pass ``h_i`` and ``c = 0`` for a one-atom move).
    shift : bool
        Keep the old iterate as the previous one.
    support, n_support
        NumPy arrays with ``shift`` only: ``support[:n_support]`` holds every nonzero of ``w``,
        ``w_prev`` and the move's atoms; the weights are updated there only
        (:func:`~torchfw.optimizers._kernels.shift_update_on`).
    keep : Tensor, optional
        ``(B,)`` mask of the batched problems whose previous iterate moves (stopped problems
        keep theirs).
    compiled : bool, default True
        NumPy arrays without ``support``: False runs the kernel's NumPy form
        (:func:`~torchfw.optimizers._kernels.update_arrays`), for a storage whose compiled
        kernels are deferred (the cold start) or absent.

    Returns
    -------
    bool
        True when (``(N,)`` tensors with ``shift``) the new iterate was written into the
        *previous* iterate's buffers: the caller swaps the references (this avoids a copy of
        the iterate, and an in-place-write-after-clone pattern that torch.compile's inductor
        mis-orders).
    """
    if isinstance(w, np.ndarray):
        if support is not None:
            K.shift_update_on(w, s, a, b, i, h_i, c, j, h_j, d, w_prev, s_prev, support,
                              n_support, ZERO_TOL)
        else:
            (K.update if compiled else K.update_arrays)(w, s, a, b, i, h_i, c, j, h_j, d,
                                                        w_prev, s_prev, shift, ZERO_TOL)
        return False
    if w.dim() == 1:
        return K.torch_update(w, s, a, b, i, h_i, c, j, h_j, d, w_prev, s_prev, shift,
                              ZERO_TOL)
    # B problems: every coefficient a column, every atom one per row.
    dtype = w.dtype
    new_s = s * _column(a) + h_i.to(dtype) * _column(b)
    if h_j is not None:
        new_s = new_s + h_j.to(dtype) * _column(c)
    new_w = w * _column(a)
    if shift:
        new_s = new_s + s_prev * _column(d)
        new_w = new_w + w_prev * _column(d)
        moved = keep[:, None] if keep is not None else torch.ones_like(w, dtype=torch.bool)
        w_prev.copy_(torch.where(moved, w, w_prev))
        s_prev.copy_(torch.where(moved, s, s_prev))
    new_w.scatter_add_(1, i[:, None], b[:, None])
    if h_j is not None:
        new_w.scatter_add_(1, j[:, None], c[:, None])
    new_w = torch.where(new_w <= ZERO_TOL, torch.zeros_like(new_w), new_w)
    w.copy_(new_w)
    s.copy_(new_s)
    return False


def feasible_interval(w, w_prev, lam, i, *, support=None, n_support: int = 0):
    r"""PARTAN's feasible step interval, written once for every storage.

    The extrapolated point :math:`(1+\mu)\tilde w - \mu w_{\text{prev}}` with
    :math:`\tilde w = (1-\lambda) w + \lambda e_i` keeps every weight nonnegative exactly for
    :math:`\mu \in [\mu_{lo}, \mu_{hi}]`: with :math:`\delta = \tilde w - w_{\text{prev}}`,
    :math:`\mu_{hi} = \min_{\delta_r < 0} \tilde w_r / (-\delta_r)` and
    :math:`\mu_{lo} = \max_{\delta_r > 0} -\tilde w_r / \delta_r`.

    Parameters
    ----------
    w, w_prev
        NumPy arrays (compiled :func:`~torchfw.optimizers._kernels.extrapolation_bounds`),
        tensors of shape ``(N,)`` or ``(B, N)`` (one interval per row).
    lam
        The FW step (``(B,)`` for ``B`` problems).
    i
        The FW atom; ``-1`` (host scalars) for an atom none of the entries holds (another
        rank's).
    support, n_support
        Host arrays only: the entries ``support[:n_support]`` hold every nonzero of ``w`` and
        ``w_prev`` and ``i``; only those are read.

    Returns
    -------
    (lo, hi)
        Host floats for NumPy arrays and for tensors with a Python ``i``; tensors (0-d, or
        ``(B,)``) for a tensor ``i`` (device scalars: no host read).
    """
    if isinstance(w, np.ndarray):
        if support is not None:
            return K.extrapolation_bounds_on(w, w_prev, lam, i, support, n_support)
        return K.extrapolation_bounds(w, w_prev, lam, i)
    if w.dim() == 2:  # B problems: lam and i of shape (B,)
        wt = w * _column(1 - lam)
        wt.scatter_add_(1, i[:, None], lam[:, None].to(wt.dtype))
    else:
        wt = w * (1 - lam)
        if not (isinstance(i, int) and i < 0):  # -1: the atom is another rank's
            wt.index_add_(0, torch.as_tensor(i, device=w.device).reshape(1),
                          torch.as_tensor(lam, dtype=w.dtype, device=w.device).reshape(1))
    delta = wt - w_prev
    inf = torch.full_like(wt, math.inf)
    hi = torch.where(delta < 0, wt / (-delta), inf).amin(-1)
    lo = torch.where(delta > 0, -wt / delta, -inf).amax(-1)
    if w.dim() == 2 or isinstance(i, Tensor):
        return lo, hi
    return float(lo), float(hi)
