r"""Linear minimization oracles (LMOs): the constraint sets of torchfw.

An LMO answers one question about a compact convex set :math:`\mathcal{C}`:

.. math::
    \operatorname{lmo}(g) \in \operatorname*{argmin}_{v \in \mathcal{C}}
    \langle g, v \rangle .

It always *minimizes* and always returns a *vertex* (never a direction, never a negated
gradient). Ties are broken deterministically.

Shapes. The set lives on the last dimension. A tensor of shape ``(n,)`` is one point; a tensor of
shape ``(B, n)`` is a batch of ``B`` independent copies of the set (used by batched solvers and by
per-row constraints in :class:`torchfw.optim.StochasticFrankWolfe`). Radii may be a float or a
tensor of shape ``(B,)``.

Atomic sets. The simplex and the L1 ball are convex hulls of finitely many *atoms* (signed, scaled
unit vectors). They also expose the atoms by index (:meth:`AtomicLMO.argmin_atom`,
:meth:`AtomicLMO.atom_dot`, ...) so that solvers keep an active set as a weight vector over atom
indices and never build dense vertices.
"""

from __future__ import annotations

import math
import numbers

import torch
from torch import Tensor

from ..utils.validation import check_finite, check_positive

__all__ = ["LMO", "AtomicLMO", "Simplex", "L1Ball", "L2Ball", "LinfBall", "Box"]


def _radius_param(name: str, radius) -> float | Tensor:
    """Validate a radius given as a positive number or a tensor of positive numbers."""
    if isinstance(radius, Tensor):
        if radius.dim() > 1:
            raise ValueError(f"{name} tensor must be 0-d or 1-d (one radius per row)")
        check_finite(name, radius)
        if bool((radius <= 0).any()):
            raise ValueError(f"{name} must be positive, got a tensor with entries <= 0")
        return radius
    return check_positive(name, radius)


def _per_row(value, like: Tensor) -> float | Tensor:
    """Broadcast a scalar-or-(B,) parameter against the leading dims of ``like``."""
    if isinstance(value, Tensor):
        value = value.to(device=like.device, dtype=like.dtype)
        if like.dim() > 1 and value.dim() == 1:
            return value.unsqueeze(-1)
    return value


class LMO:
    """Base class of all constraint sets.

    Subclasses implement :meth:`lmo`, :meth:`contains`, :meth:`diameter`, :meth:`max_step` and
    :meth:`project`; :meth:`initial_point` defaults to the vertex returned for a zero gradient.
    """

    #: True for sets given as the convex hull of indexed atoms (simplex, L1 ball).
    is_atomic: bool = False

    def lmo(self, grad: Tensor) -> Tensor:  # pragma: no cover - abstract
        """Return a vertex minimizing ``<grad, v>`` over the set (same shape as ``grad``)."""
        raise NotImplementedError

    def contains(self, x: Tensor, atol: float = 1e-9) -> Tensor:  # pragma: no cover - abstract
        """Whether ``x`` is in the set up to ``atol`` (bool tensor of the batch shape)."""
        raise NotImplementedError

    def diameter(self, n: int) -> float:  # pragma: no cover - abstract
        """Euclidean diameter of the set in dimension ``n`` (the largest ``||u - v||``)."""
        raise NotImplementedError

    def max_step(self, x: Tensor, d: Tensor) -> Tensor:  # pragma: no cover - abstract
        """Largest ``gamma >= 0`` with ``x + gamma * d`` in the set (``inf`` if unbounded).

        ``x`` must be feasible. Used to keep extrapolating steps (PARTAN) feasible.
        """
        raise NotImplementedError

    def project(self, x: Tensor) -> Tensor:  # pragma: no cover - abstract
        """Euclidean projection of ``x`` onto the set."""
        raise NotImplementedError

    def initial_point(self, n: int, *, dtype=None, device=None) -> Tensor:
        """A feasible starting point in dimension ``n``: the vertex for a zero gradient."""
        dtype = dtype or torch.get_default_dtype()
        return self.lmo(torch.zeros(n, dtype=dtype, device=device))

    def check_compatible(self, x: Tensor, name: str = "x0") -> None:
        """Raise if a tensor parameter of the set lives on another device than ``x``."""
        for pname, value in vars(self).items():
            if isinstance(value, Tensor) and value.device != x.device:
                raise ValueError(
                    f"{type(self).__name__}.{pname.lstrip('_')} is on device {value.device} "
                    f"but {name} is on {x.device}; move them to the same device"
                )

    def __repr__(self) -> str:
        params = ", ".join(
            f"{k.lstrip('_')}={v!r}" for k, v in vars(self).items() if not k.startswith("__")
        )
        return f"{type(self).__name__}({params})"


