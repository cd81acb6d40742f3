r"""Active sets of dense vertices, for solvers that keep one over any set.

The engines keep weights over *indexed* atoms on the simplex and the L1 ball. Over the other sets
(K-sparse polytope, Birkhoff, nuclear-norm ball, ...) there is no short list of atoms to index, so
the active-set solvers of this package
(:class:`~torchfw.optimizers.BlendedPairwiseConditionalGradient`,
:class:`~torchfw.optimizers.LazyFrankWolfe`) keep the vertices themselves, next to the engine's
point: :class:`VertexActiveSet` is that bookkeeping, and :class:`ActiveSetSolver` the shared
plumbing (a warm start from a :class:`~torchfw.result.ActiveSet`, and the active set on the
:class:`~torchfw.result.Result`).
"""

from __future__ import annotations

from typing import cast

import torch
from torch import Tensor

from ..result import ActiveSet, Result
from ..sets.oracles import AtomicLMO
from .base import ConstrainedOptimizer

__all__ = ["VertexActiveSet", "ActiveSetSolver"]

#: Weights at or below this (times the largest weight) leave the active set: rounding, not mass.
DROP_TOL = 1e-12


class VertexActiveSet:
    """Vertices (rows of ``atoms``) and their convex weights; ``x = weights @ atoms``."""

    def __init__(self, atoms: Tensor, weights: Tensor):
        self.atoms = atoms.detach().clone()
        self.weights = weights.detach().to(atoms.dtype).clone()

    def scores(self, grad: Tensor) -> Tensor:
        """``<grad, a_k>`` for every atom."""
        return self.atoms @ grad.reshape(-1)

    def index_of(self, v: Tensor) -> int | None:
        """Row of an atom equal to ``v`` (exactly), or None."""
        same = (self.atoms == v.reshape(1, -1)).all(dim=-1)
        hits = torch.nonzero(same)
        return int(hits[0, 0]) if hits.numel() else None

    def toward(self, v: Tensor, gamma: float) -> None:
        """``x <- (1 - gamma) x + gamma v``."""
        if gamma <= 0.0:
            return
        if gamma >= 1.0:
            self.atoms = v.reshape(1, -1).clone()
            self.weights = torch.ones(1, dtype=self.atoms.dtype, device=self.atoms.device)
            return
        self.weights = self.weights * (1.0 - gamma)
        k = self.index_of(v)
        if k is None:
            self.atoms = torch.cat([self.atoms, v.reshape(1, -1)])
            self.weights = torch.cat([self.weights, self.weights.new_tensor([gamma])])
        else:
            self.weights[k] += gamma
        self._prune()

    def shift(self, to: int, away: int, gamma: float, drop: bool) -> None:
        """Move ``gamma`` of weight from atom ``away`` to atom ``to`` (a pairwise step)."""
        self.weights[to] += gamma
        self.weights[away] = 0.0 if drop else self.weights[away] - gamma
        self._prune()

    def _prune(self) -> None:
        keep = self.weights > DROP_TOL * float(self.weights.max())
        if not bool(keep.all()):
            self.atoms = self.atoms[keep]
            self.weights = self.weights[keep]
        self.weights = self.weights / self.weights.sum()

    def public(self) -> ActiveSet:
        return ActiveSet(atoms=self.atoms.clone(), weights=self.weights.clone())


class ActiveSetSolver(ConstrainedOptimizer):
    """Base of the solvers that return an active set and can start from one.

    Over indexed-atom sets (simplex, L1 ball) the engine's weights are the active set; over every
    other set a :class:`VertexActiveSet` is kept next to the engine's point.
    """

    def minimize(self, objective, x0: Tensor | None = None, *,
                 active_set: ActiveSet | None = None, stopping=None) -> Result:
        """As :meth:`ConstrainedOptimizer.minimize`, or from ``active_set`` (a warm start).

        Parameters
        ----------
        active_set : ActiveSet, optional
            Vertices and weights to start from, e.g. ``previous_result.active_set``; the start
            point is their combination, and over sets without indexed atoms the vertices are
            kept (the next solve's away and pairwise steps can remove them). Exclusive with
            ``x0``.
        """
        self._warm = None
        if active_set is not None:
            if x0 is not None:
                raise ValueError("pass either x0 or active_set, not both")
            if not isinstance(active_set, ActiveSet):
                raise TypeError(f"active_set must be a torchfw.ActiveSet (e.g. "
                                f"result.active_set), got {type(active_set).__name__}")
            scale = max(1.0, float(active_set.atoms.abs().max()))
            if not bool(self.lmo.contains(active_set.atoms, atol=1e-6 * scale).all()):
                raise ValueError(f"active_set has atoms outside the set {self.lmo!r}")
            self._warm = active_set
            x0 = active_set.point()
        return super().minimize(objective, x0, stopping=stopping)

    def _vertex_active_set(self, x0: Tensor) -> VertexActiveSet:
        warm = getattr(self, "_warm", None)
        if warm is not None:
            return VertexActiveSet(warm.atoms.to(x0), warm.weights.to(x0))
        return VertexActiveSet(x0.reshape(1, -1), torch.ones(1, dtype=x0.dtype,
                                                              device=x0.device))

    def _run(self, eng, execution: str, **kw) -> Result:
        result = super()._run(eng, execution, **kw)
        active = getattr(self, "_active", None)
        if active is not None:
            result.active_set = active.public()
        elif result.weights is not None:
            w = result.weights
            idx = torch.nonzero(w > 0).squeeze(1)
            # Weights exist only over indexed atoms.
            atoms = cast(AtomicLMO, self.lmo).atom(idx, result.x.shape[-1],
                                                   dtype=result.x.dtype, device=result.x.device)
            result.active_set = ActiveSet(atoms=atoms, weights=w[idx] / w[idx].sum())
        return result
