"""The generic torch.optim checks, run on StochasticFrankWolfe as PyTorch runs them on its own.

``torch.testing._internal.common_optimizers`` describes an optimizer by an ``OptimizerInfo``:
constructor inputs (plus the ``foreach``/``fused``/``differentiable`` variants it supports),
inputs that must fail, and schedulers to run with. PyTorch's test suite (``test/test_optim.py``,
not shipped in the wheel) runs one set of contract checks over every entry of ``optim_db``.
This file gives StochasticFrankWolfe its ``OptimizerInfo`` and runs the checks of that contract
that apply to an optimizer with a constraint set per group: errors, direction of the steps with
and without schedulers, per-group lr, no-ops, state-dict determinism and backward
compatibility, ``weights_only`` loading, deepcopy, hooks, ``foreach`` equivalence,
non-contiguous parameters, gradients left untouched. Not applicable: ``fused``,
``differentiable`` and ``capturable`` (not offered), sparse gradients and complex parameters
(refused, checked below).

The module needs ``expecttest`` (a dependency of torch's testing helpers, in the ``test``
extra). Importing the helpers freezes ``torch.backends`` flags for the process; the flag is
restored so that the rest of the suite is unaffected.
"""

from __future__ import annotations

import copy
import io

import pytest
import torch
from torch import nn

from torchfw.optim import StochasticFrankWolfe
from torchfw.sets.oracles import L1Ball, L2Ball, LinfBall

pytest.importorskip("expecttest")


def _import_helpers():
    flag = "__allow_nonbracketed_mutation_flag"
    before = getattr(torch.backends, flag, True)
    try:
        from torch.testing._internal import common_optimizers
    finally:
        setattr(torch.backends, flag, before)
    return common_optimizers


co = _import_helpers()
OptimizerInput = co.OptimizerInput
ErrorOptimizerInput = co.ErrorOptimizerInput

BOX = 3.0  # radius of the default set: contains the start and the minimizer of the test loss


def sfw_inputs(device, dtype=None):
    """Constructor inputs (the global-friendly flags: lr, weight_decay, maximize)."""
    return [
        OptimizerInput(params=None, kwargs={}, desc="default"),
        OptimizerInput(params=None, kwargs={"lr": 0.05}, desc="non-default lr"),
        OptimizerInput(params=None, kwargs={"lr": torch.tensor(0.05)}, desc="tensor lr"),
        OptimizerInput(params=None, kwargs={"weight_decay": 0.1}, desc="weight_decay"),
        OptimizerInput(params=None, kwargs={"momentum": 0.0}, desc="no momentum"),
        OptimizerInput(params=None, kwargs={"weight_decay": 0.1, "maximize": True},
                       desc="maximize"),
        OptimizerInput(params=None, kwargs={"rescale": "gradient", "lr": 0.01},
                       desc="gradient rescaling"),
        OptimizerInput(params=None, kwargs={"rescale": None, "lr": 0.05}, desc="no rescaling"),
        OptimizerInput(params=None, kwargs={"lmo": L2Ball(3 * BOX)}, desc="L2 ball"),
        OptimizerInput(params=None, kwargs={"lmo": L1Ball(20 * BOX)}, desc="L1 ball"),
        OptimizerInput(params=None, kwargs={"lmo": None, "lr": 1e-2}, desc="unconstrained"),
    ]


