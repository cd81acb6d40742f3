r"""Matrix sets with spectral oracles: the nuclear-norm ball and the spectraplex.

Both sets take ``m x n`` matrices flattened row-major on the last dimension (the contract of
:mod:`torchfw.sets.oracles`; a tensor of shape ``(B, m * n)`` is a batch of ``B`` matrices). Their LMOs
need one extreme singular or eigen pair, never a full decomposition: that is the whole point of
Frank-Wolfe on matrices (Jaggi, "Revisiting Frank-Wolfe", ICML 2013, Section 4; FrankWolfe.jl's
``src/spectral_oracles.jl``), where a projection would need a full SVD per step.

**The pair** comes from a Lanczos iteration (:func:`lanczos_extreme`) with full
reorthogonalization, batched over the leading dimension, started from the vector the previous
call on the same shape returned (a *warm start*: successive Frank-Wolfe gradients are close, so a
few iterations suffice) or, on the first call, from a fixed pseudo-random vector.

**Accuracy.** The iteration stops when the Ritz pair :math:`(\theta, z)` of every matrix in the
batch has a residual :math:`\|A z - \theta z\|_2 \le` ``tol`` :math:`\cdot \|A\|` (estimated by
the largest Ritz value in modulus), or after ``max_iter`` steps. For a residual :math:`\rho`, the
returned value :math:`\theta` is within :math:`\rho` of an eigenvalue of :math:`A` (Parlett, *The
symmetric eigenvalue problem*, Thm. 4.5.1); Lanczos from a random start finds the extreme one
except with probability zero. ``tests/test_sets.py`` checks the LMO value against the full SVD /
eigendecomposition: relative error at most ``10 * tol`` in float64 and ``1e-4`` in float32.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from ..utils.validation import check_int_at_least, check_positive
from .oracles import LMO, _max_radius, _per_row, _per_row_scalar, _project_simplex, _radius_param

__all__ = ["NuclearNormBall", "Spectraplex", "lanczos_extreme"]


def lanczos_extreme(matvec, v0: Tensor, *, largest: bool = True, max_iter: int = 64,
                    tol: float = 1e-7) -> tuple[Tensor, Tensor, int]:
    r"""Extreme eigenpair of a batch of symmetric operators by Lanczos.

    Parameters
    ----------
    matvec : callable
        ``matvec(z)`` for ``z`` of shape ``(B, d)``: the operators applied row by row.
    v0 : Tensor of shape (B, d)
        Start vectors (nonzero).
    largest : bool, default True
        The largest eigenvalue (else the smallest).
    max_iter : int, default 64
        Krylov dimension at most (the iteration restarts nothing: it stops there).
    tol : float, default 1e-7
        Stop when every residual :math:`\|Az - \theta z\| \le` ``tol`` :math:`\cdot \max|\theta_i|`.

    Returns
    -------
    theta : Tensor of shape (B,)
        The Ritz values.
    z : Tensor of shape (B, d)
        Unit Ritz vectors.
    steps : int
        Lanczos steps taken.

    Notes
    -----
    Each step costs one ``matvec`` and a reorthogonalization against the basis,
    :math:`O(B d k)`; the small ``k x k`` tridiagonal problem is solved with ``eigh``. Full
    reorthogonalization keeps the basis orthogonal in floating point (no ghost eigenvalues).
    """
    batch, d = v0.shape
    k_max = min(max_iter, d)
    dtype = v0.dtype
    basis = torch.empty(batch, k_max, d, dtype=dtype, device=v0.device)
    alphas = torch.zeros(batch, k_max, dtype=dtype, device=v0.device)
    betas = torch.zeros(batch, k_max, dtype=dtype, device=v0.device)
    q = v0 / torch.linalg.vector_norm(v0, dim=-1, keepdim=True).clamp_min(
        torch.finfo(dtype).tiny)
    tiny = torch.finfo(dtype).tiny
    theta = z = None
    steps = 0
    for k in range(k_max):
        basis[:, k] = q
        w = matvec(q)
        alphas[:, k] = (w * q).sum(-1)
        # Full reorthogonalization, twice ("twice is enough", Parlett): the basis stays
        # orthogonal to working precision.
        basis_k = basis[:, : k + 1]
        for _ in range(2):
            w = w - torch.einsum("bk,bkd->bd", torch.einsum("bkd,bd->bk", basis_k, w), basis_k)
        beta = torch.linalg.vector_norm(w, dim=-1)
        betas[:, k] = beta
        steps = k + 1
        # Check the Ritz pair every few steps (an eigh of a k x k matrix and a host read).
        last = k + 1 == k_max
        if k >= 1 and (k % 4 == 3 or last) or last:
            tri = torch.diag_embed(alphas[:, : k + 1])
            off = betas[:, :k]
            tri = tri + torch.diag_embed(off, 1) + torch.diag_embed(off, -1)
            evals, evecs = torch.linalg.eigh(tri)
            idx = -1 if largest else 0
            theta = evals[:, idx]
            s = evecs[:, :, idx]
            # Residual of the Ritz pair: |beta_k * last component of s| (exact arithmetic).
            resid = (beta * s[:, -1]).abs()
            scale = evals.abs().amax(dim=-1).clamp_min(tiny)
            z = torch.einsum("bk,bkd->bd", s, basis_k)
            if last or bool((resid <= tol * scale).all()):
                break
        # An invariant subspace was found (beta ~ 0): restart the vector at random, orthogonal.
        breakdown = beta <= tiny ** 0.5 * (alphas[:, k].abs() + 1)
        if bool(breakdown.any()):
            fresh = torch.randn(batch, d, dtype=dtype, device=v0.device,
                                generator=_generator(v0.device))
            fresh = fresh - torch.einsum("bk,bkd->bd",
                                         torch.einsum("bkd,bd->bk", basis_k, fresh), basis_k)
            w = torch.where(breakdown.unsqueeze(-1), fresh, w)
            betas[:, k] = torch.where(breakdown, torch.zeros_like(beta), beta)
            beta = torch.linalg.vector_norm(w, dim=-1)
        q = w / beta.clamp_min(tiny).unsqueeze(-1)
    if theta is None or z is None:  # no step ran
        raise ValueError(f"lanczos_extreme needs max_iter >= 1 and vectors of length >= 1, got "
                         f"max_iter={max_iter} and d={d}")
    z = z / torch.linalg.vector_norm(z, dim=-1, keepdim=True).clamp_min(tiny)
    return theta, z, steps


def _generator(device) -> torch.Generator:
    gen = torch.Generator(device=device)
    gen.manual_seed(20)
    return gen



def _unit_scaled(grad: Tensor) -> Tensor:
    """``grad`` divided by its largest entry per matrix (the LMO is scale-invariant).

    Lanczos on :math:`G^\top G` squares the entries: unit scale keeps them from overflowing or
    underflowing in float32.
    """
    g = grad.detach()
    scale = g.abs().amax(dim=-1, keepdim=True)
    return g / torch.where(scale > 0, scale, torch.ones_like(scale))

class _SpectralLMO(LMO):
    """Shared parts: the shape, the warm start and the Lanczos options."""

    def __init__(self, shape, radius, max_iter: int, tol: float, warm_start: bool):
        if (not isinstance(shape, (tuple, list)) or len(shape) != 2 or
                not all(isinstance(s, int) and not isinstance(s, bool) and s >= 1
                        for s in shape)):
            raise ValueError(f"shape must be a pair of positive integers (m, n), got {shape!r}")
        self.shape = (int(shape[0]), int(shape[1]))
        self.radius = _radius_param("radius", radius)
        self.max_iter = check_int_at_least("max_iter", max_iter, 2)
        self.tol = check_positive("tol", tol)
        self.warm_start = bool(warm_start)
        # Last Ritz vector per (batch shape, dtype, device): the next call starts from it.
        self._warm: dict = {}
        #: Lanczos steps taken by the last call (for tests and benchmarks).
        self.last_steps = 0

    def _matrices(self, t: Tensor) -> Tensor:
        m, n = self.shape
        if t.shape[-1] != m * n:
            raise ValueError(f"{type(self).__name__} of shape {self.shape} needs inputs with "
                             f"{m * n} entries on the last dimension (a flattened {m} x {n} "
                             f"matrix), got {t.shape[-1]}")
        return t.reshape(-1, m, n)

    def _start(self, key, batch: int, d: int, like: Tensor) -> Tensor:
        cached = self._warm.get(key) if self.warm_start else None
        if cached is not None:
            return cached
        return torch.randn(batch, d, dtype=like.dtype, device=like.device,
                           generator=_generator(like.device))

    def _tol(self, like: Tensor) -> float:
        # A residual below ~50 ulps of the operator's norm is rounding: never ask for less.
        return max(self.tol, 50.0 * torch.finfo(like.dtype).eps)

    def _remember(self, key, z: Tensor) -> None:
        if self.warm_start:
            self._warm[key] = z.detach().clone()

    def __repr__(self) -> str:
        return (f"{type(self).__name__}(shape={self.shape}, radius={self.radius!r}, "
                f"max_iter={self.max_iter}, tol={self.tol})")


class NuclearNormBall(_SpectralLMO):
    r"""The nuclear-norm ball :math:`\{X \in \mathbb R^{m\times n} : \|X\|_* \le r\}`.

    :math:`\|X\|_*` is the sum of the singular values. The extreme points are the rank-one
    matrices :math:`r\,u v^\top` with unit :math:`u, v`; for a gradient :math:`G` with top
    singular pair :math:`(\sigma_1, u_1, v_1)` the LMO returns :math:`-r\, u_1 v_1^\top`, with
    value :math:`-r\sigma_1` (the nuclear norm's dual is the spectral norm). The pair comes from
    Lanczos on :math:`G^\top G` (or :math:`G G^\top`, the smaller one), warm-started from the
    previous call: each step costs two products with :math:`G`, :math:`O(mn)`, against
    :math:`O(mn\min(m, n))` for the full SVD that a projection needs. The classic low-rank use of
    Frank-Wolfe: Jaggi & Sulovský (2010), "A simple algorithm for nuclear norm regularized
    problems", ICML; Jaggi (2013). See the module docstring for the accuracy.

    Parameters
    ----------
    shape : (int, int)
        ``(m, n)``; inputs have ``m * n`` entries (row-major) on their last dimension.
    radius : float or Tensor, default 1.0
    max_iter : int, default 64
        Lanczos steps at most per call.
    tol : float, default 1e-7
        Relative residual at which Lanczos stops.
    warm_start : bool, default True
        Start each call from the previous call's vector (same batch shape, dtype and device).
    """

    def __init__(self, shape, radius: float | Tensor = 1.0, *, max_iter: int = 64,
                 tol: float = 1e-7, warm_start: bool = True):
        super().__init__(shape, radius, max_iter, tol, warm_start)

    def top_singular(self, grad: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """``(sigma, u, v)``: the top singular triple of each matrix, shapes ``(B,)``,
        ``(B, m)``, ``(B, n)``."""
        g = self._matrices(grad)
        m, n = self.shape
        gt = g.transpose(-1, -2)
        # Lanczos on the smaller Gram matrix: fewer entries to orthogonalize.
        if n <= m:
            def matvec(z):
                return torch.bmm(gt, torch.bmm(g, z.unsqueeze(-1))).squeeze(-1)
            d = n
        else:
            def matvec(z):
                return torch.bmm(g, torch.bmm(gt, z.unsqueeze(-1))).squeeze(-1)
            d = m
        key = (g.shape[0], grad.dtype, grad.device)
        z0 = self._start(key, g.shape[0], d, grad)
        _, z, self.last_steps = lanczos_extreme(matvec, z0, largest=True,
                                                max_iter=self.max_iter, tol=self._tol(grad))
        self._remember(key, z)
        tiny = torch.finfo(grad.dtype).tiny
        if n <= m:
            v = z
            gv = torch.bmm(g, v.unsqueeze(-1)).squeeze(-1)
            sigma = torch.linalg.vector_norm(gv, dim=-1)
            u = gv / sigma.clamp_min(tiny).unsqueeze(-1)
        else:
            u = z
            gu = torch.bmm(gt, u.unsqueeze(-1)).squeeze(-1)
            sigma = torch.linalg.vector_norm(gu, dim=-1)
            v = gu / sigma.clamp_min(tiny).unsqueeze(-1)
        # A zero gradient: any vertex is optimal; keep the unit vectors (finite, deterministic).
        zero = sigma <= tiny
        u = torch.where(zero.unsqueeze(-1), torch.nn.functional.one_hot(
            torch.zeros_like(sigma, dtype=torch.long), m).to(grad.dtype), u)
        v = torch.where(zero.unsqueeze(-1), torch.nn.functional.one_hot(
            torch.zeros_like(sigma, dtype=torch.long), n).to(grad.dtype), v)
        return sigma, u, v

    def lmo(self, grad: Tensor) -> Tensor:
        if grad.device.type == "meta":
            self._matrices(grad)
            return torch.empty_like(grad)
        _, u, v = self.top_singular(_unit_scaled(grad))
        vertex = -(u.unsqueeze(-1) * v.unsqueeze(-2)).reshape(*grad.shape[:-1], -1)
        return _per_row(self.radius, grad) * vertex

    def norm(self, x: Tensor) -> Tensor:
        """Nuclear norm of each matrix (a full SVD: for tests and ``contains``)."""
        return torch.linalg.svdvals(self._matrices(x)).sum(-1).reshape(x.shape[:-1])

    def contains(self, x: Tensor, atol: float = 1e-9) -> Tensor:
        r = _per_row_scalar(self.radius, x[..., 0])
        return self.norm(x) <= r + atol * max(1.0, math.sqrt(min(self.shape)))

    def diameter(self, n: int) -> float:
        # ||X||_F <= ||X||_* <= r, reached at +-r u v'.
        return 2.0 * _max_radius(self.radius)

    def initial_point(self, n: int, *, dtype=None, device=None) -> Tensor:
        dtype = dtype or torch.get_default_dtype()
        x = torch.zeros(self.shape, dtype=dtype, device=device)
        x[0, 0] = _max_radius(self.radius)
        return x.reshape(-1)

    def max_step(self, x: Tensor, d: Tensor) -> Tensor:
        r = _per_row_scalar(self.radius, x[..., 0])
        dn = self.norm(d)
        upper = torch.where(dn > 0, 2.0 * r / dn.clamp_min(torch.finfo(x.dtype).tiny),
                            torch.full_like(dn, math.inf))
        lo = torch.zeros_like(dn)
        hi = torch.where(torch.isfinite(upper), upper, torch.zeros_like(upper))
        for _ in range(50):
            mid = 0.5 * (lo + hi)
            ok = self.norm(x + mid.unsqueeze(-1) * d) <= r * (1 + 1e-12)
            lo = torch.where(ok, mid, lo)
            hi = torch.where(ok, hi, mid)
        return torch.where(torch.isfinite(upper), lo, upper)

    def project(self, x: Tensor) -> Tensor:
        """Euclidean projection: a full SVD, and the singular values projected onto the L1
        ball (Cai, Candès & Shen 2010) -- what projected gradient pays per step."""
        from .oracles import L1Ball

        mats = self._matrices(x)
        u, s, vh = torch.linalg.svd(mats, full_matrices=False)
        r = self.radius
        if isinstance(r, Tensor):
            r = r.to(x.dtype).reshape(-1)
        s_new = L1Ball(r).project(s)
        out = (u * s_new.unsqueeze(-2)) @ vh
        return out.reshape(x.shape)


class Spectraplex(_SpectralLMO):
    r"""The spectraplex :math:`\{X \in \mathbb S^n : X \succeq 0,\ \operatorname{tr} X = r\}`.

    Symmetric positive semidefinite ``n x n`` matrices of trace ``r`` (density matrices for
    ``r = 1``); the extreme points are :math:`r\,z z^\top` with unit :math:`z`. For a gradient
    :math:`G` the LMO returns :math:`r\,z z^\top` with :math:`z` the eigenvector of the smallest
    eigenvalue of :math:`(G + G^\top)/2`, value :math:`r\lambda_{\min}`: one Lanczos run,
    :math:`O(n^2)` per step, warm-started. Reference: Hazan (2008), "Sparse approximate solutions
    to semidefinite programs", LATIN; FrankWolfe.jl's ``SpectraplexLMO``. See the module
    docstring for the accuracy.

    Parameters
    ----------
    n : int
        Matrix size; inputs have ``n * n`` entries on their last dimension.
    radius : float or Tensor, default 1.0
        The trace ``r > 0``.
    max_iter, tol, warm_start
        As for :class:`NuclearNormBall`.
    """

    def __init__(self, n: int, radius: float | Tensor = 1.0, *, max_iter: int = 64,
                 tol: float = 1e-7, warm_start: bool = True):
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise ValueError(f"n must be an integer >= 1, got {n!r}")
        super().__init__((n, n), radius, max_iter, tol, warm_start)

    def smallest_eigen(self, grad: Tensor) -> tuple[Tensor, Tensor]:
        """``(lambda_min, z)`` of the symmetric part of each matrix."""
        g = self._matrices(grad)
        sym = 0.5 * (g + g.transpose(-1, -2))

        def matvec(z):
            return torch.bmm(sym, z.unsqueeze(-1)).squeeze(-1)

        key = (g.shape[0], grad.dtype, grad.device)
        z0 = self._start(key, g.shape[0], self.shape[0], grad)
        theta, z, self.last_steps = lanczos_extreme(matvec, z0, largest=False,
                                                    max_iter=self.max_iter, tol=self._tol(grad))
        self._remember(key, z)
        return theta, z

    def lmo(self, grad: Tensor) -> Tensor:
        if grad.device.type == "meta":
            self._matrices(grad)
            return torch.empty_like(grad)
        _, z = self.smallest_eigen(_unit_scaled(grad))
        vertex = (z.unsqueeze(-1) * z.unsqueeze(-2)).reshape(*grad.shape[:-1], -1)
        return _per_row(self.radius, grad) * vertex

    def contains(self, x: Tensor, atol: float = 1e-9) -> Tensor:
        mats = self._matrices(x)
        r = _per_row_scalar(self.radius, x[..., 0])
        tol = atol * max(1.0, math.sqrt(self.shape[0]))
        sym = ((mats - mats.transpose(-1, -2)).abs().amax(dim=(-1, -2)) <= tol)
        evals = torch.linalg.eigvalsh(0.5 * (mats + mats.transpose(-1, -2)))
        psd = evals[..., 0] >= -tol
        trace = mats.diagonal(dim1=-2, dim2=-1).sum(-1)
        return (sym & psd).reshape(x.shape[:-1]) & \
            ((trace.reshape(x.shape[:-1]) - r).abs() <= tol)

    def diameter(self, n: int) -> float:
        # ||r zz' - r yy'||_F = r sqrt(2) for orthogonal z, y.
        return math.sqrt(2.0) * _max_radius(self.radius) if self.shape[0] > 1 else 0.0

    def initial_point(self, n: int, *, dtype=None, device=None) -> Tensor:
        dtype = dtype or torch.get_default_dtype()
        x = torch.zeros(self.shape, dtype=dtype, device=device)
        x[0, 0] = _max_radius(self.radius)
        return x.reshape(-1)

    def max_step(self, x: Tensor, d: Tensor) -> Tensor:
        # Directions of solvers keep the trace and symmetry: only X >= 0 binds. Bisection on
        # the smallest eigenvalue (full eigendecompositions: not on the LMO's path).
        mats, dm = self._matrices(x), self._matrices(d)
        dn = torch.linalg.matrix_norm(dm, ord=2)
        r = _max_radius(self.radius)
        upper = torch.where(dn > 0, 2.0 * r / dn.clamp_min(torch.finfo(x.dtype).tiny),
                            torch.full_like(dn, math.inf))
        lo = torch.zeros_like(dn)
        hi = torch.where(torch.isfinite(upper), upper, torch.zeros_like(upper))
        for _ in range(50):
            mid = 0.5 * (lo + hi)
            y = mats + mid[:, None, None] * dm
            ok = torch.linalg.eigvalsh(0.5 * (y + y.transpose(-1, -2)))[:, 0] >= -1e-12 * r
            lo = torch.where(ok, mid, lo)
            hi = torch.where(ok, hi, mid)
        out = torch.where(torch.isfinite(upper), lo, upper)
        return out.reshape(x.shape[:-1])

    def project(self, x: Tensor) -> Tensor:
        """Euclidean projection: symmetrize, eigendecompose, project the eigenvalues onto the
        simplex of mass ``r`` (a full eigendecomposition)."""
        mats = self._matrices(x)
        sym = 0.5 * (mats + mats.transpose(-1, -2))
        evals, evecs = torch.linalg.eigh(sym)
        r = self.radius
        if isinstance(r, Tensor):
            r = r.to(x.dtype).reshape(-1, 1)
        lam = _project_simplex(evals, r)
        out = (evecs * lam.unsqueeze(-2)) @ evecs.transpose(-1, -2)
        return out.reshape(x.shape)
