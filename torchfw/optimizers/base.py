r"""The shared base of all Frank-Wolfe-type optimizers.

:class:`ConstrainedOptimizer` validates the problem, builds a solver engine, and runs the loop:
blocks of ``check_every`` iterations separated by *checks*, where the Frank-Wolfe gap

.. math:: g(x) = \max_{v \in \mathcal{C}} \langle \nabla f(x), x - v \rangle \;\ge\; f(x) - f^*

is read, recorded and compared with the tolerance. Variants only implement :meth:`_step` (one
iteration, in terms of engine moves).

**Tolerance.** ``tol`` is *absolute*: the run stops when :math:`g(x) \le` ``tol``, which
certifies :math:`f(x) - f^* \le` ``tol`` in the objective's own units. The optional ``rtol``
stops when :math:`g(x) \le` ``rtol`` :math:`\cdot |f(x)|`. We default to the absolute form
because the certificate is an absolute bound and because :math:`f^*` may be zero or negative, where
a relative test means nothing; applications whose scale is known (the SVM dual, the Lasso) set
``rtol`` themselves.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import cast

import numpy as np
import torch
from torch import Tensor

from ..linesearch import ExactLineSearch, LineSearch, OpenLoop, default_line_search
from ..objectives import Quadratic, as_objective
from ..result import History, Result, Status
from ..sets.oracles import LMO, AtomicLMO
from ..utils.scalars import DEVICE, HOST
from ..utils.validation import check_finite, check_int_at_least, check_nonnegative, check_positive
from ._compiled import CompiledBlocks, CompiledStep  # noqa: F401 (CompiledStep: former home)
from ._dense import DenseStorage
from ._engine import GenericEngine, QuadraticEngine
from ._stopping import StoppingRule
from ._host import HostStorage
from ._streaming import StreamingStorage
from .sampling import make_sampler

__all__ = ["ConstrainedOptimizer"]

_EXECUTIONS = ("auto", "host", "device", "compile", "graph", "dense")


def _tail_average(eng) -> dict:
    """``Result`` fields of the engine's tail average (streaming with ``average_from``)."""
    average = eng.average()
    if average is None:
        return {}
    point, value = average
    return {"average": point.detach().clone(), "average_value": float(value)}


