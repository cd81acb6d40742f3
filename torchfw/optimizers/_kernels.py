"""Vector kernels of the incremental quadratic engine, in two implementations.

Every iteration of every variant ends with the same affine update of the atom weights ``w`` and
of the gradient ``s`` (the update rule is in :mod:`torchfw.optimizers._engine`), followed by the
selections the next iteration needs (FW atom, away atom) and two inner products. On the CPU these
run as compiled loops (numba): the update loops have no data-dependent branches so that they
vectorize (a fused update-and-select loop measured 5x slower), no temporaries are allocated
and no BLAS is called (its thread pool would fight for a small machine's cores). Everywhere
else, and on the CPU when numba is missing, they run as PyTorch tensor ops that never read
values back to the host. The selection's PyTorch form is the definition and lives in
:mod:`torchfw.optimizers._selection` (one function over any batch of problems); :func:`select`
here is its declared compiled second implementation.
"""

from __future__ import annotations

import math

import numpy as np
import torch

# numba is optional at run time: without it the torch kernels below are used.
from ..utils import jit as _jit
from ..utils.jit import HAVE_NUMBA as _NUMBA
from ..utils.jit import njit as _njit  # None without numba
from ._moves import pair_curvature, second_order_gain, toward_curvature

__all__ = ["HAVE_NUMBA", "update", "update_arrays", "select", "select_arrays",
           "active_argmin", "extrapolation_bounds",
           "extrapolation_bounds_on", "shift_update_on",
           "second_order_partner", "second_order_best", "torch_update", "torch_active_argmin",
           "torch_second_order_partner", "torch_second_order_best"]



def __getattr__(name: str):
    # HAVE_NUMBA is read at run time (K.HAVE_NUMBA): whether the compiled kernels run now,
    # which the cold start may defer (torchfw.utils.cold_start); the kernels below exist
    # whenever numba does.
    if name == "HAVE_NUMBA":
        return _jit.compiled_kernels()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


_INF = math.inf


def _update_py(w, s, a, b, i0, h0, c, i1, h1, d, w_prev, s_prev, shift, zero_tol):
    """``w <- a w + b e_i0 + c e_i1 + d w_prev`` and ``s <- a s + b h0 + c h1 + d s_prev``.

    The loops carry no data-dependent branches so that they vectorize; each move shape gets its
    own loop (a plain FW/away step touches two arrays, a pairwise step three). With ``shift`` the
    old ``w, s`` move into ``w_prev, s_prev`` (PARTAN).
    """
    n = w.shape[0]
    if shift:
        for r in range(n):
            _shift_score_kernel(s, s_prev, h0, h1, r, a, b, c, d)
            _shift_weight_kernel(w, w_prev, r, a, d, zero_tol)
    elif c != 0.0:
        for r in range(n):
            s[r] = a * s[r] + b * h0[r] + c * h1[r]
        if a != 1.0:
            for r in range(n):
                w[r] = a * w[r]
    else:
        for r in range(n):
            s[r] = a * s[r] + b * h0[r]
        if a != 1.0:
            for r in range(n):
                w[r] = a * w[r]
    _add_atoms_kernel(w, b, i0, c, i1, zero_tol)


def update_arrays(w, s, a, b, i0, h0, c, i1, h1, d, w_prev, s_prev, shift, zero_tol):
    """:func:`_update_py` in whole-array NumPy operations: its form where the compiled kernels
    do not run (the cold start's deferral: :func:`torchfw.utils.jit.interpreted`).

    Each entry gets the loop's arithmetic in the loop's order (``a s + b h0``, then ``+ c h1``,
    then ``+ d s_prev``), so the values are the loop's; the snaps to zero are the loop's too
    (every shifted weight, the atoms' own weights). A few microseconds over a working set of
    a hundred atoms, against a quarter of a millisecond for the PyTorch form's operations.
    """
    if shift:
        s_new = a * s + b * h0
        s_new += c * h1
        s_new += d * s_prev
        s_prev[:] = s
        s[:] = s_new
        w_new = a * w + d * w_prev
        w_prev[:] = w
        np.copyto(w, np.where(w_new > zero_tol, w_new, 0.0))
    else:
        s_new = a * s + b * h0
        if c != 0.0:
            s_new += c * h1
        s[:] = s_new
        if a != 1.0:
            w *= a
    _add_atoms(w, b, i0, c, i1, zero_tol)


