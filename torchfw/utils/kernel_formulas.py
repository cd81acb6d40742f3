r"""The one table of kernel formulas: each kernel's value from an inner product and squared norms.

One concern: the definition of :math:`k(a, b)` for the kernels of the package, written as a
function of :math:`\langle a, b\rangle`, :math:`\|a\|^2` and :math:`\|b\|^2`
as an argument :math:`t` and an outer function :math:`k = g(t)`:

* ``linear`` (code 0): :math:`t = \langle a, b\rangle`, :math:`g(t) = t`;
* ``rbf`` (code 1): :math:`t = -\gamma \max(\|a\|^2 + \|b\|^2 - 2\langle a, b\rangle, 0)`,
  :math:`g(t) = e^t`;
* ``poly`` (code 2): :math:`t = \gamma \langle a, b\rangle + c_0`, :math:`g(t) = t^d`;
* ``sigmoid`` (code 3): :math:`t = \gamma \langle a, b\rangle + c_0`, :math:`g(t) = \tanh t`

(the clamp at 0: rounding can make the squared distance slightly negative).

Written once here, in two forms, and every other implementation is either one of them or
checked against them on random inputs by ``tests/test_kernel_formulas.py``:

* :func:`value` (from :func:`argument` and :func:`outer`): scalar float64 Python, evaluated by
  the sharded operator of :mod:`torchfw.distributed` on every rank (identical on all of them);
* :func:`from_dots`: the same formulas on tensors, broadcast elementwise, used by
  :meth:`torchfw.svm.kernels.Kernel.from_dots` and :class:`torchfw.heads.KernelSVMHead` (it is
  TorchScript-compatible, so a scripted head compiles it).

The compiled column kernels of :mod:`torchfw.svm._kernel_cpu` are a declared second implementation:
fused loops (a vectorized exponential over the column, a float32 exponential of their own) that
use the codes of this table and are tested against :func:`value`.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

__all__ = ["LINEAR", "RBF", "POLY", "SIGMOID", "CODES", "argument", "outer", "value",
           "from_dots"]

LINEAR, RBF, POLY, SIGMOID = 0, 1, 2, 3
#: Kernel name -> code (the codes the compiled kernels and the heads' buffers use).
CODES = {"linear": LINEAR, "rbf": RBF, "poly": POLY, "sigmoid": SIGMOID}


def argument(code, dot, sq_a, sq_b, gamma, coef0):
    """The argument :math:`t` of the kernel's outer function (scalars)."""
    if code == RBF:
        d2 = sq_a + sq_b - 2.0 * dot
        return -gamma * (d2 if d2 > 0.0 else 0.0)
    if code == LINEAR:
        return dot
    return gamma * dot + coef0


def outer(code, t, degree):
    """The outer function :math:`g(t)` (scalars)."""
    if code == RBF:
        return math.exp(t)
    if code == POLY:
        return t ** degree
    if code == SIGMOID:
        return math.tanh(t)
    return t


def value(code, dot, sq_a, sq_b, gamma, coef0, degree):
    """:math:`k(a, b)` from ``dot``, ``sq_a``, ``sq_b`` (scalars, float64 arithmetic)."""
    return outer(code, argument(code, dot, sq_a, sq_b, gamma, coef0), degree)


def from_dots(code: int, dots: Tensor, sq_a: Tensor, sq_b: Tensor, gamma: float, coef0: float,
              degree: int) -> Tensor:
    """:func:`value` on tensors, broadcast elementwise (``sq_a``/``sq_b`` read by RBF only).

    For a matrix ``dots[i, j] = <a_i, b_j>`` pass ``sq_a[:, None]`` and ``sq_b[None, :]``. The
    linear kernel returns ``dots`` itself (no copy).
    """
    # Literal codes (RBF, POLY, SIGMOID): TorchScript does not read module globals.
    if code == 1:
        d2 = torch.clamp(sq_a + sq_b - 2.0 * dots, min=0.0)
        return torch.exp(-gamma * d2)
    if code == 2:
        return torch.pow(gamma * dots + coef0, degree)
    if code == 3:
        return torch.tanh(gamma * dots + coef0)
    return dots

