"""Data-parallel training over torch.distributed: two gloo processes against one process.

One module-scoped fixture spawns two gloo ranks on this machine (rendezvous through a file, so
no port can collide), runs every case below in that one process group and pickles rank 0's
results; the tests compare them with single-process fits made here. The two ranks follow the
single-process iterates step for step (same decisions, same iteration count), so fixed-budget
runs must give the same dual solution up to rounding; converged runs are compared through the
certified bound the duality gap gives.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
import torch

import torchfw as tf
from torchfw.datasets import make_large_classification
from torchfw.result import problem_results
from torchfw.svm import SVC
from torchfw.svm.kernels import SVMDualOperator, make_kernel

from _support import gloo_rank, spawn_ranks

dist = pytest.importorskip("torch.distributed")
pytestmark = pytest.mark.skipif(not (dist.is_available() and dist.is_gloo_available()),
                                reason="needs torch.distributed with the gloo backend")

M, D = 300, 5

#: (key, DistributedSVC/SVC parameters, sparse input): fixed budgets follow the same path. C=1,
#: at which the rounding bound of ``test_same_path_as_one_process`` was measured.
PATH_CASES = [
    (f"{solver}-{exchange}", dict(solver=solver, max_iter=120, tol=1e-6, exchange=exchange,
                                  C=1.0), False)
    for solver, exchanges in [("fw", ("gather", "broadcast")), ("swap", ("gather", "broadcast")),
                              ("partan", ("gather", "broadcast")), ("away", ("gather",)),
                              ("swap2", ("gather",)), ("fc", ("broadcast",))]
    for exchange in exchanges
]
CONVERGED_CASES = [
    ("converged-swap", dict(solver="swap", tol=1e-3, C=1.0), False),
    # Pairwise's first away atom is the active atom of largest gradient, and at the start (the
    # exact optimum of the subset problem) every active atom has the same gradient: an exact
    # tie, which float32 columns (one process) and float64 sharded entries break either way.
    # Compared by the certified bound instead of step by step.
    ("converged-pairwise", dict(solver="pairwise", tol=1e-3, exchange="broadcast", C=1.0),
     False),
    ("multiclass-sparse-balanced", dict(solver="swap", tol=1e-3, class_weight="balanced",
                                        C=2.0), True),
    # tol="auto" is resolved on all ranks' examples, as SVC resolves it (0.1 below 1,000).
    ("converged-auto-tol", dict(solver="swap", tol="auto", C=1.0), False),
]


def _data():
    X, y = make_large_classification(M, D, random_state=3, n_informative=3)
    return X, y.numpy()


def _spread_start():
    """A start with mass on every 37th example.

    Not a vertex: from ``e_0`` the first pairwise step is an exact tie between two atoms of
    weight 1/2, which float32 kernel columns summed in a different order break either way.
    """
    x0 = torch.zeros(M, dtype=torch.float64)
    x0[::37] = 1.0
    return x0 / x0.sum()


def _multiclass_data():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(M, D)).astype(np.float32)
    X[rng.random(X.shape) < 0.4] = 0.0  # sparse-ish, stored as CSR in that case
    y = np.where(X[:, 0] + X[:, 1] > 0.3, 2, np.where(X[:, 2] > 0, 1, 0))
    return torch.from_numpy(X), y


def _case_data(key):
    return _multiclass_data() if key.startswith("multiclass") else _data()


def _worker(rank: int, world: int, store: str, out: str) -> None:
    with gloo_rank(rank, world, store, out) as results:
        from torchfw import distributed as D_
        from torchfw.distributed import DistributedSVC, gather_shards, shard_range

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # fixed budgets stop on max_iter on purpose
            for key, params, sparse in PATH_CASES + CONVERGED_CASES:
                X, y = _case_data(key)
                a, b = shard_range(X.shape[0], rank, world)
                Xs = X[a:b].to_sparse_csr() if sparse else X[a:b]
                model = DistributedSVC(random_state=0, **params).fit(Xs, y[a:b])
                shards = model.dual_shard_ if isinstance(model.dual_shard_, list) \
                    else [model.dual_shard_]
                runs = problem_results(model.result_)
                # Every rank must end with the very same model.
                mine = (model.problem_dual_coef_.double().sum().item(), model.support_.tolist())
                same = len({repr(v) for v in D_.Communicator().all_gather_object(mine)}) == 1
                results[key] = {
                    "alphas": [gather_shards(s).numpy() for s in shards],
                    "n_iter": [r.n_iter for r in runs], "gap": [r.gap for r in runs],
                    "value": [r.value for r in runs],
                    "status": [str(r.status) for r in runs],
                    "exchange": runs[0].info["exchange"],
                    "predict": model.predict(X), "support": model.support_,
                    "same_on_ranks": same,
                }
            # The core solvers on the sharded operator, without SVC around them.
            X, y = _data()
            a, b = shard_range(X.shape[0], rank, world)
            yy = torch.from_numpy(np.where(y[a:b] > 0, 1.0, -1.0))
            op = D_.ShardedSVMDualOperator(X[a:b], yy, make_kernel("rbf", 0.5), 1.0)
            opt = tf.PairwiseFrankWolfe(tf.Simplex(), max_iter=80, tol=1e-12)
            res = D_.minimize(opt, op, _spread_start()[a:b], gather=True)
            results["core-pairwise"] = {"x": res.x.numpy(), "n_iter": res.n_iter,
                                        "value": res.value,
                                        "bytes": res.info["communication"]["sent"]}
            # The numba-free path (PyTorch ops; also what runs on a GPU).
            saved = D_.K.HAVE_NUMBA, D_._kernel_cpu.HAVE_NUMBA
            D_.K.HAVE_NUMBA = D_._kernel_cpu.HAVE_NUMBA = False
            try:
                model = DistributedSVC(solver="partan", tol=1e-3, random_state=0).fit(
                    X[a:b], y[a:b])
            finally:
                D_.K.HAVE_NUMBA, D_._kernel_cpu.HAVE_NUMBA = saved
            results["torch-path"] = {"alphas": [gather_shards(model.dual_shard_).numpy()],
                                     "gap": [model.result_.gap], "predict": model.predict(X)}
            # A time limit is agreed on by all ranks (no rank may stop alone).
            model = DistributedSVC(solver="fw", tol=1e-9, time_limit=1e-6,
                                   random_state=0).fit(X[a:b], y[a:b])
            results["time-limit"] = {"status": str(model.result_.status),
                                     "n_iter": model.n_iter_}


@pytest.fixture(scope="module")
def two_ranks(tmp_path_factory):
    return spawn_ranks(_worker, tmp_path_factory, "distributed")


def _reference(key, params, sparse):
    X, y = _case_data(key)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        params = {k: v for k, v in params.items() if k != "exchange"}
        # One-vs-rest, the one multiclass scheme of DistributedSVC.
        return SVC(random_state=0, multi_class="ovr", **params).fit(
            X.to_sparse_csr() if sparse else X, y)


@pytest.mark.parametrize("key,params,sparse", PATH_CASES, ids=[c[0] for c in PATH_CASES])
def test_same_path_as_one_process(two_ranks, key, params, sparse):
    got = two_ranks[key]
    ref = _reference(key, params, sparse)
    assert got["exchange"] == params["exchange"]
    assert got["n_iter"] == [ref.result_.n_iter]
    np.testing.assert_allclose(got["alphas"][0], ref.result_.x.numpy(), rtol=0, atol=1e-8)
    # Partial sums in another order and K_ij in float64: rounding, well under the gap (120
    # FW steps amplify it: 1.02e-8 relative since the host start reads compiled columns).
    assert got["value"][0] == pytest.approx(ref.result_.value, rel=5e-8)
    assert abs(got["value"][0] - ref.result_.value) < 1e-3 * ref.result_.gap
    X, _ = _case_data(key)
    np.testing.assert_array_equal(got["predict"], ref.predict(X))
    np.testing.assert_array_equal(got["support"], ref.support_)
    assert got["same_on_ranks"]


def _certified_distance(gap_a, gap_b, C):
    # f(a) - f* >= ||a - a*||^2 / (2 C): the dual Hessian is PSD plus I / C.
    return math.sqrt(2.0 * C * gap_a) + math.sqrt(2.0 * C * gap_b)


@pytest.mark.parametrize("key,params,sparse", CONVERGED_CASES,
                         ids=[c[0] for c in CONVERGED_CASES])
def test_converged_dual_matches_one_process(two_ranks, key, params, sparse):
    got = two_ranks[key]
    ref = _reference(key, params, sparse)
    refs = problem_results(ref.result_)
    assert len(got["alphas"]) == len(refs)
    C = params.get("C", SVC().C)
    if params.get("class_weight") == "balanced":  # the largest per-example C bounds them all
        counts = np.bincount(np.unique(_case_data(key)[1], return_inverse=True)[1])
        C *= float((counts.sum() / (len(counts) * counts)).max())
    for alpha, gap, value, r in zip(got["alphas"], got["gap"], got["value"], refs, strict=True):
        assert np.linalg.norm(alpha - r.x.numpy()) <= _certified_distance(gap, r.gap, C)
        # Both values lie within their gaps above f*. (The two runs start from the exact solution
        # of the same subset problem, built from differently rounded kernel entries, so their
        # paths may part at a tie; the same-path test above covers identical paths.)
        assert abs(value - r.value) <= gap + r.gap
    assert set(got["status"]) == {"converged"}
    X, _ = _case_data(key)
    np.testing.assert_array_equal(got["predict"], ref.predict(X))
    assert got["same_on_ranks"]


def test_core_solver_on_sharded_operator(two_ranks):
    got = two_ranks["core-pairwise"]
    X, y = _data()
    op = SVMDualOperator(X, torch.from_numpy(np.where(y > 0, 1.0, -1.0)),
                         make_kernel("rbf", 0.5), 1.0)
    ref = tf.PairwiseFrankWolfe(tf.Simplex(), max_iter=80, tol=1e-12).minimize(
        tf.Quadratic(op), _spread_start())
    assert got["n_iter"] == ref.n_iter
    np.testing.assert_allclose(got["x"], ref.x.numpy(), rtol=0, atol=1e-8)
    assert got["value"] == pytest.approx(ref.value, rel=1e-8)
    # O(d) per iteration: far less than one column of m floats per iteration.
    assert got["bytes"] / got["n_iter"] < 8 * M


def test_torch_path_matches_one_process(two_ranks):
    got = two_ranks["torch-path"]
    X, y = _data()
    ref = SVC(solver="partan", tol=1e-3, random_state=0).fit(X, y)
    distance = np.linalg.norm(got["alphas"][0] - ref.result_.x.numpy())
    assert distance <= _certified_distance(got["gap"][0], ref.result_.gap, 1.0)
    assert np.mean(got["predict"] == ref.predict(X)) >= 0.99


def test_time_limit_stops_all_ranks(two_ranks):
    got = two_ranks["time-limit"]
    assert got["status"] == "time_limit"
    assert got["n_iter"] <= 10  # stopped at the first check after the limit


def test_needs_an_initialized_group():
    from torchfw.distributed import Communicator, DistributedSVC

    if dist.is_initialized():  # pragma: no cover - only inside a launcher
        pytest.skip("a process group is already initialized")
    with pytest.raises(RuntimeError, match="init_process_group"):
        Communicator()
    with pytest.raises(ValueError, match="no distributed form"):
        DistributedSVC(solver="sfw").fit(np.zeros((4, 2)), [0, 1, 0, 1])


def test_shard_range_covers_everything_once():
    from torchfw.distributed import shard_range

    for n, world in [(10, 3), (2, 2), (7, 1), (100, 8)]:
        bounds = [shard_range(n, r, world) for r in range(world)]
        assert bounds[0][0] == 0 and bounds[-1][1] == n
        assert all(bounds[r][1] == bounds[r + 1][0] for r in range(world - 1))
        sizes = [b - a for a, b in bounds]
        assert max(sizes) - min(sizes) <= 1
