"""SVC(kernel="precomputed") and callable kernels, against the built-in kernels and sklearn."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import torchfw as tf
from torchfw.svm import _dense as D
from torchfw.svm.kernels import SVMDualOperator, make_kernel

pytestmark = [pytest.mark.skipif(not D.K.HAVE_NUMBA, reason="custom kernels need numba"),
              pytest.mark.filterwarnings("ignore:SVC solver")]

GAMMA = 0.05


def _blobs(m=240, classes=3, d=6, seed=0):
    """Well-separated classes (so that predictions cannot hinge on rounding)."""
    centers = 4.0 * np.random.default_rng(0).normal(size=(classes, d))  # one set per classes
    rng = np.random.default_rng(seed + 1)
    y = np.arange(m) % classes
    X = (centers[y] + rng.normal(size=(m, d))).astype(np.float32)
    return X, y


def _own_rbf(A, B):
    """torchfw's own float32 RBF kernel matrix (the values the built-in path computes)."""
    kernel = make_kernel("rbf", GAMMA)
    return kernel.pairwise(torch.as_tensor(A), torch.as_tensor(B)).numpy()


def _gram(X):
    """The training Gram matrix with the very bits the built-in RBF fit computes.

    The compiled path's ``K + 1`` minus 1 is exact in float32 (Sterbenz), and adding the 1
    back in the precomputed fit restores it bit for bit: the two fits read the same rows.
    """
    op = SVMDualOperator(torch.as_tensor(X), torch.ones(len(X), dtype=torch.float64),
                         make_kernel("rbf", GAMMA), 1.0)
    return D.plain_kernel_matrix(op) - np.float32(1.0)


def _sk_rbf(A, B):
    from sklearn.metrics.pairwise import rbf_kernel

    return rbf_kernel(A, B, gamma=GAMMA)


@pytest.mark.parametrize("classes, scheme", [(2, "ovr"), (3, "ovr"), (3, "ovo")])
def test_precomputed_equals_builtin_rbf(classes, scheme):
    X, y = _blobs(classes=classes)
    Xt, _ = _blobs(60, classes=classes, seed=1)
    ref = tf.SVC(gamma=GAMMA, multi_class=scheme, random_state=0).fit(X, y)
    # the built-in fit's own kernel values: the same problem, the same compiled iterates
    model = tf.SVC(kernel="precomputed", multi_class=scheme, random_state=0)
    model.fit(_gram(X), y)
    np.testing.assert_array_equal(model.support_, ref.support_)
    np.testing.assert_array_equal(model.n_iter_, ref.n_iter_)
    # the built-in fit takes the diagonal from the kernel's formula (RBF: exactly 1), the
    # precomputed one from the matrix (exp of a rounded 0): a float32 rounding apart
    np.testing.assert_allclose(model.problem_dual_coef_, ref.problem_dual_coef_, rtol=1e-5,
                               atol=1e-7)
    assert model.support_vectors_.shape == (0, 0)  # as scikit-learn
    K_test = _own_rbf(Xt, X)
    np.testing.assert_allclose(model.decision_function(K_test), ref.decision_function(Xt),
                               atol=1e-5)
    np.testing.assert_array_equal(model.predict(K_test), ref.predict(Xt))
    # scikit-learn's float64 kernel values: another rounding, the same model within tol
    sk = tf.SVC(kernel="precomputed", multi_class=scheme, random_state=0, tol=1e-3)
    sk.fit(_sk_rbf(X, X), y)
    tight = tf.SVC(gamma=GAMMA, multi_class=scheme, random_state=0, tol=1e-3).fit(X, y)
    np.testing.assert_allclose(sk.decision_function(_sk_rbf(Xt, X)),
                               tight.decision_function(Xt), atol=5e-3)
    np.testing.assert_array_equal(sk.predict(_sk_rbf(Xt, X)), tight.predict(Xt))


