"""The scripts in examples/ run end to end in their quick modes and write what they promise.

Each script runs in a subprocess (as a user would run it), with the Agg matplotlib backend and
its output redirected into the test's temporary folder.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import DATA_DIR, data_path

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"

pytest.importorskip("matplotlib")
pytest.importorskip("sklearn")


def run_example(name: str, *args: str) -> str:
    env = dict(os.environ, MPLBACKEND="Agg", TORCHFW_DATA=str(DATA_DIR))
    proc = subprocess.run([sys.executable, str(EXAMPLES / name), *args], capture_output=True,
                          text=True, env=env, timeout=600, cwd=EXAMPLES.parent)
    assert proc.returncode == 0, (f"{name} exited with {proc.returncode}\n--- stdout\n"
                                  f"{proc.stdout}\n--- stderr\n{proc.stderr}")
    return proc.stdout


def assert_png(path: Path) -> None:
    assert path.is_file(), f"{path} was not written"
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_constrained_training(tmp_path):
    out = tmp_path / "constrained.png"
    stdout = run_example("constrained_training.py", "--epochs", "2", "--out", str(out))
    assert "StochasticFrankWolfe" in stdout and "SGD + weight decay" in stdout
    assert "2 epochs" in stdout
    assert_png(out)


@pytest.mark.data
def test_lasso_svm_equivalence(tmp_path):
    for name in ("leukemia_golub_train.csv.xz", "leukemia_golub_independent.csv.xz",
                 "leukemia_golub_labels.csv.xz"):
        data_path(name)  # skips when the leukemia files are absent
    out = tmp_path / "equivalence.png"
    stdout = run_example("lasso_svm_equivalence.py", "--quick", "--data", str(DATA_DIR),
                         "--out", str(out))
    for solver in ("fw", "pairwise"):
        line = next(li for li in stdout.splitlines() if li.startswith(f"{solver:8s}:"))
        # The two formulations take the same steps: iterates agree to rounding.
        diff = float(line.split("over all iterates = ")[1].split(",")[0])
        assert diff < 1e-8, line
    assert "path: 10 alphas" in stdout
    assert_png(out)


def test_svm_head(tmp_path):
    stdout = run_example("svm_head.py", "--quick", "--out", str(tmp_path))
    for head in ("linear (trained with backbone)", "RBF SVC (fit_head)",
                 "Weston-Watkins SVM (linear)"):
        assert head in stdout
    assert "FAILED" not in stdout
    for name in ("svc", "ww"):
        for suffix in (".pt2", ".torchscript.pt"):
            assert (tmp_path / f"svm_head_{name}{suffix}").is_file()
    assert stdout.count(" ok ") == 4  # both models, both export paths


def test_svm_solvers(tmp_path):
    out = tmp_path / "solvers.png"
    stdout = run_example("svm_solvers.py", "--quick", "--out", str(out))
    rows = {line.split()[0]: line.split() for line in stdout.splitlines() if line.strip()}
    for solver in ("fw", "away", "pairwise", "swap", "swap2", "partan", "sfw", "msfw"):
        assert solver in rows, f"no table row for {solver}"
        iterations, seconds = int(rows[solver][1]), float(rows[solver][2])
        accuracy = float(rows[solver][-2])
        assert iterations > 0 and seconds > 0 and 0.5 < accuracy <= 1.0
    assert_png(out)


def test_constrained_sets():
    stdout = run_example("constrained_sets.py", "--epochs", "2")
    assert "2 epochs" in stdout
    fw = next(li for li in stdout.splitlines() if li.startswith("StochasticFrankWolfe (sets)"))
    sgd = next(li for li in stdout.splitlines() if li.startswith("SGD, unconstrained"))
    fw_fields, sgd_fields = fw.split(), sgd.split()
    # Columns from the right: time, feasible, layer-2 zeros, layer-1 rank, test acc, train acc.
    assert fw_fields[-2] == "yes"
    fw_rank, sgd_rank = int(fw_fields[-4]), int(sgd_fields[-4])
    assert fw_rank < sgd_rank  # the nuclear-norm ball lowers the rank of layer 1
    assert float(fw_fields[-3].rstrip("%")) > 0.0  # the K-sparse polytope zeroes weights
    assert float(fw_fields[-5]) > 0.5  # it still learns (10 classes: chance is 0.1)
