r"""Coordinate descent for the penalized Lasso: working sets, gap-safe screening, Anderson steps.

The problem is scikit-learn's, in the unnormalized scale used throughout this module,

.. math::

    P(w) = \tfrac12 \|y_c - X_c w\|^2 + \lambda \|w\|_1, \qquad \lambda = n\alpha,

whose dual is :math:`D(\theta) = \tfrac12\|y_c\|^2 - \tfrac{\lambda^2}2\|\theta - y_c/\lambda\|^2`
over :math:`\|X_c^\top\theta\|_\infty \le 1`. At any :math:`w` with residual :math:`r` the
rescaled residual

.. math::

    \theta = r / \max(\lambda, \|X_c^\top r\|_\infty)

is dual feasible, so :math:`G(w) = P(w) - D(\theta) \ge P(w) - P(w^\star)` is a *certified*
duality gap; scikit-learn's ``dual_gap_`` is :math:`G/n` and the solver stops when
:math:`G/n \le \mathrm{tol}\,\|y_c\|^2/n` (``tol``'s meaning in scikit-learn). The gap is always
computed over all features from a freshly recomputed residual, never from the running one.

Three devices make coordinate descent fast on wide problems (the anchors skglm and celer use
the same ones):

* **Gap-safe screening** (Fercoq, Gramfort & Salmon 2015; Ndiaye et al. 2017): the dual optimum
  lies in the ball of centre :math:`\theta` and radius :math:`\sqrt{2G}/\lambda`, so a feature
  with :math:`|x_j^\top\theta| + \|x_j\|\sqrt{2G}/\lambda < 1` is zero at every optimum and is
  dropped for the rest of the solve (set to zero if it was not).
* **Working sets** (Massias, Gramfort & Salmon 2018, celer; Bertrand et al. 2022, skglm): each
  outer round ranks the features by the distance of :math:`\theta` to their constraint,
  :math:`(1 - |x_j^\top\theta|)/\|x_j\|`, and runs coordinate descent on the support plus the
  closest features only (:math:`\max(32, 2\,\mathrm{nnz}(w))` of them, never fewer than the
  round before), until the sub-problem's own gap is below a fifth of the full gap (or, once
  the set holds every feature screening kept, below half the target). Within a round, sweeps
  over the whole set alternate with sweeps over its non-zero coordinates only (glmnet's active
  cycling); these run on the coordinates' Gram matrix :math:`X_A^\top X_A` when it has fewer
  entries than their columns.
* **Anderson extrapolation** (Bertrand & Massias 2021): every :math:`K` epochs the last
  :math:`K + 1` iterates on the working set are combined with the weights :math:`c` minimising
  :math:`\|\sum_k c_k (w^{k+1} - w^k)\|` subject to :math:`\sum c_k = 1`; the extrapolated point
  is kept only when it lowers :math:`P`, so the iterates stay monotone.

The design is held column by column: a dense Fortran-ordered centred copy, or the CSC arrays of a
sparse ``X`` with its column means kept apart (implicit centring: the running residual is
:math:`R_0 + c\mathbf 1` with :math:`R_0 = y_c - Xw` and :math:`c = \bar x^\top w`, so sparse
columns stay sparse). The kernels compile with numba; without it they run in the interpreter.

References
----------
Fercoq, Gramfort & Salmon, "Mind the duality gap: safer rules for the Lasso", ICML 2015.
Ndiaye, Fercoq, Gramfort & Salmon, "Gap safe screening rules for sparsity enforcing
penalties", JMLR 18 (2017).
Massias, Gramfort & Salmon, "Celer: a fast solver for the Lasso with dual extrapolation",
ICML 2018.
Bertrand & Massias, "Anderson acceleration of coordinate descent", AISTATS 2021.
Bertrand, Klopfenstein, Massias et al., "Beyond L1: faster and better sparse models with
skglm", NeurIPS 2022.
"""

from __future__ import annotations

import math

import numpy as np
import torch
from torch import Tensor

