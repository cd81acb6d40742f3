r"""Wolfe's away-step Frank-Wolfe (MFW) and the pairwise variant."""

from __future__ import annotations

from ._compiled_loop import AWAY, PAIRWISE
from .base import ConstrainedOptimizer

__all__ = ["AwayStepFrankWolfe", "PairwiseFrankWolfe"]


class AwayStepFrankWolfe(ConstrainedOptimizer):
    r"""Frank-Wolfe with away steps (Wolfe 1970; "MFW" in seeds 000-002).

    Each iteration compares the FW direction :math:`d_{FW} = v - x` with the away direction
    :math:`d_A = x - a`, where :math:`a` is the active atom of largest gradient, and takes the one
    with the steeper slope:

    .. math::
        \text{FW if } \langle -\nabla f, d_{FW}\rangle \ge \langle -\nabla f, d_A\rangle,
        \qquad \gamma_{\max} = 1 \text{ (FW)}, \quad
        \gamma_{\max} = \frac{w_a}{1 - w_a} \text{ (away)}.

    An away step taken to :math:`\gamma_{\max}` removes ``a`` from the active set (a *drop*
    step). For strongly convex objectives over polytopes the rate is linear (Guélat & Marcotte
    1986; Lacoste-Julien & Jaggi 2015). Needs a set with indexed atoms (Simplex, L1Ball).
    Step counters: ``fw``, ``away``, ``drop``.
    """

    needs_atoms = True
    dense_variant = AWAY

    def _step(self, eng) -> None:
        ops = eng.ops
        toward = eng.toward()
        away = eng.away()
        use_fw = toward.line.slope <= away.line.slope
        state = {}

        def fw_coefficients():
            return toward.coefficients(self._ls.step(toward.line, eng.k))

        def away_coefficients():
            gamma = self._ls.step(away.line, eng.k)
            state["drop"] = gamma >= away.line.gamma_max
            return away.coefficients(gamma)

        eng.apply(eng.choose(use_fw, fw_coefficients, away_coefficients))
        eng.count("fw", use_fw)
        eng.count("away", ops.logical_not(use_fw))
        if "drop" in state:
            eng.count("drop", ops.logical_and(ops.logical_not(use_fw),
                                              ops.logical_and(state["drop"],
                                                              away.line.gamma_max > 0)))


class PairwiseFrankWolfe(ConstrainedOptimizer):
    r"""Pairwise Frank-Wolfe (Mitchell-Demyanov-Malozemov; Lacoste-Julien & Jaggi 2015).

    Moves mass from the away atom :math:`a` to the FW atom :math:`v` along
    :math:`d = v - a`, with :math:`\gamma_{\max} = w_a` (the away weight, not 1: FrankWolfe.jl
    issue #317). Only two weights change per step. Linear convergence for strongly convex
    objectives over polytopes. Step counters: ``pairwise``, ``drop``.
    """

    needs_atoms = True
    uses_pairs = True
    dense_variant = PAIRWISE

    def _step(self, eng) -> None:
        ops = eng.ops
        move = eng.pairwise()
        gamma = self._ls.step(move.line, eng.k)
        eng.apply(move.coefficients(gamma))
        eng.count("pairwise")
        eng.count("drop", ops.logical_and(gamma >= move.line.gamma_max, gamma > 0))
