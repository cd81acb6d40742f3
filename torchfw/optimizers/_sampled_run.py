"""The run of the sampled storage: seed 002's stopping rule with its safeguard, on the one loop.

:func:`minimize_sampled` drives a variant's unchanged ``_step`` over the engine holding a
:class:`~torchfw.optimizers._sampled.SampledStorage` through the run loop every storage uses
(:meth:`~torchfw.optimizers.ConstrainedOptimizer._loop`), deciding at every iteration with
:class:`SampledStop` (see :mod:`torchfw.optimizers._sampled` for the algorithm, the recursions
and our reading of "the sampling is repeated twice").
"""

from __future__ import annotations

import time
from typing import cast

import numpy as np
from torch import Tensor

from ..linesearch import ExactLineSearch
from ..result import Result, Status
from ._kernel_rows import KernelRows
from ._engine import QuadraticEngine
from ._sampled import DEFAULT_SAMPLE_SIZE, SampledStorage
from ._stopping import StoppingRule
from .away import AwayStepFrankWolfe, PairwiseFrankWolfe
from .frank_wolfe import FrankWolfe
from .partan import PartanFrankWolfe
from .swap import SwapFrankWolfe

__all__ = ["minimize_sampled", "SampledStop"]


_VARIANTS = (FrankWolfe, AwayStepFrankWolfe, PairwiseFrankWolfe, SwapFrankWolfe,
             PartanFrankWolfe)


class SampledStop(StoppingRule):
    r"""Seed 002's stopping rule on the sampled gap, asked at every iteration.

    Stops with ``CONVERGED`` when the sampled gap :math:`\Delta_{\mathcal S} \le
    \max(\text{tol}, \text{rtol}\,|f|)` and ``confirmations`` further independent samples at
    the same iterate pass the same test (the safeguard; each counted as a
    ``confirmation_sample`` step). A sample that fails leaves its FW vertex to the next move. A
    complete sample (every example) is its own certificate and is not confirmed. Then the
    iteration budget and the clock, as :class:`StoppingRule`. The run records a check in its
    history every ``record_every`` iterations.
    """

    def __init__(self, *, tol: float, rtol: float, max_iter: int,
                 time_limit: float | None = None, confirmations: int = 2,
                 record_every: int = 50):
        super().__init__(tol=tol, rtol=rtol, max_iter=max_iter, time_limit=time_limit)
        self.confirmations = int(confirmations)
        self.record_every = int(record_every)

    def records(self, k: int) -> bool:
        return k % self.record_every == 0

    def confirmed(self, eng: QuadraticEngine, threshold: float) -> bool:
        """Whether ``confirmations`` fresh samples pass too (stops at the first that fails)."""
        slots = cast(SampledStorage, eng.storage)
        if slots.complete_sample:
            return True
        for _ in range(self.confirmations):
            slots.resample()
            eng.count("confirmation_sample")
            if eng.gap() > threshold:
                return False
        return True

    def __call__(self, eng, k, value, gap, elapsed, steps) -> Status | None:
        threshold = self.target(value)
        if gap <= threshold and self.confirmed(eng, threshold):
            return Status.CONVERGED
        if k >= self.max_iter:
            return Status.MAX_ITER
        return self.user_stop(eng, k, value, gap, elapsed, steps)


