"""Bad input to the core gets a clear error naming what is wrong.

A certificate that does not hold is worse than an error: an indefinite or non-symmetric ``Q``
used to be solved "to gap 0" at a wrong point.
"""

from __future__ import annotations

import pytest
import torch

import torchfw as tf

F64 = torch.float64


def test_indefinite_quadratic_is_refused():
    with pytest.raises(ValueError, match="not positive semidefinite"):
        tf.Quadratic(torch.diag(torch.tensor([-1.0, -4.0], dtype=F64)))
    # negative curvature hidden behind a positive diagonal
    with pytest.raises(ValueError, match="smallest eigenvalue"):
        tf.Quadratic(torch.tensor([[1.0, 2.0], [2.0, 1.0]], dtype=F64))


def test_non_symmetric_quadratic_is_refused():
    with pytest.raises(ValueError, match="symmetric"):
        tf.Quadratic(torch.tensor([[2.0, 3.0], [-1.0, 2.0]], dtype=F64))
    with pytest.raises(ValueError, match="square"):
        tf.Quadratic(torch.ones(2, 3, dtype=F64))


def test_psd_up_to_rounding_is_accepted():
    X = torch.randn(50, 30, dtype=torch.float32, generator=torch.Generator().manual_seed(0))
    gram = X @ X.T  # rank 30 of 50: semidefinite, tiny negative eigenvalues from rounding
    res = tf.AwayStepFrankWolfe(tf.Simplex(), tol=1e-6).minimize(tf.Quadratic(gram.double()))
    assert res.gap <= 1e-6
    tf.Quadratic(gram)  # float32 rounding is tolerated too
    # a known-PSD matrix can skip the checks through DenseOperator
    tf.Quadratic(tf.DenseOperator(torch.eye(3, dtype=F64)))


def test_box_bounds_of_incompatible_shapes_are_named():
    with pytest.raises(ValueError, match="broadcastable"):
        tf.Box(torch.zeros(3), torch.ones(4))
    box = tf.Box(torch.zeros(3), torch.ones(3))
    with pytest.raises(ValueError, match="do not fit"):
        box.lmo(torch.ones(5))


def test_svmlight_index_beyond_libsvms_limit_names_line_and_index(tmp_path):
    from torchfw.datasets import load_svmlight

    path = tmp_path / "big.txt"
    path.write_text("1 1:0.5\n-1 2:1 1000000000000:1\n")
    with pytest.raises(ValueError, match=r"line 2: feature index 1000000000000 is above"):
        load_svmlight(path)
    path.write_text("1 1:0.5\n-1 2147483647:1\n")  # LIBSVM's largest index still reads
    X, _ = load_svmlight(path)
    assert X.shape == (2, 2147483647)


def test_sparse_inputs_raise_no_torch_notices(recwarn):
    import subprocess
    import sys

    code = """
import warnings
warnings.simplefilter("always")
import numpy as np, scipy.sparse as sp
import torchfw
rng = np.random.default_rng(0)
X = sp.random(120, 20, density=0.3, format="csr", random_state=0)
y = (rng.random(120) > 0.5).astype(int)
with warnings.catch_warnings(record=True) as seen:
    warnings.simplefilter("always")
    torchfw.SVC(random_state=0).fit(X, y).predict(X)
    torchfw.Lasso(alpha=0.01).fit(X, rng.normal(size=120)).predict(X)
print([str(w.message)[:60] for w in seen if "parse" not in str(w.message)])
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "[]", out.stdout + out.stderr
    assert "Sparse CSR tensor support is in beta" not in out.stderr
