"""The one compiled quadratic loop against the host engine: every variant on every row source.

:mod:`torchfw.optimizers._compiled_loop` runs FW, away, pairwise, SWAP, SWAP-2o and PARTAN with
the checks, the stopping test and the corrective step in compiled code, reading vertex gradients
from a row source: a dense matrix's rows (the dense engine's ``H``, with a linear term and a
constant), the SVM's signed kernel rows from the whole matrix, or from a cache of rows
(:mod:`torchfw.svm._dense`). Each run here is paused at every check (the loop's ``pause_at``,
as a chunked SVC fit pauses) so that the iterate is compared there too: the check's iteration,
value, gap and weights, and at the end the step counts, must be the host engine's
(:class:`~torchfw.optimizers._engine.QuadraticEngine`, the variant's Python step) to rounding.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

import torchfw as tf
from torchfw.optimizers import _compiled_loop as L
from torchfw.optimizers._engine import QuadraticEngine
from torchfw.optimizers._stopping import StoppingRule
from torchfw.utils.jit import HAVE_NUMBA
from torchfw.utils.scalars import HOST

needs_numba = pytest.mark.skipif(not HAVE_NUMBA, reason="the compiled loop needs numba")
F64 = torch.float64
CHECK_EVERY = 10
MAX_ITER = 300
TOL = 1e-9
RTOL = 1e-10  # values, relative
ATOL = 1e-10  # gaps and weights

#: Loop variant -> the host optimizer it must step as.
HOST_VARIANTS = {
    "fw": lambda lmo, **kw: tf.FrankWolfe(lmo, **kw),
    "away": lambda lmo, **kw: tf.AwayStepFrankWolfe(lmo, **kw),
    "pairwise": lambda lmo, **kw: tf.PairwiseFrankWolfe(lmo, **kw),
    "swap": lambda lmo, **kw: tf.SwapFrankWolfe(lmo, **kw),
    "swap2": lambda lmo, **kw: tf.SwapFrankWolfe(lmo, second_order=True, **kw),
    "partan": lambda lmo, **kw: tf.PartanFrankWolfe(lmo, **kw),
}
SOURCES = ("matrix", "svm-rows", "svm-cache")


class _Recording(StoppingRule):
    """The optimizer's rule, recording the weights at every check it decides on."""

    def __init__(self, **kw):
        super().__init__(**kw)
        self.weights: list[np.ndarray] = []

    def __call__(self, eng, k, value, gap, elapsed, steps):
        self.weights.append(eng.weights().detach().numpy().copy())
        return super().__call__(eng, k, value, gap, elapsed, steps)


def _svm_data():
    # At C = 1e4 on these 80 examples the plain steps stall and the corrective step fires
    # (test_the_corrective_step_is_exercised).
    from sklearn.datasets import make_classification

    X, y = make_classification(n_samples=80, n_features=5, n_informative=4, n_redundant=0,
                               n_clusters_per_class=1, random_state=5)
    return torch.tensor(X, dtype=F64), torch.tensor(np.where(y > 0, 1.0, -1.0))


def _problem(source):
    """``(objective, lmo, x0, loop source, bufs, diag, ct, has_ct, constant)``."""
    from torchfw.optimizers._dense import vertex_gradient_rows

    if source == "matrix":
        gen = torch.Generator().manual_seed(0)
        A = torch.randn(50, 30, generator=gen, dtype=F64)
        c = torch.randn(30, generator=gen, dtype=F64)
        objective = tf.Quadratic(A.T @ A / 50, c, constant=0.25)
        lmo = tf.L1Ball(radius=2.0)
        x0 = torch.zeros(30, dtype=F64)
        x0[::3] = 2.0 / 10 * torch.tensor([1.0, -1.0] * 5, dtype=F64)
        H = vertex_gradient_rows(objective, lmo, F64).numpy()
        return objective, lmo, x0, H, np.empty((2, 0)), None, True, 0.25
    from torchfw.svm import _dense as D
    from torchfw.svm._matrix import cached_source
    from torchfw.svm.kernels import SVMDualOperator, make_kernel

    X, y = _svm_data()
    m = X.shape[0]
    scale = 1.0 / (X.shape[1] * float(X.var()))  # SVC's gamma="scale"
    kernel = make_kernel("rbf", scale) if source == "svm-rows" else \
        make_kernel("poly", 0.5, degree=2, coef0=1.0)
    C = 1e4
    objective = tf.Quadratic(SVMDualOperator(X, y, kernel, C, dtype=F64))
    plain = SVMDualOperator(X, torch.ones(m, dtype=F64), kernel, C, dtype=F64)
    src = D.full_source(D.plain_kernel_matrix(plain)) if source == "svm-rows" else \
        cached_source(plain, 12)  # far fewer rows than atoms: misses, evictions
    rows = D.row_source(src, np.zeros(0, dtype=np.int64), y.numpy(), plain._inv_c_np)
    x0 = torch.zeros(m, dtype=F64)
    x0[::8] = 1.0
    x0 /= x0.sum()
    diag = plain.diagonal().to(F64).numpy()
    return objective, tf.Simplex(), x0, rows, np.empty((2, m)), diag, False, 0.0


