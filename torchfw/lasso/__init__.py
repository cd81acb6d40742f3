"""The Lasso: the estimator, its problems, and the Lasso <-> SVM equivalence.

===============  ==========================================================================
``estimator``    :class:`Lasso` and :func:`lasso_path`
``problem``      the constrained and penalized problems, certificates and maps back
``equivalence``  Jaggi's maps between the Lasso and the SVM dual
``gram``         the Gram matrix :math:`X^\\top X / n` as a lazy column operator
``cd``           coordinate descent with working sets, gap-safe screening and Anderson
                 extrapolation (``solver="cd"``); its compiled kernels ``_cd_kernels``,
                 ``_cd_solve``, and ``_cd_fit`` (the estimator's use of it)
===============  ==========================================================================
"""

from .estimator import METHODS, SOLVERS, Lasso, LassoData, LassoProblem, lasso_path, lasso_problem

__all__ = ["Lasso", "lasso_path", "LassoData", "LassoProblem", "lasso_problem", "SOLVERS",
           "METHODS"]
