"""SVC with several classes: one-vs-rest (the default) and one-vs-one (LIBSVM's scheme)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import torchfw as tf
from torchfw.svm._multiclass import binary_problems, class_pairs, ovo_to_ovr, ovo_vote, ovo_votes

pytestmark = pytest.mark.filterwarnings("ignore:SVC solver")


def _blobs(m=160, k=4, seed=0, spread=1.6):
    rng = np.random.default_rng(seed)
    centres = rng.normal(scale=2.0, size=(k, 2))
    y = np.arange(m) % k
    X = centres[y] + spread * rng.normal(size=(m, 2))
    return X, y


def test_vote_and_ovr_shape_match_scikit_learn_on_ties():
    # scikit-learn's one-vs-one SVC: its pair values through our vote must give its predict
    # (LIBSVM's rule: lowest class index on ties), and through our shape its decision_function.
    from sklearn.svm import SVC as SkSVC

    X, y = _blobs(m=200, k=4, spread=2.5)
    sk_ovo = SkSVC(decision_function_shape="ovo").fit(X, y)
    sk_ovr = SkSVC().fit(X, y)
    grid = np.stack(np.meshgrid(np.linspace(-8, 8, 60), np.linspace(-8, 8, 60)), -1).reshape(-1, 2)
    pairs = sk_ovo.decision_function(grid)
    votes = ovo_votes(pairs, 4)
    top = votes.max(axis=1)
    ties = (votes == top[:, None]).sum(axis=1) > 1
    assert ties.sum() >= 20  # the check below must see ties, where a wrong rule would differ
    assert np.array_equal(ovo_vote(pairs, 4), sk_ovo.predict(grid))
    # A rule breaking ties towards the highest index (or by confidence) differs there.
    last = votes.shape[1] - 1 - np.argmax(votes[:, ::-1], axis=1)
    assert not np.array_equal(last[ties], sk_ovo.predict(grid)[ties])
    np.testing.assert_allclose(ovo_to_ovr(pairs, 4), sk_ovr.decision_function(grid),
                               rtol=1e-12, atol=1e-12)


def test_three_way_cycle_goes_to_the_lowest_class():
    # 0 beats 1, 1 beats 2, 2 beats 0: one vote each, class 0 wins; then 2 beats 1 as well.
    pairs = np.array([[1.0, -1.0, 1.0], [1.0, -1.0, -1.0]])  # pairs (0,1), (0,2), (1,2)
    assert ovo_votes(pairs, 3).tolist() == [[1, 1, 1], [1, 0, 2]]
    assert ovo_vote(pairs, 3).tolist() == [0, 2]
    # Exactly 0 votes for the second class in predict, the first in the ovr shape.
    zero = np.zeros((1, 3))
    assert ovo_votes(zero, 3).tolist() == [[0, 1, 2]]
    assert np.floor(ovo_to_ovr(zero, 3)).tolist() == [[2, 1, 0]]


def test_problems_cover_pairs_in_libsvm_order():
    y = np.array([2, 0, 1, 0, 2, 1, 1])
    problems = binary_problems(y, 3, "ovo")
    assert class_pairs(3) == [(0, 1), (0, 2), (1, 2)]
    assert [p.rows.tolist() for p in problems] == [[1, 2, 3, 5, 6], [0, 1, 3, 4], [0, 2, 4, 5, 6]]
    assert problems[0].y.tolist() == [1, -1, 1, -1, -1]  # +1 for the pair's first class
    assert problems[1].labels_over(7).tolist() == [-1, 1, 0, 1, -1, 0, 0]
    ovr = binary_problems(y, 3, "ovr")
    assert len(ovr) == 3 and ovr[2].rows is None and ovr[2].y.tolist() == [1, -1, -1, -1, 1, -1, -1]


def test_one_vs_rest_problems_keep_their_labels_and_classes():
    """One-vs-rest's problems keep the (k, m) labels their rows view and each example's class
    (RestProblems): the model built from them equals the one built from the rows alone (the
    labels stacked again, the classes read back from them), to the bit and in layout."""
    from torchfw.svm._multiclass import BinaryProblem, RestProblems

    rng = np.random.default_rng(3)
    k, m = 5, 90
    y = rng.integers(0, k, m)
    problems = binary_problems(y, k, "ovr")
    assert isinstance(problems, RestProblems) and isinstance(problems, list)
    np.testing.assert_array_equal(problems.labels, np.stack([p.y for p in problems]))
    assert all(np.shares_memory(p.y, problems.labels) for p in problems)
    np.testing.assert_array_equal(problems.classes, y)
    model = tf.SVC(multi_class="ovr")
    model.classes_ = np.arange(k)
    model.multi_class_ = "ovr"
    alphas = [torch.from_numpy(np.where(rng.random(m) < 0.3, rng.random(m), 0.0))
              for _ in range(k)]
    rho = 0.5 + rng.random(k)
    got = model._problem_rows(problems, alphas, None, rho, m)
    plain = [BinaryProblem(None, p.y.copy()) for p in problems]
    expected = model._problem_rows(plain, alphas, None, rho, m)
    for a, b in zip(got, expected, strict=True):
        np.testing.assert_array_equal(a, b)
        assert a.dtype == b.dtype and a.flags.f_contiguous == b.flags.f_contiguous
    support, sv_class = got[0], got[1]
    np.testing.assert_array_equal(sv_class, y[support])  # each support vector's own class
    assert (np.diff(sv_class) >= 0).all()  # class by class


@pytest.mark.parametrize("k", [3, 4, 6, 7])
def test_masked_pairs_equal_the_all_pairs_construction(k):
    """Up to PAIR_MASK_ENTRIES the pairs come from one boolean matrix: the arrays of the
    all-pairs sort exactly (rows, labels, offsets and their dtypes), and that construction
    itself checked against each pair's two classes in index order."""
    from torchfw.svm import _multiclass

    rng = np.random.default_rng(k)
    y = rng.integers(0, k, 300)
    y[:k] = np.arange(k)  # every class present
    got = binary_problems(y, k, "ovo")
    limit = _multiclass.PAIR_MASK_ENTRIES
    try:
        _multiclass.PAIR_MASK_ENTRIES = -1  # the all-pairs sort
        expected = binary_problems(y, k, "ovo")
    finally:
        _multiclass.PAIR_MASK_ENTRIES = limit
    for name in ("rows", "y", "offsets"):
        np.testing.assert_array_equal(getattr(got, name), getattr(expected, name))
        assert getattr(got, name).dtype == getattr(expected, name).dtype
    for built in (got, expected):
        for c, (i, j) in enumerate(class_pairs(k)):
            rows = np.flatnonzero((y == i) | (y == j))
            np.testing.assert_array_equal(built[c].rows, rows)
            np.testing.assert_array_equal(built[c].y, np.where(y[rows] == i, 1.0, -1.0))


