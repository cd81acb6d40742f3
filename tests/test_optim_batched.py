"""The multi-tensor step of StochasticFrankWolfe (torchfw.optim._batched) against the per-tensor one.

L-infinity, L2 and K-sparse sets with scalar radii, one set per tensor, take the multi-tensor
update; every other case takes torchfw.optim._update.frank_wolfe_update. Both must be the same
Frank-Wolfe step: same weights, same gaps, same guards (a zero direction does not move, a box
coordinate without direction keeps its value, a non-finite direction turns NaN the weights whose
move reads it: the tensor, or in a box the coordinate alone).
"""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

from torchfw.optim import StochasticFrankWolfe
from torchfw.optim._update import frank_wolfe_update
from torchfw.sets.oracles import L2Ball, LinfBall
from torchfw.sets.polytopes import KSparsePolytope

DTYPE = torch.float64

SETS = {
    "linf": lambda: LinfBall(0.3),
    "l2": lambda: L2Ball(1.7),
    "ksparse": lambda: KSparsePolytope(4, 0.25),
}


def _params(seed=0):
    gen = torch.Generator().manual_seed(seed)
    shapes = [(5, 6), (6,), (3, 2, 2), (1,)]
    return [nn.Parameter(0.05 * torch.randn(s, generator=gen, dtype=DTYPE)) for s in shapes]


def _grads(params, seed):
    gen = torch.Generator().manual_seed(seed)
    grads = [torch.randn(p.shape, generator=gen, dtype=DTYPE) for p in params]
    grads[0][1] = 0.0  # a row (and so coordinates) without direction
    grads[3].zero_()   # a whole tensor without direction
    return grads


@pytest.mark.parametrize("track", [True, False], ids=["gaps", "no-gaps"])
@pytest.mark.parametrize("rescale", ["diameter", None])
@pytest.mark.parametrize("name", list(SETS))
def test_multi_tensor_step_is_the_per_tensor_step(name, rescale, track):
    # Two radii-groups, so the plan spans groups; momentum 0 makes the direction the gradient.
    # Without gaps the step takes other forms (a lerp to the vertex, guards from norms); the
    # weights must still be the per-tensor step's, zero rows and a zero tensor included.
    params = _params()
    groups = [{"params": params[:2], "lmo": SETS[name]()},
              {"params": params[2:], "lmo": SETS[name](), "lr": 0.7}]
    opt = StochasticFrankWolfe(groups, lr=0.4, momentum=0.0, rescale=rescale, track_gap=track)
    opt.make_feasible()
    twins = [p.detach().clone() for p in params]
    for step in range(3):
        grads = _grads(params, seed=10 + step)
        for p, g in zip(params, grads, strict=True):
            p.grad = g.clone()
        opt.step()
        for i, (twin, g) in enumerate(zip(twins, grads, strict=True)):
            group = groups[0] if i < 2 else groups[1]
            state: dict = {}
            frank_wolfe_update(twin, g, {**opt.param_groups[0 if i < 2 else 1],
                                         "lmo": group["lmo"]}, state)
            torch.testing.assert_close(params[i].detach(), twin, rtol=1e-12, atol=1e-14)
            if track:
                torch.testing.assert_close(opt.state[params[i]]["fw_gap"], state["fw_gap"],
                                           rtol=1e-10, atol=1e-14)
            else:
                assert "fw_gap" not in opt.state[params[i]]
    if track:
        # The zero tensor never moved; its gap is exactly 0.
        assert torch.equal(opt.state[params[3]]["fw_gap"], torch.zeros(1, dtype=DTYPE))


def test_linf_coordinates_without_direction_keep_their_value():
    p = nn.Parameter(torch.tensor([0.1, -0.2, 0.05, 0.0], dtype=DTYPE))
    opt = StochasticFrankWolfe([p], lmo=LinfBall(0.5), lr=0.5, momentum=0.0, rescale=None)
    p.grad = torch.tensor([0.0, 1.0, 0.0, -2.0], dtype=DTYPE)
    opt.step()
    # v = (keep, -0.5, keep, 0.5); theta + 0.5 (v - theta)
    want = torch.tensor([0.1, -0.35, 0.05, 0.25], dtype=DTYPE)
    torch.testing.assert_close(p.detach(), want, rtol=0, atol=1e-15)


