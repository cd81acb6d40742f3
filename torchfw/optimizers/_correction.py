r"""The active-set corrective step on the engine's storage, and when the run loop takes it.

One concern: applying :mod:`torchfw.optimizers._face` (Wolfe's minor cycle on the face of the
iterate) to a :class:`~torchfw.optimizers._engine.QuadraticEngine`, whatever its operator (the
lazy kernel columns of the SVM dual, a dense matrix, an L1 ball's signed columns), with host or
device scalars, and deciding at the run loop's checks when to take it (:class:`FaceCorrection`).
The compiled quadratic loop (:mod:`torchfw.optimizers._compiled_loop`, SVC's compiled solve) runs
the same kernels, the same trigger and the same summation orders on its rows, so both paths take
the same corrections
(``tests/test_face_correction.py``).

The face's matrix comes from the vertex gradients of its atoms,
:math:`\tilde Q_{ab} = h_a[b] - \tilde c_b` with :math:`h_a = \tilde Q e_a + \tilde c`, and the
new gradient is :math:`s = \tilde Q x + \tilde c = \sum_a x_a h_a` (the weights sum to one), so
a correction reads each support atom's column twice and costs :math:`O(|S|^3 + |S| N)`.
"""

from __future__ import annotations

import numpy as np
import torch

from ..utils.jit import current, current_module
from . import _face
from . import _kernels as K

__all__ = ["FaceCorrection", "correct_face"]


def correct_face(eng, max_face: int | None = None) -> int:
    """Take the corrective step on ``eng``'s face; the number of atoms of the new face, or -1.

    The rounds of :func:`torchfw.optimizers._compiled_loop._correct_py`, on the engine's vertex
    gradients: the face (the support and the atoms that violate optimality most,
    :func:`~torchfw.optimizers._face.face_atoms`; then the kept atoms and the new worst
    violators) has its factor extended by the new atoms, Wolfe's minor cycle runs, and the
    result is kept if it lowers the objective; rounds go on while each at least halves the
    gap. ``max_face`` bounds the face (default: :data:`~torchfw.optimizers._face.MAX_FACE`
    and the number of atoms; the run loop passes :func:`~torchfw.optimizers._face.face_budget`).
    -1: nothing changed (a face of one atom or over ``max_face``, a face matrix that is not
    numerically definite, no decrease).
    """
    host = eng.use_numba
    face = current_module(_face)  # interpreted while the cold start defers compiling
    if host:
        w_np, s_np = eng._w_np, eng._s_np
    else:
        w_np = eng.w.detach().to(torch.float64).cpu().numpy()
        s_np = eng.s.detach().to(torch.float64).cpu().numpy()
    p = float(eng.p)
    n = w_np.shape[0]
    cap = min(n, _face.MAX_FACE) if max_face is None else max_face
    first, k_support = face.face_atoms(w_np, s_np, p, cap)
    k = first.shape[0]
    if k < 2:
        return -1
    idx = np.empty(cap, dtype=np.int64)
    idx[:k] = first
    x = np.zeros(cap)
    x[:k_support] = w_np[idx[:k_support]]
    x[:k_support] /= _ordered_sum(x[:k_support])
    ct = None if eng.ct is None else eng.ct.detach().to(torch.float64).cpu().numpy()
    c = np.zeros(cap) if ct is not None else np.zeros(1)
    if ct is not None:
        c[:k] = ct[idx[:k]]
    L = np.empty((cap, cap))
    value = 0.5 * (p + float(eng.t))
    gap_prev = p - float(s_np.min())
    k0 = 0
    accepted = -1
    for _ in range(_face.MAX_ROUNDS):
        Gb = np.empty((k - k0, k))
        for a in range(k0, k):
            h = _column(eng, int(idx[a]))
            L[a, :a + 1] = h[idx[:a + 1]]
            if ct is not None:
                L[a, :a + 1] -= ct[idx[:a + 1]]
            Gb[a - k0, :a + 1] = L[a, :a + 1]
        lo = k0 if k0 > 0 else k_support
        k = face.extend_skipping(L, Gb, k0, lo, k, x, c, ct is not None, idx)
        if k < 1:
            break
        k = face.prune(L, Gb, k0, lo, k, x, c, ct is not None, idx)
        if k < 1:
            break
        kept = face.minor_cycle(L, k, x, c, ct is not None, idx)
        if kept < 1:
            break
        s_new = _gradient(eng, idx, x, kept, n)
        p_new = 0.0
        t_new = 0.0
        for a in range(kept):
            p_new += x[a] * s_new[idx[a]]
            if ct is not None:
                t_new += x[a] * ct[idx[a]]
        if not 0.5 * (p_new + t_new) < value:
            break
        _write(eng, idx, x, kept, s_new)
        w_np = _weights(eng, host)
        value = 0.5 * (p_new + t_new)
        accepted = kept
        gap = p_new - float(s_new.min())
        if not gap < gap_prev:
            break
        gap_prev = gap
        n_add = min(face.face_growth(kept), cap - kept)
        new = face.violators(w_np, s_new, p_new, n_add)
        if new.shape[0] == 0:
            break
        k0 = kept
        k = kept + new.shape[0]
        idx[k0:k] = new
        x[k0:k] = 0.0
        if ct is not None:
            c[k0:k] = ct[new]
    if accepted > 0:
        if eng.keep_previous:  # PARTAN restarts from the corrected iterate
            eng.w_prev.copy_(eng.w)
            eng.s_prev.copy_(eng.s)
        eng._columns.clear()
        eng._refresh_scalars()
    return accepted