@pytest.mark.parametrize("dense", [True, False])
def test_each_pair_is_the_binary_svc_of_its_two_classes(dense):
    X, y = _blobs(m=120, k=3)
    # gamma fixed: "scale" would read the variance of all examples here, of a pair's there.
    # The binary SVC labels the pair the other way round, so it draws another initial subset:
    # both solve the same strictly convex dual, compared near its optimum.
    model = tf.SVC(random_state=5, tol=1e-6, dense=dense, gamma=0.5, multi_class="ovo",
                   decision_function_shape="ovo").fit(X, y)
    pairs = model.decision_function(X)
    assert pairs.shape == (120, 3)
    for c, (i, j) in enumerate(class_pairs(3)):
        rows = np.flatnonzero((y == i) | (y == j))
        # Pair c runs with seed random_state + c; the binary SVC's positive class is j.
        binary = tf.SVC(random_state=5 + c, tol=1e-6, dense=dense, gamma=0.5).fit(X[rows],
                                                                                 y[rows])
        np.testing.assert_allclose(pairs[:, c], -binary.decision_function(X), rtol=0,
                                   atol=2e-3)


def test_predict_votes_and_decision_shapes():
    X, y = _blobs(m=200, k=4, spread=2.0)
    labels = np.array(["a", "b", "c", "d"])[y]
    model = tf.SVC(random_state=0, multi_class="ovo").fit(X, labels)
    pairs = tf.SVC(random_state=0, multi_class="ovo", decision_function_shape="ovo").fit(
        X, labels)
    # scikit-learn's layout: (k - 1, n_SV) packed coefficients, one intercept per pair
    assert model.dual_coef_.shape[0] == 3 and model.intercept_.shape == (6,)
    assert model.problem_dual_coef_.shape[0] == 6
    grid = np.random.default_rng(1).uniform(-8, 8, size=(500, 2))
    values = pairs.decision_function(grid)
    assert values.shape == (500, 6)
    assert np.array_equal(model.predict(grid), model.classes_[ovo_vote(values, 4)])
    np.testing.assert_allclose(model.decision_function(grid), ovo_to_ovr(values, 4))
    ties = tf.SVC(random_state=0, multi_class="ovo", break_ties=True).fit(X, labels)
    assert np.array_equal(ties.predict(grid),
                          model.classes_[np.argmax(model.decision_function(grid), axis=1)])