class AtomicLMO(LMO):
    r"""A set given as the convex hull of ``N`` indexed atoms :math:`a_0, \dots, a_{N-1}`.

    A point is represented by weights ``w`` on the unit simplex over atoms,
    :math:`x = \sum_k w_k a_k` (:meth:`to_point`). Solvers work on the weights, which turns any
    problem over the set into a problem over the unit simplex in ``N`` dimensions.
    """

    is_atomic = True
    #: Scale of the atoms (one per row for batched problems); set by every concrete set.
    radius: float | Tensor

    def n_atoms(self, n: int) -> int:  # pragma: no cover - abstract
        """Number of atoms of the set in dimension ``n``."""
        raise NotImplementedError

    def atom_scores(self, grad: Tensor) -> Tensor:  # pragma: no cover - abstract
        """All inner products ``<grad, a_k>`` as a tensor of shape ``(..., N)``."""
        raise NotImplementedError

    def argmin_atom(self, grad: Tensor) -> Tensor:
        """Index of the atom minimizing ``<grad, a_k>`` (lowest index on ties)."""
        return torch.argmin(self.atom_scores(grad), dim=-1)

    def atom_dot(self, grad: Tensor, index: Tensor | int) -> Tensor:
        """``<grad, a_index>`` without building the atom."""
        index = torch.as_tensor(index, device=grad.device)
        coord, sign = self.atom_coordinate(index, grad.shape[-1])
        value = torch.gather(grad, -1, coord.unsqueeze(-1)).squeeze(-1)
        return sign.to(grad.dtype) * _per_row_scalar(self.radius, value) * value

    def atom_coordinate(self, index: Tensor, n: int) -> tuple[Tensor, Tensor]:
        """Coordinate and sign (+1/-1) of atom ``index``: ``a_k = sign * radius * e_coord``."""
        raise NotImplementedError  # pragma: no cover - abstract

    def atom_gather(self, v: Tensor) -> Tensor:  # pragma: no cover - abstract
        """``v[coord(k)]`` for every atom ``k`` (shape ``(..., N)``)."""
        raise NotImplementedError

    def atom(self, index: Tensor | int, n: int, *, dtype=None, device=None) -> Tensor:
        """The dense atom ``a_index`` in dimension ``n`` (for tests and small problems)."""
        dtype = dtype or torch.get_default_dtype()
        index = torch.as_tensor(index, device=device)
        coord, sign = self.atom_coordinate(index, n)
        v = torch.zeros(*index.shape, n, dtype=dtype, device=device)
        r = _per_row_scalar(self.radius, v[..., 0])
        v.scatter_(-1, coord.unsqueeze(-1), (sign.to(dtype) * r).unsqueeze(-1))
        return v

    def lmo(self, grad: Tensor) -> Tensor:
        return self.atom(self.argmin_atom(grad), grad.shape[-1], dtype=grad.dtype,
                         device=grad.device)

    def to_point(self, w: Tensor) -> Tensor:  # pragma: no cover - abstract
        """Point ``x = sum_k w_k a_k`` for weights ``w`` of shape ``(..., N)``."""
        raise NotImplementedError

    def to_weights(self, x: Tensor) -> Tensor:  # pragma: no cover - abstract
        """A (canonical) weight vector on the simplex over atoms with ``to_point(w) == x``."""
        raise NotImplementedError


def _per_row_scalar(radius, like: Tensor):
    """Radius broadcast against a tensor of the batch shape (no trailing set dimension)."""
    if isinstance(radius, Tensor):
        return radius.to(device=like.device, dtype=like.dtype if like.is_floating_point()
                         else radius.dtype)
    return radius


