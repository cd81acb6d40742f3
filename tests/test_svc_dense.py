"""The compiled whole-solve path of SVC (torchfw.svm._dense) against the lazy host path."""

from __future__ import annotations

import inspect

import numpy as np
import pytest
import torch

import torchfw as tf
from torchfw.svm import _dense as D
from torchfw.svm import _fit as F
from torchfw.svm import _matrix as M
from torchfw.result import problem_results
from torchfw.svm.kernels import SVMDualOperator, make_kernel


pytestmark = [pytest.mark.skipif(not D.K.HAVE_NUMBA, reason="the compiled path needs numba"),
              pytest.mark.filterwarnings("ignore:SVC solver")]

SOLVERS = tuple(D.VARIANTS)


def _data(m=90, d=6, classes=2, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(m, d))
    y = (X[:, 0] + 0.5 * X[:, 1] + 0.7 * rng.normal(size=m) > 0).astype(int) if classes == 2 \
        else np.digitize(X[:, 0] + 0.4 * rng.normal(size=m), [-0.5, 0.5])
    return X, y


def _assert_same_fit(dense, lazy):
    results_d, results_l = problem_results(dense.result_), problem_results(lazy.result_)
    assert len(results_d) == len(results_l)
    for rd, rl in zip(results_d, results_l, strict=True):
        assert rd.info["execution"] == "dense" and rl.info["execution"] != "dense"
        assert rd.n_iter == rl.n_iter and rd.status == rl.status
        if rd.info.get("compiled block"):
            # a problem solved in a compiled block keeps its last check only: the lazy
            # run's last check, bit for bit
            assert rd.history.iteration[-1] == rl.history.iteration[-1]
            assert rd.history.value[-1] == rl.history.value[-1]
            assert rd.history.gap[-1] == rl.history.gap[-1]
        else:
            assert rd.history.iteration == rl.history.iteration
            assert rd.history.value == rl.history.value  # bit for bit, check by check
            assert rd.history.gap == rl.history.gap
            assert rd.history.steps == rl.history.steps
        assert torch.equal(rd.x, rl.x)
    assert np.array_equal(dense.problem_dual_coef_, lazy.problem_dual_coef_)
    assert np.array_equal(dense.problem_intercept_, lazy.problem_intercept_)
    assert np.array_equal(dense.support_, lazy.support_)


@pytest.mark.parametrize("solver", SOLVERS)
def test_binary_same_iterates(solver):
    X, y = _data()
    kw = dict(solver=solver, random_state=0, tol=1e-3)
    _assert_same_fit(tf.SVC(dense=True, **kw).fit(X, y), tf.SVC(dense=False, **kw).fit(X, y))


@pytest.mark.parametrize("solver", ["swap", "partan", "away"])
def test_weighted_and_float64_same_iterates(solver):
    X, y = _data(seed=1)
    weights = np.random.default_rng(2).uniform(0.2, 3.0, size=len(y))
    for kw in (dict(class_weight="balanced"), dict(dtype=torch.float64, kernel="poly"),
               dict(class_weight={0: 3.0})):
        kw.update(solver=solver, random_state=1, tol=1e-2)
        # Per-example C from class weights, and from sample weights where fit takes them.
        fit_kw = {"sample_weight": weights} if "sample_weight" in inspect.signature(
            tf.SVC.fit).parameters else {}
        dense = tf.SVC(dense=True, **kw).fit(X, y, **fit_kw)
        lazy = tf.SVC(dense=False, **kw).fit(X, y, **fit_kw)
        _assert_same_fit(dense, lazy)


@pytest.mark.parametrize("solver", ["swap", "pairwise", "partan", "swap2"])
def test_multiclass_ovr_same_iterates(solver):
    X, y = _data(m=120, classes=3, seed=3)
    kw = dict(solver=solver, random_state=0, tol=1e-2)
    dense = tf.SVC(dense=True, **kw).fit(X, y)
    _assert_same_fit(dense, tf.SVC(dense=False, **kw).fit(X, y))
    assert np.array_equal(dense.predict(X), tf.SVC(dense=False, **kw).fit(X, y).predict(X))


