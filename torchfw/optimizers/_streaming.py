r"""Streaming working-set engine: the stochastic Frank-Wolfe of Ouyang & Gray (seed 001).

Atoms arrive one per iteration from a random permutation (one pass = one *epoch*). The engine
keeps the gradient only on a working set :math:`S` of atoms that were once admitted:

* a streamed atom :math:`k \notin S` gets its gradient from one restricted column,
  :math:`s_k = \tilde Q_{S,k}^\top w_S + \tilde c_k` (``|S|`` kernel evaluations), and is admitted
  iff :math:`s_k \le \min_{S} s` (in the paper's maximization form: :math:`g_k \ge \max_S g`);
* moves (FW, away, pairwise, PARTAN) are the usual ones, restricted to :math:`S`, and cost one
  restricted column :math:`\tilde Q_{S,i}` per atom touched.

The cost of an iteration is :math:`O(|S| d)` instead of :math:`O(m d)`, with no kernel matrix and
no full gradient. With :class:`~torchfw.FrankWolfe` this is SFW (Algorithm 1-2 of the paper); with
:class:`~torchfw.AwayStepFrankWolfe` it is MSFW (Algorithms 3-4, with the away atom taken over
:math:`\{p \in S: w_p > 0\}` as the spec's erratum requires). The reported gap is the gap of the
problem restricted to :math:`S`: a progress measure, not a certificate for the full problem
(the paper's Lemma 4.1 argument for it is flawed, see the spec).

**Tail averaging** (``average_from``, not in the paper). The last iterate of one pass is a
lottery: a toward step of size :math:`\lambda` moves the implicit bias
:math:`b = \sum_m w_m y_m` of the SVM by up to :math:`\lambda`, which is the order of the margin
:math:`\rho = w^\top \tilde Q w` itself late in the pass, so the decision threshold swings from
step to step (on a9a the test accuracy after one epoch ranges over 63-84% with the random order;
an independent NumPy transcription of the paper's Algorithm 1-2 does the same). The running
mean of the iterates from iteration ``average_from`` on is a convex combination, so it stays on
the simplex, and by convexity its objective is at most the mean of the averaged iterates'
values; it smooths the threshold out (84.9-85.2% on the same runs). It costs one O(|S|) vector
addition per iteration, the order of the gradient update.
"""

from __future__ import annotations

from typing import Protocol, cast

import numpy as np
import torch
from torch import Tensor

from ..objectives import Quadratic
from ..sets.oracles import LMO, Simplex
from ..utils.scalars import HOST
from . import _kernels as K
from ._face_space import FaceSpace
from ._moves import Coefficients
from ._selection import select_host
from ._state import StorageState
from ._vectors import feasible_interval, update_vectors

__all__ = ["StreamingStorage"]


class _RowColumns(Protocol):
    """An operator that evaluates a column on chosen rows only (checked in the constructor)."""

    def column_rows(self, i: int, rows: Tensor) -> Tensor: ...