class Simplex(AtomicLMO):
    r"""The scaled probability simplex :math:`\{x \ge 0,\ \sum_i x_i = r\}`.

    Atoms are :math:`r e_i`, ``N = n``. The L2-SVM dual (Core Vector Machine form) and the
    reduced Lasso live here. The LMO picks :math:`r e_{i^*}` with
    :math:`i^* = \operatorname{argmin}_i g_i` (lowest index on ties).

    Parameters
    ----------
    radius : float or Tensor, default 1.0
        Total mass ``r > 0`` (one per row for batched problems).
    """

    def __init__(self, radius: float | Tensor = 1.0):
        self.radius = _radius_param("radius", radius)

    def n_atoms(self, n: int) -> int:
        return n

    def atom_scores(self, grad: Tensor) -> Tensor:
        if not isinstance(self.radius, Tensor) and self.radius == 1.0:
            return grad
        return _per_row(self.radius, grad) * grad

    def argmin_atom(self, grad: Tensor) -> Tensor:
        # The radius is positive, so it does not change the argmin: skip the multiply.
        return torch.argmin(grad, dim=-1)

    def atom_coordinate(self, index: Tensor, n: int) -> tuple[Tensor, Tensor]:
        return index, torch.ones_like(index)

    def atom_gather(self, v: Tensor) -> Tensor:
        return v

    def to_point(self, w: Tensor) -> Tensor:
        return _per_row(self.radius, w) * w

    def to_weights(self, x: Tensor) -> Tensor:
        return x / _per_row(self.radius, x)

    def contains(self, x: Tensor, atol: float = 1e-9) -> Tensor:
        r = _per_row_scalar(self.radius, x[..., 0])
        nonneg = (x >= -atol).all(dim=-1)
        total = (x.sum(dim=-1) - r).abs() <= atol * max(1.0, x.shape[-1] ** 0.5)
        return nonneg & total

    def diameter(self, n: int) -> float:
        return math.sqrt(2.0) * _max_radius(self.radius) if n > 1 else 0.0

    def max_step(self, x: Tensor, d: Tensor) -> Tensor:
        # Directions used by solvers stay in the affine hull (sum d = 0); only x >= 0 binds.
        ratio = torch.where(d < 0, x.clamp_min(0) / (-d), torch.full_like(x, math.inf))
        return ratio.amin(dim=-1)

    def project(self, x: Tensor) -> Tensor:
        return _project_simplex(x, _per_row(self.radius, x))


class L1Ball(AtomicLMO):
    r"""The L1 ball :math:`\{x : \|x\|_1 \le r\}`, the constraint of the constrained Lasso.

    Atoms are :math:`+r e_i` (index ``i``) and :math:`-r e_i` (index ``n + i``), ``N = 2n``. The LMO
    returns :math:`-r\,\mathrm{sign}(g_{i^*}) e_{i^*}` with :math:`i^* = \operatorname{argmax}_i
    |g_i|`; ties go to the lowest atom index (positive atoms before negative ones).

    Parameters
    ----------
    radius : float or Tensor, default 1.0
        Radius ``r > 0`` (one per row for batched problems).
    """

    def __init__(self, radius: float | Tensor = 1.0):
        self.radius = _radius_param("radius", radius)

    def n_atoms(self, n: int) -> int:
        return 2 * n

    def atom_scores(self, grad: Tensor) -> Tensor:
        return _per_row(self.radius, grad) * torch.cat([grad, -grad], dim=-1)

    def argmin_atom(self, grad: Tensor) -> Tensor:
        return torch.argmin(torch.cat([grad, -grad], dim=-1), dim=-1)

    def atom_coordinate(self, index: Tensor, n: int) -> tuple[Tensor, Tensor]:
        negative = index >= n
        return torch.where(negative, index - n, index), 1 - 2 * negative.long()

    def atom_gather(self, v: Tensor) -> Tensor:
        return torch.cat([v, v], dim=-1)

    def to_point(self, w: Tensor) -> Tensor:
        n = w.shape[-1] // 2
        return _per_row(self.radius, w) * (w[..., :n] - w[..., n:])

    def to_weights(self, x: Tensor) -> Tensor:
        r = _per_row(self.radius, x)
        pos = x.clamp_min(0) / r
        neg = (-x).clamp_min(0) / r
        # Mass not used by |x| sits half on +e_0 and half on -e_0: the two cancel in x.
        slack = (1 - (pos.sum(-1) + neg.sum(-1))).clamp_min(0)
        pos[..., 0] += slack / 2
        neg[..., 0] += slack / 2
        return torch.cat([pos, neg], dim=-1)

    def contains(self, x: Tensor, atol: float = 1e-9) -> Tensor:
        r = _per_row_scalar(self.radius, x[..., 0])
        return x.abs().sum(dim=-1) <= r + atol * max(1.0, x.shape[-1] ** 0.5)

    def diameter(self, n: int) -> float:
        return 2.0 * _max_radius(self.radius)

    def max_step(self, x: Tensor, d: Tensor) -> Tensor:
        r = _per_row_scalar(self.radius, x[..., 0])
        return _l1_max_step(x, d, r)

    def project(self, x: Tensor) -> Tensor:
        r = _per_row(self.radius, x)
        inside = (x.abs().sum(-1, keepdim=True) <= r)
        proj = torch.sign(x) * _project_simplex(x.abs(), r)
        return torch.where(inside, x, proj)


