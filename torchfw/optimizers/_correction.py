r"""The active-set corrective step on the engine's storage, and when the run loop takes it.

One concern: applying :mod:`torchfw.optimizers._face` (Wolfe's minor cycle on the face of the
iterate) to a :class:`~torchfw.optimizers._engine.QuadraticEngine`, whatever its operator (the
lazy kernel columns of the SVM dual, a dense matrix, an L1 ball's signed columns), with host or
device scalars, and deciding at the run loop's checks when to take it (:class:`FaceCorrection`).
The compiled quadratic loop (:mod:`torchfw.optimizers._compiled_loop`, SVC's compiled solve) runs
the same kernels, the same trigger and the same summation orders on its rows, so both paths take
the same corrections
(``tests/test_face_correction.py``).

The step is written once for every storage (host, device, dense, streaming, sampled, batched,
sharded): it reads and writes a storage through its ``face_space``, ``face_column`` and
``face_write`` members (:mod:`torchfw.optimizers._face_space`), and
``tests/test_face_storages.py`` checks that every storage takes the same step from the same
iterate. The face's matrix comes from the vertex gradients of its atoms,
:math:`\tilde Q_{ab} = h_a[b] - \tilde c_b` with :math:`h_a = \tilde Q e_a + \tilde c` (only
the face's atoms' columns are read, restricted to the storage's positions: a working set's or a
shard's), and the new gradient is :math:`s = \tilde Q x + \tilde c = \sum_a x_a h_a` (the
weights sum to one), so a correction reads each face atom's column twice and costs
:math:`O(|F|^3 + |F| n)` for a face of :math:`|F|` atoms over :math:`n` positions, with
:math:`|F|` bounded by :func:`~torchfw.optimizers._face.face_budget`.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from ..utils.jit import current, current_module
from . import _face, _face_cg
from . import _kernels as K

__all__ = ["FaceCorrection", "correct_face", "conjugate_face"]


def correct_face(eng, max_face: int | None = None, problem: int = 0,
                 iterations: int | None = None, repeats: int = 0) -> int:
    """Take the corrective step on ``eng``'s face; the number of atoms of the new face, or -1.

    The rounds of :func:`torchfw.optimizers._compiled_loop._correct_py`, written once for every
    storage over its :class:`~torchfw.optimizers._face_space.FaceSpace` (the storage's
    ``face_space``, ``face_column`` and ``face_write``): the face (the support and the atoms
    that violate optimality most, as :func:`~torchfw.optimizers._face.face_atoms` picks them;
    then the kept atoms and the new worst violators) has its factor extended by the new atoms'
    rows -- entries of their columns at the face's atoms, nothing else -- Wolfe's minor cycle
    runs, and the result is kept if it lowers the objective; rounds go on while each at least
    halves the gap. ``max_face`` bounds the face (default: :data:`~torchfw.optimizers._face.
    MAX_FACE` and the number of atoms; the run loop passes :func:`~torchfw.optimizers._face.
    face_budget`). ``iterations``: bound it instead by :func:`~torchfw.optimizers._face.
    face_budget` for that many plain iterations over the storage's positions (a working set's,
    the sampled slots: what its iterations cost), asked by the ``repeats + 1``-th stalled
    window in a row. ``problem``: which problem of a batched storage. -1: nothing changed (a
    face of one atom or over ``max_face``, a face matrix that is not numerically definite, no
    decrease). On a sharded storage every rank calls it and takes the same step.
    """
    st = eng.storage
    face = current_module(_face)  # interpreted while the cold start defers compiling
    space = st.face_space(problem)
    p = _scalar(st.p, problem)
    n = space.size
    if iterations is not None:
        max_face = face.face_budget(n, iterations, repeats)
    cap = min(n, _face.MAX_FACE) if max_face is None else min(max_face, n)
    support, weights = space.support()
    k_support = support.shape[0]
    if k_support > cap:  # beyond what the plain steps paid for: no face
        return -1
    n_add = min(face.face_growth(k_support), cap - k_support)
    extra = space.violators(p, n_add)
    k = k_support + extra.shape[0]
    if k < 2:
        return -1
    idx = np.empty(cap, dtype=np.int64)
    idx[:k_support] = support
    idx[k_support:k] = extra
    x = np.zeros(cap)
    x[:k_support] = weights
    x[:k_support] /= _ordered_sum(x[:k_support])
    has_c = space.c is not None
    c = np.zeros(cap) if has_c else np.zeros(1)
    if has_c:
        c[:k] = space.gather(space.c, idx[:k])
    L = np.empty((cap, cap))
    Y = np.zeros((2, cap))  # the face's forward vectors, kept between the rounds' solves
    z = np.empty(cap)
    solved = np.zeros(2, dtype=np.int64)
    value = 0.5 * (p + _scalar(st.t, problem))
    gap_prev = p - space.smallest(space.s)
    k0 = 0
    accepted = -1
    for _ in range(_face.MAX_ROUNDS):
        Gb = _face_rows(st, space, idx, k0, k, problem)
        if has_c:
            Gb -= c[:k]
        for a in range(k0, k):
            L[a, :a + 1] = Gb[a - k0, :a + 1]
        lo = k0 if k0 > 0 else k_support
        k = face.extend_skipping(L, Gb, k0, lo, k, x, c, has_c, idx)
        if k < 1:
            break
        if solved[0] > k0:  # the rows from k0 on are new
            solved[0] = k0
        k = face.prune_kept(L, Gb, k0, lo, k, x, c, has_c, idx, Y, z, solved)
        if k < 1:
            break
        kept = face.minor_cycle_kept(L, k, x, c, has_c, idx, Y, z, solved)
        if kept < 1:
            break
        s_new = _gradient(st, space, idx, x, kept, problem)
        s_face = space.gather(s_new, idx[:kept])
        p_new = 0.0
        t_new = 0.0
        for a in range(kept):
            p_new += x[a] * s_face[a]
            if has_c:
                t_new += x[a] * c[a]
        if not 0.5 * (p_new + t_new) < value:
            break
        w_new = np.zeros(space.w.shape[0])
        pos = space.positions(idx[:kept])
        here = pos >= 0
        w_new[pos[here]] = x[:kept][here]
        st.face_write(w_new, s_new, problem)
        space = st.face_space(problem)
        value = 0.5 * (p_new + t_new)
        accepted = kept
        gap = p_new - space.smallest(space.s)
        if not gap < gap_prev:
            break
        gap_prev = gap
        n_add = min(face.face_growth(kept), cap - kept)
        new = space.violators(p_new, n_add)
        if new.shape[0] == 0:
            break
        k0 = kept
        k = kept + new.shape[0]
        idx[k0:k] = new
        x[k0:k] = 0.0
        if has_c:
            c[k0:k] = space.gather(space.c, new)
    return accepted


def conjugate_face(eng, size: int, max_matvecs: int, problem: int = 0,
                   rtol: float = _face_cg.CG_RTOL) -> int:
    r"""The corrective step by conjugate gradients on ``eng``'s face
    (:mod:`torchfw.optimizers._face_cg`): the atoms of the new face, -1 when nothing changed,
    or :data:`~torchfw.optimizers._face_cg.FAILED` when its first solve did not converge.

    The rounds of :func:`torchfw.optimizers._compiled_loop._conjugate_py`, written once for
    every storage over its :class:`~torchfw.optimizers._face_space.FaceSpace`: the face is the
    support and the worst violators, ``size`` atoms at most; its matrix's lower triangle comes
    from the atoms' columns (in the columns' precision: float32 columns give a float32 matrix,
    whose products read half the memory), :func:`~torchfw.optimizers._face_cg.
    conjugate_minimize` solves the face's problem within the products left of ``max_matvecs``
    (each solve to ``rtol``), and the result is kept if it lowers the objective; rounds go on
    while the gap falls. The
    run loop's :class:`FaceCorrection` sizes it (:func:`~torchfw.optimizers._face_cg.
    conjugate_plan`). On a sharded storage every rank calls it and takes the same step.
    """
    st = eng.storage
    cg = current_module(_face_cg)  # interpreted while the cold start defers compiling
    space = st.face_space(problem)
    p = _scalar(st.p, problem)
    value = 0.5 * (p + _scalar(st.t, problem))
    support, weights = space.support()
    k_support = support.shape[0]
    if k_support > size:
        return -1
    has_c = space.c is not None
    gap_prev = p - space.smallest(space.s)
    p_now = p
    used = 0
    accepted = -1
    for _ in range(_face.MAX_ROUNDS):
        extra = space.violators(p_now, size - k_support)
        k = k_support + extra.shape[0]
        if k < 2 or (extra.shape[0] == 0 and accepted > 0):
            break
        idx = np.concatenate([support, extra]).astype(np.int64)
        x = np.zeros(k)
        x[:k_support] = weights
        x[:k_support] /= _ordered_sum(x[:k_support])
        c = space.gather(space.c, idx) if has_c else np.zeros(1)
        block = _face_rows(st, space, idx, 0, k, problem)
        if has_c:
            block -= c
        dtype = np.float32 if _column_dtype(st, int(idx[0]), problem) == np.float32 \
            else np.float64
        G = np.zeros((k, k), dtype=dtype)
        rows, cols = np.tril_indices(k)
        G[rows, cols] = block[rows, cols]
        products = cg.conjugate_minimize(G, k, x, c, has_c, max_matvecs - used, rtol)
        if products < 0:
            return _face_cg.FAILED if accepted < 0 else accepted
        used += products
        keep = x > 0.0
        kept = int(keep.sum())
        s_new = _gradient(st, space, idx[keep], x[keep], kept, problem)
        s_face = space.gather(s_new, idx[keep])
        p_new = 0.0
        t_new = 0.0
        for a, xa in enumerate(x[keep].tolist()):
            p_new += xa * float(s_face[a])
            if has_c:
                t_new += xa * float(c[keep][a])
        if not 0.5 * (p_new + t_new) < value:
            break
        w_new = np.zeros(space.w.shape[0])
        pos = space.positions(idx[keep])
        here = pos >= 0
        w_new[pos[here]] = x[keep][here]
        st.face_write(w_new, s_new, problem)
        space = st.face_space(problem)
        value = 0.5 * (p_new + t_new)
        accepted = kept
        support, weights = space.support()
        k_support = support.shape[0]
        p_now = p_new
        gap = p_new - space.smallest(space.s)
        if not gap < gap_prev or kept >= size:
            break
        gap_prev = gap
    return accepted


def _column_dtype(st, atom: int, problem: int):
    """The precision of the storage's columns (of atom ``atom``)."""
    return np.asarray(st.face_column(atom, problem)).dtype


def _scalar(v, problem: int) -> float:
    """A storage scalar as a float (problem ``problem``'s of a batched storage)."""
    if isinstance(v, torch.Tensor) and v.numel() > 1:
        return float(v[problem])
    return float(v)


def _ordered_sum(v: np.ndarray) -> float:
    """``sum(v)`` left to right (the compiled driver's order)."""
    total = 0.0
    for value in v.tolist():
        total += value
    return total


def _face_rows(st, space, idx, k0, k, problem) -> np.ndarray:
    r"""Rows ``k0 .. k-1`` of the face's matrix (:math:`\tilde Q_{ab} + \tilde c_b` up to the
    diagonal, the caller subtracts :math:`\tilde c`): each new atom's column at the face's
    atoms, known to every rank."""
    if space.prefetch is not None:
        space.prefetch(idx[k0:k])
    pos = space.positions(idx[:k])
    here = np.flatnonzero(pos >= 0)
    block = np.full((k - k0, k), -np.inf)
    for a in range(k0, k):
        h = st.face_column(int(idx[a]), problem)
        cols = here[here <= a]
        block[a - k0, cols] = h[pos[cols]]
    return space.owned(block)


def _gradient(st, space, idx, x, kept, problem) -> np.ndarray:
    r""":math:`\sum_{a < kept} x_a h_{idx_a}` over the positions (float64), atom by atom in
    the columns' own precision (the compiled SVC solve sums its rows in theirs)."""
    out = np.zeros(space.w.shape[0])
    for a in range(kept):
        h = st.face_column(int(idx[a]), problem)
        if K.HAVE_NUMBA:
            current(_face.axpy)(out, x[a], h)
        else:
            out += x[a] * np.asarray(h, dtype=np.float64)
    return out


class FaceCorrection:
    r"""When the run loop takes the corrective step (the rule of :data:`~torchfw.optimizers.
    _face.STALL`), asked at every check.

    A window starts at a check; it lasts :func:`~torchfw.optimizers._face.correction_window`
    iterations for the face at its start. At its end, if the window stalled
    (:func:`~torchfw.optimizers._face.stalled`: its smallest distance to the stopping target
    -- :func:`~torchfw.optimizers._face.distance`, the gap over the check's ``target`` --
    above ``STALL`` times its reference -- the distance at the start of the run or after the
    last correction, else the previous window's smallest -- and out of reach of the target
    at its rate; the run's first window compares gaps, see :data:`~torchfw.optimizers._face.
    STALL`) the step is taken (one iteration; counter ``correct``) on a face bounded by
    :func:`~torchfw.optimizers._face.face_budget` for the stalled windows in a row -- or by
    conjugate gradients on a larger face (:func:`conjugate_face`, :mod:`torchfw.optimizers.
    _face_cg`) where its plan affords one and the dense face would leave violators out, until
    it fails once; a step refused doubles the next window. Then a new window starts.
    The ``B`` problems of a batched storage have a window each (their iterations, gaps and
    faces are their own); a problem that stopped takes no step.
    """

    def __init__(self, eng):
        st = eng.storage
        self.batch = int(getattr(st, "B", 1))
        self.windows = [_Window(eng, b, self.batch) for b in range(self.batch)]

    def __call__(self, eng, k: int, gap, target) -> bool:
        """Whether a step was taken at this check (the caller checks again before going on);
        ``target``: the gap at which the run stops (the stopping rule's ``target(value)``)."""
        done = False
        for b, window in enumerate(self.windows):
            if self.batch > 1 and not bool(eng.storage.active[b]):
                continue
            done |= window(eng, _gap(gap, b), _gap(target, b))
        return done


def _wants_more(space, p: float, k_dense: int) -> bool:
    """Whether the support and the violators (score below ``p``) number more than ``k_dense``
    over all positions (:func:`torchfw.optimizers._face_cg.wants_more`, over every rank)."""
    count = int(((space.w > 0.0) | (space.s < p)).sum())
    if space.comm is not None:
        count = int(space.comm.sum([float(count)], op="face")[0])
    return count > k_dense


def _admitted(eng) -> int:
    """Atoms a streaming storage admitted to its working set so far (0 for the others)."""
    return int(eng.storage._counts.get("admitted", 0))


def _gap(gap, b: int) -> float:
    return float(gap[b]) if isinstance(gap, torch.Tensor) and gap.numel() > 1 else float(gap)


class _Window:
    """The window of one problem (:class:`FaceCorrection`)."""

    def __init__(self, eng, problem: int, batch: int):
        self.problem = problem
        self.batch = batch
        self.last = self._iteration(eng)  # the plain iterations since pay for the next face
        self.stalls = 0  # the stalled windows in a row before this one (face_budget)
        # The conjugate-gradient step (_face_cg): ALLOWED until it fails once in the run,
        # LAST after it was the last correction (the windows then cost its steps).
        self.conjugate = _face_cg.ALLOWED
        self._restart(eng, None, refused=False)
        # Every window is also measured on gaps (_face.STALL): its reference gap (None: the
        # next check's) and its smallest; the run's first window (opening) on gaps alone.
        self.gaps: list = [None, math.inf]
        self.opening = True

    def _iteration(self, eng) -> int:
        return eng.iteration() if self.batch == 1 else int(eng.storage.k[self.problem])

    def _n_active(self, eng) -> int:
        if self.batch == 1:
            return eng.n_active()
        return int((eng.storage.w[self.problem] > 0).sum())

    def _restart(self, eng, reference: float | None, refused: bool) -> None:
        """A new window from this check, measured against ``reference`` (a distance,
        :func:`~torchfw.optimizers._face.distance`; None: the next check's)."""
        self.start = self._iteration(eng)
        self.admitted = _admitted(eng)
        window = current(_face_cg.conjugate_window if self.conjugate == _face_cg.LAST
                         else _face.correction_window)
        n_face = self._n_active(eng)
        self.length = window(n_face, eng.N, self.stalls)
        # What a window of no stall on this face lasts: the iterations of one correction's
        # cost (_face.stalled_scaled weighs the window's rate by its own cost).
        self.full = window(n_face, eng.N, 0)
        self.face = n_face  # a face that fills in over the window is no crawl (_face.filling)
        if refused:
            self.length *= 2
        self.first = reference
        self.smallest = math.inf

    def _correct(self, eng, iterations: int) -> int:
        """The step of a stalled window: the conjugate one where :func:`~torchfw.optimizers.
        _face_cg.conjugate_plan` affords a face larger than the dense step's and the dense
        face would leave violators out, else (or when it changed nothing) the dense one."""
        st = eng.storage
        space = st.face_space(self.problem)
        n = space.size
        k_dense = current(_face.face_budget)(n, iterations, self.stalls)
        kept = -1
        if self.conjugate != _face_cg.DISABLED:
            size, products = current(_face_cg.conjugate_plan)(n, iterations, self.stalls,
                                                              k_dense)
            p = _scalar(st.p, self.problem)
            if size > 0 and _wants_more(space, p, k_dense):
                kept = conjugate_face(eng, size, products, self.problem)
                if kept == _face_cg.FAILED:
                    self.conjugate = _face_cg.DISABLED
                elif kept > 0:
                    self.conjugate = _face_cg.LAST
        if kept <= 0:
            kept = correct_face(eng, problem=self.problem, iterations=iterations,
                                repeats=self.stalls)
            if kept > 0 and self.conjugate == _face_cg.LAST:
                self.conjugate = _face_cg.ALLOWED
        return kept

    def __call__(self, eng, gap: float, target: float) -> bool:
        dist = current(_face.distance)(gap, target)
        if self.first is None:
            self.first = dist
        if dist < self.smallest:
            self.smallest = dist
        gaps = self.gaps
        if gaps[0] is None:
            gaps[0] = gap
        if gap < gaps[1]:
            gaps[1] = gap
        k = self._iteration(eng)
        if k - self.start < self.length:
            return False
        # A streaming working set that grew in the window changed the problem its gap is
        # measured on (each admitted atom is a new violator): that is no crawl.
        scale = (k - self.start) / max(self.full, 1)
        stalled_scaled = current(_face.stalled_scaled)
        if self.opening:  # the run's first window: its gaps against the target
            stalled = stalled_scaled(gaps[1], gaps[0], target, scale)
            self.opening = False
        else:
            # Stalled on gaps, or on distances where the face did not fill in (_face.filling:
            # the target falls with the value, not the crawl).
            stalled = stalled_scaled(gaps[1], gaps[0], target, 1.0) or (
                stalled_scaled(self.smallest, self.first, 1.0, scale)
                and not current(_face.filling)(self._n_active(eng), self.face))
        stalled = stalled and _admitted(eng) == self.admitted
        done = stalled and self._correct(eng, k - self.last) > 0
        self.stalls = self.stalls + 1 if stalled else 0
        if done:
            if self.batch == 1:
                eng.tick()
                eng.count("correct")
            else:  # this problem's iteration and counter alone
                st = eng.storage
                st.k[self.problem] += 1
                mine = torch.zeros(self.batch, dtype=torch.bool, device=st.k.device)
                mine[self.problem] = True
                eng.count("correct", mine)
            self.last = self._iteration(eng)
        # The next window must halve this one's smallest distance (the gap is noisy: its value
        # at one check would make a halving look easy), or the distance at the check after a
        # correction (the caller checks again).
        smallest = self.smallest
        self._restart(eng, None if done else smallest, refused=stalled and not done)
        self.gaps = [None, math.inf] if done else [gaps[1], gap]
        if not done:
            self.smallest = dist
        return done
