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
from _support import svm_relative_gap

import torchfw as tf
from torchfw.svm._isolation import ISOLATED_K, isolated_examples, neighbour_weights
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


def test_a_fit_on_isolated_examples_stops_at_isolated_tol():
    X, y = _spread()
    C, gamma = 256.0, 0.5
    auto = tf.SVC(C=C, gamma=gamma, random_state=0).fit(X, y)
    loose = tf.SVC(C=C, gamma=gamma, tol=TOL, random_state=0).fit(X, y)
    gap_auto = svm_relative_gap(auto, X, y, C, gamma)
    gap_loose = svm_relative_gap(loose, X, y, C, gamma)
    # float32 kernel values against the float64 matrix: a little slack over ISOLATED_TOL
    assert gap_auto <= 1.5 * ISOLATED_TOL, gap_auto
    assert gap_loose > 3 * ISOLATED_TOL, gap_loose  # tol 0.3 alone would stop far from it


def _shared_matrix(X, y, gamma, dtype=torch.float32):
    """The compiled path's matrix K + 1 of ``SVC(gamma=gamma)`` on ``X``, as a fit builds it."""
    from torchfw.svm._fit import full_matrix, shared_problem
    from torchfw.svm._multiclass import binary_problems

    model = tf.SVC(gamma=gamma)
    Xt = torch.tensor(X, dtype=dtype)
    kernel = make_kernel("rbf", gamma)
    classes, encoded = np.unique(y, return_inverse=True)
    plan = resolve_plan(model, n_examples=len(y), kernel=kernel, dtype=dtype, device=CPU)
    shared = shared_problem(plan, Xt, binary_problems(encoded, len(classes), "ovr"), 2.0)
    return kernel, Xt, full_matrix(shared)


@pytest.mark.parametrize("m", [150, 700])  # every example probed; 256 of them
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_probe_reads_the_fits_matrix_as_it_computes_the_block(m, seed):
    """Around the threshold, the answer read from the fit's matrix K + 1 is the block's: at
    gammas that put the median nearest kernel value just below and just above ISOLATED_K
    (either side by 1e-3, far outside the rounding band: the matrix decides), and at the
    median itself (inside the band: the block decides)."""
    from torchfw.svm._isolation import _from_matrix, _probe_rows

    rng = np.random.default_rng(seed)
    X = rng.normal(size=(m, 5)) * rng.uniform(0.5, 3.0, size=5)
    y = rng.integers(0, 2, m)
    rows = _probe_rows(m).numpy()
    d2 = ((X[rows, None, :] - X[None, :, :]) ** 2).sum(-1)
    d2[np.arange(len(rows)), rows] = np.inf
    # the lower median of the nearest squared distances, as torch.median takes it
    median_d2 = np.sort(d2.min(1))[(len(rows) - 1) // 2]
    at_threshold = -np.log(ISOLATED_K) / median_d2  # exp(-gamma d2) = ISOLATED_K there
    for factor, decided in ((1.01, True), (0.99, True), (1.0, False)):
        kernel, Xt, matrix = _shared_matrix(X, y, at_threshold * factor)
        assert matrix is not None
        block = isolated_examples(kernel, Xt)
        answer = _from_matrix(kernel, Xt, matrix, rows)
        if decided:
            assert answer is not None
            assert (answer[0] < ISOLATED_K) is block, (factor, answer, block)
            assert block is (factor > 1.0)  # a larger gamma: smaller kernel values, isolated
            # the neighbour sum as the block computes it, to the matrix's float32 rounding
            weights = neighbour_weights(kernel, Xt)
            assert weights is not None
            assert answer[1] == pytest.approx(weights[1], rel=1e-4, abs=1e-3)
        else:
            assert answer is None  # in the band: the block decides
        assert isolated_examples(kernel, Xt, matrix) is block


@pytest.mark.parametrize("gamma, isolated", [(0.5, True), (2.0 ** -9, False)])
def test_a_fit_that_reads_the_probe_off_its_matrix_is_the_fit_at_that_tol(gamma, isolated):
    """tol="auto" on the compiled path (the probe read from the shared matrix) gives the very
    model of the explicit tol the kernel block's probe stands for (torchfw.svm._plan.stop_tol:
    ISOLATED_TOL for isolated examples, else scaled by the neighbour sum) -- so a wrong answer
    of the matrix changes the model and fails."""
    from torchfw.svm._plan import stop_tol

    X, y = _spread(m=300)
    weights = neighbour_weights(make_kernel("rbf", gamma), torch.tensor(X, dtype=torch.float32))
    assert weights is not None and (weights[0] < ISOLATED_K) is isolated
    tol = stop_tol("auto", 300, False, isolated, weights[1])
    assert (tol == ISOLATED_TOL) is isolated
    auto = tf.SVC(C=256.0, gamma=gamma, random_state=0).fit(X, y)
    fixed = tf.SVC(C=256.0, gamma=gamma, tol=tol, random_state=0).fit(X, y)
    assert auto.result_.info.get("engine") == "compiled whole solve"
    np.testing.assert_array_equal(auto.support_, fixed.support_)
    np.testing.assert_array_equal(auto.dual_coef_, fixed.dual_coef_)
    np.testing.assert_array_equal(auto.intercept_, fixed.intercept_)
    assert auto.n_iter_.tolist() == fixed.n_iter_.tolist()


def test_the_probed_rows_are_the_evenly_spaced_ones():
    """Up to PROBE_ROWS examples every one (the float32 ramp rounds to each index), above
    PROBE_ROWS evenly spaced ones, as torch.linspace rounds them."""
    from torchfw.svm._isolation import PROBE_ROWS, _probe_rows

    for m in (*range(2, PROBE_ROWS + 1), 257, 1000, 12345):
        n = min(m, PROBE_ROWS)
        expected = torch.linspace(0, m - 1, n).round().long()
        assert torch.equal(_probe_rows(m), expected), m
