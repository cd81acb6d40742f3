"""Tests of torchfw.optim.StochasticFrankWolfe (the torch.optim stochastic Frank-Wolfe)."""

from __future__ import annotations

import copy
import doctest
import io
import warnings

import pytest
import torch
from conftest import requires_cuda
from torch import nn

import torchfw.optim.sfw
from torchfw.optim import StochasticFrankWolfe, lmo_from_state, lmo_to_state, make_feasible
from torchfw.sets.oracles import LMO, Box, L1Ball, L2Ball, LinfBall, Simplex
from torchfw.sets.polytopes import KSparsePolytope

DTYPE = torch.float64
ATOL = 1e-9


def _mlp(dtype=DTYPE, device="cpu"):
    torch.manual_seed(1)
    return nn.Sequential(nn.Linear(6, 5), nn.Tanh(), nn.Linear(5, 3)).to(dtype=dtype,
                                                                         device=device)


def _batches(n, dtype=DTYPE, device="cpu", d_in=6):
    gen = torch.Generator().manual_seed(2)
    return [(torch.randn(8, d_in, generator=gen, dtype=dtype).to(device),
             torch.randint(0, 3, (8,), generator=gen).to(device)) for _ in range(n)]


def _loss(model, batch):
    x, y = batch
    return nn.functional.cross_entropy(model(x), y)


def _train(model, opt, batches, after_step=None):
    for batch in batches:
        opt.zero_grad()
        _loss(model, batch).backward()
        opt.step()
        if after_step is not None:
            after_step()


def _contained(lmo, p, per_row):
    view = p.detach().reshape(p.shape[0], -1) if per_row else p.detach().reshape(1, -1)
    return bool(lmo.contains(view, atol=ATOL).all())


# Oracles per weight tensor of shape (5, 6) (per-tensor: viewed as (1, 30); per-row: (5, 6)).
ORACLES = {
    "simplex": lambda per_row: Simplex(1.0),
    "l1": lambda per_row: L1Ball(torch.linspace(0.5, 2.0, 5, dtype=DTYPE) if per_row else 2.0),
    "l2": lambda per_row: L2Ball(torch.full((5,), 0.7, dtype=DTYPE) if per_row else 1.5),
    "linf": lambda per_row: LinfBall(torch.linspace(0.1, 0.3, 5, dtype=DTYPE) if per_row
                                     else 0.2),
    "box": lambda per_row: Box(torch.full((5, 6) if per_row else (30,), -0.1, dtype=DTYPE),
                               torch.full((5, 6) if per_row else (30,), 0.3, dtype=DTYPE)),
    "box_scalar": lambda per_row: Box(-0.05, 0.4),
}


# --------------------------------------------------------------------------------------------
# Feasibility
# --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("rescale", ["diameter", "gradient", None])
@pytest.mark.parametrize("per_row", [False, True])
@pytest.mark.parametrize("name", sorted(ORACLES))
def test_feasible_after_every_step(name, per_row, rescale):
    model = _mlp()
    lmo = ORACLES[name](per_row)
    bias_lmo = LinfBall(0.5)
    opt = StochasticFrankWolfe([
        {"params": [model[0].weight], "lmo": lmo, "per_row": per_row},
        {"params": [model[0].bias, model[2].bias], "lmo": bias_lmo},
        {"params": [model[2].weight], "lmo": L1Ball(3.0), "per_row": per_row},
    ], lr=0.3 if rescale != "diameter" else 2.0, momentum=0.5, rescale=rescale)
    opt.make_feasible()
    weight_before = model[0].weight.detach().clone()

    def check():
        assert _contained(lmo, model[0].weight, per_row)
        assert _contained(bias_lmo, model[0].bias, False)
        assert _contained(bias_lmo, model[2].bias, False)
        assert _contained(L1Ball(3.0), model[2].weight, per_row)

    check()
    _train(model, opt, _batches(15), after_step=check)
    assert not torch.equal(weight_before, model[0].weight)  # it did move


def test_feasible_conv_per_row_channels_last():
    torch.manual_seed(0)
    conv = nn.Conv2d(3, 4, 3).to(DTYPE).to(memory_format=torch.channels_last)
    assert not conv.weight.is_contiguous()
    lmo = L1Ball(torch.tensor([0.5, 1.0, 1.5, 2.0], dtype=DTYPE))
    opt = StochasticFrankWolfe([{"params": [conv.weight], "lmo": lmo, "per_row": True},
                                {"params": [conv.bias], "lmo": LinfBall(0.1)}], lr=1.0)
    opt.make_feasible()
    assert _contained(lmo, conv.weight, True)
    x = torch.randn(2, 3, 6, 6, dtype=DTYPE)
    for _ in range(10):
        opt.zero_grad()
        conv(x).square().mean().backward()
        before = conv.weight.detach().clone()
        opt.step()
        assert _contained(lmo, conv.weight, True)
        assert _contained(LinfBall(0.1), conv.bias, False)
        assert not torch.equal(before, conv.weight)


