r"""The host/device storage of one problem: the numbers of :class:`QuadraticEngine`'s moves.

One concern: where the weights ``w`` over the ``N`` atoms, the scores ``s``, the diagonal and the
linear term over atoms (and PARTAN's previous iterate) live for one problem on one process, and
how the storage protocol (:mod:`torchfw.optimizers._storage`) reads and writes them: with host
scalars through the fused numba kernels over NumPy views of the tensors, or without numba and
with device scalars through tensor ops (no host read: compiled and CUDA-graph captured). The
moves are :class:`~torchfw.optimizers._engine.QuadraticEngine`'s, which holds this storage.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch
from torch import Tensor

from ..objectives import ColumnOperator, Quadratic
from ..sets.oracles import AtomicLMO, Simplex
from ..utils.scalars import Scalars
from . import _kernels as K
from ._face_space import FaceSpace
from ._moves import Coefficients
from ._selection import select
from ._state import StorageState
from ._vectors import feasible_interval, update_vectors

__all__ = ["HostStorage"]


def _as_index(i, device):
    return i if isinstance(i, Tensor) else torch.tensor(i, device=device)


def _host64(vec: Tensor):
    """A float64 host copy of ``vec`` (NumPy)."""
    return vec.detach().to(torch.float64).cpu().numpy()


def _at(vec: Tensor, i):
    """``vec[i]`` (shape (1,)) for an index tensor without a host read (indexing may sync)."""
    return vec.index_select(0, i.reshape(1))


class HostStorage(StorageState):
    r"""The storage of one problem on one process: :math:`f(x) = \tfrac12 x^\top Q x + c^\top x`
    over an atomic set, with host or device scalars.

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

    #: Whether the engine's ``correct_face`` applies to this storage (the active-set corrective
    #: step, :mod:`torchfw.optimizers._correction`, through :meth:`face_space`,
    #: :meth:`face_column` and :meth:`face_write`).
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

    # -- state ---------------------------------------------------------------------------------

    def _full_gradient(self, w: Tensor) -> Tensor:
        x = self.lmo.to_point(w)
        g = self.Q.matvec(x).to(self.dtype)
        if self.objective.c is not None:
            g = g + self.objective.c.to(self.dtype)
        return self.lmo.atom_scores(g).contiguous()

    def reselect(self) -> None:
        """The selection of the next iteration from the vectors (sets ``i_min, s_min,
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
    def linear(self, k):
        if self.ct is None:
            return 0.0
        return float(self._ct_np[k]) if self.use_numba else self._get(self.ct, k)

    def diagonal(self, k):
        return float(self._diag_np[k]) if self.use_numba else self._get(self.diag, k)

    def weight(self, k):
        return float(self._w_np[k]) if self.use_numba else self._get(self.w, k)

    # -- pairs, SWAP-2o, PARTAN ------------------------------------------------------------------------

    def pair_entry(self, i, j):
        r""":math:`\tilde Q_{ij}` for the pairwise line."""
        if self.ops.on_device and self._identity_atoms:
            # One entry in O(d); the update computes both columns in one pass over X.
            return self.Q.entry(i, j).to(self.dtype)
        return self._entry(self.vertex_gradient(i), j) - self.linear(j)

    def second_order_partner(self):
        """SWAP-2o away atom: the active atom of largest second-order pairwise gain."""
        i, si = self.i_fw, self.s_fw
        h_i = self.vertex_gradient(i)
        dii = self.diagonal(i)
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

    def previous_score(self, i):
        """:math:`s_{prev}[i]`, the previous iterate's score of atom ``i``."""
        return float(self._sp_np[i]) if self.use_numba else self._get(self.s_prev, i)

    def extrapolation_bounds(self, lam, i):
        r"""The feasible :math:`\mu` of :math:`(1+\mu)\tilde w - \mu w_{prev}` as ``(lo, hi)``."""
        if self.use_numba:
            # Only atoms that ever had weight can bound mu: read those, not all N entries.
            self._note_support(int(i))
            return feasible_interval(self._w_np, self._wp_np, lam, i, support=self._support,
                                     n_support=self._n_support)
        lo, hi = feasible_interval(self.w, self.w_prev, lam, i)
        return (lo, hi) if self.ops.on_device else (float(lo), float(hi))

    # -- the corrective step ----------------------------------------------------------------

    def face_space(self, problem: int = 0) -> FaceSpace:
        """The vectors over the ``N`` atoms (views of the NumPy state with numba, else float64
        copies)."""
        if self.use_numba:
            return FaceSpace(self._w_np, self._s_np, self._ct_np if self.ct is not None else None)
        return FaceSpace(_host64(self.w), _host64(self.s),
                         None if self.ct is None else _host64(self.ct))

    def face_column(self, atom: int, problem: int = 0):
        h = self.vertex_gradient(atom)
        self._columns.clear()
        return K.as_numpy(h.detach()) if self.use_numba else h.detach().cpu().numpy()

    def face_write(self, w, s, problem: int = 0) -> None:
        if self.use_numba:
            self._w_np[:] = w
            self._s_np[:] = s
        else:
            self.w.copy_(torch.from_numpy(w).to(self.w.dtype).to(self.w.device))
            self.s.copy_(torch.from_numpy(s).to(self.s.dtype).to(self.s.device))
        if self.keep_previous:  # PARTAN restarts from the corrected iterate
            assert self.w_prev is not None and self.s_prev is not None
            self.w_prev.copy_(self.w)
            self.s_prev.copy_(self.s)
            if self.use_numba:
                # The face's new atoms have weight: the support list must hold them (the
                # compiled moves and bounds read only its atoms; the plain moves give
                # weight to their FW atom alone).
                for i in np.flatnonzero(self._w_np > 0.0).tolist():
                    self._note_support(i)
        self._columns.clear()
        self._refresh_scalars()

    # -- update --------------------------------------------------------------------------------

    def after_tick(self) -> None:
        """After a counted iteration: an exact refresh every ``refresh_every`` (host)."""
        if self.refresh_every and not self.ops.on_device and self.k % self.refresh_every == 0:
            self.refresh()

    def update(self, co: Coefficients) -> None:
        """Apply the move to ``w``, ``s`` (and the previous ones), then select."""
        ops = self.ops
        j = co.j if co.j is not None else co.i
        h0: Tensor | None
        h1: Tensor | None
        if self.use_numba:
            h0 = self.vertex_gradient(co.i)  # host scalars: never a device pair pass
            use_h1 = co.j is not None and co.c != 0.0
            h1 = self.vertex_gradient(j) if use_h1 else h0
            support = None
            if self.keep_previous:
                self._note_support(int(co.i))
                self._note_support(int(j))
                support = self._support
            update_vectors(self._w_np, self._s_np, co.a, co.b, co.i, K.as_numpy(h0),
                           co.c if use_h1 else 0.0, j, K.as_numpy(h1), co.d, self._wp_np,
                           self._sp_np, shift=self.keep_previous, support=support,
                           n_support=self._n_support if support is not None else 0)
            # reselect's compiled branch, inline: the host path of the Lasso runs a few
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
            if update_vectors(self.w, self.s, co.a, co.b, co.i, h0, co.c, j, h1, co.d,
                              self.w_prev, self.s_prev, shift=self.keep_previous):
                # The new iterate was written over the previous one: swap the references.
                assert self.w_prev is not None and self.s_prev is not None  # keep_previous
                self.w, self.w_prev = self.w_prev, self.w
                self.s, self.s_prev = self.s_prev, self.s
            self.reselect()
        if not ops.on_device:
            self._columns.clear()
        if self._renormalizes:
            self._renormalize()

    def score(self, k):
        return float(self._s_np[k]) if self.use_numba else self._get(self.s, k)
