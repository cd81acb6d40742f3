"""Conformance suite for the linear minimization oracles (LMOs) of :mod:`torchfw.sets.oracles`.

Every oracle (``Simplex``, ``L1Ball``, ``L2Ball``, ``LinfBall``, ``Box``), with several radii and
bounds, including tensor radii for batched ``(B, n)`` inputs, is checked against references
written here from the definitions of the sets, independently of the implementation:

* **Vertex.** ``lmo(g)`` is feasible (``contains`` and an independent membership test) and optimal:
  ``<g, lmo(g)>`` equals the brute-force minimum over all atoms (simplex, L1 ball), the closed
  form ``-r ||g||`` (L2 ball) or ``sum_i min(g_i l_i, g_i u_i)`` (box, L-infinity ball), and it is
  cross-checked with :func:`scipy.optimize.linprog` and with many sampled feasible points.
  Gradients come from Hypothesis and include ties, zeros, ``-0.0``, huge (``1e300``) and tiny
  (``1e-300``) entries.
* **Tie-breaking** is deterministic: the lowest atom index (positive atoms before negative ones on
  the L1 ball), the upper bound for a zero gradient coordinate on a box, ``r e_0`` for a zero
  gradient on the L2 ball.
* **Shape, dtype and device** of the input are kept (float32 and float64; CUDA in a test that is
  skipped without a GPU).
* **Atomic interface** (simplex, L1 ball): ``atom_scores``, ``argmin_atom``, ``atom_dot``,
  ``atom``, ``atom_coordinate``, ``atom_gather``, ``to_point``/``to_weights`` agree with each
  other and with dense atoms built here.
* **max_step**: ``x + max_step(x, d) d`` is feasible and on the boundary; the value agrees with a
  bisection on ``contains``.
* **project**: the result is feasible and optimal (the variational inequality
  ``<y - p, z - p> <= 0`` for every ``z`` in the set, checked with the LMO itself as the Frank-Wolfe
  gap of ``||z - y||^2 / 2`` at ``p``, and against :func:`scipy.optimize.minimize` on small
  problems); projecting a feasible point returns it.
* ``diameter`` equals the brute-force largest distance between vertices; ``initial_point`` is
  feasible; invalid radii and bounds are rejected.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pytest
import torch
from conftest import requires_cuda
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scipy.optimize import linprog, minimize

import torchfw as tf

F64 = torch.float64

# ---------------------------------------------------------------------------------------------
# The cases: every oracle, several parameters, scalar and per-row (tensor) radii.
# ---------------------------------------------------------------------------------------------


@dataclass
class Case:
    """An oracle factory. ``batch`` is the number of rows (``None``: 1-d inputs)."""

    name: str
    kind: str  # simplex | l1 | l2 | box
    make: Callable[[int], tf.LMO]
    batch: int | None = None

    def __repr__(self) -> str:
        return self.name


def _box_bounds(n: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-coordinate bounds (deterministic in ``n``), one coordinate with lower == upper."""
    gen = torch.Generator().manual_seed(1000 + n)
    lower = -2.0 * torch.rand(n, generator=gen, dtype=F64) - 0.1
    upper = lower + 3.0 * torch.rand(n, generator=gen, dtype=F64)
    upper[n // 2] = lower[n // 2]
    return lower, upper


RADII_B = torch.tensor([1.0, 2.5, 0.3], dtype=F64)

CASES = [
    Case("Simplex(1)", "simplex", lambda n: tf.Simplex()),
    Case("Simplex(3.5)", "simplex", lambda n: tf.Simplex(3.5)),
    Case("Simplex(0.25)", "simplex", lambda n: tf.Simplex(0.25)),
    Case("Simplex(tensor0d)", "simplex", lambda n: tf.Simplex(torch.tensor(2.0, dtype=F64))),
    Case("Simplex(B)", "simplex", lambda n: tf.Simplex(RADII_B), batch=3),
    Case("L1Ball(1)", "l1", lambda n: tf.L1Ball()),
    Case("L1Ball(2.5)", "l1", lambda n: tf.L1Ball(2.5)),
    Case("L1Ball(0.1)", "l1", lambda n: tf.L1Ball(0.1)),
    Case("L1Ball(B)", "l1", lambda n: tf.L1Ball(RADII_B), batch=3),
    Case("L2Ball(1)", "l2", lambda n: tf.L2Ball()),
    Case("L2Ball(0.3)", "l2", lambda n: tf.L2Ball(0.3)),
    Case("L2Ball(B)", "l2", lambda n: tf.L2Ball(RADII_B), batch=3),
    Case("LinfBall(1)", "box", lambda n: tf.LinfBall()),
    Case("LinfBall(4)", "box", lambda n: tf.LinfBall(4.0)),
    Case("LinfBall(B)", "box", lambda n: tf.LinfBall(RADII_B), batch=3),
    Case("Box(-1,2)", "box", lambda n: tf.Box(-1.0, 2.0)),
    Case("Box(tensor)", "box", lambda n: tf.Box(*_box_bounds(n))),
    Case("Box(tensor,B)", "box", lambda n: tf.Box(*_box_bounds(n)), batch=3),
]
ATOMIC = [c for c in CASES if c.kind in ("simplex", "l1")]

# ---------------------------------------------------------------------------------------------
# Independent references, written from the definitions of the sets (NumPy, float64).
# ---------------------------------------------------------------------------------------------


def _radius_rows(lmo, batch) -> np.ndarray:
    """The radius of each row as a NumPy array of shape (B,) (B = 1 for 1-d inputs)."""
    r = lmo.radius
    r = r.detach().cpu().numpy().astype(np.float64) if isinstance(r, torch.Tensor) else r
    return np.broadcast_to(np.asarray(r, dtype=np.float64), (batch or 1,)).copy()


def _bounds_rows(lmo, n: int, batch) -> tuple[np.ndarray, np.ndarray]:
    """Lower and upper bounds of a box-like set as arrays of shape (B, n)."""
    if isinstance(lmo, tf.LinfBall):
        r = _radius_rows(lmo, batch)[:, None]
        return np.broadcast_to(-r, (batch or 1, n)), np.broadcast_to(r, (batch or 1, n))
    lo = lmo.lower.numpy() if isinstance(lmo.lower, torch.Tensor) else lmo.lower
    hi = lmo.upper.numpy() if isinstance(lmo.upper, torch.Tensor) else lmo.upper
    return (np.broadcast_to(np.asarray(lo, np.float64), (batch or 1, n)),
            np.broadcast_to(np.asarray(hi, np.float64), (batch or 1, n)))


def _dense_atoms(kind: str, n: int, r: float) -> np.ndarray:
    """All atoms of the simplex (``r e_i``) or L1 ball (``r e_i`` then ``-r e_i``) as rows."""
    eye = np.eye(n)
    return r * (eye if kind == "simplex" else np.concatenate([eye, -eye]))


def _rows(t: torch.Tensor) -> np.ndarray:
    return t.detach().cpu().to(F64).numpy().reshape(-1, t.shape[-1])


def _scaled_norm(g: np.ndarray) -> float:
    """``||g||_2`` without overflow or underflow (scale by the largest entry first)."""
    m = float(np.max(np.abs(g)))
    return 0.0 if m == 0 else m * float(np.linalg.norm(g / m))


def _reference_min(case: Case, lmo, g: torch.Tensor) -> np.ndarray:
    """``min_{v in C} <g, v>`` per row, from the definition of the set."""
    gr = _rows(g)
    n = gr.shape[1]
    out = []
    if case.kind in ("simplex", "l1"):
        for b, r in enumerate(_radius_rows(lmo, case.batch)):
            out.append(min(float(v) for v in _dense_atoms(case.kind, n, r) @ gr[b]))
    elif case.kind == "l2":
        for b, r in enumerate(_radius_rows(lmo, case.batch)):
            out.append(-r * _scaled_norm(gr[b]))
    else:
        lo, hi = _bounds_rows(lmo, n, case.batch)
        for b in range(gr.shape[0]):
            out.append(math.fsum(np.minimum(gr[b] * lo[b], gr[b] * hi[b])))
    return np.array(out)


def _expected_vertex(case: Case, lmo, g: torch.Tensor) -> np.ndarray | None:
    """The vertex the documented tie-breaking rule selects (None for the L2 ball, non-zero g)."""
    gr = _rows(g)
    n = gr.shape[1]
    out = []
    for b in range(gr.shape[0]):
        if case.kind in ("simplex", "l1"):
            r = _radius_rows(lmo, case.batch)[b]
            # Ranking atoms by <g, a_k> / r (exact: a sign flip at most) avoids rounding of r * g.
            signs = np.ones(n) if case.kind == "simplex" else np.concatenate([np.ones(n),
                                                                            -np.ones(n)])
            scores = signs * np.concatenate([gr[b]] * (1 if case.kind == "simplex" else 2))
            k = int(np.flatnonzero(scores == scores.min())[0])  # lowest index on ties
            out.append(_dense_atoms(case.kind, n, r)[k])
        elif case.kind == "l2":
            r = _radius_rows(lmo, case.batch)[b]
            if np.any(gr[b] != 0):
                return None
            out.append(r * np.eye(n)[0])
        else:
            lo, hi = _bounds_rows(lmo, n, case.batch)
            out.append(np.where(gr[b] > 0, lo[b], hi[b]))
    return np.array(out)


def _member(case: Case, lmo, x: torch.Tensor, atol: float) -> np.ndarray:
    """Independent membership test per row."""
    xr = _rows(x)
    n = xr.shape[1]
    if case.kind == "box":
        lo, hi = _bounds_rows(lmo, n, case.batch)
        return np.all((xr >= lo - atol) & (xr <= hi + atol), axis=1)
    r = _radius_rows(lmo, case.batch)
    if case.kind == "simplex":
        return np.all(xr >= -atol, axis=1) & (np.abs(xr.sum(1) - r) <= atol * max(1, n))
    if case.kind == "l1":
        return np.abs(xr).sum(1) <= r + atol * max(1, n)
    return np.array([_scaled_norm(row) for row in xr]) <= r + atol


def _shape(case: Case, n: int) -> tuple[int, ...]:
    return (case.batch, n) if case.batch else (n,)


# ---------------------------------------------------------------------------------------------
# Hypothesis strategies.
# ---------------------------------------------------------------------------------------------

SPECIAL = [0.0, -0.0, 1.0, -1.0, 2.0, -2.0, 1e300, -1e300, 1e-300, -1e-300, 3.0, -3.0]
ENTRY = st.one_of(
    st.sampled_from(SPECIAL),                                  # ties, zeros, extremes
    st.integers(-3, 3).map(float),                             # many exact ties
    st.floats(-1e6, 1e6, allow_nan=False, allow_infinity=False),
)
SETTINGS = settings(max_examples=40, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])


