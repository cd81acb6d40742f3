"""The sharded storage: one Frank-Wolfe iteration over examples split across ranks.

One concern: the storage protocol (:mod:`torchfw.optimizers._storage`) for shards (local
selection, the round-1 record exchange, the feature exchange of the chosen atoms, local
updates), so that the single-process moves of the
:class:`~torchfw.optimizers._engine.QuadraticEngine` holding it run unchanged on every rank.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch
from torch import Tensor

from ..optimizers import _kernels as K
from ..optimizers._engine import QuadraticEngine
from ..optimizers._face_space import FaceSpace
from ..optimizers._moves import Coefficients
from ..optimizers._selection import select_host
from ..optimizers._state import StorageState
from ..optimizers._vectors import feasible_interval, update_vectors
from ..sets.oracles import Simplex
from ..utils.column_cache import ColumnCache
from ..utils.scalars import HOST
from .operator import ShardedSVMDualOperator, _Atom

#: Feature exchange modes (see the module docstring).
EXCHANGES = ("auto", "gather", "broadcast")

_INF = math.inf


#: Round-1 record of one candidate: s, global index, w, diagonal entry, s_prev.
_REC = 5


class ShardedStorage(StorageState):
    r"""Storage of :math:`\min_{w \in \Delta_m} \tfrac12 w^\top \tilde K w` on shards.

    Host scalars; the moves are those of the
    :class:`~torchfw.optimizers._engine.QuadraticEngine` that holds it (their scalar formulas
    run unchanged on every rank, as over the streaming storage: entries of remote atoms come
    from the round-1 records). Local vectors have one extra *ghost* entry at the end: an atom
    owned by another rank is addressed as the ghost, so the single-process vector update
    (:func:`~torchfw.optimizers._vectors.update_vectors`) applies moves unchanged, and the ghost
    is zeroed afterwards.

    Parameters
    ----------
    operator : ShardedSVMDualOperator
    w0 : Tensor
        This rank's slice of the initial weights (on the simplex over all ranks).
    keep_previous, pair_columns : bool
        As in :class:`~torchfw.optimizers._host.HostStorage` (PARTAN; pairwise/SWAP/fully
        corrective).
    exchange : {"auto", "gather", "broadcast"}
        How atom features travel (see the module docstring).
    gather_limit : int
        ``"auto"`` uses ``"gather"`` while the gathered features are at most this many bytes.
    cache_size : float
        MB of column slices kept (:mod:`torchfw.utils.column_cache`), the same number of columns on
        every rank.
    refresh_every : int, optional
        Recompute ``s`` exactly every that many iterations (collective).
    gather_away : bool, optional
        In ``"gather"`` mode, also send the away candidate's features (default: with
        ``pair_columns``; away-step variants want it too).
    """

    #: The corrective step runs on every rank alike: the face's atoms, its matrix entries and
    #: the new scores at its atoms are exchanged exactly, so each rank's minor cycle is the same.
    face_correction = True

    certifies_gap = True
    #: The sharded operator.
    Q: Any

    def __init__(self, operator: ShardedSVMDualOperator, w0: Tensor, *,
                 keep_previous: bool = False, pair_columns: bool = False,
                 exchange: str = "auto", gather_limit: int = 65536, cache_size: float = 200.0,
                 refresh_every: int | None = None, gather_away: bool | None = None):
        if exchange not in EXCHANGES:
            raise ValueError(f"exchange must be one of {EXCHANGES}, got {exchange!r}")
        op = operator
        self.op = op
        self.comm = op.comm
        self.lmo = Simplex()
        self.Q = op
        self.n = op.shape[0]
        self.n_local = n = op.n_local
        self.offset = op.offset
        device = op.device
        self.declare(ops=HOST, N=self.n, dtype=torch.float64, device=device,
                     keep_previous=keep_previous, pair_columns=pair_columns,
                     refresh_every=refresh_every, use_numba=op.host and K.HAVE_NUMBA)
        # Candidates whose features ride along in "gather" mode: the away atom too when moves
        # use two atoms or may step away from it.
        self._n_feat = 2 if (pair_columns if gather_away is None else gather_away) else 1
        d = op.n_features
        feature_bytes = self.comm.size * self._n_feat * (3 + d) * 8
        if exchange == "auto":
            exchange = "gather" if feature_bytes <= gather_limit else "broadcast"
        self.exchange = exchange
        self._flen = 3 + d
        self._packet = np.zeros(1 + 2 * _REC + (self._n_feat * self._flen
                                                if exchange == "gather" else 0))
        w0 = torch.as_tensor(w0, dtype=torch.float64)
        if w0.shape != (n,):
            raise ValueError(f"w0 must be this rank's slice, shape ({n},), got "
                             f"{tuple(w0.shape)}")
        total, negative = self.comm.sum([float(w0.sum()), float((w0 < 0).sum())], op="setup")
        if negative > 0 or abs(total - 1.0) > 1e-6:
            raise ValueError(f"w0 is not on the unit simplex over all ranks (sum {total:.9g})")
        n1 = n + 1  # + the ghost entry
        w = torch.zeros(n1, dtype=torch.float64, device=device)
        w[:n] = w0.to(device)
        diag = torch.zeros(n1, dtype=torch.float64, device=device)
        diag[:n] = torch.from_numpy(op.diagonal_local()).to(device)
        # Column slices (with the ghost entry); the same slot count and the same requests on
        # every rank, so the cache holds the same atoms everywhere (whether to fetch is then a
        # shared decision).
        itemsize = torch.finfo(op.dtype).bits // 8
        slots = max(2, int(cache_size * 2**20 // ((op.max_local + 1) * itemsize
                                                  + 8 * self._flen)))
        self._cache = ColumnCache(slots, self.n_local + 1, n_keys=self.n, dtype=op.dtype,
                                  device=op.device)
        self._atoms: dict[int, _Atom] = {}  # features of the cached atoms
        self._fresh: dict[int, _Atom] = {}
        self._known: dict[int, tuple] = {}
        self._active_min = None
        self.fetches = 0
        # The shared start: previous iterate, NumPy views (StorageState._numpy_views, of
        # the local slice and its ghost entry), selection (round 1), PARTAN scalars.
        self._start(w, self._full_gradient(w[:n]), diag)

    # -- state ---------------------------------------------------------------------------------

    def _full_gradient(self, w: Tensor) -> Tensor:
        """:math:`s = \\tilde K w` on the local rows (collective: the support is gathered).

        Costs the support's features once (set-up, refresh, restore), never per iteration.
        """
        op = self.op
        local = torch.nonzero(w > 0).squeeze(1).cpu().numpy()
        rows = np.zeros((local.size, 2 + self._flen))
        w_host = w.double().cpu().numpy()
        for q, li in enumerate(local):
            rows[q, 0] = li + self.offset
            rows[q, 1] = w_host[li]
            op.write_features(int(li), rows[q, 2:])
        support = self.comm.gather_rows(rows, op="support")
        s = torch.zeros(self.n_local + 1, dtype=torch.float64, device=op.device)
        itemsize = torch.finfo(op.dtype).bits // 8
        chunk = max(1, int(op.local.memory_budget // (4 * itemsize * max(1, self.n_local))))
        weights = torch.from_numpy(support[:, 1].copy()).to(op.device)
        for start in range(0, support.shape[0], chunk):
            block = np.delete(support[start:start + chunk], 1, axis=1)
            cols = op.columns_from(np.ascontiguousarray(block))
            s[:self.n_local] += cols.to(torch.float64) @ weights[start:start + chunk]
        return s

    def reselect(self) -> None:
        """Local selection, then round 1: every rank learns the global candidates and ``p``."""
        n = self.n_local
        vectors = (self._w_np, self._s_np) if self.use_numba else (self.w, self.s)
        imin, smin, jmax, smax, p, _ = select_host(vectors[0][:n], vectors[1][:n],
                                                   compiled=self.use_numba)
        packet = self._packet
        packet[0] = p
        self._write_candidate(packet[1:1 + _REC], imin, smin)
        self._write_candidate(packet[1 + _REC:1 + 2 * _REC], jmax, smax)
        if self.exchange == "gather":
            base = 1 + 2 * _REC
            self.op.write_features(int(imin), packet[base:base + self._flen])
            if self._n_feat == 2:
                tail = packet[base + self._flen:]
                if jmax >= 0:
                    self.op.write_features(int(jmax), tail)
                else:
                    tail[:] = 0.0
        rows = self.comm.all_gather(packet, op="select")
        self._combine(rows)

    def _write_candidate(self, out: np.ndarray, local: int, value: float) -> None:
        if local < 0:
            out[:] = (-_INF, -1.0, 0.0, 0.0, 0.0)
            return
        out[0] = value
        out[1] = local + self.offset
        out[2] = self._w_np[local] if self.use_numba else float(self.w[local])
        out[3] = self.op._diag_host[local]
        out[4] = (0.0 if self.s_prev is None else  # kept exactly with keep_previous
                  (self._sp_np[local] if self.use_numba else float(self.s_prev[local])))

    def _combine(self, rows: np.ndarray) -> None:
        """Global scalars from the ranks' records, in rank order (identical on every rank)."""
        p = math.fsum(rows[:, 0])
        fw = rows[:, 1:1 + _REC]
        away = rows[:, 1 + _REC:1 + 2 * _REC]
        r_fw = _best(fw[:, 0], fw[:, 1], minimize=True)
        r_aw = _best(away[:, 0], away[:, 1], minimize=False)
        i = int(fw[r_fw, 1])
        self._known = {i: tuple(fw[r_fw])}
        self._fresh = {}
        if r_aw >= 0:
            j, s_j = int(away[r_aw, 1]), float(away[r_aw, 0])
            self._known[j] = tuple(away[r_aw])
        else:  # pragma: no cover - the weights sum to one, so some atom is active
            j, s_j = -1, -_INF
        if self.exchange == "gather":
            base = 1 + 2 * _REC
            self._fresh[i] = self.op.atom(rows[r_fw, base:base + self._flen])
            if self._n_feat == 2 and r_aw >= 0:
                self._fresh.setdefault(j, self.op.atom(rows[r_aw, base + self._flen:]))
        s_i = float(fw[r_fw, 0])
        self._active_min = None
        self._set(i_min=i, s_min=s_i, i_fw=i, s_fw=s_i, j_max=j, s_max=s_j, p=p, t=0.0)

    def _record(self, k: int) -> tuple:
        try:
            return self._known[k]
        except KeyError:  # pragma: no cover - a variant asked about an atom nobody announced
            raise RuntimeError(f"atom {k} was not announced this iteration") from None

    def score(self, k):
        return float(self._record(k)[0])

    def weight(self, k):
        return float(self._record(k)[2])

    def diagonal(self, k):
        return float(self._record(k)[3])

    def linear(self, k):
        return 0.0

    def previous_score(self, k):
        """The previous iterate's score of atom ``k`` (its round-1 record)."""
        return float(self._record(k)[4])

    def active_min(self):
        """Active atom of smallest gradient (collective; cached until the next move)."""
        if self._active_min is None:
            n = self.n_local
            if self.use_numba:
                best, value, _ = K.active_argmin(self._w_np[:n], self._s_np[:n])
            else:
                best, value, _ = K.torch_active_argmin(self.w[:n], self.s[:n])
                best, value = int(best), float(value)
            record = np.zeros(_REC)
            self._write_candidate(record, int(best), float(value))
            if best < 0:
                record[0] = _INF
            rows = self.comm.all_gather(record, op="active_min")
            r = _best(rows[:, 0], rows[:, 1], minimize=True)
            k = int(rows[r, 1])
            self._known.setdefault(k, tuple(rows[r]))
            self._active_min = (k, float(rows[r, 0]))
        return self._active_min

    def n_active(self) -> int:
        return int(self.comm.sum([float((self.w[:self.n_local] > 0).sum())], op="n_active")[0])

    def refresh(self) -> None:
        """Renormalize ``w`` and recompute ``s`` exactly (collective)."""
        n = self.n_local
        total = self.comm.sum([float(self.w[:n].sum())], op="refresh")[0]
        self.w[:n] /= total
        self.s.copy_(self._full_gradient(self.w[:n]))
        self.reselect()

    def point(self) -> Tensor:
        """This rank's slice of the iterate."""
        return self.w[:self.n_local]

    def weights(self) -> Tensor:
        return self.w[:self.n_local]

    def snapshot(self):
        return self.w[:self.n_local].clone()

    def restore(self, snap) -> None:
        self.w[:self.n_local].copy_(snap)
        self.w[self.n_local] = 0.0
        self.s.copy_(self._full_gradient(self.w[:self.n_local]))
        self.reselect()

    # -- features and columns ------------------------------------------------------------------

    def _has_features(self, k: int) -> bool:
        return k in self._fresh or k in self._atoms

    def _features(self, k: int) -> _Atom:
        atom = self._fresh.get(k)
        return atom if atom is not None else self._atoms[k]

    def _exchange(self, atoms, extra=()) -> np.ndarray:
        """Round 2: bring the features of ``atoms`` to every rank, and max-reduce ``extra``.

        One ``all_reduce(MAX)``: each owner writes its atoms' features, the others ``-inf``
        (so the max *is* the owner's value, exactly), and ``extra`` rides along. Skipped when
        every atom is known and nothing needs reducing (a shared decision: the cache and the
        fresh features are identical on all ranks).
        """
        missing = [k for k in dict.fromkeys(atoms) if not self._has_features(k)]
        if not missing and not len(extra):
            return np.zeros(0)
        width = self._flen
        buf = np.full(len(missing) * width + len(extra), -_INF)
        for q, k in enumerate(missing):
            if self.op.owns(k):
                self.op.write_features(k - self.offset, buf[q * width:(q + 1) * width])
        buf[len(missing) * width:] = extra
        buf = self.comm.all_reduce(buf, "max", op="exchange")
        self.fetches += len(missing)
        for q, k in enumerate(missing):
            self._fresh[k] = self.op.atom(buf[q * width:(q + 1) * width])
        return buf[len(missing) * width:]

    def vertex_gradient(self, k):
        """This rank's slice of column ``k`` (with the ghost entry, zero), cached."""
        k = int(k)
        cache = self._cache
        row = cache.lookup(k)
        if row is not None:
            return self._slice(row)
        self._exchange([k])
        atom = self._features(k)
        row, evicted = cache.insert(k)
        if evicted >= 0:
            del self._atoms[evicted]
        if row < cache.n_slots:
            self._atoms[k] = atom
        out = self._slice(row)
        self.op.column_into(atom, k, out[:self.n_local])
        out[self.n_local] = 0.0
        return out

    def _slice(self, row: int):
        buffer = self._cache.buffer
        return buffer[row].numpy() if self.use_numba else buffer[row]

    def cache_info(self) -> dict:
        return {**self._cache.info(), "fetched": self.fetches}

    # -- the corrective step (collective) -------------------------------------------------------

    def face_space(self, problem: int = 0) -> FaceSpace:
        """This rank's slice (no ghost entry), its atoms ``offset ..``, and the communicator."""
        n, offset = self.n_local, self.offset
        if self.use_numba:
            w, s = self._w_np[:n], self._s_np[:n]
        else:
            w, s = self.w[:n].cpu().numpy(), self.s[:n].cpu().numpy()

        def lookup(atoms: np.ndarray) -> np.ndarray:
            local = atoms - offset
            return np.where((local >= 0) & (local < n), local, -1)

        return FaceSpace(w, s, None, atoms=np.arange(offset, offset + n, dtype=np.int64),
                         lookup=lookup, comm=self.comm, n_atoms=self.n,
                         prefetch=lambda atoms: self._exchange([int(a) for a in atoms]))

    def face_column(self, atom: int, problem: int = 0):
        """This rank's slice of column ``atom`` (collective when its features are not here)."""
        h = self.vertex_gradient(int(atom))[:self.n_local]
        return h if isinstance(h, np.ndarray) else h.cpu().numpy()

    def face_write(self, w, s, problem: int = 0) -> None:
        n = self.n_local
        self.w[:n] = torch.from_numpy(np.asarray(w)).to(self.w.device)
        self.s[:n] = torch.from_numpy(np.asarray(s)).to(self.s.device)
        self.w[n] = self.s[n] = 0.0
        if self.keep_previous:  # PARTAN restarts from the corrected iterate
            assert self.w_prev is not None and self.s_prev is not None
            self.w_prev.copy_(self.w)
            self.s_prev.copy_(self.s)
        self._active_min = None
        self._refresh_scalars()  # round 1 (collective)

    # -- moves that touch vectors or need pairs ------------------------------------------------

    def pair_entry(self, i, j):
        """:math:`\\tilde K_{ij}` from the two atoms' broadcast features."""
        self._exchange([i, j])
        return self.op.entry(self._features(i), self._features(j), i == j)

    def second_order_partner(self):
        """SWAP-2o partner: each rank's best, then one all-gather picks the global best."""
        i, si = self.i_fw, self.s_fw
        dii = self.diagonal(i)
        h = self.vertex_gradient(i)
        n = self.n_local
        li = i - self.offset if self.op.owns(i) else -1
        # The shared kernel's partner and the gain it compared (one expression,
        # torchfw.optimizers._moves.second_order_gain): ranks compare like with like.
        if self.use_numba:
            w, s, diag = self._w_np[:n], self._s_np[:n], self.diag.numpy()[:n]
            j, gain = K.second_order_best(w, s, h[:n], diag, s, False, li, si, dii)
        else:
            w, s, diag = self.w[:n], self.s[:n], self.diag[:n]
            j, gain = K.torch_second_order_best(w, s, h[:n], diag, None, li, si, dii)
        j = int(j)
        record = np.zeros(1 + _REC)
        if j >= 0:
            record[0] = float(gain)
            self._write_candidate(record[1:], j, float(s[j]))
        else:
            record[0] = -_INF
            record[1:] = (-_INF, -1.0, 0.0, 0.0, 0.0)
        rows = self.comm.all_gather(record, op="partner")
        r = _best(rows[:, 0], rows[:, 2], minimize=False)
        if r < 0:
            return self.j_max
        k = int(rows[r, 2])
        self._known.setdefault(k, tuple(rows[r, 1:]))
        return k

    def extrapolation_bounds(self, lam, i):
        """The feasible mu on the local slice, reduced over the ranks."""
        n = self.n_local
        li = i - self.offset if self.op.owns(i) else -1
        if self.use_numba:
            lo, hi = feasible_interval(self._w_np[:n], self._wp_np[:n], lam, li)
        else:
            lo, hi = feasible_interval(self.w[:n], self.w_prev[:n], lam, li)
            lo, hi = float(lo), float(hi)
        # The feature fetch of the FW atom (needed by apply) rides along with the bounds.
        lo, neg_hi = self._exchange([i], extra=(lo, -hi))
        return lo, -neg_hi

    def update(self, co: Coefficients) -> None:
        """Apply the move to the local slices, then select (round 1)."""
        j = co.j if co.j is not None else co.i
        use_h1 = co.j is not None and co.c != 0.0
        self._exchange([co.i, j] if use_h1 else [co.i])  # both in one round when needed
        h0 = self.vertex_gradient(co.i)
        h1 = self.vertex_gradient(j) if use_h1 else h0
        n = self.n_local
        ghost = n
        li = co.i - self.offset if self.op.owns(co.i) else ghost
        lj = j - self.offset if self.op.owns(j) else ghost
        if self.use_numba:
            update_vectors(self._w_np, self._s_np, co.a, co.b, li, h0, co.c if use_h1 else 0.0,
                           lj, h1, co.d, self._wp_np, self._sp_np, shift=self.keep_previous)
        else:
            swapped = update_vectors(self.w, self.s, co.a, co.b, li, h0, co.c, lj,
                                     h1 if use_h1 else None, co.d, self.w_prev, self.s_prev,
                                     shift=self.keep_previous)
            if swapped:
                assert self.w_prev is not None and self.s_prev is not None  # keep_previous
                self.w, self.w_prev = self.w_prev, self.w
                self.s, self.s_prev = self.s_prev, self.s
        for vec in (self.w, self.s, self.w_prev, self.s_prev):
            if vec is not None:
                vec[ghost] = 0.0
        self.reselect()

    def after_tick(self) -> None:
        """An exact refresh every ``refresh_every`` iterations (collective: every rank counts
        the same iterations)."""
        if self.refresh_every and self.k % self.refresh_every == 0:
            self.refresh()


class DistributedQuadraticEngine(QuadraticEngine):
    """The engine's moves over a :class:`ShardedStorage` (one per rank).

    Takes the parameters of :class:`ShardedStorage`; adds nothing to the moves.
    """

    storage: ShardedStorage

    def __init__(self, operator: ShardedSVMDualOperator, w0: Tensor, **options):
        super().__init__(ShardedStorage(operator, w0, **options))


def _best(values: np.ndarray, index: np.ndarray, *, minimize: bool) -> int:
    """Row of the best value, ties to the lowest global index; -1 when no row is valid."""
    valid = index >= 0
    if not valid.any():
        return -1
    v = np.where(valid, values, _INF if minimize else -_INF)
    target = v.min() if minimize else v.max()
    rows = np.flatnonzero(valid & (v == target))
    if rows.size == 0:  # every valid value is NaN
        return int(np.flatnonzero(valid)[0])
    return int(rows[np.argmin(index[rows])])