def test_ovr_still_available_and_different():
    X, y = _blobs(m=160, k=4, spread=0.8)
    ovr = tf.SVC(random_state=0).fit(X, y)  # "auto", 4 classes below OVO_FROM: one-vs-rest
    ovo = tf.SVC(random_state=0, multi_class="ovo").fit(X, y)
    assert (ovr.multi_class, ovr.multi_class_, ovo.multi_class_) == ("auto", "ovr", "ovo")
    assert (ovr.problem_dual_coef_.shape[0], ovo.problem_dual_coef_.shape[0]) == (4, 6)
    assert not np.allclose(ovr.decision_function(X), ovo.decision_function(X))
    assert np.array_equal(ovr.predict(X), ovr.classes_[np.argmax(ovr.decision_function(X), 1)])
    assert ovr.score(X, y) > 0.6 and ovo.score(X, y) > 0.6


@pytest.mark.parametrize("params, message", [
    (dict(multi_class="crammer_singer"), "multi_class"),
    (dict(decision_function_shape="both"), "decision_function_shape"),
    (dict(multi_class="ovr", decision_function_shape="ovo"), "needs multi_class='ovo'"),
    (dict(multi_class="ovo", break_ties=True, decision_function_shape="ovo"), "break_ties"),
    (dict(break_ties="yes"), "break_ties"),
])
def test_bad_multiclass_parameters(params, message):
    X, y = _blobs(m=40, k=3)
    with pytest.raises(ValueError, match=message):
        tf.SVC(**params).fit(X, y)


def test_head_votes_like_the_estimator_and_scripts():
    X, y = _blobs(m=160, k=4, spread=2.5)
    model = tf.SVC(random_state=0, multi_class="ovo").fit(X, y)
    head = model.as_module()
    grid = torch.tensor(np.random.default_rng(2).uniform(-8, 8, size=(400, 2)),
                        dtype=torch.float64)
    np.testing.assert_allclose(head(grid).numpy(), model.decision_function(grid.numpy()),
                               rtol=1e-5, atol=1e-5)
    assert np.array_equal(head.predict_index(grid).numpy(), np.searchsorted(
        model.classes_, model.predict(grid.numpy())))
    scripted = torch.jit.script(head)
    assert torch.equal(scripted.predict_index(grid), head.predict_index(grid))
    rebuilt = tf.heads.KernelSVMHead.from_state_dict(head.state_dict())
    assert rebuilt.multi_class == "ovo" and torch.equal(rebuilt(grid), head(grid))
    # A head saved before one-vs-one heads existed (version 1, no multi_class) is one-vs-rest.
    ovr = tf.SVC(multi_class="ovr", random_state=0).fit(X, y).as_module()
    state = ovr.state_dict()
    extra = dict(state["_extra_state"])
    extra.pop("multi_class")
    extra["version"] = 1
    state["_extra_state"] = extra
    old = tf.heads.KernelSVMHead.from_state_dict(state)
    assert old.multi_class == "ovr" and torch.equal(old(grid), ovr(grid))
    with pytest.raises(ValueError, match="multi_class"):
        head.load_state_dict(state)


def test_state_dict_round_trip_and_old_states():
    X, y = _blobs(m=120, k=3)
    model = tf.SVC(random_state=0, multi_class="ovo").fit(X, y)
    loaded = tf.SVC.from_state_dict(model.state_dict())
    assert loaded.multi_class == "ovo"
    assert np.array_equal(loaded.predict(X), model.predict(X))
    ovr = tf.SVC(multi_class="ovr", random_state=0).fit(X, y)
    state = ovr.state_dict()
    del state["params"]["multi_class"]  # saved before the parameter existed: one-vs-rest
    old = tf.SVC.from_state_dict(state)
    assert old.multi_class == "ovr"
    np.testing.assert_array_equal(old.decision_function(X), ovr.decision_function(X))


