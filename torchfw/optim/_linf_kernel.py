r"""The eager CPU step of an L-infinity ball as one compiled kernel: one pass over the memory.

In PyTorch operations the step of :mod:`torchfw.optim._batched` walks over each tensor six
times: the signs :math:`s = \mathrm{sign}(d)` (read, write), the two norms that tell whether
the common form applies (:math:`\|d\|_2` and :math:`\|s\|_2`), the vertex :math:`v = -r s`
(read, write) and the move :math:`\theta \leftarrow \theta + \gamma (v - \theta)` (two reads,
a write). Here one pass reads each :math:`d_i` and moves :math:`\theta_i` with the vertex
computed on the fly; no temporary is written.

The rules are per coordinate, as the L-infinity ball is a product of intervals: a coordinate
whose :math:`d_i` is 0 keeps its value, one whose :math:`d_i` is not finite (inf or NaN) turns
NaN, and the others move by :math:`\mathrm{lerp}(\theta_i, v_i, \gamma)`,
:math:`v_i = -r\,\mathrm{sign}(d_i)`, taken as ``torch.lerp`` takes it
(:math:`\theta + \gamma (v - \theta)` for :math:`\gamma < 1/2`, else
:math:`v - (v - \theta)(1 - \gamma)`, so that :math:`\gamma = 1` lands on the vertex exactly;
each a fused multiply-add) in the tensor's own precision. Without numba, or while the cold
start defers the compiled kernels (:func:`torchfw.utils.jit.compiled_kernels`), the PyTorch
form runs.

With momentum, :func:`linf_momentum_step` takes the average
:math:`d \leftarrow \mathrm{lerp}(d, g, 1 - \mu)` in the same pass, rounded as
``torch._foreach_lerp_`` rounds it: per entry three reads (gradient, buffer, weight) and two
writes (buffer, weight), the least any implementation of the step touches; the average and
the move one after the other read the buffer twice and write it once more. (A compiled step
gets the same one pass from inductor, :mod:`torchfw.optim._traced`.)

References
----------
S. Pokutta, C. Spiegel, M. Zimmer. "Deep Neural Network Training with Frank-Wolfe."
arXiv:2010.07243, 2020.
"""

from __future__ import annotations

import numpy as np

from ..utils.jit import njit

__all__ = ["linf_step", "step_constants", "linf_momentum_step", "momentum_constants"]


def step_constants(neg_radius: float, gamma: float, dtype) -> np.ndarray:
    """``[-r, gamma, 1 - gamma]`` in the parameter's precision, as ``torch.lerp`` rounds them
    (the weight rounded first, ``1 - weight`` computed in that precision)."""
    weight = np.asarray(gamma, dtype=dtype)
    return np.array([neg_radius, weight, np.asarray(1, dtype=dtype) - weight], dtype=dtype)


def _linf_step(p, d, consts):  # pragma: no cover - compiled by numba
    n = d.shape[0]
    neg_r = consts[0]
    weight = consts[1]
    rest = consts[2]
    # selects rather than branches, so that the loop vectorizes; x - x is NaN exactly when x
    # is inf or NaN, and such a coordinate turns NaN
    if abs(weight) < 0.5:
        for i in range(n):
            x = d[i]
            q = p[i]
            v = neg_r if x > 0 else -neg_r
            new = q + weight * (v - q)
            new = q if x == 0 else new
            p[i] = new if x - x == 0 else np.nan
    else:
        for i in range(n):
            x = d[i]
            q = p[i]
            v = neg_r if x > 0 else -neg_r
            new = v - (v - q) * rest
            new = q if x == 0 else new
            p[i] = new if x - x == 0 else np.nan


def momentum_constants(neg_radius: float, gamma: float, weight: float, dtype) -> np.ndarray:
    """``[-r, gamma, 1 - gamma, w, 1 - w]`` in the parameter's precision: the move's constants
    (:func:`step_constants`) and the momentum average's, ``w = 1 - mu``, rounded as
    ``torch.lerp`` rounds a weight."""
    avg = np.asarray(weight, dtype=dtype)
    return np.concatenate([step_constants(neg_radius, gamma, dtype),
                           np.array([avg, np.asarray(1, dtype=dtype) - avg], dtype=dtype)])


def _linf_momentum_step(p, d, g, consts):  # pragma: no cover - compiled by numba
    # d <- lerp(d, g, w), then the move of _linf_step with the new d, in one pass: each entry
    # of the gradient, the buffer and the weight is read once and the last two written once
    # (the two steps one after the other read the buffer twice and write it once more)
    n = d.shape[0]
    neg_r = consts[0]
    weight = consts[1]
    rest = consts[2]
    avg = consts[3]
    avg_rest = consts[4]
    small_avg = abs(avg) < 0.5
    small = abs(weight) < 0.5
    for i in range(n):
        b = d[i]
        x = g[i]
        # torch.lerp(b, x, w): b + w (x - b) for |w| < 1/2, else x - (x - b)(1 - w)
        x = b + avg * (x - b) if small_avg else x - (x - b) * avg_rest
        d[i] = x
        q = p[i]
        v = neg_r if x > 0 else -neg_r
        new = q + weight * (v - q) if small else v - (v - q) * rest
        new = q if x == 0 else new
        p[i] = new if x - x == 0 else np.nan


# Fused multiply-adds and nothing else of fast math: torch.lerp's CPU kernel computes
# theta + gamma (v - theta) as one fused multiply-add, and so the multi-tensor form; with them
# the kernel's weights are bit for bit the PyTorch form's.
linf_step = njit(_linf_step, fastmath={"contract"})
linf_momentum_step = njit(_linf_momentum_step, fastmath={"contract"})
