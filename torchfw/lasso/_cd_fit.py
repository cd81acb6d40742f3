"""Lasso coordinate descent behind the estimator: solver choice, input layout, fits and paths.

What :class:`~torchfw.lasso.Lasso` and :func:`~torchfw.lasso.lasso_path` do when the solver is
coordinate descent (:mod:`torchfw.lasso.cd`): which solver ``"auto"`` means, how a SciPy sparse
design is checked and read in CSC without a tensor copy, one fit reported as the Frank-Wolfe
fits are (``Result``, status, gap), and a warm-started path; the penalty grids both families
share are built here too.
"""

from __future__ import annotations

import warnings

import numpy as np
import torch
from torch import Tensor

from .. import exceptions
from ..result import History, Result, Status
from ..utils.data import as_sample_weight, as_target
from ..utils.validation import check_int_at_least, check_positive
from .cd import HAVE_NUMBA, CDDesign, solve_cd
from .problem import SOLVERS, _check_choice

__all__ = ["ESTIMATOR_SOLVERS", "resolve_dtype"]

#: ``solver=`` values of :class:`Lasso` and :func:`lasso_path`: ``"auto"``, coordinate descent
#: (``"cd"``) and the Frank-Wolfe variants of :data:`SOLVERS`.
ESTIMATOR_SOLVERS = ("auto", "cd", *SOLVERS)


def _resolve_solver(solver: str, form: str, device: torch.device, time_limit) -> str:
    """The solver that runs: ``"auto"`` is coordinate descent for the penalized form on the
    host (with numba), else pairwise Frank-Wolfe; ``"cd"`` is checked against what it can do."""
    _check_choice("solver", solver, ESTIMATOR_SOLVERS)
    if solver == "auto":
        cd = (form == "alpha" and HAVE_NUMBA and device.type == "cpu" and time_limit is None)
        return "cd" if cd else "pairwise"
    if solver == "cd":
        if form != "alpha":
            raise ValueError("solver='cd' solves the penalized Lasso (alpha); the constrained "
                             "form (radius) needs a Frank-Wolfe solver such as 'pairwise'")
        if time_limit is not None:
            raise ValueError("time_limit is only supported by the Frank-Wolfe solvers, not by "
                             "solver='cd'")
    return solver


def resolve_dtype(dtype) -> torch.dtype:
    """The torch dtype of a ``dtype=`` parameter: None (float64), a torch or NumPy float dtype,
    or its name (``"float32"``/``"float64"``)."""
    if dtype is None:
        return torch.float64
    found: torch.dtype | None
    if isinstance(dtype, torch.dtype):
        found = dtype
    else:
        try:
            found = {"float32": torch.float32, "float64": torch.float64}.get(
                np.dtype(dtype).name)
        except TypeError:
            found = None
    if found is None or found not in (torch.float32, torch.float64):
        raise ValueError(f"dtype must be None, float32 or float64 (torch, NumPy or by name), "
                         f"got {dtype!r}")
    return found


def _scipy_csc(X, dtype: torch.dtype):
    """A SciPy sparse ``X`` as a canonical CSC matrix of ``dtype``, checked as
    :func:`~torchfw.utils.data.as_matrix` checks its CSR tensors (the row indices and the
    finiteness of the values by :class:`~torchfw.lasso.cd.CDDesign`, which reads them once
    anyway)."""
    csc = X.tocsc()
    if np.iscomplexobj(csc.data):
        raise ValueError(f"Complex data not supported: X has complex dtype {csc.dtype}; pass "
                         f"real numbers")
    if not (np.issubdtype(csc.data.dtype, np.number) or csc.data.dtype == bool):
        raise TypeError(f"X must be numeric, got a sparse matrix of dtype {csc.dtype}")
    n, p = csc.shape
    if n == 0:
        raise ValueError(f"X is empty: found array with 0 sample(s) (shape={csc.shape}) while "
                         f"a minimum of 1 is required.")
    if p == 0:
        raise ValueError(f"X is empty: found array with 0 feature(s) (shape={csc.shape}) "
                         f"while a minimum of 1 is required.")
    if not csc.has_canonical_format:
        csc = csc.copy()
        csc.sum_duplicates()
    np_dtype = np.float32 if dtype == torch.float32 else np.float64
    if csc.data.dtype != np_dtype:
        csc = csc.astype(np_dtype)
    # Row indices in [0, n) and finite values: checked by CDDesign in its pass over the values.
    return csc


