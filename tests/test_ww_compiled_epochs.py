"""The Weston-Watkins epochs run compiled (``WWDualProblem.run_epochs``) are the epochs run one
by one (``BlockCoordinateDescent``'s own loop calling ``sweep``), bit for bit: same orders from
the same generator, same shrinking and screening decisions, same checks, same stopping epoch.
And the pieces that make it so: NumPy's pairwise sum, NumPy's sort, ``Generator.shuffle``."""

from __future__ import annotations

import lzma

import numpy as np
import pytest
from _support import unscaled

from torchfw.optimizers import bcd as bcd_module
from torchfw.optimizers.bcd import BlockCoordinateDescent
from torchfw.utils.bitgen import handle, shuffle_prefix
from torchfw.ww import _policy
from torchfw.ww._sweep import skip_smallest
from torchfw.ww.estimator import WWDualProblem, _as_csr, ww_problem

pytestmark = pytest.mark.skipif(handle(np.random.default_rng(0)) is None,
                                reason="the compiled epochs need numba")


@pytest.fixture(scope="module")
def dna():
    from conftest import data_path
    from sklearn.datasets import load_svmlight_file

    with lzma.open(data_path("dna.scale.xz")) as f:
        X, y = load_svmlight_file(f)
    return X, y


def _fit(problem, *, compiled, **kwargs):
    if not compiled:
        problem.run_epochs = lambda *args: None  # BCD's loop, one sweep call per epoch
    return BlockCoordinateDescent(**kwargs).minimize(problem)


def _same_run(a, b, ra, rb):
    assert ra.n_iter == rb.n_iter and ra.status == rb.status
    assert list(ra.history.iteration) == list(rb.history.iteration)
    assert np.array_equal(np.asarray(ra.history.gap), np.asarray(rb.history.gap))
    assert list(ra.history.steps) == list(rb.history.steps)
    for name in ("W", "beta", "bsum", "n_act", "skip", "gblk"):
        assert np.array_equal(getattr(a, name), getattr(b, name)), name
    assert np.array_equal(a._pi, b._pi) and np.array_equal(a._pf, b._pf)


@pytest.mark.parametrize("shrinking", ["heuristic", True, False])
@pytest.mark.parametrize("check_every", ["auto", 1, 3])
def test_compiled_epochs_are_the_epochs_one_by_one_on_dna(dna, shrinking, check_every):
    X, y = dna
    runs = []
    for compiled in (True, False):
        prob = ww_problem(X, y, 2.0 ** -4, shrinking=shrinking).problem
        res = _fit(prob, compiled=compiled, rtol=0.0009, random_state=3, max_iter=400,
                   check_every=check_every)
        runs.append((prob, res))
    (a, ra), (b, rb) = runs
    assert ra.converged
    _same_run(a, b, ra, rb)


@pytest.mark.parametrize("shrinking, C", [("heuristic", 1.0), (True, 2.0 ** -10)])
def test_compiled_epochs_follow_slow_problems_and_screening_phases(shrinking, C):
    """Unscaled data exercise the rarer branches: a capped shrunk phase judged slow (every
    later sweep full), screening phases that stop and retry."""
    X, y = unscaled(n=500, seed=5)  # heuristic shrinking judges it slow; screening starts and stops
    runs = []
    for compiled in (True, False):
        prob = WWDualProblem(_as_csr(X.astype(np.float64)), y, 10, C, shrinking=shrinking)
        res = _fit(prob, compiled=compiled, rtol=0.0009, random_state=2, max_iter=3000)
        runs.append((prob, res))
    (a, ra), (b, rb) = runs
    _same_run(a, b, ra, rb)
    if shrinking == "heuristic":
        assert a._slow  # the branch this case is here for
    else:
        assert a.screened > 0


def test_chunks_of_epochs_do_not_change_the_run(dna, monkeypatch):
    """Between two compiled calls the interpreter runs (a Ctrl-C stops the fit there); where
    the calls end changes nothing: one epoch per call gives the run of calls as long as
    a check allows."""
    X, y = dna
    runs = []
    for seconds in (0.0, 1e9):
        monkeypatch.setattr(bcd_module, "CHUNK_SECONDS", seconds)
        prob = ww_problem(X, y, 2.0 ** -4, shrinking="heuristic").problem
        runs.append((prob, _fit(prob, compiled=True, rtol=0.0009, random_state=1,
                                max_iter=400)))
    (a, ra), (b, rb) = runs
    _same_run(a, b, ra, rb)


def test_the_generator_is_left_as_the_python_loop_leaves_it(dna):
    """The compiled loop draws from the caller's generator itself: after the run, the next
    draws are those the per-epoch loop's generator gives."""
    X, y = dna
    states = []
    for compiled in (True, False):
        prob = ww_problem(X, y, 2.0 ** -4, shrinking="heuristic").problem
        rng = np.random.default_rng(11)
        solver = BlockCoordinateDescent(rtol=0.0009, max_iter=400, random_state=rng)
        if not compiled:
            prob.run_epochs = lambda *args: None
        solver.minimize(prob)
        states.append(rng.integers(0, 2**62, size=4))
    assert np.array_equal(states[0], states[1])


@pytest.mark.parametrize("n", [0, 1, 2, 3, 9, 1000, 70001])
def test_shuffle_prefix_is_generator_shuffle(n):
    mine, ref = np.random.default_rng(n), np.random.default_rng(n)
    h = handle(mine)
    for _ in range(3):
        a = np.arange(n + 5)
        shuffle_prefix(*h, a, n)
        assert np.array_equal(a[:n], ref.permutation(n)) and np.array_equal(a[n:],
                                                                                np.arange(n, n + 5))
        b = np.arange(100, 100 + n // 2)
        c = b.copy()
        shuffle_prefix(*h, b, b.shape[0])
        ref.shuffle(c)
        assert np.array_equal(b, c)
    assert mine.random() == ref.random()


def test_pairwise_sum_is_numpy_sum_bit_for_bit():
    rng = np.random.default_rng(0)
    running_differs = False
    for n in [*range(0, 300, 7), 1000, 2000, 4435, 6412, 8193, 15000, 100003]:
        a = rng.standard_normal(n) * 10.0 ** rng.integers(-6, 6, n)
        assert _policy.pairwise_sum(a) == a.sum(), n
        running = 0.0
        for v in a.tolist():
            running += v
        running_differs |= running != a.sum()
    assert running_differs  # a plain running sum would not pass


def test_radix_sort_is_numpy_sort():
    rng = np.random.default_rng(1)
    for n in [1, 2, 7, 300, 11000]:
        g = rng.exponential(size=n) * 10.0 ** rng.integers(-9, 4, n)
        g[: n // 4] = g[n // 2]  # ties
        assert np.array_equal(_policy._sorted(g), np.sort(g))
    g = np.full(50, 0.5)  # every digit shared: every pass skipped
    assert np.array_equal(_policy._sorted(g), g)


def test_compiled_skip_choice_is_the_numpy_policy():
    rng = np.random.default_rng(2)
    for trial in range(40):
        n = int(rng.integers(1, 400))
        shares = rng.exponential(size=n) * (rng.random(n) < 0.6)
        shares[rng.random(n) < 0.2] = shares[0]  # ties at the boundary
        visited = rng.random(n) < 0.9
        fraction = float(rng.choice([0.0, 0.05, 0.3, 1.0]))
        want = np.zeros(n, dtype=np.int64)
        got = np.zeros(n, dtype=np.int64)
        skip_smallest(shares, visited, fraction, want)
        _policy._skip_smallest(shares, visited, fraction, got)
        assert np.array_equal(got, want), trial
