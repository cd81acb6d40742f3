r"""More constraint sets: K-sparse polytope, Lp balls, group-L1 ball, 0/1 hypercube, Birkhoff.

Each set is an :class:`~torchfw.sets.oracles.LMO` with the contract of :mod:`torchfw.sets.oracles`: the set
lives on the last dimension, a tensor of shape ``(B, n)`` is a batch of ``B`` independent copies,
and ``lmo(g)`` returns a vertex minimizing :math:`\langle g, v\rangle` with the shape, dtype and
device of ``g``. Matrix sets (Birkhoff) take their matrices flattened row-major on that last
dimension, as :class:`torchfw.optim.StochasticFrankWolfe` views a parameter.

These sets have finitely many vertices (K-sparse polytope, hypercube, Birkhoff) or infinitely
many (Lp and group-L1 balls), but never a short list of coordinate atoms, so none of them is an
:class:`~torchfw.sets.oracles.AtomicLMO`: solvers that keep an active set over them (blended pairwise,
:class:`~torchfw.optimizers.BlendedPairwiseConditionalGradient`) store the vertices themselves.

The sets and their oracles follow FrankWolfe.jl (Besançon, Carderera & Pokutta, "FrankWolfe.jl:
a high-performance and flexible toolbox for Frank-Wolfe algorithms and conditional gradients",
INFORMS J. Computing 2022), ``src/polytope_oracles.jl`` and ``src/norm_oracles.jl``.
"""

from __future__ import annotations

import math

import numpy as np
import torch
from torch import Tensor

from ..utils.validation import check_positive
from .oracles import (
    LMO,
    Box,
    _l1_max_step,
    _max_radius,
    _per_row,
    _per_row_scalar,
    _radius_param,
    _scaled,
)

__all__ = ["KSparsePolytope", "LpBall", "GroupL1Ball", "Hypercube", "Birkhoff"]


def _is_meta(t: Tensor) -> bool:
    # torchfw.optim checks that a set fits a parameter by calling the LMO on a "meta" tensor
    # (shapes only, no data): data-dependent steps are skipped there.
    return t.device.type == "meta"


def _bisect_max_step(x: Tensor, d: Tensor, inside, upper: Tensor, steps: int = 60) -> Tensor:
    """Largest ``gamma in [0, upper]`` with ``inside(x + gamma d)`` by bisection (per row).

    ``inside`` must be monotone along the ray (true on ``[0, gamma*]``, false after), which holds
    for a convex set and a feasible ``x``.
    """
    lo = torch.zeros_like(upper)
    hi = upper.clone()
    ok_hi = inside(x + hi.unsqueeze(-1) * d)
    for _ in range(steps):
        mid = 0.5 * (lo + hi)
        ok = inside(x + mid.unsqueeze(-1) * d)
        lo = torch.where(ok, mid, lo)
        hi = torch.where(ok, hi, mid)
    return torch.where(ok_hi, upper, lo)


