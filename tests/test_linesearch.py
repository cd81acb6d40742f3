"""Tests of the step-size strategies of :mod:`torchfw.linesearch`.

What is checked:

* :class:`~torchfw.ExactLineSearch` returns the minimizer of
  :math:`\\phi(\\gamma) = f + \\gamma\\,\\text{slope} + \\tfrac12\\gamma^2\\,\\text{curvature}` on
  :math:`[0, \\gamma_{\\max}]`, compared with :func:`scipy.optimize.minimize_scalar` (bounded), with
  host scalars and with device (0-d tensor) scalars; zero and negative curvature and ascent
  directions give the documented steps. End to end, every step of a Frank-Wolfe run on a
  :class:`~torchfw.Quadratic` (simplex, L1 ball, L2 ball, box) minimizes the true objective along
  the segment toward the LMO vertex, again against ``minimize_scalar`` on ``f`` computed here.
* :class:`~torchfw.OpenLoop` gives :math:`\\ell/(k+\\ell)` clipped to ``gamma_max``, and a
  Frank-Wolfe run with it moves by exactly that fraction toward the LMO vertex at each iteration.
* :class:`~torchfw.ShortStep` gives :math:`\\mathrm{clip}(-\\text{slope}/(L\\|d\\|^2), 0,
  \\gamma_{\\max})` and never increases an ``L``-smooth objective.
* :class:`~torchfw.Backtracking` never increases ``f``: on random smooth convex objectives
  (logistic loss, log-sum-exp, a quartic) over every set, with Frank-Wolfe and the away-step and
  pairwise variants, ``f`` recorded at every iteration (callback, ``check_every=1``) is
  non-increasing; each accepted step satisfies the sufficient-decrease condition.
* :class:`~torchfw.ExactLineSearch` with a non-quadratic callable raises a ``ValueError`` naming
  both before the objective is ever evaluated; invalid line-search parameters are rejected.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from hypothesis import example, given, settings
from hypothesis import strategies as st
from scipy.optimize import minimize_scalar

import torchfw as tf
from torchfw.utils.scalars import DEVICE, HOST

F64 = torch.float64


def _line(value, slope, curvature, gamma_max, ops=HOST, dnorm2=None, phi=None):
    if ops is DEVICE:
        value, slope, gamma_max = (torch.tensor(v, dtype=F64) for v in (value, slope, gamma_max))
        curvature = None if curvature is None else torch.tensor(curvature, dtype=F64)
        dnorm2 = None if dnorm2 is None else torch.tensor(dnorm2, dtype=F64)
    return tf.Line(value=value, slope=slope, gamma_max=gamma_max, curvature=curvature,
                   phi=phi, dnorm2=dnorm2, ops=ops)


def _scipy_argmin(phi, gamma_max):
    res = minimize_scalar(phi, bounds=(0.0, gamma_max), method="bounded",
                          options={"xatol": 1e-12, "maxiter": 500})
    # The bounded method never evaluates the end points: compare with them too.
    candidates = [(phi(0.0), 0.0), (phi(gamma_max), gamma_max), (res.fun, res.x)]
    return min(candidates)[1]


# ---------------------------------------------------------------------------------------------
# Exact line search
# ---------------------------------------------------------------------------------------------


@settings(max_examples=200, deadline=None)
@given(slope=st.one_of(st.floats(-10, 10), st.just(0.0)),
       curvature=st.one_of(st.floats(1e-3, 100), st.just(0.0)),
       gamma_max=st.one_of(st.floats(1e-3, 10), st.just(1.0)))
def test_exact_line_search_matches_minimize_scalar(slope, curvature, gamma_max):
    """Convex lines (curvature >= 0); negative curvature is in the edge-case test."""
    def phi(g):
        return 3.0 + g * slope + 0.5 * g * g * curvature

    ref = _scipy_argmin(phi, gamma_max)
    for ops in (HOST, DEVICE):
        gamma = float(tf.ExactLineSearch().step(_line(3.0, slope, curvature, gamma_max, ops), 0))
        assert 0.0 <= gamma <= gamma_max
        # The value is at least as good as scipy's, and the step agrees where the minimizer is
        # unique (strictly convex, or a strict slope on a flat line).
        assert phi(gamma) <= phi(ref) + 1e-10 * (1 + abs(slope) * gamma_max)
        if curvature > 0 or (curvature == 0 and abs(slope) > 1e-6):
            assert gamma == pytest.approx(ref, abs=1e-6 * max(1.0, gamma_max))
        if curvature > 0 and 0 < -slope / curvature < gamma_max:
            assert gamma == pytest.approx(-slope / curvature, rel=1e-12)


def test_exact_line_search_edge_cases():
    ls = tf.ExactLineSearch()
    for ops in (HOST, DEVICE):
        # An ascent direction: step 0, whatever the curvature.
        for curv in (1.0, 0.0, -1.0):
            assert float(ls.step(_line(1.0, 2.0, curv, 1.0, ops), 0)) == 0.0
        # Non-positive curvature along a descent direction: all the way.
        assert float(ls.step(_line(1.0, -2.0, 0.0, 0.7, ops), 0)) == 0.7
        assert float(ls.step(_line(1.0, -2.0, -3.0, 0.7, ops), 0)) == 0.7
        # Clipped at gamma_max, and gamma_max = 0 gives 0.
        assert float(ls.step(_line(1.0, -2.0, 1.0, 0.5, ops), 0)) == 0.5
        assert float(ls.step(_line(1.0, -2.0, 1.0, 0.0, ops), 0)) == 0.0
        # Zero slope: stay.
        assert float(ls.step(_line(1.0, 0.0, 1.0, 1.0, ops), 0)) == 0.0


def _quadratic(n, seed, psd_rank=None):
    gen = torch.Generator().manual_seed(seed)
    A = torch.randn(n, psd_rank or n, generator=gen, dtype=F64)
    Q = A @ A.T / n + (0.0 if psd_rank else 0.05) * torch.eye(n, dtype=F64)
    if psd_rank:
        Q = Q + 1e-3 * torch.eye(n, dtype=F64)  # ill-conditioned: a few large eigenvalues
    c = 0.1 * torch.randn(n, generator=gen, dtype=F64)
    return Q, c


def _record(points):
    def callback(info):
        points.append(info.x.detach().clone())
    return callback


@pytest.mark.parametrize("lmo", [tf.Simplex(), tf.L1Ball(2.0), tf.L2Ball(1.5),
                                 tf.LinfBall(0.5), tf.Box(-1.0, 2.0)], ids=repr)
@pytest.mark.parametrize("rank", [None, 3], ids=["pd", "illcond"])
def test_exact_steps_of_a_frank_wolfe_run_minimize_f_along_the_segment(lmo, rank):
    """Each FW step is the exact minimizer of the true f on the segment [x_k, v_k]."""
    n = 12
    Q, c = _quadratic(n, seed=7, psd_rank=rank)
    Qn, cn = Q.numpy(), c.numpy()

    def f(x):
        return 0.5 * x @ Qn @ x + cn @ x

    points = []
    x0 = lmo.initial_point(n, dtype=F64)
    res = tf.FrankWolfe(lmo, tf.ExactLineSearch(), tol=1e-12, max_iter=25, check_every=1,
                        callback=_record(points)).minimize(tf.Quadratic(Q, c), x0)
    points.append(res.x)
    assert len(points) >= 3
    n_checked = 0
    for x, x_next in zip(points[:-1], points[1:], strict=True):
        v = lmo.lmo(Q @ x + c)
        d = (v - x).numpy()
        dd = float(d @ d)
        if dd < 1e-20:
            continue
        gamma = float((x_next.numpy() - x.numpy()) @ d) / dd
        # The step stays on the segment toward the vertex.
        np.testing.assert_allclose(x_next.numpy(), x.numpy() + gamma * d, atol=1e-10)
        xn = x.numpy()
        ref = _scipy_argmin(lambda g, x=xn, d=d: f(x + g * d), 1.0)
        assert f(xn + gamma * d) <= f(xn + ref * d) + 1e-12
        # Optimality on [0, 1] from the derivative of f along d, computed here.
        curvature = float(d @ Qn @ d)
        derivative = float((Qn @ xn + cn) @ d) + gamma * curvature
        scale = 1e-9 * (1.0 + abs(float((Qn @ xn + cn) @ d)))
        if gamma < 1.0 - 1e-12:
            assert derivative >= -scale
        if gamma > 1e-12:
            assert derivative <= scale
        if curvature > 1e-3:
            assert gamma == pytest.approx(ref, abs=1e-5)
        n_checked += 1
    assert n_checked >= 2
    assert res.value == pytest.approx(f(res.x.numpy()), rel=1e-10, abs=1e-12)


# ---------------------------------------------------------------------------------------------
# Open loop and short step
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("ell", [1, 2, 3, 7])
def test_open_loop_values(ell):
    ls = tf.OpenLoop(ell)
    for k in range(0, 50, 7):
        expected = ell / (k + ell)
        assert ls.step(_line(0.0, -1.0, None, 1.0), k) == pytest.approx(expected, rel=1e-15)
        dev = ls.step(_line(0.0, -1.0, 1.0, 1.0, DEVICE), torch.tensor(k))
        assert isinstance(dev, torch.Tensor) and float(dev) == pytest.approx(expected, rel=1e-15)
        # Clipped at gamma_max.
        assert ls.step(_line(0.0, -1.0, None, 0.01), k) == min(expected, 0.01)
    assert tf.OpenLoop().step(_line(0.0, -1.0, None, 1.0), 0) == 1.0
    assert tf.OpenLoop().step(_line(0.0, -1.0, None, 1.0), 8) == 0.2


def _logistic(n, seed, m=40):
    gen = torch.Generator().manual_seed(seed)
    A = torch.randn(m, n, generator=gen, dtype=F64)
    y = torch.sign(torch.randn(m, generator=gen, dtype=F64))

    def loss(x):
        return torch.nn.functional.softplus(-y * (A @ x)).mean()

    # The Hessian of the mean logistic loss is below A'A / (4m).
    lipschitz = float(torch.linalg.matrix_norm(A, 2) ** 2) / (4 * m)
    return loss, lipschitz


@pytest.mark.parametrize("ell", [2, 4])
def test_frank_wolfe_with_open_loop_moves_by_ell_over_k_plus_ell(ell):
    n = 8
    loss, _ = _logistic(n, seed=3)
    lmo = tf.L1Ball(3.0)
    points = []
    x0 = torch.zeros(n, dtype=F64)
    res = tf.FrankWolfe(lmo, tf.OpenLoop(ell), tol=1e-12, max_iter=30, check_every=1,
                        callback=_record(points)).minimize(loss, x0)
    assert res.n_iter == 30
    for k, (x, x_next) in enumerate(zip(points[:-1], points[1:], strict=True)):
        xr = x.clone().requires_grad_(True)
        (g,) = torch.autograd.grad(loss(xr), xr)
        v = lmo.lmo(g)
        gamma = ell / (k + ell)
        torch.testing.assert_close(x_next, (1 - gamma) * x + gamma * v, rtol=1e-12, atol=1e-14)


def test_short_step_values():
    ls = tf.ShortStep(4.0)
    for ops in (HOST, DEVICE):
        line = _line(1.0, -2.0, None, 1.0, ops, dnorm2=2.0)
        assert float(ls.step(line, 0)) == pytest.approx(0.25)
        line = _line(1.0, -20.0, None, 1.0, ops, dnorm2=2.0)
        assert float(ls.step(line, 0)) == 1.0  # clipped
        line = _line(1.0, 3.0, None, 1.0, ops, dnorm2=2.0)
        assert float(ls.step(line, 0)) == 0.0  # ascent


@pytest.mark.parametrize("lmo", [tf.Simplex(), tf.L1Ball(3.0), tf.L2Ball(2.0), tf.Box(-1, 1)],
                         ids=repr)
def test_short_step_with_a_true_lipschitz_constant_never_increases_f(lmo):
    n = 10
    loss, lipschitz = _logistic(n, seed=5)
    values = []
    tf.FrankWolfe(lmo, tf.ShortStep(lipschitz), tol=1e-10, max_iter=200, check_every=1,
                  callback=lambda info: values.append(info.value)).minimize(
        loss, lmo.initial_point(n, dtype=F64))
    assert len(values) > 20
    assert all(b <= a for a, b in zip(values[:-1], values[1:], strict=True))


# ---------------------------------------------------------------------------------------------
# Backtracking
# ---------------------------------------------------------------------------------------------


def _objective(kind: str, n: int, seed: int):
    gen = torch.Generator().manual_seed(seed)
    if kind == "logistic":
        return _logistic(n, seed)[0]
    if kind == "logsumexp":
        A = 3.0 * torch.randn(30, n, generator=gen, dtype=F64)
        b = torch.randn(30, generator=gen, dtype=F64)
        return lambda x: torch.logsumexp(A @ x + b, dim=0)
    # A quartic plus a quadratic: curvature varies a lot along the run.
    c = torch.randn(n, generator=gen, dtype=F64)
    return lambda x: ((x - c) ** 4).sum() + 0.5 * (x * x).sum()


SETS = {"simplex": lambda: tf.Simplex(2.0), "l1": lambda: tf.L1Ball(1.5),
        "l2": lambda: tf.L2Ball(1.0), "linf": lambda: tf.LinfBall(0.7),
        "box": lambda: tf.Box(-0.5, 1.0)}


@settings(max_examples=30, deadline=None)
@given(kind=st.sampled_from(["logistic", "logsumexp", "quartic"]),
       set_name=st.sampled_from(sorted(SETS)), seed=st.integers(0, 10_000),
       n=st.integers(2, 25), eta=st.sampled_from([0.5, 0.9, 0.99]),
       tau=st.sampled_from([1.5, 2.0, 10.0]))
# Found by CI: the sufficient-decrease bound rounded one ulp above f(x).
@example(kind="logistic", set_name="l1", seed=1112, n=2, eta=0.5, tau=1.5)
# Found by a local run: x0 projects onto a vertex of the L1 ball that is optimal (gap exactly
# 0), so the run rightly stops before its first step.
@example(kind="quartic", set_name="l1", seed=323, n=2, eta=0.5, tau=1.5)
def test_backtracking_never_increases_f(kind, set_name, seed, n, eta, tau):
    objective = _objective(kind, n, seed)
    lmo = SETS[set_name]()
    values = []
    x0 = lmo.project(torch.randn(n, dtype=F64, generator=torch.Generator().manual_seed(seed)))
    res = tf.FrankWolfe(lmo, tf.Backtracking(eta=eta, tau=tau), tol=1e-12, max_iter=150,
                        check_every=1, callback=lambda info: values.append(info.value)
                        ).minimize(objective, x0)
    values.append(res.value)
    assert len(values) >= 2 or (res.n_iter == 0 and res.gap <= 1e-12)
    for k, (a, b) in enumerate(zip(values[:-1], values[1:], strict=True)):
        assert b <= a, f"f increased at iteration {k}: {a!r} -> {b!r}"
    assert values[-1] < values[0] or res.gap <= 1e-12


@pytest.mark.parametrize("cls", [tf.AwayStepFrankWolfe, tf.PairwiseFrankWolfe,
                                 tf.SwapFrankWolfe, tf.PartanFrankWolfe])
@pytest.mark.parametrize("set_name", ["simplex", "l1"])
def test_backtracking_never_increases_f_in_active_set_variants(cls, set_name):
    n = 15
    objective = _objective("logistic", n, seed=11)
    lmo = SETS[set_name]()
    values = []
    res = cls(lmo, tf.Backtracking(), tol=1e-10, max_iter=300, check_every=1,
              callback=lambda info: values.append(info.value)).minimize(
        objective, lmo.initial_point(n, dtype=F64))
    values.append(res.value)
    assert len(values) > 10
    assert all(b <= a for a, b in zip(values[:-1], values[1:], strict=True))


def test_backtracking_accepts_only_sufficient_decrease():
    """Each accepted step satisfies the Pedregosa et al. condition with the final estimate."""
    calls = []

    def phi(g):
        calls.append(g)
        return math.exp(3.0 * g) - 4.0 * g  # convex, phi'(0) = -1, phi''(g) = 9 exp(3g)

    ls = tf.Backtracking(lipschitz=0.01)
    line = tf.Line(value=1.0, slope=-1.0, gamma_max=1.0, phi=phi, dnorm2=1.0, ops=HOST)
    gamma = ls.step(line, 0)
    assert 0 < gamma <= 1.0
    assert len(calls) > 1  # the initial estimate was too small: at least one backtrack
    m = ls._estimate
    assert phi(gamma) <= 1.0 - gamma + 0.5 * gamma * gamma * m + 1e-15
    assert phi(gamma) < 1.0
    # The next call starts from eta * previous estimate; an ascent direction gives 0.
    assert ls.step(tf.Line(value=1.0, slope=0.5, gamma_max=1.0, phi=phi, dnorm2=1.0, ops=HOST),
                   1) == 0.0
    ls.reset()
    assert ls._estimate == 0.01 and ls.n_evaluations == 0


# ---------------------------------------------------------------------------------------------
# Mismatches and bad parameters
# ---------------------------------------------------------------------------------------------


def test_exact_line_search_with_a_callable_raises_before_the_first_iteration():
    calls = []

    def quartic_objective(x):
        calls.append(1)
        return (x ** 4).sum()

    x0 = torch.full((5,), 0.2, dtype=F64)
    for cls in (tf.FrankWolfe, tf.AwayStepFrankWolfe, tf.PartanFrankWolfe):
        with pytest.raises(ValueError, match="ExactLineSearch") as info:
            cls(tf.Simplex(), tf.ExactLineSearch()).minimize(quartic_objective, x0)
        assert "quartic_objective" in str(info.value)
        assert "Quadratic" in str(info.value)
    assert calls == []


def test_line_search_parameters_are_validated():
    with pytest.raises(ValueError, match="eta"):
        tf.Backtracking(eta=1.0)
    with pytest.raises(ValueError, match="eta"):
        tf.Backtracking(eta=0.0)
    with pytest.raises(ValueError, match="tau"):
        tf.Backtracking(tau=1.0)
    with pytest.raises(ValueError, match="lipschitz"):
        tf.Backtracking(lipschitz=-1.0)
    with pytest.raises(ValueError, match="max_tries"):
        tf.Backtracking(max_tries=0)
    with pytest.raises(ValueError, match="lipschitz"):
        tf.ShortStep(0.0)
    with pytest.raises(ValueError, match="lipschitz"):
        tf.ShortStep(math.nan)
    with pytest.raises(TypeError, match="lipschitz"):
        tf.ShortStep("1")
    with pytest.raises(ValueError, match="ell"):
        tf.OpenLoop(0)
    with pytest.raises(TypeError, match="ell"):
        tf.OpenLoop(2.5)
    with pytest.raises(TypeError, match="line_search"):
        tf.FrankWolfe(tf.Simplex(), "exact")