def _host_run(variant, source, corrective, rtol=0.0):
    objective, lmo, x0, *_ = _problem(source)
    opt = HOST_VARIANTS[variant](lmo, execution="host", check_every=CHECK_EVERY,
                                 corrective=corrective)
    rule = _Recording(tol=TOL, rtol=rtol, max_iter=MAX_ITER)
    result = opt.minimize(objective, x0, stopping=rule)
    h = result.history
    return h.iteration, h.value, h.gap, rule.weights, h.steps[-1]


def _loop_run(variant, source, corrective, code=None, rtol=0.0):
    """The loop paused at every check: ``(iterations, values, gaps, weights, steps)``."""
    objective, lmo, x0, src, bufs, diag, has_ct, constant = _problem(source)
    cls = HOST_VARIANTS[variant](lmo)
    engine = QuadraticEngine(objective, lmo, lmo.to_weights(x0), ops=HOST,
                             keep_previous=cls.keeps_previous, pair_columns=cls.uses_pairs)
    start = L.LoopState.of_engine(engine)
    diag = engine._diag_np if diag is None else diag
    ct = engine._ct_np if has_ct else diag
    code = L.VARIANTS[variant] if code is None else code
    counts = np.zeros(len(L.COUNTERS), dtype=np.int64)
    iterations, values, gaps, weights = [], [], [], []
    done = 0
    while True:
        hist = np.empty((8, 3))
        hist_counts = np.empty((8, len(L.COUNTERS)), dtype=np.int64)
        k, status, n_hist = L.run_loop(
            code, src, bufs, diag, ct, has_ct, constant, start.w, start.s, start.wp, start.sp,
            start.support, start.state, MAX_ITER - done, TOL, rtol, CHECK_EVERY, L.ZERO_TOL,
            counts, hist, hist_counts, corrective, 1)
        first = 1 if iterations else 0  # a resumed call repeats the last call's last check
        for row in range(first, n_hist):
            iterations.append(int(hist[row, 0]) + done)
            values.append(hist[row, 1])
            gaps.append(hist[row, 2])
        # One check per call after the first (the pause comes at the first check past 0).
        assert n_hist - first == (2 if not iterations[:-2] else 1)
        if not weights:
            weights.append(None)  # the start's weights: the engine's, before the first call
        weights.append(start.w.copy())
        done += int(k)
        if status != L.PAUSED:
            break
    weights[0] = lmo.to_weights(x0).numpy()
    steps = {name: int(c) for name, c in zip(L.COUNTERS, counts, strict=True) if c}
    return iterations, values, gaps, weights, steps


def _storage_run(variant, source):
    """The variant's Python steps (the engine's moves) on the row-source storage of the
    problem, started as the loop is: ``(iterations, values, gaps, weights, steps)``."""
    from torchfw.optimizers._rows import RowStorage

    objective, lmo, x0, src, bufs, diag, has_ct, constant = _problem(source)
    opt = HOST_VARIANTS[variant](lmo, execution="host", check_every=CHECK_EVERY)
    opt._ls = tf.ExactLineSearch()
    host = QuadraticEngine(objective, lmo, lmo.to_weights(x0), ops=HOST,
                           keep_previous=opt.keeps_previous, pair_columns=opt.uses_pairs)
    storage = RowStorage(src, host._diag_np if diag is None else diag,
                         L.LoopState.of_engine(host), ct=host._ct_np if has_ct else None,
                         constant=constant, row_dtype=None if bufs.shape[1] == 0 else bufs.dtype)
    rule = _Recording(tol=TOL, rtol=0.0, max_iter=MAX_ITER)
    result = opt._run(QuadraticEngine(storage), "host", rule=rule)
    assert result.info["storage"] == "RowStorage"
    h = result.history
    return h.iteration, h.value, h.gap, rule.weights, h.steps[-1]


def _nonzero(steps):
    return {k: v for k, v in steps.items() if v}


