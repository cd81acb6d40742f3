"""The active-set corrective step (:mod:`torchfw.optimizers._face`) and where SVC takes it.

* the face kernels: the Cholesky factor, its extension and its downdate against NumPy;
* the step reaches the optimum of random ill-conditioned quadratics over the simplex (with and
  without a linear term) found by an independent solve: enumeration of the supports' KKT
  systems, to 1e-8;
* the compiled SVC storage and the engine's (any operator) take the same correction;
* the cases of the issue's table: large C, a polynomial kernel on raw features, converge at
  the defaults without a ConvergenceWarning, as accurate as scikit-learn's SVC; so does a
  degree-5 polynomial kernel on raw breast cancer, whose diagonal spans twelve orders of
  magnitude;
* ``max_iter=-1`` is no limit, and bad values are refused by name.
"""

from __future__ import annotations

import itertools
import warnings

import numpy as np
import pytest
import torch
from conftest import data_path

import torchfw as tf
from torchfw.exceptions import ConvergenceWarning
from torchfw.optimizers import _face
from torchfw.utils.jit import HAVE_NUMBA

needs_numba = pytest.mark.skipif(not HAVE_NUMBA, reason="the compiled SVC path needs numba")


def _ill_conditioned(k: int, cond: float, seed: int):
    """A random symmetric positive definite matrix of condition number ``cond``."""
    rng = np.random.default_rng(seed)
    Q, _ = np.linalg.qr(rng.standard_normal((k, k)))
    eig = np.geomspace(1.0, 1.0 / cond, k)
    return (Q * eig) @ Q.T, rng


def _enumerated_optimum(G, c):
    """min 1/2 z'Gz + c'z over the simplex by trying every support: the KKT point whose
    weights are positive and whose gradient outside is not below the multiplier."""
    k = G.shape[0]
    best = None
    for size in range(1, k + 1):
        for S in itertools.combinations(range(k), size):
            S = list(S)
            kkt = np.zeros((size + 1, size + 1))
            kkt[:size, :size] = G[np.ix_(S, S)]
            kkt[:size, size] = kkt[size, :size] = 1.0
            sol = np.linalg.solve(kkt, np.concatenate([-c[S], [1.0]]))
            if (sol[:size] <= 0).any():
                continue
            z = np.zeros(k)
            z[S] = sol[:size]
            g = G @ z + c
            if g.min() >= z @ g - 1e-10 * max(1.0, np.abs(g).max()):
                value = 0.5 * z @ G @ z + c @ z
                if best is None or value < best[1]:
                    best = (z, value)
    return best


def test_factor_extension_and_downdate_match_numpy():
    G, _ = _ill_conditioned(9, 1e6, 0)
    L = np.tril(G).copy()
    assert _face.extend_factor(L, 0, 4) == 4 and _face.extend_factor(L, 4, 9) == 9
    np.testing.assert_allclose(L @ L.T, G, atol=1e-12)
    np.testing.assert_array_equal(np.triu(L, 1), 0.0)
    for r in (0, 4, 8):
        L2 = L.copy()
        _face.remove_position(L2, 9, r)
        keep = [i for i in range(9) if i != r]
        np.testing.assert_allclose(L2[:8, :8] @ L2[:8, :8].T, G[np.ix_(keep, keep)], atol=1e-12)
        np.testing.assert_array_equal(np.triu(L2[:8, :8], 1), 0.0)
    # A singular matrix is refused, not factored.
    assert not _face.cholesky_in_place(np.ones((3, 3)), 3)


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("linear", [False, True])
def test_corrective_runs_reach_the_enumerated_optimum(seed, linear):
    # FW alone crawls at condition 1e7; with the corrective step it stops at gap 1e-13 and
    # its point is the independent solve's to 1e-8 (weights) -- also with a linear term.
    G, rng = _ill_conditioned(7, 1e7, seed)
    c = rng.standard_normal(7) * 1e-4 if linear else np.zeros(7)
    ref, ref_value = _enumerated_optimum(G, c)
    Q = torch.from_numpy(G)
    objective = tf.Quadratic(Q, torch.from_numpy(c)) if linear else tf.Quadratic(Q)
    x0 = torch.full((7,), 1.0 / 7, dtype=torch.float64)
    plain = tf.FrankWolfe(tf.Simplex(), tol=1e-13, max_iter=3000).minimize(objective, x0)
    result = tf.FrankWolfe(tf.Simplex(), tol=1e-13, max_iter=3000,
                           corrective=True).minimize(objective, x0)
    assert result.converged
    np.testing.assert_allclose(result.x.numpy(), ref, atol=1e-8, rtol=0)
    assert abs(result.value - ref_value) <= 1e-10 * max(1.0, abs(ref_value))
    if not plain.converged:  # where FW crawls, the corrective step is what converged
        assert result.history.steps[-1].get("correct", 0) >= 1


