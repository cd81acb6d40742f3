"""Vector kernels of the incremental quadratic engine, in two implementations.

Every iteration of every variant ends with the same affine update of the atom weights ``w`` and
of the gradient ``s`` (the update rule is in :mod:`torchfw.optimizers._engine`), followed by the
selections the next iteration needs (FW atom, away atom) and two inner products. On the CPU these
run as one fused, compiled pass over memory (numba): no temporaries, no BLAS calls (their thread
pools would fight numba's on a small machine). Everywhere else, and on the CPU when numba is
missing, they run as PyTorch tensor ops that never read values back to the host.
"""

from __future__ import annotations

import math
import os

import numpy as np
import torch

try:  # numba is optional at run time: without it the torch kernels below are used.
    if os.environ.get("TORCHFW_DISABLE_NUMBA"):
        raise ImportError("disabled by TORCHFW_DISABLE_NUMBA")
    import numba

    HAVE_NUMBA = True
except ImportError:  # pragma: no cover - exercised when numba is absent
    numba = None
    HAVE_NUMBA = False

__all__ = ["HAVE_NUMBA", "fused_update", "extrapolation_bounds", "second_order_partner",
           "torch_update", "torch_extrapolation_bounds", "torch_second_order_partner"]

_INF = math.inf


def _njit(fn):
    if not HAVE_NUMBA:
        return None
    return numba.njit(cache=True, nogil=True, boundscheck=False)(fn)


def _fused_update_py(w, s, a, b, i0, h0, c, i1, h1, d, w_prev, s_prev, shift, ct, has_ct,
                     zero_tol):
    """One pass: update w and s, shift the previous iterate, select atoms, reduce.

    ``w <- a w + b e_i0 + c e_i1 + d w_prev`` and ``s <- a s + b h0 + c h1 + d s_prev``; with
    ``shift`` the old ``w, s`` move into ``w_prev, s_prev``. Weights that end below ``zero_tol``
    become exactly zero (drop steps, rounding). Returns the argmin of ``s`` over all atoms and over
    the active atoms (``w > 0``), the argmax over the active atoms, ``<w, s>``, ``<ct, w>`` and the
    number of active atoms.
    """
    n = w.shape[0]
    imin = 0
    smin = _INF
    iamin = -1
    samin = _INF
    jmax = -1
    smax = -_INF
    p = 0.0
    t = 0.0
    nnz = 0
    for r in range(n):
        wr = a * w[r]
        sr = a * s[r]
        if b != 0.0:
            sr += b * h0[r]
        if c != 0.0:
            sr += c * h1[r]
        if d != 0.0:
            wr += d * w_prev[r]
            sr += d * s_prev[r]
        if r == i0:
            wr += b
        if r == i1:
            wr += c
        if wr <= zero_tol:
            wr = 0.0
        if shift:
            w_prev[r] = w[r]
            s_prev[r] = s[r]
        w[r] = wr
        s[r] = sr
        if sr < smin:
            smin = sr
            imin = r
        if wr > 0.0:
            nnz += 1
            p += wr * sr
            if has_ct:
                t += wr * ct[r]
            if sr < samin:
                samin = sr
                iamin = r
            if sr > smax:
                smax = sr
                jmax = r
    return imin, smin, iamin, samin, jmax, smax, p, t, nnz


def _extrapolation_bounds_py(w, w_prev, lam, i):
    """Feasible interval of mu for ``w~ + mu (w~ - w_prev)`` with ``w~ = (1-lam) w + lam e_i``.

    Returns ``(mu_lo, mu_hi)``: the smallest and largest mu keeping every weight >= 0.
    """
    hi = _INF
    lo = -_INF
    for r in range(w.shape[0]):
        wt = (1.0 - lam) * w[r]
        if r == i:
            wt += lam
        delta = wt - w_prev[r]
        if delta < 0.0:
            q = wt / (-delta)
            if q < hi:
                hi = q
        elif delta > 0.0:
            q = -wt / delta
            if q > lo:
                lo = q
    return lo, hi


