"""Declared second implementations: the registry is complete, and each twin takes its reference's
steps.

:data:`torchfw.utils.twins.SECOND_IMPLEMENTATIONS` lists every compiled or
specialised copy of an iteration's decision logic with the reference it mirrors and a parity
test. The first tests walk the table (every twin and reference resolves, every parity test
exists, every function that calls itself a declared second implementation is listed); the others
are the parity tests the table names in this file: same steps, to rounding, on random problems.
"""

from __future__ import annotations

import ast
import math
import struct
from pathlib import Path

import numpy as np
import pytest
import torch

import torchfw as tf
from torchfw.linesearch import ExactLineSearch, Line
from torchfw.optim import StochasticFrankWolfe
from torchfw.optimizers import _kernels as K
from torchfw.optimizers._moves import away_step_max
from torchfw.optimizers.bcd import BlockCoordinateDescent, BlockQuadratic
from torchfw.utils.scalars import HOST
from torchfw.utils.twins import SECOND_IMPLEMENTATIONS, resolve

ROOT = Path(__file__).resolve().parents[1]
F64 = torch.float64
PHRASE = "declared second implementation"


# ---------------------------------------------------------------------------------------------
# The registry
# ---------------------------------------------------------------------------------------------

def _python_function(obj):
    """The Python function behind a compiled dispatcher (or the object itself)."""
    return getattr(obj, "py_func", obj)


def _test_functions(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    return {node.name for node in tree.body if isinstance(node, ast.FunctionDef)}


@pytest.mark.parametrize("entry", SECOND_IMPLEMENTATIONS, ids=[e.twin for e in
                                                               SECOND_IMPLEMENTATIONS])
def test_every_declared_twin_resolves_and_has_a_parity_test(entry):
    assert callable(resolve(entry.twin)), entry.twin
    resolve(entry.reference)
    assert entry.twin != entry.reference
    assert entry.why.strip()
    file, sep, name = entry.parity_test.partition("::")
    assert file.startswith("tests/test_") and file.endswith(".py"), entry.parity_test
    path = ROOT / file
    assert path.is_file(), f"{entry.twin}: parity test file {file} is missing"
    tests = _test_functions(path)
    if sep:
        assert name in tests, f"{entry.twin}: no test {name} in {file}"
    else:  # the whole file is the twin's parity suite: it has tests and names the twin
        assert any(t.startswith("test_") for t in tests), f"{file} has no test"
        assert entry.twin.rsplit(".", 1)[-1] in path.read_text(), f"{file} never names the twin"


def test_every_function_that_says_it_is_a_twin_is_declared():
    """A docstring that says "declared second implementation" must be backed by the table."""
    declared = set()
    for entry in SECOND_IMPLEMENTATIONS:
        fn = _python_function(resolve(entry.twin))
        declared.add((fn.__module__, fn.__qualname__))
    claims = set()
    for path in sorted((ROOT / "torchfw").rglob("*.py")):
        module = ".".join(path.relative_to(ROOT).with_suffix("").parts)
        module = module.removesuffix(".__init__")
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
                doc = ast.get_docstring(node) or ""
                if PHRASE in " ".join(doc.lower().split()):
                    claims.add((module, node.name))
    assert claims, "the scan found no twin at all: it is broken"
    missing = {c for c in claims
               if not any(m == c[0] and q.split(".")[-1] == c[1] for m, q in declared)}
    assert not missing, f"functions that call themselves twins but are not in the table: {missing}"


def test_the_registry_module_imports_nothing_of_torchfw():
    source = (ROOT / "torchfw" / "utils" / "twins.py").read_text()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom):
            assert node.level == 0 and not (node.module or "").startswith("torchfw"), \
                "the table names code by dotted path; importing it would tie the layers"


# ---------------------------------------------------------------------------------------------
# Host-float scalar twins: bit for bit
# ---------------------------------------------------------------------------------------------

def _bits(x: float) -> bytes:
    return struct.pack("<d", float(x))


