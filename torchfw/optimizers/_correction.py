r"""The active-set corrective step on the engine's storage, and when the run loop takes it.

One concern: applying :mod:`torchfw.optimizers._face` (Wolfe's minor cycle on the face of the
iterate) to a :class:`~torchfw.optimizers._engine.QuadraticEngine`, whatever its operator (the
lazy kernel columns of the SVM dual, a dense matrix, an L1 ball's signed columns), with host or
device scalars, and deciding at the run loop's checks when to take it (:class:`FaceCorrection`).
The compiled SVC solve (:mod:`torchfw._svc_dense`) runs the same kernels, the same trigger and
the same summation orders on its rows, so both paths take the same corrections
(``tests/test_face_correction.py``).

The face's matrix comes from the vertex gradients of its atoms,
:math:`\tilde Q_{ab} = h_a[b] - \tilde c_b` with :math:`h_a = \tilde Q e_a + \tilde c`, and the
new gradient is :math:`s = \tilde Q x + \tilde c = \sum_a x_a h_a` (the weights sum to one), so
a correction reads each support atom's column twice and costs :math:`O(|S|^3 + |S| N)`.
"""

from __future__ import annotations

import numpy as np
import torch

from . import _face
from . import _kernels as K

__all__ = ["FaceCorrection", "correct_face"]


def correct_face(eng) -> int:
    """Take the corrective step on ``eng``'s face; the number of atoms that left, or -1.

    -1 (nothing changed): a face of one atom or of more than
    :data:`~torchfw.optimizers._face.MAX_FACE`, a face matrix that is not numerically definite,
    or a result whose objective is not below the current one.
    """
    host = eng.use_numba
    if host:
        idx = np.flatnonzero(eng._w_np > 0.0).astype(np.int64)
        x = eng._w_np[idx].astype(np.float64)
    else:
        index = torch.nonzero(eng.w > 0).reshape(-1)
        idx = index.cpu().numpy().astype(np.int64)
        x = eng.w[index].detach().to(torch.float64).cpu().numpy()
    k = idx.shape[0]
    if k < 2 or k > _face.MAX_FACE:
        return -1
    x = x / x.sum()
    ct = None
    if eng.ct is not None:
        ct = eng.ct.detach().to(torch.float64).cpu().numpy()
    c = ct[idx].copy() if ct is not None else np.zeros(1)
    G = np.empty((k, k))
    for a in range(k):
        h = _column(eng, int(idx[a]))
        G[a, :a + 1] = h[idx[:a + 1]]
        if ct is not None:
            G[a, :a + 1] -= ct[idx[:a + 1]]
    if not _face.cholesky_in_place(G, k):
        return -1
    kept = _face.minor_cycle(G, k, x, c, ct is not None, idx)
    if kept < 1:
        return -1
    if host:
        s_new = np.zeros(eng._s_np.shape[0])
        for a in range(kept):
            _face.axpy(s_new, x[a], _column_array(eng, int(idx[a])))
    else:
        s_t = torch.zeros_like(eng.s)
        for a in range(kept):
            s_t.add_(eng.vertex_gradient(int(idx[a])).to(eng.s.dtype), alpha=float(x[a]))
            eng._columns.clear()
        s_new = s_t.cpu().numpy()
    p_new = 0.0
    t_new = 0.0
    for a in range(kept):
        p_new += x[a] * s_new[idx[a]]
        if ct is not None:
            t_new += x[a] * ct[idx[a]]
    if not 0.5 * (p_new + t_new) < 0.5 * (float(eng.p) + float(eng.t)):
        return -1
    if host:
        eng._w_np[:] = 0.0
        eng._w_np[idx[:kept]] = x[:kept]
        eng._s_np[:] = s_new
    else:
        w_new = torch.zeros_like(eng.w)
        w_new[torch.from_numpy(idx[:kept]).to(eng.w.device)] = \
            torch.from_numpy(x[:kept]).to(eng.w.dtype).to(eng.w.device)
        eng.w.copy_(w_new)
        eng.s.copy_(s_t)
    if eng.keep_previous:  # PARTAN restarts from the corrected iterate
        eng.w_prev.copy_(eng.w)
        eng.s_prev.copy_(eng.s)
    eng._columns.clear()
    eng._refresh_scalars()
    return k - kept


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
    above ``STALL`` times its first, the step is taken (one iteration; counters ``correct`` and
    ``face_drop``); a step refused doubles the next window. Then a new window starts.
    """

    def __init__(self, eng, gap: float):
        self._restart(eng, gap, refused=False)

    def _restart(self, eng, gap: float, refused: bool) -> None:
        self.start = eng.iteration()
        self.length = _face.correction_window(eng.n_active(), eng.N)
        if refused:
            self.length *= 2
        self.first = gap
        self.smallest = gap

    def __call__(self, eng, k: int, gap: float) -> bool:
        """Whether a step was taken at this check (the caller checks again before going on)."""
        if gap < self.smallest:
            self.smallest = gap
        if k - self.start < self.length:
            return False
        stalled = self.smallest > _face.STALL * self.first
        dropped = correct_face(eng) if stalled else -1
        if dropped >= 0:
            eng.tick()
            eng.count("correct")
            for _ in range(dropped):
                eng.count("face_drop")
        self._restart(eng, float(eng.gap()), refused=stalled and dropped < 0)
        return dropped >= 0
