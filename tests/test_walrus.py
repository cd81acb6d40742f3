"""Walrus (Wang & Scott 2021) against independent solvers of the WW subproblem (4).

(4): min_b 1/2 b'(I + 11')b - v'b  s.t.  0 <= b <= C.

References used here, both independent of Walrus's sort-and-sweep:
- bisection on the decreasing function h(g) = 1'clip(v - g, 0, C) - g, whose root is 1'b*,
  then b* = clip(v - g, 0, C) (spec section 3.2);
- SciPy's bounded-variable least squares (BVLS, an active-set QP method) on the equivalent
  problem 1/2 ||A b - r||^2 with A = [I; 1'] and r = A (I + 11')^{-1} v.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from torchfw.ww import _blocks as K
from torchfw.ww.subproblem import (
    iterative_ww_subproblem,
    solve_ww_subproblem,
    walrus,
    walrus_batched,
    ww_subproblem_objective,
)

TOL = 1e-10


def bisection_reference(v: np.ndarray, C: float) -> np.ndarray:
    """b* via bisection on h (an independent method: no sorting, no breakpoints)."""
    v = np.asarray(v, dtype=np.float64)
    lo, hi = 0.0, max(float(v.max(initial=0.0)), 0.0)
    for _ in range(400):
        mid = 0.5 * (lo + hi)
        if mid in (lo, hi):
            break
        if np.clip(v - mid, 0.0, C).sum() - mid > 0:
            lo = mid
        else:
            hi = mid
    return np.clip(v - 0.5 * (lo + hi), 0.0, C)


def bvls_reference(v: np.ndarray, C: float) -> np.ndarray:
    from scipy.optimize import lsq_linear

    m = v.shape[0]
    A = np.vstack([np.eye(m), np.ones((1, m))])
    theta_inv_v = v - v.sum() / (m + 1)  # (I + 11')^{-1} v by Sherman-Morrison
    r = A @ theta_inv_v
    res = lsq_linear(A, r, bounds=(0.0, C), method="bvls", tol=1e-15, max_iter=10 * m + 50)
    return res.x


def _scale(v, C):
    return max(1.0, float(np.abs(v).max(initial=0.0)), C)


Cs = st.sampled_from([1e-3, 0.0625, 0.5, 1.0, 2.0, 3.7, 100.0])


@st.composite
def tie_heavy(draw):
    """v on the (C/2) Z grid: breakpoints v_j and v_l - C coincide all the time."""
    C = draw(Cs)
    m = draw(st.integers(1, 40))
    z = draw(st.lists(st.integers(-8, 10), min_size=m, max_size=m))
    return np.array(z, dtype=np.float64) * (C / 2), C


@st.composite
def generic(draw):
    C = draw(Cs)
    m = draw(st.integers(1, 60))
    scale = draw(st.sampled_from([1e-3, 1.0, 10.0, 1e3]))
    vals = draw(st.lists(st.floats(-3, 3, allow_nan=False), min_size=m, max_size=m))
    return np.array(vals) * scale, C


_settings = settings(max_examples=1500, deadline=None,
                     suppress_health_check=[HealthCheck.too_slow])


@_settings
@given(tie_heavy())
def test_walrus_matches_bisection_on_ties(case):
    v, C = case
    ref = bisection_reference(v, C)
    b = walrus(v, C).numpy()
    bb = walrus_batched(v, C).numpy()
    tol = TOL * _scale(v, C)
    assert np.abs(b - ref).max() <= tol
    assert np.abs(bb - ref).max() <= tol


@_settings
@given(generic())
def test_walrus_matches_bisection_generic(case):
    v, C = case
    ref = bisection_reference(v, C)
    b = walrus(v, C).numpy()
    tol = TOL * _scale(v, C)
    assert np.abs(b - ref).max() <= tol
    assert np.abs(walrus_batched(v, C).numpy() - ref).max() <= tol


def test_walrus_matches_scipy_qp():
    pytest.importorskip("scipy")
    rng = np.random.default_rng(1)
    for t in range(300):
        m = int(rng.integers(1, 30))
        C = float(rng.choice([0.1, 1.0, 2.5]))
        v = (rng.integers(-6, 9, m) * C / 2) if t % 2 else rng.normal(size=m) * 3
        ref = bvls_reference(v, C)
        b = walrus(v, C).numpy()
        assert np.abs(b - ref).max() <= 1e-9 * _scale(v, C)


def test_batched_equals_single():
    rng = np.random.default_rng(2)
    for C in (0.25, 1.0, 7.0):
        V = np.concatenate([rng.normal(size=(500, 25)) * 4,
                            rng.integers(-6, 10, size=(500, 25)) * C / 2])
        B = walrus_batched(torch.from_numpy(V), C).numpy()
        S = np.stack([walrus(row, C).numpy() for row in V])
        assert np.abs(B - S).max() <= 1e-12 * max(1.0, np.abs(V).max(), C)
        # the 2-d input of walrus() goes through the batched path
        assert np.array_equal(walrus(torch.from_numpy(V), C).numpy(), B)


def test_optimality_properties():
    rng = np.random.default_rng(3)
    for _ in range(200):
        m = int(rng.integers(1, 20))
        C = float(rng.uniform(0.1, 3))
        v = rng.normal(size=m) * 2
        b = walrus(v, C)
        assert bool((b >= 0).all()) and bool((b <= C).all())
        fb = float(ww_subproblem_objective(b, v))
        for _ in range(20):  # no feasible point does better
            z = torch.from_numpy(rng.uniform(0, C, size=m))
            assert fb <= float(ww_subproblem_objective(z, v)) + 1e-12
        # b* = clip(v - gamma 1) with gamma = 1'b* (Lemma A.9)
        g = float(b.sum())
        assert torch.allclose(b, (torch.from_numpy(v) - g).clamp(0, C), atol=1e-12)


def test_special_cases():
    assert torch.equal(walrus([-1.0, -2.0, 0.0], 1.0), torch.zeros(3, dtype=torch.float64))
    # k - 1 = 1: b = clip(v / 2, 0, C)
    for v in (-1.0, 0.5, 1.0, 3.0, 10.0):
        assert float(walrus([v], 1.0)[0]) == pytest.approx(min(max(v / 2, 0), 1.0), abs=1e-15)
    # all entries huge: every coordinate at C
    assert torch.allclose(walrus([1e6] * 5, 2.0), torch.full((5,), 2.0, dtype=torch.float64))
    # dtype and shape kept
    out = walrus(torch.tensor([0.3, 2.0, 1.0], dtype=torch.float32), 1.0)
    assert out.dtype == torch.float32 and out.shape == (3,)
    assert walrus_batched(torch.zeros(4, 0), 1.0).shape == (4, 0)


def test_fallback_bisection_matches():
    """The bisection fallback (used only when rounding defeats every KKT state) is exact too."""
    rng = np.random.default_rng(4)
    for _ in range(300):
        m = int(rng.integers(1, 20))
        C = float(rng.choice([0.5, 1.0, 3.0]))
        v = rng.integers(-4, 8, m) * C / 2 if rng.random() < 0.5 else rng.normal(size=m) * 3
        out = np.zeros(m)
        vmax = max(float(v.max()), 0.0)
        if vmax <= 0:
            continue
        total = K._walrus_bisect(v, m, C, out, vmax, max(1.0, vmax, C))
        assert np.abs(out - bisection_reference(v, C)).max() <= 1e-10 * _scale(v, C)
        assert total == pytest.approx(out.sum(), abs=1e-12)


@settings(max_examples=500, deadline=None)
@given(tie_heavy(), st.sampled_from([0.0, 0.3, 1.0, 1.5, 4.0, 1e3]), st.booleans())
def test_walrus_hint_is_only_a_speedup(case, hint, exact_hint):
    """BCD passes the block's previous sum as a guess of gamma* = 1'b* to prune the sort; any
    guess (exact, off, huge) must leave the answer unchanged."""
    v, C = case
    ref = bisection_reference(v, C)
    if exact_hint:
        hint = float(ref.sum())
    m = v.shape[0]
    ws = K.Workspace(m + 1)
    out = np.zeros(m)
    total = K.walrus_single(v, m, C, out, ws.heap, ws.hidx, ws.sv, ws.si, ws.prefix, hint)
    assert np.abs(out - ref).max() <= TOL * _scale(v, C)
    assert total == pytest.approx(out.sum(), abs=1e-12 * _scale(v, C) * m)


def test_python_kernels_equal_compiled():
    """The interpreter fallback (no numba) computes the same thing as the compiled kernel."""
    rng = np.random.default_rng(5)
    ws = K.Workspace(41)
    for _ in range(100):
        m = int(rng.integers(1, 41))
        C = 1.0
        v = rng.integers(-4, 8, m) * 0.5
        out1, out2 = np.zeros(m), np.zeros(m)
        s1 = K._walrus_py(v, m, C, out1, ws.heap, ws.hidx, ws.sv, ws.si, ws.prefix)
        s2 = K.walrus_single(v, m, C, out2, ws.heap, ws.hidx, ws.sv, ws.si, ws.prefix)
        assert np.array_equal(out1, out2) and s1 == s2


def test_iterative_converges_to_walrus():
    rng = np.random.default_rng(6)
    for _ in range(200):
        m = int(rng.integers(1, 30))
        C = float(rng.choice([0.5, 1.0, 2.0]))
        v = rng.normal(size=m) * 2
        b = iterative_ww_subproblem(v, C, eps=1e-13).numpy()
        assert np.abs(b - walrus(v, C).numpy()).max() <= 1e-6  # greedy CD: <= 10k steps
    # warm start at the optimum: nothing to do
    v = rng.normal(size=8)
    bstar = walrus(v, 1.0)
    assert torch.allclose(iterative_ww_subproblem(v, 1.0, bstar), bstar, atol=1e-12)
    # batched rows are solved independently
    V = rng.normal(size=(6, 5))
    rows = torch.stack([iterative_ww_subproblem(r, 1.0) for r in V])
    assert torch.allclose(iterative_ww_subproblem(V, 1.0), rows)


def test_one_interface():
    v = np.array([2.0, 0.5, -1.0, 1.5])
    a = solve_ww_subproblem(v, 1.0)
    b = solve_ww_subproblem(v, 1.0, method="iterative", eps=1e-14)
    assert torch.allclose(a, b, atol=1e-8)
    with pytest.raises(ValueError, match="method"):
        solve_ww_subproblem(v, 1.0, method="mosek")
    with pytest.raises(TypeError, match="no options"):
        solve_ww_subproblem(v, 1.0, eps=1.0)


@pytest.mark.parametrize("C", [0.0, -1.0, float("nan"), float("inf")])
def test_bad_C(C):
    with pytest.raises(ValueError, match="C"):
        walrus([1.0, 2.0], C)


def test_bad_v():
    with pytest.raises(ValueError, match="NaN"):
        walrus([1.0, float("nan")], 1.0)
    with pytest.raises(ValueError, match="1-d"):
        walrus(np.zeros((2, 2, 2)), 1.0)
    with pytest.raises(ValueError, match="box"):
        iterative_ww_subproblem([1.0, 2.0], 1.0, b0=[2.0, 0.0])
    with pytest.raises(ValueError, match="shape"):
        iterative_ww_subproblem([1.0, 2.0], 1.0, b0=[0.0])


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.cuda
def test_batched_on_cuda():
    rng = np.random.default_rng(7)
    V = torch.from_numpy(rng.integers(-6, 10, size=(1000, 30)) * 0.5)
    cpu = walrus_batched(V, 1.0)
    gpu = walrus(V.cuda(), 1.0)
    assert gpu.is_cuda
    assert torch.allclose(gpu.cpu(), cpu, atol=1e-12)
