"""The compiled SVC path on several threads gives the one-thread fit bit for bit.

The matrix rows are computed in blocks on a thread pool and the binary problems solved on it
(torchfw.svm._matrix, torchfw.svm._fit). Whatever the number of threads, every row and every
problem is computed by the same code on the same data, and the results, warnings and their
order are collected in problem order: these tests force the pool on small problems (the work
thresholds set to 0, three threads whatever the machine's cores) and compare with one thread.
"""

from __future__ import annotations

import os
import subprocess
import sys
import warnings

import numpy as np
import pytest
import torch

from torchfw.svm import _dense as D
from torchfw.svm import _fit as _svc_fit
from torchfw.svm import _matrix as _svc_matrix
from torchfw.svm import _pairs as _svc_pairs
from torchfw.svm.kernels import SVMDualOperator, make_kernel
from torchfw.utils import threads as _threads

from _support import assert_same_fit, fit_recording, graded_classes

pytestmark = pytest.mark.skipif(not D.K.HAVE_NUMBA, reason="the compiled path needs numba")


@pytest.fixture
def threads(monkeypatch):
    """``threads(n)``: the compiled path may use ``n`` threads from any size of work on."""
    monkeypatch.setattr(_svc_matrix, "PARALLEL_ENTRIES", 0.0)
    monkeypatch.setattr(_svc_fit, "PARALLEL_WORK", 0.0)
    used = []

    def spy(fn, items, n, **kw):  # record the thread counts the fit asks for
        used.append(n)
        return _threads.parallel_map(fn, items, n, **kw)

    monkeypatch.setattr(_svc_matrix, "parallel_map", spy)
    monkeypatch.setattr(_svc_fit, "parallel_map", spy)
    monkeypatch.setattr(_svc_pairs, "parallel_map", spy)

    def set_threads(n):
        monkeypatch.setattr(_threads, "allowed_threads", lambda: n)
        used.clear()
        return used

    return set_threads


_fit = fit_recording


@pytest.mark.parametrize(("classes", "kw"), [
    (2, {}),
    (2, {"solver": "partan", "class_weight": "balanced"}),
    (5, {"multi_class": "ovr"}),
    (5, {"multi_class": "ovo", "solver": "swap2"}),
    (4, {"multi_class": "ovr", "solver": "away", "kernel": "poly", "dtype": torch.float64}),
])
def test_several_threads_fit_the_one_thread_fit_bit_for_bit(threads, classes, kw):
    X, y = graded_classes(300, classes)
    used = threads(1)
    one, _ = _fit(X, y, **kw)
    assert used and set(used) == {1}
    used = threads(3)
    three, _ = _fit(X, y, **kw)
    n_problems = 1 if classes == 2 else len(one.result_)
    # The matrix in three blocks; the problems (one-vs-one: the blocks of pairs, 4 of them)
    # on min(3, their number) threads.
    assert used[0] == 3 and (n_problems == 1 or used[1] == min(3, n_problems))
    assert_same_fit(one, three, "dense")


@pytest.mark.parametrize("solver", ["pairwise", "partan"])
def test_pairs_with_their_own_matrices_on_threads(threads, solver):
    # cache_size too small for the 300 x 300 matrix (0.34 MB) but holding two pairs' (4 classes:
    # pairs of ~150, 0.09 MB each): each pair's matrix, start and solve go to the pool, on at
    # most two threads (the matrices in flight fit cache_size together).
    X, y = graded_classes(300, 4, seed=2)
    kw = dict(multi_class="ovo", solver=solver, cache_size=0.2)
    threads(1)
    one, _ = _fit(X, y, **kw)
    used = threads(3)
    three, _ = _fit(X, y, **kw)
    assert used[0] == 2 and set(used[1:]) == {1}  # each pair's rows on its worker alone
    pair_bytes = [r.info["matrix_bytes"] for r in one.result_]
    assert set(pair_bytes) == {150 * 150 * 4}  # each pair its own matrix
    assert_same_fit(one, three, "dense")


