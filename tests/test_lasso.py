"""torchfw.Lasso and lasso_path against scikit-learn, on leukemia and housing_scale."""

from __future__ import annotations

import csv
import io
import lzma
import math
import warnings

import numpy as np
import pytest
import torch
from conftest import data_path, requires_cuda

from torchfw import Lasso, lasso_path
from torchfw.datasets import load_svmlight
from torchfw.lasso import LassoData
from torchfw.exceptions import ConvergenceWarning

sklearn_lm = pytest.importorskip("sklearn.linear_model")
scipy_sparse = pytest.importorskip("scipy.sparse")

F64 = torch.float64


# -- data ------------------------------------------------------------------------------------------

def _golub(name: str) -> tuple[list[int], np.ndarray]:
    with lzma.open(data_path(name), "rb") as f:
        rows = [r for r in csv.reader(io.TextIOWrapper(f, encoding="utf-8", newline="")) if r]
    columns = [j for j, h in enumerate(rows[0]) if h.strip().isdigit()]  # skip "call" columns
    ids = [int(rows[0][j]) for j in columns]
    return ids, np.array([[float(r[j]) for j in columns] for r in rows[1:]])


@pytest.fixture(scope="module")
def leukemia():
    """72 x 7129 (genes in columns, patients in id order), standardized; y = +1 AML / -1 ALL."""
    ids_a, A = _golub("leukemia_golub_train.csv.xz")
    ids_b, B = _golub("leukemia_golub_independent.csv.xz")
    X = np.concatenate([A, B], axis=1).T[np.argsort(ids_a + ids_b)]
    with lzma.open(data_path("leukemia_golub_labels.csv.xz"), "rt") as f:
        labels = {int(r[0]): r[1].strip() for r in list(csv.reader(f))[1:] if r}
    y = np.array([1.0 if labels[i] == "AML" else -1.0 for i in range(1, 73)])
    X = X - X.mean(axis=0)
    std = X.std(axis=0)
    X /= np.where(std > 0, std, 1.0)
    assert X.shape == (72, 7129)
    return X, y


@pytest.fixture(scope="module")
def housing():
    """housing_scale: 506 x 13 regression (LIBSVM), dense float64 and the CSR tensor."""
    X, y = load_svmlight(data_path("housing_scale.xz"), dtype=F64)
    assert tuple(X.shape) == (506, 13)
    return X.to_dense().numpy(), y.numpy(), X


def _alpha_max(X, y):
    Xc, yc = X - X.mean(axis=0), y - y.mean()
    return float(np.abs(Xc.T @ yc).max()) / X.shape[0]


def _loss(X, y, coef, intercept):
    r = y - X @ coef - intercept
    return float(r @ r) / (2 * X.shape[0])


def _sklearn(X, y, alpha, **kw):
    return sklearn_lm.Lasso(alpha=alpha, tol=1e-12, max_iter=200_000, **kw).fit(X, y)


# -- accuracy against scikit-learn (the acceptance tests) ------------------------------------------

DATASETS = ["leukemia", "housing"]


def _data(request, name):
    if name == "leukemia":
        return request.getfixturevalue("leukemia")
    X, y, _ = request.getfixturevalue("housing")
    return X, y


@pytest.mark.parametrize("name,frac,working_set", [
    ("leukemia", 0.1, True), ("leukemia", 0.1, False), ("housing", 0.05, "auto"),
    ("housing", 0.002, "auto")])
@pytest.mark.parametrize("method", ["l1ball", "svm"])
def test_constrained_reaches_sklearn_objective(request, name, frac, working_set, method):
    """Lasso(radius=||w_sk||_1) reaches the objective of scikit-learn's solution to 1e-6."""
    X, y = _data(request, name)
    sk = _sklearn(X, y, frac * _alpha_max(X, y))
    radius = float(np.abs(sk.coef_).sum())
    model = Lasso(radius=radius, tol=1e-9, method=method, working_set=working_set).fit(X, y)
    assert np.abs(model.coef_).sum() <= radius * (1 + 1e-9)
    f_sk = _loss(X, y, sk.coef_, sk.intercept_)
    f = _loss(X, y, model.coef_, model.intercept_)
    assert abs(f - f_sk) <= 1e-6 * f_sk
    assert model.dual_gap_ <= 1e-9 * float(((y - y.mean()) ** 2).mean()) * 1.01
    # The constraint's multiplier is the penalty the solution is optimal for.
    assert model.alpha_ == pytest.approx(frac * _alpha_max(X, y), rel=1e-3)


