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

import numpy as np
import torch
from torch import Tensor

from ..utils.scalars import HOST, Scalars
from . import _kernels as K
from ._moves import Coefficients

__all__ = ["EngineState", "StorageState", "choose"]


def choose(ops: Scalars, cond, if_true: Callable[[], Coefficients],
           if_false: Callable[[], Coefficients]) -> Coefficients:
    """Coefficients of one of two moves; on the host only the chosen one is evaluated."""
    if not ops.on_device:
        return if_true() if cond else if_false()
    return if_true().where(cond, if_false(), ops)


class EngineState:
    """Shared bookkeeping: iteration counter, step counters, snapshot/restore."""

    ops: Scalars = HOST
    atomic: bool = True
    #: Whether :meth:`gap` bounds the suboptimality of the whole problem (stopping test).
    certifies_gap: bool = True
    #: Iteration counter: a host int, or a (1,) int64 tensor written in place on device.
    k: Any
    # The selection and reductions a storage keeps (set by ``_set``: Python numbers with host
    # scalars, (1,) tensors written in place with device scalars); PARTAN's W, p_prev, t_prev.
    i_min: Any
    s_min: Any
    j_max: Any
    s_max: Any
    i_fw: Any
    s_fw: Any
    p: Any
    t: Any
    W: Any
    p_prev: Any
    t_prev: Any

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

    def set_scalars(self, **values) -> None:
        """Store scalars (:meth:`_set`): what the engine's moves write (PARTAN's)."""
        self._set(**values)

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


class StorageState(EngineState):
    """What storages share besides the bookkeeping: the constructor's declarations
    (:meth:`declare`), the start from vectors (:meth:`_start`: previous iterate, NumPy views,
    selection), and PARTAN's low-precision rescaling (:meth:`_renormalize`).

    No member of the storage protocol (:mod:`torchfw.optimizers._storage`) is defined here:
    each storage answers them itself, and the engine refuses one that does not.
    """

    N: int
    dtype: Any
    keep_previous: bool
    use_numba: bool
    constant: Any
    ct: Any
    w: Any
    s: Any
    diag: Any
    #: The previous iterate and its scores (only with ``keep_previous``).
    w_prev: Any
    s_prev: Any
    #: Each storage's own selection (the protocol's ``reselect``; declared, not defined).
    reselect: Callable[[], None]

    def declare(self, *, ops: Scalars, N: int, dtype, device, keep_previous: bool = False,
                pair_columns: bool = False, sample: Callable | None = None,
                refresh_every: int | None = None, constant=0.0, radius=1.0,
                use_numba: bool = False, identity_atoms: bool = True, ct=None) -> None:
        """The shared constructor: what every storage of this engine states about itself.

        Every storage calls it instead of setting these attributes one by one; then it builds
        its vectors (``w``, ``s``, ``diag``, ...) and selection.

        Parameters
        ----------
        ops : Scalars
            ``HOST`` or ``DEVICE`` scalars.
        N : int
            Number of atoms (over all ranks for a sharded storage).
        dtype, device
            Of the engine's own state (float64 on the host for every storage but ``device``).
        keep_previous, pair_columns, sample, refresh_every
            As in the class parameters.
        constant : float
            The objective's constant (added to every reported value).
        radius : float or Tensor
            Radius of the set (1 for the SVM dual).
        use_numba : bool
            Whether the compiled CPU kernels and NumPy views serve the host scalars.
        identity_atoms : bool
            Vertex gradients are the columns of the operator (simplex of radius 1, no ``c``).
        ct : Tensor or None
            Linear term over atoms.
        """
        self.ops = ops
        self.N = N
        self.dtype = dtype
        self.keep_previous = bool(keep_previous)
        self.pair_columns = bool(pair_columns)
        self.sample = sample
        self.refresh_every = refresh_every
        # PARTAN on weights below float64 rescales them after each move (see _renormalize).
        self._renormalizes = bool(keep_previous) and dtype != torch.float64
        self.constant = constant
        self._radius = radius
        self.use_numba = bool(use_numba)
        self._identity_atoms = bool(identity_atoms)
        self.ct = ct
        # Vertex gradients by atom, in the storage's own kind (NumPy slots when streaming).
        self._columns: dict[Any, Any] = {}
        self._init_counters(device)

    def _start(self, w: Tensor, s: Tensor, diag: Tensor) -> None:
        """Set the start state from its vectors (the engine owns ``w`` and ``s`` from here)."""
        self.diag = diag
        self.w = w
        self.s = s
        if self.keep_previous:
            self.w_prev = self.w.clone()
            self.s_prev = self.s.clone()
        else:
            self.w_prev = self.s_prev = None
        self._numpy_views()
        self._refresh_scalars()

    def _note_support(self, i: int) -> None:
        """Record that atom ``i`` may carry weight (PARTAN's bounds read only such atoms)."""
        if not self._in_support[i]:
            self._in_support[i] = True
            self._support[self._n_support] = i
            self._n_support += 1

    def _numpy_views(self) -> None:
        if not self.use_numba:
            return
        if self.keep_previous:
            # Atoms that ever had weight, in order of arrival: a superset of the supports of
            # w and w_prev (moves give weight only to their FW atom, and w_prev was once w).
            # (Sized by the local vector: a sharded storage holds a slice of the N atoms.)
            size = self.w.shape[0]
            nonzero = np.flatnonzero(K.as_numpy(self.w))
            self._support = np.empty(size, dtype=np.int64)
            self._support[:nonzero.size] = nonzero
            self._n_support = nonzero.size
            self._in_support = np.zeros(size, dtype=np.bool_)
            self._in_support[nonzero] = True
        self._w_np = K.as_numpy(self.w)
        self._s_np = K.as_numpy(self.s)
        # The previous iterate exists exactly with keep_previous.
        self._wp_np = K.as_numpy(self.w_prev) if self.w_prev is not None else self._w_np
        self._sp_np = K.as_numpy(self.s_prev) if self.s_prev is not None else self._s_np
        self._ct_np = K.as_numpy(self.ct) if self.ct is not None else self._s_np
        self._diag_np = K.as_numpy(self.diag)

    def _refresh_scalars(self) -> None:
        """Recompute selections and reductions from the vectors (no update)."""
        self.reselect()
        if self.keep_previous:
            # W = w' Q~ w_prev; at the start w_prev == w.
            self._set(W=self.p - self.t, p_prev=self.p, t_prev=self.t)

    def _renormalize(self) -> None:
        r"""Rescale the weights to sum to one, and the scores with them (in place).

        PARTAN's extrapolation :math:`(1+\mu)\tilde w - \mu w_{prev}` multiplies the rounding of
        low-precision weights by :math:`1 + 2\mu`: in float32 the iterate drifted off the set by
        up to 4e-5 (an L1 ball of radius 2, where the other variants stay within 1e-6). Exact
        arithmetic keeps :math:`\sum w = 1`, so the rescaling only removes that drift;
        :math:`s = \tilde Q w + \tilde c` is rescaled to match, and the reductions are refreshed
        by the next selection. Float64 runs skip it (their drift is at rounding level).
        """
        total = self.w.sum(-1, keepdim=True)
        self.w.div_(total)
        if self.ct is None:
            self.s.div_(total)
        else:
            self.s.sub_(self.ct).div_(total).add_(self.ct)


#: The former private name (engines subclass it).
_Engine = EngineState
