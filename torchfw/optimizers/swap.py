r"""SWAP Frank-Wolfe (seed 000: Allende, Frandi, Ñanculef & Sartori) and its second-order form."""

from __future__ import annotations

from .base import ConstrainedOptimizer

__all__ = ["SwapFrankWolfe"]


class SwapFrankWolfe(ConstrainedOptimizer):
    r"""SWAP: take the FW step or the swap (pairwise) step, whichever gains more.

    With :math:`v` the FW atom and :math:`a` the away atom (the active atom of largest gradient),
    both candidate steps are line-searched and compared by their decrease of :math:`f`:

    .. math::
        \delta_{FW} = f(x) - f(x + \gamma_{FW}(v - x)), \qquad
        \delta_{SW} = f(x) - f(x + \gamma_{SW}(v - a)).

    As in the paper (Algorithm 4 and its footnote 6), :math:`\delta_{SW}` is the gain of the
    *unconstrained* swap step when the objective is quadratic; the swap actually taken is clipped
    to :math:`\gamma \le w_a` (a *drop* step when the clip binds, which removes ``a``). Ties go to
    the swap. Compared with away steps, SWAP moves only two weights and costs one extra entry of
    ``Q`` (:math:`Q_{va}`); it converges linearly for strongly convex quadratics (Prop. 2).

    ``second_order=True`` is SWAP-2o (Algorithm 5): the swap partner maximizes the second-order
    gain :math:`(s_a - s_v)^2 / (2\, \|e_v - e_a\|_Q^2)` over the active atoms (the LIBSVM WSS2
    rule of Fan, Chen & Lin 2005), restricted to atoms with :math:`s_a > s_v`.

    Step counters: ``fw``, ``swap_add``, ``swap_drop``.
    """

    needs_atoms = True
    uses_pairs = True

    def __init__(self, lmo, line_search=None, *, second_order: bool = False, **kwargs):
        super().__init__(lmo, line_search, **kwargs)
        self.second_order = bool(second_order)
        self.needs_quadratic = self.second_order

    def _step(self, eng) -> None:
        ops = eng.ops
        toward = eng.toward()
        partner = eng.second_order_partner() if self.second_order else None
        pair = eng.pairwise(partner=partner)
        gamma_fw = self._ls.step(toward.line, eng.k)
        gamma_sw = self._ls.step(pair.line, eng.k)
        gain_fw = toward.line.decrease(gamma_fw)
        if pair.line.curvature is not None:
            gain_sw = pair.line.model_decrease(pair.line.unconstrained_minimizer())
        else:
            gain_sw = pair.line.decrease(gamma_sw)
        use_swap = ops.logical_and(pair.line.slope < 0, gain_sw >= gain_fw)
        eng.apply(eng.choose(use_swap, lambda: pair.coefficients(gamma_sw),
                             lambda: toward.coefficients(gamma_fw)))
        drop = ops.logical_and(gamma_sw >= pair.line.gamma_max, gamma_sw > 0)
        eng.count("fw", ops.logical_not(use_swap))
        eng.count("swap_add", ops.logical_and(use_swap, ops.logical_not(drop)))
        eng.count("swap_drop", ops.logical_and(use_swap, drop))
