r"""The plan of one :class:`~torchfw.SVC` fit: every choice and number its solves read, once.

:meth:`SVC.fit <torchfw.SVC.fit>` resolves a :class:`FitPlan` from the estimator's parameters
and the data (:func:`resolve_plan`) before it solves anything; every fit path -- the compiled
whole solve (:mod:`torchfw.svm._fit`), its row cache (:mod:`torchfw.svm._matrix`), the lazy host
path (:mod:`torchfw.svm._lazy`), the sampled storage (:mod:`torchfw.svm._large`), batched
one-vs-rest (:mod:`torchfw.svm._batched`), precomputed and callable kernels
(:mod:`torchfw.svm._custom`) and the sharded fit (:mod:`torchfw.distributed.svc`) -- receives
the plan, never the estimator. What used to be recomputed by each path is written here once:

* the stopping numbers (:meth:`FitPlan.stopping`, :meth:`FitPlan.optimizer`): a solve stops when
  the Frank-Wolfe gap :math:`g` of the dual :math:`f(\alpha) = \tfrac12 \alpha^\top \tilde K
  \alpha` satisfies :math:`g \le \max(\epsilon, r f)` with the absolute floor
  :math:`\epsilon` = ``gap_tol`` (1e-300: none) and :math:`r` = ``rtol`` :math:`= 2\,` ``tol``.
  As the margin is :math:`\rho = 2 f`, this is ``SVC``'s rule :math:`g / \rho \le` ``tol``;
* the iteration budget of a problem of :math:`m` examples (:meth:`FitPlan.budget`):
  :data:`ITERATIONS_PER_EXAMPLE` :math:`\cdot\, m` by default (one epoch, :math:`m`, for the
  streaming solvers), a safety net that converging fits do not reach;
* the seed of binary problem :math:`k` (:meth:`FitPlan.problem_seed`): the fit's seed plus
  :math:`k`, so that the problems draw independently;
* the :class:`~torchfw.exceptions.ConvergenceWarning` of a solve stopped on its budget
  (:meth:`FitPlan.warn_unconverged`).

Tests and benchmarks that need a path or a stopping rule the parameters do not select replace
fields of the resolved plan with :func:`fit_planned` (``fit_planned(model, X, y,
batched=True)`` runs one-vs-rest on the batched engine on the CPU; ``gap_tol=eps, rtol=0``
stops on the absolute gap, as in seed 002's experiments), not by patching the estimator.
"""

from __future__ import annotations

import dataclasses
import warnings
from dataclasses import dataclass
from typing import Any

import torch

from .. import exceptions
from ..optimizers.base import ConstrainedOptimizer
from ..sets.oracles import Simplex
from ..solvers import make_solver
from ..utils.estimator import fit_atomically
from ..utils.progress import bar_shown

__all__ = ["FitPlan", "resolve_plan", "fit_planned", "feature_dtype", "PROBABILITY_TOL", "SMALL_M",
           "SMALL_TOL", "TOL", "ISOLATED_TOL", "ITERATIONS_PER_EXAMPLE", "NO_LIMIT", "CHECK_EVERY",
           "STREAMING", "LARGE_M", "WARM_SUBSET", "SAMPLED_SOLVERS", "BATCHED_SOLVERS"]

#: The largest ``tol`` of the fits behind ``probability=True``: Platt's sigmoids need decision
#: values nearer the optimum than accuracy does (one-vs-one digits, C=10, gamma=0.05: test
#: log-loss 0.106 at tol 0.3, 0.083 at 0.05, as LIBSVM's 0.083; accuracy equal).
PROBABILITY_TOL = 0.05

#: ``tol="auto"``: ``SMALL_TOL`` below ``SMALL_M`` examples, else ``TOL``. With few examples each
#: support vector weighs on the boundary: at C=2 over 100 splits of the small sets, 3 random
#: starts each (``benchmarks/svm_small.py --c-sweep``), tol 0.2 is 0.42 points below
#: scikit-learn on iris and 0.1 0.30, for 4-8% more time; from 1,257 examples on 0.3 is within
#: 0.25 points and 0.1 costs 10-20% more time (a9a, w8a: 1.5-2x the iterations for <= 0.1 point).
SMALL_M, SMALL_TOL, TOL = 1000, 0.1, 0.3
#: ``tol="auto"`` where the Gaussian kernel leaves most examples without a near neighbour
#: (:mod:`torchfw.svm._isolation`): each decision is then one or two support vectors and the
#: intercept, with no sum to average the solver's errors out. Raw svmguide1, LIBSVM's
#: C = 2^3, 2^7, 2^15 at gamma = 2^-1 and 2^7 at 2^1, 2^-3, 5-fold CV (``benchmarks/svm_grid.py
#: --c ... --gamma ...``): at tol 0.3 up to 1.29 points below LIBSVM, at 0.1 up to 0.90, at
#: 0.03 up to 0.39, at 0.01 up to 0.22 (in about 2.5x the iterations of 0.3, under LIBSVM's
#: time). Short of isolation ``tol="auto"`` grows from this value with the number of examples
#: that weigh in a decision (:func:`stop_tol`).
ISOLATED_TOL = 0.01