class L2Ball(LMO):
    r"""The Euclidean ball :math:`\{x : \|x\|_2 \le r\}`.

    The LMO returns :math:`-r\, g / \|g\|_2`; for a zero gradient (every point optimal) it returns
    :math:`r e_0`.
    """

    def __init__(self, radius: float | Tensor = 1.0):
        self.radius = _radius_param("radius", radius)

    def lmo(self, grad: Tensor) -> Tensor:
        r = _per_row(self.radius, grad)
        unit, scale = _scaled(grad)
        norm = torch.linalg.vector_norm(unit, dim=-1, keepdim=True)
        fallback = torch.zeros_like(grad)
        fallback[..., 0] = 1.0
        direction = torch.where(scale > 0, -unit / norm.clamp_min(torch.finfo(grad.dtype).tiny),
                                fallback)
        return r * direction

    def contains(self, x: Tensor, atol: float = 1e-9) -> Tensor:
        r = _per_row_scalar(self.radius, x[..., 0])
        return torch.linalg.vector_norm(x, dim=-1) <= r + atol

    def diameter(self, n: int) -> float:
        return 2.0 * _max_radius(self.radius)

    def max_step(self, x: Tensor, d: Tensor) -> Tensor:
        # Largest root of ||x + g d||^2 = r^2.
        r = _per_row_scalar(self.radius, x[..., 0])
        dd = (d * d).sum(-1)
        xd = (x * d).sum(-1)
        xx = (x * x).sum(-1)
        disc = (xd * xd - dd * (xx - r * r)).clamp_min(0)
        root = (-xd + disc.sqrt()) / dd.clamp_min(torch.finfo(x.dtype).tiny)
        return torch.where(dd > 0, root.clamp_min(0), torch.full_like(dd, math.inf))

    def project(self, x: Tensor) -> Tensor:
        r = _per_row(self.radius, x)
        unit, scale = _scaled(x)
        norm = torch.linalg.vector_norm(unit, dim=-1, keepdim=True)
        # ||x|| = scale * norm may overflow: compare r / scale with norm instead.
        inside = norm * scale <= r
        return torch.where(inside, x, r * unit / norm.clamp_min(torch.finfo(x.dtype).tiny))


