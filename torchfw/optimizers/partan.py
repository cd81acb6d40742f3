r"""PARTAN-accelerated Frank-Wolfe (seed 002: Frandi, Ñanculef & Suykens)."""

from __future__ import annotations

from ..linesearch import ExactLineSearch, OpenLoop
from .base import ConstrainedOptimizer

__all__ = ["PartanFrankWolfe"]


class PartanFrankWolfe(ConstrainedOptimizer):
    r"""Parallel-tangents Frank-Wolfe: a FW step, then an extrapolation across the zig-zag.

    .. math::
        \tilde x_k = x_k + \lambda_k (v_k - x_k), \qquad
        x_{k+1} = \tilde x_k + \mu_k (\tilde x_k - x_{k-1}),

    with both :math:`\lambda_k` and :math:`\mu_k` from line searches (seed 002, eqs. 7-8). The
    paper gives :math:`\mu_k` unconstrained; we restrict it to the interval that keeps
    :math:`x_{k+1}` feasible (computed exactly: the set's ``max_step`` in both directions along
    :math:`\tilde x_k - x_{k-1}`), which is still an exact line search since the objective along
    the line is convex. For quadratics the recursions of the paper's appendix give
    :math:`\mu_k` from cached scalars: one column per iteration, as plain FW. Works on every set
    with a ``max_step`` (all torchfw sets). Step counter: ``partan``.
    """

    keeps_previous = True

    def _validate_variant(self, objective, line_search) -> None:
        if isinstance(line_search, OpenLoop) and not objective.has_curvature:
            raise ValueError("PartanFrankWolfe needs a line search along the extrapolation "
                             "direction: use a torchfw.Quadratic objective, Backtracking or "
                             "ShortStep (OpenLoop has no rule for it)")

    def _step(self, eng) -> None:
        toward = eng.toward()
        lam = self._ls.step(toward.line, eng.k)
        extrapolation = eng.extrapolation(toward, lam)
        line = extrapolation.line
        search = ExactLineSearch() if line.curvature is not None else self._ls
        gamma = search.step(line, eng.k)
        eng.apply(extrapolation.coefficients(gamma))
        eng.count("partan")
