"""The eager L-infinity step with momentum in one compiled pass (torchfw.optim._linf_kernel's
``linf_momentum_step``): the momentum average and the move of each contiguous float tensor.

Its buffers must be those of the multi-tensor average (``torch._foreach_lerp_``) bit for bit,
its weights those of the PyTorch form, through both branches of ``torch.lerp``'s rounding, with
``maximize`` and weight decay, zero, infinite and NaN directions; it must run where it applies
(and only after the first step, which starts the buffers), fall back for tensors it cannot
take, and count the in-place change for autograd.
"""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

from torchfw.optim import StochasticFrankWolfe
from torchfw.sets.oracles import L2Ball, LinfBall

_kernel = pytest.importorskip("torchfw.optim._linf_kernel")
if _kernel.linf_momentum_step is None:  # pragma: no cover - numba missing
    pytest.skip("numba is not available", allow_module_level=True)

SHAPES = [(200, 60), (90, 150), (150, 80), (100, 120), (50, 200), (7,)]


def _run(dtype, deferred, *, momentum, lr, steps=4, maximize=False, weight_decay=0.0,
         transposed=False, seed=3):
    """Weights and buffers after ``steps`` steps, with the compiled kernels deferred (the
    PyTorch form) or running (the fused pass from the second step on)."""
    from torchfw.utils import jit

    jit.set_deferred(deferred)
    try:
        gen = torch.Generator().manual_seed(seed)
        params = [nn.Parameter(0.01 * torch.randn(s, generator=gen, dtype=dtype))
                  for s in SHAPES]
        if transposed:  # a non-contiguous weight: the PyTorch form moves it
            params[0] = nn.Parameter(0.01 * torch.randn(SHAPES[0][::-1], generator=gen,
                                                        dtype=dtype).t())
        opt = StochasticFrankWolfe(params, lmo=LinfBall(0.3), lr=lr, momentum=momentum,
                                   maximize=maximize, weight_decay=weight_decay)
        opt.make_feasible()
        for step in range(steps):
            grads = [torch.randn(p.shape, generator=gen, dtype=dtype) for p in params]
            grads[1][3, :7] = 0.0  # coordinates without direction (the buffer keeps older ones)
            grads[2].zero_()
            if step == steps - 1:
                grads[3][5, 5] = math.inf
                grads[4][0, 1] = math.nan
            for p, g in zip(params, grads, strict=True):
                p.grad = g
            opt.step()
        return ([p.detach().clone() for p in params],
                [opt.state[p]["momentum_buffer"].clone() for p in params])
    finally:
        jit.set_deferred(False)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("momentum,lr", [(0.9, 0.3), (0.3, 40.0), (0.5, 0.3)],
                         ids=["avg-small-gamma-small", "avg-large-gamma-large", "avg-half"])
@pytest.mark.parametrize("signs", ["plain", "maximize-decay"])
def test_fused_pass_takes_the_pytorch_step(dtype, momentum, lr, signs):
    """Buffers bit for bit those of ``_foreach_lerp_`` (both of lerp's branches: weight
    ``1 - mu`` below and from 1/2), weights within two ulps of the PyTorch form, NaN exactly at
    the coordinates whose direction is not finite."""
    extra = {"maximize": True, "weight_decay": 0.05} if signs != "plain" else {}
    fused = _run(dtype, False, momentum=momentum, lr=lr, **extra)
    plain = _run(dtype, True, momentum=momentum, lr=lr, **extra)
    for a, b in zip(fused[1], plain[1], strict=True):
        assert torch.equal(a.isnan(), b.isnan())
        assert torch.equal(torch.nan_to_num(a), torch.nan_to_num(b))
    eps = torch.finfo(dtype).eps
    for a, b in zip(fused[0], plain[0], strict=True):
        torch.testing.assert_close(a, b, rtol=0, atol=2 * eps, equal_nan=True)
    for i, where in ((3, (5, 5)), (4, (0, 1))):
        nan = fused[0][i].isnan()
        assert bool(nan[where]) and int(nan.sum()) == 1
    assert not any(bool(t.isnan().any()) for t in fused[0][:3] + fused[0][5:])