def _compare(ref, got, label):
    it_r, val_r, gap_r, w_r, steps_r = ref
    it_g, val_g, gap_g, w_g, steps_g = got
    assert it_g == list(it_r), label
    np.testing.assert_allclose(val_g, val_r, rtol=RTOL, atol=ATOL, err_msg=label)
    np.testing.assert_allclose(gap_g, gap_r, rtol=0, atol=ATOL, err_msg=label)
    assert len(w_g) == len(w_r), label
    for check, (a, b) in enumerate(zip(w_g, w_r, strict=True)):
        np.testing.assert_allclose(a, b, rtol=0, atol=ATOL, err_msg=f"{label}, check {check}")
    assert _nonzero(steps_g) == _nonzero(steps_r), label


@needs_numba
@pytest.mark.parametrize("source", SOURCES)
@pytest.mark.parametrize("variant", list(HOST_VARIANTS))
def test_the_loop_takes_the_host_steps(variant, source):
    corrective = source != "matrix"  # the SVM duals at C = 1e4 stall: the step fires there
    ref = _host_run(variant, source, corrective)
    assert len(ref[0]) >= 4, "too short a run to compare"
    _compare(ref, _loop_run(variant, source, corrective), f"{variant} on {source}")


@needs_numba
@pytest.mark.parametrize("source", SOURCES)
@pytest.mark.parametrize("variant", list(HOST_VARIANTS))
def test_the_row_storage_answers_the_protocol_as_the_host_storage(variant, source):
    # The engine's Python moves over the row-source storage (its entries, rows, selections,
    # SWAP-2o partner, PARTAN bounds and updates) step as over the host storage; the compiled
    # solve of the same storage is the loop's, compared above and in tests/test_svc_dense.py.
    ref = _host_run(variant, source, False)
    assert len(ref[0]) >= 4, "too short a run to compare"
    _compare(ref, _storage_run(variant, source), f"{variant} on the {source} storage")


@needs_numba
def test_the_row_storage_solve_is_the_loop_and_restores_exactly():
    from torchfw.optimizers._rows import RowStorage

    objective, lmo, x0, src, bufs, diag, has_ct, constant = _problem("svm-rows")
    host = QuadraticEngine(objective, lmo, lmo.to_weights(x0), ops=HOST)
    start = L.LoopState.of_engine(host)
    expected = _loop_run("away", "svm-rows", True)
    engine = QuadraticEngine(RowStorage(src, diag, start, row_dtype=bufs.dtype))
    snap = engine.snapshot()
    w0 = start.w.copy()
    run = engine.solve(
        L.AWAY, StoppingRule(tol=TOL, rtol=0.0, max_iter=MAX_ITER), check_every=CHECK_EVERY)
    n_iter, status, hist, counts = run
    assert n_iter == engine.iteration() == expected[0][-1]
    assert hist[:, 0].tolist() == expected[0] and hist[:, 2].tolist() == expected[2]
    assert hist.base is None  # the checks alone, not the buffers sized for the budget
    # The run's Result: the engine's final value, gap and weights, the checks as its history.
    result = run.result(start, 0.5, {"engine": "compiled"})
    assert (result.n_iter, result.value, result.gap) == (n_iter, engine.value(), engine.gap())
    assert result.converged == (status == L.CONVERGED)
    assert result.history.iteration == expected[0] and result.history.gap == expected[2]
    assert result.history.steps[-1] == expected[4] and result.history.time[-1] == 0.5
    assert result.best_gap == min(expected[2])
    np.testing.assert_array_equal(result.weights.numpy(), start.w)
    with pytest.raises(ValueError, match="non-finite"):
        run._replace(status=L.NONFINITE).result(start, 0.5, {})
    np.testing.assert_array_equal(start.w, expected[3][-1])
    assert engine.step_counts() == expected[4]
    assert engine.gap() == start.gap() and engine.value() == start.value()
    engine.restore(snap)  # back to the start, exactly
    np.testing.assert_array_equal(engine.weights().numpy(), w0)
    assert engine.iteration() == n_iter  # the counter is the run's, not the iterate's
    # The scores recomputed from the rows of the atoms with weight are the start's to rounding.
    s0, gap0 = start.s.copy(), engine.gap()
    engine.refresh()
    np.testing.assert_allclose(start.s, s0, rtol=1e-12, atol=1e-12)
    assert engine.gap() == pytest.approx(gap0, rel=1e-9)
    with pytest.raises(ValueError, match="time_limit"):
        engine.solve(L.AWAY, StoppingRule(tol=TOL, rtol=0.0, max_iter=5, time_limit=1.0),
                     check_every=CHECK_EVERY)
    # A storage without a compiled whole solve is driven by an optimizer's run loop instead.
    with pytest.raises(TypeError, match="HostStorage runs no whole compiled solve"):
        host.solve(L.AWAY, StoppingRule(tol=TOL, rtol=0.0, max_iter=5),
                   check_every=CHECK_EVERY)


