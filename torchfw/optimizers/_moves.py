r"""The scalar algebra of the simplex/L1 family, written once: moves, exact lines, PARTAN.

One concern: the closed-form numbers of a Frank-Wolfe iteration over an atomic set, independent
of where the vectors live. Every engine (host, device, streaming, batched, sharded) reads a few
entries through its storage (:mod:`torchfw.optimizers._storage`) and hands them to these
functions; none of them repeats a formula.

Every move is the affine update

.. math:: w \leftarrow a\, w + b\, e_i + c\, e_j + d\, w_{\text{prev}}

of the weights over the set's atoms (on a non-atomic set, of the point itself with ``e_i`` a
dense vertex), described by :class:`Coefficients`. The coefficients always sum to one, so the
gradient follows the same combination of *vertex gradients* :math:`h_k = \nabla F(e_k)`:
:math:`s \leftarrow a s + b h_i + c h_j + d s_{\text{prev}}`.

For :math:`F(w) = \tfrac12 w^\top \tilde Q w + \tilde c^\top w` with the scalars
:math:`p = w^\top s`, :math:`t = \tilde c^\top w`, :math:`q = w^\top \tilde Q w = p - t` and
:math:`u_k = s_k - \tilde c_k = (\tilde Q w)_k`, the lines of the moves have closed-form
curvatures (Frandi, Ñanculef & Suykens, seed 002, appendix; Allende et al., seed 000, eq. 19):

* toward :math:`e_i` (FW): :math:`\|e_i - w\|^2_{\tilde Q} = \tilde Q_{ii} - 2 u_i + q`;
* away from :math:`e_j`: the same with :math:`j`, and :math:`\gamma_{\max} = w_j / (1 - w_j)`;
* pairwise :math:`e_i - e_j`: :math:`\tilde Q_{ii} + \tilde Q_{jj} - 2 \tilde Q_{ij}`,
  :math:`\gamma_{\max} = w_j`;
* PARTAN (:func:`partan_line`): the value, slope and curvature along
  :math:`\tilde w - w_{\text{prev}}` from :math:`W = w^\top \tilde Q w_{\text{prev}}`, kept by
  :func:`cross_after` at every move.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import torch
from torch import Tensor

from ..linesearch import Line
from ..utils.scalars import Scalars

__all__ = ["ZERO_TOL", "Coefficients", "Move", "ops_abs", "toward_curvature", "away_step_max",
           "pair_curvature", "cross_after", "cross_after_scalars", "partan_line",
           "partan_scalars", "partan_move", "replace_gamma_max"]

#: Weights at or below this value are set to exactly zero after each update (drop steps and
#: rounding). Weights live on the unit simplex, so this is far below any meaningful mass.
ZERO_TOL = 1e-15


@dataclass
class Coefficients:
    """``w <- a w + b e_i + c e_j + d w_prev``; ``drop`` zeroes ``w_j`` exactly afterwards."""

    a: Any
    b: Any
    i: Any
    c: Any = 0.0
    j: Any = None
    d: Any = 0.0

    def where(self, cond, other: Coefficients, ops: Scalars) -> Coefficients:
        """Coefficients of ``self`` where ``cond`` holds, else of ``other`` (branch-free)."""
        if not ops.on_device:
            return self if cond else other
        j_self = self.j if self.j is not None else self.i
        j_other = other.j if other.j is not None else other.i
        return Coefficients(
            a=ops.where(cond, self.a, other.a), b=ops.where(cond, self.b, other.b),
            i=torch.where(cond, self.i, other.i), c=ops.where(cond, self.c, other.c),
            j=torch.where(cond, j_self, j_other), d=ops.where(cond, self.d, other.d))


@dataclass
class Move:
    """A candidate step: the line it searches and how a step size becomes coefficients."""

    kind: str
    line: Line
    to_coefficients: Callable[[Any], Coefficients]

    def coefficients(self, gamma) -> Coefficients:
        return self.to_coefficients(gamma)


def ops_abs(x):
    """``|x|`` for a float or a tensor."""
    return x.abs() if isinstance(x, Tensor) else abs(x)


def toward_curvature(diag_i, u_i, q):
    r""":math:`\|e_i - w\|^2_{\tilde Q} = \tilde Q_{ii} - 2 u_i + q` (FW and away lines)."""
    return diag_i - 2.0 * u_i + q


def away_step_max(w_j, ops: Scalars):
    r""":math:`w_j / (1 - w_j)`, the away step that drops atom ``j`` (0 when ``w = e_j``)."""
    return ops.where(w_j < 1.0, w_j / ops.maximum(1.0 - w_j, 1e-300), 0.0)


def pair_curvature(diag_i, diag_j, q_ij):
    r""":math:`\|e_i - e_j\|^2_{\tilde Q} = \tilde Q_{ii} + \tilde Q_{jj} - 2 \tilde Q_{ij}`."""
    return diag_i + diag_j - 2.0 * q_ij


def second_order_gain(diff, curvature):
    r"""SWAP-2o's score of moving mass from atom ``j`` to the FW atom ``i``:
    :math:`(s_j - s_i)^2 / \max(q_{ij}, 10^{-300})` with ``diff`` :math:`= s_j - s_i` and
    ``curvature`` :math:`q_{ij}` the pair curvature (:func:`pair_curvature`).

    Twice the second-order decrease of the unconstrained pairwise step (seed 000, SWAP-2o);
    the factor is dropped, the partner is its argmax. Host floats only (compiled in the
    kernels' partner search, and read by the sharded storage, which compares ranks' best
    partners by it): a NaN curvature stays NaN.
    """
    if curvature <= 1e-300:
        curvature = 1e-300
    return diff * diff / curvature


def cross_after(co: Coefficients, q, u_i, u_j, W):
    r"""The PARTAN cross term after a move: :math:`W' = w_{\text{new}}^\top \tilde Q w`.

    With :math:`w_{\text{new}} = a w + b e_i + c e_j + d w_{\text{prev}}`:
    :math:`W' = a q + b u_i + c u_j + d W`, all read *before* the move (``q``, ``u`` and ``W``
    are those of the current iterate).
    """
    return cross_after_scalars(co.a, co.b, co.c, co.d, q, u_i, u_j, W)


def cross_after_scalars(a, b, c, d, q, u_i, u_j, W):
    r""":func:`cross_after` from the move's coefficients as scalars (also compiled: the one
    compiled quadratic loop, :mod:`torchfw.optimizers._compiled_loop`)."""
    return a * q + b * u_i + c * u_j + d * W


def partan_line(fw_line: Line, lam, constant, t, c_i, W, u_prev_i, p_prev, t_prev):
    r"""Scalars of the PARTAN line from the FW point :math:`\tilde w = (1-\lambda) w +
    \lambda e_i`, from cached scalars only (seed 002, appendix).

    Returns ``(f_t, slope, curvature, noise)``: :math:`F(\tilde w)` without the objective's
    constant, :math:`\langle\nabla F(\tilde w), \delta\rangle` and :math:`\|\delta\|^2_{\tilde Q}`
    for :math:`\delta = \tilde w - w_{\text{prev}}`, and the rounding noise of that curvature
    (a difference of O(1) terms). The arithmetic is :func:`partan_scalars`.
    """
    return partan_scalars(fw_line.value, fw_line.slope, fw_line.curvature, lam, constant, t,
                          c_i, W, u_prev_i, p_prev, t_prev)


def partan_scalars(value, fw_slope, fw_curvature, lam, constant, t, c_i, W, u_prev_i, p_prev,
                   t_prev):
    r""":func:`partan_line` from the FW line's value, slope and curvature as scalars.

    Floats or tensors (``abs`` is the tensors' ``abs()``), and compiled by numba for the one
    compiled quadratic loop (:mod:`torchfw.optimizers._compiled_loop`): the formulas once.
    """
    f_t = value + lam * fw_slope + 0.5 * lam * lam * fw_curvature - constant
    t_t = (1.0 - lam) * t + lam * c_i
    p_t = 2.0 * f_t - t_t                       # w~' s~
    cross = (1.0 - lam) * W + lam * u_prev_i    # w~' Q~ w_prev
    q_t = p_t - t_t
    q_prev = p_prev - t_prev
    slope = p_t - (cross + t_prev)              # <s~, w~ - w_prev>
    curvature = q_t - 2.0 * cross + q_prev      # ||w~ - w_prev||^2_Q~
    noise = 1e-11 * (abs(q_t) + 2.0 * abs(cross) + abs(q_prev))
    return f_t, slope, curvature, noise


def partan_move(value, slope, curvature, noise, lo, hi, lam, i, ops) -> Move:
    r"""The PARTAN extrapolation as a move along :math:`\sigma\delta` from the FW point.

    ``value`` is :math:`F(\tilde w)`, ``slope`` :math:`\langle\nabla F(\tilde w), \delta\rangle`
    and ``curvature`` :math:`\|\delta\|^2_Q` for :math:`\delta = \tilde w - w_{prev}`;
    ``[lo, hi]`` are the feasible :math:`\mu`. The line is oriented so that it descends
    (:math:`\sigma = -\operatorname{sign}` of the slope), and the new weights are
    :math:`(1+\mu)\tilde w - \mu w_{prev}` with :math:`\tilde w = (1-\lambda) w + \lambda e_i`.
    """
    sigma = ops.where(slope > 0.0, -1.0, 1.0)
    gamma_max = ops.where(slope > 0.0, -lo, hi)
    # The curvature is a difference of O(1) terms; near convergence it drops below their
    # rounding noise (and may even come out negative), and an "exact" step along such a line
    # explodes. There the extrapolation gains nothing anyway: skip it.
    gamma_max = ops.where(curvature > noise, gamma_max, 0.0)
    line = Line(value=value, slope=sigma * slope, gamma_max=gamma_max, curvature=curvature,
                ops=ops)
    line.phi = lambda g: line.value + g * line.slope + 0.5 * g * g * curvature

    def to_coefficients(gamma):
        mu = sigma * gamma
        return Coefficients(a=(1.0 + mu) * (1.0 - lam), b=(1.0 + mu) * lam, i=i, d=-mu)

    return Move("partan", line, to_coefficients)


def replace_gamma_max(line: Line, gamma_max) -> Line:
    """Copy of ``line`` with another maximal step."""
    return replace(line, gamma_max=gamma_max)
