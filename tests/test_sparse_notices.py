"""Sparse inputs reach torch's sparse constructors without torch's notices reaching the user."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from torchfw import Lasso
from torchfw.datasets import from_scipy_csr

sp = pytest.importorskip("scipy.sparse")


@pytest.mark.parametrize("as_torch", [False, True], ids=["scipy", "torch-csr"])
def test_sparse_lasso_with_working_sets_warns_nothing(as_torch):
    # The working-set rounds restrict the Gram operator to a few columns by building a CSC
    # tensor; torch warned "Sparse invariant checks are implicitly disabled" from there.
    A = sp.random(80, 300, density=0.05, random_state=0, format="csr")
    y = np.random.default_rng(0).standard_normal(80)
    X = from_scipy_csr(A) if as_torch else A
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        # Frank-Wolfe's working sets build the restricted Gram operator (coordinate descent,
        # the default solver, has working sets of its own).
        model = Lasso(alpha=0.05, working_set=True, solver="pairwise").fit(X, y)
        model.predict(X)
    assert model.working_set_ is not None  # the path that used to warn did run
    assert [str(w.message) for w in caught] == []