class KSparsePolytope(LMO):
    r"""The K-sparse polytope :math:`\{x : \|x\|_1 \le rK,\ \|x\|_\infty \le r\}`.

    It is the convex hull of the vectors with exactly ``K`` nonzero entries, each equal to
    :math:`\pm r` (:math:`2^K\binom{n}{K}` vertices): the L1 ball of radius ``r`` for ``K = 1``
    and the box :math:`[-r, r]^n` for ``K = n``. The LMO puts :math:`-r\,\mathrm{sign}(g_i)` on
    the ``K`` entries of largest :math:`|g_i|` (``torch.topk``: :math:`O(n)` per row, with
    lowest-index-first ties not guaranteed) and zero elsewhere; a zero ``g_i`` among them gets
    ``+r``. Sets of this kind regularize network layers in Pokutta, Spiegel & Zimmer (2020),
    "Deep neural network training with Frank-Wolfe", arXiv:2010.07243, and are FrankWolfe.jl's
    ``KSparseLMO``.

    Parameters
    ----------
    k : int
        Number of nonzeros of a vertex, ``1 <= k`` (clipped to ``n`` for shorter inputs).
    radius : float or Tensor, default 1.0
        Magnitude ``r > 0`` of the nonzero entries (one per row for batched problems).
    """

    def __init__(self, k: int, radius: float | Tensor = 1.0):
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise ValueError(f"k must be an integer >= 1, got {k!r}")
        self.k = k
        self.radius = _radius_param("radius", radius)

    def lmo(self, grad: Tensor) -> Tensor:
        k = min(self.k, grad.shape[-1])
        if _is_meta(grad):
            return torch.empty_like(grad)
        idx = torch.topk(grad.abs(), k, dim=-1).indices
        signs = torch.where(torch.gather(grad, -1, idx) > 0, -1.0, 1.0).to(grad.dtype)
        v = torch.zeros_like(grad)
        v.scatter_(-1, idx, signs)
        return _per_row(self.radius, grad) * v

    def contains(self, x: Tensor, atol: float = 1e-9) -> Tensor:
        r = _per_row_scalar(self.radius, x[..., 0])
        k = min(self.k, x.shape[-1])
        in_box = x.abs().amax(dim=-1) <= r + atol
        in_l1 = x.abs().sum(dim=-1) <= r * k + atol * max(1.0, x.shape[-1] ** 0.5)
        return in_box & in_l1

    def diameter(self, n: int) -> float:
        # Two vertices with the same support and opposite signs: ||2 r 1_K|| = 2 r sqrt(K).
        return 2.0 * _max_radius(self.radius) * math.sqrt(min(self.k, n))

    def max_step(self, x: Tensor, d: Tensor) -> Tensor:
        r = _per_row_scalar(self.radius, x[..., 0])
        k = min(self.k, x.shape[-1])
        inf = torch.full_like(x, math.inf)
        rr = _per_row(self.radius, x)
        up = torch.where(d > 0, (rr - x).clamp_min(0) / d, inf)
        down = torch.where(d < 0, (x + rr).clamp_min(0) / (-d), inf)
        box = torch.minimum(up, down).amin(dim=-1)
        return torch.minimum(box, _l1_max_step(x, d, r * k))

    def project(self, x: Tensor) -> Tensor:
        r"""Euclidean projection: :math:`\mathrm{sign}(x)\min(r, (|x| - \theta)_+)`.

        :math:`\theta \ge 0` is the smallest value with the L1 norm of the result at most
        :math:`rK` (the KKT conditions of the intersection of a box and an L1 ball), found by
        bisection to rounding (the L1 norm is monotone in :math:`\theta`).
        """
        rr = _per_row(self.radius, x)
        k = min(self.k, x.shape[-1])
        a = x.abs()

        def clipped(theta):
            return torch.minimum((a - theta).clamp_min(0), rr * torch.ones_like(a))

        budget = (rr * k) * torch.ones_like(a[..., :1])
        lo = torch.zeros_like(a[..., :1])
        hi = a.amax(dim=-1, keepdim=True)
        for _ in range(100):
            mid = 0.5 * (lo + hi)
            over = clipped(mid).sum(-1, keepdim=True) > budget
            lo = torch.where(over, mid, lo)
            hi = torch.where(over, hi, mid)
        inside = clipped(torch.zeros_like(lo)).sum(-1, keepdim=True) <= budget
        theta = torch.where(inside, torch.zeros_like(hi), hi)
        return torch.sign(x) * clipped(theta)


