"""Kernel support vector classification: the :class:`SVC` estimator and everything it is built from.

Where to find what (one purpose per module):

==========================  ==================================================================
``estimator``               :class:`SVC`: parameters, ``fit`` / ``predict``, save and load
``problem``                 the L2-SVM dual as a quadratic over the simplex (:func:`svm_dual_problem`)
``kernels``                 kernels as lazy, chunked column operators (the signed kernel rows)
``_kernel_cpu``             compiled kernel rows on the CPU
``_params``                 parameter checks
``_plan``                   the plan of a fit: solver, stopping numbers, budget, seeds, path
``_fit``, ``_dense``        the fit paths: the compiled whole solve of small problems
``_binary``                 one binary problem off the compiled path: sampled or lazy
``_pairs``                  one-vs-one pairs of the shared matrix solved in compiled blocks
``_sparse_gram``            the kernel matrix of sparse examples, without a dense copy
``_lazy``, ``_large``       lazy columns; seed 002's sampled solve of large problems
``_matrix``, ``_custom``    whole kernel matrices, row caches; precomputed and callable kernels
``_batched``                batched one-vs-rest on a GPU
``_multiclass``             one-vs-rest and one-vs-one bookkeeping
``_start``                  starting points and initial subsets
``_state``                  the fitted model's state dict
``_probability``            Platt probabilities (``probability=True``)
``calibration``             Platt scaling and pairwise coupling, as functions
==========================  ==================================================================
"""

from .estimator import SOLVERS, SVC
from .problem import svm_dual_problem

__all__ = ["SVC", "SOLVERS", "svm_dual_problem"]

