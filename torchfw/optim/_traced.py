r"""The Frank-Wolfe step of L-infinity and L2 balls as ``torch.compile`` traces it best.

:mod:`torchfw.optim._batched` moves many tensors with multi-tensor (``torch._foreach_*``) calls,
which is what an eager step wants: one dispatch for all tensors. Under ``torch.compile`` the
dispatches are gone, and what counts is how many times the generated code walks over the
memory. Inductor fuses a chain of per-tensor operations into one loop per tensor, but it does
not fuse a chain of multi-tensor calls through the per-tensor step sizes they unbind (on the
CPU the fused step took twice the time of the same arithmetic written per tensor). So a
compiled step writes the same update here, one tensor at a time.

* L-infinity ball: the vertex :math:`v_i = -r\,\mathrm{sign}(d_i)`, :math:`v_i = \theta_i`
  where :math:`d_i = 0` (the coordinate keeps its value) and :math:`v_i` NaN where :math:`d_i`
  is not finite, then :math:`\theta \leftarrow \mathrm{lerp}(\theta, v, \gamma)`, the eager
  step's arithmetic. Every entry's move reads its own :math:`d_i` only, so inductor makes one
  loop per tensor of the momentum average and the move, as it does of the reference step of
  ``benchmarks/sfw_step.py``. (A guard over the whole tensor, a reduction that every entry's
  move would read before the momentum buffer is overwritten in place, made it two loops per
  tensor: 1.4 to 1.7 times the reference's step on the digits CNN and the MLP
  256-512-512-10.) The selects cost less than :math:`\theta - \gamma\,s(r + s\theta)`, and
  ``|d_i| < inf`` less than ``isfinite``, in the generated code.
* L2 ball, :math:`u = \theta + (r / \|d\|_2)\, d` (the norm in float64 for lower precisions;
  :math:`u = \theta` when :math:`d = 0`), and :math:`\theta \leftarrow \theta - \gamma' u`
  with :math:`\gamma' = 0` when :math:`d = 0` (no direction, no move) and
  :math:`\gamma' = \gamma + 0 \cdot x`, :math:`x` the gap :math:`\langle d, u\rangle` when it
  is tracked, else :math:`\|d\|_2`: NaN exactly when the direction is not finite, which turns
  the whole tensor NaN, as the eager update does (the vertex reads the whole direction through
  its norm anyway, so that reduction is needed for the move itself).

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
    r"""L-infinity balls: :math:`\theta \leftarrow \theta + \gamma (v - \theta)`, per entry.

    :math:`v_i = \mp r` for :math:`d_i \gtrless 0`, :math:`\theta_i` for :math:`d_i = 0`, NaN
    for a non-finite :math:`d_i` (inf as loud as NaN). ``radii`` holds :math:`r` and ``steps``
    :math:`\gamma` per tensor (a float, or a 0-d tensor for a tensor learning rate). Returns
    the gaps :math:`\langle d, \theta - v\rangle` (one ``(1,)`` tensor per parameter) when
    ``gaps`` is true, else ``None``.
    """
    out: list[Tensor] = []
    for p, d, r, gamma in zip(params, ds, radii, steps, strict=True):
        # r as a 0-d tensor of the parameter's dtype: a select between two Python numbers
        # would give the default dtype, and round r to float32 in a float64 step
        radius = torch.full((), r, dtype=p.dtype, device=p.device)
        v = torch.where(d > 0, -radius, radius)
        v = torch.where(d == 0, p, v)
        # |d_i| < inf is false for inf and NaN alike (inductor's sign() of a NaN is 0, so the
        # vertex alone would not show it)
        v = torch.where(d.abs() < float("inf"), v, float("nan"))
        if gaps:
            out.append(_gap(d, p - v))
        p.lerp_(v, gamma)
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
