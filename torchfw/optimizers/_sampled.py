r"""Sampled storage: the randomized Frank-Wolfe of seeds 000/002 that never forms the gradient.

The L2-SVM dual :math:`\min_{\alpha\in\Delta_m} \tfrac12\alpha^\top\tilde K\alpha`, with
:math:`\tilde K_{ij} = y_iy_j(k(x_i,x_j)+1) + \delta_{ij}/C_i`, is solved here the way seed 002
(Frandi, Ñanculef & Suykens, §4.2) runs it on millions of examples. Every iteration

1. draws a uniform sample :math:`\mathcal S` of ``sample_size`` examples (194 by default: the
   sampled minimizer is then among the best 2% of all examples with probability 0.98,
   Schölkopf & Smola Thm 6.33; with ``sample_size >= m`` the sample is every example, in
   order, and the run is the deterministic FW);
2. computes :math:`g_i = \sum_{j\in I}\alpha_j\tilde K_{ji}` **only for** :math:`i\in\mathcal S`,
   from the active set :math:`I = \{j: \alpha_j > 0\}` -- :math:`|\mathcal S|\,|I|` kernel
   values, one small matrix product;
3. takes the FW vertex :math:`i_{\mathcal S} = \arg\min_{i\in\mathcal S} g_i` (seed 002 eq. 10)
   and lets the variant (FW, away/MFW, pairwise, SWAP, PARTAN) choose its move as usual.

**A storage of the one engine.** :class:`SampledStorage` is a storage held by
:class:`~torchfw.optimizers._engine.QuadraticEngine` (the protocol of
:mod:`torchfw.optimizers._storage`): the moves, their exact lines, the away-step maximum and
PARTAN's line and cross term :math:`W` are the engine's (:mod:`torchfw.optimizers._moves`,
written once); this module says only where the numbers live. The state is kept over *slots*
(the examples that ever entered the active set and still carry weight in :math:`\alpha` or, for
PARTAN, :math:`\alpha_{k-1}`): their rows of ``X``, their weights, and their gradients
:math:`g_I, g^{prev}_I` (the away atom of MFW/SWAP is the argmax of :math:`g` over :math:`I`).
The FW atom of a sample has no slot until a move needs its column: its score, diagonal and
weight (0) come from the sample, and the accessors give it a slot on first use. Moves update
:math:`g_I` by the column :math:`\tilde K_{I,i}` of each atom they touch (:math:`|I|` kernel
values), in float64; :math:`W = \alpha^\top\tilde K\alpha_{prev}` follows the engine's recursion
(seed 002's appendix, :func:`~torchfw.optimizers._moves.cross_after`) and :math:`p =
\alpha^\top\tilde K\alpha = 2f` is the selection's :math:`\alpha_I^\top g_I` over the slots (as
for every storage: one dot product of :math:`|I|` terms, which accumulates no error of its own
where the closed-form expansion of :math:`\alpha'^\top\tilde K\alpha'` adds rounding at every
move). Every ``refresh_every`` iterations :math:`g_I`, :math:`g^{prev}_I`, :math:`p` and
:math:`W` are recomputed exactly from the kernel block of the slots (re-synchronization, the
storage's ``after_tick``). Nothing of size ``m`` is touched
in an iteration: the cost is :math:`O(|\mathcal S|\,|I|\,d)`, independent of ``m``, and the
memory is ``X`` plus :math:`O(|I|\,d)` plus the block cache.

**Cache.** The kernel block :math:`\tilde K_{II}` of the slots is kept as a dense matrix while
it fits the byte budget; it serves the columns of active atoms and the re-synchronization.
Past the budget, columns are computed on demand (:math:`|I|\,d` each, two per iteration at most:
still small next to the sample's :math:`|\mathcal S|\,|I|\,d`).

**Stopping.** Only the sampled gap :math:`\Delta_{\mathcal S} = 2f - g_{i_{\mathcal S}} \le
\Delta = 2f - \min_i g_i` is known; it may stop a run early. Seed 002's safeguard says "the
sampling is repeated twice in case :math:`\Delta_{\mathcal S}\le\varepsilon`"; we read it as:
when a sample passes the test, draw **two further independent samples**, and stop only if both
pass too (three passing samples in a row at the same iterate). A failing confirmation sample is
not wasted: its vertex is the one the next move uses. A complete sample (``sample_size >= m``)
needs no confirmation: its gap is the exact one. When ``m |I|`` kernel values are
affordable (``certify``), one full pass at the end computes the exact gap of the returned model.
"""

