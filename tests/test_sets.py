"""The sets of :mod:`torchfw.sets.polytopes` and :mod:`torchfw.sets.spectral` against independent answers.

* Polytopes (K-sparse, 0/1 hypercube, Birkhoff): the LMO value equals the optimum of the linear
  program over an explicit inequality description, solved by :func:`scipy.optimize.linprog`, on
  random directions, batched, float32 and float64.
* Lp and group-L1 balls: the LMO attains the dual norm (Hoelder), ``<g, v> = -r ||g||_*``, and
  lies on the sphere.
* Nuclear-norm ball and spectraplex: the LMO value is ``-r sigma_1`` / ``r lambda_min`` of the full
  SVD / eigendecomposition to the stated tolerance, the vertex is rank one, and a warm start
  takes fewer Lanczos steps.
* ``project`` is feasible and optimal (its Frank-Wolfe gap for ``||z - y||^2 / 2`` is ~0),
  ``max_step`` lands on the boundary, ``diameter`` is the largest vertex distance.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import torch
from conftest import requires_cuda
from scipy.optimize import linprog

from torchfw.sets.polytopes import Birkhoff, GroupL1Ball, Hypercube, KSparsePolytope, LpBall
from torchfw.sets.spectral import NuclearNormBall, Spectraplex, lanczos_extreme

DTYPES = [torch.float64, torch.float32]


def rtol_of(dtype):
    return 1e-9 if dtype == torch.float64 else 1e-4


# -- polytopes against linprog ----------------------------------------------------------------

def lp_ksparse(c, k, r):
    """min c'x over {||x||_1 <= r k, |x_i| <= r} with x = p - m, p, m >= 0."""
    n = len(c)
    cost = np.concatenate([c, -c])
    a_ub = np.vstack([np.ones((1, 2 * n)), np.hstack([np.eye(n), np.eye(n)])])
    b_ub = np.concatenate([[r * k], np.full(n, r)])
    res = linprog(cost, A_ub=a_ub, b_ub=b_ub, bounds=(0, None), method="highs")
    assert res.status == 0
    return res.fun


def lp_hypercube(c):
    res = linprog(c, bounds=(0, 1), method="highs")
    return res.fun


def lp_birkhoff(c, m):
    a_eq = np.vstack([np.kron(np.eye(m), np.ones((1, m))), np.kron(np.ones((1, m)), np.eye(m))])
    res = linprog(c, A_eq=a_eq, b_eq=np.ones(2 * m), bounds=(0, None), method="highs")
    assert res.status == 0
    return res.fun


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("k,r", [(1, 1.0), (3, 2.5), (7, 0.5), (20, 1.0)])
def test_ksparse_equals_lp(dtype, k, r):
    lmo = KSparsePolytope(k, r)
    g = torch.randn(6, 12, dtype=dtype)
    v = lmo.lmo(g)
    assert v.shape == g.shape and v.dtype == dtype
    assert bool(lmo.contains(v, atol=1e-6).all())
    values = (g * v).sum(-1).double()
    for row in range(g.shape[0]):
        ref = lp_ksparse(g[row].double().numpy(), min(k, 12), r)
        assert values[row].item() == pytest.approx(ref, rel=rtol_of(dtype), abs=1e-9)
    # A vertex: min(k, n) entries of magnitude r, the rest zero.
    assert bool(((v.abs() - r).abs() < 1e-6).sum(-1).eq(min(k, 12)).all())


def test_ksparse_per_row_radius_and_1d():
    radius = torch.tensor([1.0, 2.0, 3.0], dtype=torch.float64)
    lmo = KSparsePolytope(2, radius)
    g = torch.randn(3, 5, dtype=torch.float64)
    v = lmo.lmo(g)
    for row in range(3):
        assert (g[row] * v[row]).sum().item() == pytest.approx(
            lp_ksparse(g[row].numpy(), 2, float(radius[row])), rel=1e-9)
    v1 = KSparsePolytope(2, 1.5).lmo(g[0])
    assert v1.shape == (5,)


@pytest.mark.parametrize("dtype", DTYPES)
def test_hypercube_equals_lp(dtype):
    lmo = Hypercube()
    g = torch.randn(5, 9, dtype=dtype)
    v = lmo.lmo(g)
    assert set(v.unique().tolist()) <= {0.0, 1.0}
    for row in range(5):
        assert (g[row] * v[row]).sum().item() == pytest.approx(
            lp_hypercube(g[row].double().numpy()), rel=rtol_of(dtype), abs=1e-7)
    assert lmo.diameter(9) == pytest.approx(3.0)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("m", [1, 2, 5])