#: ``max_iter=-1`` (scikit-learn's "no limit"): a budget no run reaches.
NO_LIMIT = 2**62
#: The default budget, per example of a binary problem: a safety net. Since the corrective
#: step (:mod:`torchfw.optimizers._face`) no converging fit measured came near it (the grid of
#: ``benchmarks/svm_grid.py``: raw svmguide1 at C = 2^16 stops after 5 iterations per
#: example).
ITERATIONS_PER_EXAMPLE = 100
#: Iterations between two checks of the gap in the compiled loop: the host engine's default, so
#: that the compiled and the lazy path stop at the same iteration.
CHECK_EVERY = 10
#: From this many training examples on, SVC solves a binary problem on the sampled storage
#: (:mod:`torchfw.svm._large`) by default: see the crossover measured by
#: ``benchmarks/svm_large.py --crossover``, in docs/svc.md. The plan's ``large_m``.
LARGE_M = 200_000
#: Examples of the subset whose solution starts a sampled solve (:mod:`torchfw.svm._large`;
#: at least ``n_init``). The plan's ``warm_subset``: 0 starts from the ``n_init`` subset alone,
#: seed 002's own start (``benchmarks/svm_large.py --table4``).
WARM_SUBSET = 3000
#: Solvers that have a sampled form.
SAMPLED_SOLVERS = ("fw", "away", "pairwise", "swap", "swap2", "partan")
#: The streaming solvers (seed 001): one epoch by default, no relative stopping rule.
STREAMING = ("sfw", "msfw")
#: Solvers the batched one-vs-rest engine runs (it has no streaming, SWAP-2o or fully
#: corrective form).
BATCHED_SOLVERS = ("fw", "away", "pairwise", "swap", "partan")


def feature_dtype(dtype) -> torch.dtype:
    """The precision the features of a fit with ``SVC(dtype=dtype)`` are read in: float32
    unless given. The kernel's precision starts from it and is raised to float64 only where
    float32 would round the dual's :math:`1/C` away
    (:func:`torchfw.svm._kernel_range.kernel_dtype`); the plan's ``dtype`` is that result."""
    return dtype or torch.float32


def enough_neighbours(n_examples: int) -> float:
    """The neighbour sum (:func:`torchfw.svm._isolation.neighbour_weights`) from which
    ``tol="auto"`` is the size's tolerance :math:`t_1` (:func:`stop_tol`): :math:`t_1 /`
    :data:`ISOLATED_TOL`."""
    return (SMALL_TOL if n_examples < SMALL_M else TOL) / ISOLATED_TOL


def stop_tol(tol, n_examples: int, probability: bool, isolated: bool = False,
             neighbours: float | None = None) -> float:
    r"""The ``tol`` the solves stop at: ``"auto"`` resolved on ``n_examples`` (:data:`SMALL_M`)
    and the Gaussian kernel's neighbours (:func:`torchfw.svm._isolation.neighbour_weights`),
    at most :data:`PROBABILITY_TOL` with probabilities.

    ``"auto"`` is :data:`ISOLATED_TOL` where the examples are isolated (``isolated``), and
    else the size's tolerance :math:`t_1` (:data:`SMALL_TOL` or :data:`TOL`) scaled down where
    a decision weighs few examples: with ``neighbours`` :math:`= n`, the median summed kernel
    value of the other examples,

    .. math::

        t = \min\left(t_1, \max(1, n)\, t_0\right), \qquad t_0 = \text{ISOLATED\_TOL}.

    Why linear in :math:`n`: :data:`ISOLATED_TOL` is what a decision made of one support vector
    and the intercept needs; a decision that sums :math:`n` comparable terms averages their
    independent errors, whose variance, as the relative gap's, falls as :math:`1/n`, so the
    same decision error allows an :math:`n` times larger gap. ``neighbours`` None (not probed):
    :math:`t_1`.
    """
    if isinstance(tol, str):
        tol = SMALL_TOL if n_examples < SMALL_M else TOL
        if isolated:
            tol = ISOLATED_TOL
        elif neighbours is not None:
            tol = min(tol, max(1.0, neighbours) * ISOLATED_TOL)
    return min(float(tol), PROBABILITY_TOL) if probability else float(tol)