from ._numba import HAVE_NUMBA, njit

__all__ = ["CDDesign", "solve_cd", "HAVE_NUMBA"]

#: Anderson extrapolation combines this many successive differences of iterates.
_ANDERSON_K = 10
#: The first working set holds at least this many features.
_WS_START = 32
#: Sub-problems are solved to this fraction of the full problem's current gap.
_INNER_FRACTION = 0.2


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



def _gram_block(sparse, Xd, indptr, indices, vals, means, feats, n):
    """:math:`X_{c,A}^\\top X_{c,A}` for the features ``feats``, and the entries it read.

    Sparse: through the rows of the sub-matrix (each row's pairs), so the cost is the sum of
    the squared row counts rather than ``|A|`` passes over the columns.
    """
    a = feats.shape[0]
    G = np.zeros((a, a))
    work = 0
    if sparse:
        counts = np.zeros(n + 1, dtype=np.int64)
        for k in range(a):
            j = feats[k]
            for e in range(indptr[j], indptr[j + 1]):
                counts[indices[e] + 1] += 1
        for i in range(n):
            counts[i + 1] += counts[i]
        fill = counts[:n].copy()
        cols = np.empty(counts[n], dtype=np.int64)
        rv = np.empty(counts[n])
        for k in range(a):
            j = feats[k]
            for e in range(indptr[j], indptr[j + 1]):
                i = indices[e]
                cols[fill[i]] = k
                rv[fill[i]] = vals[e]
                fill[i] += 1
        for i in range(n):
            lo = counts[i]
            hi = counts[i + 1]
            work += (hi - lo) * (hi - lo + 1) // 2
            for e1 in range(lo, hi):
                k1 = cols[e1]
                x1 = rv[e1]
                for e2 in range(e1, hi):
                    G[k1, cols[e2]] += x1 * rv[e2]
        for k1 in range(a):
            for k2 in range(k1, a):
                s = G[k1, k2] + G[k2, k1] if k1 != k2 else G[k1, k1]
                s -= n * means[feats[k1]] * means[feats[k2]]
                G[k1, k2] = s
                G[k2, k1] = s
    else:
        for k1 in range(a):
            j1 = feats[k1]
            for k2 in range(k1, a):
                j2 = feats[k2]
                s = 0.0
                for i in range(n):
                    s += Xd[i, j1] * Xd[i, j2]
                G[k1, k2] = s
                G[k2, k1] = s
        work += n * a * (a + 1) // 2
    return G, work


