r"""The selection of the next iteration, written once for every storage and any batch of problems.

One concern: what every incremental engine reads from its vectors after each move. With the
weights :math:`w` over the ``N`` atoms, the scores :math:`s = \nabla F(w)` and the linear term
:math:`\tilde c` over atoms (optional), the selection is

* the Frank-Wolfe atom :math:`i = \arg\min_k s_k` and :math:`s_i`;
* the away atom :math:`j = \arg\max_{k:\,w_k > 0} s_k` and :math:`s_j` (``-1`` and
  :math:`-\infty` when no atom is active);
* :math:`p = w^\top s` and :math:`t = \tilde c^\top w` (0 without :math:`\tilde c`),

from which the engine has the value :math:`F = (p + t)/2` and the Frank-Wolfe gap
:math:`p - s_i` (Jaggi 2013; the away atom of Guélat & Marcotte 1986, as in seed 003). Ties go to
the **first** index among equal minima (maxima): the rule of the compiled loop, which PyTorch's
``argmin``/``argmax`` document as theirs too; the engine parity test compares iterates across
storages, so the rule has to be the same everywhere. With non-finite scores the two
implementations may disagree (the run loop stops on the value first).

:func:`select` is the definition, in PyTorch ops over the last dimension, so one call serves one
problem (``(N,)``, 0-d results) or a batch (``(B, N)``, ``(B,)`` results): the device engine, the
host engine without numba, the batched engine, the sharded engine's local part (before its
cross-rank round) and the sampled engine's away atom
(:func:`active_max`). It never reads a value back to the host and its shapes depend only on the
input shapes, so a block of iterations that calls it can be captured as a CUDA graph.

**Declared second implementation.** :func:`torchfw.optimizers._kernels.select` is the same
function as one compiled (numba) pass over NumPy arrays: no temporaries, no BLAS thread pool, the
hot path of the host engine and of the compiled quadratic loop
(:mod:`torchfw.optimizers._compiled_loop`: the dense engine's blocks and the compiled SVC). Its
sums run in float64 in index order, those of :func:`select` in PyTorch's reduction order, so the
two agree in the indices and, to rounding, in the values: ``tests/test_selection.py`` checks that
on random data, with exact ties, zero weights, with and
without a linear term, in float32 and float64, one problem and a batch. The kernel's NumPy form
(:func:`torchfw.optimizers._kernels.select_arrays`, whole-array ``argmin``/``argmax`` and BLAS
dots) is what :func:`select_host` runs on NumPy arrays where the compiled kernels do not (the
streaming engine while the cold start defers them, or without numba), checked the same way.
"""

from __future__ import annotations

import math

import numpy as np
import torch
from torch import Tensor

from . import _kernels as K

__all__ = ["select", "active_max", "select_host"]

_NEG_INF = -math.inf


def active_max(w: Tensor, s: Tensor) -> tuple[Tensor, Tensor]:
    r"""The away atom :math:`j = \arg\max_{k:\,w_k > 0} s_k` and :math:`s_j` over the last dim.

    Returns ``(-1, -inf)`` for a problem without an active atom (the compiled kernel's answer);
    branch-free, so no host read.
    """
    masked = torch.where(w > 0, s, _NEG_INF)
    j = masked.argmax(-1, keepdim=True)
    sj = masked.gather(-1, j)
    j = torch.where(sj == _NEG_INF, -1, j)
    return j.squeeze(-1), sj.squeeze(-1)


def _inner(a: Tensor, b: Tensor) -> Tensor:
    """:math:`a^\\top b` over the last dimension (one BLAS dot for a single problem)."""
    return torch.dot(a, b) if a.dim() == 1 else (a * b).sum(-1)


def _reduce(w: Tensor, s: Tensor) -> tuple[Tensor, Tensor, Tensor, Tensor, Tensor]:
    """``(i, s_i, j, s_j, p)`` in plain ATen ops."""
    i = s.argmin(-1, keepdim=True)
    si = s.gather(-1, i).squeeze(-1)
    j, sj = active_max(w, s)
    return i.squeeze(-1), si, j, sj, _inner(w, s)


# Under torch.compile, inductor fuses the arg-reductions over all atoms with the update into a
# single Triton reduction that runs in one program: measured 222 of 312 us per iteration at
# m = 262k on an H100. As an opaque custom op, the selection runs ATen's parallel reductions.
# The op is registered on first use with a non-CPU tensor: the first call of a torch.library
# op imports torch's compiler stack (seconds in a fresh process), which a CPU fit never needs.
_reduce_op = None


def _custom_reduce_op():
    global _reduce_op
    if _reduce_op is not None:
        return _reduce_op
    if not hasattr(torch.library, "custom_op"):  # pragma: no cover - torch < 2.4
        _reduce_op = _reduce
        return _reduce_op

    @torch.library.custom_op("torchfw::select", mutates_args=())
    def op(w: Tensor, s: Tensor) -> tuple[Tensor, Tensor, Tensor, Tensor, Tensor]:
        # A custom op may not return views of its inputs or of one another.
        return tuple(t.clone() for t in _reduce(w, s))  # type: ignore[return-value]

    @op.register_fake
    def _(w, s):
        index = s.new_empty(s.shape[:-1], dtype=torch.int64)
        value = s.new_empty(s.shape[:-1])
        return index, value, index.clone(), value.clone(), value.clone()

    _reduce_op = op
    return op


def select(w: Tensor, s: Tensor, ct: Tensor | None = None):
    r"""``(i, s_i, j, s_j, p, t)`` of weights ``w`` and scores ``s`` of shape ``(..., N)``.

    Parameters
    ----------
    w, s : Tensor
        Weights and scores, same shape and dtype.
    ct : Tensor or None
        Linear term over atoms (``t = 0`` without it).

    Returns
    -------
    tuple of Tensor
        Each of shape ``w.shape[:-1]``: indices int64, values in ``s``'s dtype. No host read.

    CPU tensors take the plain ATen reductions (also under torch.compile, where inductor's fused
    CPU loop is fine); other devices go through an opaque custom op (see the comment above).
    """
    reduce = _reduce if w.device.type == "cpu" else _custom_reduce_op()
    i, si, j, sj, p = reduce(w, s)
    t = _inner(w, ct) if ct is not None else torch.zeros_like(p)
    return i, si, j, sj, p, t


def select_host(w, s, ct=None, *, compiled: bool) -> tuple[int, float, int, float, float, float]:
    """The selection as Python numbers, for storages with host scalars.

    ``compiled``: the numba kernel over NumPy arrays (``w``, ``s``, ``ct``); otherwise NumPy
    arrays take the kernel's NumPy form (:func:`torchfw.optimizers._kernels.select_arrays`:
    the PyTorch operations cost twenty times more on a working set's short vectors), tensors
    :func:`select`.
    """
    if compiled:
        imin, smin, jmax, smax, p, t = K.select(w, s, s if ct is None else ct, ct is not None)
    elif isinstance(w, np.ndarray):
        imin, smin, jmax, smax, p, t = K.select_arrays(w, s, s if ct is None else ct,
                                                       ct is not None)
    else:
        imin, smin, jmax, smax, p, t = select(torch.as_tensor(w), torch.as_tensor(s),
                                              None if ct is None else torch.as_tensor(ct))
    return int(imin), float(smin), int(jmax), float(smax), float(p), float(t)
