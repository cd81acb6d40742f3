"""Scalar arithmetic that runs either on the host or on the device, written once.

Solver step rules are written against a :class:`Scalars` namespace. :data:`HOST` works on Python
floats and ints (branch-free ``where`` becomes a conditional expression): on the CPU, reading a
value costs nothing and Python arithmetic is cheaper than launching tiny tensor ops.
:data:`DEVICE` works on 0-d tensors with ``torch.where``/``torch.clamp``: nothing is ever read
back, so a block of iterations runs with no host synchronization and can be captured as a CUDA
graph or fused by ``torch.compile``.
"""

from __future__ import annotations

import math

import torch

__all__ = ["Scalars", "HOST", "DEVICE"]


class Scalars:
    """Interface of the scalar namespaces (see module docstring)."""

    on_device: bool = False

    def where(self, cond, a, b):  # pragma: no cover - abstract
        raise NotImplementedError

    def minimum(self, a, b):  # pragma: no cover - abstract
        raise NotImplementedError

    def maximum(self, a, b):  # pragma: no cover - abstract
        raise NotImplementedError

    def logical_and(self, a, b):  # pragma: no cover - abstract
        raise NotImplementedError

    def logical_or(self, a, b):  # pragma: no cover - abstract
        raise NotImplementedError

    def logical_not(self, a):  # pragma: no cover - abstract
        raise NotImplementedError

    def sqrt(self, a):  # pragma: no cover - abstract
        raise NotImplementedError

    def as_float(self, a):  # pragma: no cover - abstract
        raise NotImplementedError

    def value(self, t):  # pragma: no cover - abstract
        """Read a 0-d tensor on the host, or pass it through on device."""
        raise NotImplementedError

    def clip(self, x, lo, hi):
        return self.minimum(self.maximum(x, lo), hi)


class _Host(Scalars):
    on_device = False

    @staticmethod
    def where(cond, a, b):
        return a if cond else b

    @staticmethod
    def minimum(a, b):
        return a if a < b else b

    @staticmethod
    def maximum(a, b):
        return a if a > b else b

    @staticmethod
    def logical_and(a, b):
        return bool(a) and bool(b)

    @staticmethod
    def logical_or(a, b):
        return bool(a) or bool(b)

    @staticmethod
    def logical_not(a):
        return not a

    @staticmethod
    def sqrt(a):
        return math.sqrt(a)

    @staticmethod
    def as_float(a):
        return float(a)

    @staticmethod
    def value(t):
        """Read a 0-d tensor (or pass a number through)."""
        return t.item() if isinstance(t, torch.Tensor) else t


class _Device(Scalars):
    on_device = True

    @staticmethod
    def where(cond, a, b):
        return torch.where(cond, a, b)

    @staticmethod
    def minimum(a, b):
        if not isinstance(a, torch.Tensor):
            a, b = b, a
        return torch.clamp(a, max=b) if not isinstance(b, torch.Tensor) else torch.minimum(a, b)

    @staticmethod
    def maximum(a, b):
        if not isinstance(a, torch.Tensor):
            a, b = b, a
        return torch.clamp(a, min=b) if not isinstance(b, torch.Tensor) else torch.maximum(a, b)

    @staticmethod
    def logical_and(a, b):
        return torch.logical_and(a, b)

    @staticmethod
    def logical_or(a, b):
        return torch.logical_or(a, b)

    @staticmethod
    def logical_not(a):
        return torch.logical_not(a)

    @staticmethod
    def sqrt(a):
        return torch.sqrt(a)

    @staticmethod
    def as_float(a):
        return a.to(torch.float64) if isinstance(a, torch.Tensor) else float(a)

    @staticmethod
    def value(t):
        return t


HOST = _Host()
DEVICE = _Device()
