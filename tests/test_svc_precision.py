"""The kernel's dtype of ``SVC(dtype=None)``: float64 where float32 rounds the dual's 1/C away.

* the rule (:func:`torchfw.svm._kernel_range.needs_float64`): rbf stays float32 up to
  C of about 2.6e5, a polynomial kernel on raw features switches, a precomputed kernel never,
  a kernel that overflows float32 keeps float32 (and its range error, which names float64);
* the raw iris versicolor/virginica pair with a polynomial kernel of degree 3 (the issue's
  row) to 8 (gamma 1, LIBSVM's C = 1, torchfw's 2C) converges for every solver, as accurate as
  scikit-learn's SVC (in float32 every solver stopped on the iteration budget at degrees 4 to
  8, or raised "margin is 0");
* an explicit ``dtype`` is left alone.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch

import torchfw as tf
from torchfw.exceptions import ConvergenceWarning
from torchfw.svm import _kernel_range
from torchfw.utils.jit import HAVE_NUMBA

SOLVERS = ("fw", "away", "pairwise", "swap", "swap2", "partan")


def _iris_pair():
    from sklearn.datasets import load_iris

    X, y = load_iris(return_X_y=True)
    return X[y > 0], y[y > 0]


def _model(**params):
    """An SVC with ``_gamma`` resolved, as ``_fit`` has it when the dtype is decided."""
    model = tf.SVC(**params)
    model._gamma = float(params.get("gamma", 1.0))
    return model


def test_rule_rbf_switches_only_beyond_C_of_about_2_6e5():
    X = torch.randn(30, 4)
    assert not _kernel_range.needs_float64(_model(kernel="rbf"), X, 2.0 ** 16)
    assert not _kernel_range.needs_float64(_model(kernel="rbf"), X, 2.5e5)
    assert _kernel_range.needs_float64(_model(kernel="rbf"), X, 3.0e5)


def test_rule_poly_on_raw_features_switches_and_scaled_does_not():
    X, _ = _iris_pair()
    raw = torch.from_numpy(X).float()
    scaled = torch.from_numpy((X - X.mean(0)) / X.std(0)).float()
    poly = dict(kernel="poly", degree=4, gamma=1.0)
    assert _kernel_range.needs_float64(_model(**poly), raw, 2.0)  # k_max ~ 128^4 = 2.7e8
    assert not _kernel_range.needs_float64(_model(**poly, coef0=0.0), scaled / 10, 2.0)
    assert _kernel_range.kernel_dtype(_model(**poly), raw, torch.full((100,), 2.0)) == \
        torch.float64
    assert _kernel_range.kernel_dtype(_model(**poly, dtype=torch.float32), raw, 2.0) == \
        torch.float32


def test_rule_never_switches_given_values_or_float32_overflow():
    X, _ = _iris_pair()
    raw = torch.from_numpy(X).float()
    assert not _kernel_range.needs_float64(_model(kernel="precomputed"), raw, 1e9)
    assert not _kernel_range.needs_float64(_model(kernel=lambda a, b: a @ b.T), raw, 1e9)
    huge = _model(kernel="poly", degree=40, gamma=1.0)  # 125^40 ~ 1e84: beyond float32
    assert not _kernel_range.needs_float64(huge, raw, 2.0)


@pytest.mark.skipif(not HAVE_NUMBA, reason="the compiled SVC path needs numba")
@pytest.mark.parametrize("degree", [3, 4, 6, 8])
def test_raw_iris_pair_polynomial_kernel_converges_for_every_solver(degree):
    from sklearn.svm import SVC as LibSVC

    X, y = _iris_pair()
    ref = LibSVC(kernel="poly", degree=degree, gamma=1.0, C=1.0).fit(X, y).score(X, y)
    for solver in SOLVERS:
        with warnings.catch_warnings():
            warnings.simplefilter("error", ConvergenceWarning)
            model = tf.SVC(kernel="poly", degree=degree, gamma=1.0, C=2.0, solver=solver,
                           random_state=0).fit(X, y)
        assert model.result_.converged, solver
        assert model.n_iter_ < 2000, solver
        assert model.support_vectors_.dtype in (np.float64, torch.float64), solver
        assert model.score(X, y) >= ref - 0.02, solver


def test_sparse_raw_features_switch_too():
    X, y = _iris_pair()
    Xs = torch.from_numpy(X).float().to_sparse_csr()
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        warnings.filterwarnings("ignore", message="Sparse CSR tensor support")
        model = tf.SVC(kernel="poly", degree=6, gamma=1.0, C=2.0, random_state=0).fit(Xs, y)
    assert model.result_.converged
    assert model.score(X, y) >= 0.98


def test_explicit_dtype_and_rbf_are_left_alone():
    X, y = _iris_pair()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        forced = tf.SVC(kernel="poly", degree=6, gamma=1.0, C=2.0, dtype=torch.float32,
                        max_iter=300, random_state=0).fit(X, y)
    assert _sv_dtype(forced) == torch.float32
    rbf = tf.SVC(C=2.0 ** 12, random_state=0).fit(X, y)
    assert _sv_dtype(rbf) == torch.float32


def test_kernel_overflowing_float32_keeps_its_range_error():
    X, y = _iris_pair()
    with pytest.raises(ValueError, match="overflow float32.*dtype=torch.float64"):
        tf.SVC(kernel="poly", degree=40, gamma=1.0).fit(X, y)


def _sv_dtype(model):
    sv = model._sv
    return sv.dtype if sv.layout == torch.strided else sv.values().dtype
