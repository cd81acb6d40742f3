"""Compiled kernels of Lasso coordinate descent: column access, residual statistics, the
certified gap, Gram sweeps over a support, and the design's layout conversions.

The mathematics and the solver they serve are in :mod:`torchfw.lasso.cd`; the solver's loop is
:mod:`torchfw.lasso._cd_solve`. A design is passed as ``(sparse, Xd, indptr, indices, vals)``:
a centred column-major dense array, or the CSC arrays of an uncentred sparse one whose column
means ``means`` are removed implicitly (the residual is :math:`R_0 + c v`, see the solver).
In both, column ``j`` has ``indptr[j + 1] - indptr[j]`` entries (a dense design's ``indptr`` is
``n * arange(p + 1)``): the kernels count their work so. Without numba the functions run in
the interpreter.
"""

from __future__ import annotations

import math

import numpy as np

from ..utils.jit import njit

__all__: list[str] = []



def _soft_threshold(z, t):
    r"""The Lasso's coordinate minimizer: :math:`\operatorname{sign}(z) \max(|z| - t, 0)`."""
    if z > t:
        return z - t
    if z < -t:
        return z + t
    return 0.0

def _col_dot(sparse, Xd, indptr, indices, vals, j, R0):
    """:math:`Z_j^\\top R_0` for column ``j`` of the stored (uncentred if sparse) design."""
    s = 0.0
    if sparse:
        for k in range(indptr[j], indptr[j + 1]):
            s += vals[k] * R0[indices[k]]
    else:
        for i in range(R0.shape[0]):
            s += Xd[i, j] * R0[i]
    return s


def _col_axpy(sparse, Xd, indptr, indices, vals, j, a, R0):
    """:math:`R_0 \\leftarrow R_0 + a Z_j`."""
    if sparse:
        for k in range(indptr[j], indptr[j + 1]):
            R0[indices[k]] += a * vals[k]
    else:
        for i in range(R0.shape[0]):
            R0[i] += a * Xd[i, j]


def _correlation_pass(sparse, Xd, indptr, indices, vals, means, norms2, screened, refresh,
                      cold, xty, R0, S, xtr, deferred):
    """:math:`x_j^\\top r` into ``xtr[j]`` for every unscreened feature (all of them if
    ``refresh``), :math:`r = R_0 + c v`; the screened ones are listed in ``deferred`` instead.
    ``cold``: the residual is :math:`y_c`, whose correlations ``xty`` are known.

    Returns ``(max_j |x_j^T r|`` over the features computed, the number deferred, the entries
    read). A function of its own: written inline in the solver's loop, the same pass took
    twice as long (5.9 against 3.0 ms CPU over news20's 1.27 million entries).
    """
    p = xtr.shape[0]
    dual_norm = 0.0
    n_def = 0
    work = 0
    for j in range(p):
        if norms2[j] > 0.0:
            if cold:
                xtr[j] = xty[j]
            elif screened[j] and not refresh:
                deferred[n_def] = j
                n_def += 1
                continue
            else:
                xtr[j] = _col_dot(sparse, Xd, indptr, indices, vals, j, R0) - means[j] * S
                work += indptr[j + 1] - indptr[j]
            a = abs(xtr[j])
            if a > dual_norm:
                dual_norm = a
        else:
            xtr[j] = 0.0
    return dual_norm, n_def, work


def _residual(sparse, Xd, indptr, indices, vals, means, v, y, w, R0):
    """Fresh :math:`R_0 = y - Zw` into ``R0``; returns ``(c, S)`` = (:math:`\\bar x^\\top w`,
    :math:`v^\\top R_0`)."""
    for i in range(y.shape[0]):
        R0[i] = y[i]
    c = 0.0
    for j in range(w.shape[0]):
        if w[j] != 0.0:
            _col_axpy(sparse, Xd, indptr, indices, vals, j, -w[j], R0)
            c += means[j] * w[j]
    S = 0.0
    for i in range(y.shape[0]):
        S += v[i] * R0[i]
    return c, S


