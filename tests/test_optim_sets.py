"""StochasticFrankWolfe with the polytope and spectral sets (torchfw.sets.polytopes, torchfw.sets.spectral).

Every new set works as a parameter group: steps keep the weights feasible, the diameter
rescaling uses each row's own radius, the oracle survives ``state_dict`` with
``weights_only=True``, and training resumes bit for bit from a checkpoint.
"""

from __future__ import annotations

import io

import pytest
import torch
from torch import nn

from torchfw.optim import StochasticFrankWolfe
from torchfw.sets.polytopes import Birkhoff, GroupL1Ball, Hypercube, KSparsePolytope, LpBall
from torchfw.sets.spectral import NuclearNormBall, Spectraplex

DTYPE = torch.float64

# Sets for a (4, 6) weight: per tensor (a flattened 4 x 6 matrix, or 24 entries), or per row
# (rows of 6 entries) with one radius per row.
RADII = torch.tensor([0.5, 1.0, 1.5, 2.0], dtype=DTYPE)
SETS = {
    "ksparse": (lambda: KSparsePolytope(3, 0.4), lambda: KSparsePolytope(2, RADII)),
    "lp": (lambda: LpBall(1.5, 2.0), lambda: LpBall(3.0, RADII)),
    "group_l1": (lambda: GroupL1Ball(6, 2.0), lambda: GroupL1Ball([0, 0, 1, 1, 2, 2], RADII)),
    "hypercube": (lambda: Hypercube(), lambda: Hypercube()),
    "nuclear": (lambda: NuclearNormBall((4, 6), 3.0), lambda: NuclearNormBall((2, 3), RADII)),
}


def _model():
    torch.manual_seed(3)
    return nn.Sequential(nn.Linear(6, 4), nn.Tanh(), nn.Linear(4, 2)).to(DTYPE)


def _batches(n):
    gen = torch.Generator().manual_seed(4)
    return [(torch.randn(8, 6, generator=gen, dtype=DTYPE),
             torch.randint(0, 2, (8,), generator=gen)) for _ in range(n)]


def _train(model, opt, batches):
    for x, y in batches:
        opt.zero_grad()
        nn.functional.cross_entropy(model(x), y).backward()
        opt.step()


def _opt(model, lmo, per_row, **kwargs):
    return StochasticFrankWolfe([{"params": [model[0].weight], "lmo": lmo, "per_row": per_row},
                                 {"params": [model[2].weight, model[0].bias, model[2].bias],
                                  "lmo": None, "lr": 0.05}], lr=0.3, momentum=0.9,
                                track_gap=True, **kwargs)


@pytest.mark.parametrize("per_row", [False, True], ids=["per-tensor", "per-row"])
@pytest.mark.parametrize("name", list(SETS))
def test_new_sets_train_feasibly_and_resume(name, per_row):
    model = _model()
    lmo = SETS[name][per_row]()
    opt = _opt(model, lmo, per_row)
    opt.make_feasible()
    batches = _batches(8)
    shape = (4, -1) if per_row else (1, -1)

    def feasible():
        return bool(lmo.contains(model[0].weight.detach().reshape(shape), atol=1e-9).all())

    assert feasible()
    _train(model, opt, batches[:4])
    assert feasible()
    buffer = io.BytesIO()
    torch.save({"model": model.state_dict(), "opt": opt.state_dict()}, buffer)
    _train(model, opt, batches[4:])
    assert feasible()
    assert float(opt.fw_gap()) >= -1e-9

    buffer.seek(0)
    checkpoint = torch.load(buffer, weights_only=True)
    twin = _model()
    twin.load_state_dict(checkpoint["model"])
    twin_opt = _opt(twin, SETS["lp"][per_row](), per_row)  # another set: loading restores it
    twin_opt.load_state_dict(checkpoint["opt"])
    assert type(twin_opt.param_groups[0]["lmo"]) is type(lmo)
    _train(twin, twin_opt, batches[4:])
    # Bit for bit, the nuclear-norm ball included: its Lanczos warm-start vector is saved with
    # the oracle (without it the next vertex would agree only to the LMO's tolerance).
    for a, b in zip(model.parameters(), twin.parameters(), strict=True):
        assert torch.equal(a, b)
    if name == "nuclear":
        assert "cache" in checkpoint["opt"]["param_groups"][0]["lmo"]


@pytest.mark.parametrize("name", ["ksparse", "lp", "group_l1", "nuclear"])
def test_diameter_rescaling_uses_each_rows_radius(name):
    model = _model()
    lmo = SETS[name][True]()
    opt = StochasticFrankWolfe([{"params": [model[0].weight], "lmo": lmo, "per_row": True}],
                               lr=0.05, momentum=0.0, rescale="diameter")
    opt.make_feasible()
    w0 = model[0].weight.detach().clone()
    grad = torch.randn(4, 6, dtype=DTYPE)
    model[0].weight.grad = grad.clone()
    opt.step()
    vertex = lmo.lmo(grad)
    for i, r in enumerate(RADII.tolist()):
        one = SETS[name][True]()
        one.radius = r  # the same set with this row's radius as a number
        gamma = min(0.05 / one.diameter(6), 1.0)
        expected = w0[i] + gamma * (vertex[i] - w0[i])
        torch.testing.assert_close(model[0].weight[i].detach(), expected, rtol=1e-12,
                                   atol=1e-14)


def test_matrix_sets_on_square_weights():
    # Birkhoff polytope (doubly stochastic) and spectraplex on a 4 x 4 layer, flattened.
    torch.manual_seed(5)
    for lmo in (Birkhoff(4), Spectraplex(4, 2.0)):
        layer = nn.Linear(4, 4, bias=False).to(DTYPE)
        opt = StochasticFrankWolfe([layer.weight], lmo=lmo, lr=0.2)
        opt.make_feasible()
        for _ in range(5):
            opt.zero_grad()
            layer(torch.randn(8, 4, dtype=DTYPE)).square().mean().backward()
            opt.step()
            assert bool(lmo.contains(layer.weight.detach().reshape(1, -1), atol=1e-8).all())
        state = opt.state_dict()["param_groups"][0]["lmo"]
        assert state["type"].endswith(type(lmo).__name__)
