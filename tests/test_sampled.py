"""The sampled storage (randomized FW of seeds 000/002): recursions, sampled gap, safeguard.

Small float64 problems where the full kernel matrix is affordable, so that every quantity the
engine keeps by recursion can be compared with its direct evaluation.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

import torchfw as tf
from torchfw.objectives import Quadratic
from torchfw.optimizers._kernel_rows import KernelRows
from torchfw.optimizers._engine import QuadraticEngine
from torchfw.optimizers._sampled import SampledStorage
from torchfw.optimizers._sampled_run import minimize_sampled
from torchfw.result import Status
from torchfw.svm.kernels import SVMDualOperator, make_kernel

VARIANTS = [tf.FrankWolfe, tf.AwayStepFrankWolfe, tf.PairwiseFrankWolfe, tf.SwapFrankWolfe,
            tf.PartanFrankWolfe]


def _problem(m=240, d=4, seed=0, C=2.0, csr=False):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(m, d))
    y = np.where(X[:, 0] + 0.5 * X[:, 1] + 0.7 * rng.normal(size=m) > 0, 1.0, -1.0)
    X, y = torch.tensor(X), torch.tensor(y)
    kernel = make_kernel("rbf", 0.3)
    Xs = X.to_sparse_csr() if csr else X
    storage = KernelRows(Xs, y, kernel, C, dtype=torch.float64)
    op = SVMDualOperator(X, y, kernel, C, dtype=torch.float64)
    full = op.block(torch.arange(m), torch.arange(m))
    return storage, op, full


def _engine(rows, support, weights, **options) -> QuadraticEngine:
    """The engine over a sampled storage (its slots read through the engine: ``eng.g``...)."""
    return QuadraticEngine(SampledStorage(rows, support, weights, **options))


def _start(m, k=4):
    return torch.arange(k), torch.full((k,), 1.0 / k, dtype=torch.float64)


@pytest.mark.parametrize("cls", VARIANTS)
def test_recursions_equal_direct_values_over_long_runs(cls):
    """g on the slots, g on every sample, f = p/2 and W by recursion match K~ alpha directly."""
    storage, _, full = _problem()
    eng = _engine(storage, *_start(240), sample_size=30,
                        rng=np.random.default_rng(1), keep_previous=cls.keeps_previous,
                        refresh_every=0)  # no re-synchronization: pure recursion
    opt = cls(tf.Simplex(), tf.ExactLineSearch())
    opt._ls = tf.ExactLineSearch()
    worst = 0.0
    for it in range(400):
        opt._step(eng)
        if it % 100 == 99:
            alpha = eng.weights()
            g = full @ alpha
            n = eng.n
            live = eng.ex[:n] >= 0
            scale = float(g.abs().max())
            worst = max(worst, abs(eng.p - float(alpha @ g)) / scale)
            worst = max(worst, float((eng.g[:n][live] - g[eng.ex[:n][live]]).abs().max())
                        / scale)
            idx = torch.from_numpy(np.random.default_rng(it).integers(0, 240, 50))
            worst = max(worst, float((eng.sampled_gradient(idx) - g[idx]).abs().max()) / scale)
            if cls.keeps_previous:
                prev = torch.zeros(240, dtype=torch.float64)
                prev[eng.ex[:n][live]] = eng.w_prev[:n][live]
                worst = max(worst, abs(eng.W - float(alpha @ full @ prev)) / scale)
                worst = max(worst, abs(eng.p_prev - float(prev @ full @ prev)) / scale)
    assert eng.k == 400
    assert worst < 1e-11, worst
    # A wrong recursion (e.g. a dropped cross term) is off by O(1) relative: the bound bites.


def test_sampled_gradient_csr_matches_dense():
    storage, _, full = _problem()
    storage_csr, _, _ = _problem(csr=True)
    eng = _engine(storage, *_start(240), rng=np.random.default_rng(0))
    eng_csr = _engine(storage_csr, *_start(240), rng=np.random.default_rng(0))
    idx = torch.arange(0, 240, 7)
    torch.testing.assert_close(eng.sampled_gradient(idx), eng_csr.sampled_gradient(idx))
    torch.testing.assert_close(eng.sampled_gradient(idx), (full @ eng.weights())[idx])


@pytest.mark.parametrize("csr", [False, True])
@pytest.mark.parametrize("tiles", [(256, 2**17), (3, 7), (5, 1)])
def test_kernel_rows_matvec_is_the_block_times_the_vector(monkeypatch, csr, tiles):
    """The tiled product equals the whole block's, over uneven tiles (remainders included)."""
    from torchfw.optimizers import _kernel_rows

    monkeypatch.setattr(_kernel_rows, "TILE_ROWS", tiles[0])
    monkeypatch.setattr(_kernel_rows, "TILE_VALUES", tiles[1])
    storage, op, full = _problem(m=61, csr=csr)
    rng = np.random.default_rng(3)
    ia = torch.from_numpy(rng.integers(0, 61, 17))
    ib = torch.arange(0, 61, 2)
    A, sq_a, y_a, _ = storage.rows(ia)
    B, sq_b, y_b, _ = storage.rows(ib)
    u = torch.from_numpy(rng.normal(size=ib.numel()))
    want = storage.block(A, sq_a, B, sq_b).double() @ u
    got = storage.matvec(A, sq_a, B, sq_b, u)
    assert got.dtype == torch.float64 and got.shape == (17,)
    torch.testing.assert_close(got, want, rtol=1e-13, atol=1e-13)
    # and it is the dual matrix's product once labels and the +1 are put back (no 1/C term:
    # the rows of ia and ib may meet, so compare with the kernel part of K~ only)
    kt = full[ia][:, ib] - (ia.unsqueeze(1) == ib.unsqueeze(0)).double() / 2.0
    torch.testing.assert_close(y_a.double() * (storage.matvec(A, sq_a, B, sq_b, y_b.double() * u)
                                               + (y_b.double() * u).sum()), kt @ u)
    empty = storage.matvec(A, sq_a, B[:0], sq_b[:0], u[:0])
    assert torch.equal(empty, torch.zeros(17, dtype=torch.float64))


