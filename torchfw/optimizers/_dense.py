r"""Whole-block compiled iterations for small quadratics (``execution="dense"``).

On a problem of a few hundred atoms an iteration of the host engine is a handful of microseconds
of arithmetic wrapped in tens of microseconds of interpreter work (building the move, the line
search, the update call, the bookkeeping): the Lasso path on the 72 x 7,129 leukemia data spends
most of its time there. This engine forms the dense matrix of vertex gradients
:math:`H_{k\cdot} = \nabla F(e_k)` once (:math:`N^2` numbers, the operator's columns in one call)
and runs each block of iterations between two checks in one call of the compiled quadratic
loop (:mod:`torchfw.optimizers._compiled_loop`, its rows read in place): the dense storage is
the row-source storage (:class:`~torchfw.optimizers._rows.RowStorage`) over the rows of
:math:`H`, started from the host storage's own start. Its blocks take the same moves, step
sizes, snapping and step counts as :class:`~torchfw.optimizers._engine.QuadraticEngine` over
the host storage with :class:`~torchfw.ExactLineSearch`, for Frank-Wolfe, away steps and
pairwise steps. It is for
small problems only: forming :math:`H` is the whole matrix, which the lazy operators exist to
avoid at scale (kernel SVMs never use it).
"""

from __future__ import annotations

import torch

from ..objectives import Quadratic
from ..sets.oracles import AtomicLMO
from ..utils.scalars import HOST
from . import _compiled_loop as L
from . import _kernels as K
from ._host import HostStorage
from ._rows import RowStorage

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


class DenseStorage(RowStorage):
    """The row-source storage over the rows of :math:`H` (the vertex gradients, formed once),
    started where the host storage of the problem starts, mapping its weights to the problem's
    point.

    Every protocol member is :class:`~torchfw.optimizers._rows.RowStorage`'s but
    :meth:`point` (the set's point of the weights). The run loop calls :meth:`run_block` (one
    compiled call per block between two checks) instead of the variant's step; the engine's
    Python moves run on the same state. The start -- ``w``, ``s = H^T w``, the diagonal, the
    linear term and the selection -- is the host storage's, built once and handed over, so a
    dense run's iterates are the host engine's.

    Parameters
    ----------
    objective : Quadratic
        On the CPU, with at most :data:`MAX_DENSE_ATOMS` atoms over ``lmo``.
    lmo : AtomicLMO
        With a scalar radius.
    w0 : Tensor
        Initial weights over the atoms.
    """

    #: The corrective step at the run loop's checks, through the row storage's face members
    #: (its columns are rows of ``H``).
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
        host = HostStorage(objective, lmo, w0, ops=HOST)
        self.objective = objective
        self.lmo = lmo
        self.dtype = host.dtype
        H = K.as_numpy(vertex_gradient_rows(objective, lmo, self.dtype))
        super().__init__(H, host._diag_np, L.LoopState.of_engine(host),
                         ct=host._ct_np if host.ct is not None else None,
                         constant=objective.constant)
        # The host storage's vectors are the start's (shared): keep them alive with it.
        self._host_tensors = (host.w, host.s, host.diag, host.ct)

    def point(self) -> torch.Tensor:
        """The point of the set at the weights."""
        return self.lmo.to_point(self.weights())