def _fit_cd(design: CDDesign, alpha: float, w0: Tensor | None, tol: float, options: dict,
            working_set, check_every) -> dict:
    """One coordinate-descent fit of the penalized Lasso, as :func:`_fit_one` reports it."""
    out = solve_cd(design, alpha, w0, tol, max_iter=options["max_iter"],
                   working_set=isinstance(working_set, str) or bool(working_set),
                   check_every=1 if check_every is None else check_every)
    status = Status.CONVERGED if out["converged"] else Status.MAX_ITER
    if not np.isfinite(out["gap"]):
        status = Status.NONFINITE
    history = History()
    for gap, primal, size, epochs, screened in out["trace"]:
        history.append(int(epochs), float(primal), float(gap), float("nan"),
                       {"working_set": int(size), "screened": int(screened)})
    history.append(out["n_iter"], out["primal"], out["gap"], float("nan"),
                   {"working_set": 0, "screened": out["n_screened"]})
    w = out["w"]
    result = Result(x=w, value=out["primal"], gap=out["gap"], n_iter=out["n_iter"],
                    status=status, history=history, best_gap=out["gap"],
                    info={"solver": "cd", "rounds": out["rounds"],
                          "n_screened": out["n_screened"], "work": out["work"]})
    return {"w": w, "n_iter": out["n_iter"], "gap": out["gap"], "alpha": alpha,
            # NumPy for a host reduction: torch's waits for an OpenMP time slice on a busy
            # machine (30 ms for news20's 62,061 coefficients under load).
            "radius": float(np.abs(w.detach().numpy()).sum()) if w.device.type == "cpu"
            else float(w.abs().sum()), "T": None, "result": result, "status": status,
            "target": tol * design.yy, "solver": "cd"}


def _design_and_fit(X, y, sample_weight, fit_intercept: bool, w0, alpha: float, tol: float,
                    options: dict, working_set, check_every) -> tuple[CDDesign, dict]:
    """The design of a validated ``X`` (a tensor, or a SciPy CSC matrix) and one fit on it."""
    n = X.shape[0]
    device = X.device if isinstance(X, Tensor) else torch.device("cpu")
    y_t = as_target(y, n, estimator="Lasso", device=device, dtype=torch.float64)
    design = CDDesign(X, y_t, fit_intercept=fit_intercept,
                      sample_weight=as_sample_weight(sample_weight, n))
    if w0 is not None and w0.shape[0] != design.n_features:
        w0 = None
    return design, _fit_cd(design, alpha, w0, tol, options, working_set, check_every)


def _alpha_grid(alphas, n_alphas, eps, alpha_max: float) -> np.ndarray:
    """The penalties of a path, decreasing (scikit-learn's default grid when ``alphas`` is
    None)."""
    if alphas is None:
        n_alphas = check_int_at_least("n_alphas", n_alphas, 1)
        eps = check_positive("eps", eps)
        top = alpha_max if alpha_max > 0 else 1.0
        return np.geomspace(top, top * eps, n_alphas) if n_alphas > 1 else np.array([top])
    return np.sort(_grid("alphas", alphas, allow_zero=False))[::-1]


def _cd_path(X: Tensor, y, alphas, n_alphas, eps, fit_intercept, tol, max_iter, working_set,
             check_every, return_n_iter):
    """:func:`lasso_path` by coordinate descent: one design, each solve warm-started."""
    y_t = as_target(y, X.shape[0], estimator="Lasso", device=X.device, dtype=torch.float64)
    design = CDDesign(X, y_t, fit_intercept=fit_intercept)
    grid = _alpha_grid(alphas, n_alphas, eps, design.alpha_max)
    options = {"max_iter": check_int_at_least("max_iter", max_iter, 1)}
    if check_every is not None:
        check_every = check_int_at_least("check_every", check_every, 1)
    coefs = np.zeros((design.n_features, len(grid)))
    gaps = np.zeros(len(grid))
    n_iters = np.zeros(len(grid), dtype=np.int64)
    w = None
    for k, value in enumerate(grid):
        fit = _fit_cd(design, float(value), w, tol, options, working_set, check_every)
        w = fit["w"]
        coefs[:, k] = w.detach().cpu().numpy()
        gaps[k] = fit["gap"]
        n_iters[k] = fit["n_iter"]
        if fit["status"] != Status.CONVERGED:
            warnings.warn(f"lasso_path: alpha={value:.4g} stopped on {fit['status']} with "
                          f"gap {fit['gap']:.3g} > {fit['target']:.3g}",
                          exceptions.ConvergenceWarning, stacklevel=3)
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