def test_face_minimize_is_the_kkt_solution_when_interior():
    G, rng = _ill_conditioned(6, 1e8, 3)
    c = rng.standard_normal(6) * 1e-3
    ref, _ = _enumerated_optimum(G, c)
    if (ref > 0).all():  # the optimum over the simplex is the face's: one solve reaches it
        z = _face.face_minimize(G.copy(), np.full(6, 1 / 6), c)
        np.testing.assert_allclose(z, ref, atol=1e-8)
    # A start on a face leaves it only through the boundary: weights stay >= 0, sum 1.
    z = _face.face_minimize(G.copy(), np.full(6, 1 / 6), rng.standard_normal(6))
    assert z is not None and (z >= 0).all() and abs(z.sum() - 1) < 1e-12


@needs_numba
def test_compiled_and_engine_storages_take_the_same_correction():
    # The same SVM dual and the same iterate: the compiled driver on the rows of K + 1 and the
    # engine's on the lazy operator's columns give the same weights and gradient, bit for bit.
    from torchfw.optimizers._compiled_loop import correct
    from torchfw.optimizers._engine import QuadraticEngine
    from torchfw.svm import _dense as dense
    from torchfw.svm.kernels import SVMDualOperator, make_kernel
    from torchfw.utils.scalars import HOST

    gen = torch.Generator().manual_seed(1)
    X = torch.randn(60, 3, generator=gen, dtype=torch.float64) * 4.0
    y = torch.where(X[:, 0] + torch.randn(60, generator=gen, dtype=torch.float64) > 0, 1.0, -1.0)
    kernel = make_kernel("poly", 1.0, degree=3, coef0=0.0)
    C = 2.0
    plain = SVMDualOperator(X, torch.ones(60, dtype=torch.float64), kernel, C,
                            dtype=torch.float64)
    P = dense.plain_kernel_matrix(plain)
    op = SVMDualOperator(X, y, kernel, C, dtype=torch.float64)
    w0 = torch.zeros(60, dtype=torch.float64)
    w0[::5] = 1.0
    w0 /= w0.sum()
    eng = QuadraticEngine(tf.Quadratic(op), tf.Simplex(), w0, ops=HOST)
    w, s = eng._w_np.copy(), eng._s_np.copy()
    src = dense.row_source(dense.full_source(P), np.zeros(0, dtype=np.int64),
                           y.numpy().astype(P.dtype), plain._inv_c_np)
    kept = correct(src, np.zeros(1), False, w, s, np.empty(60, dtype=P.dtype), float(eng.p),
                   0.0, 60)
    assert kept >= 1
    assert eng.correct_face() == kept
    np.testing.assert_array_equal(eng._w_np, w)
    np.testing.assert_array_equal(eng._s_np, s)
    # The step took the objective down and the iterate stays on the simplex.
    assert float(eng.value()) < 0.5 * float(w0 @ op.matvec(w0))
    assert abs(w.sum() - 1.0) < 1e-12 and (w >= 0).all()


