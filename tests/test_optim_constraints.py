"""torchfw.optim.constraints_for: one group per parameter, radii from the initialization."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

from torchfw.optim import StochasticFrankWolfe, constraints_for, expected_init_norms
from torchfw.sets.oracles import L1Ball, L2Ball, LinfBall
from torchfw.sets.polytopes import KSparsePolytope, LpBall


def _model():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(40, 30), nn.ReLU(), nn.LayerNorm(30), nn.Linear(30, 5))


def _linear_expected_norm(fan_in: int, n: int) -> float:
    # torch's default Linear init draws weights and biases from U(-b, b), b = 1 / sqrt(fan_in):
    # E||w||^2 = n b^2 / 3, and ||w|| concentrates around its root for n in the hundreds.
    return math.sqrt(n / (3.0 * fan_in))


def test_l2_radius_is_value_times_expected_init_norm():
    model = _model()
    groups = constraints_for(model, "l2", value=3.0, samples=200)
    by_name = {g["params"][0][0]: g["lmo"] for g in groups}
    assert list(by_name) == [name for name, _ in model.named_parameters()]
    w = by_name["0.weight"]
    assert isinstance(w, L2Ball)
    assert w.radius == pytest.approx(3.0 * _linear_expected_norm(40, 1200), rel=0.02)
    assert by_name["3.weight"].radius == pytest.approx(3.0 * _linear_expected_norm(30, 150),
                                                       rel=0.03)
    # LayerNorm: weight initialized to ones (norm sqrt(30), no spread); bias to zeros, whose
    # expected norm 0 falls back to 1, as in the reference code.
    assert by_name["2.weight"].radius == pytest.approx(3.0 * math.sqrt(30))
    assert by_name["2.bias"].radius == pytest.approx(3.0)


@pytest.mark.parametrize("kind, cls", [("linf", LinfBall), ("l1", L1Ball),
                                       ("ksparse", KSparsePolytope), ("lp", LpBall)])
def test_every_set_gets_diameter_twice_value_times_the_norm(kind, cls):
    model = _model()
    extra = {"ksparse": {"k_frac": 0.1}, "lp": {"p": 3.0}}.get(kind, {})
    norms = expected_init_norms(model, samples=50)
    groups = constraints_for(model, kind, value=2.0, samples=50, **extra)
    for group in groups:
        (name, p), = group["params"]
        lmo = group["lmo"]
        assert type(lmo) is cls
        norm = norms[name] if norms[name] > 0 else 1.0
        assert lmo.diameter(p.numel()) == pytest.approx(2.0 * 2.0 * norm, rel=1e-12)
        if kind == "ksparse":
            assert lmo.k == max(1, round(0.1 * p.numel()))


def test_radius_and_diameter_modes():
    model = _model()
    for group in constraints_for(model, "linf", value=0.5, mode="radius"):
        assert group["lmo"].radius == 0.5
    for group in constraints_for(model, "linf", value=4.0, mode="diameter"):
        (_, p), = group["params"]
        assert group["lmo"].diameter(p.numel()) == pytest.approx(4.0)


def test_model_and_random_state_are_untouched_and_draws_are_seeded():
    model = _model()
    before = [p.detach().clone() for p in model.parameters()]
    torch.manual_seed(123)
    state = torch.random.get_rng_state()
    a = constraints_for(model, "l2", samples=20, seed=7)
    assert torch.equal(torch.random.get_rng_state(), state)
    for p, q in zip(model.parameters(), before, strict=True):
        assert torch.equal(p.detach(), q)
    b = constraints_for(model, "l2", samples=20, seed=7)
    c = constraints_for(model, "l2", samples=20, seed=8)
    radii = [[g["lmo"].radius for g in gs] for gs in (a, b, c)]
    assert radii[0] == radii[1] and radii[0] != radii[2]


def test_groups_train_with_stochastic_frank_wolfe_and_name_their_gaps():
    model = _model()
    opt = StochasticFrankWolfe(constraints_for(model, "linf", value=5.0,
                                               unconstrained=(nn.LayerNorm,)), lr=0.1,
                               track_gap=True)
    assert opt.param_groups[2]["lmo"] is None and opt.param_groups[3]["lmo"] is None
    opt.make_feasible()
    x, y = torch.randn(16, 40), torch.randint(0, 5, (16,))
    for _ in range(3):
        opt.zero_grad()
        nn.functional.cross_entropy(model(x), y).backward()
        opt.step()
    for group in opt.param_groups:
        if group["lmo"] is not None:
            p = group["params"][0]
            assert bool(group["lmo"].contains(p.detach().reshape(1, -1), atol=1e-6).all())
    gaps = opt.fw_gaps(named=True)
    assert set(gaps) == {"0.weight", "0.bias", "3.weight", "3.bias"}


def test_frozen_parameters_get_no_group_and_layers_without_reset_use_their_norm():
    class Scale(nn.Module):
        def __init__(self):
            super().__init__()
            self.s = nn.Parameter(torch.full((4,), 2.0))

    model = nn.Sequential(nn.Linear(3, 4), Scale())
    model[0].bias.requires_grad_(False)
    groups = constraints_for(model, "l2", value=1.0, samples=10)
    assert [g["params"][0][0] for g in groups] == ["0.weight", "1.s"]
    assert groups[1]["lmo"].radius == pytest.approx(4.0)  # ||(2, 2, 2, 2)||


@pytest.mark.parametrize("kwargs, error", [
    ({"set": "l3"}, "set must be one of"),
    ({"mode": "init"}, "mode must be one of"),
    ({"value": 0.0}, "value must be"),
    ({"value": math.inf}, "value must be"),
    ({"set": "lp"}, "needs the exponent p"),
    ({"set": "l2", "p": 3.0}, "takes no p"),
    ({"set": "ksparse"}, "exactly one of k"),
    ({"set": "ksparse", "k": 2, "k_frac": 0.1}, "exactly one of k"),
    ({"set": "ksparse", "k_frac": 1.5}, "k_frac must be"),
    ({"set": "linf", "k": 3}, "take"),
    ({"samples": 0}, "samples must be"),
])
def test_bad_arguments_are_named(kwargs, error):
    with pytest.raises(ValueError, match=error):
        constraints_for(_model(), **kwargs)
    with pytest.raises(TypeError, match="nn.Module"):
        constraints_for([nn.Parameter(torch.zeros(2))])