def test_gamma_clipped_to_one_lands_on_vertex():
    # lr far above 1: the step is clipped to gamma = 1, i.e. exactly the vertex.
    p = nn.Parameter(torch.zeros(4, dtype=DTYPE))
    opt = StochasticFrankWolfe([p], lmo=Simplex(1.0), lr=50.0, momentum=0.0, rescale=None)
    p.grad = torch.tensor([0.3, -1.0, 0.2, 0.5], dtype=DTYPE)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # zeros are outside the simplex
        opt.step()
    assert torch.equal(p.detach(), torch.tensor([0.0, 1.0, 0.0, 0.0], dtype=DTYPE))


# --------------------------------------------------------------------------------------------
# The update rule
# --------------------------------------------------------------------------------------------

def _reference_steps(p0, grads, lmo, lr, momentum, rescale, weight_decay=0.0, per_row=False):
    """Direct transcription of the update (d_0 = g_0; d = (1-m) g + m d; p += gamma (v - p))."""
    p = p0.clone()
    d = None
    gaps = []
    for g in grads:
        g = g + weight_decay * p
        d = g.clone() if (d is None or momentum == 0) else (1 - momentum) * g + momentum * d
        shape = (p.shape[0], -1) if per_row else (1, -1)
        pv, dv = p.reshape(shape), d.reshape(shape)
        v = lmo.lmo(dv)
        gaps.append((dv * (pv - v)).sum(-1))
        if rescale is None:
            gamma = torch.full((pv.shape[0], 1), min(lr, 1.0), dtype=p.dtype)
        elif rescale == "diameter":
            radius = lmo.radius if isinstance(lmo.radius, torch.Tensor) else \
                torch.tensor(lmo.radius)
            unit = lmo.diameter(pv.shape[-1]) / float(radius.max())
            gamma = (lr / (unit * radius.to(p.dtype))).reshape(-1, 1).expand(pv.shape[0], 1)
        else:
            gamma = lr * dv.norm(dim=-1, keepdim=True) / (v - pv).norm(dim=-1, keepdim=True)
        gamma = gamma.clamp(0, 1)
        p = (pv + gamma * (v - pv)).reshape(p.shape)
    return p, gaps


@pytest.mark.parametrize("rescale", ["diameter", "gradient", None])
@pytest.mark.parametrize("per_row", [False, True])
def test_update_matches_reference(rescale, per_row):
    torch.manual_seed(3)
    lmo = L1Ball(torch.tensor([1.0, 2.0, 0.5], dtype=DTYPE)) if per_row else L2Ball(2.0)
    p0 = L1Ball(0.4).project(torch.randn(3, 4, dtype=DTYPE).reshape(1, -1)).reshape(3, 4)
    grads = [torch.randn(3, 4, dtype=DTYPE) for _ in range(6)]
    p = nn.Parameter(p0.clone())
    opt = StochasticFrankWolfe([p], lmo=lmo, lr=0.4, momentum=0.8, rescale=rescale,
                               weight_decay=0.01, per_row=per_row, track_gap=True)
    gaps = []
    for g in grads:
        p.grad = g.clone()
        opt.step()
        gaps.append(opt.fw_gaps(per_row=True)[p].clone())
    expected, expected_gaps = _reference_steps(p0, grads, lmo, 0.4, 0.8, rescale, 0.01, per_row)
    torch.testing.assert_close(p.detach(), expected, rtol=1e-12, atol=1e-12)
    for got, want in zip(gaps, expected_gaps, strict=True):
        torch.testing.assert_close(got.reshape(-1), want.reshape(-1), rtol=1e-12, atol=1e-12)


def test_momentum_zero_uses_raw_gradient_and_drops_buffer():
    p = nn.Parameter(torch.zeros(5, dtype=DTYPE))
    opt = StochasticFrankWolfe([p], lmo=L1Ball(1.0), lr=0.5, momentum=0.9, rescale=None)
    p.grad = torch.tensor([1.0, 0, 0, 0, 0], dtype=DTYPE)
    opt.step()
    assert "momentum_buffer" in opt.state[p]
    opt.param_groups[0]["momentum"] = 0.0
    p.grad = torch.tensor([0, 0, 0, 0, 2.0], dtype=DTYPE)
    before = p.detach().clone()
    opt.step()
    assert "momentum_buffer" not in opt.state[p]
    vertex = torch.tensor([0, 0, 0, 0, -1.0], dtype=DTYPE)
    torch.testing.assert_close(p.detach(), before + 0.5 * (vertex - before))


