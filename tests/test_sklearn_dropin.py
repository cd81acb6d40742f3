"""torchfw.SVC as a drop-in for scikit-learn's SVC: attributes, layouts, habits and export.

Each test runs scikit-learn's own :class:`sklearn.svm.SVC` on the same data and checks that the
code written for it (types, shapes, scikit-learn's reconstruction idioms) works unchanged on
torchfw's model. The two models solve different problems (torchfw's is the L2-SVM with a
regularized bias), so numbers are compared where they must agree: layouts, counts, and each
model against its own decision function.
"""

from __future__ import annotations

import importlib.util
import warnings

import numpy as np
import pytest
import torch

sklearn = pytest.importorskip("sklearn")
sp = pytest.importorskip("scipy.sparse")

from sklearn.datasets import load_iris, make_blobs  # noqa: E402
from sklearn.metrics.pairwise import linear_kernel, rbf_kernel  # noqa: E402
from sklearn.svm import SVC as SkSVC  # noqa: E402

from torchfw import SVC, Lasso, WestonWatkinsSVC  # noqa: E402
from torchfw.distributed import DistributedSVC  # noqa: E402


def _data(k: int, n: int = 90, seed: int = 0):
    X, y = make_blobs(n, n_features=4, centers=k, cluster_std=2.5, random_state=seed)
    return X, y


def _ovo_values(clf, K: np.ndarray) -> np.ndarray:
    """scikit-learn's documented one-vs-one reconstruction from dual_coef_ and n_support_."""
    k = len(clf.classes_)
    dual = _dense(clf.dual_coef_)  # a SciPy matrix after a sparse fit, in both libraries
    start = np.concatenate([[0], np.cumsum(clf.n_support_)])
    out, p = [], 0
    for i in range(k):
        for j in range(i + 1, k):
            si, sj = slice(start[i], start[i + 1]), slice(start[j], start[j + 1])
            out.append(K[:, si] @ dual[j - 1, si] + K[:, sj] @ dual[i, sj] + clf.intercept_[p])
            p += 1
    return np.array(out).T


def _dense(a):
    return a.toarray() if sp.issparse(a) else np.asarray(a)


# -- items 1 and 2: namespaces and scikit-learn's layouts ------------------------------------

@pytest.mark.parametrize("k", [2, 3, 4])
@pytest.mark.parametrize("sparse", [False, True])
def test_one_vs_one_layout_is_scikit_learns(k, sparse):
    X, y = _data(k)
    X[np.abs(X) < 1.0] = 0.0
    Xin = sp.csr_matrix(X) if sparse else X
    ours = SVC(multi_class="ovo", gamma=0.1, random_state=0).fit(Xin, y)
    ref = SkSVC(gamma=0.1).fit(Xin, y)
    n_pairs = k * (k - 1) // 2
    for name in ("support_", "n_support_", "dual_coef_", "intercept_", "n_iter_",
                 "class_weight_", "fit_status_", "shape_fit_"):
        a, b = getattr(ours, name), getattr(ref, name)
        assert type(a) is type(b), name
        if isinstance(a, np.ndarray):
            assert a.dtype == b.dtype and a.ndim == b.ndim, name
    assert sp.issparse(ours.support_vectors_) == sparse == sp.issparse(ref.support_vectors_)
    assert ours.n_support_.shape == ref.n_support_.shape == (k,)
    assert ours.dual_coef_.shape == (k - 1, len(ours.support_))
    assert ours.intercept_.shape == ref.intercept_.shape == (n_pairs if k > 2 else 1,)
    assert ours.n_iter_.shape == ref.n_iter_.shape == (n_pairs if k > 2 else 1,)
    assert ours.shape_fit_ == ref.shape_fit_
    np.testing.assert_array_equal(ours.class_weight_, ref.class_weight_)
    # support_: class by class, ascending within a class; n_support_ counts them
    sv_class = np.searchsorted(ours.classes_, y[ours.support_])
    np.testing.assert_array_equal(sv_class, np.repeat(np.arange(k), ours.n_support_))
    for c in range(k):
        block = ours.support_[sv_class == c]
        assert (np.diff(block) > 0).all()
    np.testing.assert_array_equal(_dense(ours.support_vectors_), X[ours.support_].astype(
        np.float32).astype(np.float64))
    # scikit-learn's idiom reproduces both models' decision values
    for clf in (ours, ref):
        gamma = clf._gamma
        K = rbf_kernel(X, _dense(clf.support_vectors_), gamma=gamma)
        if k == 2:
            np.testing.assert_allclose(np.dot(K, _dense(clf.dual_coef_).T)[:, 0] + clf.intercept_,
                                       clf.decision_function(Xin), atol=1e-5)
        else:
            clf.set_params(decision_function_shape="ovo")
            np.testing.assert_allclose(_ovo_values(clf, K), clf.decision_function(Xin),
                                       atol=1e-5)