def _stats(R0, c, S, y):
    """:math:`\\|r\\|^2` and :math:`r^\\top y_c` of :math:`r = R_0 + c v` (:math:`\\|v\\|^2 = n`
    and :math:`v^\\top y_c = 0` with an intercept; ``c = 0`` without one)."""
    n = R0.shape[0]
    rr = 0.0
    ry = 0.0
    for i in range(n):
        rr += R0[i] * R0[i]
        ry += R0[i] * y[i]
    rr += 2.0 * c * S + n * c * c
    return rr, ry


def _gap(rr, ry, dual_norm, l1, lam):
    """Unnormalized gap :math:`P(w) - D(\\theta)` at :math:`\\theta = r/\\max(\\lambda,
    \\|X^\\top r\\|_\\infty)`, and :math:`P(w)`."""
    s = 1.0
    if dual_norm > lam:
        s = lam / dual_norm
    primal = 0.5 * rr + lam * l1
    dual = -0.5 * s * s * rr + s * ry
    return primal - dual, primal


def _solve_small(C, b):
    """Solve the symmetric positive definite ``C x = b`` (``K x K``) by Cholesky; ``None``
    stands for failure as an all-NaN result."""
    k = C.shape[0]
    L = np.zeros((k, k))
    for i in range(k):
        for j in range(i + 1):
            s = C[i, j]
            for m in range(j):
                s -= L[i, m] * L[j, m]
            if i == j:
                if s <= 0.0:
                    return np.full(k, np.nan)
                L[i, i] = math.sqrt(s)
            else:
                L[i, j] = s / L[j, j]
    z = np.zeros(k)
    for i in range(k):
        s = b[i]
        for m in range(i):
            s -= L[i, m] * z[m]
        z[i] = s / L[i, i]
    x = np.zeros(k)
    for i in range(k - 1, -1, -1):
        s = z[i]
        for m in range(i + 1, k):
            s -= L[m, i] * x[m]
        x[i] = s / L[i, i]
    return x



def _anderson_point(hist, K, m):
    r"""Anderson extrapolation of the last ``K + 1`` iterates in the rows of ``hist``.

    With the differences :math:`U_k = w^{k+1} - w^k` (``k < K``), the weights :math:`c` minimize
    :math:`\|U^\top c\|` subject to :math:`\mathbf 1^\top c = 1`, i.e. :math:`c = z / \mathbf
    1^\top z` with :math:`(UU^\top + \epsilon I) z = \mathbf 1`, :math:`\epsilon = 10^{-10}
    \operatorname{tr}(UU^\top)` (the differences are nearly collinear); the point is
    :math:`\sum_k c_k w^{k+1}` (Bertrand & Massias, AISTATS 2021, as skglm and celer use it).
    Returns the point (length ``m``), or an empty array when the differences vanish or the
    small solve fails.
    """
    C = np.zeros((K, K))
    for i1 in range(K):
        for i2 in range(i1 + 1):
            s = 0.0
            for k in range(m):
                s += (hist[i1 + 1, k] - hist[i1, k]) * (hist[i2 + 1, k] - hist[i2, k])
            C[i1, i2] = s
            C[i2, i1] = s
    tr = 0.0
    for i1 in range(K):
        tr += C[i1, i1]
    if not tr > 0.0:
        return np.empty(0)
    for i1 in range(K):
        C[i1, i1] += 1e-10 * tr
    zc = _solve_small(C, np.ones(K))
    zs = zc.sum()
    if not (np.isfinite(zs) and zs != 0.0):
        return np.empty(0)
    coef = zc / zs
    w_acc = np.zeros(m)
    for i1 in range(K):
        for k in range(m):
            w_acc[k] += coef[i1] * hist[i1 + 1, k]
    return w_acc


