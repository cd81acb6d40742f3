"""The tol="auto" probe of a mid-sized fit: first against FIRST_COLUMNS examples.

Above 2 x FIRST_COLUMNS examples, with ``enough`` the probe (torchfw.svm._isolation.
neighbour_weights) compares its rows first with FIRST_COLUMNS evenly spaced examples and returns
those lower bounds only where they already show the tol of the full medians; its compiled pass
on dense examples finds the full computation's nearest-neighbour median to the bit.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from torchfw.svm import _isolation as I
from torchfw.svm._plan import TOL, enough_neighbours, stop_tol
from torchfw.svm.kernels import make_kernel


def _data(m, d=20, seed=0):
    rng = np.random.default_rng(seed)
    return torch.tensor(rng.normal(size=(m, d)), dtype=torch.float32)


def test_a_mid_sized_probe_answers_from_the_first_sample(monkeypatch):
    from sklearn.datasets import make_classification

    m = 1400
    assert m > 2 * I.FIRST_COLUMNS and m <= 2 * I.SAMPLE_COLUMNS
    # clustered examples (svm_small.py's generated sets, standardized), whose neighbours are
    # near: independent normal features in 20 dimensions are all about equally far apart
    Xn, _ = make_classification(n_samples=m, n_features=20, n_informative=10,
                                n_clusters_per_class=1, random_state=0)
    X = torch.tensor((Xn - Xn.mean(0)) / Xn.std(0), dtype=torch.float32)
    enough = enough_neighbours(m)
    kernel = make_kernel("rbf", 1.0 / 20)  # gamma="scale" on standard features
    widths = []
    medians = I._medians
    monkeypatch.setattr(I, "_medians", lambda k, X, rows, columns, *a: widths.append(
        None if columns is None else columns.shape[0]) or medians(k, X, rows, columns, *a))
    bounds = I.neighbour_weights(kernel, X, None, enough)
    assert widths == [I.FIRST_COLUMNS]  # the sample answered: no block over every example
    full = I.neighbour_weights(kernel, X)
    assert bounds[0] <= full[0] and bounds[1] <= full[1]
    assert bounds[0] >= I.ISOLATED_K and bounds[1] >= enough
    tol = stop_tol("auto", m, False, full[0] < I.ISOLATED_K, full[1])
    assert stop_tol("auto", m, False, bounds[0] < I.ISOLATED_K, bounds[1]) == tol == TOL


@pytest.mark.parametrize("gamma", [0.5, 20.0])
def test_where_the_sample_cannot_show_it_the_full_medians_come_back(gamma):
    # a Gaussian kernel that isolates the examples: the sample's bounds say nothing, and the
    # answer is the one without `enough`, to the bit
    m = 1400
    X = _data(m, seed=1)
    kernel = make_kernel("rbf", gamma)
    enough = enough_neighbours(m)
    got = I.neighbour_weights(kernel, X, None, enough)
    assert got == I.neighbour_weights(kernel, X)
    assert got[0] < I.ISOLATED_K


@pytest.mark.parametrize("m", [300, 1400])
def test_the_compiled_pass_finds_the_tensor_nearest_median_bit_for_bit(m):
    X = _data(m, d=7, seed=2)
    rows = I._probe_rows(m)
    kernel = make_kernel("rbf", 0.2)
    exact = I._medians(kernel, X, rows, None)
    fast = I._medians(kernel, X, rows, None, 1.0)
    assert fast[0] == exact[0]
    assert fast[1] <= exact[1] * (1 + 1e-6) and fast[1] >= 1.0