def test_fused_pass_runs_from_the_second_step(monkeypatch):
    """The first step starts the buffers (d_0 = g_0) and moves with the move-only kernel; later
    steps run the fused pass on every contiguous tensor, and neither the separate average nor
    the move-only kernel."""
    calls = {"fused": [], "move": [], "lerp": 0}
    real_fused, real_move = _kernel.linf_momentum_step, _kernel.linf_step
    real_lerp = torch._foreach_lerp_

    def fused(p, d, g, consts):
        calls["fused"].append(p.size)
        return real_fused(p, d, g, consts)

    def move(p, d, consts):
        calls["move"].append(p.size)
        return real_move(p, d, consts)

    def lerp(*args, **kwargs):
        calls["lerp"] += 1
        return real_lerp(*args, **kwargs)

    monkeypatch.setattr(_kernel, "linf_momentum_step", fused)
    monkeypatch.setattr(_kernel, "linf_step", move)
    monkeypatch.setattr(torch, "_foreach_lerp_", lerp)
    params = [nn.Parameter(torch.zeros(100, 100)), nn.Parameter(torch.zeros(30))]
    opt = StochasticFrankWolfe(params, lmo=LinfBall(1.0), lr=0.1, momentum=0.9)
    for p in params:
        p.grad = torch.ones_like(p)
    opt.step()
    assert calls == {"fused": [], "move": [10_000, 30], "lerp": 0}
    for p in params:
        p.grad = -torch.ones_like(p)
    opt.step()
    assert calls == {"fused": [10_000, 30], "move": [10_000, 30], "lerp": 0}
    # d = 0.9 * 1 + 0.1 * (-1) = 0.8 > 0: the vertex is -1 again
    assert torch.equal(opt.state[params[0]]["momentum_buffer"],
                       torch.full((100, 100), 0.8))
    gamma = 0.1 / 200.0
    expected = torch.tensor(-gamma).lerp(torch.tensor(-1.0), gamma)
    assert torch.allclose(params[0].detach(), expected.expand(100, 100), rtol=0, atol=1e-8)


def test_fused_pass_leaves_what_it_cannot_take():
    """A non-contiguous weight, a tensor lr, gaps, no momentum, other sets: the step of the
    PyTorch form (with the kernels deferred) for the weight it cannot take, the fused pass for
    the others (weights as the deferred run's)."""
    fused = _run(torch.float32, False, momentum=0.9, lr=0.3, transposed=True)
    plain = _run(torch.float32, True, momentum=0.9, lr=0.3, transposed=True)
    for a, b in zip(fused[0], plain[0], strict=True):
        torch.testing.assert_close(a, b, rtol=0, atol=2 * torch.finfo(torch.float32).eps,
                                   equal_nan=True)
    p = nn.Parameter(torch.zeros(50, 50))
    q = nn.Parameter(torch.zeros(50, 50))
    for group in ({"lr": torch.tensor(0.1)}, {"track_gap": True}, {"momentum": 0.0}):
        opt = StochasticFrankWolfe([{"params": [p], **group},
                                    {"params": [q], "lmo": L2Ball(1.0)}],
                                   lmo=LinfBall(1.0), lr=0.1)
        for _ in range(2):
            p.grad = torch.ones_like(p)
            q.grad = torch.ones_like(q)
            opt.step()
        plan = opt._plan[1]
        assert all(not bucket["fused"] for bucket in plan), group


def test_fused_pass_counts_an_in_place_change():
    """Writes through NumPy views: the weight's version counter still moves (autograd refuses
    a backward through a graph that saved the weight before the step)."""
    weight = nn.Parameter(0.01 * torch.randn(100, 100))
    opt = StochasticFrankWolfe([weight], lmo=LinfBall(1.0), lr=0.1, momentum=0.9)
    weight.grad = torch.ones_like(weight)
    opt.step()  # starts the buffer
    loss = (weight * weight).sum()
    weight.grad = torch.ones_like(weight)
    before = weight._version
    opt.step()
    assert opt._plan[1][0]["fused"] == (0,)
    assert weight._version > before
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        loss.backward()


def test_fused_pass_starts_once_the_cold_start_lets_kernels_run(monkeypatch):
    """The plan is built while the cold start defers compiled kernels; once they run, the next
    step fuses without the plan being rebuilt (the step decides, not the plan)."""
    from torchfw.utils import jit

    calls = []
    real = _kernel.linf_momentum_step

    def fused(p, d, g, consts):
        calls.append(p.size)
        return real(p, d, g, consts)

    monkeypatch.setattr(_kernel, "linf_momentum_step", fused)
    weight = nn.Parameter(torch.zeros(40, 40))
    opt = StochasticFrankWolfe([weight], lmo=LinfBall(1.0), lr=0.1, momentum=0.9)
    jit.set_deferred(True)
    try:
        for _ in range(2):
            weight.grad = torch.ones_like(weight)
            opt.step()
    finally:
        jit.set_deferred(False)
    assert calls == []
    plan = opt._plan
    weight.grad = torch.ones_like(weight)
    opt.step()
    assert opt._plan is plan and calls == [1600]
