"""StochasticFrankWolfe against the torch.optim contract.

Exact resume from an in-memory state dict, degenerate gradients (zero, NaN), old state dicts,
tensor learning rates, ``maximize``/``foreach``, the gap before the first step, and
``torch.compile``. The generic checks of ``torch.testing._internal.common_optimizers`` are in
``test_optim_generic.py``.
"""

from __future__ import annotations

import copy
import math

import pytest
import torch
from torch import nn

from torchfw.optim import StochasticFrankWolfe
from torchfw.sets.oracles import Box, L1Ball, L2Ball, LinfBall, Simplex

DTYPE = torch.float64


def _digits():
    from sklearn.datasets import load_digits

    X, y = load_digits(return_X_y=True)
    return torch.tensor(X / 16.0, dtype=torch.float32), torch.tensor(y)


def _issue_setup(model):
    """The configuration of the state-dict round trip."""
    return StochasticFrankWolfe([
        {"params": [model[0].weight], "lmo": L1Ball(30.0)},
        {"params": [model[2].weight], "lmo": LinfBall(0.5)},
        {"params": [model[0].bias, model[2].bias], "lmo": LinfBall(1.0)},
    ], lr=0.1, momentum=0.9)


def _epoch(model, opt, X, y, batches=30, size=50):
    for i in range(batches):
        opt.zero_grad()
        nn.functional.cross_entropy(model(X[i * size:(i + 1) * size]),
                                    y[i * size:(i + 1) * size]).backward()
        opt.step()


def test_resume_from_a_live_optimizer_state_dict_is_bit_identical():
    # Loading opt.state_dict() (no copy, no disk) into a fresh optimizer used
    # to share the momentum buffers with the original; both then updated the same tensors and
    # the LinfBall groups diverged at the next step.
    X, y = _digits()
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 10))
    opt = _issue_setup(model)
    opt.make_feasible()
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5)
    for _ in range(3):
        _epoch(model, opt, X, y)
        sched.step()
    twin = copy.deepcopy(model)
    twin_opt = _issue_setup(twin)
    twin_sched = torch.optim.lr_scheduler.StepLR(twin_opt, step_size=1, gamma=0.5)
    twin_sched.load_state_dict(sched.state_dict())
    twin_opt.load_state_dict(opt.state_dict())
    for p in opt.state:
        for value in opt.state[p].values():
            assert all(value is not w for q in twin_opt.state for w in twin_opt.state[q].values())
    for _ in range(2):  # many more steps, through two more scheduler steps
        _epoch(model, opt, X, y)
        _epoch(twin, twin_opt, X, y)
        sched.step()
        twin_sched.step()
    for a, b in zip(model.parameters(), twin.parameters(), strict=True):
        assert torch.equal(a, b)
    for p, q in zip(model.parameters(), twin.parameters(), strict=True):
        for key, value in opt.state[p].items():
            assert torch.equal(value, twin_opt.state[q][key])


# --------------------------------------------------------------------------------------------
# Degenerate directions
# --------------------------------------------------------------------------------------------

ORACLES = [Simplex(1.0), L1Ball(2.0), L2Ball(1.5), LinfBall(0.3), Box(-0.2, 0.5)]


@pytest.mark.parametrize("lmo", ORACLES, ids=lambda o: type(o).__name__)
@pytest.mark.parametrize("rescale", ["diameter", "gradient", None])
def test_zero_gradient_does_not_move_and_gap_is_zero(lmo, rescale):
    p = nn.Parameter(torch.randn(3, 4, dtype=DTYPE))
    opt = StochasticFrankWolfe([p], lmo=lmo, lr=0.5, momentum=0.9, rescale=rescale,
                               track_gap=True)
    opt.make_feasible()
    start = p.detach().clone()
    for _ in range(3):
        p.grad = torch.zeros_like(p)
        opt.step()
    assert torch.equal(p.detach(), start)
    assert float(opt.fw_gap()) == 0.0


