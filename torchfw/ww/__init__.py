"""The Weston–Watkins multiclass SVM (Wang & Scott, ICML 2021): estimator, dual, Walrus.

==============  ===========================================================================
``estimator``   :class:`WestonWatkinsSVC` and :func:`ww_problem`
``subproblem``  the exact block subproblem solver (:func:`walrus`, :func:`walrus_batched`)
``_problem``    the dual as a block problem for :class:`~torchfw.optimizers.bcd.BlockCoordinateDescent`
``_sweep``      the compiled epoch and objectives
``_blocks``     the compiled block solvers (Walrus, iterative, Frank-Wolfe)
``_csr``        the CSR layout every kernel reads
==============  ===========================================================================
"""

from .estimator import WestonWatkinsSVC, WWProblem, ww_problem
from .subproblem import walrus, walrus_batched

__all__ = ["WestonWatkinsSVC", "WWProblem", "ww_problem", "walrus", "walrus_batched"]

