r"""Lasso regression: the estimator :class:`Lasso` and :func:`lasso_path`.

The Frank-Wolfe problems (constrained and penalized forms, over the L1 ball or as Jaggi's SVM),
their certificates and the maps from a solver's point back to coefficients are built by
:mod:`torchfw.lasso.problem`, whose docstring gives the mathematics; coordinate descent with
working sets, gap-safe screening and Anderson extrapolation (``solver="cd"``, the default for
the penalized form on the host) is :mod:`torchfw.lasso.cd`. This module validates parameters,
drives the solves (whole, or on a growing working set of features) and stores the model in
scikit-learn's attributes. The references (Jaggi 2013 and 2014, Harchaoui, Juditsky &
Nemirovski 2015, Fercoq, Gramfort & Salmon 2015) are listed there too.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any, ClassVar

import numpy as np
import torch
from torch import Tensor

from .. import exceptions
from ..result import Status
from ..utils.data import _is_scipy_sparse, as_matrix, as_target, r2
from ..utils.estimator import BaseEstimator, check_is_fitted, fit_atomically, plain
from ..utils.validation import check_int_at_least, check_nonnegative, check_positive, resolve_device
from ._cd_fit import (
    ESTIMATOR_SOLVERS,
    _alpha_grid,
    _cd_path,
    _design_and_fit,
    _grid,
    _resolve_solver,
    _scipy_csc,
    resolve_dtype,
)
from .cd import CDDesign, _dot
from .problem import (
    METHODS,
    SOLVERS,
    LassoData,
    LassoProblem,
    _check_choice,
    _dual_gap,
    lasso_problem,
)

__all__ = ["Lasso", "lasso_path", "LassoData", "LassoProblem", "lasso_problem", "SOLVERS",
           "METHODS", "ESTIMATOR_SOLVERS"]

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
    r"""Lasso regression by coordinate descent or Frank-Wolfe methods (scikit-learn API).

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
        Frank-Wolfe over the L1 ball, or over the simplex of Jaggi's SVM (same iterates). Not
        used by ``solver="cd"``.
    solver : {"auto", "cd", "pairwise", "away", "swap", "fw", "partan"}, default "auto"
        ``"cd"``: coordinate descent with working sets, gap-safe screening and Anderson
        extrapolation (:mod:`torchfw.lasso.cd`; penalized form only, runs on the host).
        The others are Frank-Wolfe variants: pairwise, away and SWAP converge linearly on the
        Lasso; plain FW and PARTAN are sublinear and only suit loose tolerances. ``"auto"``:
        ``"cd"`` for the penalized form on CPU data (numba available, no ``time_limit``),
        ``"pairwise"`` otherwise (the constrained form, CUDA data).
    tol : float, default 1e-4
        Stop when the certified duality gap is at most ``tol * ||y_c||^2 / n``
        (scikit-learn's meaning).
    max_iter : int, default 100000
        Frank-Wolfe iterations, or coordinate-descent epochs over the working sets (a
        :class:`~torchfw.exceptions.ConvergenceWarning` when reached).
    warm_start : bool, default False
        Start from the previous ``coef_``.
    check_every : int, optional
        Iterations between gap checks (solver default: 10 on the host, 50 on CUDA; for
        ``"cd"``, epochs between checks of a working set's own gap, default 1).
    cache_size : float, default 256
        Gram column cache in MB.
    device : str or torch.device, optional
        Where to fit; default the device of a tensor ``X``, else CPU.
    dtype : {None, torch.float64, torch.float32, "float64", "float32"}, default None
        Precision of the stored design and Gram columns (solver state is float64). ``None``
        means float64; NumPy dtypes and their names are accepted too.
        Precision of the stored design and Gram columns (solver state is float64).
    execution : {"auto", "host", "device", "graph"}, default "auto"
        How the solver engine runs (see :class:`~torchfw.ConstrainedOptimizer`).
    working_set : bool or "auto", default "auto"
        Solve on a growing working set of features, checking the full problem's gap between
        rounds (see :func:`_fit_working_set`): columns then cost ``n |W|`` instead of ``n p``.
        ``"auto"``: when there are more than 128 features (always for ``"cd"``, whose
        ``False`` sweeps every feature that screening keeps).
    time_limit : float, optional
        Wall-clock budget in seconds (Frank-Wolfe solvers only).
    verbose : bool, default False

    Attributes
    ----------
    coef_ : ndarray of shape (n_features,)
    intercept_ : float
    n_iter_ : int
        Frank-Wolfe iterations, or coordinate-descent epochs (over working sets).
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
        Penalized form with a Frank-Wolfe solver: the certified radius ``T`` of the ball the
        solver worked on (``None`` for ``"cd"``).
    working_set_ : ndarray of int or None
        Features of the final working set (``None`` when the problem was solved whole, and for
        ``"cd"``).
    result_ : Result
        The solver's result (history, status, step counts). For ``"cd"`` the history has one
        entry per working-set round (epochs so far, primal value, certified gap, and in
        ``steps`` the working-set size and the screened count) and ``info`` the totals.

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
    _state_format = "torchfw.Lasso"
    # lasso_path (set below its definition), as scikit-learn's Lasso.path.
    path: ClassVar[Callable[..., Any]]

    def __init__(self, alpha=None, *, radius=None, fit_intercept=True, method="l1ball",
                 solver="auto", tol=1e-4, max_iter=100_000, warm_start=False,
                 check_every=None, cache_size=256.0, device=None, dtype=None,
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

    def fit(self, X, y, sample_weight=None):
        """Fit on ``X`` (dense or sparse ``(n_samples, n_features)``) and targets ``y``.

        ``sample_weight`` (optional, ``(n_samples,)``, >= 0) weighs each squared residual, as in
        scikit-learn (weights rescaled to sum to ``n_samples``; see :class:`LassoData`).

        A fit that does not finish (an exception, a ``KeyboardInterrupt``) leaves the estimator
        as it was (:func:`torchfw.utils.estimator.fit_atomically`).
        """
        return fit_atomically(self, type(self)._fit_checked, X, y, sample_weight)

    def _fit_checked(self, X, y, sample_weight=None):
        form, value = _check_alpha_radius(self.alpha, self.radius)
        _check_choice("method", self.method, METHODS)
        _check_choice("solver", self.solver, ESTIMATOR_SOLVERS)
        tol = check_positive("tol", self.tol)
        options = self._options()
        dtype = resolve_dtype(self.dtype)
        _use_working_set(self.working_set, None)  # checks the value
        device = resolve_device(self.device)
        if _is_scipy_sparse(X) and (device is None or device.type == "cpu") and \
                _resolve_solver(self.solver, form, torch.device("cpu"), self.time_limit) == "cd":
            # Coordinate descent reads columns: a SciPy matrix goes to CSC directly, without
            # the CSR tensor the Frank-Wolfe solvers need.
            csc = _scipy_csc(X, dtype)
            self._check_features(int(csc.shape[1]), None, reset=True)
            return self._fit_cd(csc, y, sample_weight, value, tol, options)
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="Sparse CSR tensor support is in beta")
            warnings.filterwarnings("ignore", message="Sparse invariant checks")
            X = self._validate_X(X, reset=True, device=resolve_device(self.device), dtype=dtype)
        solver = _resolve_solver(self.solver, form, X.device, self.time_limit)
        if solver == "cd":
            return self._fit_cd(X, y, sample_weight, value, tol, options)
        data = LassoData(X, y, fit_intercept=self.fit_intercept, dtype=dtype,
                         cache_size=self.cache_size, sample_weight=sample_weight)
        options["execution"] = _execution(self.execution, data)
        w0 = None
        if self.warm_start and getattr(self, "_coef", None) is not None and \
                self._coef.shape[0] == data.n_features:
            w0 = self._coef.to(device=data.device, dtype=torch.float64)
        fit = _fit_one(data, form, value, w0, self.method, solver, tol, options,
                       _use_working_set(self.working_set, data))
        self._set_fitted(data, fit)
        return self

    def _fit_cd(self, X, y, sample_weight, alpha: float, tol: float, options: dict) -> Lasso:
        """Coordinate descent on a validated ``X`` (a tensor, or a SciPy CSC matrix)."""
        w0 = getattr(self, "_coef", None) if self.warm_start else None
        design, fit = _design_and_fit(X, y, sample_weight, self.fit_intercept, w0, alpha, tol,
                                      options, self.working_set, self.check_every)
        self._set_fitted(design, fit)
        return self

    def _set_fitted(self, data: LassoData | CDDesign, fit: dict) -> None:
        w = fit["w"]
        self.coef_ = w.detach().cpu().numpy().astype(np.float64)
        # NumPy for the host's small reductions: a torch one waits for an OpenMP time slice
        # on a loaded machine.
        self._coef = (torch.from_numpy(self.coef_.copy()) if w.device.type == "cpu"
                      else w.detach().clone())
        self.intercept_ = (data.y_mean - _dot(data.x_mean.cpu().numpy(), self.coef_)
                           if data.fit_intercept else 0.0)
        self.n_iter_ = fit["n_iter"]
        self.dual_gap_ = fit["gap"]
        self.alpha_ = fit["alpha"]
        self.radius_ = fit["radius"]
        self.radius_bound_ = fit.get("T")
        ws = fit.get("working_set")
        self.working_set_ = None if ws is None else ws.cpu().numpy()
        self.result_ = fit["result"]
        if fit["status"] in (Status.MAX_ITER, Status.TIME_LIMIT, Status.NONFINITE):
            warnings.warn(f"Lasso solver {fit['solver']!r} stopped on {fit['status']} after "
                          f"{fit['n_iter']} iterations with duality gap {fit['gap']:.3g} > "
                          f"tol * ||y||^2 / n = {fit['target']:.3g}; increase max_iter or tol",
                          exceptions.ConvergenceWarning, stacklevel=3)

    def predict(self, X) -> np.ndarray:
        """:math:`X w + b` as a NumPy array."""
        check_is_fitted(self, "coef_")
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="Sparse CSR tensor support is in beta")
            warnings.filterwarnings("ignore", message="Sparse invariant checks")
            X = self._validate_X(X, reset=False, device=self._coef.device, dtype=torch.float64)
        out = X @ self._coef.to(torch.float64)
        return out.cpu().numpy() + self.intercept_

    def score(self, X, y, sample_weight=None) -> float:
        """Coefficient of determination :math:`R^2` on ``(X, y)``, weighted by ``sample_weight``."""
        pred = self.predict(X)
        y = as_target(y, pred.shape[0], estimator="Lasso").cpu().numpy()
        return r2(y, pred, sample_weight)

    # -- persistence (save/load come from BaseEstimator) -----------------------------------------

    def state_dict(self) -> dict:
        """The fitted model as tensors and plain values (loadable with ``weights_only=True``).

        The parameters (``device`` left out: a loaded model lives where ``map_location`` says;
        ``dtype`` by name), ``coef_`` as a float64 tensor, the intercept, the solve's figures
        (``n_iter_``, ``dual_gap_``, ``alpha_``, ``radius_``, ``radius_bound_``) and the
        feature count and names. ``result_`` (the solver's history) is not saved.
        """
        check_is_fitted(self, "coef_")
        params = self.get_params(deep=False)
        params.pop("device")
        if params["dtype"] is not None:
            params["dtype"] = str(resolve_dtype(params["dtype"])).removeprefix("torch.")
        names = getattr(self, "feature_names_in_", None)
        bound = self.radius_bound_
        return {"format": self._state_format, "version": 1, "params": plain(params),
                "n_features_in": int(self.n_features_in_),
                "feature_names_in": None if names is None else [str(c) for c in names],
                "coef": torch.from_numpy(np.asarray(self.coef_, dtype=np.float64).copy()),
                "intercept": float(self.intercept_), "n_iter": int(self.n_iter_),
                "dual_gap": float(self.dual_gap_), "alpha": float(self.alpha_),
                "radius": float(self.radius_),
                "radius_bound": None if bound is None else float(bound),
                "working_set": None if self.working_set_ is None
                else torch.from_numpy(np.asarray(self.working_set_, dtype=np.int64))}

    @classmethod
    def from_state_dict(cls, state: dict, map_location=None) -> Lasso:
        """A fitted model from :meth:`state_dict`'s output, checked field by field first."""
        fmt = cls._state_format
        if not isinstance(state, dict) or state.get("format") != fmt:
            raise ValueError(f"not a {fmt} state dict")
        missing = [key for key in ("params", "n_features_in", "coef", "intercept", "n_iter",
                                   "dual_gap", "alpha", "radius") if key not in state]
        if missing:
            raise ValueError(f"{fmt} state dict is missing {missing}")
        coef, d = state["coef"], state["n_features_in"]
        if not (isinstance(d, int) and d >= 1 and isinstance(coef, Tensor)
                and coef.shape == (d,) and coef.is_floating_point()):
            raise ValueError(f"{fmt} state dict is inconsistent: coef must be a float tensor "
                             f"of shape (n_features_in,) = ({d},), got "
                             f"{getattr(coef, 'shape', type(coef).__name__)}")
        numbers = {key: state[key] for key in ("intercept", "dual_gap", "alpha", "radius")}
        if not (bool(torch.isfinite(coef).all())
                and all(isinstance(v, (int, float)) and np.isfinite(v)
                        for v in numbers.values())):
            raise ValueError(f"{fmt} state dict holds non-finite or non-numeric coefficients "
                             f"or figures")
        model = cls(**state["params"])
        device = resolve_device(map_location) or torch.device("cpu")
        model.n_features_in_ = d
        if state.get("feature_names_in") is not None:
            model.feature_names_in_ = np.asarray(state["feature_names_in"], dtype=object)
        model._coef = coef.to(device=device, dtype=torch.float64)
        model.coef_ = coef.to(torch.float64).numpy().copy()
        model.intercept_ = float(numbers["intercept"])
        model.n_iter_ = int(state["n_iter"])
        model.dual_gap_ = float(numbers["dual_gap"])
        model.alpha_ = float(numbers["alpha"])
        model.radius_ = float(numbers["radius"])
        model.radius_bound_ = state.get("radius_bound")
        ws = state.get("working_set")
        model.working_set_ = None if ws is None else ws.numpy()
        model.result_ = None
        return model

    @property
    def sparse_coef_(self):
        """``coef_`` as a SciPy CSR row (as scikit-learn)."""
        check_is_fitted(self, "coef_")
        from scipy import sparse

        return sparse.csr_matrix(self.coef_[None, :])


def _use_working_set(working_set, data: LassoData | None) -> bool:
    """Whether the Frank-Wolfe fit uses working sets (``data=None``: only check the value)."""
    if isinstance(working_set, str):
        if working_set != "auto":
            raise ValueError(f"working_set must be True, False or 'auto', got {working_set!r}")
        return data is not None and data.n_features > 4 * _WS_MIN_SIZE
    if not isinstance(working_set, (bool, np.bool_)):
        raise ValueError(f"working_set must be True, False or 'auto', got {working_set!r}")
    return bool(working_set)


def _execution(execution: str, data: LassoData) -> str:
    """The engine's execution mode; sparse CUDA products stay out of CUDA graphs."""
    if execution == "auto" and data.device.type == "cuda" and data.gram.sparse:
        # cuSPARSE products are not guaranteed capturable: run sync-free but uncaptured.
        return "device"
    return execution


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
                "target": target, "solver": solver}
    alpha = value
    w, result, T, _ = data.solve_penalized(alpha, w0, method=method, solver=solver, tol=tol,
                                           **options)
    # The Lasso's gap rule (lasso_problem.LassoGapRule) reports CONVERGED itself.
    status = Status.CONVERGED if result is None else result.status
    gap, _ = data.sklearn_gap(w, alpha)
    return {"w": w, "n_iter": 0 if result is None else result.n_iter, "gap": gap,
            "alpha": alpha, "radius": float(w.abs().sum()), "T": T, "result": result,
            "status": status, "target": target, "solver": solver}


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
           "target": target, "working_set": torch.nonzero(in_set).squeeze(1), "solver": solver}
    if form == "alpha":
        fit.update(alpha=value, radius=float(w.abs().sum()), T=T)
    else:
        fit.update(alpha=float(g.abs().max()), radius=value)
    return fit