class Box(LMO):
    r"""The box :math:`\{x : l \le x \le u\}` (coordinate-wise bounds).

    The LMO sets :math:`v_i = l_i` where :math:`g_i > 0` and :math:`v_i = u_i` otherwise (so a zero
    gradient coordinate goes to the upper bound).

    Parameters
    ----------
    lower, upper : float or Tensor
        Finite bounds with ``lower <= upper``, broadcastable to the last dimension.
    """

    def __init__(self, lower: float | Tensor, upper: float | Tensor):
        for name, bound in (("lower", lower), ("upper", upper)):
            if isinstance(bound, Tensor):
                check_finite(name, bound)
            elif isinstance(bound, bool) or not isinstance(bound, numbers.Real) or \
                    not math.isfinite(bound):
                raise ValueError(f"{name} must be a finite number or tensor, got {bound!r}")
        shapes = [tuple(b.shape) for b in (lower, upper) if isinstance(b, Tensor)]
        if len(shapes) == 2:
            try:
                torch.broadcast_shapes(*shapes)
            except RuntimeError:
                raise ValueError(f"Box bounds must have broadcastable shapes, got lower "
                                 f"{shapes[0]} and upper {shapes[1]}") from None
        if bool(torch.as_tensor(lower > upper).any()):
            raise ValueError("Box needs lower <= upper everywhere")
        self.lower = lower
        self.upper = upper

    def _bounds(self, like: Tensor) -> tuple[Tensor, Tensor]:
        lo = _on_device(self.lower, like)
        hi = _on_device(self.upper, like)
        try:
            return lo.expand_as(like), hi.expand_as(like)
        except RuntimeError:
            raise ValueError(f"Box bounds of shapes {tuple(lo.shape)} and {tuple(hi.shape)} do "
                             f"not fit a point of shape {tuple(like.shape)}") from None

    def lmo(self, grad: Tensor) -> Tensor:
        lo, hi = self._bounds(grad)
        return torch.where(grad > 0, lo, hi)

    def contains(self, x: Tensor, atol: float = 1e-9) -> Tensor:
        lo, hi = self._bounds(x)
        return ((x >= lo - atol) & (x <= hi + atol)).all(dim=-1)

    def diameter(self, n: int) -> float:
        lo, hi = self._bounds(torch.zeros(n, dtype=torch.float64))
        return float(torch.linalg.vector_norm(hi - lo))

    def max_step(self, x: Tensor, d: Tensor) -> Tensor:
        lo, hi = self._bounds(x)
        inf = torch.full_like(x, math.inf)
        up = torch.where(d > 0, (hi - x).clamp_min(0) / d, inf)
        down = torch.where(d < 0, (x - lo).clamp_min(0) / (-d), inf)
        return torch.minimum(up, down).amin(dim=-1)

    def project(self, x: Tensor) -> Tensor:
        lo, hi = self._bounds(x)
        return torch.minimum(torch.maximum(x, lo), hi)


class LinfBall(Box):
    r"""The L-infinity ball :math:`\{x : \|x\|_\infty \le r\}` = the box :math:`[-r, r]^n`.

    The LMO returns :math:`-r\,\mathrm{sign}(g)` (``+r`` where ``g == 0``).
    """

    def __init__(self, radius: float | Tensor = 1.0):
        self.radius = _radius_param("radius", radius)

    @property
    def lower(self):
        return -self.radius

    @property
    def upper(self):
        return self.radius

    def _bounds(self, like: Tensor) -> tuple[Tensor, Tensor]:
        r = _on_device(_per_row(self.radius, like), like).expand_as(like)
        return -r, r

    def diameter(self, n: int) -> float:
        return 2.0 * _max_radius(self.radius) * math.sqrt(n)


def _scaled(v: Tensor) -> tuple[Tensor, Tensor]:
    """``(v / m, m)`` with ``m = max |v_i|`` per row (``v`` itself where ``m == 0``).

    Norms of the scaled vector neither overflow (entries ~1e300) nor underflow (~1e-300), where
    ``||v||`` computed directly would be ``inf`` or ``0`` and give a wrong vertex or projection.
    """
    scale = v.abs().amax(dim=-1, keepdim=True)
    return v / torch.where(scale > 0, scale, torch.ones_like(scale)), scale


def _on_device(value, like: Tensor) -> Tensor:
    """``value`` (number or tensor) as a tensor with the dtype and device of ``like``."""
    if isinstance(value, Tensor):
        return value.to(dtype=like.dtype, device=like.device)
    # torch.as_tensor(number, device="cuda") is a host-to-device copy, which synchronizes the
    # stream at every LMO call; a 0-d fill is a kernel launch.
    return torch.full((), value, dtype=like.dtype, device=like.device)


def _max_radius(radius) -> float:
    return float(radius.max()) if isinstance(radius, Tensor) else float(radius)


def _project_simplex(v: Tensor, r) -> Tensor:
    """Euclidean projection onto {x >= 0, sum x = r} along the last dim (sort-based, exact)."""
    n = v.shape[-1]
    # The projection is invariant to v + c * 1 (the sum is fixed): shift the largest entry to 0
    # so that r is not lost next to huge entries (1e300 - r == 1e300 gave the zero vector).
    v = v - v.amax(dim=-1, keepdim=True)
    u, _ = torch.sort(v, dim=-1, descending=True)
    css = torch.cumsum(u, dim=-1) - r
    ks = torch.arange(1, n + 1, device=v.device, dtype=v.dtype)
    cond = u - css / ks > 0
    # rho = last index where cond holds (cond is true on a prefix).
    rho = cond.to(torch.int64).sum(dim=-1, keepdim=True).clamp_min(1)
    theta = torch.gather(css, -1, rho - 1) / rho.to(v.dtype)
    return (v - theta).clamp_min(0)


