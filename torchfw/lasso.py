r"""Lasso regression by Frank-Wolfe: over the L1 ball, or as an SVM (Jaggi's equivalence).

Two problems, in scikit-learn's scale (``n`` samples, :math:`X_c, y_c` centred when an intercept
is fitted, else :math:`X, y`):

.. math::
    \text{constrained:}\quad \min_{\|w\|_1 \le t}\ f(w), \qquad
    \text{penalized:}\quad \min_w\ P(w) = f(w) + \alpha\|w\|_1, \qquad
    f(w) = \frac1{2n}\|y_c - X_c w\|^2 .

:math:`f` is the quadratic :math:`\tfrac12 w^\top Q w - q^\top w + \tfrac1{2n}\|y_c\|^2` with
:math:`Q = X_c^\top X_c/n` (a lazy :class:`~torchfw.gram.GramOperator`: one column, i.e. one
matrix-vector product with ``X``, per iteration) and :math:`q = X_c^\top y_c / n`.

**Constrained form** (``Lasso(radius=t)``). ``method="l1ball"`` runs the chosen Frank-Wolfe
variant on :class:`~torchfw.L1Ball` (Jaggi 2013). ``method="svm"`` runs it on the unit simplex
over the 2p signed, shifted atoms :math:`\pm t A_i - b` with :math:`A = X_c/\sqrt n`,
:math:`b = y_c/\sqrt n` (:func:`torchfw.equivalence.lasso_to_svm`; Jaggi 2014, seed 003): the two
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
the Gram matrix (:class:`~torchfw.equivalence.SignedAtomsOperator`, ``offset``). With
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

import numpy as np
import torch
from torch import Tensor

from ._data import as_matrix
from ._estimator import BaseEstimator, check_is_fitted
from ._validation import (
    check_finite,
    check_int_at_least,
    check_nonnegative,
    check_positive,
    resolve_device,
)
from .equivalence import SignedAtomsOperator
from .gram import GramOperator
from .linesearch import ExactLineSearch
from .objectives import Quadratic
from .optimizers import (
    AwayStepFrankWolfe,
    FrankWolfe,
    PairwiseFrankWolfe,
    PartanFrankWolfe,
    SwapFrankWolfe,
    _kernels,
)
from .oracles import L1Ball, Simplex
from .result import Status
from .svm import ConvergenceWarning

__all__ = ["Lasso", "lasso_path", "LassoData", "SOLVERS", "METHODS"]

#: Frank-Wolfe variants accepted by :class:`Lasso` (``solver=``).
SOLVERS = {
    "fw": FrankWolfe,
    "away": AwayStepFrankWolfe,
    "pairwise": PairwiseFrankWolfe,
    "swap": SwapFrankWolfe,
    "partan": PartanFrankWolfe,
}
#: Formulations accepted by :class:`Lasso` (``method=``).
METHODS = ("l1ball", "svm")


def _check_choice(name: str, value, choices) -> None:
    if not isinstance(value, str) or value not in choices:
        raise ValueError(f"unknown {name} {value!r}; expected one of {tuple(choices)}")


def _as_target(y, n: int, device, dtype) -> Tensor:
    if isinstance(y, Tensor):
        v = y.detach()
    else:
        array = np.asarray(y)
        if array.dtype == object or not np.issubdtype(array.dtype, np.number):
            raise TypeError(f"y must be numeric, got an array of dtype {array.dtype}")
        v = torch.from_numpy(np.ascontiguousarray(array))
    if v.dim() == 2 and v.shape[1] == 1:
        v = v[:, 0]
    if v.dim() != 1:
        raise ValueError(f"y must be 1-d (n_samples,), got shape {tuple(v.shape)}")
    if v.shape[0] != n:
        raise ValueError(f"X has {n} samples but y has {v.shape[0]}")
    v = v.to(device=device, dtype=dtype)
    check_finite("y", v)
    return v


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
        See :class:`Lasso`.

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
                 dtype: torch.dtype = torch.float64, cache_size: float = 256.0):
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
        y = _as_target(y, n, X.device, torch.float64)
        self.fit_intercept = bool(fit_intercept)
        self.y_mean = float(y.mean()) if self.fit_intercept else 0.0
        self.yc = y - self.y_mean
        self.gram = GramOperator(X, center=self.fit_intercept, dtype=dtype,
                                 cache_size=cache_size)
        self.x_mean = self.gram.means.to(torch.float64)
        self.q = (self.gram.rmatvec(self.yc) / n).to(torch.float64)
        self.yy = float((self.yc * self.yc).sum()) / n
        self.alpha_max = float(self.q.abs().max())

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

    def solve_constrained(self, radius: float, w0: Tensor | None, *, method: str, solver: str,
                          tol: float, **options):
        """Constrained Lasso at ``radius``; returns ``(w, result)``."""
        p = self.n_features
        dt = self.state_dtype
        w0 = torch.zeros(p, dtype=dt, device=self.device) if w0 is None else w0.to(dt)
        norm0 = float(w0.abs().sum())
        if norm0 > radius:  # a warm start from a larger ball: shrink it into this one
            w0 = w0 * (radius / norm0)
        tol_abs = max(tol * self.yy, 1e-300)
        if method == "l1ball":
            objective = Quadratic(self.gram, c=-self.q, constant=self.yy / 2)
            lmo, x0 = L1Ball(radius), w0
        else:
            op = SignedAtomsOperator(self.gram, radius, self.q, self.yy)
            objective = Quadratic(op)
            lmo, x0 = Simplex(), L1Ball(radius).to_weights(w0)
        options = _small_problem_execution(options, 2 * p, self.device, solver)
        opt = SOLVERS[solver](lmo, ExactLineSearch(), tol=tol_abs, **options)
        result = opt.minimize(objective, x0)
        w = result.x if method == "l1ball" else radius * (result.x[:p] - result.x[p:])
        return w, result

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
        w0 = torch.zeros(p, dtype=dt, device=self.device) if w0 is None else w0.to(dt)
        norm0 = float(w0.abs().sum())
        # Certified radius, with a hair of slack for the rounding in the bound itself.
        T = max(self.dual_point_bound(w0, alpha), norm0) * (1 + 1e-6)
        if T <= 0:  # y_c = 0 and w0 = 0: the solution is w = 0
            return w0, None, 0.0, 0.0
        objective = self.epigraph_problem(alpha, T, method)
        x0 = torch.cat([w0.clamp_min(0) / T, (-w0).clamp_min(0) / T,
                        torch.full((1,), 1 - norm0 / T, dtype=dt, device=self.device)])
        target = tol * self.yy
        state = {"gap": math.inf}
        q, yy = self.q, self.yy

        # q'w = T [q; -q; 0]' lambda: one inner product, no temporary of size N.
        q_atoms = torch.cat([T * q, -T * q, torch.zeros(1, dtype=dt, device=self.device)])
        on_host = self.device.type == "cpu" and _kernels.HAVE_NUMBA

        def stop(info):
            lam = info.x
            tau = T * (1.0 - float(lam[-1]))
            f = info.value - alpha * tau
            qw = (_kernels.dot(q_atoms.numpy(), lam.numpy(), lam.shape[0]) if on_host
                  else float(torch.dot(q_atoms, lam)))
            gw = 2.0 * f + qw - yy                              # grad f(w)' w
            excess = max(0.0, (info.gap - gw - alpha * tau) / T)  # ||grad f||_inf - alpha
            gap = _dual_gap_scaled(f, gw, alpha + excess, tau, alpha)
            state["gap"] = gap
            if callback is not None and callback(info):
                return True
            state["converged"] = gap <= target
            return state["converged"]

        options = _small_problem_execution(options, 2 * p + 1, self.device, solver)
        opt = SOLVERS[solver](Simplex(), ExactLineSearch(), tol=1e-300, callback=stop,
                              **options)
        result = opt.minimize(objective, x0)
        if result.status is Status.CALLBACK and state.get("converged"):
            # The stopping rule lives in the callback (the scaled gap is the Lasso's, not the
            # epigraph problem's), so the optimizer cannot tell convergence from a user stop.
            result.status = Status.CONVERGED
        w = T * (result.x[:p] - result.x[p:2 * p])
        return w, result, T, state["gap"]


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


def _check_alpha_radius(alpha, radius) -> tuple[str, float]:
    if alpha is not None and radius is not None:
        raise ValueError("give either alpha (penalized Lasso) or radius (constrained Lasso), "
                         "not both")
    if radius is not None:
        return "radius", check_nonnegative("radius", radius)
    value = 1.0 if alpha is None else alpha
    value = check_nonnegative("alpha", value)
    if value == 0:
        raise ValueError("alpha=0 is least squares: no L1 ball provably holds its solution; "
                         "use Lasso(radius=...) or a positive alpha")
    return "alpha", value


class Lasso(BaseEstimator):
    r"""Lasso regression trained by Frank-Wolfe methods (scikit-learn API).

    Penalized form (``alpha``), scikit-learn's objective
    :math:`\frac1{2n}\|y - Xw - b\|^2 + \alpha\|w\|_1`; or constrained form (``radius``),
    :math:`\min \frac1{2n}\|y - Xw - b\|^2` subject to :math:`\|w\|_1 \le t`. See the module
    docstring for the formulations, the certified radius of the penalized form and the gap.

    Parameters
    ----------
    alpha : float, optional
        Penalty :math:`\alpha > 0`. Default 1.0 (scikit-learn's) unless ``radius`` is given.
    radius : float, optional
        Radius :math:`t \ge 0` of the constrained form (exclusive with ``alpha``).
    fit_intercept : bool, default True
        Fit an unpenalized intercept (X and y are centred; sparse X stays sparse).
    method : {"l1ball", "svm"}, default "l1ball"
        Frank-Wolfe over the L1 ball, or over the simplex of Jaggi's SVM (same iterates).
    solver : {"pairwise", "away", "swap", "fw", "partan"}, default "pairwise"
        Frank-Wolfe variant. Pairwise, away and SWAP converge linearly on the Lasso; plain FW and
        PARTAN are sublinear and only suit loose tolerances.
    tol : float, default 1e-4
        Stop when the duality gap is at most ``tol * ||y_c||^2 / n`` (scikit-learn's meaning).
    max_iter : int, default 100000
        Frank-Wolfe iterations (a :class:`~torchfw.svm.ConvergenceWarning` when reached).
    warm_start : bool, default False
        Start from the previous ``coef_``.
    check_every : int, optional
        Iterations between gap checks (solver default: 10 on the host, 50 on CUDA).
    cache_size : float, default 256
        Gram column cache in MB.
    device : str or torch.device, optional
        Where to fit; default the device of a tensor ``X``, else CPU.
    dtype : torch.dtype, default torch.float64
        Precision of the stored design and Gram columns (solver state is float64).
    execution : {"auto", "host", "device", "graph"}, default "auto"
        How the solver engine runs (see :class:`~torchfw.ConstrainedOptimizer`).
    working_set : bool or "auto", default "auto"
        Solve on a growing working set of features, checking the full problem's gap between
        rounds (see :func:`_fit_working_set`): columns then cost ``n |W|`` instead of ``n p``.
        ``"auto"``: when there are more than 128 features.
    time_limit : float, optional
        Wall-clock budget in seconds.
    verbose : bool, default False

    Attributes
    ----------
    coef_ : ndarray of shape (n_features,)
    intercept_ : float
    n_iter_ : int
        Frank-Wolfe iterations.
    dual_gap_ : float
        Penalized form: scikit-learn's duality gap at ``coef_``; constrained form: the
        Frank-Wolfe gap. Both in the scale :math:`\frac1{2n}\|\cdot\|^2` and computed exactly
        from the residual.
    alpha_ : float
        The penalty for which ``coef_`` is optimal: ``alpha`` (penalized form) or the
        multiplier :math:`\|X_c^\top R\|_\infty/n` of the constraint (constrained form).
    radius_ : float
        ``||coef_||_1`` (penalized form) or ``radius``.
    radius_bound_ : float
        Penalized form: the certified radius ``T`` of the ball the solver worked on.
    working_set_ : ndarray of int or None
        Features of the final working set (``None`` when the problem was solved whole).
    result_ : Result
        The solver's result (history, status, step counts).

    Examples
    --------
    >>> import torch
    >>> from torchfw import Lasso
    >>> from torchfw.datasets import make_sparse_regression
    >>> X, y, w = make_sparse_regression(50, 200, 5, random_state=0)
    >>> model = Lasso(alpha=0.1).fit(X, y)
    >>> int((model.coef_ != 0).sum()) <= 50
    True
    """

    _estimator_kind = "regressor"

    def __init__(self, alpha=None, *, radius=None, fit_intercept=True, method="l1ball",
                 solver="pairwise", tol=1e-4, max_iter=100_000, warm_start=False,
                 check_every=None, cache_size=256.0, device=None, dtype=torch.float64,
                 execution="auto", working_set="auto", time_limit=None, verbose=False):
        self.alpha = alpha
        self.radius = radius
        self.fit_intercept = fit_intercept
        self.method = method
        self.solver = solver
        self.tol = tol
        self.max_iter = max_iter
        self.warm_start = warm_start
        self.check_every = check_every
        self.cache_size = cache_size
        self.device = device
        self.dtype = dtype
        self.execution = execution
        self.working_set = working_set
        self.time_limit = time_limit
        self.verbose = verbose

    def _options(self) -> dict:
        options = {"max_iter": check_int_at_least("max_iter", self.max_iter, 1),
                   "verbose": bool(self.verbose), "execution": self.execution}
        if self.check_every is not None:
            options["check_every"] = check_int_at_least("check_every", self.check_every, 1)
        if self.time_limit is not None:
            options["time_limit"] = check_positive("time_limit", self.time_limit)
        return options

    def fit(self, X, y):
        """Fit on ``X`` (dense or sparse ``(n_samples, n_features)``) and targets ``y``."""
        form, value = _check_alpha_radius(self.alpha, self.radius)
        _check_choice("method", self.method, METHODS)
        _check_choice("solver", self.solver, SOLVERS)
        tol = check_positive("tol", self.tol)
        options = self._options()
        data = LassoData(X, y, fit_intercept=self.fit_intercept, device=self.device,
                         dtype=self.dtype, cache_size=self.cache_size)
        options["execution"] = _execution(self.execution, data)
        w0 = None
        if self.warm_start and getattr(self, "_coef", None) is not None and \
                self._coef.shape[0] == data.n_features:
            w0 = self._coef.to(device=data.device, dtype=torch.float64)
        fit = _fit_one(data, form, value, w0, self.method, self.solver, tol, options,
                       _use_working_set(self.working_set, data))
        self._set_fitted(data, fit)
        return self

    def _set_fitted(self, data: LassoData, fit: dict) -> None:
        w = fit["w"]
        self._coef = w.detach().clone()
        self.coef_ = w.detach().cpu().numpy().astype(np.float64)
        self.intercept_ = (data.y_mean - float((data.x_mean * w).sum())
                           if data.fit_intercept else 0.0)
        self.n_iter_ = fit["n_iter"]
        self.dual_gap_ = fit["gap"]
        self.alpha_ = fit["alpha"]
        self.radius_ = fit["radius"]
        self.radius_bound_ = fit.get("T")
        ws = fit.get("working_set")
        self.working_set_ = None if ws is None else ws.cpu().numpy()
        self.result_ = fit["result"]
        self.n_features_in_ = data.n_features
        if fit["status"] in (Status.MAX_ITER, Status.TIME_LIMIT, Status.NONFINITE):
            warnings.warn(f"Lasso solver {self.solver!r} stopped on {fit['status']} after "
                          f"{fit['n_iter']} iterations with duality gap {fit['gap']:.3g} > "
                          f"tol * ||y||^2 / n = {fit['target']:.3g}; increase max_iter or tol",
                          ConvergenceWarning, stacklevel=3)

    def predict(self, X) -> np.ndarray:
        """:math:`X w + b` as a NumPy array."""
        check_is_fitted(self, "coef_")
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="Sparse CSR tensor support is in beta")
            warnings.filterwarnings("ignore", message="Sparse invariant checks")
            X = as_matrix(X, device=self._coef.device, dtype=torch.float64)
        if X.shape[1] != self.n_features_in_:
            raise ValueError(f"X has {X.shape[1]} features but this Lasso was fitted with "
                             f"{self.n_features_in_}")
        out = X @ self._coef.to(torch.float64)
        return out.cpu().numpy() + self.intercept_

    def score(self, X, y) -> float:
        """Coefficient of determination :math:`R^2` on ``(X, y)``."""
        pred = self.predict(X)
        y = np.asarray(y.cpu() if isinstance(y, Tensor) else y, dtype=np.float64).ravel()
        if y.shape != pred.shape:
            raise ValueError(f"y has shape {y.shape}, expected {pred.shape}")
        ss_res = float(((y - pred) ** 2).sum())
        ss_tot = float(((y - y.mean()) ** 2).sum())
        return 1.0 - ss_res / ss_tot if ss_tot > 0 else (1.0 if ss_res == 0 else 0.0)

    @property
    def sparse_coef_(self):
        """``coef_`` as a SciPy CSR row (as scikit-learn)."""
        check_is_fitted(self, "coef_")
        from scipy import sparse

        return sparse.csr_matrix(self.coef_[None, :])


def _use_working_set(working_set, data: LassoData) -> bool:
    if isinstance(working_set, str):
        if working_set != "auto":
            raise ValueError(f"working_set must be True, False or 'auto', got {working_set!r}")
        return data.n_features > 4 * _WS_MIN_SIZE
    if not isinstance(working_set, (bool, np.bool_)):
        raise ValueError(f"working_set must be True, False or 'auto', got {working_set!r}")
    return bool(working_set)


def _execution(execution: str, data: LassoData) -> str:
    """The engine's execution mode; sparse CUDA products stay out of CUDA graphs."""
    if execution == "auto" and data.device.type == "cuda" and data.gram.sparse:
        # cuSPARSE products are not guaranteed capturable: run sync-free but uncaptured.
        return "device"
    return execution


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


def _fit_one(data: LassoData, form: str, value: float, w0: Tensor | None, method: str,
             solver: str, tol: float, options: dict, working_set: bool = False) -> dict:
    """One fit of the penalized (``form="alpha"``) or constrained (``"radius"``) Lasso."""
    if working_set and data.n_features > _WS_MIN_SIZE and not (form == "radius" and value == 0):
        return _fit_working_set(data, form, value, w0, method, solver, tol, options)
    target = tol * data.yy
    p = data.n_features
    if form == "radius":
        t = value
        if t == 0 or data.yy == 0 and (w0 is None or not bool(w0.any())):
            w = torch.zeros(p, dtype=torch.float64, device=data.device)
            result, status = None, Status.CONVERGED
        else:
            w, result = data.solve_constrained(t, w0, method=method, solver=solver, tol=tol,
                                               **options)
            status = result.status
        gap = data.fw_gap(w, t)
        alpha_eff = float(data.gradient(w).abs().max())
        return {"w": w, "n_iter": 0 if result is None else result.n_iter, "gap": gap,
                "alpha": alpha_eff, "radius": t, "result": result, "status": status,
                "target": target}
    alpha = value
    w, result, T, _ = data.solve_penalized(alpha, w0, method=method, solver=solver, tol=tol,
                                           **options)
    status = Status.CONVERGED if result is None or result.status in (
        Status.CALLBACK, Status.CONVERGED) else result.status
    gap, _ = data.sklearn_gap(w, alpha)
    return {"w": w, "n_iter": 0 if result is None else result.n_iter, "gap": gap,
            "alpha": alpha, "radius": float(w.abs().sum()), "T": T, "result": result,
            "status": status, "target": target}


#: Working sets start with this many features (plus the warm start's support) and at least
#: this many are added per round; problems this small are solved whole.
_WS_MIN_SIZE = 32


def _full_state(data: LassoData, w: Tensor, form: str, value: float):
    """Gap of the full problem at ``w`` and the full gradient (one product with ``X^T``)."""
    n = data.n_samples
    R = data.residual(w)
    XtR = data.gram.rmatvec(R).to(torch.float64)
    g = -XtR / n
    m = float(g.abs().max())
    if form == "alpha":
        gap, _ = _dual_gap(float((R * R).sum()), float((R * data.yc).sum()), n * m,
                           float(w.abs().sum()), value, n)
    else:
        gap = float((g * w).sum()) + value * m
    return gap, g


def _fit_working_set(data: LassoData, form: str, value: float, w0: Tensor | None,
                     method: str, solver: str, tol: float, options: dict) -> dict:
    r"""Frank-Wolfe on a growing working set of features (the outer loop of Blitz/celer).

    Each round solves the Lasso restricted to a set :math:`W` of features (columns of the
    restricted Gram operator cost :math:`n|W|` instead of :math:`np`), then evaluates the gap of
    the *full* problem at the result with one product by :math:`X^\top`. Features outside
    :math:`W` that violate the optimality conditions (:math:`|\nabla_j f| > \alpha`, or for the
    constrained form :math:`|\nabla_j f| > \|\nabla_W f\|_\infty`, i.e. the full problem's FW
    atom lies outside :math:`W`) join :math:`W`, the most violating first: up to
    :math:`\max(32, |W|)` of them per round. With no violator outside :math:`W` the full gap
    equals the restricted one, so the run stops exactly when the full problem's gap meets
    ``tol``; :math:`W` only grows, so the loop ends. Rounds with violators solve the restricted
    problem only to a tenth of the current full gap.
    """
    p, dt = data.n_features, torch.float64
    target = tol * data.yy
    w = torch.zeros(p, dtype=dt, device=data.device) if w0 is None else w0.to(dt).clone()
    if form == "radius" and float(w.abs().sum()) > value:
        w *= value / float(w.abs().sum())
    max_iter = options.get("max_iter", 100_000)
    total, result, T = 0, None, None
    in_set = torch.zeros(p, dtype=torch.bool, device=data.device)
    in_set[torch.nonzero(w).squeeze(1)] = True
    status = Status.CONVERGED
    while True:
        gap, g = _full_state(data, w, form, value)
        if gap <= target or data.yy == 0:
            break
        if total >= max_iter:
            status = Status.MAX_ITER
            break
        score = g.abs()
        if form == "alpha":
            threshold = value
        else:
            threshold = float(score[in_set].max()) if bool(in_set.any()) else 0.0
        outside = torch.where(in_set, torch.zeros_like(score), score)
        violators = int((outside > threshold).sum())
        if violators:
            k = min(violators, max(_WS_MIN_SIZE, int(in_set.sum())))
            new = torch.topk(outside, k).indices
            in_set[new] = True
            inner = max(target, 0.1 * gap)
        else:
            inner = target
        index = torch.nonzero(in_set).squeeze(1)
        sub = data.restrict(index)
        opts = dict(options, max_iter=max(1, max_iter - total))
        if form == "alpha":
            w_sub, result, T, _ = sub.solve_penalized(value, w.index_select(0, index),
                                                      method=method, solver=solver,
                                                      tol=inner / data.yy, **opts)
        else:
            w_sub, result = sub.solve_constrained(value, w.index_select(0, index),
                                                  method=method, solver=solver,
                                                  tol=inner / data.yy, **opts)
        total += 0 if result is None else result.n_iter
        w = torch.zeros(p, dtype=dt, device=data.device)
        w[index] = w_sub.to(dt)
        if result is not None and result.status in (Status.TIME_LIMIT, Status.NONFINITE):
            gap, g = _full_state(data, w, form, value)
            status = result.status
            break
    fit = {"w": w, "n_iter": total, "gap": gap, "result": result, "status": status,
           "target": target, "working_set": torch.nonzero(in_set).squeeze(1)}
    if form == "alpha":
        fit.update(alpha=value, radius=float(w.abs().sum()), T=T)
    else:
        fit.update(alpha=float(g.abs().max()), radius=value)
    return fit


def lasso_path(X, y, *, alphas=None, radii=None, n_alphas: int = 50, eps: float = 1e-3,
               fit_intercept: bool = False, method: str = "l1ball", solver: str = "pairwise",
               tol: float = 1e-4, max_iter: int = 100_000, check_every=None,
               cache_size: float = 256.0, device=None, dtype=torch.float64,
               execution: str = "auto", working_set="auto", return_n_iter: bool = False,
               verbose: bool = False):
    r"""Lasso solutions over a grid of penalties or radii, each warm-started from the last.

    One Gram operator (and its column cache) serves the whole path, so features that stay active
    cost one product with ``X`` for the entire path.

    Parameters
    ----------
    X, y
        As for :meth:`Lasso.fit`.
    alphas : array-like, optional
        Penalties; solved in decreasing order (from the sparsest solution). Default: ``n_alphas``
        values log-spaced from :math:`\alpha_{\max} = \|X_c^\top y_c\|_\infty/n` down to
        ``eps`` times it, as scikit-learn's ``lasso_path``.
    radii : array-like, optional
        Radii of the constrained form instead (solved in increasing order). Exclusive with
        ``alphas``.
    n_alphas : int, default 50
    eps : float, default 1e-3
    fit_intercept : bool, default False
        scikit-learn's ``lasso_path`` fits none; ``True`` centres ``X`` and ``y``.
    method, solver, tol, max_iter, check_every, cache_size, device, dtype, execution, verbose
    working_set
        As for :class:`Lasso`.
    return_n_iter : bool, default False

    Returns
    -------
    grid : ndarray of shape (k,)
        The alphas (decreasing) or radii (increasing) solved.
    coefs : ndarray of shape (n_features, k)
    dual_gaps : ndarray of shape (k,)
        As :attr:`Lasso.dual_gap_`.
    n_iters : ndarray of shape (k,)
        Only with ``return_n_iter=True``.
    """
    if alphas is not None and radii is not None:
        raise ValueError("give either alphas or radii, not both")
    _check_choice("method", method, METHODS)
    _check_choice("solver", solver, SOLVERS)
    tol = check_positive("tol", tol)
    data = LassoData(X, y, fit_intercept=fit_intercept, device=device, dtype=dtype,
                     cache_size=cache_size)
    if radii is not None:
        grid = np.sort(_grid("radii", radii, allow_zero=True))
        form = "radius"
    else:
        form = "alpha"
        if alphas is None:
            n_alphas = check_int_at_least("n_alphas", n_alphas, 1)
            eps = check_positive("eps", eps)
            top = data.alpha_max if data.alpha_max > 0 else 1.0
            grid = np.geomspace(top, top * eps, n_alphas) if n_alphas > 1 else np.array([top])
        else:
            grid = np.sort(_grid("alphas", alphas, allow_zero=False))[::-1]
    options = {"max_iter": check_int_at_least("max_iter", max_iter, 1),
               "verbose": bool(verbose), "execution": _execution(execution, data)}
    if check_every is not None:
        options["check_every"] = check_int_at_least("check_every", check_every, 1)
    use_ws = _use_working_set(working_set, data)
    coefs = np.zeros((data.n_features, len(grid)))
    gaps = np.zeros(len(grid))
    n_iters = np.zeros(len(grid), dtype=np.int64)
    w = None
    for k, value in enumerate(grid):
        fit = _fit_one(data, form, float(value), w, method, solver, tol, options, use_ws)
        w = fit["w"]
        coefs[:, k] = w.detach().cpu().numpy()
        gaps[k] = fit["gap"]
        n_iters[k] = fit["n_iter"]
        if fit["status"] in (Status.MAX_ITER, Status.TIME_LIMIT, Status.NONFINITE):
            warnings.warn(f"lasso_path: {form}={value:.4g} stopped on {fit['status']} with "
                          f"gap {fit['gap']:.3g} > {fit['target']:.3g}", ConvergenceWarning,
                          stacklevel=2)
    if return_n_iter:
        return grid, coefs, gaps, n_iters
    return grid, coefs, gaps


def _grid(name: str, values, *, allow_zero: bool) -> np.ndarray:
    array = np.asarray(values, dtype=np.float64).ravel()
    if array.size == 0:
        raise ValueError(f"{name} is empty")
    if not np.isfinite(array).all():
        raise ValueError(f"{name} contains NaN or infinite values")
    if (array < 0).any() or (not allow_zero and (array == 0).any()):
        bound = ">= 0" if allow_zero else "> 0"
        raise ValueError(f"every entry of {name} must be {bound}, got {array.min():g}")
    return array


Lasso.path = staticmethod(lasso_path)