def sfw_error_inputs(device, dtype):
    errors = []
    for error in co.get_error_inputs_for_all_optims(device, dtype):
        # The generic inputs give no constraint set, which StochasticFrankWolfe requires.
        given = error.optimizer_error_input
        errors.append(ErrorOptimizerInput(
            OptimizerInput(params=given.params, kwargs={"lmo": LinfBall(1.0), **given.kwargs},
                           desc=given.desc),
            error_on=error.error_on, error_type=error.error_type, error_regex=error.error_regex))
    param = nn.Parameter(torch.randn(2, 2, device=device, dtype=dtype))
    for kwargs, error_type, regex, desc in [
        ({"lmo": LinfBall(1.0), "momentum": -0.5}, ValueError, "momentum must be",
         "momentum should be between 0 and 1"),
        ({"lmo": LinfBall(1.0), "lr": -1e-2}, ValueError, "lr must be", "negative lr"),
        ({"lmo": lambda g: -g}, TypeError, "lmo must be a torchfw.sets.oracles.LMO", "callable lmo"),
        ({}, ValueError, "no 'lmo'", "no constraint set"),
        ({"lmo": LinfBall(1.0), "foreach": "yes"}, TypeError, "foreach must be", "foreach"),
    ]:
        errors.append(ErrorOptimizerInput(OptimizerInput(params=[param], kwargs=kwargs,
                                                         desc=desc),
                                          error_type=error_type, error_regex=regex))
    return errors


SFW_INFO = co.OptimizerInfo(
    StochasticFrankWolfe,
    optim_inputs_func=sfw_inputs,
    optim_error_inputs_func=sfw_error_inputs,
    supported_impls=("foreach",),
    not_og_supported_flags=("foreach", "maximize"),
    supports_complex=False,
)
DEVICE = "cpu"
INPUTS = co._get_optim_inputs_including_global_cliquey_kwargs(DEVICE, torch.float32, SFW_INFO)


def _kwargs(optim_input):
    return {"lmo": LinfBall(BOX), "lr": 0.1, **optim_input.kwargs}


def _problem(dtype=torch.float64, contiguous=True):
    torch.manual_seed(7)
    if contiguous:
        weight = torch.randn(10, 5, dtype=dtype)
        bias = torch.randn(10, dtype=dtype)
    else:
        weight = torch.randn(10, 5, 2, dtype=dtype)[..., 0]
        bias = torch.randn(10, 2, dtype=dtype)[..., 0]
    weight = nn.Parameter(weight.clamp(-1, 1))
    bias = nn.Parameter(bias.clamp(-1, 1))
    x = torch.randn(5, dtype=dtype)
    return weight, bias, x


def _loss(weight, bias, x):
    return (weight.mv(x) + bias).pow(2).sum()


def _assert_same(a, b, where="state_dict"):
    """Nested equality of state dicts: tensors bit for bit, everything else with ==."""
    assert type(a) is type(b), where
    if isinstance(a, torch.Tensor):
        assert a.dtype == b.dtype and torch.equal(a, b), where
    elif isinstance(a, dict):
        assert a.keys() == b.keys(), where
        for key in a:
            _assert_same(a[key], b[key], f"{where}[{key!r}]")
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            _assert_same(x, y, f"{where}[{i}]")
    else:
        assert a == b, where


@pytest.mark.parametrize("error", sfw_error_inputs(DEVICE, torch.float32),
                         ids=lambda e: e.optimizer_error_input.desc)
def test_errors(error):
    given = error.optimizer_error_input
    params = given.params
    if issubclass(error.error_type, Warning):
        with pytest.warns(error.error_type, match=error.error_regex):
            StochasticFrankWolfe(params, **given.kwargs)
    else:
        with pytest.raises(error.error_type, match=error.error_regex):
            StochasticFrankWolfe(params, **given.kwargs)


@pytest.mark.parametrize("schedulers", [(), *SFW_INFO.scheduler_inputs],
                         ids=["no scheduler", "StepLR+ReduceLROnPlateau"])
