"""What a solve returns: the iterate, its certificate and how the run went."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any

import torch

__all__ = ["Status", "Result", "History", "IterationInfo", "ActiveSet", "problem_results"]


class Status(str, enum.Enum):
    """Why a solve stopped."""

    CONVERGED = "converged"  #: the duality gap fell below the tolerance
    MAX_ITER = "max_iter"  #: the iteration budget ran out
    TIME_LIMIT = "time_limit"  #: the wall-clock budget ran out
    CALLBACK = "callback"  #: the callback asked to stop
    NONFINITE = "nonfinite"  #: a NaN/inf appeared; the last finite iterate is returned

    def __str__(self) -> str:  # so that f"{status}" prints "converged"
        return self.value


@dataclass
class History:
    """Per-check records of a run (one entry every ``check_every`` iterations).

    Attributes
    ----------
    iteration, value, gap, time : list
        Iteration count, objective value, Frank-Wolfe gap and seconds since the start.
    steps : list of dict
        Cumulative count of each step type (e.g. ``{"fw": 120, "away": 30, "drop": 4}``).
    """

    iteration: list[int] = field(default_factory=list)
    value: list[float] = field(default_factory=list)
    gap: list[float] = field(default_factory=list)
    time: list[float] = field(default_factory=list)
    steps: list[dict[str, int]] = field(default_factory=list)

    def append(self, iteration: int, value: float, gap: float, time: float,
               steps: dict[str, int]) -> None:
        self.iteration.append(iteration)
        self.value.append(value)
        self.gap.append(gap)
        self.time.append(time)
        self.steps.append(dict(steps))

    def __len__(self) -> int:
        return len(self.iteration)


@dataclass
class IterationInfo:
    """What a callback receives at each check.

    Return ``True`` from the callback (or raise ``StopIteration``) to stop the run with status
    :attr:`Status.CALLBACK`.
    """

    iteration: int
    value: float
    gap: float
    elapsed: float
    steps: dict[str, int]
    x: torch.Tensor


@dataclass
class ActiveSet:
    r"""The iterate as a convex combination of vertices: :math:`x = \sum_k w_k a_k`.

    Active-set solvers (:class:`~torchfw.optimizers.BlendedPairwiseConditionalGradient`,
    :class:`~torchfw.optimizers.LazyFrankWolfe`) return it as :attr:`Result.active_set` and take
    it back as ``minimize(..., active_set=...)`` to start a later solve from it (a warm start
    that keeps the vertices, not only the point).

    Attributes
    ----------
    atoms : Tensor of shape (m, n)
        The vertices, one per row.
    weights : Tensor of shape (m,)
        Positive weights summing to one.
    """

    atoms: torch.Tensor
    weights: torch.Tensor

    def __post_init__(self) -> None:
        if self.atoms.dim() != 2 or self.weights.dim() != 1 or \
                self.atoms.shape[0] != self.weights.shape[0] or self.atoms.shape[0] == 0:
            raise ValueError(f"ActiveSet needs atoms of shape (m, n) and weights of shape (m,), "
                             f"m >= 1; got {tuple(self.atoms.shape)} and "
                             f"{tuple(self.weights.shape)}")
        if bool((self.weights < 0).any()) or \
                abs(float(self.weights.sum()) - 1.0) > 1e-6:
            raise ValueError("ActiveSet weights must be non-negative and sum to one")

    def point(self) -> torch.Tensor:
        r"""The iterate :math:`\sum_k w_k a_k`."""
        return self.weights.to(self.atoms.dtype) @ self.atoms

    def __len__(self) -> int:
        return self.atoms.shape[0]


@dataclass
class Result:
    """Outcome of :meth:`torchfw.ConstrainedOptimizer.minimize`.

    Attributes
    ----------
    x : Tensor
        Final iterate (feasible).
    value : float
        Objective value at ``x``.
    gap : float
        Frank-Wolfe duality gap at ``x``: ``max_v <grad f(x), x - v>`` over the set, an upper bound
        on ``f(x) - min f``.
    n_iter : int
        Iterations performed.
    status : Status
        Why the run stopped.
    history : History
        Values and gaps at each check.
    weights : Tensor or None
        Active-set weights over the atoms (atomic sets only).
    best_gap : float
        Smallest gap seen at any check.
    average : Tensor or None
        Streaming runs with ``average_from``: the mean of the iterates from that iteration on
        (feasible: a convex combination of iterates); ``value`` and ``gap`` are those of ``x``.
        ``None`` otherwise.
    average_value : float or None
        The objective at ``average`` (at most the mean of the averaged iterates' values, by
        convexity).
    active_set : ActiveSet or None
        Active-set solvers (blended pairwise, lazified FW): the vertices and weights of ``x``,
        to warm-start a later solve. ``None`` for the other solvers.
    """

    x: torch.Tensor
    value: float
    gap: float
    n_iter: int
    status: Status
    history: History
    weights: torch.Tensor | None = None
    best_gap: float = float("inf")
    average: torch.Tensor | None = None
    average_value: float | None = None
    info: dict[str, Any] = field(default_factory=dict)
    active_set: ActiveSet | None = None

    @property
    def converged(self) -> bool:
        return self.status is Status.CONVERGED

    @property
    def steps(self) -> dict[str, int]:
        """Cumulative count of each step type over the run."""
        return self.history.steps[-1] if self.history.steps else {}

    def __repr__(self) -> str:
        return (f"Result(status={self.status.value}, value={self.value:.6g}, gap={self.gap:.3g}, "
                f"n_iter={self.n_iter}, x.shape={tuple(self.x.shape)})")


def problem_results(result) -> list:
    """A fitted estimator's ``result_`` as a list of per-problem :class:`Result` objects.

    ``result_`` is one :class:`Result` for one problem, a list for several, or a sequence that
    builds each problem's :class:`Result` on read (SVC's one-vs-one pairs solved in compiled
    blocks keep only their final numbers): code that reads every problem's record takes this
    list instead of testing for a ``list``.
    """
    return [result] if isinstance(result, Result) else list(result)