@pytest.mark.parametrize("solver", SOLVERS)
@pytest.mark.parametrize("multi_class", ["ovo", "ovr"])
def test_multiclass_same_iterates_every_solver(solver, multi_class):
    X, y = _data(m=150, classes=3, seed=5)
    weights = np.random.default_rng(6).uniform(0.3, 2.0, size=len(y))
    kw = dict(solver=solver, random_state=2, tol=1e-2, multi_class=multi_class,
              class_weight={1: 2.0})
    dense = tf.SVC(dense=True, **kw).fit(X, y, sample_weight=weights)
    lazy = tf.SVC(dense=False, **kw).fit(X, y, sample_weight=weights)
    _assert_same_fit(dense, lazy)
    assert len(dense.result_) == 3
    if multi_class == "ovo":  # each pair is solved on its two classes only
        assert [r.x.shape[0] for r in dense.result_] == [
            int(((y == i) | (y == j)).sum()) for i, j in ((0, 1), (0, 2), (1, 2))]


def test_warm_start_with_many_atoms_same_iterates():
    # A start of more atoms than the ordered start sum takes: both paths build it through the
    # operator (kernel blocks), and still agree.
    from torchfw.svm.kernels import ORDERED_MATVEC_MAX

    X, y = _data(m=2 * ORDERED_MATVEC_MAX + 100, seed=7)
    kw = dict(solver="swap", random_state=0, tol=1e-2, warm_start=True, C=100.0)
    dense = tf.SVC(dense=True, **kw).fit(X, y)
    lazy = tf.SVC(dense=False, **kw).fit(X, y)
    assert int((dense._alphas[0] > 0).sum()) > ORDERED_MATVEC_MAX
    dense.set_params(tol=1e-3).fit(X, y)
    lazy.set_params(tol=1e-3).fit(X, y)
    _assert_same_fit(dense, lazy)


def _rows_budget(m, rows, itemsize=4):
    """A ``cache_size`` (MB) that holds ``rows`` rows of ``m`` values, not the whole matrix."""
    return (rows + 0.5) * m * itemsize / 2**20


@pytest.mark.parametrize("solver", SOLVERS)
def test_row_cache_same_iterates_as_lazy_path(solver):
    # Over cache_size the compiled solve reads a cache of rows (LIBSVM's kernel cache, least
    # recently used out first): 12 rows of 90 force misses and evictions all along; the lazy
    # path with the same budget takes the same steps, bit for bit.
    X, y = _data()
    kw = dict(solver=solver, random_state=0, tol=1e-3, cache_size=_rows_budget(90, 12))
    cached = tf.SVC(**kw).fit(X, y)
    info = cached.result_.info
    assert info["cached_rows"] == 12 and info["misses"] > 12 and info["hits"] > 0
    _assert_same_fit(cached, tf.SVC(dense=False, **kw).fit(X, y))


@pytest.mark.parametrize("solver", ["swap", "partan", "pairwise"])
def test_row_cache_weighted_multiclass_and_warm_start(solver):
    X, y = _data(m=150, classes=3, seed=5)
    weights = np.random.default_rng(6).uniform(0.3, 2.0, size=len(y))
    for extra in (dict(class_weight={1: 2.0}), dict(dtype=torch.float64, kernel="poly",
                                                    cache_size=_rows_budget(150, 9, 8))):
        kw = dict(solver=solver, random_state=2, tol=1e-2, multi_class="ovr",
                  cache_size=_rows_budget(150, 9))
        kw.update(extra)
        cached = tf.SVC(**kw).fit(X, y, sample_weight=weights)
        # one cache for the three one-vs-rest problems: K + 1 has no labels
        assert {r.info["cached_rows"] for r in cached.result_} == {9}
        _assert_same_fit(cached, tf.SVC(dense=False, **kw).fit(X, y, sample_weight=weights))
    # A warm start of many atoms: its start goes through an operator on both paths.
    from torchfw.svm.kernels import ORDERED_MATVEC_MAX

    m = 2 * ORDERED_MATVEC_MAX + 100
    Xw, yw = _data(m=m, seed=7)
    kw = dict(solver=solver, random_state=0, tol=1e-2, warm_start=True, C=100.0,
              cache_size=_rows_budget(m, 40))
    cached, lazy = tf.SVC(**kw).fit(Xw, yw), tf.SVC(dense=False, **kw).fit(Xw, yw)
    assert int((cached._alphas[0] > 0).sum()) > ORDERED_MATVEC_MAX
    cached.set_params(tol=1e-3).fit(Xw, yw)
    lazy.set_params(tol=1e-3).fit(Xw, yw)
    _assert_same_fit(cached, lazy)


