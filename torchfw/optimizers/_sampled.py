r"""Sampled storage: the randomized Frank-Wolfe of seeds 000/002 that never forms the gradient.

The L2-SVM dual :math:`\min_{\alpha\in\Delta_m} \tfrac12\alpha^\top\tilde K\alpha`, with
:math:`\tilde K_{ij} = y_iy_j(k(x_i,x_j)+1) + \delta_{ij}/C_i`, is solved here the way seed 002
(Frandi, Ñanculef & Suykens, §4.2) runs it on millions of examples. Every iteration

1. draws a uniform sample :math:`\mathcal S` of ``sample_size`` examples (194 by default: the
   sampled minimizer is then among the best 2% of all examples with probability 0.98,
   Schölkopf & Smola Thm 6.33);
2. computes :math:`g_i = \sum_{j\in I}\alpha_j\tilde K_{ji}` **only for** :math:`i\in\mathcal S`,
   from the active set :math:`I = \{j: \alpha_j > 0\}` -- :math:`|\mathcal S|\,|I|` kernel
   values, one small matrix product;
3. takes the FW vertex :math:`i_{\mathcal S} = \arg\min_{i\in\mathcal S} g_i` (seed 002 eq. 10)
   and lets the variant (FW, away/MFW, pairwise, SWAP, PARTAN) choose its move as usual.

The state is kept over *slots* (the examples that ever entered the active set and still carry
weight in :math:`\alpha` or, for PARTAN, :math:`\alpha_{k-1}`): their rows of ``X``, their
weights, and their gradients :math:`g_I, g^{prev}_I` (the away atom of MFW/SWAP is the argmax of
:math:`g` over :math:`I`). Moves update :math:`g_I` by the column :math:`\tilde K_{I,i}` of each
atom they touch (:math:`|I|` kernel values) and the scalars :math:`p = \alpha^\top\tilde K\alpha
= 2f`, :math:`W = \alpha^\top\tilde K\alpha_{prev}` by the closed-form recursion of seed 002's
appendix (written for a general move :math:`\alpha' = a\alpha + b e_i + c e_j + d\alpha_{prev}`)
in float64. Every ``refresh_every`` iterations :math:`g_I`, :math:`p` and :math:`W` are recomputed
exactly from the kernel block of the slots (re-synchronization). Nothing of size ``m`` is touched
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
not wasted: its vertex is the one the next move uses. When ``m |I|`` kernel values are
affordable (``certify``), one full pass at the end computes the exact gap of the returned model.
"""

from __future__ import annotations

import math

import numpy as np
import torch
from torch import Tensor

from .._scalars import HOST
from ..linesearch import Line
from ._engine import ZERO_TOL, Coefficients, Move, partan_move
from ._kernel_rows import KernelRows
from ._selection import active_max

__all__ = ["SampledEngine", "DEFAULT_SAMPLE_SIZE"]

#: Seed 002's sample size: ceil(ln 0.02 / ln 0.98).
DEFAULT_SAMPLE_SIZE = 194