def test_ovo_probabilities_are_coupled_pairs():
    X, y = _blobs(m=240, k=3, spread=0.7)
    model = tf.SVC(probability=True, random_state=0, multi_class="ovo").fit(X, y)
    assert model.probA_.shape == (3,)
    proba = model.predict_proba(X)
    np.testing.assert_allclose(proba.sum(axis=1), 1.0, atol=1e-9)
    assert (np.argmax(proba, axis=1) == model.predict(X)).mean() > 0.9
    from sklearn.svm import SVC as SkSVC

    theirs = SkSVC(probability=True, random_state=0).fit(X, y).predict_proba(X)
    assert (np.argmax(proba, axis=1) == y).mean() >= (np.argmax(theirs, axis=1) == y).mean() - 0.02
    log_loss = -np.mean(np.log(proba[np.arange(len(y)), y]))
    assert log_loss <= 1.1 * -np.mean(np.log(theirs[np.arange(len(y)), y]))


def test_sample_weight_and_class_weight_reach_each_pair():
    X, y = _blobs(m=150, k=3)
    w = np.random.default_rng(3).uniform(0.5, 2.0, size=150)
    kw = dict(tol=1e-6, class_weight={2: 3.0}, gamma=0.5, multi_class="ovo")
    model = tf.SVC(random_state=1, **kw).fit(X, y, sample_weight=w)
    rows = np.flatnonzero((y == 1) | (y == 2))  # pair (1, 2) is the third: seed 1 + 2
    binary = tf.SVC(random_state=3, **kw).fit(X[rows], y[rows], sample_weight=w[rows])
    np.testing.assert_allclose(tf.SVC(random_state=1, decision_function_shape="ovo", **kw).fit(
        X, y, sample_weight=w).decision_function(X)[:, 2], -binary.decision_function(X),
        rtol=0, atol=2e-3)
    # Without the weights the pair is another problem, farther away than that.
    unweighted = tf.SVC(random_state=3, tol=1e-6, gamma=0.5).fit(X[rows], y[rows])
    assert np.abs(binary.decision_function(X) - unweighted.decision_function(X)).max() > 0.05
    assert model.score(X, y) > 0.6


def test_auto_scheme_follows_the_measured_crossover():
    from torchfw.svm._multiclass import OVO_FEW_CLASSES, OVO_FEW_FROM, OVO_FROM

    X, y = _blobs(m=OVO_FROM, k=4, spread=0.8)
    big = tf.SVC(random_state=0, tol=0.5).fit(X, y)
    small = tf.SVC(random_state=0, tol=0.5).fit(X[:OVO_FEW_FROM - 1], y[:OVO_FEW_FROM - 1])
    assert (big.multi_class_, small.multi_class_) == ("ovo", "ovr")
    # Few classes: one-vs-one from OVO_FEW_FROM examples; more classes from OVO_FROM only.
    assert tf.SVC(tol=0.5).fit(X[:OVO_FEW_FROM], y[:OVO_FEW_FROM]).multi_class_ == "ovo"
    Xm, ym = _blobs(m=OVO_FROM, k=OVO_FEW_CLASSES + 1, spread=0.8)
    assert tf.SVC(tol=0.5).fit(Xm, ym).multi_class_ == "ovo"
    assert tf.SVC(tol=0.5).fit(Xm[:OVO_FROM - 1], ym[:OVO_FROM - 1]).multi_class_ == "ovr"
    # Three classes: three pairs are no more problems than three classes, and smaller.
    three = y < 3
    assert tf.SVC(tol=0.5).fit(X[three][:60], y[three][:60]).multi_class_ == "ovo"
    assert tf.SVC(tol=0.5, multi_class="ovr").fit(X[three][:60], y[three][:60]).multi_class_ \
        == "ovr"
    # Pair values asked for: one-vs-one at any size.
    assert tf.SVC(decision_function_shape="ovo").fit(X[:90], y[:90]).multi_class_ == "ovo"
    # The scheme survives saving, and so do the predictions.
    loaded = tf.SVC.from_state_dict(big.state_dict())
    assert loaded.multi_class_ == "ovo"
    assert np.array_equal(loaded.predict(X[:300]), big.predict(X[:300]))
