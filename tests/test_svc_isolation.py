"""tol="auto" where the Gaussian kernel isolates the examples (torchfw.svm._isolation).

What is checked: the probe's answer against nearest-neighbour kernel values computed directly
(spread points isolated at a large gamma, not at a small one; a duplicate is a neighbour; other
kernels never), that the plan takes ISOLATED_TOL only for tol="auto", and that a fit on
isolated examples stops at that relative gap -- its margin violations measured on the exact
float64 dual matrix -- where tol=0.3 stops far from it.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

import torchfw as tf
from torchfw.svm._isolation import ISOLATED_K, isolated_examples
from torchfw.svm._plan import ISOLATED_TOL, TOL, resolve_plan
from torchfw.svm.kernels import make_kernel

CPU = torch.device("cpu")


def _spread(m=1200, d=4, seed=0):
    """Raw-feature-like points: uniform on [0, 100]^d, labels 65/35 at random (no structure)."""
    rng = np.random.default_rng(seed)
    X = rng.uniform(0.0, 100.0, size=(m, d))
    y = (rng.uniform(size=m) < 0.65).astype(int)
    return X, y


def _median_nn_kernel(X, gamma):
    """The median over all examples of the largest RBF value with another example (float64)."""
    d2 = ((X[:, None, :] - X[None, :, :]) ** 2).sum(-1)
    np.fill_diagonal(d2, np.inf)
    return float(np.median(np.exp(-gamma * d2.min(1))))


@pytest.mark.parametrize("gamma", [0.5, 2.0 ** -5, 2.0 ** -9, 2.0 ** -13])
def test_the_probe_answers_as_the_nearest_neighbours(gamma):
    X, _ = _spread(m=200)  # 200 < PROBE_ROWS: every example probed
    expected = _median_nn_kernel(X, gamma) < ISOLATED_K
    got = isolated_examples(make_kernel("rbf", gamma), torch.tensor(X, dtype=torch.float64))
    assert got == expected
    # the cases span both answers: spread points are isolated at 0.5, not at 2^-13
    if gamma == 0.5:
        assert got
    if gamma == 2.0 ** -13:
        assert not got


def test_duplicates_are_neighbours_and_other_kernels_are_never_probed():
    X, _ = _spread(m=200)
    rbf = make_kernel("rbf", 0.5)
    assert isolated_examples(rbf, torch.tensor(X))
    # every example twice: each has a neighbour at distance 0 (k = 1), none is isolated
    assert not isolated_examples(rbf, torch.tensor(np.vstack([X, X])))
    for name in ("linear", "poly", "sigmoid"):
        assert not isolated_examples(make_kernel(name, 0.5), torch.tensor(X))
    assert not isolated_examples(rbf, torch.tensor(X[:1]))


def test_the_plan_takes_isolated_tol_for_tol_auto_only():
    def tol(model, isolated):
        return resolve_plan(model, n_examples=5000, kernel=None, dtype=torch.float32,
                            device=CPU, isolated=isolated).tol

    assert tol(tf.SVC(), False) == TOL
    assert tol(tf.SVC(), True) == ISOLATED_TOL
    assert tol(tf.SVC(tol=0.2), True) == 0.2  # an explicit tol is kept


def _relative_gap(model, X, y, C, gamma):
    """``(rho - min_i (K~ a)_i) / rho`` of the fitted dual point, on the float64 dual matrix
    ``K~ = yy' (K + 1) + I / C`` (the model's ``|dual_coef_|`` normalized to the simplex)."""
    s = np.where(y == model.classes_[1], 1.0, -1.0)
    d2 = ((X[:, None, :] - X[None, :, :]) ** 2).sum(-1)
    Q = np.outer(s, s) * (np.exp(-gamma * d2) + 1.0) + np.eye(len(y)) / C
    a = np.zeros(len(y))
    a[model.support_] = np.abs(model.dual_coef_[0])
    a /= a.sum()
    Qa = Q @ a
    rho = a @ Qa
    return (rho - Qa.min()) / rho


def test_a_fit_on_isolated_examples_stops_at_isolated_tol():
    X, y = _spread()
    C, gamma = 256.0, 0.5
    auto = tf.SVC(C=C, gamma=gamma, random_state=0).fit(X, y)
    loose = tf.SVC(C=C, gamma=gamma, tol=TOL, random_state=0).fit(X, y)
    gap_auto = _relative_gap(auto, X, y, C, gamma)
    gap_loose = _relative_gap(loose, X, y, C, gamma)
    # float32 kernel values against the float64 matrix: a little slack over ISOLATED_TOL
    assert gap_auto <= 1.5 * ISOLATED_TOL, gap_auto
    assert gap_loose > 3 * ISOLATED_TOL, gap_loose  # tol 0.3 alone would stop far from it