@pytest.mark.parametrize("solver", SOLVERS)
def test_every_iteration_matches_the_host_engine(solver):
    # check_every=1: the value and gap after every single iteration, against the optimizer.
    from torchfw.objectives import Quadratic
    from torchfw.optimizers._engine import QuadraticEngine
    from torchfw.sets.oracles import Simplex
    from torchfw.solvers import make_solver
    from torchfw.svm._start import initial_alpha
    from torchfw.utils.scalars import HOST

    X, y = _data(m=70, seed=4)
    y_pm = np.where(y == 1, 1.0, -1.0)
    Xt = torch.tensor(X, dtype=torch.float32)
    op = SVMDualOperator(Xt, torch.from_numpy(y_pm), make_kernel("rbf", 0.2), 1.0)
    x0 = initial_alpha(op, y_pm, tf.SVC().n_init, 0)
    # SVC's optimizer (torchfw.svm._plan.FitPlan.optimizer: the corrective step on).
    ref = make_solver(solver, Simplex(), estimator="svc", corrective=True, tol=1e-300,
                      rtol=1e-6, max_iter=300, check_every=1).minimize(Quadratic(op), x0)
    ones = torch.ones(70, dtype=torch.float64)
    plain = SVMDualOperator(Xt, ones, make_kernel("rbf", 0.2), 1.0)
    P = D.full_source(D.plain_kernel_matrix(plain))
    no_rows = np.zeros(0, dtype=np.int64)
    y_k, inv_c = op._y_np, op._inv_c_np
    variant = D.VARIANTS[solver]
    engine = QuadraticEngine(Quadratic(op), Simplex(), x0, ops=HOST,
                             keep_previous=variant == 5, pair_columns=variant in (2, 3, 4))
    # The compiled start (subset solve, ordered start gradient, selection) is the engine's.
    start = F._start(P, no_rows, y_k, inv_c, y_pm, None, tf.SVC().n_init, 0,
                     keep_previous=variant == 5)
    expected = D.Start.of_engine(engine)
    for name in ("w", "s", "wp", "sp", "state"):
        assert np.array_equal(getattr(start, name), getattr(expected, name)), name
    n_support = int(start.state[9])
    assert np.array_equal(start.support[:n_support], expected.support[:n_support])
    diag = engine._diag_np
    n_iter, status, hist, _ = D.solve(variant, P, no_rows, y_k, inv_c, diag, start,
                                      max_iter=300, tol=1e-300, rtol=1e-6, check_every=1)
    assert n_iter == ref.n_iter > 5
    assert hist[:, 1].tolist() == ref.history.value
    assert hist[:, 2].tolist() == ref.history.gap
    assert np.array_equal(start.w, ref.x.numpy())
    assert start.gap() == ref.gap


@pytest.mark.parametrize("solver", SOLVERS)
def test_a_private_matrix_signed_in_place_solves_as_the_copied_rows(solver, monkeypatch):
    # The solve over the matrix signed in place (private=True) is the solve over rows signed
    # as read, check by check; only a binary fit's own matrix is signed (one-vs-rest problems
    # share theirs).
    X, y = _data(m=80, seed=3)
    y_pm = np.where(y == 1, 1.0, -1.0)
    Xt = torch.tensor(X, dtype=torch.float32)
    op = SVMDualOperator(Xt, torch.from_numpy(y_pm), make_kernel("rbf", 0.2), 0.7)
    plain = SVMDualOperator(Xt, torch.ones(80, dtype=torch.float64), make_kernel("rbf", 0.2),
                            0.7)
    P = D.plain_kernel_matrix(plain)
    no_rows = np.zeros(0, dtype=np.int64)
    diag = P.diagonal().astype(np.float64) + op._inv_c_np  # K_ii + 1 + 1/C_i
    variant = D.VARIANTS[solver]
    runs = []
    for private in (False, True):
        src = D.full_source(P.copy())
        start = F._start(src, no_rows, op._y_np, op._inv_c_np, y_pm, None, tf.SVC().n_init,
                         0, keep_previous=variant == 5)
        run = D.solve(variant, src, no_rows, op._y_np, op._inv_c_np, diag, start,
                      max_iter=400, tol=1e-300, rtol=1e-6, check_every=1, private=private)
        assert np.array_equal(src[0], P) != private  # signed in place only when private
        runs.append((run, start))
    (a, sa), (b, sb) = runs
    assert a.n_iter == b.n_iter > 5 and a.status == b.status
    assert np.array_equal(a.history, b.history) and np.array_equal(a.counts, b.counts)
    for name in ("w", "s", "state"):
        assert np.array_equal(getattr(sa, name), getattr(sb, name)), name
    signed = []
    monkeypatch.setattr(D, "signed_matrix",
                        lambda *args: signed.append(1) or D._sign_matrix(*args) or args[0])
    tf.SVC(dense=True, solver=solver).fit(X, y)
    assert len(signed) == 1
    X3, y3 = _data(m=90, classes=3)
    tf.SVC(dense=True, solver=solver, multi_class="ovr").fit(X3, y3)
    tf.SVC(dense=True, solver=solver, multi_class="ovo").fit(X3, y3)
    assert len(signed) == 1