class SampledEngine:
    """Engine of the randomized FW over :class:`KernelRows` (host scalars).

    Implements the moves the variants' ``_step`` hooks use (``toward``, ``away``, ``pairwise``,
    ``second_order_partner``, ``extrapolation``, ``apply``, ``choose``, ``count``) with the same
    meaning as :class:`~torchfw.optimizers._engine.QuadraticEngine`, except that the FW vertex is
    the best of a random sample and :meth:`gap` is the sampled gap. Atom indices in moves are
    example indices.
    """

    ops = HOST
    atomic = True
    #: The sampled gap only lower-bounds the true gap.
    certifies_gap = False

    # Slot buffers (capacity ``cap``; see :meth:`_alloc`) and float64 scalars.
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
    p: float
    p_prev: float
    W: float

    def __init__(self, storage: KernelRows, support: Tensor, weights: Tensor, *,
                 sample_size: int = DEFAULT_SAMPLE_SIZE, rng=None, keep_previous: bool = False,
                 cache_bytes: float = 200 * 2**20, refresh_every: int = 500):
        self.st = storage
        self.sample_size = int(sample_size)
        self.rng = rng if rng is not None else np.random.default_rng()
        self.keep_previous = keep_previous
        self.cache_bytes = float(cache_bytes)
        self.refresh_every = int(refresh_every)
        self.k = 0
        self._counts: dict[str, int] = {}
        self.n_samples_drawn = 0
        dev, f64 = storage.device, torch.float64
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
        self.resync(initial=True)
        self._select()

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
        idx = torch.tensor([e], device=self.st.device)
        rows, sq, y, inv_c = self.st.rows(idx)
        self.Xs[r], self.sq[r], self.ys[r], self.invc[r] = rows[0], sq[0], y[0], inv_c[0]
        self.kd[r] = self.st.kernel.diagonal(sq)[0].to(torch.float64) + 1.0 + inv_c[0]
        self.ex[r] = e
        self.w[r] = 0.0
        self.w_prev[r] = 0.0
        self.slot_of[e] = r
        if compute_column and self.cache is not None:
            col = self._compute_column(r)
            self.cache[:self.n, r] = col.to(self.cache.dtype)
            self.cache[r, :self.n] = col.to(self.cache.dtype)
        return r

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
        out = torch.zeros(n, dtype=torch.float64, device=self.st.device)
        step = max(1, int(2**24 // max(1, n)))
        u = v[:n] * self.ys[:n].to(torch.float64)
        for lo in range(0, n, step):
            hi = min(n, lo + step)
            k = self.st.block(self.Xs[lo:hi], self.sq[lo:hi], self.Xs[:n], self.sq[:n])
            out[lo:hi] = self.ys[lo:hi].to(torch.float64) * (k.to(torch.float64) @ u + u.sum())
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

    # -- the sampled gradient ------------------------------------------------------------------

    def sampled_gradient(self, idx: Tensor) -> Tensor:
        r""":math:`g_i = (\tilde K\alpha)_i` for the examples ``idx``, from the slots (float64)."""
        n = self.n
        rows, sq, y, inv_c = self.st.rows(idx)
        k = self.st.block(rows, sq, self.Xs[:n], self.sq[:n])
        u = self.w[:n] * self.ys[:n].to(torch.float64)
        g = y.to(torch.float64) * (k.to(torch.float64) @ u + u.sum())
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
        idx = torch.from_numpy(self.rng.integers(0, self.st.m, self.sample_size)).to(
            self.st.device)
        g = self.sampled_gradient(idx)
        best = int(torch.argmin(g))
        self.i_fw, self.s_fw = int(idx[best]), float(g[best])
        sq, inv_c = self._last_rows
        self.d_fw = float(self.st.kernel.diagonal(sq[best:best + 1])[0]) + 1.0 \
            + float(inv_c[best])
        self.n_samples_drawn += 1
        self._col_i = None

    def _select(self) -> None:
        """The FW vertex from a fresh sample; the away atom over the slots (the selection's
        away half, :func:`~torchfw.optimizers._selection.active_max`)."""
        self.resample()
        n = self.n
        j_slot, s_j = active_max(self.w[:n], self.g[:n])
        j = int(j_slot)
        self.j_max, self.s_max = (int(self.ex[j]), float(s_j)) if j >= 0 else (-1, -math.inf)

    # -- bookkeeping expected by the variants --------------------------------------------------

    def count(self, name: str, cond=True) -> None:
        if cond:
            self._counts[name] = self._counts.get(name, 0) + 1

    def step_counts(self) -> dict[str, int]:
        return dict(self._counts)

    def iteration(self) -> int:
        return self.k

    def choose(self, cond, if_true, if_false) -> Coefficients:
        return if_true() if cond else if_false()

    def value(self) -> float:
        return 0.5 * self.p

    def gap(self) -> float:
        r"""The sampled gap :math:`\Delta_{\mathcal S} = 2f - g_{i_{\mathcal S}}`."""
        return self.p - self.s_fw

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

    point = weights

    def snapshot(self):
        n = self.n
        return (n, {k: getattr(self, k)[:n].clone() for k in ("ex", "w", "w_prev", "g",
                                                              "g_prev")},
                self.p, getattr(self, "p_prev", None), getattr(self, "W", None))

    def restore(self, snap) -> None:
        n, vecs, p, p_prev, W = snap
        for k, v in vecs.items():
            getattr(self, k)[:n] = v
        if self.n > n:
            self.w[n:self.n] = 0.0
            self.w_prev[n:self.n] = 0.0
        self.p, self.p_prev, self.W = p, p_prev, W

    # -- scalars of atoms ----------------------------------------------------------------------

    def _diag(self, e: int) -> float:
        r""":math:`\tilde K_{ee}` (the FW vertex's from its sample, a slot's from its cache)."""
        if e == self.i_fw:
            return self.d_fw
        return float(self.kd[self.slot_of[e]])

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

    def _score(self, e: int) -> float:
        return float(self.g[self.slot_of[e]])

    # -- moves ---------------------------------------------------------------------------------

    def _line(self, slope, curvature, gamma_max) -> Line:
        value = self.value()
        return Line(value=value, slope=slope, gamma_max=gamma_max, curvature=curvature,
                    phi=lambda g: value + g * slope + 0.5 * g * g * curvature, ops=HOST)

    def toward(self, restricted: bool = False) -> Move:
        if restricted:
            raise ValueError("the sampled engine has no restricted (fully corrective) moves")
        i, si = self.i_fw, self.s_fw
        curvature = self._diag(i) - 2.0 * si + self.p
        line = self._line(si - self.p, curvature, 1.0)
        return Move("fw", line, lambda g: Coefficients(a=1.0 - g, b=g, i=i))

    def away(self) -> Move:
        j, sj = self.j_max, self.s_max
        wj = float(self.w[self.slot_of[j]])
        curvature = self._diag(j) - 2.0 * sj + self.p
        gamma_max = wj / max(1.0 - wj, 1e-300) if wj < 1.0 else 0.0
        line = self._line(self.p - sj, curvature, gamma_max)
        return Move("away", line, lambda g: Coefficients(a=1.0 + g, b=-g, i=j))

    def pairwise(self, restricted: bool = False, partner=None) -> Move:
        if restricted:
            raise ValueError("the sampled engine has no restricted (fully corrective) moves")
        i, si = self.i_fw, self.s_fw
        j = self.j_max if partner is None else partner
        sj = self._score(j)
        col = self._fw_column()
        q_ij = float(col[self.slot_of[j]])
        curvature = self._diag(i) + self._diag(j) - 2.0 * q_ij
        line = self._line(si - sj, curvature, float(self.w[self.slot_of[j]]))
        return Move("pairwise", line, lambda g: Coefficients(a=1.0, b=g, i=i, c=-g, j=j))

    def second_order_partner(self):
        """SWAP-2o partner over the active slots (largest second-order pairwise gain)."""
        col = self._fw_column()
        n = self.n
        i, si = self.i_fw, self.s_fw
        dii = self._diag(i)
        q = (dii + self.kd[:n] - 2.0 * col).clamp_min(1e-300)
        diff = self.g[:n] - si
        ok = (self.w[:n] > 0) & (diff > 0) & (self.ex[:n] != i)
        if not bool(ok.any()):
            return self.j_max
        gain = torch.where(ok, diff * diff / q, torch.full_like(diff, -1.0))
        return int(self.ex[int(torch.argmax(gain))])

    def extrapolation(self, fw: Move, lam) -> Move:
        """PARTAN move (seed 002 eqs 13-15 in the minimization convention)."""
        i = fw.coefficients(0.0).i
        col = self._fw_column()
        r = self.slot_of[i]
        f_t = fw.line.value + lam * fw.line.slope + 0.5 * lam * lam * fw.line.curvature
        p_t = 2.0 * f_t
        cross = (1.0 - lam) * self.W + lam * float(self.g_prev[r])  # w~' K w_prev
        slope = p_t - cross
        curvature = p_t - 2.0 * cross + self.p_prev
        n = self.n
        wt = self.w[:n] * (1.0 - lam)
        wt[r] += lam
        delta = wt - self.w_prev[:n]
        neg, pos = delta < 0, delta > 0
        hi = float((wt[neg] / (-delta[neg])).min()) if bool(neg.any()) else math.inf
        lo = float((-wt[pos] / delta[pos]).max()) if bool(pos.any()) else -math.inf
        del col
        noise = 1e-11 * (abs(p_t) + 2.0 * abs(cross) + abs(self.p_prev))
        return partan_move(f_t, slope, curvature, noise, lo, hi, lam, i, HOST)

    # -- update --------------------------------------------------------------------------------

    def apply(self, co: Coefficients, tick: bool = True) -> None:
        r"""Apply :math:`\alpha \leftarrow a\alpha + b e_i + c e_j + d\alpha_{prev}`.

        :math:`g_I` follows the same combination of columns; :math:`p` and :math:`W` by the
        closed-form expansion of :math:`\alpha'^\top\tilde K\alpha'` (float64).
        """
        a, b, c, d = float(co.a), float(co.b), float(co.c), float(co.d)
        if co.i == self.i_fw:
            col_i = self._fw_column()
        else:
            col_i = self.column(self.slot_of[co.i])
        ri = self.slot_of[co.i]
        n = self.n
        gi, kii = float(self.g[ri]), float(col_i[ri])
        gpi = float(self.g_prev[ri]) if self.keep_previous else 0.0
        use_j = co.j is not None and c != 0.0
        if use_j:
            rj = self.slot_of[co.j]
            col_j = self.column(rj)
            gj, kjj, kij = float(self.g[rj]), float(col_j[rj]), float(col_i[rj])
            gpj = float(self.g_prev[rj]) if self.keep_previous else 0.0
        else:
            gj = kjj = kij = gpj = 0.0
        p, W = self.p, getattr(self, "W", 0.0)
        p_prev = getattr(self, "p_prev", 0.0)
        # p' = a'Ka' with a' = a w + b e_i + c e_j + d w_prev (all cross terms known).
        p_new = (a * a * p + b * b * kii + c * c * kjj + d * d * p_prev
                 + 2.0 * (a * b * gi + a * c * gj + a * d * W + b * c * kij
                          + b * d * gpi + c * d * gpj))
        W_new = a * p + b * gi + c * gj + d * W  # a'K a (old iterate)
        g_new = a * self.g[:n] + b * col_i
        w_new = a * self.w[:n]
        w_new[ri] += b
        if use_j:
            g_new += c * col_j
            w_new[rj] += c
        if d != 0.0:
            g_new += d * self.g_prev[:n]
            w_new += d * self.w_prev[:n]
        w_new[w_new <= ZERO_TOL] = 0.0
        if self.keep_previous:
            self.g_prev[:n] = self.g[:n]
            self.w_prev[:n] = self.w[:n]
            self.p_prev, self.W = p, W_new
        self.g[:n] = g_new
        self.w[:n] = w_new
        self.p = p_new
        self._free_zero_slots()
        if tick:
            self.k += 1
            if self.refresh_every and self.k % self.refresh_every == 0:
                self.resync()
        self._select()

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
        k = self.st.block(rows, sq, self.Xs[:n], self.sq[:n])
        u = self.w[:n] * self.ys[:n].to(torch.float64)
        g = y.to(torch.float64) * (k.to(torch.float64) @ u + u.sum())
        lo, hi = int(idx[0]), int(idx[-1])
        act = torch.nonzero(self.w[:n] > 0).squeeze(1)
        ex = self.ex[act]
        inside = (ex >= lo) & (ex <= hi)
        g.index_add_(0, ex[inside] - lo, (self.w[act] * self.invc[act])[inside])
        return g