class LpBall(LMO):
    r"""The Lp ball :math:`\{x : \|x\|_p \le r\}` for :math:`1 < p < \infty`.

    Strictly convex: every boundary point is a vertex. With :math:`q = p / (p - 1)` the dual
    exponent, Hölder's inequality :math:`\langle g, v\rangle \ge -\|g\|_q \|v\|_p` is tight at

    .. math:: v_i = -r\,\mathrm{sign}(g_i)\,\frac{|g_i|^{q-1}}{\|g\|_q^{q-1}},

    so the LMO is this closed form (:math:`O(n)`, computed on :math:`g / \max_i |g_i|` so that
    it neither overflows nor underflows); a zero gradient gives :math:`r e_0`. Networks trained
    with Lp-ball constraints: Pokutta, Spiegel & Zimmer (2020), arXiv:2010.07243;
    FrankWolfe.jl's ``LpNormLMO``. Use :class:`~torchfw.L1Ball`, :class:`~torchfw.L2Ball` and
    :class:`~torchfw.LinfBall` for ``p`` = 1, 2, inf.

    Parameters
    ----------
    p : float
        Exponent, ``1 < p < inf``.
    radius : float or Tensor, default 1.0
    """

    def __init__(self, p: float, radius: float | Tensor = 1.0):
        p = check_positive("p", p)
        if not 1.0 < p < math.inf:
            raise ValueError(f"p must satisfy 1 < p < inf (use L1Ball / LinfBall at the ends), "
                             f"got {p!r}")
        self.p = float(p)
        self.q = self.p / (self.p - 1.0)
        self.radius = _radius_param("radius", radius)

    def _norm(self, x: Tensor) -> Tensor:
        unit, scale = _scaled(x)
        return scale.squeeze(-1) * torch.linalg.vector_norm(unit, ord=self.p, dim=-1)

    def lmo(self, grad: Tensor) -> Tensor:
        if _is_meta(grad):
            return torch.empty_like(grad)
        r = _per_row(self.radius, grad)
        unit, scale = _scaled(grad)
        mag = unit.abs() ** (self.q - 1.0)
        # ||v||_p = 1 for v = mag / ||mag||_p (since (q - 1) p = q).
        mag = mag / torch.linalg.vector_norm(mag, ord=self.p, dim=-1, keepdim=True).clamp_min(
            torch.finfo(grad.dtype).tiny)
        fallback = torch.zeros_like(grad)
        fallback[..., 0] = 1.0
        return r * torch.where(scale > 0, -torch.sign(unit) * mag, fallback)

    def contains(self, x: Tensor, atol: float = 1e-9) -> Tensor:
        r = _per_row_scalar(self.radius, x[..., 0])
        return self._norm(x) <= r + atol

    def diameter(self, n: int) -> float:
        # max ||x||_2 over the unit Lp ball is n^(1/2 - 1/p) for p >= 2 (at +-1/n^(1/p) on every
        # entry) and 1 for p <= 2 (at e_i); the diameter is twice that.
        return 2.0 * _max_radius(self.radius) * n ** max(0.0, 0.5 - 1.0 / self.p)

    def max_step(self, x: Tensor, d: Tensor) -> Tensor:
        r = _per_row_scalar(self.radius, x[..., 0])
        dn = self._norm(d)
        # ||gamma d||_p <= ||x||_p + r <= 2 r bounds the feasible steps.
        upper = torch.where(dn > 0, 2.0 * r / dn.clamp_min(torch.finfo(x.dtype).tiny),
                            torch.full_like(dn, math.inf))
        finite = torch.where(torch.isfinite(upper), upper, torch.zeros_like(upper))
        step = _bisect_max_step(x, d, lambda y: self._norm(y) <= r * (1 + 1e-12), finite)
        return torch.where(torch.isfinite(upper), step, upper)

    def project(self, x: Tensor) -> Tensor:
        r"""Euclidean projection, by the KKT conditions and two nested bisections.

        Outside the ball the projection :math:`y` satisfies
        :math:`|y_i| + \lambda p |y_i|^{p-1} = |x_i|` with the multiplier :math:`\lambda > 0`
        chosen so that :math:`\|y\|_p = r`; both equations are monotone, so each is solved by
        bisection (``60`` halvings each: accurate to rounding in float64).
        """
        r = _per_row(self.radius, x)
        a = x.abs()
        p = self.p

        def y_of(lam):
            lo = torch.zeros_like(a)
            hi = a.clone()
            for _ in range(60):
                mid = 0.5 * (lo + hi)
                big = mid + lam * p * mid ** (p - 1) > a
                hi = torch.where(big, mid, hi)
                lo = torch.where(big, lo, mid)
            return 0.5 * (lo + hi)

        rr = r * torch.ones_like(a[..., :1])
        lam_lo = torch.zeros_like(a[..., :1])
        # A multiplier so large that ||y||_p <= r: y_i <= (|x_i| / (lam p))^(1/(p-1)).
        lam_hi = torch.ones_like(lam_lo)
        for _ in range(200):
            too_big = torch.linalg.vector_norm(y_of(lam_hi), ord=p, dim=-1, keepdim=True) > rr
            if not bool(too_big.any()):
                break
            lam_hi = torch.where(too_big, 4.0 * lam_hi, lam_hi)
        for _ in range(60):
            mid = 0.5 * (lam_lo + lam_hi)
            over = torch.linalg.vector_norm(y_of(mid), ord=p, dim=-1, keepdim=True) > rr
            lam_lo = torch.where(over, mid, lam_lo)
            lam_hi = torch.where(over, lam_hi, mid)
        proj = torch.sign(x) * y_of(lam_hi)
        inside = self.contains(x, atol=0.0).unsqueeze(-1)
        return torch.where(inside, x, proj)


