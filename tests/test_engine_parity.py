"""Every variant on every storage takes the same steps: the parity registry of the engine layer.

The variants (FW, away-step, pairwise, SWAP, SWAP-2o, PARTAN, fully corrective) are written once
against the engine's moves; the numbers they act on live in one of several *storages*:

* ``host`` -- :class:`~torchfw.optimizers._engine.QuadraticEngine` over the host storage
  (:class:`~torchfw.optimizers._host.HostStorage`) with host scalars and the compiled (numba) CPU
  kernels; the reference every other storage is compared with;
* ``host-torch`` -- the same engine with host scalars but PyTorch ops instead of the compiled
  kernels (what runs when numba is missing);
* ``device`` -- device scalars (0-d tensors, branch-free moves) on CPU tensors;
* ``dense`` -- the whole-block compiled loop over the dense vertex gradients (FW, away,
  pairwise);
* ``batched-1`` / ``batched-3`` -- :func:`~torchfw.optimizers.batched.minimize_batched` over a
  one-vs-rest operator, each of the ``B`` problems compared with its own host run;
* ``stream-torch`` -- the streaming working-set engine (seed 001) with NumPy instead of compiled
  kernels, compared with the compiled streaming run (streaming admits atoms one by one, so it is
  a different algorithm from the full-gradient runs: its parity is between its own two
  implementations);
* ``sharded`` -- :func:`torchfw.distributed.minimize` with two gloo ranks (one spawned process
  group for all variants), compared with the host run of the same problem.
* ``sampled`` -- the sampled storage of seed 002's randomized FW
  (:class:`~torchfw.optimizers._sampled.SampledStorage`, state over the slots of the active set)
  with a sample of every example, step by step and through
  :func:`~torchfw.optimizers._sampled_run.minimize_sampled`, compared with the host run checked
  at every iteration (the sampled stopping test runs at every iteration).

Like ``OptimizerInfo`` in PyTorch's test suite, a registry lists each variant with the storages it
applies to (and why it does not apply elsewhere); one test runs the product. "Same steps" means:
the same iterate at every check (to rounding, ``atol`` 1e-9 on weights of order 1e-2), the same
values at every check, the same number of iterations, the same status and the same step counters.
A storage that took a different branch anywhere (a different atom, a drop missed) fails on the
iterate at the next check.

Parity holds up to *exact ties*, which no storage breaks the same way as another: an exact
pairwise step between atoms ``i`` and ``j`` leaves :math:`s_i = s_j` (the slope along
:math:`e_i - e_j` is zero at its minimizer), and when that common value is the smallest score
(or the largest active one) the next FW (or away) atom is decided by the last bit of rounding.
Near the optimum every support atom's score is within the gap of the others and such ties
become frequent, so the runs stop at a moderate tolerance (``TOL``), and start from spread
points (several active atoms).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import pytest
import torch

import torchfw as tf
from torchfw.optimizers import _kernels as K
from torchfw.optimizers.batched import minimize_batched
from torchfw.svm.kernels import OneVsRestOperator, SVMDualOperator, make_kernel

from _support import gloo_rank, spawn_ranks

F64 = torch.float64
CHECK_EVERY = 5
MAX_ITER = 150
TOL = 1e-6
ATOL = 1e-9


# ---------------------------------------------------------------------------------------------
# Registry
# ---------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class VariantInfo:
    """A variant and the storages it runs on (``skips``: storage -> why it is left out)."""

    name: str
    cls: type
    kwargs: dict = field(default_factory=dict)
    skips: dict = field(default_factory=dict)

    def make(self, lmo, **options):
        settings = {"tol": TOL, "max_iter": MAX_ITER, "check_every": CHECK_EVERY, **options}
        return self.cls(lmo, tf.ExactLineSearch(), **self.kwargs, **settings)


_NOT_DENSE = "execution='dense' has compiled loops for FW, away and pairwise only"
_NOT_BATCHED = "the batched engine has no restricted (face) or second-order pair moves"
_STREAM_TIE = ("a streaming run starts from one vertex: after the first exact pairwise step the "
               "two active atoms tie exactly, and NumPy and numba round the tie differently")
_FACE_TIE = ("the face's exact pairwise steps leave active scores tied; numba and PyTorch round "
             "the score update differently (at iteration 14 the active atoms 26 and 78 tie to "
             "rounding and the two runs take different away atoms): the last bit's choice")
VARIANTS = [
    VariantInfo("FW", tf.FrankWolfe),
    VariantInfo("AFW", tf.AwayStepFrankWolfe),
    VariantInfo("PFW", tf.PairwiseFrankWolfe, skips={"stream": _STREAM_TIE}),
    VariantInfo("SWAP", tf.SwapFrankWolfe, skips={"dense": _NOT_DENSE, "stream": _STREAM_TIE}),
    VariantInfo("SWAP2o", tf.SwapFrankWolfe, {"second_order": True},
                skips={"dense": _NOT_DENSE, "batched": _NOT_BATCHED,
                       "stream": "SWAP-2o needs the full gradient, not a working set"}),
    VariantInfo("PARTAN", tf.PartanFrankWolfe, skips={"dense": _NOT_DENSE}),
    VariantInfo("FC", tf.FullyCorrectiveFrankWolfe,
                skips={"dense": _NOT_DENSE, "batched": _NOT_BATCHED,
                       "device": "on a device the face gap is not read (no host sync): every "
                                 "inner step runs, by design a different path",
                       "host-torch:l1": _FACE_TIE,
                       "stream": "covered by the full-gradient storages"}),
]


@dataclass
class Trace:
    """What a run did: the iterate and value at every check, and how it ended."""

    points: list
    values: list
    n_iter: int
    steps: dict
    status: str
    x: torch.Tensor


def _recorder(points):
    def callback(info):
        points.append(info.x.detach().clone())
    return callback


def _trace(res, points) -> Trace:
    return Trace(points=points, values=list(res.history.value), n_iter=res.n_iter,
                 steps=dict(res.steps), status=str(res.status), x=res.x.detach().clone())


# ---------------------------------------------------------------------------------------------
# Problems
# ---------------------------------------------------------------------------------------------

M, D = 48, 4


def _svm_data(seed: int = 0):
    gen = torch.Generator().manual_seed(seed)
    X = torch.randn(M, D, generator=gen, dtype=F64)
    Y = torch.where(torch.randn(3, M, generator=gen, dtype=F64) + X[:, 0] > 0, 1.0, -1.0)
    return X, Y


def _spread_start(n: int = M) -> torch.Tensor:
    # Not a vertex. An exact pairwise step between atoms i and j leaves s_i = s_j (the slope
    # along e_i - e_j is zero at the minimizer); when i and j are the only active atoms the next
    # away atom is an exact tie, which two implementations that round differently break
    # differently. A spread start keeps several atoms active from the first step.
    x0 = torch.zeros(n, dtype=F64)
    x0[::7] = 1.0
    return x0 / x0.sum()


def _svm_problem(b: int = 0):
    """The L2-SVM dual over the simplex (problem ``b`` of the one-vs-rest labels)."""
    X, Y = _svm_data()
    op = SVMDualOperator(X, Y[b], make_kernel("rbf", 0.5), 1.0, dtype=F64)
    return tf.Quadratic(op), tf.Simplex(), _spread_start()


def _l1_problem():
    """An ill-conditioned quadratic with a linear term over the L1 ball of radius 5 (the
    solution has ~9 nonzeros, so the active-set variants need tens of iterations)."""
    gen = torch.Generator().manual_seed(3)
    A = torch.randn(40, 40, generator=gen, dtype=F64)
    Q = A @ A.T / 40 + 1e-2 * torch.eye(40, dtype=F64)
    c = torch.randn(40, generator=gen, dtype=F64)
    lmo = tf.L1Ball(5.0)
    x0 = 5.0 * _spread_start(40)
    x0[7::14] *= -1.0  # atoms of both signs
    return tf.Quadratic(Q, c, constant=0.5), lmo, x0


PROBLEMS = {"svm": _svm_problem, "l1": _l1_problem}


# ---------------------------------------------------------------------------------------------
# Storages
# ---------------------------------------------------------------------------------------------

def _run(variant: VariantInfo, problem: str, **options) -> Trace:
    objective, lmo, x0 = PROBLEMS[problem]()
    points = []
    res = variant.make(lmo, callback=_recorder(points), **options).minimize(objective, x0)
    return _trace(res, points)


def run_host(variant, problem, monkeypatch):
    return _run(variant, problem, execution="host")


def run_host_torch(variant, problem, monkeypatch):
    monkeypatch.setattr(K, "HAVE_NUMBA", False)
    return _run(variant, problem, execution="host")


def run_device(variant, problem, monkeypatch):
    return _run(variant, problem, execution="device")


def run_dense(variant, problem, monkeypatch):
    return _run(variant, problem, execution="dense")


STORAGES = {"host-torch": run_host_torch, "device": run_device, "dense": run_dense}


def _applies(variant: VariantInfo, storage: str, problem: str | None = None) -> str | None:
    """None if ``variant`` runs on ``storage`` (for ``problem``), else the reason it does not."""
    family = storage.split("-")[0]
    return (variant.skips.get(storage) or variant.skips.get(family)
            or (variant.skips.get(f"{storage}:{problem}") if problem else None))


def _nonzero(steps: dict) -> dict:
    # Device engines create a counter at its first (possibly false) event; hosts at the first
    # true one: a zero count and a missing one say the same.
    return {k: v for k, v in steps.items() if v}


def assert_same_steps(got: Trace, ref: Trace, label: str) -> None:
    assert got.status == ref.status, label
    assert got.n_iter == ref.n_iter, label
    assert _nonzero(got.steps) == _nonzero(ref.steps), label
    assert len(got.values) == len(ref.values), label
    np.testing.assert_allclose(got.values, ref.values, rtol=1e-11, atol=1e-12, err_msg=label)
    assert len(got.points) == len(ref.points), label
    for k, (a, b) in enumerate(zip(got.points, ref.points, strict=True)):
        torch.testing.assert_close(a, b, rtol=0, atol=ATOL, msg=f"{label}, check {k}")
    torch.testing.assert_close(got.x, ref.x, rtol=0, atol=ATOL, msg=label)


needs_numba = pytest.mark.skipif(not K.HAVE_NUMBA, reason="the host reference runs numba")


@needs_numba
@pytest.mark.parametrize("problem", sorted(PROBLEMS))
@pytest.mark.parametrize("storage", sorted(STORAGES))
@pytest.mark.parametrize("variant", VARIANTS, ids=[v.name for v in VARIANTS])
def test_storage_takes_the_host_steps(variant, storage, problem, monkeypatch):
    reason = _applies(variant, storage, problem)
    if reason:
        pytest.skip(reason)
    ref = run_host(variant, problem, monkeypatch)
    # The runs must be long enough to mean something, and must differ between variants.
    assert ref.n_iter >= 20 and len(ref.points) >= 4
    got = STORAGES[storage](variant, problem, monkeypatch)
    assert_same_steps(got, ref, f"{variant.name} on {storage}, {problem}")


# -- batched ----------------------------------------------------------------------------------

@needs_numba
@pytest.mark.parametrize("B", [1, 3])
@pytest.mark.parametrize("variant", VARIANTS, ids=[v.name for v in VARIANTS])
def test_batched_problems_take_their_host_steps(variant, B, monkeypatch):
    if _applies(variant, "batched"):
        pytest.skip(_applies(variant, "batched"))
    X, Y = _svm_data()
    op = OneVsRestOperator(X, Y[:B], make_kernel("rbf", 0.5), 1.0, dtype=F64)
    w0 = _spread_start().expand(B, M).clone()
    opt = variant.make(tf.Simplex())
    batch = minimize_batched(opt, op, w0, tol=TOL, max_iter=MAX_ITER, check_every=CHECK_EVERY,
                             use_graph=False)
    total_steps: dict = {}
    for b in range(B):
        objective, lmo, x0 = _svm_problem(b)
        res = variant.make(lmo, execution="host").minimize(objective, x0)
        label = f"{variant.name}, batched problem {b} of {B}"
        assert res.n_iter >= 20, label
        assert int(batch.n_iter[b]) == res.n_iter, label
        assert bool(batch.converged[b]) == (res.status is tf.Status.CONVERGED), label
        torch.testing.assert_close(batch.x[b], res.x, rtol=0, atol=ATOL, msg=label)
        # The batched history goes on after problem b stops (its value then stays put).
        values = [float(v[b]) for _, v, _, _ in batch.history][:len(res.history.value)]
        np.testing.assert_allclose(values, res.history.value, rtol=1e-11, atol=1e-12,
                                   err_msg=label)
        for name, count in res.steps.items():
            total_steps[name] = total_steps.get(name, 0) + count
    assert _nonzero(batch.steps) == _nonzero(total_steps)


def test_batched_run_is_the_optimizers_loop_with_per_problem_stops():
    # The batch goes through ConstrainedOptimizer's run loop: its last block is clipped at
    # max_iter (a budget that is not a multiple of check_every), and a problem that converged
    # early keeps its iterate and its count while the others go on.
    X, Y = _svm_data()
    op = OneVsRestOperator(X, Y[:2], make_kernel("rbf", 0.5), 1.0, dtype=F64)
    w0 = _spread_start().expand(2, M).clone()
    opt = VARIANTS[1].make(tf.Simplex())
    batch = minimize_batched(opt, op, w0, tol=TOL, max_iter=37, check_every=10, use_graph=False)
    assert [k for k, _, _, _ in batch.history] == [0, 10, 20, 30, 37]
    assert batch.n_iter.tolist() == [37, 37]
    for b in range(2):
        objective, lmo, x0 = _svm_problem(b)
        res = VARIANTS[1].make(lmo, execution="host", max_iter=37,
                               check_every=10).minimize(objective, x0)
        assert res.n_iter == 37 and res.status is tf.Status.MAX_ITER
        torch.testing.assert_close(batch.x[b], res.x, rtol=0, atol=ATOL)
    # At a loose relative tolerance the two problems converge at different checks (100 and
    # 105 iterations): the first stops there (identity moves from then on) while the second
    # goes on, and each matches its own host run.
    loose = minimize_batched(opt, op, w0, tol=1e-300, rtol=0.2, max_iter=MAX_ITER,
                             check_every=5, use_graph=False)
    assert bool(loose.converged.all())
    ks = [int(k) for k in loose.n_iter]
    assert ks[0] != ks[1] and len(loose.history) - 1 == max(ks) // 5
    for b in range(2):
        objective, lmo, x0 = _svm_problem(b)
        res = VARIANTS[1].make(lmo, execution="host", tol=1e-300, rtol=0.2,
                               check_every=5).minimize(objective, x0)
        assert res.status is tf.Status.CONVERGED and res.n_iter == ks[b]
        torch.testing.assert_close(loose.x[b], res.x, rtol=0, atol=ATOL)


# -- streaming --------------------------------------------------------------------------------

def _stream(variant: VariantInfo) -> Trace:
    objective, lmo, _ = _svm_problem()
    points = []
    res = variant.make(lmo, stream=True, random_state=4, callback=_recorder(points),
                       average_from=60 if variant.name in ("FW", "AFW") else None
                       ).minimize(objective)
    trace = _trace(res, points)
    trace.average = None if res.average is None else (res.average, res.average_value)
    return trace


@needs_numba
@pytest.mark.parametrize("variant", VARIANTS, ids=[v.name for v in VARIANTS])
def test_streaming_storage_two_implementations_agree(variant, monkeypatch):
    if _applies(variant, "stream"):
        pytest.skip(_applies(variant, "stream"))
    ref = _stream(variant)
    assert ref.n_iter == MAX_ITER and ref.steps.get("admitted", 0) >= 3
    monkeypatch.setattr(K, "HAVE_NUMBA", False)
    got = _stream(variant)
    assert_same_steps(got, ref, f"{variant.name}, streaming without numba")
    if ref.average is not None:
        torch.testing.assert_close(got.average[0], ref.average[0], rtol=0, atol=ATOL)
        assert got.average[1] == pytest.approx(ref.average[1], rel=1e-11)


# -- sampled (seed 002's randomized FW over slots) ---------------------------------------------

SAMPLED = [v for v in VARIANTS if v.name != "FC"]  # FC's face moves have no sampled form


def _sampled_storage(variant: VariantInfo, x0: torch.Tensor):
    """The sampled storage of the registry's SVM problem with a sample of every example."""
    from torchfw.optimizers._engine import QuadraticEngine
    from torchfw.optimizers._kernel_rows import KernelRows
    from torchfw.optimizers._sampled import SampledStorage

    X, Y = _svm_data()
    rows = KernelRows(X, Y[0], make_kernel("rbf", 0.5), 1.0, dtype=F64)
    support = torch.nonzero(x0).squeeze(1)
    return rows, QuadraticEngine(SampledStorage(rows, support, x0[support], sample_size=M,
                                                keep_previous=variant.cls.keeps_previous))


