"""The LIBSVM-style command line and LIBSVM model files.

* ``train`` takes ``svm-train``'s options with LIBSVM's meaning (``-s 0``, ``-t``, ``-h``, ``-b``,
  ``-wi``, ``-v``, ``-q``) and refuses, by name, options that do not apply to a C-SVC;
* every error is one ``error:`` line on stderr with a non-zero status, never a traceback;
* a regression file is refused instead of being trained as a many-class problem;
* no progress bar is drawn when stderr is not a terminal;
* binary models exchange with LIBSVM both ways and predict identically.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from torchfw import SVC
from torchfw.cli import main as cli_main
from torchfw.io.libsvm_model import read_libsvm_model, write_libsvm_model


def _write(path, X, y):
    path.write_text("".join(f"{label:g} " + " ".join(f"{j + 1}:{v:.6f}" for j, v in
                                                      enumerate(row)) + "\n"
                            for label, row in zip(y, X, strict=True)))
    return path


def _binary(n=120, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 3))
    y = np.where(X[:, 0] + 0.5 * X[:, 1] ** 2 > 0.3, 1, -1)
    return X, y


def _one_error_line(capsys) -> str:
    captured = capsys.readouterr()
    lines = [ln for ln in captured.err.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), captured.err
    assert "Traceback" not in captured.err
    return lines[0]


def test_libsvm_flags_are_taken_with_their_meaning(tmp_path, capsys):
    data = _write(tmp_path / "d.txt", *_binary())
    model_file = tmp_path / "m.pt"
    # -s 0 (C-SVC), -h 0 (shrinking off), -t 2, -c 4: the training file is the positional one.
    assert cli_main(["train", "-s", "0", "-h", "0", "-t", "2", "-c", "4", "-q", str(data),
                     str(model_file)]) == 0
    model = SVC.load(model_file)
    assert model.get_params()["C"] == 4.0 and model.kernel == "rbf"
    assert capsys.readouterr().out == ""  # -q


@pytest.mark.parametrize("argv, words", [
    (["-c", "0"], "-c 0: must be > 0"),
    (["-g", "abc"], "-g abc: not a number"),
    (["-s", "3"], "epsilon-SVR"),
    (["-n", "0.5"], "-n (nu) does not apply"),
    (["-t", "9"], "unknown kernel type"),
    (["-b", "2"], "probability_estimates is 0 or 1"),
    (["-z", "1"], "unknown option -z"),
    (["--solver", "nope"], "unknown solver"),
])
def test_bad_parameters_give_one_error_line(tmp_path, capsys, argv, words):
    data = _write(tmp_path / "d.txt", *_binary(40))
    status = cli_main(["train", "-q", *argv, str(data), str(tmp_path / "m.pt")])
    assert status != 0
    assert words in _one_error_line(capsys)


def test_regression_file_is_refused(tmp_path, capsys):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(50, 2))
    data = _write(tmp_path / "reg.txt", X, X[:, 0] * 3.7 + 0.01)
    assert cli_main(["train", "-q", str(data), str(tmp_path / "m.pt")]) == 1
    assert "not class labels" in _one_error_line(capsys)
    assert not (tmp_path / "m.pt").exists()


def test_file_errors_and_bad_models_are_one_line(tmp_path, capsys):
    assert cli_main(["train", "-q", str(tmp_path / "missing.txt")]) == 1
    _one_error_line(capsys)
    data = _write(tmp_path / "d.txt", *_binary(40))
    junk = tmp_path / "junk.model"
    junk.write_bytes(np.random.default_rng(0).bytes(300))
    assert cli_main(["predict", str(data), str(junk)]) == 1
    assert "cannot load model" in _one_error_line(capsys)


def test_cross_validation_prints_accuracy(tmp_path, capsys):
    data = _write(tmp_path / "d.txt", *_binary(90))
    assert cli_main(["train", "-q", "-v", "3", str(data)]) == 0
    out = capsys.readouterr().out
    accuracy = float(out.split("Cross Validation Accuracy = ")[1].split("%")[0])
    assert 60.0 < accuracy <= 100.0


def test_version_and_plain_help(capsys):
    assert cli_main(["--version"]) == 0
    assert capsys.readouterr().out.startswith("torchfw ")
    assert cli_main(["--help"]) == 0
    text = capsys.readouterr().out
    assert "train" in text and "``" not in text and "::" not in text


def test_no_progress_bar_when_stderr_is_not_a_terminal(tmp_path, capfd):
    data = _write(tmp_path / "d.txt", *_binary(300))
    assert cli_main(["train", str(data), str(tmp_path / "m.pt")]) == 0  # not quiet
    err = capfd.readouterr().err
    assert "\r" not in err and len(err) < 2000


def _libsvm():
    return pytest.importorskip("libsvm.svmutil")


def test_libsvm_model_predicts_identically_in_torchfw(tmp_path):
    svmutil = _libsvm()
    X, y = _binary(150, seed=1)
    prob = svmutil.svm_problem(y.tolist(), X.tolist())
    native = svmutil.svm_train(prob, svmutil.svm_parameter("-s 0 -t 2 -c 3 -g 0.7 -q"))
    path = str(tmp_path / "native.model")
    svmutil.svm_save_model(path, native)
    Xt, yt = _binary(200, seed=2)
    labels, _, dec = svmutil.svm_predict(yt.tolist(), Xt.tolist(), native, "-q")
    model = read_libsvm_model(path)
    assert model.predict(Xt).tolist() == [int(v) for v in labels]
    # LIBSVM's decision value is for its label[0]; ours is for classes_[1].
    sign = 1.0 if native.get_labels()[0] == model.classes_[1] else -1.0
    # LIBSVM writes its model with 8 significant digits per feature value
    np.testing.assert_allclose(model.decision_function(Xt), sign * np.array(dec)[:, 0],
                               rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("kernel", ["rbf", "linear", "poly"])
def test_torchfw_model_predicts_identically_in_libsvm(tmp_path, kernel):
    svmutil = _libsvm()
    X, y = _binary(150, seed=3)
    model = SVC(kernel=kernel, C=2.0, gamma=0.5, coef0=1.0, degree=2, random_state=0,
                dtype=torch.float64).fit(X, y)
    path = tmp_path / "ours.model"
    write_libsvm_model(model, path)
    native = svmutil.svm_load_model(str(path))
    Xt, yt = _binary(200, seed=4)
    labels, _, dec = svmutil.svm_predict(yt.tolist(), Xt.tolist(), native, "-q")
    assert [int(v) for v in labels] == model.predict(Xt).tolist()
    sign = 1.0 if native.get_labels()[0] == model.classes_[1] else -1.0
    np.testing.assert_allclose(sign * np.array(dec)[:, 0], model.decision_function(Xt),
                               rtol=1e-6, atol=1e-8)
    # and back: the file reads into the same model
    again = read_libsvm_model(path)
    np.testing.assert_allclose(again.decision_function(Xt), model.decision_function(Xt),
                               rtol=1e-10, atol=1e-12)


def _classes(m, k, seed):
    rng = np.random.default_rng(seed)
    centres = np.array([[0.0, 0.0], [2.5, 0.0], [0.0, 2.5], [2.5, 2.5]])[:k]
    y = rng.integers(0, k, size=m)
    X = centres[y] + rng.normal(scale=0.9, size=(m, 2))
    return X, np.array([7, 2, 5, 11])[y]  # integer labels, not in sorted order of appearance


def test_libsvm_multiclass_model_predicts_identically_in_torchfw(tmp_path):
    svmutil = _libsvm()
    X, y = _classes(240, 4, seed=1)
    native = svmutil.svm_train(svmutil.svm_problem(y.tolist(), X.tolist()),
                               svmutil.svm_parameter("-s 0 -t 2 -c 2 -g 0.5 -q"))
    path = str(tmp_path / "native.model")
    svmutil.svm_save_model(path, native)
    assert native.get_labels() != sorted(native.get_labels())  # label order is exercised
    Xt, yt = _classes(400, 4, seed=2)
    labels, _, dec = svmutil.svm_predict(yt.tolist(), Xt.tolist(), native, "-q")
    model = read_libsvm_model(path)
    assert model.multi_class_ == "ovo" and model.problem_dual_coef_.shape[0] == 6
    assert model.predict(Xt).tolist() == [int(v) for v in labels]
    # LIBSVM's pair values, over its label positions, against ours over sorted classes.
    ours = SVC.from_state_dict(model.state_dict())
    ours.decision_function_shape = "ovo"
    pair_values = ours.decision_function(Xt)
    native_labels = native.get_labels()
    rank = np.argsort(np.argsort(native_labels))
    p = 0
    for a in range(4):
        for b in range(a + 1, 4):
            i, j = sorted((rank[a], rank[b]))
            q = [(x, z) for x in range(4) for z in range(x + 1, 4)].index((i, j))
            sign = 1.0 if rank[a] < rank[b] else -1.0
            np.testing.assert_allclose(pair_values[:, q], sign * np.array(dec)[:, p],
                                       rtol=1e-6, atol=1e-6)
            p += 1


def test_torchfw_multiclass_model_predicts_identically_in_libsvm(tmp_path, capsys):
    svmutil = _libsvm()
    X, y = _classes(240, 3, seed=3)
    model = SVC(C=2.0, gamma=0.5, multi_class="ovo", random_state=0,
                dtype=torch.float64).fit(X, y)
    path = tmp_path / "ours.model"
    write_libsvm_model(model, path)
    native = svmutil.svm_load_model(str(path))
    Xt, yt = _classes(300, 3, seed=4)
    labels, _, _ = svmutil.svm_predict(yt.tolist(), Xt.tolist(), native, "-q")
    assert [int(v) for v in labels] == model.predict(Xt).tolist()
    again = read_libsvm_model(path)
    np.testing.assert_allclose(again.decision_function(Xt), model.decision_function(Xt),
                               rtol=1e-10, atol=1e-12)
    # The command line writes a multiclass LIBSVM model too (one-vs-one at any size).
    data = _write(tmp_path / "d.txt", X, y)
    assert cli_main(["train", "-q", "--format", "libsvm", str(data), str(tmp_path / "m")]) == 0
    assert "nr_class 3" in (tmp_path / "m").read_text()


def test_cli_writes_and_reads_libsvm_format(tmp_path, capsys):
    X, y = _binary(100, seed=5)
    data = _write(tmp_path / "d.txt", X, y)
    model_file = tmp_path / "m.model"
    assert cli_main(["train", "-q", "--format", "libsvm", str(data), str(model_file)]) == 0
    assert model_file.read_text().startswith("svm_type c_svc")
    assert cli_main(["predict", str(data), str(model_file), str(tmp_path / "p.txt")]) == 0
    assert "Accuracy" in capsys.readouterr().out


def test_multiclass_or_broken_libsvm_files_are_refused(tmp_path):
    X, y = _binary(60)
    model = SVC(random_state=0).fit(X, np.where(y > 0, 3, 1))
    path = tmp_path / "m.model"
    write_libsvm_model(model, path)
    text = path.read_text()
    (tmp_path / "multi.model").write_text(text.replace("nr_class 2", "nr_class 3"))
    with pytest.raises(ValueError, match="'label' line|'nr_sv' line|'rho' line"):
        read_libsvm_model(tmp_path / "multi.model")  # 3 classes announced, 2 labels given
    (tmp_path / "count.model").write_text(text.replace("total_sv", "total_sv 9999 #"))
    with pytest.raises(ValueError, match="total_sv"):
        read_libsvm_model(tmp_path / "count.model")
    (tmp_path / "nan.model").write_text(text.replace("rho ", "rho nan #"))
    with pytest.raises(ValueError, match="non-finite"):
        read_libsvm_model(tmp_path / "nan.model")
    Xm = np.random.default_rng(0).normal(size=(60, 2))
    multi = SVC(random_state=0, multi_class="ovr").fit(Xm, np.arange(60) % 3)
    with pytest.raises(ValueError, match="one-vs-rest"):
        write_libsvm_model(multi, tmp_path / "x.model")


def test_progress_is_the_log_gap_way_to_the_target():
    import io

    from torchfw.utils.progress import GapProgress, log_progress

    assert log_progress(1.0, 1e-2, 1e-4) == pytest.approx(50.0)
    assert log_progress(1.0, 1e-5, 1e-4) == 100.0
    assert log_progress(1.0, 2.0, 1e-4) == 0.0  # a gap above the first one: no progress

    class Terminal(io.StringIO):
        def isatty(self):
            return True

    out = Terminal()
    bar = GapProgress("FW", file=out)
    for k, gap in ((0, 1.0), (10, 1e-1), (20, 1e-3)):
        bar.update(k, gap, 1e-4)
    bar.close()
    text = out.getvalue()
    # three quarters of the way (1 -> 1e-3 of 1 -> 1e-4), the count and the gap as postfix
    assert "75/100" in text and "it=20" in text and "gap=1.000e-03" in text


def test_probability_flag_trains_and_predicts_probabilities(tmp_path, capsys):
    data = _write(tmp_path / "d.txt", *_binary(120))
    model_file, out = tmp_path / "m.pt", tmp_path / "p.txt"
    assert cli_main(["train", "-q", "-b", "1", str(data), str(model_file)]) == 0
    assert cli_main(["predict", "-b", "1", str(data), str(model_file), str(out)]) == 0
    lines = out.read_text().splitlines()
    assert lines[0] == "labels -1 1" and len(lines) == 121
    probs = np.array([[float(v) for v in ln.split()[1:]] for ln in lines[1:]])
    np.testing.assert_allclose(probs.sum(axis=1), 1.0, atol=1e-6)
    plain = tmp_path / "plain.pt"
    assert cli_main(["train", "-q", str(data), str(plain)]) == 0
    capsys.readouterr()
    assert cli_main(["predict", "-b", "1", str(data), str(plain)]) == 1
    assert "no probability estimates" in _one_error_line(capsys)


@pytest.mark.parametrize("tamper, words", [
    (lambda s: s.pop("dual_coef"), "missing 'dual_coef'"),
    (lambda s: s.update(dual_coef=s["dual_coef"] * float("nan")), "NaN"),
    (lambda s: s.update(classes=[1]), "at least two classes"),
    (lambda s: s.update(intercept=torch.zeros(3)), "'intercept' has shape"),
    (lambda s: s.update(support_vectors=s["support_vectors"][:, :2]), "features"),
    (lambda s: s.update(dual_coef=s["dual_coef"][:, :-1]), "columns"),
])
def test_tampered_model_files_are_refused_by_name(tmp_path, capsys, tamper, words):
    X, y = _binary(80)
    state = SVC(random_state=0).fit(X, y).state_dict()
    tamper(state)
    path = tmp_path / "bad.pt"
    torch.save(state, path)
    with pytest.raises(ValueError, match=words):
        SVC.load(path)
    data = _write(tmp_path / "d.txt", X, y)
    assert cli_main(["predict", str(data), str(path)]) == 1
    assert words.split("'")[0].strip() in _one_error_line(capsys)