def _step_cases():
    rng = np.random.default_rng(0)
    slopes = list(rng.normal(size=40) * 10.0 ** rng.integers(-8, 4, 40))
    slopes += [0.0, -0.0, -1e-310, 1e-310, math.nan, -math.inf]
    curvatures = list(np.abs(rng.normal(size=20)) * 10.0 ** rng.integers(-6, 4, 20))
    curvatures += [0.0, -1.0, 1e-300, 1e-299, 1e-301, math.nan, math.inf]
    gamma_maxes = [1.0, 0.0, 0.3, 1e-17, 7.5, math.inf]
    return [(s, c, g) for s in slopes for c in curvatures for g in gamma_maxes]


def test_exact_step_is_the_line_search():
    """``_kernels._exact_step`` (and its compiled form) is ``ExactLineSearch.step`` on host
    floats, bit for bit, edge cases (flat lines, NaN, -0.0, infinite bounds) included."""
    line_search = ExactLineSearch()
    kernels = [K._exact_step] + ([K._step_kernel] if K.HAVE_NUMBA else [])
    checked = 0
    for slope, curvature, gamma_max in _step_cases():
        ref = line_search.step(Line(value=0.0, slope=slope, gamma_max=gamma_max,
                                    curvature=curvature, ops=HOST), 0)
        for kernel in kernels:
            got = kernel(slope, curvature, gamma_max)
            assert _bits(got) == _bits(ref), (kernel, slope, curvature, gamma_max, got, ref)
        checked += 1
    assert checked > 5_000


def test_away_step_max_is_the_moves_one():
    rng = np.random.default_rng(1)
    weights = list(rng.random(200)) + [0.0, 1.0, 1.0 - 2.0 ** -53, 2.0 ** -1074, 0.5, 1.5]
    kernels = [K._away_step_max] + ([K._away_max_kernel] if K.HAVE_NUMBA else [])
    for w in weights:
        ref = away_step_max(float(w), HOST)
        for kernel in kernels:
            assert _bits(kernel(float(w))) == _bits(ref), (kernel, w)


def test_compiled_loop_formulas_are_the_shared_ones():
    """The compiled loop calls the compiled ``_moves`` formulas: no formula of its own."""
    from torchfw.optimizers import _compiled_loop as L
    from torchfw.optimizers import _moves

    assert _python_function(K._toward_curvature_kernel) is _moves.toward_curvature
    assert _python_function(K._pair_curvature_kernel) is _moves.pair_curvature
    assert _python_function(L._partan_scalars) is _moves.partan_scalars
    assert _python_function(L._cross_after) is _moves.cross_after_scalars
    source = ast.unparse(ast.parse(Path(L.__file__).read_text()))
    body = source[source.index("def _run_loop"):source.index("def _n_positive_py")]
    assert "2.0 *" not in body, "a curvature written out again in the compiled loop"
    assert "1e-11" not in body and "lam * lam" not in body, "PARTAN's line written out again"


