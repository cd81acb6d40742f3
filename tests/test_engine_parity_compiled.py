"""The compiled SVC storage in the parity registry: the whole-solve loop takes the host steps.

``tests/test_engine_parity.py`` runs every variant on every storage of the engine layer against
the host engine. The compiled small-problem path of :class:`~torchfw.SVC`
(:mod:`torchfw.svm._dense`: the ``m x m`` matrix :math:`K + 1` formed once, every iteration of
FW, away, pairwise, SWAP, SWAP-2o and PARTAN in one numba call) is the registry's last storage;
it lives here because its inputs are a kernel matrix and labels, not an engine. It starts from
the host engine's own state at the registry's spread start (``Start.of_engine``), and must then
give the same value and gap at every check, the same iteration count, status and step counters,
and the same final weights as the host engine on the registry's SVM dual.

The compiled loop keeps no iterate history (only the value and gap per check), so the iterates
between checks are compared through the values, to 1e-11, and the final weights to ``ATOL``.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from test_engine_parity import (
    ATOL,
    CHECK_EVERY,
    F64,
    MAX_ITER,
    TOL,
    VARIANTS,
    _nonzero,
    _spread_start,
    _svm_data,
    needs_numba,
    run_host,
)

import torchfw as tf
from torchfw.svm.kernels import SVMDualOperator, make_kernel

dense = pytest.importorskip("torchfw.svm._dense")

#: Registry name -> the compiled loop's solver name (fully corrective has no compiled loop).
COMPILED = {"FW": "fw", "AFW": "away", "PFW": "pairwise", "SWAP": "swap", "SWAP2o": "swap2",
            "PARTAN": "partan"}
NOT_COMPILED = {"FC": "the compiled SVC loop has FW, away, pairwise, SWAP(-2o) and PARTAN"}


def _compiled_run(variant):
    """The registry's SVM problem 0 on the compiled storage.

    Returns ``(history, n_iter, status, steps, w)``.
    """
    from torchfw.optimizers._engine import QuadraticEngine
    from torchfw.utils.scalars import HOST

    X, Y = _svm_data()
    kernel = make_kernel("rbf", 0.5)
    # K + 1 of all examples (labels 1: they square away on the diagonal), as SVC forms it.
    plain = SVMDualOperator(X, torch.ones(X.shape[0], dtype=F64), kernel, 1.0, dtype=F64)
    P = dense.plain_kernel_matrix(plain)
    diag = plain.diagonal().to(F64).numpy()
    inv_c = plain._inv_c_np
    y = Y[0].numpy().astype(P.dtype)
    code = dense.VARIANTS[COMPILED[variant.name]]
    # The start is the host engine's at the registry's spread point.
    signed = SVMDualOperator(X, Y[0], kernel, 1.0, dtype=F64)
    engine = QuadraticEngine(tf.Quadratic(signed), tf.Simplex(), _spread_start(), ops=HOST,
                             keep_previous=variant.cls.keeps_previous,
                             pair_columns=variant.cls.uses_pairs)
    start = dense.Start.of_engine(engine)
    n_iter, status, hist, counts = dense.solve(
        code, dense.full_source(P), np.zeros(0, dtype=np.int64), y, inv_c, diag, start,
        max_iter=MAX_ITER,
        tol=TOL, rtol=0.0, check_every=CHECK_EVERY)
    steps = {name: int(c) for name, c in zip(dense.COUNTERS, counts[-1], strict=True) if c}
    return hist, n_iter, status, steps, torch.from_numpy(start.w.copy())


@needs_numba
@pytest.mark.parametrize("variant", VARIANTS, ids=[v.name for v in VARIANTS])
def test_compiled_svc_storage_takes_the_host_steps(variant, monkeypatch):
    if variant.name in NOT_COMPILED:
        pytest.skip(NOT_COMPILED[variant.name])
    assert variant.name in COMPILED, f"the registry's {variant.name} has no compiled entry"
    ref = run_host(variant, "svm", monkeypatch)
    assert ref.n_iter >= 20 and len(ref.values) >= 4
    hist, n_iter, status, steps, w = _compiled_run(variant)
    label = f"{variant.name} on the compiled SVC storage"
    assert n_iter == ref.n_iter, label
    # The compiled loop's status codes: 0 converged, 1 iteration budget.
    assert {"converged": 0, "max_iter": 1}[ref.status] == status, label
    assert _nonzero(steps) == _nonzero(ref.steps), label
    np.testing.assert_array_equal(hist[:, 0], np.arange(len(ref.values)) * CHECK_EVERY,
                                  err_msg=label)
    np.testing.assert_allclose(hist[:, 1], ref.values, rtol=1e-11, atol=1e-12, err_msg=label)
    torch.testing.assert_close(w, ref.x, rtol=0, atol=ATOL, msg=label)


@needs_numba
def test_the_compiled_comparison_can_fail():
    # A compiled run of another variant (away steps) against the host FW run is caught.
    fw, afw = VARIANTS[0], VARIANTS[1]
    hist_fw, n_fw, _, steps_fw, w_fw = _compiled_run(fw)
    hist_afw, n_afw, _, steps_afw, w_afw = _compiled_run(afw)
    assert steps_fw != steps_afw or n_fw != n_afw or not torch.allclose(w_fw, w_afw,
                                                                         atol=ATOL, rtol=0)