def _second_order_partner_py(w, s, h, diag, ct, has_ct, i, si, dii):
    """SWAP-2o away atom: argmax over active j with s_j > s_i of (s_j - s_i)^2 / (2 q_ij).

    ``q_ij = Q_ii + Q_jj - 2 Q_ij`` with ``Q_ij = h_j - ct_j`` (``h`` is the vertex gradient of i).
    Returns -1 when no active atom qualifies.
    """
    best = -1
    best_gain = -1.0
    for r in range(w.shape[0]):
        if w[r] > 0.0 and r != i and s[r] > si:
            qij = h[r] - ct[r] if has_ct else h[r]
            q = dii + diag[r] - 2.0 * qij
            if q <= 1e-300:
                q = 1e-300
            diff = s[r] - si
            gain = diff * diff / q
            if gain > best_gain:
                best_gain = gain
                best = r
    return best


fused_update = _njit(_fused_update_py)
extrapolation_bounds = _njit(_extrapolation_bounds_py)
second_order_partner = _njit(_second_order_partner_py)


# --------------------------------------------------------------------------------------------
# PyTorch implementations: device-resident, no host reads (CUDA, or CPU without numba).
# Scalars may be Python numbers or 0-d tensors; indices may be ints or 0-d integer tensors.
# --------------------------------------------------------------------------------------------

def _scatter_add(w: torch.Tensor, index, value) -> None:
    index = torch.as_tensor(index, device=w.device).reshape(1)
    value = torch.as_tensor(value, dtype=w.dtype, device=w.device).reshape(1)
    w.index_add_(0, index, value)


def _axpy(y: torch.Tensor, coef, x: torch.Tensor) -> None:
    """``y += coef * x`` for a Python or 0-d tensor coefficient, without host reads."""
    if isinstance(coef, torch.Tensor):
        y.addcmul_(x.to(y.dtype), coef.to(y.dtype))
    elif coef != 0:
        y.add_(x.to(y.dtype), alpha=coef)


def torch_update(w, s, a, b, i0, h0, c, i1, h1, d, w_prev, s_prev, shift, ct, zero_tol):
    """Tensor version of :func:`fused_update`; returns the same quantities as tensors."""
    if shift:
        old_w, old_s = w.clone(), s.clone()
    w.mul_(a)
    s.mul_(a)
    _axpy(s, b, h0)
    if h1 is not None:
        _axpy(s, c, h1)
    if w_prev is not None:
        _axpy(w, d, w_prev)
        _axpy(s, d, s_prev)
    _scatter_add(w, i0, b)
    if h1 is not None:
        _scatter_add(w, i1, c)
    w.masked_fill_(w <= zero_tol, 0.0)
    if shift:
        w_prev.copy_(old_w)
        s_prev.copy_(old_s)
    return torch_select(w, s, ct)


def torch_select(w, s, ct):
    """Selections and reductions of :func:`fused_update` for the current ``w, s``."""
    active = w > 0
    inf = torch.tensor(math.inf, dtype=s.dtype, device=s.device)
    s_act_min = torch.where(active, s, inf)
    s_act_max = torch.where(active, s, -inf)
    imin = torch.argmin(s)
    iamin = torch.argmin(s_act_min)
    jmax = torch.argmax(s_act_max)
    p = torch.dot(w, s)
    t = torch.dot(w, ct) if ct is not None else torch.zeros((), dtype=s.dtype, device=s.device)
    return (imin, s[imin], iamin, s_act_min[iamin], jmax, s_act_max[jmax], p, t,
            active.sum())


def torch_extrapolation_bounds(w, w_prev, lam, i):
    """Tensor version of :func:`extrapolation_bounds`."""
    wt = w * (1 - lam)
    _scatter_add(wt, i, lam)
    delta = wt - w_prev
    inf = torch.full_like(w, math.inf)
    hi = torch.where(delta < 0, wt / (-delta), inf).amin()
    lo = torch.where(delta > 0, -wt / delta, -inf).amax()
    return lo, hi


def torch_second_order_partner(w, s, h, diag, ct, i, si, dii):
    """Tensor version of :func:`second_order_partner` (returns -1 when nothing qualifies)."""
    qij = h.to(s.dtype) - ct if ct is not None else h.to(s.dtype)
    q = (dii + diag - 2.0 * qij).clamp_min(1e-300)
    diff = s - si
    index = torch.arange(s.shape[0], device=s.device)
    ok = (w > 0) & (diff > 0) & (index != i)
    gain = torch.where(ok, diff * diff / q, torch.full_like(s, -1.0))
    best = torch.argmax(gain)
    return torch.where(ok.any(), best, torch.full_like(best, -1))


def as_numpy(t: torch.Tensor) -> np.ndarray:
    """Zero-copy NumPy view of a CPU tensor."""
    return t.detach().numpy()