def test_second_order_gain_is_written_once():
    """SWAP-2o's partner score is :func:`torchfw.optimizers._moves.second_order_gain`: the
    compiled partner search calls it compiled and returns the gain it compared, which the
    sharded storage compares its ranks' best partners by (it writes no gain of its own); the
    bits agree, NaN and tiny curvatures included."""
    from torchfw.distributed import engine as sharded
    from torchfw.optimizers import _moves

    assert _python_function(K._second_order_gain) is _moves.second_order_gain
    partner = ast.unparse(ast.parse(Path(K.__file__).read_text()))
    partner = partner[partner.index("def _second_order_partner_py"):]
    partner = partner[:partner.index("\ndef _exact_step")]
    assert "_second_order_gain(" in partner
    sharded_source = ast.unparse(ast.parse(Path(sharded.__file__).read_text()))
    assert "second_order_best(" in sharded_source and "second_order_gain(" not in \
        sharded_source and "pair_curvature(" not in sharded_source, "the gain written again"
    for source in (partner, sharded_source):
        assert "diff * diff" not in source and "1e-300" not in source, "the gain written again"
    rng = np.random.default_rng(3)
    diffs = list(rng.normal(size=100)) + [0.0, 1e-200, math.inf]
    curvatures = list(rng.normal(size=100)) + [0.0, -1.0, 1e-300, 1e-301, math.nan, math.inf]
    for d in diffs:
        for q in curvatures:
            ref = _moves.second_order_gain(float(d), float(q))
            assert _bits(K._second_order_gain(float(d), float(q))) == _bits(ref), (d, q)
    if K.HAVE_NUMBA:  # the search picks the argmax of that score over active atoms above s_i
        w = np.array([0.5, 0.0, 0.25, 0.25])
        s = np.array([1.0, 5.0, 3.0, 2.0])
        h = np.array([1.0, 0.5, 0.5, 0.9])
        diag = np.array([2.0, 2.0, 2.0, 2.0])
        gains = [_moves.second_order_gain(s[r] - 1.0, _moves.pair_curvature(2.0, diag[r], h[r]))
                 for r in (2, 3)]
        assert K.second_order_partner(w, s, h, diag, s, False, 0, 1.0, 2.0) == \
            (2 if gains[0] >= gains[1] else 3)
        # ... and returns the gain it compared, bit for bit (what the ranks compare).
        j, gain = K.second_order_best(w, s, h, diag, s, False, 0, 1.0, 2.0)
        assert _bits(gain) == _bits(max(gains)) and j == (2 if gains[0] >= gains[1] else 3)
        tj, tgain = K.torch_second_order_best(*(torch.from_numpy(v) for v in (w, s, h, diag)),
                                              None, 0, 1.0, 2.0)
        assert int(tj) == j and _bits(float(tgain)) == _bits(gain)
        assert K.second_order_best(w, s, h, diag, s, False, 0, 9.0, 2.0) == (-1, -1.0)


# ---------------------------------------------------------------------------------------------
# The Weston-Watkins block FW step: compiled (specialised) vs the generic BCD block step
# ---------------------------------------------------------------------------------------------

def _ww_block(rng, m):
    C = float(rng.choice([0.1, 1.0, 3.0]))
    v = rng.normal(size=m) * 2.0 * C
    b = rng.uniform(0.0, C, size=m)
    b[rng.random(m) < 0.3] = 0.0  # some slots at the bounds, as in BCD
    b[rng.random(m) < 0.1] = C
    return C, v, b


def _generic_fw(C, v, b, steps):
    """``BlockCoordinateDescent._fw_block`` on the WW subproblem 1/2 b'(I + 11')b - v'b."""
    x = torch.from_numpy(b.copy())
    grad = x + x.sum() - torch.from_numpy(v)
    blk = BlockQuadratic(x=x, grad=grad, hess=lambda d: d + d.sum(), lmo=tf.Box(0.0, C))
    return BlockCoordinateDescent("fw", fw_steps=steps)._fw_block(blk).numpy()


@pytest.mark.parametrize("steps", [1, 2, 3, 5])
def test_ww_fw_block_step_is_the_generic_block_step(steps):
    from torchfw.ww import _blocks as W

    kernels = [W._fw_py] + ([W.fw_single] if W.HAVE_NUMBA else [])
    rng = np.random.default_rng(steps)
    moved = 0
    for _ in range(60):
        m = int(rng.integers(1, 30))
        C, v, b0 = _ww_block(rng, m)
        ref = _generic_fw(C, v, b0, steps)
        for kernel in kernels:
            b = b0.copy()
            total = kernel(v, m, C, b, steps, np.zeros(m))
            np.testing.assert_allclose(b, ref, rtol=0, atol=1e-12 * C, err_msg=str(kernel))
            assert total == pytest.approx(b.sum(), rel=0, abs=1e-12 * C * m)
        moved += not np.array_equal(ref, b0)
    assert moved > 40  # the blocks took steps: the comparison is not between two no-ops


