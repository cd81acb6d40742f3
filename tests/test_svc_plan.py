"""The plan of an SVC fit (torchfw.svm._plan): resolved once, read by every path.

What is checked: the stopping numbers, budget, seeds and tolerance the plan resolves (each
against the rule it replaces), that ``fit_planned`` replaces fields of one fit's plan only and
refuses unknown ones, that the ConvergenceWarning of every path is the plan's one text, and
that the fit paths take the plan -- no function of theirs takes or reads the estimator.
"""

from __future__ import annotations

import ast
import inspect
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch

import torchfw as tf
from torchfw.exceptions import ConvergenceWarning
from torchfw.svm import SOLVERS
from torchfw.svm._plan import (
    CHECK_EVERY,
    NO_LIMIT,
    FitPlan,
    fit_planned,
    resolve_plan,
)

CPU = torch.device("cpu")


def _data(m=120, classes=2, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(m, 5))
    y = (X[:, 0] + 0.5 * rng.normal(size=m) > 0).astype(int) if classes == 2 else \
        np.digitize(X[:, 0] + 0.3 * rng.normal(size=m), [-0.5, 0.5])
    return X, y


def _plan(model, m=100, **overrides) -> FitPlan:
    return resolve_plan(model, n_examples=m, kernel=None, dtype=torch.float32, device=CPU,
                        **overrides)


@pytest.mark.parametrize("solver", SOLVERS)
def test_the_compiled_loop_stops_on_the_lazy_optimizers_numbers(solver):
    plan = _plan(tf.SVC(solver=solver, tol=0.02))
    optimizer = plan.optimizer()
    assert optimizer.corrective  # every SVC solve takes the corrective step
    every = CHECK_EVERY if optimizer.check_every is None else optimizer.check_every
    assert plan.stopping() == (optimizer.tol, optimizer.rtol, every) == (1e-300, 0.04, 10)
    # Replaced numbers reach both: the compiled loop's and the optimizer's.
    plan = _plan(tf.SVC(solver=solver), gap_tol=1e-4, rtol=0.0, check_every=3)
    optimizer = plan.optimizer()
    assert plan.stopping() == (optimizer.tol, optimizer.rtol, optimizer.check_every) == \
        (1e-4, 0.0, 3)


def test_tol_auto_probability_budget_and_seeds():
    assert _plan(tf.SVC(), m=999).tol == 0.1  # tol="auto": SMALL_TOL below SMALL_M examples
    assert _plan(tf.SVC(), m=1000).tol == 0.3
    assert _plan(tf.SVC(probability=True), m=5000).tol == 0.05  # PROBABILITY_TOL at most
    assert _plan(tf.SVC(tol=0.01, probability=True)).tol == 0.01
    assert _plan(tf.SVC(tol=0.2)).rtol == 0.4  # g / rho <= tol, rho = 2 f
    assert _plan(tf.SVC()).budget(37) == 3700  # 100 iterations per example
    assert _plan(tf.SVC(solver="sfw")).budget(37) == 37  # the streaming solvers: one epoch
    assert _plan(tf.SVC(max_iter=-1)).budget(37) == NO_LIMIT
    assert _plan(tf.SVC(max_iter=5)).budget(37) == 5
    assert _plan(tf.SVC(max_iter=5)).default_budget(37) == 3700
    model = tf.SVC(random_state=11)
    model._begin_fit(np.zeros((2, 2)))  # draws the fit's seed, as fit does first
    assert [_plan(model).problem_seed(k) for k in range(3)] == [11, 12, 13]


def test_fit_planned_replaces_fields_of_one_fit_only():
    X, y = _data(classes=3)
    kw = dict(multi_class="ovr", random_state=0)
    plain = tf.SVC(**kw).fit(X, y)
    same = fit_planned(tf.SVC(**kw), X, y)  # nothing replaced: the fit itself, bit for bit
    assert np.array_equal(same.problem_dual_coef_, plain.problem_dual_coef_)
    model = fit_planned(tf.SVC(**kw), X, y, batched=True)
    assert {r.info["engine"] for r in model.result_} == {"BatchedQuadraticEngine"}
    model.fit(X, y)  # a later fit resolves its own plan: the CPU's one-by-one path
    assert {r.info["engine"] for r in model.result_} == {"compiled whole solve"}
    with pytest.raises(ValueError, match="unknown plan fields"):
        fit_planned(tf.SVC(), X, y, batchd=True)


@pytest.mark.parametrize("path,params,overrides", [
    ("compiled", {}, {}),
    ("lazy", {"dense": False}, {}),
    ("sampled", {"sample_size": 20}, {}),
    ("batched", {"multi_class": "ovr"}, {"batched": True}),
])
def test_every_path_warns_with_the_plans_text(path, params, overrides):
    X, y = _data(classes=3 if path == "batched" else 2)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fit_planned(tf.SVC(max_iter=3, tol=1e-9, **params), X, y, **overrides)
    messages = [str(w.message) for w in caught if issubclass(w.category, ConvergenceWarning)]
    assert messages
    for message in messages:
        assert message.startswith("SVC solver 'swap'"), message
        assert "stopped on max_iter after 3 iterations with" in message
        assert message.endswith("> tol=1e-09"), message


# -- the paths take the plan, never the estimator ---------------------------------------------

ROOT = Path(tf.__file__).resolve().parent
PATH_MODULES = ["svm/_fit.py", "svm/_binary.py", "svm/_lazy.py", "svm/_large.py",
                "svm/_batched.py", "svm/_matrix.py", "svm/_dense.py", "distributed/svc.py"]
#: What the estimator held for its paths to read back (now the plan's).
ESTIMATOR_PRIVATES = {"_kernel", "_stop_tol", "_fit_binary", "_problem_seed", "_initial_alpha",
                      "_dense_path", "_fit_seed", "_n_fit", "_batched_ovr"}


def _outside_estimator_classes(path: str):
    """Function definitions of ``path`` outside the estimator class (DistributedSVC's own
    methods set up the fit, as SVC.fit does)."""
    tree = ast.parse((ROOT / path).read_text())
    skip = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and node.name == "DistributedSVC":
            skip.update(id(n) for n in ast.walk(node))
    return [n for n in ast.walk(tree) if not isinstance(n, ast.Module) and id(n) not in skip]


@pytest.mark.parametrize("path", PATH_MODULES)
def test_fit_paths_take_the_plan_not_the_estimator(path):
    nodes = _outside_estimator_classes(path)
    for node in nodes:
        if isinstance(node, ast.FunctionDef):
            names = [a.arg for a in node.args.args + node.args.kwonlyargs]
            assert not {"model", "svc", "estimator", "factory"} & set(names), \
                f"{path}: {node.name}({', '.join(names)})"
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and \
                node.value.id != "self":
            assert node.attr not in ESTIMATOR_PRIVATES, f"{path}: {node.value.id}.{node.attr}"


def test_the_entry_points_take_the_plan_first():
    from torchfw.distributed import svc as sharded
    from torchfw.svm import _batched, _binary, _custom, _fit, _large, _lazy, _matrix

    for function in (_fit.fit_problems, _fit.fit_all, _fit.takes_compiled,
                     _fit.dense_budget_ok, _binary.fit_binary, _lazy.fit_binary,
                     _large.fit_binary_sampled, _batched.fit_ovr_batched,
                     _matrix.plain_problem, _matrix.plain_operator, _matrix.cache_slots,
                     _custom.check_custom_kernel, sharded.fit_shard, sharded.initial_shard):
        assert next(iter(inspect.signature(function).parameters)) == "plan", function
