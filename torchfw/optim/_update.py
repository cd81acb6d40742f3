r"""The update of :class:`torchfw.optim.StochasticFrankWolfe`, as functions of one parameter.

The optimizer class holds the groups, the state and the checks; this module holds the arithmetic
of one step for one parameter (Pokutta, Spiegel & Zimmer, 2020, Algorithm 1), for the sets and
options that :mod:`torchfw.optim._batched` (the momentum of every parameter, and the multi-tensor
steps of L-infinity, L2 and K-sparse sets) does not cover:

.. math::
    g_t &= \pm\tilde\nabla L(\theta_t) + \lambda\,\theta_t
        \qquad (- \text{ when maximizing}) \\
    d_t &= (1 - \mu)\, g_t + \mu\, d_{t-1}, \qquad d_0 = g_0 \\
    v_t &= \operatorname*{argmin}_{v \in \mathcal{C}} \langle d_t, v \rangle, \qquad
    \theta_{t+1} = \theta_t + \gamma_t\,(v_t - \theta_t),
        \qquad \gamma_t = \operatorname{clip}_{[0, 1]}(\eta\, s_t) .

Three guards sit on top of the paper's rule, each costing one elementwise pass:

* *No direction, no move.* A set (a tensor, or a row with ``per_row``) whose direction is
  exactly zero gets :math:`\gamma_t = 0`: every point of :math:`\mathcal{C}` minimizes
  :math:`\langle 0, v\rangle`, so the vertex the oracle returns is arbitrary (its tie-breaking
  rule), and moving towards it would drift the weights with no signal. For a box (and the
  L-infinity ball), which is a product of intervals, the same holds coordinate by coordinate: a
  coordinate whose direction is zero keeps its value (still a minimizer of the linear function
  over the box, so the gap is unchanged).
* *Non-finite directions show.* A NaN or infinite entry in a set's direction turns NaN every
  weight whose move reads it, as ``torch.optim.SGD`` makes a NaN gradient visible in the
  weights: the whole set (tensor or row), through a NaN :math:`\gamma_t`, because the vertex
  of a set reads its whole direction (a norm, a ranking, an argmax). A box (and the L-infinity
  ball) is a product of intervals whose vertex reads each :math:`d_i` alone, so there the
  coordinate alone turns NaN (inf as well as NaN), as SGD shows it, and the others take their
  step; with ``rescale="gradient"`` the step size reads the whole row's norm, and the whole
  row turns NaN. Without the guard the oracle would read NaN as "not positive" and quietly
  move towards a vertex. No host synchronization is needed for either guard.
* *No pointer tests.* Whether the ``(rows, n)`` view of a parameter is the parameter's own memory
  is decided from its layout (contiguous or not), not by comparing ``data_ptr()``, so the step
  traces under ``torch.compile``.

References
----------
S. Pokutta, C. Spiegel, M. Zimmer. "Deep Neural Network Training with Frank-Wolfe."
arXiv:2010.07243, 2020.
"""

from __future__ import annotations

import copy
import math
from typing import Any

import torch
from torch import Tensor

from ..sets.oracles import LMO, Box

__all__ = ["view_shape", "feasibility_atol", "row_diameters", "sgd_update",
           "frank_wolfe_update"]


def view_shape(p: Tensor, per_row: bool) -> tuple[int, int]:
    """Shape under which a parameter meets its set: (1, numel) or (rows, numel / rows)."""
    if per_row:
        return (p.shape[0], p[0].numel())
    return (1, p.numel())


def as_rows(t: Tensor, shape) -> tuple[Tensor, bool]:
    """``t`` seen as ``shape``, and whether that is a separate copy to write back.

    A view when the layout allows it (the update then lands in place); a fresh copy otherwise
    (e.g. channels_last or transposed weights).
    """
    if t.is_contiguous():
        return t.view(shape), False
    return t.reshape(shape).clone(), True


def feasibility_atol(dtype: torch.dtype) -> float:
    """Tolerance of the feasibility checks: one rounding of a convex combination, not more."""
    return math.sqrt(torch.finfo(dtype).eps)


def row_diameters(lmo: LMO, pv: Tensor) -> float | Tensor:
    """Euclidean diameter of the set of each row of ``pv`` (a float, or a (B, 1) tensor).

    Never reads a tensor back to the host, so a CUDA step does not synchronize.
    """
    n = pv.shape[-1]
    radius = getattr(lmo, "radius", None)
    if isinstance(radius, Tensor):
        # Every set of torchfw with a ``radius`` (simplex, Lp/L1/L2/Linf and group-L1 balls,
        # K-sparse polytope, nuclear-norm ball, spectraplex) is r times its unit set, so the
        # diameter scales with each row's radius: the unit set's diameter times the radii.
        # (lmo.diameter would use the largest radius for every row, and read it on the host.)
        unit: Any = copy.copy(lmo)  # any set with a radius attribute
        unit.radius = 1.0
        return unit.diameter(n) * radius.to(device=pv.device, dtype=pv.dtype).reshape(-1, 1)
    if type(lmo) is Box and (isinstance(lmo.lower, Tensor) or isinstance(lmo.upper, Tensor)):
        # Tensor bounds may differ per row: the diameter is ||upper - lower|| row by row.
        ones = torch.ones_like(pv)
        return torch.linalg.vector_norm(lmo.lmo(-ones) - lmo.lmo(ones), dim=-1, keepdim=True)
    return lmo.diameter(n)