def _l1_max_step(x: Tensor, d: Tensor, r) -> Tensor:
    r"""Largest ``g >= 0`` with ``||x + g d||_1 <= r``, for feasible ``x``.

    :math:`\phi(g) = \sum_i |x_i + g d_i|` is convex and piecewise linear; walk its sorted
    breakpoints with cumulative sums and solve the crossing segment. A point outside the ball by
    rounding (``||x||_1 = r (1 + 1e-16)``, as a projection may return) is treated as on the
    boundary: the step keeps :math:`\phi(g) \le \max(r, \phi(0))` instead of being 0 along
    every direction, inward ones included.
    """
    inf = torch.full_like(x, math.inf)
    # Right-derivative sign of each term at g = 0.
    s0 = torch.where(x != 0, torch.sign(x), torch.sign(d))
    phi0 = x.abs().sum(-1)
    r = torch.maximum(phi0, torch.as_tensor(r, dtype=x.dtype, device=x.device))
    slope0 = (s0 * d).sum(-1)
    # A term changes sign where x_i + g d_i = 0 with g > 0 (it was opposite to d_i before).
    crossing = (x * d < 0)
    bp = torch.where(crossing, -x / torch.where(crossing, d, torch.ones_like(d)), inf)
    bp_sorted, order = torch.sort(bp, dim=-1)
    jump = torch.gather(2 * d.abs() * crossing, -1, order)
    # Segment k spans [starts_k, bp_k] with slope seg_slope_k (the jumps before it added).
    starts = torch.cat([torch.zeros_like(bp_sorted[..., :1]), bp_sorted[..., :-1]], dim=-1)
    seg_slope = slope0.unsqueeze(-1) + torch.cumsum(jump, dim=-1) - jump
    finite = torch.isfinite(bp_sorted)
    seg_len = torch.where(finite, bp_sorted - starts, torch.zeros_like(bp_sorted))
    phi_at_bp = phi0.unsqueeze(-1) + torch.cumsum(seg_slope * seg_len, dim=-1)
    dnorm1 = d.abs().sum(-1)
    # phi along a segment where it is flat in exact arithmetic (a step inside a face of the
    # ball) comes out of the cumulative sums a few ulps above or below r: compare with a
    # tolerance at the scale of that rounding, or a flat face would end the step at random.
    n = x.shape[-1]
    eps = torch.finfo(x.dtype).eps
    tol = 4.0 * n * eps * (phi0.unsqueeze(-1) + torch.where(finite, bp_sorted, 0.0)
                           * dnorm1.unsqueeze(-1))
    # phi rises above r inside the first segment whose end value exceeds r.
    over = finite & (phi_at_bp > r.unsqueeze(-1) + tol)
    any_over = over.any(dim=-1)
    k = torch.argmax(over.to(torch.int8), dim=-1, keepdim=True)
    start_k = torch.gather(starts, -1, k).squeeze(-1)
    end_k = torch.gather(bp_sorted, -1, k).squeeze(-1)
    slope_k = torch.gather(seg_slope, -1, k).squeeze(-1)
    phi_start_k = torch.gather(phi_at_bp - seg_slope * seg_len, -1, k).squeeze(-1)
    tiny = torch.finfo(x.dtype).tiny
    inside_seg = torch.minimum(
        start_k + (r - phi_start_k).clamp_min(0) / slope_k.clamp_min(tiny), end_k)
    # Beyond the last breakpoint every term grows: the slope is ||d||_1.
    n_finite = finite.sum(-1, keepdim=True)
    last = (n_finite - 1).clamp_min(0)
    last_bp = torch.where(n_finite > 0, torch.gather(bp_sorted, -1, last), 0.0).squeeze(-1)
    phi_last = torch.where(n_finite > 0, torch.gather(phi_at_bp, -1, last),
                           phi0.unsqueeze(-1)).squeeze(-1)
    tail = torch.where(dnorm1 > 0,
                       last_bp + (r - phi_last).clamp_min(0) / dnorm1.clamp_min(tiny),
                       torch.full_like(phi0, math.inf))
    result = torch.where(any_over, inside_seg, tail)
    return result.clamp_min(0)