@needs_numba
@pytest.mark.parametrize("variant", SAMPLED, ids=[v.name for v in SAMPLED])
def test_sampled_storage_takes_the_host_steps(variant):
    # With sample_size >= m the sample is every example, in order: the FW atom is the argmin
    # of the full (freshly computed) gradient and the sampled gap is the exact one, so the
    # sampled storage must take the host engine's steps. Its stopping test runs at every
    # iteration: the host run checks at every iteration too. The gradient on the slots and the
    # FW atom's score are computed in another order than the host's (a kernel block product,
    # the selection's dot product for p), so the agreement is to rounding.
    from torchfw.optimizers._sampled_run import minimize_sampled

    objective, lmo, x0 = _svm_problem()
    ref = _run(variant, "svm", execution="host", check_every=1)
    assert ref.n_iter >= 20
    # Iteration by iteration: the same iterate and value after every step.
    _, eng = _sampled_storage(variant, x0)
    opt = variant.make(lmo)
    opt._ls = tf.ExactLineSearch()
    for k in range(ref.n_iter + 1):
        point = ref.points[k] if k < ref.n_iter else ref.x
        label = f"{variant.name} sampled, iteration {k}"
        torch.testing.assert_close(eng.weights(), point, rtol=0, atol=ATOL, msg=label)
        assert eng.value() == pytest.approx(ref.values[k], rel=1e-11, abs=1e-12), label
        if k < ref.n_iter:
            opt._step(eng)
    assert _nonzero(eng.step_counts()) == _nonzero(ref.steps)
    # Through minimize_sampled (the one run loop with SampledStop): the same stop, counters,
    # final iterate, and history values every check_every iterations.
    rows, _ = _sampled_storage(variant, x0)
    support = torch.nonzero(x0).squeeze(1)
    res = minimize_sampled(variant.make(lmo), rows, support, x0[support], sample_size=M,
                           tol=TOL, max_iter=MAX_ITER, check_every=CHECK_EVERY)
    assert str(res.status) == ref.status and res.n_iter == ref.n_iter, variant.name
    assert _nonzero(res.steps) == _nonzero(ref.steps), variant.name
    assert res.info["samples"] == 1 + res.n_iter  # the start's, one per step, no confirmation
    torch.testing.assert_close(res.x, ref.x, rtol=0, atol=ATOL)
    iterations = res.history.iteration[:-1]  # the last entry is the certified end
    assert iterations == list(range(0, ref.n_iter + 1, CHECK_EVERY)), variant.name
    np.testing.assert_allclose(res.history.value[:-1], [ref.values[k] for k in iterations],
                               rtol=1e-11, atol=1e-12)
    assert res.info["exact_gap"] == pytest.approx(res.info["sampled_gap"], abs=1e-12)


