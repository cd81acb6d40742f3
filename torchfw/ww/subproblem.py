r"""Exact and iterative solvers of the Weston-Watkins SVM block subproblem.

Every block-coordinate step of the linear Weston-Watkins SVM dual reduces, after the
reparametrization of Wang & Scott (2021), to one fixed-form quadratic program over a box:

.. math::
    \min_{b \in \mathbb{R}^{k-1}} \tfrac12\, b^\top (I + \mathbf{1}\mathbf{1}^\top)\, b - v^\top b
    \quad \text{s.t.}\quad 0 \le b \le C .                                   \qquad (4)

It is strictly convex, so it has one minimizer :math:`b^*`, and :math:`b^* =
\operatorname{clip}_{[0,C]}(v - \tilde\gamma \mathbf 1)` where :math:`\tilde\gamma = \mathbf 1^\top
b^*` is the unique root of the decreasing function :math:`h(\gamma) = \mathbf 1^\top
\operatorname{clip}_{[0,C]}(v - \gamma\mathbf 1) - \gamma`. **Walrus** finds it exactly in
:math:`O(k \log k)`: sort ``v``, walk the breakpoints :math:`\{v_j\} \cup \{v_j - C\}` downwards
while counting the coordinates at ``C`` (``n_up``) and strictly inside (``n_mid``), and at each
step test the KKT conditions at the closed form :math:`\gamma = (C\, n_{up} + S)/(n_{mid} + 1)`,
``S`` the sum of the free coordinates' ``v``. The first state that passes is the minimizer.

The **iterative** solver is the baseline the paper compares against: Shark's ``QpMcLinearWW``
greedy coordinate Newton steps (at most ``10 k`` of them), written in the coordinates of (4).

References
----------
Y. Wang and C. Scott, "An Exact Solver for the Weston-Watkins SVM Subproblem", ICML 2021
(PMLR 139), Theorem 3.4 and Algorithm 2.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import Tensor

from ..utils.validation import check_finite, check_positive
from . import _blocks as _k

__all__ = ["walrus", "walrus_batched", "iterative_ww_subproblem", "solve_ww_subproblem",
           "ww_subproblem_objective"]

_METHODS = ("walrus", "iterative")


def _as_tensor(v, name: str = "v") -> Tensor:
    if isinstance(v, Tensor):
        t = v
    else:
        try:
            t = torch.as_tensor(np.asarray(v, dtype=np.float64))
        except (TypeError, ValueError) as exc:
            raise TypeError(f"{name} must be a tensor or array of real numbers: {exc}") from None
    if t.dim() not in (1, 2):
        raise ValueError(f"{name} must be 1-d (one subproblem) or 2-d (a batch, one per row), "
                         f"got shape {tuple(t.shape)}")
    if not t.is_floating_point():
        t = t.to(torch.float64)
    check_finite(name, t)
    return t


def ww_subproblem_objective(b, v) -> Tensor:
    r"""Value of (4): :math:`\tfrac12 (\|b\|^2 + (\mathbf 1^\top b)^2) - v^\top b` (per row)."""
    b = torch.as_tensor(b, dtype=torch.float64)
    v = torch.as_tensor(v, dtype=torch.float64, device=b.device)
    return 0.5 * ((b * b).sum(-1) + b.sum(-1) ** 2) - (v * b).sum(-1)


def walrus(v, C: float) -> Tensor:
    r"""Exact minimizer of the Weston-Watkins subproblem (4) (Walrus, Wang & Scott 2021).

    Parameters
    ----------
    v : Tensor or array_like, shape (k-1,) or (B, k-1)
        Linear term; one subproblem per row for a 2-d input.
    C : float
        Box bound, ``C > 0``.

    Returns
    -------
    Tensor
        :math:`b^* = \operatorname{argmin}_{0 \le b \le C} \tfrac12 b^\top(I + 11^\top)b -
        v^\top b`, same shape, device and floating dtype as ``v`` (computed in float64).

    Notes
    -----
    A 1-d CPU input runs the sequential sort-and-sweep of Algorithm 2 (compiled with numba,
    the same code the BCD loop calls); a 2-d input, or any input on a GPU, runs the vectorized
    variant :func:`walrus_batched`. Both are exact up to rounding: the KKT test uses prefix sums
    and a relative tolerance of ``1e-12 * max(1, max v, C)``, with a bisection on ``h`` as the
    fallback when rounding makes every state fail (spec pitfall 8.1).
    """
    C = check_positive("C", C)
    t = _as_tensor(v)
    if t.dim() == 2 or t.device.type != "cpu":
        return walrus_batched(t, C)
    x = t.detach().to(torch.float64).contiguous().numpy()
    m = x.shape[0]
    out = np.zeros(m)
    ws = _k.Workspace(m + 1)
    _k.walrus_single(x, m, C, out, ws.heap, ws.hidx, ws.sv, ws.si, ws.prefix)
    return torch.from_numpy(out).to(t.dtype)


def walrus_batched(v, C: float) -> Tensor:
    r"""Walrus on a batch of subproblems at once, with tensor ops only (any device).

    Every positive breakpoint ``t`` of :math:`\{v_j\} \cup \{v_j - C\}` names one state of the
    sweep: all events ``>= t`` processed, i.e. ``n_top = #{v_j >= t}`` coordinates entered and
    ``n_up = #{v_j - C >= t}`` of them clipped at ``C``. Its closed-form ``gamma`` comes from
    prefix sums of the sorted ``v``; the state whose KKT conditions (39) are violated least is
    the minimizer (Wang & Scott 2021, Lemma A.16: a state is optimal iff it passes them, and one
    state among these always does, spec section 3.4). Cost ``O(B k log k)``.

    Parameters
    ----------
    v : Tensor or array_like, shape (k-1,) or (B, k-1)
    C : float

    Returns
    -------
    Tensor of the shape, device and floating dtype of ``v``.
    """
    C = check_positive("C", C)
    t = _as_tensor(v)
    squeeze = t.dim() == 1
    x = t.detach().to(torch.float64)
    if squeeze:
        x = x.unsqueeze(0)
    B, m = x.shape
    if m == 0:
        return t.clone()
    vs, order = torch.sort(x, dim=-1, descending=True)
    zero = torch.zeros(B, 1, dtype=x.dtype, device=x.device)
    prefix = torch.cat([zero, vs.cumsum(-1)], dim=-1)  # prefix[:, j] = sum of the top j
    asc = vs.flip(-1).contiguous()
    asc_up = asc - C  # computed exactly as the exit breakpoints below: counts match them
    bp = torch.cat([vs, vs - C], dim=-1)  # candidate breakpoints, (B, 2m)
    n_top = m - torch.searchsorted(asc, bp, right=False)
    n_up = m - torch.searchsorted(asc_up, bp.contiguous(), right=False)
    n_mid = n_top - n_up
    S = prefix.gather(1, n_top) - prefix.gather(1, n_up)
    # counts enter the float64 arithmetic explicitly: C * int64 tensor would be float32
    gamma = (C * n_up.to(x.dtype) + S) / (n_mid.to(x.dtype) + 1.0)
    inf = torch.full((B, 1), torch.inf, dtype=x.dtype, device=x.device)
    vp = torch.cat([inf, vs, -inf], dim=-1)  # 1-based with sentinels v_<0> = inf, v_<m+1> = -inf
    viol = torch.stack([
        C - (vp.gather(1, n_up) - gamma),
        (vp.gather(1, n_up + 1) - gamma) - C,
        gamma - vp.gather(1, n_top),
        vp.gather(1, n_top + 1) - gamma,
    ]).amax(0).clamp_min(0.0)
    viol = torch.where(bp > 0, viol, torch.full_like(viol, torch.inf))
    best = viol.argmin(dim=-1, keepdim=True)
    g = gamma.gather(1, best)
    nu = n_up.gather(1, best)
    nt = n_top.gather(1, best)
    scale = torch.clamp(vs[:, :1], min=max(1.0, C))
    bad = viol.gather(1, best) > 1e-9 * scale  # rounding defeated every state: bisect instead
    if bool(bad.any()):
        g2, nu2, nt2 = _bisect_state(vs, prefix, C)
        g = torch.where(bad, g2, g)
        nu = torch.where(bad, nu2, nu)
        nt = torch.where(bad, nt2, nt)
    rank = torch.arange(m, device=x.device).unsqueeze(0)
    bs = torch.where(rank < nu, torch.full_like(vs, C),
                     torch.where(rank < nt, vs - g, torch.zeros_like(vs))).clamp(0.0, C)
    positive = vs[:, :1] > 0  # v_max <= 0  =>  b* = 0 (Lemma A.9.3)
    bs = torch.where(positive, bs, torch.zeros_like(bs))
    b = torch.empty_like(bs).scatter_(1, order, bs)
    if squeeze:
        b = b.squeeze(0)
    return b.to(t.dtype)


def _bisect_state(vs: Tensor, prefix: Tensor, C: float):
    """Root of ``h`` by bisection on ``[0, v_max]``, then the exact closed form of its state."""
    lo = torch.zeros(vs.shape[0], 1, dtype=vs.dtype, device=vs.device)
    hi = vs[:, :1].clamp_min(0.0)
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        h = (vs - mid).clamp(0.0, C).sum(-1, keepdim=True) - mid
        lo = torch.where(h > 0, mid, lo)
        hi = torch.where(h > 0, hi, mid)
    g = 0.5 * (lo + hi)
    nu = (vs - g >= C).sum(-1, keepdim=True)
    nt = (vs - g > 0).sum(-1, keepdim=True)
    S = prefix.gather(1, nt) - prefix.gather(1, nu)
    return (C * nu.to(vs.dtype) + S) / ((nt - nu).to(vs.dtype) + 1.0), nu, nt


def iterative_ww_subproblem(v, C: float, b0=None, *, q: float = 1.0, eps: float = 1e-6) -> Tensor:
    r"""Approximate solution of (4) by Shark's greedy coordinate Newton steps (the baseline).

    From ``b0`` (default 0), repeatedly take the coordinate with the largest KKT violation of the
    box, with gradient :math:`\nabla = (I + 11^\top) b - v`, and set it to
    :math:`\operatorname{clip}_{[0,C]}(b_j - \nabla_j / 2)` (the Hessian's diagonal is 2), until
    ``q * violation < eps`` or ``10 k`` steps (Shark's ``QpMcLinearWW::solveSub`` as
    reimplemented by Wang & Scott 2021, supplement A.6.1; ``q = ||x_i||^2`` there, since Shark's
    gradient is ``-q`` times ours).

    Parameters
    ----------
    v : Tensor or array_like, shape (k-1,) or (B, k-1)
    C : float
    b0 : Tensor or array_like, optional
        Warm start, feasible (the current block in BCD).
    q : float, default 1.0
        Scale of the stopping test (``||x_i||^2`` inside BCD).
    eps : float, default 1e-6
        Shark's hard-coded KKT threshold.

    Returns
    -------
    Tensor of the shape and dtype of ``v`` (on the CPU).
    """
    C = check_positive("C", C)
    q = check_positive("q", q)
    eps = check_positive("eps", eps)
    t = _as_tensor(v)
    x = t.detach().cpu().to(torch.float64).numpy()
    x2 = np.atleast_2d(x)
    if b0 is None:
        b = np.zeros_like(x2)
    else:
        b = np.atleast_2d(torch.as_tensor(b0, dtype=torch.float64).detach().cpu().numpy()
                          .copy())
        if b.shape != x2.shape:
            raise ValueError(f"b0 has shape {b.shape} but v has shape {x2.shape}")
        if not np.all(np.isfinite(b)) or (b < 0).any() or (b > C).any():
            raise ValueError("b0 must be finite and inside the box [0, C]")
    m = x2.shape[1]
    grad = np.zeros(max(m, 1))
    for r in range(x2.shape[0]):
        row = np.ascontiguousarray(x2[r])
        _k.iterative_single(row, m, C, b[r], q, eps, grad)
    out = torch.from_numpy(b.reshape(x.shape)).to(t.dtype)
    return out


def solve_ww_subproblem(v, C: float, method: str = "walrus", **kwargs) -> Tensor:
    r"""Solve the Weston-Watkins block subproblem (4) by ``method``.

    Parameters
    ----------
    v : Tensor or array_like, shape (k-1,) or (B, k-1)
    C : float
    method : {"walrus", "iterative"}
        ``"walrus"``: exact, :func:`walrus`. ``"iterative"``: Shark-style baseline,
        :func:`iterative_ww_subproblem` (``b0``, ``q`` and ``eps`` go through ``kwargs``).
    """
    if method == "walrus":
        if kwargs:
            raise TypeError(f"walrus takes no options, got {sorted(kwargs)}")
        return walrus(v, C)
    if method == "iterative":
        return iterative_ww_subproblem(v, C, **kwargs)
    raise ValueError(f"method must be one of {_METHODS}, got {method!r}")