@dataclass(frozen=True)
class FitPlan:
    """Everything the solves of one fit read, resolved from the estimator and the data.

    Attributes
    ----------
    solver : str
        The solver name (:mod:`torchfw.solvers`).
    tol : float
        The resolved ``tol``: the solves stop at relative gap :math:`g / \\rho \\le` ``tol``.
    gap_tol, rtol : float
        The stopping numbers handed to every solve: absolute gap floor (1e-300: none) and gap
        relative to the dual objective (``2 * tol``; see the module docstring).
    check_every : int or None
        Iterations between gap checks; None: the optimizer's default (:data:`CHECK_EVERY` on
        the host, which the compiled loop uses).
    max_iter : int or None
        ``max_iter`` as given (None: the default budget, -1: none); see :meth:`budget`.
    seed : int
        The fit's seed (:meth:`problem_seed`).
    kernel : Kernel, CallableKernel or None
        The kernel object (None: ``kernel="precomputed"``).
    kernel_param : str or callable
        ``SVC(kernel=...)`` as given (names in messages, the float64 RBF's row rule).
    dtype : torch.dtype
        Precision of the kernel values (:func:`torchfw.svm._kernel_range.kernel_dtype`).
    cache_size : float
        Kernel cache in MB, as given (matrices, row caches, column caches).
    sample_size : int or None
        Candidates of the randomized LMO.
    large_m : int
        Examples from which a binary problem takes the sampled storage (:data:`LARGE_M`).
    warm_subset : int
        Examples of the subset solved to start a sampled solve (:data:`WARM_SUBSET`; at least
        ``n_init`` are taken).
    time_limit : float or None
        Wall-clock budget per binary problem.
    n_init : int
        Size of the random initial subset.
    verbose : bool
        Report progress.
    progress : bool
        A progress bar would be drawn (``verbose`` on a terminal), which only the lazy path has.
    average : bool or int
        ``SVC(average=...)`` of the streaming solvers.
    dense : "auto" or bool
        ``SVC(dense=...)``: the compiled path's switch.
    batched : bool
        Solve one-vs-rest problems as one batched solve where the batched engine applies
        (:meth:`batches`); resolved True on CUDA, where one launch replaces ``k``.
    estimator : str
        The estimator's name, in messages.
    solvers : str
        The registry entry whose names ``solver`` is checked against (``"svc"`` or
        ``"distributed"``).
    corrective : bool
        Whether the optimizers take the active-set corrective step (every SVC solve; the
        compiled path has it built in).
    """

    solver: str
    tol: float
    rtol: float
    max_iter: int | None
    seed: int
    kernel: Any
    kernel_param: Any
    dtype: torch.dtype
    cache_size: float
    n_init: int
    gap_tol: float = 1e-300
    check_every: int | None = None
    sample_size: int | None = None
    large_m: int = LARGE_M
    warm_subset: int = WARM_SUBSET
    time_limit: float | None = None
    verbose: bool = False
    progress: bool = False
    average: Any = True
    dense: Any = "auto"
    batched: bool = False
    estimator: str = "SVC"
    solvers: str = "svc"
    corrective: bool = True

    # -- what the paths read -------------------------------------------------------------------

    @property
    def streaming(self) -> bool:
        """Whether the solver is a streaming one (seed 001: one example per iteration)."""
        return self.solver in STREAMING

    @property
    def custom_kernel(self) -> bool:
        """Whether the kernel is precomputed or callable: given as values, not by a formula."""
        return callable(self.kernel_param) or self.kernel_param == "precomputed"

    def problem_seed(self, k: int) -> int:
        """The seed of binary problem ``k``'s draws (problems draw independently)."""
        return self.seed + k

    def default_budget(self, m: int) -> int:
        """The default iteration budget of a problem of ``m`` examples:
        :data:`ITERATIONS_PER_EXAMPLE` per example, one epoch (``m``) for the streaming
        solvers (seed 001's setting)."""
        return m if self.streaming else ITERATIONS_PER_EXAMPLE * m

    def budget(self, m: int) -> int:
        """The iteration budget of one binary problem of ``m`` examples: ``max_iter``, or
        :meth:`default_budget` when it is None, or :data:`NO_LIMIT` for ``-1``."""
        if self.max_iter is None:
            return self.default_budget(m)
        if self.max_iter == -1:
            return NO_LIMIT
        return int(self.max_iter)

    def stopping(self) -> tuple[float, float, int]:
        """``(gap_tol, rtol, check_every)`` of the compiled loop: the numbers the lazy path's
        optimizer stops on (:meth:`optimizer`), so that both paths stop at the same
        iteration."""
        every = CHECK_EVERY if self.check_every is None else self.check_every
        return float(self.gap_tol), float(self.rtol), every

    def optimizer(self, **options) -> ConstrainedOptimizer:
        """The optimizer of solver ``solver`` over the dual's simplex, stopping on the plan's
        numbers (``options`` may replace them: the streaming solvers run ``rtol=0``)."""
        settings: dict[str, Any] = {"tol": self.gap_tol, "rtol": self.rtol}
        if self.check_every is not None:
            settings["check_every"] = self.check_every
        if self.corrective:
            settings["corrective"] = True
        return make_solver(self.solver, Simplex(), estimator=self.solvers,
                           **{**settings, **options})

    def sampled(self, m: int) -> bool:
        """Whether a binary problem of ``m`` examples is solved on the sampled storage (seed
        002's randomized FW, :mod:`torchfw.svm._large`): for its solvers, with
        ``sample_size`` or from ``large_m`` examples."""
        if self.solver not in SAMPLED_SOLVERS:
            return False
        return self.sample_size is not None or m >= self.large_m

    def batches(self, problems) -> bool:
        """Whether the binary ``problems`` are solved as one batched one-vs-rest solve.

        With ``batched``, for several one-vs-rest problems (no row subsets), a solver the
        batched engine has, and neither candidate sampling nor a clock, which it lacks: with
        either option set the problems are solved one by one, so that the option means what it
        says.
        """
        return self.batched and len(problems) > 1 and problems[0].rows is None and \
            self.solver in BATCHED_SOLVERS and self.sample_size is None and \
            self.time_limit is None

    def warn_unconverged(self, status, n_iter: int, gap: float, value: float, *,
                         where: str = "", gap_name: str = "relative gap",
                         stacklevel: int = 2) -> None:
        """Issue the :class:`~torchfw.exceptions.ConvergenceWarning` of a solve that stopped on
        ``status`` (its budget or clock) at ``gap`` of the dual value ``value``: the relative
        gap :math:`g / \\rho = g / (2 f)` it reached against ``tol``. ``where`` names the
        storage or problem."""
        warnings.warn(f"{self.estimator} solver {self.solver!r}{where} stopped on {status} "
                      f"after {n_iter} iterations with {gap_name} "
                      f"{gap / max(2 * value, 1e-300):.3g} > tol={self.tol}",
                      exceptions.ConvergenceWarning, stacklevel=stacklevel + 1)