@st.composite
def gradients(draw, case: Case, max_n: int = 9):
    """A float64 gradient of the case's shape, with ties, zeros and extreme entries."""
    n = draw(st.integers(1, max_n))
    rows = case.batch or 1
    values = draw(st.lists(ENTRY, min_size=rows * n, max_size=rows * n))
    return torch.tensor(values, dtype=F64).reshape(_shape(case, n))


# ---------------------------------------------------------------------------------------------
# The vertex: feasible, optimal, tie-breaking, shape/dtype/device.
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("case", CASES, ids=repr)
@SETTINGS
@given(data=st.data())
def test_lmo_vertex_is_feasible_and_optimal(case, data):
    g = data.draw(gradients(case))
    n = g.shape[-1]
    lmo = case.make(n)
    v = lmo.lmo(g)
    assert v.shape == g.shape and v.dtype == g.dtype and v.device == g.device
    assert torch.isfinite(v).all()
    contained = lmo.contains(v)
    assert contained.shape == g.shape[:-1]
    assert bool(contained.all())
    assert _member(case, lmo, v, atol=1e-12).all()
    # Optimality: <g, v> equals the reference minimum (exactly for atoms and boxes up to the
    # rounding of a sum, to 1e-12 relative for the L2 ball).
    got = np.array([math.fsum(a * b) for a, b in zip(_rows(g), _rows(v), strict=True)])
    ref = _reference_min(case, lmo, g)
    assert np.all(got - ref <= 1e-12 * np.abs(ref)), (got, ref)
    np.testing.assert_allclose(got, ref, rtol=1e-12, atol=0)