# --------------------------------------------------------------------------------------------
# Mixed models: frozen parameters, missing gradients, unconstrained groups
# --------------------------------------------------------------------------------------------

class _TwoBranch(nn.Module):
    def __init__(self):
        super().__init__()
        self.trunk = nn.Linear(6, 5)
        self.frozen = nn.Linear(5, 5)
        self.head_a = nn.Linear(5, 3)
        self.head_b = nn.Linear(5, 3)  # only used when branch == "b"
        self.norm = nn.LayerNorm(5)
        self.frozen.requires_grad_(False)

    def forward(self, x, branch="a"):
        h = self.norm(self.frozen(torch.tanh(self.trunk(x))))
        return (self.head_a if branch == "a" else self.head_b)(h)


def _two_branch_groups(model, include_b=True):
    constrained = [model.trunk.weight, model.head_a.weight, model.frozen.weight]
    if include_b:
        constrained.append(model.head_b.weight)
    return [
        {"params": constrained, "lmo": L1Ball(2.0), "per_row": True},
        {"params": [model.trunk.bias, model.head_a.bias, model.frozen.bias]
         + ([model.head_b.bias] if include_b else []), "lmo": LinfBall(0.3)},
        {"params": list(model.norm.parameters()), "lmo": None, "lr": 0.05},
    ]


def test_mixed_model_frozen_no_grad_and_unconstrained():
    torch.manual_seed(0)
    model = _TwoBranch().to(DTYPE)
    twin = copy.deepcopy(model)
    opt = StochasticFrankWolfe(_two_branch_groups(model), lr=0.5, momentum=0.9)
    # The twin's optimizer never sees head_b: if skipping it misaligned state or steps, the
    # two runs would differ.
    twin_opt = StochasticFrankWolfe(_two_branch_groups(twin, include_b=False), lr=0.5,
                                    momentum=0.9)
    opt.make_feasible()
    twin_opt.make_feasible()
    frozen_before = model.frozen.weight.detach().clone()
    head_b_before = [t.detach().clone() for t in model.head_b.parameters()]
    norm_before = [t.detach().clone() for t in model.norm.parameters()]
    for x, y in _batches(6):
        for m, o in ((model, opt), (twin, twin_opt)):
            o.zero_grad()
            nn.functional.cross_entropy(m(x, "a"), y).backward()
            o.step()
    assert model.head_b.weight.grad is None
    assert torch.equal(model.frozen.weight, frozen_before)
    for before, after in zip(head_b_before, model.head_b.parameters(), strict=True):
        assert torch.equal(before, after)
    assert len(opt.state[model.head_b.weight]) == 0
    assert len(opt.state[model.frozen.weight]) == 0
    for (name, a), b in zip(model.named_parameters(), twin.parameters(), strict=True):
        if not name.startswith("head_b"):  # not in the twin's optimizer, so never projected
            assert torch.equal(a, b), name
    norm_after = list(model.norm.parameters())
    assert not all(torch.equal(a, b) for a, b in zip(norm_before, norm_after, strict=True))
    assert _contained(L1Ball(2.0), model.trunk.weight, True)
    # Later, head_b gets gradients and starts its own state.
    x, y = _batches(1)[0]
    opt.zero_grad()
    nn.functional.cross_entropy(model(x, "b"), y).backward()
    opt.step()
    assert opt.state[model.head_b.weight]["step"] == 1
    assert opt.state[model.trunk.weight]["step"] == 7
    assert _contained(L1Ball(2.0), model.head_b.weight, True)


def test_unconstrained_group_is_dampened_momentum_sgd():
    torch.manual_seed(0)
    a = nn.Parameter(torch.randn(4, 3, dtype=DTYPE))
    b = nn.Parameter(a.detach().clone())
    fw = StochasticFrankWolfe([{"params": [a], "lmo": None}], lr=0.1, momentum=0.7,
                              weight_decay=0.01)
    sgd = torch.optim.SGD([b], lr=0.1, momentum=0.7, dampening=0.7, weight_decay=0.01)
    for _ in range(5):
        g = torch.randn(4, 3, dtype=DTYPE)
        a.grad, b.grad = g.clone(), g.clone()
        fw.step()
        sgd.step()
    torch.testing.assert_close(a, b, rtol=1e-14, atol=1e-14)
    assert fw.fw_gaps() == {}


def test_all_unconstrained_with_explicit_none():
    p = nn.Parameter(torch.ones(3, dtype=DTYPE))
    opt = StochasticFrankWolfe([p], lmo=None, lr=1.0, momentum=0.0)
    p.grad = torch.ones(3, dtype=DTYPE)
    opt.step()
    assert torch.equal(p.detach(), torch.zeros(3, dtype=DTYPE))
    assert torch.isnan(opt.fw_gap())  # no constrained parameter: no gap (was None)


