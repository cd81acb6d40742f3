"""The generic engine: any objective (autograd gradient) over any set, host scalars.

One concern: Frank-Wolfe moves for objectives without a closed-form line (each applied move
costs one objective and gradient evaluation). On atomic sets it keeps the weights over atoms
next to the point, so that the active-set variants work for every objective; on other sets
only FW and PARTAN moves exist. Quadratics over atomic sets run on the incremental engine
(:mod:`torchfw.optimizers._engine`) instead.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import cast

import torch
from torch import Tensor

from ..linesearch import Line
from ..objectives import Objective
from ..sets.oracles import LMO, AtomicLMO, Simplex
from ..utils.scalars import HOST
from ._moves import ZERO_TOL, Coefficients, Move
from ._state import EngineState, choose

__all__ = ["GenericEngine"]



class GenericEngine(EngineState):
    """Engine for any objective (autograd gradient) and any set, with host scalars.

    On atomic sets it keeps the weights over atoms next to the point, so that active-set moves
    (away, pairwise) work for every objective; on other sets only FW and PARTAN moves exist.
    Each applied move costs one objective and gradient evaluation.
    """

    ops = HOST

    def choose(self, cond, if_true: Callable[[], Coefficients],
               if_false: Callable[[], Coefficients]) -> Coefficients:
        """Coefficients of one of two moves (only the chosen one is evaluated)."""
        return choose(self.ops, cond, if_true, if_false)

    def __init__(self, objective: Objective, lmo: LMO, x0: Tensor, *, keep_previous: bool = False,
                 sample: Callable | None = None, w0: Tensor | None = None):
        self.objective = objective
        self.lmo = lmo
        self.atomic = lmo.is_atomic
        # The same set seen through its atoms: read only where ``self.atomic`` holds.
        self._atoms = cast(AtomicLMO, lmo)
        self.w: Tensor | None
        self.w_prev: Tensor | None
        self.keep_previous = keep_previous
        self.sample = sample
        self.n = x0.shape[-1]
        self.dtype = x0.dtype
        if self.atomic:
            self.w = (w0 if w0 is not None else self._atoms.to_weights(x0)).clone()
            self.x = self._atoms.to_point(self.w)
        else:
            self.w = None
            self.x = x0.clone()
        if keep_previous:
            self.x_prev = self.x.clone()
            self.w_prev = self.w.clone() if self.w is not None else None
        self._init_counters(x0.device)
        self._evaluate()

    def _evaluate(self) -> None:
        f, g = self.objective.value_and_grad(self.x)
        self.f = float(f)
        self.g = g.detach()
        if self.atomic:
            w = self._atom_weights()
            self.scores = self._atoms.atom_scores(self.g)
            self.p = float(torch.dot(self.scores, w))
            self.i_min = int(torch.argmin(self.scores))
            self.s_min = float(self.scores[self.i_min])
            active = w > 0
            masked_max = torch.where(active, self.scores, torch.full_like(self.scores, -math.inf))
            masked_min = torch.where(active, self.scores, torch.full_like(self.scores, math.inf))
            self.j_max = int(torch.argmax(masked_max))
            self.s_max = float(masked_max[self.j_max])
            self.i_act_min = int(torch.argmin(masked_min))
            self.s_act_min = float(masked_min[self.i_act_min])
            self.n_active = int(active.sum())
            if self.sample is not None:
                self.i_fw = int(self.sample(self.scores))
                self.s_fw = float(self.scores[self.i_fw])
            else:
                self.i_fw, self.s_fw = self.i_min, self.s_min
        else:
            self.vertex = self.lmo.lmo(self.g)
            self.p = float(torch.dot(self.g.flatten(), self.x.flatten()))
            self.s_min = float(torch.dot(self.g.flatten(), self.vertex.flatten()))

    def _atom_weights(self) -> Tensor:
        """``w`` on an atomic set (weights, and the moves that read them, exist only there)."""
        assert self.w is not None, "weights over atoms exist only on atomic sets"
        return self.w

    def value(self):
        return self.f

    def gap(self):
        return self.p - self.s_min

    def active_min(self):
        return self.i_act_min, self.s_act_min

    def point(self) -> Tensor:
        return self.x

    def weights(self) -> Tensor | None:
        return self.w

    #: What :meth:`snapshot` keeps: the point and everything evaluated at it.
    _STATE: tuple[str, ...] = (
        "x", "w", "x_prev", "w_prev", "f", "g", "scores", "vertex", "p", "i_min", "s_min",
        "j_max", "s_max", "i_act_min", "s_act_min", "n_active", "i_fw", "s_fw")

    def snapshot(self):
        # The evaluated state, not just the point: restoring after a NaN must not call the
        # objective again (it may be what turned NaN), or the returned value and gap are NaN.
        return {k: v.clone() if isinstance(v, Tensor) else v
                for k, v in vars(self).items() if k in self._STATE}

    def restore(self, snap) -> None:
        for k, v in snap.items():
            setattr(self, k, v.clone() if isinstance(v, Tensor) else v)

    # -- moves ---------------------------------------------------------------------------------

    def _atom(self, k) -> Tensor:
        return self._atoms.atom(k, self.n, dtype=self.dtype, device=self.x.device)

    def _line(self, d_x: Tensor, slope: float, gamma_max, base: Tensor | None = None,
              value: float | None = None) -> Line:
        base = self.x if base is None else base
        value = self.f if value is None else value
        curvature = (float(self.objective.curvature(d_x))
                     if self.objective.has_curvature else None)

        def phi(gamma):
            with torch.no_grad():
                return float(self.objective.value(base + gamma * d_x))

        return Line(value=value, slope=slope, gamma_max=gamma_max, curvature=curvature,
                    phi=phi, dnorm2=float(torch.dot(d_x.flatten(), d_x.flatten())), ops=HOST)

    def _move(self, kind: str, line: Line, to_coefficients) -> Move:
        """A move whose ``phi`` evaluates ``f`` at the very point :meth:`apply` would produce.

        ``f(x + gamma d)`` and ``f`` at ``(1 - gamma) x + gamma v`` differ by rounding; near
        convergence that was enough for an accepted backtracking step to raise ``f`` by an ulp.
        """
        def phi(gamma):
            with torch.no_grad():
                return float(self.objective.value(self._combine(to_coefficients(gamma))[1]))

        line.phi = phi
        return Move(kind, line, to_coefficients)

    def toward(self, restricted: bool = False) -> Move:
        if not self.atomic:
            v = self.vertex
            d_x = v - self.x
            line = self._line(d_x, self.s_min - self.p, 1.0)
            return self._move("fw", line, lambda g: Coefficients(a=1.0 - g, b=g, i=v))
        i, si = self.active_min() if restricted else (self.i_fw, self.s_fw)
        d_x = self._atom(i) - self.x
        line = self._line(d_x, si - self.p, 1.0)
        return self._move("fw", line, lambda g: Coefficients(a=1.0 - g, b=g, i=i))

    def away(self) -> Move:
        j, sj = self.j_max, self.s_max
        wj = float(self._atom_weights()[j])
        gamma_max = wj / (1.0 - wj) if wj < 1.0 else 0.0
        d_x = self.x - self._atom(j)
        line = self._line(d_x, self.p - sj, gamma_max)
        return self._move("away", line, lambda g: Coefficients(a=1.0 + g, b=-g, i=j))

    def pairwise(self, restricted: bool = False, partner=None) -> Move:
        i, si = self.active_min() if restricted else (self.i_fw, self.s_fw)
        j = self.j_max if partner is None else partner
        sj = float(self.scores[j])
        d_x = self._atom(i) - self._atom(j)
        line = self._line(d_x, si - sj, float(self._atom_weights()[j]))
        return self._move("pairwise", line, lambda g: Coefficients(a=1.0, b=g, i=i, c=-g, j=j))

    def second_order_partner(self):
        raise ValueError("the second-order SWAP rule needs a torchfw.Quadratic objective")

    def extrapolation(self, fw: Move, lam) -> Move:
        co = fw.coefficients(lam)
        x_t = self._combine(co)[1]
        w_t = self._combine(co)[0]
        f_t, g_t = self.objective.value_and_grad(x_t)
        delta_x = x_t - self.x_prev
        slope = float(torch.dot(g_t.flatten(), delta_x.flatten()))
        sigma = -1.0 if slope > 0 else 1.0
        if self.atomic:
            assert w_t is not None and self.w_prev is not None  # atomic sets carry weights
            delta_w = w_t - self.w_prev
            step_max = Simplex().max_step(w_t, sigma * delta_w)
        else:
            step_max = self.lmo.max_step(x_t, sigma * delta_x)
        line = self._line(sigma * delta_x, sigma * slope, float(step_max), base=x_t,
                          value=float(f_t))
        a0, b0 = co.a, co.b

        def to_coefficients(gamma):
            mu = sigma * gamma
            return Coefficients(a=(1.0 + mu) * a0, b=(1.0 + mu) * b0, i=co.i, d=-mu)

        return self._move("partan", line, to_coefficients)

    # -- update --------------------------------------------------------------------------------

    def _combine(self, co: Coefficients) -> tuple[Tensor | None, Tensor]:
        """New (weights, point) for coefficients ``co`` without changing the state."""
        if co.a == 1.0 and co.b == 0.0 and co.c == 0.0 and co.d == 0.0:
            # A null step (gamma = 0) must leave the point bit-identical: renormalizing the
            # weights would move it by an ulp and could raise f.
            return (None if self.w is None else self.w.clone()), self.x.clone()
        if self.atomic:
            w = co.a * self.w
            w[co.i] += co.b
            if co.j is not None:
                w[co.j] += co.c
            if self.keep_previous and co.d != 0.0:
                w = w + co.d * self.w_prev
            w = torch.where(w <= ZERO_TOL, torch.zeros_like(w), w)
            # Keep the weights on the unit simplex: an extrapolation (1 + mu) w~ - mu w_prev
            # multiplies the rounding error of sum(w) by 1 + 2|mu|, and PARTAN's mu grows near
            # the optimum: unchecked, the error compounded into infeasible iterates (1e-5).
            w = w / w.sum()
            return w, self._atoms.to_point(w)
        x = co.a * self.x + co.b * co.i
        if self.keep_previous and co.d != 0.0:
            x = x + co.d * self.x_prev
        return None, x

    def apply(self, co: Coefficients, tick: bool = True) -> None:
        w, x = self._combine(co)
        if self.keep_previous:
            self.x_prev = self.x
            self.w_prev = self.w
        self.w, self.x = w, x
        self._evaluate()
        if tick:
            self.tick()