def _lr_like(lr, like: Tensor):
    """The learning rate as a number, or as a tensor on ``like``'s device and dtype."""
    if isinstance(lr, Tensor):
        return lr.to(device=like.device, dtype=like.dtype)
    return lr


def sgd_update(p: Tensor, d: Tensor, lr) -> None:
    r"""Unconstrained group: :math:`\theta \leftarrow \theta - \eta d_t`."""
    if isinstance(lr, Tensor):
        p.sub_(d * _lr_like(lr, p))
    else:
        p.add_(d, alpha=-lr)


def step_size(group: dict, lmo: LMO, pv: Tensor, dv: Tensor, diff: Tensor):
    r""":math:`\gamma_t = \operatorname{clip}_{[0,1]}(\eta s_t)`: a number or a (B, 1) tensor."""
    lr = _lr_like(group["lr"], pv)
    rescale = group["rescale"]
    tensor_lr = isinstance(lr, Tensor)
    if rescale is None:
        return lr.clamp(0.0, 1.0) if tensor_lr else min(lr, 1.0)
    if rescale == "diameter":
        diameter = row_diameters(lmo, pv)
        if isinstance(diameter, Tensor):
            tiny = torch.finfo(pv.dtype).tiny
            return torch.where(diameter > 0, lr / diameter.clamp_min(tiny),
                               torch.ones_like(diameter)).clamp(0.0, 1.0)
        # A zero diameter means a single point: moving all the way is exact.
        if diameter == 0:
            return 1.0
        return (lr / diameter).clamp(0.0, 1.0) if tensor_lr else min(lr / diameter, 1.0)
    # "gradient": step length lr * ||d||, as SGD would take (kept on the device: no sync).
    tiny = torch.finfo(pv.dtype).tiny
    ratio = torch.linalg.vector_norm(dv, dim=-1, keepdim=True) / \
        torch.linalg.vector_norm(diff, dim=-1, keepdim=True).clamp_min(tiny)
    return (lr * ratio).clamp(0.0, 1.0)


def frank_wolfe_update(p: Tensor, d: Tensor, group: dict, state: dict,
                       gap: bool = True, lmo: LMO | None = None) -> None:
    r"""One Frank-Wolfe step of ``p`` along direction ``d``; stores the gap in ``state``.

    With ``gap`` true, ``state["fw_gap"]`` receives :math:`\langle d_t, \theta_t - v_t\rangle`,
    one value per row (0 for a row without direction, NaN for a row with a non-finite
    direction); with ``gap`` false the reduction is skipped and ``state`` is left as it is.
    ``lmo`` is the parameter's set, when its group holds one set per parameter (default: the
    group's ``lmo``).

    A declared second implementation (:mod:`torchfw.utils.twins`) of the core's
    :class:`~torchfw.FrankWolfe` step: the vertex :math:`v = \operatorname{lmo}(d)`, the move
    :math:`\theta + \gamma (v - \theta)` and the gap :math:`\langle d, \theta - v\rangle` are the
    core's, but written as batched tensor ops on the parameter's device (one step size and one
    gap per row, no host read, traceable by ``torch.compile``) where the core's engines keep
    host scalars per problem. With ``momentum=0``, ``rescale=None`` and the learning rate
    :math:`2/(k+2)` at step :math:`k` it takes the iterates and gaps of
    ``FrankWolfe(lmo, OpenLoop())`` on the same deterministic objective (the parity test in
    ``tests/test_second_implementations.py``).
    """
    if lmo is None:
        lmo = group["lmo"]  # one set for the group
    assert lmo is not None
    shape = view_shape(p, group["per_row"])
    pv, copied = as_rows(p, shape)
    dv = d.reshape(shape)
    v = lmo.lmo(dv)
    box = isinstance(lmo, Box)
    if box:
        # A box is a product of intervals: a coordinate with no direction keeps its value,
        # which minimizes <d, .> as well as the vertex the tie-break would pick, and one with
        # a non-finite direction turns NaN, that coordinate alone (its vertex reads no other).
        v = torch.where(dv == 0, pv, v)
        v = torch.where(dv.isfinite(), v, math.nan)
    diff = v - pv
    # Gap of the current iterate for this direction, one value per row; >= 0 when pv is in the
    # set because v minimizes <d, .> over it.
    if gap:
        state["fw_gap"] = -(dv * diff).sum(dim=-1)
    gamma = step_size(group, lmo, pv, dv, diff)
    if not box or group["rescale"] == "gradient":
        # largest |d| per row: 0 -> no direction, so no move; NaN/inf -> 0 * it is NaN, which
        # turns gamma (and so the row) into NaN, as SGD would show a NaN gradient. (A box
        # needs neither: its vertex keeps or NaNs each coordinate, unless gamma reads the
        # whole row's norm.)
        dmax = dv.abs().amax(dim=-1, keepdim=True)
        gamma = torch.where(dmax == 0, torch.zeros_like(dmax), gamma + dmax * 0)
    # lerp is exact at the end points (gamma = 1 lands on the vertex), which keeps iterates
    # feasible up to one rounding of a convex combination.
    pv.lerp_(v, gamma)
    if copied:
        p.copy_(pv.view(p.shape))