def lasso_path(X, y, *, alphas=None, radii=None, n_alphas: int = 50, eps: float = 1e-3,
               fit_intercept: bool = False, method: str = "l1ball", solver: str = "auto",
               tol: float = 1e-4, max_iter: int = 100_000, check_every=None,
               cache_size: float = 256.0, device=None, dtype=None,
               execution: str = "auto", working_set="auto", return_n_iter: bool = False,
               verbose: bool = False):
    r"""Lasso solutions over a grid of penalties or radii, each warm-started from the last.

    With a Frank-Wolfe solver one Gram operator (and its column cache) serves the whole path,
    so features that stay active cost one product with ``X`` for the entire path; with
    coordinate descent (``solver="cd"``, the default for penalties on the host) one column-major
    copy of the design does, and each solve starts from the last one's support.

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
        As for :class:`Lasso` (``solver="auto"``: coordinate descent for ``alphas`` on the
        host, pairwise Frank-Wolfe for ``radii``).
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
    _check_choice("solver", solver, ESTIMATOR_SOLVERS)
    tol = check_positive("tol", tol)
    _use_working_set(working_set, None)  # checks the value
    if radii is None:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="Sparse CSR tensor support is in beta")
            warnings.filterwarnings("ignore", message="Sparse invariant checks")
            Xt = as_matrix(X, device=resolve_device(device), dtype=resolve_dtype(dtype))
        solver = _resolve_solver(solver, "alpha", Xt.device, None)
        if solver == "cd":
            return _cd_path(Xt, y, alphas, n_alphas, eps, fit_intercept, tol, max_iter,
                            working_set, check_every, return_n_iter)
        X = Xt
    else:
        solver = _resolve_solver(solver, "radius", torch.device("cpu"), None)
    data = LassoData(X, y, fit_intercept=fit_intercept, device=device,
                     dtype=resolve_dtype(dtype), cache_size=cache_size)
    if radii is not None:
        grid = np.sort(_grid("radii", radii, allow_zero=True))
        form = "radius"
    else:
        form = "alpha"
        grid = _alpha_grid(alphas, n_alphas, eps, data.alpha_max)
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
                          f"gap {fit['gap']:.3g} > {fit['target']:.3g}",
                          exceptions.ConvergenceWarning, stacklevel=2)
    if return_n_iter:
        return grid, coefs, gaps, n_iters
    return grid, coefs, gaps


Lasso.path = staticmethod(lasso_path)
