"""Set-up shared by several test files: spawned gloo ranks, graded multiclass data and SVC fits
compared bit for bit.

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