def test_birkhoff_equals_lp(dtype, m):
    lmo = Birkhoff(m)
    g = torch.randn(4, m * m, dtype=dtype)
    v = lmo.lmo(g)
    assert v.shape == g.shape and v.dtype == dtype
    assert bool(lmo.contains(v).all())
    mats = v.reshape(4, m, m)
    assert bool((mats.sum(-1) == 1).all() and (mats.sum(-2) == 1).all())  # permutations
    for row in range(4):
        assert (g[row] * v[row]).sum().item() == pytest.approx(
            lp_birkhoff(g[row].double().numpy(), m), rel=rtol_of(dtype), abs=1e-7)


def test_birkhoff_project_and_errors():
    lmo = Birkhoff(4)
    y = torch.randn(3, 16, dtype=torch.float64)
    p = lmo.project(y)
    assert bool(lmo.contains(p, atol=1e-8).all())
    # Optimality: the Frank-Wolfe gap of ||z - y||^2 / 2 at p over the polytope is ~0.
    grad = p - y
    gap = (grad * (p - lmo.lmo(grad))).sum(-1)
    assert float(gap.max()) < 1e-7
    with pytest.raises(ValueError, match="16 entries"):
        lmo.lmo(torch.randn(15))
    with pytest.raises(ValueError, match="m must be"):
        Birkhoff(0)


# -- balls against the closed form (Hoelder) --------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("p", [1.1, 1.5, 2.0, 3.0, 7.0])
def test_lp_ball_hoelder(dtype, p):
    r = 1.7
    lmo = LpBall(p, r)
    g = torch.randn(8, 11, dtype=dtype)
    v = lmo.lmo(g)
    q = p / (p - 1)
    dual = torch.linalg.vector_norm(g.double(), ord=q, dim=-1)
    torch.testing.assert_close((g * v).sum(-1).double(), -r * dual, rtol=rtol_of(dtype) * 10,
                               atol=0)
    torch.testing.assert_close(torch.linalg.vector_norm(v.double(), ord=p, dim=-1),
                               torch.full((8,), r, dtype=torch.float64),
                               rtol=rtol_of(dtype) * 10, atol=0)
    # No feasible point does better (random points scaled onto the sphere).
    z = torch.randn(200, 11, dtype=torch.float64)
    z = r * z / torch.linalg.vector_norm(z, ord=p, dim=-1, keepdim=True)
    assert float((g.double() @ z.T).min(-1).values.min() - (g * v).sum(-1).double().min()) \
        >= -1e-5


def test_lp_ball_extremes_of_scale_and_zero():
    lmo = LpBall(3.0, 2.0)
    for scale in (1e-300, 1e300):
        g = torch.tensor([scale, -2 * scale, 0.0], dtype=torch.float64)
        v = lmo.lmo(g)
        assert bool(torch.isfinite(v).all())
        assert torch.linalg.vector_norm(v, ord=3.0).item() == pytest.approx(2.0)
    assert lmo.lmo(torch.zeros(4, dtype=torch.float64)).tolist() == [2.0, 0.0, 0.0, 0.0]
    with pytest.raises(ValueError, match="1 < p < inf"):
        LpBall(1.0)
    with pytest.raises(ValueError):
        LpBall(math.inf)


@pytest.mark.parametrize("p", [1.5, 3.0])
def test_lp_ball_project_and_max_step(p):
    lmo = LpBall(p, 1.0)
    y = 3 * torch.randn(5, 6, dtype=torch.float64)
    proj = lmo.project(y)
    assert bool(lmo.contains(proj, atol=1e-9).all())
    gap = ((proj - y) * (proj - lmo.lmo(proj - y))).sum(-1)
    assert float(gap.abs().max()) < 1e-7
    inside = 0.3 * proj
    torch.testing.assert_close(lmo.project(inside), inside)
    d = torch.randn(5, 6, dtype=torch.float64)
    step = lmo.max_step(inside, d)
    on = inside + step.unsqueeze(-1) * d
    torch.testing.assert_close(torch.linalg.vector_norm(on, ord=p, dim=-1),
                               torch.ones(5, dtype=torch.float64), rtol=1e-8, atol=0)
    assert lmo.diameter(16) == pytest.approx(2.0 * 16 ** max(0.0, 0.5 - 1 / p))