@pytest.mark.parametrize("cls", VARIANTS)
def test_sampled_gap_never_exceeds_exact_gap(cls):
    storage, _, full = _problem(seed=3)
    eng = _engine(storage, *_start(240), sample_size=20, rng=np.random.default_rng(2),
                        keep_previous=cls.keeps_previous)
    opt = cls(tf.Simplex(), tf.ExactLineSearch())
    opt._ls = tf.ExactLineSearch()
    strict = 0
    for _ in range(150):
        opt._step(eng)
        g = full @ eng.weights()
        exact = float(eng.weights() @ g - g.min())
        assert eng.gap() <= exact + 1e-12
        strict += eng.gap() < exact - 1e-9
        assert abs(eng.exact_gap()[0] - exact) <= 1e-12
    assert strict > 50  # a sample of 20 of 240 usually misses the true argmin


@pytest.mark.parametrize("cls", VARIANTS)
def test_each_variant_reaches_the_exact_solvers_objective(cls):
    storage, op, _ = _problem(seed=5)
    ref = tf.PairwiseFrankWolfe(tf.Simplex(), tol=1e-12, max_iter=100_000).minimize(
        Quadratic(op), torch.full((240,), 1 / 240, dtype=torch.float64))
    res = minimize_sampled(cls(tf.Simplex(), tf.ExactLineSearch()), storage, *_start(240),
                           sample_size=60, tol=1e-6, max_iter=3000, random_state=0)
    sublinear = cls in (tf.FrankWolfe, tf.PartanFrankWolfe)  # O(1/k): may use the budget
    assert res.status == Status.CONVERGED or sublinear
    # Certified: the exact gap of the returned point bounds its suboptimality.
    assert res.info["exact_gap"] is not None and res.gap == res.info["exact_gap"]
    assert -1e-12 <= res.value - ref.value <= res.gap + 1e-12
    assert res.value - ref.value < (3e-5 if sublinear else 1e-6) * 1e3 * ref.value


class _ScriptedRng:
    """Feeds chosen samples: lets a test place the true argmin in or out of each sample."""

    def __init__(self, samples):
        self.samples = list(samples)
        self.calls = 0

    def integers(self, lo, hi, size):
        self.calls += 1
        return np.asarray(self.samples.pop(0) if self.samples else np.arange(size) % hi)


def _converged_state(storage, full):
    """A point whose gap is large only at one example ``bad`` (not in the first samples)."""
    res = minimize_sampled(tf.PairwiseFrankWolfe(tf.Simplex(), tf.ExactLineSearch()), storage,
                           *_start(240), sample_size=240, tol=1e-8, max_iter=3000,
                           random_state=0)
    return res