class StreamingStorage(StorageState):
    """Working-set storage over a :class:`~torchfw.Simplex` (host scalars only).

    Vectors are stored by *slot* (position in the working set); the storage protocol
    (:mod:`torchfw.optimizers._storage`) looks atoms up by slot, so the FW, away and pairwise
    moves of :class:`~torchfw.optimizers._engine.QuadraticEngine`, which holds this storage,
    apply unchanged.

    Parameters
    ----------
    objective : Quadratic
        Its operator must provide ``column_rows(i, rows)`` (e.g.
        :class:`torchfw.svm.kernels.SVMDualOperator`).
    lmo : Simplex
    first : int
        The initial vertex (``w = e_first``).
    rng : numpy.random.Generator
        Source of the streaming order (a fresh permutation each epoch).
    """

    #: The corrective step runs on the working set: its face is drawn from the admitted atoms
    #: (the only ones with a score) and its matrix from their restricted columns.
    face_correction = True

    #: The working-set gap bounds nothing about the full problem: runs go by their budget.
    certifies_gap = False

    def __init__(self, objective: Quadratic, lmo: LMO, first: int, *, rng, keep_previous=False,
                 pair_columns=False, average_from: int | None = None):
        if not isinstance(lmo, Simplex) or isinstance(lmo.radius, Tensor):
            raise ValueError("streaming candidates need a Simplex with a scalar radius")
        if not hasattr(objective.Q, "column_rows"):
            raise ValueError("streaming candidates need an operator with column_rows(i, rows), "
                             "such as torchfw.svm.kernels.SVMDualOperator")
        self.objective = objective
        self.lmo = lmo
        self.Q = objective.Q
        self.n = m = objective.n
        r = float(lmo.radius)
        self.declare(ops=HOST, N=m, dtype=torch.float64, device=objective.device,
                     keep_previous=keep_previous, pair_columns=pair_columns,
                     constant=objective.constant, radius=r, use_numba=K.HAVE_NUMBA)
        self._diag_full = (r * r * self.Q.diagonal().double()).cpu().numpy()
        self._ct_full = (r * objective.c.double()).cpu().numpy() if objective.c is not None \
            else None
        self.rng = rng
        self._order = rng.permutation(m)
        self._cursor = 0
        self.epoch = 0
        # Working set: slot -> atom and atom -> slot; vectors indexed by slot (capacity m).
        self.members = np.empty(m + 1, dtype=np.int64)  # + one scratch position
        self._members_t = torch.from_numpy(self.members)
        self.slot_of = np.full(m, -1, dtype=np.int64)
        self.size = 0
        self.ws = np.zeros(m)
        self.ss = np.zeros(m)
        self.wps = np.zeros(m)
        self.sps = np.zeros(m)
        self.t = 0.0
        self.t_prev = 0.0
        self.average_from = average_from
        self._w_sum = np.zeros(m) if average_from is not None else None
        self._n_averaged = 0
        self._quad_sum = 0.0
        make_subset = getattr(self.Q, "compact_subset", None)
        self._subset = make_subset(m) if make_subset is not None else None
        self._diag_Q = self.Q.diagonal().double().cpu().numpy()
        self._admit(int(first), self._restricted_column(int(first), 0), weight=1.0)
        if keep_previous:
            self.wps[0], self.sps[0] = self.ws[0], self.ss[0]
        self._refresh_scalars()
        self._advance_stream()  # the first iteration already sees a streamed candidate

    # -- working set ---------------------------------------------------------------------------

    def _restricted_column(self, atom: int, n: int) -> np.ndarray:
        """Vertex gradient of ``atom`` on the first ``n`` members and on ``atom`` itself.

        Entry ``r < n`` is :math:`\tilde Q_{S_r, atom} + \tilde c_{S_r}`; the last entry is the
        atom's own :math:`\tilde Q_{kk} + \tilde c_k`.
        """
        self.members[n] = atom  # scratch position: the column ends with the diagonal entry
        if self._subset is not None:
            col = np.empty(n + 1)
            col[:n] = self._subset.column(atom)[:n]
            col[n] = self._diag_Q[atom]
            slot = self.slot_of[atom]
            if 0 <= slot < n:  # a member: its own entry needs the delta_ii / C_i term too
                col[slot] = self._diag_Q[atom]
        else:
            rows = self._members_t[:n + 1]
            col = cast(_RowColumns, self.Q).column_rows(atom, rows).cpu().numpy().astype(
                np.float64)
        if self._radius != 1.0:
            col *= self._radius ** 2
        if self._ct_full is not None:
            col += self._ct_full[self.members[:n + 1]]
        return col

    def _gradient_at(self, col: np.ndarray, w: np.ndarray, t: float, atom: int) -> float:
        """:math:`s_k = (\tilde Q w)_k + \tilde c_k` from the atom's restricted column."""
        n = w.shape[0]
        value = (K.dot(col, w, n) if self.use_numba else float(col[:n] @ w)) - t
        return value + (0.0 if self._ct_full is None else float(self._ct_full[atom]))

    def _admit(self, atom: int, col: np.ndarray, weight: float = 0.0) -> None:
        """Add ``atom`` (column over the members and itself) to the working set."""
        n = self.size
        self.members[n] = atom
        self.slot_of[atom] = n
        if self._subset is not None:
            self._subset.add(atom)
        s_new = self._gradient_at(col, self.ws[:n], self.t, atom)
        self.size = n + 1
        self.ws[n] = weight
        # With weight 1 (the initial vertex) the gradient is the vertex gradient itself.
        self.ss[n] = col[n] if weight == 1.0 else s_new
        if self.keep_previous:
            self.wps[n] = 0.0
            self.sps[n] = self._gradient_at(col, self.wps[:n], self.t_prev, atom)
        # Columns cached before the working set grew lack the new member's entry.
        self._columns = {atom: col}

    def _advance_stream(self) -> None:
        """Stream the next atom; admit it if its gradient is at most the working-set minimum."""
        if self._cursor == self.N:
            self._order = self.rng.permutation(self.N)
            self._cursor = 0
            self.epoch += 1
        atom = int(self._order[self._cursor])
        self._cursor += 1
        if self.slot_of[atom] >= 0:
            return  # a member: its gradient is maintained already (epochs >= 2)
        col = self._restricted_column(atom, self.size)
        s_new = self._gradient_at(col, self.ws[:self.size], self.t, atom)
        if s_new <= self.s_min:
            self._admit(atom, col)
            self.count("admitted")
            # The newcomer (weight 0) is the new gradient minimum; w, p, t and the away atom
            # are unchanged, so no rescan is needed.
            self._set(i_min=atom, s_min=s_new, i_fw=atom, s_fw=s_new)

    def reselect(self) -> None:
        """The selection over the working set's slots, stored by atom."""
        n = self.size
        ct = self._ct_full[self.members[:n]] if self._ct_full is not None else None
        imin, smin, jmax, smax, p, t = select_host(self.ws[:n], self.ss[:n], ct,
                                                   compiled=self.use_numba)
        i_atom = int(self.members[imin])
        self._set(i_min=i_atom, s_min=smin, i_fw=i_atom, s_fw=smin,
                  j_max=int(self.members[jmax]) if jmax >= 0 else -1, s_max=smax, p=p, t=t)

    # -- entries (the storage protocol) --------------------------------------------------------

    # The slot storage's columns are NumPy arrays, read by this storage's accessors only.
    def vertex_gradient(self, k) -> np.ndarray:
        col = self._columns.get(k)
        if col is None or col.shape[0] != self.size:
            col = self._restricted_column(int(k), self.size)[:self.size]
            self._columns[k] = col
        return col

    def _slot(self, atom) -> int:
        return int(self.slot_of[atom])

    def _entry(self, h, j):
        return float(h[self._slot(j)])

    def score(self, k):
        return float(self.ss[self._slot(k)])

    def weight(self, k):
        return float(self.ws[self._slot(k)])

    def linear(self, k):
        return 0.0 if self._ct_full is None else float(self._ct_full[k])

    def diagonal(self, k):
        return float(self._diag_full[k])

    def pair_entry(self, i, j):
        r""":math:`\tilde Q_{ij}`: entry ``j`` of atom ``i``'s restricted column."""
        return self._entry(self.vertex_gradient(i), j) - self.linear(j)

    def active_min(self):
        n = self.size
        masked = np.where(self.ws[:n] > 0, self.ss[:n], np.inf)
        slot = int(np.argmin(masked))
        return int(self.members[slot]), float(masked[slot])

    def n_active(self) -> int:
        return int((self.ws[:self.size] > 0).sum())

    def second_order_partner(self):
        raise ValueError("SWAP-2o is not available with streaming candidates")

    def weights(self) -> Tensor:
        w = np.zeros(self.N)
        w[self.members[:self.size]] = self.ws[:self.size]
        return torch.from_numpy(w).to(self._device)

    def point(self) -> Tensor:
        return self.lmo.to_point(self.weights())

    def average(self) -> tuple[Tensor, float] | None:
        r"""Mean :math:`\bar w` of the iterates after iterations ``average_from, ...`` and
        :math:`F(\bar w)`; ``None`` when averaging is off or has not begun.

        The value is exact without any kernel evaluation: with :math:`W_{l-1}` the sum of the
        averaged iterates before :math:`w_l` (supported on the working set of time :math:`l`,
        which only grows), :math:`T^2\,\bar w^\top Q \bar w = \sum_l w_l^\top Q w_l
        + 2 \sum_l W_{l-1}^\top Q w_l`, and :math:`Q w_l = s_l - \tilde c` on that working set.
        """
        T = self._n_averaged
        if T == 0 or self._w_sum is None:
            return None
        n = self.size
        w_bar = self._w_sum[:n] / T
        value = 0.5 * self._quad_sum / (T * T)
        if self._ct_full is not None:
            value += float(w_bar @ self._ct_full[self.members[:n]])
        w = np.zeros(self.N)
        w[self.members[:n]] = w_bar
        return self.lmo.to_point(torch.from_numpy(w).to(self._device)), \
            value + self.constant

    def _accumulate_average(self) -> None:
        if self.average_from is None or self._w_sum is None or \
                self.iteration() < self.average_from:
            return
        n = self.size  # slots never move, and new slots start at zero in the sum
        w, s = self.ws[:n], self.ss[:n]
        Qw = s if self._ct_full is None else s - self._ct_full[self.members[:n]]
        cross = float(self._w_sum[:n] @ Qw)  # W_{l-1}' Q w_l
        self._quad_sum += (self.p - self.t) + 2.0 * cross  # p - t = w_l' Q w_l
        self._w_sum[:n] += w
        self._n_averaged += 1

    def snapshot(self):
        n = self.size
        return n, self.ws[:n].copy(), self.ss[:n].copy()

    def restore(self, snap) -> None:
        n, w, s = snap
        self.ws[:n], self.ss[:n] = w, s
        self.ws[n:self.size] = 0.0
        self.reselect()

    def refresh(self) -> None:  # pragma: no cover - nothing global to refresh
        pass

    # -- the corrective step (over the working set's slots) ----------------------------------

    def face_space(self, problem: int = 0) -> FaceSpace:
        """The slot vectors of the working set (views), the atom of each slot."""
        n = self.size
        ct = self._ct_full[self.members[:n]] if self._ct_full is not None else None
        return FaceSpace(self.ws[:n], self.ss[:n], ct, atoms=self.members[:n],
                         lookup=lambda atoms: self.slot_of[atoms])

    def face_column(self, atom: int, problem: int = 0) -> np.ndarray:
        """The restricted column of ``atom`` over the slots (not cached: a face has many)."""
        return self._restricted_column(int(atom), self.size)[:self.size]

    def face_write(self, w, s, problem: int = 0) -> None:
        n = self.size
        self.ws[:n] = w
        self.ss[:n] = s
        if self.keep_previous:  # PARTAN restarts from the corrected iterate
            self.wps[:n] = w
            self.sps[:n] = s
        self._columns.clear()
        self._refresh_scalars()

    # -- PARTAN and update (slot-indexed vectors) ----------------------------------------------

    def previous_score(self, i):
        return float(self.sps[self._slot(i)])

    def _vector(self, v: np.ndarray):
        """The compiled kernels take the NumPy slot vectors; without numba the tensor forms
        run on zero-copy views of them (a Python loop over the slots would be the slow part)."""
        return v if self.use_numba else torch.from_numpy(v)

    def extrapolation_bounds(self, lam, i):
        n = self.size
        lo, hi = feasible_interval(self._vector(self.ws[:n]), self._vector(self.wps[:n]), lam,
                                   self._slot(i))
        return float(lo), float(hi)

    def update(self, co: Coefficients) -> None:
        n = self.size
        j = co.j if co.j is not None else co.i
        h0 = self.vertex_gradient(co.i)
        use_h1 = co.j is not None and co.c != 0.0
        h1 = self.vertex_gradient(j) if use_h1 else h0
        # The compiled kernel, or without it its NumPy form (not the PyTorch form: a dozen
        # tensor operations on a working set's short vectors cost fifty times more).
        update_vectors(self.ws[:n], self.ss[:n], co.a, co.b, self._slot(co.i), h0,
                       co.c if use_h1 else 0.0, self._slot(j), h1, co.d, self.wps[:n],
                       self.sps[:n], shift=self.keep_previous, compiled=self.use_numba)
        self._columns.clear()
        self.reselect()

    def after_tick(self) -> None:
        self._accumulate_average()
        # The next iteration sees the next streamed atom (admitted or not).
        self._advance_stream()