# --------------------------------------------------------------------------------------------
# LR schedulers
# --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("rescale", [None, "diameter"])
def test_lr_scheduler_changes_the_step(rescale):
    lmo = L1Ball(1.0)
    p = nn.Parameter(torch.zeros(4, dtype=DTYPE))
    opt = StochasticFrankWolfe([p], lmo=lmo, lr=0.4, momentum=0.0, rescale=rescale)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.25)
    scale = 1.0 if rescale is None else 1.0 / lmo.diameter(4)
    grads = [torch.tensor([1.0, 0, 0, 0], dtype=DTYPE), torch.tensor([0, -1.0, 0, 0],
                                                                     dtype=DTYPE)]
    expected_gammas = [0.4 * scale, 0.1 * scale]
    for g, gamma in zip(grads, expected_gammas, strict=True):
        before = p.detach().clone()
        vertex = lmo.lmo(g)
        p.grad = g
        opt.step()
        sched.step()
        torch.testing.assert_close(p.detach(), before + gamma * (vertex - before))
    assert opt.param_groups[0]["lr"] == pytest.approx(0.4 * 0.25 ** 2)


def test_scheduler_driving_lr_negative_is_caught_at_step():
    p = nn.Parameter(torch.zeros(3, dtype=DTYPE))
    opt = StochasticFrankWolfe([p], lmo=L2Ball(1.0))
    opt.param_groups[0]["lr"] = -0.1
    p.grad = torch.ones(3, dtype=DTYPE)
    with pytest.raises(ValueError, match="lr must be"):
        opt.step()


# --------------------------------------------------------------------------------------------
# state_dict round trip
# --------------------------------------------------------------------------------------------

def _checkpoint_setup(model, lmo_l1, lmo_box):
    return StochasticFrankWolfe([
        {"params": [model[0].weight], "lmo": lmo_l1, "per_row": True, "rescale": "gradient"},
        {"params": [model[0].bias, model[2].bias], "lmo": lmo_box},
        {"params": [model[2].weight], "lmo": None, "lr": 0.05},
    ], lr=0.7, momentum=0.9)


@pytest.mark.parametrize("through_disk", [True, False])
def test_state_dict_resumes_bit_identically(through_disk):
    batches = _batches(10)
    model = _mlp()
    l1 = L1Ball(torch.tensor([1.0, 1.5, 2.0, 2.5, 3.0], dtype=DTYPE))
    opt = _checkpoint_setup(model, l1, Box(-0.2, 0.25))
    opt.make_feasible()
    _train(model, opt, batches[:4])
    if through_disk:
        buffer = io.BytesIO()
        torch.save({"model": model.state_dict(), "opt": opt.state_dict()}, buffer)
        buffer.seek(0)
        checkpoint = torch.load(buffer, weights_only=True)
    else:
        checkpoint = copy.deepcopy({"model": model.state_dict(), "opt": opt.state_dict()})
    _train(model, opt, batches[4:])

    # A fresh model and an optimizer built with other oracles and hyperparameters: loading must
    # bring back the saved ones.
    fresh = _mlp()
    nn.init.normal_(fresh[0].weight)
    fresh_opt = _checkpoint_setup(fresh, L2Ball(9.0), LinfBall(3.0))
    fresh_opt.param_groups[0]["lr"] = 123.0
    fresh.load_state_dict(checkpoint["model"])
    fresh_opt.load_state_dict(checkpoint["opt"])
    assert isinstance(fresh_opt.param_groups[0]["lmo"], L1Ball)
    assert torch.equal(fresh_opt.param_groups[0]["lmo"].radius, l1.radius)
    assert isinstance(fresh_opt.param_groups[1]["lmo"], Box)
    assert fresh_opt.param_groups[2]["lmo"] is None
    assert fresh_opt.param_groups[0]["lr"] == 0.7
    _train(fresh, fresh_opt, batches[4:])
    for a, b in zip(model.parameters(), fresh.parameters(), strict=True):
        assert torch.equal(a, b)
    for p, q in zip(model.parameters(), fresh.parameters(), strict=True):
        for key, value in opt.state[p].items():
            other = fresh_opt.state[q][key]
            assert torch.equal(value, other) if isinstance(value, torch.Tensor) else value == other