class ConstrainedOptimizer:
    r"""Minimize a smooth convex function over a compact convex set given by an LMO.

    Parameters
    ----------
    lmo : LMO
        The constraint set (:class:`~torchfw.Simplex`, :class:`~torchfw.L1Ball`, ...).
    line_search : LineSearch, optional
        Step-size strategy. Default: :class:`~torchfw.ExactLineSearch` for a
        :class:`~torchfw.Quadratic`, else :class:`~torchfw.Backtracking`.
    tol : float, default 1e-6
        Absolute tolerance on the Frank-Wolfe gap (see the module docstring).
    rtol : float, default 0.0
        Relative tolerance: also stop when ``gap <= rtol * |f(x)|``.
    max_iter : int, default 10000
    time_limit : float, optional
        Wall-clock budget in seconds (checked between blocks).
    check_every : int, optional
        Iterations between checks of the gap. Default 10 with host scalars, 50 on a device
        (where each check is a host synchronization) and with ``execution="dense"`` (where a
        check costs as much as dozens of compiled iterations).
    callback : callable, optional
        ``callback(info: IterationInfo) -> bool | None`` called at each check; returning
        ``True`` (or raising ``StopIteration``) stops the run.
    verbose : bool, default False
        Show a tqdm progress bar of the gap's way down to the tolerance (log scale), with the
        iteration count and the gap; none when stderr is not a terminal.
    sample_size : int, optional
        Randomized LMO: the FW atom is the best of ``sample_size`` random atoms (atomic sets).
        The stopping test keeps using the exact gap.
    random_state : int, optional
        Seed of the sampler and of the streaming order.
    stream : bool, default False
        Streaming candidates (Ouyang & Gray's stochastic FW, seed 001): atoms arrive one per
        iteration in random order and the gradient is kept only on a working set of admitted
        atoms (see :mod:`torchfw.optimizers._streaming`). Needs a Quadratic over a Simplex whose
        operator has ``column_rows`` (e.g. the SVM kernel operator); the gap it reports is that of
        the working-set problem. With FrankWolfe this is SFW, with AwayStepFrankWolfe MSFW.
    average_from : int, optional
        Streaming only: keep the running mean of the iterates from iteration ``average_from``
        on and return it (and its objective value) as ``Result.average`` and
        ``Result.average_value``. A single pass leaves the last iterate dependent on its last
        few steps; the tail average does not (see :mod:`torchfw.optimizers._streaming`).
    execution : {"auto", "host", "device", "compile", "graph", "dense"}, default "auto"
        How the incremental quadratic engine runs: ``"host"`` reads scalars to the host and uses
        compiled CPU kernels; ``"device"`` keeps every scalar on the device (no synchronization
        inside a block); ``"compile"`` also fuses each iteration with ``torch.compile``;
        ``"graph"`` additionally captures blocks of compiled iterations as CUDA graphs (CUDA
        only). ``"auto"`` picks ``"graph"`` for CUDA tensors and ``"host"`` otherwise. The first
        compiled run of a problem shape pays the compilation (cached on disk afterwards).
        ``"dense"`` (small problems on the CPU, FrankWolfe, AwayStepFrankWolfe and
        PairwiseFrankWolfe with ExactLineSearch) forms the ``N x N`` matrix of vertex gradients
        once and runs each block between two checks in one compiled call: the same iterates as
        ``"host"`` without the interpreter's cost per iteration (see
        :mod:`torchfw.optimizers._dense`).
    refresh_every : int, optional
        Recompute the incremental gradient exactly every that many iterations (host execution).
    corrective : bool, default False
        Take the active-set corrective step where the variant's steps stall (a quadratic over
        an atomic set, ``execution`` ``"host"``, ``"device"`` or ``"dense"``, on every storage:
        one problem, a streaming working set, the sampled slots, a batch, shards):
        the exact minimizer of the objective on the current face by a linear solve, stopping
        at the face's boundary (Wolfe's minor cycle; :mod:`torchfw.optimizers._face`), taken
        at a check when the gap did not halve over a window of iterations that cost as much as
        the step (:mod:`torchfw.optimizers._correction`). It ends the crawl of Frank-Wolfe
        steps on ill-conditioned problems (an SVM dual at large C); well-conditioned runs
        never take it. :class:`~torchfw.SVC` turns it on.
    """

    #: Moves may involve two atoms (pairwise, SWAP): both columns are computed on device.
    uses_pairs = False
    #: The variant needs indexed atoms (simplex, L1 ball).
    needs_atoms = False
    #: The variant keeps the previous iterate (PARTAN).
    keeps_previous = False
    #: The variant needs curvature or objective evaluations beyond the line search.
    needs_quadratic = False
    #: Code of the variant's compiled dense loop (``execution="dense"``), or None.
    dense_variant: int | None = None

    def __init__(self, lmo: LMO, line_search: LineSearch | None = None, *, tol: float = 1e-6,
                 rtol: float = 0.0, max_iter: int = 10_000, time_limit: float | None = None,
                 check_every: int | None = None, callback: Callable | None = None,
                 verbose: bool = False, sample_size: int | None = None,
                 random_state: int | None = None, execution: str = "auto",
                 refresh_every: int | None = None, stream: bool = False,
                 average_from: int | None = None, corrective: bool = False):
        if not isinstance(lmo, LMO):
            raise TypeError(f"lmo must be a torchfw LMO (Simplex, L1Ball, ...), got "
                            f"{type(lmo).__name__}")
        if line_search is not None and not isinstance(line_search, LineSearch):
            raise TypeError(f"line_search must be a torchfw LineSearch, got "
                            f"{type(line_search).__name__}")
        self.lmo = lmo
        self.line_search = line_search
        self.tol = check_positive("tol", tol)
        self.rtol = check_nonnegative("rtol", rtol)
        self.max_iter = check_int_at_least("max_iter", max_iter, 1)
        self.time_limit = None if time_limit is None else check_positive("time_limit",
                                                                          time_limit)
        self.check_every = None if check_every is None else check_int_at_least(
            "check_every", check_every, 1)
        if callback is not None and not callable(callback):
            raise TypeError("callback must be callable")
        self.callback = callback
        self.verbose = bool(verbose)
        self.sample_size = None if sample_size is None else check_int_at_least(
            "sample_size", sample_size, 1)
        if sample_size is not None and not lmo.is_atomic:
            raise ValueError(f"sample_size needs a set with indexed atoms (Simplex, L1Ball), got "
                             f"{type(lmo).__name__}")
        self.random_state = random_state
        if execution not in _EXECUTIONS:
            raise ValueError(f"execution must be one of {_EXECUTIONS}, got {execution!r}")
        self.execution = execution
        self.refresh_every = None if refresh_every is None else check_int_at_least(
            "refresh_every", refresh_every, 1)
        self.stream = bool(stream)
        if not isinstance(corrective, (bool, np.bool_)):
            raise TypeError(f"corrective must be True or False, got {corrective!r}")
        self.corrective = bool(corrective)
        if self.stream and sample_size is not None:
            raise ValueError("stream=True and sample_size are two candidate policies; pick one")
        self.average_from = None if average_from is None else check_int_at_least(
            "average_from", average_from, 0)
        if average_from is not None and not self.stream:
            raise ValueError("average_from averages the iterates of a streaming run: it needs "
                             "stream=True (deterministic runs converge; their last iterate is "
                             "the answer)")
        if self.needs_atoms and not lmo.is_atomic:
            raise ValueError(f"{type(self).__name__} needs a set with indexed atoms (Simplex, "
                             f"L1Ball); got {type(lmo).__name__}")

    # -- the variant hook ----------------------------------------------------------------------

    def _step(self, eng) -> None:  # pragma: no cover - abstract
        """One iteration: choose moves on the engine and apply one."""
        raise NotImplementedError

    # -- set-up --------------------------------------------------------------------------------

    def _check_objective(self, objective, line_search: LineSearch) -> None:
        if line_search.needs_curvature and not objective.has_curvature:
            raise ValueError(
                f"{type(line_search).__name__} needs an objective with a closed-form line "
                f"minimizer (torchfw.Quadratic); got {objective!r}. Use Backtracking or "
                f"ShortStep instead."
            )

    def _initial_point(self, objective, x0: Tensor | None) -> Tensor:
        if x0 is None:
            n = getattr(objective, "n", None)
            if n is None:
                raise ValueError("x0 is required when the objective does not state its "
                                 "dimension (only torchfw.Quadratic does)")
            dtype = objective.Q.dtype if isinstance(objective, Quadratic) else None
            device = objective.device if isinstance(objective, Quadratic) else None
            if dtype is not None and not dtype.is_floating_point:
                dtype = torch.float64
            return self.lmo.initial_point(n, dtype=dtype, device=device)
        if not isinstance(x0, Tensor):
            raise TypeError(f"x0 must be a tensor, got {type(x0).__name__}")
        if x0.dim() != 1:
            raise ValueError(f"x0 must be a 1-d tensor, got shape {tuple(x0.shape)}")
        if not x0.is_floating_point():
            raise TypeError(f"x0 must have a floating-point dtype, got {x0.dtype}")
        check_finite("x0", x0)
        if isinstance(objective, Quadratic):
            if x0.shape[0] != objective.n:
                raise ValueError(f"x0 has {x0.shape[0]} entries but the quadratic has "
                                 f"dimension {objective.n}")
            if x0.device != objective.device:
                raise ValueError(f"x0 is on device {x0.device} but Q is on {objective.device}; "
                                 f"move them to the same device")
            q_dtype = objective.Q.dtype
            if q_dtype.is_floating_point and \
                    torch.finfo(x0.dtype).bits < torch.finfo(q_dtype).bits:
                # The engine computes in x0's dtype: a float32 x0 would silently run a float64
                # problem in float32. (A float32 Q with a float64 x0 is the intended mixed
                # precision: kernel values in float32, accumulations in float64.)
                raise ValueError(f"x0 has dtype {x0.dtype} but Q has dtype {q_dtype}; the "
                                 f"solver would run in {x0.dtype}: pass x0 as {q_dtype}")
        self.lmo.check_compatible(x0)
        scale = max(1.0, float(x0.abs().max()))
        atol = 1e-6 * scale * max(1.0, math.sqrt(x0.numel()))
        if not bool(self.lmo.contains(x0, atol=atol)):
            raise ValueError(f"x0 is not in the constraint set {self.lmo!r}; pass a feasible "
                             f"point (e.g. lmo.project(x0))")
        return x0.detach()

    def _make_engine(self, objective, x0: Tensor, line_search: LineSearch):
        engine: QuadraticEngine | GenericEngine
        sampler = make_sampler(self.sample_size, self.random_state, x0.device)
        closed_form = isinstance(line_search, (ExactLineSearch, OpenLoop))
        if self.stream:
            if not (isinstance(objective, Quadratic) and closed_form):
                raise ValueError("stream=True needs a torchfw.Quadratic objective and "
                                 "ExactLineSearch or OpenLoop")
            if self.execution in ("device", "compile", "graph"):
                raise ValueError("stream=True runs with host scalars (execution='host')")
            rng = np.random.default_rng(self.random_state)
            support = torch.nonzero(x0).squeeze(1)
            # Seed 001 starts from one random vertex; a vertex x0 given by the caller is kept.
            first = int(support[0]) if support.numel() == 1 else int(rng.integers(x0.numel()))
            engine = QuadraticEngine(StreamingStorage(objective, self.lmo, first, rng=rng,
                                                      keep_previous=self.keeps_previous,
                                                      pair_columns=self.uses_pairs,
                                                      average_from=self.average_from))
            return engine, "host"
        if self.execution == "dense":
            return self._make_dense_engine(objective, x0, line_search), "dense"
        if isinstance(objective, Quadratic) and self.lmo.is_atomic and closed_form:
            execution = self.execution
            if execution == "auto":
                execution = "graph" if x0.is_cuda else "host"
            if execution == "graph" and not x0.is_cuda:
                raise ValueError("execution='graph' needs CUDA tensors")
            if execution == "graph" and (self.stream or self.sample_size is not None):
                execution = "device"  # random candidates are not graph-captured (yet)
            ops = HOST if execution == "host" else DEVICE
            atoms = cast(AtomicLMO, self.lmo)  # is_atomic
            w0 = atoms.to_weights(x0)
            engine = QuadraticEngine(HostStorage(objective, atoms, w0, ops=ops,
                                                 keep_previous=self.keeps_previous,
                                                 pair_columns=self.uses_pairs,
                                                 sample=sampler(ops),
                                                 refresh_every=self.refresh_every))
            return engine, execution
        if self.needs_quadratic:
            raise ValueError(f"{type(self).__name__} needs a torchfw.Quadratic objective with "
                             f"ExactLineSearch or OpenLoop")
        if self.execution in ("device", "compile", "graph"):
            raise ValueError(f"execution={self.execution!r} needs the incremental engine: a "
                             f"torchfw.Quadratic over Simplex/L1Ball with ExactLineSearch or "
                             f"OpenLoop")
        engine = GenericEngine(objective, self.lmo, x0, keep_previous=self.keeps_previous,
                               sample=sampler(HOST))
        return engine, "host"

    def _make_dense_engine(self, objective, x0: Tensor, line_search: LineSearch):
        if self.dense_variant is None:
            raise ValueError(f"execution='dense' has compiled loops for FrankWolfe, "
                             f"AwayStepFrankWolfe and PairwiseFrankWolfe, not "
                             f"{type(self).__name__}")
        if not (isinstance(objective, Quadratic) and self.lmo.is_atomic
                and isinstance(line_search, ExactLineSearch)):
            raise ValueError("execution='dense' needs a torchfw.Quadratic over Simplex/L1Ball "
                             "with ExactLineSearch")
        if self.sample_size is not None or self.refresh_every is not None:
            raise ValueError("execution='dense' runs every iteration in one compiled loop: "
                             "sample_size and refresh_every are not available there")
        atoms = cast(AtomicLMO, self.lmo)  # is_atomic
        return QuadraticEngine(DenseStorage(objective, atoms, atoms.to_weights(x0)))

    # -- the loop ------------------------------------------------------------------------------

    def minimize(self, objective, x0: Tensor | None = None, *,
                 stopping: StoppingRule | None = None) -> Result:
        """Minimize ``objective`` over the set, starting from ``x0`` (a feasible point).

        Parameters
        ----------
        objective : callable or Objective
            ``f(x) -> scalar tensor`` (autograd gradient) or a :class:`~torchfw.Quadratic`.
        x0 : Tensor, optional
            Feasible starting point; by default the set's :meth:`~torchfw.LMO.initial_point`
            (needs an objective that knows its dimension).
        stopping : StoppingRule, optional
            When to stop, asked at every check (:class:`~torchfw.optimizers.StoppingRule`);
            by default the optimizer's ``tol``, ``rtol``, ``max_iter``, ``time_limit`` and
            ``callback``. A problem whose own convergence test is not the Frank-Wolfe gap of
            the problem solved (the Lasso's duality gap, solved on its epigraph simplex)
            passes a subclass here instead of stopping from a callback.

        Returns
        -------
        Result
        """
        objective = as_objective(objective)
        line_search = self.line_search or default_line_search(objective)
        self._check_objective(objective, line_search)
        self._validate_variant(objective, line_search)
        x0 = self._initial_point(objective, x0)
        line_search.reset()
        engine, execution = self._make_engine(objective, x0, line_search)
        self._ls = line_search
        return self._run(engine, execution, rule=stopping)

    def _validate_variant(self, objective, line_search: LineSearch) -> None:
        """Hook for variant-specific checks (raise ValueError)."""

    def _run(self, eng, execution: str, *, rule: StoppingRule | None = None,
             verbose: bool | None = None) -> Result:
        """The run loop (:meth:`_loop`) and its :class:`~torchfw.Result`.

        ``rule`` defaults to the optimizer's own parameters (:meth:`StoppingRule.of`);
        ``verbose`` to ``self.verbose``.
        """
        rule = StoppingRule.of(self) if rule is None else rule
        status, history = self._loop(eng, execution, rule,
                                     verbose=self.verbose if verbose is None else verbose)
        gap = float(eng.gap())
        # Every check before a non-finite one was finite (the loop stops at the first).
        checked = history.gap[:-1] if status is Status.NONFINITE else history.gap
        best_gap = min(math.inf, gap, *checked)
        return Result(x=eng.point().detach().clone(), value=float(eng.value()),
                      gap=gap, n_iter=eng.iteration(), status=status,
                      history=history,
                      weights=None if eng.weights() is None else eng.weights().detach().clone(),
                      best_gap=best_gap,
                      **_tail_average(eng),
                      info={"engine": type(eng).__name__, "execution": execution,
                            "line_search": repr(self._ls),
                            **({"storage": type(eng.storage).__name__}
                               if isinstance(eng, QuadraticEngine) else {})})

    def _loop(self, eng, execution: str, rule: StoppingRule, *, verbose: bool = False,
              check_every: int | None = None) -> tuple[Status, History]:
        """Blocks of iterations between checks; at each check ``rule`` decides.

        The one run loop of every storage: a single problem (:meth:`minimize`), a sharded one
        (:func:`torchfw.distributed.minimize`), a batch
        (:func:`~torchfw.optimizers.batched.minimize_batched`, whose rule reads ``(B,)``
        values and gaps and masks the problems that stopped) and the sampled storage
        (:func:`~torchfw.optimizers._sampled_run.minimize_sampled`, a check every iteration of
        which ``rule.records`` keeps one in ``check_every``). Returns the status and the
        history of the recorded checks; the engine holds the final state.

        Parameters
        ----------
        eng : engine
        execution : str
            ``"host"``/``"device"`` (the variant's step in Python), ``"compile"``/``"graph"``
            (compiled steps, CUDA-graph blocks), ``"dense"`` (one compiled call per block).
        rule : StoppingRule
        verbose : bool
            Show the progress bar.
        check_every : int, optional
            Iterations between checks (default: ``self.check_every``, else 10 with host
            scalars and 50 otherwise).
        """
        check_every = check_every or self.check_every or (10 if execution == "host" else 50)
        corrector = None
        correcting = getattr(self, "corrective", False) and \
            execution in ("host", "device", "dense") and getattr(eng, "face_correction", False)
        history = History()
        start = time.perf_counter()
        status = None
        snapshot = eng.snapshot()
        blocks = None
        bar = None
        if verbose:
            from ..utils.progress import GapProgress

            bar = GapProgress(type(self).__name__, unit="it")
        try:
            while True:
                k = eng.iteration()
                value, gap = rule.measure(eng)
                elapsed = time.perf_counter() - start
                steps = eng.step_counts()
                record = rule.records(k)
                if record:
                    history.append(k, value, gap, elapsed, steps)
                    if bar is not None:
                        bar.update(k, gap, rule.target(value), f=f"{value:.6g}")
                if not rule.finite(value, gap):
                    eng.restore(snapshot)
                    status = Status.NONFINITE
                    break
                status = rule(eng, k, value, gap, elapsed, steps)
                if status is not None:
                    break
                if record:
                    snapshot = eng.snapshot()
                if correcting:
                    if corrector is None:
                        from ._correction import FaceCorrection

                        corrector = FaceCorrection(eng)
                    if corrector(eng, k, gap, rule.target(value)):
                        continue  # a corrective step: check again
                n = min(check_every, rule.max_iter - k)
                if execution in ("compile", "graph"):
                    if blocks is None:
                        blocks = CompiledBlocks(self, eng, check_every,
                                                use_graph=execution == "graph")
                    blocks.run(n)
                elif execution == "dense":
                    eng.run_block(self.dense_variant, n)
                else:
                    for _ in range(n):
                        self._step(eng)
        finally:
            if bar is not None:
                bar.close()
        return status, history

    def __repr__(self) -> str:
        return f"{type(self).__name__}(lmo={self.lmo!r}, line_search={self.line_search!r})"