def _smallest(score, k):
    """The indices of the ``k`` smallest entries of ``score``, in increasing index order.

    ``inf`` marks the excluded entries: ``k`` must not exceed the number of the others. A
    selection in :math:`O(p)` (``np.partition`` for the ``k``-th value, then one pass) where a
    full sort of news20's 62,061 scores took 5 ms a round; among entries equal to the ``k``-th
    value the lowest indices are taken, and NaN entries (a column with non-finite values)
    come after every number, as in a sort.
    """
    p = score.shape[0]
    out = np.empty(k, dtype=np.int64)
    if k <= 0:
        return out
    vals = np.empty(p)
    m = 0
    for j in range(p):
        if score[j] < np.inf:
            vals[m] = score[j]
            m += 1
    t = 0
    if k >= m:  # every number, then NaN entries
        room = k - m
        for j in range(p):
            s = score[j]
            if s < np.inf:
                out[t] = j
                t += 1
            elif s != s and room > 0:
                room -= 1
                out[t] = j
                t += 1
        return out
    thr = np.partition(vals[:m], k - 1)[k - 1]
    room = k
    for j in range(p):
        if score[j] < thr:
            room -= 1
    for j in range(p):
        s = score[j]
        if s < thr:
            out[t] = j
            t += 1
        elif s == thr and room > 0:
            room -= 1
            out[t] = j
            t += 1
    return out


#: Up to this many new features, :func:`_gram_block` computes their rows by
#: :func:`_gram_rows_few`.
_FEW_NEW = 8


def _gram_rows_sparse(indptr, indices, vals, feats, fresh, n, G):
    """Add to ``G`` the uncentred products :math:`Z_{k_1}^\\top Z_{k_2}` of a sparse design's
    columns ``feats`` for ``k1`` new (``fresh``) and ``k2`` old or ``k2 >= k1``; returns the
    products computed.

    Through the rows of the sub-matrix: each row lists its entries, the new features' first,
    and every pair (new entry, later entry) of a row is one product, so the cost is the pairs
    rather than passes over whole columns. Only the rows where a new feature is non-zero are
    listed, a block of rows at a time (each column's entries are sorted by row, read from a
    cursor), so the lists being filled stay in cache: filled in one piece, the lists of
    news20's 420-feature support (3 MB) cost 1.5 ms a block of Gram products, scattered writes
    missing the cache.
    """
    a = feats.shape[0]
    mark = np.zeros(n, dtype=np.bool_)
    for k in range(a):
        if fresh[k]:
            j = feats[k]
            for e in range(indptr[j], indptr[j + 1]):
                mark[indices[e]] = True
    cursor = np.empty(a, dtype=np.int64)
    for k in range(a):
        cursor[k] = indptr[feats[k]]
    start = np.empty(a, dtype=np.int64)
    size = 0
    for k in range(a):
        size += indptr[feats[k] + 1] - indptr[feats[k]]
    # One buffer for every block's lists: the part a block uses stays in cache.
    cols = np.empty(size + 1, dtype=np.int64)
    rv = np.empty(size + 1)
    work = 0
    block = 1024
    counts = np.zeros(block + 1, dtype=np.int64)
    fill = np.zeros(block, dtype=np.int64)
    for r0 in range(0, n, block):
        r1 = min(n, r0 + block)
        counts[:] = 0
        for k in range(a):
            start[k] = cursor[k]
            j = feats[k]
            e = cursor[k]
            end = indptr[j + 1]
            while e < end and indices[e] < r1:
                # Branch-free: whether a row is marked is a coin flip the branch predictor
                # loses (5 times slower with a test).
                counts[indices[e] - r0 + 1] += mark[indices[e]]
                e += 1
            cursor[k] = e
        for i in range(r1 - r0):
            counts[i + 1] += counts[i]
            fill[i] = counts[i]
        total = counts[r1 - r0]
        if total == 0:
            continue
        # Slot `total` takes the entries of unmarked rows (branch-free, as above).
        for phase in range(2):  # the new features' entries first in every row
            for k in range(a):
                if fresh[k] != (phase == 0):
                    continue
                for e in range(start[k], cursor[k]):
                    i = indices[e] - r0
                    m = mark[i + r0]
                    pos = total + m * (fill[i] - total)
                    cols[pos] = k
                    rv[pos] = vals[e]
                    fill[i] += m
        for i in range(r1 - r0):
            hi = counts[i + 1]
            for e1 in range(counts[i], hi):
                k1 = cols[e1]
                if not fresh[k1]:
                    break
                x1 = rv[e1]
                work += hi - e1
                for e2 in range(e1, hi):
                    G[k1, cols[e2]] += x1 * rv[e2]
    return work


