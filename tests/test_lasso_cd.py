"""Coordinate descent for the Lasso (torchfw.lasso.cd, solver="cd") against scikit-learn."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch

from torchfw import Lasso, lasso_path
from torchfw.exceptions import ConvergenceWarning
from torchfw.lasso.cd import CDDesign, solve_cd

sklearn_lm = pytest.importorskip("sklearn.linear_model")
sp = pytest.importorskip("scipy.sparse")


def _problem(n, p, k, seed, density=None):
    """y = X w + noise with k true features; X dense, or sparse with the given density."""
    rng = np.random.default_rng(seed)
    if density is None:
        X = rng.normal(size=(n, p))
        X[:, : p // 4] += 0.7 * rng.normal(size=(n, 1))  # correlated columns: harder for CD
    else:
        X = sp.random(n, p, density=density, random_state=seed, format="csr",
                      data_rvs=lambda m: rng.normal(1.0, 1.0, m)).toarray()
        X[:, 0] = 1.0  # a constant column: zero once centred
    w = np.zeros(p)
    w[rng.choice(p, k, replace=False)] = rng.normal(0, 3, k)
    y = X @ w + 0.5 * rng.normal(size=n) + 2.0
    return X, y


def _objective(X, y, coef, intercept, alpha, sample_weight=None):
    r = y - X @ coef - intercept
    s = np.ones(len(y)) if sample_weight is None else sample_weight * len(y) / sample_weight.sum()
    return float(s @ (r * r)) / (2 * len(y)) + alpha * float(np.abs(coef).sum())


def _gap(X, y, coef, alpha, fit_intercept=True):
    """The standard certified gap at coef (scikit-learn's scale), computed from scratch."""
    n = len(y)
    Xc = X - X.mean(axis=0) if fit_intercept else X
    yc = y - y.mean() if fit_intercept else y
    r = yc - Xc @ coef
    theta = r / max(n * alpha, float(np.abs(Xc.T @ r).max()))
    primal = 0.5 * r @ r + n * alpha * np.abs(coef).sum()
    dual = 0.5 * yc @ yc - 0.5 * (n * alpha) ** 2 * np.sum((theta - yc / (n * alpha)) ** 2)
    return (primal - dual) / n


def _alpha_max(X, y, fit_intercept=True):
    Xc = X - X.mean(axis=0) if fit_intercept else X
    yc = y - y.mean() if fit_intercept else y
    return float(np.abs(Xc.T @ yc).max()) / len(y)


def _sklearn(X, y, alpha, **kw):
    return sklearn_lm.Lasso(alpha=alpha, tol=1e-14, max_iter=1_000_000, **kw).fit(X, y)


CASES = [  # n, p, k, density: leukemia-like (n << p), square-ish, tall, and sparse designs
    (30, 400, 5, None), (60, 80, 10, None), (300, 20, 5, None), (80, 500, 8, 0.05),
    (200, 60, 6, 0.2)]


@pytest.mark.parametrize("n,p,k,density", CASES)
@pytest.mark.parametrize("frac", [0.3, 0.02])
@pytest.mark.parametrize("fit_intercept", [True, False])
def test_reaches_sklearns_objective_and_the_gap_certifies(n, p, k, density, frac,
                                                          fit_intercept):
    X, y = _problem(n, p, k, seed=n + p, density=density)
    alpha = frac * _alpha_max(X, y, fit_intercept)
    Xin = X if density is None else sp.csr_matrix(X)
    model = Lasso(alpha=alpha, solver="cd", tol=1e-10, fit_intercept=fit_intercept).fit(Xin, y)
    assert model.result_.info["solver"] == "cd"
    sk = _sklearn(X, y, alpha, fit_intercept=fit_intercept)
    f = _objective(X, y, model.coef_, model.intercept_, alpha)
    f_sk = _objective(X, y, sk.coef_, sk.intercept_, alpha)
    scale = float(((y - y.mean()) ** 2).mean()) if fit_intercept else float((y * y).mean())
    # The reported gap is the standard one, recomputed here from the coefficients alone ...
    gap = _gap(X, y, model.coef_, alpha, fit_intercept)
    assert model.dual_gap_ == pytest.approx(gap, rel=1e-6, abs=1e-13 * scale)
    assert model.dual_gap_ <= 1e-10 * scale
    # ... and it certifies: nothing (scikit-learn's solution included) is lower by more.
    assert f - f_sk <= model.dual_gap_ + 1e-12 * scale
    assert abs(f - f_sk) <= 1e-9 * scale
    assert np.abs(model.coef_ - sk.coef_).max() <= 1e-4 * max(1.0, np.abs(sk.coef_).max())


@pytest.mark.parametrize("tol", [1e-2, 1e-4, 1e-8])
def test_stops_on_the_certified_gap_at_tol(tol):
    X, y = _problem(40, 600, 6, seed=3)
    alpha = 0.05 * _alpha_max(X, y)
    model = Lasso(alpha=alpha, tol=tol).fit(X, y)  # "auto" runs coordinate descent here
    assert model.result_.info["solver"] == "cd"
    scale = float(((y - y.mean()) ** 2).mean())
    assert model.dual_gap_ <= tol * scale
    assert _gap(X, y, model.coef_, alpha) <= tol * scale * (1 + 1e-9)
    # The gaps recorded per working-set round are certificates too: they decrease to the end.
    gaps = model.result_.history.gap
    assert gaps[-1] == model.dual_gap_ and gaps[0] > gaps[-1]


@pytest.mark.filterwarnings("ignore:Sparse CSR tensor support is in beta")  # this test's own
def test_sparse_and_dense_inputs_give_the_same_model():
    X, y = _problem(120, 300, 6, seed=7, density=0.05)
    alpha = 0.05 * _alpha_max(X, y)
    dense = Lasso(alpha=alpha, solver="cd", tol=1e-12).fit(X, y)
    csr = Lasso(alpha=alpha, solver="cd", tol=1e-12).fit(sp.csr_matrix(X), y)
    tensor = Lasso(alpha=alpha, solver="cd", tol=1e-12).fit(
        torch.from_numpy(X).to_sparse_csr(), torch.from_numpy(y))
    # A CSC matrix is read as it is; one with repeated entries is summed first.
    csc = Lasso(alpha=alpha, solver="cd", tol=1e-12).fit(sp.csc_matrix(X), y)
    base = sp.csc_matrix(X)
    doubled = sp.csc_matrix((np.repeat(base.data / 2, 2), np.repeat(base.indices, 2),
                             2 * base.indptr), shape=X.shape)  # every entry stored twice
    assert not doubled.has_canonical_format
    twice = Lasso(alpha=alpha, solver="cd", tol=1e-12).fit(doubled, y)
    for other in (csr, tensor, csc, twice):
        np.testing.assert_allclose(other.coef_, dense.coef_, atol=1e-7)
        assert other.intercept_ == pytest.approx(dense.intercept_, abs=1e-7)


@pytest.mark.parametrize("sparse", [False, True])
@pytest.mark.parametrize("fit_intercept", [True, False])
def test_sample_weight_is_row_repetition_and_matches_sklearn(sparse, fit_intercept):
    X, y = _problem(50, 120, 5, seed=11, density=0.2 if sparse else None)
    rng = np.random.default_rng(0)
    counts = rng.integers(0, 4, size=len(y)).astype(float)
    counts[0] = 2.0
    alpha = 0.05 * _alpha_max(X, y, fit_intercept)
    wrap = sp.csr_matrix if sparse else np.asarray
    weighted = Lasso(alpha=alpha, solver="cd", tol=1e-12, fit_intercept=fit_intercept).fit(
        wrap(X), y, sample_weight=counts)
    rows = np.repeat(np.arange(len(y)), counts.astype(int))
    # scikit-learn rescales weights to sum to n: the repeated data's alpha is the same.
    repeated = Lasso(alpha=alpha, solver="cd", tol=1e-12, fit_intercept=fit_intercept).fit(
        wrap(X[rows]), y[rows])
    np.testing.assert_allclose(weighted.coef_, repeated.coef_, atol=1e-6)
    assert weighted.intercept_ == pytest.approx(repeated.intercept_, abs=1e-6)
    sk = _sklearn(X, y, alpha, fit_intercept=fit_intercept).fit(X, y, sample_weight=counts)
    f = _objective(X, y, weighted.coef_, weighted.intercept_, alpha, counts)
    f_sk = _objective(X, y, sk.coef_, sk.intercept_, alpha, counts)
    assert f - f_sk <= 1e-10 * float(((y - y.mean()) ** 2).mean())


def test_path_matches_sklearn_and_warm_starts_save_epochs():
    X, y = _problem(40, 500, 8, seed=5)
    Xc, yc = X - X.mean(axis=0), y - y.mean()
    grid, coefs, gaps, iters = lasso_path(Xc, yc, n_alphas=20, eps=1e-2, tol=1e-10,
                                          return_n_iter=True)
    sk_alphas, sk_coefs, _ = sklearn_lm.lasso_path(Xc, yc, alphas=grid, tol=1e-14,
                                                   max_iter=1_000_000)
    np.testing.assert_allclose(grid, sk_alphas)
    scale = float(yc @ yc) / len(yc)
    assert (gaps <= 1e-10 * scale).all()
    for k, alpha in enumerate(grid):
        assert _gap(Xc, yc, coefs[:, k], alpha, False) <= 1e-10 * scale * (1 + 1e-6)
        f = _objective(Xc, yc, coefs[:, k], 0.0, alpha)
        f_sk = _objective(Xc, yc, sk_coefs[:, k], 0.0, alpha)
        assert f - f_sk <= gaps[k] + 1e-13
    # Warm starts: the last solve from its neighbour takes fewer epochs than from zero.
    cold = Lasso(alpha=grid[-1], solver="cd", tol=1e-10, fit_intercept=False).fit(Xc, yc)
    assert iters[-1] < cold.n_iter_
    # The estimator's warm_start reuses coef_ the same way.
    model = Lasso(alpha=grid[-2], solver="cd", tol=1e-10, fit_intercept=False,
                  warm_start=True).fit(Xc, yc)
    model.set_params(alpha=grid[-1]).fit(Xc, yc)
    assert model.n_iter_ < cold.n_iter_
    np.testing.assert_allclose(model.coef_, cold.coef_, atol=1e-6)


@pytest.mark.parametrize("density", [None, 0.3])
def test_screening_extrapolation_and_gram_sweeps_change_nothing_but_speed(density):
    X, y = _problem(30, 800, 5, seed=9, density=density)
    Xt = torch.from_numpy(X)
    design = CDDesign(Xt if density is None else Xt.to_sparse_csr(), torch.from_numpy(y))
    alpha = 0.1 * design.alpha_max
    fits = [solve_cd(design, alpha, None, 1e-12, screening=s, anderson=a, working_set=ws,
                     gram=g)
            for s, a, ws, g in [(True, True, True, True), (False, False, False, False),
                                (True, False, True, True), (False, True, True, False),
                                (True, True, True, False)]]
    for fit in fits[1:]:
        np.testing.assert_allclose(fit["w"].numpy(), fits[0]["w"].numpy(), atol=1e-7)
    assert fits[0]["n_screened"] > 600  # most features are certified zero
    assert fits[1]["n_screened"] == int((design.norms2 == 0).sum())  # constant columns only
    sk = _sklearn(X, y, alpha)
    assert set(np.flatnonzero(fits[0]["w"].numpy())) == set(np.flatnonzero(sk.coef_))


def test_all_zero_solution_and_constant_columns():
    X, y = _problem(30, 50, 3, seed=2)
    X[:, 3] = 5.0  # constant: zero once centred, never selected
    alpha = 1.01 * _alpha_max(X, y)
    model = Lasso(alpha=alpha, solver="cd").fit(X, y)
    assert not model.coef_.any() and model.intercept_ == pytest.approx(y.mean())
    model = Lasso(alpha=0.01 * alpha, solver="cd", tol=1e-10).fit(X, y)
    assert model.coef_[3] == 0.0


def test_float32_design_and_bad_requests():
    X, y = _problem(40, 100, 4, seed=4)
    alpha = 0.05 * _alpha_max(X, y)
    a = Lasso(alpha=alpha, solver="cd", dtype="float32", tol=1e-8).fit(X, y)
    b = Lasso(alpha=alpha, solver="cd", tol=1e-8).fit(X.astype(np.float32).astype(float), y)
    np.testing.assert_allclose(a.coef_, b.coef_, atol=1e-9)
    with pytest.raises(ValueError, match="penalized"):
        Lasso(radius=1.0, solver="cd").fit(X, y)
    with pytest.raises(ValueError, match="time_limit"):
        Lasso(alpha=alpha, solver="cd", time_limit=1.0).fit(X, y)
    assert Lasso(radius=1.0).fit(X, y).result_.info.get("solver") != "cd"  # auto: Frank-Wolfe
    with pytest.warns(ConvergenceWarning, match="max_iter"):
        short = Lasso(alpha=alpha / 10, solver="cd", tol=1e-14, max_iter=2).fit(X, y)
    assert str(short.result_.status) == "max_iter" and short.n_iter_ <= 2 + 1
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        Lasso(alpha=alpha, solver="cd").fit(sp.csr_matrix(X), y)  # no torch notices
    bad = sp.csc_matrix(X)
    bad.data[3] = np.nan
    with pytest.raises(ValueError, match="NaN|infinite|finite"):
        Lasso(alpha=alpha).fit(bad, y)
