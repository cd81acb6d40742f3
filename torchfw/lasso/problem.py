r"""The Lasso as problems a Frank-Wolfe solver runs: both forms, both formulations, the maps back.

This module builds what a solver needs (:func:`lasso_problem`: objective, constraint set,
starting point) and how to recover the model from the solver's point (``to_coef``), and it
certifies solutions (scikit-learn's duality gap, the Frank-Wolfe gap). The estimator
(:class:`torchfw.Lasso`, :func:`torchfw.lasso_path`) lives in :mod:`torchfw.lasso`.

Two problems, in scikit-learn's scale (``n`` samples, :math:`X_c, y_c` centred when an intercept
is fitted, else :math:`X, y`):

.. math::
    \text{constrained:}\quad \min_{\|w\|_1 \le t}\ f(w), \qquad
    \text{penalized:}\quad \min_w\ P(w) = f(w) + \alpha\|w\|_1, \qquad
    f(w) = \frac1{2n}\|y_c - X_c w\|^2 .

:math:`f` is the quadratic :math:`\tfrac12 w^\top Q w - q^\top w + \tfrac1{2n}\|y_c\|^2` with
:math:`Q = X_c^\top X_c/n` (a lazy :class:`~torchfw.lasso.gram.GramOperator`: one column, i.e. one
matrix-vector product with ``X``, per iteration) and :math:`q = X_c^\top y_c / n`.

**Constrained form** (``Lasso(radius=t)``). ``method="l1ball"`` runs the chosen Frank-Wolfe
variant on :class:`~torchfw.L1Ball` (Jaggi 2013). ``method="svm"`` runs it on the unit simplex
over the 2p signed, shifted atoms :math:`\pm t A_i - b` with :math:`A = X_c/\sqrt n`,
:math:`b = y_c/\sqrt n` (:func:`torchfw.lasso.equivalence.lasso_to_svm`; Jaggi 2014, seed 003): the two
runs pick the same atoms, take the same steps and report the same gaps (the SVM gradient is the
L1-ball gradient shifted by a constant).

**Penalized form** (``Lasso(alpha=a)``). The nonsmooth penalty is moved into the constraint set
(the epigraph form of Harchaoui, Juditsky & Nemirovski 2015):

.. math::
    \min_{\|w\|_1 \le \tau \le T}\ f(w) + \alpha\tau ,

a problem over :math:`\mathrm{conv}\{(0, 0), (\pm T e_i, T)\}`, i.e. the L1 ball of radius
:math:`T` with its centre as an extra atom. In simplex weights :math:`\lambda` over the
:math:`2p+1` atoms, :math:`w = T(\lambda_+ - \lambda_-)` and :math:`\tau = T(1-\lambda_0)`; the
objective is a quadratic whose linear part :math:`\alpha T` on the signed atoms is absorbed into
the Gram matrix (:class:`~torchfw.lasso.equivalence.SignedAtomsOperator`, ``offset``). With
``method="svm"`` the atoms are Jaggi's shifted points :math:`\pm T A_i - b` and :math:`-b`. The
problem equals the Lasso as soon as :math:`T \ge \|w^\star\|_1`, which this module certifies
from any point :math:`w_0` (zero, or the previous solution of a path) before solving:

.. math::
    \alpha\|w^\star\|_1 = P^\star - f(w^\star) \le P(w_0) - \frac{\big(\|v\| -
    \sqrt{2nG(w_0)}\big)_+^2}{2n},

where :math:`v` is scikit-learn's dual point at :math:`w_0` and :math:`G` its duality gap: the
dual is 1-strongly concave in :math:`v`, so the optimal residual :math:`y_c - X_c w^\star` lies
within :math:`\sqrt{2nG}` of :math:`v`. From :math:`w_0 = 0` this is the classic
:math:`\|w^\star\|_1 \le \|y_c\|^2/(2n\alpha)`; along a path of warm starts it is nearly tight.
Pairwise and away steps are insensitive to :math:`T` (a pairwise step between the centre and a
signed atom is an exact coordinate step), plain FW and PARTAN are not.

**Duality gap and tol.** Runs stop on scikit-learn's duality gap (``sklearn.linear_model.Lasso``,
formulation A of ``_cd_fast.pyx``):

.. math::
    G(w) = P(w) - D(\theta), \qquad D(\theta) = \frac1n\Big(-\tfrac12 s^2\|R\|^2
    + s\,R^\top y_c\Big), \quad R = y_c - X_c w,\ s = \min\Big(1,
    \frac{n\alpha}{\|X_c^\top R\|_\infty}\Big),

with ``tol`` in scikit-learn's meaning: stop when :math:`G \le` ``tol`` :math:`\cdot
\|y_c\|^2/n`, so tolerances compare one to one. During the run :math:`G` is evaluated from the
solver's cached scalars in O(p) with :math:`\|w\|_1` bounded by :math:`\tau` (an upper bound on
:math:`G`); ``dual_gap_`` is recomputed exactly from the residual at the end. For the constrained
form the certificate is the Frank-Wolfe gap :math:`\nabla f(w)^\top w + t\|\nabla f(w)\|_\infty
\ge f(w) - f^\star` (Jaggi 2013), in the same units and with the same ``tol`` scaling.

References
----------
M. Jaggi, "Revisiting Frank-Wolfe: projection-free sparse convex optimization", ICML 2013.
M. Jaggi, "An Equivalence between the Lasso and Support Vector Machines", 2014
(arXiv:1303.1152). Seeds 002/003 of this project (spec §1.4).
Z. Harchaoui, A. Juditsky, A. Nemirovski, "Conditional gradient algorithms for norm-regularized
smooth convex optimization", Math. Program. 152, 2015.
O. Fercoq, A. Gramfort, J. Salmon, "Mind the duality gap: safer rules for the Lasso", ICML 2015.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from ..linesearch import ExactLineSearch
from ..objectives import Quadratic
from ..optimizers import StoppingRule, _kernels
from ..result import Status
from ..sets.oracles import LMO, L1Ball, Simplex
from ..solvers import SOLVERS as _REGISTRY
from ..solvers import solver_names
from ..utils.data import as_matrix, as_sample_weight, as_target, csr_tensor
from ..utils.validation import resolve_device
from .equivalence import SignedAtomsOperator
from .gram import GramOperator

__all__ = ["LassoData", "LassoProblem", "lasso_problem", "SOLVERS", "METHODS"]

#: Frank-Wolfe variants accepted by :class:`Lasso` (``solver=``): name -> optimizer class, the
#: entries of :data:`torchfw.solvers.SOLVERS` that the Lasso accepts.
SOLVERS = {name: _REGISTRY[name].optimizer for name in solver_names("lasso")}
#: Formulations accepted by :class:`Lasso` (``method=``).
METHODS = ("l1ball", "svm")


def _check_choice(name: str, value, choices) -> None:
    if not isinstance(value, str) or value not in choices:
        raise ValueError(f"unknown {name} {value!r}; expected one of {tuple(choices)}")


class LassoData:
    r"""Validated, centred data and the lazy Gram operator, shared by the fits of a path.

    Parameters
    ----------
    X : array-like, scipy.sparse matrix or Tensor
        ``(n_samples, n_features)``, dense or sparse (kept sparse; centring is implicit).
    y : array-like or Tensor
        ``(n_samples,)``.
    fit_intercept : bool
    device, dtype, cache_size
        See :class:`~torchfw.Lasso`.
    sample_weight : array-like of shape (n_samples,), optional
        Weights :math:`s_i \ge 0`, rescaled to sum to ``n`` as scikit-learn does: the loss
        becomes :math:`\frac1{2n}\sum_i s_i (y_i - x_i^\top w - b)^2`. The data are centred by
        the weighted means and row ``i`` is scaled by :math:`\sqrt{s_i}`, after which every
        formula of this module (and the gap) applies unchanged. A sparse ``X`` stays sparse
        without an intercept; with one, weighted centring is done on a dense copy.

    Attributes
    ----------
    gram : GramOperator
        :math:`Q = X_c^\top X_c / n`.
    q : Tensor
        :math:`X_c^\top y_c / n`.
    yy : float
        :math:`\|y_c\|^2 / n` (the scale of ``tol``).
    x_mean : Tensor, y_mean : float
        Offsets removed by centring (zeros without an intercept).
    """

    def __init__(self, X, y, *, fit_intercept: bool = True, device=None,
                 dtype: torch.dtype = torch.float64, cache_size: float = 256.0,
                 sample_weight=None):
        if dtype not in (torch.float32, torch.float64):
            raise ValueError(f"dtype must be torch.float32 or torch.float64, got {dtype!r}")
        with warnings.catch_warnings():
            # torch's one-time notices about its beta sparse CSR support are noise here.
            warnings.filterwarnings("ignore", message="Sparse CSR tensor support is in beta")
            warnings.filterwarnings("ignore", message="Sparse invariant checks")
            X = as_matrix(X, device=resolve_device(device), dtype=dtype)
        n, p = X.shape
        self.n_samples, self.n_features = n, p
        self.device = X.device
        self.dtype = dtype
        # The solver state is float64 even when the stored design is float32.
        self.state_dtype = torch.float64
        y = as_target(y, n, estimator="Lasso", device=X.device, dtype=torch.float64)
        self.fit_intercept = bool(fit_intercept)
        sw = as_sample_weight(sample_weight, n)
        if sw is not None and not (sw == 1.0).all():
            self._init_weighted(X, y, sw * (n / sw.sum()), dtype, cache_size)
        else:
            self.y_mean = float(y.mean()) if self.fit_intercept else 0.0
            self.yc = y - self.y_mean
            self.gram = GramOperator(X, center=self.fit_intercept, dtype=dtype,
                                     cache_size=cache_size)
            self.x_mean = self.gram.means.to(torch.float64)
        self.q = (self.gram.rmatvec(self.yc) / n).to(torch.float64)
        self.yy = float((self.yc * self.yc).sum()) / n
        self.alpha_max = float(self.q.abs().max())

    def _init_weighted(self, X: Tensor, y: Tensor, sw: np.ndarray, dtype, cache_size) -> None:
        r"""Weighted centring and :math:`\sqrt{s_i}` row scaling (weights summing to ``n``)."""
        n = self.n_samples
        s = torch.from_numpy(sw).to(device=self.device, dtype=torch.float64)
        root = s.sqrt()
        if self.fit_intercept:
            if X.layout == torch.sparse_csr:
                X = X.to_dense()  # D (X - 1 mean^T) is dense; the operator needs it explicit
            x_mean = (s.to(X.dtype) @ X) / n
            self.y_mean = float((s * y).sum()) / n
            Xw = (X - x_mean) * root.to(X.dtype).unsqueeze(1)
        else:
            x_mean = torch.zeros(X.shape[1], dtype=X.dtype, device=self.device)
            self.y_mean = 0.0
            if X.layout == torch.sparse_csr:
                rows = torch.repeat_interleave(
                    torch.arange(n, device=self.device), X.crow_indices().diff())
                Xw = csr_tensor(X.crow_indices(), X.col_indices(),
                                             X.values() * root.to(X.dtype)[rows], size=X.shape,
                                             check_invariants=False)  # same structure as X
            else:
                Xw = X * root.to(X.dtype).unsqueeze(1)
        self.yc = (y - self.y_mean) * root
        self.gram = GramOperator(Xw, center=False, dtype=dtype, cache_size=cache_size)
        self.x_mean = x_mean.to(torch.float64)

    def restrict(self, index: Tensor) -> LassoData:
        """The same problem on the features ``index`` only (a working set)."""
        sub = LassoData.__new__(LassoData)
        sub.__dict__.update({k: v for k, v in self.__dict__.items()
                             if k not in ("gram", "x_mean", "q", "alpha_max", "n_features")})
        sub.gram = self.gram.restrict(index)
        sub.n_features = int(index.numel())
        sub.x_mean = self.x_mean.index_select(0, index)
        sub.q = self.q.index_select(0, index)
        sub.alpha_max = float(sub.q.abs().max()) if sub.n_features else 0.0
        return sub

    # -- exact quantities at a point (one product with X and one with X^T) ----------------------

    def residual(self, w: Tensor) -> Tensor:
        """:math:`R = y_c - X_c w`."""
        return self.yc - self.gram.design_matvec(w).to(torch.float64)

    def loss(self, w: Tensor) -> float:
        """:math:`f(w) = \\|y_c - X_c w\\|^2 / (2n)`."""
        R = self.residual(w)
        return float((R * R).sum()) / (2 * self.n_samples)

    def gradient(self, w: Tensor) -> Tensor:
        """:math:`\\nabla f(w) = -X_c^\\top R / n`."""
        return -(self.gram.rmatvec(self.residual(w)) / self.n_samples).to(torch.float64)

    def sklearn_gap(self, w: Tensor, alpha: float) -> tuple[float, float]:
        """scikit-learn's duality gap of the penalized Lasso at ``w`` and the primal value.

        Returns ``(gap, P(w))`` in the scale :math:`\\tfrac1{2n}\\|R\\|^2 + \\alpha\\|w\\|_1`.
        """
        n = self.n_samples
        R = self.residual(w)
        XtR = self.gram.rmatvec(R).to(torch.float64)
        r2 = float((R * R).sum())
        ry = float((R * self.yc).sum())
        l1 = float(w.abs().sum())
        return _dual_gap(r2, ry, float(XtR.abs().max()), l1, alpha, n)

    def fw_gap(self, w: Tensor, radius: float) -> float:
        """Frank-Wolfe gap of the constrained Lasso: :math:`g^\\top w + t\\|g\\|_\\infty`."""
        g = self.gradient(w)
        return float((g * w).sum()) + radius * float(g.abs().max())

    def dual_point_bound(self, w: Tensor, alpha: float) -> float:
        r"""Certified bound on :math:`\|w^\star\|_1` for the penalized problem, from ``w``."""
        n = self.n_samples
        R = self.residual(w)
        XtR = self.gram.rmatvec(R).to(torch.float64)
        r2 = float((R * R).sum())
        ry = float((R * self.yc).sum())
        norm_xtr = float(XtR.abs().max())
        l1 = float(w.abs().sum())
        gap, primal = _dual_gap(r2, ry, norm_xtr, l1, alpha, n)
        s = min(1.0, n * alpha / norm_xtr) if norm_xtr > 0 else 1.0
        # ||v* - v|| <= sqrt(2 n G) (unnormalized dual, 1-strongly concave); f(w*) = ||v*||^2/2n.
        lower = max(0.0, s * math.sqrt(r2) - math.sqrt(2.0 * n * max(gap, 0.0)))
        return max(0.0, primal - lower * lower / (2 * n)) / alpha

    # -- solves ----------------------------------------------------------------------------------

    def _start(self, w0: Tensor | None) -> Tensor:
        dt = self.state_dtype
        return torch.zeros(self.n_features, dtype=dt, device=self.device) if w0 is None \
            else w0.to(device=self.device, dtype=dt)

    def constrained_problem(self, radius: float, w0: Tensor | None = None, *,
                            method: str = "l1ball") -> LassoProblem:
        r"""The constrained Lasso at ``radius`` as a solver's problem (see :func:`lasso_problem`).

        ``method="l1ball"``: the quadratic :math:`f` over :class:`~torchfw.L1Ball` (``radius``),
        the point is ``w``. ``method="svm"``: Jaggi's SVM dual over the unit simplex of the 2p
        signed atoms, with :math:`w = t(\lambda_+ - \lambda_-)`.
        """
        p = self.n_features
        w0 = self._start(w0)
        norm0 = float(w0.abs().sum())
        if norm0 > radius:  # a warm start from a larger ball: shrink it into this one
            w0 = w0 * (radius / norm0)
        if method == "l1ball":
            return LassoProblem(Quadratic(self.gram, c=-self.q, constant=self.yy / 2),
                                L1Ball(radius), w0, lambda x: x, "radius", radius, radius,
                                self)
        op = SignedAtomsOperator(self.gram, radius, self.q, self.yy)
        return LassoProblem(Quadratic(op), Simplex(), L1Ball(radius).to_weights(w0),
                            lambda x: radius * (x[:p] - x[p:]), "radius", radius, radius, self)

    def penalized_problem(self, alpha: float, w0: Tensor | None = None, *,
                          method: str = "l1ball") -> LassoProblem:
        r"""The penalized Lasso at ``alpha`` in epigraph form (see :func:`lasso_problem`).

        The radius ``T`` of the ball is certified from ``w0`` (:meth:`dual_point_bound`) so that
        the epigraph problem has the Lasso's solution; ``T = 0`` (``y_c = 0`` and ``w0 = 0``)
        means ``w = 0`` is the solution and there is nothing to run (``objective`` is None).
        In simplex weights :math:`\lambda` over the 2p+1 atoms,
        :math:`w = T(\lambda_+ - \lambda_-)`.
        """
        p = self.n_features
        dt = self.state_dtype
        w0 = self._start(w0)
        norm0 = float(w0.abs().sum())
        # Certified radius, with a hair of slack for the rounding in the bound itself.
        T = max(self.dual_point_bound(w0, alpha), norm0) * (1 + 1e-6)
        if T <= 0:
            return LassoProblem(None, Simplex(), w0, lambda x: x, "alpha", alpha, 0.0, self)
        x0 = torch.cat([w0.clamp_min(0) / T, (-w0).clamp_min(0) / T,
                        torch.full((1,), 1 - norm0 / T, dtype=dt, device=self.device)])
        return LassoProblem(self.epigraph_problem(alpha, T, method), Simplex(), x0,
                            lambda x: T * (x[:p] - x[p:2 * p]), "alpha", alpha, T, self)

    def solve_constrained(self, radius: float, w0: Tensor | None, *, method: str, solver: str,
                          tol: float, **options):
        """Constrained Lasso at ``radius``; returns ``(w, result)``."""
        problem = self.constrained_problem(radius, w0, method=method)
        tol_abs = max(tol * self.yy, 1e-300)
        options = _small_problem_execution(options, 2 * self.n_features, self.device, solver)
        opt = SOLVERS[solver](problem.lmo, ExactLineSearch(), tol=tol_abs, **options)
        result = opt.minimize(problem.objective, problem.x0)
        return problem.to_coef(result.x), result

    def epigraph_problem(self, alpha: float, T: float, method: str):
        """The penalized Lasso over the 2p+1 atoms of the radius-``T`` ball and its centre."""
        p = self.n_features
        zero = torch.zeros(1, dtype=torch.float64, device=self.device)
        if method == "l1ball":
            # Atoms (+-T e_i, T) and (0, 0): quadratic T^2 [G, -G; -G, G], linear T(-+q + alpha).
            offset = torch.cat([T * (alpha - self.q), T * (alpha + self.q), zero])
            op = SignedAtomsOperator(self.gram, T, origin=True, offset=offset)
            return Quadratic(op, constant=self.yy / 2)
        # Jaggi's points +-T A_i - b and -b; the penalty alpha T on the signed atoms.
        offset = torch.cat([torch.full((2 * p,), alpha * T, dtype=torch.float64,
                                       device=self.device), zero])
        op = SignedAtomsOperator(self.gram, T, self.q, self.yy, origin=True, offset=offset)
        return Quadratic(op)

    def solve_penalized(self, alpha: float, w0: Tensor | None, *, method: str, solver: str,
                        tol: float, callback=None, **options):
        """Penalized Lasso at ``alpha``; returns ``(w, result, T, gap_bound)``."""
        p = self.n_features
        dt = self.state_dtype
        problem = self.penalized_problem(alpha, w0, method=method)
        T = problem.radius
        if problem.objective is None:  # y_c = 0 and w0 = 0: the solution is w = 0
            return problem.x0, None, 0.0, 0.0
        objective, x0 = problem.objective, problem.x0
        target = tol * self.yy
        q, yy = self.q, self.yy

        # q'w = T [q; -q; 0]' lambda: one inner product, no temporary of size N.
        q_atoms = torch.cat([T * q, -T * q, torch.zeros(1, dtype=dt, device=self.device)])
        on_host = self.device.type == "cpu" and _kernels.HAVE_NUMBA

        def lasso_gap(lam: Tensor, value: float, fw_gap: float) -> float:
            tau = T * (1.0 - float(lam[-1]))
            f = value - alpha * tau
            qw = (_kernels.dot(q_atoms.numpy(), lam.numpy(), lam.shape[0]) if on_host
                  else float(torch.dot(q_atoms, lam)))
            gw = 2.0 * f + qw - yy                              # grad f(w)' w
            excess = max(0.0, (fw_gap - gw - alpha * tau) / T)  # ||grad f||_inf - alpha
            return _dual_gap_scaled(f, gw, alpha + excess, tau, alpha)

        options = _small_problem_execution(options, 2 * p + 1, self.device, solver)
        opt = SOLVERS[solver](Simplex(), ExactLineSearch(), tol=1e-300, callback=callback,
                              **options)
        rule = LassoGapRule(opt, lasso_gap, target)
        result = opt.minimize(objective, x0, stopping=rule)
        return problem.to_coef(result.x), result, T, rule.gap


class LassoGapRule(StoppingRule):
    r"""Stop the epigraph solve of a penalized Lasso on the Lasso's own duality gap.

    The run solves a quadratic over the simplex whose Frank-Wolfe gap is not the Lasso's
    (scikit-learn's gap, scaled as :func:`_dual_gap_scaled`): this rule computes that gap at
    every check from the iterate and stops with ``CONVERGED`` once it is at most ``target``;
    otherwise the optimizer's own rule applies (its ``tol``/``rtol``, ``max_iter``,
    ``time_limit`` and ``callback``). The last gap computed is :attr:`gap`.
    """

    def __init__(self, optimizer, lasso_gap, target: float):
        base = StoppingRule.of(optimizer)
        super().__init__(tol=base.tol, rtol=base.rtol, max_iter=base.max_iter,
                         time_limit=base.time_limit, callback=base.callback)
        self.lasso_gap = lasso_gap
        self.gap_target = target
        self.gap = math.inf

    def __call__(self, eng, k, value, gap, elapsed, steps):
        self.gap = self.lasso_gap(eng.point(), value, gap)
        if self.gap <= self.gap_target:
            return Status.CONVERGED
        return super().__call__(eng, k, value, gap, elapsed, steps)


def _dual_gap(r2: float, ry: float, norm_xtr: float, l1: float, alpha: float,
              n: int) -> tuple[float, float]:
    """scikit-learn's gap (formulation A, divided by n) and the primal value."""
    nal = n * alpha
    s = min(1.0, nal / norm_xtr) if norm_xtr > 0 else 1.0
    primal = 0.5 * r2 + nal * l1
    dual = -0.5 * s * s * r2 + s * ry
    return (primal - dual) / n, primal / n