@pytest.mark.parametrize("name,frac,working_set", [
    ("leukemia", 0.1, True), ("leukemia", 0.1, False), ("housing", 0.05, "auto"),
    ("housing", 0.002, "auto")])
@pytest.mark.parametrize("method", ["l1ball", "svm"])
def test_penalized_matches_sklearn_coefficients(request, name, frac, working_set, method):
    X, y = _data(request, name)
    alpha = frac * _alpha_max(X, y)
    sk = _sklearn(X, y, alpha)
    model = Lasso(alpha=alpha, tol=1e-10, method=method, working_set=working_set,
                  solver="pairwise").fit(X, y)
    assert (model.working_set_ is not None) == (name == "leukemia" and working_set is True)
    scale = max(1.0, float(np.abs(sk.coef_).max()))
    assert np.abs(model.coef_ - sk.coef_).max() <= 1e-4 * scale
    assert abs(model.intercept_ - sk.intercept_) <= 1e-4 * max(1.0, abs(sk.intercept_))
    assert model.dual_gap_ <= 1e-10 * float(((y - y.mean()) ** 2).mean()) * 1.01
    assert model.radius_bound_ >= float(np.abs(sk.coef_).sum())  # the certified radius holds


def test_dual_gap_is_sklearns_formula(leukemia):
    """dual_gap_ is scikit-learn's: evaluated at sklearn's own coef_, both agree."""
    X, y = leukemia
    alpha = 0.1 * _alpha_max(X, y)
    sk = sklearn_lm.Lasso(alpha=alpha, tol=1e-3).fit(X, y)
    gap, _ = LassoData(X, y).sklearn_gap(torch.from_numpy(sk.coef_), alpha)
    assert gap == pytest.approx(sk.dual_gap_, rel=1e-6)


def test_tol_has_sklearns_meaning(housing):
    X, y, _ = housing
    alpha = 0.01 * _alpha_max(X, y)
    scale = float(((y - y.mean()) ** 2).mean())
    for tol in (1e-3, 1e-6):
        model = Lasso(alpha=alpha, tol=tol).fit(X, y)
        assert model.dual_gap_ <= tol * scale


# -- the equivalence, made visible through the estimator's data ------------------------------------

def _trajectory(data, form, value, method, solver, n_iter):
    """Iterates (as coefficients) and gaps after every iteration of one solve."""
    xs, gaps = [], []

    def record(info):
        xs.append(info.x.clone())
        gaps.append(info.gap)

    options = dict(max_iter=n_iter, check_every=1, callback=record)
    p = data.n_features
    if form == "radius":
        data.solve_constrained(value, None, method=method, solver=solver, tol=1e-300,
                               **options)
        ws = [x if method == "l1ball" else value * (x[:p] - x[p:]) for x in xs]
    else:
        _, _, T, _ = data.solve_penalized(value, None, method=method, solver=solver,
                                          tol=1e-300, **options)
        ws = [T * (x[:p] - x[p:2 * p]) for x in xs]
    return torch.stack(ws), np.array(gaps)