def _fit_quietly(model, X, y):
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        return model.fit(X, y)


@needs_numba
@pytest.mark.parametrize("dense", [True, False])
def test_iris_polynomial_kernel_on_raw_features_converges(dense):
    # The row: versicolor/virginica, poly degree 3, gamma=1 (LIBSVM C=1, torchfw 2C).
    # Every variant stopped on max_iter there (relative gap 2.9 after 10,000 SWAP steps).
    from sklearn.datasets import load_iris
    from sklearn.svm import SVC as LibSVC

    X, y = load_iris(return_X_y=True)
    X, y = X[y > 0], y[y > 0]
    ref = LibSVC(kernel="poly", gamma=1.0, C=1.0).fit(X, y).score(X, y)
    for solver in ("swap", "pairwise", "fw", "partan"):
        model = _fit_quietly(tf.SVC(kernel="poly", gamma=1.0, C=2.0, solver=solver,
                                    random_state=0, dense=dense), X, y)
        assert model.result_.converged
        assert model.n_iter_ < 2000, solver
        assert model.score(X, y) >= ref - 0.02, solver


@needs_numba
@pytest.mark.parametrize("dense", [True, False])
@pytest.mark.parametrize("gamma", [0.1, 1.0])
def test_breast_cancer_degree_5_polynomial_on_raw_features_converges(dense, gamma):
    # The polynomial benchmark's points (benchmarks/svm_poly.py): raw breast cancer, degree 5,
    # LIBSVM C=1 (torchfw 2C). The kernel's diagonal spans 5e19 to 9e31 (gamma 0.1); the
    # face's pivots of small-norm atoms fell below a cutoff taken from the largest diagonal
    # entry, every correction was refused, and SWAP stopped on the default budget (39,800
    # iterations) at relative gap 4.5. LIBSVM takes 20 s (gamma 0.1) and over 30 s (gamma 1).
    from sklearn.datasets import load_breast_cancer
    from sklearn.model_selection import train_test_split

    X, y = load_breast_cancer(return_X_y=True)
    X, Xt, y, yt = train_test_split(X, y, test_size=0.3, stratify=y, random_state=0)
    model = _fit_quietly(tf.SVC(kernel="poly", degree=5, gamma=gamma, C=2.0, random_state=0,
                                dense=dense), X, y)
    assert model.result_.converged
    assert model.n_iter_.max() < 5 * X.shape[0]
    assert model.score(Xt, yt) >= 0.9  # LIBSVM: 94.15 %


@needs_numba
def test_large_C_rbf_small_problem_converges():
    # The row: 80 x 5 make_classification at C = 1e4 (torchfw 2e4) stopped at relative
    # gap 1.59 on max_iter; now it converges with scikit-learn's training accuracy.
    from sklearn.datasets import make_classification
    from sklearn.svm import SVC as LibSVC

    X, y = make_classification(80, 5, random_state=0)
    ref = LibSVC(C=1e4).fit(X, y).score(X, y)
    model = _fit_quietly(tf.SVC(C=2e4, random_state=0), X, y)
    assert model.result_.converged
    assert model.score(X, y) >= ref - 0.0125


