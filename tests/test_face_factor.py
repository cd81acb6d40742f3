"""The corrective step's factorization (:mod:`torchfw.optimizers._face`) taken in row blocks.

* :func:`~torchfw.optimizers._face.extend_factor` works on :data:`~torchfw.optimizers._face.
  FACTOR_ROWS` rows at a time, four rows per pass over the factor; every entry must be the
  row-by-row factor's bits (same sums in the same order), from scratch and as an extension,
  for sizes that are not multiples of the block or of four;
* a failing pivot inside a block returns its row, with the rows after it still holding
  :math:`G` (what :func:`~torchfw.optimizers._face.extend_skipping` moves up);
* :func:`~torchfw.optimizers._face.prune` refactors only the kept rows' new columns: the
  result is the bits of factoring the kept face from its old factor;
* on random ill-conditioned quadratics of 60 atoms the step's result satisfies the simplex
  KKT conditions (an independent certificate of the unique optimum) to 1e-8;
* the forward vectors kept between solves (:func:`~torchfw.optimizers._face.prune_kept`,
  :func:`~torchfw.optimizers._face.minor_cycle_kept`) are those of the factor they are used
  with: carried through a downdate they are the downdated factor's fresh solves, and a
  correction's rounds (minor cycle, extension, prune, minor cycle) give the minimizer of a
  fresh factor of the final face.
"""

from __future__ import annotations

import numpy as np
import pytest

from torchfw.optimizers import _face


