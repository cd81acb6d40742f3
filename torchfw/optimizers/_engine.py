r"""The incremental quadratic engine: the FW family's moves over a storage it holds.

One concern: the moves of the simplex/L1 family (FW, away, pairwise, PARTAN extrapolation) and
how a move is applied, for :math:`f(x) = \tfrac12 x^\top Q x + c^\top x` over an atomic set.
The formulas come from :mod:`torchfw.optimizers._moves` (written once); the numbers come from a
*storage* (:mod:`torchfw.optimizers._storage`) that :class:`QuadraticEngine` holds: the host or
device storage of one problem (:class:`~torchfw.optimizers._host.HostStorage`), the dense,
streaming, sampled, batched or sharded one. The two pieces of vector arithmetic every storage
needs are written once too, in :mod:`torchfw.optimizers._vectors`: :func:`update_vectors` (a move
applied to ``w`` and ``s``) and :func:`feasible_interval` (PARTAN's feasible step interval).

Objectives without a closed-form line run on :class:`~torchfw.optimizers._generic.GenericEngine`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from torch import Tensor

from ..linesearch import Line
from ..objectives import Quadratic
from ..sets.oracles import AtomicLMO
from ._generic import GenericEngine
from ._moves import (
    ZERO_TOL,
    Coefficients,
    Move,
    away_step_max,
    cross_after,
    ops_abs,
    pair_curvature,
    partan_line,
    partan_move,
    replace_gamma_max,
    toward_curvature,
)
from ._host import HostStorage
from ._state import EngineState, choose
from ._storage import Storage, check_storage

__all__ = ["Coefficients", "Move", "QuadraticEngine", "GenericEngine", "EngineState", "ZERO_TOL",
           "partan_move", "ops_abs", "replace_gamma_max"]


# ---------------------------------------------------------------------------------------------
# Incremental quadratic engine
# ---------------------------------------------------------------------------------------------

class QuadraticEngine:
    r"""The moves of the FW family over a storage: :math:`f(x) = \tfrac12 x^\top Q x + c^\top x`
    over an atomic set.

    The problem is solved in the weights ``w`` over the ``N`` atoms :math:`a_k` of the set:
    :math:`F(w) = f(Aw)` is a quadratic over the unit simplex with
    :math:`\tilde Q_{kl} = a_k^\top Q a_l` and :math:`\tilde c_k = c^\top a_k`. The storage keeps
    ``w``, the gradient :math:`s = \nabla F(w) = \tilde Q w + \tilde c`, and the scalars
    :math:`p = w^\top s` and :math:`t = \tilde c^\top w`, from which
    :math:`F = (p + t)/2` and :math:`w^\top \tilde Q w = p - t`. The engine reads entries
    through the storage's protocol and hands them to :mod:`torchfw.optimizers._moves`; it keeps
    no number of its own.

    Parameters
    ----------
    storage : Storage or Quadratic
        The storage held (checked by :func:`~torchfw.optimizers._storage.check_storage`). A
        :class:`~torchfw.Quadratic` with ``lmo``, ``w0`` and the keywords of
        :class:`~torchfw.optimizers._host.HostStorage` builds the host/device storage of one
        problem (``QuadraticEngine(objective, lmo, w0, ops=HOST)``).

    The storage's state reads through the engine (``engine.w``, ``engine.p``, ``engine.k``,
    ``engine.count(...)``, ...): variants and run loops see one object.
    """

    #: The engine works in weights over atoms (the variants' active set is ``w``'s support).
    atomic = True
    storage: Storage

    def __init__(self, storage: Storage | Quadratic, lmo: AtomicLMO | None = None,
                 w0: Tensor | None = None, **host_options: Any):
        if isinstance(storage, Quadratic):
            if lmo is None or w0 is None:
                raise TypeError("QuadraticEngine(objective, lmo, w0, ops=...) builds the host "
                                "storage: pass the set and the initial weights")
            storage = HostStorage(storage, lmo, w0, **host_options)
        elif lmo is not None or w0 is not None or host_options:
            raise TypeError("QuadraticEngine(storage) takes the storage alone")
        check_storage(storage)
        self.storage = storage
        self.ops = storage.ops
        self.keep_previous = storage.keep_previous
        # The bookkeeping every variant calls each iteration, bound once (no lookup through
        # __getattr__ on the hot path).
        self.count = storage.count

    def __getattr__(self, name: str) -> Any:
        # Everything that is not a move is the storage's (vectors, scalars, counters).
        if name == "storage":  # not set yet (unpickling): no recursion
            raise AttributeError(name)
        return getattr(self.storage, name)

    @property
    def k(self):
        """The iteration counter (the storage's)."""
        return self.storage.k

    # -- what the run loop reads ---------------------------------------------------------------

    def value(self):
        """Objective value ``f(x)`` (plus the objective's constant)."""
        st = self.storage
        return 0.5 * (st.p + st.t) + st.constant

    def gap(self):
        """Frank-Wolfe gap :math:`w^\\top s - \\min_k s_k` (the storage's selection)."""
        st = self.storage
        return st.p - st.s_min

    def choose(self, cond, if_true: Callable[[], Coefficients],
               if_false: Callable[[], Coefficients]) -> Coefficients:
        """Coefficients of one of two moves; on the host only the chosen one is evaluated."""
        return choose(self.ops, cond, if_true, if_false)

    # -- moves ---------------------------------------------------------------------------------

    def _line(self, slope, curvature, gamma_max) -> Line:
        value = self.value()
        return Line(value=value, slope=slope, gamma_max=gamma_max, curvature=curvature,
                    phi=lambda g: value + g * slope + 0.5 * g * g * curvature, ops=self.ops)

    def toward(self, restricted: bool = False) -> Move:
        """FW move toward the FW atom (``restricted``: best atom of the active set)."""
        st = self.storage
        i, si = st.active_min() if restricted else (st.i_fw, st.s_fw)
        curvature = toward_curvature(st.diagonal(i), si - st.linear(i), st.p - st.t)
        line = self._line(si - st.p, curvature, 1.0)
        return Move("fw", line, lambda g: Coefficients(a=1.0 - g, b=g, i=i))

    def away(self) -> Move:
        """Away move from the active atom of largest gradient (max step keeps ``w_j >= 0``)."""
        st = self.storage
        j, sj = st.j_max, st.s_max
        curvature = toward_curvature(st.diagonal(j), sj - st.linear(j), st.p - st.t)
        line = self._line(st.p - sj, curvature, away_step_max(st.weight(j), self.ops))
        return Move("away", line, lambda g: Coefficients(a=1.0 + g, b=-g, i=j))

    def pairwise(self, restricted: bool = False, partner=None) -> Move:
        """Pairwise move: mass from the away atom (or ``partner``) to the FW atom."""
        st = self.storage
        i, si = st.active_min() if restricted else (st.i_fw, st.s_fw)
        if partner is None:
            j, sj = st.j_max, st.s_max
        else:
            j = partner
            sj = st.score(j)
        curvature = pair_curvature(st.diagonal(i), st.diagonal(j), st.pair_entry(i, j))
        line = self._line(si - sj, curvature, st.weight(j))
        return Move("pairwise", line,
                    lambda g: Coefficients(a=1.0, b=g, i=i, c=-g, j=j))

    def second_order_partner(self):
        """SWAP-2o away atom: the active atom of largest second-order pairwise gain."""
        return self.storage.second_order_partner()

    def active_min(self):
        """Active atom of smallest gradient and its gradient (fully-corrective inner steps)."""
        return self.storage.active_min()

    def extrapolation(self, fw: Move, lam) -> Move:
        r"""PARTAN move along :math:`\delta = \tilde w - w_{\text{prev}}` from the FW point.

        :math:`\tilde w = (1-\lambda) w + \lambda e_i`; the new iterate is
        :math:`\tilde w + \mu \delta`. The line is oriented along :math:`\sigma\delta` with
        :math:`\sigma = -\operatorname{sign}(\langle \nabla F(\tilde w), \delta\rangle)` so that it
        is a descent direction and the step is :math:`\mu = \sigma\gamma \ge 0`-parametrized.
        """
        st = self.storage
        i = fw.coefficients(0.0).i
        ci = st.linear(i)
        f_t, slope, curvature, noise = partan_line(
            fw.line, lam, st.constant, st.t, ci, st.W, st.previous_score(i) - ci,
            st.p_prev, st.t_prev)
        lo, hi = st.extrapolation_bounds(lam, i)
        return partan_move(f_t + st.constant, slope, curvature, noise, lo, hi, lam, i,
                           self.ops)

    # -- the whole solve in compiled code -------------------------------------------------------

    def solve(self, variant: int, rule, *, check_every: int, stop=None, correct: bool = True):
        r"""The whole solve of ``variant`` under the :class:`~torchfw.optimizers.StoppingRule`
        ``rule``, where the storage runs one in compiled code: the row-source storage
        (:meth:`~torchfw.optimizers._rows.RowStorage.solve`, the one compiled loop, its checks
        every ``check_every`` iterations, the active-set corrective step with ``correct``,
        ``stop`` read between chunks). SVC's compiled path is this call
        (:func:`torchfw.svm._dense.solve`).

        Returns the storage's :class:`~torchfw.optimizers._rows.LoopRun`.

        Raises
        ------
        TypeError
            For a storage that runs its iterations through the moves only (the run loop of
            :class:`~torchfw.optimizers.ConstrainedOptimizer` drives those).
        """
        whole = getattr(self.storage, "solve", None)
        if whole is None:
            raise TypeError(f"{type(self.storage).__name__} runs no whole compiled solve: run "
                            f"its iterations through an optimizer's minimize")
        return whole(variant, rule, check_every=check_every, stop=stop, correct=correct)

    # -- update --------------------------------------------------------------------------------

    def apply(self, co: Coefficients, tick: bool = True) -> None:
        """Apply ``w <- a w + b e_i + c e_j + d w_prev`` and the matching gradient update.

        ``tick=False`` applies a move without counting an iteration (inner corrections).
        """
        st = self.storage
        if self.keep_previous:
            self._shift_scalars(co)
        st.update(co)
        if tick:
            st.tick()
            st.after_tick()

    def _shift_scalars(self, co: Coefficients) -> None:
        """PARTAN: the cross term :math:`W` after the move, and the scalars that become the
        previous iterate's (before the update overwrites ``p`` and ``t``: on device they are
        written in place)."""
        st = self.storage
        st.set_scalars(W=self._next_cross(co), p_prev=st.p, t_prev=st.t)

    def _next_cross(self, co: Coefficients):
        r""":math:`W` after the move ``co`` (:func:`~torchfw.optimizers._moves.cross_after`)."""
        st = self.storage
        j = co.j if co.j is not None else co.i
        return cross_after(co, st.p - st.t, st.score(co.i) - st.linear(co.i),
                           st.score(j) - st.linear(j), st.W)

    def correct_face(self, max_face: int | None = None, problem: int = 0) -> int:
        """The active-set corrective step on the face of ``w``
        (:func:`torchfw.optimizers._correction.correct_face`, through the storage's
        ``face_space``, ``face_column`` and ``face_write``): the atoms of the new face, or -1.
        ``problem``: which problem of a batched storage."""
        from ._correction import correct_face

        return correct_face(self, max_face, problem)
