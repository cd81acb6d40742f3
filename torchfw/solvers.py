r"""The public registry of Frank-Wolfe solvers by name.

One concern: the names that ``solver=`` accepts (in :class:`~torchfw.svm.SVC`,
:class:`~torchfw.lasso.Lasso`, :class:`~torchfw.distributed.DistributedSVC` and the command
line), the optimizer class each name builds, the options the name fixes, and which estimators
accept it. Every list of solver names in the package is read from :data:`SOLVERS`, so adding a
solver is one entry here.

Each entry is a :class:`SolverSpec`; :func:`make_solver` builds the optimizer::

    from torchfw.sets.oracles import Simplex
    from torchfw.solvers import make_solver, solver_names

    solver_names("lasso")                     # ('fw', 'away', 'pairwise', 'swap', 'partan')
    opt = make_solver("swap2", Simplex(), tol=1e-6)   # SwapFrankWolfe(second_order=True)

The methods: Frank-Wolfe (Frank & Wolfe 1956), away steps and pairwise steps (Wolfe 1970;
Lacoste-Julien & Jaggi 2015), SWAP and its second-order choice of the away atom (seed 000),
PARTAN (seed 002), the fully corrective variant, and the *streaming* stochastic FW without and
with away steps of seed 001 (Ouyang & Gray's SFW and MSFW, ``stream=True``: one random example
per iteration, in arrival order, over a working set). The streaming solvers ``"sfw"``/``"msfw"``
are not :class:`torchfw.optim.StochasticFrankWolfe`, the ``torch.optim`` optimizer of Pokutta,
Spiegel & Zimmer (stochastic gradients of network weights, with momentum): two algorithms that
share the words "stochastic Frank-Wolfe", which is why the descriptions below say "streaming".
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from .linesearch import ExactLineSearch, LineSearch
from .optimizers import (
    AwayStepFrankWolfe,
    ConstrainedOptimizer,
    FrankWolfe,
    FullyCorrectiveFrankWolfe,
    PairwiseFrankWolfe,
    PartanFrankWolfe,
    SwapFrankWolfe,
)
from .sets.oracles import LMO

__all__ = ["SolverSpec", "SOLVERS", "ESTIMATORS", "solver_names", "get_solver", "make_solver"]

#: The estimators whose ``solver=`` reads this registry (:attr:`SolverSpec.estimators`).
ESTIMATORS = ("svc", "lasso", "distributed")


@dataclass(frozen=True)
class SolverSpec:
    """One solver name: the optimizer class, the options the name fixes, who accepts it.

    Parameters
    ----------
    name : str
    optimizer : type
        A :class:`~torchfw.optimizers.ConstrainedOptimizer` subclass.
    options : Mapping
        Constructor options fixed by the name (``second_order=True`` for ``"swap2"``,
        ``stream=True`` for the streaming solvers); a caller may not pass them again.
    estimators : frozenset of str
        Which of :data:`ESTIMATORS` accept the name (``"distributed"`` is
        :class:`~torchfw.distributed.DistributedSVC`).
    description : str
        One line for help texts.
    """

    name: str
    optimizer: type[ConstrainedOptimizer]
    options: Mapping[str, Any] = field(default_factory=dict)
    estimators: frozenset = frozenset(ESTIMATORS)
    description: str = ""

    def __post_init__(self):
        if not (isinstance(self.optimizer, type)
                and issubclass(self.optimizer, ConstrainedOptimizer)):
            raise TypeError(f"solver {self.name!r}: optimizer must be a ConstrainedOptimizer "
                            f"subclass, got {self.optimizer!r}")
        unknown = set(self.estimators) - set(ESTIMATORS)
        if unknown:
            raise ValueError(f"solver {self.name!r}: unknown estimators {sorted(unknown)}; "
                             f"expected a subset of {ESTIMATORS}")
        object.__setattr__(self, "options", MappingProxyType(dict(self.options)))
        object.__setattr__(self, "estimators", frozenset(self.estimators))

    @property
    def streaming(self) -> bool:
        """Whether the name runs seed 001's streaming stochastic FW (``stream=True``; not
        :class:`torchfw.optim.StochasticFrankWolfe`)."""
        return bool(self.options.get("stream", False))

    def build(self, lmo: LMO, line_search: LineSearch | None = None,
              **kwargs) -> ConstrainedOptimizer:
        """``optimizer(lmo, line_search or ExactLineSearch(), **options, **kwargs)``."""
        fixed = sorted(set(kwargs) & set(self.options))
        if fixed:
            raise ValueError(f"solver {self.name!r} fixes {fixed}; do not pass them")
        return self.optimizer(lmo, line_search if line_search is not None else ExactLineSearch(),
                              **self.options, **kwargs)


_NO_LASSO = frozenset({"svc", "distributed"})

#: Every solver name, in the order help texts list them.
SOLVERS: Mapping[str, SolverSpec] = MappingProxyType({spec.name: spec for spec in (
    SolverSpec("fw", FrankWolfe, description="Frank-Wolfe"),
    SolverSpec("away", AwayStepFrankWolfe, description="away-step Frank-Wolfe (MFW)"),
    SolverSpec("pairwise", PairwiseFrankWolfe, description="pairwise Frank-Wolfe"),
    SolverSpec("swap", SwapFrankWolfe, description="SWAP (seed 000)"),
    SolverSpec("swap2", SwapFrankWolfe, {"second_order": True}, _NO_LASSO,
               "SWAP with the second-order away atom (SWAP-2o, seed 000)"),
    SolverSpec("partan", PartanFrankWolfe, description="PARTAN (seed 002)"),
    SolverSpec("fc", FullyCorrectiveFrankWolfe, estimators=_NO_LASSO,
               description="fully corrective Frank-Wolfe (CVM-like)"),
    SolverSpec("sfw", FrankWolfe, {"stream": True}, frozenset({"svc"}),
               "streaming stochastic Frank-Wolfe, SFW (seed 001, Ouyang & Gray)"),
    SolverSpec("msfw", AwayStepFrankWolfe, {"stream": True}, frozenset({"svc"}),
               "streaming stochastic Frank-Wolfe with away steps, MSFW (seed 001)"),
)})


def solver_names(estimator: str | None = None) -> tuple[str, ...]:
    """The names ``estimator`` (one of :data:`ESTIMATORS`; default: any) accepts, in order."""
    if estimator is not None and estimator not in ESTIMATORS:
        raise ValueError(f"unknown estimator {estimator!r}; expected one of {ESTIMATORS}")
    return tuple(name for name, spec in SOLVERS.items()
                 if estimator is None or estimator in spec.estimators)


def get_solver(name: str, estimator: str | None = None) -> SolverSpec:
    """The :class:`SolverSpec` of ``name``; a clear error if ``estimator`` does not accept it."""
    names = solver_names(estimator)
    if not isinstance(name, str) or name not in names:
        where = "" if estimator is None else f" for {estimator}"
        raise ValueError(f"unknown solver {name!r}{where}; expected one of {names}")
    return SOLVERS[name]


def make_solver(name: str, lmo: LMO, line_search: LineSearch | None = None, *,
                estimator: str | None = None, **kwargs) -> ConstrainedOptimizer:
    """Build the optimizer of solver ``name`` over ``lmo`` (see :meth:`SolverSpec.build`)."""
    return get_solver(name, estimator).build(lmo, line_search, **kwargs)