@pytest.mark.parametrize("kernel, degree", [("rbf", 3), ("linear", 3), ("poly", 2), ("poly", 3),
                                            ("poly", 5), ("poly", 7), ("sigmoid", 3)])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("sparse", [False, True])
def test_matrix_rows_are_the_lazy_columns(kernel, degree, dtype, sparse):
    rng = np.random.default_rng(5)
    X = rng.normal(size=(40, 7))
    X[rng.random(X.shape) < 0.3] = 0
    if kernel == "rbf" and not sparse:
        X = np.round(2 * X).clip(0)  # small integers: the uint8 feature-major storage
    Xt = torch.tensor(X, dtype=dtype)
    if sparse:
        Xt = Xt.to_sparse_csr()
    y = torch.tensor(np.where(rng.random(40) < 0.5, 1.0, -1.0))
    C = torch.tensor(rng.uniform(0.5, 2.0, size=40))
    op = SVMDualOperator(Xt, y, make_kernel(kernel, 0.3, degree, 0.5), C, dtype=dtype)
    ones = torch.ones(40, dtype=torch.float64)
    plain = SVMDualOperator(Xt, ones, make_kernel(kernel, 0.3, degree, 0.5), C, dtype=dtype)
    P = D.plain_kernel_matrix(plain)
    before = P.copy()
    src = D.full_source(P)
    buf = np.empty(40, dtype=P.dtype)
    no_rows = np.zeros(0, dtype=np.int64)
    for i in range(40):  # the problem's rows, signs and 1/C applied as they are read
        row = D.signed_row(*src, no_rows, op._y_np, op._inv_c_np, i, buf)
        assert np.array_equal(row, op.column(i).numpy()), i
    if M.row_source_ok(plain):  # a cache of 3 rows: misses, evictions and hits, same rows
        cache = M.cached_source(plain, 3)
        order = [0, 1, 0, 2, 3, 1, 39, 0, 5, 5, 2] + list(rng.permutation(40))
        for i in order:
            row = D.signed_row(*cache, no_rows, op._y_np, op._inv_c_np, int(i), buf)
            assert np.array_equal(row, op.column(int(i)).numpy()), i
        assert 3 < M.cache_stats(cache)["misses"] < len(order)
        where, slot_key = cache[1][0], cache[1][1]
        slots = np.flatnonzero(slot_key >= 0)  # every slot holds a row that points back at it
        assert slots.size == 3 and np.array_equal(where[slot_key[slots]], slots)
        assert (where >= 0).sum() == 3
    else:  # the float64 RBF: its exponential is NumPy's, outside compiled code
        assert kernel == "rbf" and dtype == torch.float64
    # A one-vs-one pair: rows and columns of its examples only, as an operator over them.
    rows = np.flatnonzero(rng.random(40) < 0.5)
    sub = SVMDualOperator(Xt.to_dense()[rows].to_sparse_csr() if sparse else Xt[rows], y[rows],
                          make_kernel(kernel, 0.3, degree, 0.5), C[rows], dtype=dtype)
    pair_buf = np.empty(rows.size, dtype=P.dtype)
    for a in range(rows.size):
        row = D.signed_row(*src, rows, sub._y_np, sub._inv_c_np, a, pair_buf)
        assert np.array_equal(row, sub.column(a).numpy()), a
    assert np.array_equal(P, before)  # reading never writes: every problem sees K + 1
    # A binary problem that owns its matrix signs it once, in place: the same rows, read there.
    signed = D.signed_matrix(P, op._y_np, op._inv_c_np)
    assert signed is P
    for i in range(40):
        assert np.array_equal(signed[i], op.column(i).numpy()), i