@pytest.mark.parametrize("track", [True, False], ids=["gaps", "no-gaps"])
@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
@pytest.mark.parametrize("name", list(SETS))
def test_non_finite_direction_turns_nan_what_its_move_reads(name, bad, track):
    """L2 and K-sparse vertices read the whole direction: the tensor turns NaN. The
    L-infinity ball is a product of intervals: the coordinate alone turns NaN (inf as loud as
    NaN), and every other coordinate takes the step it takes with a finite entry there."""
    runs = []
    for entry in (bad, 0.7):
        params = _params(1)
        opt = StochasticFrankWolfe(params, lmo=SETS[name](), lr=0.3, momentum=0.9,
                                   track_gap=track)
        opt.make_feasible()
        grads = _grads(params, seed=3)
        grads[2][0, 1, 1] = entry
        for p, g in zip(params, grads, strict=True):
            p.grad = g
        opt.step()
        runs.append([p.detach().clone() for p in params])
        if track and entry is bad:
            assert not bool(opt.fw_gap().isfinite())
    weights, finite = runs
    nan = weights[2].isnan()
    if name == "linf":
        assert bool(nan[0, 1, 1]) and int(nan.sum()) == 1
        keep = ~nan
        assert torch.equal(weights[2][keep], finite[2][keep])
    else:
        assert bool(nan.all())
    assert not any(bool(weights[i].isnan().any()) for i in (0, 1, 3))
    for i in (0, 1, 3):
        assert torch.equal(weights[i], finite[i])


@pytest.mark.parametrize("name", list(SETS))
def test_iterates_stay_feasible_and_momentum_is_the_average(name):
    params = _params(2)
    lmo = SETS[name]()
    opt = StochasticFrankWolfe(params, lmo=lmo, lr=5.0, momentum=0.8)  # gamma clipped to 1 too
    opt.make_feasible()
    avg = None
    for step in range(6):
        grads = _grads(params, seed=20 + step)
        avg = [g.clone() for g in grads] if avg is None else \
            [0.8 * a + 0.2 * g for a, g in zip(avg, grads, strict=True)]
        for p, g in zip(params, grads, strict=True):
            p.grad = g
        opt.step()
        for p in params:
            assert bool(lmo.contains(p.detach().reshape(1, -1), atol=1e-12).all())
    for p, a in zip(params, avg, strict=True):
        torch.testing.assert_close(opt.state[p]["momentum_buffer"], a, rtol=1e-12, atol=1e-14)
        assert opt.state[p]["step"] == 6


def test_radius_change_and_lr_change_take_effect():
    # The step plan is cached; changing the set's radius or the lr must rebuild it.
    p = nn.Parameter(torch.zeros(4, dtype=DTYPE))
    lmo = LinfBall(1.0)
    opt = StochasticFrankWolfe([p], lmo=lmo, lr=0.5, momentum=0.0, rescale=None)
    p.grad = torch.ones(4, dtype=DTYPE)
    opt.step()
    assert torch.equal(p.detach(), torch.full((4,), -0.5, dtype=DTYPE))
    lmo.radius = 2.0
    opt.param_groups[0]["lr"] = 1.0
    opt.step()
    assert torch.equal(p.detach(), torch.full((4,), -2.0, dtype=DTYPE))