def resolve_plan(model, *, n_examples: int, kernel, dtype: torch.dtype, device: torch.device,
                 isolated: bool = False, neighbours: float | None = None,
                 **overrides) -> FitPlan:
    """The :class:`FitPlan` of a fit of ``model`` (an :class:`~torchfw.SVC`) on ``n_examples``
    examples on ``device``, with the fit's ``kernel`` object and kernel ``dtype``; ``isolated``:
    the Gaussian kernel leaves the examples isolated, ``neighbours``: the median summed kernel
    value of the other examples (:mod:`torchfw.svm._isolation`; both set ``tol="auto"``'s
    value, :func:`stop_tol`);
    ``overrides`` replace resolved fields (:func:`fit_planned`; a ValueError names an unknown
    one).

    Reads the parameters and the seed the fit drew (``_fit_seed``,
    :meth:`~torchfw.svm._sklearn.SklearnSVCMixin._begin_fit`).
    """
    tol = stop_tol(model.tol, n_examples, bool(getattr(model, "probability", False)), isolated,
                   neighbours)
    plan = FitPlan(
        solver=model.solver, tol=tol, rtol=2.0 * tol, max_iter=model.max_iter,
        seed=getattr(model, "_fit_seed", 0), kernel=kernel, kernel_param=model.kernel,
        dtype=dtype, cache_size=model.cache_size, n_init=model.n_init,
        sample_size=model.sample_size, time_limit=model.time_limit,
        verbose=bool(model.verbose), progress=bool(model.verbose) and bar_shown(),
        average=model.average, dense=model.dense, batched=device.type == "cuda",
        estimator=type(model).__name__)
    if overrides:
        unknown = sorted(set(overrides) - {f.name for f in dataclasses.fields(FitPlan)})
        if unknown:
            raise ValueError(f"unknown plan fields {unknown}; a FitPlan has "
                             f"{[f.name for f in dataclasses.fields(FitPlan)]}")
        plan = dataclasses.replace(plan, **overrides)
    return plan


def fit_planned(model, X, y, sample_weight=None, **overrides):
    """``model.fit(X, y, sample_weight)`` with fields of its resolved :class:`FitPlan` replaced.

    For tests and benchmarks that need a path or rule the parameters do not select, e.g.
    ``fit_planned(SVC(), X, y, batched=True)`` (the batched one-vs-rest engine on the CPU),
    ``gap_tol=1e-4, rtol=0.0`` (stop on the absolute gap), ``large_m=1000`` (the sampled
    storage from 1,000 examples), ``warm_subset=0`` (a sampled solve started from the
    ``n_init`` subset alone). Returns ``model``, fitted as :meth:`SVC.fit` fits it.
    """
    return fit_atomically(model, type(model)._fit_input, X, y, sample_weight, overrides)
