r"""Where a storage's face lives: the view the corrective step works through, for every storage.

One concern: what :func:`torchfw.optimizers._correction.correct_face` (Wolfe's minor cycle on
the face of the iterate, :mod:`torchfw.optimizers._face`) needs to know about the place the
numbers live, so that the step is written once. A storage holds its weights :math:`w` and
scores :math:`s = \tilde Q w + \tilde c` over *positions*: the ``N`` atoms of one problem (the
host, device and dense storages, one problem of a batch), the slots of a working set (the
streaming storage), the slots of the active set (the sampled storage), or this rank's slice of
the atoms (the sharded storage). Its ``face_space`` member returns a :class:`FaceSpace` over
them: float64 host arrays of ``w``, ``s`` and the linear term, the atom of each position, and
the three cross-rank combinations the step needs (a sharded storage's :class:`~torchfw.
distributed.comm.Communicator`; none on one process, where they are the identity).

With them the step reads only what a face needs: the support and the worst violators (atoms
outside the support whose score is below :math:`p = w^\top s`) over all positions, the columns
:math:`h_a` of the face's atoms restricted to the positions (``face_column``), and it writes the
new weights and scores back (``face_write``). Positions where no atom lives (a freed slot)
carry the score :math:`+\infty`: they are never violators.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..utils.jit import current_module
from . import _face

__all__ = ["FaceSpace"]


@dataclass
class FaceSpace:
    """A storage's vectors over its positions, as the corrective step reads them.

    Parameters
    ----------
    w, s : ndarray of float64
        Weights and scores over the positions (views where the storage keeps float64 host
        arrays; ``s`` is :math:`+\\infty` where no atom lives).
    c : ndarray of float64 or None
        The linear term :math:`\\tilde c` over the positions (None: no linear term).
    atoms : ndarray of int64 or None
        The atom at each position (-1: none); None when the position *is* the atom.
    lookup : callable or None
        ``lookup(atoms) -> positions`` (-1 for an atom held elsewhere); None with ``atoms``
        None.
    comm : Communicator or None
        A sharded storage's communicator: every combination below is then collective, and
        exact (no sum is reduced across ranks), so every rank runs the same minor cycle.
    n_atoms : int or None
        Atoms over all ranks (default: the number of positions).
    prefetch : callable or None
        ``prefetch(atoms)``: bring what the columns of ``atoms`` need in one round (a sharded
        storage's features), before ``face_column`` asks for them one by one.
    """

    w: np.ndarray
    s: np.ndarray
    c: np.ndarray | None
    atoms: np.ndarray | None = None
    lookup: Callable[[np.ndarray], np.ndarray] | None = None
    comm: Any = None
    n_atoms: int | None = None
    prefetch: Callable[[np.ndarray], Any] | None = None

    @property
    def size(self) -> int:
        """The number of atoms a face may be drawn from (over all ranks)."""
        if self.n_atoms is not None:
            return int(self.n_atoms)
        return int(self.w.shape[0] if self.atoms is None else (self.atoms >= 0).sum())

    def positions(self, atoms: np.ndarray) -> np.ndarray:
        """The positions of ``atoms`` here (-1 for an atom another rank holds)."""
        if self.lookup is None:
            return np.asarray(atoms, dtype=np.int64)
        return self.lookup(np.asarray(atoms, dtype=np.int64))

    def _atoms_at(self, positions: np.ndarray) -> np.ndarray:
        return positions if self.atoms is None else self.atoms[positions]

    def support(self) -> tuple[np.ndarray, np.ndarray]:
        """The atoms of positive weight and their weights, in position order (then rank
        order)."""
        pos = np.flatnonzero(self.w > 0.0)
        atoms, weights = self._atoms_at(pos).astype(np.int64), self.w[pos]
        if self.comm is None:
            return atoms, weights
        rows = self.comm.gather_rows(np.stack([atoms.astype(np.float64), weights], axis=1),
                                     op="face")
        return rows[:, 0].astype(np.int64), rows[:, 1].copy()

    def violators(self, p: float, n_add: int) -> np.ndarray:
        r"""Up to ``n_add`` atoms outside the support with score below :math:`p`, the most
        violating first (:func:`torchfw.optimizers._face.violators`; stable on ties, so in
        position then rank order)."""
        if self.atoms is None and self.comm is None:
            return current_module(_face).violators(self.w, self.s, p, n_add)
        outside = np.flatnonzero(~(self.w > 0.0) & (self.s < p))
        order = np.argsort(self.s[outside], kind="mergesort")[:n_add]
        pos = outside[order]
        atoms = self._atoms_at(pos).astype(np.int64)
        if self.comm is None:
            return atoms
        rows = self.comm.gather_rows(np.stack([self.s[pos], atoms.astype(np.float64)], axis=1),
                                     op="face")
        order = np.argsort(rows[:, 0], kind="mergesort")[:n_add]
        return rows[order, 1].astype(np.int64)

    def owned(self, values: np.ndarray) -> np.ndarray:
        r"""Entries each written by the one rank that holds them (:math:`-\infty` elsewhere),
        made known to every rank, exactly (a max over the ranks)."""
        if self.comm is None:
            return values
        return self.comm.all_reduce(values, "max", op="face")

    def smallest(self, v: np.ndarray) -> float:
        """The smallest entry of ``v`` over all ranks."""
        local = float(v.min()) if v.shape[0] else np.inf
        if self.comm is None:
            return local
        return float(self.comm.all_reduce(np.array([local]), "min", op="face")[0])

    def gather(self, vector: np.ndarray, atoms: np.ndarray) -> np.ndarray:
        """``vector`` (over the positions) at ``atoms``, known to every rank."""
        pos = self.positions(atoms)
        out = np.full(pos.shape[0], -np.inf)
        here = pos >= 0
        out[here] = vector[pos[here]]
        return self.owned(out)
