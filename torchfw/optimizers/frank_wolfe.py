r"""The classic Frank-Wolfe (conditional gradient) method."""

from __future__ import annotations

from ._compiled_loop import FW
from .base import ConstrainedOptimizer

__all__ = ["FrankWolfe"]


class FrankWolfe(ConstrainedOptimizer):
    r"""Frank-Wolfe: step toward the LMO vertex.

    .. math::
        v_k = \operatorname{lmo}(\nabla f(x_k)), \qquad
        x_{k+1} = x_k + \gamma_k (v_k - x_k), \quad \gamma_k \in [0, 1].

    Converges as :math:`f(x_k) - f^* = O(1/k)` on any compact convex set (Jaggi, ICML 2013),
    and no faster in general near a face of a polytope (the zig-zag). Works with every set, every
    objective and every line search. On the simplex the iterate after ``k`` steps has at most
    ``k + 1`` nonzeros (the sparsity that makes it attractive for SVMs).

    See :class:`ConstrainedOptimizer` for the parameters.
    """

    dense_variant = FW

    def _step(self, eng) -> None:
        move = eng.toward()
        gamma = self._ls.step(move.line, eng.k)
        eng.apply(move.coefficients(gamma))
        eng.count("fw")