def test_state_dict_is_plain_data_and_keeps_live_groups():
    model = _mlp()
    lmo = LinfBall(torch.full((5,), 0.3, dtype=DTYPE))
    opt = StochasticFrankWolfe([{"params": [model[0].weight], "lmo": lmo, "per_row": True},
                                {"params": list(model[2].parameters()), "lmo": Simplex(2.0)},
                                {"params": [model[0].bias], "lmo": None}])
    state = opt.state_dict()
    assert state["param_groups"][0]["lmo"]["type"] == "torchfw.sets.oracles.LinfBall"
    assert state["param_groups"][1]["lmo"] == {"type": "torchfw.sets.oracles.Simplex",
                                               "params": {"radius": 2.0}}
    assert state["param_groups"][2]["lmo"] is None
    assert opt.param_groups[0]["lmo"] is lmo  # the live group still holds the object
    buffer = io.BytesIO()
    torch.save(state, buffer)
    buffer.seek(0)
    torch.load(buffer, weights_only=True)  # raises on anything but plain data


@pytest.mark.parametrize("lmo", [Simplex(3.0), L1Ball(0.5), L2Ball(torch.tensor([1.0, 2.0])),
                                 LinfBall(0.25), Box(-1.0, 2.0),
                                 Box(torch.zeros(3), torch.tensor([1.0, 2.0, 3.0]))])
def test_lmo_state_round_trip(lmo):
    rebuilt = lmo_from_state(lmo_to_state(lmo))
    assert type(rebuilt) is type(lmo)
    g = torch.randn(2, 3)
    assert torch.equal(rebuilt.lmo(g), lmo.lmo(g))
    assert repr(rebuilt) == repr(lmo)


def test_state_dict_errors():
    p = nn.Parameter(torch.zeros(3))
    opt = StochasticFrankWolfe([p], lmo=L1Ball(1.0))
    state = opt.state_dict()
    bad = copy.deepcopy(state)
    bad["param_groups"][0]["lmo"] = {"type": "evil.module.Class", "params": {}}
    with pytest.raises(ValueError, match="unknown LMO type"):
        opt.load_state_dict(bad)
    sgd_state = torch.optim.SGD([p], lr=0.1).state_dict()
    with pytest.raises(ValueError, match="no 'lmo'"):
        opt.load_state_dict(sgd_state)

    class Opaque(LMO):
        def __init__(self, scale):
            self.factor = scale

        def lmo(self, grad):
            return -self.factor * torch.sign(grad)

    with pytest.raises(TypeError, match="not stored"):
        lmo_to_state(Opaque(1.0))


def test_loaded_state_must_fit_parameters():
    model = _mlp()
    opt = StochasticFrankWolfe([model[0].weight], lmo=L1Ball(torch.ones(5)), per_row=True)
    other = StochasticFrankWolfe([model[2].weight], lmo=L1Ball(1.0), per_row=True)
    with pytest.raises(ValueError, match="does not fit|per-row radius"):
        other.load_state_dict(opt.state_dict())
    assert isinstance(other.param_groups[0]["lmo"].radius, float)  # left as it was


# --------------------------------------------------------------------------------------------
# Closure
# --------------------------------------------------------------------------------------------

def test_closure_is_evaluated_with_grad_and_loss_returned():
    batches = _batches(5)
    m1, m2 = _mlp(), _mlp()
    o1 = StochasticFrankWolfe(m1.parameters(), lmo=L2Ball(5.0), lr=0.5)
    o2 = StochasticFrankWolfe(m2.parameters(), lmo=L2Ball(5.0), lr=0.5)
    calls = []
    for batch in batches:
        def closure(batch=batch):
            calls.append(torch.is_grad_enabled())
            o1.zero_grad()
            loss = _loss(m1, batch)
            loss.backward()
            return loss
        loss = o1.step(closure)
        assert isinstance(loss, torch.Tensor)
        o2.zero_grad()
        expected = _loss(m2, batch)
        expected.backward()
        assert o2.step() is None
        assert torch.equal(loss.detach(), expected.detach())
    assert calls == [True] * 5
    for a, b in zip(m1.parameters(), m2.parameters(), strict=True):
        assert torch.equal(a, b)


# --------------------------------------------------------------------------------------------
# Bad input
# --------------------------------------------------------------------------------------------

def test_group_without_oracle_is_an_error():
    model = _mlp()
    with pytest.raises(ValueError, match="no 'lmo'"):
        StochasticFrankWolfe(model.parameters())
    with pytest.raises(ValueError, match="no 'lmo'"):
        StochasticFrankWolfe([{"params": [model[0].weight], "lmo": L1Ball(1.0)},
                              {"params": [model[0].bias]}])
    opt = StochasticFrankWolfe([{"params": [model[0].weight], "lmo": L1Ball(1.0)}])
    with pytest.raises(ValueError, match="no 'lmo'"):
        opt.add_param_group({"params": [model[0].bias]})
    assert len(opt.param_groups) == 1
    # With a default oracle, groups that omit the key inherit it (torch.optim defaults).
    opt = StochasticFrankWolfe([{"params": [model[0].bias]}], lmo=LinfBall(1.0))
    assert isinstance(opt.param_groups[0]["lmo"], LinfBall)


