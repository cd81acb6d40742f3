"""A fit reads the largest squared row norm once, for its dtype and for its range check.

torchfw.svm._kernel_range.kernel_dtype (float64 where float32 rounds 1/C away) and
check_kernel_range (overflow) both bound kernel values with max_i ||x_i||^2; SVC.fit computes it
once (checked_norms) and gives it to both, which then decide as each does on its own.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from torchfw import SVC
from torchfw.svm import _kernel_range as R


@pytest.fixture
def counted(monkeypatch):
    calls = []
    norms = R.max_row_norm_sq
    monkeypatch.setattr(R, "max_row_norm_sq", lambda X: calls.append(X.dtype) or norms(X))
    return calls


def _raw(m=60, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(0.0, 100.0, size=(m, 4))
    return X, (X[:, 0] > 50.0).astype(int)


@pytest.mark.parametrize("kernel", ["poly", "linear", "rbf"])
def test_one_pass_over_the_rows(counted, kernel):
    X, y = _raw()
    SVC(kernel=kernel, degree=3, gamma=0.01, random_state=0).fit(X, y)
    assert len(counted) == 1


def test_the_decisions_are_those_of_separate_passes():
    X, y = _raw()
    model = SVC(kernel="poly", degree=4, gamma=0.1, random_state=0)
    model._gamma = 0.1
    Xt = torch.tensor(X, dtype=torch.float32)
    s = R.checked_norms(model, Xt)
    assert s == R.max_row_norm_sq(Xt) == R.max_row_norm_sq(Xt.double())
    assert R.kernel_dtype(model, Xt, 2.0, s) == R.kernel_dtype(model, Xt, 2.0) == torch.float64
    assert R.check_kernel_range(model, Xt.double(), torch.float64, s) == s
    # overflow: the same error with the number given
    model.degree = 40
    with pytest.raises(ValueError, match="overflow float32"):
        R.check_kernel_range(model, Xt, torch.float32, s)
    assert R.checked_norms(SVC(kernel="precomputed"), Xt) is None
