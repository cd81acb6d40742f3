"""The active-set corrective step on every storage: one step, written once, the same everywhere.

The step (:func:`torchfw.optimizers._correction.correct_face`) reads and writes a storage only
through its ``face_space``, ``face_column`` and ``face_write`` members. Here, on the L2-SVM dual
:math:`\\tilde K = K + yy^\\top + I/C` at :math:`C = 10^4` (80 x 5 ``make_classification``, RBF
kernel: condition number about :math:`10^6`), where Frank-Wolfe steps crawl:

* **parity**: from the same stalled iterate, the step gives the same weights (to rounding) on the
  host storage (numba and PyTorch kernels, device scalars), the dense, streaming (against the
  host storage of its working set's problem), sampled (a sample of every example), batched and
  sharded (two gloo ranks) storages;
* **convergence**: with ``corrective=True`` (what SVC sets) each storage's run converges within
  the default budget, where the plain steps stop on ``max_iter`` far from the optimum (before
  the step ran on every storage, those runs did);
* **the optimum**: each converged point is the optimum of an independent active-set QP solve
  (plain NumPy linear solves of the KKT systems) to 1e-8 in float64.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch

import torchfw as tf
from torchfw.optimizers import _kernels as K
from torchfw.svm.kernels import OneVsRestOperator, SVMDualOperator, make_kernel
from torchfw.utils.scalars import DEVICE, HOST

from _support import gloo_rank, reference_qp, spawn_ranks

F64 = torch.float64
M = 80
C = 1e4
#: Plain pairwise steps before the corrective step's start point (the run has stalled there).
STALLED = 300
#: Weights agree to this between storages (weights of order 1e-2; the step's linear solves on
#: a matrix of condition ~1e6 amplify the rounding of the scores, about 1e-16 each).
PARITY_ATOL = 1e-9

needs_numba = pytest.mark.skipif(not K.HAVE_NUMBA, reason="the host reference runs numba")


def _data():
    from sklearn.datasets import make_classification

    X, y = make_classification(M, 5, random_state=0)
    X = torch.from_numpy(X)
    gamma = 1.0 / (X.shape[1] * float(X.var()))  # scikit-learn's gamma="scale"
    y_pm = torch.from_numpy(np.where(y == 1, 1.0, -1.0))
    # A second labeling for the batch: the sign of the second feature.
    y_alt = torch.where(X[:, 1] > 0, 1.0, -1.0).to(F64)
    return X, y_pm, y_alt, make_kernel("rbf", gamma)


def _operator(y=None, rows=None):
    X, y_pm, _, kernel = _data()
    y = y_pm if y is None else y
    if rows is not None:
        X, y = X[rows], y[rows]
    return SVMDualOperator(X, y, kernel, C, dtype=F64)


def _spread(m: int = M) -> torch.Tensor:
    x0 = torch.zeros(m, dtype=F64)
    x0[::7] = 1.0
    return x0 / x0.sum()


def _stalled(y=None) -> torch.Tensor:
    """The iterate after :data:`STALLED` plain pairwise steps (far from the optimum)."""
    opt = tf.PairwiseFrankWolfe(tf.Simplex(), tf.ExactLineSearch(), tol=1e-300,
                                max_iter=STALLED)
    return opt.minimize(tf.Quadratic(_operator(y)), _spread()).x


def _host_engine(w, y=None, ops=HOST, rows=None):
    from torchfw.optimizers._engine import QuadraticEngine

    return QuadraticEngine(tf.Quadratic(_operator(y, rows)), tf.Simplex(), w, ops=ops)


def _value(w: torch.Tensor, y=None) -> float:
    return 0.5 * float(w @ _operator(y).matvec(w))


def test_reference_qp_is_a_kkt_point_and_the_optimum():
    # The reference itself: KKT conditions hold, and no random feasible point does better.
    Q = _operator().columns(torch.arange(M)).numpy()
    a = reference_qp(Q)
    g = Q @ a
    lam = a @ g
    assert abs(a.sum() - 1.0) < 1e-12 and (a >= 0).all()
    assert np.abs(g[a > 0] - lam).max() < 1e-9 * lam and g.min() >= lam * (1 - 1e-9)
    rng = np.random.default_rng(0)
    for _ in range(20):
        b = a + 1e-3 * rng.random(M) * (rng.random(M) < 0.2)
        b /= b.sum()
        assert 0.5 * b @ Q @ b > 0.5 * a @ Q @ a


# ---------------------------------------------------------------------------------------------
# Parity of one step across storages
# ---------------------------------------------------------------------------------------------

def _step_host(w, monkeypatch, numba=True, ops=HOST):
    if not numba:
        monkeypatch.setattr(K, "HAVE_NUMBA", False)
    eng = _host_engine(w, ops=ops)
    kept = eng.correct_face()
    return kept, eng.weights().detach().clone()


def _step_dense(w, monkeypatch):
    from torchfw.optimizers._dense import DenseStorage
    from torchfw.optimizers._engine import QuadraticEngine

    eng = QuadraticEngine(DenseStorage(tf.Quadratic(_operator()), tf.Simplex(), w))
    kept = eng.correct_face()
    return kept, eng.weights().clone()


def _step_sampled(w, monkeypatch):
    from torchfw.optimizers._engine import QuadraticEngine
    from torchfw.optimizers._kernel_rows import KernelRows
    from torchfw.optimizers._sampled import SampledStorage

    X, y, _, kernel = _data()
    support = torch.nonzero(w).squeeze(1)
    eng = QuadraticEngine(SampledStorage(KernelRows(X, y, kernel, C, dtype=F64), support,
                                         w[support], sample_size=M))
    kept = eng.correct_face()
    return kept, eng.weights().clone()


def _step_batched(w, monkeypatch):
    # Problem 1 of a batch of two (the other labeling first): its step, and problem 0 kept.
    from torchfw.optimizers.batched import BatchedQuadraticEngine

    X, y, y_alt, kernel = _data()
    other = _stalled(y_alt)
    eng = BatchedQuadraticEngine(OneVsRestOperator(X, torch.stack([y_alt, y]), kernel, C,
                                                   dtype=F64), torch.stack([other, w]))
    kept = eng.correct_face(problem=1)
    torch.testing.assert_close(eng.w[0], other, rtol=0, atol=0)
    return kept, eng.w[1].clone()


STEPS = {"host-torch": lambda w, mp: _step_host(w, mp, numba=False),
         "device": lambda w, mp: _step_host(w, mp, ops=DEVICE),
         "dense": _step_dense, "sampled": _step_sampled, "batched": _step_batched}


@pytest.fixture(scope="module")
def stalled_step():
    w = _stalled()
    eng = _host_engine(w)
    gap = float(eng.gap())
    kept = eng.correct_face()
    return w, kept, eng.weights().clone(), gap, float(eng.gap())


@needs_numba
def test_the_host_step_ends_the_crawl(stalled_step):
    # The reference step itself: a face of many atoms, the objective and the gap far down.
    w, kept, after, gap_before, gap_after = stalled_step
    assert kept >= 10
    assert _value(after) < _value(w) - 1e-3 * abs(_value(w))
    assert gap_after < 1e-3 * gap_before
    assert abs(float(after.sum()) - 1.0) < 1e-12 and bool((after >= 0).all())


@needs_numba
@pytest.mark.parametrize("storage", sorted(STEPS))
def test_every_storage_takes_the_host_step(storage, stalled_step, monkeypatch):
    w, kept_ref, ref, _, _ = stalled_step
    kept, got = STEPS[storage](w.clone(), monkeypatch)
    assert kept == kept_ref, storage
    torch.testing.assert_close(got, ref, rtol=0, atol=PARITY_ATOL, msg=storage)
    # The step moved the iterate far beyond the tolerance (the comparison can fail).
    assert float((got - w).abs().max()) > 1e3 * PARITY_ATOL


@needs_numba
def test_streaming_step_is_the_host_step_on_its_working_set():
    # The streaming storage's face is drawn from its working set (the admitted atoms, the only
    # ones with a score): its step is the host storage's on the problem of those atoms, slot
    # order kept.
    from torchfw.optimizers._engine import QuadraticEngine
    from torchfw.optimizers._streaming import StreamingStorage

    opt = tf.PairwiseFrankWolfe(tf.Simplex(), tf.ExactLineSearch())
    opt._ls = tf.ExactLineSearch()
    eng = QuadraticEngine(StreamingStorage(tf.Quadratic(_operator()), tf.Simplex(), 0,
                                           rng=np.random.default_rng(1), pair_columns=True))
    for _ in range(4 * M):
        opt._step(eng)
    st = eng.storage
    members = torch.from_numpy(st.members[:st.size].copy())
    assert 10 <= members.numel() < M
    w_ws = torch.from_numpy(st.ws[:st.size].copy())
    ref = _host_engine(w_ws, rows=members)
    kept_ref = ref.correct_face()
    kept = eng.correct_face()
    assert kept == kept_ref and kept >= 5
    torch.testing.assert_close(torch.from_numpy(st.ws[:st.size].copy()), ref.weights(),
                               rtol=0, atol=PARITY_ATOL)
    assert float(eng.gap()) == pytest.approx(float(ref.gap()), abs=1e-9)


def test_a_wrong_step_fails_the_parity_check(stalled_step, monkeypatch):
    # The comparison can fail: a step on a face without the violators (the support alone) is
    # another step.
    from torchfw.optimizers import _face

    w, _, ref, _, _ = stalled_step
    monkeypatch.setattr(_face, "face_growth", lambda k: 0)
    _, got = _step_host(w.clone(), monkeypatch)
    with pytest.raises(AssertionError):
        torch.testing.assert_close(got, ref, rtol=0, atol=PARITY_ATOL)


# ---------------------------------------------------------------------------------------------
# Convergence within the default budget, and the optimum of the independent solve
# ---------------------------------------------------------------------------------------------

#: Relative gap that counts as converged (the plain steps end the default budget far above it).
RTOL = 1e-9


def _pairwise(corrective: bool, **options):
    return tf.PairwiseFrankWolfe(tf.Simplex(), tf.ExactLineSearch(), tol=1e-300, rtol=RTOL,
                                 corrective=corrective, **options)


def _fit_host(corrective, execution):
    res = _pairwise(corrective, execution=execution).minimize(tf.Quadratic(_operator()),
                                                              _spread())
    return res.converged, res.x, res.steps.get("correct", 0)


def _fit_sampled(corrective, execution=None):
    from torchfw.optimizers._kernel_rows import KernelRows
    from torchfw.optimizers._sampled_run import minimize_sampled

    X, y, _, kernel = _data()
    x0 = _spread()
    support = torch.nonzero(x0).squeeze(1)
    # A sample of half the examples: the FW atom and the face's violators are random.
    res = minimize_sampled(_pairwise(corrective), KernelRows(X, y, kernel, C, dtype=F64),
                           support, x0[support], sample_size=M // 2, tol=1e-300, rtol=RTOL,
                           random_state=0, certify=True)
    converged = res.converged and res.info["exact_gap"] <= 10 * RTOL * res.value
    return converged, res.x, res.steps.get("correct", 0)


def _fit_batched(corrective, execution=None):
    from torchfw.optimizers.batched import minimize_batched

    X, y, y_alt, kernel = _data()
    Y = torch.stack([y, y_alt])
    res = minimize_batched(_pairwise(corrective), OneVsRestOperator(X, Y, kernel, C, dtype=F64),
                           torch.stack([_spread(), _spread()]), tol=1e-300, rtol=RTOL,
                           use_graph=False)
    # Problem 1 against its own reference too.
    Q1 = _operator(y_alt).columns(torch.arange(M)).numpy()
    np.testing.assert_allclose(res.x[1].numpy(), reference_qp(Q1), atol=1e-8, rtol=0)
    return bool(res.converged.all()), res.x[0], res.steps.get("correct", 0)


FITS = {"host": lambda c: _fit_host(c, "host"), "device": lambda c: _fit_host(c, "device"),
        "dense": lambda c: _fit_host(c, "dense"), "sampled": _fit_sampled,
        "batched": _fit_batched}


@pytest.fixture(scope="module")
def optimum():
    return reference_qp(_operator().columns(torch.arange(M)).numpy())


@needs_numba
@pytest.mark.parametrize("storage", sorted(FITS))
def test_every_storage_converges_to_the_independent_optimum(storage, optimum):
    plain = FITS[storage](False)
    assert not plain[0], f"{storage}: the plain steps converged; the problem is too easy"
    converged, x, corrections = FITS[storage](True)
    assert converged and corrections >= 1, storage
    np.testing.assert_allclose(x.numpy(), optimum, atol=1e-8, rtol=0, err_msg=storage)


@needs_numba
def test_streaming_run_solves_its_working_set_problem():
    # A streaming run goes by its budget (its gap is the working set's): with the step the
    # working set's problem is solved to the independent optimum within the budget, which the
    # plain steps do not reach.
    def run(corrective):
        opt = _pairwise(corrective, stream=True, random_state=2, max_iter=20 * M)
        return opt.minimize(tf.Quadratic(_operator()))

    plain, res = run(False), run(True)
    assert plain.gap > 1e3 * RTOL * plain.value
    assert res.gap <= RTOL * res.value and res.steps.get("correct", 0) >= 1
    members = torch.nonzero(res.x).squeeze(1)
    # The working set holds the support (and atoms that left it): the optimum over the atoms
    # that were admitted is the optimum of the reference over them.
    Q = _operator().columns(torch.arange(M)).numpy()
    admitted = np.flatnonzero(np.isin(np.arange(M), members.numpy()))
    ref = reference_qp(Q[np.ix_(admitted, admitted)])
    # The support's optimum over the admitted atoms is at least as good as the run's value.
    assert 0.5 * ref @ Q[np.ix_(admitted, admitted)] @ ref <= res.value * (1 + 1e-9)


# ---------------------------------------------------------------------------------------------
# Sharded: two gloo ranks
# ---------------------------------------------------------------------------------------------



def _sharded_worker(rank: int, world: int, store: str, out: str) -> None:
    with gloo_rank(rank, world, store, out) as results:
        from torchfw import distributed as D_

        X, y, _, kernel = _data()
        a, b = D_.shard_range(M, rank, world)
        op = D_.ShardedSVMDualOperator(X[a:b], y[a:b], kernel, C, dtype=F64)
        for corrective in (False, True):
            res = D_.minimize(_pairwise(corrective), op, _spread()[a:b].clone(), gather=True)
            results[corrective] = (res.converged, res.x.numpy(), res.steps.get("correct", 0))
        # DistributedSVC at its defaults, C = 2e4 (LIBSVM's 1e4): no ConvergenceWarning.
        from sklearn.datasets import make_classification

        from torchfw.exceptions import ConvergenceWarning

        Xd, yd = make_classification(M, 5, random_state=0)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            model = D_.DistributedSVC(C=2e4, random_state=0).fit(Xd[a:b], yd[a:b])
        results["svc"] = (model.result_.converged, float(model.score(Xd, yd)),
                          any(issubclass(w_.category, ConvergenceWarning) for w_ in caught))
        w = _stalled()
        eng = D_.DistributedQuadraticEngine(op, w[a:b].clone(), pair_columns=True)
        kept = eng.correct_face()
        results["step"] = (kept, D_.gather_shards(eng.weights().clone(), op.comm).numpy())


@pytest.fixture(scope="module")
def sharded(tmp_path_factory):
    return spawn_ranks(_sharded_worker, tmp_path_factory, "face")


@needs_numba
def test_sharded_step_is_the_host_step(sharded, stalled_step):
    _, kept_ref, ref, _, _ = stalled_step
    kept, got = sharded["step"]
    assert kept == kept_ref
    np.testing.assert_allclose(got, ref.numpy(), atol=PARITY_ATOL, rtol=0)


@needs_numba
def test_sharded_run_converges_to_the_independent_optimum(sharded, optimum):
    assert not sharded[False][0]
    converged, x, corrections = sharded[True]
    assert converged and corrections >= 1
    np.testing.assert_allclose(x, optimum, atol=1e-8, rtol=0)


@needs_numba
def test_distributed_svc_converges_at_its_defaults_at_large_C(sharded):
    # The 80 x 5 row on two ranks: DistributedSVC now takes the step too (it stopped on
    # max_iter with a ConvergenceWarning without it), with scikit-learn's training accuracy.
    from sklearn.datasets import make_classification
    from sklearn.svm import SVC as LibSVC

    X, y = make_classification(M, 5, random_state=0)
    converged, score, warned = sharded["svc"]
    assert converged and not warned
    assert score >= LibSVC(C=1e4).fit(X, y).score(X, y) - 0.0125