@pytest.mark.parametrize("case", CASES, ids=repr)
@SETTINGS
@given(data=st.data())
def test_lmo_tie_breaking_is_deterministic(case, data):
    """The documented rule picks one vertex among equal ones: lowest index, upper bound, e_0."""
    g = data.draw(gradients(case))
    lmo = case.make(g.shape[-1])
    v = lmo.lmo(g)
    expected = _expected_vertex(case, lmo, g)
    if expected is not None:
        np.testing.assert_array_equal(_rows(v), expected)
    # The same input always gives the same output, also through a copy with permuted memory.
    assert torch.equal(lmo.lmo(g.clone()), v)
    if case.batch:
        # Each row of a batch gets the answer it would get alone.
        for b in range(case.batch):
            single = _single_row_oracle(case, lmo, b)
            assert torch.equal(single.lmo(g[b]), v[b])


def _single_row_oracle(case: Case, lmo, b: int):
    """The oracle of row ``b`` of a batched case, with a scalar radius."""
    if case.kind == "box" and not isinstance(lmo, tf.LinfBall):
        return lmo
    r = float(lmo.radius[b])
    return {"simplex": tf.Simplex, "l1": tf.L1Ball, "l2": tf.L2Ball, "box": tf.LinfBall}[
        case.kind](r)


