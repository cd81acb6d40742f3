r"""Stopping rules: when a run stops, as an object the run loop asks at every check.

One concern: the decision taken between two blocks of iterations. The run loop
(:meth:`~torchfw.optimizers.ConstrainedOptimizer.minimize`) reads the value and the Frank-Wolfe
gap at each check, records them, and asks its rule; the rule answers a
:class:`~torchfw.Status` to stop with, or ``None`` to go on. The default rule is the optimizer's
own parameters (``tol``, ``rtol``, ``max_iter``, ``time_limit``, ``callback``); other runs pass
their own rule instead of patching the optimizer -- the sharded run
(:func:`torchfw.distributed.minimize`) one whose time limit and callback are agreed on by all
ranks, so that no rank stops alone; a batch of problems
(:func:`~torchfw.optimizers.batched.minimize_batched`) :class:`BatchedStop`, which decides per
problem and masks the problems that stopped; block-coordinate descent
(:meth:`~torchfw.optimizers.bcd.BlockCoordinateDescent.minimize`) :class:`FirstGapStop`, asked
at its epoch-level checks.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING

import torch
from torch import Tensor

from ..result import IterationInfo, Status

if TYPE_CHECKING:
    from typing import Self

__all__ = ["StoppingRule", "BatchedStop", "FirstGapStop"]


class StoppingRule:
    r"""Stop on the gap, the iteration budget, the clock or a callback, in that order.

    Parameters
    ----------
    tol, rtol : float
        Stop with ``CONVERGED`` when :math:`g \le \max(\text{tol}, \text{rtol}\,|f|)` and the
        engine's gap certifies the whole problem (``engine.certifies_gap``).
    max_iter : int
        Stop with ``MAX_ITER`` at this iteration (the run loop also sizes its last block by it).
    time_limit : float, optional
        Stop with ``TIME_LIMIT`` once this many seconds have passed.
    callback : callable, optional
        ``callback(info: IterationInfo) -> bool | None``; ``True`` (or raising
        ``StopIteration``) stops with ``CALLBACK``.
    """

    def __init__(self, *, tol: float, rtol: float, max_iter: int,
                 time_limit: float | None = None, callback: Callable | None = None):
        self.tol = tol
        self.rtol = rtol
        self.max_iter = max_iter
        self.time_limit = time_limit
        self.callback = callback

    @classmethod
    def of(cls, optimizer) -> Self:
        """The rule an optimizer's parameters state."""
        return cls(tol=optimizer.tol, rtol=optimizer.rtol, max_iter=optimizer.max_iter,
                   time_limit=optimizer.time_limit, callback=optimizer.callback)

    def measure(self, eng) -> tuple[float, float]:
        """The value and the Frank-Wolfe gap at a check, as this rule decides on them."""
        return float(eng.value()), float(eng.gap())

    def finite(self, value, gap) -> bool:
        """Whether the run may go on from this check (else it returns to the last one)."""
        return math.isfinite(value) and math.isfinite(gap)

    def target(self, value: float) -> float:
        """The gap at which the run has converged."""
        return max(self.tol, self.rtol * abs(value))

    def records(self, k: int) -> bool:
        """Whether the check at iteration ``k`` enters the history (and is the snapshot a
        non-finite check returns to): every check, unless a rule that decides at every
        iteration records only some (the sampled storage's, every ``check_every``)."""
        return True

    def __call__(self, eng, k: int, value: float, gap: float, elapsed: float,
                 steps: dict) -> Status | None:
        if eng.certifies_gap and gap <= self.target(value):
            return Status.CONVERGED
        if k >= self.max_iter:
            return Status.MAX_ITER
        return self.user_stop(eng, k, value, gap, elapsed, steps)

    def user_stop(self, eng, k, value, gap, elapsed, steps) -> Status | None:
        """The clock and the callback (what a sharded run agrees on across ranks)."""
        if self.time_limit is not None and elapsed >= self.time_limit:
            return Status.TIME_LIMIT
        if self.callback is not None and self.call_back(eng, k, value, gap, elapsed, steps):
            return Status.CALLBACK
        return None

    def call_back(self, eng, k, value, gap, elapsed, steps) -> bool:
        """Whether the callback asks to stop (``True`` or ``StopIteration``)."""
        if self.callback is None:
            return False
        info = IterationInfo(iteration=k, value=value, gap=gap, elapsed=elapsed, steps=steps,
                             x=eng.point())
        try:
            return bool(self.callback(info))
        except StopIteration:
            return True


