"""The loop of Lasso coordinate descent: certificate, screening, working sets, sweeps.

One compiled function, :func:`_cd_solve`, runs the whole solve described in
:mod:`torchfw.lasso.cd` (rounds of an exact certificate over all features, gap-safe screening,
a working set ranked by the dual point, and sweeps with Anderson extrapolation, through the
residual or through the support's Gram matrix) on the arrays of a
:class:`~torchfw.lasso.cd.CDDesign`; its kernels are in :mod:`torchfw.lasso._cd_kernels`.
"""

from __future__ import annotations

import math

import numpy as np

from ..utils.jit import njit
from ._cd_kernels import (
    _anderson_point,
    _col_axpy,
    _col_dot,
    _correlation_pass,
    _gap,
    _gram_block,
    _gram_phase,
    _residual,
    _smallest,
    _soft_threshold,
    _stats,
)

__all__: list[str] = []


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
    # The last Gram phase's block and features, reused by the next (see _gram_block).
    gram_feats = np.empty(0, dtype=np.int64)
    gram_G = np.empty((0, 0))
    gram_slot = np.full(p, -1, dtype=np.int64)
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
        # At w = 0 the residual is y_c and X_c^T y_c is already known.
        cold = rounds == 0
        for j in range(p):
            if w[j] != 0.0:
                cold = False
                break
        dual_norm, n_def, pass_work = _correlation_pass(
            sparse, Xd, indptr, indices, vals, means, norms2, screened, refresh, cold, xty, R0,
            S, xtr, deferred)
        work += pass_work
        # A screened feature needs its correlation only if it could set the dual scaling:
        # |x_j^T r| <= |x_j^T r_ref| + ||x_j|| ||r - r_ref|| (Cauchy-Schwarz) decides.
        n_fail = 0
        for k in range(n_def):
            j = deferred[k]
            bound = (abs(xtr_ref[j]) + math.sqrt(norms2[j]) * delta) * (1.0 + 1e-10)
            if bound > max(lam, dual_norm):
                n_fail += 1
                xtr[j] = _col_dot(sparse, Xd, indptr, indices, vals, j, R0) - means[j] * S
                work += indptr[j + 1] - indptr[j]
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
        ws = _smallest(score, ws_size)  # in memory order of the columns
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
                work += indptr[j + 1] - indptr[j]
                if abs(g) > dn:
                    dn = abs(g)
                old = w[j]
                new = _soft_threshold(old + g / wsn[k], lam / wsn[k])
                if new != old:
                    d = new - old
                    w[j] = new
                    _col_axpy(sparse, Xd, indptr, indices, vals, j, -d, R0)
                    work += indptr[j + 1] - indptr[j]
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
                    w_acc = _anderson_point(hist, K, m)
                    if w_acc.shape[0] > 0:  # empty: no extrapolated point
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
                                work += indptr[j + 1] - indptr[j]
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
                            work += indptr[j + 1] - indptr[j]
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
                            col_work += indptr[j + 1] - indptr[j]
                        # A Gram sweep reads |A|^2 entries, a residual sweep 2 nnz(X_A).
                        if n_act * n_act < col_work:
                            gram_G, gw = _gram_block(sparse, Xd, indptr, indices, vals, means,
                                                     feats, n, gram_feats, gram_G, gram_slot)
                            gram_feats = feats
                            work += gw
                            e, gw = _gram_phase(sparse, Xd, indptr, indices, vals, means, y, w,
                                                feats, gram_G, R0, c, S, xty, lam,
                                                0.5 * inner_target, max_epochs - epochs, K)
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


_cd_solve = njit(_cd_solve, fallback=True)