@pytest.mark.parametrize("classes, scheme", [(2, "ovr"), (3, "ovr"), (3, "ovo")])
def test_callable_equals_builtin_rbf(classes, scheme):
    X, y = _blobs(classes=classes)
    Xt, _ = _blobs(60, classes=classes, seed=1)
    ref = tf.SVC(gamma=GAMMA, multi_class=scheme, random_state=0).fit(X, y)
    calls = []

    def kernel(A, B):
        calls.append((type(A), A.shape, B.shape))
        if A.shape == B.shape and np.array_equal(A, B):  # training: the built-in fit's bits
            return _gram(A)
        return _own_rbf(A, B)

    model = tf.SVC(kernel=kernel, multi_class=scheme, random_state=0).fit(X, y)
    assert calls[0] == (np.ndarray, X.shape, X.shape)  # the Gram matrix of the training data
    np.testing.assert_array_equal(model.support_, ref.support_)
    np.testing.assert_array_equal(model.n_iter_, ref.n_iter_)
    np.testing.assert_array_equal(model.support_vectors_, X[model.support_])
    np.testing.assert_allclose(model.decision_function(Xt), ref.decision_function(Xt),
                               atol=1e-5)
    np.testing.assert_array_equal(model.predict(Xt), ref.predict(Xt))
    # prediction evaluates the kernel against the support vectors only
    assert calls[-1][2] == (len(model.support_), X.shape[1])
    assert model.score(Xt, model.predict(Xt)) == 1.0
    # scikit-learn's float64 kernel as the function: the same model within the tolerance
    tight = tf.SVC(gamma=GAMMA, multi_class=scheme, random_state=0, tol=1e-3).fit(X, y)
    sk = tf.SVC(kernel=_sk_rbf, multi_class=scheme, random_state=0, tol=1e-3).fit(X, y)
    np.testing.assert_allclose(sk.decision_function(Xt), tight.decision_function(Xt),
                               atol=5e-3)
    np.testing.assert_array_equal(sk.predict(Xt), tight.predict(Xt))


def test_sample_weight_and_zero_weights():
    X, y = _blobs(classes=3)
    rng = np.random.default_rng(3)
    w = rng.uniform(0.2, 3.0, size=len(y))
    w[::7] = 0.0  # left out of the problem: rows AND columns of the Gram matrix
    ref = tf.SVC(gamma=GAMMA, random_state=0).fit(X, y, sample_weight=w)
    model = tf.SVC(kernel="precomputed", random_state=0).fit(_gram(X), y, sample_weight=w)
    np.testing.assert_array_equal(model.support_, ref.support_)  # indices into all of X
    assert model.n_features_in_ == len(y)  # K_test lists every training example
    Xt, _ = _blobs(40, seed=5)
    np.testing.assert_allclose(model.decision_function(_own_rbf(Xt, X)),
                               ref.decision_function(Xt), atol=1e-5)
    assert not np.isin(np.flatnonzero(w == 0), model.support_).any()
    # a weight changes the model (the weights reach the problem)
    plain = tf.SVC(kernel="precomputed", random_state=0).fit(_own_rbf(X, X), y)
    assert not np.allclose(plain.decision_function(_own_rbf(Xt, X)),
                           model.decision_function(_own_rbf(Xt, X)))


def test_digits_accuracy_close_to_sklearn():
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split
    from sklearn.svm import SVC as SkSVC

    X, y = load_digits(return_X_y=True)
    X = X / 16.0
    Xa, Xb, ya, yb = train_test_split(X, y, test_size=0.3, random_state=0)
    K, K_test = Xa @ Xa.T, Xb @ Xa.T  # the linear kernel
    # one-vs-one, scikit-learn's scheme (one-vs-rest linear is weaker here for both kernels:
    # 95.6% as kernel="linear" gets)
    ours = tf.SVC(kernel="precomputed", multi_class="ovo", random_state=0).fit(K, ya)
    theirs = SkSVC(kernel="precomputed").fit(K, ya).score(K_test, yb)
    assert ours.score(K_test, yb) >= theirs - 0.01, (ours.score(K_test, yb), theirs)
    builtin = tf.SVC(kernel="linear", multi_class="ovo", random_state=0).fit(Xa, ya)
    assert (ours.predict(K_test) == builtin.predict(Xb)).mean() > 0.995