def test_torch_input_gives_torch_attributes_on_its_device():
    X, y = _data(3)
    ours = SVC(multi_class="ovo").fit(torch.from_numpy(X), torch.from_numpy(y))
    for name in ("support_vectors_", "dual_coef_", "intercept_", "problem_dual_coef_"):
        value = getattr(ours, name)
        assert isinstance(value, torch.Tensor) and value.device.type == "cpu", name
    assert isinstance(ours.support_, np.ndarray)  # integer bookkeeping stays NumPy
    numpy_model = SVC(multi_class="ovo").fit(X, y)
    np.testing.assert_allclose(ours.dual_coef_.numpy(), numpy_model.dual_coef_)
    # the namespace survives saving
    loaded = SVC.from_state_dict(numpy_model.state_dict())
    assert isinstance(loaded.dual_coef_, np.ndarray)
    np.testing.assert_array_equal(loaded.dual_coef_, numpy_model.dual_coef_)
    np.testing.assert_array_equal(loaded.support_, numpy_model.support_)
    assert isinstance(SVC.from_state_dict(ours.state_dict()).dual_coef_, torch.Tensor)


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_cuda_input_gives_cuda_attributes():
    X, y = _data(3)
    ours = SVC(multi_class="ovo").fit(torch.from_numpy(X).cuda(), y)
    assert ours.dual_coef_.is_cuda and ours.support_vectors_.is_cuda and ours.intercept_.is_cuda


def test_one_vs_rest_refuses_scikit_learn_only_attributes():
    X, y = _data(4)
    ours = SVC(multi_class="ovr").fit(X, y)
    for name in ("dual_coef_", "intercept_"):
        with pytest.raises(AttributeError, match="one-vs-rest"):
            getattr(ours, name)
    assert ours.problem_dual_coef_.shape == (4, len(ours.support_))
    assert ours.problem_intercept_.shape == (4,)
    assert ours.n_support_.shape == (4,) and ours.n_support_.sum() == len(ours.support_)
    K = rbf_kernel(X, ours.support_vectors_, gamma=ours.gamma_)
    np.testing.assert_allclose(K @ ours.problem_dual_coef_.T + ours.problem_intercept_,
                               ours.decision_function(X), atol=1e-5)
    # set_params after fit cannot turn one-vs-rest columns into pair values
    ours.set_params(decision_function_shape="ovo")
    with pytest.raises(ValueError, match="one-vs-rest"):
        ours.decision_function(X)


def test_binary_n_iter_is_an_array():
    X, y = _data(2)
    assert SVC().fit(X, y).n_iter_.shape == SkSVC().fit(X, y).n_iter_.shape == (1,)


