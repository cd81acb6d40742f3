"""A parameter group with one set per parameter (``"lmo": [set, ...]``), and compiled steps
that create their state in ``StochasticFrankWolfe._init_group``.

A group holding a list of sets must take exactly the steps of one group per parameter with
the same sets (eager and compiled), save and load its sets, and refuse a list that does not
match its parameters. A compiled step creates the momentum buffer d_0 = g_0 (with the sign
of ``maximize`` and the weight decay) before the traced update; its weights and buffers must
be the eager step's.
"""

from __future__ import annotations

import io

import pytest
import torch
from torch import nn

from torchfw.optim import StochasticFrankWolfe, constraints_for
from torchfw.sets.oracles import L1Ball, L2Ball, LinfBall
from torchfw.sets.polytopes import KSparsePolytope


def _model():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(6, 5), nn.Tanh(), nn.LayerNorm(5), nn.Linear(5, 3))


def _sets():
    # one set per parameter of _model(): fast kinds, a generic one (L1) and an unconstrained
    # LayerNorm
    return [LinfBall(0.2), L2Ball(1.5), None, None, KSparsePolytope(3, 2.0), L1Ball(1.0)]


def _train(opt, model, steps, run=None):
    gen = torch.Generator().manual_seed(1)
    run = run or opt.step
    for _ in range(steps):
        x, y = torch.randn(8, 6, generator=gen), torch.randint(0, 3, (8,), generator=gen)
        opt.zero_grad()
        nn.functional.cross_entropy(model(x), y).backward()
        run()
    return [p.detach().clone() for p in model.parameters()]


def _per_parameter(model, **kw):
    return StochasticFrankWolfe([{"params": [p], "lmo": s}
                                 for p, s in zip(model.parameters(), _sets(), strict=True)],
                                lr=0.3, momentum=0.8, **kw)


def _one_group(model, **kw):
    return StochasticFrankWolfe([{"params": list(model.parameters()), "lmo": _sets()}],
                                lr=0.3, momentum=0.8, **kw)


@pytest.mark.parametrize("track", [False, True], ids=["no-gaps", "gaps"])
def test_list_of_sets_takes_the_steps_of_one_group_per_parameter(track):
    results, projected = [], []
    for build in (_per_parameter, _one_group):
        model = _model()
        opt = build(model, track_gap=track)
        projected.append(opt.make_feasible())
        results.append((_train(opt, model, 4), opt.fw_gaps() if track else {}))
    assert projected[0] == projected[1] > 0
    (a, gaps_a), (b, gaps_b) = results
    for x, y in zip(a, b, strict=True):
        assert torch.equal(x, y)
    assert [float(g) for g in gaps_a.values()] == [float(g) for g in gaps_b.values()]
    if track:
        assert len(gaps_b) == 4  # the constrained parameters; the LayerNorm ones have none
    # the sets hold: the first weight in its L-infinity ball, the last bias in its L1 ball
    assert float(b[0].abs().max()) <= 0.2 + 1e-6
    assert float(b[5].abs().sum()) <= 1.0 + 1e-5


def test_list_of_sets_compiled_step_is_the_eager_step():
    torch._dynamo.reset()
    results = []
    for compiled in (False, True):
        model = _model()
        opt = _one_group(model)
        opt.make_feasible()

        def step(opt=opt):
            opt.step()

        results.append(_train(opt, model, 3,
                              torch.compile(step, backend="eager") if compiled else step))
    for x, y in zip(*results, strict=True):
        # the traced L2 step rounds apart from the multi-tensor one (tests/test_optim_batched)
        torch.testing.assert_close(x, y, rtol=1e-5, atol=1e-6)


def test_list_of_sets_round_trips_through_a_state_dict():
    model = _model()
    opt = _one_group(model)
    opt.make_feasible()
    _train(opt, model, 2)
    buffer = io.BytesIO()
    torch.save(opt.state_dict(), buffer)
    saved = torch.load(io.BytesIO(buffer.getvalue()), weights_only=True)
    assert isinstance(saved["param_groups"][0]["lmo"], list)

    other = _model()
    other.load_state_dict(model.state_dict())
    again = StochasticFrankWolfe([{"params": list(other.parameters()),
                                   "lmo": [LinfBall(9.0)] * 6}], lr=0.3, momentum=0.8)
    again.load_state_dict(saved)
    sets = again.param_groups[0]["lmo"]
    assert [type(s).__name__ if s is not None else None for s in sets] == \
        ["LinfBall", "L2Ball", None, None, "KSparsePolytope", "L1Ball"]
    assert sets[0].radius == 0.2 and sets[4].k == 3
    for x, y in zip(_train(opt, model, 2), _train(again, other, 2), strict=True):
        assert torch.equal(x, y)