@pytest.mark.parametrize("case", [c for c in CASES if c.batch is None], ids=repr)
def test_lmo_optimal_against_linprog_and_sampled_points(case):
    """Cross-check with an LP solver (polytopes) and with many feasible points (every set)."""
    rng = np.random.default_rng(0)
    for n in (1, 2, 5, 13):
        lmo = case.make(n)
        g = torch.from_numpy(rng.standard_normal(n))
        v = lmo.lmo(g)
        value = float(g @ v)
        if case.kind != "l2":
            if case.kind == "box":
                lo, hi = (b[0] for b in _bounds_rows(lmo, n, None))
                res = linprog(g.numpy(), bounds=list(zip(lo, hi, strict=True)), method="highs")
            else:
                # x = u - w with u, w >= 0 for the L1 ball; x >= 0, sum x = r for the simplex.
                r = _radius_rows(lmo, None)[0]
                if case.kind == "simplex":
                    res = linprog(g.numpy(), A_eq=np.ones((1, n)), b_eq=[r], bounds=(0, None),
                                  method="highs")
                else:
                    c = np.concatenate([g.numpy(), -g.numpy()])
                    res = linprog(c, A_ub=np.ones((1, 2 * n)), b_ub=[r], bounds=(0, None),
                                  method="highs")
            assert res.status == 0
            assert value == pytest.approx(res.fun, rel=1e-9, abs=1e-9)
        points = _feasible_points(case, lmo, n, 2000, rng)
        assert bool(lmo.contains(points, atol=1e-9).all())
        assert value <= float((points @ g).min()) + 1e-12


def _feasible_points(case: Case, lmo, n: int, m: int, rng) -> torch.Tensor:
    """``m`` random feasible points of a non-batched set (interior and boundary)."""
    if case.kind == "simplex":
        r = _radius_rows(lmo, None)[0]
        w = rng.dirichlet(np.full(n, 0.3), size=m)
        return torch.from_numpy(r * w)
    if case.kind == "l1":
        r = _radius_rows(lmo, None)[0]
        w = rng.dirichlet(np.full(n, 0.3), size=m) * rng.uniform(0, 1, (m, 1)) ** 0.2
        return torch.from_numpy(r * w * rng.choice([-1.0, 1.0], size=(m, n)))
    if case.kind == "l2":
        r = _radius_rows(lmo, None)[0]
        u = rng.standard_normal((m, n))
        u /= np.linalg.norm(u, axis=1, keepdims=True)
        return torch.from_numpy(r * u * rng.uniform(0, 1, (m, 1)) ** 0.1)
    lo, hi = (b[0] for b in _bounds_rows(lmo, n, None))
    t = rng.uniform(0, 1, (m, n))
    t = np.where(rng.uniform(size=(m, n)) < 0.3, np.round(t), t)
    return torch.from_numpy(lo + t * (hi - lo))


@pytest.mark.parametrize("case", CASES, ids=repr)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=str)
def test_lmo_keeps_shape_dtype_device(case, dtype):
    n = 7
    lmo = case.make(n)
    g = torch.randn(_shape(case, n), dtype=dtype)
    v = lmo.lmo(g)
    assert v.shape == g.shape and v.dtype == dtype and v.device == g.device
    assert bool(lmo.contains(v, atol=1e-6).all())
    # Same vertex as in float64 (up to float32 rounding of the radius).
    v64 = lmo.lmo(g.to(F64))
    torch.testing.assert_close(v.to(F64), v64, rtol=1e-6, atol=1e-6)
    if case.kind in ("simplex", "l1"):
        k = lmo.argmin_atom(g)
        assert k.dtype == torch.int64 and k.shape == g.shape[:-1]
        assert lmo.atom_scores(g).dtype == dtype
        assert lmo.atom_dot(g, k).dtype == dtype and lmo.atom_dot(g, k).shape == g.shape[:-1]
    x = lmo.project(3 * g)
    assert x.shape == g.shape and x.dtype == dtype
    assert lmo.contains(v).dtype == torch.bool


