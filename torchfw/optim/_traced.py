r"""The Frank-Wolfe step of L-infinity and L2 balls as ``torch.compile`` traces it best.

:mod:`torchfw.optim._batched` moves many tensors with multi-tensor (``torch._foreach_*``) calls,
which is what an eager step wants: one dispatch for all tensors. Under ``torch.compile`` the
dispatches are gone, and what counts is how many times the generated code walks over the
memory. Inductor fuses a chain of per-tensor operations into one loop per tensor, but it does
not fuse a chain of multi-tensor calls through the per-tensor step sizes they unbind (on the
CPU the fused step took twice the time of the same arithmetic written per tensor). So a
compiled step writes the same update here, one tensor at a time, and the compiler makes of it,
for each tensor, one loop that takes the momentum average and the guard's reduction and one
loop that moves the parameter.

The arithmetic is :mod:`torchfw.optim._batched`'s device form, operation for operation:

* L-infinity ball, :math:`s = \mathrm{sign}(d)`, :math:`u = \theta - v = s\,(r + s\,\theta)`
  (0 where :math:`d_i = 0`: the coordinate keeps its value), and
  :math:`\theta \leftarrow \theta - \gamma' u`;
* L2 ball, :math:`u = \theta + (r / \|d\|_2)\, d` (the norm in float64 for lower precisions;
  :math:`u = \theta` when :math:`d = 0`), and :math:`\theta \leftarrow \theta - \gamma' u`
  with :math:`\gamma' = 0` when :math:`d = 0` (no direction, no move);

with the guard :math:`\gamma' = \gamma + 0 \cdot x`, :math:`x` the gap
:math:`\langle d, u\rangle` when it is tracked, else :math:`\|d\|_2` taken in float64 (its
squares cannot overflow for float32 entries and lower; float64 directions take
:math:`\max_i |d_i|` in the L-infinity step): NaN exactly when the direction is not finite,
which turns the whole tensor NaN, as the per-tensor update does.

Why two loops per tensor, where the reference step of ``benchmarks/sfw_step.py`` (which has no
guard) takes one: the guard is a reduction over the whole direction that the move of every
entry depends on, so inductor computes it in a loop of its own before the move. The move's
loop cannot hold it: a reduction may follow a loop of the same entries in it (inductor fuses
a pointwise node and a reduction that reads its output), but this one reads the direction
before the move overwrites the momentum buffer in place, and the whole tensor must turn NaN
only after the reduction is complete -- an in-place fill behind a condition, which neither
``torch.cond`` (no input mutation in its branches) nor a pointwise kernel expresses. An
opaque kernel (a custom operator) moving in one pass costs more in the compiled wrapper than
the loop it saves: on a 2-core Xeon, the update alone through one numba operator took 60 us
against 37 us for the reference's compiled loops on the digits MLP's tensors, and 335 us
against 280 us on those of the MLP 256-512-512-10.

References
----------
S. Pokutta, C. Spiegel, M. Zimmer. "Deep Neural Network Training with Frank-Wolfe."
arXiv:2010.07243, 2020.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

__all__ = ["linf_traced", "l2_traced"]


def _gap(d: Tensor, u: Tensor) -> Tensor:
    """:math:`\\langle d, u \\rangle` as a ``(1,)`` tensor: the gap of a set viewed as one row."""
    return torch.dot(d.reshape(-1), u.reshape(-1)).reshape(1)


def _move(p: Tensor, u: Tensor, step: Tensor) -> None:
    r""":math:`\theta \leftarrow \theta - \gamma' u`, with the multi-tensor form's operation (a
    one-tensor ``_foreach_addcmul_``), so that a compiled step rounds as an eager one: the
    compiler rewrites ``Tensor.addcmul_`` into another order of operations."""
    torch._foreach_addcmul_([p], [u], [step], value=-1.0)


def linf_traced(params: list[Tensor], ds: list[Tensor], radii: Sequence[float],
                steps: Sequence[float | Tensor], gaps: bool) -> list[Tensor] | None:
    r"""L-infinity balls: :math:`\theta \leftarrow \theta - \gamma' s (r + s\theta)`.

    ``radii`` holds :math:`r` and ``steps`` :math:`\gamma` per tensor (a float, or a 0-d tensor
    for a tensor learning rate). Returns the gaps :math:`\langle d, \theta - v\rangle` (one
    ``(1,)`` tensor per parameter) when ``gaps`` is true, else ``None``.
    """
    out: list[Tensor] = []
    for p, d, r, gamma in zip(params, ds, radii, steps, strict=True):
        s = torch.sign(d)
        u = (s * p + r) * s  # theta - v, 0 where d == 0
        if gaps:
            gap = _gap(d, u)
            out.append(gap)
            guard = gap.reshape(())
        elif d.dtype == torch.float64:
            guard = d.abs().amax()
        else:
            # a float64 sum of squares: on the CPU a cheaper pass than a NaN-propagating
            # maximum of float32 entries (93 against 104 us a step of the digits CNN)
            guard = torch.linalg.vector_norm(d, dtype=torch.float64)
        _move(p, u, (guard * 0.0 + gamma).to(p.dtype))
    return out if gaps else None


def l2_traced(params: list[Tensor], ds: list[Tensor], radii: Sequence[float],
              steps: Sequence[float | Tensor], gaps: bool) -> list[Tensor] | None:
    r"""L2 balls: :math:`\theta \leftarrow \theta - \gamma' (\theta + r d / \|d\|)`.

    As :func:`linf_traced`: one radius and one step size per tensor, the gaps when ``gaps`` is
    true.
    """
    out: list[Tensor] = []
    for p, d, r, gamma in zip(params, ds, radii, steps, strict=True):
        wide = torch.float64 if torch.finfo(d.dtype).bits < 64 else None
        norm = torch.linalg.vector_norm(d, dtype=wide)
        coef = (r / torch.where(norm > 0, norm, 1.0)).to(p.dtype)
        # theta - v (theta itself when d == 0), as the multi-tensor form rounds it
        u = torch._foreach_addcmul([p], [d], [coef])[0]
        if gaps:
            gap = _gap(d, u)
            out.append(gap)
            guard = gap.reshape(()).to(norm.dtype)
        else:
            guard = norm
        step = (guard * 0.0 + gamma).to(p.dtype) * norm.sign().to(p.dtype)
        _move(p, u, step)
    return out if gaps else None
