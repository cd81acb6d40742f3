"""The Lasso <-> SVM maps (Jaggi 2014, spec §1.4) and the lazy operators behind them."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from torchfw import (
    AwayStepFrankWolfe,
    ExactLineSearch,
    FrankWolfe,
    L1Ball,
    PairwiseFrankWolfe,
    Quadratic,
    Simplex,
)
from torchfw.lasso.equivalence import SignedAtomsOperator, lasso_to_svm, svm_to_lasso
from torchfw.lasso.gram import GramOperator

scipy_sparse = pytest.importorskip("scipy.sparse")

F64 = torch.float64


def _problem(n=30, p=12, seed=0, zero_column=True):
    g = torch.Generator().manual_seed(seed)
    X = torch.randn(n, p, dtype=F64, generator=g) + 2.0
    X[torch.rand(n, p, generator=g) < 0.4] = 0.0  # sparse-ish, non-centred columns
    if zero_column:
        X[:, 3] = 0.0
    b = torch.randn(n, dtype=F64, generator=g)
    return X, b


def _csr(X):
    from torchfw.utils.data import as_matrix

    return as_matrix(scipy_sparse.csr_matrix(X.numpy()))


# -- GramOperator ----------------------------------------------------------------------------------

@pytest.mark.parametrize("center", [False, True])
@pytest.mark.parametrize("sparse", [False, True])
def test_gram_operator_matches_dense(center, sparse):
    X, _ = _problem()
    n, p = X.shape
    Xc = X - X.mean(0) if center else X
    Q = Xc.T @ Xc / n
    op = GramOperator(_csr(X) if sparse else X, center=center, cache_size=1.0)
    for i in range(p):
        torch.testing.assert_close(op.column(i), Q[:, i], rtol=0, atol=1e-12)
    idx = torch.tensor([5, 0, 3, 11])
    torch.testing.assert_close(op.columns(idx), Q[:, idx], rtol=0, atol=1e-12)
    torch.testing.assert_close(op.diagonal(), Q.diagonal(), rtol=0, atol=1e-12)
    v = torch.randn(p, dtype=F64)
    torch.testing.assert_close(op.matvec(v), Q @ v, rtol=0, atol=1e-11)
    # The all-zero column: zero column, zero diagonal, no NaN.
    assert float(op.diagonal()[3]) == 0.0 and bool(torch.isfinite(op.column(3)).all())


def test_gram_cache_budget_and_reuse():
    X, _ = _problem(p=40)
    op = GramOperator(X, cache_size=40 * 8 * 3 / 2**20)  # room for exactly 3 columns
    assert op.cache_slots == 3
    first = op.column(1).clone()
    op.column(2)
    op.column(1)
    assert op.hits == 1 and op.misses == 2
    for i in range(5, 10):  # one-off columns do not evict the more frequent 1
        op.column(i)
    hits = op.hits
    torch.testing.assert_close(op.column(1), first)
    assert op.hits == hits + 1
    assert op.cache_info()["used"] == 3
    assert GramOperator(X, cache_size=0).cache_slots == 0


def test_gram_operator_rejects_bad_input():
    with pytest.raises(ValueError, match="empty"):
        GramOperator(torch.zeros(0, 3, dtype=F64))
    with pytest.raises(ValueError, match="2-d"):
        GramOperator(torch.zeros(3, dtype=F64))
    with pytest.raises(ValueError, match="non-negative"):
        GramOperator(torch.ones(3, 3, dtype=F64), cache_size=-1)


# -- SignedAtomsOperator: Jaggi's Gram matrix of the 2n signed, shifted atoms ----------------------

@pytest.mark.parametrize("with_b", [False, True])
@pytest.mark.parametrize("origin", [False, True])
@pytest.mark.parametrize("with_offset", [False, True])
def test_signed_atoms_operator_is_the_gram_matrix_of_the_atoms(with_b, origin, with_offset):
    X, b = _problem()
    n, p = X.shape
    t = 1.7
    gram = GramOperator(X, scale=1.0)
    c = X.T @ b if with_b else None
    beta = float(b @ b) if with_b else 0.0
    N = 2 * p + int(origin)
    offset = torch.randn(N, dtype=F64) if with_offset else None
    op = SignedAtomsOperator(gram, t, c, beta, origin=origin, offset=offset)
    shift = b.unsqueeze(1) if with_b else torch.zeros(n, 1, dtype=F64)
    atoms = torch.cat([t * X, -t * X], dim=1) - shift          # +t A_i - b, -t A_i - b
    if origin:
        atoms = torch.cat([atoms, -shift], dim=1)                # the centre -b
    K = atoms.T @ atoms
    if with_offset:
        K = K + offset.unsqueeze(1) + offset.unsqueeze(0)
    assert op.shape == (N, N)
    for k in range(N):
        torch.testing.assert_close(op.column(k), K[:, k], rtol=1e-13, atol=1e-11)
    torch.testing.assert_close(op.columns(torch.arange(N)), K, rtol=1e-13, atol=1e-11)
    torch.testing.assert_close(op.diagonal(), K.diagonal(), rtol=1e-13, atol=1e-11)
    lam = torch.rand(N, dtype=F64)
    lam /= lam.sum()
    torch.testing.assert_close(op.matvec(lam), K @ lam, rtol=1e-13, atol=1e-11)


def test_block_formula_of_the_spec():
    """K~ = [[G - c1' - 1c' + b, -G - c1' + 1c' + b], [-G + c1' - 1c' + b, G + c1' + 1c' + b]]."""
    X, b = _problem(zero_column=False)
    p = X.shape[1]
    G, c, beta = X.T @ X, X.T @ b, float(b @ b)
    one = torch.ones(p, dtype=F64)
    c1, oc = torch.outer(c, one), torch.outer(one, c)
    K = torch.cat([torch.cat([G - c1 - oc + beta, -G - c1 + oc + beta], 1),
                   torch.cat([-G + c1 - oc + beta, G + c1 + oc + beta], 1)], 0)
    prob = lasso_to_svm(X, b, 1.0)
    torch.testing.assert_close(prob.operator.columns(torch.arange(2 * p)), K, rtol=1e-13,
                               atol=1e-10)
    At = prob.points()
    torch.testing.assert_close(At.T @ At, K, rtol=1e-13, atol=1e-10)


# -- lasso_to_svm ----------------------------------------------------------------------------------

def test_lasso_to_svm_objective_and_round_trips():
    X, b = _problem()
    p = X.shape[1]
    t = 2.5
    prob = lasso_to_svm(X.numpy(), b.numpy(), t)  # NumPy input is accepted
    assert prob.lmo.radius == 1.0 and prob.operator.shape == (2 * p, 2 * p)
    g = torch.Generator().manual_seed(1)
    for _ in range(5):
        lam = torch.rand(2 * p, dtype=F64, generator=g)
        lam /= lam.sum()
        w = prob.to_lasso(lam)
        assert float(w.abs().sum()) <= t * (1 + 1e-12)
        # The SVM objective 1/2 ||A~ lam||^2 is the Lasso objective 1/2 ||A w - b||^2.
        lasso_value = 0.5 * float(((X @ w - b) ** 2).sum())
        assert math.isclose(float(prob.objective.value(lam)), lasso_value, rel_tol=1e-13)
        # Round trips: w -> lambda -> w is exact; lambda -> w -> lambda keeps w and the value.
        lam2 = prob.to_svm(w)
        assert bool(Simplex().contains(lam2, atol=1e-14))
        torch.testing.assert_close(prob.to_lasso(lam2), w, rtol=0, atol=1e-15)
        assert math.isclose(float(prob.objective.value(lam2)), lasso_value, rel_tol=1e-13)
    w_in = torch.randn(p, dtype=F64)
    w_in *= 0.7 * t / w_in.abs().sum()  # strictly inside: the slack goes to +-e_0
    torch.testing.assert_close(prob.to_lasso(prob.to_svm(w_in)), w_in, rtol=0, atol=1e-15)
    with pytest.raises(ValueError, match="exceeds the radius"):
        prob.to_svm(w_in * 10)


def _record(solver_cls, lmo, objective, x0, n_iter, to_w):
    """Iterates (as Lasso coefficients) and gaps after every iteration."""
    ws, gaps = [], []

    def callback(info):
        ws.append(to_w(info.x.clone()))
        gaps.append(info.gap)

    solver_cls(lmo, ExactLineSearch(), tol=1e-300, max_iter=n_iter, check_every=1,
               callback=callback).minimize(objective, x0)
    return torch.stack(ws), torch.tensor(gaps, dtype=F64)


@pytest.mark.parametrize("solver_cls,n_iter", [(FrankWolfe, 150), (AwayStepFrankWolfe, 60),
                                               (PairwiseFrankWolfe, 60)])
def test_frank_wolfe_iterates_coincide_on_l1_ball_and_svm(solver_cls, n_iter):
    """Spec §1.4: the simplex LMO picks +-e_i exactly when the L1 LMO does; same steps/gaps."""
    X, b = _problem(n=40, p=25, zero_column=False)
    t = 3.0
    p = X.shape[1]
    lasso = Quadratic(X.T @ X, -(X.T @ b), constant=0.5 * float(b @ b))  # 1/2 ||Xw - b||^2
    prob = lasso_to_svm(X, b, t)
    w0 = torch.zeros(p, dtype=F64)
    w_l1, gap_l1 = _record(solver_cls, L1Ball(t), lasso, w0, n_iter, lambda x: x)
    w_svm, gap_svm = _record(solver_cls, prob.lmo, prob.objective, prob.to_svm(w0), n_iter,
                             prob.to_lasso)
    assert w_l1.shape == w_svm.shape == (n_iter, p)
    torch.testing.assert_close(w_svm, w_l1, rtol=0, atol=1e-9)
    torch.testing.assert_close(gap_svm, gap_l1, rtol=1e-8, atol=1e-9)
    assert float(gap_l1[-1]) < float(gap_l1[0])


# -- svm_to_lasso ----------------------------------------------------------------------------------

def _soft_margin_points(m=40, d=5, C=2.0, seed=0):
    """Seed 003's L2-SVM dual: points (y_i x_i ; e_i / sqrt(C)), problem min_{x in simplex}
    ||A x||^2."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((m, d))
    y = np.where(X[:, 0] + 0.3 * rng.standard_normal(m) > 0, 1.0, -1.0)
    A = np.vstack([(y[:, None] * X).T, np.eye(m) / math.sqrt(C)])  # (d + m, m)
    v = np.concatenate([np.zeros(d), np.ones(m)])                # weakly separating
    return torch.from_numpy(A), torch.from_numpy(v)