def _dual_gap_scaled(f: float, gw: float, m: float, tau: float, alpha: float) -> float:
    r"""scikit-learn's gap from :math:`f`, :math:`\nabla f^\top w`, :math:`\|\nabla f\|_\infty`.

    With :math:`R^\top y_c = 2nf - n\nabla f^\top w` the gap divided by ``n`` is
    :math:`f(1-s)^2 + \alpha\|w\|_1 + s\nabla f^\top w`; ``tau`` stands for :math:`\|w\|_1`
    (an upper bound on it, so the result bounds the gap from above).
    """
    s = min(1.0, alpha / m) if m > 0 else 1.0
    return f * (1.0 - s) ** 2 + alpha * tau + s * gw


#: Problems of at most this many atoms run the compiled dense loop under execution="auto"
#: (forming the N x N matrix once costs about as much as a few host iterations).
_DENSE_ATOMS = 2048


def _small_problem_execution(options: dict, n_atoms: int, device, solver: str) -> dict:
    """``options`` with ``execution="dense"`` for a small CPU problem under ``"auto"``.

    On the few hundred atoms of a working-set round the host engine's cost is interpreter work
    per iteration; the dense engine runs the same iterations in compiled blocks
    (:mod:`torchfw.optimizers._dense`).
    """
    if (options.get("execution", "auto") == "auto" and device.type == "cpu"
            and _kernels.HAVE_NUMBA and n_atoms <= _DENSE_ATOMS
            and SOLVERS[solver].dense_variant is not None):
        return dict(options, execution="dense")
    return options


