r"""Coordinate descent for the penalized Lasso: working sets, gap-safe screening, Anderson steps.

The problem is scikit-learn's, in the unnormalized scale used throughout this module,

.. math::

    P(w) = \tfrac12 \|y_c - X_c w\|^2 + \lambda \|w\|_1, \qquad \lambda = n\alpha,

whose dual is :math:`D(\theta) = \tfrac12\|y_c\|^2 - \tfrac{\lambda^2}2\|\theta - y_c/\lambda\|^2`
over :math:`\|X_c^\top\theta\|_\infty \le 1`. At any :math:`w` with residual :math:`r` the
rescaled residual

.. math::

    \theta = r / \max(\lambda, \|X_c^\top r\|_\infty)

is dual feasible, so :math:`G(w) = P(w) - D(\theta) \ge P(w) - P(w^\star)` is a *certified*
duality gap; scikit-learn's ``dual_gap_`` is :math:`G/n` and the solver stops when
:math:`G/n \le \mathrm{tol}\,\|y_c\|^2/n` (``tol``'s meaning in scikit-learn). The gap is always
computed over all features from a freshly recomputed residual, never from the running one.

Three devices make coordinate descent fast on wide problems (the anchors skglm and celer use
the same ones):

* **Gap-safe screening** (Fercoq, Gramfort & Salmon 2015; Ndiaye et al. 2017): the dual optimum
  lies in the ball of centre :math:`\theta` and radius :math:`\sqrt{2G}/\lambda`, so a feature
  with :math:`|x_j^\top\theta| + \|x_j\|\sqrt{2G}/\lambda < 1` is zero at every optimum and is
  dropped for the rest of the solve (set to zero if it was not).
* **Working sets** (Massias, Gramfort & Salmon 2018, celer; Bertrand et al. 2022, skglm): each
  outer round ranks the features by the distance of :math:`\theta` to their constraint,
  :math:`(1 - |x_j^\top\theta|)/\|x_j\|`, and runs coordinate descent on the support plus the
  closest features only (:math:`\max(32, 2\,\mathrm{nnz}(w))` of them, never fewer than the
  round before), until the sub-problem's own gap is below a fifth of the full gap (or, once
  the set holds every feature screening kept, below half the target). Within a round, sweeps
  over the whole set alternate with sweeps over its non-zero coordinates only (glmnet's active
  cycling); these run on the coordinates' Gram matrix :math:`X_A^\top X_A` when it has fewer
  entries than their columns.
* **Anderson extrapolation** (Bertrand & Massias 2021): every :math:`K` epochs the last
  :math:`K + 1` iterates on the working set are combined with the weights :math:`c` minimising
  :math:`\|\sum_k c_k (w^{k+1} - w^k)\|` subject to :math:`\sum c_k = 1`; the extrapolated point
  is kept only when it lowers :math:`P`, so the iterates stay monotone.

The design is held column by column: a dense Fortran-ordered centred copy, or the CSC arrays of a
sparse ``X`` with its column means kept apart (implicit centring: the running residual is
:math:`R_0 + c\mathbf 1` with :math:`R_0 = y_c - Xw` and :math:`c = \bar x^\top w`, so sparse
columns stay sparse). The kernels compile with numba; without it they run in the interpreter.

References
----------
Fercoq, Gramfort & Salmon, "Mind the duality gap: safer rules for the Lasso", ICML 2015.
Ndiaye, Fercoq, Gramfort & Salmon, "Gap safe screening rules for sparsity enforcing
penalties", JMLR 18 (2017).
Massias, Gramfort & Salmon, "Celer: a fast solver for the Lasso with dual extrapolation",
ICML 2018.
Bertrand & Massias, "Anderson acceleration of coordinate descent", AISTATS 2021.
Bertrand, Klopfenstein, Massias et al., "Beyond L1: faster and better sparse models with
skglm", NeurIPS 2022.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import Tensor

from ..utils.jit import HAVE_NUMBA
from ..utils.validation import check_finite
from ._cd_kernels import _column_sums, _correlations, _csr_to_csc
from ._cd_solve import _cd_solve

__all__ = ["CDDesign", "solve_cd", "HAVE_NUMBA"]

#: Anderson extrapolation combines this many successive differences of iterates.
_ANDERSON_K = 10
#: The first working set holds at least this many features.
_WS_START = 32
#: Sub-problems are solved to this fraction of the full problem's current gap.
_INNER_FRACTION = 0.2


def _dot(a: np.ndarray, b: np.ndarray) -> float:
    """:math:`a^\top b` of two host vectors, on the calling thread.

    NumPy's ``@`` on vectors is a BLAS ``ddot``, which OpenBLAS splits over its threads above
    10,000 entries: on a loaded 2-core machine the call then waits for a time slice for its
    second thread, 8 to 28 ms for one of news20's 15,935-entry vectors (against 9 us when
    the machine is idle). ``einsum`` sums on the calling thread (25 us at 62,061 entries).
    """
    return float(np.einsum("i,i->", a, b))


class CDDesign:
    r"""A Lasso design laid out for coordinate descent: column access, centring, weights.

    Built from a validated design (a dense or CSR tensor, as the estimators' input checks
    return it), the target and the optional sample weights. Weights :math:`s_i` are rescaled to
    sum to ``n`` (scikit-learn's convention); with :math:`v = \sqrt s` every row is scaled by
    :math:`v_i` after weighted centring, so the weighted loss
    :math:`\frac1{2n}\sum_i s_i (y_i - x_i^\top w - b)^2` at the optimal ``b`` becomes the
    plain one of the module docstring. A dense design is copied once, centred and scaled, in
    column-major order; a sparse one keeps its sparsity (scaled CSC arrays, the means apart).

    Parameters
    ----------
    X : Tensor or scipy.sparse.csc_matrix
        ``(n, p)``, a dense or sparse CSR tensor (any device; the solver runs on the host), or
        a canonical SciPy CSC matrix of a numeric dtype (read as it is, without a copy; its row
        indices and the finiteness of its values are checked here, in the pass that computes
        the column statistics).
    y : Tensor
        ``(n,)`` float64.
    fit_intercept : bool
    sample_weight : ndarray of shape (n,), optional
        Validated weights (``None``: all ones).

    Attributes
    ----------
    y_mean : float
    x_mean : Tensor of shape (p,)
        (Weighted) means removed by centring, float64, on ``X``'s device; zeros without an
        intercept.
    yy : float
        :math:`\|y_c\|^2 / n` (weighted): the scale of ``tol``.
    alpha_max : float
        :math:`\|X_c^\top y_c\|_\infty / n`: the smallest penalty with the solution 0.
    """

    def __init__(self, X, y: Tensor, *, fit_intercept: bool = True,
                 sample_weight: np.ndarray | None = None):
        n, p = X.shape
        self.n_samples, self.n_features = int(n), int(p)
        scipy_csc = not isinstance(X, Tensor)
        self.device = torch.device("cpu") if scipy_csc else X.device
        self.fit_intercept = bool(fit_intercept)
        yn = y.detach().cpu().numpy().astype(np.float64)
        weighted = sample_weight is not None and not bool((sample_weight == 1.0).all())
        if weighted:
            assert sample_weight is not None
            s = sample_weight * (n / sample_weight.sum())
            v = np.sqrt(s)
        else:
            s = None
            v = np.ones(n)
        self.sparse = scipy_csc or X.layout == torch.sparse_csr
        if self.fit_intercept:
            self.y_mean = _dot(s, yn) / n if weighted else float(yn.mean())
        else:
            self.y_mean = 0.0
        self.y = np.ascontiguousarray((yn - self.y_mean) * v)
        zy = None
        if self.sparse:
            if n >= 2**31:
                raise ValueError(f"solver='cd' handles fewer than 2**31 samples, got {n}")
            if scipy_csc:  # a canonical SciPy CSC matrix, its row indices checked below
                indptr = np.asarray(X.indptr).astype(np.int64, copy=False)
                # int32 row indices, as SciPy stores them: one compiled solver for both
                # inputs, and a pass over the design reads a third less.
                indices = np.asarray(X.indices).astype(np.int32, copy=False)
                vals = np.asarray(X.data).astype(np.float64, copy=False)
            else:
                crow = X.crow_indices().cpu().numpy().astype(np.int64, copy=False)
                col = X.col_indices().cpu().numpy().astype(np.int64, copy=False)
                val = X.values().detach().cpu().numpy().astype(np.float64, copy=False)
                indptr, indices, vals = _csr_to_csc(crow, col, val, p)
            raw = vals
            vals, sq, vz, zy, n_bad = _column_sums(indptr, indices, vals, v, self.y, weighted)
            if n_bad:
                raise ValueError(f"X: sparse matrix has row indices outside [0, {n})")
            if not np.isfinite(sq).all():  # a NaN or an infinity, or squares overflowing
                check_finite("X", torch.from_numpy(raw))
            # v^T Z_j / n: the (weighted) column means.
            means = vz / n if self.fit_intercept else np.zeros(p)
            norms2 = np.maximum(sq - n * means * means, 0.0)
            # Centring can leave round-off on a constant column: it is the zero column it is.
            norms2[norms2 <= 1e-12 * sq] = 0.0
            # A placeholder of the dense path's array type (F-contiguous only, as a design's),
            # so one compiled solver serves both layouts.
            Xd = np.zeros((2, 2), order="F")
            x_mean = means
        else:
            Xn = X.detach().cpu().numpy()
            if self.fit_intercept:
                x_mean = (s @ Xn / n) if weighted else Xn.mean(axis=0, dtype=np.float64)
            else:
                x_mean = np.zeros(p)
            Xd = np.empty((n, p), order="F")
            np.subtract(Xn, x_mean, out=Xd)
            if weighted:
                Xd *= v[:, None]
            norms2 = np.einsum("ij,ij->j", Xd, Xd)
            # Column j has indptr[j + 1] - indptr[j] entries in both layouts: the kernels count
            # their work so, without testing the layout in their loops.
            indptr = np.arange(p + 1, dtype=np.int64) * n
            indices = np.zeros(1, dtype=np.int32)
            vals = np.zeros(1)
            means = np.zeros(p)
        self.Xd, self.indptr, self.indices, self.vals = Xd, indptr, indices, vals
        self.means, self.v, self.norms2 = means, v, norms2
        self.x_mean = torch.from_numpy(np.asarray(x_mean, dtype=np.float64)).to(self.device)
        self.yy = _dot(self.y, self.y) / n
        if zy is not None:  # X_c^T y = Z^T y - xbar (v^T y), as correlations() computes it
            self.xty = zy - means * _dot(v, self.y)
        else:
            self.xty = self.correlations(self.y)
        self.alpha_max = float(np.abs(self.xty).max()) / n if p else 0.0

    def correlations(self, u: np.ndarray) -> np.ndarray:
        """:math:`X_c^\\top u` for ``u`` of shape ``(n,)``."""
        return _correlations(self.sparse, self.Xd, self.indptr, self.indices, self.vals,
                             self.means, self.v, np.ascontiguousarray(u, dtype=np.float64))


def solve_cd(design: CDDesign, alpha: float, w0: Tensor | None, tol: float, *,
             max_iter: int = 100_000, working_set: bool = True, screening: bool = True,
             anderson: bool = True, check_every: int = 1, max_trace: int = 1000,
             anderson_k: int = _ANDERSON_K, inner_fraction: float = _INNER_FRACTION,
             ws_start: int = _WS_START, ws_growth: float = 1.0, gram: bool = True,
             finish: bool = True) -> dict:
    r"""Coordinate descent on the penalized Lasso of ``design`` (see the module docstring).

    Parameters
    ----------
    design : CDDesign
    alpha : float
        :math:`\alpha > 0`, scikit-learn's scale.
    w0 : Tensor, optional
        Warm start.
    tol : float
        Stop when the certified gap :math:`G/n \le \mathrm{tol}\,\|y_c\|^2/n`.
    max_iter : int
        Epochs over the working sets (scikit-learn counts epochs over all features).
    working_set : bool
        ``False`` runs every epoch over all unscreened features.
    screening, anderson : bool
        Gap-safe screening and Anderson extrapolation (both on by default).
    check_every : int
        Epochs between evaluations of the sub-problem's gap.
    max_trace : int
        Rounds recorded in the returned ``trace``.

    Returns
    -------
    dict
        ``w`` (float64 tensor on the design's device), ``gap`` (:math:`G/n`, scikit-learn's
        ``dual_gap_``), ``primal`` (:math:`P/n`), ``n_iter`` (epochs), ``rounds``
        (working-set rounds), ``n_screened``, ``converged`` and ``trace`` (per round: gap/n,
        primal/n, working-set size, epochs so far, screened count).
    """
    n, p = design.n_samples, design.n_features
    if w0 is None:
        w = np.zeros(p)
    else:
        w = np.array(w0.detach().cpu().numpy(), dtype=np.float64, copy=True)
    lam = n * alpha
    target = tol * _dot(design.y, design.y)
    trace = np.zeros((max(1, max_trace), 5))
    gap, primal, epochs, rounds, n_screened, converged, work = _cd_solve(
        design.sparse, design.Xd, design.indptr, design.indices, design.vals, design.means,
        design.v, design.norms2, design.y, design.xty, w, lam, target, int(max_iter),
        ws_start if working_set else p, bool(screening), anderson_k if anderson else 0,
        int(check_every), inner_fraction, trace, float(ws_growth), bool(gram), bool(finish))
    rows = trace[:min(rounds, trace.shape[0])].copy()
    rows[:, :2] /= n
    return {"w": torch.from_numpy(w).to(design.device), "gap": gap / n, "primal": primal / n,
            "n_iter": int(epochs), "rounds": int(rounds), "n_screened": int(n_screened),
            "converged": bool(converged), "trace": rows, "work": int(work)}
