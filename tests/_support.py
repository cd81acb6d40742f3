"""Set-up shared by several test files: spawned gloo ranks, graded multiclass data and SVC fits
compared bit for bit, an independent simplex QP (an active-set method on KKT solves) and an
SVM dual point's relative gap on the exact float64 matrix.

Not a conftest: the helpers are imported by name (``from _support import ...``), so a test file
reads where its set-up comes from. pytest puts this folder on ``sys.path`` (rootdir-relative
imports), and processes spawned by :func:`spawn_ranks` inherit it, so workers defined in a test
module unpickle in the child.
"""

from __future__ import annotations

import pickle
import warnings
from contextlib import contextmanager

import numpy as np
import pytest
import torch

from torchfw.datasets import make_unscaled_classification
from torchfw.result import problem_results

WORLD = 2


@contextmanager
def gloo_rank(rank: int, world: int, store: str, out: str):
    """Join a gloo process group of ``world`` ranks through the file ``store``; yield a dict the
    rank fills, which rank 0 pickles to ``out`` on the way out, even when the body raises (the
    parent then reports what was recorded, and the group is always torn down)."""
    import torch.distributed as dist

    torch.set_num_threads(1)  # two ranks on a shared machine: one core each
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=world)
    results: dict = {}
    try:
        yield results
    finally:
        if rank == 0:
            with open(out, "wb") as fh:
                pickle.dump(results, fh)
        dist.destroy_process_group()


def spawn_ranks(worker, tmp_path_factory, name: str, world: int = WORLD) -> dict:
    """Run ``worker(rank, world, store, out)`` on ``world`` spawned processes and return what
    rank 0 recorded; skips when this torch has no gloo backend."""
    dist = pytest.importorskip("torch.distributed")
    if not (dist.is_available() and dist.is_gloo_available()):
        pytest.skip("needs torch.distributed with the gloo backend")
    mp = pytest.importorskip("torch.multiprocessing")
    path = tmp_path_factory.mktemp(name)
    out = path / "results.pkl"
    mp.spawn(worker, args=(world, str(path / "store"), str(out)), nprocs=world, join=True)
    with open(out, "rb") as fh:
        return pickle.load(fh)


def graded_classes(m: int, classes: int, seed: int = 0):
    """``m`` examples in 5 features with ``classes`` labels cut from a noisy linear score at its
    quantiles: classes of equal size whose neighbours overlap (pairs that need real solves)."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(m, 5))
    score = X[:, 0] + 0.5 * X[:, 1] + 0.6 * rng.normal(size=m)
    y = np.digitize(score, np.quantile(score, np.linspace(0, 1, classes + 1)[1:-1]))
    return X, y


def fit_recording(X, y, **kw):
    """``torchfw.SVC(random_state=0, **kw).fit(X, y)`` and the messages of every warning."""
    import torchfw as tf

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model = tf.SVC(random_state=0, **kw).fit(X, y)
    return model, [str(w.message) for w in caught]


def assert_same_fit(a, b, execution: str | None = None):
    """Two fitted SVCs are the same bits: coefficients, intercepts, iterations, support, every
    problem's final value and gaps, and its history (its last check for a one-vs-one pair solved
    in a compiled block, which keeps no other); with ``execution``, each problem ran that path."""
    assert np.array_equal(a.problem_dual_coef_, b.problem_dual_coef_)
    assert np.array_equal(a.problem_intercept_, b.problem_intercept_)
    assert np.array_equal(np.asarray(a.n_iter_), np.asarray(b.n_iter_))
    assert np.array_equal(np.asarray(a.support_), np.asarray(b.support_))
    for x, z in zip(problem_results(a.result_), problem_results(b.result_), strict=True):
        if execution is not None:
            assert x.info["execution"] == execution
        assert x.value == z.value and x.gap == z.gap and x.best_gap == z.best_gap
        if x.info.get("compiled block") or z.info.get("compiled block"):
            # a problem solved in a compiled block keeps its last check only
            # (torchfw.svm._pairs.BlockResults): the same one
            assert x.history.value[-1] == z.history.value[-1]
            assert x.history.gap[-1] == z.history.gap[-1]
            continue
        assert x.history.value == z.history.value and x.history.gap == z.history.gap
        assert x.history.steps == z.history.steps


def reference_qp(Q: np.ndarray, c: np.ndarray | None = None) -> np.ndarray:
    r""":math:`\min \tfrac12 a^\top Q a + c^\top a` over the simplex: start at the best vertex;
    on the working set ``S`` solve :math:`[Q_{SS}\ \mathbf 1; \mathbf 1^\top\ 0]` for the
    equality-constrained minimizer, step to it or to the first weight that reaches zero (then
    drop that atom), and add the atom of smallest gradient while it is below the multiplier."""
    m = Q.shape[0]
    c = np.zeros(m) if c is None else c
    j = int(np.argmin(0.5 * np.diag(Q) + c))
    a = np.zeros(m)
    a[j] = 1.0
    S = [j]
    for _ in range(50 * m):
        k = len(S)
        kkt = np.zeros((k + 1, k + 1))
        kkt[:k, :k] = Q[np.ix_(S, S)]
        kkt[:k, k] = kkt[k, :k] = 1.0
        z = np.linalg.solve(kkt, np.concatenate([-c[S], [1.0]]))[:k]
        if (z > 0).all():
            a[:] = 0.0
            a[S] = z
            g = Q @ a + c
            lam = a @ g
            j = int(np.argmin(np.where(a > 0, np.inf, g)))
            if not g[j] < lam - 1e-14 * max(1.0, abs(lam)):
                return a
            S.append(j)
            continue
        cur = a[S]
        d = z - cur
        ratios = np.where(d < 0, cur / np.where(d < 0, -d, 1.0), np.inf)
        r = int(np.argmin(ratios))
        a[S] = cur + ratios[r] * d
        a[S[r]] = 0.0
        S = [i for i in S if a[i] > 0]
    raise AssertionError("the reference did not finish")


def svm_relative_gap(model, X, y, C, gamma):
    """``(rho - min_i (K~ a)_i) / rho`` of the fitted dual point, on the float64 dual matrix
    ``K~ = yy' (K + 1) + I / C`` (the model's ``|dual_coef_|`` normalized to the simplex)."""
    s = np.where(y == model.classes_[1], 1.0, -1.0)
    d2 = ((X[:, None, :] - X[None, :, :]) ** 2).sum(-1)
    Q = np.outer(s, s) * (np.exp(-gamma * d2) + 1.0) + np.eye(len(y)) / C
    a = np.zeros(len(y))
    a[model.support_] = np.abs(model.dual_coef_[0])
    a /= a.sum()
    Qa = Q @ a
    rho = a @ Qa
    return (rho - Qa.min()) / rho


def unscaled(n=400, d=5, k=10, seed=0):
    """:func:`torchfw.datasets.make_unscaled_classification` as NumPy arrays: overlapping
    Gaussian classes rescaled per feature to integers in 0-100 (as pendigits' raw
    coordinates), whose dual BCD finds badly conditioned."""
    X, y = make_unscaled_classification(n, d, k, random_state=seed)
    return X.numpy(), y.numpy()