# -- sharded (two gloo ranks) -----------------------------------------------------------------

SHARDED = [v for v in VARIANTS if not _applies(v, "sharded")]


def _sharded_worker(rank: int, world: int, store: str, out: str) -> None:
    with gloo_rank(rank, world, store, out) as results:
        from torchfw import distributed as D_

        X, Y = _svm_data()
        a, b = D_.shard_range(M, rank, world)
        op = D_.ShardedSVMDualOperator(X[a:b], Y[0, a:b], make_kernel("rbf", 0.5), 1.0,
                                       dtype=F64)
        for variant in SHARDED:
            points = []
            opt = variant.make(tf.Simplex(), callback=_recorder(points))
            res = D_.minimize(opt, op, _spread_start()[a:b], gather=True)
            full = [D_.gather_shards(p, op.comm) for p in points]
            results[variant.name] = Trace(points=[p.numpy() for p in full],
                                          values=list(res.history.value), n_iter=res.n_iter,
                                          steps=dict(res.steps), status=str(res.status),
                                          x=res.x.numpy())


@pytest.fixture(scope="module")
def sharded_runs(tmp_path_factory):
    return spawn_ranks(_sharded_worker, tmp_path_factory, "parity")


@needs_numba
@pytest.mark.parametrize("variant", SHARDED, ids=[v.name for v in SHARDED])
def test_sharded_storage_takes_the_host_steps(variant, sharded_runs, monkeypatch):
    ref = run_host(variant, "svm", monkeypatch)
    got = sharded_runs[variant.name]
    got.points = [torch.from_numpy(p) for p in got.points]
    got.x = torch.from_numpy(got.x)
    assert_same_steps(got, ref, f"{variant.name} on 2 gloo ranks")