def _gram_rows_few(indptr, indices, vals, feats, fresh, n, G):
    """As :func:`_gram_rows_sparse` (whole rows ``k1`` for the new features ``k1``), for a few
    new features: their columns are scattered into a dense ``n x f`` block ``B``, and one pass
    over the columns of the set reads, per entry, the row of ``B`` it meets. The cost is one
    pass over the set's entries, without the row lists that :func:`_gram_rows_sparse` builds
    in that pass (1 to 2 ms on news20's support, against 0.3 ms for this pass).
    """
    a = feats.shape[0]
    f = 0
    for k in range(a):
        if fresh[k]:
            f += 1
    new = np.empty(f, dtype=np.int64)
    f = 0
    for k in range(a):
        if fresh[k]:
            new[f] = k
            f += 1
    B = np.zeros((n, f))
    for b in range(f):
        j = feats[new[b]]
        for e in range(indptr[j], indptr[j + 1]):
            B[indices[e], b] = vals[e]
    acc = np.empty(f)
    work = 0
    for k2 in range(a):
        j = feats[k2]
        acc[:] = 0.0
        for e in range(indptr[j], indptr[j + 1]):
            x = vals[e]
            i = indices[e]
            for b in range(f):
                acc[b] += x * B[i, b]
        work += (indptr[j + 1] - indptr[j]) * f
        for b in range(f):
            G[new[b], k2] = acc[b]
    return work


def _gram_block(sparse, Xd, indptr, indices, vals, means, feats, n, old_feats, old_G, slot):
    """:math:`X_{c,A}^\\top X_{c,A}` for the features ``feats``, reusing a previous block.

    ``old_G`` holds the products of ``old_feats`` (``slot[j]`` is feature ``j``'s row in it,
    ``-1`` for a feature outside it): their entries are copied, and only the rows of the
    features new to the block are computed. The support changes little between the Gram phases
    of a solve, so a phase costs ``|A|^2`` copies and the new features' products instead of a
    whole block (6.6 ms for news20's 422-feature support at 0.01 alpha_max, against 30 us an
    epoch). ``slot`` is updated to index the returned block. Returns ``(G, work)``, ``work``
    the products computed.

    Sparse: the products by :func:`_gram_rows_sparse`, then the centring
    :math:`X_c^\\top X_c = Z^\\top Z - n \\bar x \\bar x^\\top` (weights included: the rows of
    ``Z`` are scaled by :math:`v`, :math:`v^\\top v = n` and :math:`v^\\top Z = n \\bar x^\\top`).
    """
    a = feats.shape[0]
    G = np.zeros((a, a))
    fresh = np.zeros(a, dtype=np.bool_)
    n_new = 0
    for k in range(a):
        s = slot[feats[k]]
        if s < 0:
            fresh[k] = True
            n_new += 1
    for k1 in range(a):
        if not fresh[k1]:
            s1 = slot[feats[k1]]
            for k2 in range(a):
                if not fresh[k2]:
                    G[k1, k2] = old_G[s1, slot[feats[k2]]]
    for k in range(old_feats.shape[0]):
        slot[old_feats[k]] = -1
    for k in range(a):
        slot[feats[k]] = k
    work = 0
    if n_new == 0:
        return G, work
    # Entry (k1, k2) with k1 new is computed in row k1 when k2 is old or k2 >= k1, then mirrored.
    if sparse:
        if n_new <= _FEW_NEW:
            work += _gram_rows_few(indptr, indices, vals, feats, fresh, n, G)
        else:
            work += _gram_rows_sparse(indptr, indices, vals, feats, fresh, n, G)
        for k1 in range(a):
            if fresh[k1]:
                m1 = n * means[feats[k1]]
                for k2 in range(a):
                    if k2 >= k1 or not fresh[k2]:
                        G[k1, k2] -= m1 * means[feats[k2]]
    else:
        for k1 in range(a):
            if fresh[k1]:
                j1 = feats[k1]
                for k2 in range(a):
                    if k2 >= k1 or not fresh[k2]:
                        j2 = feats[k2]
                        s = 0.0
                        for i in range(n):
                            s += Xd[i, j1] * Xd[i, j2]
                        G[k1, k2] = s
                        work += n
    for k1 in range(a):  # symmetric
        if fresh[k1]:
            for k2 in range(a):
                if k2 > k1 or not fresh[k2]:
                    G[k2, k1] = G[k1, k2]
    return G, work


