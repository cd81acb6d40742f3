"""One-vs-one pairs of ROWS_FROM examples or more read a cache of their own rows.

Such pairs' solves visit few of their rows, so each pair gets a private cache of rows computed
on first use (torchfw.svm._matrix.own_source) instead of a share of the matrix of all examples,
and the pairs run on threads, largest first. The rows are computed by the matrix's own row
code, so the fit is the one on the shared matrix bit for bit, whatever the threads.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import torchfw as tf
from torchfw.svm import _dense as D
from torchfw.svm import _fit as _svc_fit
from torchfw.svm import _matrix as _svc_matrix
from torchfw.utils import threads as _threads

pytestmark = pytest.mark.skipif(not D.K.HAVE_NUMBA, reason="the compiled path needs numba")

ROWS = 60  # ROWS_FROM, lowered so that the test's pairs are "large" and quick to solve


def _data(m, classes, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(m, 5))
    score = X[:, 0] + 0.5 * X[:, 1] + 0.6 * rng.normal(size=m)
    y = np.digitize(score, np.quantile(score, np.linspace(0, 1, classes + 1)[1:-1]))
    return X, y


def _fit(X, y, **kw):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model = tf.SVC(random_state=0, multi_class="ovo", **kw).fit(X, y)
    return model, [str(w.message) for w in caught]


def _assert_identical(a, b):
    assert np.array_equal(a.problem_dual_coef_, b.problem_dual_coef_)
    assert np.array_equal(a.problem_intercept_, b.problem_intercept_)
    assert np.array_equal(np.asarray(a.n_iter_), np.asarray(b.n_iter_))
    assert np.array_equal(np.asarray(a.support_), np.asarray(b.support_))
    for x, z in zip(a.result_, b.result_, strict=True):
        assert x.value == z.value and x.gap == z.gap and x.best_gap == z.best_gap
        if x.info.get("batched pairs") or z.info.get("batched pairs"):
            # a pair solved in a compiled block keeps its last check only
            # (torchfw.svm._pairs.PairResults): the same one
            assert x.history.value[-1] == z.history.value[-1]
            assert x.history.gap[-1] == z.history.gap[-1]
            continue
        assert x.history.value == z.history.value and x.history.gap == z.history.gap
        assert x.history.steps == z.history.steps


@pytest.fixture
def rows_from(monkeypatch):
    """ROWS_FROM lowered to ROWS; ``threads(n)`` lets the fit use ``n`` threads from any work
    on and returns the thread counts it asks for."""
    monkeypatch.setattr(_svc_matrix, "ROWS_FROM", ROWS)
    monkeypatch.setattr(_svc_fit, "ROWS_FROM", ROWS)
    monkeypatch.setattr(_svc_fit, "PARALLEL_WORK", 0.0)
    used = []

    def spy(fn, items, n, **kw):
        used.append(n)
        return _threads.parallel_map(fn, items, n, **kw)

    monkeypatch.setattr(_svc_fit, "parallel_map", spy)

    def set_threads(n):
        monkeypatch.setattr(_threads, "allowed_threads", lambda: n)
        used.clear()
        return used

    return set_threads


def test_pairs_decide_by_their_median_size():
    assert not _svc_matrix.pairs_read_rows(None)
    assert not _svc_matrix.pairs_read_rows(np.array([], dtype=np.int64))
    big = _svc_matrix.ROWS_FROM
    assert _svc_matrix.pairs_read_rows(np.array([big, big + 5, 10]))
    assert not _svc_matrix.pairs_read_rows(np.array([big, big - 1, 10]))


@pytest.mark.parametrize("solver", ["swap", "pairwise", "partan"])
def test_large_pairs_read_their_own_rows_and_fit_as_on_the_shared_matrix(rows_from, solver,
                                                                          monkeypatch):
    X, y = _data(240, 3, seed=1)  # pairs of 160 examples
    kw = dict(solver=solver, tol=1e-4)
    rows_from(2)
    own, messages = _fit(X, y, **kw)
    for r in own.result_:
        # a cache with room for all of the pair's rows, of which the solve computed some
        assert r.info["cached_rows"] == 160
        assert 0 < r.info["misses"] <= 160 and r.info["matrix_bytes"] == 161 * 160 * 4
    # The same pairs on the matrix of all examples (pairs below ROWS_FROM: shared matrix).
    monkeypatch.setattr(_svc_matrix, "ROWS_FROM", 10**9)
    shared, shared_messages = _fit(X, y, **kw)
    assert all("cached_rows" not in r.info for r in shared.result_)
    assert all(r.info["matrix_bytes"] == 240 * 240 * 4 for r in shared.result_)
    _assert_identical(own, shared)
    assert messages == shared_messages
    assert np.array_equal(own.predict(X), shared.predict(X))


def test_pairs_largest_first_on_threads_give_the_one_thread_fit(rows_from):
    # Unequal classes (pairs of 50 ... 230): taken largest first on two threads, the results
    # (and their warnings) still come in problem order, the one-thread fit's bit for bit.
    rng = np.random.default_rng(4)
    X = rng.normal(size=(280, 4))
    y = np.repeat([0, 1, 2, 3], [170, 60, 40, 10])
    X[:, 0] += y
    kw = dict(solver="fw", max_iter=3)  # every pair stops at max_iter: a warning each
    rows_from(1)
    one, one_messages = _fit(X, y, **kw)
    used = rows_from(2)
    two, two_messages = _fit(X, y, **kw)
    assert used == [2]
    _assert_identical(one, two)
    assert one_messages == two_messages and len(one_messages) == 6
    assert [r.info.get("cached_rows") for r in two.result_] == \
        [230, 210, 180, 100, 70, None]  # the pair below ROWS: its own full matrix


def test_a_cache_share_smaller_than_the_pair(rows_from):
    # cache_size holding 40 rows of each of two pairs in flight: the caches evict, and the
    # fit is still the one with room for every row.
    X, y = _data(240, 3, seed=2)
    rows_from(2)
    roomy, _ = _fit(X, y, solver="swap")
    small, _ = _fit(X, y, solver="swap", cache_size=2 * 40 * 160 * 4 / 2**20)
    assert {r.info["cached_rows"] for r in small.result_} == {40}
    _assert_identical(small, roomy)
