"""The corrective step by conjugate gradients (:mod:`torchfw.optimizers._face_cg`).

* **the optimum**: the block-pivoting solve reaches the minimizer over the simplex that an
  independent active-set method (NumPy solves of the KKT systems) finds, to 1e-8, on L2-SVM
  duals whose kernel is nearly constant (small gamma: the identity over C plus a matrix of low
  numerical rank, where the step is taken), with and without a linear term, from starts where
  atoms must enter and leave;
* **failure**: on a face whose spectrum is spread (large C) a small product budget is not
  enough, and the step says so and leaves the weights alone;
* **parity**: from the same iterate, the step takes the same weights (to rounding) on every
  storage -- host (numba and PyTorch kernels, device scalars), dense, sampled, batched -- and in
  the compiled loop's form on a row source;
* **in a fit**: SVC's compiled solve and its host path take the same conjugate corrections
  (same iterations, same value) and stop at the optimum's value.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from _support import reference_qp

import torchfw as tf
from torchfw.optimizers import _compiled_loop, _face_cg
from torchfw.optimizers import _kernels as K
from torchfw.svm.kernels import OneVsRestOperator, SVMDualOperator, make_kernel
from torchfw.utils.scalars import DEVICE, HOST

F64 = torch.float64
M = 120
#: Kernel width relative to scikit-learn's "scale": the kernel is nearly constant.
SMALL_GAMMA = 1e-3
C = 50.0
PARITY_ATOL = 1e-9

needs_numba = pytest.mark.skipif(not K.HAVE_NUMBA, reason="the host reference runs numba")


def _svm_dual(seed: int, m: int, gamma_scale: float, c_value: float) -> np.ndarray:
    """The L2-SVM dual's matrix :math:`Y(K + 1)Y + I/C` of an RBF kernel on random data."""
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1.0, 1.0, size=(m, 4))
    y = np.where(X[:, 0] + 0.3 * rng.standard_normal(m) > 0, 1.0, -1.0)
    gamma = gamma_scale / (X.shape[1] * X.var())
    sq = (X * X).sum(1)
    K_ = np.exp(-gamma * np.maximum(sq[:, None] + sq[None, :] - 2.0 * X @ X.T, 0.0))
    return (y[:, None] * y[None, :]) * (K_ + 1.0) + np.eye(m) / c_value