def _gram_phase(sparse, Xd, indptr, indices, vals, means, y, w, feats, G, R0, c, S, xty, lam,
                target, max_epochs, K):
    """Sweeps over the non-zero coordinates ``feats`` through their Gram matrix ``G``.

    With :math:`G = X_{c,A}^\\top X_{c,A}` (:func:`_gram_block`) and :math:`d = w_A - w_A^0`,
    the correlations are :math:`g = g^0 - Gd` and
    :math:`\\|r\\|^2 = \\|r^0\\|^2 - d^\\top g^0 - d^\\top g`, so a sweep costs :math:`|A|^2`
    instead of two passes over the columns, and the residual is not touched (the caller
    recomputes it). Anderson extrapolation as in the residual sweeps. Stops when the swept
    problem's gap is at most ``target``. Returns ``(epochs, work)``.
    """
    n = y.shape[0]
    a = feats.shape[0]
    work = 0
    g0 = np.empty(a)
    xty_a = np.empty(a)
    w0 = np.empty(a)
    for k in range(a):
        j = feats[k]
        g0[k] = _col_dot(sparse, Xd, indptr, indices, vals, j, R0) - means[j] * S
        work += indptr[j + 1] - indptr[j]
        xty_a[k] = xty[j]
        w0[k] = w[j]
    rr0, ry0 = _stats(R0, c, S, y)
    wa = w0.copy()
    g = g0.copy()
    hist = np.empty((K + 1, a))
    n_hist = 0
    epochs = 0
    while epochs < max_epochs:
        dn = 0.0
        for k in range(a):
            gk = g[k]
            if abs(gk) > dn:
                dn = abs(gk)
            if G[k, k] <= 0.0:
                continue
            old = wa[k]
            new = _soft_threshold(old + gk / G[k, k], lam / G[k, k])
            if new != old:
                d = new - old
                wa[k] = new
                # Row k of the symmetric G is its column k, read contiguously.
                for m in range(a):
                    g[m] -= d * G[k, m]
        work += a * a
        epochs += 1
        extrapolated = False
        if K > 0:
            hist[n_hist, :] = wa
            n_hist += 1
            if n_hist == K + 1:
                n_hist = 0
                w_acc = _anderson_point(hist, K, a)
                if w_acc.shape[0] > 0:  # empty: no extrapolated point
                    g_acc = g0.copy()
                    for k2 in range(a):
                        dk = w_acc[k2] - w0[k2]
                        if dk != 0.0:
                            for m in range(a):
                                g_acc[m] -= dk * G[k2, m]
                    work += a * a
                    rr_acc = rr0
                    rr_cur = rr0
                    l1_acc = 0.0
                    l1_cur = 0.0
                    for k in range(a):
                        da = w_acc[k] - w0[k]
                        dc = wa[k] - w0[k]
                        rr_acc -= da * (g0[k] + g_acc[k])
                        rr_cur -= dc * (g0[k] + g[k])
                        l1_acc += abs(w_acc[k])
                        l1_cur += abs(wa[k])
                    if 0.5 * rr_acc + lam * l1_acc < 0.5 * rr_cur + lam * l1_cur:
                        wa[:] = w_acc
                        g[:] = g_acc
                        extrapolated = True
        if not extrapolated:
            rr = rr0
            ry = ry0
            l1 = 0.0
            for k in range(a):
                dc = wa[k] - w0[k]
                rr -= dc * (g0[k] + g[k])
                ry -= dc * xty_a[k]
                l1 += abs(wa[k])
            gap_sub, _ = _gap(rr, ry, dn, l1, lam)
            if gap_sub <= target:
                break
    for k in range(a):
        w[feats[k]] = wa[k]
    return epochs, work


