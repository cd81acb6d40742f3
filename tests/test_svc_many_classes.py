"""SVC with many classes: tiny one-vs-one pairs and wide sparse examples (sector's case)."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
import torch

import torchfw as tf
from torchfw.svm._kernel_cpu import HAVE_NUMBA
from torchfw.svm._multiclass import OVR_MAX, TINY_PAIR, resolve_scheme
from torchfw.svm._plan import resolve_plan

pytestmark = pytest.mark.filterwarnings("ignore:SVC solver")


def _classes(k, per_class, d=20, seed=0, spread=1.5):
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(k, d))
    y = np.repeat(np.arange(k), per_class)
    return centres[y] + spread * rng.normal(size=(k * per_class, d)), y


def test_auto_takes_one_vs_rest_for_tiny_pairs():
    # sector: 6,412 examples of 105 classes (pairs of ~122); letter: 15,000 of 26 (~1,150).
    assert resolve_scheme("auto", 6412, 105, "ovr") == "ovr"
    assert resolve_scheme("auto", 15000, 26, "ovr") == "ovo"
    assert resolve_scheme("auto", OVR_MAX + 1, 200, "ovr") == "ovo"  # no shared matrix
    assert resolve_scheme("auto", 6412, 105, "ovo") == "ovo"  # pair values asked for
    assert resolve_scheme("ovo", 6412, 105, "ovr") == "ovo"
    per_class = TINY_PAIR // 2 - 5  # pairs just under TINY_PAIR, over OVO_FROM examples in all
    X, y = _classes(16, per_class, d=5, spread=0.3)
    assert X.shape[0] >= 1500
    model = tf.SVC(tol=0.5).fit(X, y)
    assert model.multi_class_ == "ovr" and model.decision_function(X[:3]).shape == (3, 16)
    assert model.score(X, y) > 0.9


def _wide_sparse(m=240, k=6, width=1_200_000, seed=0):
    # Few nonzeros spread over so many columns that a dense copy (m x width float32: 1.15 GB)
    # exceeds the operator's memory budget (1 GB), as sector's 55,197 tf-idf columns do.
    rng = np.random.default_rng(seed)
    y = np.arange(m) % k
    used = rng.choice(width, size=400, replace=False)
    rows, cols, vals = [], [], []
    for i in range(m):
        own = used[(y[i] * 50 + rng.choice(80, size=12, replace=False)) % used.size]
        rows += [i] * own.size
        cols += own.tolist()
        vals += rng.uniform(0.2, 1.0, size=own.size).tolist()
    X = sp.csr_matrix((vals, (rows, cols)), shape=(m, width), dtype=np.float64)
    X.sum_duplicates()
    return X, y, np.unique(X.indices)


@pytest.mark.skipif(not HAVE_NUMBA, reason="the compiled path needs numba")
def test_wide_sparse_examples_take_the_compiled_path():
    X, y, used = _wide_sparse()
    params = dict(multi_class="ovo", decision_function_shape="ovo", tol=1e-6, random_state=0)
    model = tf.SVC(**params).fit(X, y)
    # Its matrix came from the sparse product, not the lazy path's columns.
    assert all(r.info["engine"] == "compiled whole solve" for r in model.result_)
    # The same model as on the columns that hold values (a dense copy fits the budget there),
    # up to the rounding of the kernel values: solved tightly, the pair values agree.
    narrow = tf.SVC(gamma=model.gamma_, **params).fit(X[:, used], y)
    assert narrow.result_[0].info["matrix_bytes"] == model.result_[0].info["matrix_bytes"]
    np.testing.assert_allclose(model.decision_function(X), narrow.decision_function(X[:, used]),
                               atol=1e-3)
    assert np.array_equal(model.predict(X), narrow.predict(X[:, used]))


@pytest.mark.skipif(not HAVE_NUMBA, reason="the compiled path needs numba")
@pytest.mark.parametrize("kernel", ["rbf", "linear", "poly", "sigmoid"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_sparse_matrix_is_the_kernel_plus_one(kernel, dtype, monkeypatch):
    from torchfw.svm import _sparse_gram
    from torchfw.svm.kernels import make_kernel
    from torchfw.utils.data import as_matrix

    monkeypatch.setattr(_sparse_gram, "BLOCK_ROWS", 7)  # several blocks, a ragged last one
    X, y, _ = _wide_sparse(m=45, width=3000)
    Xt = as_matrix(X, dtype=dtype)
    kern = make_kernel(kernel, 0.3, 3, 0.5)
    plan = resolve_plan(tf.SVC(kernel=kernel, gamma=0.3, coef0=0.5), n_examples=45, kernel=kern,
                        dtype=dtype, device=torch.device("cpu"))
    C = torch.linspace(1.0, 3.0, 45, dtype=torch.float64)
    (P, cache), diag, inv_c = _sparse_gram.sparse_plain_problem(plan, Xt, C)
    assert cache is None and P.dtype == (np.float64 if dtype == torch.float64 else np.float32)
    dense = torch.from_numpy(X.toarray()).to(torch.float64)
    expected = kern.pairwise(dense, dense).numpy() + 1.0
    tol = 1e-12 if dtype == torch.float64 else 2e-5
    np.testing.assert_allclose(P, expected, rtol=tol, atol=tol)
    np.testing.assert_allclose(inv_c, 1.0 / C.numpy(), rtol=1e-6)
    np.testing.assert_allclose(diag, np.diag(expected) + 1.0 / C.numpy(), rtol=tol, atol=tol)


@pytest.mark.skipif(not HAVE_NUMBA, reason="the compiled path needs numba")
def test_pair_over_the_cache_is_compiled_on_a_cache_of_its_rows():
    # shuttle's case: one class far larger than the others, so that the pairs with it exceed
    # cache_size. They are solved compiled on a cache of their rows (the other pairs on their
    # own matrices), with the iterates of the lazy path, where they all used to go.
    rng = np.random.default_rng(0)
    y = np.repeat([0, 1, 2, 3], [1100, 60, 40, 30])
    X = rng.normal(size=(3, 4))[np.minimum(y, 2)] * 2 + rng.normal(size=(y.size, 4))
    params = dict(cache_size=2.0, decision_function_shape="ovo", random_state=0)
    model = tf.SVC(**params).fit(X, y)
    big = [r.info for r, n in zip(model.result_, (1160, 1140, 1130, 100, 90, 70)) if n > 1000]
    assert all(i["engine"] == "compiled whole solve" and i["cached_rows"] > 0 for i in big)
    assert all(r.info["engine"] == "compiled whole solve" for r in model.result_)
    lazy = tf.SVC(dense=False, **params).fit(X, y)
    assert np.array_equal(model.n_iter_, lazy.n_iter_)
    np.testing.assert_allclose(model.decision_function(X), lazy.decision_function(X),
                               rtol=1e-5, atol=1e-5)


@pytest.mark.skipif(not HAVE_NUMBA, reason="the compiled path needs numba")
def test_matrix_rows_are_handed_out_in_small_blocks(monkeypatch):
    # Two threads on two halves of the rows: when another job takes one core, its half waits,
    # and the matrix takes longer than on one thread. The rows go out in many blocks instead,
    # taken in turn by the free threads; the matrix keeps its bits.
    from torchfw.svm import _matrix
    from torchfw.svm.kernels import SVMDualOperator, make_kernel

    X = torch.from_numpy(np.random.default_rng(0).normal(size=(300, 5)))
    op = SVMDualOperator(X, torch.ones(300, dtype=torch.float64), make_kernel("rbf", 0.3, 3, 0),
                         1.0, dtype=torch.float32)
    one = _matrix.plain_kernel_matrix(op, threads=1)
    seen = []
    real = _matrix.parallel_map

    def recording(fn, items, threads, **kw):
        items = list(items)
        seen.append((len(items), threads, items))
        return real(fn, items, threads, **kw)

    monkeypatch.setattr(_matrix, "parallel_map", recording)
    two = _matrix.plain_kernel_matrix(op, threads=2)
    (n_blocks, threads, bounds), = seen
    assert threads == 2 and n_blocks == 2 * _matrix.BLOCKS_PER_THREAD >= 8
    assert max(hi - lo for lo, hi in bounds) <= 300 // n_blocks + 1
    assert np.array_equal(one, two)
