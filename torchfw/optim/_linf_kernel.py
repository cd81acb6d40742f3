r"""The eager CPU step of an L-infinity ball as one compiled kernel: two passes over the memory.

In PyTorch operations the step of :mod:`torchfw.optim._batched` walks over each tensor six
times: the signs :math:`s = \mathrm{sign}(d)` (read, write), the two norms that decide the
guards (:math:`\|d\|_2` and :math:`\|s\|_2`), the vertex :math:`v = -r s` (read, write) and the
move :math:`\theta \leftarrow \theta + \gamma (v - \theta)` (two reads, a write). Here one pass
reads the direction and decides the guards (is every :math:`d_i` finite, how many are nonzero),
and one pass moves the parameter with the vertex computed on the fly; no temporary is written.

The guards and the arithmetic are those of ``_linf_host``: a direction with a non-finite entry
turns the whole tensor NaN, a zero direction does not move, and a direction without a zero
entry moves by :math:`\mathrm{lerp}(\theta, v, \gamma)`, taken as ``torch.lerp`` takes it
(:math:`\theta + \gamma (v - \theta)` for :math:`\gamma < 1/2`, else
:math:`v - (v - \theta)(1 - \gamma)`, so that :math:`\gamma = 1` lands on the vertex exactly;
each a fused multiply-add) in the tensor's own precision. A direction with some zero entries
is left to the PyTorch form (it keeps those coordinates), as is everything without numba or
while the cold start defers the compiled kernels (:func:`torchfw.utils.jit.compiled_kernels`).

References
----------
S. Pokutta, C. Spiegel, M. Zimmer. "Deep Neural Network Training with Frank-Wolfe."
arXiv:2010.07243, 2020.
"""

from __future__ import annotations

import numpy as np

from ..utils.jit import njit

__all__ = ["MOVED", "NO_DIRECTION", "NOT_FINITE", "SOME_ZEROS", "linf_step", "step_constants"]

#: What :func:`linf_step` did: moved the parameter, found a zero direction (no move), found a
#: non-finite entry (the parameter is now NaN), or found zero entries (nothing done: the
#: caller takes the form that keeps those coordinates).
MOVED, NO_DIRECTION, NOT_FINITE, SOME_ZEROS = 0, 1, 2, 3


def step_constants(neg_radius: float, gamma: float, dtype) -> np.ndarray:
    """``[-r, gamma, 1 - gamma]`` in the parameter's precision, as ``torch.lerp`` rounds them
    (the weight rounded first, ``1 - weight`` computed in that precision)."""
    weight = np.asarray(gamma, dtype=dtype)
    return np.array([neg_radius, weight, np.asarray(1, dtype=dtype) - weight], dtype=dtype)


def _linf_step(p, d, consts):  # pragma: no cover - compiled by numba
    n = d.shape[0]
    nonzero = 0
    bad = False
    for i in range(n):
        x = d[i]
        nonzero += x != 0
        bad |= not (x - x == 0)  # x - x is NaN exactly when x is inf or NaN
    if bad:
        for i in range(n):
            p[i] = np.nan
        return 2
    if nonzero == 0:
        return 1
    if nonzero < n:
        return 3
    neg_r = consts[0]
    weight = consts[1]
    rest = consts[2]
    if abs(weight) < 0.5:
        for i in range(n):
            v = neg_r if d[i] > 0 else -neg_r
            p[i] = p[i] + weight * (v - p[i])
    else:
        for i in range(n):
            v = neg_r if d[i] > 0 else -neg_r
            p[i] = v - (v - p[i]) * rest
    return 0


# Fused multiply-adds and nothing else of fast math: torch.lerp's CPU kernel computes
# theta + gamma (v - theta) as one fused multiply-add, and so the multi-tensor form; with them
# the kernel's weights are bit for bit the PyTorch form's.
linf_step = njit(_linf_step, fastmath={"contract"})