class BatchedStop(StoppingRule):
    r"""Per-problem stopping of ``B`` problems solved in lockstep (the batched storage).

    Problem :math:`b` stops when :math:`g_b \le \max(\text{tol}, \text{rtol}\,|f_b|)`
    (``CONVERGED``) or :math:`k_b \ge` ``max_iter``; from then on the engine gives it the
    identity move (``engine.active``, which this rule writes at every check). The run stops when
    every problem has, with ``CONVERGED`` if all converged and ``MAX_ITER`` otherwise. Values
    and gaps stay ``(B,)`` tensors on the device: one host read per check (whether all stopped).
    A problem whose value is not finite is not restored (there is no per-problem snapshot): it
    runs on to its iteration budget and reports ``converged = False``.
    """

    def __init__(self, *, tol: float, rtol: float, max_iter: int):
        super().__init__(tol=tol, rtol=rtol, max_iter=max_iter)

    def measure(self, eng) -> tuple[Tensor, Tensor]:  # type: ignore[override]
        return eng.value(), eng.gap()

    def finite(self, value, gap) -> bool:
        return True

    def target(self, value: Tensor) -> Tensor:  # type: ignore[override]
        return torch.clamp(self.rtol * value.abs(), min=self.tol)

    def converged(self, value: Tensor, gap: Tensor) -> Tensor:
        """Which problems have converged, shape ``(B,)``."""
        return gap <= self.target(value)

    def __call__(self, eng, k, value, gap, elapsed, steps) -> Status | None:
        converged = self.converged(value, gap)
        done = converged | (eng.k >= self.max_iter)
        eng.active.copy_(~done)
        if not bool(done.all()):
            return None
        return Status.CONVERGED if bool(converged.all()) else Status.MAX_ITER


class FirstGapStop(StoppingRule):
    r"""Stopping of block-coordinate descent, asked at its checks between epochs.

    The gap target is relative to the *first* gap measured: :math:`g \le \max(\text{tol},
    \text{rtol}\, g_1)` (``CONVERGED``), fixed at the first check and handed to the problem
    (``problem.set_gap_target``, for its shrinking); then the clock and the callback
    (:meth:`StoppingRule.user_stop`); then the epoch budget (``MAX_ITER`` at ``max_iter``,
    after the callback has seen the last epoch). A non-finite check stops the run
    (:meth:`StoppingRule.finite`; the caller returns ``NONFINITE``).
    """

    def __init__(self, *, tol: float, rtol: float, max_iter: int,
                 time_limit: float | None = None, callback: Callable | None = None):
        super().__init__(tol=tol, rtol=rtol, max_iter=max_iter, time_limit=time_limit,
                         callback=callback)
        self.first_gap: float | None = None
        self.gap_target = math.inf

    def target(self, value: float) -> float:
        r"""The gap target: :math:`\max(\text{tol}, \text{rtol}\, g_1)` once the first gap
        is known, else infinite."""
        return self.gap_target

    def __call__(self, problem, k: int, value: float, gap: float, elapsed: float,
                 steps: dict) -> Status | None:
        if self.first_gap is None:
            self.first_gap = gap
            self.gap_target = max(self.tol, self.rtol * gap)
            problem.set_gap_target(self.gap_target)
        if gap <= self.gap_target:
            return Status.CONVERGED
        status = self.user_stop(problem, k, value, gap, elapsed, steps)
        if status is not None:
            return status
        return Status.MAX_ITER if k >= self.max_iter else None