def _shift_update_on_py(w, s, a, b, i0, h0, c, i1, h1, d, w_prev, s_prev, support, n_support,
                        zero_tol):
    """:func:`update` with ``shift`` (PARTAN), the weights updated over ``support[:n_support]``.

    The gradients change everywhere, but ``w`` and ``w_prev`` are zero off the support (which
    must hold every atom that ever had weight, ``i0`` and ``i1`` included), where the update
    leaves them zero: only the two gradient arrays are read in full. The entries' arithmetic is
    :func:`update`'s (the same helpers).
    """
    for r in range(s.shape[0]):
        _shift_score_kernel(s, s_prev, h0, h1, r, a, b, c, d)
    for k in range(n_support):
        _shift_weight_kernel(w, w_prev, support[k], a, d, zero_tol)
    _add_atoms_kernel(w, b, i0, c, i1, zero_tol)


def _shift_score(s, s_prev, h0, h1, r, a, b, c, d):
    """Entry ``r`` of the shifted gradient update: ``s <- a s + b h0 + c h1 + d s_prev``, the
    old ``s`` into ``s_prev`` (PARTAN)."""
    so = s[r]
    s[r] = a * so + b * h0[r] + c * h1[r] + d * s_prev[r]
    s_prev[r] = so


def _shift_weight(w, w_prev, r, a, d, zero_tol):
    """Entry ``r`` of the shifted weight update ``w <- a w + d w_prev`` (the atoms' terms come
    after, :func:`_add_atoms`), the old ``w`` into ``w_prev``. An extrapolation clipped at its
    feasibility bound lands some weights on zero up to rounding: they are snapped (a
    branch-free select)."""
    wo = w[r]
    wn = a * wo + d * w_prev[r]
    w[r] = wn if wn > zero_tol else 0.0
    w_prev[r] = wo


def _add_atoms(w, b, i0, c, i1, zero_tol):
    """``w <- w + b e_i0 + c e_i1`` (``c`` only when nonzero), a weight at or below
    ``zero_tol`` snapped to zero: an away or pairwise step to its maximum drops its atom."""
    w[i0] += b
    if w[i0] <= zero_tol:
        w[i0] = 0.0
    if c != 0.0:
        w[i1] += c
        if w[i1] <= zero_tol:
            w[i1] = 0.0