@pytest.mark.parametrize("form,solver,n_iter", [
    ("radius", "fw", 200), ("alpha", "fw", 200), ("radius", "pairwise", 100),
    ("radius", "away", 100), ("alpha", "away", 100),
    # Not ("alpha", "pairwise"): an exact pairwise step between the centre and an atom leaves
    # their gradients tied, and rounding alone picks the next away atom.
])
def test_svm_and_l1ball_give_the_same_iterates_and_gaps(leukemia, form, solver, n_iter):
    X, y = leukemia
    X = X[:, :1500]
    data = LassoData(X, y)
    value = 1.0 if form == "radius" else 0.2 * data.alpha_max
    w_l1, gap_l1 = _trajectory(data, form, value, "l1ball", solver, n_iter)
    w_svm, gap_svm = _trajectory(data, form, value, "svm", solver, n_iter)
    assert w_l1.shape == w_svm.shape and w_l1.shape[0] >= n_iter
    torch.testing.assert_close(w_svm, w_l1, rtol=0, atol=1e-9)
    np.testing.assert_allclose(gap_svm, gap_l1, rtol=1e-7, atol=1e-12)
    assert gap_l1[-1] < gap_l1[0]


# -- input types, devices, warm starts, paths ------------------------------------------------------

def test_sparse_input_matches_dense(housing):
    X, y, X_csr = housing
    alpha = 0.01 * _alpha_max(X, y)
    dense = Lasso(alpha=alpha, tol=1e-10).fit(X, y)
    for Xs in (X_csr, scipy_sparse.csr_matrix(X)):
        sparse = Lasso(alpha=alpha, tol=1e-10).fit(Xs, y)
        np.testing.assert_allclose(sparse.coef_, dense.coef_, atol=1e-6)
        assert sparse.intercept_ == pytest.approx(dense.intercept_, abs=1e-6)
        np.testing.assert_allclose(sparse.predict(Xs), dense.predict(X), atol=1e-5)


@pytest.mark.parametrize("form", [{"alpha": 0.05}, {"radius": 2.0}])
def test_working_sets_on_sparse_wide_data(form):
    rng = np.random.default_rng(0)
    Xs = scipy_sparse.random(60, 600, density=0.1, format="csr", random_state=1) * 3.0
    X = Xs.toarray()
    y = X[:, :5] @ np.array([2.0, -1.0, 1.5, 1.0, -2.0]) + 0.1 * rng.standard_normal(60)
    whole = Lasso(**form, tol=1e-10, working_set=False, solver="pairwise").fit(X, y)
    for data in (X, Xs):
        for method in ("l1ball", "svm"):
            ws = Lasso(**form, tol=1e-10, working_set=True, method=method,
                       solver="pairwise").fit(data, y)
            assert ws.working_set_ is not None and len(ws.working_set_) < 600
            np.testing.assert_allclose(ws.coef_, whole.coef_, atol=1e-5)
            assert ws.intercept_ == pytest.approx(whole.intercept_, abs=1e-5)
            assert ws.dual_gap_ <= 1e-10 * float(((y - y.mean()) ** 2).mean()) * 1.01


def test_no_intercept_matches_sklearn(housing):
    X, y, _ = housing
    alpha = 0.05
    sk = _sklearn(X, y, alpha, fit_intercept=False)
    model = Lasso(alpha=alpha, fit_intercept=False, tol=1e-10).fit(X, y)
    np.testing.assert_allclose(model.coef_, sk.coef_, atol=1e-4)
    assert model.intercept_ == 0.0


@pytest.mark.parametrize("solver", ["away", "swap", "fw", "partan"])
def test_other_solvers_converge(housing, solver):
    X, y, _ = housing
    alpha = 0.1 * _alpha_max(X, y)
    tol = 1e-6 if solver in ("away", "swap") else 1e-3  # FW and PARTAN are sublinear
    model = Lasso(alpha=alpha, solver=solver, tol=tol).fit(X, y)
    assert model.dual_gap_ <= tol * float(((y - y.mean()) ** 2).mean())


@pytest.mark.parametrize("working_set", [False, True])
def test_result_status_says_converged_or_max_iter(housing, working_set):
    # The penalized stopping rule is a callback; a converged fit must not report "callback".
    X, y, _ = housing
    alpha = 0.1 * _alpha_max(X, y)
    model = Lasso(alpha=alpha, tol=1e-6, working_set=working_set).fit(X, y)
    assert str(model.result_.status) == "converged"
    with pytest.warns(ConvergenceWarning):
        short = Lasso(alpha=0.01 * _alpha_max(X, y), tol=1e-12, max_iter=3,
                      working_set=working_set).fit(X, y)
    assert str(short.result_.status) == "max_iter"