@pytest.mark.parametrize("dtype", DTYPES)
def test_group_l1_dual_norm(dtype):
    ids = [0, 0, 1, 2, 2, 2, 1, 3]
    lmo = GroupL1Ball(ids, 2.0)
    g = torch.randn(7, 8, dtype=dtype)
    v = lmo.lmo(g)
    gd = g.double()
    norms = torch.stack([torch.linalg.vector_norm(gd[:, [i for i, t in enumerate(ids) if t == G]],
                                                  dim=-1) for G in range(4)], -1)
    torch.testing.assert_close((g * v).sum(-1).double(), -2.0 * norms.max(-1).values,
                               rtol=rtol_of(dtype) * 10, atol=0)
    torch.testing.assert_close(lmo.norm(v.double()), torch.full((7,), 2.0, dtype=torch.float64),
                               rtol=rtol_of(dtype) * 10, atol=0)
    # Equal consecutive groups give the same set as explicit ids.
    same = GroupL1Ball(2, 1.0)
    g2 = torch.randn(3, 6, dtype=dtype)
    torch.testing.assert_close(same.lmo(g2), GroupL1Ball([0, 0, 1, 1, 2, 2], 1.0).lmo(g2))


def test_group_l1_project_and_errors():
    lmo = GroupL1Ball(3, 1.0)
    y = torch.randn(4, 9, dtype=torch.float64)
    proj = lmo.project(y)
    assert bool(lmo.contains(proj, atol=1e-9).all())
    gap = ((proj - y) * (proj - lmo.lmo(proj - y))).sum(-1)
    assert float(gap.abs().max()) < 1e-9
    with pytest.raises(ValueError, match="multiple"):
        lmo.lmo(torch.randn(8))
    with pytest.raises(ValueError, match="every id"):
        GroupL1Ball([0, 2, 2])


def test_ksparse_project_max_step_diameter():
    lmo = KSparsePolytope(2, 1.0)
    y = 2 * torch.randn(6, 5, dtype=torch.float64)
    proj = lmo.project(y)
    assert bool(lmo.contains(proj, atol=1e-9).all())
    gap = ((proj - y) * (proj - lmo.lmo(proj - y))).sum(-1)
    assert float(gap.max()) < 1e-8
    x = 0.5 * proj
    d = torch.randn(6, 5, dtype=torch.float64)
    step = lmo.max_step(x, d)
    assert bool(lmo.contains(x + step.unsqueeze(-1) * d, atol=1e-9).all())
    assert not bool(lmo.contains(x + 1.001 * step.unsqueeze(-1) * d, atol=1e-9).any())
    # Diameter = largest distance between two of the 2^K C(n, K) vertices (n = 4, K = 2).
    verts = []
    for support in itertools.combinations(range(4), 2):
        for signs in itertools.product([-1.0, 1.0], repeat=2):
            v = torch.zeros(4, dtype=torch.float64)
            v[list(support)] = torch.tensor(signs, dtype=torch.float64)
            verts.append(v)
    verts = torch.stack(verts)
    assert KSparsePolytope(2).diameter(4) == pytest.approx(float(torch.cdist(verts, verts).max()))


def test_birkhoff_diameter_brute_force():
    perms = torch.stack([torch.eye(3, dtype=torch.float64)[list(p)].reshape(-1)
                         for p in itertools.permutations(range(3))])
    assert Birkhoff(3).diameter(9) == pytest.approx(float(torch.cdist(perms, perms).max()))


# -- spectral sets against full decompositions ------------------------------------------------

def spectral_rtol(dtype, lmo):
    return 10 * lmo._tol(torch.empty(0, dtype=dtype)) if dtype == torch.float64 else 1e-4


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(30, 20), (15, 40), (1, 7)])
def test_nuclear_lmo_matches_svd(dtype, shape):
    r = 3.0
    lmo = NuclearNormBall(shape, r)
    g = torch.randn(4, shape[0] * shape[1], dtype=dtype)
    v = lmo.lmo(g)
    assert v.shape == g.shape and v.dtype == dtype
    sigma1 = torch.linalg.svdvals(g.double().reshape(4, *shape))[:, 0]
    torch.testing.assert_close((g * v).sum(-1).double(), -r * sigma1,
                               rtol=spectral_rtol(dtype, lmo), atol=0)
    # A vertex: rank one with nuclear norm r.
    sv = torch.linalg.svdvals(v.double().reshape(4, *shape))
    torch.testing.assert_close(sv[:, 0], torch.full((4,), r, dtype=torch.float64),
                               rtol=1e-5, atol=0)
    if min(shape) > 1:
        assert float(sv[:, 1].max()) < 1e-5 * r


def test_nuclear_warm_start_takes_fewer_steps():
    shape = (60, 50)
    # A matrix with a clear but not huge spectral gap, and a small perturbation of it.
    torch.manual_seed(1)
    u, _ = torch.linalg.qr(torch.randn(60, 50, dtype=torch.float64))
    w, _ = torch.linalg.qr(torch.randn(50, 50, dtype=torch.float64))
    s = torch.linspace(1.0, 0.5, 50, dtype=torch.float64)
    s[0] = 1.2
    g = (u * s) @ w.T
    warm = NuclearNormBall(shape, tol=1e-10)
    warm.lmo(g.reshape(-1))
    cold_steps = warm.last_steps
    g2 = g + 1e-4 * torch.randn_like(g)
    v = warm.lmo(g2.reshape(-1))
    cold = NuclearNormBall(shape, tol=1e-10, warm_start=False)
    v_cold = cold.lmo(g2.reshape(-1))
    assert warm.last_steps < cold.last_steps and cold.last_steps == cold_steps
    torch.testing.assert_close(v, v_cold, rtol=0, atol=1e-6)