def _correlations(sparse, Xd, indptr, indices, vals, means, v, y):
    """:math:`X_c^\\top y` for every feature (``y`` in the row space of the design)."""
    p = means.shape[0]
    out = np.empty(p)
    S = 0.0
    for i in range(y.shape[0]):
        S += v[i] * y[i]
    for j in range(p):
        out[j] = _col_dot(sparse, Xd, indptr, indices, vals, j, y) - means[j] * S
    return out


def _column_sums(indptr, indices, vals, v, y, weighted):
    """Per column of a CSC matrix ``Z`` with ``n = len(y)`` rows, in one pass over the stored
    values (the design's set-up reads a wide sparse matrix once, not once per statistic).

    With ``weighted``, the design is :math:`\\operatorname{diag}(v) Z` and its values are
    returned scaled (a new array); otherwise ``vals`` itself, and ``v`` is taken to be ones.

    Returns ``(vals, sq, vz, zy, n_bad)``: the column sums of squares, the sums weighted by
    ``v``, the products with ``y`` (:math:`Z_j^\\top y`), and the count of row indices outside
    ``[0, n)`` (skipped: the caller rejects the matrix when it is not 0; the compiled kernels
    do not check bounds, so nothing else may read a matrix before this pass has). A non-finite
    value makes its column's sum of squares non-finite.
    """
    n = y.shape[0]
    p = indptr.shape[0] - 1
    out = np.empty(vals.shape[0]) if weighted else vals
    sq = np.zeros(p)
    vz = np.zeros(p)
    zy = np.zeros(p)
    n_bad = 0
    for j in range(p):
        a = 0.0
        b = 0.0
        c = 0.0
        for k in range(indptr[j], indptr[j + 1]):
            i = indices[k]
            if i < 0 or i >= n:
                n_bad += 1
                continue
            x = vals[k]
            if weighted:
                x *= v[i]
                out[k] = x
                b += v[i] * x
            else:
                b += x
            a += x * x
            c += x * y[i]
        sq[j] = a
        vz[j] = b
        zy[j] = c
    return out, sq, vz, zy, n_bad


def _csr_to_csc(indptr, indices, values, p):
    """The CSC arrays of a CSR matrix with ``p`` columns (a counting sort, rows kept sorted);
    row indices as int32 (fewer than :math:`2^{31}` rows), as SciPy stores them."""
    n = indptr.shape[0] - 1
    counts = np.zeros(p + 1, dtype=np.int64)
    for k in range(indices.shape[0]):
        counts[indices[k] + 1] += 1
    for j in range(p):
        counts[j + 1] += counts[j]
    ccol = counts.copy()
    fill = counts[:p].copy()
    rows = np.empty(indices.shape[0], dtype=np.int32)
    out = np.empty(indices.shape[0])
    for i in range(n):
        for k in range(indptr[i], indptr[i + 1]):
            j = indices[k]
            rows[fill[j]] = i
            out[fill[j]] = values[k]
            fill[j] += 1
    return ccol, rows, out


_soft_threshold = njit(_soft_threshold, fallback=True)
# Inlined: called once per column in the full passes, where a compiled call (arrays passed as
# structures, reference counts) cost more than news20's 20-entry columns (7 ms against 3 ms a
# pass over its 1.27 million entries).
_col_dot = njit(_col_dot, fallback=True, inline=True)
_col_axpy = njit(_col_axpy, fallback=True, inline=True)
_correlation_pass = njit(_correlation_pass, fallback=True)
_residual = njit(_residual, fallback=True)
_stats = njit(_stats, fallback=True)
_gap = njit(_gap, fallback=True)
_solve_small = njit(_solve_small, fallback=True)
_anderson_point = njit(_anderson_point, fallback=True)
_smallest = njit(_smallest, fallback=True)
_gram_rows_sparse = njit(_gram_rows_sparse, fallback=True)
_gram_rows_few = njit(_gram_rows_few, fallback=True)
_gram_block = njit(_gram_block, fallback=True)
_gram_phase = njit(_gram_phase, fallback=True)
_correlations = njit(_correlations, fallback=True)
_column_sums = njit(_column_sums, fallback=True)
_csr_to_csc = njit(_csr_to_csc, fallback=True)