def test_svm_to_lasso_solutions_coincide():
    A, v = _soft_margin_points()
    m = A.shape[1]
    red = svm_to_lasso(A, v)
    assert red.margin > 0 and red.D > float(torch.linalg.vector_norm(A, dim=0).max())
    # On the simplex the Lasso objective is the SVM objective, exactly.
    g = torch.Generator().manual_seed(0)
    x = torch.rand(m, dtype=F64, generator=g)
    x /= x.sum()
    lasso_value = float(((red.X @ x - red.y) ** 2).sum())
    assert math.isclose(lasso_value, float(((A @ x) ** 2).sum()), rel_tol=1e-12)
    # Solve both to high accuracy.
    svm = PairwiseFrankWolfe(Simplex(), ExactLineSearch(), tol=1e-13, max_iter=200_000)
    x_svm = svm.minimize(Quadratic(A.T @ A)).x
    lasso = PairwiseFrankWolfe(L1Ball(1.0), ExactLineSearch(), tol=1e-13, max_iter=200_000)
    obj = Quadratic(red.X.T @ red.X, -(red.X.T @ red.y), constant=0.5 * float(red.y @ red.y))
    x_lasso = lasso.minimize(obj, torch.zeros(m, dtype=F64)).x
    # The Lasso solution lies on the simplex face (x >= 0, sum x = 1) ...
    assert float(x_lasso.min()) >= -1e-12
    assert abs(float(x_lasso.sum()) - 1.0) < 1e-9
    # ... and is the SVM solution (the map back is the identity there).
    torch.testing.assert_close(red.to_svm(x_lasso), x_svm, rtol=0, atol=1e-6)
    # Round trip of the maps.
    torch.testing.assert_close(red.to_svm(red.to_lasso(x_svm)), x_svm, rtol=0, atol=0)


