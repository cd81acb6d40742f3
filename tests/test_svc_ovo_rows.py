"""One-vs-one pairs of ROWS_FROM examples or more read a cache of their own rows.

Such pairs' solves visit few of their rows, so each pair gets a private cache of rows computed
on first use (torchfw.svm._matrix.own_source) instead of a share of the matrix of all examples,
and the pairs run on threads, largest first. The rows are computed by the matrix's own row
code, so the fit is the one on the shared matrix bit for bit, whatever the threads.
"""

from __future__ import annotations

from functools import partial

import numpy as np
import pytest

from torchfw.svm import _dense as D
from torchfw.svm import _fit as _svc_fit
from torchfw.svm import _matrix as _svc_matrix
from torchfw.utils import threads as _threads

from _support import assert_same_fit, fit_recording, graded_classes

pytestmark = pytest.mark.skipif(not D.K.HAVE_NUMBA, reason="the compiled path needs numba")

ROWS = 60  # ROWS_FROM, lowered so that the test's pairs are "large" and quick to solve


_fit = partial(fit_recording, multi_class="ovo")


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
    X, y = graded_classes(240, 3, seed=1)  # pairs of 160 examples
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
    assert_same_fit(own, shared)
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
    assert_same_fit(one, two)
    assert one_messages == two_messages and len(one_messages) == 6
    assert [r.info.get("cached_rows") for r in two.result_] == \
        [230, 210, 180, 100, 70, None]  # the pair below ROWS: its own full matrix


def test_a_cache_share_smaller_than_the_pair(rows_from):
    # cache_size holding 40 rows of each of two pairs in flight: the caches evict, and the
    # fit is still the one with room for every row.
    X, y = graded_classes(240, 3, seed=2)
    rows_from(2)
    roomy, _ = _fit(X, y, solver="swap")
    small, _ = _fit(X, y, solver="swap", cache_size=2 * 40 * 160 * 4 / 2**20)
    assert {r.info["cached_rows"] for r in small.result_} == {40}
    assert_same_fit(small, roomy)