def test_channels_last_ksparse_weight_takes_the_per_tensor_path():
    conv = nn.Conv2d(2, 3, 2).to(DTYPE).to(memory_format=torch.channels_last)
    twin = conv.weight.detach().clone()
    lmo = KSparsePolytope(2, 0.5)
    opt = StochasticFrankWolfe([conv.weight], lmo=lmo, lr=0.3, momentum=0.0)
    opt.make_feasible()
    twin.copy_(conv.weight.detach())
    g = torch.randn(conv.weight.shape, dtype=DTYPE)
    conv.weight.grad = g.contiguous(memory_format=torch.channels_last)
    opt.step()
    frank_wolfe_update(twin, g, opt.param_groups[0], {})
    torch.testing.assert_close(conv.weight.detach(), twin, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_ksparse_vertex_entries_without_direction_take_plus_r(dtype):
    # K = 4 but only two entries have a direction: the vertex puts -r sign(d_i) on those and,
    # as KSparsePolytope does, +r on the two zero entries among the K largest. Both dtypes:
    # the signed values are selected between two constants of the tensor's dtype.
    p = nn.Parameter(torch.tensor([0.1, -0.2, 0.05, 0.0, 0.3, -0.1], dtype=dtype))
    twin = p.detach().clone()
    g = torch.tensor([0.0, 2.0, 0.0, -1.0, 0.0, 0.0], dtype=dtype)
    opt = StochasticFrankWolfe([p], lmo=KSparsePolytope(4, 0.5), lr=0.3, momentum=0.0,
                               rescale=None)
    p.grad = g.clone()
    opt.step()
    frank_wolfe_update(twin, g, opt.param_groups[0], {})
    torch.testing.assert_close(p.detach(), twin, rtol=0, atol=1e-7 if dtype == torch.float32
                               else 1e-15)
    moved = (p.detach() - 0.7 * torch.tensor([0.1, -0.2, 0.05, 0.0, 0.3, -0.1], dtype=dtype))
    assert int((moved.abs() > 0.1).sum()) == 4  # four entries of magnitude 0.3 * 0.5 added


@pytest.mark.parametrize("scale", [1e-30, 1e20])
def test_l2_float32_directions_whose_squares_under_or_overflow(scale):
    # ||d|| of float32 entries 1e-30 (or 1e20) is 0 (or inf) when squared in float32; the
    # vertex -r d / ||d|| must still be the one the per-tensor update finds.
    gen = torch.Generator().manual_seed(5)
    p = nn.Parameter(0.1 * torch.randn(7, 3, generator=gen))
    twin = p.detach().clone()
    g = scale * torch.randn(7, 3, generator=gen)
    opt = StochasticFrankWolfe([p], lmo=L2Ball(2.0), lr=0.9, momentum=0.0, rescale=None)
    p.grad = g.clone()
    opt.step()
    frank_wolfe_update(twin, g, opt.param_groups[0], {})
    assert bool(p.isfinite().all())
    torch.testing.assert_close(p.detach(), twin, rtol=1e-5, atol=1e-6)


def test_changing_k_takes_effect():
    p = nn.Parameter(torch.zeros(6, dtype=DTYPE))
    lmo = KSparsePolytope(1, 1.0)
    opt = StochasticFrankWolfe([p], lmo=lmo, lr=1.0, momentum=0.0, rescale=None)
    p.grad = torch.tensor([3.0, -2.0, 1.0, 0.5, 0.0, 0.0], dtype=DTYPE)
    opt.step()
    assert torch.equal(p.detach(), torch.tensor([-1.0, 0, 0, 0, 0, 0], dtype=DTYPE))
    lmo.k = 3
    opt.step()
    assert torch.equal(p.detach(), torch.tensor([-1.0, 1.0, -1.0, 0, 0, 0], dtype=DTYPE))


@pytest.mark.parametrize("track", [True, False], ids=["gaps", "no-gaps"])
@pytest.mark.parametrize("name", list(SETS))
def test_host_and_device_guards_take_the_same_step(name, track, monkeypatch):
    """On the CPU the guards are decided on the host; the device form (GPU, torch.compile)
    must give the same weights and gaps, zero and non-finite directions included."""
    from torchfw.optim import _batched

    runs = []
    for host in (True, False):
        monkeypatch.setattr(_batched, "_host_guards", lambda like, host=host: host)
        params = _params(4)
        opt = StochasticFrankWolfe(params, lmo=SETS[name](), lr=0.3, momentum=0.5,
                                   track_gap=track)
        opt.make_feasible()
        for step in range(3):
            grads = _grads(params, seed=40 + step)
            if step == 2:
                grads[1][2] = math.nan
            for p, g in zip(params, grads, strict=True):
                p.grad = g
            opt.step()
        runs.append(([p.detach().clone() for p in params],
                     [opt.state[p]["fw_gap"].clone() for p in params] if track else []))
    for a, b in zip(runs[0][0] + runs[0][1], runs[1][0] + runs[1][1], strict=True):
        torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-14, equal_nan=True)