def test_svm_to_lasso_through_the_estimator():
    from torchfw import Lasso

    A, v = _soft_margin_points(m=30, seed=3)
    red = svm_to_lasso(A, v)
    model = Lasso(radius=red.radius, fit_intercept=False, tol=1e-12).fit(red.X, red.y)
    x = torch.from_numpy(model.coef_)
    svm = PairwiseFrankWolfe(Simplex(), ExactLineSearch(), tol=1e-13, max_iter=200_000)
    x_svm = svm.minimize(Quadratic(A.T @ A)).x
    torch.testing.assert_close(red.to_svm(x), x_svm, rtol=0, atol=1e-5)


def test_svm_to_lasso_rejects_non_separating_vectors():
    A, v = _soft_margin_points()
    with pytest.raises(ValueError, match="weakly separating"):
        svm_to_lasso(A, -v)
    with pytest.raises(ValueError, match="zero"):
        svm_to_lasso(A, torch.zeros_like(v))
    with pytest.raises(ValueError, match="must exceed"):
        svm_to_lasso(A, v, D=0.5 * float(torch.linalg.vector_norm(A, dim=0).max()))
    with pytest.raises(ValueError, match="shape"):
        svm_to_lasso(A, v[:-1])


def test_lasso_to_svm_rejects_bad_input():
    X, b = _problem()
    with pytest.raises(ValueError, match="positive"):
        lasso_to_svm(X, b, -1.0)
    with pytest.raises(ValueError, match="shape"):
        lasso_to_svm(X, b[:-1], 1.0)
    Xnan = X.clone()
    Xnan[0, 0] = float("nan")
    with pytest.raises(ValueError, match="NaN"):
        lasso_to_svm(Xnan, b, 1.0)