def test_every_caller_of_the_loop_sizes_its_checks_alike():
    # The history rows of a call: a check per block, one per corrective window, the first
    # and the last (run_chunked and SVC's compiled blocks both size theirs by it).
    from torchfw.optimizers import _face
    from torchfw.optimizers._rows import first_chunk, first_pause

    assert L.checks_for(1000, 10) == 100 + 1000 // _face.MIN_WINDOW + 3
    assert L.checks_for(10**12, 1) == L.MAX_CHECKS
    assert L.first_pause(2000, 7) == 1995 and L.first_pause(3, 10) == 10
    assert first_pause(5000, 10) == first_chunk(5000) // 10 * 10
    if L.checks_for_compiled is not None:
        assert L.checks_for_compiled(1000, 10) == L.checks_for(1000, 10)


#: A relative target that moves with the value over the runs above (SVM duals at C = 1e4:
#: values falling from 0.16, 8.1 on the polynomial rows, to about 1e-3; targets from 1e-5 or
#: 8e-4 down to 7e-8 against TOL's 1e-9): the corrective step's windows measure distances to
#: it (torchfw.optimizers._face.distance).
STALL_RTOL = 1e-4


def _corrections(run):
    """The iterations of the checks right after a corrective step, and the steps' count."""
    iterations, *_, steps = run
    after = [b for a, b in zip(iterations, iterations[1:]) if b - a == 1]
    return after, steps.get("correct", 0)


@needs_numba
@pytest.mark.parametrize("source", ["svm-rows", "svm-cache"])
@pytest.mark.parametrize("variant", list(HOST_VARIANTS))
def test_the_loop_decides_the_stall_as_the_host_window(variant, source):
    # Under a relative target (the SVC's rule) the host's windows (FaceCorrection) and the
    # compiled loop's take their corrective steps at the same checks, and step alike between.
    ref = _host_run(variant, source, True, rtol=STALL_RTOL)
    got = _loop_run(variant, source, True, rtol=STALL_RTOL)
    assert _corrections(got) == _corrections(ref), f"{variant} on {source}"
    _compare(ref, got, f"{variant} on {source}, relative target")


@needs_numba
def test_the_stall_comparison_can_fail(monkeypatch):
    # Host windows that measure distances to the relative target alone, not gaps against it
    # (the calls with a target of their own), take their corrections at other checks than
    # the loop's: the comparison above catches it.
    from torchfw.optimizers import _face

    got = _loop_run("fw", "svm-cache", True, rtol=STALL_RTOL)
    assert _corrections(got)[1] >= 1
    stalled = _face.stalled_scaled
    monkeypatch.setattr(_face, "stalled_scaled",
                        lambda g, g0, target, scale: target == 1.0 and stalled(g, g0, target,
                                                                               scale))
    ref = _host_run("fw", "svm-rows", True, rtol=STALL_RTOL)
    assert _corrections(got) != _corrections(ref)


@needs_numba
def test_the_corrective_step_is_exercised():
    # The comparison above covers the corrective step only if it fires on those runs.
    fired = [v for v in HOST_VARIANTS if _loop_run(v, "svm-rows", True)[4].get("correct")]
    assert fired == list(HOST_VARIANTS), fired


def test_every_variant_has_a_code_and_a_parity_case():
    # A variant dropped from the loop (or never added to this test) fails here; one whose
    # branch is removed while its code stays fails the parity test.
    assert set(L.VARIANTS) == set(HOST_VARIANTS)
    assert sorted(L.VARIANTS.values()) == list(range(len(HOST_VARIANTS)))
    from torchfw.svm import _dense as D

    assert D.VARIANTS == L.VARIANTS  # every SVC solver of the compiled path runs the loop
    for name in ("FrankWolfe", "AwayStepFrankWolfe", "PairwiseFrankWolfe"):
        assert getattr(tf, name).dense_variant in L.VARIANTS.values()


@needs_numba
def test_the_comparison_can_fail():
    # The loop run as another variant (away steps) is caught against the host's FW run.
    ref = _host_run("fw", "matrix", False)
    with pytest.raises(AssertionError):
        _compare(ref, _loop_run("fw", "matrix", False, code=L.AWAY), "away as fw")
