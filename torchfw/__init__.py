"""torchfw: Frank-Wolfe optimizers for PyTorch, and the models they train best.

Core: constraint sets (:mod:`torchfw.oracles`), step sizes (:mod:`torchfw.linesearch`),
objectives (:mod:`torchfw.objectives`) and the Frank-Wolfe family (:mod:`torchfw.optimizers`).
Models built on it: kernel SVMs (:class:`SVC`, :mod:`torchfw.kernels`), the Lasso and its SVM
equivalence (:class:`Lasso`, :mod:`torchfw.equivalence`), Weston-Watkins multiclass SVMs
(:class:`WestonWatkinsSVC`) and a ``torch.optim`` optimizer (:mod:`torchfw.optim`).
Multi-process training lives in :mod:`torchfw.distributed` (imported on demand).
"""

from .lasso import Lasso, lasso_path
from .linesearch import Backtracking, ExactLineSearch, Line, LineSearch, OpenLoop, ShortStep
from .multiclass import WestonWatkinsSVC
from .objectives import ColumnOperator, DenseOperator, FunctionObjective, Objective, Quadratic
from .optimizers import (
    AwayStepFrankWolfe,
    ConstrainedOptimizer,
    FrankWolfe,
    FullyCorrectiveFrankWolfe,
    PairwiseFrankWolfe,
    PartanFrankWolfe,
    SwapFrankWolfe,
    sample_size_for,
)
from .optimizers.bcd import BlockCoordinateDescent
from .oracles import LMO, AtomicLMO, Box, L1Ball, L2Ball, LinfBall, Simplex
from .result import History, IterationInfo, Result, Status
from .svm import SVC
from .walrus import walrus

__version__ = "0.1.0"

__all__ = [
    "LMO", "AtomicLMO", "Simplex", "L1Ball", "L2Ball", "LinfBall", "Box",
    "LineSearch", "Line", "ExactLineSearch", "OpenLoop", "ShortStep", "Backtracking",
    "Objective", "FunctionObjective", "Quadratic", "ColumnOperator", "DenseOperator",
    "ConstrainedOptimizer", "FrankWolfe", "AwayStepFrankWolfe", "PairwiseFrankWolfe",
    "SwapFrankWolfe", "PartanFrankWolfe", "FullyCorrectiveFrankWolfe", "sample_size_for",
    "Result", "Status", "History", "IterationInfo",
    "WestonWatkinsSVC", "BlockCoordinateDescent", "walrus",
    "Lasso", "lasso_path", "SVC",
]