@pytest.mark.parametrize("kwargs, error, match", [
    ({"lr": -0.1}, ValueError, "lr must be"),
    ({"lr": float("nan")}, ValueError, "lr must be"),
    ({"lr": float("inf")}, ValueError, "lr must be finite"),
    ({"lr": True}, ValueError, "lr must be"),
    ({"momentum": 1.5}, ValueError, "momentum must be"),
    ({"momentum": -0.1}, ValueError, "momentum must be"),
    ({"weight_decay": -1.0}, ValueError, "weight_decay must be"),
    ({"rescale": "norm"}, ValueError, "rescale must be"),
    ({"per_row": 1}, TypeError, "per_row must be"),
])
def test_bad_hyperparameters(kwargs, error, match):
    p = nn.Parameter(torch.zeros(3, 2))
    with pytest.raises(error, match=match):
        StochasticFrankWolfe([p], lmo=L1Ball(1.0), **kwargs)
    with pytest.raises(error, match=match):  # the same value given in a group
        StochasticFrankWolfe([{"params": [p], **kwargs}], lmo=L1Ball(1.0))


@pytest.mark.parametrize("oracle", [lambda g: -g, "l1", L1Ball, object()])
def test_oracle_must_be_a_torchfw_lmo(oracle):
    p = nn.Parameter(torch.zeros(3))
    with pytest.raises(TypeError, match="torchfw.sets.oracles.LMO"):
        StochasticFrankWolfe([p], lmo=oracle)
    with pytest.raises(TypeError, match="torchfw.sets.oracles.LMO"):
        StochasticFrankWolfe([{"params": [p], "lmo": oracle}])


def test_per_row_needs_two_dims_and_matching_radii():
    model = _mlp()
    with pytest.raises(ValueError, match="at least 2 dimensions"):
        StochasticFrankWolfe(model.parameters(), lmo=L1Ball(1.0), per_row=True)
    with pytest.raises(ValueError, match="does not fit|per-row radius"):
        StochasticFrankWolfe([model[0].weight], lmo=L1Ball(torch.ones(4)), per_row=True)
    with pytest.raises(ValueError, match="does not fit|per-row radius"):
        StochasticFrankWolfe([model[0].weight], lmo=Box(torch.zeros(7), 1.0))
    with pytest.raises(ValueError, match="'0.weight'"):  # names appear in the message
        StochasticFrankWolfe(model.named_parameters(), lmo=L1Ball(torch.ones(4)),
                             per_row=True)


def test_sparse_gradients_rejected():
    emb = nn.Embedding(5, 3, sparse=True)
    opt = StochasticFrankWolfe(emb.parameters(), lmo=L2Ball(1.0))
    emb(torch.tensor([1, 2])).sum().backward()
    with pytest.raises(RuntimeError, match="sparse"):
        opt.step()


def test_integer_parameters_rejected():
    with pytest.raises(TypeError, match="floating point"):
        make_feasible([torch.zeros(3, dtype=torch.long)], L1Ball(1.0))


# --------------------------------------------------------------------------------------------
# make_feasible
# --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("per_row", [False, True])
@pytest.mark.parametrize("name", sorted(ORACLES))
def test_make_feasible_projects_only_infeasible(name, per_row):
    torch.manual_seed(4)
    lmo = ORACLES[name](per_row)
    w = torch.randn(5, 6, dtype=DTYPE)
    shape = (5, 6) if per_row else (1, 30)
    projected = lmo.project(w.reshape(shape)).reshape(5, 6)
    p = nn.Parameter(w.clone())
    changed = make_feasible([p], lmo, per_row=per_row)
    assert changed >= 1
    assert _contained(lmo, p, per_row)
    inside = lmo.contains(w.reshape(shape), atol=0.0).reshape(-1, 1).expand(shape)
    expected = torch.where(inside, w.reshape(shape), projected.reshape(shape)).reshape(5, 6)
    assert torch.equal(p.detach(), expected)
    # A second call finds everything inside (up to rounding of the projection) and changes
    # nothing beyond it.
    again = p.detach().clone()
    make_feasible([p], lmo, per_row=per_row, atol=1e-12)
    assert torch.equal(p.detach(), again)