@pytest.mark.parametrize("optim_input", INPUTS, ids=lambda o: o.desc)
@pytest.mark.parametrize("contiguous", [True, False], ids=["contiguous", "non-contiguous"])
def test_goes_right_direction(optim_input, schedulers, contiguous):
    weight, bias, x = _problem(contiguous=contiguous)
    kwargs = _kwargs(optim_input)
    opt = StochasticFrankWolfe([weight, bias], **kwargs)
    scheds = [make(opt) for make in schedulers]
    repr(opt)  # printable

    def closure():
        opt.zero_grad()
        loss = _loss(weight, bias, x)
        loss.backward()
        return loss

    initial = closure().item()
    for _ in range(20):
        loss = opt.step(closure)
        for sched in scheds:
            if isinstance(sched, torch.optim.lr_scheduler.ReduceLROnPlateau):
                sched.step(loss.item())
            else:
                sched.step()
    final = _loss(weight, bias, x).item()
    if kwargs.get("maximize", False):
        assert final > initial
    else:
        assert final < initial


def test_param_groups_lr_and_weight_decay():
    weight, bias, x = _problem()
    opt = StochasticFrankWolfe([{"params": [weight]},
                                {"params": [bias], "lr": 0.01, "weight_decay": 0.1}],
                               lmo=LinfBall(BOX), lr=0.1)
    assert opt.param_groups[1]["lr"] == 0.01 and opt.param_groups[0]["weight_decay"] == 0.0
    initial = _loss(weight, bias, x).item()
    for _ in range(20):
        opt.zero_grad()
        _loss(weight, bias, x).backward()
        opt.step()
    assert _loss(weight, bias, x).item() < initial


@pytest.mark.parametrize("optim_input", INPUTS, ids=lambda o: o.desc)
def test_step_is_noop_without_grads_and_with_zero_grads(optim_input):
    weight, bias, _ = _problem()
    opt = StochasticFrankWolfe([weight, bias], **_kwargs(optim_input))
    before = [weight.detach().clone(), bias.detach().clone()]
    opt.step()  # no gradients at all
    weight.grad = torch.zeros_like(weight)
    bias.grad = torch.zeros_like(bias)
    opt.step()  # zero gradients (with weight decay the direction is not zero: skip those)
    if optim_input.kwargs.get("weight_decay", 0) == 0:
        assert torch.equal(weight, before[0]) and torch.equal(bias, before[1])


def _primed(optim_input, steps=5):
    weight, bias, x = _problem()
    opt = StochasticFrankWolfe([weight, bias], **_kwargs(optim_input))

    def closure():
        opt.zero_grad()
        loss = _loss(weight, bias, x)
        loss.backward()
        return loss

    for _ in range(steps):
        opt.step(closure)
    return weight, bias, x, opt


@pytest.mark.parametrize("optim_input", INPUTS, ids=lambda o: o.desc)
def test_state_dict_deterministic(optim_input):
    weight, bias, x, opt = _primed(optim_input)
    weight_c = nn.Parameter(weight.detach().clone())
    bias_c = nn.Parameter(bias.detach().clone())
    opt_c = StochasticFrankWolfe([weight_c, bias_c], **_kwargs(optim_input))
    saved = copy.deepcopy(opt.state_dict())
    given = copy.deepcopy(opt.state_dict())
    opt_c.load_state_dict(given)
    for _ in range(5):
        for w, b, o in ((weight, bias, opt), (weight_c, bias_c, opt_c)):
            o.zero_grad()
            _loss(w, b, x).backward()
            o.step()
        assert torch.equal(weight, weight_c) and torch.equal(bias, bias_c)
    _assert_same(given, saved)  # loading did not modify the given dict
    _assert_same(opt.state_dict(), opt_c.state_dict())


@pytest.mark.parametrize("optim_input", INPUTS, ids=lambda o: o.desc)
def test_can_load_older_state_dict(optim_input):
    # A state dict from before the flags added after the first release still loads and steps.
    _, _, _, opt = _primed(optim_input)
    state = copy.deepcopy(opt.state_dict())
    for group in state["param_groups"]:
        for flag in SFW_INFO.not_og_supported_flags:
            group.pop(flag, None)
    opt.load_state_dict(state)
    assert opt.param_groups[0]["foreach"] is None
    assert opt.param_groups[0]["maximize"] is False
    opt.step()


