"""The selection is one function with two implementations that agree.

:func:`torchfw.optimizers._selection.select` (PyTorch ops, any batch of problems) is the
definition; :func:`torchfw.optimizers._kernels.select` (numba) its declared second
implementation on the host path. Both must return the same FW atom (first index among equal
minima), the same away atom (first index among equal maxima over ``w > 0``, ``-1`` when no atom is
active) and, to rounding, the same ``p = w's`` and ``t = c~'w``.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from torchfw.optimizers import _kernels as K
from torchfw.optimizers._selection import active_max, select, select_host

needs_numba = pytest.mark.skipif(not K.HAVE_NUMBA, reason="the second implementation is numba")

DTYPES = [torch.float64, torch.float32]


def _data(seed: int, n: int, dtype, *, zero_fraction=0.5, ties=False, linear=True):
    gen = np.random.default_rng(seed)
    s = gen.standard_normal(n)
    if ties:
        # Exact repeats of the smallest and of the largest active score.
        s = np.round(s, 1)
    w = gen.random(n)
    w[gen.random(n) < zero_fraction] = 0.0
    if w.sum() == 0.0:
        w[gen.integers(n)] = 1.0
    w /= w.sum()
    ct = gen.standard_normal(n) if linear else None

    def as_t(a):
        return None if a is None else torch.tensor(a, dtype=dtype)

    return as_t(w), as_t(s), as_t(ct)


def _reference(w: np.ndarray, s: np.ndarray, ct):
    """The definition in plain Python (first index on ties, float64 sums)."""
    i = min(range(len(s)), key=lambda k: (s[k], k))
    active = [k for k in range(len(s)) if w[k] > 0]
    j = min(active, key=lambda k: (-s[k], k)) if active else -1
    p = math.fsum(float(a) * float(b) for a, b in zip(w, s, strict=True))
    t = 0.0 if ct is None else math.fsum(float(a) * float(b) for a, b in zip(w, ct, strict=True))
    return i, j, p, t


def _tol(dtype):
    return dict(rtol=1e-5, atol=1e-6) if dtype == torch.float32 else dict(rtol=1e-12,
                                                                            atol=1e-14)


@needs_numba
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("linear", [True, False], ids=["ct", "no-ct"])
@pytest.mark.parametrize("ties", [False, True], ids=["distinct", "ties"])
@pytest.mark.parametrize("seed", range(4))
def test_the_compiled_kernel_is_the_torch_selection(seed, ties, linear, dtype):
    n = [1, 7, 64, 1000][seed]
    w, s, ct = _data(seed, n, dtype, ties=ties, linear=linear)
    ti, tsi, tj, tsj, tp, tt = select(w, s, ct)
    ki, ksi, kj, ksj, kp, kt = K.select(w.numpy(), s.numpy(), (ct if linear else s).numpy(),
                                        linear)
    ri, rj, rp, rt = _reference(w.numpy(), s.numpy(), None if ct is None else ct.numpy())
    assert int(ti) == ki == ri
    assert int(tj) == kj == rj
    assert float(tsi) == ksi == float(s[ri])
    assert float(tsj) == ksj == float(s[rj])
    tol = _tol(dtype)
    for torch_value, kernel_value, exact in ((tp, kp, rp), (tt, kt, rt)):
        assert float(torch_value) == pytest.approx(exact, rel=tol["rtol"], abs=tol["atol"])
        assert kernel_value == pytest.approx(exact, rel=tol["rtol"], abs=tol["atol"])
    # select_host is either implementation, as Python numbers.
    for compiled in (True, False):
        got = select_host(w.numpy(), s.numpy(), None if ct is None else ct.numpy(),
                          compiled=compiled)
        assert got[0] == ri and got[2] == rj
        assert isinstance(got[0], int) and isinstance(got[4], float)


@needs_numba
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_ties_go_to_the_first_index(dtype):
    s = torch.tensor([3.0, -1.0, 2.0, -1.0, 2.0, 2.0], dtype=dtype)
    w = torch.tensor([0.0, 0.0, 0.0, 0.5, 0.25, 0.25], dtype=dtype)
    i, _, j, sj, _, _ = select(w, s)
    # FW: first of the two minima (index 1, inactive); away: first active maximum (index 4;
    # index 2 ties but has no weight).
    assert (int(i), int(j), float(sj)) == (1, 4, 2.0)
    ki, _, kj, _, _, _ = K.select(w.numpy(), s.numpy(), s.numpy(), False)
    assert (ki, kj) == (1, 4)


@needs_numba
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_no_active_atom_gives_minus_one(dtype):
    w = torch.zeros(5, dtype=dtype)
    s = torch.arange(5, dtype=dtype)
    _, _, j, sj, p, _ = select(w, s)
    assert int(j) == -1 and float(sj) == -math.inf and float(p) == 0.0
    _, _, kj, ksj, _, _ = K.select(w.numpy(), s.numpy(), s.numpy(), False)
    assert kj == -1 and ksj == -math.inf


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_a_batch_is_its_rows(dtype):
    rows = [_data(10 + b, 50, dtype, zero_fraction=[0.0, 0.5, 0.9, 1.0][b]) for b in range(4)]
    W = torch.stack([r[0] for r in rows])
    W[3] = 0.0  # a row without an active atom
    S = torch.stack([r[1] for r in rows])
    C = torch.stack([r[2] for r in rows])
    batch = select(W, S, C)
    assert all(v.shape == (4,) for v in batch)
    assert batch[0].dtype == batch[2].dtype == torch.int64
    for b in range(4):
        one = select(W[b], S[b], C[b])
        assert all(v.shape == () for v in one)
        assert int(batch[0][b]) == int(one[0]) and int(batch[2][b]) == int(one[2])
        for k in (1, 3, 4, 5):
            torch.testing.assert_close(batch[k][b], one[k], **_tol(dtype))
    assert int(batch[2][3]) == -1
    j, sj = active_max(W, S)
    assert torch.equal(j, batch[2]) and torch.equal(sj, batch[3])
    # Without a linear term t is zero, in the batch's shape.
    assert torch.equal(select(W, S)[5], torch.zeros(4, dtype=dtype))


def test_the_selection_reads_nothing_back_and_compiles():
    # Graph capture needs no host read and fixed shapes: the function compiles in one graph.
    w, s, ct = _data(3, 40, torch.float64)
    fn = torch.compile(select, fullgraph=True, dynamic=False)
    got = fn(w, s, ct)
    want = select(w, s, ct)
    for a, b in zip(got, want, strict=True):
        torch.testing.assert_close(a, b)


@pytest.mark.parametrize("batch", [(), (3,)], ids=["one", "batch"])
def test_the_opaque_op_of_other_devices_is_the_same_function(batch):
    # On CUDA the reductions run as a custom op (inductor's fused reduction is slow there); it is
    # registered for every device, so its eager result and its fake shapes are checked here.
    from torchfw.optimizers._selection import _custom_reduce_op, _reduce

    gen = torch.Generator().manual_seed(0)
    s = torch.randn(*batch, 30, generator=gen, dtype=torch.float64)
    w = torch.rand(*batch, 30, generator=gen, dtype=torch.float64)
    w[..., ::3] = 0.0
    op = _custom_reduce_op()
    want = _reduce(w, s)
    for fn in (op, torch.compile(lambda a, b: op(a, b), fullgraph=True, dynamic=False)):
        got = fn(w, s)
        for a, b in zip(got, want, strict=True):
            assert a.shape == batch
            torch.testing.assert_close(a, b)


def _first_index_reference(w, s):
    """The selection as one plain pass: first index on ties, NaN never chosen."""
    imin, smin, jmax, smax = 0, math.inf, -1, -math.inf
    for r, (wr, sr) in enumerate(zip(w.tolist(), s.tolist(), strict=True)):
        if sr < smin:
            imin, smin = r, sr
        if wr > 0.0 and sr > smax:
            jmax, smax = r, sr
    return imin, smin, jmax, smax


@pytest.mark.parametrize("n", range(1, 14))
def test_the_lanes_keep_the_first_index_and_the_sum(n):
    # The compiled selection runs four interleaved lanes: ties within and across lanes, the
    # tail, infinities, NaN and no active atom must give what one plain pass gives, and the
    # sums must be <w, s> and <w, ct> to rounding.
    rng = np.random.default_rng(n)
    for trial in range(40):
        s = rng.integers(0, 3, size=n).astype(np.float64)  # many ties
        w = np.where(rng.random(n) < 0.5, rng.random(n), 0.0)
        if trial % 5 == 1:
            s[rng.integers(0, n)] = math.inf
        if trial % 5 == 2:
            s[rng.integers(0, n)] = -math.inf
        if trial % 5 == 3:
            s[rng.integers(0, n)] = math.nan
        if trial % 7 == 0:
            w[:] = 0.0
        ct = rng.normal(size=n)
        imin, smin, jmax, smax, p, t = K.select(w, s, ct, True)
        ref = _first_index_reference(w, s)
        assert (imin, jmax) == (ref[0], ref[2]), (s, w)
        assert smin == ref[1] and smax == ref[3]
        finite = np.isfinite(s)
        if finite.all():
            assert p == pytest.approx(math.fsum((w * s).tolist()), rel=1e-12, abs=1e-12)
        assert t == pytest.approx(math.fsum((w * ct).tolist()), rel=1e-12, abs=1e-12)


@needs_numba
@pytest.mark.parametrize("n", [0, 1, 2, 5, 13, 100])
def test_the_numpy_form_is_the_compiled_kernel(n):
    # What runs while the cold start defers the compiled kernels (the streaming engine's
    # selection): njit's interpreted form of K.select must return the loop's indices and values
    # (ties, infinities, no active atom, float32 vectors) and its sums to rounding.
    from torchfw.utils import jit

    assert jit.interpreted(K.select) is K.select_arrays
    rng = np.random.default_rng(100 + n)
    for trial in range(30):
        dtype = np.float32 if trial % 4 == 3 else np.float64
        s = rng.integers(-2, 3, size=n).astype(dtype)  # many ties
        s += (rng.normal(size=n) * (trial % 2)).astype(dtype)
        w = np.where(rng.random(n) < 0.5, rng.random(n), 0.0).astype(dtype)
        if n and trial % 5 == 1:
            s[rng.integers(0, n)] = math.inf
        if n and trial % 5 == 2:
            s[rng.integers(0, n)] = -math.inf
        if trial % 7 == 0:
            w[:] = 0.0
        ct = rng.normal(size=n).astype(dtype)
        for has_ct in (True, False):
            want = K.select(w, s, ct if has_ct else s, has_ct)
            got = K.select_arrays(w, s, ct if has_ct else s, has_ct)
            assert got[0] == want[0] and got[2] == want[2], (s, w)
            assert got[1] == want[1] and got[3] == want[3]
            if np.isfinite(s).all():
                assert got[4] == pytest.approx(want[4], rel=1e-12, abs=1e-12)
            assert got[5] == pytest.approx(want[5], rel=1e-12, abs=1e-12)
            assert all(isinstance(v, int) for v in got[::2][:2])
