"""Bookkeeping every engine shares: iteration and step counters, device state for capture.

One concern: the state of a run that is not the numbers of the problem (those live in a
storage, :mod:`torchfw.optimizers._storage`): the iteration counter, named step counters, and
the flat list of device tensors that ``torch.compile`` and CUDA graphs bind to fixed buffers.
Counters and scalars are host numbers with host scalars and tensors that are only ever written
in place with device scalars, so a captured block of iterations replays correctly.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor

from ..utils.scalars import HOST, Scalars
from ._moves import Coefficients

__all__ = ["EngineState"]


class EngineState:
    """Shared bookkeeping: iteration counter, step counters, snapshot/restore."""

    ops: Scalars = HOST
    atomic: bool = True
    #: Whether :meth:`gap` bounds the suboptimality of the whole problem (stopping test).
    certifies_gap: bool = True
    #: Iteration counter: a host int, or a (1,) int64 tensor written in place on device.
    k: Any

    def _init_counters(self, device) -> None:
        self.k = 0 if not self.ops.on_device else torch.zeros(1, dtype=torch.int64,
                                                               device=device)
        self._counts: dict[str, Any] = {}
        self._device = device

    def count(self, name: str, cond=True) -> None:
        """Add one to counter ``name`` where ``cond`` holds (sync-free on device)."""
        if self.ops.on_device:
            if name not in self._counts:
                self._counts[name] = torch.zeros(1, dtype=torch.int64, device=self._device)
            if isinstance(cond, Tensor):
                self._counts[name].add_(cond.to(torch.int64))
            elif cond:
                # A Python constant adds on the device: no host-to-device copy, which a CUDA
                # graph capture of an eager (uncompiled) step would refuse.
                self._counts[name].add_(1)
        elif cond:
            self._counts[name] = self._counts.get(name, 0) + 1

    def step_counts(self) -> dict[str, int]:
        return {k: int(v) for k, v in self._counts.items()}

    def average(self):
        """``(point, value)`` of the averaged iterates, or None (only streaming runs average)."""
        return None

    def tick(self) -> None:
        if self.ops.on_device:
            self.k.add_(1)
        else:
            self.k += 1

    def iteration(self) -> int:
        return int(self.k)

    def _set(self, **values) -> None:
        """Store scalars; on device into fixed tensors (CUDA graphs replay fixed addresses)."""
        if not self.ops.on_device:
            self.__dict__.update(values)
            return
        for name, value in values.items():
            current = getattr(self, name, None)
            if self.ops.on_device and isinstance(current, Tensor):
                current.copy_(value)
            elif self.ops.on_device and isinstance(value, Tensor):
                # Shape (1,), not 0-d: torch.compile treats 0-d CPU tensors as Python numbers
                # and silently drops in-place writes to them.
                setattr(self, name, value.reshape(1).clone())
            else:
                setattr(self, name, value)

    #: Tensor attributes that make up the device-side state (see :meth:`device_state`).
    _STATE: tuple[str, ...] = ()

    def device_state(self) -> list[Tensor]:
        """The device state as a flat list of tensors (attributes, then step counters)."""
        names = [n for n in self._STATE if isinstance(getattr(self, n, None), Tensor)]
        self._state_names = names + [f"count:{k}" for k in sorted(self._counts)]
        return [self._state_get(n) for n in self._state_names]

    def _state_get(self, name: str) -> Tensor:
        return self._counts[name[6:]] if name.startswith("count:") else getattr(self, name)

    def bind_state(self, tensors) -> None:
        """Make the engine use ``tensors`` (same order as :meth:`device_state`) as its state."""
        for name, tensor in zip(self._state_names, tensors, strict=True):
            if name.startswith("count:"):
                self._counts[name[6:]] = tensor
            else:
                setattr(self, name, tensor)

    def choose(self, cond, if_true: Callable[[], Coefficients],
               if_false: Callable[[], Coefficients]) -> Coefficients:
        """Coefficients of one of two moves; on the host only the chosen one is evaluated."""
        if not self.ops.on_device:
            return if_true() if cond else if_false()
        return if_true().where(cond, if_false(), self.ops)


#: The former private name (engines subclass it).
_Engine = EngineState
