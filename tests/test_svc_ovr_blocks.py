"""One-vs-rest problems solved in compiled blocks give the one-by-one fit bit for bit.

:func:`torchfw.svm._pairs.solve_in_blocks` solves the one-vs-rest problems of a fit on the
shared matrix, a block of problems per compiled call, with the one-by-one path's start and loop
on the same rows (torchfw.svm._fit). These tests compare the two: the coefficients, intercepts,
support, iterations, every problem's value, gap and last check; problems still running at the
end of their first chunk (left to the one-by-one path); the warnings, their text and order; and
when the blocks are not taken.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

import torchfw as tf
from torchfw.result import problem_results
from torchfw.svm import _dense as D
from torchfw.svm import _fit
from torchfw.svm import _pairs

from _support import assert_same_fit, fit_recording, graded_classes

pytestmark = pytest.mark.skipif(not D.K.HAVE_NUMBA, reason="the compiled path needs numba")


def _one_by_one(monkeypatch, X, y, **kw):
    """The fit with the blocks switched off (every problem through the one-by-one path)."""
    with monkeypatch.context() as patch:
        patch.setattr(_fit, "solve_in_blocks", lambda *args, **kwargs: None)
        return fit_recording(X, y, **kw)


@pytest.mark.parametrize("kw", [
    {},
    {"solver": "partan"},
    {"solver": "pairwise", "class_weight": {0: 2.0, 3: 0.5}},  # per-example C differ
    {"solver": "swap2", "C": 0.3},
    {"solver": "away", "kernel": "poly", "dtype": torch.float64},
    {"solver": "fw", "kernel": "sigmoid", "gamma": 0.05},
])
def test_blocks_give_the_one_by_one_fit(monkeypatch, kw):
    X, y = graded_classes(240, 5, seed=4)
    blocks, _ = fit_recording(X, y, multi_class="ovr", **kw)
    assert type(blocks.result_).__name__ == "BlockResults"
    results = problem_results(blocks.result_)
    assert all(r.info.get("compiled block") for r in results)
    alone, _ = _one_by_one(monkeypatch, X, y, multi_class="ovr", **kw)
    assert isinstance(alone.result_, list)
    assert_same_fit(blocks, alone, "dense")
    for a, b in zip(results, alone.result_, strict=True):  # the last check, the same bits
        assert a.history.iteration[-1] == b.history.iteration[-1] == a.n_iter
        assert torch.equal(a.x, b.x)
    Xt = X[::7] + 0.1
    assert np.array_equal(blocks.decision_function(Xt), alone.decision_function(Xt))


def test_problems_past_their_first_chunk_are_solved_one_by_one(monkeypatch):
    # A first chunk of 400 iterations: the problems still running there (4 of 6, which take
    # 480-610) are left to the one-by-one path, which solves them again from their start; the
    # fit is the same bits.
    from torchfw.optimizers import _rows

    X, y = graded_classes(300, 6, seed=1)
    monkeypatch.setattr(_rows, "FIRST_CHUNK", 400)
    blocks, _ = fit_recording(X, y, multi_class="ovr")
    left = set(blocks.result_.objects)
    assert 0 < len(left) < 6 and all(blocks.result_[k].n_iter > 400 for k in left)
    assert all(blocks.result_[k].n_iter <= 400 for k in set(range(6)) - left)
    alone, _ = _one_by_one(monkeypatch, X, y, multi_class="ovr")
    assert_same_fit(blocks, alone, "dense")


@pytest.mark.parametrize("max_iter", [25, 450])
def test_max_iter_warnings_per_problem_in_order(monkeypatch, max_iter):
    # max_iter 25: every problem stops on it in its block; 450 (a first chunk of 400): the
    # problems that need more are left to the one-by-one path and stop there. One warning per
    # problem that stopped, the one-by-one path's text, in problem order.
    from torchfw.optimizers import _rows

    monkeypatch.setattr(_rows, "FIRST_CHUNK", 400)
    X, y = graded_classes(300, 6, seed=1)
    kw = dict(multi_class="ovr", max_iter=max_iter)
    blocks, messages = fit_recording(X, y, **kw)
    alone, expected = _one_by_one(monkeypatch, X, y, **kw)
    assert len(expected) == (6 if max_iter == 25 else 4) and messages == expected
    assert_same_fit(blocks, alone, "dense")


def test_when_the_blocks_are_not_taken(monkeypatch):
    X, y = graded_classes(120, 3, seed=5)
    # one binary problem: its own solve, every check in its history
    binary = tf.SVC(random_state=0).fit(X, (y > 0).astype(int))
    assert len(binary.result_.history.gap) == len(binary.result_.history.iteration) > 1
    # a warm start: each problem from its previous solution, one by one
    model = tf.SVC(multi_class="ovr", warm_start=True, random_state=0).fit(X, y)
    assert type(model.result_).__name__ == "BlockResults"
    model.fit(X, y)
    assert isinstance(model.result_, list)
    # over OVR_BLOCKS_MAX examples
    monkeypatch.setattr(_pairs, "OVR_BLOCKS_MAX", 100)
    assert isinstance(tf.SVC(multi_class="ovr").fit(X, y).result_, list)


def test_warm_start_from_blocks_reads_each_problems_vector(monkeypatch):
    # The dual vectors kept for a warm start are each problem's over all examples.
    X, y = graded_classes(150, 4, seed=6)
    model = tf.SVC(multi_class="ovr", warm_start=True, random_state=0).fit(X, y)
    alphas = model._alphas
    assert len(alphas) == 4 and all(a.shape == (150,) for a in alphas)
    A = np.stack([a.numpy() for a in alphas])
    assert np.allclose(A.sum(1), 1.0)  # each on the simplex
    model.set_params(C=3.0).fit(X, y)
    alone = tf.SVC(multi_class="ovr", warm_start=True, random_state=0)
    with monkeypatch.context() as patch:
        patch.setattr(_fit, "solve_in_blocks", lambda *args, **kwargs: None)
        alone.fit(X, y)
    alone.set_params(C=3.0).fit(X, y)
    assert np.array_equal(model.problem_dual_coef_, alone.problem_dual_coef_)
