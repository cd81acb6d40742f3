"""Blended pairwise CG and lazified FW: optima, LMO calls, active sets and warm starts.

References are independent of the solvers: the exact simplex QP solver
(:func:`torchfw.optimizers.active_set.simplex_qp`), closed-form projections (the optimum of
``||x - y||^2 / 2`` over a set is the projection of ``y``: ``clip`` on the hypercube, and the
projections of :mod:`torchfw.sets.polytopes` / :mod:`torchfw.sets.spectral`, certified in
``tests/test_sets.py``).
"""

from __future__ import annotations

import pytest
import torch

import torchfw as tf
from torchfw.optimizers.active_set import simplex_qp
from torchfw.optimizers.bpcg import BlendedPairwiseConditionalGradient as BPCG
from torchfw.optimizers.lazy import LazyFrankWolfe
from torchfw.result import ActiveSet
from torchfw.sets.polytopes import Birkhoff, Hypercube, KSparsePolytope
from torchfw.sets.spectral import NuclearNormBall

F64 = torch.float64


def distance_objective(y):
    """``||x - y||^2 / 2`` as a Quadratic (its minimizer over a set is the projection)."""
    n = y.numel()
    return tf.Quadratic(torch.eye(n, dtype=F64), -y, constant=0.5 * float(y @ y))


def least_squares(n, m=40, seed=0):
    gen = torch.Generator().manual_seed(seed)
    a = torch.randn(m, n, generator=gen, dtype=F64)
    b = torch.randn(m, generator=gen, dtype=F64)
    return tf.Quadratic(a.T @ a, -(a.T @ b)), a.T @ a, -(a.T @ b)


@pytest.mark.parametrize("cls", [BPCG])
def test_simplex_optimum_matches_exact_qp(cls):
    # (Lazified FW zig-zags like FW when the optimum is on a face: it is tested on interior
    # optima below.)
    obj, q, c = least_squares(15)
    w_ref, _ = simplex_qp(q.numpy(), c.numpy())
    f_ref = float(obj.value(torch.from_numpy(w_ref)))
    opt = cls(tf.Simplex(), tf.ExactLineSearch(), tol=1e-9, max_iter=50_000)
    res = opt.minimize(obj)
    assert res.converged
    assert res.value == pytest.approx(f_ref, abs=2e-9)
    assert res.gap <= 1e-9
    # The active set describes the returned point.
    torch.testing.assert_close(res.active_set.point(), res.x, atol=1e-9, rtol=0)
    assert bool(tf.Simplex().contains(res.active_set.atoms).all())


@pytest.mark.parametrize("cls", [BPCG, LazyFrankWolfe])
@pytest.mark.parametrize("low,high", [(-0.5, 1.5), (0.1, 0.9)], ids=["faces", "interior"])
def test_hypercube_projection(cls, low, high):
    if cls is LazyFrankWolfe and low < 0:
        pytest.skip("lazified FW zig-zags like FW toward an optimum on a face")
    y = torch.linspace(low, high, 12, dtype=F64)
    opt = cls(Hypercube(), tf.ExactLineSearch(), tol=1e-10, max_iter=20_000)
    res = opt.minimize(distance_objective(y), Hypercube().initial_point(12, dtype=F64))
    assert res.converged
    torch.testing.assert_close(res.x, y.clamp(0, 1), atol=1e-5, rtol=0)
    torch.testing.assert_close(res.active_set.point(), res.x, atol=1e-9, rtol=0)


@pytest.mark.parametrize("lmo", [KSparsePolytope(3, 0.4), Birkhoff(4)],
                         ids=["ksparse", "birkhoff"])
def test_bpcg_projection_onto_polytopes(lmo):
    n = 16
    y = torch.randn(n, generator=torch.Generator().manual_seed(3), dtype=F64)
    ref = lmo.project(y)
    res = BPCG(lmo, tf.ExactLineSearch(), tol=1e-12, max_iter=5_000).minimize(
        distance_objective(y), lmo.initial_point(n, dtype=F64))
    assert res.converged
    # f - f* <= gap and f is 1-strongly convex: ||x - x*||^2 <= 2 gap.
    assert float(torch.linalg.vector_norm(res.x - ref)) <= (2 * 1e-12) ** 0.5 + 1e-8
    assert res.steps["local"] > 0
    # Every atom is a vertex of the polytope (what the LMO returned) and in the set.
    assert bool(lmo.contains(res.active_set.atoms, atol=1e-12).all())


def test_lazy_calls_the_lmo_less_than_fw():
    y = 0.2 + 0.6 * torch.rand(40, generator=torch.Generator().manual_seed(1), dtype=F64)
    obj = distance_objective(y)
    x0 = Hypercube().initial_point(40, dtype=F64)
    fw = tf.FrankWolfe(Hypercube(), tf.ExactLineSearch(), tol=1e-6, max_iter=100_000).minimize(
        obj, x0)
    lazy = LazyFrankWolfe(Hypercube(), tf.ExactLineSearch(), tol=1e-6,
                          max_iter=100_000).minimize(obj, x0)
    assert fw.converged and lazy.converged
    assert lazy.gap <= 1e-6 and abs(lazy.value - fw.value) <= 2e-6
    # FW calls the LMO once per iteration (and once at the start).
    assert lazy.info["lmo_calls"] * 5 < fw.n_iter
    steps = lazy.steps
    assert steps["lazy"] > 0 and steps["dual"] >= 1
    assert lazy.info["lmo_calls"] == steps.get("dual", 0) + steps.get("lmo", 0) + \
        (1 if lazy.n_iter == sum(steps.values()) else 0)