def test_zero_rows_and_box_coordinates_stay_others_move():
    w = nn.Parameter(torch.zeros(3, 4, dtype=DTYPE))
    b = nn.Parameter(torch.zeros(4, dtype=DTYPE))
    opt = StochasticFrankWolfe([{"params": [w], "lmo": L1Ball(1.0), "per_row": True},
                                {"params": [b], "lmo": LinfBall(1.0)}],
                               lr=0.5, momentum=0.0, rescale=None, track_gap=True)
    w.grad = torch.zeros(3, 4, dtype=DTYPE)
    w.grad[1, 2] = 1.0
    b.grad = torch.tensor([0.0, 2.0, 0.0, -1.0], dtype=DTYPE)
    opt.step()
    expected_w = torch.zeros(3, 4, dtype=DTYPE)
    expected_w[1, 2] = -0.5
    assert torch.equal(w.detach(), expected_w)  # rows 0 and 2 had no direction
    # Box coordinates with no direction keep their value (0 here), not the +r tie-break vertex.
    assert torch.equal(b.detach(), torch.tensor([0.0, -0.5, 0.0, 0.5], dtype=DTYPE))
    gaps = opt.fw_gaps(per_row=True)
    assert torch.equal(gaps[w], torch.tensor([0.0, 1.0, 0.0], dtype=DTYPE))


@pytest.mark.parametrize("lmo", ORACLES, ids=lambda o: type(o).__name__)
def test_nan_gradient_shows_in_the_parameter(lmo):
    # A NaN gradient used to move the parameter quietly towards a vertex.
    # Like torch.optim.SGD, the NaN now reaches the weights: the whole set (here one row), or in
    # a box, a product of intervals, the coordinate alone.
    p = nn.Parameter(torch.zeros(3, 4, dtype=DTYPE))
    per_row = not isinstance(lmo, Box)
    opt = StochasticFrankWolfe([p], lmo=lmo, lr=0.5, momentum=0.9, per_row=per_row,
                               track_gap=True)
    opt.make_feasible()
    grad = torch.randn(3, 4, dtype=DTYPE)
    grad[1, 3] = math.nan
    p.grad = grad
    opt.step()
    if isinstance(lmo, Box):
        nan = p.isnan()
        assert bool(nan[1, 3]) and int(nan.sum()) == 1
    elif per_row:
        assert bool(p[1].isnan().all())
        assert not bool(p[[0, 2]].isnan().any())
        gaps = opt.fw_gaps(per_row=True)[p]
        assert bool(gaps[1].isnan()) and not bool(gaps[[0, 2]].isnan().any())
    else:
        assert bool(p.isnan().all())
    assert bool(opt.fw_gap().isnan())


@pytest.mark.parametrize("rescale", ["diameter", None, "gradient"])
def test_box_rows_show_a_non_finite_direction_per_coordinate(rescale):
    # One L-infinity ball per row takes the per-tensor update. Its vertex reads each d_i alone,
    # so an infinite entry turns its coordinate NaN and the others move; with
    # rescale="gradient" the step size reads the row's norm, and the row turns NaN.
    p = nn.Parameter(torch.zeros(3, 4, dtype=DTYPE))
    opt = StochasticFrankWolfe([p], lmo=LinfBall(0.3), lr=0.5, momentum=0.0, per_row=True,
                               rescale=rescale)
    grad = torch.randn(3, 4, dtype=DTYPE, generator=torch.Generator().manual_seed(4))
    grad[1, 3] = math.inf
    p.grad = grad
    opt.step()
    nan = p.isnan()
    if rescale == "gradient":
        assert bool(nan[1].all()) and int(nan.sum()) == 4
    else:
        assert bool(nan[1, 3]) and int(nan.sum()) == 1
        assert bool((p[1, :3] != 0).all())  # the other coordinates of the row moved


def test_infinite_gradient_shows_too():
    p = nn.Parameter(torch.zeros(5, dtype=DTYPE))
    opt = StochasticFrankWolfe([p], lmo=L1Ball(1.0), lr=0.5, momentum=0.0)
    p.grad = torch.tensor([0.0, math.inf, 1.0, 0.0, 0.0], dtype=DTYPE)
    opt.step()
    assert bool(p.isnan().all())


# --------------------------------------------------------------------------------------------
# Monitoring before the first step
# --------------------------------------------------------------------------------------------

