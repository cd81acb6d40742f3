"""``SVC(loss="hinge")``: LIBSVM's L1-SVM, against scikit-learn's SVC (LIBSVM) on the same data,
and its core solver (:mod:`torchfw.optimizers._box_qp`) against an independent QP solve."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch
from scipy.optimize import minimize
from sklearn.datasets import load_breast_cancer, load_iris
from sklearn.metrics.pairwise import pairwise_kernels
from sklearn.preprocessing import StandardScaler
from sklearn.svm import SVC as LibSVC

from torchfw import SVC
from torchfw.exceptions import ConvergenceWarning
from torchfw.optimizers._box_qp import (
    CONVERGED,
    box_qp_value,
    equality_multiplier,
    solve_box_qp,
)

pytest.importorskip("numba")


@pytest.fixture(scope="module")
def cancer():
    X, y = load_breast_cancer(return_X_y=True)
    return StandardScaler().fit_transform(X), y


def _dual_value(model, X_sv, kernel="rbf", **params):
    r""":math:`\tfrac12 c^\top K c - \sum |c|` of a binary model's ``dual_coef_`` :math:`c = y
    \alpha` on its support vectors: the L1-SVM dual objective."""
    c = np.asarray(model.dual_coef_).ravel()
    K = pairwise_kernels(X_sv, X_sv, metric=kernel, **params)
    return 0.5 * c @ K @ c - np.abs(c).sum()


@pytest.mark.parametrize("C", [0.1, 1.0, 100.0])
def test_binary_matches_libsvm(cancer, C):
    X, y = cancer
    ref = LibSVC(C=C, gamma=0.05, tol=1e-5).fit(X, y)
    model = SVC(C=C, gamma=0.05, loss="hinge", tol=1e-5, dtype=torch.float64).fit(X, y)
    np.testing.assert_array_equal(model.predict(X), ref.predict(X))
    np.testing.assert_array_equal(model.support_, ref.support_)
    np.testing.assert_array_equal(model.n_support_, ref.n_support_)
    ours = _dual_value(model, X[model.support_], gamma=0.05)
    theirs = _dual_value(ref, X[ref.support_], gamma=0.05)
    assert abs(ours - theirs) <= 1e-6 * abs(theirs)
    np.testing.assert_allclose(model.dual_coef_, ref.dual_coef_, atol=1e-3 * C)
    np.testing.assert_allclose(model.intercept_, ref.intercept_, atol=1e-4)
    np.testing.assert_allclose(model.decision_function(X), ref.decision_function(X), atol=1e-4)
    # every coefficient inside the box, the bounded ones at C exactly
    coef = np.abs(np.asarray(model.dual_coef_)).ravel()
    assert coef.max() <= C and (coef == C).sum() == (np.abs(ref.dual_coef_) >= C * (1 - 1e-9)
                                                      ).sum()
    assert model.result_.converged and model.result_.gap < 1e-5


def test_default_precision_predicts_as_libsvm(cancer):
    """float32 kernel values (LIBSVM's cache precision, the default) and shrinking on: the
    same predictions, the dual value within float32 round-off."""
    X, y = cancer
    ref = LibSVC(C=1.0, gamma="scale").fit(X, y)
    model = SVC(C=1.0, loss="hinge").fit(X, y)
    np.testing.assert_array_equal(model.predict(X), ref.predict(X))
    ours = _dual_value(model, X[model.support_], gamma=1.0 / (X.shape[1] * X.var()))
    theirs = _dual_value(ref, X[ref.support_], gamma=1.0 / (X.shape[1] * X.var()))
    assert abs(ours - theirs) <= 1e-4 * abs(theirs)


def test_per_example_bounds(cancer):
    """C_i = C x class weight x sample weight, as LIBSVM (scikit-learn) bounds alpha_i: a
    solve with one C for all examples gives another model."""
    X, y = cancer
    w = np.random.default_rng(0).uniform(0.2, 3.0, y.shape[0])
    params = dict(C=3.0, gamma=0.05, class_weight={0: 2.0, 1: 0.5}, tol=1e-5)
    ref = LibSVC(**params).fit(X, y, sample_weight=w)
    model = SVC(loss="hinge", dtype=torch.float64, **params).fit(X, y, sample_weight=w)
    np.testing.assert_array_equal(model.support_, ref.support_)
    np.testing.assert_allclose(model.dual_coef_, ref.dual_coef_, atol=1e-3)
    np.testing.assert_allclose(model.decision_function(X), ref.decision_function(X), atol=1e-4)
    bound = 3.0 * np.where(y == 0, 2.0, 0.5) * w
    coef = np.abs(np.asarray(model.dual_coef_)).ravel()
    assert np.all(coef <= bound[model.support_])
    assert np.sum(coef == bound[model.support_]) > 10  # many at their own bound


@pytest.mark.parametrize("kernel, params", [("rbf", {"gamma": 0.5}),
                                            ("poly", {"gamma": 0.3, "degree": 2}),
                                            ("linear", {})])
def test_iris_one_vs_one_matches_libsvm(kernel, params):
    X, y = load_iris(return_X_y=True)
    ref = LibSVC(C=3.0, kernel=kernel, tol=1e-5, decision_function_shape="ovo",
                 **params).fit(X, y)
    model = SVC(C=3.0, kernel=kernel, loss="hinge", tol=1e-5, dtype=torch.float64,
                decision_function_shape="ovo", **params).fit(X, y)
    assert model.multi_class_ == "ovo"
    np.testing.assert_array_equal(model.predict(X), ref.predict(X))
    np.testing.assert_array_equal(model.support_, ref.support_)
    np.testing.assert_array_equal(model.n_support_, ref.n_support_)
    np.testing.assert_allclose(model.dual_coef_, ref.dual_coef_, atol=1e-3)
    np.testing.assert_allclose(model.intercept_, ref.intercept_, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(model.decision_function(X), ref.decision_function(X),
                               rtol=1e-4, atol=1e-4)


def test_precomputed_kernel_matches_libsvm():
    X, y = load_iris(return_X_y=True)
    K = pairwise_kernels(X, X, metric="rbf", gamma=0.3)
    ref = LibSVC(C=2.0, kernel="precomputed", tol=1e-5).fit(K, y)
    model = SVC(C=2.0, kernel="precomputed", loss="hinge", tol=1e-5).fit(K, y)
    np.testing.assert_array_equal(model.predict(K), ref.predict(K))
    np.testing.assert_allclose(model.decision_function(K), ref.decision_function(K),
                               atol=1e-4)


def test_shrinking_changes_nothing_but_speed(cancer):
    X, y = cancer
    a = SVC(C=10.0, gamma=0.05, loss="hinge", tol=1e-6, dtype=torch.float64).fit(X, y)
    b = SVC(C=10.0, gamma=0.05, loss="hinge", tol=1e-6, dtype=torch.float64,
            shrinking=False).fit(X, y)
    np.testing.assert_array_equal(a.support_, b.support_)
    np.testing.assert_allclose(a.dual_coef_, b.dual_coef_, atol=1e-4)
    np.testing.assert_allclose(a.intercept_, b.intercept_, atol=1e-5)


def test_default_loss_unchanged(cancer):
    X, y = cancer
    assert SVC().get_params()["loss"] == "squared_hinge"
    a = SVC(random_state=0).fit(X, y)
    b = SVC(random_state=0, loss="squared_hinge").fit(X, y)
    np.testing.assert_array_equal(a.decision_function(X), b.decision_function(X))


@pytest.mark.parametrize("params, match", [
    ({"loss": "l1"}, "loss must be one of"),
    ({"loss": "hinge", "sample_size": 10}, "sample_size"),
    ({"loss": "hinge", "time_limit": 1.0}, "time_limit"),
    ({"loss": "hinge", "dense": False}, "dense=False"),
    ({"loss": "hinge", "C": float("inf")}, "finite C"),
])
def test_bad_options(params, match):
    X, y = load_iris(return_X_y=True)
    with pytest.raises(ValueError, match=match):
        SVC(**params).fit(X, y)


def test_max_iter_warns():
    X, y = load_iris(return_X_y=True)
    with pytest.warns(ConvergenceWarning, match="max_iter"):
        model = SVC(C=100.0, loss="hinge", max_iter=5).fit(X, y)
    assert model.fit_status_ == 1
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        assert SVC(C=100.0, loss="hinge", max_iter=-1).fit(X, y).fit_status_ == 0


# -- the core solver --------------------------------------------------------------------------

def _random_problem(n, seed, C):
    rng = np.random.default_rng(seed)
    A = rng.normal(size=(n, 3)) * 3.0  # raw-scale features: an ill-conditioned kernel
    K = np.exp(-0.3 * ((A[:, None] - A[None]) ** 2).sum(-1))
    y = np.where(rng.random(n) < 0.4, 1.0, -1.0)
    Q = (y[:, None] * y[None]) * K
    upper = C * rng.uniform(0.5, 2.0, n)
    return Q, y, upper


def _independent(Q, y, upper):
    """The same QP by SciPy's SLSQP (an independent method), tightly."""
    n = Q.shape[0]
    res = minimize(lambda a: 0.5 * a @ Q @ a - a.sum(), np.zeros(n),
                   jac=lambda a: Q @ a - 1.0, bounds=[(0.0, u) for u in upper],
                   constraints=[{"type": "eq", "fun": lambda a: y @ a, "jac": lambda a: y}],
                   method="SLSQP", options={"ftol": 1e-14, "maxiter": 2000})
    return res.fun


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("shrinking", [False, True])
def test_core_matches_independent_qp(seed, shrinking):
    Q, y, upper = _random_problem(40, seed, C=10.0)
    p = -np.ones(40)
    sol = solve_box_qp(Q, np.diag(Q).copy(), p, y, upper, tol=1e-9, shrinking=shrinking)
    assert sol.status == CONVERGED and sol.violation < 1e-9
    value = box_qp_value(sol.alpha, sol.grad, p)
    ref = _independent(Q, y, upper)
    assert value <= ref + 1e-8 * abs(ref)
    assert abs(value - ref) <= 1e-6 * abs(ref)
    assert abs(y @ sol.alpha) < 1e-10
    assert np.all(sol.alpha >= 0) and np.all(sol.alpha <= upper)
    np.testing.assert_allclose(sol.grad, Q @ sol.alpha + p, atol=1e-10)
    # the intercept: -y_i G_i = -rho on every free coordinate (KKT), and rho is their mean
    rho = equality_multiplier(sol.alpha, sol.grad, y, upper)
    free = (sol.alpha > 0) & (sol.alpha < upper)
    assert free.any()
    np.testing.assert_allclose(y[free] * sol.grad[free], rho, atol=1e-8)


def test_multiplier_without_free_coordinates():
    """No free coordinate: the midpoint of the interval the bounded ones leave (LIBSVM)."""
    y = np.array([1.0, 1.0, -1.0, -1.0])
    upper = np.ones(4)
    alpha = np.array([1.0, 0.0, 1.0, 0.0])
    grad = np.array([-0.5, 0.7, 0.2, -0.1])
    yG = y * grad  # [-0.5, 0.7, -0.2, 0.1]
    # bounding rho from above: y=+1 at 0 (0.7), y=-1 at C (-0.2); from below: y=+1 at C
    # (-0.5), y=-1 at 0 (0.1)
    assert equality_multiplier(alpha, grad, y, upper) == pytest.approx(
        (min(yG[1], yG[2]) + max(yG[0], yG[3])) / 2)


def test_core_bad_input():
    Q, y, upper = _random_problem(5, 0, 1.0)
    with pytest.raises(ValueError, match="labels"):
        solve_box_qp(Q, np.diag(Q).copy(), -np.ones(5), y * 2, upper)
    with pytest.raises(ValueError, match="upper bounds"):
        solve_box_qp(Q, np.diag(Q).copy(), -np.ones(5), y, upper * 0)
    with pytest.raises(ValueError, match="alpha0"):
        solve_box_qp(Q, np.diag(Q).copy(), -np.ones(5), y, upper, alpha0=upper * 2)


def test_cli_trains_libsvm_model(tmp_path, capsys):
    """``train --loss hinge``: LIBSVM's C (default 1), epsilon and shrinking; the saved model
    is scikit-learn's SVC at that C; ``--loss`` is validated."""
    from torchfw.cli import main as cli_main

    rng = np.random.default_rng(0)
    X = rng.normal(size=(120, 3))
    y = np.where(X[:, 0] + 0.5 * X[:, 1] ** 2 > 0.3, 1, -1)
    data = tmp_path / "d.txt"
    data.write_text("".join(f"{label:g} " + " ".join(f"{j + 1}:{v:.6f}" for j, v in
                                                      enumerate(row)) + "\n"
                            for label, row in zip(y, X, strict=True)))
    assert cli_main(["train", "--loss", "hinge", "-h", "0", "-e", "0.00001", "-g", "0.5", "-q",
                     str(data), str(tmp_path / "m.pt")]) == 0
    model = SVC.load(tmp_path / "m.pt")
    params = model.get_params()
    assert params["loss"] == "hinge" and params["C"] == 1.0 and params["shrinking"] is False
    Xr = np.round(X, 6)
    ref = LibSVC(C=1.0, gamma=0.5, tol=1e-5).fit(Xr, y)
    np.testing.assert_allclose(model.decision_function(Xr), ref.decision_function(Xr),
                               atol=1e-3)
    assert cli_main(["train", "--loss", "l2", "-q", str(data), str(tmp_path / "x.pt")]) == 2
    assert "--loss l2" in capsys.readouterr().err