def test_tags_are_truthful():
    tags = SVC().__sklearn_tags__()
    assert tags.input_tags.sparse and not tags.non_deterministic
    # attributes follow the namespace, outputs do not: not scikit-learn's array-API support
    X, y = _data(3)
    fitted = SVC().fit(torch.from_numpy(X), y)
    assert isinstance(fitted.decision_function(torch.from_numpy(X)), np.ndarray)
    assert not tags.array_api_support
    assert SVC(random_state=np.random.RandomState(0)).__sklearn_tags__().non_deterministic
    assert SVC(kernel="precomputed").__sklearn_tags__().input_tags.pairwise
    assert SVC(kernel=linear_kernel).__sklearn_tags__().input_tags.string
    dist = DistributedSVC().__sklearn_tags__()
    assert not dist.array_api_support and not dist.non_deterministic
    assert WestonWatkinsSVC().__sklearn_tags__().non_deterministic  # random block orders
    assert not WestonWatkinsSVC(random_state=0).__sklearn_tags__().non_deterministic
    assert not WestonWatkinsSVC().__sklearn_tags__().array_api_support  # torch attributes
    assert not Lasso().__sklearn_tags__().non_deterministic
    assert isinstance(WestonWatkinsSVC(random_state=0).fit(X, y).coef_, torch.Tensor)


# -- item 3: attributes and parameters -------------------------------------------------------

@pytest.mark.parametrize("k", [2, 3])
def test_coef_for_a_linear_kernel(k):
    X, y = _data(k)
    ours = SVC(kernel="linear", multi_class="ovo").fit(X, y)
    ref = SkSVC(kernel="linear").fit(X, y)
    assert ours.coef_.shape == ref.coef_.shape
    assert not ours.coef_.flags.writeable
    with pytest.raises(AttributeError):
        ours.coef_ = np.zeros_like(ours.coef_)
    ours.set_params(decision_function_shape="ovo")
    np.testing.assert_allclose(X @ ours.coef_.T + ours.intercept_,
                               ours.decision_function(X).reshape(len(X), -1), atol=1e-4)
    with pytest.raises(AttributeError, match="linear kernel"):
        SVC().fit(X, y).coef_  # noqa: B018
    sparse = SVC(kernel="linear", multi_class="ovo").fit(sp.csr_matrix(X), y)
    assert sp.issparse(sparse.coef_) == sp.issparse(SkSVC(kernel="linear")
                                                    .fit(sp.csr_matrix(X), y).coef_)


def test_class_weight_shrinking_and_random_state_instances():
    X, y = _data(3)
    cw = {0: 2.0, 2: 0.5}
    for class_weight in ("balanced", cw):
        np.testing.assert_allclose(SVC(class_weight=class_weight).fit(X, y).class_weight_,
                                   SkSVC(class_weight=class_weight).fit(X, y).class_weight_)
    assert SVC(shrinking=False).fit(X, y).get_params()["shrinking"] is False
    with pytest.raises(ValueError, match="shrinking"):
        SVC(shrinking="yes").fit(X, y)
    model = SVC(random_state=np.random.RandomState(0)).fit(X, y)
    assert model.score(X, y) > 0.8
    with pytest.raises(ValueError, match="random_state"):
        SVC(random_state="seed").fit(X, y)


def test_hard_margin():
    X, y = make_blobs(80, centers=2, cluster_std=0.6, random_state=0)
    ours = SVC(C=np.inf, kernel="linear").fit(X, y)
    assert ours.fit_status_ == 0 and ours.score(X, y) == 1.0
    # every training point on or outside the margin (margin 1, up to the solver's tol)
    margins = ours.decision_function(X) * np.where(y == 1, 1, -1)
    assert margins.min() > 1.0 - 0.11
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(ValueError, match="C=inf"):
            SVC(C=np.inf, kernel="linear", max_iter=2000).fit(np.r_[X, X[:1]],
                                                              np.r_[y, 1 - y[:1]])


def test_negative_sample_weight_drops_the_sample():
    X, y = _data(3)
    w = np.ones(len(y))
    w[:10] = -1.0
    zero = np.where(w < 0, 0.0, w)
    ours = SVC(random_state=0).fit(X, y, sample_weight=w)
    dropped = SVC(random_state=0).fit(X, y, sample_weight=zero)
    assert ours.support_.min() >= 10
    np.testing.assert_array_equal(ours.support_, dropped.support_)
    np.testing.assert_array_equal(ours.decision_function(X), dropped.decision_function(X))
    # scikit-learn: a negative weight is a weight of 0 too
    np.testing.assert_allclose(SkSVC().fit(X, y, sample_weight=w).decision_function(X),
                               SkSVC().fit(X, y, sample_weight=zero).decision_function(X))
    with pytest.raises(ValueError, match="zero"):
        SVC().fit(X, y, sample_weight=-np.ones(len(y)))