def _ordered_sum(v: np.ndarray) -> float:
    """``sum(v)`` left to right (the compiled driver's order)."""
    total = 0.0
    for value in v.tolist():
        total += value
    return total


def _gradient(eng, idx, x, kept, n) -> np.ndarray:
    r""":math:`\sum_{a < kept} x_a h_{idx_a}` as a float64 host array, atom by atom."""
    if eng.use_numba:
        out = np.zeros(n)
        for a in range(kept):
            _face.axpy(out, x[a], _column_array(eng, int(idx[a])))
        return out
    acc = torch.zeros_like(eng.s)
    for a in range(kept):
        acc.add_(eng.vertex_gradient(int(idx[a])).to(eng.s.dtype), alpha=float(x[a]))
        eng._columns.clear()
    return acc.detach().to(torch.float64).cpu().numpy()


def _write(eng, idx, x, kept, s_new) -> None:
    """Set the engine's weights to ``x`` on ``idx[:kept]`` and its gradient to ``s_new``."""
    if eng.use_numba:
        eng._w_np[:] = 0.0
        eng._w_np[idx[:kept]] = x[:kept]
        eng._s_np[:] = s_new
        return
    w_new = torch.zeros_like(eng.w)
    w_new[torch.from_numpy(idx[:kept].copy()).to(eng.w.device)] = \
        torch.from_numpy(x[:kept].copy()).to(eng.w.dtype).to(eng.w.device)
    eng.w.copy_(w_new)
    eng.s.copy_(torch.from_numpy(s_new).to(eng.s.dtype).to(eng.s.device))


def _weights(eng, host: bool) -> np.ndarray:
    """The engine's weights as a float64 host array (a view on the host)."""
    return eng._w_np if host else eng.w.detach().to(torch.float64).cpu().numpy()


def _column(eng, i: int) -> np.ndarray:
    """The vertex gradient of atom ``i`` as a float64 host array (not kept by the engine)."""
    h = eng.vertex_gradient(i)
    eng._columns.clear()
    return h.detach().to(torch.float64).cpu().numpy()


def _column_array(eng, i: int) -> np.ndarray:
    """The vertex gradient of atom ``i`` as a host array in its own precision (a view when it
    can be): the compiled SVC solve sums its rows in theirs."""
    h = eng.vertex_gradient(i)
    eng._columns.clear()
    return K.as_numpy(h.detach())


class FaceCorrection:
    r"""When the run loop takes the corrective step (the rule of :data:`~torchfw.optimizers.
    _face.STALL`), asked at every check.

    A window starts at a check; it lasts :func:`~torchfw.optimizers._face.correction_window`
    iterations for the face at its start. At its end, if the smallest gap of the window is
    above ``STALL`` times its reference -- the gap at the start of the run or after the last
    correction, else the previous window's smallest gap -- the step is taken (one iteration; counter ``correct``); a
    step refused doubles the next window. Then a new window starts.
    """

    def __init__(self, eng, gap: float):
        self.last = eng.iteration()  # the plain iterations since pay for the next face
        self._restart(eng, gap, gap, refused=False)

    def _restart(self, eng, reference: float, gap: float, refused: bool) -> None:
        self.start = eng.iteration()
        self.length = current(_face.correction_window)(eng.n_active(), eng.N)
        if refused:
            self.length *= 2
        self.first = reference
        self.smallest = gap

    def __call__(self, eng, k: int, gap: float) -> bool:
        """Whether a step was taken at this check (the caller checks again before going on)."""
        if gap < self.smallest:
            self.smallest = gap
        if k - self.start < self.length:
            return False
        stalled = self.smallest > _face.STALL * self.first
        done = stalled and correct_face(eng, current(_face.face_budget)(eng.N, k - self.last)) > 0
        if done:
            eng.tick()
            eng.count("correct")
            self.last = eng.iteration()
        # The next window must halve this one's smallest gap (the gap is noisy: its value at
        # one check would make a halving look easy), or the gap after a correction.
        gap_now = float(eng.gap())
        self._restart(eng, gap_now if done else self.smallest, gap_now,
                      refused=stalled and not done)
        return done