def _select_py(w, s, ct, has_ct):
    """Argmin of ``s``, argmax of ``s`` over active atoms (``w > 0``), ``<w, s>``, ``<w, ct>``.

    The declared second implementation of :func:`torchfw.optimizers._selection.select` (the
    definition, in PyTorch ops; ``tests/test_selection.py`` checks they agree): one pass, first
    index on ties, ``j = -1`` when no atom is active.

    The pass runs four interleaved lanes (entries ``r = 4q + k`` in lane ``k``, the tail in
    lane 0; the lanes are written out, not looped over, so that they stay in registers), each
    a running sum and a running argmin/argmax with strict comparisons, then
    combines them: the smallest value, ties to the smallest index, and the sums as
    ``(p_0 + p_1) + (p_2 + p_3)``. One sequential sum was a chain of ``n`` dependent additions,
    most of a compiled iteration's time at ``m ~ 1,000`` (4.5 of 7 us); four independent chains
    overlap. The order is fixed, so every caller sees the same bits.
    """
    n = w.shape[0]
    p0 = p1 = p2 = p3 = 0.0
    m0 = m1 = m2 = m3 = _INF
    i0 = i1 = i2 = i3 = 0
    x0 = x1 = x2 = x3 = -_INF
    j0 = j1 = j2 = j3 = -1
    n4 = n - n % 4
    for r in range(0, n4, 4):
        a = s[r]
        b = s[r + 1]
        c = s[r + 2]
        d = s[r + 3]
        wa = w[r]
        wb = w[r + 1]
        wc = w[r + 2]
        wd = w[r + 3]
        p0 += wa * a
        p1 += wb * b
        p2 += wc * c
        p3 += wd * d
        if a < m0:
            m0 = a
            i0 = r
        if b < m1:
            m1 = b
            i1 = r + 1
        if c < m2:
            m2 = c
            i2 = r + 2
        if d < m3:
            m3 = d
            i3 = r + 3
        if wa > 0.0 and a > x0:
            x0 = a
            j0 = r
        if wb > 0.0 and b > x1:
            x1 = b
            j1 = r + 1
        if wc > 0.0 and c > x2:
            x2 = c
            j2 = r + 2
        if wd > 0.0 and d > x3:
            x3 = d
            j3 = r + 3
    for r in range(n4, n):  # the tail, in lane 0: later indices than any already there
        a = s[r]
        wa = w[r]
        p0 += wa * a
        if a < m0:
            m0 = a
            i0 = r
        if wa > 0.0 and a > x0:
            x0 = a
            j0 = r
    smin, imin = _first_min(m0, i0, m1, i1, m2, i2, m3, i3)
    smax, jmax = _first_max(x0, j0, x1, j1, x2, j2, x3, j3)
    t = 0.0
    if has_ct:
        t0 = t1 = t2 = t3 = 0.0
        for r in range(0, n4, 4):
            t0 += w[r] * ct[r]
            t1 += w[r + 1] * ct[r + 1]
            t2 += w[r + 2] * ct[r + 2]
            t3 += w[r + 3] * ct[r + 3]
        for r in range(n4, n):
            t0 += w[r] * ct[r]
        t = (t0 + t1) + (t2 + t3)
    return imin, smin, jmax, smax, (p0 + p1) + (p2 + p3), t


def _first_min_py(m0, i0, m1, i1, m2, i2, m3, i3):
    """The smallest of four lanes' minima, ties to the smallest index (0 when none is finite
    or below +inf, as a single pass from ``+inf`` leaves it)."""
    best = _INF
    at = 0
    for value, index in ((m0, i0), (m1, i1), (m2, i2), (m3, i3)):
        if value < best or (value == best and value < _INF and index < at):
            best = value
            at = index
    return best, at


def _first_max_py(x0, j0, x1, j1, x2, j2, x3, j3):
    """The largest of four lanes' maxima, ties to the smallest index (-1 when none)."""
    best = -_INF
    at = -1
    for value, index in ((x0, j0), (x1, j1), (x2, j2), (x3, j3)):
        if value > best or (value == best and value > -_INF and index < at):
            best = value
            at = index
    return best, at


def _active_argmin_py(w, s):
    """Argmin of ``s`` over active atoms, and the number of active atoms."""
    best = -1
    value = _INF
    count = 0
    for r in range(w.shape[0]):
        if w[r] > 0.0:
            count += 1
            if s[r] < value:
                value = s[r]
                best = r
    return best, value, count


def select_arrays(w, s, ct, has_ct):
    """:func:`_select_py` in whole-array NumPy operations: its form where the compiled kernels
    do not run (the cold start's deferral: :func:`torchfw.utils.jit.interpreted`).

    The same indices (NumPy's ``argmin``/``argmax`` return the first index among equal values,
    as the loop does) and, to rounding, the same sums (float64 BLAS dots instead of four
    float64 lanes). A dozen microseconds over a working set of a hundred atoms, against a
    quarter of a millisecond for the PyTorch operations of
    :func:`torchfw.optimizers._selection.select` on the same arrays.
    """
    if s.shape[0] == 0:
        return 0, _INF, -1, -_INF, 0.0, 0.0
    i = int(np.argmin(s))
    masked = np.where(w > 0.0, s, -_INF)
    j = int(np.argmax(masked))
    sj = float(masked[j])
    if sj == -_INF:
        j = -1
    return i, float(s[i]), j, sj, _dot_arrays(w, s), _dot_arrays(w, ct) if has_ct else 0.0


