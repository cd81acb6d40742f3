r"""Solver engines: the state of a run and the moves a Frank-Wolfe variant can make.

A variant (FW, away-step, pairwise, SWAP, PARTAN, fully corrective) chooses *moves*; an engine
knows how to evaluate and apply them. Every move is the affine update

.. math:: w \leftarrow a\, w + b\, e_i + c\, e_j + d\, w_{\text{prev}}

of the weights over the set's atoms (on a non-atomic set, of the point itself with ``e_i`` a
dense vertex), described by :class:`Coefficients`. The coefficients always sum to one, so the
gradient follows the same combination of *vertex gradients* :math:`h_k = \nabla F(e_k)`:
:math:`s \leftarrow a s + b h_i + c h_j + d s_{\text{prev}}`.

Two engines implement the moves:

* :class:`QuadraticEngine` -- a :class:`~torchfw.Quadratic` over an atomic set with a
  closed-form line search. It keeps ``s`` incrementally (one column of ``Q`` per atom touched) and
  all scalars (value, slopes, curvatures) in closed form. It runs either with host scalars
  (fused compiled CPU kernels) or with device scalars (no host synchronization: CUDA graphs).
* :class:`GenericEngine` -- any objective (autograd gradient) and any set; on atomic sets it
  keeps the weights too, so that active-set variants work for every objective.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import torch
from torch import Tensor

from .._scalars import HOST, Scalars
from ..linesearch import Line
from ..objectives import Objective, Quadratic
from ..oracles import LMO, AtomicLMO, Simplex
from . import _kernels as K

__all__ = ["Coefficients", "Move", "QuadraticEngine", "GenericEngine"]

#: Weights at or below this value are set to exactly zero after each update (drop steps and
#: rounding). Weights live on the unit simplex, so this is far below any meaningful mass.
ZERO_TOL = 1e-15


@dataclass
class Coefficients:
    """``w <- a w + b e_i + c e_j + d w_prev``; ``drop`` zeroes ``w_j`` exactly afterwards."""

    a: Any
    b: Any
    i: Any
    c: Any = 0.0
    j: Any = None
    d: Any = 0.0

    def where(self, cond, other: Coefficients, ops: Scalars) -> Coefficients:
        """Coefficients of ``self`` where ``cond`` holds, else of ``other`` (branch-free)."""
        if not ops.on_device:
            return self if cond else other
        j_self = self.j if self.j is not None else self.i
        j_other = other.j if other.j is not None else other.i
        return Coefficients(
            a=ops.where(cond, self.a, other.a), b=ops.where(cond, self.b, other.b),
            i=torch.where(cond, self.i, other.i), c=ops.where(cond, self.c, other.c),
            j=torch.where(cond, j_self, j_other), d=ops.where(cond, self.d, other.d))


@dataclass
class Move:
    """A candidate step: the line it searches and how a step size becomes coefficients."""

    kind: str
    line: Line
    to_coefficients: Callable[[Any], Coefficients]

    def coefficients(self, gamma) -> Coefficients:
        return self.to_coefficients(gamma)


def _as_index(i, device):
    return i if isinstance(i, Tensor) else torch.tensor(i, device=device)


def ops_abs(x):
    """``|x|`` for a float or a tensor."""
    return x.abs() if isinstance(x, Tensor) else abs(x)


def partan_move(value, slope, curvature, noise, lo, hi, lam, i, ops) -> Move:
    r"""The PARTAN extrapolation as a move along :math:`\sigma\delta` from the FW point.

    ``value`` is :math:`F(\tilde w)`, ``slope`` :math:`\langle\nabla F(\tilde w), \delta\rangle`
    and ``curvature`` :math:`\|\delta\|^2_Q` for :math:`\delta = \tilde w - w_{prev}`;
    ``[lo, hi]`` are the feasible :math:`\mu`. The line is oriented so that it descends
    (:math:`\sigma = -\operatorname{sign}` of the slope), and the new weights are
    :math:`(1+\mu)\tilde w - \mu w_{prev}` with :math:`\tilde w = (1-\lambda) w + \lambda e_i`.
    """
    sigma = ops.where(slope > 0.0, -1.0, 1.0)
    gamma_max = ops.where(slope > 0.0, -lo, hi)
    # The curvature is a difference of O(1) terms; near convergence it drops below their
    # rounding noise (and may even come out negative), and an "exact" step along such a line
    # explodes. There the extrapolation gains nothing anyway: skip it.
    gamma_max = ops.where(curvature > noise, gamma_max, 0.0)
    line = Line(value=value, slope=sigma * slope, gamma_max=gamma_max, curvature=curvature,
                ops=ops)
    line.phi = lambda g: line.value + g * line.slope + 0.5 * g * g * curvature

    def to_coefficients(gamma):
        mu = sigma * gamma
        return Coefficients(a=(1.0 + mu) * (1.0 - lam), b=(1.0 + mu) * lam, i=i, d=-mu)

    return Move("partan", line, to_coefficients)


def _at(vec: Tensor, i):
    """``vec[i]`` (shape (1,)) for an index tensor without a host read (indexing may sync)."""
    return vec.index_select(0, i.reshape(1))


class _Engine:
    """Shared bookkeeping: iteration counter, step counters, snapshot/restore."""

    ops: Scalars = HOST
    atomic: bool = True
    #: Whether :meth:`gap` bounds the suboptimality of the whole problem (stopping test).
    certifies_gap: bool = True

    def _init_counters(self, device) -> None:
        self.k = 0 if not self.ops.on_device else torch.zeros(1, dtype=torch.int64,
                                                               device=device)
        self._counts: dict[str, Any] = {}
        self._device = device

    def count(self, name: str, cond=True) -> None:
        """Add one to counter ``name`` where ``cond`` holds (sync-free on device)."""
        if self.ops.on_device:
            inc = torch.as_tensor(cond, device=self._device).to(torch.int64)
            if name not in self._counts:
                self._counts[name] = torch.zeros(1, dtype=torch.int64, device=self._device)
            self._counts[name].add_(inc)
        elif cond:
            self._counts[name] = self._counts.get(name, 0) + 1

    def step_counts(self) -> dict[str, int]:
        return {k: int(v) for k, v in self._counts.items()}

    def average(self):
        """``(point, value)`` of the averaged iterates, or None (only streaming runs average)."""
        return None

    def tick(self) -> None:
        if self.ops.on_device:
            self.k.add_(1)
        else:
            self.k += 1

    def iteration(self) -> int:
        return int(self.k)

    def _set(self, **values) -> None:
        """Store scalars; on device into fixed tensors (CUDA graphs replay fixed addresses)."""
        if not self.ops.on_device:
            self.__dict__.update(values)
            return
        for name, value in values.items():
            current = getattr(self, name, None)
            if self.ops.on_device and isinstance(current, Tensor):
                current.copy_(value)
            elif self.ops.on_device and isinstance(value, Tensor):
                # Shape (1,), not 0-d: torch.compile treats 0-d CPU tensors as Python numbers
                # and silently drops in-place writes to them.
                setattr(self, name, value.reshape(1).clone())
            else:
                setattr(self, name, value)

    #: Tensor attributes that make up the device-side state (see :meth:`device_state`).
    _STATE = ()

    def device_state(self) -> list[Tensor]:
        """The device state as a flat list of tensors (attributes, then step counters)."""
        names = [n for n in self._STATE if isinstance(getattr(self, n, None), Tensor)]
        self._state_names = names + [f"count:{k}" for k in sorted(self._counts)]
        return [self._state_get(n) for n in self._state_names]

    def _state_get(self, name: str) -> Tensor:
        return self._counts[name[6:]] if name.startswith("count:") else getattr(self, name)

    def bind_state(self, tensors) -> None:
        """Make the engine use ``tensors`` (same order as :meth:`device_state`) as its state."""
        for name, tensor in zip(self._state_names, tensors, strict=True):
            if name.startswith("count:"):
                self._counts[name[6:]] = tensor
            else:
                setattr(self, name, tensor)

    def choose(self, cond, if_true: Callable[[], Coefficients],
               if_false: Callable[[], Coefficients]) -> Coefficients:
        """Coefficients of one of two moves; on the host only the chosen one is evaluated."""
        if not self.ops.on_device:
            return if_true() if cond else if_false()
        return if_true().where(cond, if_false(), self.ops)


# ---------------------------------------------------------------------------------------------
# Incremental quadratic engine
# ---------------------------------------------------------------------------------------------

class QuadraticEngine(_Engine):
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

    _STATE = ("w", "s", "w_prev", "s_prev", "k", "i_min", "s_min", "j_max", "s_max", "p", "t",
              "i_fw", "s_fw", "W", "p_prev", "t_prev")

    def __init__(self, objective: Quadratic, lmo: AtomicLMO, w0: Tensor, *, ops: Scalars,
                 keep_previous: bool = False, pair_columns: bool = False,
                 sample: Callable | None = None, refresh_every: int | None = None):
        self.objective = objective
        self.lmo = lmo
        self.ops = ops
        self.Q = objective.Q
        self.n = objective.n
        self.N = lmo.n_atoms(self.n)
        self.dtype = w0.dtype
        device = w0.device
        self.keep_previous = keep_previous
        self.pair_columns = pair_columns
        self.sample = sample
        self.refresh_every = refresh_every
        self._radius = lmo.radius
        # The plain SVM dual: vertex gradients are the columns themselves.
        self._identity_atoms = (isinstance(lmo, Simplex) and not isinstance(lmo.radius, Tensor)
                                and lmo.radius == 1.0 and objective.c is None)
        self.use_numba = (not ops.on_device) and K.HAVE_NUMBA and device.type == "cpu"
        r2 = float(self._radius) ** 2
        self.diag = (r2 * lmo.atom_gather(self.Q.diagonal().to(self.dtype))).contiguous()
        self.ct = (lmo.atom_scores(objective.c.to(self.dtype)).contiguous()
                   if objective.c is not None else None)
        self.w = w0.clone().contiguous()
        self.s = self._full_gradient(self.w)
        if keep_previous:
            self.w_prev = self.w.clone()
            self.s_prev = self.s.clone()
        else:
            self.w_prev = self.s_prev = None
        self._init_counters(device)
        self._columns: dict[int, Tensor] = {}
        self._numpy_views()
        self._refresh_scalars()

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
            nonzero = np.flatnonzero(K.as_numpy(self.w))
            self._support = np.empty(self.N, dtype=np.int64)
            self._support[:nonzero.size] = nonzero
            self._n_support = nonzero.size
            self._in_support = np.zeros(self.N, dtype=np.bool_)
            self._in_support[nonzero] = True
        self._w_np = K.as_numpy(self.w)
        self._s_np = K.as_numpy(self.s)
        self._wp_np = K.as_numpy(self.w_prev) if self.keep_previous else self._w_np
        self._sp_np = K.as_numpy(self.s_prev) if self.keep_previous else self._s_np
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
        sel = K.torch_select(self.w, self.s, self.ct)
        self._store_selection(sel, host=not self.ops.on_device)
        if self.keep_previous:
            # W = w' Q~ w_prev; at the start w_prev == w.
            self._set(W=self.p - self.t, p_prev=self.p, t_prev=self.t)

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
        return 0.5 * (self.p + self.t) + self.objective.constant

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
        q = self.p - self.t
        u_i = si - self._ct(i)
        curvature = self._diag(i) - 2.0 * u_i + q
        line = self._line(si - self.p, curvature, 1.0)
        return Move("fw", line, lambda g: Coefficients(a=1.0 - g, b=g, i=i))

    def away(self) -> Move:
        """Away move from the active atom of largest gradient (max step keeps ``w_j >= 0``)."""
        ops = self.ops
        j, sj = self.j_max, self.s_max
        wj = self._w(j)
        q = self.p - self.t
        u_j = sj - self._ct(j)
        curvature = self._diag(j) - 2.0 * u_j + q
        gamma_max = ops.where(wj < 1.0, wj / ops.maximum(1.0 - wj, 1e-300), 0.0)
        line = self._line(self.p - sj, curvature, gamma_max)
        return Move("away", line, lambda g: Coefficients(a=1.0 + g, b=-g, i=j))

    def pairwise(self, restricted: bool = False, partner=None) -> Move:
        """Pairwise move: mass from the away atom (or ``partner``) to the FW atom."""
        i, si = self.active_min() if restricted else (self.i_fw, self.s_fw)
        if partner is None:
            j, sj = self.j_max, self.s_max
        else:
            j = partner
            sj = self._s(j)
        if self.ops.on_device and self._identity_atoms:
            # One entry in O(d); the update computes both columns in one pass over X.
            q_ij = self.Q.entry(i, j).to(self.dtype)
        else:
            q_ij = self._entry(self.vertex_gradient(i), j) - self._ct(j)
        curvature = self._diag(i) + self._diag(j) - 2.0 * q_ij
        gamma_max = self._w(j)
        line = self._line(si - sj, curvature, gamma_max)
        return Move("pairwise", line,
                    lambda g: Coefficients(a=1.0, b=g, i=i, c=-g, j=j))

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
        # Scalars at the FW point w~.
        f_t = fw.line.value + lam * fw.line.slope + 0.5 * lam * lam * fw.line.curvature \
            - self.objective.constant
        t_t = (1.0 - lam) * self.t + lam * ci
        p_t = 2.0 * f_t - t_t                       # w~' s~
        u_prev_i = self._previous_score(i) - ci
        cross = (1.0 - lam) * self.W + lam * u_prev_i  # w~' Q~ w_prev
        q_t = p_t - t_t
        q_prev = self.p_prev - self.t_prev
        slope = p_t - (cross + self.t_prev)        # <s~, w~ - w_prev>
        curvature = q_t - 2.0 * cross + q_prev     # ||w~ - w_prev||^2_Q~
        lo, hi = self._extrapolation_bounds(lam, i)
        noise = 1e-11 * (ops_abs(q_t) + 2.0 * ops_abs(cross) + ops_abs(q_prev))
        return partan_move(f_t + self.objective.constant, slope, curvature, noise, lo, hi, lam,
                           i, self.ops)

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
        ops = self.ops
        j = co.j if co.j is not None else co.i
        if self.keep_previous:
            # W' = w_new' Q~ w_old = a q + b u_i + c u_j + d W (before the shift).
            q = self.p - self.t
            u_i = self._s(co.i) - self._ct(co.i)
            u_j = self._s(j) - self._ct(j)
            W_new = co.a * q + co.b * u_i + co.c * u_j + co.d * self.W
            # Store the previous scalars before p, t are overwritten below (in this order: see
            # torch_update on clones of values that are later written in place).
            self._set(W=W_new, p_prev=self.p, t_prev=self.t)
        pair_pass = (ops.on_device and self.pair_columns and self._identity_atoms
                     and co.j is not None)
        h0 = None if pair_pass else self.vertex_gradient(co.i)
        if self.use_numba:
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
            sel = K.select(self._w_np, self._s_np, self._ct_np, self.ct is not None)
            self._store_selection(sel, host=True)
        else:
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
                self.w, self.w_prev = self.w_prev, self.w
                self.s, self.s_prev = self.s_prev, self.s
            self._store_selection(K.torch_select(self.w, self.s, self.ct),
                                  host=not ops.on_device)
        if not ops.on_device:
            self._columns.clear()
        if not tick:
            return
        self.tick()
        if self.refresh_every and not ops.on_device and self.k % self.refresh_every == 0:
            self.refresh()

    def _s(self, k):
        return float(self._s_np[k]) if self.use_numba else self._get(self.s, k)


# ---------------------------------------------------------------------------------------------
# Generic engine
# ---------------------------------------------------------------------------------------------

class GenericEngine(_Engine):
    """Engine for any objective (autograd gradient) and any set, with host scalars.

    On atomic sets it keeps the weights over atoms next to the point, so that active-set moves
    (away, pairwise) work for every objective; on other sets only FW and PARTAN moves exist.
    Each applied move costs one objective and gradient evaluation.
    """

    ops = HOST

    def __init__(self, objective: Objective, lmo: LMO, x0: Tensor, *, keep_previous: bool = False,
                 sample: Callable | None = None, w0: Tensor | None = None):
        self.objective = objective
        self.lmo = lmo
        self.atomic = lmo.is_atomic
        self.keep_previous = keep_previous
        self.sample = sample
        self.n = x0.shape[-1]
        self.dtype = x0.dtype
        if self.atomic:
            self.w = (w0 if w0 is not None else lmo.to_weights(x0)).clone()
            self.x = lmo.to_point(self.w)
        else:
            self.w = None
            self.x = x0.clone()
        if keep_previous:
            self.x_prev = self.x.clone()
            self.w_prev = self.w.clone() if self.atomic else None
        self._init_counters(x0.device)
        self._evaluate()

    def _evaluate(self) -> None:
        f, g = self.objective.value_and_grad(self.x)
        self.f = float(f)
        self.g = g.detach()
        if self.atomic:
            self.scores = self.lmo.atom_scores(self.g)
            self.p = float(torch.dot(self.scores, self.w))
            self.i_min = int(torch.argmin(self.scores))
            self.s_min = float(self.scores[self.i_min])
            active = self.w > 0
            masked_max = torch.where(active, self.scores, torch.full_like(self.scores, -math.inf))
            masked_min = torch.where(active, self.scores, torch.full_like(self.scores, math.inf))
            self.j_max = int(torch.argmax(masked_max))
            self.s_max = float(masked_max[self.j_max])
            self.i_act_min = int(torch.argmin(masked_min))
            self.s_act_min = float(masked_min[self.i_act_min])
            self.n_active = int(active.sum())
            if self.sample is not None:
                self.i_fw = int(self.sample(self.scores))
                self.s_fw = float(self.scores[self.i_fw])
            else:
                self.i_fw, self.s_fw = self.i_min, self.s_min
        else:
            self.vertex = self.lmo.lmo(self.g)
            self.p = float(torch.dot(self.g.flatten(), self.x.flatten()))
            self.s_min = float(torch.dot(self.g.flatten(), self.vertex.flatten()))

    def value(self):
        return self.f

    def gap(self):
        return self.p - self.s_min

    def active_min(self):
        return self.i_act_min, self.s_act_min

    def point(self) -> Tensor:
        return self.x

    def weights(self) -> Tensor | None:
        return self.w

    #: What :meth:`snapshot` keeps: the point and everything evaluated at it.
    _STATE = ("x", "w", "x_prev", "w_prev", "f", "g", "scores", "vertex", "p", "i_min", "s_min",
              "j_max", "s_max", "i_act_min", "s_act_min", "n_active", "i_fw", "s_fw")

    def snapshot(self):
        # The evaluated state, not just the point: restoring after a NaN must not call the
        # objective again (it may be what turned NaN), or the returned value and gap are NaN.
        return {k: v.clone() if isinstance(v, Tensor) else v
                for k, v in vars(self).items() if k in self._STATE}

    def restore(self, snap) -> None:
        for k, v in snap.items():
            setattr(self, k, v.clone() if isinstance(v, Tensor) else v)

    # -- moves ---------------------------------------------------------------------------------

    def _atom(self, k) -> Tensor:
        return self.lmo.atom(k, self.n, dtype=self.dtype, device=self.x.device)

    def _line(self, d_x: Tensor, slope: float, gamma_max, base: Tensor | None = None,
              value: float | None = None) -> Line:
        base = self.x if base is None else base
        value = self.f if value is None else value
        curvature = (float(self.objective.curvature(d_x))
                     if self.objective.has_curvature else None)

        def phi(gamma):
            with torch.no_grad():
                return float(self.objective.value(base + gamma * d_x))

        return Line(value=value, slope=slope, gamma_max=gamma_max, curvature=curvature,
                    phi=phi, dnorm2=float(torch.dot(d_x.flatten(), d_x.flatten())), ops=HOST)

    def _move(self, kind: str, line: Line, to_coefficients) -> Move:
        """A move whose ``phi`` evaluates ``f`` at the very point :meth:`apply` would produce.

        ``f(x + gamma d)`` and ``f`` at ``(1 - gamma) x + gamma v`` differ by rounding; near
        convergence that was enough for an accepted backtracking step to raise ``f`` by an ulp.
        """
        def phi(gamma):
            with torch.no_grad():
                return float(self.objective.value(self._combine(to_coefficients(gamma))[1]))

        line.phi = phi
        return Move(kind, line, to_coefficients)

    def toward(self, restricted: bool = False) -> Move:
        if not self.atomic:
            v = self.vertex
            d_x = v - self.x
            line = self._line(d_x, self.s_min - self.p, 1.0)
            return self._move("fw", line, lambda g: Coefficients(a=1.0 - g, b=g, i=v))
        i, si = self.active_min() if restricted else (self.i_fw, self.s_fw)
        d_x = self._atom(i) - self.x
        line = self._line(d_x, si - self.p, 1.0)
        return self._move("fw", line, lambda g: Coefficients(a=1.0 - g, b=g, i=i))

    def away(self) -> Move:
        j, sj = self.j_max, self.s_max
        wj = float(self.w[j])
        gamma_max = wj / (1.0 - wj) if wj < 1.0 else 0.0
        d_x = self.x - self._atom(j)
        line = self._line(d_x, self.p - sj, gamma_max)
        return self._move("away", line, lambda g: Coefficients(a=1.0 + g, b=-g, i=j))

    def pairwise(self, restricted: bool = False, partner=None) -> Move:
        i, si = self.active_min() if restricted else (self.i_fw, self.s_fw)
        j = self.j_max if partner is None else partner
        sj = float(self.scores[j])
        d_x = self._atom(i) - self._atom(j)
        line = self._line(d_x, si - sj, float(self.w[j]))
        return self._move("pairwise", line, lambda g: Coefficients(a=1.0, b=g, i=i, c=-g, j=j))

    def second_order_partner(self):
        raise ValueError("the second-order SWAP rule needs a torchfw.Quadratic objective")

    def extrapolation(self, fw: Move, lam) -> Move:
        co = fw.coefficients(lam)
        x_t = self._combine(co)[1]
        w_t = self._combine(co)[0]
        f_t, g_t = self.objective.value_and_grad(x_t)
        delta_x = x_t - self.x_prev
        slope = float(torch.dot(g_t.flatten(), delta_x.flatten()))
        sigma = -1.0 if slope > 0 else 1.0
        if self.atomic:
            delta_w = w_t - self.w_prev
            step_max = Simplex().max_step(w_t, sigma * delta_w)
        else:
            step_max = self.lmo.max_step(x_t, sigma * delta_x)
        line = self._line(sigma * delta_x, sigma * slope, float(step_max), base=x_t,
                          value=float(f_t))
        a0, b0 = co.a, co.b

        def to_coefficients(gamma):
            mu = sigma * gamma
            return Coefficients(a=(1.0 + mu) * a0, b=(1.0 + mu) * b0, i=co.i, d=-mu)

        return self._move("partan", line, to_coefficients)

    # -- update --------------------------------------------------------------------------------

    def _combine(self, co: Coefficients) -> tuple[Tensor | None, Tensor]:
        """New (weights, point) for coefficients ``co`` without changing the state."""
        if co.a == 1.0 and co.b == 0.0 and co.c == 0.0 and co.d == 0.0:
            # A null step (gamma = 0) must leave the point bit-identical: renormalizing the
            # weights would move it by an ulp and could raise f.
            return (None if self.w is None else self.w.clone()), self.x.clone()
        if self.atomic:
            w = co.a * self.w
            w[co.i] += co.b
            if co.j is not None:
                w[co.j] += co.c
            if self.keep_previous and co.d != 0.0:
                w = w + co.d * self.w_prev
            w = torch.where(w <= ZERO_TOL, torch.zeros_like(w), w)
            # Keep the weights on the unit simplex: an extrapolation (1 + mu) w~ - mu w_prev
            # multiplies the rounding error of sum(w) by 1 + 2|mu|, and PARTAN's mu grows near
            # the optimum: unchecked, the error compounded into infeasible iterates (1e-5).
            w = w / w.sum()
            return w, self.lmo.to_point(w)
        x = co.a * self.x + co.b * co.i
        if self.keep_previous and co.d != 0.0:
            x = x + co.d * self.x_prev
        return None, x

    def apply(self, co: Coefficients, tick: bool = True) -> None:
        w, x = self._combine(co)
        if self.keep_previous:
            self.x_prev = self.x
            self.w_prev = self.w
        self.w, self.x = w, x
        self._evaluate()
        if tick:
            self.tick()


def replace_gamma_max(line: Line, gamma_max) -> Line:
    """Copy of ``line`` with another maximal step."""
    return replace(line, gamma_max=gamma_max)