@pytest.mark.parametrize("solver", ["pairwise", "away"])  # FW's loop: tests/test_optimizers.py
def test_small_problems_run_the_dense_loop_with_the_host_solution(leukemia, solver):
    # Working-set rounds of a few hundred atoms run the compiled dense loop under
    # execution="auto"; execution="host" runs the interpreted engine on the same problems.
    X, y = leukemia
    kw = dict(alpha=0.2 * _alpha_max(X, y), tol=1e-8, solver=solver)
    fast = Lasso(**kw).fit(X, y)
    slow = Lasso(execution="host", **kw).fit(X, y)
    assert fast.result_.info["execution"] == "dense"
    assert slow.result_.info["execution"] == "host"
    for model in (fast, slow):
        assert str(model.result_.status) == "converged"
    np.testing.assert_allclose(fast.coef_, slow.coef_, atol=1e-5)


def test_device_execution_matches_host(housing):
    """The sync-free engine path (what CUDA runs) gives the host's solution, here on CPU."""
    X, y, _ = housing
    alpha = 0.1 * _alpha_max(X, y)  # few iterations: the device path is slow on a CPU
    host = Lasso(alpha=alpha, tol=1e-9).fit(X, y)
    for method in ("l1ball", "svm"):
        dev = Lasso(alpha=alpha, tol=1e-9, method=method, execution="device").fit(X, y)
        np.testing.assert_allclose(dev.coef_, host.coef_, atol=1e-5)
        dev = Lasso(radius=2.0, tol=1e-9, method=method, execution="device").fit(X, y)
        ref = Lasso(radius=2.0, tol=1e-9, method=method).fit(X, y)
        np.testing.assert_allclose(dev.coef_, ref.coef_, atol=1e-5)


@requires_cuda
@pytest.mark.cuda
@pytest.mark.parametrize("method", ["l1ball", "svm"])
def test_cuda_matches_cpu(housing, method):
    X, y, X_csr = housing
    alpha = 0.01 * _alpha_max(X, y)
    cpu = Lasso(alpha=alpha, tol=1e-9, method=method).fit(X, y)
    gpu = Lasso(alpha=alpha, tol=1e-9, method=method, device="cuda").fit(X, y)
    np.testing.assert_allclose(gpu.coef_, cpu.coef_, atol=1e-5)
    gpu_sparse = Lasso(alpha=alpha, tol=1e-9, method=method).fit(X_csr.to("cuda"), y)
    np.testing.assert_allclose(gpu_sparse.coef_, cpu.coef_, atol=1e-5)
    constrained = Lasso(radius=1.0, tol=1e-9, method=method, device="cuda").fit(X, y)
    ref = Lasso(radius=1.0, tol=1e-9, method=method).fit(X, y)
    np.testing.assert_allclose(constrained.coef_, ref.coef_, atol=1e-5)


def test_warm_start_saves_iterations(leukemia):
    X, y = leukemia
    alpha = 0.1 * _alpha_max(X, y)
    warm = Lasso(alpha=alpha, tol=1e-8, warm_start=True, solver="pairwise").fit(X, y)
    warm.set_params(alpha=0.9 * alpha).fit(X, y)
    fresh = Lasso(alpha=0.9 * alpha, tol=1e-8, solver="pairwise").fit(X, y)
    np.testing.assert_allclose(warm.coef_, fresh.coef_, atol=1e-4)
    assert warm.n_iter_ < fresh.n_iter_
    assert warm.radius_bound_ < fresh.radius_bound_  # the certified radius tightens too
    # Certified: each bound is at least the L1 norm of its solution.
    for model, bound in ((warm, warm.radius_bound_), (fresh, fresh.radius_bound_)):
        assert bound >= np.abs(model.coef_).sum()