class GroupL1Ball(LMO):
    r"""The group-L1 (L1/L2 mixed-norm) ball :math:`\{x : \sum_G \|x_G\|_2 \le r\}`.

    The coordinates are split into disjoint groups :math:`G`; the norm is the group Lasso's.
    Its extreme points are :math:`r u` with :math:`u` a unit vector supported on one group, and
    the LMO picks the group of largest :math:`\|g_G\|_2` (the dual norm is
    :math:`\max_G \|g_G\|_2`) and returns :math:`-r\, g_G / \|g_G\|_2` there, zero elsewhere
    (:math:`O(n)`; lowest group on ties; :math:`r e_0` for a zero gradient). Reference: Yuan &
    Lin (2006), "Model selection and estimation in regression with grouped variables", JRSS B.

    Parameters
    ----------
    groups : int or sequence of int
        Either the size of equal consecutive groups (``n`` must be a multiple), or one group id
        per coordinate (ids ``0 .. G-1``).
    radius : float or Tensor, default 1.0
    """

    def __init__(self, groups, radius: float | Tensor = 1.0):
        self.group_size: int | None
        if isinstance(groups, int) and not isinstance(groups, bool):
            if groups < 1:
                raise ValueError(f"groups (a group size) must be >= 1, got {groups}")
            self.group_size = groups
            self._ids = None
        else:
            ids = torch.as_tensor(groups)
            if ids.dim() != 1 or ids.numel() == 0 or ids.dtype.is_floating_point or \
                    bool((ids < 0).any()):
                raise ValueError("groups must be a group size or a 1-d sequence of "
                                 "non-negative integer group ids, one per coordinate")
            if set(ids.unique().tolist()) != set(range(int(ids.max()) + 1)):
                raise ValueError("group ids must be 0 .. G-1 with every id used")
            self.group_size = None
            self._ids = ids.long()
        self.radius = _radius_param("radius", radius)

    def group_ids(self, n: int, device=None) -> Tensor:
        """Group id of each of the ``n`` coordinates."""
        if self._ids is not None:
            if self._ids.numel() != n:
                raise ValueError(f"GroupL1Ball has group ids for {self._ids.numel()} "
                                 f"coordinates, got inputs of size {n}")
            return self._ids.to(device)
        size = self.group_size
        assert size is not None  # equal groups: the constructor sets one or the other
        if n % size:
            raise ValueError(f"input size {n} is not a multiple of the group size {size}")
        return torch.arange(n, device=device) // size

    def group_norms(self, x: Tensor) -> Tensor:
        """:math:`\\|x_G\\|_2` for every group, shape ``(..., G)``."""
        ids = self.group_ids(x.shape[-1], x.device)
        n_groups = int(ids.max()) + 1 if not _is_meta(x) else 1
        unit, scale = _scaled(x)
        sq = torch.zeros(*x.shape[:-1], n_groups, dtype=x.dtype, device=x.device)
        sq.scatter_add_(-1, ids.expand_as(x), unit * unit)
        return scale * sq.sqrt()

    def lmo(self, grad: Tensor) -> Tensor:
        if _is_meta(grad):
            return torch.empty_like(grad)
        r = _per_row(self.radius, grad)
        ids = self.group_ids(grad.shape[-1], grad.device)
        unit, scale = _scaled(grad)
        norms = self.group_norms(unit)
        best = torch.argmax(norms, dim=-1, keepdim=True)
        on = ids.expand_as(grad) == best
        chosen = torch.gather(norms, -1, best).clamp_min(torch.finfo(grad.dtype).tiny)
        v = torch.where(on, -unit / chosen, torch.zeros_like(grad))
        fallback = torch.zeros_like(grad)
        fallback[..., 0] = 1.0
        return r * torch.where(scale > 0, v, fallback)

    def norm(self, x: Tensor) -> Tensor:
        """The group-L1 norm :math:`\\sum_G \\|x_G\\|_2` (batch shape)."""
        return self.group_norms(x).sum(dim=-1)

    def contains(self, x: Tensor, atol: float = 1e-9) -> Tensor:
        r = _per_row_scalar(self.radius, x[..., 0])
        return self.norm(x) <= r + atol

    def diameter(self, n: int) -> float:
        # ||x||_2 <= sum_G ||x_G||_2 <= r, reached at +-r e_i.
        return 2.0 * _max_radius(self.radius)

    def max_step(self, x: Tensor, d: Tensor) -> Tensor:
        r = _per_row_scalar(self.radius, x[..., 0])
        dn = self.norm(d)
        upper = torch.where(dn > 0, 2.0 * r / dn.clamp_min(torch.finfo(x.dtype).tiny),
                            torch.full_like(dn, math.inf))
        finite = torch.where(torch.isfinite(upper), upper, torch.zeros_like(upper))
        step = _bisect_max_step(x, d, lambda y: self.norm(y) <= r * (1 + 1e-12), finite)
        return torch.where(torch.isfinite(upper), step, upper)

    def project(self, x: Tensor) -> Tensor:
        r"""Euclidean projection: project the vector of group norms onto the L1 ball of radius
        ``r`` and rescale each group to its new norm (the norm is invariant within a group)."""
        from .oracles import L1Ball

        ids = self.group_ids(x.shape[-1], x.device)
        norms = self.group_norms(x)
        target = L1Ball(self.radius).project(norms)
        factor = torch.where(norms > 0, target / norms.clamp_min(torch.finfo(x.dtype).tiny),
                             torch.zeros_like(norms))
        return x * torch.gather(factor, -1, ids.expand_as(x))


