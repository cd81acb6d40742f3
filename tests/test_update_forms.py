"""The move's vector update in NumPy form equals the compiled kernel.

While the cold start defers the compiled kernels (:mod:`torchfw.utils.cold_start`), the
streaming engine applies its moves with :func:`torchfw.optimizers._kernels.update_arrays`, the
NumPy form of the compiled :func:`torchfw.optimizers._kernels.update` (njit's
``interpreted_form``). Both compute each entry by the same operations in the same order, so the
vectors must agree to the last bit or two, snaps to zero included, for every move shape: a
one-atom step, a two-atom (pairwise) step and PARTAN's shifted step.
"""

from __future__ import annotations

import numpy as np
import pytest

from torchfw.optimizers import _kernels as K
from torchfw.optimizers._moves import ZERO_TOL
from torchfw.optimizers._vectors import update_vectors
from torchfw.utils import jit

pytestmark = pytest.mark.skipif(not jit.HAVE_NUMBA, reason="the compiled kernel needs numba")


def _state(rng, n):
    w = np.where(rng.random(n) < 0.5, rng.random(n), 0.0)
    w[3] = 1e-17  # snapped by a shifted step (below ZERO_TOL after it)
    return [w, rng.normal(size=n), np.where(rng.random(n) < 0.5, rng.random(n), 0.0),
            rng.normal(size=n)]


@pytest.mark.parametrize("shape", ["one", "pair", "shift", "shift-one"])
@pytest.mark.parametrize("n", [1, 9, 130])
def test_the_numpy_update_is_the_compiled_kernel(shape, n):
    assert jit.interpreted(K.update) is K.update_arrays
    rng = np.random.default_rng(n)
    for trial in range(10):
        state = _state(rng, max(n, 4))
        h0, h1 = rng.normal(size=(2, state[0].shape[0]))
        i0, i1 = (int(k) for k in rng.integers(0, state[0].shape[0], size=2))
        a = 1.0 if trial % 3 == 0 else float(rng.random())
        b = float(rng.random()) * (1 - a)
        c = -float(state[0][i1]) if shape in ("pair", "shift") else 0.0  # drops atom i1
        d = float(rng.normal()) * 0.3 if shape.startswith("shift") else 0.0
        shift = shape.startswith("shift")
        got, want = [v.copy() for v in state], [v.copy() for v in state]
        K.update_arrays(got[0], got[1], a, b, i0, h0, c, i1, h1, d, got[2], got[3], shift,
                        ZERO_TOL)
        K.update(want[0], want[1], a, b, i0, h0, c, i1, h1, d, want[2], want[3], shift,
                 ZERO_TOL)
        for g, v in zip(got, want, strict=True):
            np.testing.assert_allclose(g, v, rtol=1e-15, atol=1e-300)
            assert np.array_equal(g == 0.0, v == 0.0)  # the same weights snapped to zero


def test_update_vectors_runs_the_numpy_form_when_not_compiled():
    rng = np.random.default_rng(5)
    state = _state(rng, 20)
    h0 = rng.normal(size=20)
    got, want = [v.copy() for v in state], [v.copy() for v in state]
    update_vectors(*got[:2], 0.7, 0.3, 4, h0, 0.0, 4, h0, 0.0, *got[2:], shift=False,
                   compiled=False)
    K.update(*want[:2], 0.7, 0.3, 4, h0, 0.0, 4, h0, 0.0, *want[2:], False, ZERO_TOL)
    for g, v in zip(got, want, strict=True):
        np.testing.assert_allclose(g, v, rtol=1e-15, atol=0.0)