def test_row_cache_policy_is_the_column_cache():
    # The compiled cache is a declared twin of ColumnCache's admission policy: the same
    # requests give the same hits, misses and slot of every key, through the halvings too.
    from torchfw.utils.column_cache import ColumnCache

    rng = np.random.default_rng(8)
    m = 40
    X = torch.tensor(rng.normal(size=(m, 5)), dtype=torch.float32)
    plain = SVMDualOperator(X, torch.ones(m, dtype=torch.float64), make_kernel("rbf", 0.3), 1.0)
    cache = M.cached_source(plain, 5)
    reference = ColumnCache(5, m, n_keys=m, dtype=torch.float32, device="cpu")
    P = D.plain_kernel_matrix(plain)
    # a few popular keys among many rare ones, as a solver's atoms among its FW vertices
    keys = np.where(rng.random(800) < 0.6, rng.integers(0, 6, 800), rng.integers(0, m, 800))
    for key in keys.tolist():
        row = M.source_row(*cache, key)
        assert np.array_equal(row, P[key])
        if reference.lookup(key) is None:
            reference.insert(key)
        where = {k: int(s) for k, s in enumerate(cache[1][0]) if s >= 0}
        assert where == reference._where
        assert M.cache_stats(cache)["hits"] == reference.hits
    assert reference.misses == M.cache_stats(cache)["misses"] > 16 * 5  # frequencies halved


def test_a_replaced_stopping_rule_stops_both_paths():
    # benchmarks/reproduce.py stops SVC on an absolute gap by replacing the plan's stopping
    # numbers (gap_tol, rtol); the compiled path reads them from the plan as the lazy path's
    # optimizer does (it used to keep SVC's relative rule, silently, on every problem that
    # took it).
    from torchfw.svm._plan import fit_planned

    X, y = _data(m=120, seed=9)
    kw = dict(solver="swap", random_state=0)
    default = tf.SVC(**kw).fit(X, y)
    absolute = {"gap_tol": 1e-3, "rtol": 0.0}
    for cache in (200, _rows_budget(120, 15)):  # the whole matrix, and a cache of rows
        compiled = fit_planned(tf.SVC(cache_size=cache, **kw), X, y, **absolute)
        assert compiled.result_.gap <= 1e-3 < compiled.result_.history.gap[-2]
        assert compiled.result_.n_iter != default.result_.n_iter
        _assert_same_fit(compiled,
                         fit_planned(tf.SVC(dense=False, cache_size=cache, **kw), X, y,
                                     **absolute))