def test_safeguard_stops_only_after_two_confirming_samples():
    storage, _, full = _problem(seed=7)
    base = _converged_state(storage, full)
    support = torch.nonzero(base.x).squeeze(1)
    g = full @ base.x
    order = torch.argsort(g)  # order[0]: the true FW vertex
    best = int(order[0])
    good = [int(i) for i in order[-5:]]  # sampling only these misses every small gradient
    # Sample 1 (initial selection) and 2 (confirmation) pass, sample 3 contains the true argmin.
    samples = [good, good, [best] + good[:4]]
    rng = _ScriptedRng(samples)
    eng = _engine(storage, support, base.x[support], sample_size=5, rng=rng)
    exact = eng.exact_gap()[0]
    threshold = 0.5 * (exact + eng.gap())
    assert eng.gap() < threshold < exact
    opt = tf.FrankWolfe(tf.Simplex(), tf.ExactLineSearch())
    # Through the public loop: the third sample fails the test, so the run goes on.
    rng2 = _ScriptedRng(samples)
    res = minimize_sampled_with_rng(opt, storage, support, base.x[support], rng2, threshold)
    assert res.status == Status.MAX_ITER
    assert rng2.calls == 3 + 1  # 3 samples at the first iterate, then 1 after the step
    # With every sample missing the argmin, three passing samples stop the run.
    rng3 = _ScriptedRng([good, good, good])
    res = minimize_sampled_with_rng(opt, storage, support, base.x[support], rng3, threshold)
    assert res.status == Status.CONVERGED and res.n_iter == 0 and rng3.calls == 3
    assert res.info["exact_gap"] > threshold  # the premature stop the safeguard guards against


def minimize_sampled_with_rng(opt, storage, support, weights, rng, threshold):
    """``minimize_sampled`` with a scripted sampler (one step budget)."""
    import torchfw.optimizers._sampled_run as mod

    real = mod.np.random.default_rng
    mod.np.random.default_rng = lambda seed=None: rng
    try:
        return minimize_sampled(opt, storage, support, weights, sample_size=5, tol=threshold,
                                max_iter=1, certify=True)
    finally:
        mod.np.random.default_rng = real


def test_a_complete_sample_is_every_example_in_order_and_needs_no_confirmation():
    """sample_size >= m: no random draw, the sampled gap is the exact gap, nothing to confirm."""
    storage, _, full = _problem(seed=2)
    rng = _ScriptedRng([])
    eng = _engine(storage, *_start(240), sample_size=240, rng=rng)
    opt = tf.AwayStepFrankWolfe(tf.Simplex(), tf.ExactLineSearch())
    opt._ls = tf.ExactLineSearch()
    for _ in range(30):
        opt._step(eng)
        g = full @ eng.weights()
        assert eng.i_fw == int(torch.argmin(g))
        assert eng.gap() == pytest.approx(float(eng.weights() @ g - g.min()), abs=1e-12)
    assert rng.calls == 0 and eng.complete_sample
    res = minimize_sampled(tf.PairwiseFrankWolfe(tf.Simplex(), tf.ExactLineSearch()), storage,
                           *_start(240), sample_size=1000, tol=1e-8, max_iter=3000)
    assert res.status == Status.CONVERGED
    assert "confirmation_sample" not in res.steps
    assert res.info["samples"] == 1 + res.n_iter
    assert res.info["exact_gap"] == pytest.approx(res.info["sampled_gap"], abs=1e-13)


@pytest.mark.parametrize("cls, reused", [(tf.PairwiseFrankWolfe, True),
                                         (tf.AwayStepFrankWolfe, True),
                                         (tf.PartanFrankWolfe, False)])  # PARTAN: no drops
def test_restore_returns_to_the_snapshot_after_slots_were_reused(cls, reused):
    """A snapshot names its slots' examples; slots freed and reused since are rebuilt."""
    storage, _, full = _problem(seed=4)
    eng = _engine(storage, *_start(240, k=80), sample_size=30,
                        rng=np.random.default_rng(5), keep_previous=cls.keeps_previous)
    opt = cls(tf.Simplex(), tf.ExactLineSearch())
    opt._ls = tf.ExactLineSearch()
    for _ in range(10):
        opt._step(eng)
    snap = eng.snapshot()
    before = eng.weights()
    for _ in range(60):
        opt._step(eng)
    n0 = snap[0].numel()
    # (with the drops of these runs, some slot now holds another example)
    assert bool((eng.ex[:n0] != snap[0]).any()) == reused
    eng.restore(snap)
    torch.testing.assert_close(eng.weights(), before, rtol=0, atol=1e-15)

    def assert_exact(atol):
        alpha = eng.weights()
        g = full @ alpha
        live = eng.ex[:eng.n] >= 0
        torch.testing.assert_close(eng.g[:eng.n][live], g[eng.ex[:eng.n][live]], rtol=0,
                                   atol=atol)
        assert eng.p == pytest.approx(float(alpha @ g), abs=atol)
        if cls.keeps_previous:
            prev = torch.zeros(240, dtype=torch.float64)
            prev[eng.ex[:eng.n][live]] = eng.w_prev[:eng.n][live]
            assert eng.W == pytest.approx(float(prev @ g), abs=atol)

    assert_exact(1e-12)
    assert eng.gap() == pytest.approx(eng.p - float((full @ eng.weights())[eng.i_fw]),
                                      abs=1e-12)
    for _ in range(20):  # and the run goes on from there with exact recursions
        opt._step(eng)
    assert_exact(1e-11)


