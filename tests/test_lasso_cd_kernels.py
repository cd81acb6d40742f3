"""The compiled kernels of Lasso coordinate descent (torchfw.lasso._cd_kernels) against NumPy."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from torchfw.lasso._cd_kernels import _correlation_pass, _gram_block, _smallest
from torchfw.lasso.cd import CDDesign

sp = pytest.importorskip("scipy.sparse")


def _design(sparse: bool, seed: int, weighted: bool = False) -> tuple[CDDesign, np.ndarray]:
    """A CDDesign of a random 40 x 60 design and the centred (weighted) design it stands for."""
    rng = np.random.default_rng(seed)
    n, p = 40, 60
    X = sp.random(n, p, density=0.25, random_state=seed, format="csc",
                  data_rvs=lambda m: rng.normal(1.0, 1.0, m)).toarray()
    y = rng.normal(size=n)
    s = rng.uniform(0.5, 2.0, n) if weighted else None
    Xin = sp.csc_matrix(X) if sparse else torch.from_numpy(X)
    design = CDDesign(Xin, torch.from_numpy(y), sample_weight=s)
    w = np.ones(n) if s is None else s * n / s.sum()
    Xc = (X - (w @ X) / n) * np.sqrt(w)[:, None]
    return design, Xc


def _gram(design: CDDesign, feats, old_feats, old_G, slot):
    return _gram_block(design.sparse, design.Xd, design.indptr, design.indices, design.vals,
                       design.means, np.asarray(feats, dtype=np.int64), design.n_samples,
                       np.asarray(old_feats, dtype=np.int64), old_G, slot)


@pytest.mark.parametrize("sparse", [True, False])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("joining", [[2, 30, 59], [0, 2, 3, 5, 8, 11, 12, 30, 31, 44, 50, 59]])
def test_gram_block_reuses_the_previous_block_and_computes_only_new_rows(sparse, weighted,
                                                                         joining):
    # A few new features (one pass over the set's columns) or many (row lists).
    design, Xc = _design(sparse, seed=3, weighted=weighted)
    p = Xc.shape[1]
    slot = np.full(p, -1, dtype=np.int64)
    first = [1, 4, 7, 9, 20, 33, 41, 58]
    G1, work1 = _gram(design, first, [], np.empty((0, 0)), slot)
    np.testing.assert_allclose(G1, Xc[:, first].T @ Xc[:, first], atol=1e-10)
    assert (slot[first] == np.arange(len(first))).all() and (np.delete(slot, first) == -1).all()
    # Features 1, 9, 58 leave; the joining ones come in between the old ones: only their rows
    # are computed.
    second = sorted([4, 7, 20, 33, 41] + joining)
    G_bad = G1.copy()
    a, b = first.index(7), first.index(20)
    G_bad[a, b] = G_bad[b, a] = 1e6  # the pair (7, 20): kept, so copied, never recomputed
    G2, work2 = _gram(design, second, first, G_bad, slot)
    expected = Xc[:, second].T @ Xc[:, second]
    a, b = second.index(7), second.index(20)
    assert G2[a, b] == 1e6 and G2[b, a] == 1e6
    G2[a, b] = G2[b, a] = expected[a, b]
    np.testing.assert_allclose(G2, expected, atol=1e-10)
    assert (G2 == G2.T).all()
    assert 0 < work2
    assert (slot[second] == np.arange(len(second))).all()
    assert (np.delete(slot, second) == -1).all()
    # The same features again: nothing to compute.
    G3, work3 = _gram(design, second, second, G2, slot)
    assert work3 == 0 and (G3 == G2).all()


def test_smallest_selects_as_a_full_sort_does():
    rng = np.random.default_rng(0)
    for trial in range(50):
        p = int(rng.integers(1, 300))
        score = rng.normal(size=p)
        score[rng.random(p) < 0.3] = np.inf  # screened
        score[rng.random(p) < 0.1] = -1.0  # the support: tied
        if trial % 7 == 0:
            score[rng.random(p) < 0.1] = np.nan  # a column with non-finite values
        if trial % 5 == 0:
            score = np.round(score, 1)  # many ties
        finite = int(np.isfinite(score).sum())
        n_nan = int(np.isnan(score).sum())
        for k in {0, 1, finite // 2, finite, finite + n_nan}:
            got = _smallest(score, k)
            assert (np.diff(got) > 0).all()  # increasing indices
            assert len(got) == k and not np.isinf(score[got]).any()
            # The k smallest values (NaN last), whichever of the tied indices were taken.
            order = np.sort(np.where(np.isnan(score), np.inf, score))[:k]
            np.testing.assert_array_equal(np.sort(np.where(np.isnan(score[got]), np.inf,
                                                           score[got])), order)


@pytest.mark.parametrize("sparse", [True, False])
def test_correlation_pass_defers_screened_features(sparse):
    design, Xc = _design(sparse, seed=5)
    n, p = Xc.shape
    rng = np.random.default_rng(1)
    r = rng.normal(size=n)
    r -= r.mean()  # a residual of the centred problem: R0 = r, c = 0
    S = float(design.v @ r)
    screened = rng.random(p) < 0.4
    xtr = np.full(p, np.nan)
    deferred = np.empty(p, dtype=np.int64)
    args = (design.sparse, design.Xd, design.indptr, design.indices, design.vals, design.means,
            design.norms2, screened)
    dual, n_def, work = _correlation_pass(*args, False, False, design.xty, r, S, xtr, deferred)
    np.testing.assert_array_equal(np.sort(deferred[:n_def]), np.flatnonzero(screened))
    np.testing.assert_allclose(xtr[~screened], (Xc.T @ r)[~screened], atol=1e-10)
    assert dual == pytest.approx(np.abs(Xc.T @ r)[~screened].max())
    assert work == int(np.diff(design.indptr)[~screened].sum())
    dual, n_def, _ = _correlation_pass(*args, True, False, design.xty, r, S, xtr, deferred)
    assert n_def == 0 and dual == pytest.approx(np.abs(Xc.T @ r).max())
    dual, n_def, work = _correlation_pass(*args, False, True, design.xty, r, S, xtr, deferred)
    assert n_def == 0 and work == 0
    np.testing.assert_array_equal(xtr, design.xty)


@pytest.mark.parametrize("weighted", [False, True])
def test_column_sums_scale_by_the_weights_and_count_bad_row_indices(weighted):
    from torchfw.lasso._cd_kernels import _column_sums

    rng = np.random.default_rng(2)
    Z = sp.random(30, 12, density=0.3, random_state=2, format="csc")
    v = rng.uniform(0.5, 1.5, 30) if weighted else np.ones(30)
    y = rng.normal(size=30)
    indices = Z.indices.astype(np.int32)
    vals, sq, vz, zy, n_bad = _column_sums(Z.indptr.astype(np.int64), indices, Z.data, v, y,
                                           weighted)
    Zw = np.diag(v) @ Z.toarray()
    assert n_bad == 0 and (vals is Z.data) == (not weighted)
    np.testing.assert_allclose(sp.csc_matrix((vals, Z.indices, Z.indptr), Z.shape).toarray(), Zw)
    np.testing.assert_allclose(sq, (Zw ** 2).sum(axis=0))
    np.testing.assert_allclose(vz, v @ Zw)
    np.testing.assert_allclose(zy, Zw.T @ y)
    indices[[0, 5]] = [30, -1]
    assert _column_sums(Z.indptr.astype(np.int64), indices, Z.data, v, y, weighted)[4] == 2


def test_scipy_design_is_checked_in_the_statistics_pass():
    from torchfw import Lasso

    rng = np.random.default_rng(3)
    X = sp.random(40, 30, density=0.3, random_state=3, format="csc")
    y = rng.normal(size=40)
    bad = X.copy()
    bad.indices[4] = 40  # a row outside the matrix: rejected before any kernel reads it
    with pytest.raises(ValueError, match=r"row indices outside \[0, 40\)"):
        Lasso(alpha=0.01).fit(bad, y)
    for value, match in ((np.nan, "NaN"), (np.inf, "NaN or infinite")):
        bad = X.copy()
        bad.data[7] = value
        with pytest.raises(ValueError, match=match):
            Lasso(alpha=0.01).fit(bad, y)
        with pytest.raises(ValueError, match=match):
            Lasso(alpha=0.01).fit(bad, y, sample_weight=rng.uniform(0.5, 2, 40))
    huge = X.copy()
    huge.data[7] = 1e200  # finite, its square is not: accepted as before
    with pytest.warns(Warning):
        Lasso(alpha=0.01, max_iter=3).fit(huge, y)


def test_gram_block_over_several_blocks_of_rows():
    # More rows than a block of _gram_rows_sparse: lists built block by block.
    rng = np.random.default_rng(7)
    n, p = 2600, 40
    X = sp.random(n, p, density=0.05, random_state=7, format="csc",
                  data_rvs=lambda m: rng.normal(0.0, 1.0, m))
    design = CDDesign(X, torch.from_numpy(rng.normal(size=n)))
    Xc = X.toarray() - X.toarray().mean(axis=0)
    slot = np.full(p, -1, dtype=np.int64)
    first = list(range(0, 40, 3))
    G1, _ = _gram(design, first, [], np.empty((0, 0)), slot)
    np.testing.assert_allclose(G1, Xc[:, first].T @ Xc[:, first], atol=1e-9)
    second = list(range(0, 40, 2))  # 14 new features: row lists
    G2, _ = _gram(design, second, first, G1, slot)
    np.testing.assert_allclose(G2, Xc[:, second].T @ Xc[:, second], atol=1e-9)
