"""Estimators fitted on a CUDA device agree with the same fits on the CPU.

The core variants and binary ``SVC`` have their own CUDA tests (``test_optimizers``, ``test_svm``);
these cover the estimator paths above them: one-vs-rest and one-vs-one multiclass, sparse input,
the sampled (``sample_size``) mode, probability estimates, saving a CUDA model and loading it on
the CPU, the ``nn.Module`` head, and the Weston-Watkins model. GPU reductions sum in another order
than the CPU's, so iterates may part at near-ties: the tests compare certified objectives and
predictions, not trajectories. Every test skips without a GPU.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from conftest import requires_cuda

from torchfw import SVC, WestonWatkinsSVC

pytestmark = [pytest.mark.cuda, requires_cuda]


def _blobs(m, d, k, seed=0):
    """k Gaussian classes in d dimensions, centres drawn with scale 2.5: not trivially apart."""
    rng = np.random.default_rng(seed)
    centres = rng.normal(scale=2.5, size=(k, d))
    y = rng.integers(0, k, size=m)
    X = centres[y] + rng.normal(size=(m, d))
    return X, y


def _objectives_agree(cpu, gpu):
    """The two certified objectives differ by at most the sum of their gaps."""
    for a, b in zip(np.atleast_1d(cpu), np.atleast_1d(gpu), strict=True):
        assert abs(a.value - b.value) <= a.gap + b.gap + 1e-9


@pytest.mark.parametrize("multi_class", ["ovr", "ovo"])
def test_multiclass_on_cuda_matches_cpu(multi_class):
    X, y = _blobs(400, 6, 5)
    kw = dict(gamma=0.2, tol=1e-4, dtype=torch.float64, random_state=0, multi_class=multi_class)
    cpu = SVC(**kw).fit(X, y)
    gpu = SVC(device="cuda", **kw).fit(X, y)
    assert np.array_equal(gpu.classes_, cpu.classes_)
    agree = (gpu.predict(X) == cpu.predict(X)).mean()
    assert agree > 0.98
    assert np.abs(gpu.decision_function(X) - cpu.decision_function(X)).max() < 0.05
    # The model is accurate, not merely the same on both devices.
    assert (gpu.predict(X) == y).mean() > 0.9


def test_sparse_input_on_cuda_matches_dense_on_cpu():
    X, y = _blobs(300, 20, 2, seed=1)
    X[np.abs(X) < 1.0] = 0.0  # about a third of the entries are zero
    import scipy.sparse as sp

    kw = dict(gamma=0.05, tol=1e-4, dtype=torch.float64, random_state=0)
    cpu = SVC(**kw).fit(X, y)
    gpu = SVC(device="cuda", **kw).fit(sp.csr_matrix(X), y)
    assert abs(gpu.result_.value - cpu.result_.value) <= gpu.result_.gap + cpu.result_.gap + 1e-9
    assert (gpu.predict(sp.csr_matrix(X)) == cpu.predict(X)).mean() > 0.98


def test_sampled_mode_on_cuda():
    # sample_size draws candidates on the device; the run must still certify its answer.
    X, y = _blobs(3000, 8, 2, seed=2)
    gpu = SVC(device="cuda", sample_size=200, gamma=0.1, tol=1e-3, random_state=0,
              max_iter=20_000).fit(X, y)
    cpu = SVC(gamma=0.1, tol=1e-3, random_state=0).fit(X, y)
    assert gpu.dual_coef_.is_cuda
    assert (gpu.predict(X) == y).mean() >= (cpu.predict(X) == y).mean() - 0.01


def test_probability_and_save_load_from_cuda(tmp_path):
    X, y = _blobs(300, 4, 3, seed=3)
    gpu = SVC(device="cuda", probability=True, gamma=0.3, random_state=0).fit(X, y)
    proba = gpu.predict_proba(X)
    assert proba.shape == (300, 3) and np.allclose(proba.sum(axis=1), 1.0)
    path = tmp_path / "model.pt"
    gpu.save(path)
    back = SVC.load(path, map_location="cpu")
    assert np.array_equal(back.predict(X), gpu.predict(X))
    assert np.allclose(back.decision_function(X), gpu.decision_function(X), atol=1e-5)


def test_head_on_cuda_matches_predict():
    X, y = _blobs(300, 4, 3, seed=4)
    model = SVC(device="cuda", gamma=0.3, random_state=0).fit(X, y)
    head = model.as_module().to("cuda")
    with torch.no_grad():
        scores = head(torch.as_tensor(X, dtype=torch.float32, device="cuda"))
    assert scores.is_cuda
    index = scores.argmax(dim=1).cpu().numpy()
    assert (model.classes_[index] == model.predict(X)).mean() > 0.99


def test_weston_watkins_on_cuda_matches_cpu():
    X, y = _blobs(400, 6, 4, seed=5)
    cpu = WestonWatkinsSVC(C=1.0, random_state=0).fit(X, y)
    gpu = WestonWatkinsSVC(C=1.0, random_state=0, device="cuda").fit(X, y)
    assert (gpu.predict(X) == cpu.predict(X)).mean() > 0.98
    assert (gpu.predict(X) == y).mean() > 0.9
