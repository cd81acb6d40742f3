"""``svm-train`` / ``svm-predict``: LIBSVM's commands, trained by torchfw.

LIBSVM's ``tools/grid.py`` runs ``<svmtrain> -c C -g gamma -v 5 file`` and reads the accuracy from
the last word of the line holding ``Cross``. The drop-in must therefore mean LIBSVM's C and gamma
(LIBSVM's L1-SVM, not the L2-SVM that ``train`` fits by default), default gamma to
1/num_features, write LIBSVM model files, and print that line. Checked against LIBSVM itself.
"""

from __future__ import annotations

import sys
import tomllib
from pathlib import Path

import numpy as np
import pytest

from torchfw import cli
from torchfw.cli import main as cli_main
from torchfw.io.libsvm_model import read_libsvm_model

libsvm = pytest.importorskip("libsvm.svmutil")


def _write(path, X, y):
    path.write_text("".join(f"{label:g} " + " ".join(f"{j + 1}:{v:.6f}" for j, v in
                                                      enumerate(row)) + "\n"
                            for label, row in zip(y, X, strict=True)))
    return path


def _data(n=200, d=4, seed=0):
    rng = np.random.default_rng(seed)
    X = np.round(rng.normal(size=(n, d)), 6)
    y = np.where(X[:, 0] + 0.5 * X[:, 1] ** 2 - 0.4 * X[:, 2] > 0.3, 1, -1)
    flip = rng.random(n) < 0.08  # overlapping classes: bounded and free support vectors
    return X, np.where(flip, -y, y)


def _grid_py_accuracy(out: str) -> float:
    """What grid.py reads: the last word of the line holding 'Cross', without its '%'."""
    lines = [line for line in out.splitlines() if "Cross" in line]
    assert len(lines) == 1, out
    return float(lines[0].split()[-1][0:-1])


def test_defaults_are_libsvms_model_c_and_gamma(tmp_path, capsys):
    X, y = _data()
    data = _write(tmp_path / "d.txt", X, y)
    out = tmp_path / "d.model"
    assert cli_main(["svm-train", "-q", str(data), str(out)]) == 0
    text = out.read_text()
    assert text.startswith("svm_type c_svc")  # a LIBSVM model file, LIBSVM's own reader too
    ours = read_libsvm_model(out)
    assert ours.gamma == pytest.approx(1.0 / X.shape[1])  # LIBSVM's gamma, not 'scale'
    # LIBSVM at its defaults (-c 1, -g 1/num_features, -e 0.001) on the same file.
    y_l, x_l = libsvm.svm_read_problem(str(data))
    ref = libsvm.svm_train(y_l, x_l, "-q")
    theirs = libsvm.svm_load_model(str(out))
    pred_ref, _, dec_ref = libsvm.svm_predict(y_l, x_l, ref, "-q")
    pred_ours, _, dec_ours = libsvm.svm_predict(y_l, x_l, theirs, "-q")
    # The same L1-SVM at the same C: the same support and decision values up to the tolerance
    # (the L2-SVM at -c 1 would have about twice as many support vectors here).
    assert abs(theirs.get_nr_sv() - ref.get_nr_sv()) <= 2
    np.testing.assert_allclose(np.ravel(dec_ours), np.ravel(dec_ref), atol=5e-3)
    assert np.mean(np.array(pred_ours) == np.array(pred_ref)) >= 0.99


def test_user_options_win_over_the_defaults(tmp_path):
    X, y = _data()
    data = _write(tmp_path / "d.txt", X, y)
    out = tmp_path / "m.pt"
    assert cli_main(["svm-train", "-q", "-g", "0.5", "-c", "8", "--format", "torchfw",
                     str(data), str(out)]) == 0
    from torchfw import SVC

    model = SVC.load(out)
    assert model.gamma == 0.5 and model.C == 8.0 and model.loss == "hinge"


def test_cross_validation_line_reads_as_grid_py_reads_it(tmp_path, capsys):
    X, y = _data()
    data = _write(tmp_path / "d.txt", X, y)
    # grid.py's command line: -c, -g, -v and the file, nothing else.
    assert cli_main(["svm-train", "-c", "32768", "-g", "0.125", "-v", "5", str(data)]) == 0
    high_c = _grid_py_accuracy(capsys.readouterr().out)
    assert cli_main(["svm-train", "-c", "0.03125", "-g", "0.125", "-v", "5", str(data)]) == 0
    low_c = _grid_py_accuracy(capsys.readouterr().out)
    assert 0.0 <= low_c <= 100.0 and 0.0 <= high_c <= 100.0
    # At C = 2^-5 LIBSVM's model has margin errors on both classes and predicts the majority
    # class nearly everywhere; at 2^15 it fits the labels: the C reached the fit as LIBSVM's C.
    majority = 100.0 * max(np.mean(y == 1), np.mean(y == -1))
    assert low_c <= majority + 1.0 < high_c


def test_svm_predict_needs_its_output_file(tmp_path, capsys):
    X, y = _data()
    data = _write(tmp_path / "d.txt", X, y)
    model = tmp_path / "d.model"
    assert cli_main(["svm-train", "-q", str(data), str(model)]) == 0
    assert cli_main(["svm-predict", str(data), str(model)]) == 2
    assert "expected 3 file arguments" in capsys.readouterr().err
    out = tmp_path / "pred.txt"
    assert cli_main(["svm-predict", str(data), str(model), str(out)]) == 0
    assert capsys.readouterr().out.startswith("Accuracy = ")
    labels = np.array([float(t) for t in out.read_text().split()])
    assert labels.shape == (len(y),) and set(labels) <= {1.0, -1.0}


def test_console_scripts_are_declared_and_run(tmp_path, monkeypatch, capsys):
    project = tomllib.loads((Path(__file__).resolve().parents[1] / "pyproject.toml").read_text())
    scripts = project["project"]["scripts"]
    assert scripts["torchfw-svm-train"] == "torchfw.cli:svm_train_script"
    assert scripts["torchfw-svm-predict"] == "torchfw.cli:svm_predict_script"
    X, y = _data(n=80)
    data = _write(tmp_path / "d.txt", X, y)
    monkeypatch.setattr(sys, "argv", ["torchfw-svm-train", "-v", "4", str(data)])
    assert cli.svm_train_script() == 0
    assert 0.0 <= _grid_py_accuracy(capsys.readouterr().out) <= 100.0
    monkeypatch.setattr(sys, "argv", ["torchfw-svm-train", "--help"])
    with pytest.raises(SystemExit):
        cli.svm_train_script()
    assert "tools/grid.py" in capsys.readouterr().out
