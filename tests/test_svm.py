"""Kernel SVMs: the lazy dual operator, the SVC estimator and its solvers.

Checks against independent references: a dense kernel matrix built directly from the definition,
an SLSQP solve of the dual on small problems, scikit-learn's conventions (clone, GridSearchCV),
and CSR vs dense inputs. CUDA tests compare a GPU fit with the CPU fit of the same problem.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from conftest import data_path, requires_cuda

import torchfw as tf
from torchfw.svm import SOLVERS, SVC, _kernel_cpu
from torchfw.svm.kernels import SVMDualOperator, make_kernel


def _dense_dual(X, y, kernel, C):
    """The L2-SVM dual matrix from its definition, densely (reference)."""
    K = kernel.pairwise(X, X).double()
    return (y[:, None] * y[None, :]).double() * (K + 1.0) + torch.eye(len(y)).double() / C


def _problem(m=120, d=4, seed=0):
    g = torch.Generator().manual_seed(seed)
    X = torch.randn(m, d, generator=g, dtype=torch.float64)
    y = torch.sign(X[:, 0] * X[:, 1] + 0.2 * torch.randn(m, generator=g, dtype=torch.float64))
    y[y == 0] = 1
    return X, y


@pytest.mark.parametrize("name", ["rbf", "linear", "poly", "sigmoid"])
def test_operator_columns_match_dense_definition(name):
    X, y = _problem(60)
    kernel = make_kernel(name, gamma=0.3, degree=2, coef0=0.5)
    C = 2.0
    dense = _dense_dual(X, y, kernel, C)
    op = SVMDualOperator(X, y, kernel, C, dtype=torch.float64)
    for i in (0, 7, 59):
        torch.testing.assert_close(op.column(i).double(), dense[:, i])
    idx = torch.tensor([3, 11, 40])
    torch.testing.assert_close(op.columns(idx).double(), dense[:, idx])
    torch.testing.assert_close(op.diagonal().double(), torch.diagonal(dense))
    rows = torch.tensor([5, 1, 30])
    torch.testing.assert_close(op.block(rows, idx).double(), dense[rows][:, idx])
    torch.testing.assert_close(op.entry(torch.tensor([4]), torch.tensor([9])).double(),
                               dense[4, 9].reshape(1))
    v = torch.rand(60, dtype=torch.float64)
    v[v < 0.5] = 0
    torch.testing.assert_close(op.matvec(v), dense @ v)


def test_operator_float32_rbf_columns_are_accurate():
    # float32 kernels use a vectorized exp: check it against the float64 definition.
    X, y = _problem(500, 8)
    kernel = make_kernel("rbf", gamma=0.2)
    dense = _dense_dual(X, y, kernel, 1.0)
    op = SVMDualOperator(X.float(), y.float(), kernel, 1.0, dtype=torch.float32)
    for i in (0, 123, 499):
        assert torch.allclose(op.column(i).double(), dense[:, i], rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("name", ["rbf", "poly"])
@pytest.mark.parametrize("sparse", [False, True])
def test_count_features_stored_in_one_byte_give_the_same_operator(name, sparse):
    # Binary and count features (as in a9a or w8a) are kept as uint8 on the CPU host path;
    # every route through the operator must still see the exact values.
    g = torch.Generator().manual_seed(3)
    X = (torch.rand(90, 12, generator=g) < 0.3) * torch.randint(1, 256, (90, 12), generator=g)
    X = X.double()
    y = torch.where(X[:, 0] + X[:, 1] > 60, 1.0, -1.0).double()
    kernel = make_kernel(name, gamma=1e-4, degree=2, coef0=0.5)
    dense = _dense_dual(X, y, kernel, 2.0)
    op = SVMDualOperator(X.to_sparse_csr() if sparse else X, y, kernel, 2.0,
                         dtype=torch.float64)
    if _kernel_cpu.HAVE_NUMBA:
        assert op.xfm.dtype == torch.uint8
    for i in (0, 44, 89):
        torch.testing.assert_close(op.column(i), dense[:, i])
    idx = torch.tensor([2, 50])
    torch.testing.assert_close(op.columns(idx), dense[:, idx])
    rows = torch.tensor([7, 3, 88])
    torch.testing.assert_close(op.block(rows, idx), dense[rows][:, idx])
    v = torch.rand(90, dtype=torch.float64)
    torch.testing.assert_close(op.matvec(v), dense @ v)
    # A value that is not a small non-negative integer keeps the float storage.
    X[0, 0] = 0.5
    assert SVMDualOperator(X, y, kernel, 2.0).xfm.dtype == torch.float32


@pytest.mark.parametrize("solver", ["swap", "sfw"])  # full columns; streaming working set
def test_count_features_fit_equals_float_storage_fit(solver):
    g = torch.Generator().manual_seed(4)
    X = (torch.rand(300, 20, generator=g) < 0.25).float()
    y = torch.where(X[:, :5].sum(1) > X[:, 5:10].sum(1), 1.0, -1.0)
    compact = SVC(solver=solver, gamma=0.2, tol=1e-3, random_state=0).fit(X, y)
    # Halving X and quadrupling gamma gives the same kernel, through the float storage.
    scaled = SVC(solver=solver, gamma=0.8, tol=1e-3, random_state=0).fit(X * 0.5, y)
    assert compact.n_iter_ == scaled.n_iter_
    np.testing.assert_array_equal(np.asarray(compact.support_), np.asarray(scaled.support_))
    np.testing.assert_allclose(np.asarray(compact.dual_coef_), np.asarray(scaled.dual_coef_),
                               rtol=1e-4, atol=1e-6)


def test_operator_csr_equals_dense():
    X, y = _problem(80, 6)
    X[X.abs() < 0.8] = 0  # sparse-ish
    kernel = make_kernel("rbf", gamma=0.5)
    dense_op = SVMDualOperator(X, y, kernel, 1.0, dtype=torch.float64)
    csr_op = SVMDualOperator(X.to_sparse_csr(), y, kernel, 1.0, dtype=torch.float64,
                             memory_budget=1e-6)  # too small for dense storage: stays CSR
    assert csr_op.xfm is None
    for i in (0, 17, 79):
        torch.testing.assert_close(csr_op.column(i), dense_op.column(i))


def test_operator_cache_hits_and_budget():
    X, y = _problem(100)
    op = SVMDualOperator(X, y, make_kernel("rbf", gamma=1.0), 1.0, dtype=torch.float64,
                         cache_size=3 * 100 * 8 / 2**20)  # three columns
    a = op.column(1).clone()
    op.column(2)
    op.column(1)
    assert op.hits == 1 and op.misses == 2
    op.column(3)
    op.column(4)  # the cache is full: 4 is not admitted over equally frequent columns
    torch.testing.assert_close(op.column(1), a)
    with pytest.raises(ValueError, match="at least 2"):
        SVMDualOperator(X, y, make_kernel("rbf", gamma=1.0), 1.0, cache_size=1e-6)


def _slsqp_dual(Q):
    from scipy.optimize import minimize

    m = Q.shape[0]
    Qn = Q.numpy()
    res = minimize(lambda a: 0.5 * a @ Qn @ a, np.full(m, 1.0 / m), jac=lambda a: Qn @ a,
                   bounds=[(0, None)] * m, method="SLSQP",
                   constraints=[{"type": "eq", "fun": lambda a: a.sum() - 1,
                                 "jac": lambda a: np.ones(m)}],
                   options={"ftol": 1e-15, "maxiter": 2000})
    return res.fun


@pytest.mark.parametrize("cls,kwargs", [
    (tf.FrankWolfe, {}), (tf.AwayStepFrankWolfe, {}), (tf.PairwiseFrankWolfe, {}),
    (tf.SwapFrankWolfe, {}), (tf.SwapFrankWolfe, {"second_order": True}),
    (tf.PartanFrankWolfe, {}), (tf.FullyCorrectiveFrankWolfe, {})])
@pytest.mark.parametrize("execution", ["host", "device"])
def test_dual_solution_matches_qp_solver(cls, kwargs, execution):
    X, y = _problem(40, 3, seed=1)
    kernel = make_kernel("rbf", gamma=0.5)
    op = SVMDualOperator(X, y, kernel, 1.0, dtype=torch.float64)
    reference = _slsqp_dual(_dense_dual(X, y, kernel, 1.0))
    # FW and PARTAN converge sublinearly (PARTAN needs ~40k iterations for 1e-9 here).
    tol = 1e-5 if cls in (tf.FrankWolfe, tf.PartanFrankWolfe) else 1e-9
    result = cls(tf.Simplex(), tf.ExactLineSearch(), tol=tol, max_iter=200_000,
                 execution=execution, **kwargs).minimize(tf.Quadratic(op))
    assert result.converged
    assert result.value - reference <= result.gap + 1e-10
    assert reference - result.value <= 1e-9  # the QP solution is not better by more than noise


def test_svc_decision_function_matches_dense_reference():
    X, y = _problem(150, 4)
    clf = SVC(C=3.0, gamma=0.7, tol=1e-3, dtype=torch.float64, random_state=0).fit(X, y)
    alpha = clf.result_.x
    kernel = make_kernel("rbf", gamma=0.7)
    rho = float(alpha @ _dense_dual(X, y, kernel, 3.0) @ alpha)
    Xq, _ = _problem(30, 4, seed=5)
    ref = ((kernel.pairwise(Xq, X) + 1.0) @ (alpha * y)) / rho
    np.testing.assert_allclose(clf.decision_function(Xq), ref.numpy(), rtol=1e-9, atol=1e-9)
    # On the margin-1 scale, support vectors sit near or inside the margin.
    margins = y.numpy() * clf.decision_function(X)
    assert margins[clf.support_].max() < 1.0 + 1e-6 + clf.result_.gap / rho


def test_svc_accuracy_on_nonlinear_data_and_every_solver():
    from torchfw.datasets import make_classification_blobs

    X, y = make_classification_blobs(400, 2, pattern="rings", noise=0.1, random_state=0)
    Xt, yt = make_classification_blobs(400, 2, pattern="rings", noise=0.1, random_state=1)
    for solver in SOLVERS:
        clf = SVC(solver=solver, gamma=1.0, C=10.0, random_state=0,
                  max_iter=4000 if solver in ("sfw", "msfw") else None).fit(X, y)
        assert clf.score(Xt, yt) > 0.9, solver
    linear = SVC(kernel="linear", C=10.0).fit(X, y)
    assert linear.score(Xt, yt) < 0.8  # the data needs a non-linear kernel


def test_svc_csr_and_dense_inputs_give_the_same_model():
    X, y = _problem(200, 10)
    X[X.abs() < 1.0] = 0
    # A tight tolerance pins the (unique) solution; CSR sums norms in another order, so the
    # iterates may differ in the last bits.
    kw = {"gamma": 0.2, "tol": 1e-9, "dtype": torch.float64, "random_state": 3,
          "solver": "pairwise"}
    dense = SVC(**kw).fit(X, y)
    sparse = SVC(**kw).fit(X.to_sparse_csr(), y)
    torch.testing.assert_close(dense.dual_coef_, sparse.dual_coef_, rtol=1e-5, atol=1e-7)
    scipy_sparse = pytest.importorskip("scipy.sparse")
    sp = SVC(**kw).fit(scipy_sparse.csr_matrix(X.numpy()), y.numpy())
    # SciPy input: SciPy / NumPy attributes (sparse support vectors and dual_coef_, as
    # scikit-learn's sparse fit)
    assert scipy_sparse.issparse(sp.dual_coef_) and scipy_sparse.issparse(sp.support_vectors_)
    np.testing.assert_allclose(dense.dual_coef_.numpy(), sp.problem_dual_coef_, rtol=1e-5,
                               atol=1e-7)
    np.testing.assert_allclose(dense.decision_function(X), sparse.decision_function(X),
                               rtol=1e-6, atol=1e-6)


def test_svc_labels_classes_and_gamma_scale():
    X, y = _problem(100)
    labels = np.where(y.numpy() > 0, "spam", "ham")
    clf = SVC(random_state=0).fit(X.numpy(), labels)
    assert list(clf.classes_) == ["ham", "spam"]
    assert set(clf.predict(X.numpy())) <= {"ham", "spam"}
    assert clf.gamma_ == pytest.approx(1.0 / (X.shape[1] * X.var(unbiased=False).item()))


def test_svc_class_weight_scales_C():
    X, y = _problem(200)
    weighted = SVC(class_weight={1.0: 10.0}, random_state=0, tol=1e-3).fit(X, y)
    plain = SVC(random_state=0, tol=1e-3).fit(X, y)
    # Larger C for the positive class: fewer positives misclassified on the training set.
    pos = y.numpy() > 0
    assert (weighted.predict(X)[pos] == 1).mean() >= (plain.predict(X)[pos] == 1).mean()
    balanced = SVC(class_weight="balanced", random_state=0).fit(X, y)
    assert balanced.score(X, y) > 0.7


def test_sklearn_clone_and_grid_search():
    sklearn = pytest.importorskip("sklearn")
    from sklearn.base import clone
    from sklearn.model_selection import GridSearchCV, cross_val_score

    X, y = _problem(120)
    est = SVC(C=2.0, gamma=0.5, solver="partan")
    cloned = clone(est)
    assert cloned.get_params() == est.get_params() and cloned is not est
    grid = GridSearchCV(SVC(random_state=0), {"C": [0.5, 5.0], "gamma": [0.1, 1.0]}, cv=3)
    grid.fit(X.numpy(), y.numpy())
    assert grid.best_score_ > 0.6
    assert cross_val_score(SVC(), X.numpy(), y.numpy(), cv=3).mean() > 0.6
    assert sklearn.base.is_classifier(est)


def test_svc_multiclass_one_vs_rest_on_shared_data():
    from torchfw.datasets import load_svmlight

    X, y = load_svmlight(data_path("wine.scale.xz"))
    perm = np.random.default_rng(0).permutation(X.shape[0])
    Xd = X.to_dense()
    train, test = perm[:120], perm[120:]
    clf = SVC(C=10.0, random_state=0).fit(Xd[train], y[train])
    assert len(clf.classes_) == 3
    assert clf.decision_function(Xd[test]).shape == (len(test), 3)
    assert clf.score(Xd[test], y[test]) > 0.9


@pytest.mark.filterwarnings("ignore::torchfw.exceptions.ConvergenceWarning")
@pytest.mark.parametrize("solver", ["swap", "partan", "away"])
def test_batched_one_vs_rest_matches_per_class_fits(solver):
    from torchfw.datasets import make_classification_blobs
    from torchfw.svm._plan import fit_planned

    X, y = make_classification_blobs(240, 2, n_classes=3, pattern="rings", random_state=0)
    # PARTAN converges sublinearly: a fixed budget, compared through the certified gaps.
    kw = {"gamma": 1.0, "C": 5.0, "tol": 1e-6, "solver": solver, "random_state": 0,
          "dtype": torch.float64, "max_iter": 3000 if solver == "partan" else None,
          "multi_class": "ovr"}
    sequential = SVC(**kw).fit(X, y)  # on the CPU: one problem after the other
    # The CUDA path, forced on the CPU (device scalars, eager) through the resolved plan.
    batched = fit_planned(SVC(**kw), X, y, batched=True)
    for seq, bat in zip(sequential.result_, batched.result_, strict=True):
        assert seq.info["engine"] != "BatchedQuadraticEngine"
        assert bat.info["engine"] == "BatchedQuadraticEngine"
        assert abs(seq.value - bat.value) <= seq.gap + bat.gap
    assert (sequential.predict(X) == batched.predict(X)).mean() > 0.99


@pytest.mark.filterwarnings("ignore::torchfw.exceptions.ConvergenceWarning")
@pytest.mark.parametrize("option", [{"sample_size": 40}, {"time_limit": 30.0}])
def test_one_vs_rest_options_the_batched_engine_lacks_solve_one_by_one(option, capsys):
    from torchfw.datasets import make_classification_blobs
    from torchfw.svm._plan import fit_planned

    X, y = make_classification_blobs(150, 2, n_classes=3, random_state=0)
    # batched=True: as on CUDA
    model = fit_planned(SVC(gamma=1.0, random_state=0, multi_class="ovr", **option), X, y,
                        batched=True)
    assert all(r.info.get("engine") != "BatchedQuadraticEngine" for r in model.result_)
    plain = fit_planned(SVC(gamma=1.0, random_state=0, verbose=True, multi_class="ovr"), X, y,
                        batched=True)
    assert all(r.info["engine"] == "BatchedQuadraticEngine" for r in plain.result_)
    assert "3 problems solved together" in capsys.readouterr().out


@pytest.mark.parametrize("bad,match", [
    ({"C": 0}, "C must be"), ({"C": -1.0}, "C must be"), ({"gamma": 0.0}, "gamma must be"),
    ({"kernel": "cosine"}, "unknown kernel"), ({"solver": "smo"}, "unknown solver"),
    ({"tol": 0}, "tol must be"), ({"cache_size": 1e-9}, "at least 2")])
def test_svc_bad_parameters(bad, match):
    X, y = _problem(50)
    with pytest.raises((ValueError, TypeError), match=match):
        SVC(**bad).fit(X, y)


def test_svc_bad_inputs():
    X, y = _problem(50)
    with pytest.raises(ValueError, match="single class"):
        SVC().fit(X, torch.ones(50))
    Xn = X.clone()
    Xn[3, 1] = float("nan")
    with pytest.raises(ValueError, match="NaN"):
        SVC().fit(Xn, y)
    with pytest.raises(ValueError, match="samples"):
        SVC().fit(X, y[:-1])
    with pytest.raises(ValueError, match="not fitted"):
        SVC().predict(X)
    clf = SVC().fit(X, y)
    with pytest.raises(ValueError, match="features"):
        clf.predict(X[:, :3])
    bad_csr = torch.sparse_csr_tensor(torch.tensor([0, 1, 2]), torch.tensor([0, 9]),
                                      torch.tensor([1.0, 2.0]), size=(2, 4),
                                      check_invariants=False)
    with pytest.raises(ValueError, match="column indices"):
        SVC().fit(bad_csr, [0, 1])
    with pytest.raises(ValueError, match="device"):
        SVC(device="cuda:99" if torch.cuda.is_available() else "cuda").fit(X, y)


@requires_cuda
@pytest.mark.parametrize("solver", ["swap", "partan", "pairwise", "away", "fw"])
def test_svc_cuda_matches_cpu(solver):
    X, y = _problem(300, 5)
    cpu = SVC(solver=solver, gamma=0.5, tol=1e-3, dtype=torch.float64, random_state=0).fit(X, y)
    gpu = SVC(solver=solver, gamma=0.5, tol=1e-3, dtype=torch.float64, random_state=0,
              device="cuda").fit(X, y)
    assert gpu.dual_coef_.is_cuda
    assert abs(gpu.result_.value - cpu.result_.value) <= cpu.result_.gap + gpu.result_.gap
    agree = (gpu.predict(X) == cpu.predict(X)).mean()
    assert agree > 0.98


@requires_cuda
def test_graph_execution_matches_host_on_cuda():
    # Iterates may part ways at near-ties (reductions order sums differently on the GPU), so
    # compare certified objective values, not trajectories.
    X, y = _problem(2000, 8)
    op = SVMDualOperator(X.cuda(), y.cuda(), make_kernel("rbf", gamma=0.3), 1.0,
                         dtype=torch.float64)
    x0 = torch.zeros(2000, dtype=torch.float64, device="cuda")
    x0[0] = 1.0
    # PARTAN has no away steps: like plain FW it converges sublinearly once the optimum lies on
    # a face, and here needs 3,550 iterations for gap 1e-4 but 49,250 for 1e-5 (on the CPU's host
    # loop); at 1e-7 it does not converge within max_iter, on CUDA or on the CPU.
    for cls, tol in ((tf.SwapFrankWolfe, 1e-7), (tf.PartanFrankWolfe, 1e-4),
                     (tf.AwayStepFrankWolfe, 1e-7)):
        ref = cls(tf.Simplex(), tol=tol, max_iter=50_000, execution="host",
                  check_every=50).minimize(tf.Quadratic(op), x0)
        graph = cls(tf.Simplex(), tol=tol, max_iter=50_000, execution="graph",
                    check_every=50).minimize(tf.Quadratic(op), x0)
        assert graph.info["execution"] == "graph" and graph.converged and ref.converged
        assert abs(graph.value - ref.value) <= graph.gap + ref.gap + 1e-12
        assert bool((graph.x >= 0).all()) and abs(float(graph.x.sum()) - 1) < 1e-9


def test_streaming_svc_models_the_tail_average_and_its_margin():
    X, y = _problem(300, 5)
    kw = {"solver": "sfw", "gamma": 0.3, "C": 2.0, "max_iter": 600, "random_state": 1}
    last = SVC(average=False, **kw).fit(X, y)
    mean = SVC(average=200, **kw).fit(X, y)
    # Same run; average=False models the last iterate, average=200 the mean from there on.
    assert last.result_.average is None
    torch.testing.assert_close(mean.result_.x, last.result_.x)
    alpha, rho = mean.result_.average, 2.0 * mean.result_.average_value
    # support_ lists the support vectors class by class (scikit-learn's order)
    np.testing.assert_array_equal(np.sort(mean.support_),
                                  torch.nonzero(alpha > 0).squeeze(1).numpy())
    assert (np.diff((y.numpy() > 0)[mean.support_].astype(int)) >= 0).all()
    signed = alpha * torch.where(y > 0, 1.0, -1.0).to(alpha)
    torch.testing.assert_close(mean.dual_coef_[0], signed[mean.support_] / rho)
    torch.testing.assert_close(mean.intercept_[0], signed.sum() / rho)
    # rho = alpha' K~ alpha of the averaged alpha: on the margin-1 scale the decision values
    # satisfy sum_i alpha_i y_i h(x_i) = 1 - sum_i alpha_i^2 / (C rho)  (K~ = yy'(k+1) + I/C).
    h = mean.decision_function(X)
    lhs = float((signed.numpy() * h).sum())
    assert lhs == pytest.approx(1.0 - float((alpha * alpha).sum()) / (kw["C"] * rho), rel=1e-5)


def test_streaming_svc_average_validation():
    X, y = _problem(60, 3)
    for bad in (-1, 2.5, "yes"):
        with pytest.raises((ValueError, TypeError), match="average"):
            SVC(solver="sfw", average=bad).fit(X, y)
    with pytest.raises(ValueError, match="max_iter=50"):
        SVC(solver="sfw", average=50, max_iter=50).fit(X, y)
    # The deterministic solvers ignore it, as scikit-learn's SVC ignores degree for rbf.
    SVC(solver="swap", average=10**9).fit(X, y)


def test_one_epoch_sfw_on_a9a_is_stable_with_the_tail_average():
    # Seed 001's single pass leaves the last iterate's threshold to its last few steps: on this
    # 5,000-row part of a9a its test accuracy moves by several points with the random order.
    # The tail average (the default) does not.
    from torchfw.datasets import load_svmlight
    from torchfw.utils.data import take_rows

    X, y = load_svmlight(data_path("a9a.xz"))
    Xt, yt = load_svmlight(data_path("a9a.t.xz"), n_features=X.shape[1])
    rows = torch.from_numpy(np.sort(np.random.default_rng(0).choice(X.shape[0], 5000,
                                                                    replace=False)))
    X, y, Xt, yt = take_rows(X, rows), y[rows], take_rows(Xt, torch.arange(4000)), yt[:4000]
    accuracy = {avg: [SVC(solver="sfw", C=1.0, gamma=0.005, random_state=seed, average=avg)
                      .fit(X, y).score(Xt, yt) for seed in range(5)]
                for avg in (False, True)}
    assert min(accuracy[True]) > 0.835
    assert max(accuracy[True]) - min(accuracy[True]) < 0.01
    assert np.mean(accuracy[True]) > np.mean(accuracy[False]) + 0.01


@pytest.mark.parametrize("C", [0.25, 1.0, 4.0])
def test_linear_model_is_liblinears_squared_hinge_at_half_C(C):
    # The model, independently of this package: the CVM primal ||w||^2 + b^2 - 2 rho + C sum xi^2
    # is, scaled by its margin rho, LIBLINEAR's L2-loss SVM 1/2 ||w||^2 + C' sum xi^2 with the
    # bias as a feature of value 1 (intercept_scaling=1, regularized as here) and C' = C / 2.
    # A wrong bias, C, loss or decision scale would part the two decision functions.
    LinearSVC = pytest.importorskip("sklearn.svm").LinearSVC
    from sklearn.datasets import make_classification

    X, y = make_classification(n_samples=300, n_features=8, random_state=0)
    ref = LinearSVC(loss="squared_hinge", dual=True, C=C / 2, tol=1e-10, max_iter=200_000,
                    intercept_scaling=1.0).fit(X, y)
    ours = SVC(kernel="linear", C=C, tol=1e-7, dtype=torch.float64, max_iter=10**6,
               random_state=0).fit(X, y)
    f_ref = ref.decision_function(X)
    assert np.abs(ours.decision_function(X) - f_ref).max() <= 1e-5 * np.abs(f_ref).max()
    # ... and not at LIBLINEAR's C = C: the factor 2 is real.
    other = LinearSVC(loss="squared_hinge", dual=True, C=C, tol=1e-10, max_iter=200_000,
                      intercept_scaling=1.0).fit(X, y)
    assert np.abs(ours.decision_function(X) - other.decision_function(X)).max() > 1e-3


def test_verbose_without_a_terminal_keeps_the_compiled_path(monkeypatch):
    # verbose=True shows a bar only on a terminal (tqdm's disable=None); elsewhere (a log, a
    # pipe, the CLI's default) the fit must not give up the compiled solve for a bar no one sees.
    import io
    import sys

    class Terminal(io.StringIO):
        def isatty(self):
            return True

    X, y = _problem(200, 4)
    monkeypatch.setattr(sys, "stderr", io.StringIO())
    quiet = SVC(gamma=0.5, random_state=0, verbose=True).fit(X, y)
    assert quiet.result_.info["engine"] == "compiled whole solve"
    assert sys.stderr.getvalue() == ""
    monkeypatch.setattr(sys, "stderr", Terminal())
    shown = SVC(gamma=0.5, random_state=0, verbose=True).fit(X, y)
    assert shown.result_.info["engine"] != "compiled whole solve"
    assert "gap=" in sys.stderr.getvalue()
    # The same iterates either way: only the engine differs.
    assert shown.n_iter_ == quiet.n_iter_
    assert np.array_equal(shown.predict(X), quiet.predict(X))