@pytest.mark.parametrize("name", ["linf", "l2"])
def test_gap_follows_a_parameter_whose_memory_was_swapped(name):
    """The gaps read cached 1-d views of the parameters; ``p.data = ...`` between steps must
    not leave them reading the old memory."""
    params = _params(5)
    opt = StochasticFrankWolfe(params, lmo=SETS[name](), lr=0.2, momentum=0.0, track_gap=True)
    opt.make_feasible()
    for step in range(3):
        if step == 2:
            params[0].data = 0.5 * params[0].data.clone()
        grads = _grads(params, seed=50 + step)
        grads[3].fill_(0.7)  # every tensor has a direction: the common (cached-view) path
        before = params[0].detach().clone()
        for p, g in zip(params, grads, strict=True):
            p.grad = g
        opt.step()
        state: dict = {}
        twin = before.clone()
        frank_wolfe_update(twin, grads[0], opt.param_groups[0], state)
        torch.testing.assert_close(opt.state[params[0]]["fw_gap"], state["fw_gap"],
                                   rtol=1e-10, atol=1e-14)


@pytest.mark.parametrize("name", list(SETS))
def test_float32_directions_whose_squares_overflow_still_move(name):
    """The no-gap guards read 2-norms taken in float32; entries of 1e20 overflow the squares,
    which must not read as an infinite direction (the tensor would turn NaN)."""
    gen = torch.Generator().manual_seed(6)
    params = [nn.Parameter(0.01 * torch.randn(s, generator=gen)) for s in [(7, 3), (4,)]]
    twins = [p.detach().clone() for p in params]
    opt = StochasticFrankWolfe(params, lmo=SETS[name](), lr=0.9, momentum=0.0, rescale=None)
    opt.make_feasible()
    twins = [p.detach().clone() for p in params]
    grads = [1e20 * torch.randn(p.shape, generator=gen) for p in params]
    grads[1][2] = 0.0  # a zero coordinate too: the L-infinity step's other form
    for p, g in zip(params, grads, strict=True):
        p.grad = g.clone()
    opt.step()
    for p, twin, g in zip(params, twins, grads, strict=True):
        frank_wolfe_update(twin, g, opt.param_groups[0], {})
        assert bool(p.isfinite().all())
        torch.testing.assert_close(p.detach(), twin, rtol=1e-5, atol=1e-6)


def test_step_counts_stay_per_parameter_when_some_skip_steps():
    """Parameters stepping together share a counter; one that skips a step (no gradient)
    must keep its own count, and the counts survive a state dict round trip."""
    params = _params(7)
    opt = StochasticFrankWolfe(params, lmo=LinfBall(0.3), lr=0.1)
    opt.make_feasible()
    grads = _grads(params, seed=70)
    for step in range(5):
        for i, (p, g) in enumerate(zip(params, grads, strict=True)):
            p.grad = None if (i == 1 and step in (1, 2)) or (i == 2 and step == 4) else g
        opt.step()
    assert [float(opt.state[p]["step"]) for p in params] == [5.0, 3.0, 4.0, 5.0]
    again = StochasticFrankWolfe(params, lmo=LinfBall(0.3), lr=0.1)
    again.load_state_dict(opt.state_dict())
    for p, g in zip(params, grads, strict=True):
        p.grad = g
    again.step()
    assert [float(again.state[p]["step"]) for p in params] == [6.0, 4.0, 5.0, 6.0]
    assert [float(opt.state[p]["step"]) for p in params] == [5.0, 3.0, 4.0, 5.0]