def _dot_arrays(a, b):
    """:math:`a^\top b` summed in float64, products in the arrays' precision (the loop's)."""
    if a.dtype == np.float64 and b.dtype == np.float64:
        return float(np.dot(a, b))
    return float(np.multiply(a, b).sum(dtype=np.float64))


def _dot_py(a, b, n):
    """``sum(a[:n] * b[:n])`` (no BLAS call: its threads would compete with ours)."""
    total = 0.0
    for r in range(n):
        total += a[r] * b[r]
    return total


def _extrapolation_bounds_py(w, w_prev, lam, i):
    """Feasible interval of mu for ``w~ + mu (w~ - w_prev)`` with ``w~ = (1-lam) w + lam e_i``.

    Returns ``(mu_lo, mu_hi)``: the smallest and largest mu keeping every weight >= 0.
    """
    # Each entry tightens the interval through _tighten. Rounding in its product test can skip
    # an exact tie (iterates of FW steps are proportional entry by entry, so
    # ties are common): the bound then differs from the minimum quotient in the last bit, and
    # the weights the extrapolation lands on zero come out within rounding of it, where the
    # update snaps them (``ZERO_TOL``).
    hi = _INF
    lo = -_INF
    for r in range(w.shape[0]):
        lo, hi = _entry_bound_kernel(w, w_prev, lam, i, r, lo, hi)
    return lo, hi


def _entry_bound(w, w_prev, lam, i, r, lo, hi):
    """Entry ``r``'s constraint on mu applied to ``[lo, hi]``: ``w~_r + mu (w~_r - w_prev_r)
    >= 0`` with ``w~ = (1-lam) w + lam e_i`` (:func:`_tighten`)."""
    wt = (1.0 - lam) * w[r]
    if r == i:
        wt += lam
    return _tighten_kernel(wt, wt - w_prev[r], lo, hi)


def _tighten(wt, delta, lo, hi):
    """One entry's constraint ``wt + mu delta >= 0`` applied to ``[lo, hi]``.

    A bound changes only at the few entries that tighten it, so the test is written to be
    false almost always (a predictable branch, no division per entry): with ``wt >= 0``,
    ``wt + hi * delta < 0`` holds exactly when delta < 0 and wt / -delta < hi (at hi = inf it
    means delta < 0; at delta = 0 the product is nan or 0 and the test is false), and
    ``wt + lo * delta < 0`` exactly when delta > 0 and -wt / delta > lo.
    """
    if wt + hi * delta < 0.0:
        q = wt / (-delta)
        if q < hi:
            hi = q
    if wt + lo * delta < 0.0:
        q = -wt / delta
        if q > lo:
            lo = q
    return lo, hi


def _extrapolation_bounds_on_py(w, w_prev, lam, i, support, n_support):
    """:func:`extrapolation_bounds` over the entries ``support[:n_support]`` only.

    ``support`` must hold every index where ``w`` or ``w_prev`` is nonzero, and ``i``: elsewhere
    both are zero, so ``w~_r = delta_r = 0`` bounds nothing. On an SVM dual the support is a
    fraction of the examples, so this reads a fraction of the two arrays.
    """
    hi = _INF
    lo = -_INF
    for k in range(n_support):
        lo, hi = _entry_bound_kernel(w, w_prev, lam, i, support[k], lo, hi)
    return lo, hi


def _second_order_partner_py(w, s, h, diag, ct, has_ct, i, si, dii):
    """SWAP-2o away atom: argmax over active j with s_j > s_i of the second-order gain
    (:func:`torchfw.optimizers._moves.second_order_gain`, (s_j - s_i)^2 / q_ij).

    ``q_ij = Q_ii + Q_jj - 2 Q_ij`` with ``Q_ij = h_j - ct_j`` (``h`` is the vertex gradient of i).
    Returns -1 when no active atom qualifies.
    """
    best = -1
    best_gain = -1.0
    for r in range(w.shape[0]):
        if w[r] > 0.0 and r != i and s[r] > si:
            qij = h[r] - ct[r] if has_ct else h[r]
            gain = _second_order_gain(s[r] - si, _pair_curvature_kernel(dii, diag[r], qij))
            if gain > best_gain:
                best_gain = gain
                best = r
    return best