def test_list_of_sets_must_match_the_parameters():
    model = _model()
    with pytest.raises(ValueError, match="one set per parameter"):
        StochasticFrankWolfe([{"params": list(model.parameters()), "lmo": _sets()[:5]}])
    with pytest.raises(TypeError, match="lmo must be"):
        StochasticFrankWolfe([{"params": list(model.parameters()),
                               "lmo": _sets()[:5] + ["l1"]}])
    weights = [model[0].weight, model[3].weight]  # 5 and 3 rows
    StochasticFrankWolfe([{"params": weights, "lmo": [L1Ball(torch.ones(5)), L1Ball(1.0)],
                           "per_row": True}])
    with pytest.raises(ValueError, match="L1Ball"):
        # each set is checked against its own parameter: 5 radii do not fit 3 rows
        StochasticFrankWolfe([{"params": weights,
                               "lmo": [L1Ball(torch.ones(5)), L1Ball(torch.ones(5))],
                               "per_row": True}])
    with pytest.raises(TypeError, match="belongs in a parameter group"):
        StochasticFrankWolfe(model.parameters(), lmo=_sets())


def test_constraints_for_one_group_holds_the_same_sets():
    model = _model()
    per_parameter = constraints_for(model, "l2", value=2.0, samples=20,
                                    unconstrained=(nn.LayerNorm,))
    one = constraints_for(model, "l2", value=2.0, samples=20, unconstrained=(nn.LayerNorm,),
                          one_group=True)
    assert len(one) == 1
    assert [name for name, _ in one[0]["params"]] == \
        [g["params"][0][0] for g in per_parameter]
    assert [None if s is None else s.radius for s in one[0]["lmo"]] == \
        [None if g["lmo"] is None else g["lmo"].radius for g in per_parameter]
    opt = StochasticFrankWolfe(one, lr=0.1)
    assert len(opt.param_groups) == 1 and opt.param_groups[0]["param_names"][0] == "0.weight"
    with pytest.raises(TypeError, match="one_group"):
        constraints_for(model, "l2", one_group=1)


@pytest.mark.parametrize("maximize", [False, True])
def test_compiled_first_step_starts_the_buffer_at_the_first_direction(maximize):
    """The compiled step creates d_0 = g_0 = -+grad + lambda theta before the traced update
    (StochasticFrankWolfe._init_group): its buffers, counters and weights are the eager
    step's, from the first step on."""
    torch._dynamo.reset()
    runs = []
    for compiled in (False, True):
        model = _model()
        opt = _one_group(model, maximize=maximize, weight_decay=0.05)
        opt.make_feasible()

        def step(opt=opt):
            opt.step()

        run = torch.compile(step, backend="eager") if compiled else step
        weights = _train(opt, model, 1, run)
        buffers = [opt.state[p]["momentum_buffer"].clone() for p in model.parameters()]
        steps = [float(opt.state[p]["step"]) for p in model.parameters()]
        weights += _train(opt, model, 2, run)
        runs.append((weights, buffers, steps))
    (wa, ba, sa), (wb, bb, sb) = runs
    assert sa == sb == [1.0] * 6
    for x, y in zip(ba, bb, strict=True):
        assert torch.equal(x, y)
    for x, y in zip(wa, wb, strict=True):
        torch.testing.assert_close(x, y, rtol=1e-5, atol=1e-6)


def _graphs_of(opt, model, steps, skip_after=None):
    """Compiled graphs traced over ``steps`` steps (eager backend); the second Linear has no
    gradient after ``skip_after`` steps."""
    from torch._dynamo.utils import counters

    torch._dynamo.reset()
    counters.clear()
    run = torch.compile(opt.step, backend="eager")
    gen = torch.Generator().manual_seed(2)
    for k in range(steps):
        opt.zero_grad()
        x = torch.randn(4, 6, generator=gen)
        out = model[0](x).sum()
        if skip_after is None or k < skip_after:
            out = out + model[3](torch.randn(4, 5, generator=gen)).sum()
        out.backward()
        run()
    return counters["stats"]["unique_graphs"]


def test_compiled_steps_keep_their_state_tensors():
    """The state tensors are static addresses of a compiled step (checked by identity): gaps
    of the per-tensor update are written in place, and a counter splits only when a skipped
    parameter shares it, so the steps after the first ones trace no new graph."""
    model = _model()
    opt = _one_group(model, track_gap=True)  # the L1 ball takes the per-tensor update
    opt.make_feasible()
    # the first step, then the steady step with the gaps it created (a new gap tensor at
    # every step would trace one graph per step)
    assert _graphs_of(opt, model, 6) == 2
    assert float(opt.fw_gap()) >= 0

    model = _model()
    opt = _one_group(model)
    opt.make_feasible()
    # all parameters step, then the second Linear stops: its counters split once
    assert _graphs_of(opt, model, 8, skip_after=2) == 3
    counts = [float(opt.state[p]["step"]) for p in model.parameters() if p in opt.state]
    assert counts == [8.0, 8.0, 2.0, 2.0]


def test_compiled_step_refuses_a_wrong_hyperparameter_as_the_eager_step_does():
    """The compiled step checks the hyperparameters in _init_group, and when one is wrong
    the step raises the eager step's error (not the compiler's), without stepping."""
    torch._dynamo.reset()
    p = nn.Parameter(torch.zeros(3))
    opt = StochasticFrankWolfe([p], lmo=LinfBall(1.0), lr=0.1)
    run = torch.compile(opt.step, backend="eager")
    p.grad = torch.ones(3)
    run()
    run()
    before = p.detach().clone()
    opt.param_groups[0]["lr"] = -1.0
    with pytest.raises(ValueError, match="lr must be a number >= 0.0"):
        run()
    assert torch.equal(p.detach(), before) and float(opt.state[p]["step"]) == 2.0