def test_a_storage_that_takes_another_branch_fails_the_parity_check():
    # The comparison itself must be able to fail: a run with a different step rule (FW instead
    # of away steps) from the same start is caught.
    fw = _run(VARIANTS[0], "svm", execution="host")
    afw = _run(VARIANTS[1], "svm", execution="host")
    with pytest.raises(AssertionError):
        assert_same_steps(afw, fw, "different variants")
    # ... and so is a one-ulp-level disagreement that grows into a different iterate.
    moved = Trace(points=[p.clone() for p in fw.points], values=list(fw.values),
                  n_iter=fw.n_iter, steps=dict(fw.steps), status=fw.status, x=fw.x)
    moved.points[-1][0] += 10 * ATOL
    with pytest.raises(AssertionError):
        assert_same_steps(moved, fw, "perturbed iterate")
    assert math.isfinite(fw.values[-1])


# -- the protocol ------------------------------------------------------------------------------
#
# The engine holds its storage (QuadraticEngine(storage)); storages are separate classes. So a
# storage that lacks a member of the protocol cannot borrow another storage's version of it:
# check_storage refuses it when the engine is built, naming the member.

def _storage_classes():
    from torchfw.distributed.engine import ShardedStorage
    from torchfw.optimizers._dense import DenseStorage
    from torchfw.optimizers._host import HostStorage
    from torchfw.optimizers._rows import RowStorage
    from torchfw.optimizers._sampled import SampledStorage
    from torchfw.optimizers._streaming import StreamingStorage
    from torchfw.optimizers.batched import BatchedStorage

    return [HostStorage, RowStorage, DenseStorage, StreamingStorage, BatchedStorage,
            ShardedStorage, SampledStorage]