def test_compiled_step_counts_stay_per_parameter_when_some_skip_steps():
    """The same with compiled steps after eager ones (the eager backend: the traced operations
    themselves): a parameter without a gradient keeps its count."""
    torch._dynamo.reset()
    params = _params(7)
    opt = StochasticFrankWolfe(params, lmo=LinfBall(0.3), lr=0.1)
    opt.make_feasible()
    grads = _grads(params, seed=70)
    compiled = torch.compile(opt.step, backend="eager")
    for step in range(3):
        for i, (p, g) in enumerate(zip(params, grads, strict=True)):
            p.grad = None if i == 1 and step == 2 else g
        (compiled if step == 2 else opt.step)()
    assert [float(opt.state[p]["step"]) for p in params] == [3.0, 2.0, 3.0, 3.0]


def test_eager_steps_reuse_their_plan_until_something_changes():
    """The plan (buckets, constants, shared counters) is built once and reused while groups,
    gradients and counters stay; a parameter that skips a step makes a new one."""
    params = _params(9)
    opt = StochasticFrankWolfe(params, lmo=LinfBall(0.3), lr=0.1)
    opt.make_feasible()
    grads = _grads(params, seed=90)
    for p, g in zip(params, grads, strict=True):
        p.grad = g
    opt.step()
    plan = opt._plan
    assert plan is not None
    for _ in range(3):
        opt.step()
        assert opt._plan is plan
    params[1].grad = None
    opt.step()
    assert opt._plan is not plan
    again = opt._plan
    opt.step()
    assert opt._plan is again


def test_step_counts_per_parameter_across_compiled_and_eager_steps():
    """Compiled steps from the start (one counter for the parameters that start together),
    compiled steps with a parameter skipped, eager steps in between and a state dict round
    trip: every parameter counts exactly the steps it took."""
    torch._dynamo.reset()
    params = _params(8)
    opt = StochasticFrankWolfe(params, lmo=LinfBall(0.3), lr=0.1)
    opt.make_feasible()
    grads = _grads(params, seed=80)
    compiled = torch.compile(opt.step, backend="eager")
    skips = {1: {0}, 2: {0, 2}, 4: {3}, 6: {2}}  # step -> parameters without a gradient
    taken = [0] * len(params)
    for step in range(8):
        for i, (p, g) in enumerate(zip(params, grads, strict=True)):
            p.grad = None if i in skips.get(step, ()) else g
            taken[i] += p.grad is not None
        (opt.step if step in (3, 5) else compiled)()
        assert [float(opt.state[p]["step"]) for p in params] == taken, step
        counters = [opt.state[p]["step"] for p in params]
        if step == 0:  # parameters that start together share one counter
            assert all(c is counters[0] for c in counters)
        if step == 5:  # an eager step shares the counters of equal counts
            assert counters[2] is counters[3] and counters[0] is not counters[1]
    again = StochasticFrankWolfe(params, lmo=LinfBall(0.3), lr=0.1)
    again.load_state_dict(opt.state_dict())
    for p, g in zip(params, grads, strict=True):
        p.grad = g
    torch.compile(again.step, backend="eager")()
    assert [float(again.state[p]["step"]) for p in params] == [t + 1 for t in taken]
    assert [float(opt.state[p]["step"]) for p in params] == taken


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("lr", [0.3, 40.0], ids=["gamma-small", "gamma-large"])
def test_linf_compiled_kernel_takes_the_pytorch_step(dtype, lr):
    """Tensors large enough for the compiled L-infinity kernel (torchfw.optim._linf_kernel):
    the same weights as the PyTorch form (the kernel deferred), with a tensor whose direction
    has zero entries (those coordinates keep their values), a zero direction, an infinite and a
    NaN entry (that coordinate alone NaN), and a gamma of 1 (the vertex itself)."""
    from torchfw.optim import _linf_kernel
    from torchfw.utils import jit

    if _linf_kernel.linf_step is None:
        pytest.skip("numba is not available")
    shapes = [(200, 60), (90, 150), (150, 80), (100, 120), (50, 200)]
    runs = []
    for deferred in (False, True):
        jit.set_deferred(deferred)
        try:
            gen = torch.Generator().manual_seed(11)
            params = [nn.Parameter(0.01 * torch.randn(s, generator=gen, dtype=dtype))
                      for s in shapes]
            opt = StochasticFrankWolfe(params, lmo=LinfBall(0.3), lr=lr, momentum=0.5)
            opt.make_feasible()
            for step in range(3):
                grads = [torch.randn(s, generator=gen, dtype=dtype) for s in shapes]
                grads[1][3, :7] = 0.0   # some coordinates without direction
                grads[2].zero_()        # no direction (the buffer keeps the older ones)
                if step == 2:
                    grads[3][5, 5] = math.inf
                    grads[4][0, 1] = math.nan
                for p, g in zip(params, grads, strict=True):
                    p.grad = g
                opt.step()
            runs.append([p.detach().clone() for p in params])
        finally:
            jit.set_deferred(False)
    for a, b in zip(*runs, strict=True):
        torch.testing.assert_close(a, b, rtol=0, atol=2 * torch.finfo(dtype).eps, equal_nan=True)
    # NaN exactly at the coordinates whose direction is not finite (the buffers carry them)
    for i, where in ((3, (5, 5)), (4, (0, 1))):
        nan = runs[0][i].isnan()
        assert bool(nan[where]) and int(nan.sum()) == 1
    assert not any(bool(t.isnan().any()) for t in runs[0][:3])