def test_make_feasible_keeps_feasible_parameters_bit_identical():
    torch.manual_seed(5)
    model = _mlp()
    with torch.no_grad():
        model[0].weight.mul_(1e-3)  # well inside an L1 ball of radius 1 per row
        before = model[0].weight.detach().clone()
        model[0].weight[2] = 10.0  # one row far outside
    opt = StochasticFrankWolfe([{"params": [model[0].weight], "lmo": L1Ball(1.0),
                                 "per_row": True},
                                {"params": [model[0].bias], "lmo": None},
                                {"params": list(model[2].parameters()), "lmo": L2Ball(0.1)}])
    frozen_before = model[2].bias.detach().clone()
    model[2].bias.requires_grad_(False)
    assert opt.make_feasible() == 2  # one row, and model[2].weight
    rows = [0, 1, 3, 4]
    assert torch.equal(model[0].weight[rows], before[rows])
    torch.testing.assert_close(model[0].weight[2].abs().sum(), torch.tensor(1.0, dtype=DTYPE))
    assert torch.equal(model[2].bias, frozen_before)  # frozen: left alone by default
    opt.make_feasible(include_frozen=True)
    assert _contained(L2Ball(0.1), model[2].bias, False)


def test_make_feasible_accepts_modules_and_named_parameters():
    lin = nn.Linear(4, 3)
    with torch.no_grad():
        lin.weight.fill_(5.0)
        lin.bias.fill_(-5.0)
    assert make_feasible(lin, LinfBall(0.5)) == 2
    assert float(lin.weight.detach().abs().max()) == 0.5
    with torch.no_grad():
        lin.weight.fill_(5.0)
    assert make_feasible(lin.named_parameters(), L1Ball(1.0), per_row=False) >= 1
    with pytest.raises(TypeError):
        make_feasible(lin, None)
    with pytest.raises(TypeError):
        make_feasible(42, L1Ball(1.0))


def test_first_step_warns_when_infeasible():
    p = nn.Parameter(torch.full((4,), 3.0, dtype=DTYPE))
    opt = StochasticFrankWolfe([p], lmo=L1Ball(1.0))
    p.grad = torch.ones(4, dtype=DTYPE)
    with pytest.warns(RuntimeWarning, match="make_feasible"):
        opt.step()
    q = nn.Parameter(torch.zeros(4, dtype=DTYPE))
    opt = StochasticFrankWolfe([q], lmo=L1Ball(1.0))
    q.grad = torch.ones(4, dtype=DTYPE)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        opt.step()
        opt.step()


# --------------------------------------------------------------------------------------------
# Frank-Wolfe gaps
# --------------------------------------------------------------------------------------------

def test_fw_gaps_nonnegative_and_match_direct_computation():
    model = _mlp()
    groups = [{"params": [model[0].weight], "lmo": L1Ball(1.0), "per_row": True},
              {"params": [model[2].weight], "lmo": Simplex(1.0)},
              {"params": [model[0].bias, model[2].bias], "lmo": None}]
    opt = StochasticFrankWolfe(groups, lr=0.3, momentum=0.6, track_gap=True)
    opt.make_feasible()
    buffers = {}
    for batch in _batches(8):
        opt.zero_grad()
        _loss(model, batch).backward()
        expected = {}
        for p, per_row, lmo in ((model[0].weight, True, groups[0]["lmo"]),
                                (model[2].weight, False, groups[1]["lmo"])):
            g = p.grad
            d = g.clone() if p not in buffers else 0.4 * g + 0.6 * buffers[p]
            buffers[p] = d
            shape = (p.shape[0], -1) if per_row else (1, -1)
            v = lmo.lmo(d.reshape(shape))
            expected[p] = (d.reshape(shape) * (p.detach().reshape(shape) - v)).sum(-1)
        opt.step()
        gaps_rows = opt.fw_gaps(per_row=True)
        gaps = opt.fw_gaps()
        assert set(gaps) == {model[0].weight, model[2].weight}
        for p, want in expected.items():
            torch.testing.assert_close(gaps_rows[p].reshape(-1), want.reshape(-1), rtol=1e-12,
                                       atol=1e-14)
            torch.testing.assert_close(gaps[p], want.sum(), rtol=1e-12, atol=1e-14)
            assert bool((gaps_rows[p] >= -1e-12).all())
        assert gaps_rows[model[0].weight].shape == (5,)
        assert gaps[model[0].weight].dim() == 0
        total = sum(float(g) for g in gaps.values())
        assert float(opt.fw_gap()) == pytest.approx(total, rel=1e-12)


def test_fw_gaps_by_name():
    model = _mlp()
    opt = StochasticFrankWolfe(model.named_parameters(), lmo=LinfBall(1.0), track_gap=True)
    with pytest.raises(ValueError):
        StochasticFrankWolfe(model.parameters(), lmo=LinfBall(1.0),
                             track_gap=True).fw_gaps(named=True)
    _train(model, opt, _batches(2))
    gaps = opt.fw_gaps(named=True)
    assert set(gaps) == {"0.weight", "0.bias", "2.weight", "2.bias"}
    assert all(float(g) >= 0 for g in gaps.values())