def test_lasso_path_matches_sklearn(leukemia):
    X, y = leukemia
    X = X[:, :2000]
    Xc, yc = X - X.mean(0), y - y.mean()  # scikit-learn's lasso_path fits no intercept
    alphas = np.geomspace(0.5, 0.05, 8) * _alpha_max(X, y)
    grid, coefs, gaps, n_iters = lasso_path(Xc, yc, alphas=alphas, tol=1e-10,
                                            return_n_iter=True)
    np.testing.assert_allclose(grid, np.sort(alphas)[::-1])
    sk_alphas, sk_coefs, _ = sklearn_lm.lasso_path(Xc, yc, alphas=alphas, tol=1e-12,
                                                   max_iter=200_000)
    np.testing.assert_allclose(sk_alphas, grid)
    assert coefs.shape == sk_coefs.shape == (2000, 8)
    np.testing.assert_allclose(coefs, sk_coefs, atol=1e-4)
    assert (gaps <= 1e-10 * float(yc @ yc) / len(yc) * 1.01).all()
    assert (n_iters > 0).all()


def test_lasso_path_default_grid_and_radii(housing):
    X, y, _ = housing
    grid, coefs, gaps = lasso_path(X, y, n_alphas=5, fit_intercept=True, tol=1e-8)
    assert grid[0] == pytest.approx(_alpha_max(X, y)) and len(grid) == 5
    assert np.all(np.diff(grid) < 0)
    assert np.abs(coefs[:, 0]).max() < 1e-10  # alpha_max: the zero solution
    assert np.all(np.diff(np.abs(coefs).sum(0)) > -1e-9)  # the L1 norm grows along the path
    radii, rcoefs, rgaps = lasso_path(X, y, radii=[3.0, 0.0, 1.0], method="svm",
                                      fit_intercept=True, tol=1e-8)
    np.testing.assert_allclose(radii, [0.0, 1.0, 3.0])
    np.testing.assert_allclose(np.abs(rcoefs).sum(0), radii, rtol=1e-6, atol=1e-12)
    np.testing.assert_allclose(rcoefs[:, 1], Lasso(radius=1.0, tol=1e-8).fit(X, y).coef_,
                               atol=1e-5)
    assert Lasso.path is lasso_path


# -- scikit-learn conventions ----------------------------------------------------------------------

def test_sklearn_clone_and_grid_search(housing):
    from sklearn.base import clone
    from sklearn.model_selection import GridSearchCV, cross_val_score

    X, y, _ = housing
    model = Lasso(alpha=0.1, solver="swap")
    twin = clone(model)
    assert twin.get_params() == model.get_params() and twin is not model
    assert "alpha=0.1" in repr(model)
    scores = cross_val_score(Lasso(alpha=0.05, tol=1e-6), X, y, cv=3)
    assert scores.shape == (3,) and np.all(np.isfinite(scores))
    search = GridSearchCV(Lasso(tol=1e-6), {"alpha": [0.01, 0.3]}, cv=3).fit(X, y)
    assert search.best_params_["alpha"] in (0.01, 0.3)


def test_predict_score_and_attributes(housing):
    X, y, _ = housing
    sk = _sklearn(X, y, 0.05)
    model = Lasso(alpha=0.05, tol=1e-10).fit(X, y)
    np.testing.assert_allclose(model.predict(X), sk.predict(X), atol=1e-3)
    assert model.score(X, y) == pytest.approx(sk.score(X, y), abs=1e-8)
    assert isinstance(model.coef_, np.ndarray) and model.coef_.dtype == np.float64
    assert isinstance(model.n_iter_, int) and model.n_iter_ > 0
    assert model.result_.history.gap
    assert model.radius_ == pytest.approx(np.abs(model.coef_).sum())
    assert model.sparse_coef_.shape == (1, 13)
    with pytest.raises(ValueError, match="features"):
        model.predict(X[:, :5])