def test_linf_compiled_kernel_runs_on_large_tensors():
    """The kernel is the step's path for large float tensors (a wrong dispatch would leave the
    kernel untested by the test above)."""
    from torchfw.optim import _linf_kernel

    if _linf_kernel.linf_step is None:
        pytest.skip("numba is not available")
    calls = []
    real = _linf_kernel.linf_step

    def spy(p, d, consts):
        calls.append(p.size)
        return real(p, d, consts)

    params = [nn.Parameter(torch.zeros(100, 100)), nn.Parameter(torch.zeros(100, 100))]
    opt = StochasticFrankWolfe(params, lmo=LinfBall(1.0), lr=0.1)
    for p in params:
        p.grad = torch.ones_like(p)
    try:
        _linf_kernel.linf_step = spy
        opt.step()
    finally:
        _linf_kernel.linf_step = real
    assert calls == [10_000, 10_000]
    torch.testing.assert_close(params[0].detach(), torch.full((100, 100), -0.1 / 200.0))


def _assert_nan_where_not_finite(name, weights):
    """The weights after the compiled-step tests' last step: an infinite direction entry at
    [2, 3] of the first tensor and a NaN one at [1, 0, 1] of the third."""
    for i, where in ((0, (2, 3)), (2, (1, 0, 1))):
        nan = weights[i].isnan()
        if name == "linf":
            assert bool(nan[where]) and int(nan.sum()) == 1
        else:
            assert bool(nan.all())


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize("track", [True, False], ids=["gaps", "no-gaps"])
@pytest.mark.parametrize("name", list(SETS))
def test_compiled_step_takes_the_eager_step_and_guards(name, track, dtype):
    """Under torch.compile (the eager backend: the traced operations themselves) L-infinity and
    L2 balls take the per-tensor form of torchfw.optim._traced; its weights, gaps and guards
    must be the eager step's: a zero direction does not move, a non-finite entry turns NaN its
    tensor (L2, K-sparse) or its coordinate (L-infinity) and nothing else."""
    torch._dynamo.reset()
    runs = []
    for compiled in (False, True):
        params = [nn.Parameter(p.detach().to(dtype)) for p in _params(8)]
        opt = StochasticFrankWolfe(params, lmo=SETS[name](), lr=0.2, momentum=0.5,
                                   track_gap=track)
        opt.make_feasible()

        def step(opt=opt):
            opt.step()

        run = torch.compile(step, backend="eager") if compiled else step
        for k in range(3):
            grads = [g.to(dtype) for g in _grads(params, seed=60 + k)]
            if k == 2:
                grads[0][2, 3] = math.inf
                grads[2][1, 0, 1] = math.nan
            for p, g in zip(params, grads, strict=True):
                p.grad = g
            run()
        runs.append(([p.detach().clone() for p in params],
                     [opt.state[p]["fw_gap"].clone() for p in params] if track else []))
    tol = {"rtol": 1e-12, "atol": 1e-14} if dtype == torch.float64 else \
        {"rtol": 1e-5, "atol": 1e-6}
    for a, b in zip(runs[0][0] + runs[0][1], runs[1][0] + runs[1][1], strict=True):
        torch.testing.assert_close(a, b, equal_nan=True, **tol)
    weights = runs[1][0]
    _assert_nan_where_not_finite(name, weights)
    assert not bool(weights[1].isnan().any()) and not bool(weights[3].isnan().any())