@dataclass
class LassoProblem:
    r"""One Lasso problem as a Frank-Wolfe solver takes it, and the way back to the model.

    Run ``SOLVERS[name](problem.lmo, ExactLineSearch(), ...).minimize(problem.objective,
    problem.x0)``; then ``w = problem.to_coef(result.x)`` are the coefficients (in the
    centred, weighted scale of :attr:`data`) and :meth:`intercept` the intercept.

    Attributes
    ----------
    objective : Quadratic or None
        What the solver minimizes; None when ``w = x0`` is already the solution (penalized form
        with :math:`y_c = 0`).
    lmo : LMO
        :class:`~torchfw.L1Ball` (constrained form, ``method="l1ball"``) or
        :class:`~torchfw.Simplex` (the SVM formulation and the epigraph form).
    x0 : Tensor
        Starting point in the solver's coordinates (from the warm start ``w0``).
    to_coef : callable
        Solver point -> Lasso coefficients ``w`` (``(n_features,)``, float64).
    form : {"radius", "alpha"}
        Constrained or penalized.
    value : float
        The radius ``t`` or the penalty ``alpha``.
    radius : float
        The ball the solver works on: ``t``, or the certified ``T`` of the penalized form.
    data : LassoData
        The data, its Gram operator and the certificates (:meth:`LassoData.sklearn_gap`,
        :meth:`LassoData.fw_gap`).
    """

    objective: Quadratic | None
    lmo: LMO
    x0: Tensor
    to_coef: Callable[[Tensor], Tensor]
    form: str
    value: float
    radius: float
    data: LassoData

    def intercept(self, w: Tensor) -> float:
        """:math:`b = \bar y - \bar x^\top w` (0 without an intercept)."""
        d = self.data
        return d.y_mean - float((d.x_mean * w).sum()) if d.fit_intercept else 0.0

    def gap(self, w: Tensor) -> float:
        r"""The certificate at ``w``: scikit-learn's duality gap (penalized form) or the
        Frank-Wolfe gap (constrained form), both in the scale :math:`\frac1{2n}\|\cdot\|^2`."""
        if self.form == "alpha":
            return self.data.sklearn_gap(w, self.value)[0]
        return self.data.fw_gap(w, self.value)