@requires_cuda
@pytest.mark.cuda
@pytest.mark.parametrize("case", CASES, ids=repr)
def test_lmo_on_cuda_matches_cpu(case):
    n = 11
    lmo = case.make(n)
    lmo_cuda = _to_device(lmo, "cuda")
    for dtype in (torch.float32, torch.float64):
        g = torch.randn(_shape(case, n), dtype=dtype)
        g[..., 3] = g[..., 5]  # a tie
        v = lmo_cuda.lmo(g.cuda())
        assert v.is_cuda and v.dtype == dtype and v.shape == g.shape
        torch.testing.assert_close(v.cpu(), lmo.lmo(g))
        assert bool(lmo_cuda.contains(v).all())
        assert lmo_cuda.contains(v).is_cuda
        x = torch.randn(_shape(case, n), dtype=dtype)
        torch.testing.assert_close(lmo_cuda.project(x.cuda()).cpu(), lmo.project(x))
        if case.kind in ("simplex", "l1"):
            k = lmo_cuda.argmin_atom(g.cuda())
            assert k.is_cuda
            torch.testing.assert_close(k.cpu(), lmo.argmin_atom(g))


def _to_device(lmo, device):
    """A copy of ``lmo`` whose tensor parameters live on ``device``."""
    if isinstance(lmo, tf.LinfBall):
        r = lmo.radius
        return tf.LinfBall(r.to(device) if isinstance(r, torch.Tensor) else r)
    if isinstance(lmo, tf.Box):
        lo, hi = lmo.lower, lmo.upper
        return tf.Box(lo.to(device) if isinstance(lo, torch.Tensor) else lo,
                      hi.to(device) if isinstance(hi, torch.Tensor) else hi)
    r = lmo.radius
    return type(lmo)(r.to(device) if isinstance(r, torch.Tensor) else r)


# ---------------------------------------------------------------------------------------------
# Atomic interface (simplex, L1 ball).
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("case", ATOMIC, ids=repr)
@SETTINGS
@given(data=st.data())
def test_atomic_interface_is_consistent(case, data):
    g = data.draw(gradients(case))
    n = g.shape[-1]
    lmo = case.make(n)
    N = lmo.n_atoms(n)
    assert N == (n if case.kind == "simplex" else 2 * n)
    radii = _radius_rows(lmo, case.batch)
    dense = np.stack([_dense_atoms(case.kind, n, r) for r in radii])  # (B, N, n)
    scores = lmo.atom_scores(g)
    assert scores.shape == g.shape[:-1] + (N,)
    # atom_scores[k] = <g, a_k> (one nonzero per atom: exact).
    ref_scores = np.einsum("bkn,bn->bk", dense, _rows(g))
    np.testing.assert_array_equal(_rows(scores), ref_scores)
    # argmin_atom: the lowest index among the minimizers; lmo returns that atom.
    k = lmo.argmin_atom(g)
    assert k.shape == g.shape[:-1]
    kk = k.reshape(-1).numpy()
    for b in range(len(radii)):
        row = ref_scores[b]
        assert kk[b] == int(np.flatnonzero(row == row.min())[0])
    assert torch.equal(lmo.lmo(g), lmo.atom(k, n, dtype=F64))
    # atom_dot(g, k) = atom_scores(g)[k], for the argmin and for every other index.
    torch.testing.assert_close(lmo.atom_dot(g, k), scores.gather(-1, k.unsqueeze(-1))
                               .squeeze(-1), rtol=0, atol=0)
    for j in range(N):
        idx = torch.full(g.shape[:-1], j, dtype=torch.int64)
        got = lmo.atom_dot(g, idx if case.batch else j)
        np.testing.assert_array_equal(np.atleast_1d(got.numpy()), ref_scores[:, j])


@pytest.mark.parametrize("case", ATOMIC, ids=repr)
def test_atoms_coordinates_gather_and_weights(case):
    n = 6
    lmo = case.make(n)
    N = lmo.n_atoms(n)
    B = case.batch or 1
    radii = _radius_rows(lmo, case.batch)
    dense = np.stack([_dense_atoms(case.kind, n, r) for r in radii])  # (B, N, n)
    for j in range(N):
        idx = torch.full(_shape(case, n)[:-1], j, dtype=torch.int64)
        a = lmo.atom(idx if case.batch else j, n, dtype=F64)
        np.testing.assert_array_equal(_rows(a), dense[:, j])
        coord, sign = lmo.atom_coordinate(torch.tensor(j), n)
        assert int(coord) == j % n and int(sign) == (1 if j < n else -1)
        # to_point of the one-hot weight vector is the atom.
        onehot = torch.zeros(_shape(case, N), dtype=F64)
        onehot[..., j] = 1.0
        np.testing.assert_array_equal(_rows(lmo.to_point(onehot)), dense[:, j])
    v = torch.randn(_shape(case, n), dtype=F64)
    gathered = lmo.atom_gather(v)
    coords = torch.tensor([int(lmo.atom_coordinate(torch.tensor(j), n)[0]) for j in range(N)])
    assert torch.equal(gathered, v[..., coords])
    # to_weights / to_point round trip on random feasible points (interior and boundary).
    rng = np.random.default_rng(1)
    for _ in range(20):
        w = rng.dirichlet(np.full(N, 0.2), size=B)
        w[rng.uniform(size=w.shape) < 0.3] = 0.0
        w = w / np.maximum(w.sum(1, keepdims=True), 1e-300)
        w[w.sum(1) == 0, 0] = 1.0
        x = lmo.to_point(torch.from_numpy(w if case.batch else w[0]))
        assert bool(lmo.contains(x).all())
        if case.kind == "l1":  # points strictly inside the ball too
            x = x * 0.5
        w2 = lmo.to_weights(x)
        assert w2.shape == x.shape[:-1] + (N,)
        assert bool((w2 >= 0).all())
        torch.testing.assert_close(w2.sum(-1), torch.ones(x.shape[:-1], dtype=F64))
        torch.testing.assert_close(lmo.to_point(w2), x, rtol=1e-12, atol=1e-14)