def test_gaps_are_computed_only_when_tracked():
    """track_gap=False (the default) computes no gap and says so when one is asked for;
    turning it on brings the gap back, per group, and turning it off drops the stored gaps."""
    model = nn.Linear(3, 2).double()
    twin = copy.deepcopy(model)
    opt = StochasticFrankWolfe(model.parameters(), lmo=LinfBall(1.0), lr=0.3)
    tracked = StochasticFrankWolfe(twin.parameters(), lmo=LinfBall(1.0), lr=0.3, track_gap=True)
    x = torch.randn(4, 3, dtype=DTYPE)
    for m, o in ((model, opt), (twin, tracked)):
        o.make_feasible()
        m(x).square().sum().backward()
        o.step()
    for a, b in zip(model.parameters(), twin.parameters(), strict=True):
        assert torch.equal(a, b)  # the gap changes no iterate
        assert "fw_gap" not in opt.state[a] and "fw_gap" in tracked.state[b]
    with pytest.raises(RuntimeError, match="track_gap=True"):
        opt.fw_gap()
    with pytest.raises(RuntimeError, match="track_gap=True"):
        opt.fw_gaps()
    opt.param_groups[0]["track_gap"] = True
    opt.step()
    assert float(opt.fw_gap()) >= 0.0
    opt.param_groups[0]["track_gap"] = False
    opt.step()
    assert all("fw_gap" not in opt.state[p] for p in model.parameters())
    # saved with tracking on, it loads on; a state dict from before the option keeps the
    # loading optimizer's choice
    state = tracked.state_dict()
    fresh = StochasticFrankWolfe(model.parameters(), lmo=LinfBall(1.0))
    fresh.load_state_dict(state)
    assert fresh.param_groups[0]["track_gap"] is True
    del state["param_groups"][0]["track_gap"]
    fresh = StochasticFrankWolfe(model.parameters(), lmo=LinfBall(1.0))
    fresh.load_state_dict(state)
    assert fresh.param_groups[0]["track_gap"] is False
    with pytest.raises(TypeError, match="track_gap"):
        StochasticFrankWolfe(model.parameters(), lmo=LinfBall(1.0), track_gap=1)


def test_fw_gap_before_the_first_step_is_a_nan_tensor():
    model = nn.Linear(3, 2)
    opt = StochasticFrankWolfe(model.parameters(), lmo=LinfBall(1.0), track_gap=True)
    gap = opt.fw_gap()
    assert isinstance(gap, torch.Tensor) and gap.dim() == 0
    assert math.isnan(gap.item())  # a logging hook's .item() works
    model(torch.randn(4, 3)).sum().backward()
    opt.step()
    assert math.isfinite(opt.fw_gap().item())


# --------------------------------------------------------------------------------------------
# Old state dicts, tensor lr, maximize, foreach
# --------------------------------------------------------------------------------------------

def _sfw_for(model, l1=1.0, l2=2.0, **kwargs):
    kwargs = {"lr": 0.3, "momentum": 0.8, **kwargs}
    return StochasticFrankWolfe([{"params": [model[0].weight], "lmo": L1Ball(l1)},
                                 {"params": [model[2].weight], "lmo": L2Ball(l2)},
                                 {"params": [model[0].bias, model[2].bias], "lmo": None}],
                                **kwargs)


def _pair(**kwargs):
    torch.manual_seed(4)
    model = nn.Sequential(nn.Linear(5, 4), nn.Tanh(), nn.Linear(4, 2)).to(DTYPE)
    opt = _sfw_for(model, **kwargs)
    opt.make_feasible()
    return model, opt


def _run(model, opt, steps, seed=5, sign=1.0):
    gen = torch.Generator().manual_seed(seed)
    for _ in range(steps):
        x = torch.randn(6, 5, generator=gen, dtype=DTYPE)
        opt.zero_grad()
        (sign * model(x).square().mean()).backward()
        opt.step()


def test_state_dict_saved_before_later_options_loads():
    # Groups saved before per_row/rescale/weight_decay (and maximize/foreach)
    # existed failed with KeyError; step counters were Python ints then.
    model, opt = _pair()
    _run(model, opt, 3)
    old = copy.deepcopy(opt.state_dict())
    for group in old["param_groups"]:
        for key in ("per_row", "rescale", "weight_decay", "maximize", "foreach"):
            del group[key]
    for state in old["state"].values():
        state["step"] = int(state["step"])
    twin = copy.deepcopy(model)
    twin_opt = _sfw_for(twin, l1=9.0, l2=9.0, lr=0.1)  # loading restores oracles and lr
    twin_opt.load_state_dict(old)
    assert twin_opt.param_groups[0]["rescale"] == "diameter"
    assert twin_opt.param_groups[0]["maximize"] is False
    assert isinstance(twin_opt.state[twin[0].weight]["step"], torch.Tensor)
    _run(model, opt, 4, seed=6)
    _run(twin, twin_opt, 4, seed=6)
    for a, b in zip(model.parameters(), twin.parameters(), strict=True):
        assert torch.equal(a, b)