def lasso_problem(X, y, *, alpha: float | None = None, radius: float | None = None,
                  method: str = "l1ball", fit_intercept: bool = True, w0=None,
                  sample_weight=None, device=None, dtype: torch.dtype = torch.float64,
                  cache_size: float = 256.0) -> LassoProblem:
    r"""Build the Lasso on ``(X, y)`` as a problem for a Frank-Wolfe solver.

    Exactly one of ``alpha`` (penalized form :math:`\min_w f(w) + \alpha\|w\|_1`, solved in the
    epigraph form over a certified ball) and ``radius`` (constrained form
    :math:`\min_{\|w\|_1 \le t} f(w)`) is given; :math:`f(w) = \frac1{2n}\|y_c - X_c w\|^2`.
    ``method`` picks the formulation: ``"l1ball"`` (Jaggi 2013) or ``"svm"`` (the simplex of
    Jaggi's equivalent SVM, :mod:`torchfw.lasso.equivalence`). :class:`~torchfw.Lasso` and
    :func:`~torchfw.lasso_path` solve exactly these problems.

    Examples
    --------
    >>> import numpy as np
    >>> from torchfw import ExactLineSearch, PairwiseFrankWolfe
    >>> from torchfw.lasso.problem import lasso_problem
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(40, 8)); y = X[:, 0] - 2 * X[:, 3]
    >>> problem = lasso_problem(X, y, radius=2.0)
    >>> result = PairwiseFrankWolfe(problem.lmo, ExactLineSearch(), tol=1e-10).minimize(
    ...     problem.objective, problem.x0)
    >>> w = problem.to_coef(result.x)
    >>> bool(abs(float(w.abs().sum()) - 2.0) < 1e-6)
    True
    """
    if (alpha is None) == (radius is None):
        raise ValueError("give exactly one of alpha (penalized Lasso) and radius (constrained "
                         "Lasso)")
    _check_choice("method", method, METHODS)
    data = LassoData(X, y, fit_intercept=fit_intercept, device=device, dtype=dtype,
                     cache_size=cache_size, sample_weight=sample_weight)
    if w0 is not None:
        w0 = torch.as_tensor(np.asarray(w0, dtype=np.float64) if not isinstance(w0, Tensor)
                             else w0)
        if w0.shape != (data.n_features,):
            raise ValueError(f"w0 must have shape ({data.n_features},), got {tuple(w0.shape)}")
    if radius is not None:
        if not radius >= 0:
            raise ValueError(f"radius must be >= 0, got {radius!r}")
        return data.constrained_problem(float(radius), w0, method=method)
    assert alpha is not None  # exactly one of alpha and radius (checked above)
    if not alpha > 0:
        raise ValueError(f"alpha must be > 0, got {alpha!r}")
    return data.penalized_problem(float(alpha), w0, method=method)