def test_the_block_step_parity_detects_a_different_step():
    """A step rule that differs from the exact step (here: half of it) fails the comparison."""
    from torchfw.ww import _blocks as W

    rng = np.random.default_rng(9)
    C, v, b0 = _ww_block(rng, 12)
    ref = _generic_fw(C, v, b0, 2)
    original = W._step_kernel
    try:
        W._step_kernel = lambda s, c, g: 0.5 * original(s, c, g)  # the Python kernel reads it
        b = b0.copy()
        W._fw_py(v, 12, C, b, 2, np.zeros(12))
    finally:
        W._step_kernel = original
    assert np.abs(b - ref).max() > 1e-6


# ---------------------------------------------------------------------------------------------
# torch.optim's StochasticFrankWolfe step vs the core's FrankWolfe with OpenLoop
# ---------------------------------------------------------------------------------------------

def _quadratic(n, seed):
    g = torch.Generator().manual_seed(seed)
    A = torch.randn(n, n, generator=g, dtype=F64)
    Q = A @ A.T / n + 0.1 * torch.eye(n, dtype=F64)
    c = torch.randn(n, generator=g, dtype=F64)
    return Q, c


def _core_run(lmo, Q, c, x0, iters):
    """The core's iterates and gaps after 0, 1, ..., ``iters`` iterations (checked every one)."""
    points, gaps = {}, {}

    def record(info):
        points[info.iteration] = info.x.clone()
        gaps[info.iteration] = info.gap

    opt = tf.FrankWolfe(lmo, tf.OpenLoop(), tol=1e-300, max_iter=iters + 1, check_every=1,
                        callback=record)
    opt.minimize(tf.Quadratic(Q, c), x0=x0.clone())
    assert sorted(points) == list(range(iters + 1))
    return [points[k] for k in range(iters + 1)], [gaps[k] for k in range(iters + 1)]


def _optim_run(lmo, Q, c, x0, iters):
    p = torch.nn.Parameter(x0.clone())
    opt = StochasticFrankWolfe([p], lmo=lmo, lr=1.0, momentum=0.0, rescale=None,
                               track_gap=True)
    schedule = torch.optim.lr_scheduler.LambdaLR(opt, lambda k: 2.0 / (k + 2.0))
    points, gaps = [], []
    for _ in range(iters):
        opt.zero_grad()
        loss = 0.5 * p @ (Q @ p) + c @ p
        loss.backward()
        opt.step()
        schedule.step()
        points.append(p.detach().clone())
        gaps.append(float(opt.fw_gap()))  # the gap at the iterate before this step
    return points, gaps


@pytest.mark.parametrize("set_name", ["L2Ball", "L1Ball", "Simplex"])
def test_sfw_update_is_frank_wolfe_with_open_loop(set_name):
    """Deterministic gradient, no momentum, no rescaling, lr 2/(k+2): the torch.optim step takes
    the iterates and gaps of ``FrankWolfe(lmo, OpenLoop())`` (the generic engine on the L2 ball,
    the incremental quadratic engine on the atomic sets)."""
    n, iters = 12, 60
    Q, c = _quadratic(n, seed=len(set_name))
    lmo = {"L2Ball": tf.L2Ball(1.5), "L1Ball": tf.L1Ball(2.0), "Simplex": tf.Simplex()}[set_name]
    x0 = lmo.project(0.3 * torch.randn(n, generator=torch.Generator().manual_seed(3),
                                       dtype=F64))
    core_points, core_gaps = _core_run(lmo, Q, c, x0, iters)
    sfw_points, sfw_gaps = _optim_run(lmo, Q, c, x0, iters)
    torch.testing.assert_close(core_points[0], x0, rtol=0, atol=1e-15)
    for k, point in enumerate(sfw_points, start=1):
        torch.testing.assert_close(point, core_points[k], rtol=0, atol=1e-12,
                                   msg=f"iterate {k}")
    # torch.optim's step k + 1 reports the gap of the iterate it started from, the k-th.
    np.testing.assert_allclose(sfw_gaps, core_gaps[:-1], rtol=1e-10, atol=1e-12)
    assert core_gaps[-1] < 0.2 * core_gaps[0]  # the runs made progress