@needs_numba
@pytest.mark.data
def test_raw_svmguide1_at_large_C_converges():
    # The svmguide1 rows on a 600-example subsample of raw svmguide1 (rbf; LIBSVM's
    # (C, gamma) = (2^11, 2^-13), (2^15, 2^-13), (2^7, 2^-9), torchfw at 2C): converged, test
    # accuracy within a point of LIBSVM's.
    from sklearn.svm import SVC as LibSVC

    from torchfw.datasets import load_svmlight

    X, y = load_svmlight(data_path("svmguide1.xz"), dtype=torch.float64)
    Xt, yt = load_svmlight(data_path("svmguide1.t.xz"), n_features=X.shape[1],
                           dtype=torch.float64)
    X, Xt = X.to_dense().numpy(), Xt.to_dense().numpy()
    y, yt = np.asarray(y), np.asarray(yt)
    rows = np.random.default_rng(0).choice(X.shape[0], 600, replace=False)
    X, y = X[rows], y[rows]
    for log2c, log2g in ((11, -13), (15, -13), (7, -9)):
        ref = LibSVC(C=2.0 ** log2c, gamma=2.0 ** log2g).fit(X, y).score(Xt, yt)
        model = _fit_quietly(tf.SVC(C=2.0 ** (log2c + 1), gamma=2.0 ** log2g, random_state=0),
                             X, y)
        assert model.result_.converged
        assert model.score(Xt, yt) >= ref - 0.01


def test_max_iter_minus_one_is_no_limit_and_bad_values_are_named():
    from sklearn.datasets import load_iris

    X, y = load_iris(return_X_y=True)
    model = tf.SVC(max_iter=-1, random_state=0).fit(X, y)
    assert all(r.converged for r in model.result_)
    for bad in (-2, 0, 1.5, True):
        with pytest.raises((ValueError, TypeError), match="max_iter must be -1"):
            tf.SVC(max_iter=bad).fit(X, y)
    with pytest.raises(ValueError, match="streaming"):
        tf.SVC(max_iter=-1, solver="sfw").fit(X, y)


def test_stall_rule_measures_distance_to_a_relative_target():
    """Under a relative target a gap that halves while the value halves has not come nearer
    to stopping: measured as distances (gap over the check's target) the window stalled,
    measured as gaps it did not (a9a at large C crawled to the safety net so)."""
    rtol = 0.6
    gap0, value0 = 1e-4, 2.5e-5  # the window's reference check
    gap1, value1 = 0.45e-4, 1.1e-5  # its smallest: the gap and the value both fell ~2x
    d0 = _face.distance(gap0, rtol * value0)
    d1 = _face.distance(gap1, rtol * value1)
    assert d0 == pytest.approx(gap0 / (rtol * value0))
    assert not _face.stalled(gap1, gap0, rtol * value1)  # the gap halved: no stall on gaps
    assert _face.stalled(d1, d0, 1.0)  # the distance did not
    assert _face.distance(3.0, 0.0) == 3.0  # no positive target: the gap itself


@pytest.mark.parametrize("seed", range(3))
def test_stall_rule_of_a_window_at_its_cost_balanced_length_is_the_plain_rule(seed):
    """``stalled_scaled`` at scale 1 (a window costing one correction) is ``stalled``."""
    rng = np.random.default_rng(seed)
    for _ in range(200):
        reference = 10.0 ** rng.uniform(-1, 2)
        smallest = reference * rng.uniform(0.2, 1.2)
        assert _face.stalled_scaled(smallest, reference, 1.0, 1.0) == \
            _face.stalled(smallest, reference, 1.0)


def test_a_short_window_weighs_its_rate_by_its_cost():
    """A window of 1/200 of a correction's iterations whose distance fell 0.7-fold needs about
    four more such windows (0.02 corrections): not stalled; the same rate over a window that
    costs a whole correction is (four corrections of plain steps)."""
    cost = _face.correction_cost(1556, 4000)
    assert cost == pytest.approx((1556.0 ** 3 / 3 + 2 * 1556.0 * 4000) / (3 * 4000))
    assert _face.correction_window(1556, 4000, 0) == int(_face.RATIO * cost)
    smallest, reference = 4.4, 4.4 / 0.7
    assert not _face.stalled_scaled(smallest, reference, 1.0, 490 / cost)
    assert _face.stalled_scaled(smallest, reference, 1.0, 1.0)
    assert _face.stalled_scaled(reference, reference, 1.0, 1e-6)  # no progress: stalled
    assert not _face.stalled_scaled(0.9, 1.5, 1.0, 1.0)  # under the target: never