def _gram_phase(sparse, Xd, indptr, indices, vals, means, y, w, feats, R0, c, S, xty, lam,
                target, max_epochs, K):
    """Sweeps over the non-zero coordinates ``feats`` through their Gram matrix.

    With :math:`G = X_{c,A}^\\top X_{c,A}` and :math:`d = w_A - w_A^0`, the correlations are
    :math:`g = g^0 - Gd` and :math:`\\|r\\|^2 = \\|r^0\\|^2 - d^\\top g^0 - d^\\top g`, so a sweep
    costs :math:`|A|^2` instead of two passes over the columns, and the residual is not
    touched (the caller recomputes it). Anderson extrapolation as in the residual sweeps. Stops
    when the swept problem's gap is at most ``target``. Returns ``(epochs, work)``.
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
        work += (indptr[j + 1] - indptr[j]) if sparse else n
        xty_a[k] = xty[j]
        w0[k] = w[j]
    rr0, ry0 = _stats(R0, c, S, y)
    G, gw = _gram_block(sparse, Xd, indptr, indices, vals, means, feats, n)
    work += gw
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
            z = old + gk / G[k, k]
            t = lam / G[k, k]
            if z > t:
                new = z - t
            elif z < -t:
                new = z + t
            else:
                new = 0.0
            if new != old:
                d = new - old
                wa[k] = new
                for m in range(a):
                    g[m] -= d * G[m, k]
        work += a * a
        epochs += 1
        extrapolated = False
        if K > 0:
            hist[n_hist, :] = wa
            n_hist += 1
            if n_hist == K + 1:
                n_hist = 0
                C = np.zeros((K, K))
                for i1 in range(K):
                    for i2 in range(i1 + 1):
                        s = 0.0
                        for k in range(a):
                            s += (hist[i1 + 1, k] - hist[i1, k]) * (hist[i2 + 1, k] - hist[i2, k])
                        C[i1, i2] = s
                        C[i2, i1] = s
                tr = 0.0
                for i1 in range(K):
                    tr += C[i1, i1]
                if tr > 0.0:
                    for i1 in range(K):
                        C[i1, i1] += 1e-10 * tr
                    zc = _solve_small(C, np.ones(K))
                    zs = zc.sum()
                    if np.isfinite(zs) and zs != 0.0:
                        coef = zc / zs
                        w_acc = np.zeros(a)
                        for i1 in range(K):
                            for k in range(a):
                                w_acc[k] += coef[i1] * hist[i1 + 1, k]
                        g_acc = g0.copy()
                        for k2 in range(a):
                            dk = w_acc[k2] - w0[k2]
                            if dk != 0.0:
                                for m in range(a):
                                    g_acc[m] -= dk * G[m, k2]
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


def _cd_solve(sparse, Xd, indptr, indices, vals, means, v, norms2, y, xty, w, lam, target,
              max_epochs, ws_start, screen, anderson_k, check_every, inner_fraction, trace,
              ws_growth, use_gram, finish):
    """The solver (see the module docstring). ``w`` is updated in place.

    Returns ``(gap, primal, epochs, rounds, n_screened, converged, work)``; ``gap`` and ``primal``
    are unnormalized and certified at the returned ``w``. Row ``k`` of ``trace`` (while there
    are rows) receives round ``k``'s certified gap, primal value, working-set size, epochs so
    far and screened count.
    """
    n = y.shape[0]
    p = w.shape[0]
    R0 = np.empty(n)
    xtr = np.zeros(p)
    screened = np.zeros(p, dtype=np.bool_)
    for j in range(p):
        if norms2[j] <= 0.0:
            screened[j] = True  # an all-zero (centred) column: w_j = 0 at every optimum
            w[j] = 0.0
    score = np.empty(p)
    # Reference correlations X^T r_ref at a residual r_ref, to bound screened features' ones.
    r_now = np.empty(n)
    r_ref = np.empty(n)
    xtr_ref = np.zeros(p)
    refresh = True
    deferred = np.empty(p, dtype=np.int64)
    ws_size = 0
    epochs = 0
    rounds = 0
    gap = np.inf
    primal = np.inf
    converged = False
    stalled = False
    K = anderson_k
    work = 0  # entries of the design read or written (a machine-independent cost)
    while True:
        # -- certificate over all features, from a fresh residual -----------------------------
        c, S = _residual(sparse, Xd, indptr, indices, vals, means, v, y, w, R0)
        for i in range(n):
            r_now[i] = R0[i] + c * v[i]
        delta = 0.0
        if not refresh:
            for i in range(n):
                delta += (r_now[i] - r_ref[i]) ** 2
            delta = math.sqrt(delta)
        dual_norm = 0.0
        n_def = 0
        # At w = 0 the residual is y_c and X_c^T y_c is already known.
        cold = rounds == 0
        for j in range(p):
            if w[j] != 0.0:
                cold = False
                break
        for j in range(p):
            if norms2[j] > 0.0:
                if cold:
                    xtr[j] = xty[j]
                    a = abs(xtr[j])
                    if a > dual_norm:
                        dual_norm = a
                    continue
                if screened[j] and not refresh:
                    deferred[n_def] = j
                    n_def += 1
                    continue
                xtr[j] = _col_dot(sparse, Xd, indptr, indices, vals, j, R0) - means[j] * S
                work += (indptr[j + 1] - indptr[j]) if sparse else n
                a = abs(xtr[j])
                if a > dual_norm:
                    dual_norm = a
            else:
                xtr[j] = 0.0
        # A screened feature needs its correlation only if it could set the dual scaling:
        # |x_j^T r| <= |x_j^T r_ref| + ||x_j|| ||r - r_ref|| (Cauchy-Schwarz) decides.
        n_fail = 0
        for k in range(n_def):
            j = deferred[k]
            bound = (abs(xtr_ref[j]) + math.sqrt(norms2[j]) * delta) * (1.0 + 1e-10)
            if bound > max(lam, dual_norm):
                n_fail += 1
                xtr[j] = _col_dot(sparse, Xd, indptr, indices, vals, j, R0) - means[j] * S
                work += (indptr[j + 1] - indptr[j]) if sparse else n
                a = abs(xtr[j])
                if a > dual_norm:
                    dual_norm = a
        if refresh:
            r_ref[:] = r_now
            xtr_ref[:] = xtr
        refresh = n_fail > 0.1 * n_def
        rr, ry = _stats(R0, c, S, y)
        l1 = 0.0
        nnz = 0
        for j in range(p):
            if w[j] != 0.0:
                l1 += abs(w[j])
                nnz += 1
        gap, primal = _gap(rr, ry, dual_norm, l1, lam)
        if gap <= target:
            converged = True
            break
        if epochs >= max_epochs:
            break
        rounds += 1
        scale = 1.0 / max(lam, dual_norm)  # theta = scale * r
        radius = math.sqrt(2.0 * max(gap, 0.0)) / lam
        # -- gap-safe screening and the working-set ranking ------------------------------------
        changed = False
        n_avail = 0
        for j in range(p):
            if screened[j]:
                score[j] = np.inf
                continue
            corr = abs(xtr[j]) * scale
            norm = math.sqrt(norms2[j])
            if screen and corr + norm * radius < 1.0:
                screened[j] = True
                score[j] = np.inf
                if w[j] != 0.0:
                    w[j] = 0.0
                    changed = True
                continue
            n_avail += 1
            if w[j] != 0.0:
                score[j] = -1.0  # the support is always in the working set
            else:
                score[j] = (1.0 - corr) / norm
        if changed:
            c, S = _residual(sparse, Xd, indptr, indices, vals, means, v, y, w, R0)
            nnz = 0
            for j in range(p):
                if w[j] != 0.0:
                    nnz += 1
        ws_size = max(int(ws_growth * ws_size), ws_start, 2 * nnz)
        ws_size = min(ws_size, n_avail)
        if ws_size == 0:
            # Every feature is screened out: w = 0 is optimal; one more certificate says so.
            if stalled:
                break
            stalled = True
            continue
        ws = np.argsort(score, kind="quicksort")[:ws_size]
        ws.sort()  # memory order of the columns
        if rounds <= trace.shape[0]:
            trace[rounds - 1, 0] = gap
            trace[rounds - 1, 1] = primal
            trace[rounds - 1, 2] = ws_size
            trace[rounds - 1, 3] = epochs
            trace[rounds - 1, 4] = p - n_avail
        inner_target = max(inner_fraction * gap, inner_fraction * target)
        if ws_size == n_avail and finish:
            # The working set holds every feature screening kept: its gap is the full one up
            # to the screened features' correlations, so solve it to the end in this round.
            inner_target = 0.5 * target
        # -- coordinate descent on the working set, with Anderson extrapolation --------------
        m = ws.shape[0]
        wsn = np.empty(m)
        for k in range(m):
            wsn[k] = norms2[ws[k]]
        hist = np.empty((K + 1, m))
        n_hist = 0
        # Sweeps alternate as in glmnet: one over the whole working set, then sweeps over its
        # non-zero coordinates only until their own sub-problem is solved, then a whole one
        # again; the round ends when a whole sweep meets the round's target.
        active = np.empty(m, dtype=np.int64)
        n_act = m
        for k in range(m):
            active[k] = k
        full = True
        hold = 0
        while epochs < max_epochs:
            dn = 0.0  # max |x_j^T r| over the sweep, each taken as its update starts
            for kk in range(n_act):
                k = active[kk]
                j = ws[k]
                g = _col_dot(sparse, Xd, indptr, indices, vals, j, R0) - means[j] * S
                work += (indptr[j + 1] - indptr[j]) if sparse else n
                if abs(g) > dn:
                    dn = abs(g)
                old = w[j]
                z = old + g / wsn[k]
                t = lam / wsn[k]
                if z > t:
                    new = z - t
                elif z < -t:
                    new = z + t
                else:
                    new = 0.0
                if new != old:
                    d = new - old
                    w[j] = new
                    _col_axpy(sparse, Xd, indptr, indices, vals, j, -d, R0)
                    work += (indptr[j + 1] - indptr[j]) if sparse else n
                    c += means[j] * d
                    S -= d * n * means[j]
            extrapolated = False
            epochs += 1
            if K > 0:
                for k in range(m):
                    hist[n_hist, k] = w[ws[k]]
                n_hist += 1
                if n_hist == K + 1:
                    n_hist = 0
                    # U_k = w^{k+1} - w^k; weights c minimising ||U^T c|| with sum(c) = 1.
                    C = np.zeros((K, K))
                    for a in range(K):
                        for b in range(a + 1):
                            s = 0.0
                            for k in range(m):
                                s += ((hist[a + 1, k] - hist[a, k])
                                      * (hist[b + 1, k] - hist[b, k]))
                            C[a, b] = s
                            C[b, a] = s
                    tr = 0.0
                    for a in range(K):
                        tr += C[a, a]
                    if tr > 0.0:
                        for a in range(K):
                            C[a, a] += 1e-10 * tr  # the differences are nearly collinear
                        zc = _solve_small(C, np.ones(K))
                        zs = zc.sum()
                        if np.isfinite(zs) and zs != 0.0:
                            coef = zc / zs
                            w_acc = np.zeros(m)
                            for a in range(K):
                                for k in range(m):
                                    w_acc[k] += coef[a] * hist[a + 1, k]
                            R_acc = R0.copy()
                            c_acc = c
                            S_acc = S
                            l1_acc = 0.0
                            l1_cur = 0.0
                            for k in range(m):
                                j = ws[k]
                                d = w_acc[k] - w[j]
                                l1_acc += abs(w_acc[k])
                                l1_cur += abs(w[j])
                                if d != 0.0:
                                    _col_axpy(sparse, Xd, indptr, indices, vals, j, -d, R_acc)
                                    work += (indptr[j + 1] - indptr[j]) if sparse else n
                                    c_acc += means[j] * d
                                    S_acc -= d * n * means[j]
                            rr_acc, _ = _stats(R_acc, c_acc, S_acc, y)
                            rr_cur, _ = _stats(R0, c, S, y)
                            if 0.5 * rr_acc + lam * l1_acc < 0.5 * rr_cur + lam * l1_cur:
                                for k in range(m):
                                    w[ws[k]] = w_acc[k]
                                R0[:] = R_acc
                                c = c_acc
                                S = S_acc
                                extrapolated = True
            if epochs % check_every == 0 and not extrapolated:
                # The swept problem's gap (w is zero outside it), its dual norm from the
                # sweep's own correlations: a stopping test for the round, not a certificate
                # (the next round's certificate is exact).
                l1w = 0.0
                for kk in range(n_act):
                    l1w += abs(w[ws[active[kk]]])
                rr_w, ry_w = _stats(R0, c, S, y)
                g_ws, _ = _gap(rr_w, ry_w, dn, l1w, lam)
                if full:
                    if g_ws <= inner_target and epochs >= hold:
                        # Correlations taken during the sweep can understate the dual norm
                        # at its end: confirm with the exact ones before ending the round.
                        dn = 0.0
                        for k in range(m):
                            j = ws[k]
                            a = abs(_col_dot(sparse, Xd, indptr, indices, vals, j, R0)
                                    - means[j] * S)
                            work += (indptr[j + 1] - indptr[j]) if sparse else n
                            if a > dn:
                                dn = a
                        g_ws, _ = _gap(rr_w, ry_w, dn, l1w, lam)
                        if g_ws <= inner_target:
                            break
                        hold = epochs + K + 1  # let extrapolation work before asking again
                    n_act = 0
                    for k in range(m):
                        if w[ws[k]] != 0.0:
                            active[n_act] = k
                            n_act += 1
                    full = n_act == m or n_act == 0
                    if not full and use_gram:
                        feats = np.empty(n_act, dtype=np.int64)
                        col_work = 0
                        for kk in range(n_act):
                            j = ws[active[kk]]
                            feats[kk] = j
                            col_work += (indptr[j + 1] - indptr[j]) if sparse else n
                        # A Gram sweep reads |A|^2 entries, a residual sweep 2 nnz(X_A).
                        if n_act * n_act < col_work:
                            e, gw = _gram_phase(sparse, Xd, indptr, indices, vals, means, y, w,
                                                feats, R0, c, S, xty, lam, 0.5 * inner_target,
                                                max_epochs - epochs, K)
                            epochs += e
                            work += gw
                            c, S = _residual(sparse, Xd, indptr, indices, vals, means, v, y, w,
                                             R0)
                            full = True
                            n_act = m
                            for k in range(m):
                                active[k] = k
                            n_hist = 0
                            continue
                elif g_ws <= 0.5 * inner_target:
                    full = True
                    n_act = m
                    for k in range(m):
                        active[k] = k
    n_screened = 0
    for j in range(p):
        if screened[j]:
            n_screened += 1
    return gap, primal, epochs, rounds, n_screened, converged, work


_col_dot = njit(_col_dot, fastmath=True, fallback=True)
_col_axpy = njit(_col_axpy, fastmath=True, fallback=True)
_residual = njit(_residual, fallback=True)
_stats = njit(_stats, fallback=True)
_gap = njit(_gap, fallback=True)
_gram_block = njit(_gram_block, fallback=True)
_gram_phase = njit(_gram_phase, fallback=True)
_solve_small = njit(_solve_small, fallback=True)
_cd_solve = njit(_cd_solve, fallback=True)




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


def _column_sums(indptr, indices, vals, v):
    """Per column of a CSC matrix: the sum of squares and the sum weighted by ``v``."""
    p = indptr.shape[0] - 1
    sq = np.zeros(p)
    vz = np.zeros(p)
    for j in range(p):
        a = 0.0
        b = 0.0
        for k in range(indptr[j], indptr[j + 1]):
            x = vals[k]
            a += x * x
            b += v[indices[k]] * x
        sq[j] = a
        vz[j] = b
    return sq, vz


def _csr_to_csc(indptr, indices, values, p):
    """The CSC arrays of a CSR matrix with ``p`` columns (a counting sort, rows kept sorted)."""
    n = indptr.shape[0] - 1
    counts = np.zeros(p + 1, dtype=np.int64)
    for k in range(indices.shape[0]):
        counts[indices[k] + 1] += 1
    for j in range(p):
        counts[j + 1] += counts[j]
    ccol = counts.copy()
    fill = counts[:p].copy()
    rows = np.empty(indices.shape[0], dtype=np.int64)
    out = np.empty(indices.shape[0])
    for i in range(n):
        for k in range(indptr[i], indptr[i + 1]):
            j = indices[k]
            rows[fill[j]] = i
            out[fill[j]] = values[k]
            fill[j] += 1
    return ccol, rows, out


_correlations = njit(_correlations, fallback=True)
_column_sums = njit(_column_sums, fallback=True)
_csr_to_csc = njit(_csr_to_csc, fallback=True)


class CDDesign:
    r"""A Lasso design laid out for coordinate descent: column access, centring, weights.

    Built from a validated design (a dense or CSR tensor, as the estimators' input checks
    return it), the target and the optional sample weights. Weights :math:`s_i` are rescaled to
    sum to ``n`` (scikit-learn's convention); with :math:`v = \sqrt s` every row is scaled by
    :math:`v_i` after weighted centring, so the weighted loss
    :math:`\frac1{2n}\sum_i s_i (y_i - x_i^\top w - b)^2` at the optimal ``b`` becomes the
    plain one of the module docstring. A dense design is copied once, centred and scaled, in
    column-major order; a sparse one keeps its sparsity (scaled CSC arrays, the means apart).

    Parameters
    ----------
    X : Tensor or scipy.sparse.csc_matrix
        ``(n, p)``, a dense or sparse CSR tensor (any device; the solver runs on the host), or
        a canonical SciPy CSC matrix (checked by the caller: read as it is, without a copy).
    y : Tensor
        ``(n,)`` float64.
    fit_intercept : bool
    sample_weight : ndarray of shape (n,), optional
        Validated weights (``None``: all ones).

    Attributes
    ----------
    y_mean : float
    x_mean : Tensor of shape (p,)
        (Weighted) means removed by centring, float64, on ``X``'s device; zeros without an
        intercept.
    yy : float
        :math:`\|y_c\|^2 / n` (weighted): the scale of ``tol``.
    alpha_max : float
        :math:`\|X_c^\top y_c\|_\infty / n`: the smallest penalty with the solution 0.
    """

    def __init__(self, X, y: Tensor, *, fit_intercept: bool = True,
                 sample_weight: np.ndarray | None = None):
        n, p = X.shape
        self.n_samples, self.n_features = int(n), int(p)
        scipy_csc = not isinstance(X, Tensor)
        self.device = torch.device("cpu") if scipy_csc else X.device
        self.fit_intercept = bool(fit_intercept)
        yn = y.detach().cpu().numpy().astype(np.float64)
        weighted = sample_weight is not None and not bool((sample_weight == 1.0).all())
        if weighted:
            assert sample_weight is not None
            s = sample_weight * (n / sample_weight.sum())
            v = np.sqrt(s)
        else:
            s = None
            v = np.ones(n)
        self.sparse = scipy_csc or X.layout == torch.sparse_csr
        if self.sparse:
            if scipy_csc:  # a canonical SciPy CSC matrix, checked by the caller
                indptr = np.asarray(X.indptr).astype(np.int64, copy=False)
                indices = np.asarray(X.indices).astype(np.int64, copy=False)
                vals = np.asarray(X.data).astype(np.float64, copy=False)
                if weighted:
                    vals = vals * v[indices]
            else:
                crow = X.crow_indices().cpu().numpy().astype(np.int64, copy=False)
                col = X.col_indices().cpu().numpy().astype(np.int64, copy=False)
                val = X.values().detach().cpu().numpy().astype(np.float64, copy=False)
                if weighted:
                    val = val * np.repeat(v, np.diff(crow))
                indptr, indices, vals = _csr_to_csc(crow, col, val, p)
            sq, vz = _column_sums(indptr, indices, vals, v)
            # v^T Z_j / n: the (weighted) column means.
            means = vz / n if self.fit_intercept else np.zeros(p)
            norms2 = np.maximum(sq - n * means * means, 0.0)
            # Centring can leave round-off on a constant column: it is the zero column it is.
            norms2[norms2 <= 1e-12 * sq] = 0.0
            Xd = np.zeros((0, 0), order="F")
            x_mean = means
        else:
            Xn = X.detach().cpu().numpy()
            if self.fit_intercept:
                x_mean = (s @ Xn / n) if weighted else Xn.mean(axis=0, dtype=np.float64)
            else:
                x_mean = np.zeros(p)
            Xd = np.empty((n, p), order="F")
            np.subtract(Xn, x_mean, out=Xd)
            if weighted:
                Xd *= v[:, None]
            norms2 = np.einsum("ij,ij->j", Xd, Xd)
            indptr = np.zeros(1, dtype=np.int64)
            indices = np.zeros(1, dtype=np.int64)
            vals = np.zeros(1)
            means = np.zeros(p)
        if self.fit_intercept:
            self.y_mean = float(s @ yn / n) if weighted else float(yn.mean())
        else:
            self.y_mean = 0.0
        self.y = np.ascontiguousarray((yn - self.y_mean) * v)
        self.Xd, self.indptr, self.indices, self.vals = Xd, indptr, indices, vals
        self.means, self.v, self.norms2 = means, v, norms2
        self.x_mean = torch.from_numpy(np.asarray(x_mean, dtype=np.float64)).to(self.device)
        self.yy = float(self.y @ self.y) / n
        self.xty = self.correlations(self.y)
        self.alpha_max = float(np.abs(self.xty).max()) / n if p else 0.0

    def correlations(self, u: np.ndarray) -> np.ndarray:
        """:math:`X_c^\\top u` for ``u`` of shape ``(n,)``."""
        return _correlations(self.sparse, self.Xd, self.indptr, self.indices, self.vals,
                             self.means, self.v, np.ascontiguousarray(u, dtype=np.float64))


def solve_cd(design: CDDesign, alpha: float, w0: Tensor | None, tol: float, *,
             max_iter: int = 100_000, working_set: bool = True, screening: bool = True,
             anderson: bool = True, check_every: int = 1, max_trace: int = 1000,
             anderson_k: int = _ANDERSON_K, inner_fraction: float = _INNER_FRACTION,
             ws_start: int = _WS_START, ws_growth: float = 1.0, gram: bool = True,
             finish: bool = True) -> dict:
    r"""Coordinate descent on the penalized Lasso of ``design`` (see the module docstring).

    Parameters
    ----------
    design : CDDesign
    alpha : float
        :math:`\alpha > 0`, scikit-learn's scale.
    w0 : Tensor, optional
        Warm start.
    tol : float
        Stop when the certified gap :math:`G/n \le \mathrm{tol}\,\|y_c\|^2/n`.
    max_iter : int
        Epochs over the working sets (scikit-learn counts epochs over all features).
    working_set : bool
        ``False`` runs every epoch over all unscreened features.
    screening, anderson : bool
        Gap-safe screening and Anderson extrapolation (both on by default).
    check_every : int
        Epochs between evaluations of the sub-problem's gap.
    max_trace : int
        Rounds recorded in the returned ``trace``.

    Returns
    -------
    dict
        ``w`` (float64 tensor on the design's device), ``gap`` (:math:`G/n`, scikit-learn's
        ``dual_gap_``), ``primal`` (:math:`P/n`), ``n_iter`` (epochs), ``rounds``
        (working-set rounds), ``n_screened``, ``converged`` and ``trace`` (per round: gap/n,
        primal/n, working-set size, epochs so far, screened count).
    """
    n, p = design.n_samples, design.n_features
    if w0 is None:
        w = np.zeros(p)
    else:
        w = np.array(w0.detach().cpu().numpy(), dtype=np.float64, copy=True)
    lam = n * alpha
    target = tol * float(design.y @ design.y)
    trace = np.zeros((max(1, max_trace), 5))
    gap, primal, epochs, rounds, n_screened, converged, work = _cd_solve(
        design.sparse, design.Xd, design.indptr, design.indices, design.vals, design.means,
        design.v, design.norms2, design.y, design.xty, w, lam, target, int(max_iter),
        ws_start if working_set else p, bool(screening), anderson_k if anderson else 0,
        int(check_every), inner_fraction, trace, float(ws_growth), bool(gram), bool(finish))
    rows = trace[:min(rounds, trace.shape[0])].copy()
    rows[:, :2] /= n
    return {"w": torch.from_numpy(w).to(design.device), "gap": gap / n, "primal": primal / n,
            "n_iter": int(epochs), "rounds": int(rounds), "n_screened": int(n_screened),
            "converged": bool(converged), "trace": rows, "work": int(work)}