def test_warm_start_and_warnings_in_problem_order(threads):
    X, y = graded_classes(240, 4, seed=1)
    kw = dict(multi_class="ovr", solver="fw", max_iter=15)  # every problem stops at max_iter
    fits = {}
    for n in (1, 3):
        threads(n)
        model, messages = _fit(X, y, warm_start=True, **kw)
        assert len(messages) == 4  # one ConvergenceWarning per problem
        alphas = [a.clone() for a in model._alphas]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model.set_params(max_iter=40).fit(X, y)  # from the previous dual vectors
        fits[n] = (model, messages, alphas)
    assert_same_fit(fits[1][0], fits[3][0], "dense")
    assert fits[1][1] == fits[3][1]  # the same warnings, in the same order
    assert all(torch.equal(a, b) for a, b in zip(fits[1][2], fits[3][2], strict=True))


@pytest.mark.parametrize("kernel", ["rbf", "linear", "poly", "sigmoid"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("sparse", [False, True])
def test_matrix_in_blocks_is_the_matrix(threads, kernel, dtype, sparse):
    rng = np.random.default_rng(3)
    X = rng.normal(size=(37, 6))
    X[rng.random(X.shape) < 0.3] = 0
    Xt = torch.tensor(X, dtype=dtype)
    if sparse:
        Xt = Xt.to_sparse_csr()
    op = SVMDualOperator(Xt, torch.ones(37, dtype=torch.float64),
                         make_kernel(kernel, 0.3, 3, 0.5), 1.0, dtype=dtype)
    threads(1)
    one = D.plain_kernel_matrix(op)
    used = threads(4)
    four = D.plain_kernel_matrix(op)
    assert used == [4]
    assert np.array_equal(one, four)


def test_thread_count_follows_torch_setting():
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        assert _threads.allowed_threads() == 1
        assert _threads.workers(10, 1e12, 1.0) == 1
        torch.set_num_threads(2)
        cores = min(2, len(os.sched_getaffinity(0)))
        with _threads.one_thread():  # as inside a fit: torch lowered, the user's setting read
            assert torch.get_num_threads() == 1
            with _threads.one_thread():
                assert _threads.allowed_threads() == cores
        assert _threads.workers(10, 1.0, 2.0) == 1  # small work: one thread
        assert _threads.workers(1, 1e12, 1.0) == 1  # one piece: one thread
    finally:
        torch.set_num_threads(before)


def test_omp_num_threads_one_gives_one_thread():
    code = ("import torch; from torchfw.utils.threads import allowed_threads, one_thread\n"
            "with one_thread():\n    print(allowed_threads())")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env={**os.environ, "OMP_NUM_THREADS": "1"}, check=True)
    assert out.stdout.strip() == "1"


def test_parallel_map_keeps_order_and_raises_the_first_error():
    assert _threads.parallel_map(lambda v: v * v, range(20), 3) == [v * v for v in range(20)]

    def fail(v):
        if v in (5, 9):
            raise ValueError(f"item {v}")
        return v

    with pytest.raises(ValueError, match="item 5"):
        _threads.parallel_map(fail, range(12), 3)


def test_parallel_map_caller_takes_the_items_of_a_helper_without_a_core():
    # A helper that does not run (here: held until the caller is nearly done) delays the map
    # by the one item it holds: the calling thread takes the others, in order.
    import threading

    caller = threading.current_thread()
    release = threading.Event()
    by_caller = []

    def item(v):
        if threading.current_thread() is caller:
            by_caller.append(v)
            if len(by_caller) >= 19:
                release.set()
        else:
            assert release.wait(10.0)
        return v * 10

    assert _threads.parallel_map(item, range(20), 2) == [v * 10 for v in range(20)]
    assert len(by_caller) >= 19 and by_caller == sorted(by_caller)
    # with a generator advanced ``ahead`` at a time, likewise
    release.clear()
    by_caller.clear()
    assert _threads.parallel_map(item, iter(range(20)), 2, ahead=3) == \
        [v * 10 for v in range(20)]
    assert len(by_caller) >= 19
