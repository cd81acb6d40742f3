r"""Block-coordinate descent over a product of boxes, with a duality-gap stopping rule.

:class:`BlockCoordinateDescent` minimizes a convex function :math:`F(x)` over
:math:`\mathcal B_1 \times \dots \times \mathcal B_n` (each :math:`\mathcal B_i` a box), one block
at a time. An *outer iteration* (epoch) visits every block once, in a fresh uniformly random order;
an *inner iteration* on block ``i`` either

- replaces :math:`x_i` by the exact minimizer of :math:`F` over block ``i``
  (``block_solver="exact"``; the problem supplies it), or
- takes ``fw_steps`` Frank-Wolfe steps on the block's quadratic model
  :math:`\tfrac12 d^\top H_i d + g_i^\top d`: the box LMO gives the vertex
  :math:`s = \operatorname{lmo}(g_i)`, and the exact line search the step
  :math:`\min(1, -g_i^\top(s - x_i) / (s - x_i)^\top H_i (s - x_i))` (``block_solver="fw"``).

After each epoch the problem reports its objective and a duality gap :math:`\ge F(x) - F^*`; the run
stops when the gap is at most ``tol`` (absolute) or ``rtol`` times the gap after the first epoch
(the rule of Wang & Scott 2021 for the Weston-Watkins SVM, where ``rtol = 0.0009``).

The problem is any :class:`BlockProblem`. A problem may also run a whole epoch itself
(:meth:`BlockProblem.sweep`), e.g. in a compiled loop: the optimizer still owns the order, the
stopping rule, the history and the callbacks. The Weston-Watkins SVM
(:class:`torchfw.WestonWatkinsSVC`) is one such problem; :class:`BoxQuadraticProblem` is a generic
one (a convex quadratic over a box).

References
----------
Y. Wang and C. Scott, "An Exact Solver for the Weston-Watkins SVM Subproblem", ICML 2021
(Algorithm 1; linear convergence of exact BCD, Theorem 3.6).
P.-W. Wang and C.-J. Lin, "Iteration complexity of feasible descent methods for convex
optimization", JMLR 2014.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from ..linesearch import ExactLineSearch, Line
from ..result import History, Result, Status
from ..sets.oracles import Box
from ..utils.validation import check_finite, check_int_at_least, check_nonnegative, check_positive
from ._stopping import FirstGapStop

__all__ = ["BlockCoordinateDescent", "BlockProblem", "BlockQuadratic", "BoxQuadraticProblem",
           "CheckSchedule"]

_SOLVERS = ("exact", "fw")
#: The block FW step's line search (stateless: one instance serves every run).
_EXACT = ExactLineSearch()
#: Seconds one call of :meth:`BlockProblem.run_epochs` runs at most, about: the epochs between
#: two gap checks run in calls sized to this from the pace of the last one, so that a Ctrl-C
#: (``KeyboardInterrupt``, raised between two calls) stops a run within about this long.
CHUNK_SECONDS = 0.2


@dataclass(frozen=True)
class CheckSchedule:
    r"""When :class:`BlockCoordinateDescent` evaluates the duality gap next, for a problem that
    runs several epochs in one call (:meth:`BlockProblem.run_epochs`).

    After an epoch ``t`` the check is due at ``t = max_iter``; else, with ``use_estimate``, a
    finite :meth:`BlockProblem.gap_estimate` ``e`` and a finite ``calib`` (exact gap over the
    estimate at the last check), once ``e * calib <= limit`` or ``t - last_check >= 100``;
    otherwise once ``t >= next_check``. This is ``minimize``'s own rule, for the problem to
    apply after each of its epochs.
    """

    max_iter: int
    use_estimate: bool
    calib: float
    limit: float
    last_check: int
    next_check: int


@dataclass
class BlockQuadratic:
    r"""Local quadratic model of a problem in one block.

    ``F(x with block i = x_i + d) = F(x) + grad^T d + d^T H d / 2`` (exactly, for a quadratic
    ``F``; a model otherwise), over the box ``lmo``.

    Attributes
    ----------
    x : Tensor
        Current value of the block (1-d).
    grad : Tensor
        Gradient of ``F`` with respect to the block.
    hess : callable
        ``hess(d) -> H d``.
    lmo : Box
        The block's feasible set.
    """

    x: Tensor
    grad: Tensor
    hess: Callable[[Tensor], Tensor]
    lmo: Box


class BlockProblem:
    """A convex problem over a product of boxes, split into blocks (interface).

    Subclasses implement :attr:`n_blocks`, :meth:`block`, :meth:`set_block`,
    :meth:`value_and_gap` and :meth:`point`; :meth:`solve_block` when an exact block solver
    exists; and optionally :meth:`sweep` to run a whole epoch in one call.
    """

    @property
    def n_blocks(self) -> int:  # pragma: no cover - abstract
        raise NotImplementedError

    def block(self, i: int) -> BlockQuadratic:  # pragma: no cover - abstract
        """The quadratic model of block ``i`` at the current point."""
        raise NotImplementedError

    def solve_block(self, i: int) -> Tensor:
        """Exact minimizer of the problem over block ``i`` (others fixed)."""
        raise NotImplementedError(f"{type(self).__name__} has no exact block solver; use "
                                  f"block_solver='fw'")

    def set_block(self, i: int, value: Tensor) -> None:  # pragma: no cover - abstract
        """Replace block ``i`` by ``value`` (and update whatever the problem caches)."""
        raise NotImplementedError

    def value_and_gap(self) -> tuple[float, float]:  # pragma: no cover - abstract
        """Objective ``F(x)`` and a duality gap ``>= F(x) - F*`` at the current point."""
        raise NotImplementedError

    def point(self) -> Tensor:  # pragma: no cover - abstract
        """The current point (all blocks)."""
        raise NotImplementedError

    def gap_estimate(self) -> float | None:
        """A cheap predictor of the duality gap after the last epoch, or ``None``.

        Not a certificate: :class:`BlockCoordinateDescent` (``check_every="auto"``) only uses
        it to decide when to evaluate :meth:`value_and_gap`, after calibrating it against the
        exact gaps seen so far.
        """
        return None

    def set_gap_target(self, target: float) -> None:
        """Told the stopping rule's target gap once it is known (after epoch 1's exact gap).

        A problem that shrinks its sweeps can use it to un-shrink and re-check before the run
        may stop (as LIBLINEAR does when its shrunk problem looks converged). The target
        depends only on the first epoch, so using it keeps the iterates independent of when
        the gap is checked. Default: ignored.
        """

    def visit_set(self) -> np.ndarray | None:
        """The blocks the next epoch must visit, when the problem knows it passes over the
        others; ``None`` (the default) for all of them.

        Called once before each shuffled epoch; the epoch then visits exactly these blocks, in
        a uniformly random order of their own (shuffling a few hundred active blocks instead of
        permuting them all and skipping the rest, as LIBLINEAR shuffles its active set only).
        A problem returning a set takes on what the epoch would have done to the blocks left
        out (e.g. counting down their skips).
        """
        return None

    def sweep(self, order: np.ndarray, block_solver: str, fw_steps: int) -> int | None:
        """Run one epoch over ``order`` in one call (e.g. compiled); ``None`` if unsupported.

        Returns the number of blocks that changed.
        """
        return None

    def run_epochs(self, rng: np.random.Generator, first: int, last: int, block_solver: str,
                   fw_steps: int, schedule: CheckSchedule) -> tuple[int, int, bool] | None:
        """Run epochs ``first..last`` in one call (e.g. compiled), each in a shuffled order
        drawn from ``rng`` exactly as :meth:`BlockCoordinateDescent.minimize` draws it (the
        :meth:`visit_set` shuffled with ``rng.shuffle``, else ``rng.permutation(n_blocks)``),
        returning after the first epoch at which ``schedule`` says a gap check is due, or
        after ``last``: ``(last epoch run, blocks changed, whether a check is due)``. The
        iterates must be those of the epochs run one by one. ``None`` (the default): not
        supported, ``minimize`` runs the epochs itself.
        """
        return None


class BlockCoordinateDescent:
    r"""Randomized block-coordinate descent with exact or Frank-Wolfe block steps.

    Parameters
    ----------
    block_solver : {"exact", "fw"}, default "exact"
        ``"exact"``: each inner iteration minimizes exactly over the block
        (:meth:`BlockProblem.solve_block`). ``"fw"``: ``fw_steps`` Frank-Wolfe steps with the
        block's box LMO and exact line search on its quadratic model.
    fw_steps : int, default 1
        Frank-Wolfe steps per block visit (``block_solver="fw"``).
    tol : float, default 0.0
        Absolute tolerance: stop when the duality gap is ``<= tol``.
    rtol : float, default 1e-3
        Stop when the gap is ``<= rtol`` times the gap after the first epoch (Wang & Scott 2021).
    max_iter : int, default 1000
        Maximum number of epochs.
    shuffle : bool, default True
        Visit the blocks in a fresh uniformly random order every epoch (otherwise cyclically):
        all of them, or the problem's :meth:`BlockProblem.visit_set` when it gives one.
    random_state : int, optional
        Seed of the orders (NumPy ``default_rng``): the same seed gives the same orders, so two
        block solvers can be compared on identical trajectories.
    time_limit : float, optional
        Wall-clock budget in seconds (checked after each epoch).
    callback : callable, optional
        ``callback(info: IterationInfo) -> bool | None`` after each epoch; ``True`` stops.
    verbose : bool, default False
        Progress bar of the gap's way down to its target (log scale), with the epoch count and
        the gap; none when stderr is not a terminal.
    check_every : int or "auto", default 1
        Epochs between duality-gap evaluations. A gap evaluation can cost as much as an epoch
        (the Weston-Watkins primal needs all ``n k`` scores), so ``"auto"`` evaluates it only
        when it is predicted to meet the target. If the problem offers a free estimate
        (:meth:`BlockProblem.gap_estimate`), the estimate is calibrated by the ratio
        exact/estimate at the last check (not at epoch 1's: see :meth:`_calibration`) and a
        check is made when the calibrated estimate
        reaches ``1.5 * target`` (and at least every 100 epochs). Otherwise the gap is
        evaluated after epochs 1, 2 and 3, then at the crossing predicted by the linear rate
        of the log-gap from epoch 3 to the latest check (at most 100 epochs ahead). The run
        stops at the first *checked* epoch that meets the rule, possibly some epochs after the
        first epoch that does (with a smaller gap, never a larger one).

    Notes
    -----
    With ``tol = rtol = 0`` the run stops only on ``max_iter``, a time limit, the callback, or a
    gap of exactly 0.
    """

    #: check when the calibrated estimate is within this factor of the target
    _estimate_margin = 1.5

    def __init__(self, block_solver: str = "exact", *, fw_steps: int = 1, tol: float = 0.0,
                 rtol: float = 1e-3, max_iter: int = 1000, shuffle: bool = True,
                 random_state: int | None = None, time_limit: float | None = None,
                 callback: Callable | None = None, verbose: bool = False,
                 check_every: int | str = 1):
        if block_solver not in _SOLVERS:
            raise ValueError(f"block_solver must be one of {_SOLVERS}, got {block_solver!r}")
        self.block_solver = block_solver
        self.fw_steps = check_int_at_least("fw_steps", fw_steps, 1)
        self.tol = check_nonnegative("tol", tol)
        self.rtol = check_nonnegative("rtol", rtol)
        self.max_iter = check_int_at_least("max_iter", max_iter, 1)
        self.shuffle = bool(shuffle)
        self.random_state = random_state
        self.time_limit = None if time_limit is None else check_positive("time_limit",
                                                                          time_limit)
        if callback is not None and not callable(callback):
            raise TypeError("callback must be callable")
        self.callback = callback
        self.verbose = bool(verbose)
        if check_every != "auto":
            check_every = check_int_at_least("check_every", check_every, 1)
        self.check_every = check_every

    # -- when to evaluate the gap ---------------------------------------------------------------

    def _next_check(self, epoch: int, checks: list[tuple[int, float]], target: float) -> int:
        """Epoch of the next gap evaluation, given the ``(epoch, gap)`` checks so far."""
        if self.check_every != "auto":
            return epoch + int(self.check_every)
        if len(checks) < 3 or target <= 0.0:
            return epoch + 1
        # The log-gap falls about linearly (Theorem 3.6) but not smoothly: the rate is fitted
        # from the third check (epoch 3, past the first epochs' bump) to the latest, and the
        # next check goes to the predicted crossing. Simulated on recorded gap trajectories of
        # dna, satimage, letter and sector, this needed ~12 checks per run instead of one per
        # epoch, for ~75% of the every-epoch cost, versus ~80% for jumping half way.
        (t0, g0), (t1, g1) = checks[2], checks[-1]
        if t1 == t0 or not (0.0 < g1 < g0):
            return epoch + 1
        rate = math.log(g1 / g0) / (t1 - t0)  # < 0: log-gap per epoch
        remaining = math.log(target / g1) / rate  # epochs to the target at that rate
        return epoch + max(1, min(math.ceil(remaining), 100))

    @staticmethod
    def _calibration(epoch: int, gap: float, est: float | None) -> float | None:
        """Exact gap over the estimate at a check (None without an estimate): the factor the
        estimates of the next epochs are scaled by.

        Not from epoch 1: the first sweep's estimate is taken while the point moves the most
        (from ``W = 0``, each example scored before most others were visited), and it was
        4-25 times the exact gap on the Weston-Watkins sets (sector 0.04 of it, letter 0.33,
        dna 0.41-0.47, satimage 0.69-0.94) against 0.6-1.9 at later checks. Scaled by it, the
        estimate brought the second check while the gap was still 5-20 times the target (dna
        at epoch 19 of 36-41, letter at 6 of 9, sector at 5 of 17, where a check costs an
        epoch). After epoch 1 the raw estimate is used until the next check calibrates it.
        """
        if est is None or not est > 0.0:
            return None
        return 1.0 if epoch == 1 else gap / est

    # -- one epoch in Python (problems without a compiled sweep) --------------------------------

    def _python_sweep(self, problem: BlockProblem, order: np.ndarray) -> int:
        changed = 0
        for i in order.tolist():
            if self.block_solver == "exact":
                new = problem.solve_block(i)
            else:
                new = self._fw_block(problem.block(i))
            problem.set_block(i, new)
            changed += 1
        return changed

    def _fw_block(self, blk: BlockQuadratic) -> Tensor:
        r"""``fw_steps`` Frank-Wolfe steps on the block's quadratic model, from ``blk.x``.

        Each step: the box vertex :math:`s = \operatorname{lmo}(g)`, the direction
        :math:`d = s - x`, and, unless the FW gap :math:`-g^\top d` is zero (the block is
        optimal), the step of :class:`~torchfw.ExactLineSearch` on
        :math:`\phi(\lambda) = \lambda g^\top d + \tfrac12 \lambda^2 d^\top H d` over
        :math:`[0, 1]`; the gradient follows as :math:`g + \lambda H d`. The reference of the
        compiled Weston-Watkins block step :func:`torchfw.ww._blocks.fw_single`
        (:mod:`torchfw.utils.twins`).
        """
        x = blk.x.clone()
        g = blk.grad.clone()
        for _ in range(self.fw_steps):
            d = blk.lmo.lmo(g) - x
            gd = float(g @ d)
            if gd >= 0.0:  # FW gap -<g, d> is zero: the block is optimal
                break
            hd = blk.hess(d)
            line = Line(value=0.0, slope=gd, gamma_max=1.0, curvature=float(d @ hd))
            lam = _EXACT.step(line, 0)
            x = blk.lmo.project(x + lam * d)  # projection only removes rounding
            g = g + lam * hd
        return x

    # -- the loop -------------------------------------------------------------------------------

    def minimize(self, problem: BlockProblem) -> Result:
        """Run BCD on ``problem`` from its current point.

        Returns
        -------
        Result
            ``x`` the final point, ``value`` and ``gap`` after the last epoch, ``n_iter`` the
            number of epochs, ``history`` one record per gap evaluation (``iteration`` is the
            epoch, ``steps["changed"]`` the blocks changed so far), ``info["first_gap"]`` the
            gap after epoch 1.
        """
        if not isinstance(problem, BlockProblem):
            raise TypeError(f"problem must be a torchfw BlockProblem, got "
                            f"{type(problem).__name__}")
        n = int(problem.n_blocks)
        if n < 1:
            raise ValueError("the problem has no blocks")
        rng = np.random.default_rng(self.random_state)
        rule = FirstGapStop(tol=self.tol, rtol=self.rtol, max_iter=self.max_iter,
                            time_limit=self.time_limit, callback=self.callback)
        history = History()
        start = time.perf_counter()
        status = Status.MAX_ITER
        checks: list[tuple[int, float]] = []
        next_check = 1
        calib = None  # exact gap / estimated gap at the last check
        changed_total = 0
        value = gap = math.nan
        bar = None
        if self.verbose:
            from ..utils.progress import GapProgress

            bar = GapProgress(type(self).__name__, unit="epoch")
        try:
            epoch = 0
            chunk = 1  # epochs of the next run_epochs call (epoch 1 is always checked)
            while epoch < self.max_iter:
                ran = None
                if self.shuffle:
                    last = epoch + 1 if self.time_limit is not None else min(
                        self.max_iter, epoch + chunk)
                    schedule = CheckSchedule(
                        max_iter=self.max_iter, use_estimate=self.check_every == "auto",
                        calib=math.nan if calib is None else calib,
                        limit=self._estimate_margin * rule.gap_target,
                        last_check=checks[-1][0] if checks else 0, next_check=next_check)
                    t0 = time.perf_counter()
                    ran = problem.run_epochs(rng, epoch + 1, last, self.block_solver,
                                             self.fw_steps, schedule)
                if ran is not None:
                    # the problem ran the epochs and applied the check rule itself
                    done, ran_changed, due = ran
                    # the next call: CHUNK_SECONDS at this call's pace, growing at most 8-fold
                    pace = CHUNK_SECONDS * (done - epoch) / max(time.perf_counter() - t0, 1e-6)
                    chunk = max(1, min(int(pace), 8 * chunk))
                    epoch = done
                    changed_total += int(ran_changed)
                    est = problem.gap_estimate() if self.check_every == "auto" else None
                    if est is not None and not math.isfinite(est):
                        est = None
                else:
                    epoch += 1
                    visit = problem.visit_set() if self.shuffle else None
                    if visit is not None:
                        rng.shuffle(visit)
                        order = visit
                    else:
                        order = rng.permutation(n) if self.shuffle else np.arange(n)
                    changed = problem.sweep(order, self.block_solver, self.fw_steps)
                    if changed is None:
                        changed = self._python_sweep(problem, order)
                    changed_total += int(changed)
                    est = problem.gap_estimate() if self.check_every == "auto" else None
                    if est is not None and not math.isfinite(est):
                        est = None
                    if est is not None and calib is not None:
                        # the problem predicts its gap for free: check when the calibrated
                        # prediction reaches the target (and at least every 100 epochs)
                        due = (est * calib <= self._estimate_margin * rule.gap_target
                               or epoch - checks[-1][0] >= 100)
                    else:
                        due = epoch >= next_check
                out_of_time = (self.time_limit is not None
                               and time.perf_counter() - start >= self.time_limit)
                if not due and epoch < self.max_iter and not out_of_time:
                    continue
                value, gap = problem.value_and_gap()
                value, gap = float(value), float(gap)
                elapsed = time.perf_counter() - start
                steps = {"changed": changed_total}
                history.append(epoch, value, gap, elapsed, steps)
                if bar is not None:
                    bar.update(epoch, gap, max(self.tol, self.rtol * (rule.first_gap or gap)))
                if not rule.finite(value, gap):
                    status = Status.NONFINITE
                    break
                decided = rule(problem, epoch, value, gap, elapsed, steps)
                if decided is not None:
                    status = decided
                    break
                checks.append((epoch, gap))
                next_check = self._next_check(epoch, checks, rule.gap_target)
                calib = self._calibration(epoch, gap, est)
        finally:
            if bar is not None:
                bar.close()
        n_epochs = history.iteration[-1] if len(history) else 0
        return Result(x=problem.point(), value=value, gap=gap, n_iter=n_epochs,
                      status=status, history=history,
                      best_gap=min(history.gap) if len(history) else math.inf,
                      info={"first_gap": rule.first_gap, "block_solver": self.block_solver})


class BoxQuadraticProblem(BlockProblem):
    r"""A convex quadratic over a box, split into contiguous blocks.

    .. math:: \min_{l \le x \le u} \tfrac12 x^\top Q x + c^\top x, \qquad Q \succeq 0 .

    The duality gap is the Frank-Wolfe gap over the whole box,
    :math:`\langle \nabla F(x), x - \operatorname{lmo}(\nabla F(x)) \rangle \ge F(x) - F^*`.
    Blocks of size 1 have an exact solver (a clipped Newton step); larger blocks use
    ``block_solver="fw"``.

    Parameters
    ----------
    Q : Tensor, shape (n, n)
        Symmetric positive semidefinite.
    c : Tensor, shape (n,)
    lower, upper : float or Tensor
        Box bounds (finite).
    block_size : int, default 1
    x0 : Tensor, optional
        Feasible start (default: the lower bounds).
    """

    def __init__(self, Q: Tensor, c: Tensor, lower, upper, *, block_size: int = 1,
                 x0: Tensor | None = None):
        if not isinstance(Q, Tensor) or Q.dim() != 2 or Q.shape[0] != Q.shape[1]:
            raise ValueError("Q must be a square 2-d tensor")
        if not isinstance(c, Tensor) or c.shape != (Q.shape[0],):
            raise ValueError(f"c must be a tensor of shape ({Q.shape[0]},)")
        check_finite("Q", Q)
        check_finite("c", c)
        self.Q = Q.to(torch.float64)
        self.c = c.to(device=Q.device, dtype=torch.float64)
        n = Q.shape[0]
        self.box = Box(lower, upper)
        lo, hi = self.box._bounds(self.c)
        self.lo, self.hi = lo.clone(), hi.clone()
        self.block_size = check_int_at_least("block_size", block_size, 1)
        self.x = (self.lo.clone() if x0 is None else
                  torch.as_tensor(x0, dtype=torch.float64, device=Q.device).clone())
        if self.x.shape != (n,) or not bool(self.box.contains(self.x)):
            raise ValueError("x0 must be a feasible point of shape (n,)")
        self.grad = self.Q @ self.x + self.c
        self._starts = list(range(0, n, self.block_size))

    @property
    def n_blocks(self) -> int:
        return len(self._starts)

    def _slice(self, i: int) -> slice:
        s = self._starts[i]
        return slice(s, min(s + self.block_size, self.x.shape[0]))

    def block(self, i: int) -> BlockQuadratic:
        sl = self._slice(i)
        Qb = self.Q[sl, sl]
        return BlockQuadratic(x=self.x[sl].clone(), grad=self.grad[sl].clone(),
                              hess=lambda d: Qb @ d, lmo=Box(self.lo[sl], self.hi[sl]))

    def solve_block(self, i: int) -> Tensor:
        sl = self._slice(i)
        if sl.stop - sl.start != 1:
            return super().solve_block(i)
        q = float(self.Q[sl.start, sl.start])
        x, g = self.x[sl], self.grad[sl]
        if q <= 0.0:  # linear in this coordinate: go to the bound the gradient points to
            return torch.where(g > 0, self.lo[sl], self.hi[sl])
        return (x - g / q).clamp(self.lo[sl], self.hi[sl])

    def set_block(self, i: int, value: Tensor) -> None:
        sl = self._slice(i)
        delta = value.to(torch.float64) - self.x[sl]
        self.x[sl] = value
        self.grad += self.Q[:, sl] @ delta

    def value_and_gap(self) -> tuple[float, float]:
        value = float(0.5 * self.x @ (self.Q @ self.x) + self.c @ self.x)
        gap = float(self.grad @ (self.x - self.box.lmo(self.grad)))
        return value, max(gap, 0.0)

    def point(self) -> Tensor:
        return self.x.clone()