def test_switch_follows_the_byte_budget():
    X, y = _data(m=200)
    full = tf.SVC(random_state=0).fit(X, y)
    assert full.result_.info["execution"] == "dense"
    assert full.result_.info["matrix_bytes"] == 200 * 200 * 4
    assert "cached_rows" not in full.result_.info
    # 200 x 200 float32 = 0.15 MB: a smaller budget caches the rows it holds (131 of 800 B).
    small = tf.SVC(cache_size=0.1, random_state=0).fit(X, y)
    assert small.result_.info["execution"] == "dense"
    assert small.result_.info["cached_rows"] == int(0.1 * 2**20 // 800)
    assert np.array_equal(small.dual_coef_, full.dual_coef_)
    assert tf.SVC(dense=False).fit(X, y).result_.info["execution"] != "dense"
    # The float64 RBF (NumPy's exponential) over the budget: the lazy path.
    f64 = tf.SVC(cache_size=0.1, dtype=torch.float64).fit(X, y)
    assert f64.result_.info["execution"] != "dense"
    assert tf.SVC(cache_size=0.1, dtype=torch.float64, kernel="poly").fit(X, y) \
        .result_.info["execution"] == "dense"
    assert tf.SVC(solver="fc").fit(X, y).result_.info["execution"] != "dense"
    with pytest.raises(ValueError, match="dense=True"):
        tf.SVC(dense=True, solver="fc").fit(X, y)
    with pytest.raises(ValueError, match="dense must be"):
        tf.SVC(dense="yes").fit(X, y)


@pytest.mark.parametrize("solver", ["swap", "pairwise"])
def test_one_large_binary_problem_reads_a_cache_with_room_for_every_row(solver):
    from torchfw.svm._matrix import ROWS_FROM

    X, y = _data(m=ROWS_FROM, d=4, seed=3)
    kw = dict(solver=solver, random_state=0, tol=0.05)
    cached = tf.SVC(**kw).fit(X, y)
    info = cached.result_.info
    # A cache, though the full matrix fits cache_size: the rows the solve visits, each once.
    assert info["execution"] == "dense" and info["cached_rows"] == ROWS_FROM
    assert 0 < info["misses"] < ROWS_FROM and info["hits"] > info["misses"]
    _assert_same_fit(cached, tf.SVC(dense=False, **kw).fit(X, y))
    # Below ROWS_FROM, dense=True, or several problems: the full matrix.
    small = tf.SVC(**kw).fit(X[:ROWS_FROM - 1], y[:ROWS_FROM - 1])
    assert "cached_rows" not in small.result_.info
    assert "cached_rows" not in tf.SVC(dense=True, **kw).fit(X, y).result_.info
    three = tf.SVC(multi_class="ovr", **kw).fit(X, np.digitize(X[:, 1], [-0.5, 0.5]))
    assert all("cached_rows" not in r.info for r in three.result_)


@pytest.mark.parametrize("solver", ["swap", "partan"])
def test_one_vs_one_pairs_take_the_compiled_path_one_matrix_each(solver):
    # A cache_size too small for the m x m matrix but large enough for every pair's: the
    # compiled path builds each pair's matrix and still finds the lazy path's iterates.
    X, y = _data(m=300, classes=4, seed=3)
    kw = dict(solver=solver, multi_class="ovo", random_state=0, class_weight="balanced")
    m_bytes = 300 * 300 * 4
    pair_max = max(int(np.isin(y, [a, b]).sum()) for a in range(4) for b in range(a + 1, 4))
    cache = (pair_max * pair_max * 4 + m_bytes) / 2 / 2**20  # between the two
    assert pair_max ** 2 * 4 < cache * 2**20 < m_bytes
    dense = tf.SVC(cache_size=cache, **kw).fit(X, y)
    lazy = tf.SVC(dense=False, cache_size=cache, **kw).fit(X, y)
    _assert_same_fit(dense, lazy)
    assert all(r.info["matrix_bytes"] <= cache * 2**20 for r in dense.result_)


def test_one_vs_one_budget_is_per_pair_as_on_the_lazy_path():
    # max_iter defaults to 100 iterations per example of the problem: a pair's own examples.
    # At tol 1e-300 (a gap of zero in floating point) FW runs out of that budget, corrective
    # steps and all; both paths stop at the same iteration.
    X, y = _data(m=60, classes=3, seed=8)
    kw = dict(solver="fw", multi_class="ovo", tol=1e-300, random_state=0)
    with pytest.warns(Warning):
        dense = tf.SVC(**kw).fit(X, y)
    with pytest.warns(Warning):
        lazy = tf.SVC(dense=False, **kw).fit(X, y)
    sizes = [int(np.isin(y, pair).sum()) for pair in ((0, 1), (0, 2), (1, 2))]
    assert [r.n_iter for r in dense.result_] == [100 * n for n in sizes]
    _assert_same_fit(dense, lazy)


def test_problem_results_lists_every_problem_of_every_layout():
    # One binary problem: one Result; one-vs-one pairs solved in compiled blocks: a sequence
    # that builds each pair's Result on read (not a list, so code that tested for a list saw
    # one problem and read attributes a Result has and the sequence has not).
    X, y = _data(m=120, classes=3, seed=3)
    pairs = tf.SVC(dense=True, random_state=0, tol=1e-2).fit(X, y)
    assert not isinstance(pairs.result_, list)
    results = problem_results(pairs.result_)
    assert len(results) == 3 and all(isinstance(r, tf.Result) for r in results)
    assert [r.n_iter for r in results] == list(np.asarray(pairs.n_iter_))
    Xb, yb = _data()
    binary = tf.SVC(random_state=0).fit(Xb, yb)
    assert problem_results(binary.result_) == [binary.result_]
    assert problem_results([binary.result_]) == [binary.result_]
