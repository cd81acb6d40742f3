"""Frank-Wolfe-type optimizers sharing one base class (:class:`ConstrainedOptimizer`)."""

from ._stopping import StoppingRule
from .away import AwayStepFrankWolfe, PairwiseFrankWolfe
from .base import ConstrainedOptimizer
from .bpcg import BlendedPairwiseConditionalGradient
from .frank_wolfe import FrankWolfe
from .fully_corrective import FullyCorrectiveFrankWolfe
from .lazy import LazyFrankWolfe
from .partan import PartanFrankWolfe
from .sampling import sample_size_for
from .swap import SwapFrankWolfe

__all__ = [
    "ConstrainedOptimizer",
    "FrankWolfe",
    "AwayStepFrankWolfe",
    "PairwiseFrankWolfe",
    "SwapFrankWolfe",
    "PartanFrankWolfe",
    "FullyCorrectiveFrankWolfe",
    "BlendedPairwiseConditionalGradient",
    "LazyFrankWolfe",
    "sample_size_for",
    "StoppingRule",
]
