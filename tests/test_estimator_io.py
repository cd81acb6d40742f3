"""Every estimator saves and loads the same safe way.

``save``/``load`` live once in :class:`torchfw.utils.estimator.BaseEstimator`: ``torch.save`` of the
estimator's ``state_dict`` (tensors and plain values) and ``torch.load(weights_only=True)``
checked by the estimator's ``from_state_dict``. The SVC and Weston-Watkins files have their own
field-by-field tests (``tests/test_svm_io.py``, ``tests/test_multiclass.py``); here the three
estimators go through the same round trip, and the Lasso's state is checked field by field.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

import torchfw
from torchfw.datasets import make_sparse_regression


def _regression():
    X, y, _ = make_sparse_regression(80, 60, 5, random_state=0)
    return X.numpy(), y.numpy()


def _fitted(name):
    X, y = _regression()
    if name == "Lasso":
        return torchfw.Lasso(alpha=0.05).fit(X, y), X
    labels = np.digitize(y, np.quantile(y, [1 / 3, 2 / 3]))
    cls = {"SVC": torchfw.SVC, "WestonWatkinsSVC": torchfw.WestonWatkinsSVC}[name]
    return cls(random_state=0).fit(X, labels), X


ESTIMATORS = ["SVC", "Lasso", "WestonWatkinsSVC"]


@pytest.mark.parametrize("name", ESTIMATORS)
def test_save_and_load_give_the_same_predictions(name, tmp_path):
    model, X = _fitted(name)
    path = tmp_path / "model.pt"
    model.save(path)
    loaded = type(model).load(path)
    np.testing.assert_array_equal(loaded.predict(X), model.predict(X))
    assert loaded.get_params() == model.get_params() | {"device": loaded.device}
    assert loaded.n_features_in_ == model.n_features_in_


@pytest.mark.parametrize("name", ESTIMATORS)
def test_another_estimators_file_is_refused_by_name(name, tmp_path):
    model, _ = _fitted(name)
    path = tmp_path / "model.pt"
    model.save(path)
    for other in ESTIMATORS:
        if other == name:
            continue
        with pytest.raises(ValueError, match=f"holds a torchfw.{name} model, not a "
                                             f"torchfw.{other}"):
            getattr(torchfw, other).load(path)


@pytest.mark.parametrize("name", ESTIMATORS)
def test_a_file_that_is_not_a_model_is_refused(name, tmp_path):
    path = tmp_path / "junk.pt"
    path.write_bytes(b"not a torch file at all")
    with pytest.raises(ValueError, match="is not a torchfw model file"):
        getattr(torchfw, name).load(path)
    torch.save({"weights": torch.zeros(3)}, path)
    with pytest.raises(ValueError, match="is not a torchfw model file"):
        getattr(torchfw, name).load(path)


def test_lasso_state_round_trips_every_fitted_figure(tmp_path):
    X, y = _regression()
    model = torchfw.Lasso(alpha=0.05, dtype="float32").fit(X, y)
    path = tmp_path / "lasso.pt"
    model.save(path)
    state = torch.load(path, weights_only=True)
    assert state["format"] == "torchfw.Lasso" and state["params"]["dtype"] == "float32"
    loaded = torchfw.Lasso.load(path)
    np.testing.assert_array_equal(loaded.coef_, model.coef_)
    for name in ("intercept_", "n_iter_", "dual_gap_", "alpha_", "radius_", "radius_bound_"):
        assert getattr(loaded, name) == getattr(model, name), name
    assert loaded.result_ is None
    # The loaded model refits like a fresh one with the same parameters.
    np.testing.assert_allclose(loaded.fit(X, y).coef_, model.coef_, rtol=0, atol=1e-12)


def test_lasso_refuses_an_unfitted_save(tmp_path):
    with pytest.raises(torchfw.exceptions.NotFittedError):
        torchfw.Lasso(alpha=1.0).save(tmp_path / "x.pt")


@pytest.mark.parametrize("tamper,match", [
    (lambda s: s.pop("coef"), "missing"),
    (lambda s: s.__setitem__("coef", torch.zeros(7, dtype=torch.float64)), "shape"),
    (lambda s: s["coef"].__setitem__(0, float("nan")), "non-finite"),
    (lambda s: s.__setitem__("intercept", float("inf")), "non-finite"),
    (lambda s: s.__setitem__("n_features_in", "60"), "inconsistent"),
    (lambda s: s.__setitem__("format", "torchfw.SVC"), "not a torchfw.Lasso"),
])
def test_lasso_refuses_an_inconsistent_state(tamper, match):
    model, _ = _fitted("Lasso")
    state = model.state_dict()
    state["coef"] = state["coef"].clone()
    tamper(state)
    with pytest.raises(ValueError, match=match):
        torchfw.Lasso.from_state_dict(state)