class Hypercube(Box):
    r"""The 0/1 hypercube :math:`[0, 1]^n`, the convex hull of the :math:`2^n` binary vectors.

    The LMO sets :math:`v_i = 0` where :math:`g_i > 0` and :math:`v_i = 1` otherwise
    (:math:`O(n)`); it is the box :class:`~torchfw.Box` ``(0, 1)`` and FrankWolfe.jl's
    ``ZeroOneHypercube``. Diameter :math:`\sqrt n`.
    """

    def __init__(self):
        super().__init__(0.0, 1.0)

    def __repr__(self) -> str:
        return "Hypercube()"


class Birkhoff(LMO):
    r"""The Birkhoff polytope of doubly stochastic ``m x m`` matrices, flattened row-major.

    :math:`\{X \ge 0 : X\mathbf 1 = \mathbf 1,\ X^\top\mathbf 1 = \mathbf 1\}` is the convex hull
    of the :math:`m!` permutation matrices (Birkhoff-von Neumann). The LMO is a linear assignment
    problem, :math:`\min_\sigma \sum_i G_{i\sigma(i)}`, solved exactly per matrix by
    :func:`scipy.optimize.linear_sum_assignment` (the shortest augmenting path algorithm of
    Crouse 2016, :math:`O(m^3)` worst case) on the CPU: a CUDA gradient is copied to the host and
    the permutation copied back, one synchronization per call. FrankWolfe.jl's
    ``BirkhoffPolytopeLMO``.

    Parameters
    ----------
    m : int
        Matrix size; inputs have ``m * m`` entries on their last dimension.
    """

    def __init__(self, m: int):
        if isinstance(m, bool) or not isinstance(m, int) or m < 1:
            raise ValueError(f"m must be an integer >= 1, got {m!r}")
        self.m = m

    def _check(self, t: Tensor) -> None:
        if t.shape[-1] != self.m * self.m:
            raise ValueError(f"Birkhoff({self.m}) needs inputs with {self.m * self.m} entries on "
                             f"the last dimension (a flattened {self.m} x {self.m} matrix), got "
                             f"{t.shape[-1]}")

    def lmo(self, grad: Tensor) -> Tensor:
        from scipy.optimize import linear_sum_assignment

        self._check(grad)
        if _is_meta(grad):
            return torch.empty_like(grad)
        m = self.m
        costs = grad.detach().reshape(-1, m, m).to("cpu", torch.float64).numpy()
        cols = np.empty((costs.shape[0], m), dtype=np.int64)
        for b in range(costs.shape[0]):
            _, cols[b] = linear_sum_assignment(costs[b])
        flat = torch.from_numpy(cols + np.arange(m) * m).to(grad.device)
        v = torch.zeros(costs.shape[0], m * m, dtype=grad.dtype, device=grad.device)
        v.scatter_(-1, flat, 1.0)
        return v.reshape(grad.shape)

    def contains(self, x: Tensor, atol: float = 1e-9) -> Tensor:
        self._check(x)
        mat = x.reshape(*x.shape[:-1], self.m, self.m)
        nonneg = (x >= -atol).all(dim=-1)
        tol = atol * max(1.0, self.m ** 0.5)
        rows = ((mat.sum(-1) - 1).abs() <= tol).all(dim=-1)
        cols = ((mat.sum(-2) - 1).abs() <= tol).all(dim=-1)
        return nonneg & rows & cols

    def diameter(self, n: int) -> float:
        # Two permutation matrices with disjoint supports: ||P - P'||_F = sqrt(2 m).
        return math.sqrt(2.0 * self.m) if self.m > 1 else 0.0

    def initial_point(self, n: int, *, dtype=None, device=None) -> Tensor:
        dtype = dtype or torch.get_default_dtype()
        return torch.eye(self.m, dtype=dtype, device=device).reshape(-1)

    def max_step(self, x: Tensor, d: Tensor) -> Tensor:
        # Directions used by solvers keep the row and column sums (differences of points of
        # the polytope): only X >= 0 binds.
        ratio = torch.where(d < 0, x.clamp_min(0) / (-d), torch.full_like(x, math.inf))
        return ratio.amin(dim=-1)

    def project(self, x: Tensor, iterations: int = 2000, tol: float = 1e-12) -> Tensor:
        r"""Euclidean projection by Dykstra's alternating projections.

        Alternates between the affine set of matrices with unit row and column sums (a closed
        form) and the nonnegative orthant, with Dykstra's correction on the orthant (the affine
        projection is linear and needs none); Bauschke & Borwein (1994). Iterates until the
        change is below ``tol`` (relative) or ``iterations`` rounds.
        """
        self._check(x)
        m = self.m
        y = x.reshape(-1, m, m).clone()
        corr = torch.zeros_like(y)
        for _ in range(iterations):
            z = self._affine(y)
            y_new = (z + corr).clamp_min(0)
            corr = z + corr - y_new
            done = (y_new - y).abs().max() <= tol * max(1.0, float(y.abs().max()))
            y = y_new
            if done:
                break
        return y.reshape(x.shape)

    @staticmethod
    def _affine(y: Tensor) -> Tensor:
        """Projection onto ``{X : X 1 = 1, X' 1 = 1}`` (rank-one corrections of the sums)."""
        m = y.shape[-1]
        r = y.sum(-1, keepdim=True) - 1  # row residuals
        c = y.sum(-2, keepdim=True) - 1  # column residuals
        total = r.sum((-2, -1), keepdim=True)
        return y - r / m - c / m + total / (m * m)