def test_probability_slices_gram_rows_and_columns():
    X, y = _blobs(classes=3)
    Xt, yt = _blobs(60, classes=3, seed=1)
    ref = tf.SVC(gamma=GAMMA, probability=True, random_state=0).fit(X, y)
    model = tf.SVC(kernel="precomputed", probability=True, random_state=0).fit(_gram(X), y)
    # the folds are the same examples: same sigmoids as the built-in kernel's
    np.testing.assert_allclose(model.probA_, ref.probA_, rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(model.probB_, ref.probB_, rtol=1e-4, atol=1e-6)
    proba = model.predict_proba(_own_rbf(Xt, X))
    np.testing.assert_allclose(proba, ref.predict_proba(Xt), atol=1e-4)
    assert (proba.argmax(1) == yt).mean() > 0.9


def test_bad_shapes_and_values():
    X, y = _blobs(60, classes=2)
    K = _own_rbf(X, X)
    with pytest.raises(ValueError, match="square.*60 x 59"):
        tf.SVC(kernel="precomputed").fit(K[:, :59], y)
    bad = K.copy()
    bad[3, 4] = np.nan
    with pytest.raises(ValueError, match="NaN|finite"):
        tf.SVC(kernel="precomputed").fit(bad, y)
    skew = K.copy()
    skew[0, 1] += 1.0
    with pytest.raises(ValueError, match="not symmetric"):
        tf.SVC(kernel="precomputed").fit(skew, y)
    model = tf.SVC(kernel="precomputed").fit(K, y)
    with pytest.raises(ValueError, match=r"\(n_samples, 60\).*got 59 columns"):
        model.predict(K[:5, :59])
    with pytest.raises(ValueError, match="unknown kernel"):
        tf.SVC(kernel="precomputd").fit(K, y)


@pytest.mark.parametrize("output, match", [
    (lambda A, B: np.ones((3, 3)), r"shape \(3, 3\) for inputs of 60 and 60 rows"),
    (lambda A, B: np.full((len(A), len(B)), np.inf), "NaN or infinite"),
    (lambda A, B: [["a"] * len(B)] * len(A), "not an array of numbers"),
])
def test_bad_callable_output(output, match):
    X, y = _blobs(60, classes=2)
    with pytest.raises(ValueError, match=match):
        tf.SVC(kernel=output).fit(X, y)


def test_callable_output_checked_at_predict():
    X, y = _blobs(60, classes=2)
    state = {"fit": True}

    def kernel(A, B):
        return _own_rbf(A, B) if state["fit"] else np.zeros((1, 1))

    model = tf.SVC(kernel=kernel).fit(X, y)
    state["fit"] = False
    with pytest.raises(ValueError, match="returned an array of shape"):
        model.predict(X[:10])


def test_matrix_must_fit_cache_size():
    X, y = _blobs(600, classes=2)
    K = _own_rbf(X, X)  # 600 x 600 float32 = 1.37 MB
    with pytest.raises(ValueError, match=r"1.4 MB.*cache_size=1.*cache_size >= 2"):
        tf.SVC(kernel="precomputed", cache_size=1).fit(K, y)
    with pytest.raises(ValueError, match="cache_size >= 2"):
        tf.SVC(kernel=_own_rbf, cache_size=1).fit(X, y)
    tf.SVC(kernel="precomputed", cache_size=2).fit(K, y)  # the size the message names works


@pytest.mark.parametrize("option", [dict(solver="sfw"), dict(dense=False),
                                    dict(sample_size=10), dict(time_limit=5.0)])
def test_options_without_compiled_solve_refused(option):
    X, y = _blobs(60, classes=2)
    with pytest.raises(ValueError, match="compiled CPU solve, which cannot run here"):
        tf.SVC(kernel="precomputed", **option).fit(_own_rbf(X, X), y)


def test_without_numba_refused_by_name(monkeypatch):
    from torchfw.svm import _custom as _svc_custom

    monkeypatch.setattr(_svc_custom, "HAVE_NUMBA", False)
    X, y = _blobs(60, classes=2)
    with pytest.raises(ValueError, match="numba is not installed"):
        tf.SVC(kernel="precomputed").fit(_own_rbf(X, X), y)
    with pytest.raises(ValueError, match="numba is not installed"):
        tf.SVC(kernel=_own_rbf).fit(X, y)


def test_warm_start_refit():
    X, y = _blobs(classes=3)
    K = _own_rbf(X, X)
    model = tf.SVC(kernel="precomputed", warm_start=True, random_state=0).fit(K, y)
    first = model.decision_function(K)
    model.set_params(C=4.0).fit(K, y)  # starts from the previous support (all of its atoms)
    cold = tf.SVC(kernel="precomputed", C=4.0, random_state=0).fit(K, y)
    assert (model.predict(K) == cold.predict(K)).mean() > 0.99
    assert not np.allclose(first, model.decision_function(K))


def test_state_dict_round_trip_precomputed(tmp_path):
    X, y = _blobs(classes=3)
    K, K_test = _own_rbf(X, X), _own_rbf(X[:30], X)
    model = tf.SVC(kernel="precomputed", multi_class="ovo", random_state=0).fit(K, y)
    path = tmp_path / "pre.pt"
    model.save(path)
    loaded = tf.SVC.load(path)
    assert loaded.kernel == "precomputed" and loaded.n_features_in_ == len(y)
    np.testing.assert_array_equal(loaded.support_, model.support_)
    np.testing.assert_array_equal(loaded.decision_function(K_test),
                                  model.decision_function(K_test))
    state = model.state_dict()
    state["support"] = state["support"] + len(y)  # indices past the training examples
    with pytest.raises(ValueError, match="outside"):
        tf.SVC.from_state_dict(state)


def test_callable_refused_at_save_and_head(tmp_path):
    X, y = _blobs(60, classes=2)
    model = tf.SVC(kernel=_own_rbf).fit(X, y)
    with pytest.raises(ValueError, match=r"callable kernel \(_own_rbf\) cannot be saved"):
        model.save(tmp_path / "m.pt")
    with pytest.raises(ValueError, match="cannot be exported as a head"):
        model.as_module()
    pre = tf.SVC(kernel="precomputed").fit(_own_rbf(X, X), y)
    with pytest.raises(ValueError, match="cannot be exported as a head"):
        pre.as_module()


def test_clone_and_params_keep_the_callable():
    from sklearn.base import clone
    from sklearn.model_selection import cross_val_score

    model = tf.SVC(kernel=_own_rbf, C=3.0)
    copy = clone(model)
    assert copy.kernel is _own_rbf and copy.get_params()["C"] == 3.0
    assert "kernel=" in repr(model)
    X, y = _blobs(90, classes=3)
    assert cross_val_score(copy, X, y, cv=3).mean() > 0.9


# -- LIBSVM's precomputed format (-t 4): model files and the command line ---------------------

def _linear_problem(m=120, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(m, 3))
    return X, np.digitize(X[:, 0] + 0.3 * rng.normal(size=m), [-0.5, 0.5])


def _write_kernel_file(path, K, y):
    """LIBSVM's precomputed-kernel file: ``label 0:ID 1:K(x, x_1) ... m:K(x, x_m)``."""
    with open(path, "w") as fh:
        for i, (row, label) in enumerate(zip(K, y, strict=True)):
            values = " ".join(f"{j + 1}:{v:.17g}" for j, v in enumerate(row) if v != 0)
            fh.write(f"{label} 0:{i + 1} {values}\n")
    return str(path)


def _kernel_rows(K):
    return [{0: i + 1, **{j + 1: float(v) for j, v in enumerate(row)}} for i, row in enumerate(K)]


@pytest.mark.parametrize("classes", [2, 3])
def test_libsvm_precomputed_model_files_both_ways(tmp_path, classes):
    svmutil = pytest.importorskip("libsvm.svmutil")
    from torchfw.io.libsvm_model import read_libsvm_model, write_libsvm_model

    X, y = _linear_problem()
    y = y if classes == 3 else (y > 0).astype(int)
    Xt, _ = _linear_problem(50, seed=1)
    K, K_test = X @ X.T, Xt @ X.T
    # LIBSVM's model -> torchfw: the same predictions on the test kernel values
    native = svmutil.svm_train(svmutil.svm_problem(y.tolist(), _kernel_rows(K), isKernel=True),
                               svmutil.svm_parameter("-s 0 -t 4 -c 1 -q"))
    path = str(tmp_path / "native.model")
    svmutil.svm_save_model(path, native)
    labels, _, _ = svmutil.svm_predict([0] * len(Xt), _kernel_rows(K_test), native, "-q")
    model = read_libsvm_model(path, n_train=len(y))
    assert model.kernel == "precomputed" and model.n_features_in_ == len(y)
    np.testing.assert_array_equal(model.predict(K_test), np.array(labels, dtype=int))
    with pytest.raises(ValueError, match="n_train=3"):
        read_libsvm_model(path, n_train=3)
    # torchfw's model -> LIBSVM: support vectors written as 0:ID
    ours = tf.SVC(kernel="precomputed", multi_class="ovo", dtype=torch.float64,
                  random_state=0).fit(K, y)
    out = tmp_path / "ours.model"
    write_libsvm_model(ours, out)
    assert "kernel_type precomputed" in out.read_text()
    labels, _, _ = svmutil.svm_predict([0] * len(Xt), _kernel_rows(K_test),
                                       svmutil.svm_load_model(str(out)), "-q")
    np.testing.assert_array_equal(ours.predict(K_test), np.array(labels, dtype=int))
    again = read_libsvm_model(out, n_train=len(y))
    np.testing.assert_allclose(again.decision_function(K_test), ours.decision_function(K_test),
                               rtol=1e-10, atol=1e-12)


def test_callable_has_no_libsvm_form(tmp_path):
    from torchfw.io.libsvm_model import write_libsvm_model

    X, y = _blobs(60, classes=2)
    model = tf.SVC(kernel=_own_rbf).fit(X, y)
    with pytest.raises(ValueError, match="callable kernel has no LIBSVM form"):
        write_libsvm_model(model, tmp_path / "m")


def test_cli_trains_and_predicts_precomputed_files(tmp_path, capsys):
    from torchfw.cli import main

    X, y = _linear_problem()
    Xt, yt = _linear_problem(50, seed=1)
    train = _write_kernel_file(tmp_path / "k.train", X @ X.T, y)
    test = _write_kernel_file(tmp_path / "k.test", Xt @ X.T, yt)
    model_file = str(tmp_path / "k.model")
    assert main(["train", "-t", "4", "-q", str(train), model_file]) == 0
    assert main(["predict", test, model_file, str(tmp_path / "out")]) == 0
    predicted = np.loadtxt(tmp_path / "out")
    reference = tf.SVC(kernel="precomputed", random_state=0).fit(X @ X.T, y)
    np.testing.assert_array_equal(predicted, reference.predict(Xt @ X.T))
    capsys.readouterr()
    assert main(["train", "-t", "4", "-v", "4", train]) == 0
    accuracy = float(capsys.readouterr().out.split("=")[1].strip(" %\n"))
    assert accuracy > 70
    # LIBSVM's model format from the command line, read back by predict
    assert main(["train", "-t", "4", "-q", "--format", "libsvm", train, model_file]) == 0
    assert main(["predict", "-q", test, model_file]) == 0
    # a training file without LIBSVM's 0:ID column: one error line
    lines = (tmp_path / "k.train").read_text().splitlines()
    (tmp_path / "bad").write_text("\n".join(ln.replace(" 0:", " 0:9") for ln in lines) + "\n")
    capsys.readouterr()
    assert main(["train", "-t", "4", str(tmp_path / "bad"), model_file]) == 1
    assert "line 1 must start with 0:1" in capsys.readouterr().err


def test_sklearn_cross_validation_slices_precomputed_columns():
    from sklearn.model_selection import cross_val_score

    X, y = _blobs(150, classes=3)
    K = _gram(X)
    # scikit-learn slices the columns by the training fold only for a "pairwise" estimator
    pre = cross_val_score(tf.SVC(kernel="precomputed", random_state=0), K, y, cv=3)
    ref = cross_val_score(tf.SVC(gamma=GAMMA, random_state=0), X, y, cv=3)
    np.testing.assert_allclose(pre, ref, atol=0.02)
    assert tf.SVC(kernel="precomputed").__sklearn_tags__().input_tags.pairwise
    assert not tf.SVC().__sklearn_tags__().input_tags.pairwise