# ---------------------------------------------------------------------------------------------
# max_step, project, diameter, initial_point.
# ---------------------------------------------------------------------------------------------


def _random_feasible(case: Case, lmo, n: int, rng) -> torch.Tensor:
    """A feasible point of the case's shape: a mix of projections (boundary, sparse) and atoms."""
    y = torch.from_numpy(rng.standard_normal(_shape(case, n)) * rng.choice([0.1, 1.0, 5.0]))
    x = lmo.project(y)
    t = float(rng.uniform())
    g = torch.from_numpy(rng.standard_normal(_shape(case, n)))
    if rng.uniform() < 0.3:
        return lmo.lmo(g)  # a vertex
    if case.kind in ("simplex", "box") or rng.uniform() < 0.5:
        return (1 - t) * x + t * lmo.lmo(g)
    return x * t if rng.uniform() < 0.5 else x  # interior or boundary of a ball


def _random_direction(case: Case, lmo, x: torch.Tensor, rng) -> torch.Tensor:
    d = torch.from_numpy(rng.standard_normal(x.shape))
    kind = rng.integers(0, 3)
    if kind == 1:  # a Frank-Wolfe direction
        d = lmo.lmo(torch.from_numpy(rng.standard_normal(x.shape))) - x
    elif kind == 2:  # sparse
        d = d * torch.from_numpy((rng.uniform(size=x.shape) < 0.3).astype(np.float64))
    if case.kind == "simplex":
        # Stay in the affine hull {sum x = r} *exactly*: entries on a dyadic grid, the last one
        # closing the sum (a rounding residue of 1e-17 at a zero coordinate would rightly give a
        # zero step and hide what is tested).
        d = torch.round((d - d.mean(-1, keepdim=True)) * 1024) / 1024
        d[..., -1] = -d[..., :-1].sum(-1)
    return d


def _bisect_max_step(lmo, x: torch.Tensor, d: torch.Tensor, atol: float) -> float:
    """Largest t with ``x + t d`` in the set, by bisection on ``contains``."""
    def ok(t):
        return bool(lmo.contains(x + t * d, atol=atol))

    hi = 1.0
    while ok(hi):
        hi *= 2.0
        if hi > 1e12:
            return math.inf
    lo = 0.0
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if ok(mid):
            lo = mid
        else:
            hi = mid
    return lo


@pytest.mark.parametrize("case", CASES, ids=repr)
def test_max_step_reaches_the_boundary(case):
    rng = np.random.default_rng(2)
    n_checked = 0
    for trial in range(40):
        n = int(rng.integers(1, 9))
        lmo = case.make(n)
        x = _random_feasible(case, lmo, n, rng)
        d = _random_direction(case, lmo, x, rng)
        if case.kind == "simplex" and n == 1:
            continue  # no direction in the affine hull
        ms = lmo.max_step(x, d)
        assert ms.shape == x.shape[:-1]
        assert bool((ms >= 0).all())
        rows_x = x.reshape(-1, n)
        rows_d = d.reshape(-1, n)
        for b in range(rows_x.shape[0]):
            single = _single_row_oracle(case, lmo, b) if case.batch else lmo
            xb, db = rows_x[b], rows_d[b]
            t = float(ms.reshape(-1)[b])
            ref = _bisect_max_step(single, xb, db, atol=1e-13)
            if math.isinf(ref):
                assert math.isinf(t) or float(db.abs().max()) == 0.0
                continue
            assert math.isfinite(t), (xb, db)
            assert t == pytest.approx(ref, rel=1e-7, abs=1e-9), (trial, xb, db)
            # Feasible at the step, infeasible a little beyond it (the boundary).
            assert bool(single.contains(xb + t * db, atol=1e-9))
            beyond = t + 1e-6 * max(1.0, t)
            assert not bool(single.contains(xb + beyond * db, atol=1e-12))
            n_checked += 1
    assert n_checked > 20


