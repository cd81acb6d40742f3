"""The public binary SVM dual (torchfw.svm.problem): the matrix, the start, the map back, errors.

The builder's objective is checked against the dual written out by hand with scikit-learn's
kernels; a solve through a core optimizer must give the model of ``SVC(dense=False)`` (whose
lazy path builds its problems with the same code), weights must scale C per example, and bad
input must be refused with a message.
"""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
import torch
from sklearn.metrics.pairwise import polynomial_kernel, rbf_kernel

import torchfw as tf
from torchfw.solvers import make_solver
from torchfw.svm import _lazy as _svc_lazy
from torchfw.svm._start import initial_alpha
from torchfw.svm.problem import SVMDualProblem, example_C, svm_dual_problem


def _data(m=60, d=4, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(m, d))
    y = np.where(X[:, 0] - 0.5 * X[:, 1] + 0.3 * rng.normal(size=m) > 0, "pos", "neg")
    return X, y


def _simplex_point(m, seed=1):
    w = np.random.default_rng(seed).random(m)
    w[::3] = 0.0  # some zeros, as a solver's iterates have
    return torch.from_numpy(w / w.sum())


def _by_hand(K, y_pm, C):
    return (np.outer(y_pm, y_pm) * (K + 1.0)) + np.diag(1.0 / C)


