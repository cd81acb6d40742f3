"""Exact small simplex QPs (torchfw.optimizers.active_set), used for SVM initial subsets."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import torchfw as tf
from torchfw.optimizers.active_set import simplex_qp


def test_diagonal_quadratic_has_the_closed_form():
    # min sum d_i w_i^2 / 2 on the simplex: w_i proportional to 1 / d_i.
    d = np.array([1.0, 2.0, 4.0, 8.0])
    w, gap = simplex_qp(np.diag(d))
    np.testing.assert_allclose(w, (1 / d) / (1 / d).sum(), rtol=1e-14)
    assert gap <= 1e-14


def test_linear_term_can_leave_atoms_out():
    # c pushes atom 2 away: its optimal weight is 0, the others solve the equality problem.
    B = np.eye(3)
    c = np.array([0.0, 0.0, 5.0])
    w, _ = simplex_qp(B, c)
    np.testing.assert_allclose(w, [0.5, 0.5, 0.0], atol=1e-15)


@settings(max_examples=300, deadline=None)
@given(p=st.integers(1, 30), rank=st.integers(1, 30), ridge=st.sampled_from([0.0, 1e-3, 1.0]),
       linear=st.booleans(), seed=st.integers(0, 2**32 - 1))
def test_solution_is_certified_by_its_frank_wolfe_gap(p, rank, ridge, linear, seed):
    rng = np.random.default_rng(seed)
    A = rng.normal(size=(min(rank, p), p))
    B = A.T @ A + ridge * np.eye(p)  # semidefinite (rank < p) as well as definite
    c = rng.normal(size=p) if linear else np.zeros(p)
    w, gap = simplex_qp(B, c)
    assert w.min() >= 0.0 and abs(w.sum() - 1.0) < 1e-12
    g = B @ w + c
    scale = max(1.0, np.abs(g).max(), np.abs(np.diag(B)).max())
    assert gap == pytest.approx(float(w @ g - g.min()), abs=1e-12 * scale)
    # The FW gap bounds f(w) - f*, so a small gap computed here from B, c and w (not the
    # solver's word) certifies optimality.
    assert gap <= 1e-10 * scale


def test_constant_objective_gives_a_feasible_point():
    w, gap = simplex_qp(np.ones((4, 4)))  # f = (1'w)^2 / 2 = 1/2 on the whole simplex
    # The gap is rounding noise: exactly 0 where B @ w rounds one way, an ulp of 1 where the
    # compiled dot product contracts to fused multiply-adds (seen on an Intel Xeon).
    assert 0.0 <= gap <= 2 * np.finfo(np.float64).eps
    assert w.min() >= 0.0 and w.sum() == pytest.approx(1.0, abs=1e-15)


@pytest.mark.parametrize("B,match", [(np.ones((2, 3)), "square"), (np.zeros((0, 0)), "square"),
                                     (np.ones(3), "square"), (np.float64(2.0), "square"),
                                     (np.array([[np.nan]]), "finite")])
def test_bad_input(B, match):
    with pytest.raises(ValueError, match=match):
        simplex_qp(B)


def test_svc_initial_subset_is_solved_exactly():
    from torchfw.datasets import make_classification_blobs
    from torchfw.svm.kernels import SVMDualOperator, make_kernel

    X, y = make_classification_blobs(500, 2, n_classes=2, pattern="rings", random_state=0)
    model = tf.SVC(gamma=1.0, random_state=3, n_init=30)
    y_pm = np.where(np.asarray(y) == 1, 1.0, -1.0)
    op = SVMDualOperator(torch.as_tensor(X, dtype=torch.float64), torch.as_tensor(y_pm),
                         make_kernel("rbf", 1.0, 3, 0.0), 1.0, dtype=torch.float64)
    alpha = model._initial_alpha(op, y_pm, 3)
    support = torch.nonzero(alpha).squeeze(1)
    assert 0 < len(support) <= 30 and abs(float(alpha.sum()) - 1.0) < 1e-12
    # Optimal on the face of its support: equal gradients there (to rounding).
    block = op.block(support, support).double()
    g = block @ alpha[support]
    assert float(g.max() - g.min()) <= 1e-10 * float(block.diagonal().max())


def test_definite_support_solve_matches_the_kkt_system_and_refers_singular_ones():
    # The Cholesky path solves [[B, 1], [1', 0]] [z; nu] = [-c; 1] on a definite support, and
    # hands a singular one (rank-deficient B) back to the SVD path, which tells rays apart.
    from torchfw.optimizers.active_set import _definite_solution

    rng = np.random.default_rng(3)
    G = rng.normal(size=(12, 12))
    B = G @ G.T + 0.1 * np.eye(12)
    c = rng.normal(size=12)
    kkt = np.block([[B, np.ones((12, 1))], [np.ones((1, 12)), np.zeros((1, 1))]])
    expected = np.linalg.solve(kkt, np.concatenate([-c, [1.0]]))[:12]
    z = _definite_solution(kkt, c)
    assert z.shape == (12,)
    np.testing.assert_allclose(z, expected, rtol=1e-10, atol=1e-12)
    assert abs(z.sum() - 1.0) < 1e-12
    low = G[:, :5] @ G[:, :5].T  # rank 5
    kkt_low = np.block([[low, np.ones((12, 1))], [np.ones((1, 12)), np.zeros((1, 1))]])
    assert _definite_solution(kkt_low, c).shape == (0,)
    w, gap = simplex_qp(low, c)  # and the QP still solves it through the SVD path
    assert abs(w.sum() - 1.0) < 1e-12 and w.min() >= 0 and gap < 1e-9


@pytest.mark.parametrize("m, n_pos", [(3, 1), (5, 2), (21, 10), (105, 35), (400, 7)])
def test_start_subset_draws_both_classes_in_proportion(m, n_pos):
    # The compiled draw (numba's generator) and the NumPy one pick the same class counts, sorted
    # and without repeats; a seed fixes the compiled draw, and seeds differ from one another.
    from torchfw.svm._start import _draw, initial_subset

    y = np.array([1.0] * n_pos + [-1.0] * (m - n_pos))
    a = initial_subset(y, 20, 7)
    at_pos, at_neg = _draw(n_pos, m - n_pos, 20, np.random.default_rng(7))
    b = np.sort(np.concatenate([at_pos, n_pos + at_neg]))
    for s in (a, b):
        assert np.array_equal(s, np.unique(s)) and len(s) == min(20, m)
    assert (y[a] > 0).sum() == (y[b] > 0).sum() >= 1
    assert (y[a] < 0).sum() >= 1
    assert np.array_equal(a, initial_subset(y, 20, 7))
    if m > 40:
        assert not np.array_equal(a, initial_subset(y, 20, 8))


def test_compiled_start_subset_is_the_drawn_positions():
    # initial_subset runs in one compiled call; it must pick the examples draw_positions (the
    # sharded run's draw) names, on interleaved labels and the same seeds.
    from torchfw.svm._start import draw_positions, initial_subset

    rng = np.random.default_rng(3)
    for _ in range(60):
        m = int(rng.integers(2, 300))
        y = np.where(rng.random(m) < rng.random(), 1.0, -1.0)
        y[rng.integers(0, m)] = 1.0
        n_init, seed = int(rng.integers(1, 40)), int(rng.integers(0, 10**6))
        pos, neg = np.flatnonzero(y > 0), np.flatnonzero(y < 0)
        at_pos, at_neg = draw_positions(pos.size, neg.size, n_init, seed)
        expected = np.sort(np.concatenate([pos[at_pos], neg[at_neg]]))
        assert np.array_equal(initial_subset(y, n_init, seed), expected)


def test_rounding_that_empties_the_support_goes_on_from_the_best_vertex():
    # Raw wine features under a degree-5 polynomial kernel give kernel entries from 1e27 to
    # 1e31: the start subset's ratio test rounded every weight to 0 and the compiled solve
    # divided by zero. The fit now goes on from the subset's best vertex and ends finite.
    from sklearn.datasets import load_wine
    from sklearn.model_selection import train_test_split

    X, y = load_wine(return_X_y=True)
    X_train, X_test, y_train, y_test = train_test_split(X, y, test_size=0.3, stratify=y,
                                                        random_state=0)
    model = tf.SVC(kernel="poly", degree=5, gamma=1.0, random_state=0).fit(X_train, y_train)
    assert np.isfinite(model.decision_function(X_test)).all()
    assert model.score(X_test, y_test) > 0.8