def _spd(k: int, cond: float, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    Q, _ = np.linalg.qr(rng.standard_normal((k, k)))
    return (Q * np.geomspace(1.0, 1.0 / cond, k)) @ Q.T


def _rowwise(L: np.ndarray, k0: int, k: int) -> int:
    """The row-by-row factor in plain Python: the reference order of every sum."""
    cutoff = (k + 1) * 2.220446049250313e-16 * 16.0  # of the row's own diagonal entry
    for a in range(k0, k):
        for b in range(a):
            L[a, b] = (L[a, b] - _face._dot4_py(L[a], L[b], b)) / L[b, b]
        acc = L[a, a] - _face._dot4_py(L[a], L[a], a)
        if not acc > cutoff * L[a, a]:
            return a
        L[a, a] = np.sqrt(acc)
        L[a, a + 1:] = 0.0
    L[:k0, k0:k] = 0.0
    return k


@pytest.mark.parametrize("k,k0", [(1, 0), (3, 0), (70, 0), (70, 37), (53, 16), (16, 15)])
def test_blocked_factor_is_the_row_by_row_factor_bit_for_bit(k, k0):
    G = _spd(k, 1e6, k + k0)
    A = np.zeros((k + 3, k + 3))
    A[:k, :k] = np.tril(G)
    B = A.copy()
    assert _rowwise(A, 0, k0) == k0 and _face.extend_factor(B, 0, k0) == k0
    assert np.array_equal(A, B)
    assert _rowwise(A, k0, k) == k
    assert _face.extend_factor(B, k0, k) == k
    assert np.array_equal(A, B)
    assert np.allclose(A[:k, :k] @ A[:k, :k].T, G, atol=1e-10)


def test_failing_pivot_inside_a_block_leaves_the_later_rows_as_G():
    k, bad = 45, 2 * _face.FACTOR_ROWS + 5  # in the third block, after a full pass over two
    X = np.random.default_rng(1).standard_normal((k, k + 5))
    X[bad] = X[7]  # row ``bad`` of G repeats row 7: no positive pivot there
    G = X @ X.T
    A = np.tril(G).copy()
    B = A.copy()
    assert _rowwise(A, 0, k) == bad
    assert _face.extend_factor(B, 0, k) == bad
    assert np.array_equal(A[:bad], B[:bad])
    assert np.array_equal(B[bad + 1:], np.tril(G)[bad + 1:])


@pytest.mark.parametrize("gemm", [False, True])
def test_pivot_test_is_invariant_to_a_diagonal_scaling(gemm):
    # A polynomial kernel on raw features: diagonal entries over many orders of magnitude
    # (raw breast cancer, degree 5: 5e19 to 9e31). The factor of D G D is D L, and a pivot
    # is judged against its own row's diagonal: against the largest diagonal entry, the
    # rows of small norm failed and no correction was taken.
    k = 2 * _face.GEMM_ATOMS if gemm else 40
    G = _spd(k, 1e4, 3)
    d = np.geomspace(1.0, 1e-7, k)
    S = G * d[:, None] * d[None, :]
    A, B = np.tril(G).copy(), np.tril(S).copy()
    assert _face.extend_factor(A, 0, k) == k
    assert _face.extend_factor(B, 0, k) == k
    assert np.allclose(B[:k, :k] / d[:, None], A, atol=1e-8)
    # A row dependent on the earlier ones still fails, at any scale.
    X = np.random.default_rng(2).standard_normal((k, k + 5))
    X[k - 3] = X[1] * 1e-6
    C = np.tril(X @ X.T).copy()
    assert _face.extend_factor(C, 0, k) == k - 3


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_prune_keeps_the_bits_of_refactoring_the_kept_face(seed):
    # Old face: 30 atoms; 25 added at weight 0, of which the minimizer drops some.
    rng = np.random.default_rng(seed)
    k0, k = 30, 55
    X = rng.standard_normal((k, 80))
    G = X @ X.T + 1e-3 * np.eye(k)
    c = rng.standard_normal(k) * 5.0
    L = np.zeros((k, k))
    L[:k, :k] = np.tril(G)
    assert _face.extend_factor(L, 0, k) == k
    Gb = np.tril(G)[k0:k].copy()
    x = np.zeros(k)
    x[:k0] = rng.random(k0) + 0.1
    x /= x.sum()
    idx = np.arange(k, dtype=np.int64)
    kept = _face.prune(L, Gb, k0, k0, k, x, c.copy(), True, idx)
    assert k0 < kept < k  # something was dropped, something added
    order = idx[:kept]
    R = np.zeros((k, k))
    R[:kept, :kept] = np.tril(G[np.ix_(order, order)])
    assert _face.extend_factor(R, 0, kept) == kept
    assert np.array_equal(L[:kept, :kept], R[:kept, :kept])


def _wolfe(G, c):
    """Wolfe's algorithm with the library's minor cycle: minimize on the face
    (:func:`~torchfw.optimizers._face.face_minimize`), then add the atom whose gradient is
    most below the multiplier, until none is."""
    k = G.shape[0]
    face = [int(np.argmin(np.diag(G) / 2 + c))]
    z = np.zeros(k)
    z[face] = 1.0
    for _ in range(10 * k):
        zf = _face.face_minimize(G[np.ix_(face, face)].copy(), z[face], c[face])
        assert zf is not None
        z = np.zeros(k)
        z[face] = zf
        face = [a for a in face if z[a] > 0]
        g = G @ z + c
        j = int(np.argmin(g))
        if g[j] >= z @ g - 1e-10 * np.abs(g).max():  # the face solve's own rounding
            return z
        face.append(j)
        z[j] = 1e-300  # enters at (numerically) zero weight: the minor cycle starts from z
        z /= z.sum()
    raise AssertionError("no convergence")


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("linear", [False, True])
def test_minor_cycle_reaches_the_simplex_kkt_point_on_ill_conditioned_problems(seed, linear):
    # min 1/2 z'Gz + c'z over the simplex, G of condition 1e10 on 60 atoms. The optimum is
    # the unique z >= 0, sum 1, whose gradient g = Gz + c equals the multiplier on the support
    # and is not below it elsewhere; the dense KKT system on that support, solved by NumPy,
    # must give the same z to 1e-8.
    k = 60
    G = _spd(k, 1e10, seed)
    rng = np.random.default_rng(seed + 100)
    c = rng.standard_normal(k) * 1e-2 if linear else np.zeros(k)
    z = _wolfe(G, c)
    assert z.min() >= 0.0 and abs(z.sum() - 1.0) < 1e-12
    g = G @ z + c
    lam = z @ g
    scale = np.abs(g).max()
    S = np.flatnonzero(z > 0)
    assert np.abs(g[S] - lam).max() <= 1e-8 * scale
    assert (g >= lam - 1e-8 * scale).all()
    kkt = np.zeros((S.size + 1, S.size + 1))
    kkt[:S.size, :S.size] = G[np.ix_(S, S)]
    kkt[:S.size, S.size] = kkt[S.size, :S.size] = 1.0
    ref = np.linalg.solve(kkt, np.concatenate([-c[S], [1.0]]))[:S.size]
    assert np.abs(z[S] - ref).max() <= 1e-8
    assert 1 < S.size < k  # a real active set: some atoms in, some out


# Large faces: the block-product factor (GEMM_ATOMS atoms and more), the row-block downdate and
# the solves, against NumPy.

@pytest.mark.parametrize("k,k0,c0", [(300, 0, 0), (333, 100, 0), (400, 383, 0), (401, 200, 200),
                                     (520, 257, 64)])
def test_block_product_factor_matches_numpy(k, k0, c0):
    assert k >= _face.GEMM_ATOMS and k - k0 > _face.FACTOR_ROWS  # the block-product path
    G = _spd(k, 1e8, k + k0)
    ref = np.linalg.cholesky(G)
    L = np.zeros((k + 7, k + 7))
    L[:k, :k] = np.tril(G)
    L[:k0, :k0] = ref[:k0, :k0]  # the old face's factor
    L[k0:k, :c0] = ref[k0:k, :c0]  # columns the caller kept (prune)
    L[:k, k:] = 7.0  # beyond the face: the new rows are zeroed to the end, as row by row
    assert _face._factor_rows(L, k0, k, c0) == k
    F = L[:k, :k]
    assert np.abs(F @ F.T - G).max() <= 1e-13 * np.abs(G).max()  # backward error: eps-level
    assert np.abs(F - ref).max() <= 1e-8 * np.abs(ref).max()  # forward: condition 1e8
    np.testing.assert_array_equal(np.triu(F, 1), 0.0)
    assert not L[k0:k, k:].any() and (L[:k0, k:] == 7.0).all()


def test_block_product_factor_failing_pivot_leaves_the_later_rows_as_G():
    k = 2 * _face.GEMM_ATOMS
    bad = k - _face.GEMM_ROWS - 5  # inside a block, after full blocks of products
    X = np.random.default_rng(3).standard_normal((k, k + 5))
    X[bad] = X[11]
    G = X @ X.T
    B = np.tril(G).copy()
    assert _face.extend_factor(B, 0, k) == bad
    np.testing.assert_allclose(B[:bad, :bad] @ B[:bad, :bad].T, G[:bad, :bad],
                               atol=1e-9 * np.abs(G).max())
    assert np.array_equal(B[bad + 1:], np.tril(G)[bad + 1:])


@pytest.mark.parametrize("r", [0, 1, 15, 16, 17, 63, 98, 99])
def test_downdate_across_row_blocks_matches_numpy(r):
    k = 100  # several FACTOR_ROWS blocks: rotations defined above a block act on it
    G = _spd(k, 1e6, r)
    L = np.zeros((k + 3, k + 3))
    L[:k, :k] = np.linalg.cholesky(G)
    _face.remove_position(L, k, r)
    keep = [i for i in range(k) if i != r]
    np.testing.assert_allclose(L[:k - 1, :k - 1] @ L[:k - 1, :k - 1].T, G[np.ix_(keep, keep)],
                               atol=1e-12)
    np.testing.assert_array_equal(np.triu(L[:k - 1, :k - 1], 1), 0.0)
    assert not L[:, k - 1:].any() and not L[k - 1:, :].any()


@pytest.mark.parametrize("linear", [False, True])
def test_face_minimizer_solves_the_kkt_system(linear):
    k = 150
    G = _spd(k, 1e6, 5)
    c = np.random.default_rng(5).standard_normal(k) if linear else np.zeros(k)
    L = np.zeros((k + 4, k + 4))
    L[:k, :k] = np.linalg.cholesky(G)
    z, u, work = np.empty(k), np.empty(k), np.empty(k)
    assert _face.face_minimizer(L, k, c, linear, z, u, work)
    kkt = np.zeros((k + 1, k + 1))
    kkt[:k, :k] = G
    kkt[:k, k] = kkt[k, :k] = 1.0
    ref = np.linalg.solve(kkt, np.concatenate([-c, [1.0]]))[:k]
    assert np.abs(z - ref).max() <= 1e-8 * max(1.0, np.abs(ref).max())


# The forward vectors kept between solves (prune_kept, minor_cycle_kept): every kept entry must
# be the forward solve of the factor it is used with -- after a downdate, after a prune that
# refactors, after an extension -- or the minimizer is that of another face.

def _forward(L, k, c):
    """Fresh forward solves of L[:k, :k] for 1 and -c (NumPy)."""
    F = np.tril(L[:k, :k])
    return np.linalg.solve(F, np.ones(k)), np.linalg.solve(F, -c[:k])


@pytest.mark.parametrize("r", [0, 5, 16, 17, 40, 69])
def test_downdate_carries_the_forward_vectors(r):
    k = 70
    G = _spd(k, 1e6, r + 7)
    c = np.random.default_rng(r).standard_normal(k)
    L = np.zeros((k + 2, k + 2))
    L[:k, :k] = np.linalg.cholesky(G)
    Y = np.zeros((2, k + 2))
    _face._forward_rows(L, 0, k, c, True, Y)
    y1, yc = _forward(L, k, c)
    np.testing.assert_allclose(Y[0, :k], y1, rtol=1e-9, atol=1e-12)
    _face._remove_position_kept(L, k, r, Y)
    c2 = np.delete(c, r)
    y1, yc = _forward(L, k - 1, c2)  # of the downdated factor
    scale = np.abs(y1).max()
    assert np.abs(Y[0, :k - 1] - y1).max() <= 1e-10 * scale
    assert np.abs(Y[1, :k - 1] - yc).max() <= 1e-10 * np.abs(yc).max()


def _face_problem(seed, k0, k):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((k, 90))
    G = X @ X.T + 1e-4 * np.eye(k)
    c = rng.standard_normal(k) * 5.0
    x = np.zeros(k)
    x[:k0] = rng.random(k0) + 0.1
    x /= x.sum()
    return G, c, x


@pytest.mark.parametrize("seed", range(4))
def test_kept_forward_vectors_give_the_fresh_factor_result(seed):
    # A correction's rounds: factor the old face (30 atoms), solve on it (forward vectors of
    # its rows kept), extend by 25 zero-weight atoms, prune, minor cycle. The result must be
    # the minimizer computed from scratch: a fresh factor of the final face, fresh solves.
    k0, k = 30, 55
    G, c, x = _face_problem(seed, k0, k)
    L = np.zeros((k, k))
    L[:k0, :k0] = np.tril(G[:k0, :k0])
    assert _face.extend_factor(L, 0, k0) == k0
    Y = np.zeros((2, k))
    z = np.empty(k)
    solved = np.zeros(2, dtype=np.int64)
    # The old face's own minimizer (the last round): leaves the vectors of its rows.
    x_old = x[:k0].copy()
    idx_old = np.arange(k0, dtype=np.int64)
    kept0 = _face.minor_cycle_kept(L, k0, x_old, c[:k0].copy(), True, idx_old, Y, z, solved)
    assert 1 < kept0 <= k0 and solved[0] == kept0
    # The next round: the kept atoms, then the new ones, extended.
    order = np.concatenate([idx_old[:kept0], np.arange(k0, k)])
    kk = order.size
    Gf = G[np.ix_(order, order)]
    cf = c[order].copy()
    for a in range(kept0, kk):
        L[a, :a + 1] = Gf[a, :a + 1]
    Gb = np.tril(Gf)[kept0:kk].copy()
    assert _face.extend_factor(L, kept0, kk) == kk
    xf = np.zeros(kk)
    xf[:kept0] = x_old[:kept0]
    idx = order.astype(np.int64).copy()
    solved[0] = min(solved[0], kept0)
    k1 = _face.prune_kept(L, Gb, kept0, kept0, kk, xf, cf, True, idx, Y, z, solved)
    assert k1 > kept0
    face = idx[:k1].copy()  # the face the minor cycle minimizes over
    kept = _face.minor_cycle_kept(L, k1, xf, cf, True, idx, Y, z, solved)
    assert kept > 1
    got = np.zeros(k)
    got[idx[:kept]] = xf[:kept]
    # The same rounds from scratch: a fresh factor of the extended face, no kept vectors.
    R = np.zeros((kk, kk))
    R[:, :] = np.tril(Gf)
    assert _face.extend_factor(R, 0, kk) == kk
    xr = np.zeros(kk)
    xr[:kept0] = x_old[:kept0]
    idr = order.astype(np.int64).copy()
    cr = c[order].copy()
    Gbr = np.tril(Gf)[kept0:kk].copy()
    kr = _face.prune(R, Gbr, kept0, kept0, kk, xr, cr, True, idr)
    assert kr == k1 and np.array_equal(idr[:kr], face)
    keptr = _face.minor_cycle(R, kr, xr, cr, True, idr)
    want = np.zeros(k)
    want[idr[:keptr]] = xr[:keptr]
    assert np.abs(got - want).max() <= 1e-10
    # and it is the simplex minimizer on that face (KKT: an independent certificate)
    Gs = G[np.ix_(face, face)]
    zs = got[face]
    g = Gs @ zs + c[face]
    lam = zs @ g
    S = zs > 0
    scale = np.abs(g).max()
    assert np.abs(g[S] - lam).max() <= 1e-9 * scale and (g >= lam - 1e-9 * scale).all()
    assert 1 < S.sum() < face.size  # atoms left in the minor cycle (the carried vectors used)


def test_stale_forward_vectors_change_the_result():
    # The contract is load-bearing: claiming rows valid that belong to another factor moves
    # the minimizer (so the tests above would catch a caller that forgot to reset them).
    k = 40
    G, c, x = _face_problem(9, k, k)
    L = np.zeros((k, k))
    L[:, :] = np.tril(G)
    assert _face.extend_factor(L, 0, k) == k
    z_ok = np.empty(k)
    u = np.empty(k)
    Y = np.zeros((2, k))
    assert _face._face_minimizer_kept(L, k, c, True, Y, 0, z_ok, u)
    Y[:, k // 2:] *= 1.01  # stale entries
    z_bad = np.empty(k)
    _face._face_minimizer_kept(L, k, c, True, Y, k, z_bad, u)
    assert np.abs(z_bad - z_ok).max() > 1e-6