def test_objective_is_the_dual_written_out_by_hand():
    X, y = _data()
    C = np.linspace(0.5, 3.0, X.shape[0])  # a C per example
    problem = svm_dual_problem(X, y, kernel="rbf", C=C, gamma=0.3, dtype=torch.float64,
                               class_weight={"pos": 2.0})
    y_pm = np.where(y == "pos", 1.0, -1.0)  # "pos" sorts last: +1
    np.testing.assert_array_equal(problem.y, y_pm)
    C_i = C * np.where(y == "pos", 2.0, 1.0)
    Kt = _by_hand(rbf_kernel(X, gamma=0.3), y_pm, C_i)
    alpha = _simplex_point(X.shape[0])
    value, grad = problem.objective.value_and_grad(alpha)
    a = alpha.numpy()
    np.testing.assert_allclose(float(value), 0.5 * a @ Kt @ a, rtol=1e-12)
    np.testing.assert_allclose(grad.numpy(), Kt @ a, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(problem.operator.diagonal().numpy(), np.diag(Kt), rtol=1e-12)
    assert isinstance(problem.lmo, tf.Simplex)
    assert problem.objective.Q is problem.operator


def test_float32_kernel_values_and_a_polynomial_kernel():
    X, y = _data(seed=3)
    problem = svm_dual_problem(X, y, kernel="poly", C=2.0, gamma=0.5, degree=2, coef0=1.0)
    y_pm = np.where(y == "pos", 1.0, -1.0)
    Kt = _by_hand(polynomial_kernel(X, degree=2, gamma=0.5, coef0=1.0), y_pm,
                  np.full(X.shape[0], 2.0))
    alpha = _simplex_point(X.shape[0], seed=4)
    a = alpha.numpy()
    np.testing.assert_allclose(float(problem.objective.value(alpha)), 0.5 * a @ Kt @ a,
                               rtol=1e-6)
    np.testing.assert_allclose(problem.objective.gradient(alpha).numpy(), Kt @ a, rtol=1e-5,
                               atol=1e-5)


def test_gamma_scale_and_auto_as_scikit_learn():
    X, y = _data()
    scale = svm_dual_problem(X, y).kernel.gamma
    assert scale == pytest.approx(1.0 / (X.shape[1] * X.var()), rel=1e-6)
    assert svm_dual_problem(X, y, gamma="auto").kernel.gamma == pytest.approx(1 / X.shape[1])


def test_the_start_is_svcs():
    X, y = _data(m=80)
    problem = svm_dual_problem(X, y, C=1.0, gamma=0.5, random_state=7, n_init=10)
    x0 = problem.x0
    assert x0.dtype == torch.float64 and float(x0.sum()) == pytest.approx(1.0)
    assert 1 < int((x0 > 0).sum()) <= 10
    svc_start = initial_alpha(problem.operator, problem.y, 10, 7)  # SVC(n_init=10)'s, seed 7
    assert torch.equal(x0, svc_start)
    vertex = svm_dual_problem(X, y, gamma=0.5, start="vertex", random_state=7).x0
    assert int((vertex > 0).sum()) == 1 and float(vertex.sum()) == 1.0
    warm = svm_dual_problem(X, y, gamma=0.5, alpha0=x0.numpy()).x0
    assert torch.equal(warm, x0)


@pytest.mark.parametrize("solver", ["fw", "away", "pairwise", "swap", "partan"])
def test_a_core_solve_gives_svcs_model(solver):
    X, y = _data(m=120, seed=2)
    X_test, _ = _data(m=40, seed=9)
    tol = 0.01
    svc = tf.SVC(C=2.0, gamma=0.4, solver=solver, tol=tol, dense=False, random_state=3)
    svc.fit(X, y)
    problem = svm_dual_problem(X, y, C=2.0, gamma=0.4, random_state=3)
    # SVC's own optimizer options (torchfw.svm._plan.FitPlan.optimizer): the same iterates.
    opt = make_solver(solver, problem.lmo, estimator="svc", tol=1e-300, rtol=2 * tol,
                      max_iter=100 * X.shape[0], random_state=3, corrective=True)
    result = opt.minimize(problem.objective, problem.x0)
    assert result.n_iter == svc.n_iter_[0]
    assert torch.equal(result.x, svc.result_.x)
    model = problem.to_model(result.x)
    np.testing.assert_array_equal(model.support, svc.support_)
    np.testing.assert_allclose(model.dual_coef.numpy(), svc.dual_coef_[0], rtol=1e-6)
    assert model.intercept == pytest.approx(float(svc.intercept_[0]), rel=1e-6)
    assert model.rho == pytest.approx(2 * svc.result_.value, rel=1e-6)
    np.testing.assert_allclose(model.decision_function(X_test), svc.decision_function(X_test),
                               rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(model.predict(X_test), svc.predict(X_test))


def test_the_public_optimizer_classes_solve_it_too():
    X, y = _data(m=100)
    problem = svm_dual_problem(X, y, C=10.0, gamma=0.5, random_state=0)
    result = tf.SwapFrankWolfe(problem.lmo, tol=1e-300, rtol=1e-6).minimize(
        problem.objective, problem.x0)
    svc = tf.SVC(C=10.0, gamma=0.5, tol=5e-7, dense=False, random_state=0).fit(X, y)
    model = problem.to_model(result.x)
    np.testing.assert_allclose(model.decision_function(X), svc.decision_function(X),
                               atol=1e-8)
    # The margin-1 scale: support vectors inside the margin have y f(x) <= 1.
    assert np.mean(model.predict(X) == y) > 0.9


def test_weights_scale_C_per_example_and_zero_weights_leave_the_problem():
    X, y = _data(m=50, seed=5)
    rng = np.random.default_rng(0)
    sw = rng.uniform(0.5, 2.0, X.shape[0])
    sw[[3, 10, 11]] = 0.0
    kept = np.setdiff1d(np.arange(X.shape[0]), [3, 10, 11])
    problem = svm_dual_problem(X, y, C=3.0, gamma=0.5, class_weight="balanced",
                               sample_weight=sw, dtype=torch.float64, random_state=1)
    np.testing.assert_array_equal(problem.rows, kept)
    yk = y[kept]
    counts = {c: int((yk == c).sum()) for c in ("neg", "pos")}
    balanced = np.array([len(yk) / (2 * counts[c]) for c in yk])
    np.testing.assert_allclose(problem.C.numpy(), 3.0 * balanced * sw[kept], rtol=1e-15)
    diag = rbf_kernel(X[kept], gamma=0.5).diagonal() + 1.0 + 1.0 / problem.C.numpy()
    np.testing.assert_allclose(problem.operator.diagonal().numpy(), diag, rtol=1e-14)
    # The same problem as SVC's: same model, support indexed in the rows given.
    svc = tf.SVC(C=3.0, gamma=0.5, class_weight="balanced", dense=False, tol=0.01,
                 random_state=1, dtype=torch.float64).fit(X, y, sample_weight=sw)
    result = make_solver("swap", problem.lmo, estimator="svc", tol=1e-300, rtol=0.02,
                         max_iter=100 * len(kept), random_state=1).minimize(
        problem.objective, problem.x0)
    model = problem.to_model(result.x)
    np.testing.assert_array_equal(model.support, svc.support_)
    assert not np.isin([3, 10, 11], model.support).any()
    np.testing.assert_allclose(model.decision_function(X), svc.decision_function(X),
                               rtol=1e-9, atol=1e-10)
    # A dict of class weights multiplies one class only; a C per example multiplies in.
    per_class = svm_dual_problem(X, y, C=np.full(X.shape[0], 2.0), class_weight={"neg": 4.0})
    np.testing.assert_allclose(per_class.C.numpy(), np.where(y == "neg", 8.0, 2.0))
    assert svm_dual_problem(X, y, C=2.0).C == 2.0  # no weights: one float


def test_example_C_is_what_SVC_uses():
    y_enc = np.array([0, 1, 1, 2, 2, 2])
    classes = np.array(["a", "b", "c"])
    assert example_C(2.0, None, y_enc, classes) == 2.0
    np.testing.assert_allclose(example_C(2.0, "balanced", y_enc, classes).numpy(),
                               2.0 * 6 / (3 * np.array([1, 2, 2, 3, 3, 3])))
    np.testing.assert_allclose(example_C(1.0, {"c": 0.5}, y_enc, classes,
                                         np.arange(1.0, 7.0)).numpy(),
                               [1, 2, 3, 2, 2.5, 3])


def test_svc_lazy_path_builds_its_problem_here(monkeypatch):
    X, y = _data(m=40)
    built = []
    original = _svc_lazy.build_dual

    def spy(*args, **kwargs):
        built.append(original(*args, **kwargs))
        return built[-1]

    monkeypatch.setattr(_svc_lazy, "build_dual", spy)
    svc = tf.SVC(gamma=0.5, dense=False, random_state=0).fit(X, y)
    assert len(built) == 1 and isinstance(built[0], SVMDualProblem)
    assert torch.equal(svc.result_.x, svc._alphas[0])


@pytest.mark.parametrize("kwargs,y,message", [
    ({}, np.array(["a", "b", "c"] * 20), "exactly 2"),
    ({}, np.array(["a"] * 60), "exactly 2"),
    ({"kernel": "precomputed"}, None, "no lazy operator"),
    ({"kernel": lambda A, B: A @ B.T}, None, "no lazy operator"),
    ({"kernel": "laplacian"}, None, "kernel must be one of"),
    ({"C": -1.0}, None, "C must be a positive"),
    ({"C": np.ones(5)}, None, r"shape \(60,\)"),
    ({"C": np.r_[np.ones(59), 0.0]}, None, "entries > 0"),
    ({"gamma": "scaled"}, None, "gamma must be"),
    ({"gamma": -1.0}, None, "gamma must be a positive"),
    ({"start": "random"}, None, "start must be one of"),
    ({"n_init": 0}, None, "n_init"),
    ({"dtype": torch.float16}, None, "dtype must be"),
    ({"alpha0": np.ones(60)}, None, "unit simplex"),
    ({"alpha0": np.ones(3) / 3}, None, "unit simplex"),
    ({"sample_weight": -np.ones(60)}, None, "sample_weight"),
    ({"class_weight": {"zzz": 1.0}}, None, "not present in y"),
    ({"class_weight": "even"}, None, "class_weight must be"),
])
def test_bad_input_is_refused(kwargs, y, message):
    X, y_default = _data()
    with pytest.raises((ValueError, TypeError), match=message):
        svm_dual_problem(X, y_default if y is None else y, **kwargs)


def test_bad_dual_points_are_refused():
    X, y = _data()
    problem = svm_dual_problem(X, y, gamma=0.5)
    with pytest.raises(ValueError, match="shape"):
        problem.to_model(np.ones(3) / 3)
    with pytest.raises(ValueError, match=">= 0"):
        problem.to_model(np.r_[2.0, -1.0, np.zeros(58)])
    with pytest.raises(ValueError, match="rho"):
        problem.to_model(np.zeros(60))
    model = problem.to_model(problem.x0)
    with pytest.raises(ValueError, match="features"):
        model.decision_function(np.ones((2, 3)))
    with pytest.raises(ValueError, match="NaN|infinite"):
        svm_dual_problem(np.r_[X[:-1], [[np.nan] * 4]], y)


def test_exported_lazily_from_torchfw():
    assert tf.svm_dual_problem is svm_dual_problem
    code = ("import sys, torchfw; assert 'torchfw.svm.problem' not in sys.modules; "
            "torchfw.svm_dual_problem; assert 'torchfw.svm.problem' in sys.modules")
    subprocess.run([sys.executable, "-c", code], check=True)


@pytest.mark.filterwarnings("ignore:Sparse CSR tensor support is in beta")
def test_sparse_and_tensor_inputs_build_the_same_problem():
    import scipy.sparse as sp

    X, y = _data(m=50, seed=6)
    X[np.abs(X) < 0.7] = 0.0
    alpha = _simplex_point(X.shape[0], seed=2)
    values = []
    for Xin in (X, sp.csr_matrix(X), torch.from_numpy(X), torch.from_numpy(X).to_sparse_csr()):
        problem = svm_dual_problem(Xin, y, gamma=0.5, dtype=torch.float64)
        values.append(float(problem.objective.value(alpha)))
        model = problem.to_model(alpha)
        assert model.decision_function(Xin).shape == (X.shape[0],)
    np.testing.assert_allclose(values, values[0], rtol=1e-12)
