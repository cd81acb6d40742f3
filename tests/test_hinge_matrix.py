"""``SVC(loss="hinge")`` reads LIBSVM's kernel rows: each entry the float64 kernel value rounded
once to the kernel precision (:mod:`torchfw.svm._hinge_matrix`), and the box solver's scans
in lanes choose what one sequential scan chooses."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch
from sklearn.metrics.pairwise import pairwise_kernels

from torchfw import SVC
from torchfw.exceptions import ConvergenceWarning
from torchfw.optimizers import _box_qp
from torchfw.svm import _hinge

pytest.importorskip("numba")


def _raw_problem(m=240, seed=0):
    """Features on raw scales (hundreds to thousands, as svmguide1's): the RBF argument
    ||x||^2 + ||z||^2 - 2 x'z cancels in float32."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(m, 4)) * np.array([300.0, 40.0, 2000.0, 5.0]) + 500.0
    # float32 values (as LIBSVM's files hold a few digits): the float32 fit holds its
    # features in float32, the kernel values are then computed from them in float64
    X = X.astype(np.float32).astype(np.float64)
    y = np.where(X[:, 0] + 0.1 * X[:, 2] + rng.normal(scale=80.0, size=m) > 650.0, 1, -1)
    return X, y


def _rows_read(monkeypatch, model, X, y):
    """The matrix and diagonal the hinge solver of ``model.fit(X, y)`` reads."""
    seen = {}
    solve = _hinge.solve_box_qp

    def spy(src, diag, *args, **kwargs):
        seen["P"], seen["diag"] = src[0], diag
        seen["unsigned"] = kwargs.get("unsigned_rows")
        return solve(src, diag, *args, **kwargs)

    monkeypatch.setattr(_hinge, "solve_box_qp", spy)
    model.fit(X, y)
    return seen


@pytest.mark.parametrize("kernel, params", [
    ("rbf", {"gamma": 2.0 ** -7}), ("rbf", {"gamma": 2.0 ** -13}),
    ("poly", {"gamma": 1e-3, "degree": 2, "coef0": 1.0}),
    ("poly", {"gamma": 1e-4, "degree": 5, "coef0": 1.0}),
    ("poly", {"gamma": 1e-4, "degree": 7, "coef0": 0.5}), ("linear", {}),
    ("sigmoid", {"gamma": 1e-6, "coef0": 0.5})])
def test_float32_rows_are_float64_values_rounded(monkeypatch, kernel, params):
    X, y = _raw_problem()
    # one step: the rows are read before the solve (poly and linear on raw features would
    # crawl to max_iter)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        seen = _rows_read(monkeypatch, SVC(kernel=kernel, loss="hinge", C=1.0, max_iter=1,
                                           **params), X, y)
    assert seen["unsigned"] is True and seen["P"].dtype == np.float32
    K64 = pairwise_kernels(X, X, metric=kernel, **params)
    # within one unit in the last place of the rounded float64 value (the float64 dots sum
    # in another order than scikit-learn's); K + 1 in float32, or the float32 RBF argument,
    # miss by thousands
    np.testing.assert_array_max_ulp(seen["P"], K64.astype(np.float32), maxulp=1)
    np.testing.assert_allclose(seen["diag"], np.diagonal(K64), rtol=1e-12)


def test_float64_rows(monkeypatch):
    X, y = _raw_problem(seed=1)
    seen = _rows_read(monkeypatch, SVC(gamma=2.0 ** -9, loss="hinge", dtype=torch.float64),
                      X, y)
    assert seen["P"].dtype == np.float64
    # the float64 argument's rounding (norms of 1e7 against distances of 1e2) bounds the
    # agreement with scikit-learn's own float64 values
    np.testing.assert_allclose(seen["P"], pairwise_kernels(X, X, metric="rbf",
                                                           gamma=2.0 ** -9), rtol=1e-9,
                               atol=1e-300)


def test_over_cache_size_reads_the_shared_rows(monkeypatch):
    """A matrix over ``cache_size``: the SVC's cache of K + 1 rows, diagonal K_ii + 1."""
    X, y = _raw_problem(m=600, seed=2)
    seen = _rows_read(monkeypatch, SVC(gamma=2.0 ** -9, loss="hinge", cache_size=0.5), X, y)
    assert isinstance(seen["P"], np.ndarray) and seen["P"].shape[0] < 600  # the cache's slots
    np.testing.assert_allclose(seen["diag"], 2.0)


def test_large_c_raw_features_match_libsvm():
    """At large C on raw features (the regime where float32 K + 1 added noise of the order of
    the tolerance to every step): LIBSVM's support vectors and predictions."""
    from sklearn.svm import SVC as LibSVC

    X, y = _raw_problem(m=300, seed=3)
    ref = LibSVC(C=2.0 ** 12, gamma=2.0 ** -13).fit(X, y)
    model = SVC(C=2.0 ** 12, gamma=2.0 ** -13, loss="hinge").fit(X, y)
    assert model.result_.converged
    np.testing.assert_array_equal(model.predict(X), ref.predict(X))
    np.testing.assert_array_equal(model.support_, ref.support_)


@pytest.mark.parametrize("n", [1, 3, 4, 7, 9])
def test_lanes_choose_as_one_scan(n):
    """Ties everywhere (equal curvature, equal values): the four lanes' merge picks the last
    index, as the sequential scan (and LIBSVM) does -- the steps, and so the iterates, follow
    from it. A problem of n + 1 coordinates whose exact path is known: y = (+1, -1, ..., -1),
    Q = I, every "low" coordinate tied, so the pair is always (0, the last free one)."""
    m = n + 1
    y = np.array([1.0] + [-1.0] * n)
    Q = np.eye(m)
    p = -np.ones(m)
    upper = np.full(m, 10.0)
    sol = _box_qp.solve_box_qp(Q, np.ones(m), p, y, upper, tol=1e-12, shrinking=False)
    assert sol.status == _box_qp.CONVERGED
    # the optimum of 1/2 |a|^2 - sum a with a_0 = sum_{k>0} a_k: a_k = 2/(n+1), a_0 = 2n/(n+1)
    np.testing.assert_allclose(sol.alpha[1:], 2.0 / (n + 1), atol=1e-9)
    np.testing.assert_allclose(sol.alpha[0], 2.0 * n / (n + 1), atol=1e-9)
    # the first step pairs 0 with the last coordinate (ties to the last index): from zero it
    # stops at the exact minimum along e_0 + e_last, a = 1 each
    one = _box_qp.solve_box_qp(Q, np.ones(m), p, y, upper, tol=1e-12, max_iter=1,
                               shrinking=False)
    expected = np.zeros(m)
    expected[0] = expected[-1] = 1.0
    np.testing.assert_array_equal(one.alpha, expected)
