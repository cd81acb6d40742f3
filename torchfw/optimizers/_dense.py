r"""Whole-block compiled iterations for small quadratics (``execution="dense"``).

On a problem of a few hundred atoms an iteration of the host engine is a handful of microseconds
of arithmetic wrapped in tens of microseconds of interpreter work (building the move, the line
search, the update call, the bookkeeping): the Lasso path on the 72 x 7,129 leukemia data spends
most of its time there. This engine forms the dense matrix of vertex gradients
:math:`H_{k\cdot} = \nabla F(e_k)` once (:math:`N^2` numbers, the operator's columns in one call)
and runs each block of iterations between two checks in one call of the compiled quadratic
loop (:mod:`torchfw.optimizers._compiled_loop`, its rows read in place): the same moves, step
sizes, snapping and step counts as :class:`~torchfw.optimizers._engine.QuadraticEngine` over the host storage with
:class:`~torchfw.ExactLineSearch`, for Frank-Wolfe, away steps and pairwise steps. It is for
small problems only: forming :math:`H` is the whole matrix, which the lazy operators exist to
avoid at scale (kernel SVMs never use it).
"""

from __future__ import annotations

import numpy as np
import torch

from ..objectives import Quadratic
from ..sets.oracles import AtomicLMO
from ..utils.scalars import HOST
from . import _compiled_loop as L
from . import _kernels as K
from ._host import HostStorage
from ._moves import ZERO_TOL

__all__ = ["DenseStorage", "MAX_DENSE_ATOMS"]

#: Largest number of atoms for the dense engine: H takes 8 N^2 bytes (128 MiB here).
MAX_DENSE_ATOMS = 4096

def vertex_gradient_rows(objective: Quadratic, lmo: AtomicLMO, dtype) -> torch.Tensor:
    r"""The ``(N, N)`` matrix whose row ``k`` is :math:`A^\top (Q a_k + c)`, from one
    ``columns`` call (for the simplex with radius 1 and no ``c``, :math:`\tilde Q` itself)."""
    n = objective.n
    G = objective.Q.columns(torch.arange(n, device=objective.device)).to(dtype)
    N = lmo.n_atoms(n)
    coord, sign = lmo.atom_coordinate(torch.arange(N, device=objective.device), n)
    # Q is symmetric: row coord of G is column coord, i.e. Q e_coord.
    rows = (sign.to(dtype) * float(lmo.radius)).unsqueeze(1) * G.index_select(0, coord)
    if objective.c is not None:
        rows = rows + objective.c.to(dtype).unsqueeze(0)
    return lmo.atom_scores(rows).contiguous()


class DenseStorage(HostStorage):
    """The host storage (host scalars) with the vertex gradients formed once, whose blocks run
    in one compiled call.

    It *is* the host storage of the problem, declared as such: every protocol member but
    :meth:`vertex_gradient` (a row of ``H``) is :class:`~torchfw.optimizers._host.HostStorage`'s.
    The engine's Python moves and the corrective step run on it between blocks;
    :meth:`run_block` is the compiled block the run loop calls instead of the variant's step.

    Parameters
    ----------
    objective : Quadratic
        On the CPU, with at most :data:`MAX_DENSE_ATOMS` atoms over ``lmo``.
    lmo : AtomicLMO
        With a scalar radius.
    w0 : Tensor
        Initial weights over the atoms.
    """

    #: The corrective step is the host storage's (its columns are rows of ``H``), at checks.
    face_correction = True

    def __init__(self, objective: Quadratic, lmo: AtomicLMO, w0: torch.Tensor):
        if not K.HAVE_NUMBA or w0.device.type != "cpu":
            raise ValueError("execution='dense' runs compiled CPU loops: it needs numba and "
                             "CPU tensors")
        if isinstance(lmo.radius, torch.Tensor):
            raise ValueError("execution='dense' needs a set with a scalar radius")
        N = lmo.n_atoms(objective.n)
        if N > MAX_DENSE_ATOMS:
            raise ValueError(f"execution='dense' forms an N x N matrix: {N} atoms is more than "
                             f"{MAX_DENSE_ATOMS}; use execution='host'")
        super().__init__(objective, lmo, w0, ops=HOST)
        self._H = K.as_numpy(vertex_gradient_rows(objective, lmo, self.dtype))

    def vertex_gradient(self, k) -> torch.Tensor:
        return torch.from_numpy(self._H[int(k)])

    def run_block(self, variant: int, n: int) -> None:
        """``n`` iterations of ``variant`` (a code of :mod:`~torchfw.optimizers._compiled_loop`)
        in one call of the compiled loop over the rows of ``H``, read in place.

        The run loop's rule decides at its checks, so the call never converges on its own
        (``tol = rtol =`` :data:`~torchfw.optimizers._compiled_loop.NEVER`) and takes no
        corrective step: it runs exactly ``n`` iterations from the engine's selection.
        """
        # The loop's arrays, made once per engine: a block of a few hundred atoms runs in a
        # hundred microseconds, where allocating them per call showed.
        args = self.__dict__.get("_loop_arrays")
        if args is None:
            args = self._loop_arrays = (
                np.zeros(len(L.COUNTERS), dtype=np.int64), np.zeros(10),
                np.empty((2, 3)), np.empty((2, len(L.COUNTERS)), dtype=np.int64),
                np.empty((2, 0), dtype=self._H.dtype),  # rows read in place: no buffers
                np.zeros(1, dtype=np.int64))  # PARTAN's support, unused here
        counts, state, hist, hist_counts, no_rows, no_support = args
        counts.fill(0)
        state[0], state[1], state[2] = self.p, self.t, self.s_min
        state[3], state[4], state[5] = self.i_min, self.s_max, self.j_max
        L.run_loop(variant, self._H, no_rows, self._diag_np, self._ct_np,
                   self.ct is not None, float(self.constant), self._w_np, self._s_np,
                   self._w_np, self._s_np, no_support, state, n, L.NEVER, L.NEVER, n,
                   ZERO_TOL, counts, hist, hist_counts, False, n)
        self.k += n
        for name, count in zip(L.COUNTERS, counts.tolist(), strict=True):
            if count:
                self._counts[name] = self._counts.get(name, 0) + count
        self.reselect()
