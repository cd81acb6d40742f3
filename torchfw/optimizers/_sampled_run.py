"""The run loop of the sampled storage: seed 002's stopping rule with its safeguard.

:func:`minimize_sampled` drives a variant's unchanged ``_step`` over
:class:`~torchfw.optimizers._sampled.SampledEngine` (see that module for the algorithm, the
recursions and our reading of "the sampling is repeated twice").
"""

from __future__ import annotations

import math
import time

import numpy as np
from torch import Tensor

from ..linesearch import ExactLineSearch
from ..result import History, Result, Status
from ._kernel_rows import KernelRows
from ._sampled import DEFAULT_SAMPLE_SIZE, SampledEngine
from .away import AwayStepFrankWolfe, PairwiseFrankWolfe
from .frank_wolfe import FrankWolfe
from .partan import PartanFrankWolfe
from .swap import SwapFrankWolfe

__all__ = ["minimize_sampled"]


_VARIANTS = (FrankWolfe, AwayStepFrankWolfe, PairwiseFrankWolfe, SwapFrankWolfe,
             PartanFrankWolfe)


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
        :math:`|\mathcal S|` (seed 002: 194).
    tol, rtol : float
        Stop when the sampled gap is at most ``max(tol, rtol * f)`` in ``1 + confirmations``
        independent samples in a row (see the module docstring).
    max_iter, time_limit
        Budgets (the clock is read every iteration).
    cache_size : float
        Budget in MB of the slots' kernel block.
    refresh_every : int
        Iterations between exact re-synchronizations of :math:`g_I, p, W`.
    confirmations : int
        Further samples that must confirm a passing sampled gap (seed 002's safeguard: 2).
    certify : bool, optional
        Compute the exact gap of the returned point with one full pass. Default: when
        ``m * |I| <= certify_budget`` kernel values and no ``time_limit`` is set.

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
    rng = np.random.default_rng(random_state)
    start = time.perf_counter()
    eng = SampledEngine(storage, support, weights, sample_size=sample_size, rng=rng,
                        keep_previous=optimizer.keeps_previous,
                        cache_bytes=cache_size * 2**20, refresh_every=refresh_every)
    ls = optimizer.line_search or ExactLineSearch()
    ls.reset()
    optimizer._ls = ls
    history = History()
    snapshot = eng.snapshot()
    status = None
    while True:
        k = eng.k
        value, gap = eng.value(), eng.gap()
        elapsed = time.perf_counter() - start
        if k % check_every == 0:
            history.append(k, value, gap, elapsed, eng.step_counts())
        if not (math.isfinite(value) and math.isfinite(gap)):
            eng.restore(snapshot)
            status = Status.NONFINITE
            break
        threshold = max(tol, rtol * abs(value))
        if gap <= threshold:
            confirmed = True
            for _ in range(confirmations):
                eng.resample()
                eng.count("confirmation_sample")
                if eng.gap() > threshold:
                    confirmed = False
                    break
            if confirmed:
                status = Status.CONVERGED
                break
        if k >= max_iter:
            status = Status.MAX_ITER
            break
        if time_limit is not None and elapsed >= time_limit:
            status = Status.TIME_LIMIT
            break
        if k % check_every == 0:
            snapshot = eng.snapshot()
        optimizer._step(eng)
    eng.resync()
    sampled_gap = eng.p - eng.s_fw
    n_active = eng.n_active()
    if certify is None:  # a clock is a promise to return in time: no pass after it
        certify = storage.m * max(1, eng.n) <= certify_budget and time_limit is None
    exact = eng.exact_gap()[0] if certify else None
    elapsed = time.perf_counter() - start
    history.append(eng.k, eng.value(), sampled_gap, elapsed, eng.step_counts())
    w = eng.weights()
    return Result(x=w, value=eng.value(), gap=exact if exact is not None else sampled_gap,
                  n_iter=eng.k, status=status, history=history, weights=w,
                  best_gap=min(history.gap + [sampled_gap]),
                  info={"engine": "SampledEngine", "execution": "sampled",
                        "sample_size": sample_size, "sampled_gap": sampled_gap,
                        "exact_gap": exact, "samples": eng.n_samples_drawn,
                        "n_active": n_active, "slots": eng.n, "block_cached": eng.cache is not None,
                        "time": elapsed, "line_search": repr(ls)})
