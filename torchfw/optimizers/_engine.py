r"""The incremental quadratic engine: the FW family's moves over a declared storage.

One concern: the moves of the simplex/L1 family (FW, away, pairwise, PARTAN extrapolation) and
how a move is applied, for :math:`f(x) = \tfrac12 x^\top Q x + c^\top x` over an atomic set.
The formulas come from :mod:`torchfw.optimizers._moves` (written once); the numbers come from the
storage accessors declared in :mod:`torchfw.optimizers._storage`, which
:class:`QuadraticEngine` implements for one problem on one process -- with host scalars (fused
compiled CPU kernels) or device scalars (no host synchronization: CUDA graphs). The streaming,
batched and sharded engines implement the same accessors over their own storage and inherit the
moves unchanged.

Objectives without a closed-form line run on :class:`~torchfw.optimizers._generic.GenericEngine`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import torch
from torch import Tensor

from ..linesearch import Line
from ..objectives import ColumnOperator, Quadratic
from ..sets.oracles import AtomicLMO, Simplex
from ..utils.scalars import Scalars
from . import _kernels as K
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
from ._selection import select
from ._state import EngineState

__all__ = ["Coefficients", "Move", "QuadraticEngine", "GenericEngine", "EngineState", "ZERO_TOL",
           "partan_move", "ops_abs", "replace_gamma_max"]


def _as_index(i, device):
    return i if isinstance(i, Tensor) else torch.tensor(i, device=device)


def _at(vec: Tensor, i):
    """``vec[i]`` (shape (1,)) for an index tensor without a host read (indexing may sync)."""
    return vec.index_select(0, i.reshape(1))


# ---------------------------------------------------------------------------------------------
# Incremental quadratic engine
# ---------------------------------------------------------------------------------------------

class QuadraticEngine(EngineState):
    r"""Incremental engine for :math:`f(x) = \tfrac12 x^\top Q x + c^\top x` over an atomic set.

    The problem is solved in the weights ``w`` over the ``N`` atoms :math:`a_k` of the set:
    :math:`F(w) = f(Aw)` is a quadratic over the unit simplex with
    :math:`\tilde Q_{kl} = a_k^\top Q a_l` and :math:`\tilde c_k = c^\top a_k`. The state is
    ``w``, the gradient :math:`s = \nabla F(w) = \tilde Q w + \tilde c`, and the scalars
    :math:`p = w^\top s` and :math:`t = \tilde c^\top w`, from which
    :math:`F = (p + t)/2` and :math:`w^\top \tilde Q w = p - t`.

    Parameters
    ----------
    objective : Quadratic
    lmo : AtomicLMO
    w0 : Tensor
        Initial weights on the unit simplex over atoms (shape ``(N,)``).
    ops : Scalars
        ``HOST`` (Python floats, fused CPU kernels) or ``DEVICE`` (0-d tensors, no host reads).
    keep_previous : bool
        Keep the previous iterate (PARTAN).
    pair_columns : bool
        Whether moves may use two atoms (pairwise, SWAP); on device both columns are computed.
    sample : callable or None
        ``sample(s) -> index`` of the FW atom among a random subset (randomized LMO).
    refresh_every : int or None
        Recompute ``s`` from scratch every that many iterations (float drift).
    """

    _STATE: tuple[str, ...] = (
        "w", "s", "w_prev", "s_prev", "k", "i_min", "s_min", "j_max", "s_max", "p", "t",
        "i_fw", "s_fw", "W", "p_prev", "t_prev")

    #: Whether :meth:`correct_face` applies to this storage (the active-set corrective step,
    #: :mod:`torchfw.optimizers._correction`). Storages whose gradient is not kept over all
    #: atoms of one problem (streaming, sampled, batched, sharded) say False.
    face_correction = True

    objective: Quadratic
    Q: ColumnOperator
    lmo: AtomicLMO
    w: Tensor
    s: Tensor
    diag: Tensor
    #: The previous iterate and its scores (only with ``keep_previous``).
    w_prev: Tensor | None
    s_prev: Tensor | None
    ct: Tensor | None
    # Selections and reductions, stored by ``_set``: Python ints/floats with host scalars,
    # (1,) tensors written in place with device scalars (Scalars arithmetic is duck-typed).
    i_min: Any
    s_min: Any
    j_max: Any
    s_max: Any
    i_fw: Any
    s_fw: Any
    p: Any
    t: Any
    # PARTAN's cross term w' Q~ w_prev and the previous iterate's p and t.
    W: Any
    p_prev: Any
    t_prev: Any

    def __init__(self, objective: Quadratic, lmo: AtomicLMO, w0: Tensor, *, ops: Scalars,
                 keep_previous: bool = False, pair_columns: bool = False,
                 sample: Callable | None = None, refresh_every: int | None = None):
        self.objective = objective
        self.lmo = lmo
        self.Q = objective.Q
        self.n = objective.n
        device = w0.device
        self.declare(ops=ops, N=lmo.n_atoms(self.n), dtype=w0.dtype, device=device,
                     keep_previous=keep_previous, pair_columns=pair_columns, sample=sample,
                     refresh_every=refresh_every, constant=objective.constant,
                     radius=lmo.radius,
                     use_numba=(not ops.on_device) and K.HAVE_NUMBA and device.type == "cpu",
                     # The plain SVM dual: vertex gradients are the columns themselves.
                     identity_atoms=(isinstance(lmo, Simplex)
                                     and not isinstance(lmo.radius, Tensor)
                                     and lmo.radius == 1.0 and objective.c is None))
        r2 = float(self._radius) ** 2
        self.ct = (lmo.atom_scores(objective.c.to(self.dtype)).contiguous()
                   if objective.c is not None else None)
        w = w0.clone().contiguous()
        self._start(w, self._full_gradient(w),
                    (r2 * lmo.atom_gather(self.Q.diagonal().to(self.dtype))).contiguous())

    def _start(self, w: Tensor, s: Tensor, diag: Tensor) -> None:
        """Set the start state from its vectors (the engine owns ``w`` and ``s`` from here)."""
        self.diag = diag
        self.w = w
        self.s = s
        if self.keep_previous:
            self.w_prev = self.w.clone()
            self.s_prev = self.s.clone()
        else:
            self.w_prev = self.s_prev = None
        self._numpy_views()
        self._refresh_scalars()

    def declare(self, *, ops: Scalars, N: int, dtype, device, keep_previous: bool = False,
                pair_columns: bool = False, sample: Callable | None = None,
                refresh_every: int | None = None, constant=0.0, radius=1.0,
                use_numba: bool = False, identity_atoms: bool = True, ct=None) -> None:
        """The shared constructor: what every storage of this engine states about itself.

        Subclasses (streaming, batched, sharded) call it instead of setting these attributes
        one by one; then they build their vectors (``w``, ``s``, ``diag``, ...) and selection.

        Parameters
        ----------
        ops : Scalars
            ``HOST`` or ``DEVICE`` scalars.
        N : int
            Number of atoms (over all ranks for a sharded storage).
        dtype, device
            Of the engine's own state (float64 on the host for every storage but ``device``).
        keep_previous, pair_columns, sample, refresh_every
            As in the class parameters.
        constant : float
            The objective's constant (added to every reported value).
        radius : float or Tensor
            Radius of the set (1 for the SVM dual).
        use_numba : bool
            Whether the compiled CPU kernels and NumPy views serve the host scalars.
        identity_atoms : bool
            Vertex gradients are the columns of the operator (simplex of radius 1, no ``c``).
        ct : Tensor or None
            Linear term over atoms.
        """
        self.ops = ops
        self.N = N
        self.dtype = dtype
        self.keep_previous = bool(keep_previous)
        self.pair_columns = bool(pair_columns)
        self.sample = sample
        self.refresh_every = refresh_every
        # PARTAN on weights below float64 rescales them after each move (see _renormalize).
        self._renormalizes = bool(keep_previous) and dtype != torch.float64
        self.constant = constant
        self._radius = radius
        self.use_numba = bool(use_numba)
        self._identity_atoms = bool(identity_atoms)
        self.ct = ct
        # Vertex gradients by atom, in the storage's own kind (NumPy slots when streaming).
        self._columns: dict[Any, Any] = {}
        self._init_counters(device)

    # -- state ---------------------------------------------------------------------------------

    def _note_support(self, i: int) -> None:
        """Record that atom ``i`` may carry weight (PARTAN's bounds read only such atoms)."""
        if not self._in_support[i]:
            self._in_support[i] = True
            self._support[self._n_support] = i
            self._n_support += 1

    def _numpy_views(self) -> None:
        if not self.use_numba:
            return
        if self.keep_previous:
            # Atoms that ever had weight, in order of arrival: a superset of the supports of
            # w and w_prev (moves give weight only to their FW atom, and w_prev was once w).
            # (Sized by the local vector: a sharded storage holds a slice of the N atoms.)
            size = self.w.shape[0]
            nonzero = np.flatnonzero(K.as_numpy(self.w))
            self._support = np.empty(size, dtype=np.int64)
            self._support[:nonzero.size] = nonzero
            self._n_support = nonzero.size
            self._in_support = np.zeros(size, dtype=np.bool_)
            self._in_support[nonzero] = True
        self._w_np = K.as_numpy(self.w)
        self._s_np = K.as_numpy(self.s)
        # The previous iterate exists exactly with keep_previous.
        self._wp_np = K.as_numpy(self.w_prev) if self.w_prev is not None else self._w_np
        self._sp_np = K.as_numpy(self.s_prev) if self.s_prev is not None else self._s_np
        self._ct_np = K.as_numpy(self.ct) if self.ct is not None else self._s_np
        self._diag_np = K.as_numpy(self.diag)

    def _full_gradient(self, w: Tensor) -> Tensor:
        x = self.lmo.to_point(w)
        g = self.Q.matvec(x).to(self.dtype)
        if self.objective.c is not None:
            g = g + self.objective.c.to(self.dtype)
        return self.lmo.atom_scores(g).contiguous()

    def _refresh_scalars(self) -> None:
        """Recompute selections and reductions from the vectors (no update)."""
        self._reselect()
        if self.keep_previous:
            # W = w' Q~ w_prev; at the start w_prev == w.
            self._set(W=self.p - self.t, p_prev=self.p, t_prev=self.t)

    def _reselect(self) -> None:
        """Storage: the selection of the next iteration from the vectors (sets ``i_min, s_min,
        j_max, s_max, p, t, i_fw, s_fw``).

        :func:`~torchfw.optimizers._selection.select` (PyTorch ops: device scalars, host
        scalars without numba, and over ``(B, N)`` the batched storage), or on the host with
        numba its compiled second implementation -- also at the start: one summation order for
        ``p = w's``, which the compiled SVC start (``torchfw.svm._start``) computes the same way.
        """
        if self.use_numba:
            sel = K.select(self._w_np, self._s_np, self._ct_np, self.ct is not None)
        else:
            sel = select(self.w, self.s, self.ct)
        self._store_selection(sel, host=not self.ops.on_device)

    def _store_selection(self, sel, host: bool) -> None:
        imin, smin, jmax, smax, p, t = sel
        if host:
            imin, jmax = int(imin), int(jmax)
            smin, smax, p, t = float(smin), float(smax), float(p), float(t)
        if self.sample is not None:
            i_fw = self.sample(self.s)
            s_fw = _at(self.s, i_fw) if self.ops.on_device else float(self.s[i_fw])
        else:
            i_fw, s_fw = imin, smin
        self._set(i_min=imin, s_min=smin, j_max=jmax, s_max=smax, p=p, t=t, i_fw=i_fw,
                  s_fw=s_fw)

    def active_min(self):
        """Active atom of smallest gradient and its gradient (fully-corrective inner steps)."""
        if self.use_numba:
            best, value, _ = K.active_argmin(self._w_np, self._s_np)
            return int(best), float(value)
        best, value, _ = K.torch_active_argmin(self.w, self.s)
        return (best, value) if self.ops.on_device else (int(best), float(value))

    def n_active(self) -> int:
        return int((self.w > 0).sum())

    def refresh(self) -> None:
        """Recompute ``s`` exactly from ``w`` (bounds accumulated rounding); renormalize ``w``."""
        total = self.w.sum()
        self.w.div_(total)
        self.s.copy_(self._full_gradient(self.w))
        p_prev = self.p_prev if self.keep_previous else None
        t_prev = self.t_prev if self.keep_previous else None
        W = self.W if self.keep_previous else None
        self._refresh_scalars()
        if self.keep_previous:
            self._set(p_prev=p_prev, t_prev=t_prev, W=W)

    def value(self):
        """Objective value ``f(x)`` (plus the objective's constant)."""
        return 0.5 * (self.p + self.t) + self.constant

    def gap(self):
        """Frank-Wolfe gap :math:`w^\\top s - \\min_k s_k` (exact, over all atoms)."""
        return self.p - self.s_min

    def point(self) -> Tensor:
        return self.lmo.to_point(self.w)

    def weights(self) -> Tensor:
        return self.w

    def snapshot(self):
        return self.w.clone()

    def restore(self, snap) -> None:
        self.w.copy_(snap)
        self.s.copy_(self._full_gradient(self.w))
        self._refresh_scalars()

    def correct_face(self) -> int:
        """The active-set corrective step on the face of ``w``
        (:func:`torchfw.optimizers._correction.correct_face`): the atoms that left, or -1."""
        from ._correction import correct_face

        return correct_face(self)

    # -- columns -------------------------------------------------------------------------------

    def vertex_gradient(self, k) -> Tensor:
        r""":math:`h_k = \nabla F(e_k) = A^\top (Q a_k + c)` as an ``(N,)`` tensor."""
        if not self.ops.on_device:
            cached = self._columns.get(k)
            if cached is not None:
                return cached
        if self._identity_atoms:
            h = self.Q.column(k)
        else:
            coord, sign = self.lmo.atom_coordinate(_as_index(k, self.w.device), self.n)
            col = self.Q.column(coord if self.ops.on_device else int(coord)).to(self.dtype)
            g = (sign.to(self.dtype) * float(self._radius)) * col
            if self.objective.c is not None:
                g = g + self.objective.c.to(self.dtype)
            h = self.lmo.atom_scores(g)
        if not self.ops.on_device:
            self._columns[k] = h
        return h

    def _get(self, vec: Tensor, k):
        """``vec[k]`` as a scalar of the engine's kind (0-d tensor on device, else float)."""
        return _at(vec, k).to(self.dtype) if self.ops.on_device else float(vec[k])

    def _entry(self, h: Tensor, j):
        return self._get(h, j)

    # Host scalars come from the NumPy views: indexing a tensor costs microseconds per read.
    def _ct(self, k):
        if self.ct is None:
            return 0.0
        return float(self._ct_np[k]) if self.use_numba else self._get(self.ct, k)

    def _diag(self, k):
        return float(self._diag_np[k]) if self.use_numba else self._get(self.diag, k)

    def _w(self, k):
        return float(self._w_np[k]) if self.use_numba else self._get(self.w, k)

    # -- moves ---------------------------------------------------------------------------------

    def _line(self, slope, curvature, gamma_max) -> Line:
        value = self.value()
        return Line(value=value, slope=slope, gamma_max=gamma_max, curvature=curvature,
                    phi=lambda g: value + g * slope + 0.5 * g * g * curvature, ops=self.ops)

    def toward(self, restricted: bool = False) -> Move:
        """FW move toward the FW atom (``restricted``: best atom of the active set)."""
        i, si = self.active_min() if restricted else (self.i_fw, self.s_fw)
        curvature = toward_curvature(self._diag(i), si - self._ct(i), self.p - self.t)
        line = self._line(si - self.p, curvature, 1.0)
        return Move("fw", line, lambda g: Coefficients(a=1.0 - g, b=g, i=i))

    def away(self) -> Move:
        """Away move from the active atom of largest gradient (max step keeps ``w_j >= 0``)."""
        j, sj = self.j_max, self.s_max
        curvature = toward_curvature(self._diag(j), sj - self._ct(j), self.p - self.t)
        line = self._line(self.p - sj, curvature, away_step_max(self._w(j), self.ops))
        return Move("away", line, lambda g: Coefficients(a=1.0 + g, b=-g, i=j))

    def pairwise(self, restricted: bool = False, partner=None) -> Move:
        """Pairwise move: mass from the away atom (or ``partner``) to the FW atom."""
        i, si = self.active_min() if restricted else (self.i_fw, self.s_fw)
        if partner is None:
            j, sj = self.j_max, self.s_max
        else:
            j = partner
            sj = self._s(j)
        curvature = pair_curvature(self._diag(i), self._diag(j), self._pair_entry(i, j))
        line = self._line(si - sj, curvature, self._w(j))
        return Move("pairwise", line,
                    lambda g: Coefficients(a=1.0, b=g, i=i, c=-g, j=j))

    def _pair_entry(self, i, j):
        r""":math:`\tilde Q_{ij}` for the pairwise line."""
        if self.ops.on_device and self._identity_atoms:
            # One entry in O(d); the update computes both columns in one pass over X.
            return self.Q.entry(i, j).to(self.dtype)
        return self._entry(self.vertex_gradient(i), j) - self._ct(j)

    def second_order_partner(self):
        """SWAP-2o away atom: the active atom of largest second-order pairwise gain."""
        i, si = self.i_fw, self.s_fw
        h_i = self.vertex_gradient(i)
        dii = self._diag(i)
        if self.use_numba:
            ct = self._ct_np
            j = K.second_order_partner(self._w_np, self._s_np, K.as_numpy(h_i), self._diag_np,
                                       ct, self.ct is not None, i, si, dii)
        else:
            j = K.torch_second_order_partner(self.w, self.s, h_i, self.diag, self.ct, i, si, dii)
            if not self.ops.on_device:
                j = int(j)
        if self.ops.on_device:
            return torch.where(j >= 0, j, self.j_max)
        return j if j >= 0 else self.j_max

    def extrapolation(self, fw: Move, lam) -> Move:
        r"""PARTAN move along :math:`\delta = \tilde w - w_{\text{prev}}` from the FW point.

        :math:`\tilde w = (1-\lambda) w + \lambda e_i`; the new iterate is
        :math:`\tilde w + \mu \delta`. The line is oriented along :math:`\sigma\delta` with
        :math:`\sigma = -\operatorname{sign}(\langle \nabla F(\tilde w), \delta\rangle)` so that it
        is a descent direction and the step is :math:`\mu = \sigma\gamma \ge 0`-parametrized.
        """
        i = fw.coefficients(0.0).i
        ci = self._ct(i)
        f_t, slope, curvature, noise = partan_line(
            fw.line, lam, self.constant, self.t, ci, self.W, self._previous_score(i) - ci,
            self.p_prev, self.t_prev)
        lo, hi = self._extrapolation_bounds(lam, i)
        return partan_move(f_t + self.constant, slope, curvature, noise, lo, hi, lam, i,
                           self.ops)

    def _previous_score(self, i):
        """:math:`s_{prev}[i]`, the previous iterate's score of atom ``i``."""
        return float(self._sp_np[i]) if self.use_numba else self._get(self.s_prev, i)

    def _extrapolation_bounds(self, lam, i):
        r"""The feasible :math:`\mu` of :math:`(1+\mu)\tilde w - \mu w_{prev}` as ``(lo, hi)``."""
        if self.use_numba:
            # Only atoms that ever had weight can bound mu: read those, not all N entries.
            self._note_support(int(i))
            return K.extrapolation_bounds_on(self._w_np, self._wp_np, lam, i, self._support,
                                             self._n_support)
        lo, hi = K.torch_extrapolation_bounds(self.w, self.w_prev, lam, i)
        return (lo, hi) if self.ops.on_device else (float(lo), float(hi))

    # -- update --------------------------------------------------------------------------------

    def apply(self, co: Coefficients, tick: bool = True) -> None:
        """Apply ``w <- a w + b e_i + c e_j + d w_prev`` and the matching gradient update.

        ``tick=False`` applies a move without counting an iteration (inner corrections).
        """
        if self.keep_previous:
            self._shift_scalars(co)
        self._update(co)
        if self._renormalizes:
            self._renormalize()
        if tick:
            self.tick()
            self._after_tick()

    def _renormalize(self) -> None:
        r"""Rescale the weights to sum to one, and the scores with them (in place).

        PARTAN's extrapolation :math:`(1+\mu)\tilde w - \mu w_{prev}` multiplies the rounding of
        low-precision weights by :math:`1 + 2\mu`: in float32 the iterate drifted off the set by
        up to 4e-5 (an L1 ball of radius 2, where the other variants stay within 1e-6). Exact
        arithmetic keeps :math:`\sum w = 1`, so the rescaling only removes that drift;
        :math:`s = \tilde Q w + \tilde c` is rescaled to match, and the reductions are refreshed
        by the next selection. Float64 runs skip it (their drift is at rounding level).
        """
        total = self.w.sum(-1, keepdim=True)
        self.w.div_(total)
        if self.ct is None:
            self.s.div_(total)
        else:
            self.s.sub_(self.ct).div_(total).add_(self.ct)

    def _shift_scalars(self, co: Coefficients) -> None:
        """PARTAN: the cross term :math:`W` after the move, and the scalars that become the
        previous iterate's (before the update overwrites ``p`` and ``t``: on device they are
        written in place)."""
        self._set(W=self._next_cross(co), p_prev=self.p, t_prev=self.t)

    def _next_cross(self, co: Coefficients):
        r""":math:`W` after the move ``co`` (:func:`~torchfw.optimizers._moves.cross_after`)."""
        j = co.j if co.j is not None else co.i
        return cross_after(co, self.p - self.t, self._s(co.i) - self._ct(co.i),
                           self._s(j) - self._ct(j), self.W)

    def _after_tick(self) -> None:
        """After a counted iteration: an exact refresh every ``refresh_every`` (host)."""
        if self.refresh_every and not self.ops.on_device and self.k % self.refresh_every == 0:
            self.refresh()

    def _update(self, co: Coefficients) -> None:
        """Storage: apply the move to ``w``, ``s`` (and the previous ones), then select."""
        ops = self.ops
        j = co.j if co.j is not None else co.i
        h0: Tensor | None
        h1: Tensor | None
        if self.use_numba:
            h0 = self.vertex_gradient(co.i)  # host scalars: never a device pair pass
            use_h1 = co.j is not None and co.c != 0.0
            h1 = self.vertex_gradient(j) if use_h1 else h0
            if self.keep_previous:
                self._note_support(int(co.i))
                self._note_support(int(j))
                K.shift_update_on(self._w_np, self._s_np, co.a, co.b, co.i, K.as_numpy(h0),
                                  co.c if use_h1 else 0.0, j, K.as_numpy(h1), co.d, self._wp_np,
                                  self._sp_np, self._support, self._n_support, ZERO_TOL)
            else:
                K.update(self._w_np, self._s_np, co.a, co.b, co.i, K.as_numpy(h0),
                         co.c if use_h1 else 0.0, j, K.as_numpy(h1), co.d, self._wp_np,
                         self._sp_np, False, ZERO_TOL)
            # _reselect's compiled branch, inline: the host path of the Lasso runs a few
            # microseconds per iteration, where one more call frame shows.
            self._store_selection(K.select(self._w_np, self._s_np, self._ct_np,
                                           self.ct is not None), host=True)
        else:
            pair_pass = (ops.on_device and self.pair_columns and self._identity_atoms
                         and co.j is not None)
            h0 = None if pair_pass else self.vertex_gradient(co.i)
            h1 = None
            if co.j is not None and ops.on_device and self.pair_columns and \
                    self._identity_atoms:
                pair = self.Q.columns(torch.cat([co.i.reshape(1), j.reshape(1)]))
                h0, h1 = pair[:, 0], pair[:, 1]  # both columns from one pass over X
            elif co.j is not None and (ops.on_device and self.pair_columns or
                                       not ops.on_device and co.c != 0.0):
                h1 = self.vertex_gradient(j)
            if K.torch_update(self.w, self.s, co.a, co.b, co.i, h0, co.c, j, h1, co.d,
                              self.w_prev, self.s_prev, self.keep_previous, ZERO_TOL):
                # The new iterate was written over the previous one: swap the references.
                assert self.w_prev is not None and self.s_prev is not None  # keep_previous
                self.w, self.w_prev = self.w_prev, self.w
                self.s, self.s_prev = self.s_prev, self.s
            self._reselect()
        if not ops.on_device:
            self._columns.clear()

    def _s(self, k):
        return float(self._s_np[k]) if self.use_numba else self._get(self.s, k)
