"""torchfw: Frank-Wolfe optimizers for PyTorch, and the models they train best.

Core: constraint sets (:mod:`torchfw.sets`), step sizes (:mod:`torchfw.linesearch`),
objectives (:mod:`torchfw.objectives`) and the Frank-Wolfe family (:mod:`torchfw.optimizers`).
Models built on it: kernel SVMs (:class:`SVC`, :mod:`torchfw.svm`), the Lasso and its SVM
equivalence (:class:`Lasso`, :mod:`torchfw.lasso`), Weston-Watkins multiclass SVMs
(:class:`WestonWatkinsSVC`, :mod:`torchfw.ww`) and a ``torch.optim`` optimizer (:mod:`torchfw.optim`).
Multi-process training lives in :mod:`torchfw.distributed`.

Everything is imported on first use (PEP 562 module ``__getattr__``): ``import torchfw`` costs
little more than ``import torch``, and numba, SciPy or scikit-learn load only with the code that
needs them. Submodules are attributes as in ``torch`` (``torchfw.optim.StochasticFrankWolfe``
after a plain ``import torchfw``). Those first-use imports run with Python's cyclic garbage
collector paused (:func:`torchfw.utils.collector.paused`: they allocate only long-lived objects).
"""

from __future__ import annotations

import importlib
import importlib.util
from typing import TYPE_CHECKING

__version__ = "0.1.0"

# Public name -> submodule that defines it (imported when the name is first read).
_LAZY = {
    "LMO": "sets", "AtomicLMO": "sets", "Simplex": "sets", "L1Ball": "sets",
    "L2Ball": "sets", "LinfBall": "sets", "Box": "sets",
    "KSparsePolytope": "sets", "LpBall": "sets", "GroupL1Ball": "sets",
    "Hypercube": "sets", "Birkhoff": "sets", "NuclearNormBall": "sets",
    "Spectraplex": "sets",
    "LineSearch": "linesearch", "Line": "linesearch", "ExactLineSearch": "linesearch",
    "OpenLoop": "linesearch", "ShortStep": "linesearch", "Backtracking": "linesearch",
    "Objective": "objectives", "FunctionObjective": "objectives", "Quadratic": "objectives",
    "ColumnOperator": "objectives", "DenseOperator": "objectives",
    "ConstrainedOptimizer": "optimizers", "FrankWolfe": "optimizers",
    "AwayStepFrankWolfe": "optimizers", "PairwiseFrankWolfe": "optimizers",
    "SwapFrankWolfe": "optimizers", "PartanFrankWolfe": "optimizers",
    "FullyCorrectiveFrankWolfe": "optimizers", "sample_size_for": "optimizers",
    "BlendedPairwiseConditionalGradient": "optimizers", "LazyFrankWolfe": "optimizers",
    "BlockCoordinateDescent": "optimizers.bcd",
    "Result": "result", "Status": "result", "History": "result", "IterationInfo": "result",
    "ActiveSet": "result",
    "WestonWatkinsSVC": "ww", "walrus": "ww",
    "Lasso": "lasso", "lasso_path": "lasso", "SVC": "svm", "svm_dual_problem": "svm",
}

__all__ = [
    "LMO", "AtomicLMO", "Simplex", "L1Ball", "L2Ball", "LinfBall", "Box",
    "KSparsePolytope", "LpBall", "GroupL1Ball", "Hypercube", "Birkhoff", "NuclearNormBall",
    "Spectraplex",
    "LineSearch", "Line", "ExactLineSearch", "OpenLoop", "ShortStep", "Backtracking",
    "Objective", "FunctionObjective", "Quadratic", "ColumnOperator", "DenseOperator",
    "ConstrainedOptimizer", "FrankWolfe", "AwayStepFrankWolfe", "PairwiseFrankWolfe",
    "SwapFrankWolfe", "PartanFrankWolfe", "FullyCorrectiveFrankWolfe", "sample_size_for",
    "BlendedPairwiseConditionalGradient", "LazyFrankWolfe",
    "Result", "Status", "History", "IterationInfo", "ActiveSet",
    "WestonWatkinsSVC", "BlockCoordinateDescent", "walrus",
    "Lasso", "lasso_path", "SVC", "svm_dual_problem",
]

if TYPE_CHECKING:  # static checkers and IDEs see the eager imports
    from .lasso import Lasso, lasso_path
    from .linesearch import Backtracking, ExactLineSearch, Line, LineSearch, OpenLoop, ShortStep
    from .objectives import ColumnOperator, DenseOperator, FunctionObjective, Objective, Quadratic
    from .optimizers import (
        AwayStepFrankWolfe,
        BlendedPairwiseConditionalGradient,
        ConstrainedOptimizer,
        FrankWolfe,
        FullyCorrectiveFrankWolfe,
        LazyFrankWolfe,
        PairwiseFrankWolfe,
        PartanFrankWolfe,
        SwapFrankWolfe,
        sample_size_for,
    )
    from .optimizers.bcd import BlockCoordinateDescent
    from .result import ActiveSet, History, IterationInfo, Result, Status
    from .sets import (
        LMO,
        AtomicLMO,
        Birkhoff,
        Box,
        GroupL1Ball,
        Hypercube,
        KSparsePolytope,
        L1Ball,
        L2Ball,
        LinfBall,
        LpBall,
        NuclearNormBall,
        Simplex,
        Spectraplex,
    )
    from .svm import SVC, svm_dual_problem
    from .ww import WestonWatkinsSVC, walrus


def _collector_paused():
    from .utils.collector import paused

    return paused()


def __getattr__(name: str):
    module = _LAZY.get(name)
    if module is not None:
        with _collector_paused():
            value = getattr(importlib.import_module(f".{module}", __name__), name)
        globals()[name] = value  # later reads are plain attribute reads
        return value
    if not name.startswith("_") and importlib.util.find_spec(f".{name}", __name__) is not None:
        with _collector_paused():
            return importlib.import_module(f".{name}", __name__)  # binds the attribute
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(__all__))
