r"""Fully-corrective Frank-Wolfe (Holloway 1974; the Bădoiu-Clarkson / CVM scheme of seed 000)."""

from __future__ import annotations

from ..utils.validation import check_int_at_least, check_positive
from .base import ConstrainedOptimizer

__all__ = ["FullyCorrectiveFrankWolfe"]


class FullyCorrectiveFrankWolfe(ConstrainedOptimizer):
    r"""Add the FW atom, then re-optimize over the convex hull of the active atoms.

    After the FW step toward :math:`v_k`, the objective is minimized over the face spanned by the
    active set with pairwise steps restricted to active atoms (each moves mass from the active
    atom of largest gradient to the active atom of smallest gradient), until the face's own
    Frank-Wolfe gap drops below ``inner_fraction`` times the current gap or ``inner_max_iter``
    steps were made. With exact inner solves this is the generalized Bădoiu-Clarkson algorithm
    that CVM runs on the MEB (seed 000, Algorithm 2): few iterations, sparse iterates, costly
    iterations. Inner steps do not count as iterations. Step counters: ``fw``, ``inner``.

    Parameters
    ----------
    inner_max_iter : int, default 100
    inner_fraction : float, default 0.5
    """

    needs_atoms = True
    uses_pairs = True

    def __init__(self, lmo, line_search=None, *, inner_max_iter: int = 100,
                 inner_fraction: float = 0.5, **kwargs):
        super().__init__(lmo, line_search, **kwargs)
        self.inner_max_iter = check_int_at_least("inner_max_iter", inner_max_iter, 1)
        self.inner_fraction = check_positive("inner_fraction", inner_fraction)

    def _step(self, eng) -> None:
        ops = eng.ops
        toward = eng.toward()
        eng.apply(toward.coefficients(self._ls.step(toward.line, eng.k)))
        eng.count("fw")
        threshold = self.inner_fraction * eng.gap()
        for _ in range(self.inner_max_iter):
            face_gap = eng.p - eng.active_min()[1]
            if not ops.on_device and face_gap <= threshold:
                break
            move = eng.pairwise(restricted=True)
            gamma = self._ls.step(move.line, eng.k)
            eng.apply(move.coefficients(gamma), tick=False)
            eng.count("inner")
