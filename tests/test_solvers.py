"""The public solver registry (torchfw.solvers): one list of names for every estimator."""

import pytest
import torch

import torchfw as tf
from torchfw import cli, lasso, svm
from torchfw.sets.oracles import L1Ball, Simplex
from torchfw.solvers import ESTIMATORS, SOLVERS, get_solver, make_solver, solver_names

EXPECTED = {  # name -> (class, fixed options): what each name meant before the registry
    "fw": (tf.FrankWolfe, {}),
    "away": (tf.AwayStepFrankWolfe, {}),
    "pairwise": (tf.PairwiseFrankWolfe, {}),
    "swap": (tf.SwapFrankWolfe, {}),
    "swap2": (tf.SwapFrankWolfe, {"second_order": True}),
    "partan": (tf.PartanFrankWolfe, {}),
    "fc": (tf.FullyCorrectiveFrankWolfe, {}),
    "sfw": (tf.FrankWolfe, {"stream": True}),
    "msfw": (tf.AwayStepFrankWolfe, {"stream": True}),
}


def test_registry_builds_each_named_optimizer():
    assert tuple(SOLVERS) == tuple(EXPECTED)
    for name, (cls, options) in EXPECTED.items():
        opt = make_solver(name, Simplex(), tol=1e-7, max_iter=5)
        assert type(opt) is cls, name
        assert isinstance(opt.line_search, tf.ExactLineSearch)
        assert opt.tol == 1e-7 and opt.max_iter == 5
        assert opt.stream == options.get("stream", False), name
        if cls is tf.SwapFrankWolfe:
            assert opt.second_order == options.get("second_order", False), name
        assert SOLVERS[name].streaming == options.get("stream", False)


def test_every_estimator_reads_its_names_from_the_registry():
    assert svm.SOLVERS == solver_names("svc") == tuple(EXPECTED)
    assert tuple(lasso.SOLVERS) == solver_names("lasso") == ("fw", "away", "pairwise", "swap",
                                                            "partan")
    assert all(lasso.SOLVERS[n] is SOLVERS[n].optimizer for n in lasso.SOLVERS)
    from torchfw.distributed import DISTRIBUTED_SOLVERS

    assert DISTRIBUTED_SOLVERS == solver_names("distributed") == (
        "fw", "away", "pairwise", "swap", "swap2", "partan", "fc")
    assert "fw, away, pairwise, swap (default), swap2, partan, fc, sfw, msfw" in cli.TRAIN_HELP
    assert solver_names() == tuple(EXPECTED)


def test_svc_builds_its_solver_through_the_registry():
    X = torch.tensor([[0.0, 0.0], [0.1, 0.2], [1.0, 1.0], [0.9, 1.1]])
    y = [0, 0, 1, 1]
    model = svm.SVC(solver="swap2", tol=1e-3, random_state=0).fit(X, y)
    assert model.predict(X).tolist() == y
    with pytest.raises(ValueError, match="unknown solver 'nope'.*'msfw'"):
        svm.SVC(solver="nope").fit(X, y)


def test_clear_errors():
    with pytest.raises(ValueError, match="unknown solver 'sfw' for lasso; expected one of"):
        get_solver("sfw", "lasso")
    with pytest.raises(ValueError, match="unknown solver 'bogus'"):
        make_solver("bogus", Simplex())
    with pytest.raises(ValueError, match="unknown estimator 'ridge'"):
        solver_names("ridge")
    with pytest.raises(ValueError, match="fixes \\['second_order'\\]"):
        make_solver("swap2", Simplex(), second_order=False)
    with pytest.raises(TypeError, match="ConstrainedOptimizer subclass"):
        type(SOLVERS["fw"])("x", object)
    with pytest.raises(ValueError, match="unknown estimators"):
        type(SOLVERS["fw"])("x", tf.FrankWolfe, estimators={"ridge"})
    assert set(ESTIMATORS) == {"svc", "lasso", "distributed"}


def test_lasso_names_run_over_the_l1_ball():
    for name in solver_names("lasso"):
        opt = make_solver(name, L1Ball(2.0), estimator="lasso", max_iter=3)
        assert opt.lmo.radius == 2.0