def test_probability_with_a_class_of_one_example():
    X, y = _data(3)
    y = y.copy()
    y[0] = 7
    ours = SVC(probability=True, random_state=0).fit(X, y)
    ref = SkSVC(probability=True, random_state=0).fit(X, y)
    p, q = ours.predict_proba(X), ref.predict_proba(X)
    assert p.shape == q.shape == (len(X), 4)
    np.testing.assert_allclose(p.sum(1), 1.0)
    assert (p.argmax(1) == q.argmax(1)).mean() > 0.9


def test_callable_kernel_on_strings():
    words = ["aab", "aba", "abb", "bba", "bab", "baa", "aaa", "bbb", "aabb", "bbaa"] * 3
    labels = np.array([w.count("a") > w.count("b") for w in words])

    def matches(A, B):  # positions where two words agree: a kernel on strings
        return np.array([[sum(a == b for a, b in zip(s, t)) for t in B] for s in A], float)

    ours = SVC(kernel=matches).fit(words, labels)
    ref = SkSVC(kernel=matches).fit(words, labels)
    test = ["aaab", "bbba", "abab", "ba"]
    np.testing.assert_array_equal(ours.predict(words), labels)
    np.testing.assert_array_equal(ref.predict(words), labels)
    assert ours.predict(test).shape == ref.predict(test).shape == (4,)
    K = matches(test, ours.support_vectors_)
    np.testing.assert_allclose(K @ ours.dual_coef_[0] + ours.intercept_,
                               ours.decision_function(test), atol=1e-9)
    assert ours.support_vectors_ == [words[i] for i in ours.support_]
    assert SVC(kernel=matches, probability=True).fit(words, labels).predict_proba(test).shape \
        == (4, 2)


# -- item 4: silent wrong answers ------------------------------------------------------------

def test_probabilities_respect_sample_weight():
    X, y = load_iris(return_X_y=True)
    w = np.full(len(y), 5.0)
    a = SVC(C=10.0, probability=True, random_state=0).fit(X, y)
    b = SVC(C=2.0, probability=True, random_state=0).fit(X, y, sample_weight=w)
    np.testing.assert_allclose(a.decision_function(X), b.decision_function(X), atol=1e-9)
    np.testing.assert_allclose(a.predict_proba(X), b.predict_proba(X), atol=1e-9)


# -- item 5: probabilities the scikit-learn 1.9 way ------------------------------------------

def test_calibrated_classifier_cv_is_the_probability_route():
    from sklearn.calibration import CalibratedClassifierCV
    from sklearn.metrics import log_loss
    from sklearn.model_selection import train_test_split

    X, y = load_iris(return_X_y=True)
    Xtr, Xte, ytr, yte = train_test_split(X, y, test_size=0.4, random_state=0, stratify=y)
    ours = CalibratedClassifierCV(SVC(), ensemble=False).fit(Xtr, ytr)
    p = ours.predict_proba(Xte)
    np.testing.assert_allclose(p.sum(1), 1.0)
    ref = CalibratedClassifierCV(SkSVC(), ensemble=False).fit(Xtr, ytr).predict_proba(Xte)
    assert log_loss(yte, p) < 1.5 * log_loss(yte, ref) + 0.05
    assert (p.argmax(1) == yte).mean() > 0.9


# -- item 6: export ---------------------------------------------------------------------------

@pytest.mark.parametrize("multi_class", ["ovo", "ovr"])
def test_head_through_torch_export_with_a_dynamic_batch(multi_class):
    X, y = load_iris(return_X_y=True)
    model = SVC(multi_class=multi_class, dtype=torch.float64).fit(X, y)
    head = model.as_module().eval()
    batch = torch.export.Dim("batch")
    program = torch.export.export(head, (torch.from_numpy(X[:8]),),
                                  dynamic_shapes=({0: batch},))
    for rows in (1, 37, 150):
        out = program.module()(torch.from_numpy(X[:rows])).numpy()
        np.testing.assert_allclose(out, model.decision_function(X[:rows]), atol=1e-9)