from __future__ import annotations

import math

import numpy as np
import torch
from torch import Tensor

from ..utils.scalars import HOST
from . import _face
from . import _kernels as K
from ._face_space import FaceSpace
from ._kernel_rows import KernelRows
from ._moves import Coefficients
from ._selection import active_max
from ._state import StorageState
from ._vectors import feasible_interval, update_vectors

__all__ = ["SampledStorage", "DEFAULT_SAMPLE_SIZE"]

#: Seed 002's sample size: ceil(ln 0.02 / ln 0.98).
DEFAULT_SAMPLE_SIZE = 194


class SampledStorage(StorageState):
    """Storage of the randomized FW over :class:`KernelRows` (host scalars).

    The moves (``toward``, ``away``, ``pairwise``, ``extrapolation``, ``apply``) are those of
    the :class:`~torchfw.optimizers._engine.QuadraticEngine` that holds it; this class answers
    the storage protocol over slots, except that the FW vertex is the best of a random sample and
    :meth:`gap` is the sampled gap. Atom indices in moves are example indices. The dual has no
    linear term (``t = 0``, ``ct = None``) and no constant.
    """

    #: The corrective step runs on the slots: its face is the active set and the sampled FW
    #: atom (the slots are all that has a score), its matrix the slots' kernel block.
    face_correction = True

    #: The sampled gap only lower-bounds the true gap.
    certifies_gap = False

    # Slot buffers (capacity ``cap``; see :meth:`_alloc`) and float64 scalars. ``n`` is the
    # number of slots in use (the high-water mark), not the problem's dimension (``N``).
    ex: Tensor
    Xs: Tensor
    sq: Tensor
    ys: Tensor
    invc: Tensor
    kd: Tensor
    w: Tensor
    w_prev: Tensor
    g: Tensor
    g_prev: Tensor
    cache: Tensor | None
    _col_i: Tensor | None
    cap: int
    n: int
    _idx: Tensor

    def __init__(self, storage: KernelRows, support: Tensor, weights: Tensor, *,
                 sample_size: int = DEFAULT_SAMPLE_SIZE, rng=None, keep_previous: bool = False,
                 cache_bytes: float = 200 * 2**20, refresh_every: int = 500):
        self.st = storage
        dev, f64 = storage.device, torch.float64
        self.declare(ops=HOST, N=storage.m, dtype=f64, device=dev, keep_previous=keep_previous,
                     pair_columns=True, refresh_every=int(refresh_every))
        self.sample_size = int(sample_size)
        #: With a sample of every example the draw is the whole set, in order (no randomness:
        #: the sampled gap is the exact one and the run is the deterministic FW).
        self.complete_sample = self.sample_size >= storage.m
        self._all = torch.arange(storage.m, device=dev) if self.complete_sample else None
        self.rng = rng if rng is not None else np.random.default_rng()
        self.cache_bytes = float(cache_bytes)
        self.n_samples_drawn = 0
        support = support.to(device=dev, dtype=torch.int64)
        weights = weights.to(device=dev, dtype=f64)
        keep = weights > 0
        support, weights = support[keep], weights[keep]
        if support.numel() == 0:
            raise ValueError("the initial point has no positive weight")
        cap = max(64, 2 * support.numel())
        self._alloc(cap)
        self.slot_of: dict[int, int] = {}
        self.free: list[int] = []
        self.n = 0
        for e in support.tolist():
            self._new_slot(e, compute_column=False)
        self.w[:self.n] = weights / weights.sum()
        self._full_block()
        self.t = self.t_prev = 0.0
        self.resync(initial=True)
        self.reselect()

    # -- slot storage --------------------------------------------------------------------------

    def _alloc(self, cap: int) -> None:
        st, dev, f64 = self.st, self.st.device, torch.float64
        old = None if not hasattr(self, "cap") else (self.cap, self.n)
        fields = {"ex": torch.full((cap,), -1, dtype=torch.int64, device=dev),
                  "Xs": torch.zeros((cap, st.d), dtype=st.dtype, device=dev),
                  "sq": torch.zeros(cap, dtype=st.dtype, device=dev),
                  "ys": torch.zeros(cap, dtype=st.dtype, device=dev),
                  "invc": torch.zeros(cap, dtype=f64, device=dev),
                  "kd": torch.zeros(cap, dtype=f64, device=dev),
                  "w": torch.zeros(cap, dtype=f64, device=dev),
                  "w_prev": torch.zeros(cap, dtype=f64, device=dev),
                  "g": torch.zeros(cap, dtype=f64, device=dev),
                  "g_prev": torch.zeros(cap, dtype=f64, device=dev)}
        for name, buf in fields.items():
            if old is not None:
                buf[:old[1]] = getattr(self, name)[:old[1]]
            setattr(self, name, buf)
        itemsize = torch.finfo(st.dtype).bits // 8
        cache = None
        if cap * cap * itemsize <= self.cache_bytes:
            cache = torch.zeros((cap, cap), dtype=st.dtype, device=dev)
            if old is not None and self.cache is not None:
                cache[:old[1], :old[1]] = self.cache[:old[1], :old[1]]
            elif old is not None:
                self._pending_block = True
        self.cache = cache
        self.cap = cap

    def _new_slot(self, e: int, compute_column: bool = True) -> int:
        if self.free:
            r = self.free.pop()
        else:
            if self.n == self.cap:
                self._alloc(2 * self.cap)
                if getattr(self, "_pending_block", False) and self.cache is not None:
                    self._full_block()
            r = self.n
            self.n += 1
        self._fill_slot(slice(r, r + 1), torch.tensor([e], device=self.st.device))
        self.w[r] = 0.0
        self.w_prev[r] = 0.0
        self.slot_of[e] = r
        if compute_column and self.cache is not None:
            col = self._compute_column(r)
            self.cache[:self.n, r] = col.to(self.cache.dtype)
            self.cache[r, :self.n] = col.to(self.cache.dtype)
        return r

    def _fill_slot(self, r, examples: Tensor) -> None:
        """Rows, norms, labels, ``1/C`` and diagonal of ``examples`` into slots ``r``."""
        rows, sq, y, inv_c = self.st.rows(examples)
        self.Xs[r], self.sq[r], self.ys[r], self.invc[r] = rows, sq, y, inv_c
        self.kd[r] = self.st.kernel.diagonal(sq).to(torch.float64) + 1.0 + inv_c
        self.ex[r] = examples

    def _free_zero_slots(self) -> None:
        n = self.n
        dead = (self.w[:n] == 0) & (self.ex[:n] >= 0)
        if self.keep_previous:
            dead &= self.w_prev[:n] == 0
        if not bool(dead.any()):
            return
        for r in torch.nonzero(dead).squeeze(1).tolist():
            del self.slot_of[int(self.ex[r])]
            self.ex[r] = -1
            self.free.append(r)

    def _compute_column(self, r: int) -> Tensor:
        r""":math:`\tilde K_{\text{slots}, r}` in float64 (free slots give finite garbage)."""
        n = self.n
        k = self.st.block(self.Xs[:n], self.sq[:n], self.Xs[r:r + 1], self.sq[r:r + 1])[:, 0]
        col = (self.ys[:n] * self.ys[r] * (k + 1.0)).to(torch.float64)
        col[r] += self.invc[r]
        return col

    def _full_block(self) -> None:
        self._pending_block = False
        if self.cache is None:
            return
        n = self.n
        k = self.st.block(self.Xs[:n], self.sq[:n], self.Xs[:n], self.sq[:n])
        blk = self.ys[:n].unsqueeze(1) * self.ys[:n].unsqueeze(0) * (k + 1.0)
        blk.diagonal().add_(self.invc[:n].to(blk.dtype))
        self.cache[:n, :n] = blk

    def column(self, r: int) -> Tensor:
        """Column of slot ``r`` over the slots, float64."""
        if self.cache is not None:
            return self.cache[:self.n, r].to(torch.float64)
        return self._compute_column(r)

    def _matvec_slots(self, v: Tensor) -> Tensor:
        r""":math:`\tilde K_{II} v` over the slots (exact; used to re-synchronize)."""
        n = self.n
        if self.cache is not None:
            return self.cache[:n, :n].to(torch.float64) @ v[:n]
        u = v[:n] * self.ys[:n].to(torch.float64)
        Xs, sq = self.Xs[:n], self.sq[:n]
        out = self.ys[:n].to(torch.float64) * (self.st.matvec(Xs, sq, Xs, sq, u) + u.sum())
        return out + self.invc[:n] * v[:n]

    def resync(self, initial: bool = False) -> None:
        """Recompute :math:`g_I, g^{prev}_I, p, W` exactly from the slots' kernel block."""
        n = self.n
        self.w[:n] /= self.w[:n].sum()
        self.g[:n] = self._matvec_slots(self.w)
        self.p = float(self.w[:n] @ self.g[:n])
        if self.keep_previous:
            if initial:
                self.w_prev[:n] = self.w[:n]
            else:
                self.w_prev[:n] /= self.w_prev[:n].sum()
            self.g_prev[:n] = self._matvec_slots(self.w_prev)
            self.p_prev = float(self.w_prev[:n] @ self.g_prev[:n])
            self.W = float(self.w[:n] @ self.g_prev[:n])

    # -- the sampled gradient and the selection ------------------------------------------------

    def sampled_gradient(self, idx: Tensor) -> Tensor:
        r""":math:`g_i = (\tilde K\alpha)_i` for the examples ``idx``, from the slots (float64)."""
        n = self.n
        rows, sq, y, inv_c = self.st.rows(idx)
        u = self.w[:n] * self.ys[:n].to(torch.float64)
        g = y.to(torch.float64) * (self.st.matvec(rows, sq, self.Xs[:n], self.sq[:n], u)
                                   + u.sum())
        # + alpha_i / C_i for sampled examples that are slots: a binary search in the sorted
        # slot ids (no |S| x |I| comparison and nothing of size m).
        ids, order = torch.sort(self.ex[:n])
        pos = torch.searchsorted(ids, idx).clamp_(max=n - 1)
        hit = ids.index_select(0, pos) == idx
        slots = order.index_select(0, pos)
        g += torch.where(hit, self.w.index_select(0, slots) * self.invc.index_select(0, slots),
                         0.0)
        self._last_rows = (sq, inv_c)
        return g

    def resample(self) -> None:
        """Draw a fresh sample at the current iterate (FW vertex and sampled gap)."""
        if self._all is not None:
            self._idx = self._all
        else:
            self._idx = torch.from_numpy(self.rng.integers(0, self.st.m, self.sample_size)).to(
                self.st.device)
        self.n_samples_drawn += 1
        self._fw_from_sample()

    def _fw_from_sample(self) -> None:
        """The FW vertex :math:`\\arg\\min_{i\\in\\mathcal S} g_i` of the current sample."""
        idx = self._idx
        g = self.sampled_gradient(idx)
        best = int(torch.argmin(g))
        i_fw, s_fw = int(idx[best]), float(g[best])
        sq, inv_c = self._last_rows
        self.d_fw = float(self.st.kernel.diagonal(sq[best:best + 1])[0]) + 1.0 \
            + float(inv_c[best])
        self._col_i = None
        self._sample_scores = g  # the corrective step's candidates (face_space)
        # The sampled minimum stands for the minimum: gap() = p - s_min is the sampled gap.
        self._set(i_fw=i_fw, s_fw=s_fw, i_min=i_fw, s_min=s_fw)

    def _select_slots(self) -> None:
        """The away half of the selection over the slots
        (:func:`~torchfw.optimizers._selection.active_max`) and :math:`p = w_I^\\top g_I`."""
        n = self.n
        w, g = self.w[:n], self.g[:n]
        j_slot, s_j = active_max(w, g)
        j = int(j_slot)
        self._set(j_max=int(self.ex[j]) if j >= 0 else -1,
                  s_max=float(s_j) if j >= 0 else -math.inf, p=float(torch.dot(w, g)), t=0.0)

    def reselect(self) -> None:
        """Storage: a fresh sample (FW atom) and the away atom and ``p`` over the slots."""
        self.resample()
        self._select_slots()

    # -- storage protocol: entries -------------------------------------------------------------

    def _slot(self, e) -> int:
        """Slot of example ``e``; the sample's FW atom gets one on first use."""
        r = self.slot_of.get(e)
        if r is None:
            if e != self.i_fw:
                raise KeyError(f"example {e} is neither a slot nor the FW atom")
            self._fw_column()
            r = self.slot_of[e]
        return r

    # The slot first: giving the FW atom one may grow (reallocate) the buffers.
    def score(self, k):
        r = self._slot(k)
        return float(self.g[r])

    def weight(self, k):
        r = self.slot_of.get(k)
        return 0.0 if r is None else float(self.w[r])

    def linear(self, k):
        return 0.0  # the L2-SVM dual has no linear term

    def diagonal(self, k):
        r""":math:`\tilde K_{kk}` (the FW vertex's from its sample, a slot's from its cache)."""
        if k == self.i_fw:
            return self.d_fw
        return float(self.kd[self.slot_of[k]])

    def previous_score(self, k):
        r = self._slot(k)
        return float(self.g_prev[r])

    def pair_entry(self, i, j):
        h = self.vertex_gradient(i)
        return float(h[self._slot(j)])

    def _fw_column(self) -> Tensor:
        """Column of the FW vertex over the slots (allocating its slot)."""
        if self._col_i is None:
            r = self.slot_of.get(self.i_fw)
            if r is None:
                r = self._new_slot(self.i_fw)
                self.g[r] = self.s_fw
                self._col_i = self.column(r)
                if self.keep_previous:
                    self.g_prev[r] = float(self._col_i @ self.w_prev[:self.n])
            else:
                self._col_i = self.column(r)
        assert self._col_i is not None
        return self._col_i

    # -- storage protocol: columns, selections, bounds ------------------------------------------

    def vertex_gradient(self, k) -> Tensor:
        """Column :math:`\\tilde K_{I,k}` over the slots (float64)."""
        return self._fw_column() if k == self.i_fw else self.column(self.slot_of[k])

    def active_min(self):
        n = self.n
        best, value, _ = K.torch_active_argmin(self.w[:n], self.g[:n])
        return int(self.ex[int(best)]), float(value)

    def second_order_partner(self):
        """SWAP-2o partner over the active slots (largest second-order pairwise gain)."""
        i = self.i_fw
        col = self._fw_column()
        n = self.n
        r = int(K.torch_second_order_partner(self.w[:n], self.g[:n], col, self.kd[:n], None,
                                             self.slot_of[i], self.s_fw, self.diagonal(i)))
        return int(self.ex[r]) if r >= 0 else self.j_max

    def extrapolation_bounds(self, lam, i):
        r = self._slot(i)  # first: the FW atom's slot (it may extend the slots)
        lo, hi = feasible_interval(self.w[:self.n], self.w_prev[:self.n], lam, r)
        return float(lo), float(hi)

    # -- storage protocol: writes --------------------------------------------------------------

    def update(self, co: Coefficients) -> None:
        r""":math:`\alpha \leftarrow a\alpha + b e_i + c e_j + d\alpha_{prev}` over the slots,
        :math:`g_I` by the same combination of columns (float64), then a new sample."""
        h_i = self.vertex_gradient(co.i)  # first: may give the FW atom its slot
        use_j = co.j is not None and co.c != 0.0
        h_j = self.vertex_gradient(co.j) if use_j else None
        n = self.n
        ri = self.slot_of[co.i]
        rj = self.slot_of[co.j] if use_j else ri
        if update_vectors(self.w[:n], self.g[:n], float(co.a), float(co.b), ri, h_i,
                          float(co.c), rj, h_j, float(co.d), self.w_prev[:n], self.g_prev[:n],
                          shift=self.keep_previous):
            # The new iterate was written over the previous one: swap the buffers (beyond
            # n both hold zero weights).
            self.w, self.w_prev = self.w_prev, self.w
            self.g, self.g_prev = self.g_prev, self.g
        self._free_zero_slots()
        self.reselect()

    def after_tick(self) -> None:
        """Re-synchronize every ``refresh_every`` iterations (seed 002: periodic exact values)."""
        if self.refresh_every and self.k % self.refresh_every == 0:
            self.refresh()

    # -- storage protocol: the corrective step (over the slots) --------------------------------

    def face_space(self, problem: int = 0) -> FaceSpace:
        r"""The slots' weights and gradients (float64 host copies), free slots at score
        :math:`+\infty`.

        First the sample's violators -- examples of the current sample whose score is below
        :math:`p`, the most violating first, the FW atom among them -- get slots, as many as
        the step adds to a face of the support's size
        (:func:`~torchfw.optimizers._face.face_growth`): the face is drawn from the slots,
        the only examples with a score. With a sample of every example they are the host
        storage's violators (the same face)."""
        self._fw_column()
        n_support = int((self.w[:self.n] > 0).sum())
        scores = self._sample_scores
        order = torch.argsort(scores, stable=True).tolist()
        want = _face.face_growth(n_support)
        for q in order:
            if want <= 0 or not float(scores[q]) < self.p:
                break
            e = int(self._idx[q])
            if e in self.slot_of:
                want -= int(self.w[self.slot_of[e]] <= 0)
                continue
            r = self._new_slot(e)
            self.g[r] = scores[q]
            if self.keep_previous:
                self.g_prev[r] = float(self.column(r) @ self.w_prev[:self.n])
            want -= 1
        n = self.n
        ex = self.ex[:n].cpu().numpy()
        s = self.g[:n].cpu().numpy().copy()
        s[ex < 0] = math.inf
        slot_of = self.slot_of
        return FaceSpace(self.w[:n].cpu().numpy().copy(), s, None, atoms=ex,
                         lookup=lambda atoms: np.array([slot_of.get(int(a), -1) for a in atoms],
                                                       dtype=np.int64))

    def face_column(self, atom: int, problem: int = 0) -> np.ndarray:
        return self.column(self.slot_of[int(atom)]).cpu().numpy()

    def face_write(self, w, s, problem: int = 0) -> None:
        n = self.n
        self.w[:n] = torch.from_numpy(np.asarray(w)).to(self.w.device)
        self.g[:n] = torch.from_numpy(np.asarray(s)).to(self.g.device)
        if self.keep_previous:  # PARTAN restarts from the corrected iterate
            self.w_prev[:n] = self.w[:n]
            self.g_prev[:n] = self.g[:n]
        self._col_i = None
        self._free_zero_slots()
        self.reselect()
        if self.keep_previous:
            self._set(W=self.p, p_prev=self.p, t_prev=0.0)

    # -- storage protocol: whole state ---------------------------------------------------------

    def refresh(self) -> None:
        """Exact :math:`g_I, g^{prev}_I, p, W` (:meth:`resync`), and the current sample's FW
        atom again at the re-synchronized iterate (no new draw: the random stream is that of
        a run without the re-synchronization)."""
        self.resync()
        self._fw_from_sample()
        self._select_slots()

    def n_active(self) -> int:
        return int((self.w[:self.n] > 0).sum())

    def support(self) -> tuple[Tensor, Tensor]:
        """Active examples and their weights."""
        act = self.w[:self.n] > 0
        return self.ex[:self.n][act].clone(), self.w[:self.n][act].clone()

    def weights(self) -> Tensor:
        """The dense ``(m,)`` weights (one ``O(m)`` allocation: for the returned model only)."""
        idx, w = self.support()
        out = torch.zeros(self.st.m, dtype=torch.float64, device=self.st.device)
        out[idx] = w
        return out

    def point(self) -> Tensor:
        return self.weights()

    def snapshot(self):
        n = self.n
        return self.ex[:n].clone(), self.w[:n].clone(), self.w_prev[:n].clone()

    def restore(self, snap) -> None:
        """Return to a snapshot: its slots (rows fetched again: a slot freed since may hold
        another example), their kernel block, exact gradients, and the selection."""
        ex, w, w_prev = snap
        n = ex.numel()
        self.ex[:self.n] = -1
        self.w[:self.n] = 0.0
        self.w_prev[:self.n] = 0.0
        self.n = n
        live = torch.nonzero(ex >= 0).squeeze(1)
        self._fill_slot(live, ex[live])
        self.w[:n], self.w_prev[:n] = w, w_prev
        self.slot_of = {int(ex[r]): int(r) for r in live.tolist()}
        self.free = torch.nonzero(ex < 0).squeeze(1).tolist()
        self._full_block()
        self.resync()
        self._fw_from_sample()
        self._select_slots()

    # -- certificate ---------------------------------------------------------------------------

    def exact_gap(self) -> tuple[float, int]:
        r"""One full pass: the exact gap :math:`2f - \min_i g_i` and its argmin (``m |I|``)."""
        best, arg = math.inf, -1
        chunk = max(1, 2**22 // max(1, self.n))  # kernel blocks of ~4M entries
        for lo in range(0, self.st.m, chunk):
            idx = torch.arange(lo, min(self.st.m, lo + chunk), device=self.st.device)
            g = self.sampled_gradient_block(idx)
            j = int(torch.argmin(g))
            if float(g[j]) < best:
                best, arg = float(g[j]), lo + j
        return self.p - best, arg

    def sampled_gradient_block(self, idx: Tensor) -> Tensor:
        """:meth:`sampled_gradient` for a contiguous block (δ term by slot lookup)."""
        n = self.n
        rows, sq, y, _ = self.st.rows(idx)
        u = self.w[:n] * self.ys[:n].to(torch.float64)
        g = y.to(torch.float64) * (self.st.matvec(rows, sq, self.Xs[:n], self.sq[:n], u)
                                   + u.sum())
        lo, hi = int(idx[0]), int(idx[-1])
        act = torch.nonzero(self.w[:n] > 0).squeeze(1)
        ex = self.ex[act]
        inside = (ex >= lo) & (ex <= hi)
        g.index_add_(0, ex[inside] - lo, (self.w[act] * self.invc[act])[inside])
        return g
