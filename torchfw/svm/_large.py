r"""Large-scale :class:`~torchfw.SVC` training on the sampled storage (seed 002 §4.2).

Above :data:`~torchfw.svm._plan.LARGE_M` examples, or whenever ``sample_size`` is set, the binary problems of
``SVC(solver in {"fw", "away", "pairwise", "swap", "swap2", "partan"})`` are solved by the
randomized Frank-Wolfe of :mod:`torchfw.optimizers._sampled`: an iteration costs
:math:`O(|\mathcal S|\,|I|\,d)` kernel work whatever ``m`` is, and the state is ``O(|I|)``.

**Warm start and anytime model.** The run starts from the solution of the problem restricted
to a random, class-stratified subset of the plan's ``warm_subset`` examples
(:data:`~torchfw.svm._plan.WARM_SUBSET`) (the seeds start from a
subset solution too, of ``n_init`` = 20 examples; a larger one costs a fraction of a second and
gives the randomized iterations a sensible active set from the start). Under ``time_limit`` or
``max_iter`` the returned model must stay usable: the iterate and the subset model are both
scored on :data:`VALIDATION` random training examples outside the subset, and the better one is
returned (``result_.info["model"]`` says which; ties go to the iterate). The subset model is
thereby a floor: the returned model is never worse on those examples than an SVC fitted on the
subset.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

import numpy as np
import torch
from torch import Tensor

from ..objectives import Quadratic
from ..result import Status
from ..utils.data import take_rows
from ..utils.threads import one_thread
from ._plan import FitPlan
from ._start import initial_alpha
from .kernels import SVMDualOperator

if TYPE_CHECKING:  # the sampled storage loads with a fit that samples (most never do)
    from ..optimizers._kernel_rows import KernelRows

__all__ = ["fit_binary_sampled"]

#: Held-out training examples scoring the iterate against the subset model.
VALIDATION = 4000


def _subset(y_pm: np.ndarray, size: int, rng) -> np.ndarray:
    """A class-stratified random subset of ``size`` examples (sorted)."""
    m = y_pm.shape[0]
    pos, neg = np.flatnonzero(y_pm > 0), np.flatnonzero(y_pm < 0)
    n_pos = min(len(pos), max(1, round(size * len(pos) / m)))
    n_neg = min(len(neg), size - n_pos)
    return np.sort(np.concatenate([rng.choice(pos, n_pos, replace=False),
                                   rng.choice(neg, n_neg, replace=False)]))


def _scores(storage: KernelRows, support: Tensor, weights: Tensor, rows: Tensor) -> Tensor:
    r"""Unscaled decision values :math:`\sum_j \alpha_j y_j (k(x_j, x) + 1)` on ``rows``."""
    A, sq_a, _, _ = storage.rows(rows)
    B, sq_b, y_b, _ = storage.rows(support)
    u = weights.to(torch.float64) * y_b.to(torch.float64)
    return storage.matvec(A, sq_a, B, sq_b, u) + u.sum()


def fit_binary_sampled(plan: FitPlan, X: Tensor, y_pm: np.ndarray, C_examples, alpha0, k: int):
    """Solve binary problem ``k`` of the fit ``plan`` on the sampled storage; returns
    ``(alpha, Result)``.

    Runs torch on one intra-op thread on the CPU whatever ``m`` is: every operation of the
    run is of size ``|S| x |I|`` (or the 3,000-example warm start), above torch's 32k-value
    grain but far too small to pay for waking the thread pool. Measured on the 2-core machine,
    1,000,000 examples, 100 iterations: 8.3 s on two threads, 0.16 s on one.
    """
    with one_thread(X.device.type == "cpu"):
        return _fit_binary_sampled(plan, X, y_pm, C_examples, alpha0, k)


def _fit_binary_sampled(plan: FitPlan, X: Tensor, y_pm: np.ndarray, C_examples, alpha0,
                        k: int):
    from ..optimizers._kernel_rows import KernelRows
    from ..optimizers._sampled import DEFAULT_SAMPLE_SIZE
    from ..optimizers._sampled_run import minimize_sampled

    start = time.perf_counter()
    m = X.shape[0]
    seed = plan.problem_seed(k)
    rng = np.random.default_rng(seed)
    y_t = torch.from_numpy(y_pm).to(X.device)
    C = C_examples if isinstance(C_examples, float) else C_examples.to(X.device)
    storage = KernelRows(X, y_t, plan.kernel, C, dtype=plan.dtype)
    time_limit = plan.time_limit
    subset = None
    if alpha0 is not None:
        support = torch.nonzero(alpha0 > 0).squeeze(1).to(X.device)
        weights = alpha0.to(X.device)[support]
    else:
        size = min(m, max(int(plan.n_init), int(plan.warm_subset)))
        subset = torch.from_numpy(_subset(y_pm, size, rng)).to(X.device)
        op = SVMDualOperator(take_rows(X, subset), y_t[subset], plan.kernel,
                             C if isinstance(C, float) else C[subset], dtype=plan.dtype,
                             cache_size=plan.cache_size)
        x0 = initial_alpha(op, y_pm[subset.cpu().numpy()], plan.n_init, seed)
        # The subset's solve has the default budget whatever max_iter is: it is the start.
        solver = plan.optimizer(
            max_iter=plan.default_budget(size), random_state=seed,
            time_limit=None if time_limit is None else 0.25 * time_limit)
        sub = solver.minimize(Quadratic(op), x0)
        keep = torch.nonzero(sub.x > 0).squeeze(1)
        support, weights = subset[keep], sub.x[keep]
    sub_support, sub_weights = support.clone(), weights.clone()
    # The iterations get what is left of the budget less a 10% reserve for what follows them
    # (final re-synchronization, scoring both models on VALIDATION examples, extraction),
    # which grows with |I|: 1,000,000 noisy examples, time_limit=60, ~10^4 slots: 5.4 s past
    # the clock without the reserve.
    remaining = None if time_limit is None else \
        max(1e-3, 0.9 * time_limit - (time.perf_counter() - start))
    # The stopping rule is the plan's (an absolute gap where a benchmark replaces it).
    optimizer = plan.optimizer()
    result = minimize_sampled(
        optimizer, storage, support, weights,
        sample_size=plan.sample_size or DEFAULT_SAMPLE_SIZE, tol=optimizer.tol,
        rtol=optimizer.rtol,
        max_iter=plan.budget(m), time_limit=remaining, random_state=rng.integers(2**31),
        cache_size=plan.cache_size)
    result.info["model"] = "iterate"
    if subset is not None and m > subset.numel():
        # The anytime floor: score both models on training examples outside the subset.
        outside = np.setdiff1d(rng.choice(m, min(m, VALIDATION + subset.numel()),
                                          replace=False), subset.cpu().numpy())
        rows = torch.from_numpy(outside[:VALIDATION]).to(X.device)
        labels = y_t[rows].to(torch.float64)
        it_support = torch.nonzero(result.x > 0).squeeze(1)
        acc_it = float(((_scores(storage, it_support, result.x[it_support], rows) * labels) > 0)
                       .double().mean())
        acc_sub = float(((_scores(storage, sub_support, sub_weights, rows) * labels) > 0)
                        .double().mean())
        result.info["validation"] = {"iterate": acc_it, "subset": acc_sub,
                                     "examples": int(rows.numel())}
        if acc_sub > acc_it:
            alpha = torch.zeros(m, dtype=torch.float64, device=X.device)
            alpha[sub_support] = sub_weights
            result.x = alpha
            result.weights = alpha
            result.value = 0.5 * float(_scores(storage, sub_support, sub_weights, sub_support)
                                       .mul(storage.y[sub_support].to(torch.float64))
                                       @ sub_weights
                                       + (sub_weights * sub_weights
                                          / _inv(storage, sub_support)).sum())
            result.info["model"] = "subset"
    if result.status in (Status.MAX_ITER, Status.TIME_LIMIT):
        plan.warn_unconverged(result.status, result.n_iter, result.info["sampled_gap"],
                              result.value, where=" (sampled storage)",
                              gap_name="sampled relative gap", stacklevel=4)
    result.info["cache"] = {"block_cached": result.info["block_cached"]}
    result.info["total_time"] = time.perf_counter() - start
    return result.x, result


def _inv(storage: KernelRows, idx: Tensor) -> Tensor:
    """``C_i`` for the examples ``idx`` (so that ``alpha^2 / C`` is the diagonal term)."""
    _, _, _, inv_c = storage.rows(idx)
    return 1.0 / inv_c