def _partner_gain_py(s, h, diag, ct, has_ct, r, si, dii):
    r"""The gain :func:`_second_order_partner_py` compares for atom ``r``, by the same calls:
    :func:`~torchfw.optimizers._moves.second_order_gain` of :math:`s_r - s_i` and the pair
    curvature, :math:`\tilde Q_{ir} = h_r - \tilde c_r`. (The search keeps these two lines
    in its own loop: a call there changed the compiled loop's code and cost small SVC fits
    2-4 %.)"""
    qij = h[r] - ct[r] if has_ct else h[r]
    return _second_order_gain(s[r] - si, _pair_curvature_kernel(dii, diag[r], qij))


def _second_order_best_py(w, s, h, diag, ct, has_ct, i, si, dii):
    """SWAP-2o away atom and its gain, ``(j, gain)`` (``(-1, -1.0)`` when no active atom
    qualifies): the gain the search compared, bit for bit (:func:`_partner_gain_py`), so
    that a caller comparing partners across places (the sharded storage, across ranks)
    writes no gain of its own. The compiled loop calls the search alone."""
    j = _partner_kernel(w, s, h, diag, ct, has_ct, i, si, dii)
    if j < 0:
        return j, -1.0
    return j, _partner_gain(s, h, diag, ct, has_ct, j, si, dii)


def _exact_step(slope, curvature, gamma_max):
    r""":class:`~torchfw.ExactLineSearch` on host floats, branch for branch.

    A declared second implementation (:mod:`torchfw.utils.twins`) of
    ``ExactLineSearch.step`` with host scalars, which numba cannot call (it takes a ``Line`` and
    a :class:`~torchfw.utils.scalars.Scalars`): :math:`\gamma = \operatorname{clip}_{[0,
    \gamma_{\max}]}(-\text{slope} / \text{curvature})`, and on a flat line
    (curvature :math:`\le 10^{-300}`) :math:`\gamma_{\max}` along a descent direction, else 0.
    The clip is written as the host scalars' ``minimum(maximum(x, 0), gamma_max)``, so NaN and
    ``-0.0`` come out as the reference's do (0 and 0).
    """
    if curvature > 1e-300:
        gamma = -slope / curvature
    else:
        gamma = gamma_max if slope < 0.0 else 0.0
    gamma = gamma if gamma > 0.0 else 0.0
    return gamma if gamma < gamma_max else gamma_max


def _away_step_max(w_j):
    """:func:`~torchfw.optimizers._moves.away_step_max` on host floats (numba cannot take its
    ``ops``): :math:`w_j / (1 - w_j)`, 0 when :math:`w = e_j`. A declared second
    implementation, like :func:`_exact_step`."""
    return w_j / (1.0 - w_j if 1.0 - w_j > 1e-300 else 1e-300) if w_j < 1.0 else 0.0