_MOVES = ("toward", "away", "pairwise", "extrapolation", "apply", "_next_cross", "_line",
          "_shift_scalars", "value", "gap", "choose")


@pytest.mark.parametrize("cls", _storage_classes(), ids=lambda c: c.__name__)
def test_every_storage_defines_the_protocol_itself_and_no_move(cls):
    from torchfw.optimizers._engine import QuadraticEngine
    from torchfw.optimizers._state import StorageState
    from torchfw.optimizers._storage import BOOKKEEPING, STORAGE_MEMBERS

    storages = _storage_classes()
    assert not issubclass(cls, QuadraticEngine)
    for member in STORAGE_MEMBERS:
        assert callable(getattr(cls, member, None)), (cls.__name__, member)
        # Defined by a storage class (the dense storage is the row-source storage over H),
        # never by the shared base classes of the bookkeeping.
        owner = next(c for c in cls.__mro__ if member in vars(c))
        assert owner in storages, (cls.__name__, member, owner.__name__)
    for member in BOOKKEEPING:
        assert callable(getattr(cls, member, None)), (cls.__name__, member)
    assert not any(member in vars(c) for c in StorageState.__mro__
                   for member in STORAGE_MEMBERS)
    # The moves are written once, in the engine over the protocol: no storage has one.
    for move in _MOVES:
        assert not hasattr(cls, move), (cls.__name__, move)
    # Only the batched engine wraps apply and the PARTAN scalars (to mask stopped problems).
    from torchfw.distributed.engine import DistributedQuadraticEngine
    from torchfw.optimizers.batched import BatchedQuadraticEngine

    for engine in (BatchedQuadraticEngine, DistributedQuadraticEngine):
        for move in _MOVES:
            if move in vars(engine):
                assert engine is BatchedQuadraticEngine and \
                    move in ("apply", "_shift_scalars"), (engine.__name__, move)