@pytest.mark.parametrize("case", [c for c in CASES if c.kind != "simplex"], ids=repr)
def test_max_step_is_zero_pointing_out_of_the_boundary(case):
    n = 5
    lmo = case.make(n)
    g = torch.randn(_shape(case, n), dtype=F64)
    v = lmo.lmo(g)  # on the boundary; -g points outward there (<-g, v - x> <= 0 for feasible x)
    ms = lmo.max_step(v, -g)
    torch.testing.assert_close(ms, torch.zeros_like(ms), atol=1e-12, rtol=0)


def test_max_step_simplex_zero_at_a_vertex_leaving_the_face():
    lmo = tf.Simplex(2.0)
    x = torch.tensor([2.0, 0.0, 0.0], dtype=F64)
    assert float(lmo.max_step(x, torch.tensor([1.0, -1.0, 0.0], dtype=F64))) == 0.0
    assert float(lmo.max_step(x, torch.tensor([-1.0, 1.0, 0.0], dtype=F64))) == 2.0


def test_max_step_l1_regressions():
    """Cases the random test found: a dip below r before the last breakpoint; a flat face."""
    lmo = tf.L1Ball(1.0)
    x = torch.tensor([0.1, -0.9], dtype=F64)
    d = torch.tensor([-1.0, 2.0], dtype=F64)  # phi: 1 -> 0.7 (g=0.1) -> 0.35 (g=0.45) -> 1
    assert float(lmo.max_step(x, d)) == pytest.approx(2.0 / 3.0, rel=1e-14)
    # Along the face of the boundary toward a vertex: phi stays r until the vertex.
    lmo = tf.L1Ball(0.3)
    x = torch.tensor([0.1, -0.05, -0.15], dtype=F64)
    v = torch.tensor([0.3, 0.0, 0.0], dtype=F64)
    assert float(lmo.max_step(x, v - x)) == pytest.approx(1.0, rel=1e-12)
    # A point outside by one rounding error still moves inward.
    x = torch.tensor([0.3 + 1e-16, 0.0], dtype=F64)
    assert float(lmo.max_step(x, -x)) == pytest.approx(2.0, rel=1e-12)


@pytest.mark.parametrize("case", CASES, ids=repr)
def test_project_is_feasible_and_optimal(case):
    rng = np.random.default_rng(3)
    for _ in range(25):
        n = int(rng.integers(1, 12))
        lmo = case.make(n)
        y = torch.from_numpy(rng.standard_normal(_shape(case, n)) * rng.choice([0.05, 1, 10]))
        p = lmo.project(y)
        assert p.shape == y.shape and p.dtype == y.dtype
        assert bool(lmo.contains(p, atol=1e-10).all())
        assert _member(case, lmo, p, atol=1e-10).all()
        # Variational inequality <y - p, z - p> <= 0 for all feasible z: the Frank-Wolfe gap of
        # ||z - y||^2 / 2 at p, computed with the (separately tested) LMO, must be ~0.
        grad = p - y
        v = lmo.lmo(grad)
        fw_gap = (grad * (p - v)).sum(-1)
        scale = 1.0 + (y.abs().amax(-1)) ** 2
        assert bool((fw_gap <= 1e-12 * scale).all()), fw_gap
        # Idempotent on feasible points.
        torch.testing.assert_close(lmo.project(p), p, rtol=1e-12, atol=1e-13)