def test_the_stop_is_tested_every_iteration_and_recorded_every_check():
    storage, _, _ = _problem(seed=6)
    res = minimize_sampled(tf.SwapFrankWolfe(tf.Simplex(), tf.ExactLineSearch()), storage,
                           *_start(240), sample_size=240, tol=1e-7, max_iter=3000,
                           check_every=7)
    assert res.status == Status.CONVERGED
    assert res.history.iteration[:-1] == list(range(0, res.n_iter + 1, 7))
    assert res.history.iteration[-1] == res.n_iter
    times = res.history.time
    assert times == sorted(times) and times[0] > 0.0  # seconds since the call (set-up in)
    late = minimize_sampled(tf.FrankWolfe(tf.Simplex(), tf.ExactLineSearch()), storage,
                            *_start(240), time_limit=1e-9, random_state=0)
    assert late.status == Status.TIME_LIMIT and late.n_iter == 0
    assert late.info["exact_gap"] is None  # a clock: no certifying pass after it


def test_cost_of_an_iteration_does_not_touch_m():
    """The state is over slots: a run on 20x the data keeps the same number of slots."""
    storage, _, _ = _problem(m=240)
    eng = _engine(storage, *_start(240), sample_size=30, rng=np.random.default_rng(0))
    opt = tf.FrankWolfe(tf.Simplex(), tf.ExactLineSearch())
    opt._ls = tf.ExactLineSearch()
    for _ in range(50):
        opt._step(eng)
    assert eng.n <= 4 + 50 and eng.cap < 240
    assert eng.g.shape[0] == eng.cap


def test_bad_inputs():
    storage, _, _ = _problem()
    with pytest.raises(ValueError, match="sampled storage runs"):
        minimize_sampled(tf.FullyCorrectiveFrankWolfe(tf.Simplex()), storage, *_start(240))
    with pytest.raises(ValueError, match="no positive weight"):
        _engine(storage, torch.arange(2), torch.zeros(2, dtype=torch.float64))
    with pytest.raises(ValueError, match="y must have shape"):
        KernelRows(torch.ones(5, 2), torch.ones(4), make_kernel("rbf", 1.0), 1.0)


def test_svc_switches_to_the_sampled_storage():
    from torchfw.svm._plan import fit_planned

    X, y = _blobs(1500)
    assert tf.SVC(sample_size=50, random_state=0).fit(X, y).result_.info["storage"] == \
        "SampledStorage"
    assert tf.SVC(random_state=0, dense=False).fit(X, y).result_.info.get("storage") != \
        "SampledStorage"
    # The plan's threshold below the data's size: sampled (small data: no compiled solve).
    model = fit_planned(tf.SVC(random_state=0, dense=False), X, y, large_m=1000)
    assert model.result_.info["storage"] == "SampledStorage"
    assert model.score(X, y) > 0.9
    # fc and the streaming solvers have no sampled form
    for solver in ("fc", "sfw"):
        other = fit_planned(tf.SVC(solver=solver, random_state=0), X, y, large_m=1000)
        assert other.result_.info.get("storage") != "SampledStorage"


def test_svc_anytime_model_is_the_better_of_iterate_and_subset(monkeypatch):
    from torchfw.svm import _large as _svc_large

    from torchfw.svm._plan import fit_planned

    monkeypatch.setattr(_svc_large, "VALIDATION", 1000)
    X, y = _blobs(2500, noise=1.5)
    with pytest.warns(Warning):  # stopped on max_iter: a ConvergenceWarning
        model = fit_planned(tf.SVC(sample_size=50, max_iter=3, random_state=0), X, y,
                            warm_subset=300)
    info = model.result_.info
    val = info["validation"]
    assert val["examples"] == 1000
    assert info["model"] == ("subset" if val["subset"] > val["iterate"] else "iterate")
    # The returned dual is the chosen model's: its support is the subset's or the iterate's.
    assert model.result_.n_iter == 3
    assert (model.result_.x > 0).sum() == model.n_support_.sum()


def _blobs(m, noise=0.5, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(m, 5)).astype(np.float32)
    y = (X[:, 0] - X[:, 1] + noise * rng.normal(size=m) > 0).astype(int)
    return X, y
