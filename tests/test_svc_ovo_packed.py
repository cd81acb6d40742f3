"""One-vs-one SVC in LIBSVM's packed layout: ``dual_coef_`` ``(k - 1, n_SV)`` through fit,
prediction, the state dict, the ``nn.Module`` head, and the memory of many small classes."""

import tracemalloc

import numpy as np
import pytest
import torch

import torchfw as tf
from torchfw.svm import _fit
from torchfw.svm._attrs import unpack_ovo
from torchfw.svm._multiclass import ovo_to_ovr, ovo_vote


def _blobs(m, k, seed=0, d=3):
    rng = np.random.default_rng(seed)
    centres = rng.normal(scale=3.0, size=(k, d))
    y = rng.integers(0, k, size=m)
    y[:k] = np.arange(k)
    return centres[y] + rng.normal(size=(m, d)), y


def _sklearn_state(sk, d):
    """A version-3 torchfw state holding a scikit-learn SVC's own packed model."""
    k = len(sk.classes_)
    return {"format": "torchfw.SVC", "version": 3,
            "params": dict(kernel="rbf", gamma=float(sk._gamma), dtype=torch.float64,
                           multi_class="ovo"),
            "classes": sk.classes_.tolist(), "gamma": float(sk._gamma), "n_features_in": d,
            "support": torch.from_numpy(sk.support_.astype(np.int64)),
            "n_support": torch.from_numpy(sk.n_support_.astype(np.int64)),
            "n_iter": torch.zeros(k * (k - 1) // 2, dtype=torch.int64),
            "support_vectors": torch.from_numpy(sk.support_vectors_),
            "dual_coef": torch.from_numpy(sk.dual_coef_),
            "intercept": torch.from_numpy(sk.intercept_), "multi_class_": "ovo"}


@pytest.mark.parametrize("k", [4, 6])
def test_packed_model_predicts_as_libsvm(k):
    # scikit-learn's (LIBSVM's) own packed coefficients, predicted by torchfw's packed path:
    # the pair values of svm_predict_values, both decision shapes, the votes and the head.
    from sklearn.svm import SVC as SkSVC

    X, y = _blobs(60 * k, k, seed=k)
    Xt, _ = _blobs(300, k, seed=k + 10)
    sk = SkSVC(C=3.0, gamma=0.4, tol=1e-10, decision_function_shape="ovo").fit(X, y)
    model = tf.SVC.from_state_dict(_sklearn_state(sk, X.shape[1]))
    assert model.dual_coef_.shape == (k - 1, len(sk.support_))
    model.decision_function_shape = "ovo"
    np.testing.assert_allclose(model.decision_function(Xt), sk.decision_function(Xt),
                               rtol=1e-10, atol=1e-10)
    model.decision_function_shape = sk.decision_function_shape = "ovr"
    np.testing.assert_allclose(model.decision_function(Xt), sk.decision_function(Xt),
                               rtol=1e-10, atol=1e-10)
    assert np.array_equal(model.predict(Xt), sk.predict(Xt))
    head = model.as_module()
    np.testing.assert_allclose(head(torch.from_numpy(Xt)).numpy(), sk.decision_function(Xt),
                               rtol=1e-10, atol=1e-10)


def test_fitted_packed_model_equals_its_pair_rows():
    X, y = _blobs(250, 5, seed=1)
    model = tf.SVC(multi_class="ovo", decision_function_shape="ovo", tol=1e-4,
                   random_state=0, dtype=torch.float64).fit(X, y)
    n_sv = len(model.support_)
    assert model.dual_coef_.shape == (4, n_sv) and model.intercept_.shape == (10,)
    assert model._coef.shape == (4, n_sv)  # the model itself holds no row per pair
    rows = model.problem_dual_coef_
    assert rows.shape == (10, n_sv)
    np.testing.assert_array_equal(rows, unpack_ovo(model.dual_coef_, model.n_support_))
    K = model._kernel.pairwise(torch.from_numpy(X), model._sv).numpy()
    reference = K @ rows.T + model.problem_intercept_
    values = model.decision_function(X)
    np.testing.assert_allclose(values, reference, rtol=1e-12, atol=1e-12)
    assert np.array_equal(model.predict(X), model.classes_[ovo_vote(reference, 5)])
    model.decision_function_shape = "ovr"
    np.testing.assert_allclose(model.decision_function(X), ovo_to_ovr(reference, 5),
                               rtol=1e-12, atol=1e-12)
    # each support vector's coefficients have its class's signs: >= 0 where it is first
    owner = np.repeat(np.arange(5), model.n_support_)
    first = np.arange(4)[:, None] >= owner[None, :]
    assert (model.dual_coef_[first] >= 0).all() and (model.dual_coef_[~first] <= 0).all()


def test_linear_coef_of_packed_model():
    X, y = _blobs(200, 4, seed=2)
    model = tf.SVC(kernel="linear", multi_class="ovo", decision_function_shape="ovo",
                   dtype=torch.float64, random_state=0).fit(X, y)
    assert model.coef_.shape == (6, X.shape[1])
    np.testing.assert_allclose(X @ model.coef_.T + model.intercept_,
                               model.decision_function(X), rtol=1e-10, atol=1e-10)


def test_state_round_trip_and_version_2_states():
    X, y = _blobs(200, 4, seed=3)
    model = tf.SVC(multi_class="ovo", random_state=0).fit(X, y)
    state = model.state_dict()
    assert state["version"] == 3 and tuple(state["dual_coef"].shape) == (3, len(model.support_))
    loaded = tf.SVC.from_state_dict(state)
    assert np.array_equal(loaded.decision_function(X), model.decision_function(X))
    # a version-2 state (one row per pair) loads into the packed layout
    old = dict(state, version=2,
               dual_coef=torch.from_numpy(unpack_ovo(state["dual_coef"].numpy(),
                                                     model.n_support_)))
    again = tf.SVC.from_state_dict(old)
    assert again._coef.shape == (3, len(model.support_))
    np.testing.assert_allclose(again.decision_function(X), model.decision_function(X),
                               rtol=1e-12, atol=1e-12)
    # n_support counts that no longer fit the coefficient signs (permuted) are refused
    counts = state["n_support"].flip(0)
    assert not torch.equal(counts, state["n_support"])
    with pytest.raises(ValueError, match="coefficient signs"):
        tf.SVC.from_state_dict(dict(state, n_support=counts))
    with pytest.raises(ValueError, match="rows"):
        tf.SVC.from_state_dict(dict(state, dual_coef=old["dual_coef"]))


def test_head_of_packed_model_equals_decision_function():
    X, y = _blobs(240, 5, seed=4)
    model = tf.SVC(multi_class="ovo", dtype=torch.float64, random_state=0).fit(X, y)
    head = model.as_module()
    assert head.packed and head.dual_coef.shape == (4, len(model.support_))
    Xt = torch.from_numpy(_blobs(100, 5, seed=5)[0])
    np.testing.assert_allclose(head(Xt).numpy(), model.decision_function(Xt.numpy()),
                               rtol=1e-10, atol=1e-10)
    assert np.array_equal(model.classes_[head.predict_index(Xt).numpy()],
                          model.predict(Xt.numpy()))
    rebuilt = tf.heads.KernelSVMHead.from_state_dict(head.state_dict())
    assert rebuilt.packed and torch.equal(rebuilt(Xt), head(Xt))
    scripted = torch.jit.script(head)
    torch.testing.assert_close(scripted(Xt), head(Xt))
    with pytest.raises(ValueError, match="n_support"):
        tf.heads.KernelSVMHead(model._sv, model._coef, model._bias, multi_class="ovo",
                               n_support=[1, 2, 3, 4, 5])


def test_small_pairs_in_blocks_give_the_one_by_one_model(monkeypatch):
    X, y = _blobs(60, 20, seed=6)  # pairs of ~6 examples: solved in compiled blocks
    batched = tf.SVC(multi_class="ovo", random_state=1).fit(X, y)
    assert type(batched.result_).__name__ == "BlockResults"
    monkeypatch.setattr(_fit, "solve_in_blocks", lambda *args, **kwargs: None)
    alone = tf.SVC(multi_class="ovo", random_state=1).fit(X, y)
    assert isinstance(alone.result_, list)
    assert np.array_equal(batched.dual_coef_, alone.dual_coef_)
    assert np.array_equal(batched.intercept_, alone.intercept_)
    assert np.array_equal(batched.support_, alone.support_)
    assert np.array_equal(batched.n_iter_, alone.n_iter_)
    first, last = batched.result_[0], batched.result_[-1]
    assert first.value == alone.result_[0].value and last.gap == alone.result_[-1].gap


@pytest.mark.parametrize("first_chunk", [None, 30])
def test_pairs_past_one_chunk_in_blocks_give_the_one_by_one_model(monkeypatch, first_chunk):
    # Pairs of ~100 examples: budgets (100 per example) far past the first chunk, solved in
    # blocks to the end of that chunk. With a first chunk of 30 iterations some pairs are still
    # running there: the block leaves them to the one-by-one path, which solves them again.
    from torchfw.optimizers import _rows

    if first_chunk is not None:
        monkeypatch.setattr(_rows, "FIRST_CHUNK", first_chunk)
    X, y = _blobs(400, 8, seed=3)
    X += np.random.default_rng(9).normal(scale=1.5, size=X.shape)  # overlapping classes
    batched = tf.SVC(multi_class="ovo", random_state=2).fit(X, y)
    results = batched.result_
    assert type(results).__name__ == "BlockResults"
    left = set(results.objects)  # pairs the blocks left to the one-by-one path
    assert (len(left) > 0) == (first_chunk is not None) and len(left) < len(results)
    assert all(results[k].n_iter > first_chunk for k in left)
    monkeypatch.setattr(_fit, "solve_in_blocks", lambda *args, **kwargs: None)
    alone = tf.SVC(multi_class="ovo", random_state=2).fit(X, y)
    assert np.array_equal(batched.dual_coef_, alone.dual_coef_)
    assert np.array_equal(batched.intercept_, alone.intercept_)
    assert np.array_equal(batched.support_, alone.support_)
    assert np.array_equal(batched.n_iter_, alone.n_iter_)
    for k in range(len(results)):
        assert results[k].value == alone.result_[k].value
        assert results[k].best_gap == alone.result_[k].best_gap


def test_many_small_classes_fit_in_bounded_memory():
    # 200 classes of 2 examples: 19,900 pairs. One row per pair over all examples (the
    # layout this replaced) allocated 20-60 MB NumPy arrays several times over.
    k = 200
    rng = np.random.default_rng(0)
    X = rng.normal(size=(2 * k, 10))
    y = np.repeat(np.arange(k), 2)
    tf.SVC(multi_class="ovo").fit(X[:8], y[:8])  # compiled code loaded first
    tracemalloc.start()
    try:
        model = tf.SVC(multi_class="ovo").fit(X, y)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 24 * 2**20, f"fit allocated {peak / 2**20:.0f} MB at its peak"
    assert model.dual_coef_.shape == (k - 1, 2 * k)
    assert (model.predict(X) == y).all()