def _sparse_start(m: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    x = np.zeros(m)
    x[rng.choice(m, 8, replace=False)] = rng.random(8) + 0.1
    return x / x.sum()


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("gamma_scale, c_value, linear",
                         [(1e-3, 50.0, False), (1e-2, 5.0, False), (1e-3, 50.0, True),
                          (0.3, 1.0, False)])
def test_conjugate_minimize_is_the_independent_optimum(seed, gamma_scale, c_value, linear):
    Q = _svm_dual(seed, 150, gamma_scale, c_value)
    c = np.random.default_rng(seed + 10).normal(0.0, 0.05, 150) if linear else None
    ref = reference_qp(Q, c)
    x0 = _sparse_start(150, seed)
    z, used = _face_cg.face_minimize_conjugate(Q.copy(), x0, c, rtol=1e-12)
    assert z is not None and used > 0
    np.testing.assert_allclose(z, ref, atol=1e-8, rtol=0)
    assert abs(z.sum() - 1.0) < 1e-12 and (z >= 0).all()
    # Atoms entered and left on the way (the start's support is not the optimum's).
    assert set(np.flatnonzero(x0)) != set(np.flatnonzero(ref > 0))


def test_matvec_reads_the_lower_triangle_only():
    rng = np.random.default_rng(0)
    A = rng.standard_normal((37, 37))
    G = A + A.T
    d = rng.standard_normal(37)
    out = np.empty(37)
    lower = np.tril(G) + np.triu(np.full((37, 37), np.nan), 1)
    _face_cg.matvec(lower, 37, d, out)
    np.testing.assert_allclose(out, G @ d, rtol=1e-13, atol=1e-12)


def test_a_spread_spectrum_exhausts_a_small_budget_and_keeps_the_weights():
    # Large C: the face's spectrum spreads over many orders, and conjugate gradients need many
    # products; with 20 the step fails and says so, the weights unchanged.
    Q = _svm_dual(0, 150, 3.0, 1e6)
    x0 = _sparse_start(150, 0)
    x = x0.copy()
    used = _face_cg.conjugate_minimize(Q.copy(), 150, x, np.zeros(1), False, 20, 1e-10)
    assert used == _face_cg.FAILED
    np.testing.assert_array_equal(x, x0)
    # With enough products the same problem is solved.
    z, _ = _face_cg.face_minimize_conjugate(Q.copy(), x0, rtol=1e-12)
    if z is not None:  # block pivoting may also run out of passes: then it said so
        np.testing.assert_allclose(z, reference_qp(Q), atol=1e-8, rtol=0)


def test_the_plan_takes_larger_faces_than_the_dense_step_or_none():
    # A face larger than the dense one, within MAX_FACE and n, or none.
    from torchfw.optimizers import _face

    for n, iters, repeats in [(2471, 50, 0), (2471, 270, 1), (2471, 270, 2), (20_000, 50, 1)]:
        k_dense = _face.face_budget(n, iters, repeats)
        size, products = _face_cg.conjugate_plan(n, iters, repeats, k_dense)
        assert size > k_dense and size <= min(n, _face.MAX_FACE)
        assert products >= _face_cg.CG_MATVECS
    # A small budget (the dense face is cheap) or a dense face at MAX_FACE: no conjugate step.
    assert _face_cg.conjugate_plan(200, 10, 0, _face.face_budget(200, 10, 0)) == (0, 0)
    assert _face_cg.conjugate_plan(100_000, 500, 3, _face.face_budget(100_000, 500, 3)) == (0, 0)


# ---------------------------------------------------------------------------------------------
# Parity of one step across storages
# ---------------------------------------------------------------------------------------------

def _data():
    from sklearn.datasets import make_classification

    X, y = make_classification(M, 5, random_state=0)
    X = torch.from_numpy(X)
    gamma = SMALL_GAMMA / (X.shape[1] * float(X.var()))
    y_pm = torch.from_numpy(np.where(y == 1, 1.0, -1.0))
    y_alt = torch.where(X[:, 1] > 0, 1.0, -1.0).to(F64)
    return X, y_pm, y_alt, make_kernel("rbf", gamma)


def _operator(y=None):
    X, y_pm, _, kernel = _data()
    return SVMDualOperator(X, y_pm if y is None else y, kernel, C, dtype=F64)


def _start(y=None) -> torch.Tensor:
    """The iterate after 15 plain pairwise steps from 6 atoms: far from the optimum, whose
    support is most of the atoms."""
    x0 = torch.zeros(M, dtype=F64)
    x0[::20] = 1.0
    opt = tf.PairwiseFrankWolfe(tf.Simplex(), tf.ExactLineSearch(), tol=1e-300, max_iter=15)
    return opt.minimize(tf.Quadratic(_operator(y)), x0 / x0.sum()).x


#: The step's face and products: every atom, as many products as it needs.
SIZE, PRODUCTS = M, 10_000


def _host_engine(w, ops=HOST, y=None):
    from torchfw.optimizers._engine import QuadraticEngine

    return QuadraticEngine(tf.Quadratic(_operator(y)), tf.Simplex(), w, ops=ops)


def _step(eng, problem=0, rtol=1e-12):
    # Solved to rounding: storages whose faces list the atoms in another order (the sampled
    # storage's slots) then agree to rounding too.
    from torchfw.optimizers._correction import conjugate_face

    return conjugate_face(eng, SIZE, PRODUCTS, problem, rtol=rtol)


def _step_host(w, monkeypatch, numba=True, ops=HOST):
    if not numba:
        monkeypatch.setattr(K, "HAVE_NUMBA", False)
    eng = _host_engine(w, ops=ops)
    return _step(eng), eng.weights().detach().clone()


def _step_dense(w, monkeypatch):
    from torchfw.optimizers._dense import DenseStorage
    from torchfw.optimizers._engine import QuadraticEngine

    eng = QuadraticEngine(DenseStorage(tf.Quadratic(_operator()), tf.Simplex(), w))
    return _step(eng), eng.weights().clone()


def _step_sampled(w, monkeypatch):
    from torchfw.optimizers._engine import QuadraticEngine
    from torchfw.optimizers._kernel_rows import KernelRows
    from torchfw.optimizers._sampled import SampledStorage

    X, y, _, kernel = _data()
    support = torch.nonzero(w).squeeze(1)
    eng = QuadraticEngine(SampledStorage(KernelRows(X, y, kernel, C, dtype=F64), support,
                                         w[support], sample_size=M))
    return _step(eng), eng.weights().clone()


def _step_batched(w, monkeypatch):
    from torchfw.optimizers.batched import BatchedQuadraticEngine

    X, y, y_alt, kernel = _data()
    other = _start(y_alt)
    eng = BatchedQuadraticEngine(OneVsRestOperator(X, torch.stack([y_alt, y]), kernel, C,
                                                   dtype=F64), torch.stack([other, w]))
    kept = _step(eng, problem=1)
    torch.testing.assert_close(eng.w[0], other, rtol=0, atol=0)
    return kept, eng.w[1].clone()


def _step_compiled(w, monkeypatch):
    # The compiled loop's form, on the dense matrix as its row source.
    Q = _operator().columns(torch.arange(M)).numpy().copy()
    ww = w.numpy().copy()
    s = Q @ ww
    p = float(ww @ s)
    kept = _compiled_loop._conjugate(Q, np.zeros(1), False, ww, s, np.empty(M), p, 0.0, SIZE,
                                     PRODUCTS)
    return kept, torch.from_numpy(ww)


STEPS = {"host-torch": lambda w, mp: _step_host(w, mp, numba=False),
         "device": lambda w, mp: _step_host(w, mp, ops=DEVICE),
         "dense": _step_dense, "sampled": _step_sampled, "batched": _step_batched}


@pytest.fixture(scope="module")
def reference_step():
    w = _start()
    eng = _host_engine(w)
    gap = float(eng.gap())
    kept = _step(eng)
    return w, kept, eng.weights().clone(), gap, float(eng.gap())


@needs_numba
def test_the_host_step_solves_the_problem(reference_step):
    # Every atom in the face: the step is the problem's optimum.
    w, kept, after, gap_before, gap_after = reference_step
    optimum = reference_qp(_operator().columns(torch.arange(M)).numpy())
    assert kept == int((optimum > 0).sum()) and kept > 3 * int((w > 0).sum())
    np.testing.assert_allclose(after.numpy(), optimum, atol=1e-7, rtol=0)
    assert gap_after < 1e-4 * gap_before


@needs_numba
@pytest.mark.parametrize("storage", sorted(STEPS))
def test_every_storage_takes_the_host_step(storage, reference_step, monkeypatch):
    w, kept_ref, ref, _, _ = reference_step
    kept, got = STEPS[storage](w.clone(), monkeypatch)
    assert kept == kept_ref, storage
    torch.testing.assert_close(got, ref, rtol=0, atol=PARITY_ATOL, msg=storage)
    assert float((got - w).abs().max()) > 1e3 * PARITY_ATOL


@needs_numba
def test_the_compiled_step_is_the_host_step_at_the_run_loops_tolerance(reference_step):
    # At the run loop's CG_RTOL both forms sum in the same order: the same bits.
    w = reference_step[0]
    eng = _host_engine(w.clone())
    kept_ref = _step(eng, rtol=_face_cg.CG_RTOL)
    kept, got = _step_compiled(w.clone(), None)
    assert kept == kept_ref
    torch.testing.assert_close(got, eng.weights(), rtol=0, atol=1e-15)
    torch.testing.assert_close(got, reference_step[2], rtol=0, atol=1e-6)


def test_a_wrong_step_fails_the_parity_check(reference_step, monkeypatch):
    # The comparison can fail: a face without the violators is another step.
    w, _, ref, _, _ = reference_step
    eng = _host_engine(w.clone())
    from torchfw.optimizers._correction import conjugate_face

    conjugate_face(eng, int((w > 0).sum()), PRODUCTS, rtol=1e-12)
    with pytest.raises(AssertionError):
        torch.testing.assert_close(eng.weights(), ref, rtol=0, atol=PARITY_ATOL)


# ---------------------------------------------------------------------------------------------
# In a fit
# ---------------------------------------------------------------------------------------------

@needs_numba
def test_svc_paths_take_the_same_conjugate_corrections(monkeypatch):
    # A nearly constant kernel on 1,500 examples: the support is most of them, and the faces
    # the budget affords grow past the dense step's. The host path takes conjugate steps (they
    # are counted here), the compiled solve the same ones: same iterations, same value.
    from torchfw.optimizers import _correction

    rng = np.random.default_rng(0)
    X = rng.uniform(-1.0, 1.0, size=(1500, 4))
    y = np.where(X[:, 0] + X[:, 1] ** 2 + 0.3 * rng.standard_normal(1500) > 0.3, 1, -1)
    calls = []
    original = _correction.conjugate_face

    def counted(*args, **kwargs):
        out = original(*args, **kwargs)
        calls.append(out)
        return out

    monkeypatch.setattr(_correction, "conjugate_face", counted)
    fits = {}
    for dense in ("auto", False):
        model = tf.SVC(C=64.0, gamma=2.0 ** -15, random_state=0, dense=dense).fit(X, y)
        res = model.result_ if isinstance(model.result_, tf.Result) else model.result_[0]
        fits[dense] = (res.n_iter, res.value, res.converged)
    assert any(kept > 0 for kept in calls), calls
    assert fits["auto"][0] == fits[False][0] and fits["auto"][2] and fits[False][2]
    assert fits["auto"][1] == pytest.approx(fits[False][1], rel=1e-9)