@pytest.mark.parametrize("case", [c for c in CASES if c.batch is None], ids=repr)
def test_project_matches_scipy(case):
    rng = np.random.default_rng(4)
    for n in (1, 3, 6):
        lmo = case.make(n)
        y = rng.standard_normal(n) * 2.0
        p = lmo.project(torch.from_numpy(y)).numpy()
        cons, bounds = [], None
        if case.kind == "simplex":
            r = _radius_rows(lmo, None)[0]
            cons = [{"type": "eq", "fun": lambda z, r=r: z.sum() - r}]
            bounds = [(0, None)] * n
        elif case.kind == "l1":
            # Smooth split z = u - w, u, w >= 0, sum(u + w) <= r.
            r = _radius_rows(lmo, None)[0]
            res = minimize(lambda uw, n=n, y=y: 0.5 * np.sum((uw[:n] - uw[n:] - y) ** 2),
                           np.zeros(2 * n), method="SLSQP", bounds=[(0, None)] * (2 * n),
                           constraints=[{"type": "ineq", "fun": lambda uw, r=r: r - uw.sum()}],
                           options={"ftol": 1e-14, "maxiter": 500})
            np.testing.assert_allclose(p, res.x[:n] - res.x[n:], atol=1e-6)
            continue
        elif case.kind == "l2":
            r = _radius_rows(lmo, None)[0]
            cons = [{"type": "ineq", "fun": lambda z, r=r: r * r - z @ z}]
        else:
            lo, hi = (b[0] for b in _bounds_rows(lmo, n, None))
            bounds = list(zip(lo, hi, strict=True))
        res = minimize(lambda z, y=y: 0.5 * np.sum((z - y) ** 2), np.zeros(n) + 1e-3,
                       jac=lambda z, y=y: z - y, method="SLSQP", bounds=bounds, constraints=cons,
                       options={"ftol": 1e-14, "maxiter": 500})
        np.testing.assert_allclose(p, res.x, atol=1e-6)


def test_project_extreme_magnitudes():
    """Projections of huge and tiny vectors keep their direction (no overflow to 0 or NaN)."""
    for scale in (1e300, 1e-300):
        y = torch.tensor([3.0, -4.0], dtype=F64) * scale
        p = tf.L2Ball(1.0).project(y)
        torch.testing.assert_close(p, torch.tensor([0.6, -0.8], dtype=F64) if scale > 1 else y)
        p = tf.L1Ball(1.0).project(y)
        assert bool(tf.L1Ball(1.0).contains(p)) and torch.isfinite(p).all()
        p = tf.Simplex(1.0).project(y)
        assert bool(tf.Simplex(1.0).contains(p)) and torch.isfinite(p).all()


@pytest.mark.parametrize("case", CASES, ids=repr)
def test_diameter_is_the_largest_vertex_distance(case):
    for n in (1, 2, 3, 5):
        lmo = case.make(n)
        d = lmo.diameter(n)
        if case.kind in ("simplex", "l1"):
            ref = 0.0
            for r in _radius_rows(lmo, case.batch):
                atoms = _dense_atoms(case.kind, n, r)
                ref = max(ref, max(np.linalg.norm(a - b) for a in atoms for b in atoms))
        elif case.kind == "l2":
            ref = 2.0 * _radius_rows(lmo, case.batch).max()
        else:
            lo, hi = _bounds_rows(lmo, n, case.batch)
            ref = 0.0
            for b in range(lo.shape[0]):
                corners = [np.where(np.array(bits), hi[b], lo[b])
                           for bits in itertools.product([0, 1], repeat=n)]
                ref = max(ref, max(np.linalg.norm(u - v) for u in corners for v in corners))
        assert d == pytest.approx(ref, rel=1e-12, abs=1e-15)


@pytest.mark.parametrize("case", [c for c in CASES if c.batch is None], ids=repr)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=str)
def test_initial_point_is_feasible(case, dtype):
    for n in (1, 4, 50):
        lmo = case.make(n)
        x0 = lmo.initial_point(n, dtype=dtype)
        assert x0.shape == (n,) and x0.dtype == dtype and x0.device.type == "cpu"
        assert bool(lmo.contains(x0))
        assert _member(case, lmo, x0, atol=1e-6).all()


# ---------------------------------------------------------------------------------------------
# Bad parameters.
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("cls", [tf.Simplex, tf.L1Ball, tf.L2Ball, tf.LinfBall])
def test_invalid_radius_is_rejected(cls):
    for bad in (0.0, -1.0, math.nan, math.inf):
        with pytest.raises(ValueError, match="radius"):
            cls(bad)
    with pytest.raises(TypeError, match="radius"):
        cls("1.0")
    with pytest.raises(ValueError, match="radius"):
        cls(torch.tensor([1.0, -2.0]))
    with pytest.raises(ValueError, match="radius"):
        cls(torch.tensor([1.0, math.nan]))
    with pytest.raises(ValueError, match="radius"):
        cls(torch.ones(2, 2))


def test_invalid_box_is_rejected():
    with pytest.raises(ValueError, match="lower <= upper"):
        tf.Box(1.0, 0.0)
    with pytest.raises(ValueError, match="lower <= upper"):
        tf.Box(torch.zeros(3), torch.tensor([1.0, -1.0, 1.0]))
    with pytest.raises(ValueError, match="upper"):
        tf.Box(0.0, math.inf)
    with pytest.raises(ValueError, match="lower"):
        tf.Box(torch.tensor([0.0, math.nan]), 1.0)
