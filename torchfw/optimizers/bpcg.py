r"""Blended pairwise conditional gradient (BPCG; Tsuji, Tanaka & Pokutta, ICML 2022)."""

from __future__ import annotations

import torch

from ..linesearch import Line
from ..utils.scalars import HOST
from ._engine import Coefficients
from ._vertices import ActiveSetSolver

__all__ = ["BlendedPairwiseConditionalGradient"]


class BlendedPairwiseConditionalGradient(ActiveSetSolver):
    r"""Blended pairwise conditional gradient: local pairwise steps while they gain as much.

    With :math:`S` the active set, :math:`a = \operatorname{argmax}_{u\in S}\langle\nabla f,
    u\rangle` (the away vertex), :math:`s = \operatorname{argmin}_{u\in S}\langle\nabla f,
    u\rangle` (the local FW vertex) and :math:`v` the LMO vertex, each iteration takes

    .. math::
        \text{a local pairwise step along } s - a,\ \gamma \le w_a, &\quad\text{if }
        \langle \nabla f, a - s\rangle \ge \langle\nabla f, x - v\rangle, \\
        \text{a Frank-Wolfe step toward } v &\quad\text{otherwise}.

    Local steps never add a vertex (they drop ``a`` when :math:`\gamma = w_a`), so the active set
    stays small and the iterate sparse; the rate is linear for strongly convex objectives over
    polytopes, with the same constants as pairwise FW but fewer swap steps (Tsuji, Tanaka &
    Pokutta, "Pairwise conditional gradients without swap steps and sparser kernel herding",
    ICML 2022, Algorithm 1; FrankWolfe.jl's ``blended_pairwise_conditional_gradient``).

    Works over every set: over the simplex and the L1 ball the engine's indexed weights are the
    active set (every execution, the incremental quadratic engine included); over the other sets
    (:mod:`torchfw.sets.polytopes`, :mod:`torchfw.sets.spectral`, balls) the vertices returned by the LMO
    are kept densely, and each local step costs one objective evaluation like a FW step.
    The result carries :attr:`~torchfw.Result.active_set`, and ``minimize(..., active_set=...)``
    starts from one. Step counters: ``fw``, ``local``, ``drop``.
    """

    uses_pairs = True

    def _make_engine(self, objective, x0, line_search):
        engine, execution = super()._make_engine(objective, x0, line_search)
        self._active = None if engine.atomic else self._vertex_active_set(x0)
        return engine, execution

    def _step(self, eng) -> None:
        if self._active is None:
            self._step_indexed(eng)
        else:
            self._step_dense(eng)

    def _step_indexed(self, eng) -> None:
        ops = eng.ops
        toward = eng.toward()
        local = eng.pairwise(restricted=True)
        # Both slopes are minus a gap: the local gap <g, a - s> against the FW gap <g, x - v>.
        use_local = local.line.slope <= toward.line.slope
        state = {}

        def local_coefficients():
            gamma = self._ls.step(local.line, eng.k)
            state["drop"] = ops.logical_and(gamma >= local.line.gamma_max, gamma > 0)
            return local.coefficients(gamma)

        def fw_coefficients():
            return toward.coefficients(self._ls.step(toward.line, eng.k))

        eng.apply(eng.choose(use_local, local_coefficients, fw_coefficients))
        eng.count("local", use_local)
        eng.count("fw", ops.logical_not(use_local))
        if "drop" in state:
            eng.count("drop", ops.logical_and(use_local, state["drop"]))

    def _step_dense(self, eng) -> None:
        active = self._active
        g = eng.g
        scores = active.scores(g)
        away = int(scores.argmax())
        local = int(scores.argmin())
        local_gap = float(scores[away] - scores[local])
        if len(active.weights) > 1 and local_gap >= float(eng.gap()):
            direction = (active.atoms[local] - active.atoms[away]).reshape(eng.point().shape)
            gamma_max = float(active.weights[away])
            line = self._dense_line(eng, direction, -local_gap, gamma_max)
            gamma = float(self._ls.step(line, eng.k))
            # x + gamma (s - a): the engine's dense update a * x + b * i with i the direction.
            eng.apply(Coefficients(a=1.0, b=gamma, i=direction))
            drop = gamma >= gamma_max
            active.shift(local, away, gamma, drop)
            eng.count("local")
            eng.count("drop", drop and gamma > 0)
            return
        v = eng.vertex.clone()
        move = eng.toward()
        gamma = float(self._ls.step(move.line, eng.k))
        eng.apply(move.coefficients(gamma))
        active.toward(v, gamma)
        eng.count("fw")

    @staticmethod
    def _dense_line(eng, direction, slope: float, gamma_max: float) -> Line:
        objective = eng.objective
        x = eng.point()
        curvature = float(objective.curvature(direction)) if objective.has_curvature else None
        flat = direction.reshape(-1)

        def phi(gamma):
            with torch.no_grad():
                # The very point apply() will produce (1.0 * x + gamma * d), to the last bit.
                return float(objective.value(1.0 * x + gamma * direction))

        return Line(value=float(eng.value()), slope=slope, gamma_max=gamma_max,
                    curvature=curvature, phi=phi, dnorm2=float(flat @ flat), ops=HOST)