def minimize_sampled(optimizer, storage: KernelRows, support: Tensor, weights: Tensor, *,
                     sample_size: int = DEFAULT_SAMPLE_SIZE, tol: float = 1e-6,
                     rtol: float = 0.0, max_iter: int = 10_000, time_limit: float | None = None,
                     random_state=None, cache_size: float = 200.0, refresh_every: int = 500,
                     confirmations: int = 2, certify: bool | None = None,
                     certify_budget: float = 3e8, check_every: int = 50) -> Result:
    r"""Run ``optimizer``'s variant (its ``_step``) on the sampled storage.

    Parameters
    ----------
    optimizer : ConstrainedOptimizer
        FrankWolfe, AwayStepFrankWolfe, PairwiseFrankWolfe, SwapFrankWolfe or PartanFrankWolfe
        with ExactLineSearch (its ``tol``/``max_iter`` are not used: pass them here).
    storage : KernelRows
    support, weights : Tensor
        Initial point: examples and their weights (normalized to the simplex).
    sample_size : int
        :math:`|\mathcal S|` (seed 002: 194); ``>= m`` samples every example (deterministic).
    tol, rtol : float
        Stop when the sampled gap is at most ``max(tol, rtol * f)`` in ``1 + confirmations``
        independent samples in a row (see :class:`SampledStop`).
    max_iter, time_limit
        Budgets (the clock is read every iteration and counts from this call, engine set-up
        included).
    cache_size : float
        Budget in MB of the slots' kernel block.
    refresh_every : int
        Iterations between exact re-synchronizations of :math:`g_I, p, W`.
    confirmations : int
        Further samples that must confirm a passing sampled gap (seed 002's safeguard: 2).
    certify : bool, optional
        Compute the exact gap of the returned point with one full pass. Default: when
        ``m * |I| <= certify_budget`` kernel values and no ``time_limit`` is set.
    check_every : int
        Iterations between history records (the stopping test runs at every iteration).

    Returns
    -------
    Result
        ``gap`` is the exact gap when certified, else the last sampled gap;
        ``info["sampled_gap"]``, ``info["exact_gap"]`` (or None), ``info["samples"]``.
    """
    if type(optimizer) not in _VARIANTS:
        raise ValueError(f"the sampled storage runs FrankWolfe, AwayStepFrankWolfe, "
                         f"PairwiseFrankWolfe, SwapFrankWolfe and PartanFrankWolfe, not "
                         f"{type(optimizer).__name__}")
    if not isinstance(optimizer.line_search, (ExactLineSearch, type(None))):
        raise ValueError("the sampled storage needs ExactLineSearch (closed-form steps)")
    if sample_size < 1:
        raise ValueError(f"sample_size must be >= 1, got {sample_size}")
    if check_every < 1:
        raise ValueError(f"check_every must be >= 1, got {check_every}")
    rng = np.random.default_rng(random_state)
    start = time.perf_counter()
    slots = SampledStorage(storage, support, weights, sample_size=sample_size, rng=rng,
                           keep_previous=optimizer.keeps_previous,
                           cache_bytes=cache_size * 2**20, refresh_every=refresh_every)
    eng = QuadraticEngine(slots)
    ls = optimizer.line_search or ExactLineSearch()
    ls.reset()
    optimizer._ls = ls
    # The loop's clock starts now: the set-up already spent counts against the time limit,
    # and is added to the history's times (seconds since this call, as before the loop).
    set_up = time.perf_counter() - start
    rule = SampledStop(tol=tol, rtol=rtol, max_iter=max_iter,
                       time_limit=None if time_limit is None else time_limit - set_up,
                       confirmations=confirmations, record_every=check_every)
    status, history = optimizer._loop(eng, "host", rule, check_every=1)
    history.time = [t + set_up for t in history.time]
    eng.refresh()
    sampled_gap = eng.gap()
    n_active = eng.n_active()
    if certify is None:  # a clock is a promise to return in time: no pass after it
        certify = storage.m * max(1, slots.n) <= certify_budget and time_limit is None
    exact = slots.exact_gap()[0] if certify else None
    elapsed = time.perf_counter() - start
    history.append(eng.k, eng.value(), sampled_gap, elapsed, eng.step_counts())
    w = eng.weights()
    return Result(x=w, value=eng.value(), gap=exact if exact is not None else sampled_gap,
                  n_iter=eng.k, status=status, history=history, weights=w,
                  best_gap=min(history.gap + [sampled_gap]),
                  info={"engine": "QuadraticEngine", "storage": "SampledStorage",
                        "execution": "sampled",
                        "sample_size": sample_size, "sampled_gap": sampled_gap,
                        "exact_gap": exact, "samples": slots.n_samples_drawn,
                        "n_active": n_active, "slots": slots.n,
                        "block_cached": slots.cache is not None,
                        "time": elapsed, "line_search": repr(ls)})