@pytest.mark.slow
@pytest.mark.parametrize("track", [True, False], ids=["gaps", "no-gaps"])
@pytest.mark.parametrize("name", ["linf", "l2"])
def test_inductor_step_takes_the_eager_step_and_guards(name, track):
    """The same under inductor, the compiler users run: its generated code has its own
    arithmetic (``sign`` of a NaN is 0 there, not NaN), so the guards must hold by the step's
    own reductions. A coordinate without direction keeps its value, a tensor without direction
    does not move, a non-finite entry turns its tensor (L2) or its coordinate (L-infinity) NaN,
    and nothing else; the other weights and the gaps are the eager step's up to float32
    rounding."""
    pytest.importorskip("torch._inductor")
    torch._dynamo.reset()
    runs = []
    for compiled in (False, True):
        params = [nn.Parameter(p.detach().float()) for p in _params(8)]
        opt = StochasticFrankWolfe(params, lmo=SETS[name](), lr=0.2, momentum=0.5,
                                   track_gap=track)
        opt.make_feasible()

        def step(opt=opt):
            opt.step()

        run = torch.compile(step) if compiled else step
        row = params[0][1].detach().clone()
        before: list = []
        kept = False
        for k in range(3):
            grads = [g.float() for g in _grads(params, seed=60 + k)]
            if k == 0:
                for p in params:
                    p.grad = torch.zeros_like(p)
                run()  # the buffers start at zero: no direction anywhere
            if k == 2:
                grads[0][2, 3] = math.inf
                grads[2][1, 0, 1] = math.nan
                before = [p.detach().clone() for p in params]
                kept = torch.equal(params[0][1].detach(), row)
            for p, g in zip(params, grads, strict=True):
                p.grad = g
            run()
        runs.append(([p.detach().clone() for p in params],
                     [opt.state[p]["fw_gap"].clone() for p in params] if track else [],
                     before, kept))
    eager, compiled_run = runs
    for a, b in zip(eager[0] + eager[1], compiled_run[0] + compiled_run[1], strict=True):
        torch.testing.assert_close(a, b, equal_nan=True, rtol=1e-5, atol=1e-6)
    weights, _, before, kept = compiled_run
    _assert_nan_where_not_finite(name, weights)
    assert not bool(weights[1].isnan().any()) and not torch.equal(weights[1], before[1])
    # the last tensor's gradient, and so its buffer, is zero at every step: it never moves
    assert torch.equal(weights[3], before[3])
    # row 1 of the first tensor never had a direction: in a box its coordinates keep their
    # values (an L2 step moves them towards the vertex's zeros)
    assert kept == (name == "linf")


def test_linf_compiled_kernel_counts_an_in_place_change():
    """The kernel writes through NumPy views; autograd must still see the parameters changed
    in place (a backward through a graph that saved them refuses, as after any optimizer)."""
    from torchfw.optim import _linf_kernel

    if _linf_kernel.linf_step is None:
        pytest.skip("numba is not available")
    weight = nn.Parameter(0.01 * torch.randn(100, 100))
    opt = StochasticFrankWolfe([weight], lmo=LinfBall(1.0), lr=0.1)
    loss = (weight * weight).sum()  # saves the weight for its backward
    weight.grad = torch.ones_like(weight)
    before = weight._version
    opt.step()
    assert weight._version > before
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        loss.backward()