@pytest.mark.skipif(not all(importlib.util.find_spec(m) for m in
                            ("onnx", "onnxscript", "onnxruntime")),
                    reason="needs onnx, onnxscript and onnxruntime (the test extra)")
def test_head_through_onnx_runs_in_onnxruntime(tmp_path):
    import onnxruntime

    X, y = load_iris(return_X_y=True)
    model = SVC(multi_class="ovo", dtype=torch.float64).fit(X, y)
    head = model.as_module().eval()
    path = tmp_path / "svc.onnx"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(head, (torch.from_numpy(X[:8]),), str(path), dynamo=True,
                          dynamic_shapes=({0: torch.export.Dim("batch")},), verbose=False)
    session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    name = session.get_inputs()[0].name
    for rows in (1, 150):
        out = session.run(None, {name: X[:rows]})[0]
        np.testing.assert_allclose(out, model.decision_function(X[:rows]), atol=1e-5)


@pytest.mark.parametrize("k", [3, 4])
def test_multiclass_libsvm_model_files_both_ways(tmp_path, k):
    svmutil = pytest.importorskip("libsvm.svmutil")
    from torchfw.io.libsvm_model import read_libsvm_model, write_libsvm_model

    X, y = _data(k)
    labels = (y + 1).tolist()
    rows = [{j + 1: float(v) for j, v in enumerate(r)} for r in X]
    # ours -> LIBSVM
    ours = SVC(multi_class="ovo", gamma=0.1, dtype=torch.float64).fit(X, np.array(labels))
    path = tmp_path / "ours.model"
    write_libsvm_model(ours, path)
    theirs = svmutil.svm_load_model(str(path))
    pred, _, dec = svmutil.svm_predict(labels, rows, theirs, "-q")
    np.testing.assert_array_equal(np.array(pred), ours.predict(X))
    order = theirs.get_labels()
    ours.set_params(decision_function_shape="ovo")
    mine = ours.decision_function(X)
    # LIBSVM's pair (a, b) of its label positions, positive for label[a]
    col = 0
    classes = list(ours.classes_)
    for a in range(k):
        for b in range(a + 1, k):
            i, j = classes.index(order[a]), classes.index(order[b])
            p = [(s, t) for s in range(k) for t in range(s + 1, k)].index((min(i, j), max(i, j)))
            sign = 1.0 if i < j else -1.0
            np.testing.assert_allclose(np.array(dec)[:, col], sign * mine[:, p], atol=1e-9)
            col += 1
    # LIBSVM -> ours
    trained = svmutil.svm_train(labels, rows, "-s 0 -t 2 -g 0.1 -c 2 -q")
    path2 = tmp_path / "libsvm.model"
    svmutil.svm_save_model(str(path2), trained)
    read = read_libsvm_model(path2)
    pred2, _, _ = svmutil.svm_predict(labels, rows, trained, "-q")
    np.testing.assert_array_equal(read.predict(X), np.array(pred2))
    their_labels = trained.get_labels()
    per_label = {their_labels[a]: trained.nSV[a] for a in range(k)}
    assert read.n_support_.tolist() == [per_label[c] for c in read.classes_]
    assert read.dual_coef_.shape == (k - 1, trained.get_nr_sv())


# -- item 7: determinism ----------------------------------------------------------------------

def test_default_fits_are_deterministic():
    X, y = load_iris(return_X_y=True)
    a, b = SVC().fit(X, y), SVC().fit(X, y)
    np.testing.assert_array_equal(a.decision_function(X), b.decision_function(X))
    np.testing.assert_array_equal(a.support_, b.support_)
    # a RandomState draws a new seed per fit, as in scikit-learn
    rs = np.random.RandomState(0)
    c, d = SVC(random_state=rs).fit(X, y), SVC(random_state=rs).fit(X, y)
    assert c._fit_seed != d._fit_seed