def test_not_fitted():
    from torchfw.utils.estimator import NotFittedError

    with pytest.raises(NotFittedError):
        Lasso().predict(np.ones((2, 2)))


# -- special and bad inputs ------------------------------------------------------------------------

def test_zero_column_constant_target_and_large_alpha():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((30, 6))
    X[:, 2] = 0.0  # all-zero column: fine, no division by zero
    y = X @ np.array([1.0, -2.0, 0.0, 0.0, 0.5, 0.0]) + 0.01 * rng.standard_normal(30)
    for kw in (dict(alpha=0.01), dict(radius=2.0)):
        for method in ("l1ball", "svm"):
            model = Lasso(**kw, method=method, tol=1e-8).fit(X, y)
            assert np.all(np.isfinite(model.coef_)) and model.coef_[2] == 0.0
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a constant target converges at once, silently
        model = Lasso(alpha=0.1).fit(X, np.full(30, 3.0))
    assert np.all(model.coef_ == 0) and model.intercept_ == pytest.approx(3.0)
    big = Lasso(alpha=1e3).fit(X, y)  # alpha >= alpha_max: w = 0 at iteration 0
    assert np.all(big.coef_ == 0) and big.n_iter_ == 0 and big.dual_gap_ == 0.0
    zero = Lasso(radius=0.0).fit(X, y)
    assert np.all(zero.coef_ == 0) and zero.intercept_ == pytest.approx(y.mean())


@pytest.mark.parametrize("kwargs,match", [
    (dict(radius=-1.0), "radius"),
    (dict(alpha=-0.1), "alpha"),
    (dict(alpha=0.0), "least squares"),
    (dict(alpha=float("nan")), "alpha"),
    (dict(alpha=0.1, radius=1.0), "not both"),
    (dict(method="cd"), "method"),
    (dict(solver="newton"), "solver"),
    (dict(tol=0.0), "tol"),
    (dict(max_iter=0), "max_iter"),
    (dict(dtype=torch.int32), "dtype"),
    (dict(working_set="yes"), "working_set"),
])
def test_bad_parameters(kwargs, match):
    X = np.ones((4, 3))
    X[:, 0] = [1.0, 2.0, 3.0, 4.0]
    with pytest.raises((ValueError, TypeError), match=match):
        Lasso(**kwargs).fit(X, np.arange(4.0))


def test_bad_data():
    X = np.random.default_rng(0).standard_normal((10, 4))
    y = np.arange(10.0)
    with pytest.raises(ValueError, match="samples"):
        Lasso().fit(X, y[:-1])
    with pytest.raises(ValueError, match="empty"):
        Lasso().fit(np.zeros((0, 4)), np.zeros(0))
    with pytest.raises(ValueError, match="empty"):
        Lasso().fit(np.zeros((10, 0)), y)
    bad = X.copy()
    bad[1, 2] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        Lasso().fit(bad, y)
    bad[1, 2] = np.inf
    with pytest.raises(ValueError, match="NaN or infinite"):
        Lasso().fit(bad, y)
    y_bad = y.copy()
    y_bad[0] = np.inf
    with pytest.raises(ValueError, match="y"):
        Lasso().fit(X, y_bad)
    with pytest.raises(ValueError, match="1-d"):
        Lasso().fit(X, np.ones((10, 2)))
    with pytest.raises(ValueError, match="2-d"):
        Lasso().fit(np.ones(10), y)
    with pytest.raises(ValueError, match="not both"):
        lasso_path(X, y, alphas=[0.1], radii=[1.0])
    with pytest.raises(ValueError, match="alphas"):
        lasso_path(X, y, alphas=[0.1, -1.0])
    with pytest.raises(ValueError, match="radii"):
        lasso_path(X, y, radii=[np.nan])


def test_max_iter_warns(leukemia):
    X, y = leukemia
    with pytest.warns(ConvergenceWarning, match="max_iter"):
        model = Lasso(alpha=0.01, tol=1e-12, max_iter=20).fit(X, y)
    assert model.n_iter_ == 20 and math.isfinite(model.dual_gap_)