def test_nuclear_project_contains_max_step():
    lmo = NuclearNormBall((6, 5), 2.0)
    y = torch.randn(3, 30, dtype=torch.float64)
    p = lmo.project(y)
    assert bool(lmo.contains(p, atol=1e-9).all())
    gap = ((p - y) * (p - lmo.lmo(p - y))).sum(-1)
    assert float(gap.abs().max()) < 1e-7
    x = 0.5 * p
    d = torch.randn(3, 30, dtype=torch.float64)
    step = lmo.max_step(x, d)
    torch.testing.assert_close(lmo.norm(x + step.unsqueeze(-1) * d),
                               torch.full((3,), 2.0, dtype=torch.float64), rtol=1e-8, atol=0)
    assert bool(lmo.contains(lmo.initial_point(30, dtype=torch.float64)))
    with pytest.raises(ValueError, match="30 entries"):
        lmo.lmo(torch.randn(29))
    with pytest.raises(ValueError, match="shape"):
        NuclearNormBall((3, 0))


@pytest.mark.parametrize("dtype", DTYPES)
def test_spectraplex_matches_eigh(dtype):
    n, r = 25, 2.0
    lmo = Spectraplex(n, r)
    g = torch.randn(3, n * n, dtype=dtype)
    v = lmo.lmo(g)
    mats = g.double().reshape(3, n, n)
    lam = torch.linalg.eigvalsh(0.5 * (mats + mats.mT))[:, 0]
    torch.testing.assert_close((g * v).sum(-1).double(), r * lam,
                               rtol=spectral_rtol(dtype, lmo), atol=1e-5 * r)
    assert bool(lmo.contains(v.double(), atol=1e-5).all())
    y = torch.randn(3, n * n, dtype=torch.float64)
    p = lmo.project(y)
    assert bool(lmo.contains(p, atol=1e-9).all())
    gap = ((p - y) * (p - lmo.lmo(p - y))).sum(-1)
    assert float(gap.abs().max()) < 1e-7


def test_lanczos_reports_smallest_and_largest():
    a = torch.randn(2, 12, 12, dtype=torch.float64)
    a = a + a.mT
    evals = torch.linalg.eigvalsh(a)

    def matvec(z):
        return torch.bmm(a, z.unsqueeze(-1)).squeeze(-1)

    z0 = torch.randn(2, 12, dtype=torch.float64)
    hi, _, _ = lanczos_extreme(matvec, z0, largest=True, tol=1e-12)
    lo, _, _ = lanczos_extreme(matvec, z0, largest=False, tol=1e-12)
    torch.testing.assert_close(hi, evals[:, -1])
    torch.testing.assert_close(lo, evals[:, 0])


# -- shape checks used by torchfw.optim, devices ----------------------------------------------

ALL = [lambda: KSparsePolytope(2), lambda: LpBall(3.0), lambda: GroupL1Ball(2), Hypercube,
       lambda: Birkhoff(2), lambda: NuclearNormBall((2, 2)), lambda: Spectraplex(2)]


@pytest.mark.parametrize("make", ALL)
def test_meta_tensors_give_shapes(make):
    # StochasticFrankWolfe checks that a set fits a parameter with a "meta" tensor.
    out = make().lmo(torch.empty(3, 4, device="meta"))
    assert out.shape == (3, 4)


@pytest.mark.parametrize("make", ALL)
def test_initial_point_feasible_and_diameter_bounds_vertices(make):
    lmo = make()
    x0 = lmo.initial_point(4, dtype=torch.float64)
    assert bool(lmo.contains(x0, atol=1e-9))
    verts = lmo.lmo(torch.randn(64, 4, dtype=torch.float64))
    assert float(torch.cdist(verts, verts).max()) <= lmo.diameter(4) + 1e-9


@requires_cuda
@pytest.mark.parametrize("make", ALL)
def test_cuda_matches_cpu(make):
    lmo = make()
    g = torch.randn(5, 4, dtype=torch.float64)
    v_cpu = lmo.lmo(g)
    v_gpu = make().lmo(g.cuda())
    assert v_gpu.is_cuda
    torch.testing.assert_close((g * v_cpu).sum(-1), (g * v_gpu.cpu()).sum(-1))
