"""Platt scaling and pairwise coupling (torchfw.svm.calibration).

* the sigmoid fit is the minimizer of the smoothed log-loss (checked against SciPy's general
  minimizer on the same objective), finite on separable data;
* pairwise coupling recovers the class probabilities exactly from consistent pairwise ones
  ``r_ij = p_i / (p_i + p_j)``, and returns a distribution for noisy ones.
"""

from __future__ import annotations

import numpy as np
import pytest

from torchfw.svm.calibration import couple_pairwise, fit_sigmoid, normalize_ovr, sigmoid_proba


def _smoothed_loss(ab, d, pos):
    n_pos, n_neg = pos.sum(), (~pos).sum()
    t = np.where(pos, (n_pos + 1) / (n_pos + 2), 1 / (n_neg + 2))
    p = np.clip(1 / (1 + np.exp(ab[0] * d + ab[1])), 1e-300, 1 - 1e-16)
    return -np.sum(t * np.log(p) + (1 - t) * np.log1p(-p))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_sigmoid_fit_minimizes_the_smoothed_log_loss(seed):
    scipy_opt = pytest.importorskip("scipy.optimize")
    rng = np.random.default_rng(seed)
    d = rng.normal(size=300) * 2
    pos = rng.random(300) < 1 / (1 + np.exp(-1.7 * d + 0.3))
    A, B = fit_sigmoid(d, pos)
    ref = scipy_opt.minimize(_smoothed_loss, x0=[0.0, 0.0], args=(d, pos), method="BFGS",
                             options={"gtol": 1e-10})
    assert _smoothed_loss([A, B], d, pos) <= ref.fun + 1e-7
    assert A == pytest.approx(ref.x[0], abs=1e-3) and B == pytest.approx(ref.x[1], abs=1e-3)
    assert A < 0  # larger decision values: more likely positive


def test_sigmoid_fit_stays_finite_on_separable_data():
    d = np.concatenate([np.linspace(1, 3, 50), -np.linspace(1, 3, 50)])
    pos = d > 0
    A, B = fit_sigmoid(d, pos)
    assert np.isfinite(A) and np.isfinite(B) and A < 0
    p = sigmoid_proba(d, A, B)
    # the smoothed targets keep the probabilities off 0 and 1
    assert 0.5 < p[pos].min() and p[pos].max() < 1.0 and p[~pos].max() < 0.5


def test_sigmoid_fit_refuses_bad_input():
    with pytest.raises(ValueError, match="finite"):
        fit_sigmoid(np.array([0.0, np.nan]), np.array([True, False]))
    with pytest.raises(ValueError, match="one length"):
        fit_sigmoid(np.zeros(3), np.zeros(2, dtype=bool))


def test_pairwise_coupling_recovers_consistent_probabilities():
    rng = np.random.default_rng(0)
    p = rng.dirichlet(np.ones(4), size=20)
    r = p[:, :, None] / (p[:, :, None] + p[:, None, :])
    np.testing.assert_allclose(couple_pairwise(r), p, atol=1e-6)
    noisy = np.clip(r + rng.normal(scale=0.05, size=r.shape), 0.01, 0.99)
    noisy = np.triu(noisy, 1) + np.swapaxes(1 - np.triu(noisy, 1), 1, 2) * np.tril(
        np.ones((4, 4)), -1)
    q = couple_pairwise(noisy)
    assert np.all(q >= 0) and np.allclose(q.sum(axis=1), 1.0)
    assert np.mean(np.argmax(q, axis=1) == np.argmax(p, axis=1)) >= 0.8


def test_ovr_normalization_sums_to_one():
    q = normalize_ovr(np.array([[0.2, 0.2, 0.6], [0.0, 0.0, 0.0]]))
    np.testing.assert_allclose(q.sum(axis=1), 1.0)
    np.testing.assert_allclose(q[1], 1 / 3)