update = _njit(_update_py, interpreted_form=update_arrays)
shift_update_on = _njit(_shift_update_on_py)
dot = _njit(_dot_py)
_first_min = _njit(_first_min_py) if _NUMBA else _first_min_py
_first_max = _njit(_first_max_py) if _NUMBA else _first_max_py
select = _njit(_select_py, interpreted_form=select_arrays)
active_argmin = _njit(_active_argmin_py)
extrapolation_bounds = _njit(_extrapolation_bounds_py)
extrapolation_bounds_on = _njit(_extrapolation_bounds_on_py)
second_order_best = _njit(_second_order_best_py)
second_order_partner = _njit(_second_order_partner_py)
# These kernels call helpers through their global names: compiled ones when numba is there.
_tighten_kernel = _njit(_tighten) if _NUMBA else _tighten
_entry_bound_kernel = _njit(_entry_bound) if _NUMBA else _entry_bound
_shift_score_kernel = _njit(_shift_score) if _NUMBA else _shift_score
_shift_weight_kernel = _njit(_shift_weight) if _NUMBA else _shift_weight
_add_atoms_kernel = _njit(_add_atoms) if _NUMBA else _add_atoms
_update_kernel = update if _NUMBA else _update_py
_select_kernel = select if _NUMBA else _select_py
_step_kernel = _njit(_exact_step) if _NUMBA else _exact_step
_away_max_kernel = _njit(_away_step_max) if _NUMBA else _away_step_max
# The scalar algebra of _moves, compiled for the compiled loop (one formula for both).
_toward_curvature_kernel = _njit(toward_curvature) if _NUMBA else toward_curvature
_pair_curvature_kernel = _njit(pair_curvature) if _NUMBA else pair_curvature
_second_order_gain = _njit(second_order_gain) if _NUMBA else second_order_gain
_partner_gain = _njit(_partner_gain_py) if _NUMBA else _partner_gain_py
_partner_kernel = second_order_partner if _NUMBA else _second_order_partner_py


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


def torch_update(w, s, a, b, i0, h0, c, i1, h1, d, w_prev, s_prev, shift, zero_tol):
    """Tensor version of :func:`update` (no host reads).

    With ``shift`` the new iterate is written into the *previous* iterate's buffers (which are
    no longer needed) and the function returns True: the caller swaps the buffer references.
    This avoids copying the iterate, and it avoids an in-place-write-after-clone pattern that
    torch.compile's inductor mis-orders.
    """
    if shift:
        w_prev.mul_(d)
        w_prev.add_(w * a)
        s_prev.mul_(d)
        s_prev.add_(s * a)
        _axpy(s_prev, b, h0)
        if h1 is not None:
            _axpy(s_prev, c, h1)
        w, s = w_prev, s_prev
    else:
        w.mul_(a)
        s.mul_(a)
        _axpy(s, b, h0)
        if h1 is not None:
            _axpy(s, c, h1)
    _scatter_add(w, i0, b)
    if h1 is not None:
        _scatter_add(w, i1, c)
    w.masked_fill_(w <= zero_tol, 0.0)
    return shift


def torch_active_argmin(w, s):
    """Tensor version of :func:`active_argmin`."""
    active = w > 0
    masked = torch.where(active, s, torch.full_like(s, math.inf))
    best = torch.argmin(masked).reshape(1)
    return best, masked.gather(0, best), active.sum()


def torch_second_order_partner(w, s, h, diag, ct, i, si, dii):
    """Tensor version of :func:`second_order_partner` (returns -1 when nothing qualifies)."""
    return torch_second_order_best(w, s, h, diag, ct, i, si, dii, gain=False)


def torch_second_order_best(w, s, h, diag, ct, i, si, dii, gain: bool = True):
    """Tensor version of :func:`second_order_best`: ``(j, gain)`` as 0-d tensors, ``j = -1``
    (and the gain -1) when nothing qualifies; ``gain=False``: ``j`` alone."""
    qij = h.to(s.dtype) - ct if ct is not None else h.to(s.dtype)
    q = (dii + diag - 2.0 * qij).clamp_min(1e-300)
    diff = s - si
    index = torch.arange(s.shape[0], device=s.device)
    ok = (w > 0) & (diff > 0) & (index != i)
    gains = torch.where(ok, diff * diff / q, torch.full_like(s, -1.0))
    best = torch.argmax(gains)
    found = ok.any()
    j = torch.where(found, best, torch.full_like(best, -1))
    if not gain:
        return j
    return j, torch.where(found, gains[best], torch.full_like(gains[best], -1.0))


def as_numpy(t: torch.Tensor) -> np.ndarray:
    """Zero-copy NumPy view of a CPU tensor."""
    return t.detach().numpy()