def test_docstring_examples():
    result = doctest.testmod(torchfw.optim.sfw, optionflags=doctest.ELLIPSIS)
    assert result.failed == 0 and result.attempted > 0


# --------------------------------------------------------------------------------------------
# CUDA
# --------------------------------------------------------------------------------------------

@pytest.mark.cuda
@requires_cuda
def test_cuda_matches_cpu_and_round_trips():
    batches_cpu = _batches(8, dtype=DTYPE)
    batches_gpu = [(x.cuda(), y.cuda()) for x, y in batches_cpu]
    runs = {}
    for device, batches in (("cpu", batches_cpu), ("cuda", batches_gpu)):
        model = _mlp(device=device)
        radius = torch.linspace(0.5, 1.5, 5, dtype=DTYPE, device=device)
        opt = StochasticFrankWolfe([
            {"params": [model[0].weight], "lmo": L1Ball(radius), "per_row": True},
            {"params": [model[2].weight], "lmo": L2Ball(2.0), "rescale": "gradient"},
            {"params": [model[0].bias], "lmo": Box(-0.1, 0.1)},
            {"params": [model[2].bias], "lmo": None},
        ], lr=0.5, track_gap=True)
        opt.make_feasible()

        def check(model=model, radius=radius):
            assert _contained(L1Ball(radius), model[0].weight, True)
            assert _contained(L2Ball(2.0), model[2].weight, False)

        _train(model, opt, batches[:4], after_step=check)
        buffer = io.BytesIO()
        torch.save(opt.state_dict(), buffer)
        _train(model, opt, batches[4:], after_step=check)
        assert model[0].weight.device.type == device
        assert all(g.device.type == device for g in opt.fw_gaps().values())
        runs[device] = (model, buffer)
    for a, b in zip(runs["cpu"][0].parameters(), runs["cuda"][0].parameters(), strict=True):
        torch.testing.assert_close(a, b.cpu(), rtol=1e-9, atol=1e-9)
    # A CUDA checkpoint loads into a CPU optimizer: buffers and oracle tensors move to the CPU.
    buffer = runs["cuda"][1]
    buffer.seek(0)
    state = torch.load(buffer, weights_only=True)
    model = _mlp()
    opt = StochasticFrankWolfe([
        {"params": [model[0].weight], "lmo": L1Ball(1.0), "per_row": True},
        {"params": [model[2].weight], "lmo": L2Ball(1.0)},
        {"params": [model[0].bias], "lmo": Box(-1.0, 1.0)},
        {"params": [model[2].bias], "lmo": None},
    ])
    opt.load_state_dict(state)
    assert opt.param_groups[0]["lmo"].radius.device.type == "cpu"
    assert opt.state[model[0].weight]["momentum_buffer"].device.type == "cpu"


@pytest.mark.cuda
@requires_cuda
@pytest.mark.filterwarnings("ignore:Synchronization debug mode")
@pytest.mark.parametrize("track", [True, False], ids=["gaps", "no-gaps"])
def test_cuda_step_does_not_synchronize(track):
    torch.manual_seed(0)
    device = "cuda"
    params = [nn.Parameter(torch.randn(5, 6, device=device) * 0.01) for _ in range(8)]
    opt = StochasticFrankWolfe([
        {"params": [params[0]], "lmo": L1Ball(torch.linspace(0.5, 1, 5, device=device)),
         "per_row": True},
        {"params": [params[1]], "lmo": L2Ball(2.0), "rescale": "gradient"},
        {"params": [params[2]], "lmo": Box(-0.1, 0.1)},
        {"params": [params[3]], "lmo": LinfBall(0.2), "rescale": None},
        {"params": [params[4]], "lmo": Simplex(1.0), "per_row": True},
        {"params": [params[6]], "lmo": L2Ball(1.5)},  # the multi-tensor L2 and
        {"params": [params[7]], "lmo": KSparsePolytope(3, 0.2)},  # K-sparse steps
        {"params": [params[5]], "lmo": None},
    ], lr=0.5, weight_decay=1e-3, track_gap=track)
    opt.make_feasible()
    grads = [[torch.randn(5, 6, device=device) for _ in params] for _ in range(4)]
    for p, g in zip(params, grads[0], strict=True):
        p.grad = g
    opt.step()  # the first step checks feasibility once (one sync per parameter)
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        for step_grads in grads[1:]:
            for p, g in zip(params, step_grads, strict=True):
                p.grad = g
            opt.step()
        gaps = opt.fw_gaps() if track else {}
    finally:
        torch.cuda.set_sync_debug_mode(0)
    if track:
        assert len(gaps) == 7
        assert all(float(g) >= -1e-5 for g in gaps.values())