def test_lazy_gap_is_exact_at_the_end():
    y = 0.2 + 0.6 * torch.rand(30, generator=torch.Generator().manual_seed(2), dtype=F64)
    obj = distance_objective(y)
    res = LazyFrankWolfe(Hypercube(), tf.ExactLineSearch(), max_iter=37).minimize(
        obj, Hypercube().initial_point(30, dtype=F64))
    g = res.x - y
    true_gap = float(g @ (res.x - Hypercube().lmo(g)))
    assert res.gap == pytest.approx(true_gap, rel=1e-12, abs=1e-15)
    assert res.best_gap >= res.gap - 1e-15 or res.best_gap <= res.gap


@pytest.mark.parametrize("cls", [BPCG, LazyFrankWolfe])
def test_nuclear_norm_ball(cls):
    gen = torch.Generator().manual_seed(4)
    m, n = 8, 6
    truth = torch.randn(m, 2, generator=gen, dtype=F64) @ torch.randn(2, n, generator=gen,
                                                                        dtype=F64)
    target = truth.reshape(-1)
    nuc = float(torch.linalg.svdvals(truth).sum())
    obj = distance_objective(target)
    # Inside the ball (radius 1.5 ||T||_*) the optimum is T itself: linear convergence.
    lmo = NuclearNormBall((m, n), 1.5 * nuc)
    res = cls(lmo, tf.ExactLineSearch(), tol=1e-8, max_iter=5_000).minimize(
        obj, lmo.initial_point(m * n, dtype=F64))
    assert res.converged
    assert float(torch.linalg.vector_norm(res.x - target)) <= (2e-8) ** 0.5
    if cls is LazyFrankWolfe:
        assert res.info["lmo_calls"] < res.n_iter
    # On the boundary (radius ||T||_* / 2) the optimum is the projection (a full SVD); the
    # returned gap bounds the suboptimality, which is non-negative.
    small = NuclearNormBall((m, n), 0.5 * nuc)
    f_ref = float(obj.value(small.project(target)))
    res = cls(small, tf.ExactLineSearch(), max_iter=200).minimize(
        obj, small.initial_point(m * n, dtype=F64))
    assert f_ref - 1e-9 <= res.value <= f_ref + res.gap + 1e-12
    assert bool(small.contains(res.x, atol=1e-9))


@pytest.mark.parametrize("lmo", [tf.Simplex(), KSparsePolytope(2, 0.5)], ids=["simplex", "ksp"])
def test_warm_start_from_active_set(lmo):
    obj, _, _ = least_squares(12, seed=5)
    x0 = lmo.initial_point(12, dtype=F64)
    cold = BPCG(lmo, tf.ExactLineSearch(), tol=1e-10, max_iter=10_000).minimize(obj, x0)
    part = BPCG(lmo, tf.ExactLineSearch(), tol=1e-10, max_iter=15).minimize(obj, x0)
    assert part.status == tf.Status.MAX_ITER
    warm = BPCG(lmo, tf.ExactLineSearch(), tol=1e-10, max_iter=10_000).minimize(
        obj, active_set=part.active_set)
    # The warm run starts where the partial run stopped and finishes the job.
    assert warm.history.value[0] == pytest.approx(part.value, abs=1e-12)
    assert warm.converged and warm.value == pytest.approx(cold.value, abs=1e-9)
    assert warm.n_iter < cold.n_iter
    # From a converged active set there is nothing left to do.
    again = BPCG(lmo, tf.ExactLineSearch(), tol=1e-10).minimize(obj, active_set=cold.active_set)
    assert again.converged and again.n_iter == 0


def test_warm_start_keeps_the_vertices():
    lmo = KSparsePolytope(2, 0.5)
    obj, _, _ = least_squares(10, seed=6)
    part = BPCG(lmo, tf.ExactLineSearch(), max_iter=8).minimize(obj, lmo.initial_point(
        10, dtype=F64))
    assert len(part.active_set) >= 2
    opt = BPCG(lmo, tf.ExactLineSearch(), max_iter=1, check_every=1)
    opt.minimize(obj, active_set=part.active_set)
    seen = opt._active.atoms
    # One step adds one vertex or drops one: the others are the partial run's vertices (a warm
    # start from the point alone would have forgotten them).
    kept = sum(bool((seen == atom).all(-1).any()) for atom in part.active_set.atoms)
    assert kept >= len(part.active_set) - 1


def test_active_set_errors():
    obj, _, _ = least_squares(6)
    lmo = tf.Simplex()
    good = ActiveSet(atoms=torch.eye(6, dtype=F64)[:2], weights=torch.tensor([0.5, 0.5],
                                                                              dtype=F64))
    with pytest.raises(ValueError, match="either x0 or active_set"):
        BPCG(lmo).minimize(obj, good.point(), active_set=good)
    outside = ActiveSet(atoms=2 * torch.eye(6, dtype=F64)[:2],
                        weights=torch.tensor([0.5, 0.5], dtype=F64))
    with pytest.raises(ValueError, match="outside the set"):
        BPCG(lmo).minimize(obj, active_set=outside)
    with pytest.raises(ValueError, match="sum to one"):
        ActiveSet(atoms=torch.eye(2, dtype=F64), weights=torch.tensor([0.5, 0.2], dtype=F64))
    with pytest.raises(ValueError, match="shape"):
        ActiveSet(atoms=torch.eye(2, dtype=F64), weights=torch.ones(3, dtype=F64) / 3)
    with pytest.raises(TypeError, match="ActiveSet"):
        BPCG(lmo).minimize(obj, active_set=(good.atoms, good.weights))
    with pytest.raises(ValueError, match="lazy_tolerance"):
        LazyFrankWolfe(lmo, lazy_tolerance=0.5)
    with pytest.raises(ValueError, match="host"):
        LazyFrankWolfe(lmo, execution="device")
