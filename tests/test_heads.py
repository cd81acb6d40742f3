"""Saving and loading the SVM heads of torchfw.heads."""

from __future__ import annotations

import io

import numpy as np
import pytest
import torch
from torch import nn

import torchfw
from torchfw.heads import KernelSVMHead, LinearHead


def _features(n=120, d=5, k=3, seed=0):
    rng = np.random.default_rng(seed)
    centers = rng.normal(scale=4.0, size=(k, d))
    y = rng.integers(0, k, n)
    X = centers[y] + rng.normal(size=(n, d))
    return X, np.array(["cat", "dog", "eel"])[y]


def _round_trip(obj, **load_kwargs):
    buffer = io.BytesIO()
    torch.save(obj, buffer)
    buffer.seek(0)
    return torch.load(buffer, **load_kwargs)


@pytest.fixture(scope="module")
def fitted():
    X, y = _features()
    # gamma="scale" gives a gamma far from the constructor's default of 1, so a head rebuilt
    # with defaults computes another function.
    model = torchfw.SVC(kernel="rbf", C=1.0, gamma="scale", random_state=0,
                        multi_class="ovr").fit(X, y)
    # one row per class (a NumPy fit's attributes are NumPy arrays, which the head takes)
    head = KernelSVMHead(model.support_vectors_, model.problem_dual_coef_,
                         model.problem_intercept_, kernel="rbf", gamma=model._gamma,
                         classes=model.classes_)
    return X, y, model, head


def test_state_dict_carries_kernel_parameters_and_classes(fitted):
    X, _, model, head = fitted
    state = head.state_dict()
    extra = state["_extra_state"]
    assert extra["kernel"] == "rbf" and extra["gamma"] == pytest.approx(model._gamma)
    assert extra["classes"] == ["cat", "dog", "eel"]
    assert extra["gamma"] != 1.0
    rebuilt = KernelSVMHead.from_state_dict(_round_trip(state, weights_only=True))
    x = torch.as_tensor(X, dtype=torch.float64)
    assert torch.equal(rebuilt(x), head(x))
    assert rebuilt.classes == head.classes
    # The head rebuilt by hand with the right kernel, but without classes, takes them on load.
    by_hand = KernelSVMHead(state["support_vectors"], state["dual_coef"], state["intercept"],
                            kernel="rbf", gamma=extra["gamma"])
    by_hand.load_state_dict(state)
    assert by_hand.classes == ["cat", "dog", "eel"]
    assert torch.equal(by_hand(x), head(x))


FITTED_GAMMA = object()  # stands for the fitted model's gamma


@pytest.mark.parametrize("kwargs, field", [
    ({}, "gamma"),                                       # the case: all defaults
    ({"kernel": "poly", "gamma": FITTED_GAMMA}, "kernel"),
    ({"gamma": 0.5}, "gamma"),
    ({"gamma": FITTED_GAMMA, "coef0": 1.0}, "coef0"),
    ({"gamma": FITTED_GAMMA, "classes": ["a", "b", "c"]}, "classes"),
])
def test_loading_into_a_head_built_differently_fails(fitted, kwargs, field):
    _, _, model, head = fitted
    kwargs = {k: model._gamma if v is FITTED_GAMMA else v for k, v in kwargs.items()}
    other = KernelSVMHead(head.support_vectors, head.dual_coef, head.intercept, **kwargs)
    with pytest.raises(ValueError, match=f"built differently.*{field}"):
        other.load_state_dict(head.state_dict())


def test_state_dict_without_kernel_description_is_refused(fitted):
    _, _, _, head = fitted
    old = {k: v for k, v in head.state_dict().items() if k != "_extra_state"}
    with pytest.raises(ValueError, match="no torchfw.KernelSVMHead description"):
        KernelSVMHead.from_state_dict(old)
    with pytest.raises(RuntimeError, match="_extra_state"):  # strict load names the gap
        KernelSVMHead(head.support_vectors, head.dual_coef, head.intercept).load_state_dict(old)


def test_as_module_head_knows_its_classes(fitted):
    X, _, model, _ = fitted
    head = model.as_module()
    assert head.classes == list(model.classes_)
    x = torch.as_tensor(X, dtype=torch.float64)
    predicted = np.array(head.classes)[head.predict_index(x).numpy()]
    np.testing.assert_array_equal(predicted, model.predict(X))


def test_composed_model_state_dict_loads_with_weights_only(fitted):
    X, _, _, head = fitted
    backbone = nn.Linear(5, 5, dtype=torch.float64)
    model = nn.Sequential(backbone, head).eval()
    state = _round_trip(model.state_dict(), weights_only=True)  # no safe globals needed
    fresh = nn.Sequential(nn.Linear(5, 5, dtype=torch.float64),
                          KernelSVMHead.from_state_dict(state, prefix="1.")).eval()
    fresh.load_state_dict(state)
    x = torch.as_tensor(X, dtype=torch.float64)
    with torch.no_grad():
        assert torch.equal(fresh(x), model(x))


def test_pickled_module_needs_exactly_the_documented_safe_globals(fitted):
    # docs/heads.md: a whole pickled model (torch.save(model)) loads with weights_only=True
    # once the head's class and the model's other module classes are allowed.
    X, _, _, head = fitted
    model = nn.Sequential(nn.Linear(5, 5, dtype=torch.float64), nn.ReLU(), head).eval()
    buffer = io.BytesIO()
    torch.save(model, buffer)
    buffer.seek(0)
    unsafe = set(torch.serialization.get_unsafe_globals_in_checkpoint(buffer))
    assert unsafe == {"torchfw.heads.KernelSVMHead", "torch.nn.modules.container.Sequential",
                      "torch.nn.modules.linear.Linear", "torch.nn.modules.activation.ReLU"}
    buffer.seek(0)
    with torch.serialization.safe_globals([KernelSVMHead, nn.Sequential, nn.Linear, nn.ReLU]):
        loaded = torch.load(buffer, weights_only=True)
    x = torch.as_tensor(X, dtype=torch.float64)
    with torch.no_grad():
        assert torch.equal(loaded(x), model(x))
    assert loaded[2].classes == head.classes


def test_linear_head_saves_and_checks_its_classes():
    weight, bias = torch.randn(3, 4), torch.randn(3)
    head = LinearHead(weight, bias, classes=np.array([3, 5, 7]))
    assert head.classes == [3, 5, 7]
    state = _round_trip(head.state_dict(), weights_only=True)
    rebuilt = LinearHead.from_state_dict(state)
    x = torch.randn(6, 4)
    assert torch.equal(rebuilt(x), head(x)) and rebuilt.classes == [3, 5, 7]
    with pytest.raises(ValueError, match="classes"):
        LinearHead(weight, bias, classes=[0, 1, 2]).load_state_dict(state)
    with pytest.raises(ValueError, match="3 classes for a head with 2"):
        LinearHead(torch.randn(2, 4), classes=[1, 2, 3])


def test_heads_with_extra_state_still_script_and_export(fitted):
    X, _, _, head = fitted
    x = torch.as_tensor(X[:8], dtype=torch.float64)
    scripted = torch.jit.script(head)
    assert torch.equal(scripted(x), head(x))
    program = torch.export.export(head, (x,))
    torch.testing.assert_close(program.module()(x), head(x))
    linear = LinearHead(torch.randn(3, 5, dtype=torch.float64), classes=["a", "b", "c"])
    assert torch.equal(torch.jit.script(linear)(x), linear(x))