def _forgetful_storage(forgotten: str | None):
    """A storage class that answers the protocol by delegating to a host storage, except
    ``forgotten`` (a storage that forgot to define it)."""
    from torchfw.optimizers._host import HostStorage
    from torchfw.optimizers._storage import BOOKKEEPING, STORAGE_MEMBERS
    from torchfw.utils.scalars import HOST

    objective, lmo, x0 = _svm_problem()
    inner = HostStorage(objective, lmo, lmo.to_weights(x0), ops=HOST)

    def delegate(name):
        return lambda self, *args, **kwargs: getattr(inner, name)(*args, **kwargs)

    members = {m: delegate(m) for m in STORAGE_MEMBERS + BOOKKEEPING if m != forgotten}

    def scalars(self, name):  # p, t, i_fw, ... and the bookkeeping's state, not members
        if name in STORAGE_MEMBERS:
            raise AttributeError(name)
        return getattr(inner, name)

    return type("Forgetful", (), {**members, "__getattr__": scalars})()


def _member_names():
    from torchfw.optimizers._storage import STORAGE_MEMBERS

    return list(STORAGE_MEMBERS)


@pytest.mark.parametrize("member", _member_names())
def test_a_storage_missing_a_member_is_refused_by_name(member):
    from torchfw.optimizers._engine import QuadraticEngine

    with pytest.raises(TypeError, match=rf"Forgetful is not an engine storage: it lacks "
                                        rf"{member}\(\)"):
        QuadraticEngine(_forgetful_storage(member))


def test_the_complete_delegating_storage_takes_the_host_steps():
    # The refusal above is the only difference: with every member the same delegating class
    # builds an engine and runs the host's steps (so the test of a missing member cannot pass
    # for another reason, such as the delegation not being a storage at all).
    from torchfw.optimizers._engine import QuadraticEngine

    variant = VARIANTS[1]
    ref = run_host(variant, "svm", None)
    eng = QuadraticEngine(_forgetful_storage(None))
    opt = variant.make(tf.Simplex())
    opt._ls = tf.ExactLineSearch()
    for _ in range(ref.n_iter):
        opt._step(eng)
    assert eng.iteration() == ref.n_iter
    torch.testing.assert_close(eng.weights(), ref.x, rtol=0, atol=0)
    assert _nonzero(eng.step_counts()) == _nonzero(ref.steps)