def test_load_nontensor_step():
    _, _, _, opt = _primed(INPUTS[0])
    state = copy.deepcopy(opt.state_dict())
    for entry in state["state"].values():
        entry["step"] = entry["step"].item()
    opt.load_state_dict(state)
    opt.step()
    assert all(isinstance(entry["step"], torch.Tensor) for entry in opt.state.values())


@pytest.mark.parametrize("optim_input", INPUTS, ids=lambda o: o.desc)
def test_save_load_equality_with_weights_only(optim_input):
    _, _, _, opt = _primed(optim_input)
    buffer = io.BytesIO()
    torch.save(opt.state_dict(), buffer)
    buffer.seek(0)
    loaded = torch.load(buffer, weights_only=True)
    _assert_same(loaded, opt.state_dict())


def test_deepcopy_copies_all_public_attrs():
    _, _, _, opt = _primed(INPUTS[0])

    def public(obj):
        return {k for k in obj.__dict__ if not k.startswith("_")}

    assert public(opt) == public(copy.deepcopy(opt))


def test_hooks_are_called():
    weight, bias, x, opt = _primed(INPUTS[0], steps=1)
    calls = []
    opt.register_step_pre_hook(lambda o, args, kwargs: calls.append("pre"))
    opt.register_step_post_hook(lambda o, args, kwargs: calls.append("post"))
    opt.register_state_dict_pre_hook(lambda o: calls.append("sd pre"))
    opt.register_state_dict_post_hook(lambda o, sd: calls.append("sd post"))
    opt.register_load_state_dict_pre_hook(lambda o, sd: calls.append("load pre"))
    opt.register_load_state_dict_post_hook(lambda o: calls.append("load post"))
    opt.step()
    opt.load_state_dict(opt.state_dict())
    assert calls == ["pre", "post", "sd pre", "sd post", "load pre", "load post"]


@pytest.mark.parametrize("optim_input", sfw_inputs(DEVICE), ids=lambda o: o.desc)
def test_foreach_matches_forloop(optim_input):
    tracked = co.TensorTracker()
    results = []
    for foreach in (False, True):
        kwargs = {**optim_input.kwargs, "foreach": foreach}
        weight, bias, x, opt = _primed(OptimizerInput(None, kwargs, optim_input.desc), steps=6)
        results.append([weight.detach().clone(), bias.detach().clone()])
        for entry in opt.state.values():
            for value in entry.values():
                if foreach:
                    assert torch.equal(tracked.tensors.pop(0), value)
                else:
                    tracked.add(value)
    assert tracked.all_popped()
    for a, b in zip(*results, strict=True):
        assert torch.equal(a, b)


def test_grads_are_never_inplaced_into():
    weight, bias, x = _problem()
    opt = StochasticFrankWolfe([weight, bias], lmo=LinfBall(BOX), weight_decay=0.1, momentum=0.0)
    _loss(weight, bias, x).backward()
    grads = [weight.grad.clone(), bias.grad.clone()]
    opt.step()
    opt.step()
    assert torch.equal(weight.grad, grads[0]) and torch.equal(bias.grad, grads[1])


def test_zero_grad_sets_none():
    weight, bias, _, opt = _primed(INPUTS[0], steps=1)
    opt.zero_grad()
    assert weight.grad is None and bias.grad is None


def test_complex_and_sparse_are_refused_clearly():
    assert not SFW_INFO.supports_complex and not SFW_INFO.supports_sparse
    z = nn.Parameter(torch.randn(3, dtype=torch.complex64))
    with pytest.raises(TypeError, match="floating point"):
        StochasticFrankWolfe([z], lmo=LinfBall(1.0))
    p = nn.Parameter(torch.zeros(3))
    opt = StochasticFrankWolfe([p], lmo=LinfBall(1.0))
    p.grad = torch.zeros(3).to_sparse()
    with pytest.raises(RuntimeError, match="sparse gradients"):
        opt.step()