def test_tensor_lr_matches_float_lr_and_follows_a_scheduler():
    model, opt = _pair()
    twin = copy.deepcopy(model)
    twin_opt = _sfw_for(twin, lr=torch.tensor(0.3, dtype=DTYPE))
    assert twin_opt.param_groups[0]["lr"] is not twin_opt.param_groups[1]["lr"]
    scheds = [torch.optim.lr_scheduler.StepLR(o, step_size=1, gamma=0.7) for o in (opt, twin_opt)]
    for _ in range(3):
        _run(model, opt, 2)
        _run(twin, twin_opt, 2)
        for s in scheds:
            s.step()
    assert float(twin_opt.param_groups[1]["lr"]) == pytest.approx(0.3 * 0.7 ** 3)
    for a, b in zip(model.parameters(), twin.parameters(), strict=True):
        torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("lr, error", [(torch.tensor([0.1, 0.2]), "Tensor lr must be 1-element"),
                                       (torch.tensor(-1.0), "lr must be"),
                                       (torch.tensor(math.nan), "lr must be"),
                                       (torch.tensor(1), "floating dtype")])
def test_bad_tensor_lr(lr, error):
    p = nn.Parameter(torch.zeros(3))
    with pytest.raises((ValueError, TypeError), match=error):
        StochasticFrankWolfe([p], lmo=L1Ball(1.0), lr=lr)


def test_maximize_is_minimizing_the_negated_loss():
    model, opt = _pair(maximize=True)
    twin = copy.deepcopy(model)
    twin_opt = _sfw_for(twin)
    _run(model, opt, 5)
    _run(twin, twin_opt, 5, sign=-1.0)
    for a, b in zip(model.parameters(), twin.parameters(), strict=True):
        assert torch.equal(a, b)
    with pytest.raises(TypeError, match="maximize"):
        StochasticFrankWolfe([nn.Parameter(torch.zeros(2))], lmo=None, maximize=1)


@pytest.mark.parametrize("foreach", [True, False])
def test_foreach_is_accepted_and_changes_nothing(foreach):
    model, opt = _pair()
    twin = copy.deepcopy(model)
    twin_opt = _sfw_for(twin, foreach=foreach)
    _run(model, opt, 4)
    _run(twin, twin_opt, 4)
    for a, b in zip(model.parameters(), twin.parameters(), strict=True):
        assert torch.equal(a, b)


# --------------------------------------------------------------------------------------------
# torch.compile
# --------------------------------------------------------------------------------------------

def _compiled_vs_eager(backend, steps=4):
    results = []
    for compiled in (False, True):
        torch.manual_seed(0)
        model = nn.Sequential(nn.Linear(6, 5), nn.Tanh(), nn.Linear(5, 3))
        opt = StochasticFrankWolfe([
            {"params": [model[0].weight], "lmo": L1Ball(torch.ones(5)), "per_row": True},
            {"params": [model[2].weight], "lmo": L2Ball(2.0), "rescale": "gradient"},
            {"params": [model[0].bias], "lmo": LinfBall(0.5)},
            {"params": [model[2].bias], "lmo": Simplex(1.0), "rescale": None},
        ], lr=torch.tensor(0.5), momentum=0.9)
        opt.make_feasible()

        def step(opt=opt):
            opt.step()

        run = torch.compile(step, backend=backend) if compiled else step
        gen = torch.Generator().manual_seed(1)
        for _ in range(steps):
            x, y = torch.randn(8, 6, generator=gen), torch.randint(0, 3, (8,), generator=gen)
            opt.zero_grad()
            nn.functional.cross_entropy(model(x), y).backward()
            run()
        results.append([p.detach().clone() for p in model.parameters()])
    return results


def test_compiled_step_eager_backend():
    # The data_ptr() comparison made every backend fail.
    torch._dynamo.reset()
    eager, compiled = _compiled_vs_eager("eager")
    for a, b in zip(eager, compiled, strict=True):
        assert torch.equal(a, b)


@pytest.mark.slow
def test_compiled_step_inductor():
    # The default backend generates and builds C++ on the CPU: minutes on a busy machine.
    pytest.importorskip("torch._inductor")
    torch._dynamo.reset()
    eager, compiled = _compiled_vs_eager("inductor", steps=3)
    for a, b in zip(eager, compiled, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)
